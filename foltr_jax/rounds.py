"""One round of FPDGD for every run slot: lanes, local training, the server pipeline,
evaluation and the stored update history (FPDGD paper Algorithm 2; unlearning §3.2).

``Spec`` is the static part of an experiment (one compilation per Spec),
``Arrays`` its device data.  ``federated_round`` trains every client of a round at
once; ``chunked_round`` does the same ``client_chunk`` clients at a time with
running sums, so memory follows the chunk.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.flatten_util
import jax.numpy as jnp

from foltr_jax import click_models, pipeline, privacy
from foltr_jax.client_plan import ClientArrays
from foltr_jax.config import FederationConfig, RunSettings
from foltr_jax.interaction import DeviceData, Lanes, ranking_quality, train_lanes


@dataclasses.dataclass(frozen=True)
class Spec:
    """The static part of an experiment (hashable: one compilation per Spec)."""

    config: FederationConfig
    ranker: object
    window: int  # candidate slice width: the longest training query, at least top_k
    widths: tuple  # scoring/sampling widths, narrowest first (window_widths)
    shared_first_scores: bool  # score the training set once per round for first steps
    n_settings: int = 1  # grid cells; slots = n_settings * n_runs
    aggregator_names: tuple = ("fedavg",)  # the aggregators the grid uses
    attack_names: tuple = ()  # the model-poisoning attacks (attacks.names()) the grid uses
    uses_privacy: bool = False  # some setting has differential privacy
    history_every: int = 0  # store every client's update at rounds 1, 1 + Δt, ... (0: never)
    personal_keys: tuple = ()  # FedPer: parameters each client keeps (thesis §4.3.3)
    personal_eval: str = "clients"  # FedPer's offline model (client_plan.PERSONAL_EVALUATIONS)

    @property
    def n_slots(self) -> int:
        return self.n_settings * self.config.n_runs


class Arrays(NamedTuple):
    """The array part of an experiment."""

    train: DeviceData
    test: DeviceData
    click_table: click_models.ClickModel  # stacked click models; 'poison' is the last
    settings: RunSettings  # [n_settings] each
    client_ids: jax.Array  # int [n_clients]: whose key stream the client at each position uses
    clients: ClientArrays | None = None  # how clients differ (non-IID); None: IID FPDGD


def server_update(
    spec: Spec,
    global_params,
    client_params,
    settings: RunSettings,
    key,
    client_weights=None,
    server_state=None,
):
    """The server's side of a round for one run slot: attack → privacy → aggregation.

    ``client_params`` have a leading client axis.  The centralised 'batch'
    baseline instead adds up the clients' updates: θ + Σ_c (θ_c − θ).
    ``client_weights`` (float [n_clients], default B each) are the FedAvg weights
    n_c, the clients' numbers of local interactions (Type 4, thesis §4.5.2).
    """
    cfg = spec.config
    if cfg.aggregation == "sum_of_updates":
        summed = jax.tree_util.tree_map(
            lambda g, c: g + jnp.sum(c - g, axis=0), global_params, client_params
        )
        return summed, server_state
    flat_global, unravel = jax.flatten_util.ravel_pytree(global_params)
    flat_clients = jax.vmap(lambda p: jax.flatten_util.ravel_pytree(p)[0])(client_params)
    present = jnp.arange(cfg.n_clients) >= settings.n_absent
    weights = jnp.where(
        present, float(cfg.local_updates) if client_weights is None else client_weights, 0.0
    )
    updates = pipeline.ClientUpdates(
        flat_clients, weights, flat_global, settings.n_malicious, flat_global
    )
    noise = None
    if spec.uses_privacy:
        noise = pipeline.gamma_noise(cfg.n_clients, settings.sensitivity, settings.epsilon)
    chain = pipeline.server_chain(
        attack_names=spec.attack_names,
        attack_index=settings.model_attack,
        noise=noise,
        aggregator_names=spec.aggregator_names,
        aggregator_index=settings.aggregator,
        squared_distances=cfg.krum_squared_distances,
    )
    updates, _ = chain.update(chain.init(flat_global), updates, key)
    aggregate, server_state = _server_step(spec, flat_global, updates.aggregate, server_state)
    return unravel(aggregate), server_state


def initial_server_state(spec: Spec, global_params):
    """Every slot's server chain state before round 1 (leaves [n_slots, ...]); only the
    server optimiser's stage holds state."""
    cfg = spec.config
    optimizer = pipeline.server_optimizer(cfg.server_optimizer, cfg.server_learning_rate)
    if optimizer is None:
        return None
    flat = jax.vmap(lambda p: jax.flatten_util.ravel_pytree(p)[0])(global_params)
    return jax.vmap(pipeline.server_step(optimizer).init)(flat)


