"""The claims pooled over folds: a run's values fold after fold, paired (fold, run) with
(fold, run), never across folds; the runs a setting shared by the folds; the excerpt's
re-partitioned folds one dataset with its original split."""

import json
import random

import numpy as np
import pytest

from experiments.lib import claims as catalogue
from experiments.lib import runs as data_runs
from experiments.lib import series as series_lib
from experiments.lib.claims import core, table
from experiments.lib.claims import runs as claim_runs
from experiments.lib.cli import UserError
from experiments.lib.paper_figures.pool import Pool
from foltr_jax.engine.results_files import RESULTS_FORMAT

FOLDS = ("mslr_sample", "mslr_sample_fold2")  # the excerpt and a re-partition of it
TRAIN = {"mslr_sample": "/d/mslr_sample/train.txt",
         "mslr_sample_fold2": "/c/folds-x-seed0-v1/mslr_sample_fold2/train.txt"}  # fmt: skip


def _write(root, fold, run, values, **config):
    """A results.json of one cell (perfect clicks) with these final nDCG@10 values, made
    with the seed the claims give the fold (seed + FOLD_SEED_STRIDE per fold after the
    first), and ``config`` beside it."""
    seed = claim_runs.FOLD_SEED_STRIDE * FOLDS.index(fold)
    payload = {
        "results_format": RESULTS_FORMAT,
        "config": {"seed": seed, "n_runs": len(values), **config},
        "data": {"train_path": TRAIN[fold], "test_path": TRAIN[fold].replace("train", "test")},
        "metric": "ndcg",
        "cells": [{
            "name": "perfect", "setting": {},
            "labels": {"method": "fpdgd", "panel": "perfect"},
            "evaluated_rounds": [1],
            "curves": {"offline_ndcg": [[v] for v in values]},
            "per_run": {"final_offline_ndcg": list(values)},
        }],
    }  # fmt: skip
    path = root / fold / run / "results.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload))


# the folds differ by 0.3 nDCG@10; within each fold "a" is 0.02 above "b" in every run
A = {"mslr_sample": [0.50, 0.53, 0.49], "mslr_sample_fold2": [0.80, 0.84, 0.79]}
B = {fold: [v - 0.02 for v in values] for fold, values in A.items()}


def _results(tmp_path, a=A, b=B):
    for fold in FOLDS:
        if fold in a:
            _write(tmp_path, fold, "a", a[fold])
        if fold in b:
            _write(tmp_path, fold, "b", b[fold])
    return core.Results(tmp_path)


def test_the_excerpts_folds_are_one_dataset():
    for train in TRAIN.values():
        assert series_lib.dataset_name({"train_path": train}) == series_lib.EXCERPT_NAME
    other = series_lib.dataset_name({"train_path": "/d/mslr_sample_foldx/train.txt"})
    assert other != series_lib.EXCERPT_NAME


def test_a_run_is_its_folds_runs_fold_after_fold(tmp_path):
    results = _results(tmp_path)
    np.testing.assert_allclose(results.final("a"), A["mslr_sample"] + A["mslr_sample_fold2"])
    assert results.series("a").fold_names == FOLDS


def test_a_runs_folds_pool_whatever_their_seeds_but_other_settings_stay_apart(tmp_path):
    """Each fold runs with its own seed (the claims' folds): the seed is not part of the
    setting, so the folds pool into one series; a fold whose config differs otherwise
    (here its learning rate) is another setting and is never pooled with them."""
    for fold in FOLDS:
        _write(tmp_path, fold, "a", A[fold], learning_rate=0.1)
    _write(tmp_path, "mslr_sample_fold2", "b", B["mslr_sample_fold2"], learning_rate=0.1)
    _write(tmp_path, "mslr_sample", "b", B["mslr_sample"], learning_rate=0.5)
    results = core.Results(tmp_path)
    assert results.series("a").fold_names == FOLDS
    assert len(results.pool.find(run="b")) == 2
    with pytest.raises(core.MissingResults, match="2 series"):
        results.series("b")


