"""``Federated``: the base of a method whose round is the engine's ``federated_round`` (its
subclass gives the clients' side, the initial models and the evaluation)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from foltr_jax.engine.serving import check_scale
from foltr_jax.engine.shared_round import federated_round, flatten, round_keys
from foltr_jax.server import pipeline


class Federated:
    """A method whose round is the engine's ``federated_round`` and whose state is (the
    slots' models, the server chain's state): a subclass (a frozen dataclass with a
    ``config`` built on ``config.RunConfig``) gives

    - ``init_params(consts, init_keys)``: the slots' initial models (leaves [n_slots, ...]);
    - ``clients(inputs, start, size) -> Sent`` with ``inputs`` = (consts, the slots'
      models, the round's keys [n_slots]): its clients' side of a round;
    - ``evaluate_params(consts, params)``: the offline metrics named ``offline``;

    and may change ``sends_updates`` (clients send models by default), ``online`` (the
    names of ``Sent.online``'s sums, means over its ``count``), ``optimizer(settings)`` (the
    server optimiser, none by default), ``slot_settings(consts)`` (the traced values the
    server's side reads, leading axis n_slots: a value that is not part of the compiled
    program) and ``extras(consts, state)``.  The rest of
    ``engine.Method`` is here: keys, the server pipeline of the config's attack,
    aggregator and malicious clients, devices and chunks (checked when the method is
    made: ``check_scale``), the evaluation cadence and the interactions simulated
    (clients × ``local_updates`` × rounds × runs).
    """

    config: Any  # the subclass's field
    sends_updates = False
    offline: tuple[str, ...] = ("offline_ndcg", "offline_mrr")
    online: tuple[str, ...] = ("online_ndcg",)

    def __post_init__(self):
        check_scale(self.config, self.stages())

    def optimizer(self, settings=None):
        """The server optimiser: none.  ``settings``: one slot's ``slot_settings``, None
        where only the pipeline's form matters (its state before round 1, the checks)."""

    def slot_settings(self, consts):
        """What one slot's server pipeline reads as traced values (leaves [n_slots, ...]),
        or None: nothing."""

    def stages(self, settings=None) -> tuple:
        """The server's pipeline: the config's attack → its aggregator →
        ``optimizer(settings)``."""
        cfg = self.config
        return pipeline.server_stages(
            attack_names=(cfg.model_attack,) if cfg.model_attack else (),
            aggregator_names=(cfg.aggregator,),
            squared_distances=cfg.krum_squared_distances,
            max_malicious=cfg.n_malicious,
            optimizer=self.optimizer(settings),
        )

    def repetitions(self) -> np.ndarray:
        return np.arange(self.config.n_runs)

    def init(self, consts, init_keys):
        params = self.init_params(consts, init_keys)
        return consts, (params, jax.vmap(pipeline.chain(*self.stages()).init)(flatten(params)))

    def evaluate(self, consts, state):
        return self.evaluate_params(consts, state[0])

    def round(self, consts, state, slot_keys, t, evaluate_now):
        cfg = self.config
        params, server_state = state
        keys = round_keys(slot_keys, t)
        params, server_state, metrics, _ = federated_round(
            self.clients,
            (consts, params, keys),
            params,
            server_state,
            keys,
            n_clients=cfg.n_round_clients,
            stages=self.stages,
            settings=self.slot_settings(consts),
            evaluate=lambda p, _: self.evaluate_params(consts, p),
            evaluate_now=evaluate_now,
            sends_updates=self.sends_updates,
            n_malicious=cfg.n_malicious,
            client_chunk=cfg.client_chunk,
            n_devices=cfg.n_devices,
            offline=self.offline,
            online=self.online,
        )
        return (params, server_state), metrics

    def extras(self, consts, state) -> dict:
        return {}

    def finish(self, consts, state, curves):
        cfg = self.config
        interactions = cfg.n_runs * cfg.n_round_clients * cfg.local_updates * cfg.rounds
        return jax.device_get(state[0]), self.extras(consts, state), interactions
