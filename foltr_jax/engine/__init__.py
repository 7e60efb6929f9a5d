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
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np

from foltr_jax.core import metrics, multiprocess
from foltr_jax.engine import loop
from foltr_jax.server import pipeline
from foltr_jax.core.registry import Registry
from foltr_jax.engine.config import ConfigError


class Sent(NamedTuple):
    """What a run of clients sends the server in a round, in every run slot."""

    models: jax.Array  # float [n_slots, size, d]: models (reference: the global model) or updates
    weights: jax.Array  # float [n_slots, size]: FedAvg weights n_c; 0 for absent clients
    online: Any  # pytree of float [n_slots]: sums over these clients (online metrics)
    kept: Any = None  # per-client results the method wants back (an unchunked round only)


def serve(
    train: Callable[[Any, int], Sent],
    slot_stages: Callable[[Any], tuple],
    settings,
    reference: jax.Array,
    n_malicious: jax.Array,
    state,
    keys: jax.Array,
    n_clients: int,
    client_chunk: int = 0,
):
    """The clients train and every slot's server pipeline aggregates what they send.

    Args:
        train: ``train(start, size) -> Sent`` for clients ``start .. start + size - 1``
            (``start`` may be traced; ``size`` is static).
        slot_stages: ``slot_stages(slot_settings) -> stages`` (``pipeline.server_stages``)
            of one slot; called under ``vmap`` over ``settings``' leading slot axis.
        settings: a pytree with leading axis n_slots (None when no stage varies).
        reference: float [n_slots, d] the pipeline's ``global_model``: the model the
            clients started from when they send models, 0 when they send updates.
        n_malicious: int [n_slots]; the first n_malicious clients are malicious.
        state: the slots' server chain states (leaves [n_slots, ...]).
        keys: [n_slots] the server's key of the round in each slot.
        client_chunk: clients per chunk; 0 (or ``n_clients``) trains them all at once.
            Chunks need a pipeline that streams (``pipeline.streaming_split``); client c
            keeps its key and noise, so results equal the unchunked round's up to the
            order of floating-point sums.

    Returns (aggregates [n_slots, d], new state, online sums, kept: ``Sent.kept`` of an
    unchunked round, None when chunked).
    """

    def messages(sent: Sent, start) -> pipeline.ClientUpdates:
        def one(models, weights, global_model, m):
            return pipeline.ClientUpdates(models, weights, global_model, m, global_model, start)

        return jax.vmap(one)(sent.models, sent.weights, reference, n_malicious)

    if not 0 < client_chunk < n_clients:
        sent = train(0, n_clients)
        updates, state = jax.vmap(
            lambda s, st, u, k: pipeline.chain(*slot_stages(s)).update(st, u, k)
        )(settings, state, messages(sent, 0), keys)
        return updates.aggregate, state, sent.online, sent.kept

    def chunk_sums(j):
        sent = train(j * client_chunk, client_chunk)
        part = jax.vmap(lambda s, u, k: pipeline.stream_part(slot_stages(s), u, k))(
            settings, messages(sent, j * client_chunk), keys
        )
        return part, sent.online

    def one_chunk(sums, j):
        return jax.tree_util.tree_map(jnp.add, sums, chunk_sums(j)), None

    zeros = jax.tree_util.tree_map(
        lambda x: jnp.zeros(x.shape, x.dtype), jax.eval_shape(chunk_sums, 0)
    )
    (sums, online), _ = jax.lax.scan(one_chunk, zeros, jnp.arange(n_clients // client_chunk))
    # What the stages after the aggregation see: the reference, no client rows.
    template = messages(Sent(reference[:, None], jnp.zeros_like(reference[:, :1]), None), 0)
    updates, state = jax.vmap(
        lambda s, st, x, u, k: pipeline.stream_finish(slot_stages(s), st, x, u, k)
    )(settings, state, sums, template, keys)
    return updates.aggregate, state, online, None


def slots_on_devices(fn: Callable, shared, slotted, n_devices: int):
    """``fn(shared, slot)`` of every slot of ``slotted`` (vmapped over its leading axis),
    with the slots split over ``n_devices`` devices (``shard_map`` over a one-axis mesh
    ``slots``).

    For work where every slot's result depends only on its own slice and ``shared``
    (offline evaluation of the slots' models): the slots are padded to a multiple of
    ``n_devices`` with copies of the last, each device runs its part, and the padding is
    dropped.  ``shared`` goes in replicated, as an argument (see ``on_devices``)."""
    fn = jax.vmap(fn, in_axes=(None, 0))
    if n_devices == 1:
        return fn(shared, slotted)
    n = jax.tree_util.tree_leaves(slotted)[0].shape[0]
    extra = -(-n // n_devices) * n_devices - n
    mesh = jax.sharding.Mesh(np.asarray(jax.devices()[:n_devices]), ("slots",))
    whole, split = jax.sharding.PartitionSpec(), jax.sharding.PartitionSpec("slots")
    # Replicated where the split starts: else XLA may carry the split back into whatever
    # ``slotted`` came from (a scan chunk's state), which then leaves the chunk split.
    slotted = jax.lax.with_sharding_constraint(
        jax.tree_util.tree_map(
            lambda x: jnp.concatenate([x, jnp.repeat(x[-1:], extra, axis=0)]), slotted
        ),
        jax.sharding.NamedSharding(mesh, whole),
    )
    out = jax.shard_map(
        fn, mesh=mesh, in_specs=(whole, split), out_specs=split, check_vma=False
    )(shared, slotted)
    return jax.tree_util.tree_map(lambda x: x[:n], out)


def on_devices(train: Callable, inputs, n_devices: int) -> Callable[[Any, int], Sent]:
    """``train(inputs, start, size) -> Sent`` as ``serve`` takes it (``train(start,
    size)``), with the clients of every call split over ``n_devices`` devices.

    Each device trains its ``size / n_devices`` clients (``shard_map`` over a one-axis
    mesh ``clients``); a client's work depends only on its own key and the inputs, so
    the models are the single-device models, gathered in client order, and the online
    sums add the devices' parts.  ``inputs`` go in as an argument, replicated, not
    closed over: over several processes they are global arrays the mapped function
    must see in its own view.
    """
    if n_devices == 1:
        return lambda start, size: train(inputs, start, size)
    mesh = jax.sharding.Mesh(np.asarray(jax.devices()[:n_devices]), ("clients",))
    whole, split = jax.sharding.PartitionSpec(), jax.sharding.PartitionSpec(None, "clients")

    def call(start, size: int) -> Sent:
        per_device = size // n_devices

        def shard(inputs, start):
            first = start + jax.lax.axis_index("clients") * per_device
            sent = train(inputs, first, per_device)
            return sent._replace(online=jax.tree_util.tree_map(lambda x: x[None], sent.online))

        specs = Sent(split, split, jax.sharding.PartitionSpec("clients"), split)
        sent = jax.shard_map(
            shard, mesh=mesh, in_specs=(whole, whole), out_specs=specs, check_vma=False
        )(inputs, jnp.asarray(start, jnp.int32))
        return sent._replace(online=jax.tree_util.tree_map(lambda x: x.sum(0), sent.online))

    return call


def check_devices(n_devices: int, count: int, what: str = "clients trained at a time") -> None:
    """Raises ConfigError('n_devices') unless ``n_devices`` devices are visible (every
    process's devices in a multi-process run) and split the ``count`` ``what`` (a round's
    clients, or FPDGD's lanes) evenly."""
    if n_devices < 1:
        raise ConfigError("n_devices", f"must be at least 1, got {n_devices}")
    if jax.process_count() > 1 and n_devices != jax.device_count():
        raise ConfigError(
            "n_devices",
            f"must be the {jax.device_count()} devices of the {jax.process_count()} processes "
            f"in a multi-process run, got {n_devices}",
        )
    if n_devices > len(jax.devices()):
        raise ConfigError(
            "n_devices", f"asks for {n_devices} devices but {len(jax.devices())} are visible"
        )
    if count % n_devices:
        raise ConfigError("n_devices", f"must divide the {count} {what}")


def check_streams(stages: tuple, flag: str = "client_chunk") -> None:
    """Raises ConfigError naming ``flag`` when ``stages`` cannot run a chunk of clients
    at a time (a stage needs every client of a round at once)."""
    try:
        pipeline.streaming_split(stages)
    except ValueError as error:
        raise ConfigError(flag, f"streams the server pipeline over client chunks, but {error}")


def check_scale(config, stages: tuple) -> None:
    """Raises ConfigError naming the flag when ``config`` (a ``config.RunConfig``) chunks
    its clients but ``stages`` cannot stream, or when its devices do not split a round's
    (or chunk's) clients evenly."""
    if config.chunked:
        check_streams(stages)
    count = config.client_chunk if config.chunked else config.n_round_clients
    check_devices(config.n_devices, count)


def round_keys(slot_keys: jax.Array, round_index) -> jax.Array:
    """[n_slots] keys of round t: fold_in(slot key, t); client c's is fold_in(round key, c)."""
    return jax.vmap(lambda k: jax.random.fold_in(k, round_index))(slot_keys)


def server_keys(round_keys_: jax.Array, n_clients: int) -> jax.Array:
    """[n_slots] the server's key of the round: that of client ``n_clients`` (clients are
    0 .. n_clients − 1), in every method."""
    return jax.vmap(lambda k: jax.random.fold_in(k, n_clients))(round_keys_)


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


def select_evaluated(curves: dict, names, rounds: int, every: int):
    """Keeps the offline ``curves[name]`` columns of ``evaluated_rounds`` (the skipped
    rounds hold NaN) and returns those rounds as an int array (1-based)."""
    kept = np.asarray(evaluated_rounds(rounds, every), np.int64)
    for name in names:
        curves[name] = curves[name][:, kept - 1]
    return kept


# ---------------------------------------------------------------------------------------------
# The round every method shares
# ---------------------------------------------------------------------------------------------


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


class Federated:
    """A method whose round is the engine's ``federated_round`` and whose state is (the
    slots' models, the server chain's state): a subclass (a frozen dataclass with a
    ``config`` built on ``config.RunConfig``) gives

    - ``init_params(consts, init_keys)``: the slots' initial models (leaves [n_slots, ...]);
    - ``clients(inputs, start, size) -> Sent`` with ``inputs`` = (consts, the slots'
      models, the round's keys [n_slots]): its clients' side of a round;
    - ``evaluate_params(consts, params)``: the offline metrics named ``offline``;

    and may change ``sends_updates`` (clients send models by default), ``online`` (the
    names of ``Sent.online``'s sums, means over its ``count``), ``optimizer()`` (the server
    optimiser, none by default) and ``extras(consts, state)``.  The rest of
    ``engine.Method`` is here: keys, the server pipeline of the config's attack,
    aggregator and malicious clients, devices and chunks (checked when the method is
    made: ``check_scale``), the evaluation cadence and the interactions simulated
    (clients × ``local_updates`` × rounds × runs).
    """

    sends_updates = False
    offline = ("offline_ndcg", "offline_mrr")
    online = ("online_ndcg",)

    def __post_init__(self):
        check_scale(self.config, self.stages())

    def optimizer(self):
        return None

    def stages(self, settings=None) -> tuple:
        """The server's pipeline: the config's attack → its aggregator → ``optimizer()``."""
        cfg = self.config
        return pipeline.server_stages(
            attack_names=(cfg.model_attack,) if cfg.model_attack else (),
            aggregator_names=(cfg.aggregator,),
            squared_distances=cfg.krum_squared_distances,
            max_malicious=cfg.n_malicious,
            optimizer=self.optimizer(),
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


# ---------------------------------------------------------------------------------------------
# The run every method shares
# ---------------------------------------------------------------------------------------------


class Method(Protocol):
    """What a method supplies to ``run``.

    A method's *spec* is a frozen, hashable dataclass (one compilation per value) with a
    ``config`` holding ``seed``, ``n_runs``, ``rounds``, ``chunk_rounds`` and
    ``eval_every``, and these methods:

    - ``repetitions()``: int [n_slots] the repetition of every run slot (slots of a grid's
      cells that share a repetition share its keys: cells are compared on paired runs);
    - ``init(arrays, init_keys) -> (consts, state)``: the round's constants (the device
      data, and whatever the method derives from the slots' initialisation keys) and the
      scan state before round 1 (the global models, leaves [n_slots, ...], and the
      server's state);
    - ``evaluate(consts, state)``: the offline metrics [n_slots] of the state's global
      models, named by ``offline``;
    - ``round(consts, state, train_keys, t, evaluate_now) -> (state, metrics)``: round t
      (0-based, traced) of every slot, usually ``serve`` with the method's client update;
      ``metrics`` is a NamedTuple of [n_slots] values whose ``offline`` fields are NaN
      where ``evaluate_now`` is false (``offline_when``);
    - ``finish(consts, state, curves) -> (final_params, extras, interactions)``: the
      final models on the host, the result fields the method adds, and the number of
      interactions the run simulated.
    """

    config: Any
    offline: tuple

    def repetitions(self) -> np.ndarray: ...

    def init(self, arrays, init_keys): ...

    def evaluate(self, consts, state): ...

    def round(self, consts, state, train_keys, t, evaluate_now): ...

    def finish(self, consts, state, curves: dict): ...


@dataclasses.dataclass
class RunResult:
    """What ``run`` returns for every method: the curves of every run slot, by name.

    A run holds ``n_cells`` cells (the settings of a grid, one by default), each repeated
    ``n_runs`` times; slot ``cell * n_runs + run`` is repetition ``run`` of cell ``cell``.
    ``curves`` maps a metric's name to its values per slot and round ``[n_slots, rounds]``
    (``by_cell`` gives them ``[n_cells, n_runs, rounds]``, ``cell`` one cell's curves);
    an offline metric (named in ``offline``) holds the columns of ``offline_rounds`` only
    (1-based; every round with ``eval_every`` = 1, else rounds K, 2K, ... and always the
    last, so ``[..., -1]`` is final).  ``initial`` maps each offline metric to its value
    [n_slots] for the models before round 1; ``extras`` holds what a method adds
    (FOLtR-ES's ε, FedIPS's propensities, an update history).  Every entry is also an
    attribute: ``result.offline_ndcg``, ``result.initial_offline_ndcg``,
    ``result.epsilon``.

    ``cells`` are the cells' descriptions (the ``Setting`` of each cell of
    ``run_fpdgd``; empty when a method runs one cell); ``n_runs`` the repetitions of each.

    Example::

        result = foltr_jax.run_fpdgd(config, train, test, [Setting(), Setting(aggregator="median")])
        result                                  # RunResult(2 cells x 3 runs, 30 rounds, ...)
        result.by_cell("offline_ndcg")[:, :, -1]  # final nDCG@10 [cells, runs]
        result.cell(1)["offline_ndcg"]          # the median cell's curves [runs, rounds]
    """

    curves: dict
    initial: dict
    final_params: Any
    compile_seconds: float
    run_seconds: float
    interactions: int
    offline_rounds: np.ndarray
    offline: tuple = ()
    extras: dict = dataclasses.field(default_factory=dict)
    cells: Sequence = ()  # a list for run_fpdgd and the replay
    n_runs: int = 0

    def __getattr__(self, name: str):
        fields = self.__dict__
        if name.startswith("__") or "curves" not in fields:
            raise AttributeError(name)
        if name in fields["curves"]:
            return fields["curves"][name]
        if name.startswith("initial_") and name[len("initial_") :] in fields["initial"]:
            return fields["initial"][name[len("initial_") :]]
        if name in fields["extras"]:
            return fields["extras"][name]
        raise AttributeError(f"{type(self).__name__} has no metric or field {name!r}")

    def __repr__(self) -> str:
        rounds = max((np.shape(v)[1] for v in self.curves.values() if np.ndim(v) > 1), default=0)
        runs = self.n_runs or self.n_slots
        return (
            f"{type(self).__name__}({self.n_cells} cell{'s' * (self.n_cells != 1)} x "
            f"{runs} run{'s' * (runs != 1)}, {rounds} rounds; curves: "
            f"{', '.join(self.curves)}; {self.interactions:,} interactions in "
            f"{self.run_seconds:.2f} s + {self.compile_seconds:.2f} s compiling)"
        )

    @property
    def metrics(self) -> dict:
        """The same mapping as ``curves`` (an older name, kept for callers)."""
        return self.curves

    @property
    def n_slots(self) -> int:
        """Run slots: ``n_cells * n_runs``."""
        for values in self.curves.values():
            return int(np.shape(values)[0])
        return 0

    @property
    def n_cells(self) -> int:
        """The cells of the run (the settings of a grid; 1 without one)."""
        if self.cells:
            return len(self.cells)
        return max(1, self.n_slots // self.n_runs) if self.n_runs else 1

    @property
    def online_performance(self) -> np.ndarray:
        """Σ_t γ^(t−1) online nDCG_t (thesis §2.2.1) of every slot, one number a slot [n_slots]."""
        return metrics.online_performance(self.curves["online_ndcg"])

    @property
    def interactions_per_second(self) -> float:
        return self.interactions / max(self.run_seconds, 1e-9)

    def by_cell(self, curve) -> np.ndarray:
        """A curve split by cell: ``[n_cells, n_runs, ...]``.

        Args:
            curve: a curve's name (``"offline_ndcg"``; ``"online_performance"`` and the
                ``extras`` too) or an array with one row per run slot.

        Returns:
            The values as ``[n_cells, n_runs]`` followed by the curve's other axes
            (rounds).
        """
        values = np.asarray(getattr(self, curve) if isinstance(curve, str) else curve)
        return values.reshape((self.n_cells, -1) + values.shape[1:])

    def cell(self, which) -> dict:
        """Every curve of one cell, ``[n_runs, rounds]`` each, by name.

        Args:
            which: the cell's index, or the cell itself (an element of ``cells``: with
                ``run_fpdgd`` the ``Setting`` it ran).
        """
        if isinstance(which, (int, np.integer)):
            index = int(which)
            if not -self.n_cells <= index < self.n_cells:
                raise IndexError(f"cell {index} of a run with {self.n_cells} cells")
        else:
            if which not in self.cells:
                raise KeyError(f"{which!r} is not one of the run's cells {list(self.cells)}")
            index = list(self.cells).index(which)
        return {name: self.by_cell(name)[index] for name in self.curves}

    def per_setting(self, values: np.ndarray, n_settings: int | None = None) -> np.ndarray:
        """Reshapes a per-slot array to [n_settings, n_runs, ...]; ``by_cell`` does the same
        without being told the count (``n_settings``, kept for callers that pass it)."""
        n = self.n_cells if n_settings is None else n_settings
        return np.asarray(values).reshape((n, -1) + np.shape(values)[1:])


def run_chunk(method: Method, n_rounds: int, consts, state, first_round):
    """``n_rounds`` rounds of ``method`` under ``lax.scan`` from ``first_round`` (the
    body of a ``loop.scan_in_chunks`` chunk); ``consts`` = (the method's constants, the
    slots' training keys)."""
    arrays, train_keys = consts
    cfg = method.config

    def body(carry, t):
        evaluate_now = is_evaluated(cfg.rounds, cfg.eval_every, t)
        return method.round(arrays, carry, train_keys, t, evaluate_now)

    return scan_rounds(body, state, first_round, n_rounds)


run_chunk_jit = jax.jit(run_chunk, static_argnums=(0, 1), donate_argnums=(3,))


@functools.cache
def _run_chunk_replicated():
    """``run_chunk_jit`` for a multi-process run: replicated outputs (multiprocess)."""
    return multiprocess.replicated_jit(run_chunk, static_argnums=(0, 1), donate_argnums=(3,))


@functools.partial(jax.jit, static_argnums=0)
def _initial(method: Method, arrays, init_keys):
    consts, state = method.init(arrays, init_keys)
    return consts, state, method.evaluate(consts, state)


def run(method: Method, arrays, progress=None, checkpoint: str | None = None) -> RunResult:
    """Runs ``config.rounds`` rounds of every run slot of ``method`` on ``arrays``.

    Keys: slot s's repetition key fold_in(PRNGKey(seed), repetition) splits into its
    initialisation and training keys (``loop.run_keys``); round t's key is
    fold_in(training key, t) and client c's fold_in(round key, c) (``round_keys``,
    ``client_keys``).  Rounds run in jit-compiled chunks of ``chunk_rounds`` (one
    compilation per chunk length, timed apart) with ``progress(done, total, seconds)``
    between chunks; over several processes the inputs are replicated global arrays.
    ``checkpoint``: a file where the run saves its state after every chunk and from
    which an interrupted run resumes (``loop.scan_in_chunks``).
    """
    cfg = method.config
    init_keys, train_keys = loop.run_keys(cfg.seed, method.repetitions())
    consts, state, initial = _initial(method, arrays, init_keys)
    chunk_fn = _run_chunk_replicated() if multiprocess.is_multiprocess() else run_chunk_jit
    state, outputs, compile_seconds, run_seconds = loop.scan_in_chunks(
        chunk_fn,
        method,
        multiprocess.replicated((consts, train_keys)),
        multiprocess.replicated(state),
        cfg.rounds,
        cfg.chunk_rounds,
        progress,
        checkpoint,
    )
    curves = loop.round_curves(outputs)
    offline_rounds = select_evaluated(curves, method.offline, cfg.rounds, cfg.eval_every)
    final_params, extras, interactions = method.finish(consts, state, curves)
    return RunResult(
        curves=curves,
        initial={name: np.asarray(v) for name, v in zip(method.offline, initial)},
        final_params=final_params,
        compile_seconds=compile_seconds,
        run_seconds=run_seconds,
        interactions=int(interactions),
        offline_rounds=offline_rounds,
        offline=tuple(method.offline),
        extras=extras,
        cells=extras.get("cells", ()),
        n_runs=_runs_per_cell(method.repetitions()),
    )


def _runs_per_cell(repetitions) -> int:
    """The repetitions of each cell: slots are cell-major, repetition r of every cell shares
    r's keys (``Method.repetitions``)."""
    repetitions = np.asarray(repetitions)
    if repetitions.size == 0:
        return 0
    n_runs = int(repetitions.max()) + 1
    return n_runs if repetitions.size % n_runs == 0 else int(repetitions.size)


def client_keys(round_keys_: jax.Array, ids: jax.Array) -> jax.Array:
    """[n_slots, size] keys of the clients ``ids`` in each slot's round: fold_in(round
    key, client id), for every method."""
    return jax.vmap(lambda k: jax.vmap(lambda c: jax.random.fold_in(k, c))(ids))(round_keys_)


def flatten(params) -> jax.Array:
    """Models with a leading axis (pytree leaves [n, ...]) as flat vectors [n, d]."""
    return jax.vmap(lambda p: jax.flatten_util.ravel_pytree(p)[0])(params)


def unflatten(flat: jax.Array, like):
    """Flat vectors [n, d] as pytrees shaped like one model of ``like`` (leaves [n, ...])."""
    unravel = jax.flatten_util.ravel_pytree(jax.tree_util.tree_map(lambda p: p[0], like))[1]
    return jax.vmap(unravel)(flat)


# ---------------------------------------------------------------------------------------------
# Methods by name
# ---------------------------------------------------------------------------------------------


class MethodEntry(NamedTuple):
    """A method a binary runs by name (``python -m experiments.method --method=NAME``)."""

    summary: str  # one line for --help
    config: type  # a frozen dataclass of int, float, str and bool settings (``seed``,
    # ``n_runs``, ``rounds``, ...); a ``validate()`` method, when it has one, raises
    # ConfigError naming the field
    run: Callable  # run(config, train, test, *, progress=None, checkpoint=None) -> RunResult
    internal: tuple = ()  # the config's fields that are not settings on the command line


METHODS: Registry[MethodEntry] = Registry("method")


def register_method(
    name: str, config: type, run: Callable, summary: str, internal: tuple = ()
) -> MethodEntry:
    """Registers a method under ``name``: its config class (one flag per field) and its
    ``run``, usually ``engine.run`` of its ``Method``.  Registered from a ``--plugin``, it
    is a name of ``experiments.method`` and of batch recipes like the built-in ones."""
    return METHODS.add(name, MethodEntry(summary, config, run, tuple(internal)))
