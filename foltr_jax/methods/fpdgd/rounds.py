"""One round of FPDGD for every run slot: lanes, local training, the server pipeline,
evaluation and the stored update history (FPDGD paper Algorithm 2; unlearning §3.2).

``FpdgdMethod`` is the static part of an experiment (one compilation per FpdgdMethod): what decides
shapes and code paths, never a value a run traces (``engine.config.static_part`` of
``config.TRACED_FIELDS``); ``FpdgdArrays``
its device data, the traced values among them (``TracedSettings``: ε, Δ, click models,
attackers, learning rates), so runs differing only in values share one program.  The
round is the engine's (``engine.Federated``): FPDGD gives its clients' training
(``train_clients``) and its hooks.  One concern, FPDGD's round, in one module.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from foltr_jax import engine
from foltr_jax.core import click_models
from foltr_jax.core.rankers import Ranker
from foltr_jax.engine.config import resolved
from foltr_jax.engine.lists import DeviceData, Scoring, ranking_quality
from foltr_jax.methods.fpdgd.client_plan import ClientArrays
from foltr_jax.methods.fpdgd.config import FpdgdConfig, TracedSettings
from foltr_jax.methods.fpdgd.lanes import LaneData, Lanes, LaneSpec, train_lanes
from foltr_jax.server import pipeline


@dataclasses.dataclass(frozen=True)
class FpdgdMethod(engine.Federated):
    """The static part of an experiment (hashable: one compilation per FpdgdMethod), and FPDGD
    as the engine runs it (``engine.Federated``'s hooks).  ``config`` is the run's
    ``static_part``: its traced values (ε, Δ, click model, m, attack, aggregator, learning
    rates) are None here and live in ``FpdgdArrays.settings``."""

    config: FpdgdConfig
    ranker: Ranker
    window: int  # candidate slice width: the longest training query, at least top_k
    widths: tuple  # scoring/sampling widths, narrowest first (window_widths)
    shared_first_scores: bool  # score the training set once per round for first steps
    n_settings: int = 1  # grid cells; slots = n_settings * n_runs
    aggregator_names: tuple = ("fedavg",)  # the aggregators the grid uses
    attack_names: tuple = ()  # the model-poisoning attacks (attacks.names()) the grid uses
    uses_privacy: bool = False  # some setting has differential privacy
    noise_once: bool = False  # the average's privacy noise is drawn once (see noise_once)
    max_malicious: int = 0  # the grid's largest m where Krum's selection needs it, else 0
    history_every: int = 0  # store every client's update at rounds 1, 1 + Δt, ... (0: never)
    personal_keys: tuple = ()  # FedPer: parameters each client keeps (thesis §4.3.3)
    personal_eval: str = "server"  # FedPer's offline model (client_plan.PERSONAL_EVALUATIONS)

    offline = ("offline_ndcg", "offline_mrr")
    online = ("online_ndcg", "online_max_rr")
    client_devices = 1  # FPDGD splits its lanes over the devices itself (lanes.train_lanes)

    @property
    def n_slots(self) -> int:
        return self.n_settings * self.config.n_runs

    @functools.cached_property
    def lane_spec(self) -> LaneSpec:
        """The lane layer's static description (``interaction.LaneSpec``), built once, with
        what the config leaves to the backend resolved (``config.resolved``)."""
        cfg = resolved(self.config)
        return LaneSpec(
            Scoring(self.ranker, self.window, self.widths, cfg.top_k, cfg.window_scoring),
            cfg.local_updates,
            cfg.display_groups,
            cfg.n_devices,
        )

    # The method as ``engine.run`` takes it (``engine.Federated``'s hooks).
    def check(self) -> None:
        """Nothing: ``federation.build`` checked the config (its devices split the lanes)."""

    def stages(self, settings=None) -> tuple:
        """One slot's server pipeline (``server_stages``) of its ``settings``."""
        return server_stages(self, settings)

    def repetitions(self) -> np.ndarray:
        """Repetition r of every setting shares its keys: settings are compared on paired runs."""
        return np.tile(np.arange(self.config.n_runs), self.n_settings)

    def init(self, arrays: FpdgdArrays, init_keys):
        """The scan state before round 1: (global params, server state, history).

        The rankers' initialisation, or ``arrays.initial_params``; with FedPer the params
        are (global, personal) with every client's personal layers the initial ones; the
        history [n_slots, ⌈T/Δt⌉, n_clients, d] of zeros when ``history_every`` asks."""
        cfg = self.config
        params = jax.vmap(self.ranker.init)(init_keys)
        if arrays.initial_params is not None:
            params = jax.tree_util.tree_map(
                lambda p, q: jnp.asarray(q, p.dtype).reshape(p.shape),
                params,
                arrays.initial_params,
            )
        server_state = initial_server_state(self, arrays, params)
        history = None
        if self.history_every:
            d = engine.flatten(params).shape[1]
            length = history_length(cfg.rounds, self.history_every)
            history = jnp.zeros((self.n_slots, length, cfg.n_clients, d), jnp.float32)
        if self.personal_keys:
            personal = {
                k: jnp.repeat(params[k][:, None], cfg.n_clients, axis=1) for k in self.personal_keys
            }
            params = (params, personal)
        return arrays, (params, server_state, history)

    def evaluate(self, arrays: FpdgdArrays, state):
        params = state[0][0] if self.personal_keys else state[0]
        return jax.vmap(lambda p: evaluate(self, arrays, p))(params)

    def begin_round(self, arrays: FpdgdArrays, state, keys, t) -> engine.RoundStart:
        """Every client starts from its slot's global model (FedPer: with its own
        personal layers) with the slot's settings (``_Round``)."""
        params, server_state, _ = state
        personal = None
        if self.personal_keys:
            params, personal = params
        settings = jax.tree_util.tree_map(
            lambda x: jnp.repeat(x, self.config.n_runs), arrays.settings
        )
        rnd = _Round(settings, keys, params, first_step_scores(self, arrays, params), personal)
        return engine.RoundStart(
            (arrays, rnd), params, server_state, settings, settings.n_malicious
        )

    def clients(self, inputs, start, size: int) -> engine.Sent:
        # call-arg: mypy takes *inputs, of unknown length, to fill every place
        return train_clients(self, *inputs, start, size)  # type: ignore[call-arg]

    def kept_personal(self, kept):
        """FedPer's personal layers of the clients' models (``Sent.kept``), or None."""
        return None if not self.personal_keys else {k: kept[0][k] for k in self.personal_keys}

    def evaluate_round(self, arrays: FpdgdArrays, params, kept):
        """``offline_metrics``: with FedPer's ``personal_eval='clients'``, of the clients'
        personalised models."""
        return offline_metrics(self, arrays, params, self.kept_personal(kept))

    def end_round(self, arrays: FpdgdArrays, state, start, t, end: engine.RoundEnd):
        """The new global models (FedPer: with the clients' personal layers), and the
        clients' updates θ_c − θ_global [n_slots, n_clients, d] of round t (0-based)
        stored at t // Δt when t is a multiple of Δt (``history_every``)."""
        history = state[2]
        params = end.params
        if self.personal_keys:
            params = (params, self.kept_personal(end.kept))
        if history is not None:
            updates = end.kept[1] - engine.flatten(start.params)[:, None]
            index = t // self.history_every
            current = jax.lax.dynamic_index_in_dim(history, index, axis=1, keepdims=False)
            stored = jnp.where(t % self.history_every == 0, updates, current)
            history = jax.lax.dynamic_update_index_in_dim(history, stored, index, axis=1)
        return (params, end.server_state, history), end.metrics

    def finish(self, arrays: FpdgdArrays, state, curves):
        """The final params (FedPer: (global, personal [n_slots, n_clients, ...])), the
        history [n_slots, ⌈T/Δt⌉, n_clients, d] (clients in position order) or None, and
        Σ_c n_c interactions per slot and round (B each, or Type 4's own counts)."""
        params, _, history = state
        per_round = self.config.n_clients * self.config.local_updates
        if arrays.clients is not None and arrays.clients.steps is not None:
            per_round = int(np.sum(np.asarray(arrays.clients.steps)))
        extras = {"history": None if history is None else np.asarray(history)}
        interactions = self.n_slots * per_round * self.config.rounds
        return jax.device_get(params), extras, interactions


class FpdgdArrays(NamedTuple):
    """The array part of an experiment."""

    train: DeviceData
    test: DeviceData
    click_table: click_models.ClickModel  # stacked click models; 'poison' is the last
    settings: TracedSettings  # [n_settings] each
    client_ids: jax.Array  # int [n_clients]: whose key stream the client at each position uses
    clients: ClientArrays | None = None  # how clients differ (non-IID); None: IID FPDGD
    initial_params: object = None  # leaves [n_slots, ...]: replace the rankers' initialisation


def server_stages(spec: FpdgdMethod, settings: TracedSettings) -> tuple:
    """One slot's server pipeline (``pipeline.server_stages``): its attack, privacy noise,
    aggregator (or the 'batch' baseline's sum of updates) and server optimiser."""
    cfg = spec.config
    noise = once = None
    if spec.uses_privacy and spec.noise_once:
        present = cfg.n_clients - settings.n_absent
        once = pipeline.gamma_noise_once(
            cfg.n_clients, present, settings.sensitivity, settings.epsilon
        )
    elif spec.uses_privacy:
        noise = pipeline.gamma_noise(cfg.n_clients, settings.sensitivity, settings.epsilon)
    return pipeline.server_stages(
        attack_names=spec.attack_names,
        attack_index=settings.model_attack,
        noise=noise,
        noise_on_aggregate=once,
        aggregator_names=spec.aggregator_names,
        aggregator_index=settings.aggregator,
        squared_distances=cfg.krum_squared_distances,
        max_malicious=spec.max_malicious,
        optimizer=pipeline.server_optimizer(cfg.server_optimizer, settings.server_learning_rate),
        aggregation=pipeline.sum_of_updates() if cfg.aggregation == "sum_of_updates" else None,
    )


def noise_once(
    config: FpdgdConfig, aggregator_names: tuple, attack_names: tuple, equal_weights: bool
) -> bool:
    """Whether the privacy noise can be drawn once on the average (``gamma_noise_once``):
    ``privacy_noise='auto'``, FedAvg (every cell's aggregator) of equal weights (no Type 4
    step counts) and no model attack, so no stage sees a single client's noised model."""
    return (
        config.privacy_noise == "auto"
        and config.aggregation == "fedavg"
        and tuple(aggregator_names) == ("fedavg",)
        and not attack_names
        and equal_weights
    )


def _fedavg_weights(spec: FpdgdMethod, present, client_weights):
    """The FedAvg weights n_c of clients (``present`` bool [..., k]): B each, or Type 4's
    own step counts ``client_weights``; 0 for absent clients."""
    own = float(spec.config.local_updates) if client_weights is None else client_weights
    return jnp.where(present, own, 0.0)


def initial_server_state(spec: FpdgdMethod, arrays: FpdgdArrays, global_params):
    """Every slot's server chain state before round 1 (leaves [n_slots, ...]); only the
    server optimiser's stage holds state (the stages do not depend on the setting)."""
    flat = engine.flatten(global_params)
    settings = jax.tree_util.tree_map(lambda x: x[0], arrays.settings)
    return jax.vmap(pipeline.chain(*server_stages(spec, settings)).init)(flat)


def evaluate(spec: FpdgdMethod, arrays: FpdgdArrays, params):
    """Offline nDCG@k and MRR@k of ``params`` on the test split (queries with a
    relevant document only)."""
    return _evaluate_on(spec, arrays.test, params)


def _evaluate_on(spec: FpdgdMethod, test: DeviceData, params):
    scores = spec.ranker.apply(params, test.features)
    return ranking_quality(scores, test, spec.config.top_k)


def client_lane_keys(round_keys, client_ids):
    """[n_slots * n, key]: the key of client ``client_ids[c]`` in each slot's round,
    fold_in(round key, client id), slot-major (the lane order of every round)."""
    per_slot = jax.vmap(lambda k: jax.vmap(lambda c: jax.random.fold_in(k, c))(client_ids))
    return per_slot(round_keys).reshape(round_keys.shape[0] * client_ids.shape[0], -1)


def to_lanes(global_params, n_clients: int):
    """Every slot's global model repeated for its ``n_clients`` lanes (slot-major)."""
    return jax.tree_util.tree_map(lambda g: jnp.repeat(g, n_clients, axis=0), global_params)


def first_step_scores(spec: FpdgdMethod, arrays: FpdgdArrays, global_params):
    """[n_slots, n_docs + window] training-set scores of the slots' global models, which
    every client starts its round from (scored once for all lanes), or None when scoring
    each lane's own query is cheaper (``spec.shared_first_scores``)."""
    if not spec.shared_first_scores:
        return None
    return jax.vmap(lambda g: spec.ranker.apply(g, arrays.train.features))(global_params)


def lane_facts(
    spec: FpdgdMethod, arrays: FpdgdArrays, settings: TracedSettings, positions
) -> Lanes:
    """Per-lane facts of the clients at ``positions`` (all of a round's, or one chunk's)
    in every slot: slot, click model (the poison model for data-poisoning attackers, a
    Type 3 client's own, or the slot's), clipping norm, step size η and a non-IID plan's
    query lists."""
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
        learning_rate=settings.learning_rate[slot],
    )
    if clients is not None and clients.queries is not None and clients.query_count is not None:
        lanes = lanes._replace(
            queries=clients.queries[:, positions].reshape(spec.n_slots * n, -1),
            query_count=clients.query_count[:, positions].reshape(-1),
        )
    return lanes


