"""FedIPS: federated unbiased (counterfactual) learning to rank (Li & Ouyang, FedIPS paper).

The lists users see come from a fixed logging policy f₀, a linear ranker trained with full
information (linear LambdaRank) on ``logging_fraction`` (1 %, at least one) of the training queries
(§4 "Logging policy").  Every round each of the |U| users issues ``queries_per_user`` queries drawn
uniformly from the training split and sees f₀'s top K of each.  Clicks follow the paper's PBM
(eq. 11): P(click) = p(e) if rel ≥ ``relevant_from`` (rel ∈ {3, 4} on 5-grade data; rel = 2 on
3-grade data), else ``noise_click_prob``·p(e), with p(e) = (1 / rank under f₀)^γ_s and a per-user
γ_s drawn once from N(γ, sd = ``gamma_sd``) left-truncated at 0 (we read the paper's 0.1 as the
standard deviation; the paper does not say).

"A user clicks m documents" per round (§4): a user shows its queries in turn (session s shows query
s mod Q) until its m-th click, at most ``max_sessions`` lists; the clicks of those sessions, in
order, are its local click log for the round.  ``clicks_per_user = 0`` shows each query once and
keeps every click.  Each user then runs Algorithm 1's local SGD over its clicks with eq. 7's IPS
weights: w ← w − η_l · (c / p) ∇h_{q,d}(w), h the hinge bound of eq. 4 summed over all the query's
candidates (the d' = d term is the constant 1), taken through the users' ranker (``ranker``: any
registered ranker, linear by default; a zero-start ReLU network has zero gradients and stays put);
the server steps θ ← θ + η_g · mean_u Δ_u (FedOpt with server SGD, Algorithm 1 line 11).  All users take part every round.

Propensities p: 'known' uses each user's true examination probability (1/rank)^γ_s (eq. 9 needs the
user's own propensity; the paper's estimated IPS is "personalized" too); 'none' sets p = 1 (the
FedAvg baseline); 'estimated' runs the federated regression-EM of §5 / Figure 2 (right), see
:func:`em_statistics`.  The full-information baseline is linear LambdaRank on every training query
(:func:`train_lambdarank`).  Offline metrics: NDCG@5 (the paper's metric) and NDCG@10 of the global
model on the test split after every round, over test queries with a relevant document.

The method in one module (its data, build, the users' round and run), as FOLtR-ES's; its
config is ``config``, the clicks and IPS loss ``ips``, the propensities' EM ``fedips_em``
and the logging policy ``lambdarank``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from foltr_jax import engine
from foltr_jax.core import rankers
from foltr_jax.data import RankingDataset
from foltr_jax.engine import loop
from foltr_jax.engine.lists import Scoring, at_narrowest_width, window_widths
from foltr_jax.methods.fedips import lambdarank
from foltr_jax.methods.fedips.config import FedIpsConfig
from foltr_jax.methods.fedips.fedips_em import EmState, init_em, round_propensities
from foltr_jax.methods.fedips.ips import (
    hinge_rank_bound,
    pbm_clicks,
    sample_user_gammas,
)
from foltr_jax.methods.fedips.lambdarank import (
    TestData,
    evaluate_scores,
    logging_queries,
    test_data,
    train_lambdarank,
    validation_queries,
)
from foltr_jax.server import pipeline

# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------


def drop_single_label_queries(dataset: RankingDataset) -> tuple[RankingDataset, int]:
    """Drops queries whose documents all share one label (FedIPS §4); returns (kept, n dropped)."""
    keep = np.asarray(
        [
            np.ptp(dataset.labels[o : o + n]) > 0
            for o, n in zip(dataset.query_offsets, dataset.query_lengths)
        ],
        bool,
    )
    return dataset.subset(keep), int(np.sum(~keep))


def infer_relevant_from(max_label: int) -> int:
    """Smallest relevant grade: 3 on 5-grade labels (rel ∈ {3, 4}, eq. 11), else the top grade."""
    return 3 if max_label >= 3 else max(int(max_label), 1)


# ---------------------------------------------------------------------------------------------
# The federated simulation
# ---------------------------------------------------------------------------------------------


class TrainData(NamedTuple):
    """The training split as flat device arrays plus f₀'s fixed top-K per query."""

    features: jax.Array  # float32 [n_docs + window, F] (window zero rows of padding)
    query_offsets: jax.Array  # int32 [n_queries]
    query_lengths: jax.Array  # int32 [n_queries]
    shown_index: jax.Array  # int32 [n_queries, K] candidate (within the query) at each position
    shown: jax.Array  # bool [n_queries, K] (queries shorter than K show fewer)
    relevant: jax.Array  # bool [n_queries, K] label ≥ relevant_from, in displayed order
    shown_features: jax.Array  # float32 [n_queries, K, F] (for the regression-EM)


