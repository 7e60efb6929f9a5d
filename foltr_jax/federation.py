"""Federated PDGD (FPDGD paper §3.2, Algorithm 2) and centralised PDGD on one data path.

Shapes: a *lane* is one client of one repetition.  A round maps every lane's
client update (B sequential PDGD interactions, ``lax.scan``) over the stacked
lane axis ``[n_runs * n_clients]``, then each run's server aggregates its clients:
θ ← Σ_c n_c/n θ_c with n_c the client's number of local interactions (FedAvg).
Rounds run under ``lax.scan`` in jit-compiled chunks (one compilation per chunk
length), so progress can be reported between chunks without changing results:
every key is derived from (seed, run, round, client, interaction) by ``fold_in``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import pickle
import tempfile
import time
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np

from foltr_jax import (
    aggregators,
    attacks,
    click_models,
    metrics,
    pdgd,
    pipeline,
    plackett_luce,
    privacy,
    rankers,
)
from foltr_jax.data import RankingDataset

AGGREGATIONS = ("fedavg", "sum_of_updates")
CENTRALISED_FORMS = ("same_updates", "same_budget", "batch")
WINDOW_SCORING = ("map", "vmap")
PERSONAL_EVALUATIONS = ("clients", "server")  # FedPer offline model: mean of personalised, server


@dataclasses.dataclass(frozen=True)
class FederationConfig:
    """Settings of one FPDGD experiment (defaults: FPDGD paper §4, MSLR-WEB10K)."""

    n_clients: int = 1000
    local_updates: int = 2  # B, interactions per client per round
    rounds: int = 200  # T, global updates
    learning_rate: float = 0.1
    ranker: str = "linear"
    click_model: str = "informational"
    n_grades: int = 0  # 3 or 5; 0 infers it from the training labels
    n_runs: int = 1
    seed: int = 0
    top_k: int = 10
    aggregation: str = "fedavg"  # 'sum_of_updates' accumulates client updates (centralised batch)
    # Update pipeline (attack -> privacy -> aggregation); a grid overrides these per Setting.
    aggregator: str = "fedavg"  # aggregators.AGGREGATORS
    attack: str = "none"  # ATTACKS
    n_malicious: int = 0  # m: the first m clients are malicious
    epsilon: float = 0.0  # ε of FPDGD's differential privacy (with sensitivity > 0)
    sensitivity: float = 0.0  # Δ; 0 turns differential privacy off
    clip_factor: float = 0.5  # clip to factor·Δ after every local update (paper Δ/2; public code Δ)
    krum_squared_distances: bool = True  # Blanchard et al.; the poisoning paper says Euclidean
    display_groups: int = 4  # lanes sample their lists in this many groups of similar length
    window_scoring: str = "map"  # score each lane's window in turn (map) or batched (vmap)
    chunk_rounds: int = 50  # rounds per compiled scan chunk
    # Scale: clients of a round in chunks of this many (0: all at once), FedAvg as a running sum.
    client_chunk: int = 0
    n_devices: int = 1  # lanes of a round (or chunk) sharded over this many devices

    @property
    def chunked(self) -> bool:
        return 0 < self.client_chunk < self.n_clients

    def validate(self) -> FederationConfig:
        """Raises ConfigError naming the setting when a value is out of range."""
        positive = (
            "n_clients",
            "local_updates",
            "rounds",
            "n_runs",
            "top_k",
            "chunk_rounds",
            "display_groups",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(name, f"must be at least 1, got {getattr(self, name)}")
        if not self.learning_rate > 0:
            raise ConfigError("learning_rate", f"must be positive, got {self.learning_rate}")
        choices = {
            "ranker": rankers.RANKERS,
            "aggregation": AGGREGATIONS,
            "window_scoring": WINDOW_SCORING,
            "n_grades": (0, 3, 5),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ConfigError(name, f"must be one of {allowed}, got {getattr(self, name)!r}")
        if not self.clip_factor > 0:
            raise ConfigError("clip_factor", f"must be positive, got {self.clip_factor}")
        if self.client_chunk < 0:
            raise ConfigError("client_chunk", f"must be at least 0, got {self.client_chunk}")
        if self.chunked and self.n_clients % self.client_chunk:
            raise ConfigError(
                "client_chunk",
                f"must divide n_clients = {self.n_clients} (chunks are equal), "
                f"got {self.client_chunk}",
            )
        if self.n_devices < 1:
            raise ConfigError("n_devices", f"must be at least 1, got {self.n_devices}")
        self.setting().validate(self.n_clients)
        return self

    def setting(self) -> Setting:
        """The single pipeline setting this config describes."""
        return Setting(
            click_model=self.click_model,
            n_malicious=self.n_malicious,
            attack=self.attack,
            aggregator=self.aggregator,
            epsilon=self.epsilon,
            sensitivity=self.sensitivity,
        )


ATTACKS = ("none", "data_poisoning") + attacks.ATTACKS[1:]


@dataclasses.dataclass(frozen=True)
class Setting:
    """One cell of an experiment grid: what varies between runs of one compiled program."""

    click_model: str = "informational"  # the benign clients' click model
    n_malicious: int = 0
    attack: str = "none"  # ATTACKS; data_poisoning makes malicious clients click 'poison'
    aggregator: str = "fedavg"
    epsilon: float = 0.0
    sensitivity: float = 0.0
    n_absent: int = 0  # the first n_absent clients take no part (FedAvg weight 0): a retrain

    @property
    def model_attack(self) -> str | None:
        """The attack on models (attacks.ATTACKS), None for no attack or data poisoning."""
        return None if self.attack in ("none", "data_poisoning") else self.attack

    def validate(self, n_clients: int) -> Setting:
        """Raises ConfigError naming the offending field (= flag name)."""
        try:
            click_models.by_name(self.click_model, 5)
        except ValueError as error:
            raise ConfigError("click_model", str(error)) from None
        if self.attack not in ATTACKS:
            raise ConfigError("attack", f"must be one of {ATTACKS}, got {self.attack!r}")
        if self.aggregator not in aggregators.AGGREGATORS:
            raise ConfigError(
                "aggregator", f"must be one of {aggregators.AGGREGATORS}, got {self.aggregator!r}"
            )
        if self.n_malicious < 0:
            raise ConfigError("n_malicious", f"must be at least 0, got {self.n_malicious}")
        if not 0 <= self.n_absent < n_clients:
            raise ConfigError(
                "n_absent", f"must be in [0, n_clients = {n_clients}), got {self.n_absent}"
            )
        if self.n_absent and (self.n_malicious or self.aggregator != "fedavg"):
            raise ConfigError(
                "n_absent", "absent clients need FedAvg and no malicious clients (both come first)"
            )
        try:
            aggregators.check_settings(self.aggregator, n_clients, self.n_malicious)
        except ValueError as error:
            raise ConfigError("n_malicious", str(error)) from None
        if self.attack != "none" and self.n_malicious == 0:
            raise ConfigError("n_malicious", f"attack {self.attack!r} needs n_malicious >= 1")
        if self.sensitivity < 0:
            raise ConfigError("sensitivity", f"must be positive, got {self.sensitivity}")
        if self.sensitivity > 0 and not self.epsilon > 0:
            raise ConfigError(
                "epsilon", f"must be positive with sensitivity > 0, got {self.epsilon}"
            )
        if self.epsilon < 0:
            raise ConfigError("epsilon", f"must be positive, got {self.epsilon}")
        if self.epsilon > 0 and not self.sensitivity > 0:
            raise ConfigError("sensitivity", "must be positive when epsilon is set")
        return self


class RunSettings(NamedTuple):
    """Settings as arrays, one entry per setting of the grid (see Setting)."""

    click_model: jax.Array  # int, index into the click table
    n_malicious: jax.Array  # int
    data_poisoning: jax.Array  # bool: malicious clients click with the 'poison' model
    model_attack: jax.Array  # int, index into Spec.attack_names
    aggregator: jax.Array  # int, index into Spec.aggregator_names
    epsilon: jax.Array  # float
    sensitivity: jax.Array  # float, 0 = no differential privacy
    n_absent: jax.Array  # int, the first n_absent clients take no part


class ConfigError(ValueError):
    """A setting out of range; ``field`` is the FederationConfig field (and flag) name."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field} {message}")
        self.field = field
        self.message = message


