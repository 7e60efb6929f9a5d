"""What results.json records of the unlearning experiment (unlearning paper, ECIR 2024, §4):
a cell per training and click model (Figure 2), a cell per replayed (click model, n′, Δt)
(Figure 3, Table 3) with its efficiency, the stored history's size, each part's wall time,
the interactions, and the experiment's config; ``results_document`` puts them into the
whole file (``engine.results_files``' structure).  Example::

    protocol = foltr_jax.run_unlearning(config, train, test)
    written = experiment.results_document(
        config, protocol, results_files.data_summary({}, train, test)
    )
"""

from __future__ import annotations

import dataclasses

import numpy as np

from foltr_jax.engine import results_files
from foltr_jax.engine.config import resolved
from foltr_jax.methods.unlearning import (
    KINDS,
    NEGATION_Z,
    ProtocolResult,
    ReplayResult,
    UnlearningConfig,
    efficiency,
    history_bytes,
)

__all__ = [
    "METHOD",
    "config_record",
    "history_record",
    "interactions_record",
    "results_document",
    "stats",
    "training_cells",
    "unlearning_cells",
    "wall_seconds_record",
]

METHOD = "fpdgd/unlearning"  # results.json's "method"


def stats(values) -> dict:
    """Mean and sample sd (0 for one value) of ``values``."""
    values = np.asarray(values, np.float64)
    sd = float(values.std(ddof=1)) if len(values) > 1 else 0.0
    return {"mean": float(values.mean()), "sd": sd}


def training_cells(config: UnlearningConfig, trained: dict) -> list[dict]:
    """A cell per trained configuration (``KINDS``, ``trained[kind]`` its RunResult) and
    click model (paper Figure 2, drawn in every figure): curves and final nDCG@10."""
    labels = config.labels()
    cells = []
    for kind in KINDS:
        result = trained[kind]
        curves = result.per_setting(result.offline_ndcg, len(config.click_models))
        for c, click in enumerate(config.click_models):
            final = curves[c, :, -1]
            cells.append(
                results_files.cell(
                    f"{labels[kind]} {click}",
                    setting={"configuration": labels[kind], "click_model": click},
                    labels=results_files.labels(
                        labels[kind], click, group="unlearning", figure=None, config=False
                    ),
                    evaluated_rounds=results_files.evaluated_rounds(config.federation, result),
                    curves={"offline_ndcg": curves[c].tolist()},
                    per_run={"final_offline_ndcg": final.tolist()},
                    summary={f"final_{k}": v for k, v in stats(final).items()},
                )
            )
    return cells


def unlearning_cells(config: UnlearningConfig, replayed: ReplayResult) -> list[dict]:
    """A cell per unlearning cell (click model, n′, Δt; paper Figure 3 and Table 3, a
    figure per Δt): curves, final nDCG@10, efficiency (``efficiency``)."""
    finals = replayed.final_offline_ndcg()
    curves = replayed.offline_ndcg.reshape(len(replayed.cells), config.federation.n_runs, -1)
    name = config.labels()["unlearned"]
    cells = []
    for i, (click, steps, delta) in enumerate(replayed.cells):
        rounds = int(replayed.rounds[i])
        cells.append(
            results_files.cell(
                f"{name} {click} n′={steps} Δt={delta}",
                setting={
                    "configuration": name,
                    "click_model": click,
                    "unlearn_local_updates": steps,
                    "delta_t": delta,
                },
                labels=results_files.labels(
                    name,
                    click,
                    group="unlearning",
                    figure=f"Δt={delta}",
                    fields={"n′": steps, "Δt": delta},
                    always=("method", "n′", "Δt"),
                    config=False,
                ),
                evaluated_rounds=range(1, rounds + 1),
                curves={"offline_ndcg": curves[i, :, :rounds].tolist()},
                per_run={"final_offline_ndcg": finals[i].tolist()},
                summary={f"final_{k}": v for k, v in stats(finals[i]).items()},
                efficiency=efficiency(config, steps, delta),
            )
        )
    return cells