def _server_step(spec: Spec, flat_global, flat_aggregate, server_state):
    """One slot's server optimiser stage (``pipeline.server_step``) after its aggregate;
    the identity without a server optimiser.  Its state is carried by the run's scan."""
    cfg = spec.config
    optimizer = pipeline.server_optimizer(cfg.server_optimizer, cfg.server_learning_rate)
    if optimizer is None:
        return flat_aggregate, server_state
    n = jnp.int32(0)
    view = pipeline.ClientUpdates(flat_global[None], jnp.ones(1), flat_global, n, flat_aggregate)
    out, server_state = pipeline.server_step(optimizer).update(server_state, view, None)
    return out.aggregate, server_state


def evaluate(spec: Spec, arrays: Arrays, params):
    """Offline nDCG@k and MRR@k of ``params`` on the test split (queries with a
    relevant document only)."""
    return ranking_quality(spec.ranker.apply(params, arrays.test.features), arrays.test, spec)


class RoundMetrics(NamedTuple):
    offline_ndcg: jax.Array  # [n_runs]
    offline_mrr: jax.Array  # [n_runs]
    online_ndcg: jax.Array  # [n_runs] mean over the round's interactions
    online_max_rr: jax.Array  # [n_runs]


def client_lane_keys(round_keys, client_ids):
    """[n_slots * n, key]: the key of client ``client_ids[c]`` in each slot's round,
    fold_in(round key, client id), slot-major (the lane order of every round)."""
    per_slot = jax.vmap(lambda k: jax.vmap(lambda c: jax.random.fold_in(k, c))(client_ids))
    return per_slot(round_keys).reshape(round_keys.shape[0] * client_ids.shape[0], -1)


def to_lanes(global_params, n_clients: int):
    """Every slot's global model repeated for its ``n_clients`` lanes (slot-major)."""
    return jax.tree_util.tree_map(lambda g: jnp.repeat(g, n_clients, axis=0), global_params)


def first_step_scores(spec: Spec, arrays: Arrays, global_params):
    """[n_slots, n_docs + window] training-set scores of the slots' global models, which
    every client starts its round from (scored once for all lanes), or None when scoring
    each lane's own query is cheaper (``spec.shared_first_scores``)."""
    if not spec.shared_first_scores:
        return None
    return jax.vmap(lambda g: spec.ranker.apply(g, arrays.train.features))(global_params)