def centralised(config: FederationConfig, form: str) -> FederationConfig:
    """The centralised PDGD baseline matching an FPDGD config (FPDGD paper §4).

    same_updates: one interaction per update, as many updates as FPDGD rounds.
    same_budget: one update per interaction, FPDGD's whole interaction budget
        (n_clients · B interactions between two evaluations).
    batch: gradients of n_clients · B interactions accumulated (summed) into one
        update per round.
    """
    budget = config.n_clients * config.local_updates
    if form == "same_updates":
        return dataclasses.replace(config, n_clients=1, local_updates=1)
    if form == "same_budget":
        return dataclasses.replace(config, n_clients=1, local_updates=budget)
    if form == "batch":
        return dataclasses.replace(
            config, n_clients=budget, local_updates=1, aggregation="sum_of_updates"
        )
    raise ValueError(f"centralised form must be one of {CENTRALISED_FORMS}, got {form!r}")


class DeviceData(NamedTuple):
    """A dataset as flat device arrays; ``features``/``labels`` carry ``window``
    zero rows of padding at the end so every query's window slice is in range."""

    features: jax.Array  # float32 [n_docs + window, n_features]
    labels: jax.Array  # int32 [n_docs + window]
    query_offsets: jax.Array  # int32 [n_queries]
    query_lengths: jax.Array  # int32 [n_queries]
    ideal_dcg: jax.Array  # float32 [n_queries], DCG@k of the ideal list
    eval_buckets: tuple  # metrics.LengthBucket per width (test split only), for ranking queries


def to_device(dataset: RankingDataset, window: int, k: int, ranked: bool = False) -> DeviceData:
    """Flat device arrays; ``ranked`` adds the length buckets offline evaluation ranks by."""
    pad = ((0, window), (0, 0))
    return DeviceData(
        features=jnp.asarray(np.pad(dataset.features, pad), jnp.float32),
        labels=jnp.asarray(np.pad(dataset.labels, (0, window)), jnp.int32),
        query_offsets=jnp.asarray(dataset.query_offsets, jnp.int32),
        query_lengths=jnp.asarray(dataset.query_lengths, jnp.int32),
        ideal_dcg=jnp.asarray(
            metrics.ideal_dcg(dataset.labels, dataset.query_offsets, dataset.query_lengths, k)
        ),
        eval_buckets=metrics.length_buckets(
            dataset.query_offsets,
            dataset.query_lengths,
            window_widths(dataset.max_query_length, k),
        )
        if ranked
        else (),
    )


class InteractionOutcome(NamedTuple):
    ndcg: jax.Array  # nDCG@k of the displayed list
    max_rr: jax.Array  # MaxRR of the clicks


class DisplayedList(NamedTuple):
    """What PDGD needs to know about one displayed list."""

    ranking: jax.Array  # int [k] candidate positions within the query, top first
    scores: jax.Array  # float [k] f(d) of the displayed documents
    rest_logsumexp: jax.Array  # log Σ e^f over the candidates not displayed (-inf if none)


def sample_query(key, data: DeviceData):
    """A query drawn uniformly from the client's queries: (index, first row, length)."""
    query = jax.random.randint(key, (), 0, data.query_offsets.shape[0])
    return query, data.query_offsets[query], data.query_lengths[query]


def display_list(key, scores, length, k: int) -> DisplayedList:
    """Samples the top-k list shown for a query (FPDGD eqs. 1-2, Algorithm 1 line 5).

    ``scores`` cover a candidate window (float [W], W ≥ the query's length).
    """
    mask = jnp.arange(scores.shape[0]) < length
    ranking = plackett_luce.sample_top_k(key, scores, mask, k)
    shown = jnp.arange(k) < jnp.minimum(length, k)
    rest = pdgd.unshown_logsumexp(scores, mask, ranking, shown)
    return DisplayedList(ranking, scores[ranking], rest)


def pdgd_update(
    params,
    key,
    query,
    displayed: DisplayedList,
    data: DeviceData,
    ranker,
    click_model,
    *,
    learning_rate: float,
    clip_norm=None,
):
    """Clicks on a displayed list and the PDGD update they cause (Algorithm 1, lines 6-12).

    ``clip_norm`` (FPDGD Algorithm 3): after the update θ ← θ·min(1, clip_norm/‖θ‖);
    a clip_norm of 0 leaves θ alone.
    """
    k = displayed.ranking.shape[0]
    start, length = data.query_offsets[query], data.query_lengths[query]
    shown = jnp.arange(k) < jnp.minimum(length, k)
    rows = start + displayed.ranking
    shown_labels = jnp.where(shown, data.labels[rows], 0)
    clicks = click_models.simulate_clicks(key, click_model, shown_labels, shown)
    coefficients = pdgd.position_coefficients(
        displayed.scores, shown, clicks, displayed.rest_logsumexp
    )
    coefficients = jnp.where(shown, coefficients, 0.0)
    _, pullback = jax.vjp(lambda p: ranker.apply(p, data.features[rows]), params)
    (gradient,) = pullback(coefficients.astype(displayed.scores.dtype))
    params = jax.tree_util.tree_map(lambda p, g: p + learning_rate * g, params, gradient)
    if clip_norm is not None:
        flat, unravel = jax.flatten_util.ravel_pytree(params)
        params = unravel(jnp.where(clip_norm > 0, privacy.clip(flat, clip_norm, 1.0), flat))
    outcome = InteractionOutcome(
        metrics.ndcg_of_list(shown_labels, shown, data.ideal_dcg[query]),
        metrics.max_reciprocal_rank(clicks),
    )
    return params, outcome


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
    attack_names: tuple = ()  # the model-poisoning attacks (attacks.ATTACKS) the grid uses
    uses_privacy: bool = False  # some setting has differential privacy
    history_every: int = 0  # store every client's update at rounds 1, 1 + Δt, ... (0: never)
    personal_keys: tuple = ()  # FedPer: parameters each client keeps (thesis §4.3.3)
    personal_eval: str = "clients"  # FedPer's offline model (PERSONAL_EVALUATIONS)

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


