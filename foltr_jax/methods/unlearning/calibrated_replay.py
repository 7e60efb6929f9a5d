"""The unlearning replay (unlearning paper §3.2, eqs. 1-2; FedEraser): the stored update
history replayed without the clients to forget, FPDGD's own client training for n′ steps
from the current global model (``rounds.train_clients``) followed by the ``calibration``
stage in the server chain (each new update rescaled to the stored update's norm), then
FedAvg.  One ``lax.scan`` over the history for every cell of the grid at once.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from foltr_jax import engine
from foltr_jax.engine import loop
from foltr_jax.engine.config import static_part
from foltr_jax.methods.fpdgd import federation
from foltr_jax.methods.fpdgd.config import TRACED_FIELDS, TracedSettings
from foltr_jax.methods.fpdgd.rounds import (
    FpdgdArrays,
    FpdgdMethod,
    _Round,
    evaluate,
    first_step_scores,
    history_length,
    train_clients,
)
from foltr_jax.server import pipeline

if TYPE_CHECKING:  # the package imports this module: its config only for annotations
    from foltr_jax.methods.unlearning import UnlearningConfig

_REPLAY_STREAM = 0x554E4C52  # separates replay randomness from training randomness


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
    arrays: FpdgdArrays
    history: jax.Array  # [n_history_slots, L, n_clients, d]
    history_slot: jax.Array  # int [n_slots]
    stride: jax.Array  # int [n_slots] Δt / store_every
    rounds: jax.Array  # int [n_slots] ⌈T/Δt⌉
    local_steps: jax.Array  # int [n_slots] n′
    settings: TracedSettings  # [n_slots]: the cell's click model, the forgotten clients absent
    slot_keys: jax.Array  # [n_slots] the replay's own keys (not engine.run's training keys)


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
class Replay(engine.Federated):
    """The replay as ``engine.run`` takes it (``engine.Federated``'s hooks): every cell's
    runs are run slots, round s replays the stored round 1 + s·Δt (n′ local steps,
    calibration, FedAvg) and a slot whose ⌈T/Δt⌉ rounds are done keeps its model.

    ``config`` is the engine's view: the training's, with ``rounds`` the longest cell's
    ⌈T/Δt⌉ and every round evaluated (each cell's own last round is its result).  The
    slots start from the training's initial models (``loop.run_keys``' initialisation
    keys, §3.2 step 1) and draw their interactions from their own stream,
    fold_in(repetition key, _REPLAY_STREAM), carried in the constants."""

    config: federation.FpdgdConfig
    spec: (
        FpdgdMethod  # the malicious training's, with local_updates = max n′ and a setting per cell
    )
    cells: tuple  # (click model, n′, Δt) per cell
    cell_rounds: tuple  # ⌈T/Δt⌉ per cell
    n_forget: int

    offline = ("offline_ndcg", "offline_mrr")  # NaN once a cell's rounds are done
    online = ()
    sends_updates = True
    client_devices = 1  # FPDGD's client training splits its lanes over the devices itself

    def check(self) -> None:
        """Nothing: the training's config was checked when it was built."""

    def stages(self, settings=None) -> tuple:
        return replay_stages((None, None) if settings is None else settings)

    def repetitions(self) -> np.ndarray:
        return np.tile(np.arange(self.config.n_runs), len(self.cells))

    def init(self, consts: _ReplayConsts, init_keys):
        return consts, engine.flatten(jax.vmap(self.spec.ranker.init)(init_keys))

    def evaluate_params(self, consts: _ReplayConsts, flat_global):
        unravel = engine.unraveller(self.spec.ranker)
        return jax.vmap(lambda p: evaluate(self.spec, consts.arrays, unravel(p)))(flat_global)

    def evaluate(self, consts: _ReplayConsts, flat_global):
        return self.evaluate_params(consts, flat_global)

    def round_keys(self, consts: _ReplayConsts, slot_keys, s):
        """The replay's own keys (``consts.slot_keys``), not ``engine.run``'s."""
        return engine.round_keys(consts.slot_keys, s)

    def begin_round(self, consts: _ReplayConsts, flat_global, keys, s) -> engine.RoundStart:
        """Replayed round s: the slots' clients train n′ steps from the global models, and
        each slot's server chain (a fresh one) calibrates with its stored updates of round
        1 + s·Δt."""
        spec, arrays = self.spec, consts.arrays
        params = jax.vmap(engine.unraveller(spec.ranker))(flat_global)
        rnd = _Round(
            consts.settings,
            keys,
            params,
            first_step_scores(spec, arrays, params),
            None,
            consts.local_steps,
        )
        index = jnp.minimum(s * consts.stride, consts.history.shape[1] - 1)
        stored = consts.history[consts.history_slot, index]  # [n_slots, n_clients, d]
        server = jax.vmap(pipeline.chain(*self.stages()).init)(jnp.zeros_like(flat_global))
        return engine.RoundStart((arrays, rnd), flat_global, server, (stored, flat_global))

    def clients(self, inputs, start, size: int) -> engine.Sent:
        # call-arg: mypy takes *inputs, of unknown length, to fill every place
        return train_clients(self.spec, *inputs, start, size)  # type: ignore[call-arg]

    def end_round(self, consts: _ReplayConsts, flat_global, start, s, end: engine.RoundEnd):
        """A slot whose rounds are done keeps its model and reports NaN."""
        active = s < consts.rounds
        flat_global = jnp.where(active[:, None], end.params, flat_global)
        nan = jnp.float32(jnp.nan)
        return flat_global, type(end.metrics)(*(jnp.where(active, m, nan) for m in end.metrics))

    def finish(self, consts: _ReplayConsts, flat_global, curves):
        cfg = self.config
        remaining = cfg.n_clients - self.n_forget
        interactions = sum(
            remaining * steps * rounds
            for (_, steps, _), rounds in zip(self.cells, self.cell_rounds)
        )
        final = jax.device_get(jax.vmap(engine.unraveller(self.spec.ranker))(flat_global))
        extras = {"cells": list(self.cells), "rounds": np.asarray(self.cell_rounds)}
        return final, extras, interactions * cfg.n_runs


def replay(
    config: UnlearningConfig,
    spec: FpdgdMethod,
    arrays: FpdgdArrays,
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
        config=static_part(
            dataclasses.replace(replay_config, rounds=max(rounds), eval_every=1), TRACED_FIELDS
        ),
        spec=dataclasses.replace(
            spec,
            config=static_part(replay_config, TRACED_FIELDS),
            n_settings=len(cells),
            history_every=0,
            attack_names=(),
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
                replay_config,
            ),
        ),
        slot_keys=jax.vmap(lambda k: jax.random.fold_in(k, _REPLAY_STREAM))(
            loop.repetition_keys(cfg.seed, runs)
        ),
    )
    result = engine.run(method, consts, progress, checkpoint)
    return ReplayResult(**vars(result))