def test_pooling_pairs_runs_within_their_fold_whatever_the_reading_order(tmp_path):
    """The counter-example: folds with different means.  Paired, the fold spread cancels
    (a is above b by 0.02 in every (fold, run)); pairing a fold's runs with another fold's
    would see differences of ±0.3.  Welch's test sees the spread between folds."""
    results = _results(tmp_path)
    series = [s for s in results.pool.series]
    raw = []
    for path in sorted(tmp_path.rglob("results.json")):
        raw += series_lib.read_results(path, path.relative_to(tmp_path).as_posix())
    for seed in range(5):  # the Series in any order: the same pooled order
        random.Random(seed).shuffle(raw)
        series_lib.label_series(raw)
        pool = Pool(raw)
        for pooled in series:
            (again,) = pool.find(run=pooled.run)
            assert again.fold_names == FOLDS
            np.testing.assert_array_equal(again.final_offline_ndcg, pooled.final_offline_ndcg)
    a, b = results.final("a"), results.final("b")
    np.testing.assert_allclose(a - b, 0.02)
    paired = core.above(a, b, "a", "b", paired=True, effect=0.02, min_effect=0.01)
    assert paired.outcome == core.HOLDS
    # Welch's test sees the folds' spread: sd over runs ≈ 0.17, not the 0.02 within a fold
    assert float(np.std(a, ddof=1)) > 0.15 and f"± {np.std(a, ddof=1):.3f}" in paired.ours
    welch = core.above(a, b, "a", "b", paired=False, effect=0.02, min_effect=0.01)
    assert welch.outcome == core.INCONCLUSIVE
    # what pairing across folds would have shown: the two folds' runs swapped in b
    crossed = np.concatenate([b[3:], b[:3]])
    assert core.above(a, crossed, "a", "b", paired=True, effect=0.02,
                      min_effect=0.01).outcome != core.HOLDS  # fmt: skip


def test_a_run_lacking_a_fold_is_missing_not_pooled_over_fewer(tmp_path):
    results = _results(tmp_path, b={"mslr_sample": B["mslr_sample"]})
    with pytest.raises(core.MissingResults, match="no results in fold.s. mslr_sample_fold2"):
        results.final("b")
    assert results.final("a").size == 6
    cell = core.Cell("c", lambda r: core.above(r.final("a"), r.final("b"), "a", "b",
                                               paired=True, effect=0.02))  # fmt: skip
    assert core.check_cell(cell, results)["verdict"] is None  # missing, never misaligned


def test_runs_a_setting_are_shared_by_the_folds(tmp_path):
    folds = [("mslr_sample", ("--train_path=/d/a",)), ("mslr_sample_fold2", ("--train_path=/c/b",)),
             ("mslr_sample_fold3", ("--train_path=/c/c",))]  # fmt: skip
    runs = catalogue.RUNS
    own = runs["fpdgd_c10"]  # its setting names 20 runs (recipes.fpdgd.POWER_RUNS)
    plain = runs["fpdgd_c1000"]
    synthetic = next(r for r in runs.values()
                     if r.own_data and claim_runs.runs_a_fold(r, 1, 1) == 1)  # fmt: skip
    assert claim_runs.runs_a_fold(own, 2, 3) == 7 and claim_runs.runs_a_setting(own, 2, 3) == 21
    assert claim_runs.runs_a_fold(plain, 2, 3) == 2 and claim_runs.runs_a_setting(plain, 2, 3) == 6
    assert claim_runs.runs_a_fold(synthetic, 2, 3) == 6  # run once: as many runs in all
    assert claim_runs.runs_a_setting(synthetic, 2, 3) == 6
    made = claim_runs.commands([own.name, plain.name, synthetic.name], tmp_path, folds, 2, 1)
    for folder, argv in made:
        wanted = {own.name: 7, plain.name: 2, synthetic.name: 6}[folder.name]
        n_runs = [a for a in argv if a.startswith("--n_runs=")]
        assert n_runs[-1] == f"--n_runs={wanted}", argv  # the last one given counts
    assert len(made) == 3 + 3 + 1
    # one fold: the argv earlier versions made (the driver's --n_runs, then the run's own)
    ((_, argv),) = claim_runs.commands([own.name], tmp_path, folds[:1], 5, 1)
    assert [a for a in argv if a.startswith("--n_runs=")] == ["--n_runs=5", "--n_runs=20"]


def test_each_fold_runs_its_own_random_streams(tmp_path):
    """Fold 1 keeps the run's own seed (the single-fold table's commands); fold k adds
    (k − 1) × FOLD_SEED_STRIDE to it, given last so that it counts."""
    folds = [("mslr_sample", ("--train_path=/d/a",)), ("mslr_sample_fold2", ("--train_path=/c/b",)),
             ("mslr_sample_fold3", ("--train_path=/c/c",))]  # fmt: skip
    plain = catalogue.RUNS["fpdgd_c1000"]
    seeded = next(r for r in catalogue.RUNS.values()
                  if "--seed=1" in r.flags and not r.own_data)  # fmt: skip
    stride = claim_runs.FOLD_SEED_STRIDE
    for run, own in ((plain, 0), (seeded, 1)):
        made = claim_runs.commands([run.name], tmp_path, folds, 2, 1)
        seeds = [[a for a in argv if a.startswith("--seed=")] for _, argv in made]
        assert seeds[0] == ([] if own == 0 else ["--seed=1"]), seeds
        for k in (1, 2):
            assert seeds[k][-1] == f"--seed={own + k * stride}", seeds
        assert made[0][1][-1].startswith("--output_dir=")  # where it writes stays last
        assert all(argv[-1].startswith("--output_dir=") for _, argv in made)