def lane_data(arrays: FpdgdArrays) -> LaneData:
    """What every lane reads: the training data and the client plan's shared facts
    (FedProx's μ, Type 1's label views, Type 3's per-interaction click pool)."""
    clients = arrays.clients
    if clients is None:
        return LaneData(arrays.train)
    pool = None
    if clients.click_pool is not None:
        pool = jax.tree_util.tree_map(lambda x: x[clients.click_pool], arrays.click_table)
    return LaneData(
        arrays.train, clients.prox_mu, clients.online_labels, clients.online_ideal, pool
    )


def offline_metrics(spec: FpdgdMethod, arrays: FpdgdArrays, new_global, personal=None):
    """Offline nDCG@k and MRR@k [n_slots] of the new global models; with FedPer's
    personal layers and ``personal_eval='clients'``, the mean over the clients'
    personalised models.  With ``n_devices`` > 1 the slots are split over the devices
    (``engine.slots_on_devices``)."""
    if personal is None or spec.personal_eval == "server":
        return engine.evaluate_slots(
            spec.ranker.apply,
            functools.partial(ranking_quality, k=spec.config.top_k),
            arrays.test,
            new_global,
            spec.config.n_devices,
        )

    def personalised(g, own):
        return evaluate(spec, arrays, {**g, **own})

    per_client = jax.vmap(jax.vmap(personalised, in_axes=(None, 0)))(new_global, personal)
    return tuple(m.mean(axis=1) for m in per_client)