def lane_facts(spec: Spec, arrays: Arrays, settings: RunSettings, positions) -> Lanes:
    """Per-lane facts of the clients at ``positions`` (all of a round's, or one chunk's)
    in every slot: slot, click model (the poison model for data-poisoning attackers, a
    Type 3 client's own, or the slot's), clipping norm and a non-IID plan's query lists."""
    cfg, clients = spec.config, arrays.clients
    n = positions.shape[0]
    slot = jnp.repeat(jnp.arange(spec.n_slots), n)
    client = jnp.tile(positions, spec.n_slots)
    poisoned = (client < settings.n_malicious[slot]) & settings.data_poisoning[slot]
    poison = arrays.click_table.click_prob.shape[0] - 1
    benign_click = settings.click_model[slot]
    if clients is not None and clients.click_index is not None:
        benign_click = clients.click_index[client]  # Type 3: per-client click models
    click_index = jnp.where(poisoned, poison, benign_click)
    lanes = Lanes(
        slot=slot,
        click_model=jax.tree_util.tree_map(lambda x: x[click_index], arrays.click_table),
        clip_norm=settings.sensitivity[slot] * cfg.clip_factor if spec.uses_privacy else None,
    )
    if clients is not None and clients.queries is not None:
        lanes = lanes._replace(
            queries=clients.queries[:, positions].reshape(spec.n_slots * n, -1),
            query_count=clients.query_count[:, positions].reshape(-1),
        )
    if clients is not None and clients.click_pool is not None:
        pool = jax.tree_util.tree_map(lambda x: x[clients.click_pool], arrays.click_table)
        lanes = lanes._replace(click_pool=pool)
    return lanes


def offline_metrics(spec: Spec, arrays: Arrays, new_global, personal=None):
    """Offline nDCG@k and MRR@k [n_slots] of the new global models; with FedPer's
    personal layers and ``personal_eval='clients'``, the mean over the clients'
    personalised models."""
    if personal is None or spec.personal_eval == "server":
        return jax.vmap(lambda p: evaluate(spec, arrays, p))(new_global)

    def personalised(g, own):
        return evaluate(spec, arrays, {**g, **own})

    per_client = jax.vmap(jax.vmap(personalised, in_axes=(None, 0)))(new_global, personal)
    return tuple(m.mean(axis=1) for m in per_client)


def online_mean(spec: Spec, values, n_absent, lane_steps=None):
    """[n_slots] mean of a per-interaction metric ``values`` [lanes, B] over the
    interactions of the clients taking part (absent ones excluded; with Type 4's
    ``lane_steps`` every interaction counts once)."""
    n_slots, n_clients = spec.n_slots, spec.config.n_clients
    present = (jnp.arange(n_clients) >= n_absent[:, None]).astype(jnp.float32)
    if lane_steps is not None:
        steps = jnp.arange(spec.config.local_updates)[None, :] < lane_steps[:, None]
        done = steps.astype(values.dtype).reshape(n_slots, n_clients, -1) * present[:, :, None]
        return jnp.sum(values.reshape(done.shape) * done, axis=(1, 2)) / jnp.sum(done, axis=(1, 2))
    per_client = values.reshape(n_slots, n_clients, -1).mean(axis=2)
    return jnp.sum(per_client * present, axis=1) / jnp.sum(present, axis=1)


