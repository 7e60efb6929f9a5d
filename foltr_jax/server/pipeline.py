"""The server-side update pipeline: attack → differential privacy → aggregation.

Every stage is a pure transformation of the stacked client updates, composed like
optax's ``chain``: a stage has ``init(global_model) -> state`` and
``update(state, updates, key) -> (updates, state)``; the caller carries the state
from round to round (through the run's ``lax.scan``), so a stage may keep state: the
server optimiser (``server_step``: FedOpt's server SGD, FOLtR-ES's Adam, momentum).

What the clients send depends on the method: FPDGD clients send models and the
reference ``global_model`` is the model they started from; FOLtR-ES and FedIPS
clients send updates (a gradient estimate, a model change) and the reference is 0.
Attacks and robust rules treat both alike (they are shift-equivariant), apart from
``scaled_negation``, which scales what is sent.  Stages see flattened client
models ``[n_clients, d]``; the aggregation stage fills ``aggregate`` with the new
global model.  Settings that vary across a grid (number of malicious clients,
which attack, which aggregator, ε and Δ) are arrays, so one compiled program runs
every combination under ``vmap`` with no Python branching per client.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from foltr_jax.core import privacy
from foltr_jax.server import aggregators, attacks


class ClientUpdates(NamedTuple):
    """What the clients of one run send in a round, and the server's view of it."""

    models: jax.Array  # float [n_clients, d] client models after local training (flattened)
    weights: jax.Array  # float [n_clients] n_c, the clients' local interactions
    global_model: jax.Array  # float [d] the model every client started the round from
    n_malicious: jax.Array  # int []; the first n_malicious clients are malicious
    aggregate: jax.Array  # float [d] the new global model (set by the aggregation stage)
    first_client: Any = 0  # position of row 0 among the round's clients (a chunk's offset)


class Streaming(NamedTuple):
    """How an aggregation stage runs over the clients a chunk at a time: the sums of
    ``part`` over chunks, then ``finish(sums, updates) -> aggregate``."""

    part: Callable[[ClientUpdates], Any]
    finish: Callable[[Any, ClientUpdates], jax.Array]


class Stage(NamedTuple):
    init: Callable[..., Any]  # init(global_model [d]) -> state
    update: Callable[[Any, ClientUpdates, jax.Array], tuple[ClientUpdates, Any]]
    name: str = "stage"  # what a refusal to stream names
    per_client: bool = False  # changes each client's row on its own (streams over chunks)
    streaming: Streaming | None = None  # an aggregation that streams over chunks


def chain(*stages: Stage) -> Stage:
    """Runs ``stages`` in order, each with its own key and state."""

    def init(global_model=None):
        return tuple(stage.init(global_model) for stage in stages)

    def update(state, updates, key):
        keys = stage_keys(key, len(stages))
        new_state = []
        for stage, stage_state, stage_key in zip(stages, state, keys):
            updates, stage_state = stage.update(stage_state, updates, stage_key)
            new_state.append(stage_state)
        return updates, tuple(new_state)

    return Stage(init, update, name="chain")


def stage_keys(key: jax.Array, n_stages: int) -> jax.Array:
    """The key of each stage of a ``chain`` of ``n_stages`` stages, from the server's key."""
    return jax.random.split(key, max(n_stages, 1))


def stateless(fn: Callable[[ClientUpdates, jax.Array], ClientUpdates], **kind) -> Stage:
    """A stage without state; ``kind``: Stage's name, per_client and streaming."""
    return Stage(
        lambda global_model=None: (),
        lambda state, updates, key: (fn(updates, key), state),
        **kind,
    )


def _select(functions, index, *args):
    """Calls ``functions[index]``: directly when there is one, else with ``lax.switch``.

    Under ``vmap`` a switch runs every branch, so a stage holds only the
    functions its grid uses.
    """
    if len(functions) == 1:
        return functions[0](*args)
    return jax.lax.switch(jnp.asarray(index, jnp.int32), functions, *args)


def model_attack(names: tuple, index, krum_squared_distances: bool = True) -> Stage:
    """Replaces the malicious clients' models with attack ``names[index]`` (attacks.names()).

    ``krum_squared_distances`` must be the aggregation stage's: Fang's Krum attack simulates
    the server's Krum.
    """
    functions = [attacks.by_name(name, krum_squared=krum_squared_distances) for name in names]
    per_client = all(attacks.get(name).per_client for name in names)

    def apply(updates: ClientUpdates, key):
        m = jnp.asarray(updates.n_malicious, jnp.int32)
        if per_client:  # the malicious among these rows: positions first_client.. below m
            m = jnp.maximum(m - jnp.asarray(updates.first_client, jnp.int32), 0)
        models = _select(functions, index, key, updates.models, updates.global_model, m)
        return updates._replace(models=models)

    return stateless(apply, name="model attacks", per_client=per_client)


