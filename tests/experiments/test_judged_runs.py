"""Claims and reports judge only the runs they asked for: a results file is read by the claims
table or a batch's report only when ``provenance.same_run`` says its very command made it, and
the documentation is written only from a complete run of every claim on the MSLR excerpt."""

import json
import sys

import pytest

from tests import binaries


def fake_results(path, tag: str, finals=(0.2, 0.3)):
    """A readable results.json of one cell (fpdgd, perfect) whose provenance is ``{"tag": tag}``
    (no provenance the code records: made otherwise, unless a test says it is the same run)."""
    from foltr_jax.engine import results_files

    curves = {"offline_ndcg": [[0.1, f] for f in finals]}
    cell = results_files.cell("perfect", labels=results_files.labels("fpdgd", "perfect"),
                        evaluated_rounds=[1, 2], curves=curves,
                        per_run={"final_offline_ndcg": list(finals)})  # fmt: skip
    payload = {"results_format": 2, "method": "fpdgd", "provenance": {"tag": tag},
               "config": {}, "data": {}, "metric": "ndcg", "cells": [cell]}  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload))
    return path


def argv(folder, *flags):
    return [sys.executable, "-m", "experiments.fpdgd", *flags, f"--output_dir={folder}"]


@pytest.fixture
def same_run_by_tag(monkeypatch):
    """``same_run`` says "same" for a fake file tagged 'asked' (the code's own provenance needs
    a real run), and otherwise what the code says."""
    from experiments.lib import provenance

    real = provenance.same_run

    def judged(recorded, command):
        if isinstance(recorded, dict) and "tag" in recorded:
            return None if recorded["tag"] == "asked" else "other arguments (made otherwise)"
        return real(recorded, command)

    monkeypatch.setattr(provenance, "same_run", judged)


def test_the_claims_read_a_run_only_as_their_command_makes_it(tmp_path, capsys, same_run_by_tag):
    from experiments.lib.claims.core import MissingResults, Results
    from experiments.lib.claims.runs import reader

    run = tmp_path / "synthetic" / "myrun"
    fake_results(run / "results.json", "foreign")
    assert list(Results(tmp_path).final("myrun", "perfect")) == [0.2, 0.3]  # all: it is there
    results = reader(tmp_path, [(run, argv(run, "--n_runs=5"))])
    with pytest.raises(MissingResults):
        results.final("myrun", "perfect")
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("[claims] 1 run(s) hold results not made by the command that would ")
    assert "read as missing (first: " in line and "other arguments (made otherwise)" in line
    fake_results(run / "results.json", "asked")
    assert list(reader(tmp_path, [(run, argv(run))]).final("myrun", "perfect")) == [0.2, 0.3]
    assert capsys.readouterr().err == ""
    stray = tmp_path / "synthetic" / "stray" / "results.json"  # no command asks for it
    fake_results(stray, "asked")
    with pytest.raises(MissingResults):
        reader(tmp_path, [(run, argv(run))]).final("stray", "perfect")


def test_the_claims_table_counts_a_run_made_otherwise_as_missing(tmp_path, same_run_by_tag):
    """The claim's run folder holds results of other settings: with --norun the claim is not
    run, said in one line (before, its verdict was computed from them)."""
    grid = tmp_path / "synthetic" / "fpdgd_c1000"
    fake_results(grid / "perfect" / "results.json", "foreign")
    (grid / "grid.json").write_text(json.dumps({"cells": ["perfect"]}))
    done = binaries.call("claims", "--norun", "--nodiagnose",
                         "--claims=fpdgd_dp_little_impact", "--data_root=synthetic", "--n_runs=5",
                         f"--results_dir={tmp_path}")  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "not made by the command" in line]
    assert len(said) == 1 and "read as missing" in said[0], done.stderr
    table = json.loads((tmp_path / "claims.json").read_text())
    assert [r["holds"] for r in table["claims"]] == [None]


@pytest.fixture
def docs_written(monkeypatch):
    """Records a call of pages.write_docs instead of rewriting the repository's pages."""
    from experiments.lib.claims import pages

    calls = []
    monkeypatch.setattr(pages, "write_docs", lambda *a: calls.append(a))
    return calls