@dataclasses.dataclass(frozen=True)
class FedIpsMethod(engine.Federated):
    """Static part of a FedIPS experiment (hashable: one compilation per FedIpsMethod), and the
    method as the engine runs it: the users send updates, the server steps θ + η_g·Δ."""

    config: FedIpsConfig
    n_features: int
    window: int  # candidate slice width: the longest training query
    widths: tuple  # slice widths, narrowest first (lists.window_widths)
    relevant_from: int

    offline = ("offline_ndcg5", "offline_ndcg10")
    online = ("clicks", "sessions")
    sends_updates = True

    @functools.cached_property
    def scoring(self) -> Scoring:
        """How a user's query windows are scored (``lists.Scoring``), built once."""
        ranker = rankers.make_ranker(self.config.ranker, self.n_features)
        return Scoring(ranker, self.window, self.widths, self.config.top_k)

    def optimizer(self, settings=None) -> optax.GradientTransformation:
        """FedOpt's server SGD: θ + η_g·Δ of the aggregated update (Algorithm 1 line 11)."""
        return optax.sgd(self.config.global_lr)

    # The rest of the method as ``engine.run`` takes it (``engine.Federated``'s hooks).
    def init(self, arrays: FedIpsArrays, init_keys):
        """Constants (the data, every user's γ_s drawn from the run's initialisation key)
        and the initial models (``initial_state``), the EM's state and the server's."""
        return (arrays, user_gammas(self.config, init_keys)), initial_state(self, init_keys)

    def evaluate_params(self, consts, params):
        return evaluate_runs(self, consts[0].test, params)

    def begin_round(self, consts, state: State, keys, t) -> engine.RoundStart:
        """Round t's users click (``round_logs``) and, with estimated propensities, the
        EM's step gives their propensities; the users read (data, models, click logs,
        propensities)."""
        arrays, gammas = consts
        logs = round_logs(self, arrays, keys, gammas)
        propensities, em = round_propensities(self, arrays, state.em, logs, gammas)
        inputs = (arrays, state.params, logs, propensities)
        return engine.RoundStart(
            inputs, state.params, state.server, None, self.config.n_malicious, em
        )

    def clients(self, inputs, start, size: int) -> engine.Sent:
        # call-arg: mypy takes *inputs, of unknown length, to fill every place
        return train_users(self, *inputs, start, size)  # type: ignore[call-arg]

    def end_round(self, consts, state: State, start, t, end: engine.RoundEnd):
        return State(end.params, start.own, end.server_state), end.metrics

    def finish(self, consts, state: State, curves):
        """Adds the users' γ_s and, with estimated propensities, the users' mean θ̂
        relative to rank 1 (no floor) [n_runs, K]; interactions are the lists shown."""
        theta: np.ndarray | None = None
        if state.em is not None:
            mean = (state.em.examined / state.em.impressions).mean(axis=1)
            theta = np.asarray(mean / mean[:, :1])
        extras = {"estimated_propensities": theta, "user_gammas": np.asarray(consts[1])}
        return jax.device_get(state.params), extras, int(curves["sessions"].sum())


class FedIpsArrays(NamedTuple):
    train: TrainData
    test: TestData