def federated_round(
    spec: Spec, arrays: Arrays, global_params, slot_keys, round_index, server_state=None
):
    """One round for every run slot: clients train, servers aggregate, models are evaluated.

    Returns (new global params, RoundMetrics, client updates): the updates
    θ_c − θ_global flattened to [n_slots, n_clients, d] when ``spec.history_every``
    asks for them, else None.  With FedPer (``spec.personal_keys``) the params are
    (global params, personal params with leaves [n_slots, n_clients, ...]): clients
    start from the global model with their own personal layers and keep them; offline
    metrics average every client's personalised model ('clients') or are the server
    model's ('server': the FedAvg of every layer), as ``spec.personal_eval`` says.
    """
    cfg = spec.config
    n_slots, n_clients = spec.n_slots, cfg.n_clients
    clients = arrays.clients
    personal = None
    if spec.personal_keys:
        global_params, personal = global_params
    settings = jax.tree_util.tree_map(
        lambda x: jnp.repeat(x, cfg.n_runs), arrays.settings
    )  # [n_slots]
    round_keys = jax.vmap(lambda k: jax.random.fold_in(k, round_index))(slot_keys)
    lane_keys = client_lane_keys(round_keys, arrays.client_ids)
    lane_params = to_lanes(global_params, n_clients)
    if personal is not None:
        lane_params = {
            **lane_params,
            **{k: v.reshape((n_slots * n_clients,) + v.shape[2:]) for k, v in personal.items()},
        }
    lanes = lane_facts(spec, arrays, settings, jnp.arange(n_clients))
    lane_steps = client_weights = None
    if clients is not None and clients.steps is not None:  # Type 4: own step counts
        lane_steps = jnp.tile(clients.steps, n_slots)
        client_weights = clients.steps.astype(jnp.float32)
    global_scores = first_step_scores(spec, arrays, global_params)
    client_params, outcome = train_lanes(
        spec, arrays, lane_params, lane_keys, lanes, global_scores, lane_steps
    )
    client_params = jax.tree_util.tree_map(
        lambda c: c.reshape((n_slots, n_clients) + c.shape[1:]), client_params
    )
    server_keys = jax.vmap(lambda k: jax.random.fold_in(k, n_clients))(round_keys)
    new_global, server_state = jax.vmap(
        lambda g, c, s, k, o: server_update(spec, g, c, s, k, client_weights, o)
    )(global_params, client_params, settings, server_keys, server_state)
    if personal is not None:
        personal = {k: client_params[k] for k in spec.personal_keys}
    offline_ndcg, offline_mrr = offline_metrics(spec, arrays, new_global, personal)

    def per_slot(x):
        return online_mean(spec, x, settings.n_absent, lane_steps)

    updates = None
    if spec.history_every:
        flat = jax.vmap(jax.vmap(lambda p: jax.flatten_util.ravel_pytree(p)[0]))
        updates = flat(client_params) - flat(
            jax.tree_util.tree_map(lambda g: g[:, None], global_params)
        )
    return (
        new_global if personal is None else (new_global, personal),
        RoundMetrics(offline_ndcg, offline_mrr, per_slot(outcome.ndcg), per_slot(outcome.max_rr)),
        updates,
        server_state,
    )


