"""The round every method shares, and the run that drives it.

A method supplies its clients' side of a round as a pure function over the stacked
client axis, ``train(start, size) -> Sent``: what the clients at positions
``start .. start + size - 1`` send in every run slot (FPDGD: the models after B PDGD
steps; FOLtR-ES: the antithetic gradient estimates; FedIPS: the IPS-weighted SGD
updates; the unlearning replay: the calibrated replay updates).  ``serve`` calls it
for every client at once, or ``client_chunk`` at a time under ``lax.scan`` through
the server pipeline's streaming form (``pipeline.stream_part``; an unchunked round is
the one-chunk case of the same code), and runs every slot's server pipeline (attack →
privacy → aggregation → server optimiser) on the messages with its state.
``offline_when`` evaluates the new models on the rounds ``eval_every`` asks for, and
``scan_rounds`` runs rounds under ``lax.scan`` for ``loop.scan_in_chunks``.

The engine's modules, one concern each: ``serving`` (what the clients send, ``serve``,
devices and chunks), ``shared_round`` (``federated_round``: keys, evaluation cadence,
metrics, flat models), ``federated`` (the ``Federated`` base of a method), ``runner``
(the ``Method`` protocol and ``run``), ``results`` (``RunResult``), ``method_registry``
(methods by name), ``config`` (the settings every method shares), ``lists`` (the list
helpers every method shares), ``loop`` (compiled chunks, progress, checkpoints) and
``results_files`` (results.json and the folder a run writes it in).
Their names are the engine's: ``engine.run``, ``engine.Federated``, ``engine.serve``...
"""

from foltr_jax.engine import config, lists  # the shared settings and list helpers: engine.lists
from foltr_jax.engine.config import ConfigError
from foltr_jax.engine.federated import Federated, RoundEnd, RoundStart
from foltr_jax.engine.method_registry import METHODS, MethodEntry, register_method
from foltr_jax.engine.results import RunResult
from foltr_jax.engine.runner import Method, run, run_chunk, run_chunk_jit, select_evaluated
from foltr_jax.engine.serving import (
    Sent,
    check_devices,
    check_memory,
    check_scale,
    check_streams,
    device_mesh,
    on_devices,
    on_mesh,
    serve,
    slots_on_devices,
)
from foltr_jax.engine.shared_round import (
    client_keys,
    evaluate_slots,
    evaluated_rounds,
    federated_round,
    flatten,
    is_evaluated,
    metrics_type,
    offline_when,
    round_keys,
    round_metrics,
    scan_rounds,
    server_keys,
    unflatten,
    unraveller,
)

__all__ = [
    "METHODS",
    "ConfigError",
    "Federated",
    "Method",
    "MethodEntry",
    "RoundEnd",
    "RoundStart",
    "RunResult",
    "Sent",
    "check_devices",
    "check_memory",
    "check_scale",
    "check_streams",
    "client_keys",
    "config",
    "device_mesh",
    "evaluate_slots",
    "evaluated_rounds",
    "federated_round",
    "flatten",
    "is_evaluated",
    "lists",
    "metrics_type",
    "offline_when",
    "on_devices",
    "on_mesh",
    "register_method",
    "round_keys",
    "round_metrics",
    "run",
    "run_chunk",
    "run_chunk_jit",
    "scan_rounds",
    "select_evaluated",
    "serve",
    "server_keys",
    "slots_on_devices",
    "unflatten",
    "unraveller",
]