def gamma_noise(n_clients: int, sensitivity, epsilon) -> Stage:
    """Each client adds γ − γ′ per coordinate before sending (FPDGD Algorithm 3).

    The noise is the clients' own, so the weighted average keeps about 1/|C| of
    the Laplace(Δ/ε) total: it is not rescaled.  Off when ``sensitivity`` is 0.
    """

    def apply(updates: ClientUpdates, key):
        rows, d = updates.models.shape
        noise = privacy.clients_gamma_noise(
            key, updates.first_client, rows, d, n_clients, sensitivity, jnp.maximum(epsilon, 1e-12)
        )
        return updates._replace(models=updates.models + jnp.where(sensitivity > 0, noise, 0.0))

    return stateless(apply, name="differential privacy", per_client=True)


def gamma_noise_once(n_clients: int, n_present, sensitivity, epsilon) -> Stage:
    """The noise ``gamma_noise`` leaves on an equal-weight FedAvg, drawn once per round.

    ``n_present`` clients each add Gamma(1/|C|, Δ/ε) − Gamma(1/|C|, Δ/ε) per coordinate
    (FPDGD Eq. 16) and the server averages them with equal weights, so the average's noise
    is (Δ/ε)·(G − G′)/n_present with G, G′ ~ Gamma(n_present/|C|, 1): Gamma shapes add
    over independent draws.  That is the same distribution as the per-client draws, not
    an approximation (Laplace(Δ/ε)/|C| when every client is present).  Valid only where
    nothing looks at a single noised model: no model attack, no robust aggregator and
    equal FedAvg weights (``rounds.noise_once``).  Runs after the aggregation stage.
    """

    def apply(updates: ClientUpdates, key):
        d = updates.aggregate.shape[-1]
        count = jnp.asarray(n_present, jnp.float32)
        # the n_present shares summed are one share of a federation of |C| / n_present
        total = privacy.gamma_noise(
            key, (d,), n_clients / count, sensitivity, jnp.maximum(epsilon, 1e-12)
        )
        noise = jnp.where(sensitivity > 0, total / count, 0.0)
        return updates._replace(aggregate=updates.aggregate + noise.astype(updates.aggregate.dtype))

    return stateless(apply, name="differential privacy (on the average)")


def aggregate(
    names: tuple, index, squared_distances: bool = True, max_malicious: int | None = None
) -> Stage:
    """Sets ``aggregate`` with aggregator ``names[index]`` (``aggregators.names()``);
    ``max_malicious`` (static, ≥ every m of the grid) lets Krum select instead of sort."""
    functions = [
        functools.partial(
            aggregators.call, name, squared=squared_distances, max_malicious=max_malicious
        )
        for name in names
    ]

    def apply(updates: ClientUpdates, key):
        del key
        m = jnp.asarray(updates.n_malicious, jnp.int32)
        return updates._replace(
            aggregate=_select(functions, index, updates.models, updates.weights, m)
        )

    streaming = None
    stream = aggregators.get(names[0]).stream if len(names) == 1 else None
    if stream is not None:  # the registered rule streams over client chunks
        streaming = Streaming(
            part=lambda u: stream.part(u.models, u.weights),
            finish=lambda sums, u: stream.finish(sums),
        )
    return stateless(apply, name=f"aggregator {'/'.join(names)}", streaming=streaming)


def sum_of_updates() -> Stage:
    """The centralised 'batch' baseline's aggregate: θ + Σ_c (θ_c − θ) (every row counts)."""
    stream = Streaming(
        part=lambda u: jnp.sum(u.models - u.global_model, axis=0),
        finish=lambda total, u: u.global_model + total,
    )

    def apply(updates: ClientUpdates, key):
        del key
        return updates._replace(aggregate=stream.finish(stream.part(updates), updates))

    return stateless(apply, name="sum_of_updates", streaming=stream)