@dataclasses.dataclass(frozen=True, eq=False)
class ClientPlan:
    """How the clients differ (thesis ch. 4, non-IID types and remedies); None = IID FPDGD.

    queries: int [n_clients, L] or [n_runs, n_clients, L] training-query indices each
        client samples from uniformly (-1 pads); Types 1-2 and data sharing (§4.3-4.4).
    click_models: one click-model name per client (Type 3, §4.5.1).
    random_click_models: every interaction draws one of these uniformly (Type 3's IID).
    steps: local interactions per client, each ≤ B (Type 4, §4.5.2); FedAvg weights
        n_c = steps[c].
    prox_mu: FedProx μ (§4.3.3): local ascent θ ← θ + η(∇ − μ(θ − θ_global)), i.e. the
        proximal term (μ/2)‖θ − θ_global‖² of Li et al.; None turns it off.
    personal: FedPer (§4.3.3): names of the parameters every client keeps across rounds.
    personal_eval: FedPer's offline metrics (PERSONAL_EVALUATIONS): 'clients' (default)
        average over clients of each client's personalised model (global base layers
        with its own personal layers); 'server' the server model, i.e. the FedAvg of
        all layers, personal ones included (the public FedPer code).  The thesis does
        not say which; training and online metrics are the same under both.
    online_labels: int [V, n_docs]: online nDCG of a shown list averaged over these
        label views (Type 1: every intent, §4.3.1) instead of the training labels.
    """

    queries: object = None
    click_models: tuple | None = None
    random_click_models: tuple | None = None
    steps: tuple | None = None
    prox_mu: float | None = None
    personal: tuple = ()
    personal_eval: str = "clients"
    online_labels: object = None


class ClientArrays(NamedTuple):
    """ClientPlan on the device (None fields keep the IID behaviour)."""

    queries: jax.Array | None  # int32 [n_slots, n_clients, L]
    query_count: jax.Array | None  # int32 [n_slots, n_clients]
    click_index: jax.Array | None  # int32 [n_clients] rows of the click table
    click_pool: jax.Array | None  # int32 [P] rows of the click table, drawn per interaction
    steps: jax.Array | None  # int32 [n_clients]
    prox_mu: jax.Array | None  # float32 []
    online_labels: jax.Array | None  # int32 [V, n_docs + window]
    online_ideal: jax.Array | None  # float32 [V, n_queries]


def build(
    config: FederationConfig,
    train: RankingDataset,
    test: RankingDataset,
    settings: list[Setting] | None = None,
    *,
    history_every: int = 0,
    client_ids=None,
    clients: ClientPlan | None = None,
):
    """Validates ``config`` and puts the data on the device: returns (Spec, Arrays).

    ``settings`` (default: the config's own) are the cells of a grid; every cell
    runs ``config.n_runs`` repetitions, all in one compiled program.
    ``history_every`` = Δt > 0 stores every client's update ΔM_{i,t} at rounds
    1, 1 + Δt, ... (unlearning paper §3.2) in ``RunResult.history``.
    ``client_ids`` (a permutation of range(n_clients)) says which client sits at
    each position: malicious and absent clients are the first positions, so
    putting client 7 first makes client 7 the malicious one with its own randomness.
    ``clients`` (ClientPlan) makes the clients differ: non-IID data and its remedies.
    """
    config.validate()
    if history_every < 0:
        raise ConfigError("history_every", f"must be at least 0, got {history_every}")
    client_ids = np.arange(config.n_clients) if client_ids is None else np.asarray(client_ids)
    if sorted(client_ids.tolist()) != list(range(config.n_clients)):
        raise ConfigError(
            "client_ids", f"must be a permutation of 0..{config.n_clients - 1}, got {client_ids}"
        )
    settings = list(settings) if settings else [config.setting()]
    for setting in settings:
        setting.validate(config.n_clients)
    _check_scale(config, settings, history_every, clients)
    if train.n_features != test.n_features:
        raise ValueError(f"train has {train.n_features} features but test has {test.n_features}")
    n_grades = config.n_grades or click_models.n_grades_for(max(train.max_label, test.max_label))
    widths = window_widths(train.max_query_length, config.top_k)
    window = widths[-1]
    mean_length = float(np.mean(train.query_lengths))
    lanes = config.n_runs * config.n_clients * len(settings)
    plan_names = set()
    if clients is not None:
        plan_names = set(clients.click_models or ()) | set(clients.random_click_models or ())
    names = sorted(({s.click_model for s in settings} | plan_names) - {"poison"}) + ["poison"]
    personal = tuple(clients.personal) if clients is not None else ()
    personal_eval = clients.personal_eval if clients is not None else "clients"
    spec = Spec(
        config,
        rankers.make_ranker(config.ranker, train.n_features),
        window,
        widths,
        shared_first_scores=lanes * mean_length >= train.n_docs and not personal,
        n_settings=len(settings),
        aggregator_names=tuple(sorted({s.aggregator for s in settings})),
        attack_names=_attack_names(settings),
        uses_privacy=any(s.sensitivity > 0 for s in settings),
        history_every=history_every,
        personal_keys=personal,
        personal_eval=personal_eval,
    )
    table = [click_models.by_name(name, n_grades) for name in names]
    run_settings = RunSettings(
        click_model=jnp.array([names.index(s.click_model) for s in settings], jnp.int32),
        n_malicious=jnp.array([s.n_malicious for s in settings], jnp.int32),
        data_poisoning=jnp.array([s.attack == "data_poisoning" for s in settings]),
        model_attack=jnp.array(
            [spec.attack_names.index(s.model_attack or "none") for s in settings]
            if spec.attack_names
            else [0] * len(settings),
            jnp.int32,
        ),
        aggregator=jnp.array(
            [spec.aggregator_names.index(s.aggregator) for s in settings], jnp.int32
        ),
        epsilon=jnp.array([s.epsilon for s in settings], jnp.float32),
        sensitivity=jnp.array([s.sensitivity for s in settings], jnp.float32),
        n_absent=jnp.array([s.n_absent for s in settings], jnp.int32),
    )
    arrays = Arrays(
        to_device(train, window, config.top_k),
        to_device(test, window, config.top_k, ranked=True),
        jax.tree_util.tree_map(lambda *x: jnp.stack(x), *table),
        run_settings,
        jnp.asarray(client_ids, jnp.int32),
    )
    if clients is not None:
        arrays = arrays._replace(
            clients=_client_arrays(spec, clients, train, names, len(settings), window)
        )
    return spec, arrays


