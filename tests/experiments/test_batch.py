"""The batch recipes: a quick recipe end to end, skipping finished runs, bad input."""

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from tests.binaries import call, run, without_timings
from tests.sample_data import REPO_ROOT


def batch(*args, tmp_path):
    return run("batch", *args, cache_dir=tmp_path / "cache", timeout=900)


def batch_here(*args, tmp_path):
    """``batch`` for what the batch binary decides before it starts any run: in this process."""
    return call("batch", *args, cache_dir=tmp_path / "cache")


@pytest.mark.slow  # a recipe end to end, its runs in processes of their own
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
    # the paper's Figure 5, labelled in its words, on the recipe's page
    paper = json.loads((report / "paper.json").read_text())
    (figure,) = paper["figures"]
    assert figure["name"] == "Figure 5" and len(figure["panels"]) == 3
    for panel in figure["panels"]:
        assert [line["label"] for line in panel["lines"]] == ["|B| = 2", "|B| = 4", "|B| = 8"]
    for name in ("page.png", "page.pdf", "paper_figure_5.png", "paper_figure_5.pdf"):
        assert (report / name).stat().st_size > 1000

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
        result = batch_here(*args, tmp_path=tmp_path)
        assert result.returncode == 2, result.stderr
        assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_list_names_every_recipe(tmp_path):
    result = batch_here("--list", tmp_path=tmp_path)
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
    result = batch_here(*args, f"--results_dir={results}", tmp_path=tmp_path)
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


