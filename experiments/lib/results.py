"""results.json, format 2: the one structure every experiment binary writes.

::

    {
      "results_format": 2,              # this structure's version (a reader refuses another)
      "method": "fpdgd",                # what ran
      "versions": {...},                # foltr_jax, jax, python, platform
      "provenance": {...},              # what made it: command, flags, code version,
                                        # plugins' and data files' SHA-256 (provenance.py)
      "config": {...},                  # the settings the cells share
      "data": {...},                    # where the data came from, and its size
      "metric": "ndcg",                 # the headline offline metric: curves["offline_<metric>"]
      "cells": [                        # one entry per cell, even when a binary has one
        {
          "name": "...",                # unique in the file
          "setting": {...},             # what sets this cell apart from "config"
          "labels": {...},              # how reports name and place it (see labels())
          "evaluated_rounds": [1, ...], # the 1-based round of each offline curve column
          "curves": {                   # by metric name, [run][column]
            "offline_ndcg": [[...]],    # the global model on the test split, evaluated rounds
            "online_ndcg": [[...]],     # the lists shown, every round
            ...
          },
          "per_run": {                  # one number per run, by name
            "initial_offline_ndcg": [...], "final_offline_ndcg": [...],
            "online_performance": [...], ...
          },
          "summary": {...},             # optional: means and sds over the runs
          ...                           # the binary's own per-cell fields
        }
      ],
      "interactions": ..., "seconds": ..., "compile_seconds": ..., "timings": {...},
      ...                               # the binary's own fields
    }

experiments/lib/results.schema.json is its JSON Schema; experiments/lib/series.py reads it back
(reports, tables, paper figures).
"""

from __future__ import annotations

import dataclasses
import platform
import resource

import numpy as np
from absl import flags

import foltr_jax
from experiments.lib import provenance
from foltr_jax import data

FLAGS = flags.FLAGS
# The version of results.json's structure (experiments/lib/results.schema.json describes it):
# a reader refuses another, so a changed structure never passes for the old one.
RESULTS_FORMAT = 2
HEADLINE_METRIC = "ndcg"  # nDCG@10


def header(method: str) -> dict:
    """The first fields of every results.json: the format version, the method, the
    versions of the code that made it, and what made it (``provenance.record``)."""
    return {
        "results_format": RESULTS_FORMAT,
        "method": method,
        "versions": versions(),
        "provenance": provenance.record(),
    }


def document(
    method: str, config: dict, data: dict, cells: list, metric: str = HEADLINE_METRIC, **rest
) -> dict:
    """A whole results.json: header, config, data, the headline metric, the cells and the
    binary's other fields (timings, totals, its own notes)."""
    return {
        **header(method),
        "config": config,
        "data": data,
        "metric": metric,
        "cells": cells,
        **rest,
    }


def labels(
    method: str,
    panel: str,
    *,
    group: str | None = None,
    figure: str | None = "",
    fields: dict | None = None,
    always=("method",),
    config: bool = True,
) -> dict:
    """How reports name and place a cell.

    method: its name in labels; panel: the panel it is drawn in (the click model);
    group: what its figure and table are about, after the dataset (None: the dataset
    alone); figure: splits a group's curves into figures (None: drawn in all of them);
    fields: what else identifies it, in order; always: the names shown in its label even
    when no other cell differs there (the others only when they differ); config: whether
    the file's "config" (less the cell's "setting" and click_model) identifies it too.
    """
    return {
        "method": method,
        "panel": panel,
        "group": group,
        "figure": figure,
        "fields": dict(fields or {}),
        "always": list(always),
        "config": config,
    }


def cell(
    name: str,
    *,
    labels: dict,
    evaluated_rounds,
    curves: dict,
    per_run: dict,
    setting: dict | None = None,
    summary: dict | None = None,
    **extra,
) -> dict:
    """One cell of a results file (the structure above)."""
    out = {
        "name": name,
        "setting": dict(setting or {}),
        "labels": labels,
        "evaluated_rounds": [int(r) for r in evaluated_rounds],
        "curves": curves,
        "per_run": per_run,
    }
    if summary is not None:
        out["summary"] = summary
    return {**out, **extra}