@dataclasses.dataclass
class Prepared:
    """What :func:`build` did to the data before the simulation."""

    train: RankingDataset  # after dropping single-label queries (and the validation queries)
    test: RankingDataset  # the test split, or the validation queries
    dropped_train: int
    dropped_test: int
    logging_params: dict
    logging_queries: np.ndarray
    logging_ndcg5: float
    logging_ndcg10: float
    # training queries (of the kept ones) held out as ``test`` (``validation_fraction``)
    validation_queries: np.ndarray | None = None


def displayed_lists(dataset: RankingDataset, logging_params, k: int):
    """f₀'s top k of every query (ties keep the file order): (index [n, k], shown [n, k])."""
    scores = dataset.features @ np.asarray(logging_params["w"], np.float32)
    index = np.zeros((dataset.n_queries, k), np.int32)
    shown = np.zeros((dataset.n_queries, k), bool)
    for q, (o, n) in enumerate(zip(dataset.query_offsets, dataset.query_lengths)):
        top = np.argsort(-scores[o : o + n], kind="stable")[:k]
        index[q, : len(top)] = top
        shown[q, : len(top)] = True
    return index, shown


def build(config: FedIpsConfig, train: RankingDataset, test: RankingDataset):
    """Validates ``config``, drops single-label queries, trains f₀ and puts the data on the device.

    With ``validation_fraction`` > 0 the held-out training queries (``validation_queries``,
    none of f₀'s) replace ``test`` for every offline metric (f₀'s too) and leave the users'
    queries: the runs that choose the learning rates never see the test split.

    Returns (FedIpsMethod, FedIpsArrays, Prepared).
    """
    config.validate()
    if train.n_features != test.n_features:
        raise ValueError(f"train has {train.n_features} features but test has {test.n_features}")
    train, dropped_train = drop_single_label_queries(train)
    test, dropped_test = drop_single_label_queries(test)
    if train.n_queries == 0 or test.n_queries == 0:
        raise ValueError("no query with two different labels is left in the train or test split")
    relevant_from = config.relevant_from or infer_relevant_from(
        max(train.max_label, test.max_label)
    )
    k = config.top_k
    chosen = logging_queries(train.n_queries, config.logging_fraction, config.seed)
    logging_params, _ = train_lambdarank(
        train.subset(chosen), config.logging_learning_rate, config.logging_steps
    )
    held_out = None
    if config.validation_fraction > 0:  # f₀ as without it; the users and metrics change
        held_out = validation_queries(
            train.n_queries, config.validation_fraction, config.seed, chosen
        )
        test = train.subset(held_out)
        train = train.subset(np.setdiff1d(np.arange(train.n_queries), held_out))
    tdata = test_data(test)
    log5, log10 = jax.device_get(jax.jit(lambdarank.evaluate)(logging_params, tdata))
    index, shown = displayed_lists(train, logging_params, k)
    rows = train.query_offsets[:, None] + index
    labels = np.where(shown, train.labels[rows], 0)
    widths = window_widths(train.max_query_length, k)
    window = widths[-1]
    train_data = TrainData(
        features=jnp.asarray(np.pad(train.features, ((0, window), (0, 0))), jnp.float32),
        query_offsets=jnp.asarray(train.query_offsets, jnp.int32),
        query_lengths=jnp.asarray(train.query_lengths, jnp.int32),
        shown_index=jnp.asarray(index),
        shown=jnp.asarray(shown),
        relevant=jnp.asarray(shown & (labels >= relevant_from)),
        shown_features=jnp.asarray(
            np.where(shown[..., None], train.features[rows], 0.0), jnp.float32
        ),
    )
    spec = FedIpsMethod(config, train.n_features, window, widths, relevant_from)
    prepared = Prepared(
        train,
        test,
        dropped_train,
        dropped_test,
        logging_params,
        chosen,
        float(log5),
        float(log10),
        held_out,
    )
    return spec, FedIpsArrays(train_data, tdata), prepared