def history_record(config: UnlearningConfig, history) -> dict:
    """The stored update history (the malicious training's ``history``): its shape and
    bytes per run, and with 1000 clients."""
    cfg, n_params = config.federation, history.shape[-1]
    return {
        "store_every": config.store_every,
        "shape_per_run": list(history.shape[1:]),
        "bytes_per_run": history_bytes(cfg.rounds, config.store_every, cfg.n_clients, n_params),
        "bytes_per_run_1000_clients": history_bytes(cfg.rounds, config.store_every, 1000, n_params),
    }


def wall_seconds_record(config: UnlearningConfig, protocol: ProtocolResult) -> dict:
    """Each training's and the unlearning grid's wall time (their ``run_seconds``), and
    what they cover."""
    trained, replayed = protocol
    return {
        "honest_training": trained["honest"].run_seconds,
        "malicious_training_with_history": trained["malicious"].run_seconds,
        "retraining_from_scratch": trained["retrained"].run_seconds,
        "unlearning_grid": replayed.run_seconds,
        "unlearning_compile": replayed.compile_seconds,
        "note": (
            f"each figure covers {len(config.click_models)} click model(s) x "
            f"{config.federation.n_runs} run(s); the grid replays {len(replayed.cells)} cells, "
            f"each padded to the longest (Δt = {min(config.delta_t)})"
        ),
    }


def interactions_record(config: UnlearningConfig, protocol: ProtocolResult) -> dict:
    """The interactions of retraining without the forgotten clients (the retrained
    training's, less the absent clients' share) and of the whole unlearning grid."""
    trained, replayed = protocol
    n = config.federation.n_clients
    return {
        "retraining_from_scratch": trained["retrained"].interactions * (n - config.n_forget) // n,
        "unlearning_grid": replayed.interactions,
    }


def config_record(config: UnlearningConfig) -> dict:
    """results.json's "config": the federation's fields (what it leaves to the backend
    as it runs here, ``engine.config.resolved``), the grid and z."""
    return {
        **dataclasses.asdict(resolved(config.federation)),
        "click_models": list(config.click_models),
        "forget_clients": list(config.forget_clients),
        "delta_t": list(config.delta_t),
        "unlearn_local_updates": list(config.unlearn_local_updates),
        "z": NEGATION_Z,
    }


def results_document(
    config: UnlearningConfig,
    protocol: ProtocolResult,
    data: dict,
    *,
    timings: dict | None = None,
    provenance: dict | None = None,
) -> dict:
    """The whole results.json of ``protocol`` (``run_protocol``'s, or
    ``foltr_jax.run_unlearning``'s, result of ``config``): the config, ``data`` (e.g.
    ``results_files.data_summary``), the training and unlearning cells, the
    configurations' labels, the history, the wall seconds, ``timings`` (default:
    ``results_files.timings()``, nothing resumed) and the interactions; ``provenance``:
    what made the run (the binary's; none by default).  ValueError when ``protocol``
    is not a run of ``config`` (other cells or kinds)."""
    trained, replayed = protocol
    cells = [tuple(cell) for cell in replayed.cells]
    if set(trained) != set(KINDS) or cells != config.cells():
        raise ValueError(
            f"the protocol's trainings {sorted(trained)} and cells {cells} "
            f"are not those of the config ({sorted(KINDS)}, {config.cells()})"
        )
    return results_files.document(
        METHOD,
        config_record(config),
        data,
        training_cells(config, trained) + unlearning_cells(config, replayed),
        provenance=provenance,
        labels=config.labels(),
        history=history_record(config, trained["malicious"].history),
        wall_seconds=wall_seconds_record(config, protocol),
        timings=results_files.timings() if timings is None else timings,
        interactions=interactions_record(config, protocol),
    )