def evaluated_rounds(config, result, columns: int | None = None) -> list[int]:
    """The 1-based round of each offline column: ``result.offline_rounds`` with
    --eval_every > 1, else 1..T (T: ``columns``, or the curves' length)."""
    if getattr(config, "eval_every", 1) != 1:
        return [int(r) for r in result.offline_rounds]
    n = result.offline_ndcg.shape[-1] if columns is None else columns
    return list(range(1, n + 1))


def data_summary(source: dict, train, test, **more) -> dict:
    """results.json's "data": where it came from and the sizes of its splits."""
    return {**source, "train": dataset_summary(train), "test": dataset_summary(test), **more}


def totals(result, log=None) -> dict:
    """The program's totals and timings (a grid's cells share them)."""
    return {
        "interactions": result.interactions,
        "seconds": result.run_seconds,
        "compile_seconds": result.compile_seconds,
        "interactions_per_second": result.interactions_per_second,
        "timings": timings(log),
    }


def results_file(method, config, result, train, test, source, slots=slice(None), log=None) -> dict:
    """The results.json of a method's run (every method's binary, and ``experiments.method``):
    config, data, one cell with every curve of the RunResult, by name, for the runs in
    ``slots`` (one setting's repetitions), their per-run numbers (initial and final offline
    nDCG@10, online performance when the run has an online curve) and the program's
    timings (what they cover from ``log``, the run's ProgressLog)."""

    def pick(values):
        return np.asarray(values)[slots].tolist()

    curves = {name: pick(values) for name, values in result.curves.items()}
    per_run = {}
    if "offline_ndcg" in result.initial:
        per_run["initial_offline_ndcg"] = pick(result.initial["offline_ndcg"])
    per_run["final_offline_ndcg"] = pick(np.asarray(result.curves["offline_ndcg"])[:, -1])
    if "online_ndcg" in result.curves:
        per_run["online_performance"] = pick(result.online_performance)
    panel = getattr(config, "click_model", method)
    one = cell(
        panel,
        labels=labels(method, panel),
        evaluated_rounds=evaluated_rounds(config, result),
        curves=curves,
        per_run=per_run,
    )
    return document(
        method,
        dataclasses.asdict(config),
        data_summary(source, train, test, normalise=FLAGS.normalise),
        [one],
        **totals(result, log),
    )


def curve_summary(
    results: dict, metric: str | None = None, label: str = "nDCG@10", unit: str = "round"
) -> str:
    """'offline <label> (mean of n run(s)) initial: x, round t: y, ...': the mean offline
    curve of the first cell's ``offline_<metric>`` (default: the file's metric) at a few
    of its evaluated rounds."""
    metric = metric or results["metric"]
    first = results["cells"][0]
    curves = first["curves"][f"offline_{metric}"]
    evaluated = first["evaluated_rounds"]
    n = len(evaluated)

    def mean_at(i):
        return sum(c[i] for c in curves) / len(curves)

    initial = sum(first["per_run"][f"initial_offline_{metric}"]) / len(curves)
    marks = sorted({0, max(n // 10, 1) - 1, max(n // 2, 1) - 1, n - 1})
    curve = ", ".join(f"{unit} {evaluated[i]}: {mean_at(i):.4f}" for i in marks)
    return f"offline {label} (mean of {len(curves)} run(s)) initial: {initial:.4f}, {curve}"


def timings(*logs) -> dict:
    """What the timing fields cover, and the rounds from which each part resumed."""
    return {
        "cover": (
            "every round: seconds and compile_seconds are summed over the invocations that "
            "computed the rounds (a resumed run's interrupted ones included); "
            "interactions_per_second = interactions / seconds"
        ),
        "resumed_at_round": {log.label: log.resumed_at for log in logs if log and log.resumed_at},
    }


def dataset_summary(dataset: data.RankingDataset) -> dict:
    return {
        "queries": int(dataset.n_queries),
        "documents": int(dataset.n_docs),
        "features": int(dataset.n_features),
        "max_query_length": int(dataset.max_query_length),
    }


def versions() -> dict:
    import jax

    return {
        "foltr_jax": foltr_jax.__version__,
        "jax": jax.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