def test_power_runs_count_runs_in_all_over_the_folds():
    rows = [{"claim": "fpdgd_fig4", "verdict": "inconclusive", "runs_needed": 12}]
    needed, variants = claim_runs.power_runs(catalogue.CLAIMS, rows, 2, 5)["fpdgd_fig4"]
    # fpdgd_c10 and c100 have 20 runs in all; fpdgd_c1000 2 in each of 5 folds: 10 < 12
    assert needed == 12 and set(variants) == {"fpdgd_c1000"}
    assert claim_runs.power_runs(catalogue.CLAIMS, rows, 3, 5) == {}  # 15 ≥ 12: read as is
    (variant,) = variants.values()
    assert claim_runs.runs_a_fold(variant, 2, 5) == 3  # 3 in each of 5 folds: 15 ≥ 12


def test_dataset_flags_make_the_pairs_folds(tmp_path):
    root = tmp_path / "mslr_sample"
    root.mkdir()
    lines = [f"{q % 3} qid:{q} 1:0.{q}\n" for q in range(12) for _ in range(2)]
    (root / "train.txt").write_text("".join(lines[:12]))
    (root / "test.txt").write_text("".join(lines[12:]))
    assert len(data_runs.dataset_flags(str(root))) == 1  # as before: the pair
    folds = data_runs.dataset_flags(str(root), 3, cache_dir=tmp_path / "cache")
    assert [name for name, _ in folds] == ["mslr_sample", "mslr_sample_fold2", "mslr_sample_fold3"]
    assert folds[0][1] == (f"--train_path={root.resolve() / 'train.txt'}",
                           f"--test_path={root.resolve() / 'test.txt'}")  # fmt: skip
    for _, flags in folds[1:]:
        assert all(str(tmp_path / "cache") in flag for flag in flags)
    layout = tmp_path / "layout"
    for k in (1, 2):
        (layout / f"Fold{k}").mkdir(parents=True)
    assert [n for n, _ in data_runs.dataset_flags(str(layout), 1)] == ["Fold1"]
    with pytest.raises(UserError, match="--folds: .* has 2 Fold"):
        data_runs.dataset_flags(str(layout), 5)
    (root / "test.txt").write_text("".join(lines[:2]))  # a query in both files
    with pytest.raises(UserError, match="--data_root: cannot make 3 folds"):
        data_runs.dataset_flags(str(root), 3, cache_dir=tmp_path / "cache")


def test_the_table_says_its_folds():
    payload = {"n_runs": 2, "folds": ["mslr_sample", "mslr_sample_fold2", "mslr_sample_fold3"],
               "fold_seed": 0}  # fmt: skip
    assert table.runs_text(payload) == (
        "6 runs a setting, 2 in each of 3 folds (the original "
        "split and 2 re-partitions of its queries, seed 0)"
    )
    assert table.runs_text({"n_runs": 5}) == "5 runs a setting"  # a record from before


def test_a_fold_no_run_has_is_missing_when_the_driver_asked_for_it(tmp_path):
    """Fold 2's results all made otherwise (read as missing): with the driver's folds the
    runs are missing, not judged on fold 1 alone."""
    one = {"mslr_sample": A["mslr_sample"]}
    _results(tmp_path, a=one, b={"mslr_sample": B["mslr_sample"]})
    assert core.Results(tmp_path).final("a").size == 3  # no fold asked: what is there
    asked = core.Results(tmp_path, folds={"a": set(FOLDS), "b": set(FOLDS)})
    with pytest.raises(core.MissingResults, match="mslr_sample_fold2"):
        asked.final("a")


def test_the_excerpts_folds_are_named_for_it_wherever_it_is(tmp_path, monkeypatch):
    """Fetched, the excerpt is in third_party/mslr_sample/data: its folds are still
    mslr_sample_fold<k>, read as the excerpt and pooled with its own split."""
    root = tmp_path / "mslr_sample" / "data"
    root.mkdir(parents=True)
    lines = [f"{q % 3} qid:{q} 1:0.{q}\n" for q in range(8)]
    (root / "train.txt").write_text("".join(lines[:4]))
    (root / "test.txt").write_text("".join(lines[4:]))
    monkeypatch.setattr(data_runs, "PLACES", (root,))
    folds = data_runs.dataset_flags(str(root), 2, cache_dir=tmp_path / "cache")
    assert [name for name, _ in folds] == ["data", "mslr_sample_fold2"]
    for _, flags in folds:
        train = flags[0].split("=", 1)[1]
        assert series_lib.dataset_name({"train_path": train}) == series_lib.EXCERPT_NAME
