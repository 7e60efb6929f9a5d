"""``Federated``: the one contract of a method with the engine.  Its subclass gives the
clients' side, the initial models and the evaluation, and where it needs them the round's
hooks (``begin_round``, ``end_round``); the round itself is the engine's
``federated_round``, which no method calls."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from foltr_jax.engine.lists import ranking_quality
from foltr_jax.engine.serving import Sent, check_scale
from foltr_jax.engine.shared_round import (
    client_keys,
    evaluate_slots,
    federated_round,
    flatten,
    round_keys,
)
from foltr_jax.server import pipeline


class RoundStart(NamedTuple):
    """What a round of every slot starts from (``Federated.begin_round``)."""

    inputs: Any  # what ``clients(inputs, start, size)`` reads (replicated over devices)
    params: Any  # the slots' models the clients start from (leaves [n_slots, ...])
    server_state: Any  # the slots' server chain states
    settings: Any = None  # the slots' traced server settings (leading axis n_slots), or None
    n_malicious: Any = 0  # int [n_slots] (or one number): the first n_malicious attack
    own: Any = None  # what the method carries from its ``begin_round`` to its ``end_round``


class RoundEnd(NamedTuple):
    """What the engine's round gives back (``federated_round``): the new models, the new
    server states, the round's metrics and the clients' ``Sent.kept`` (unchunked rounds)."""

    params: Any
    server_state: Any
    metrics: Any
    kept: Any


class Federated:
    """A method as the engine runs it: a subclass (a frozen dataclass with a ``config``
    built on ``config.RunConfig``) gives

    - ``init_params(consts, init_keys)``: the slots' initial models (leaves [n_slots, ...]);
    - ``client_step(consts, params, key) -> (params, online)``: one interaction of one
      client (its model, its key), with the values named ``online`` (a value, or a tuple
      of them) the round's online metrics average; the engine runs ``local_updates`` of
      them for every client of every slot (``clients``);
    - ``score(params, features)``: the scores of one model, from which the engine's
      ``evaluate_params`` takes nDCG@k and MRR@k of ``consts.test`` (``lists.Lists``);

    and may change ``sends_updates`` (clients send models by default), ``online`` (the
    names of ``Sent.online``'s sums, means over its ``count``), ``optimizer(settings)`` (the
    server optimiser, none by default), ``slot_settings(consts)`` (the traced values the
    server's side reads, leading axis n_slots: a value that is not part of the compiled
    program) and ``extras(consts, state)``.  A method whose clients do more than steps
    from the global model gives ``clients(inputs, start, size) -> Sent`` itself, and its
    own ``evaluate_params(consts, params)``.  A method whose state holds more than (the
    slots' models, the server chain's state), or whose clients read more than the models
    and keys, gives the round's hooks instead of writing a round: ``begin_round`` (what
    the round starts from: ``RoundStart``), ``end_round`` (its state after the engine's
    round: ``RoundEnd``), ``evaluate_round`` (the offline metrics of the new models, with
    the clients' ``Sent.kept``), ``round_keys`` (its own key stream) and
    ``client_devices``.  The rest is the engine's (``round``): keys, the server pipeline
    of the config's attack, aggregator and malicious clients (``stages``), devices and
    chunks (checked when the method is made: ``check``), the evaluation cadence and the
    interactions simulated (clients × ``local_updates`` × rounds × runs).
    """

    config: Any  # the subclass's field
    sends_updates = False
    offline: tuple[str, ...] = ("offline_ndcg", "offline_mrr")
    online: tuple[str, ...] = ("online_ndcg",)

    def __post_init__(self):
        self.check()

    def check(self) -> None:
        """Raises ConfigError when the config's devices and chunks do not fit its server
        pipeline (``check_scale``)."""
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

    @property
    def client_devices(self) -> int:
        """The devices the engine splits a round's clients over (``on_devices``)."""
        return self.config.n_devices

    def repetitions(self) -> np.ndarray:
        return np.arange(self.config.n_runs)

    def init(self, consts, init_keys):
        params = self.init_params(consts, init_keys)
        return consts, (params, jax.vmap(pipeline.chain(*self.stages()).init)(flatten(params)))

    def evaluate(self, consts, state):
        return self.evaluate_params(consts, state[0])

    def evaluate_params(self, consts, params):
        """nDCG@k and MRR@k (k: the config's ``top_k``) of ranking ``consts.test`` by each
        slot's ``score`` (``evaluate_slots``)."""
        quality = functools.partial(ranking_quality, k=self.config.top_k)
        return evaluate_slots(self.score, quality, consts.test, params, self.config.n_devices)

    def clients(self, inputs, start, size: int) -> Sent:
        """The clients ``start .. start + size − 1`` of every slot: each takes
        ``local_updates`` steps (``client_step``, the b-th with fold_in(client key, b))
        from its slot's model and sends the model it ends with, weight 1, with the sums of
        its steps' ``online`` values and their ``count``."""
        consts, params, keys = inputs
        keys = client_keys(keys, start + jnp.arange(size))  # [n_slots, size]

        def client(params, key):
            step = lambda p, b: self.client_step(consts, p, jax.random.fold_in(key, b))
            return jax.lax.scan(step, params, jnp.arange(self.config.local_updates))

        models, values = jax.vmap(jax.vmap(client, in_axes=(None, 0)))(params, keys)
        values = values if isinstance(values, tuple) else (values,)
        online = {name: v.sum(axis=(1, 2)) for name, v in zip(self.online, values)}
        online["count"] = jnp.full(keys.shape[0], size * self.config.local_updates)
        return Sent(jax.vmap(flatten)(models), jnp.ones(keys.shape[:2]), online)

    def round_keys(self, consts, slot_keys, t):
        """[n_slots] the keys of round t: fold_in(slot key, t) (``shared_round.round_keys``)."""
        return round_keys(slot_keys, t)

    def begin_round(self, consts, state, keys, t) -> RoundStart:
        """What round t starts from: the state's (models, server state), the clients
        reading (consts, models, keys), the ``slot_settings`` and the config's attackers."""
        params, server_state = state
        settings = self.slot_settings(consts)
        return RoundStart(
            (consts, params, keys), params, server_state, settings, self.config.n_malicious
        )

    def evaluate_round(self, consts, params, kept):
        """The offline metrics of the round's new models (``evaluate_params``)."""
        return self.evaluate_params(consts, params)

    def end_round(self, consts, state, start: RoundStart, t, end: RoundEnd):
        """(the state after round t, its metrics): (new models, new server state)."""
        return (end.params, end.server_state), end.metrics

    def round(self, consts, state, slot_keys, t, evaluate_now):
        """Round t of every slot: ``begin_round``, the engine's ``federated_round`` of the
        method's ``clients`` and ``stages``, ``end_round``."""
        cfg = self.config
        keys = self.round_keys(consts, slot_keys, t)
        start = self.begin_round(consts, state, keys, t)
        end = federated_round(
            self.clients,
            start.inputs,
            start.params,
            start.server_state,
            keys,
            n_clients=cfg.n_round_clients,
            stages=self.stages,
            settings=start.settings,
            evaluate=lambda p, kept: self.evaluate_round(consts, p, kept),
            evaluate_now=evaluate_now,
            sends_updates=self.sends_updates,
            n_malicious=start.n_malicious,
            client_chunk=cfg.client_chunk,
            n_devices=self.client_devices,
            offline=self.offline,
            online=self.online,
        )
        return self.end_round(consts, state, start, t, RoundEnd(*end))

    def extras(self, consts, state) -> dict:
        return {}

    def finish(self, consts, state, curves):
        cfg = self.config
        interactions = cfg.n_runs * cfg.n_round_clients * cfg.local_updates * cfg.rounds
        return jax.device_get(state[0]), self.extras(consts, state), interactions