def test_write_docs_refuses_data_other_than_the_mslr_excerpt(tmp_path, docs_written):
    done = binaries.call("claims", "--norun", "--write_docs", "--data_root=synthetic",
                         f"--results_dir={tmp_path}")  # fmt: skip
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("claims: error: --write_docs: the pages record a run on the MSLR "
                           "excerpt, and this one is on synthetic")  # fmt: skip
    assert docs_written == []
    done = binaries.call("claims", "--write_docs", "--nodiagnose", f"--results_dir={tmp_path}")
    assert done.returncode == 2 and "--nodiagnose" in done.stderr and docs_written == []


def test_write_docs_refuses_an_incomplete_run(tmp_path, docs_written):
    """--norun on a folder without the runs: the table is written to --results_dir, the
    documentation is not (before, the README and the pages were rewritten from it)."""
    from experiments.lib import runs

    if runs.find_excerpt() is None:
        pytest.skip("the MSLR excerpt is not here")
    done = binaries.call("claims", "--norun", "--write_docs", f"--results_dir={tmp_path}")
    assert done.returncode == 2
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("claims: error: --write_docs: the documentation was not written: ")
    assert "run(s) missing, failed or made otherwise" in line
    assert docs_written == [] and (tmp_path / "claims.md").is_file()


def test_the_batch_report_holds_only_the_recipe_s_current_runs(tmp_path, monkeypatch, capsys,
                                                                same_run_by_tag):  # fmt: skip
    """A run that left the recipe (renamed) keeps its folder; the batch's report and page read
    only the recipe's runs as it makes them now.  A plugin's recipe (no paper's layout) gets
    its report without a 'paper figures not drawn' line."""
    batch = binaries.load("batch")
    from experiments.lib import recipes, runs

    recipe = recipes.Recipe("plugin_demo", "a plugin's recipe", (
        recipes.Run("renamed", "fpdgd", ("--n_clients=8",)),))  # fmt: skip
    root = tmp_path / "results"
    monkeypatch.setattr(runs, "run_missing", lambda commands, jobs, tag, below=None: [])
    fake_results(root / "plugin_demo" / "synthetic" / "renamed" / "results.json", "asked")
    fake_results(root / "plugin_demo" / "synthetic" / "old_name" / "results.json", "asked",
                 finals=(0.5, 0.6))  # fmt: skip
    batch.FLAGS(["batch"])  # the defaults: one device, no plugin
    try:
        assert batch.run_recipe(recipe, root, [("synthetic", ())], 2, False, False)
    finally:
        batch.FLAGS.unparse_flags()
    said = capsys.readouterr().err
    assert "paper figures not drawn" not in said and "no page.png" in said
    summary = json.loads((root / "plugin_demo" / "report" / "summary.json").read_text())
    assert summary["files"] == ["synthetic/renamed/results.json"]


@pytest.mark.slow  # a real grid run in a process of its own, then the claims on it
def test_the_claims_do_not_judge_or_publish_a_run_made_otherwise(tmp_path):
    """fpdgd_c1000's folder filled by a run of 10 clients, 5 rounds, 2 runs: the claim that
    reads it is not run (before: verdicts computed and the table said "5 runs per setting,
    |C| = 1,000, T = 50"), and --write_docs refuses."""
    out = tmp_path / "cl" / "synthetic" / "fpdgd_c1000"
    made = binaries.run("fpdgd", "--click_models=perfect,navigational,informational",
                        "--n_clients=10", "--rounds=5", "--n_runs=2",
                        "--privacy_grid=none,1.2:3,2.3:3,4.5:5,10:5", "--nocheckpoint",
                        f"--output_dir={out}", cache_dir=tmp_path / "c", timeout=900)  # fmt: skip
    assert made.returncode == 0, made.stderr
    done = binaries.run("claims", "--norun", "--nodiagnose", "--claims=fpdgd_dp_little_impact",
                        "--data_root=synthetic", "--n_runs=5", f"--results_dir={tmp_path / 'cl'}",
                        timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1 run(s) hold results not made by the command" in done.stderr
    assert "other arguments" in done.stderr
    table = json.loads((tmp_path / "cl" / "claims.json").read_text())
    assert [r["holds"] for r in table["claims"]] == [None]
    refused = binaries.run("claims", "--norun", "--write_docs", "--data_root=synthetic",
                           f"--results_dir={tmp_path / 'cl'}", timeout=300)  # fmt: skip
    assert refused.returncode == 2 and "--write_docs: the pages record a run on the MSLR" in (
        refused.stderr
    )
