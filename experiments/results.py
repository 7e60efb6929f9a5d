"""The fields of results.json that every online-LTR binary shares: config, data,
curves, timings and versions."""

from __future__ import annotations

import dataclasses
import platform
import resource

from absl import flags

import foltr_jax
from foltr_jax import data

FLAGS = flags.FLAGS
# The version of results.json's structure (experiments/results.schema.json describes it):
# a reader refuses another, so a changed structure never passes for the old one.
RESULTS_FORMAT = 1


def header(method: str) -> dict:
    """The first fields of every results.json: the format version, the method, the
    versions of the code that made it."""
    return {"results_format": RESULTS_FORMAT, "method": method, "versions": versions()}


def results_file(method, config, result, train, test, source, slots=slice(None), log=None) -> dict:
    """The shared results.json of an online-LTR run: config, data, the per-round curves of
    the runs in ``slots`` (one setting's repetitions) and the program's timings (what
    they cover from ``log``, the run's ProgressLog)."""

    def pick(values):
        return values[slots]

    return {
        **header(method),
        "config": dataclasses.asdict(config),
        "data": {
            **source,
            "train": dataset_summary(train),
            "test": dataset_summary(test),
            "normalise": FLAGS.normalise,
        },
        "initial_offline_ndcg": pick(result.initial_offline_ndcg).tolist(),
        "offline_ndcg": pick(result.offline_ndcg).tolist(),
        "offline_mrr": pick(result.offline_mrr).tolist(),
        **offline_rounds(config, result),
        "online_ndcg": pick(result.online_ndcg).tolist(),
        "online_max_rr": pick(result.online_max_rr).tolist(),
        "online_performance": pick(result.online_performance).tolist(),
        "final_offline_ndcg": pick(result.offline_ndcg)[:, -1].tolist(),
        # The program's totals: a grid cell shares them with the other cells.
        "interactions": result.interactions,
        "seconds": result.run_seconds,
        "compile_seconds": result.compile_seconds,
        "interactions_per_second": result.interactions_per_second,
        "timings": timings(log),
    }


def offline_rounds(config, result) -> dict:
    """``{"offline_rounds": [the 1-based round of each offline column]}`` when
    ``--eval_every`` > 1; nothing when every round is evaluated (columns 1..T, and the
    methods without the flag: FOLtR-ES)."""
    if getattr(config, "eval_every", 1) == 1:
        return {}
    return {"offline_rounds": result.offline_rounds.tolist()}


def curve_summary(
    results: dict, key: str = "offline_ndcg", label: str = "nDCG@10", unit: str = "round"
) -> str:
    """'offline <label> (mean of n run(s)) initial: x, round t: y, ...': the mean offline
    curve ``results[key]`` at a few of its rounds (``offline_rounds`` with --eval_every)."""
    curves = results[key]
    evaluated = results.get("offline_rounds") or list(range(1, len(curves[0]) + 1))
    n = len(evaluated)

    def mean_at(i):
        return sum(c[i] for c in curves) / len(curves)

    initial = sum(results[f"initial_{key}"]) / len(curves)
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