class ClickLog(NamedTuple):
    """One user's round: its queries, sessions, clicks and the click records it learns from."""

    queries: jax.Array  # int32 [Q] training queries issued this round
    impressions: jax.Array  # float32 [Q, K] times each (query, position) was shown
    clicks: jax.Array  # float32 [Q, K] clicks on it
    sessions: jax.Array  # int32 [] lists shown
    record_query: jax.Array  # int32 [R] training query of each click record
    record_position: jax.Array  # int32 [R] 0-based position
    record_valid: jax.Array  # bool [R] (fewer than m clicks within max_sessions: padding)


def user_click_log(spec: FedIpsMethod, train: TrainData, key, gamma_s) -> ClickLog:
    """A user's queries and clicks for one round (eq. 11; "a user clicks m documents", §4)."""
    cfg = spec.config
    n_q, k, n_s = cfg.queries_per_user, cfg.top_k, cfg.sessions
    # One draw per user and round (a single PRNG call site keeps compilation short): the first
    # Q uniforms pick its queries, the rest decide its clicks.
    uniforms = jax.random.uniform(key, (n_q + n_s * k,))
    n_train = train.query_offsets.shape[0]
    queries = jnp.minimum(jnp.floor(uniforms[:n_q] * n_train).astype(jnp.int32), n_train - 1)
    slot = jnp.arange(n_s) % n_q
    shown = train.shown[queries[slot]]
    clicks = pbm_clicks(
        None,
        train.relevant[queries[slot]],
        shown,
        gamma_s,
        cfg.noise_click_prob,
        uniforms=uniforms[n_q:].reshape(n_s, k),
    )
    flat = clicks.reshape(-1)
    if cfg.clicks_per_user > 0:
        m = cfg.clicks_per_user
        count = jnp.cumsum(flat.astype(jnp.int32))
        # the j-th click is the first slot whose running count reaches j
        index = jnp.searchsorted(count, jnp.arange(1, m + 1), side="left", method="compare_all")
        valid = jnp.arange(m) < count[-1]
        index = jnp.minimum(index, n_s * k - 1)
        n_sessions = jnp.where(count[-1] >= m, index[m - 1] // k + 1, n_s)
    else:
        index = jnp.arange(n_s * k)
        valid = flat
        n_sessions = jnp.int32(n_s)
    consumed = (jnp.arange(n_s) < n_sessions)[:, None] & shown
    per_slot = lambda x: jnp.zeros((n_q, k), jnp.float32).at[slot].add(x.astype(jnp.float32))
    return ClickLog(
        queries=queries,
        impressions=per_slot(consumed),
        clicks=per_slot(consumed & clicks),
        sessions=n_sessions.astype(jnp.int32),
        record_query=queries[slot[index // k]],
        record_position=(index % k).astype(jnp.int32),
        record_valid=valid,
    )


def local_sgd(spec: FedIpsMethod, train: TrainData, params, log: ClickLog, propensities):
    """Algorithm 1 lines 5-8 with eq. 7's weights: one SGD step per click record, in order.

    ``propensities`` [K] are the user's p at each position.  Returns the user's new params.
    The query's candidates are scored as the lane layer scores them
    (``lists.Scoring.window_scores``) at the narrowest of its widths that holds the
    user's longest clicked query (``lax.switch``).
    """
    lr, scoring = spec.config.local_lr, spec.scoring
    weights = jnp.where(log.record_valid, 1.0 / propensities[log.record_position], 0.0)

    def at_width(width, params):
        def step(p, record):
            query, position, weight = record
            valid = jnp.arange(width) < train.query_lengths[query]
            index = train.shown_index[query, position]

            def loss(w):
                scores = scoring.window_scores(w, train, query, width)
                return weight * hinge_rank_bound(scores, valid, index)

            g = jax.grad(loss)(p)
            return jax.tree_util.tree_map(lambda a, b: a - lr * b, p, g), None

        records = (log.record_query, log.record_position, weights)
        return jax.lax.scan(step, params, records)[0]

    longest = jnp.max(jnp.where(log.record_valid, train.query_lengths[log.record_query], 1))
    return at_narrowest_width(scoring.widths, longest, at_width, params)


class State(NamedTuple):
    params: dict  # global ranker, leaves [n_runs, ...]
    em: EmState | None  # leaves [n_runs, ...]; None unless propensity == 'estimated'
    server: tuple = ()  # the server chain's state, leaves [n_runs, ...]


def train_users(
    spec: FedIpsMethod, arrays: FedIpsArrays, params, logs: ClickLog, propensities, start, size
):
    """FedIPS's client update as the engine takes it: users ``start .. start + size − 1``
    run Algorithm 1's local SGD over their click logs (one ``lax.map`` over every run's
    users) and send their model changes [n_runs, size, P], weight 1 each, with the sums of
    their click records and lists shown [n_runs]."""
    n_runs = propensities.shape[0]
    chunk = lambda x: jax.lax.dynamic_slice_in_dim(x, start, size, axis=1)
    lane = lambda x: x.reshape((n_runs * size,) + x.shape[2:])
    lane_params = jax.tree_util.tree_map(lambda g: jnp.repeat(g, size, axis=0), params)
    local = jax.lax.map(
        lambda a: local_sgd(spec, arrays.train, *a),
        (
            lane_params,
            jax.tree_util.tree_map(lambda x: lane(chunk(x)), logs),
            lane(chunk(propensities)),
        ),
    )
    updates = (engine.flatten(local) - engine.flatten(lane_params)).reshape(n_runs, size, -1)
    online = {
        "clicks": jnp.sum(chunk(logs.record_valid), axis=(1, 2), dtype=jnp.int32),
        "sessions": jnp.sum(chunk(logs.sessions), axis=1, dtype=jnp.int32),
    }
    return engine.Sent(updates, jnp.ones(updates.shape[:2], updates.dtype), online)


def round_logs(spec: FedIpsMethod, arrays: FedIpsArrays, round_keys, gammas) -> ClickLog:
    """Every user's click log of a round (leaves [n_runs, n_users, ...]): user u clicks
    with the key fold_in(round key, u) and its γ_s (``gammas`` [n_runs, n_users])."""
    keys = engine.client_keys(round_keys, jnp.arange(spec.config.n_users))
    return jax.vmap(jax.vmap(functools.partial(user_click_log, spec, arrays.train)))(keys, gammas)


def user_gammas(config: FedIpsConfig, gamma_keys):
    """[n_runs, n_users] every user's γ_s, from each run's key."""
    return jax.vmap(lambda k: sample_user_gammas(k, config.n_users, config.gamma, config.gamma_sd))(
        gamma_keys
    )


def evaluate_runs(spec: FedIpsMethod, test: TestData, params):
    """Offline (NDCG@5, NDCG@10) of every run's ranker (leaves [R, ...]) on the test split
    (``engine.evaluate_slots``)."""
    return engine.evaluate_slots(
        spec.scoring.ranker.apply, evaluate_scores, test, params, spec.config.n_devices
    )


_RANKER_INIT = 0x52414E4B  # fold_in tag: the ranker's initialisation from a run's key


def initial_state(spec: FedIpsMethod, init_keys=None) -> State:
    """Every run's initial ranker (``ranker.init`` from fold_in(the run's initialisation
    key, _RANKER_INIT), so the users' γ_s keep their stream; the linear ranker starts at
    zero), the EM's state and the server's.  ``init_keys`` default to ``run``'s."""
    cfg = spec.config
    if init_keys is None:
        init_keys = loop.run_keys(cfg.seed, jnp.arange(cfg.n_runs))[0]
    ranker = spec.scoring.ranker
    params = jax.vmap(lambda key: ranker.init(jax.random.fold_in(key, _RANKER_INIT)))(init_keys)
    em = None
    if cfg.propensity == "estimated":
        em = jax.tree_util.tree_map(
            lambda x: jnp.broadcast_to(x, (cfg.n_runs,) + x.shape), init_em(spec)
        )
    chain = pipeline.chain(*spec.stages())
    return State(params, em, jax.vmap(chain.init)(engine.flatten(params)))


# run(spec, arrays, progress=None, checkpoint=None): every round of every run
# (``engine.run``; the result adds
# ``estimated_propensities`` and ``user_gammas``).
run = engine.run


FedIpsResult = engine.RunResult