def chunked_round(
    spec: Spec, arrays: Arrays, global_params, slot_keys, round_index, server_state=None
):
    """``federated_round`` with the clients processed ``client_chunk`` at a time.

    A ``lax.scan`` over equal client chunks trains each chunk's lanes and adds
    them to running sums: Σ_c n_c θ_c (FedAvg) or Σ_c (θ_c − θ) ('sum_of_updates'),
    and the online metrics.  Memory follows the chunk, not the number of clients;
    client c keeps its key, so results equal the unchunked round's up to the order
    of the floating-point sums.  Differential privacy adds each client's noise in
    its chunk, from the client's own key, as the unchunked round does.
    """
    cfg = spec.config
    n_slots, chunk = spec.n_slots, cfg.client_chunk
    settings = jax.tree_util.tree_map(lambda x: jnp.repeat(x, cfg.n_runs), arrays.settings)
    round_keys = jax.vmap(lambda k: jax.random.fold_in(k, round_index))(slot_keys)
    server_keys = jax.vmap(lambda k: jax.random.fold_in(k, cfg.n_clients))(round_keys)
    flat_global = jax.vmap(lambda p: jax.flatten_util.ravel_pytree(p)[0])(global_params)
    unravel_one = jax.flatten_util.ravel_pytree(
        jax.tree_util.tree_map(lambda g: g[0], global_params)
    )[1]
    global_scores = first_step_scores(spec, arrays, global_params)

    def one_chunk(sums, j):
        positions = j * chunk + jnp.arange(chunk)
        ids = jax.lax.dynamic_slice_in_dim(arrays.client_ids, j * chunk, chunk)
        lane_keys = client_lane_keys(round_keys, ids)
        lanes = lane_facts(spec, arrays, settings, positions)
        lane_params = to_lanes(global_params, chunk)
        client_params, outcome = train_lanes(
            spec, arrays, lane_params, lane_keys, lanes, global_scores, None
        )
        models = jax.vmap(lambda p: jax.flatten_util.ravel_pytree(p)[0])(client_params)
        models = models.reshape(n_slots, chunk, -1)
        if spec.uses_privacy:
            # server_update's chain here is [gamma_noise, aggregate]: the noise stage's key
            noise_keys = jax.vmap(lambda k: pipeline.stage_keys(k, 2)[0])(server_keys)
            noise = jax.vmap(
                lambda k, delta, eps: privacy.clients_gamma_noise(
                    k,
                    j * chunk,
                    chunk,
                    models.shape[2],
                    cfg.n_clients,
                    delta,
                    jnp.maximum(eps, 1e-12),
                )
            )(noise_keys, settings.sensitivity, settings.epsilon)
            models = models + jnp.where(settings.sensitivity[:, None, None] > 0, noise, 0.0)
        present = (positions[None, :] >= settings.n_absent[:, None]).astype(jnp.float32)
        if cfg.aggregation == "sum_of_updates":
            total = jnp.sum(models - flat_global[:, None], axis=1)
        else:
            total = jnp.einsum("sc,scd->sd", present * cfg.local_updates, models)
        per_client = lambda x: x.reshape(n_slots, chunk, -1).mean(axis=2)
        model_sum, ndcg_sum, rr_sum = sums
        return (
            model_sum + total,
            ndcg_sum + jnp.sum(per_client(outcome.ndcg) * present, axis=1),
            rr_sum + jnp.sum(per_client(outcome.max_rr) * present, axis=1),
        ), None

    zeros = jnp.zeros((n_slots,), jnp.float32)
    (model_sum, ndcg_sum, rr_sum), _ = jax.lax.scan(
        one_chunk,
        (jnp.zeros_like(flat_global), zeros, zeros),
        jnp.arange(cfg.n_clients // chunk),
    )
    n_present = (cfg.n_clients - settings.n_absent).astype(jnp.float32)
    if cfg.aggregation == "sum_of_updates":
        flat_new = flat_global + model_sum
    else:
        flat_new = model_sum / (n_present * cfg.local_updates)[:, None]
    if cfg.aggregation != "sum_of_updates":
        flat_new, server_state = jax.vmap(functools.partial(_server_step, spec))(
            flat_global, flat_new, server_state
        )
    new_global = jax.vmap(unravel_one)(flat_new)
    offline_ndcg, offline_mrr = jax.vmap(lambda p: evaluate(spec, arrays, p))(new_global)
    return (
        new_global,
        RoundMetrics(offline_ndcg, offline_mrr, ndcg_sum / n_present, rr_sum / n_present),
        None,
        server_state,
    )


def history_length(rounds: int, every: int) -> int:
    """Stored updates for rounds 1, 1 + Δt, ... ≤ T: ⌈T / Δt⌉ (unlearning paper T_unlearn)."""
    return -(-rounds // every)


def run_chunk(spec: Spec, n_rounds: int, consts, state, first_round):
    """``n_rounds`` rounds under ``lax.scan``; ``state`` is (global params, the server
    optimiser's state or None, history or None)."""
    arrays, slot_keys = consts

    def body(carry, t):
        params, server_state, history = carry
        play = chunked_round if spec.config.chunked else federated_round
        params, round_metrics, updates, server_state = play(
            spec, arrays, params, slot_keys, t, server_state
        )
        if history is not None:
            # Round t (0-based) is stored when t is a multiple of Δt, at t // Δt.
            index = t // spec.history_every
            current = jax.lax.dynamic_index_in_dim(history, index, axis=1, keepdims=False)
            stored = jnp.where(t % spec.history_every == 0, updates, current)
            history = jax.lax.dynamic_update_index_in_dim(history, stored, index, axis=1)
        return (params, server_state, history), round_metrics

    return jax.lax.scan(body, state, first_round + jnp.arange(n_rounds))


run_chunk_jit = jax.jit(run_chunk, static_argnums=(0, 1), donate_argnums=(3,))
