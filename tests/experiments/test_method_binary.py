"""experiments.method: a registered method by name, its config's fields as flags; a method
registered in a --plugin (the "Add a method" example's federated DBGD) is a name there."""

import json
import sys

import numpy as np
import pytest

from tests import binaries

DBGD = ("--plugin=examples/federated_dbgd.py", "--method=dbgd")
SMALL = ("--synthetic_queries=40", "--n_clients=8", "--rounds=4", "--n_runs=2", "--nocheckpoint")


def _curves(path) -> dict:
    results = json.loads((path / "results.json").read_text())
    (cell,) = results["cells"]
    return results, cell["curves"]


def test_a_plugins_method_shows_its_own_settings_in_help():
    done = binaries.run("method", *DBGD, "--help")  # absl prints the help and exits 1
    text = " ".join(done.stdout.split())  # absl wraps the help's lines
    assert "--delta: δ, the exploration step" in text
    assert "--alpha: α, the update step" in text
    assert "dbgd (federated DBGD, team-draft interleaving)" in text


@pytest.mark.parametrize(
    "args, message",
    [
        (("--method=nope",), "method: error: --method: unknown method 'nope'; one of ("),
        ((*DBGD, "--rounds=0"), "method: error: --rounds: must be an integer of at least 1"),
        ((*DBGD, "--n_clients=10", "--client_chunk=3"), "method: error: --client_chunk: must"),
        ((*DBGD, "--aggregator=x"), "method: error: --aggregator: unknown aggregator 'x'"),
        (("--plugin=no_such_file.py",), "method: error: --plugin: "),
    ],
)
def test_a_bad_setting_is_one_line_naming_its_flag(tmp_path, args, message):
    done = binaries.run("method", *args, f"--output_dir={tmp_path / 'out'}")
    assert done.returncode != 0
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(message), line
    assert not (tmp_path / "out" / "results.json").exists()


@pytest.mark.slow  # tens of seconds of compilation; test_add_a_method covers the method itself
def test_a_plugins_method_runs_chunked_and_under_attack(tmp_path):
    runs = {
        "plain": (),
        "chunked": ("--client_chunk=4",),
        "attacked": ("--aggregator=trimmed_mean", "--n_malicious=2", "--attack=lie"),
    }
    found = {}
    for name, extra in runs.items():
        out = tmp_path / name
        done = binaries.run("method", *DBGD, *SMALL, *extra, f"--output_dir={out}")
        assert done.returncode == 0, done.stderr[-2000:]
        found[name] = _curves(out)
    results, curves = found["plain"]
    assert results["method"] == "dbgd" and results["config"]["delta"] == 1.0
    assert np.asarray(curves["offline_ndcg"]).shape == (2, 4)
    for name, values in curves.items():  # client chunks: the same run to float32 rounding
        np.testing.assert_allclose(found["chunked"][1][name], values, rtol=1e-5, err_msg=name)
    attacked = found["attacked"][1]
    assert np.isfinite(attacked["offline_ndcg"]).all()
    assert attacked["offline_ndcg"] != curves["offline_ndcg"]  # the server saw other models
    # A chunked round cannot run a model attack: one line naming the flag (the shared run
    # settings' check, before the method is built).
    done = binaries.run(
        "method", *DBGD, *SMALL, *runs["attacked"], "--client_chunk=4",
        f"--output_dir={tmp_path / 'refused'}",
    )  # fmt: skip
    (line,) = done.stderr.strip().splitlines()[-1:]
    assert done.returncode == 2 and line.startswith("method: error: --client_chunk: "), line
    assert "model attacks needs every client of a round at once" in line


@pytest.mark.slow  # two binaries' compilations
def test_a_built_in_method_by_name_gives_its_own_binarys_results(tmp_path):
    settings = ("--synthetic_queries=40", "--n_clients=8", "--rounds=3", "--nocheckpoint")
    by_name = binaries.run(
        "method", "--method=foltr_es", *settings, f"--output_dir={tmp_path / 'a'}"
    )
    own = binaries.run("foltr_es", *settings, f"--output_dir={tmp_path / 'b'}")
    assert by_name.returncode == 0 and own.returncode == 0, by_name.stderr[-2000:]
    (a, a_curves), (b, b_curves) = _curves(tmp_path / "a"), _curves(tmp_path / "b")
    assert a["config"] == b["config"]
    assert set(b_curves) <= set(a_curves)
    for name, values in b_curves.items():
        assert a_curves[name] == values, name


def _help(*args):
    done = binaries.run("method", *args, "--help")  # absl prints the help and exits 1
    return " ".join(done.stdout.split()), done


