"""What results.json records of a FedIPS experiment (Li & Ouyang, FedIPS paper §4): a run of
FedIPS or FedAvg (``run_record``), or the λLinear baseline, full-information linear
LambdaRank on every training query (``lambdarank_baseline``), each one cell under the file's
logging policy f₀ and data (``results_document``); NDCG@5 is the headline metric (the
paper's), NDCG@10 beside it.  Example::

    spec, arrays, prepared = fedips.build(config, train, test)
    cell, fields = experiment.lambdarank_baseline(prepared, arrays.test, 0.1, 300)
    written = experiment.results_document(config, "lambdarank", spec, prepared, {}, cell, **fields)
"""

from __future__ import annotations

import dataclasses
import math

from foltr_jax.core import rankers
from foltr_jax.engine import RunResult, results_files
from foltr_jax.methods.fedips import FedIpsMethod, Prepared, lambdarank
from foltr_jax.methods.fedips.config import FedIpsConfig
from foltr_jax.methods.fedips.lambdarank import TestData

__all__ = [
    "METRIC",
    "NO_CLICK_MODEL",
    "lambdarank_baseline",
    "results_document",
    "run_record",
]

METRIC = "ndcg5"  # the file's headline metric: NDCG@5, the paper's
NO_CLICK_MODEL = "(no click_model)"  # a report's panel for the FedIPS users' clicks


def lambdarank_baseline(
    prepared: Prepared, test: TestData, learning_rate: float, steps: int, progress=None
) -> tuple[dict, dict]:
    """The λLinear baseline: full-batch linear LambdaRank from zero weights on every
    training query's labels (``prepared.train``), ``steps`` gradient steps of
    ``learning_rate``, NDCG@5 and NDCG@10 on ``test`` (``FedIpsArrays.test``) after each.

    Returns (its cell's fields: evaluated steps, curves, per-run initial and final NDCG;
    the file's fields: the baseline's settings, no interactions, seconds).  ValueError
    naming the argument when ``learning_rate`` is not positive and finite or ``steps`` < 1.
    """
    if not 0 < learning_rate < math.inf:
        raise ValueError(f"learning_rate must be positive and finite, got {learning_rate}")
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    run = lambdarank.lambdarank_run(prepared.train, learning_rate, steps, test, progress)
    n5, n10 = run.offline_ndcg5[0], run.offline_ndcg10[0]
    initial5, initial10 = lambdarank.evaluate(
        rankers.LinearRanker(prepared.train.n_features).init(None), test
    )
    cell = {
        "evaluated_rounds": range(1, len(n5) + 1),
        "curves": {"offline_ndcg5": [n5.tolist()], "offline_ndcg10": [n10.tolist()]},
        "per_run": {
            "initial_offline_ndcg5": [float(initial5)],
            "initial_offline_ndcg10": [float(initial10)],
            "final_offline_ndcg5": [float(n5[-1])],
            "final_offline_ndcg10": [float(n10[-1])],
        },
    }
    return cell, {
        "lambdarank": {"learning_rate": learning_rate, "steps": steps},
        "interactions": 0,
        "seconds": run.run_seconds,
        "compile_seconds": run.compile_seconds,
        "interactions_per_second": 0.0,
    }


def run_record(config: FedIpsConfig, result: RunResult) -> tuple[dict, dict]:
    """A FedIPS (or FedAvg) run's (cell fields: the NDCG@5 and NDCG@10 curves, per run the
    initial and final NDCG, clicks and lists per user and the users' mean γ, the estimated
    propensities; the file's fields: interactions, clicks and seconds)."""
    n5, n10 = result.offline_ndcg5, result.offline_ndcg10
    propensities = result.estimated_propensities
    cell = {
        "evaluated_rounds": results_files.evaluated_rounds(config, result, n5.shape[-1]),
        "curves": {"offline_ndcg5": n5.tolist(), "offline_ndcg10": n10.tolist()},
        "per_run": {
            "initial_offline_ndcg5": result.initial_offline_ndcg5.tolist(),
            "initial_offline_ndcg10": result.initial_offline_ndcg10.tolist(),
            "final_offline_ndcg5": n5[:, -1].tolist(),
            "final_offline_ndcg10": n10[:, -1].tolist(),
            "clicks_per_user": (result.clicks / config.n_users).tolist(),
            "sessions_per_user": (result.sessions / config.n_users).tolist(),
            "user_gamma_mean": result.user_gammas.mean(axis=1).tolist(),
        },
        "estimated_propensities": None if propensities is None else propensities.tolist(),
    }
    return cell, {
        "interactions": result.interactions,
        "clicks": int(result.clicks.sum()),
        "seconds": result.run_seconds,
        "compile_seconds": result.compile_seconds,
        "interactions_per_second": result.interactions_per_second,
    }


def results_document(
    config: FedIpsConfig,
    method: str,
    spec: FedIpsMethod,
    prepared: Prepared,
    source: dict,
    cell: dict,
    *,
    normalise: bool = True,
    provenance: dict | None = None,
    **fields,
) -> dict:
    """The whole results.json of one run ``cell`` (``run_record``'s or
    ``lambdarank_baseline``'s cell fields) named ``method`` ('fedips/known', 'fedavg',
    'lambdarank', ...): the config, the data (``source``, the splits ``build`` kept and
    dropped, the relevant grades, ``normalise``), the logging policy f₀, the validation
    queries when the metrics are on them, and ``fields`` (the run's file fields, timings);
    ``provenance``: what made the run (the binary's; none by default)."""
    data = results_files.data_summary(
        source,
        prepared.train,
        prepared.test,
        dropped_single_label_queries={
            "train": prepared.dropped_train,
            "test": prepared.dropped_test,
        },
        relevant_from=spec.relevant_from,
        normalise=normalise,
    )
    extra: dict = {
        "logging_policy": {
            "queries": prepared.logging_queries.tolist(),
            "learning_rate": config.logging_learning_rate,
            "steps": config.logging_steps,
            "offline_ndcg5": prepared.logging_ndcg5,
            "offline_ndcg10": prepared.logging_ndcg10,
        },
    }
    if prepared.validation_queries is not None:  # the offline metrics are on these
        extra["validation"] = {
            "fraction": config.validation_fraction,
            "queries": prepared.validation_queries.tolist(),
        }
    labels = results_files.labels(method, NO_CLICK_MODEL)  # the users' clicks: one panel
    one = results_files.cell(method, labels=labels, **cell)
    return results_files.document(
        method,
        dataclasses.asdict(config),
        data,
        [one],
        METRIC,
        provenance=provenance,
        **extra,
        **fields,
    )
