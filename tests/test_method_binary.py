"""experiments.method: a registered method by name, its config's fields as flags; a method
registered in a --plugin (the "Add a method" example's federated DBGD) is a name there."""

import json

import binaries
import numpy as np
import pytest

DBGD = ("--plugin=examples/federated_dbgd.py", "--method=dbgd")
SMALL = ("--synthetic_queries=40", "--n_clients=8", "--rounds=4", "--n_runs=2", "--nocheckpoint")


def _curves(path) -> dict:
    results = json.loads((path / "results.json").read_text())
    (cell,) = results["cells"]
    return results, cell["curves"]


def test_a_plugins_method_shows_its_own_settings_in_help():
    done = binaries.run("method", *DBGD, "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "--delta: δ, the exploration step" in done.stdout
    assert "--alpha: α, the update step" in done.stdout
    assert "dbgd (federated DBGD, team-draft interleaving)" in done.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (("--method=nope",), "method: error: --method: unknown method 'nope'; one of ("),
        ((*DBGD, "--rounds=0"), "method: error: --rounds: must be an integer of at least 1"),
        ((*DBGD, "--n_clients=10", "--client_chunk=3"), "method: error: --client_chunk: must"),
        ((*DBGD, "--aggregator=x"), "method: error: --aggregator: unknown aggregator 'x'"),
        (("--plugin=no_such_file.py",), "method: error: --plugin: no_such_file.py: no such file"),
    ],
)
def test_a_bad_setting_is_one_line_naming_its_flag(tmp_path, args, message):
    done = binaries.run("method", *args, f"--output_dir={tmp_path / 'out'}")
    assert done.returncode != 0
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(message), line
    assert not (tmp_path / "out" / "results.json").exists()


@pytest.mark.slow  # tens of seconds of compilation; test_add_a_method covers the method itself
def test_a_plugins_method_runs_and_client_chunks_give_the_same_run(tmp_path):
    found = {}
    for chunk in (0, 4):
        out = tmp_path / f"chunk{chunk}"
        done = binaries.run(
            "method", *DBGD, *SMALL, "--aggregator=trimmed_mean", "--n_malicious=1",
            "--attack=lie", f"--client_chunk={chunk}", f"--output_dir={out}",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        found[chunk] = _curves(out)
    results, curves = found[0]
    assert results["method"] == "dbgd" and results["config"]["delta"] == 1.0
    assert np.asarray(curves["offline_ndcg"]).shape == (2, 4)
    assert np.isfinite(curves["online_ndcg"]).all()
    for name, values in curves.items():
        np.testing.assert_array_equal(found[4][1][name], values, err_msg=name)


@pytest.mark.slow  # two binaries' compilations
def test_a_built_in_method_by_name_gives_its_own_binarys_results(tmp_path):
    settings = ("--synthetic_queries=40", "--n_clients=8", "--rounds=3", "--nocheckpoint")
    by_name = binaries.run("method", "--method=foltr_es", *settings, f"--output_dir={tmp_path / 'a'}")
    own = binaries.run("foltr_es", *settings, f"--output_dir={tmp_path / 'b'}")
    assert by_name.returncode == 0 and own.returncode == 0, by_name.stderr[-2000:]
    (a, a_curves), (b, b_curves) = _curves(tmp_path / "a"), _curves(tmp_path / "b")
    assert a["config"] == b["config"]
    assert a_curves == b_curves