def online_sums(spec: FpdgdMethod, values, present, lane_steps=None):
    """Sums over the slots' clients of a per-interaction metric ``values`` [lanes, B] of
    the clients at some positions, and their counts: the mean over a client's
    interactions counted once per present client (``present`` [n_slots, k]), or with
    Type 4's ``lane_steps`` every interaction done once.  Returns ([n_slots], [n_slots])."""
    n_slots, k = present.shape
    present = present.astype(jnp.float32)
    if lane_steps is not None:
        steps = jnp.arange(spec.config.local_updates)[None, :] < lane_steps[:, None]
        done = steps.astype(values.dtype).reshape(n_slots, k, -1) * present[:, :, None]
        return jnp.sum(values.reshape(done.shape) * done, axis=(1, 2)), jnp.sum(done, axis=(1, 2))
    per_client = values.reshape(n_slots, k, -1).mean(axis=2)
    return jnp.sum(per_client * present, axis=1), jnp.sum(present, axis=1)


class _Round(NamedTuple):
    """What every client of a round shares, per slot."""

    settings: TracedSettings  # [n_slots]
    round_keys: jax.Array  # [n_slots, key]
    global_params: object  # leaves [n_slots, ...]
    global_scores: jax.Array | None  # first-step scores (first_step_scores)
    personal: dict | None  # FedPer's personal layers, leaves [n_slots, n_clients, ...]
    # int [n_slots]: the local steps every client of a slot takes, with equal FedAvg weights
    # (the unlearning replay's n′); None: B each, or Type 4's own counts
    steps: jax.Array | None = None