def _check_scale(config: FederationConfig, settings, history_every, clients) -> None:
    """Client chunking keeps only running sums; device sharding needs equal shards."""
    if config.chunked:
        if any(s.aggregator != "fedavg" or s.model_attack for s in settings):
            raise ConfigError(
                "client_chunk", "needs FedAvg without model attacks (they see every client)"
            )
        if history_every or clients is not None:
            raise ConfigError(
                "client_chunk", "does not combine with update histories or non-IID client plans"
            )
    if config.n_devices > 1:
        available = len(jax.devices())
        if config.n_devices > available:
            raise ConfigError(
                "n_devices", f"asks for {config.n_devices} devices but {available} are visible"
            )
        per_round = config.client_chunk if config.chunked else config.n_clients
        lanes = per_round * config.n_runs * len(settings)
        if lanes % config.n_devices:
            raise ConfigError(
                "n_devices",
                f"must divide the {lanes} lanes of a round (clients x runs x settings"
                f"{', per chunk' if config.chunked else ''})",
            )


def _client_arrays(
    spec: Spec, plan: ClientPlan, train: RankingDataset, names, n_settings: int, window: int
) -> ClientArrays:
    """Checks a ClientPlan against the config and puts it on the device."""
    cfg = spec.config
    n_clients = cfg.n_clients
    for name in ("click_models", "steps"):
        value = getattr(plan, name)
        if value is not None and len(value) != n_clients:
            raise ConfigError(name, f"needs one entry per client ({n_clients}), got {len(value)}")
    for name in set(plan.click_models or ()) | set(plan.random_click_models or ()):
        try:
            click_models.by_name(name, 5)
        except ValueError as error:
            raise ConfigError("click_model", str(error)) from None
    if plan.random_click_models is not None and not plan.random_click_models:
        raise ConfigError("random_click_models", "must name at least one click model")
    if plan.steps is not None:
        for c, n in enumerate(plan.steps):
            if not 1 <= n <= cfg.local_updates:
                raise ConfigError(
                    "steps", f"client {c}: must be in [1, B = {cfg.local_updates}], got {n}"
                )
    if plan.prox_mu is not None and not plan.prox_mu >= 0:
        raise ConfigError("prox_mu", f"must be at least 0, got {plan.prox_mu}")
    if plan.personal:
        keys = set(spec.ranker.init(jax.random.PRNGKey(0)))
        if not set(plan.personal) < keys:
            raise ConfigError("personal", f"must be a proper subset of the ranker's {sorted(keys)}")
    if plan.personal_eval not in PERSONAL_EVALUATIONS:
        raise ConfigError(
            "personal_eval", f"must be one of {PERSONAL_EVALUATIONS}, got {plan.personal_eval!r}"
        )
    if plan.personal_eval != "clients" and not plan.personal:
        raise ConfigError("personal_eval", "applies to FedPer only (set personal)")
    queries = count = None
    if plan.queries is not None:
        table = np.asarray(plan.queries)
        if table.ndim == 2:
            table = table[None]
        if table.ndim != 3 or table.shape[1] != n_clients or table.shape[0] not in (1, cfg.n_runs):
            raise ConfigError(
                "queries", f"must be [n_clients] or [n_runs, n_clients] lists, got {table.shape}"
            )
        if table.size and table.max() >= train.n_queries:
            raise ConfigError("queries", f"index {table.max()} beyond {train.n_queries} queries")
        valid = table >= 0
        n = valid.sum(axis=2)
        for run, client in zip(*np.nonzero(n == 0)):
            raise ConfigError("queries", f"client {client} (run {run}) has no queries")
        # Pack each list's valid entries first; a client draws u < count, query = list[u].
        order = np.argsort(~valid, axis=2, kind="stable")
        table = np.take_along_axis(np.where(valid, table, 0), order, axis=2)
        table = np.broadcast_to(table, (cfg.n_runs,) + table.shape[1:])
        n = np.broadcast_to(n, (cfg.n_runs, n_clients))
        queries = jnp.asarray(np.tile(table, (n_settings, 1, 1)), jnp.int32)
        count = jnp.asarray(np.tile(n, (n_settings, 1)), jnp.int32)
    online_labels = online_ideal = None
    if plan.online_labels is not None:
        views = np.asarray(plan.online_labels)
        if views.ndim != 2 or views.shape[1] != train.n_docs:
            raise ConfigError(
                "online_labels", f"must be [views, {train.n_docs}], got {views.shape}"
            )
        online_labels = jnp.asarray(np.pad(views, ((0, 0), (0, window))), jnp.int32)
        online_ideal = jnp.asarray(
            np.stack(
                [
                    metrics.ideal_dcg(v, train.query_offsets, train.query_lengths, cfg.top_k)
                    for v in views
                ]
            )
        )
    return ClientArrays(
        queries=queries,
        query_count=count,
        click_index=None
        if plan.click_models is None
        else jnp.asarray([names.index(n) for n in plan.click_models], jnp.int32),
        click_pool=None
        if plan.random_click_models is None
        else jnp.asarray([names.index(n) for n in plan.random_click_models], jnp.int32),
        steps=None if plan.steps is None else jnp.asarray(plan.steps, jnp.int32),
        prox_mu=None if plan.prox_mu is None else jnp.float32(plan.prox_mu),
        online_labels=online_labels,
        online_ideal=online_ideal,
    )


def _attack_names(settings) -> tuple:
    """The model attacks a grid uses, with 'none' first when some cells have none."""
    used = sorted({s.model_attack for s in settings} - {None})
    if used and any(s.model_attack is None for s in settings):
        used = ["none"] + used
    return tuple(used)


