"""A recipe's results as one pool of Series: folds pooled, found by run and fields."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re

import numpy as np

from experiments.lib import figures
from experiments.lib.paper_figures.structure import CLICKS

EXCERPT = "MSLR-WEB10K excerpt"  # experiments/excerpt.py's folders are named mslr_sample
# Config fields a run's folds may differ in and still be one setting: each fold runs with
# its own seed (the claims' fold k: seed + 1,000 x (k - 1)), so that no two folds share
# their random streams.
FOLD_FIELDS = ("seed",)


def dataset_of(series: figures.Series) -> str:
    """The dataset, without its fold: 'MSLR-WEB10K', 'synthetic', 'synthetic intents',
    'MSLR-WEB10K excerpt'."""
    group = series.group
    if group.startswith("synthetic intents"):
        return "intent-change (synthetic)"
    if group.startswith("synthetic"):
        return "synthetic"
    name = group.split(", ")[0]
    if group.startswith(figures.EXCERPT_NAME) or "mslr_sample" in name.split("/"):
        return EXCERPT
    return re.sub(r"/Fold\d+$", "", name).split("/")[-1] if "/" in name else name


def run_of(series: figures.Series) -> str:
    """The recipe run a Series came from: the folder under the fold's folder."""
    parts = pathlib.PurePosixPath(series.source).parts
    return parts[1] if len(parts) >= 3 else parts[0]


def fold_of(series: figures.Series) -> str:
    """The fold a Series came from: the folder its run is in ('' : none)."""
    parts = pathlib.PurePosixPath(series.source).parts
    return parts[0] if len(parts) >= 3 else ""


def _concat(arrays):
    if any(a is None for a in arrays):
        return None
    if arrays[0].ndim == 2:
        width = min(a.shape[1] for a in arrays)
        return np.concatenate([a[:, :width] for a in arrays])
    return np.concatenate(arrays)


class Pool:
    """Every Series of a recipe's results, pooled across folds, found by run and fields
    (a run's folds pool when their fields agree but for ``FOLD_FIELDS``: the seed).

    A pooled Series holds its folds' runs fold after fold, the folds in the order of their
    names and each fold's runs in their order, whatever the order the Series came in: two
    runs made with the same folds and runs per fold line up (fold, run) with (fold, run),
    as paired tests need.  ``fold_names`` lists the folds pooled."""

    def __init__(self, series: list, recipe=None):
        labels = {run.name: run.label for run in getattr(recipe, "runs", ())}
        merged = {}
        for s in series:
            setting = {k: v for k, v in s.fields.items() if k not in FOLD_FIELDS}
            fields = json.dumps(setting, sort_keys=True, default=str)
            key = (run_of(s), dataset_of(s), s.panel, fields)
            merged.setdefault(key, []).append(s)
        self.series = []
        for (run, dataset, _, _), found in merged.items():
            found = sorted(found, key=fold_of)  # stable: a fold's own order is kept
            first = found[0]
            pooled = dataclasses.replace(
                first,
                run_ids=[r for s in found for r in s.run_ids],
                **{
                    name: _concat([getattr(s, name) for s in found])
                    for name in (
                        "final_offline_ndcg",
                        "online_performance",
                        "offline_ndcg",
                        "offline_mrr",
                        "online_ndcg",
                        "online_max_rr",
                        "initial_offline_ndcg",
                    )
                },
            )
            pooled.run = run
            pooled.dataset = dataset
            pooled.run_label = labels.get(run, "")
            pooled.folds = len(found)
            pooled.fold_names = tuple(fold_of(s) for s in found)
            self.series.append(pooled)
        self.datasets = list(dict.fromkeys(s.dataset for s in self.series))

    def find(self, run=None, panel=None, dataset=None, prefix=None, **fields) -> list:
        """The Series matching: run name (or its prefix), panel, dataset and field values."""
        out = []
        for s in self.series:
            if run is not None and s.run != run:
                continue
            if prefix is not None and not s.run.startswith(prefix):
                continue
            if panel is not None and s.panel != panel:
                continue
            if dataset is not None and s.dataset != dataset:
                continue
            if any(s.fields.get(k) != v for k, v in fields.items()):
                continue
            out.append(s)
        return out

    def one(self, **conditions):
        found = self.find(**conditions)
        return found[0] if found else None


def _clicks(pool: Pool) -> list:
    found = {s.panel for s in pool.series}
    return [c for c in CLICKS if c in found] + sorted(found - set(CLICKS))