def train_clients(
    spec: FpdgdMethod, arrays: FpdgdArrays, rnd: _Round, start, size: int
) -> engine.Sent:
    """The ``size`` clients from position ``start`` train in every slot: FPDGD's client
    update (B local PDGD steps) as ``engine.serve`` takes it.

    Sends the flat client models [n_slots, size, d] with their FedAvg weights (B, or
    Type 4's own step counts; 0 for absent clients) and the online (nDCG sums, MaxRR
    sums, counts) [n_slots] each; keeps (client params, leaves [n_slots, size, ...];
    flat models).
    """
    clients, n_slots = arrays.clients, spec.n_slots
    positions = start + jnp.arange(size)
    ids = jax.lax.dynamic_slice_in_dim(arrays.client_ids, start, size)
    lane_params = to_lanes(rnd.global_params, size)
    if rnd.personal is not None:
        own = {
            k: jax.lax.dynamic_slice_in_dim(v, start, size, axis=1) for k, v in rnd.personal.items()
        }
        lane_params = {
            **lane_params,
            **{k: v.reshape((n_slots * size,) + v.shape[2:]) for k, v in own.items()},
        }
    lanes = lane_facts(spec, arrays, rnd.settings, positions)
    lane_steps = None
    weights: jax.Array | float | None = None
    if clients is not None and clients.steps is not None:  # Type 4: own step counts
        steps = jax.lax.dynamic_slice_in_dim(clients.steps, start, size)
        lane_steps, weights = jnp.tile(steps, n_slots), steps.astype(jnp.float32)
    elif rnd.steps is not None:  # the slot's steps for every client, equal weights
        lane_steps, weights = jnp.repeat(rnd.steps, size), 1.0
    client_params, outcome = train_lanes(
        spec.lane_spec,
        lane_data(arrays),
        lane_params,
        client_lane_keys(rnd.round_keys, ids),
        lanes,
        rnd.global_scores,
        lane_steps,
    )
    client_params = jax.tree_util.tree_map(
        lambda c: c.reshape((n_slots, size) + c.shape[1:]), client_params
    )
    models = jax.vmap(engine.flatten)(client_params)
    present = positions[None, :] >= rnd.settings.n_absent[:, None]
    ndcg, count = online_sums(spec, outcome.ndcg, present, lane_steps)
    max_rr, _ = online_sums(spec, outcome.max_rr, present, lane_steps)
    return engine.Sent(
        models,
        _fedavg_weights(spec, present, weights),
        {"online_ndcg": ndcg, "online_max_rr": max_rr, "count": count},
        (client_params, models),
    )


def history_length(rounds: int, every: int) -> int:
    """Stored updates for rounds 1, 1 + Δt, ... ≤ T: ⌈T / Δt⌉ (unlearning paper T_unlearn)."""
    return -(-rounds // every)


evaluated_rounds = engine.evaluated_rounds
