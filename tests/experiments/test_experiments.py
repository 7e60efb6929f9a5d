"""The binaries as a user runs them: results files, determinism, and bad input.

Most call a binary's main in this process (binaries.call); determinism is checked on two
processes of their own (the slow tier)."""

import json

import numpy as np
import pytest

from tests.binaries import call, run_twice, without_timings
from tests.sample_data import SAMPLE_DIR, needs_sample

SMALL = [
    "--synthetic_queries=30",
    "--synthetic_features=8",
    "--synthetic_docs_per_query=15",
    "--n_clients=4",
    "--local_updates=2",
    "--rounds=6",
    "--chunk_rounds=4",
]


@pytest.mark.slow  # the same results from two processes of their own
def test_fpdgd_writes_results_and_is_deterministic(tmp_path):
    a, b, result = run_twice("fpdgd", *SMALL, "--n_runs=2", tmp_path=tmp_path)
    assert without_timings(a) == without_timings(b)
    (cell,) = a["cells"]
    assert len(cell["curves"]["offline_ndcg"]) == 2 and len(cell["curves"]["offline_ndcg"][0]) == 6
    assert (
        len(cell["curves"]["online_ndcg"][1]) == 6
        and len(cell["per_run"]["online_performance"]) == 2
    )
    assert a["config"]["n_clients"] == 4 and a["config"]["click_model"] == "informational"
    assert a["interactions"] == 2 * 4 * 2 * 6 and a["interactions_per_second"] > 0
    assert "round 6/6" in result.stderr  # progress


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
@needs_sample
def test_fpdgd_on_the_mslr_sample_learns(tmp_path):
    result = call(
        "fpdgd",
        f"--train_path={SAMPLE_DIR / 'train.txt'}",
        f"--test_path={SAMPLE_DIR / 'test.txt'}",
        "--n_clients=10",
        "--local_updates=5",
        "--rounds=20",
        "--n_runs=2",
        "--click_model=perfect",
        f"--output_dir={tmp_path}",
        cache_dir=tmp_path / "cache",
    )
    assert result.returncode == 0, result.stderr
    # the first seconds said: what came before compiling, then how long compiling took
    said = [x for x in result.stderr.splitlines() if x.startswith("[fpdgd] ")]
    assert said[0].startswith("[fpdgd] data loaded in ") and "; compiling ... (" in said[0], said
    # 20 rounds are one chunk (chunk_rounds 50): the first progress line is the last round
    assert said[1].startswith("[fpdgd] compiled in ") and said[2].startswith("[fpdgd] round 20/20")
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["data"]["train"]["queries"] == 43 and results["data"]["train"]["features"] == 136
    (cell,) = results["cells"]
    for initial, curve in zip(
        cell["per_run"]["initial_offline_ndcg"], cell["curves"]["offline_ndcg"]
    ):
        assert sum(curve[-5:]) / 5 > initial + 0.05


# each form compiles its own program: the batch form in the fast tier, the others in the slow
@pytest.mark.parametrize(
    "form",
    [pytest.param(f, marks=pytest.mark.slow) for f in ("same_updates", "same_budget")] + ["batch"],
)
def test_centralised_baselines_run(tmp_path, form):
    result = call(
        "fpdgd",
        *SMALL,
        "--centralised",
        f"--centralised_form={form}",
        f"--output_dir={tmp_path}",
        cache_dir=tmp_path / "cache",
    )
    assert result.returncode == 0, result.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["method"] == f"centralised_pdgd/{form}"
    assert len(results["cells"][0]["curves"]["offline_ndcg"][0]) == 6
    assert results["interactions"] == {"same_updates": 6, "same_budget": 48, "batch": 48}[form]


