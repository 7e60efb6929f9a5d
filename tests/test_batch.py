"""The batch recipes: a quick recipe end to end, skipping finished runs, bad input."""

import json
import os
import subprocess
import sys

from sample_data import REPO_ROOT


def batch(*args, tmp_path):
    env = {**os.environ, "FOLTR_JAX_CACHE": str(tmp_path / "cache"), "JAX_PLATFORMS": "cpu"}
    return subprocess.run(
        [sys.executable, "-m", "experiments.batch", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def test_quick_recipe_runs_end_to_end_then_skips_what_is_done(tmp_path):
    results = tmp_path / "results"
    args = ("--recipe=fpdgd_fig5", "--quick", f"--results_dir={results}")
    first = batch(*args, tmp_path=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "3 run(s), 0 already done" in first.stderr
    assert "3/3 runs done" in first.stderr
    report = results / "fpdgd_fig5" / "report"
    summary = json.loads((report / "summary.json").read_text())
    (group,) = summary["groups"].values()
    assert sorted(group["panels"]) == ["informational", "navigational", "perfect"]
    labels = set(group["labels"])
    assert labels == {f"fpdgd, local_updates={b}" for b in (2, 4, 8)}, labels
    for name in group["figures"]:
        assert (report / name).stat().st_size > 1000
    assert (report / "table.md").is_file() and (report / "table.tex").is_file()

    again = batch(*args, tmp_path=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "3 run(s), 3 already done" in again.stderr
    assert "runs done" not in again.stderr


def test_bad_requests_are_refused_in_one_line(tmp_path):
    for args, message in [
        (("--recipe=nope",), "--recipe: unknown recipe(s) ['nope']"),
        ((), "--recipe: name one or more recipes"),
        (("--recipe=fpdgd_fig5", f"--data_root={tmp_path / 'missing'}"), "no such folder"),
        (("--recipe=fpdgd_fig5", f"--data_root={tmp_path}"), "neither Fold*/ nor train.txt"),
    ]:
        result = batch(*args, tmp_path=tmp_path)
        assert result.returncode == 2, result.stderr
        assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_list_names_every_recipe(tmp_path):
    result = batch("--list", tmp_path=tmp_path)
    assert result.returncode == 0
    for name in ("fpdgd_fig2", "poisoning_figs2_4", "unlearning_table3", "fedips_fig1"):
        assert name in result.stdout