def window_widths(max_length: int, k: int) -> tuple:
    """Scoring widths: a ladder growing by ~1.5x from 16 up to the longest query.

    Each client scores its query's candidates at the narrowest width that holds
    them, so scoring cost follows the query's length, not the longest query's.
    """
    longest = max(int(max_length), k)
    widths, width = [], max(16, k)
    while width < longest:
        widths.append(width)
        width = -(-int(width * 1.5) // 8) * 8
    return tuple(widths) + (longest,)


def display_lists(
    spec: Spec, arrays: Arrays, lane_params, keys, queries, lane_slots, global_scores
):
    """Scores every lane's candidates and samples its displayed list.

    Scoring walks the lanes one after another (``lax.map``): XLA:CPU turns a
    vmapped ``dynamic_slice`` into a slow general gather.  Each lane picks with
    ``lax.switch`` the narrowest width in ``spec.widths`` that holds its query, so
    scoring follows the query's own length; the rest of its window is -inf.
    Sampling is vmapped over all lanes.  With ``window_scoring='vmap'`` (for
    accelerators) scoring is vmapped too, at full width.
    """
    train = arrays.train
    lengths = train.query_lengths[queries]
    if global_scores is not None:
        # A round's first step: every lane scores with its run's global model.
        scores = jax.vmap(
            lambda run, query: jax.lax.dynamic_slice(
                global_scores, (run, train.query_offsets[query]), (1, spec.window)
            )[0]
        )(lane_slots, queries)
    else:

        def at_width(width, params, query):
            start = train.query_offsets[query]
            window = jax.lax.dynamic_slice_in_dim(train.features, start, width, axis=0)
            scores = spec.ranker.apply(params, window)
            return jnp.pad(scores, (0, spec.window - width), constant_values=-jnp.inf)

        if spec.config.window_scoring == "vmap":
            scores = jax.vmap(functools.partial(at_width, spec.window))(lane_params, queries)
        else:
            branches = [functools.partial(at_width, w) for w in spec.widths]
            widths = jnp.asarray(spec.widths)

            def one(args):
                params, query, length = args
                return jax.lax.switch(jnp.searchsorted(widths, length), branches, params, query)

            scores = jax.lax.map(one, (lane_params, queries, lengths))
    return _display_in_groups(spec, keys, scores, lengths)


def _display_in_groups(spec: Spec, keys, scores, lengths):
    """Vmapped ``display_list`` over lanes, in ``display_groups`` groups of similar length.

    Lanes are sorted by query length and cut into equal groups; each group samples
    at the narrowest width holding its longest query (``lax.switch``), so the
    sampling work follows the lengths too.  Results do not depend on the grouping.
    """
    n_lanes = lengths.shape[0]
    n_groups = min(spec.config.display_groups, n_lanes)
    display = jax.vmap(functools.partial(display_list, k=spec.config.top_k))
    if n_groups == 1 or len(spec.widths) == 1:
        return display(keys, scores, lengths)
    size = -(-n_lanes // n_groups)
    order = jnp.argsort(lengths)
    order = jnp.concatenate([order, jnp.full(size * n_groups - n_lanes, order[-1])])

    def display_at(width, k, s, n):
        return display(k, s[:, :width], n)

    branches = [functools.partial(display_at, w) for w in spec.widths]
    widths = jnp.asarray(spec.widths)
    parts = []
    for g in range(n_groups):
        lanes = order[g * size : (g + 1) * size]
        branch = jnp.searchsorted(widths, lengths[lanes[-1]])
        parts.append(jax.lax.switch(branch, branches, keys[lanes], scores[lanes], lengths[lanes]))
    inverse = jnp.argsort(order[:n_lanes])
    return jax.tree_util.tree_map(lambda *p: jnp.concatenate(p)[inverse], *parts)


def interaction_step(
    spec: Spec, arrays: Arrays, lane_params, keys, lanes: Lanes, global_scores=None
):
    """One PDGD interaction on every lane.

    Args:
        lane_params: lane models, leading axis [lanes].
        keys: [lanes] PRNG keys of this interaction.
        lanes: per-lane slot, click model and clipping norm.
        global_scores: optional [n_slots, n_docs + window] training-set scores under
            the lanes' current models (a round's first step starts from the global model).
    """
    key_query, key_rank, key_click = jnp.moveaxis(
        jax.vmap(lambda key: jax.random.split(key, 3))(keys), 1, 0
    )
    if lanes.queries is None:
        queries, _, _ = jax.vmap(sample_query, in_axes=(0, None))(key_query, arrays.train)
    else:  # each lane draws from its own query list (non-IID, thesis ch. 4)
        queries = jax.vmap(lambda k, table, n: table[jax.random.randint(k, (), 0, n)])(
            key_query, lanes.queries, lanes.query_count
        )
    displayed = display_lists(
        spec, arrays, lane_params, key_rank, queries, lanes.slot, global_scores
    )
    update = functools.partial(
        pdgd_update, data=arrays.train, ranker=spec.ranker, learning_rate=spec.config.learning_rate
    )
    click_model = lanes.click_model
    if lanes.click_pool is not None:
        # Type 3's IID baseline: every interaction draws a click model (thesis §4.5.1).
        pool = lanes.click_pool
        draw = jax.vmap(
            lambda key: jax.random.randint(
                jax.random.fold_in(key, _CLICK_DRAW), (), 0, pool.eta.shape[0]
            )
        )(keys)
        click_model = jax.tree_util.tree_map(lambda x: x[draw], pool)
    params, outcome = jax.vmap(
        lambda p, k, q, d, c, n: update(p, k, q, d, click_model=c, clip_norm=n)
    )(lane_params, key_click, queries, displayed, click_model, lanes.clip_norm)
    clients = arrays.clients
    if clients is not None and clients.online_labels is not None:
        outcome = outcome._replace(
            ndcg=_online_ndcg_over_views(spec, arrays, clients, queries, displayed.ranking)
        )
    return params, outcome


_CLICK_DRAW = 0x5EED  # fold_in tag of the per-interaction click-model draw


def _online_ndcg_over_views(spec: Spec, arrays: Arrays, clients, queries, ranking):
    """Online nDCG@k of the shown lists averaged over label views (thesis §4.3.1)."""
    train, k = arrays.train, spec.config.top_k
    lengths = train.query_lengths[queries]
    shown = jnp.arange(k)[None, :] < jnp.minimum(lengths, k)[:, None]  # [lanes, k]
    rows = train.query_offsets[queries][:, None] + ranking
    labels = jnp.where(shown, clients.online_labels[:, rows], 0)  # [V, lanes, k]
    ideal = clients.online_ideal[:, queries]  # [V, lanes]
    return jnp.mean(metrics.ndcg_of_list(labels, shown, ideal), axis=0)


class Lanes(NamedTuple):
    """Per-lane facts of a round (a lane is one client of one run slot)."""

    slot: jax.Array  # int [lanes] run slot (setting x repetition)
    click_model: click_models.ClickModel  # leaves [lanes, ...]
    clip_norm: jax.Array | None  # float [lanes]; None without differential privacy
    queries: jax.Array | None = None  # int [lanes, L] the lane's query list (None: all)
    query_count: jax.Array | None = None  # int [lanes] valid entries of ``queries``
    click_pool: click_models.ClickModel | None = None  # leaves [P, ...]: drawn per interaction


def local_training(
    spec: Spec,
    arrays: Arrays,
    lane_params,
    lane_keys,
    lanes: Lanes,
    global_scores=None,
    lane_steps=None,
):
    """ClientUpdate (Algorithm 2) for every lane: B sequential PDGD interactions.

    Args:
        lane_params: every lane's starting model, leading axis [lanes].
        lane_keys: one PRNG key per lane.
        lanes: per-lane slot, click model and clipping norm.
        global_scores: optional [n_slots, n_docs + window] training-set scores under
            the starting (global) models, used for the first interaction.
        lane_steps: optional int [lanes] ≤ B: a lane keeps its model after its own
            number of interactions (one program for several local step counts).
    With ``arrays.clients.prox_mu`` (FedProx, thesis §4.3.3) every step also pulls the
    model towards its starting (global) model: θ ← θ + η∇ − ημ(θ − θ_global).
    Returns:
        (trained lane params, InteractionOutcome with leaves [lanes, B]).
    """
    mu = None if arrays.clients is None else arrays.clients.prox_mu

    def step(params, b, scores=None):
        keys = jax.vmap(lambda key: jax.random.fold_in(key, b))(lane_keys)
        new, outcome = interaction_step(spec, arrays, params, keys, lanes, scores)
        if mu is not None:
            pull = spec.config.learning_rate * mu
            new = jax.tree_util.tree_map(
                lambda n, p, g: n - pull * (p - g), new, params, lane_params
            )
        if lane_steps is not None:
            active = b < lane_steps
            new = jax.tree_util.tree_map(
                lambda n, p: jnp.where(active.reshape((-1,) + (1,) * (n.ndim - 1)), n, p),
                new,
                params,
            )
        return new, outcome

    params, first = step(lane_params, 0, global_scores)
    params, later = jax.lax.scan(step, params, jnp.arange(1, spec.config.local_updates))
    outcome = jax.tree_util.tree_map(
        lambda a, b: jnp.concatenate([a[:, None], b.T], axis=1), first, later
    )
    return params, outcome


def train_lanes(
    spec: Spec, arrays: Arrays, lane_params, lane_keys, lanes: Lanes, global_scores, lane_steps
):
    """``local_training``, with the lanes sharded over ``config.n_devices`` devices.

    Every lane's interactions depend only on its own key and model, so each device
    trains its shard of lanes (``shard_map`` over a one-axis ``Mesh``) and the
    results are the single-device results, gathered in lane order.
    """
    n_devices = spec.config.n_devices
    if n_devices == 1:
        return local_training(
            spec, arrays, lane_params, lane_keys, lanes, global_scores, lane_steps
        )
    mesh = jax.sharding.Mesh(np.asarray(jax.devices()[:n_devices]), ("lanes",))
    split, whole = jax.sharding.PartitionSpec("lanes"), jax.sharding.PartitionSpec()

    def shard(params, keys, lane_facts, scores, steps):
        return local_training(spec, arrays, params, keys, lane_facts, scores, steps)

    return jax.shard_map(
        shard,
        mesh=mesh,
        in_specs=(split, split, split, whole, split),
        out_specs=split,
        check_vma=False,
    )(lane_params, lane_keys, lanes, global_scores, lane_steps)


def server_update(
    spec: Spec, global_params, client_params, settings: RunSettings, key, client_weights=None
):
    """The server's side of a round for one run slot: attack → privacy → aggregation.

    ``client_params`` have a leading client axis.  The centralised 'batch'
    baseline instead adds up the clients' updates: θ + Σ_c (θ_c − θ).
    ``client_weights`` (float [n_clients], default B each) are the FedAvg weights
    n_c, the clients' numbers of local interactions (Type 4, thesis §4.5.2).
    """
    cfg = spec.config
    if cfg.aggregation == "sum_of_updates":
        return jax.tree_util.tree_map(
            lambda g, c: g + jnp.sum(c - g, axis=0), global_params, client_params
        )
    flat_global, unravel = jax.flatten_util.ravel_pytree(global_params)
    flat_clients = jax.vmap(lambda p: jax.flatten_util.ravel_pytree(p)[0])(client_params)
    present = jnp.arange(cfg.n_clients) >= settings.n_absent
    weights = jnp.where(
        present, float(cfg.local_updates) if client_weights is None else client_weights, 0.0
    )
    updates = pipeline.ClientUpdates(
        flat_clients, weights, flat_global, settings.n_malicious, flat_global
    )
    stages = []
    if spec.attack_names:
        stages.append(pipeline.model_attack(spec.attack_names, settings.model_attack))
    if spec.uses_privacy:
        stages.append(pipeline.gamma_noise(cfg.n_clients, settings.sensitivity, settings.epsilon))
    stages.append(
        pipeline.aggregate(spec.aggregator_names, settings.aggregator, cfg.krum_squared_distances)
    )
    chain = pipeline.chain(*stages)
    updates, _ = chain.update(chain.init(), updates, key)
    return unravel(updates.aggregate)


def evaluate(spec: Spec, arrays: Arrays, params):
    """Offline nDCG@k and MRR@k of ``params`` on the test split (queries with a
    relevant document only)."""
    return ranking_quality(spec.ranker.apply(params, arrays.test.features), arrays.test, spec)


def ranking_quality(scores, test: DeviceData, spec):
    """Mean nDCG@k and MRR@k of ranking ``test`` by ``scores`` (float [n_docs + pad]),
    over the queries with a relevant document (FPDGD paper §4)."""
    ndcg, rr = metrics.per_query_rank_metrics(
        scores, test.labels, test.ideal_dcg, test.eval_buckets, spec.config.top_k
    )
    relevant = test.ideal_dcg > 0
    n_relevant = jnp.maximum(jnp.sum(relevant), 1)
    return (
        jnp.sum(jnp.where(relevant, ndcg, 0.0)) / n_relevant,
        jnp.sum(jnp.where(relevant, rr, 0.0)) / n_relevant,
    )


class RoundMetrics(NamedTuple):
    offline_ndcg: jax.Array  # [n_runs]
    offline_mrr: jax.Array  # [n_runs]
    online_ndcg: jax.Array  # [n_runs] mean over the round's interactions
    online_max_rr: jax.Array  # [n_runs]


def federated_round(spec: Spec, arrays: Arrays, global_params, slot_keys, round_index):
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
    lane_keys = jax.vmap(lambda k: jax.vmap(lambda c: jax.random.fold_in(k, c))(arrays.client_ids))(
        round_keys
    ).reshape(n_slots * n_clients, -1)
    lane_params = jax.tree_util.tree_map(lambda g: jnp.repeat(g, n_clients, axis=0), global_params)
    if personal is not None:
        lane_params = {
            **lane_params,
            **{k: v.reshape((n_slots * n_clients,) + v.shape[2:]) for k, v in personal.items()},
        }
    slot = jnp.repeat(jnp.arange(n_slots), n_clients)
    client = jnp.tile(jnp.arange(n_clients), n_slots)
    malicious = client < settings.n_malicious[slot]
    poisoned = malicious & settings.data_poisoning[slot]
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
    lane_steps = client_weights = None
    if clients is not None:
        if clients.queries is not None:
            lanes = lanes._replace(
                queries=clients.queries.reshape(n_slots * n_clients, -1),
                query_count=clients.query_count.reshape(-1),
            )
        if clients.click_pool is not None:
            lanes = lanes._replace(
                click_pool=jax.tree_util.tree_map(
                    lambda x: x[clients.click_pool], arrays.click_table
                )
            )
        if clients.steps is not None:
            lane_steps = clients.steps[client]
            client_weights = clients.steps.astype(jnp.float32)
    global_scores = None
    if spec.shared_first_scores:
        # Every client starts from its slot's global model: score the training set once.
        global_scores = jax.vmap(lambda g: spec.ranker.apply(g, arrays.train.features))(
            global_params
        )
    client_params, outcome = train_lanes(
        spec, arrays, lane_params, lane_keys, lanes, global_scores, lane_steps
    )
    client_params = jax.tree_util.tree_map(
        lambda c: c.reshape((n_slots, n_clients) + c.shape[1:]), client_params
    )
    server_keys = jax.vmap(lambda k: jax.random.fold_in(k, n_clients))(round_keys)
    new_global = jax.vmap(lambda g, c, s, k: server_update(spec, g, c, s, k, client_weights))(
        global_params, client_params, settings, server_keys
    )
    if personal is not None:
        personal = {k: client_params[k] for k in spec.personal_keys}
    if personal is None or spec.personal_eval == "server":
        offline_ndcg, offline_mrr = jax.vmap(lambda p: evaluate(spec, arrays, p))(new_global)
    else:

        def personalised(g, own):
            return evaluate(spec, arrays, {**g, **own})

        per_client = jax.vmap(jax.vmap(personalised, in_axes=(None, 0)))(new_global, personal)
        offline_ndcg, offline_mrr = (m.mean(axis=1) for m in per_client)
    # Online metrics average the interactions of the clients taking part.
    present = (jnp.arange(n_clients) >= settings.n_absent[:, None]).astype(jnp.float32)

    def per_slot(x):
        if lane_steps is not None:  # every interaction counts once (Type 4)
            done = (jnp.arange(cfg.local_updates)[None, :] < lane_steps[:, None]).astype(x.dtype)
            done = done.reshape(n_slots, n_clients, -1) * present[:, :, None]
            return jnp.sum(x.reshape(done.shape) * done, axis=(1, 2)) / jnp.sum(done, axis=(1, 2))
        per_client = x.reshape(n_slots, n_clients, -1).mean(axis=2)
        return jnp.sum(per_client * present, axis=1) / jnp.sum(present, axis=1)

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
    )


def chunked_round(spec: Spec, arrays: Arrays, global_params, slot_keys, round_index):
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
    global_scores = None
    if spec.shared_first_scores:
        global_scores = jax.vmap(lambda g: spec.ranker.apply(g, arrays.train.features))(
            global_params
        )
    slot = jnp.repeat(jnp.arange(n_slots), chunk)
    poison = arrays.click_table.click_prob.shape[0] - 1

    def one_chunk(sums, j):
        positions = j * chunk + jnp.arange(chunk)
        ids = jax.lax.dynamic_slice_in_dim(arrays.client_ids, j * chunk, chunk)
        lane_keys = jax.vmap(lambda k: jax.vmap(lambda c: jax.random.fold_in(k, c))(ids))(
            round_keys
        ).reshape(n_slots * chunk, -1)
        client = jnp.tile(positions, n_slots)
        poisoned = (client < settings.n_malicious[slot]) & settings.data_poisoning[slot]
        click_index = jnp.where(poisoned, poison, settings.click_model[slot])
        lanes = Lanes(
            slot=slot,
            click_model=jax.tree_util.tree_map(lambda x: x[click_index], arrays.click_table),
            clip_norm=settings.sensitivity[slot] * cfg.clip_factor if spec.uses_privacy else None,
        )
        lane_params = jax.tree_util.tree_map(lambda g: jnp.repeat(g, chunk, axis=0), global_params)
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
    new_global = jax.vmap(unravel_one)(flat_new)
    offline_ndcg, offline_mrr = jax.vmap(lambda p: evaluate(spec, arrays, p))(new_global)
    return (
        new_global,
        RoundMetrics(offline_ndcg, offline_mrr, ndcg_sum / n_present, rr_sum / n_present),
        None,
    )


def history_length(rounds: int, every: int) -> int:
    """Stored updates for rounds 1, 1 + Δt, ... ≤ T: ⌈T / Δt⌉ (unlearning paper T_unlearn)."""
    return -(-rounds // every)


def _run_chunk(spec: Spec, n_rounds: int, consts, state, first_round):
    """``n_rounds`` rounds under ``lax.scan``; ``state`` is (global params, history or None)."""
    arrays, slot_keys = consts

    def body(carry, t):
        params, history = carry
        play = chunked_round if spec.config.chunked else federated_round
        params, round_metrics, updates = play(spec, arrays, params, slot_keys, t)
        if history is not None:
            # Round t (0-based) is stored when t is a multiple of Δt, at t // Δt.
            index = t // spec.history_every
            current = jax.lax.dynamic_index_in_dim(history, index, axis=1, keepdims=False)
            stored = jnp.where(t % spec.history_every == 0, updates, current)
            history = jax.lax.dynamic_update_index_in_dim(history, stored, index, axis=1)
        return (params, history), round_metrics

    return jax.lax.scan(body, state, first_round + jnp.arange(n_rounds))


_run_chunk_jit = jax.jit(_run_chunk, static_argnums=(0, 1), donate_argnums=(3,))


@dataclasses.dataclass
class RunResult:
    """Per-round curves ``[n_slots, rounds]`` and timings of one experiment.

    Slot s * n_runs + r is repetition r of setting s (see ``per_setting``).
    """

    offline_ndcg: np.ndarray
    offline_mrr: np.ndarray
    online_ndcg: np.ndarray
    online_max_rr: np.ndarray
    initial_offline_ndcg: np.ndarray  # [n_runs], the initial model before any update
    final_params: object
    compile_seconds: float
    run_seconds: float
    interactions: int
    # [n_slots, ⌈T/Δt⌉, n_clients, d] client updates at rounds 1, 1 + Δt, ...
    # (clients in position order, see Arrays.client_ids), or None.
    history: np.ndarray | None = None

    def per_setting(self, values: np.ndarray, n_settings: int) -> np.ndarray:
        """Reshapes a per-slot array to [n_settings, n_runs, ...]."""
        return values.reshape((n_settings, -1) + values.shape[1:])

    @property
    def online_performance(self) -> np.ndarray:
        return metrics.online_performance(self.online_ndcg)

    @property
    def interactions_per_second(self) -> float:
        return self.interactions / max(self.run_seconds, 1e-9)


ProgressFn = Callable[[int, int, float], None]  # (rounds done, rounds total, seconds so far)


def _interactions_per_round(cfg: FederationConfig, arrays: Arrays) -> int:
    """Σ_c n_c: B per client, or each client's own step count (Type 4)."""
    if arrays.clients is not None and arrays.clients.steps is not None:
        return int(np.sum(np.asarray(arrays.clients.steps)))
    return cfg.n_clients * cfg.local_updates


def scan_in_chunks(
    chunk_fn,
    static,
    consts,
    state,
    total: int,
    chunk: int,
    progress=None,
    checkpoint=None,
    checkpoint_key: str | None = None,
):
    """Runs ``total`` steps of ``chunk_fn(static, n, consts, state, first) -> (state, out)``.

    ``chunk_fn`` is jitted with ``static`` and the chunk length n static.  Steps go
    in chunks of ``chunk`` (one compilation per distinct chunk length, timed
    apart), and ``progress(done, total, seconds)`` is called between chunks (and
    with seconds 0 where a resumed run starts).  With ``checkpoint`` (a file
    path) the state and outputs so far are saved atomically after every chunk, and
    a run started again with the same ``checkpoint_key`` (by default the
    ``fingerprint`` of ``static``, ``consts`` and the initial ``state``) continues from the last
    saved chunk: every key derives from the step index, so the result is the
    uninterrupted run's.  The file is removed when the run completes.
    Returns (final state, [out per chunk] on the host, compile seconds, run seconds).
    """
    chunk = min(chunk, total)
    lengths = [chunk] * (total // chunk) + ([total % chunk] if total % chunk else [])
    outputs, done = [], 0
    if checkpoint and checkpoint_key is None:
        checkpoint_key = fingerprint(static, consts, state)
    saved = _load_checkpoint(checkpoint, checkpoint_key, total)
    if saved is not None:
        state = jax.tree_util.tree_map(jnp.asarray, saved["state"])
        outputs, done = saved["outputs"], saved["done"]
        while lengths and sum(lengths) > total - done:  # drop the chunks already done
            lengths.pop(0)
        if progress is not None:
            progress(done, total, 0.0)  # where it resumes; nothing timed yet
    compile_start = time.perf_counter()
    compiled = {
        n: chunk_fn.lower(static, n, consts, state, jnp.int32(0)).compile()
        for n in sorted(set(lengths))
    }
    compile_seconds = time.perf_counter() - compile_start
    run_start = time.perf_counter()
    for n in lengths:
        state, out = compiled[n](consts, state, jnp.int32(done))
        outputs.append(jax.device_get(out))
        done += n
        if checkpoint and done < total:
            _save_checkpoint(checkpoint, checkpoint_key, total, done, state, outputs)
        if progress is not None:
            progress(done, total, time.perf_counter() - run_start)
    state = jax.block_until_ready(state)
    if checkpoint and os.path.exists(checkpoint):
        os.remove(checkpoint)
    return state, outputs, compile_seconds, time.perf_counter() - run_start


def round_curves(outputs) -> dict:
    """``scan_in_chunks``'s per-chunk metric tuples as curves ``{field: [slots, rounds]}``."""
    return {
        f: np.concatenate([np.asarray(getattr(o, f)) for o in outputs], axis=0).T
        for f in outputs[0]._fields
    }


def _save_checkpoint(path, fingerprint, total, done, state, outputs) -> None:
    """Writes the scan state through a temporary file and a rename (never half-written)."""
    payload = {
        "fingerprint": fingerprint,
        "total": total,
        "done": done,
        "state": jax.device_get(state),
        "outputs": outputs,
    }
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            pickle.dump(payload, stream)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def _load_checkpoint(path, fingerprint, total):
    """The saved payload when ``path`` holds a checkpoint of this very run, else None."""
    if not path or not os.path.exists(path):
        return None
    try:
        with open(path, "rb") as stream:
            saved = pickle.load(stream)
    except (OSError, pickle.UnpicklingError, EOFError):
        return None
    if saved.get("fingerprint") != fingerprint or saved.get("total") != total:
        return None
    return saved


def fingerprint(static, *trees) -> str:
    """What must match for a checkpoint to belong to a run: the repr of its static
    settings (frozen configs, specs) and the shape, type and bytes of every array leaf
    of ``trees`` (data, keys, initial parameters)."""
    digest = hashlib.sha256(repr(static).encode())
    for leaf in jax.tree_util.tree_leaves(trees):
        value = np.ascontiguousarray(jax.device_get(leaf))
        digest.update(f"{value.shape}{value.dtype}".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def run(
    spec: Spec,
    arrays: Arrays,
    progress: ProgressFn | None = None,
    initial_params=None,
    checkpoint: str | None = None,
) -> RunResult:
    """Runs ``config.rounds`` rounds of every repetition; compile time is reported apart.

    ``initial_params`` (leaves [n_slots, ...]) replace the rankers' initialisation,
    e.g. a warm-up model (data sharing, thesis §4.4.3).  With FedPer
    ``final_params`` is (global params, personal params [n_slots, n_clients, ...]).
    ``checkpoint``: a file where the run saves its state after every chunk of
    rounds and from which an interrupted run resumes (see ``scan_in_chunks``).
    """
    cfg = spec.config
    base = jax.random.PRNGKey(cfg.seed)
    # Repetition r of every setting shares its keys: settings are compared on paired runs.
    repetition = jnp.tile(jnp.arange(cfg.n_runs), spec.n_settings)
    run_keys = jax.vmap(lambda r: jax.random.fold_in(base, r))(repetition)
    init_keys, train_keys = jax.vmap(lambda k: jax.random.split(k))(run_keys).transpose(1, 0, 2)
    params = jax.vmap(spec.ranker.init)(init_keys)
    if initial_params is not None:
        params = jax.tree_util.tree_map(
            lambda p, q: jnp.asarray(q, p.dtype).reshape(p.shape), params, initial_params
        )
    initial_ndcg, _ = jax.jit(jax.vmap(functools.partial(evaluate, spec), in_axes=(None, 0)))(
        arrays, params
    )

    history = None  # [n_slots, ⌈T/Δt⌉, n_clients, d] when storing updates
    if spec.history_every:
        d = jax.flatten_util.ravel_pytree(jax.tree_util.tree_map(lambda p: p[0], params))[0].size
        length = history_length(cfg.rounds, spec.history_every)
        history = jnp.zeros((spec.n_slots, length, cfg.n_clients, d), jnp.float32)
    if spec.personal_keys:  # FedPer: every client starts with the initial personal layers
        personal = {
            k: jnp.repeat(params[k][:, None], cfg.n_clients, axis=1) for k in spec.personal_keys
        }
        params = (params, personal)
    (params, history), outputs, compile_seconds, run_seconds = scan_in_chunks(
        _run_chunk_jit,
        spec,
        (arrays, train_keys),
        (params, history),
        cfg.rounds,
        cfg.chunk_rounds,
        progress,
        checkpoint,
    )
    curves = round_curves(outputs)
    return RunResult(
        **curves,
        initial_offline_ndcg=np.asarray(initial_ndcg),
        final_params=jax.device_get(params),
        compile_seconds=compile_seconds,
        run_seconds=run_seconds,
        interactions=spec.n_slots * _interactions_per_round(cfg, arrays) * cfg.rounds,
        history=None if history is None else np.asarray(history),
    )
