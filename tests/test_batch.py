"""The batch recipes: a quick recipe end to end, skipping finished runs, bad input."""

import json
import os
import subprocess
import sys
import time

from sample_data import REPO_ROOT
from test_experiments import run, without_timings


def batch(*args, tmp_path):
    return run("batch", *args, cache_dir=tmp_path / "cache", timeout=900)


def test_quick_recipe_runs_end_to_end_then_skips_what_is_done(tmp_path):
    results = tmp_path / "results"
    args = ("--recipe=fpdgd_fig5", "--quick", "--jobs=2", f"--results_dir={results}")
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
    for name in ("noniid_type1", "noniid_type2", "noniid_type2_r2", "noniid_type3", "noniid_type4"):
        assert name in result.stdout


def test_dry_run_runs_every_fold_and_type1_once_on_its_own_data(tmp_path):
    root = tmp_path / "MSLR"
    for fold in ("Fold1", "Fold2"):
        (root / fold).mkdir(parents=True)
    results = tmp_path / "results"
    args = ("--recipe=noniid_type3,noniid_type1", f"--data_root={root}", "--dry_run")
    result = batch(*args, f"--results_dir={results}", tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    commands = result.stdout.strip().splitlines()
    type3 = [c for c in commands if "--type=3" in c]
    assert len(type3) == 4  # CCM and PBM clients, on each fold
    for fold in ("Fold1", "Fold2"):
        assert sum(f"--fold_dir={root / fold}" in c for c in type3) == 2
        assert sum(f"{results}/noniid_type3/{fold}/" in c for c in type3) == 2
    type1 = [c for c in commands if "--type=1" in c]
    assert len(type1) == 6  # linear and neural x 3 click models, once: synthetic intents
    assert not any("--fold_dir" in c for c in type1)
    assert all(f"{results}/noniid_type1/synthetic/" in c for c in type1)
    assert not results.exists()  # a dry run writes nothing


def test_killing_a_run_midway_and_resuming_gives_the_uninterrupted_results(tmp_path):
    args = [
        "--synthetic_queries=30",
        "--synthetic_features=8",
        "--synthetic_docs_per_query=15",
        "--n_clients=200",
        "--rounds=400",
        "--chunk_rounds=5",
        "--n_runs=2",
    ]
    env = {**os.environ, "FOLTR_JAX_CACHE": str(tmp_path / "cache"), "JAX_PLATFORMS": "cpu"}
    command = [sys.executable, "-m", "experiments.fpdgd", *args]
    whole = subprocess.run(
        [*command, f"--output_dir={tmp_path / 'whole'}"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert whole.returncode == 0, whole.stderr
    assert not (tmp_path / "whole" / ".checkpoint.pkl").exists()  # removed when done

    out = tmp_path / "killed"
    process = subprocess.Popen(
        [*command, f"--output_dir={out}"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 600
    while not (out / ".checkpoint.pkl").exists() and process.poll() is None:
        assert time.time() < deadline
        time.sleep(0.05)
    process.kill()  # SIGKILL: no chance to clean up
    process.wait()
    assert not (out / "results.json").exists(), "the run finished before it could be killed"
    resumed = subprocess.run(
        [*command, f"--output_dir={out}"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr
    first_progress = resumed.stderr.split("round ")[1].split("/")[0]
    assert int(first_progress) > 5, resumed.stderr  # it continued, it did not start over
    a, b = (json.loads((d / "results.json").read_text()) for d in (tmp_path / "whole", out))
    assert without_timings(a) == without_timings(b)
