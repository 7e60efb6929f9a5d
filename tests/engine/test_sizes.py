"""Absurd sizes are refused before anything of their size is allocated or compiled: a lower
bound of the run's memory from its shapes, in one line naming the settings and the estimate;
an allocation that fails anyway is one line too."""

import pytest

from tests import binaries

SMALL = ("--synthetic_queries=20", "--synthetic_features=6", "--synthetic_docs_per_query=10",
         "--rounds=2", "--nocheckpoint")  # fmt: skip


@pytest.mark.parametrize(
    "module, args, flag",
    [
        ("fpdgd", ("--n_clients=1000000000",), "n_clients"),
        ("fpdgd", ("--n_runs=1000000000",), "n_runs"),
        ("fpdgd", ("--local_updates=1000000000",), "local_updates"),
        ("poisoning", ("--n_clients=1000000000", "--malicious_counts=1"), "n_clients"),
        ("foltr_es", ("--n_runs=1000000000",), "n_runs"),
    ],
)
def test_a_run_that_cannot_fit_is_refused_before_it_allocates(tmp_path, module, args, flag):
    out = tmp_path / "out"
    done = binaries.call(module, *SMALL, *args, f"--output_dir={out}", cache_dir=tmp_path / "c")
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()[-1:]
    assert line.startswith(f"{module}: error: --{flag}: the run needs at least "), line
    assert "of memory here" in line and "n_clients = " in line and "local_updates = " in line
    assert "Traceback" not in done.stderr and not (out / "results.json").exists()


@pytest.mark.parametrize(
    "args, flag",
    [
        (("--n_clients=1000000000",), "n_clients"),
        (("--local_updates=1000000000",), "local_updates"),
    ],
)
def test_a_round_s_interactions_are_counted_in_int32(tmp_path, args, flag):
    done = binaries.call("foltr_es", *SMALL, *args, f"--output_dir={tmp_path / 'out'}",
                         cache_dir=tmp_path / "c")  # fmt: skip
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()[-1:]
    assert line.startswith(f"foltr_es: error: --{flag}: ") and "a round can count" in line, line
    assert "Traceback" not in done.stderr


def test_a_synthetic_dataset_that_cannot_fit_is_refused_before_it_is_made(tmp_path):
    done = binaries.call("fpdgd", "--synthetic_features=2000000000", "--rounds=2",
                         f"--output_dir={tmp_path / 'out'}")  # fmt: skip
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("fpdgd: error: --synthetic_features: the synthetic dataset needs at "
                           "least 128.0 TB")  # fmt: skip


def test_the_estimate_lets_the_papers_largest_runs_pass():
    """|C| = 1,000 clients, 5 runs, 15 cells (FPDGD's privacy grid over three click models),
    the neural ranker on MSLR's 136 features: a few GB, not refused on a 16 GB machine."""
    import foltr_jax
    from foltr_jax.engine import serving
    from foltr_jax.methods.fpdgd import federation

    train, _ = foltr_jax.data.synthetic_train_test(seed=0, n_train_queries=4, n_test_queries=2,
                                                   n_features=136)  # fmt: skip
    config = foltr_jax.FpdgdConfig(n_clients=1000, n_runs=5, local_updates=8,
                                        ranker="neural")  # fmt: skip
    seen = []
    real = serving.check_memory

    def recorded(needed, *args, **kwargs):
        seen.append(needed)
        return real(needed, *args, **kwargs)

    serving.check_memory, federation.engine.check_memory = recorded, recorded
    try:
        federation.check_memory(config, train, 15)
    finally:
        serving.check_memory, federation.engine.check_memory = real, real
    assert 1e9 < seen[0] < 16e9


def test_an_allocation_that_fails_anyway_is_one_line(monkeypatch, capsys):
    import jax

    from experiments.lib import program

    def run():
        raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating 8 bytes.\n"
                                         "more lines of XLA's")  # fmt: skip

    program.FLAGS(["fpdgd"])
    try:
        with pytest.raises(SystemExit) as stopped:
            program.main("fpdgd", run, distributed=None)(["fpdgd"])
    finally:
        program.FLAGS.unparse_flags()
    assert stopped.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("fpdgd: error: the run does not fit in memory (RESOURCE_EXHAUSTED: "
                           "Out of memory allocating 8 bytes.); ask for fewer clients")  # fmt: skip
