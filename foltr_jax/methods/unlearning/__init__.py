"""Unlearning a client from FOLTR (unlearning paper, ECIR 2024, §3; FedEraser).

Training stores every client's local update ΔM_{i,t} at rounds 1, 1 + Δt, ...
(``federation.build(..., history_every=Δt)``).  To forget clients F, the server
replays those ⌈T/Δt⌉ rounds from the initial model: every remaining client does
n′ local PDGD steps from the current global model on fresh interactions (FPDGD's own
client training, ``rounds.train_clients``), and the replay's server chain rescales
each new update to the stored update's norm (eq. 2, the ``calibration`` stage) and
aggregates with FedAvg (eq. 1).  The replay is one ``lax.scan`` over the stored history;
F is a set of positions, so forgetting one client or several is one program.

Evaluation (§3.4): the clients to forget are malicious, M = −z·M_local with
z = 2 (eqs. 3-4).  Configurations: 10H-0M (all honest), 9H-1M (with the
malicious client), 9H-0M (retrained from scratch without it) and U(9H-1M)
(9H-1M after unlearning).  A grid of click models × n′ × Δt (Table 3) replays
in one vmapped program: the history is stored every gcd(Δt) rounds and each
cell reads every (Δt / gcd)-th entry, idling once its ⌈T/Δt⌉ rounds are done.

This module is the protocol (its config, the three trainings, the efficiency and
``run_protocol``); the replay is ``calibrated_replay`` (its names are here too); what
results.json records of it is ``experiment`` (its ``results_document`` is here too).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from typing import NamedTuple

import numpy as np

from foltr_jax import engine
from foltr_jax.methods.fpdgd import federation
from foltr_jax.methods.fpdgd.rounds import history_length
from foltr_jax.methods.unlearning.calibrated_replay import (  # the replay's names, here too
    ReplayResult,
    calibrate,
    history_bytes,
    replay,
)
from foltr_jax.server import attacks

__all__ = [
    "KINDS",
    "NEGATION_Z",
    "ProtocolResult",
    "ReplayResult",
    "UnlearningConfig",
    "build_training",
    "calibrate",
    "efficiency",
    "history_bytes",
    "replay",
    "results_document",
    "run_protocol",
    "train",
    "training_settings",
]

NEGATION_Z = attacks.NEGATION_Z  # z of the malicious client to forget (§3.4)


@dataclasses.dataclass(frozen=True)
class UnlearningConfig:
    """An unlearning experiment (defaults: unlearning paper §4, Table 3)."""

    federation: federation.FpdgdConfig = dataclasses.field(
        default_factory=lambda: federation.FpdgdConfig(
            n_clients=10, local_updates=5, rounds=10_000, chunk_rounds=500
        )
    )
    click_models: tuple = ("perfect", "navigational", "informational")
    forget_clients: tuple = (0,)  # client ids to remove; they are the malicious ones
    delta_t: tuple = (5, 10, 20)  # Δt: updates stored every Δt rounds
    unlearn_local_updates: tuple = (1, 2, 3, 4)  # n′: local steps per replayed round

    def validate(self) -> UnlearningConfig:
        """Raises federation.ConfigError naming the field (= flag) that is out of range."""
        cfg = self.federation.validate()
        n, rounds = cfg.n_clients, cfg.rounds
        if not self.forget_clients:
            raise federation.ConfigError("forget_clients", "must name at least one client")
        for client in self.forget_clients:
            if not 0 <= client < n:
                raise federation.ConfigError(
                    "forget_clients", f"client id {client} is out of range [0, {n - 1}]"
                )
        if len(set(self.forget_clients)) != len(self.forget_clients):
            raise federation.ConfigError(
                "forget_clients", f"repeats a client: {self.forget_clients}"
            )
        if len(self.forget_clients) >= n:
            raise federation.ConfigError(
                "forget_clients", f"would remove all {n} clients; at least one must remain"
            )
        if not self.delta_t:
            raise federation.ConfigError("delta_t", "needs at least one value")
        for delta in self.delta_t:
            if not 1 <= delta <= rounds:
                raise federation.ConfigError(
                    "delta_t", f"Δt = {delta} must be between 1 and the {rounds} rounds"
                )
        if not self.unlearn_local_updates:
            raise federation.ConfigError("unlearn_local_updates", "needs at least one value")
        for steps in self.unlearn_local_updates:
            if steps < 1:
                raise federation.ConfigError(
                    "unlearn_local_updates", f"n′ must be at least 1, got {steps}"
                )
        if not self.click_models:
            raise federation.ConfigError("click_models", "needs at least one click model")
        for click in self.click_models:
            federation.Setting(click_model=click).validate(n)
        if cfg.aggregator != "fedavg" or cfg.attack != "none" or cfg.sensitivity > 0:
            raise federation.ConfigError(
                "aggregator", "unlearning replays FedAvg without attacks or privacy"
            )
        # the replay splits each round's (or chunk's) clients over the devices
        chunked = 0 < cfg.client_chunk < cfg.n_clients
        engine.check_devices(cfg.n_devices, cfg.client_chunk if chunked else cfg.n_clients)
        return self

    @property
    def n_forget(self) -> int:
        return len(self.forget_clients)

    @property
    def store_every(self) -> int:
        """The history interval that serves every Δt: their greatest common divisor."""
        return functools.reduce(math.gcd, self.delta_t)

    def client_order(self) -> np.ndarray:
        """Client ids by position: the forgotten clients first (the engine's malicious slots)."""
        rest = [c for c in range(self.federation.n_clients) if c not in self.forget_clients]
        return np.asarray(list(self.forget_clients) + rest, np.int32)

    def labels(self) -> dict:
        """Names of the configurations, e.g. 10H-0M, 9H-1M, 9H-0M, U(9H-1M)."""
        n, m = self.federation.n_clients, self.n_forget
        return {
            "honest": f"{n}H-0M",
            "malicious": f"{n - m}H-{m}M",
            "retrained": f"{n - m}H-0M",
            "unlearned": f"U({n - m}H-{m}M)",
        }

    def cells(self) -> list:
        """The replay grid: (click model, n′, Δt) for every combination."""
        return list(itertools.product(self.click_models, self.unlearn_local_updates, self.delta_t))


def training_settings(config: UnlearningConfig, kind: str) -> list:
    """Per click model, the Setting of 'honest', 'malicious' or 'retrained' training."""
    m = config.n_forget
    make = {
        "honest": lambda c: federation.Setting(click_model=c),
        "malicious": lambda c: federation.Setting(
            click_model=c, n_malicious=m, attack="scaled_negation"
        ),
        "retrained": lambda c: federation.Setting(click_model=c, n_absent=m),
    }[kind]
    return [make(click) for click in config.click_models]


def build_training(config: UnlearningConfig, train_set, test_set, kind: str):
    """(FpdgdMethod, FpdgdArrays) of the training of one configuration ('honest', 'malicious' or
    'retrained') for every click model; 'malicious' stores the update history."""
    config.validate()
    return federation.build(
        config.federation,
        train_set,
        test_set,
        training_settings(config, kind),
        history_every=config.store_every if kind == "malicious" else 0,
        client_ids=config.client_order(),
    )


def train(
    config: UnlearningConfig,
    train_set,
    test_set,
    kind: str,
    progress=None,
    checkpoint: str | None = None,
):
    """Federated training of one configuration for every click model.

    'malicious' training stores the update history the replay needs.
    ``checkpoint``: a file to save and resume the training from (``federation.run``).
    Returns (FpdgdMethod, FpdgdArrays, RunResult); slot = click model index × n_runs + run.
    """
    spec, arrays = build_training(config, train_set, test_set, kind)
    return spec, arrays, federation.run(spec, arrays, progress, checkpoint=checkpoint)


def efficiency(config: UnlearningConfig, local_steps: int, delta_t: int) -> dict:
    """Work per remaining client: unlearning vs retraining from scratch (§3.3).

    Unlearning: n′·⌈T/Δt⌉ local updates and ⌈T/Δt⌉ rounds; retraining: n·T and T.
    The reductions are (n / n′)·Δt and Δt when Δt divides T.
    """
    cfg = config.federation
    rounds = history_length(cfg.rounds, delta_t)
    return {
        "unlearning_local_updates": local_steps * rounds,
        "retraining_local_updates": cfg.local_updates * cfg.rounds,
        "unlearning_rounds": rounds,
        "retraining_rounds": cfg.rounds,
        "local_update_reduction": cfg.local_updates * cfg.rounds / (local_steps * rounds),
        "round_reduction": cfg.rounds / rounds,
    }


class ProtocolResult(NamedTuple):
    """The unlearning paper's comparison (§4, eqs. 3-4): each training's RunResult by kind
    ('honest' 10H-0M, 'malicious' 9H-1M with its update history, 'retrained' 9H-0M) and
    the replay of every cell, U(9H-1M)."""

    trained: dict
    replayed: ReplayResult


KINDS = ("honest", "malicious", "retrained")  # the trainings of the protocol, in order


def run_protocol(
    config: UnlearningConfig,
    train_set,
    test_set,
    progress=None,
    *,
    train_one=None,
    replay_one=None,
) -> ProtocolResult:
    """Trains the three configurations (``KINDS``) and unlearns ``config.forget_clients``
    from the malicious one in every cell (n′ × Δt × click model) of ``config.cells()``.

    ``train_one(kind, spec, arrays) -> RunResult`` runs one training (default:
    ``federation.run`` with ``progress``); ``replay_one(replay) -> ReplayResult`` runs the
    replay through ``replay(progress=..., checkpoint=...)`` (default: with ``progress``).
    A binary passes its own to reuse finished trainings, resume from checkpoints and
    report progress per phase; the protocol is the same.
    """
    if train_one is None:
        train_one = lambda kind, spec, arrays: federation.run(spec, arrays, progress)
    if replay_one is None:
        replay_one = lambda run: run(progress=progress)
    trained = {}
    for kind in KINDS:
        spec, arrays = build_training(config, train_set, test_set, kind)
        trained[kind] = train_one(kind, spec, arrays)
        if kind == "malicious":
            malicious = (spec, arrays)
    history = trained["malicious"].history
    replayed = replay_one(functools.partial(replay, config, *malicious, history))
    return ProtocolResult(trained, replayed)


# What results.json records of the protocol; it reads the names above.
from foltr_jax.methods.unlearning.experiment import results_document
