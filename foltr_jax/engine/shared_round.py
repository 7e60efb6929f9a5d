"""The round every method shares (``federated_round``): the keys of a round, its server
step (``serving.serve``), the evaluation cadence (``offline_when``: the rounds ``eval_every``
asks for), the round's metrics and the flat form of the models the server sees.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.flatten_util
import jax.numpy as jnp

from foltr_jax.engine.serving import Sent, on_devices, serve, slots_on_devices


def round_keys(slot_keys: jax.Array, round_index) -> jax.Array:
    """[n_slots] keys of round t: fold_in(slot key, t); client c's is fold_in(round key, c)."""
    return jax.vmap(lambda k: jax.random.fold_in(k, round_index))(slot_keys)


def server_keys(round_keys_: jax.Array, n_clients: int) -> jax.Array:
    """[n_slots] the server's key of the round: that of client ``n_clients`` (clients are
    0 .. n_clients − 1), in every method."""
    return jax.vmap(lambda k: jax.random.fold_in(k, n_clients))(round_keys_)


def client_keys(round_keys_: jax.Array, ids: jax.Array) -> jax.Array:
    """[n_slots, size] keys of the clients ``ids`` in each slot's round: fold_in(round
    key, client id), for every method."""
    return jax.vmap(lambda k: jax.vmap(lambda c: jax.random.fold_in(k, c))(ids))(round_keys_)


def is_evaluated(rounds: int, every: int, t):
    """Whether 0-based round ``t`` (traced) is one of ``evaluated_rounds``; None when
    every round is (``every`` = 1: no condition in the program at all)."""
    if every == 1:
        return None
    return ((t + 1) % every == 0) | (t + 1 == rounds)


def evaluated_rounds(rounds: int, every: int) -> list:
    """The 1-based rounds whose offline metrics are computed with ``eval_every`` = K:
    K, 2K, ... and the last round T (every round when K = 1)."""
    return sorted(set(range(every, rounds + 1, every)) | {rounds})


def offline_when(evaluate: Callable, params, evaluate_now):
    """``evaluate(params)`` (a tuple of [n_slots] metrics); with ``evaluate_now`` (a
    traced bool; None: always) a round that does not evaluate skips it under
    ``lax.cond`` (no work on the test split) and reports NaN in its place."""
    if evaluate_now is None:
        return evaluate(params)
    shapes = jax.eval_shape(evaluate, params)
    return jax.lax.cond(
        evaluate_now,
        evaluate,
        lambda p: jax.tree_util.tree_map(lambda s: jnp.full(s.shape, jnp.nan, s.dtype), shapes),
        params,
    )


def scan_rounds(round_fn: Callable, state, first_round, n_rounds: int):
    """``n_rounds`` rounds ``round_fn(state, t) -> (state, metrics)`` under ``lax.scan``,
    t = first_round, first_round + 1, ... (the body of a ``loop.scan_in_chunks`` chunk)."""
    return jax.lax.scan(round_fn, state, first_round + jnp.arange(n_rounds))


@functools.cache
def metrics_type(names: tuple) -> type:
    """The NamedTuple of a round's metrics called ``names`` (one type per tuple of names):
    a round's metrics keep their order in the result's curves."""
    return collections.namedtuple("RoundMetrics", names)


def round_metrics(offline: dict, online_names: tuple, sums: dict):
    """A round's metrics: the ``offline`` values by name, then ``online_names``' sums of
    ``Sent.online`` (a dict), as means over its ``count`` when it has one."""
    count = sums.get("count")
    online = [sums[name] if count is None else sums[name] / count for name in online_names]
    return metrics_type(tuple(offline) + tuple(online_names))(*offline.values(), *online)


def evaluate_slots(score: Callable, quality: Callable, test, params, n_devices: int):
    """Offline metrics [n_slots] each of every slot's model (``params``, leaves [n_slots,
    ...]): ``quality(score(params_of_one_slot, test.features), test)``, the slots split over
    ``n_devices`` devices (``slots_on_devices``)."""
    return slots_on_devices(
        lambda test, p: quality(score(p, test.features), test), test, params, n_devices
    )


def federated_round(
    clients: Callable[[Any, Any, int], Sent],
    inputs,
    params,
    server_state,
    round_keys_: jax.Array,
    *,
    n_clients: int,
    stages: Callable[[Any], tuple],
    evaluate: Callable,
    evaluate_now=None,
    sends_updates: bool = False,
    settings=None,
    n_malicious=0,
    client_chunk: int = 0,
    n_devices: int = 1,
    offline: tuple = ("offline_ndcg", "offline_mrr"),
    online: tuple = ("online_ndcg",),
):
    """One round of every run slot: the method gives its clients' side, the engine the rest.

    ``clients(inputs, start, size) -> Sent`` is what the clients ``start .. start + size −
    1`` of every slot send (their models, or updates with ``sends_updates``), called for
    every client at once or ``client_chunk`` at a time (``serve``) with the clients split
    over ``n_devices`` devices (``on_devices``; ``inputs`` go in replicated).  The engine
    flattens the slots' models ``params`` (leaves [n_slots, ...]), runs every slot's
    server pipeline ``stages(slot_settings)`` (one slot's ``settings``, leading axis
    n_slots, or None) with the server's keys (``server_keys`` of ``round_keys_``) and
    the first ``n_malicious`` clients malicious, takes the aggregate as the new models (or
    adds it, with updates), and evaluates them on the rounds ``evaluate_now`` asks for
    (``offline_when``): ``evaluate(params, kept) -> tuple`` of [n_slots] metrics named
    ``offline``, with ``kept`` the clients' ``Sent.kept`` of an unchunked round.

    Returns (new params, new server state, the round's metrics: ``offline`` then
    ``online``, the means (or sums) of ``Sent.online`` (``round_metrics``), kept).
    """
    flat = flatten(params)
    n_slots = flat.shape[0]
    aggregate, server_state, sums, kept = serve(
        on_devices(clients, inputs, n_devices),
        stages,
        settings,
        jnp.zeros_like(flat) if sends_updates else flat,
        jnp.broadcast_to(jnp.asarray(n_malicious, jnp.int32), (n_slots,)),
        server_state,
        server_keys(round_keys_, n_clients),
        n_clients,
        client_chunk,
    )
    params = unflatten(flat + aggregate if sends_updates else aggregate, params)
    values = offline_when(lambda p: evaluate(p, kept), params, evaluate_now)
    return params, server_state, round_metrics(dict(zip(offline, values)), online, sums), kept


def flatten(params) -> jax.Array:
    """Models with a leading axis (pytree leaves [n, ...]) as flat vectors [n, d]."""
    return jax.vmap(lambda p: jax.flatten_util.ravel_pytree(p)[0])(params)


@functools.cache  # one per ranker: methods call it in traced code
def unraveller(ranker) -> Callable:
    """The inverse of ``flatten`` for one model of ``ranker`` (a registered ranker): a flat
    parameter vector [P] back into its pytree.  Built from the parameters' shapes only."""
    shapes = jax.eval_shape(ranker.init, jax.random.PRNGKey(0))
    zeros = jax.tree_util.tree_map(lambda x: jnp.zeros(x.shape, x.dtype), shapes)
    return jax.flatten_util.ravel_pytree(zeros)[1]


def unflatten(flat: jax.Array, like):
    """Flat vectors [n, d] as pytrees shaped like one model of ``like`` (leaves [n, ...])."""
    unravel = jax.flatten_util.ravel_pytree(jax.tree_util.tree_map(lambda p: p[0], like))[1]
    return jax.vmap(unravel)(flat)
