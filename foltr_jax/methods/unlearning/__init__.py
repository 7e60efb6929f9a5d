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
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from typing import NamedTuple

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np

from foltr_jax import engine
from foltr_jax.engine import loop
from foltr_jax.methods.fpdgd import federation
from foltr_jax.server import attacks, pipeline
from foltr_jax.methods.fpdgd.config import RunSettings
from foltr_jax.methods.fpdgd.rounds import (
    Arrays,
    Spec,
    _Round,
    evaluate,
    first_step_scores,
    history_length,
    train_clients,
)

NEGATION_Z = attacks.NEGATION_Z  # z of the malicious client to forget (§3.4)
_REPLAY_STREAM = 0x554E4C52  # separates replay randomness from training randomness


@dataclasses.dataclass(frozen=True)
class UnlearningConfig:
    """An unlearning experiment (defaults: unlearning paper §4, Table 3)."""

    federation: federation.FederationConfig = dataclasses.field(
        default_factory=lambda: federation.FederationConfig(
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
    """(Spec, Arrays) of the training of one configuration ('honest', 'malicious' or
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
    Returns (Spec, Arrays, RunResult); slot = click model index × n_runs + run.
    """
    spec, arrays = build_training(config, train_set, test_set, kind)
    return spec, arrays, federation.run(spec, arrays, progress, checkpoint=checkpoint)


def history_bytes(rounds: int, every: int, n_clients: int, n_params: int) -> int:
    """Memory of one run's stored updates: ⌈T/Δt⌉ × clients × parameters × 4 bytes."""
    return history_length(rounds, every) * n_clients * n_params * 4


def calibrate(new_updates: jax.Array, stored_updates: jax.Array) -> jax.Array:
    """ΔM^unlearn = ‖ΔM‖ · ΔM′ / ‖ΔM′‖ per row (unlearning paper eq. 2); 0 where ΔM′ = 0."""
    new_norm = jnp.linalg.norm(new_updates, axis=-1, keepdims=True)
    stored_norm = jnp.linalg.norm(stored_updates, axis=-1, keepdims=True)
    return jnp.where(
        new_norm > 0, stored_norm * new_updates / jnp.where(new_norm > 0, new_norm, 1.0), 0.0
    )


def unlearning_round(global_model, new_updates, stored_updates, weights):
    """M ← M + Σ_i w_i ΔM_i^unlearn / Σ_i w_i (eqs. 1-2); forgotten clients have w_i = 0.

    One slot of the replay's server chain (``replay_stages``) on the models the clients
    send (M + their new updates)."""
    zeros = jnp.zeros_like(global_model)
    sent = pipeline.ClientUpdates(global_model + new_updates, weights, zeros, 0, zeros)
    chain = pipeline.chain(*replay_stages((stored_updates, global_model)))
    out, _ = chain.update(chain.init(zeros), sent, jax.random.PRNGKey(0))
    return global_model + out.aggregate


class ReplayResult(engine.RunResult):
    """``engine.run``'s result for the replay, slot = cell index × n_runs + run; its
    extras: ``cells`` [(click model, n′, Δt) per cell] and ``rounds`` [n_cells] ⌈T/Δt⌉,
    the replayed rounds of each cell.  ``offline_ndcg`` and ``offline_mrr`` are
    [n_slots, max ⌈T/Δt⌉], NaN after a cell's own rounds; ``interactions`` counts what
    the cells need (without the grid's idle padding)."""

    def final_offline_ndcg(self) -> np.ndarray:
        """[n_cells, n_runs] nDCG@10 after each cell's last replayed round."""
        n_cells = len(self.cells)
        curves = self.offline_ndcg.reshape(n_cells, -1, self.offline_ndcg.shape[1])
        return np.stack([curves[c, :, self.rounds[c] - 1] for c in range(n_cells)])


class _ReplayConsts(NamedTuple):
    arrays: Arrays
    history: jax.Array  # [n_history_slots, L, n_clients, d]
    history_slot: jax.Array  # int [n_slots]
    stride: jax.Array  # int [n_slots] Δt / store_every
    rounds: jax.Array  # int [n_slots] ⌈T/Δt⌉
    local_steps: jax.Array  # int [n_slots] n′
    settings: RunSettings  # [n_slots]: the cell's click model, the forgotten clients absent
    slot_keys: jax.Array  # [n_slots] the replay's own keys (not engine.run's training keys)


def _unravel(spec: Spec):
    """Turns a flat parameter vector back into the ranker's parameter pytree."""
    shapes = jax.eval_shape(spec.ranker.init, jax.random.PRNGKey(0))
    zeros = jax.tree_util.tree_map(lambda x: jnp.zeros(x.shape, x.dtype), shapes)
    return jax.flatten_util.ravel_pytree(zeros)[1]


def calibration(stored, global_models) -> pipeline.Stage:
    """The replay's calibration stage (eq. 2), first in its server chain: each client's
    new update, its model − the global model it started from (``global_models`` [d]),
    rescaled to the norm of its stored update (``stored`` [n_clients, d], the rows from
    the messages' ``first_client`` on); the messages become these updates.  It changes
    each client's row on its own, so a round streams over client chunks."""

    def apply(updates: pipeline.ClientUpdates, key):
        rows = jax.lax.dynamic_slice_in_dim(stored, updates.first_client, updates.models.shape[0])
        return updates._replace(models=calibrate(updates.models - global_models, rows))

    return pipeline.stateless(apply, name="calibration", per_client=True)


def replay_stages(settings) -> tuple:
    """One slot's server chain of the replay: calibration, then FedAvg of the calibrated
    updates (eq. 1; the forgotten clients weigh 0).  ``settings`` = (the slot's stored
    updates of the replayed round [n_clients, d], its global model [d])."""
    return (calibration(*settings),) + pipeline.server_stages()


@dataclasses.dataclass(frozen=True)
class Replay:
    """The replay as ``engine.run`` takes it (``engine.Method``): every cell's runs are
    run slots, round s replays the stored round 1 + s·Δt (n′ local steps, calibration,
    FedAvg) and a slot whose ⌈T/Δt⌉ rounds are done keeps its model.

    ``config`` is the engine's view: the training's, with ``rounds`` the longest cell's
    ⌈T/Δt⌉ and every round evaluated (each cell's own last round is its result).  The
    slots start from the training's initial models (``loop.run_keys``' initialisation
    keys, §3.2 step 1) and draw their interactions from their own stream,
    fold_in(repetition key, _REPLAY_STREAM), carried in the constants."""

    config: federation.FederationConfig
    spec: Spec  # the malicious training's, with local_updates = max n′ and a setting per cell
    cells: tuple  # (click model, n′, Δt) per cell
    cell_rounds: tuple  # ⌈T/Δt⌉ per cell
    n_forget: int

    offline = ("offline_ndcg", "offline_mrr")  # NaN once a cell's rounds are done

    def repetitions(self) -> np.ndarray:
        return np.tile(np.arange(self.config.n_runs), len(self.cells))

    def init(self, consts: _ReplayConsts, init_keys):
        return consts, engine.flatten(jax.vmap(self.spec.ranker.init)(init_keys))

    def evaluate(self, consts: _ReplayConsts, flat_global):
        unravel = _unravel(self.spec)
        return jax.vmap(lambda p: evaluate(self.spec, consts.arrays, unravel(p)))(flat_global)

    def round(self, consts: _ReplayConsts, flat_global, train_keys, s, evaluate_now):
        """Replayed round s of every slot (``engine.serve``); ``train_keys`` are unused:
        the replay's keys are ``consts.slot_keys``."""
        spec, arrays = self.spec, consts.arrays
        step_keys = engine.round_keys(consts.slot_keys, s)
        params = jax.vmap(_unravel(spec))(flat_global)
        rnd = _Round(
            consts.settings,
            step_keys,
            params,
            first_step_scores(spec, arrays, params),
            None,
            consts.local_steps,
        )
        index = jnp.minimum(s * consts.stride, consts.history.shape[1] - 1)
        stored = consts.history[consts.history_slot, index]  # [n_slots, n_clients, d]
        replayed, _, metrics, _ = engine.federated_round(
            lambda inputs, start, size: train_clients(spec, *inputs, start, size),
            (arrays, rnd),
            flat_global,
            jax.vmap(pipeline.chain(*replay_stages((None, None))).init)(jnp.zeros_like(flat_global)),
            step_keys,
            n_clients=self.config.n_clients,
            stages=replay_stages,
            settings=(stored, flat_global),
            evaluate=lambda p, _: self.evaluate(consts, p),
            evaluate_now=evaluate_now,
            sends_updates=True,
            client_chunk=spec.config.client_chunk,
            n_devices=1,  # FPDGD's client training splits its lanes over the devices itself
            offline=self.offline,
            online=(),
        )
        active = s < consts.rounds
        flat_global = jnp.where(active[:, None], replayed, flat_global)
        nan = jnp.float32(jnp.nan)
        return flat_global, type(metrics)(*(jnp.where(active, m, nan) for m in metrics))

    def finish(self, consts: _ReplayConsts, flat_global, curves):
        cfg = self.config
        remaining = cfg.n_clients - self.n_forget
        interactions = sum(
            remaining * steps * rounds
            for (_, steps, _), rounds in zip(self.cells, self.cell_rounds)
        )
        final = jax.device_get(jax.vmap(_unravel(self.spec))(flat_global))
        extras = {"cells": list(self.cells), "rounds": np.asarray(self.cell_rounds)}
        return final, extras, interactions * cfg.n_runs


def replay(
    config: UnlearningConfig,
    spec: Spec,
    arrays: Arrays,
    history: np.ndarray,
    progress=None,
    checkpoint: str | None = None,
) -> ReplayResult:
    """Unlearns ``config.forget_clients`` for every cell of ``config.cells()``
    (``engine.run`` of ``Replay``).

    Args:
        spec, arrays, history: from ``train(config, ..., 'malicious')`` (its
            RunResult.history, [n_click_models × n_runs, L, n_clients, d]).
        checkpoint: a file where the replay saves its state after every chunk of
            rounds and from which an interrupted replay resumes
            (``loop.scan_in_chunks``).
    """
    config.validate()
    cfg = config.federation
    cells = config.cells()
    n_runs = cfg.n_runs
    every = config.store_every
    if history is None or history.shape[1] != history_length(cfg.rounds, every):
        raise ValueError("history must come from train(config, ..., 'malicious')")
    replay_config = dataclasses.replace(cfg, local_updates=max(config.unlearn_local_updates))
    rounds = [history_length(cfg.rounds, dt) for _, _, dt in cells]
    method = Replay(
        config=dataclasses.replace(replay_config, rounds=max(rounds), eval_every=1),
        spec=dataclasses.replace(
            spec, config=replay_config, n_settings=len(cells), history_every=0, attack_names=()
        ),
        cells=tuple(cells),
        cell_rounds=tuple(rounds),
        n_forget=config.n_forget,
    )
    click_names = federation.click_table_names(config.click_models)
    per_cell = lambda values: jnp.repeat(jnp.asarray(values, jnp.int32), n_runs)
    runs = method.repetitions()
    consts = _ReplayConsts(
        arrays=arrays,
        history=jnp.asarray(history),
        history_slot=per_cell([config.click_models.index(c) for c, _, _ in cells]) * n_runs
        + jnp.asarray(runs),
        stride=per_cell([dt // every for _, _, dt in cells]),
        rounds=per_cell(rounds),
        local_steps=per_cell([steps for _, steps, _ in cells]),
        settings=jax.tree_util.tree_map(
            lambda x: jnp.repeat(x, n_runs),
            federation.run_settings(
                method.spec,
                [federation.Setting(click_model=c, n_absent=config.n_forget) for c, _, _ in cells],
                click_names,
            ),
        ),
        slot_keys=jax.vmap(lambda k: jax.random.fold_in(k, _REPLAY_STREAM))(
            loop.repetition_keys(cfg.seed, runs)
        ),
    )
    result = engine.run(method, consts, progress, checkpoint)
    return ReplayResult(**vars(result))


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