def test_the_method_is_read_as_absl_reads_it_one_dash_or_from_a_flag_file(tmp_path):
    """``-method=foltr_es`` and a --flagfile holding ``--method=foltr_es`` choose FOLtR-ES's
    flags (its --sigma), as absl then reads them; a flag file that cannot be read is one
    line naming it."""
    flagfile = tmp_path / "flags.txt"
    flagfile.write_text("--method=foltr_es\n--rounds=3\n")
    for args in (("-method=foltr_es",), ("-method", "foltr_es"), (f"--flagfile={flagfile}",)):
        text, _ = _help(*args)
        assert "--sigma: Standard deviation" in text, args
    text, _ = _help()
    assert "--sigma" not in text  # the default, fpdgd, has no sigma
    done = binaries.run("method", f"--flagfile={tmp_path / 'missing.txt'}")
    (line,) = done.stderr.strip().splitlines()
    assert done.returncode == 2 and line.startswith("method: error: --flagfile: Unable to open")


@pytest.mark.slow  # a run of the method binary
def test_a_method_named_with_one_dash_runs_that_method(tmp_path):
    settings = ("--synthetic_queries=40", "--n_clients=8", "--rounds=3", "--nocheckpoint")
    out = tmp_path / "out"
    done = binaries.run("method", "-method=foltr_es", *settings, f"--output_dir={out}")
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((out / "results.json").read_text())
    assert results["method"] == "foltr_es" and "sigma" in results["config"]


BROKEN_METHOD = """
import dataclasses

import numpy as np

from foltr_jax import engine


@dataclasses.dataclass(frozen=True)
class BrokenConfig:
    rounds: int = 3
    n_runs: int = 2
    returns: str = "none"


def run(config, train, test, progress=None, checkpoint=None):
    good = np.zeros((config.n_runs, config.rounds))
    curves = {"offline_ndcg": good, "online_ndcg": good}
    if config.returns == "none":
        return None
    if config.returns == "flat":
        curves["online_ndcg"] = np.zeros(config.rounds)
    if config.returns == "objects":
        curves["offline_ndcg"] = [[object()] * config.rounds] * config.n_runs
    if config.returns == "no_initial":
        return engine.RunResult(curves, {}, None, 0.0, 1.0, 1, np.arange(1, 4), ("offline_ndcg",))
    initial = {"offline_ndcg": np.zeros(config.n_runs)}
    return engine.RunResult(curves, initial, None, 0.0, 1.0, 1, np.arange(1, 4), ("offline_ndcg",))


engine.register_method("broken", BrokenConfig, run, "returns what it is told")
"""


@pytest.fixture(scope="module")
def broken_method(tmp_path_factory):
    """One plugin file for the module: its method is registered once in this process."""
    path = tmp_path_factory.mktemp("broken") / "broken_method.py"
    path.write_text(BROKEN_METHOD)
    return path


@pytest.mark.parametrize(
    "returns, message",
    [
        ("none", "its run returned NoneType, not a foltr_jax.engine.RunResult"),
        (
            "flat",
            (
                "its run returned curve 'online_ndcg' as ndarray of shape [3] and dtype "
                "float64; expected a [runs, rounds] array of numbers"
            ),
        ),
        ("objects", "its run returned curve 'offline_ndcg' as list of objects"),
        ("no_initial", "its run returned initial 'offline_ndcg' as NoneType"),
    ],
)
def test_a_method_returning_the_wrong_shape_or_type_is_one_line(
    broken_method, tmp_path, returns, message, monkeypatch
):
    out = tmp_path / "out"
    args = (f"--plugin={broken_method}", "--method=broken", f"--returns={returns}",
            "--synthetic_queries=10", f"--output_dir={out}")  # fmt: skip
    monkeypatch.setattr(sys, "argv", ["method", *args])  # the binary chooses its method at import
    binaries._loaded["module"] = None
    try:
        done = binaries.call("method", *args)
    finally:
        binaries._loaded["module"] = None  # the next test imports the binary afresh
    (line,) = done.stderr.strip().splitlines()[-1:]
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert line.startswith(f"method: error: --method: broken: {message}"), line
    assert not (out / "results.json").exists()


@pytest.mark.parametrize(
    "field, problem",
    [
        ("output_dir: str = 'x'", "Odd.output_dir: the binary has a flag --output_dir of its own"),
        ("rounds: int", "Odd.rounds: no default (a flag needs one"),
        ("sizes: tuple = (1, 2)", "Odd.sizes: no flag for type tuple"),
    ],
)
def test_a_method_config_that_cannot_be_flags_is_one_line(tmp_path, field, problem):
    plugin = tmp_path / "odd_method.py"
    plugin.write_text(
        "import dataclasses\nfrom foltr_jax import engine\n\n\n"
        f"@dataclasses.dataclass(frozen=True)\nclass Odd:\n    {field}\n\n\n"
        "engine.register_method('odd', Odd, lambda *a, **k: None, 'odd')\n"
    )
    done = binaries.run("method", f"--plugin={plugin}", "--method=odd", "--rounds=2")
    (line,) = done.stderr.strip().splitlines()
    assert done.returncode == 2 and line.startswith(
        f"method: error: --method: odd: its config cannot be flags: {problem}"
    ), line