@pytest.mark.parametrize(
    "flag, named",
    [
        ("--n_clients=0", "--n_clients"),
        ("--click_model=perfekt", "--click_model"),
        ("--ranker=tree", "--ranker"),
        ("--rounds=-3", "--rounds"),
        ("--learning_rate=0", "--learning_rate"),
        ("--centralised_form=other", "--centralised_form"),
        ("--sensitivity=3 --epsilon=0", "--epsilon"),
        ("--sensitivity=-1", "--sensitivity"),
        ("--attack=lie --n_malicious=2", "--n_malicious"),  # m >= n/2 with 4 clients
        ("--aggregator=krum --n_malicious=1 --n_clients=3", "--n_malicious"),  # n - m - 2 = 0
        ("--aggregator=average", "--aggregator"),
        ("--attack=flood --n_malicious=1", "--attack"),
        ("--eval_every=0", "--eval_every"),
        ("--eval_every=7", "--eval_every"),  # more than --rounds
    ],
)
def test_bad_flags_fail_with_one_line_naming_the_flag(tmp_path, flag, named):
    extra = ["--centralised"] if "centralised" in flag else []
    result = call(
        "fpdgd",
        *SMALL,
        *flag.split(),
        *extra,
        f"--output_dir={tmp_path}",
        cache_dir=tmp_path / "cache",
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and "Traceback" not in result.stderr, lines
    assert not (tmp_path / "results.json").exists()


def refused(tmp_path, train, test, *flags):
    """Runs fpdgd on bad data; checks the one-line error and that nothing is left behind."""
    result = call(
        "fpdgd",
        f"--train_path={train}",
        f"--test_path={test}",
        *flags,
        f"--output_dir={tmp_path / 'out'}",
        cache_dir=tmp_path / "cache",
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, lines
    assert not (tmp_path / "out").exists()
    for cached in (tmp_path / "cache").glob("**/*"):  # only complete caches of good files
        assert cached.suffix == ".npz" and len(np.load(cached, allow_pickle=False).files) > 0
    return lines[0]


@pytest.mark.parametrize(
    "line, problem",
    [
        ("1 1:0.5 2:0.3", "qid"),
        ("1 qid:7 1:0.5 2:abc", "abc"),
        ("1 qid:7 0:0.5", "feature"),
    ],
)
def test_malformed_letor_names_file_and_line(tmp_path, line, problem):
    train = tmp_path / "train.txt"
    train.write_text("0 qid:1 1:0.1 2:0.2\n2 qid:1 1:0.4 2:0.1\n" + line + "\n")
    error = refused(tmp_path, train, train, *SMALL[3:])
    assert f"{train}:3:" in error and problem in error, error
    assert not list((tmp_path / "cache").glob("**/*"))


def test_test_file_with_more_features_than_train_is_refused(tmp_path):
    train = tmp_path / "train.txt"
    train.write_text("0 qid:1 1:0.1 2:0.2\n2 qid:1 1:0.4 2:0.1\n")
    test = tmp_path / "test.txt"
    test.write_text("0 qid:5 1:0.1 2:0.2\n1 qid:5 1:0.3 3:0.9\n")
    assert f"{test}:2:" in refused(tmp_path, train, test)


def test_empty_file_and_split_queries_are_refused(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert str(empty) in refused(tmp_path, empty, empty)
    split = tmp_path / "split.txt"
    split.write_text("0 qid:1 1:0.1\n1 qid:2 1:0.3\n2 qid:1 1:0.2\n")
    assert f"{split}:3:" in refused(tmp_path, split, split)


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_benchmark_prints_json_last(tmp_path):
    result = call("benchmark", *SMALL, cache_dir=tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    last = json.loads(result.stdout.strip().splitlines()[-1])
    assert last["interactions_per_second"] > 0 and last["peak_rss_mb"] > 0
    assert last["config"]["n_clients"] == 4 and last["interactions"] == 4 * 2 * 6
    assert "compile_seconds" in result.stdout


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_poisoning_grid_runs_in_one_program(tmp_path):
    result = call(
        "poisoning",
        *SMALL,
        "--rounds=3",
        "--n_runs=2",
        "--malicious_counts=1",
        "--click_models=perfect,informational",
        f"--output_dir={tmp_path}",
        cache_dir=tmp_path / "cache",
    )
    assert result.returncode == 0, result.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    cells = results["cells"]
    # per click model: baseline + 4 defences + 5 data poisoning + LIE + 8 Fang cells
    assert len(cells) == 2 * (1 + 4 + 5 + 1 + 8)
    assert all(np.shape(c["curves"]["offline_ndcg"]) == (2, 3) for c in cells)
    table = (tmp_path / "table.txt").read_text()
    assert "fang_krum_full" in table
    assert table.startswith("# synthetic (seed 0, ") and "; T = 3 rounds, 2 run(s) a cell" in table
    assert results["interactions"] == len(cells) * 2 * 4 * 2 * 3


def test_poisoning_refuses_too_many_attackers(tmp_path):
    result = call(
        "poisoning",
        *SMALL,
        "--malicious_counts=2",
        f"--output_dir={tmp_path}",
        cache_dir=tmp_path / "cache",
    )
    assert result.returncode == 2 and "--malicious_counts" in result.stderr
    assert not (tmp_path / "results.json").exists()