def server_step(optimizer: optax.GradientTransformation) -> Stage:
    """A server optimiser on the aggregate (FedOpt, Reddi et al. 2021).

    The pseudo-gradient is −Δ with Δ = aggregate − global_model, the change the clients
    ask for; ``aggregate`` becomes global_model + the optimiser's step.  ``optax.sgd(η_g)``
    is FedIPS's server step θ + η_g·Δ; ``optax.adam`` on FOLtR-ES's gradient estimate is
    its server (thesis §3.1).  The optimiser's state is the stage's state.
    """

    def init(global_model=None):
        return optimizer.init(global_model)

    def update(state, updates: ClientUpdates, key):
        del key
        delta = updates.aggregate - updates.global_model
        step, state = optimizer.update(-delta, state, updates.global_model)
        return updates._replace(aggregate=updates.global_model + step), state

    return Stage(init, update, name="server optimiser")


SERVER_OPTIMIZERS = {
    "sgd": lambda lr: optax.sgd(lr),  # FedOpt's server SGD: θ + η_s·Δ (η_s = 1: FedAvg)
    "momentum": lambda lr: optax.sgd(lr, momentum=0.9),  # FedAvgM (Hsu et al. 2019)
    "adam": lambda lr: optax.adam(lr),  # FedAdam (Reddi et al. 2021), optax defaults
}
SERVER_OPTIMIZER_SUMMARIES = {  # --server_optimizer's help
    "sgd": "θ + η_s·Δ",
    "momentum": "FedAvgM, 0.9",
    "adam": "FedAdam",
}


def server_optimizer(
    name: str, learning_rate: float | jax.Array
) -> optax.GradientTransformation | None:
    """The server optimiser ``name`` (``SERVER_OPTIMIZERS``), or None for 'none'; the
    learning rate may be traced (a grid's per-slot value)."""
    if name == "none":
        return None
    return SERVER_OPTIMIZERS[name](learning_rate)


def server_stages(
    *,
    attack_names: tuple = (),
    attack_index=0,
    noise: Stage | None = None,
    aggregator_names: tuple = ("fedavg",),
    aggregator_index=0,
    squared_distances: bool = True,
    max_malicious: int | None = None,
    optimizer: optax.GradientTransformation | None = None,
    aggregation: Stage | None = None,
    noise_on_aggregate: Stage | None = None,
) -> tuple:
    """The server's pipeline of every method: attack → privacy → aggregation → optimiser.

    Stages are left out when unused (no attack names, no noise, no optimiser), so a
    method pays only for what its grid uses; the indices may be traced grid settings.
    ``aggregation`` replaces the aggregator stage (e.g. ``sum_of_updates()``);
    ``noise_on_aggregate`` (``gamma_noise_once``) goes right after it, in place of
    the per-client ``noise``.  ``max_malicious``: see ``aggregate``.
    """
    stages = []
    if attack_names:
        stages.append(model_attack(attack_names, attack_index, squared_distances))
    if noise is not None:
        stages.append(noise)
    if aggregation is None:
        aggregation = aggregate(
            aggregator_names, aggregator_index, squared_distances, max_malicious
        )
    stages.append(aggregation)
    if noise_on_aggregate is not None:
        stages.append(noise_on_aggregate)
    if optimizer is not None:
        stages.append(server_step(optimizer))
    return tuple(stages)


def streaming_split(stages) -> int:
    """Index of the aggregation stage of ``stages`` when the pipeline can run over the
    clients a chunk at a time: every stage before it changes each client's row on its
    own (``per_client``) and it streams (``streaming``).  Raises ValueError naming the
    first stage that needs every client at once."""
    for i, stage in enumerate(stages):
        if stage.streaming is not None:
            return i
        if not stage.per_client:
            break
    raise ValueError(f"{stage.name} needs every client of a round at once")


def stream_part(stages, updates: ClientUpdates, key):
    """One chunk's contribution (``updates`` holds the chunk's rows, ``first_client``
    its offset): the per-client stages, then the aggregation's ``part``; the same
    stage keys as ``chain(*stages)`` uses for the whole round."""
    split = streaming_split(stages)
    keys = stage_keys(key, len(stages))
    for stage, stage_key in zip(stages[:split], keys):
        updates, _ = stage.update((), updates, stage_key)
    return stages[split].streaming.part(updates)


def stream_finish(stages, state, sums, updates: ClientUpdates, key):
    """The aggregate from the chunks' summed parts, then the stages after the
    aggregation (the server optimiser) with their state: (updates, new chain state)."""
    split = streaming_split(stages)
    keys = stage_keys(key, len(stages))
    updates = updates._replace(aggregate=stages[split].streaming.finish(sums, updates))
    state = list(state)
    for i in range(split + 1, len(stages)):
        updates, state[i] = stages[i].update(state[i], updates, keys[i])
    return updates, tuple(state)