def test_n_devices_reaches_every_run(tmp_path):
    args = ("--recipe=poisoning_figs2_4,fpdgd_fig4", "--data_root=synthetic", "--dry_run")
    result = batch_here(*args, "--n_devices=2", tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    commands = result.stdout.strip().splitlines()
    assert len(commands) == 4 and all(c.count("--n_devices=2") == 1 for c in commands)
    plain = batch_here(*args, tmp_path=tmp_path)
    assert plain.returncode == 0 and "--n_devices" not in plain.stdout
    refused = batch_here(*args, "--n_devices=0", tmp_path=tmp_path)
    assert refused.returncode == 2 and "--n_devices must be at least 1" in refused.stderr


TINY = ["--synthetic_queries=30", "--synthetic_features=8", "--synthetic_docs_per_query=15"]
CELL_TIMINGS = {"seconds", "compile_seconds", "wall_seconds", "timings"}


def kill_and_resume(module, *args, tmp_path, checkpoint=".checkpoint.npz"):
    """Runs ``experiments.<module> args`` to completion into tmp_path/whole, then into
    tmp_path/killed: SIGKILLed (no chance to clean up) as soon as
    <output_dir>/<checkpoint> appears, and run again with the same flags.

    Returns (results of the whole run, results of the resumed run, the resumed
    process).  Both runs must succeed and leave no checkpoint behind.
    """
    env = {
        **os.environ,
        "FOLTR_JAX_CACHE": str(tmp_path / "cache"),
        "JAX_PLATFORMS": "cpu",
        # The three processes compile the same programs: compile them once.
        "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "jax_cache"),
    }
    command = [sys.executable, "-m", f"experiments.{module}", *args]

    def complete(output):
        result = subprocess.run(
            [*command, f"--output_dir={output}"],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        hidden = sorted(p.name for p in output.iterdir() if p.name.startswith("."))
        assert not hidden, hidden  # checkpoints and finished parts are removed when done
        return result

    whole = tmp_path / "whole"
    complete(whole)
    out = tmp_path / "killed"
    process = subprocess.Popen(
        [*command, f"--output_dir={out}"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 600
    while not (out / checkpoint).exists() and process.poll() is None:
        assert time.time() < deadline
        time.sleep(0.02)
    process.kill()  # SIGKILL: no chance to clean up
    process.wait()
    assert not (out / "results.json").exists(), "the run finished before it could be killed"
    resumed = complete(out)
    a, b = (json.loads((d / "results.json").read_text()) for d in (whole, out))
    return a, b, resumed


def resumed_round(stderr: str, label: str) -> int:
    """The round from which ``label`` resumed (its progress line saying so); 0 if it did not."""
    found = re.search(
        rf"\[{re.escape(label)}\] round (\d+)/\d+ resumed from the checkpoint", stderr
    )
    return int(found.group(1)) if found else 0


@pytest.mark.slow  # a process killed and started again
def test_killing_a_run_midway_and_resuming_gives_the_uninterrupted_results(tmp_path):
    args = [*TINY, "--n_clients=200", "--rounds=400", "--chunk_rounds=5", "--n_runs=2"]
    a, b, resumed = kill_and_resume("fpdgd", *args, tmp_path=tmp_path)
    assert resumed_round(resumed.stderr, "fpdgd") >= 5, resumed.stderr  # it did not start over
    assert without_timings(a) == without_timings(b)


@pytest.mark.slow  # a process killed and started again
def test_foltr_es_resumes_a_killed_run(tmp_path):
    args = [*TINY, "--n_clients=2000", "--rounds=100", "--chunk_rounds=5", "--n_runs=2"]
    a, b, resumed = kill_and_resume("foltr_es", *args, tmp_path=tmp_path)
    assert resumed_round(resumed.stderr, "foltr_es") >= 5, resumed.stderr
    assert without_timings(a) == without_timings(b)


@pytest.mark.slow  # a process killed and started again
def test_fedips_resumes_a_killed_run_with_estimated_propensities(tmp_path):
    args = [*TINY, "--rounds=40", "--chunk_rounds=5", "--n_runs=2", "--propensity=estimated"]
    a, b, resumed = kill_and_resume("fedips", *args, tmp_path=tmp_path)
    assert resumed_round(resumed.stderr, "fedips/estimated") >= 5, resumed.stderr
    assert without_timings(a) == without_timings(b)


@pytest.mark.slow  # a process killed and started again
def test_noniid_reuses_finished_cells_and_resumes_the_killed_one(tmp_path):
    args = [*TINY, "--type=2", "--rounds=1000", "--chunk_rounds=5", "--n_runs=2"]
    # Killed once the second cell has a checkpoint: the first ('iid') is finished.
    a, b, resumed = kill_and_resume(
        "noniid", *args, tmp_path=tmp_path, checkpoint=".checkpoint-noniid.npz"
    )
    assert "[iid] finished by an earlier run, reused" in resumed.stderr
    assert "[noniid iid] round" not in resumed.stderr, resumed.stderr  # not recomputed
    assert resumed_round(resumed.stderr, "noniid noniid") >= 5, resumed.stderr
    assert [c["name"] for c in b["cells"]] == ["iid", "noniid"]

    def strip(results):
        return {
            **without_timings(results),
            "cells": [
                {k: v for k, v in c.items() if k not in CELL_TIMINGS} for c in results["cells"]
            ],
        }

    assert strip(a) == strip(b)


@pytest.mark.slow  # a process killed and started again
def test_unlearning_reuses_finished_trainings_and_resumes_the_killed_one(tmp_path):
    args = [*TINY, "--rounds=400", "--chunk_rounds=5", "--n_runs=1", "--delta_t=5"]
    args += ["--unlearn_local_updates=1", "--click_models=informational"]
    # Killed once the retraining has a checkpoint: both other trainings are finished.
    a, b, resumed = kill_and_resume(
        "unlearning", *args, tmp_path=tmp_path, checkpoint=".checkpoint-retrained.npz"
    )
    for label in ("10H-0M", "9H-1M"):
        assert f"[{label}] finished by an earlier run, reused" in resumed.stderr
        assert f"[{label}] round" not in resumed.stderr, resumed.stderr  # not recomputed
    assert resumed_round(resumed.stderr, "9H-0M") >= 5, resumed.stderr

    def strip(results):
        return {
            k: v for k, v in results.items() if k not in {"wall_seconds", "timings", "versions"}
        }

    assert strip(a) == strip(b)
    assert b["timings"]["resumed_at_round"]["9H-0M"] >= 5


@pytest.mark.slow  # a recipe end to end, its runs in processes of their own
def test_quick_fig2_compares_fpdgd_and_foltr_es_on_the_same_synthetic_data(tmp_path):
    # --data_root=synthetic: a quick batch otherwise runs on the MSLR excerpt when it is here
    result = batch(
        "--recipe=fpdgd_fig2", "--quick", "--dry_run", "--data_root=synthetic", tmp_path=tmp_path
    )
    assert result.returncode == 0, result.stderr
    commands = result.stdout.strip().splitlines()
    assert {c.split()[2] for c in commands} == {"experiments.fpdgd", "experiments.foltr_es"}
    assert len(commands) == 15  # FPDGD, PDGD with both budgets, FOLtR-ES over p and click model
    assert sum("--centralised_form=same_updates" in c for c in commands) == 1
    assert all("--synthetic_queries=60" in c for c in commands)


def test_the_library_finds_the_repository_and_fingerprints_every_binary():
    """experiments/lib/ is a folder below the binaries: where it looks for the excerpt and
    its fetch recipe, and which code a finished part's fingerprint covers."""
    from experiments.lib import output, runs

    assert runs.REPO_ROOT == REPO_ROOT
    assert runs.FETCH.is_file()
    assert runs.PLACES[0] == REPO_ROOT.parent / "shared" / "data" / "mslr_sample"
    assert output.EXPERIMENTS_DIR == REPO_ROOT / "experiments"
    assert (output.EXPERIMENTS_DIR / "fpdgd.py").is_file()


def test_the_batch_names_its_data_size_and_time_before_the_first_run(tmp_path):
    """One line before any run: the data (its folds, files and size), the runs to do and
    an estimate from the runs the results folder holds (here: two timed runs)."""
    root = tmp_path / "MSLR"
    (root / "Fold1").mkdir(parents=True)
    for split, size in (("train", 600_000), ("test", 400_000)):
        (root / "Fold1" / f"{split}.txt").write_bytes(b"0 qid:1 1:0.5\n" * (size // 14))
    results = tmp_path / "results"
    args = ("--recipe=fpdgd_fig5", f"--data_root={root}", f"--results_dir={results}", "--dry_run")
    first = batch_here(*args, tmp_path=tmp_path)
    assert first.returncode == 0, first.stderr
    assert (
        f"[batch] data: {root} (Fold1: 2 file(s), 1.0 MB); 3 of 3 run(s) to do: no run timed "
        "here yet: the first estimate follows the first finished run"
    ) in first.stderr.splitlines()
    # Two timed FPDGD runs (grids: their longest cell), a long FOLtR-ES run that says nothing
    # of FPDGD's time, and a results file that names no binary.
    for name, binary, seconds in (
        ("a", "fpdgd", (50, 10)),
        ("b", "fpdgd", (80, 20)),
        ("c", "foltr_es", (900, 100)),
        ("d", None, (5000, 0)),
    ):
        for cell, share in (("c1", 1.0), ("c2", 0.5)):
            (results / "x" / name / cell).mkdir(parents=True)
            provenance = {"command": [f"experiments.{binary}", "--n_runs=2"]} if binary else {}
            (results / "x" / name / cell / "results.json").write_text(
                json.dumps(
                    {
                        "seconds": seconds[0] * share,
                        "compile_seconds": seconds[1] * share,
                        "provenance": provenance,
                    }
                )
            )
        (results / "x" / name / "grid.json").write_text('{"cells": ["c1", "c2"]}')
    again = batch_here(*args, tmp_path=tmp_path)
    assert (
        f"[batch] data: {root} (Fold1: 2 file(s), 1.0 MB); 3 of 3 run(s) to do: about 4 min "
        f"for 3 of them (each from the mean time of its binary's runs timed in {results}; "
        "start-up adds seconds each)"
    ) in again.stderr.splitlines(), again.stderr

    def announced(recipe):
        done = batch_here(f"--recipe={recipe}", f"--data_root={root}", "--dry_run",
                          f"--results_dir={results}", tmp_path=tmp_path)  # fmt: skip
        return [x.split(" to do: ")[1] for x in done.stderr.splitlines()
                if x.startswith("[batch] data:")]  # fmt: skip

    timed = f"timed in {results}; start-up adds seconds each)"
    # fpdgd_fig2: 12 FOLtR-ES runs (1,000 s each here) and 3 FPDGD runs (80 s)
    assert announced("fpdgd_fig2") == [
        f"about 204 min for 15 of them (each from the mean time of its binary's runs {timed}"
    ]
    assert announced("unlearning_table3") == [
        "no run timed here yet: the first estimate follows the first finished run"
    ]
    shutil.rmtree(results / "x" / "c")
    assert announced("fpdgd_fig2") == [
        (
            f"about 4 min for 3 of them (each from the mean time of its binary's runs {timed}; "
            "12 run(s) of foltr_es not timed here yet"
        )
    ]
    synthetic = batch_here("--recipe=fpdgd_fig5", "--data_root=synthetic", "--dry_run",
                           f"--results_dir={tmp_path / 'r2'}", tmp_path=tmp_path)  # fmt: skip
    assert "[batch] data: synthetic (each run generates its own queries" in synthetic.stderr
