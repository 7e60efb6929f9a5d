"""FedIPS (FedIPS paper): eq. 9 unbiasedness, eq. 11 clicks, the federated update against a slow
NumPy reference, the regression-EM, and the binary."""

import dataclasses
import functools
import itertools
import json
import math
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from foltr_jax import data, engine
from foltr_jax.engine import loop
from foltr_jax.engine.config import ConfigError
from foltr_jax.methods import fedips
from foltr_jax.methods.fedips import experiment, fedips_em, ips
from tests.binaries import call, run_twice, without_timings
from tests.methods.fedips import reference

# --- (a) eq. 9: the IPS estimator is unbiased when clicks = examination × relevance ------------


def tiny_query(seed=0, n_candidates=7, n_features=3, k=4):
    rng = np.random.default_rng(seed)
    features = jnp.asarray(rng.random((n_candidates, n_features)), jnp.float32)
    valid = jnp.asarray(np.arange(n_candidates) < n_candidates - 1)  # one padding row
    shown_index = jnp.asarray([2, 0, 5, 3][:k])
    params = {"w": jnp.asarray(rng.normal(size=n_features), jnp.float32)}
    return params, features, valid, shown_index


def exact_expectation(fn, probabilities):
    """E[fn(c)] over independent Bernoulli clicks c_k ~ B(probabilities_k), by enumeration."""
    k = probabilities.shape[0]
    outcomes = jnp.asarray(list(itertools.product([0.0, 1.0], repeat=k)), jnp.float32)
    weights = jnp.prod(jnp.where(outcomes > 0, probabilities, 1.0 - probabilities), axis=1)
    values = jax.vmap(fn)(outcomes)
    return jax.tree_util.tree_map(lambda v: jnp.tensordot(weights, v, axes=1), values)


RELEVANT = jnp.asarray([True, False, True, False])
SHOWN = jnp.ones(4, bool)
GAMMA_S = 1.3


@pytest.mark.parametrize("noise", [0.0, 0.1])
def test_ips_loss_expectation_equals_full_information_loss_only_without_noise(noise):
    params, features, valid, shown_index = tiny_query()
    propensities = ips.examination(GAMMA_S, 4)
    p_click = ips.click_probabilities(RELEVANT, SHOWN, GAMMA_S, noise)
    relevance = RELEVANT.astype(jnp.float32)

    def ips_loss(c):
        loss = lambda p: reference.ips_hinge_loss(p, features, valid, shown_index, c, propensities)
        return loss(params), jax.grad(loss)(params)["w"]

    expected_loss, expected_grad = jax.jit(exact_expectation, static_argnums=0)(ips_loss, p_click)
    full = lambda p: reference.full_information_loss(p, features, valid, shown_index, relevance)
    full_loss, full_grad = full(params), jax.grad(full)(params)["w"]
    # Independent of enumeration: E[c_k] / p_k = r_k + noise (1 - r_k) (linearity).
    h = reference.hinge_bound(params, features, valid, shown_index)
    bias = noise * jnp.sum(jnp.where(RELEVANT, 0.0, h))
    np.testing.assert_allclose(expected_loss, full_loss + bias, rtol=1e-5)
    np.testing.assert_allclose(expected_loss, jnp.sum((p_click / propensities) * h), rtol=1e-5)
    if noise == 0:
        np.testing.assert_allclose(expected_grad, full_grad, rtol=1e-5, atol=1e-5)
    else:  # eq. 11's noise clicks break eq. 9's premise: a strictly positive bias
        assert bias > 0.5 and expected_loss > full_loss + 0.5
        assert np.max(np.abs(expected_grad - full_grad)) > 1e-2


def test_ips_loss_monte_carlo_matches_full_information_loss():
    params, features, valid, shown_index = tiny_query(seed=3)
    propensities = ips.examination(GAMMA_S, 4)
    n = 200_000
    relevant = jnp.broadcast_to(RELEVANT, (n, 4))
    shown = jnp.broadcast_to(SHOWN, (n, 4))
    loss = jax.vmap(
        lambda c: reference.ips_hinge_loss(params, features, valid, shown_index, c, propensities)
    )
    full = reference.full_information_loss(
        params, features, valid, shown_index, RELEVANT.astype(jnp.float32)
    )
    for noise, biased in ((0.0, False), (0.1, True)):
        clicks = ips.pbm_clicks(jax.random.PRNGKey(7), relevant, shown, GAMMA_S, noise)
        values = np.asarray(loss(clicks.astype(jnp.float32)), np.float64)
        mean, se = values.mean(), values.std() / np.sqrt(n)
        assert se < 0.01 * full
        if biased:
            assert mean - full > 10 * se
        else:
            assert abs(mean - full) < 4 * se, (mean, full, se)


def test_a_users_local_sgd_steps_down_eq_7_click_by_click():
    """The users' local SGD (``local_sgd``, what every round's users run) takes one step
    w ← w − η ∇ L(w) per click record, in order, with L eq. 7's IPS-weighted hinge loss of
    that click alone (``reference.ips_hinge_loss``); an invalid record (padding) does nothing."""
    spec, arrays, prepared = tiny_experiment("known")
    train, k = prepared.train, spec.config.top_k
    propensities = ips.examination(jnp.float32(1.2), k)
    records = [(0, 0, True), (3, 2, True), (0, 1, True), (5, 1, False), (2, 0, True)]
    query, position, valid = (jnp.asarray([r[i] for r in records]) for i in range(3))
    log = fedips.ClickLog(
        queries=jnp.zeros(2, jnp.int32),
        impressions=jnp.zeros((2, k)),
        clicks=jnp.zeros((2, k)),
        sessions=jnp.int32(1),
        record_query=query.astype(jnp.int32),
        record_position=position.astype(jnp.int32),
        record_valid=valid,
    )
    start = {"w": jnp.asarray(np.random.default_rng(2).normal(size=4), jnp.float32)}
    got = jax.jit(functools.partial(fedips.local_sgd, spec, arrays.train))(start, log, propensities)
    want = start
    for q, at, is_valid in records:
        if not is_valid:
            continue
        begin, length = train.query_offsets[q], train.query_lengths[q]
        features = jnp.asarray(train.features[begin : begin + length], jnp.float32)
        gradient = jax.grad(reference.ips_hinge_loss)(
            want,
            features,
            jnp.ones(length, bool),
            arrays.train.shown_index[q],
            jax.nn.one_hot(at, k),
            propensities,
        )
        want = {"w": want["w"] - spec.config.local_lr * gradient["w"]}
    np.testing.assert_allclose(got["w"], want["w"], rtol=1e-5, atol=1e-6)
    assert np.max(np.abs(np.asarray(want["w"] - start["w"]))) > 1e-2  # the steps moved it


# --- (b) eq. 11 click frequencies and the user's click log --------------------------------------


def test_click_frequencies_follow_eq_11():
    n, gamma_s, noise = 100_000, 1.5, 0.1
    relevant = jnp.asarray([True, False, True, False, False])
    shown = jnp.asarray([True, True, True, True, False])  # a query with only 4 documents
    clicks = ips.pbm_clicks(
        jax.random.PRNGKey(1),
        jnp.broadcast_to(relevant, (n, 5)),
        jnp.broadcast_to(shown, (n, 5)),
        gamma_s,
        noise,
    )
    freq = np.asarray(clicks.mean(0), np.float64)
    rank = np.arange(1, 6)
    expected = (1 / rank) ** gamma_s * np.where(relevant, 1.0, noise) * np.asarray(shown)
    tolerance = 4 * np.sqrt(expected * (1 - expected) / n) + 1e-9
    assert np.all(np.abs(freq - expected) <= tolerance), (freq, expected)
    assert freq[4] == 0


def test_user_gammas_are_truncated_normal_with_sd():
    g = np.asarray(ips.sample_user_gammas(jax.random.PRNGKey(0), 50_000, 1.0, 0.1))
    assert abs(g.mean() - 1.0) < 0.003 and abs(g.std() - 0.1) < 0.003  # 0.1 is the sd
    low = np.asarray(ips.sample_user_gammas(jax.random.PRNGKey(0), 50_000, 0.05, 0.1))
    assert low.min() >= 0 and low.mean() > 0.1  # truncation at 0 moves the mean up


# --- (c) the federated round against a slow NumPy implementation --------------------------------


@functools.cache
def tiny_data():
    return data.synthetic_train_test(
        5, n_train_queries=12, n_test_queries=6, n_features=4, mean_docs_per_query=9
    )


def tiny_config(propensity, **changes):
    config = fedips.FedIpsConfig(
        n_users=3,
        queries_per_user=2,
        top_k=3,
        clicks_per_user=4,
        max_sessions=6,
        gamma=1.2,
        noise_click_prob=0.3,
        relevant_from=2,
        local_lr=0.05,
        global_lr=0.7,
        propensity=propensity,
        n_runs=2,
        logging_steps=20,
        rounds=1,
    )
    return dataclasses.replace(config, **changes)


def tiny_experiment(propensity):
    return fedips.build(tiny_config(propensity), *tiny_data())


def numpy_local_sgd(dataset, shown_index, w, records, lr):
    """Algorithm 1 lines 5-8 with eq. 7's weight, written out with explicit hinge subgradients."""
    w = np.array(w, np.float64)
    for query, position, weight in records:
        start, length = dataset.query_offsets[query], dataset.query_lengths[query]
        x = dataset.features[start : start + length].astype(np.float64)
        d = shown_index[query, position]
        scores = x @ w
        gradient = np.zeros_like(w)
        for other in range(length):
            if 1.0 - (scores[d] - scores[other]) > 0:
                gradient += x[other] - x[d]
        w -= lr * weight * gradient
    return w


def numpy_neural_local_sgd(dataset, shown_index, params, records, lr):
    """The same SGD for f(x) = σ(x W1 + b1) · w2, with the hinge's subgradient backpropagated by
    hand: ∂h/∂f(d') = 1 for every d' with a positive margin, ∂h/∂f(d) = −(their count)."""
    w1, b1, w2 = (np.array(params[name], np.float64) for name in ("w1", "b1", "w2"))
    for query, position, weight in records:
        start, length = dataset.query_offsets[query], dataset.query_lengths[query]
        x = dataset.features[start : start + length].astype(np.float64)
        d = shown_index[query, position]
        hidden = 1.0 / (1.0 + np.exp(-(x @ w1 + b1)))  # [n, H]
        scores = hidden @ w2
        coefficient = np.zeros(length)
        for other in range(length):
            if 1.0 - (scores[d] - scores[other]) > 0:
                coefficient[other] += 1.0
                coefficient[d] -= 1.0
        pre = coefficient[:, None] * w2[None, :] * hidden * (1.0 - hidden)  # ∂h/∂(x W1 + b1)
        grad_w1, grad_b1, grad_w2 = x.T @ pre, pre.sum(axis=0), coefficient @ hidden
        w1 -= lr * weight * grad_w1
        b1 -= lr * weight * grad_b1
        w2 -= lr * weight * grad_w2
    return {"w1": w1, "b1": b1, "w2": w2}


def random_start(ranker, n_runs=2, n_features=4, hidden=64):
    """Start models away from the rankers' initialisation (the update depends on them)."""
    rng = np.random.default_rng(0)
    if ranker == "linear":
        shapes = {"w": (n_features,)}
    else:
        shapes = {"w1": (n_features, hidden), "b1": (hidden,), "w2": (hidden,)}
    return {k: jnp.asarray(rng.normal(size=(n_runs,) + v), jnp.float32) for k, v in shapes.items()}


@pytest.mark.parametrize(
    "propensity, ranker", [("known", "linear"), ("none", "linear"), ("known", "neural")]
)
def test_federated_round_matches_numpy(propensity, ranker):
    spec, arrays, prepared = fedips.build(tiny_config(propensity, ranker=ranker), *tiny_data())
    cfg = spec.config
    init_keys, keys = loop.run_keys(cfg.seed, spec.repetitions())  # as engine.run derives them
    consts, state = spec.init(arrays, init_keys)  # the users' γ_s, the server's state
    gammas = consts[1]
    start = random_start(ranker)
    state = state._replace(params=start)
    t = jnp.int32(3)
    new_state, round_metrics = jax.jit(spec.round)(
        consts, state, keys, t, None
    )  # the engine's round with FedIPS's hooks, and the users' clicks in it:
    logs = fedips.round_logs(spec, arrays, engine.round_keys(keys, t), gammas)

    shown_index, shown = fedips.displayed_lists(prepared.train, prepared.logging_params, 3)
    logs = jax.device_get(logs)
    gammas = np.asarray(gammas, np.float64)
    expected = []
    for r in range(2):
        deltas = []
        for u in range(3):
            records = []
            for q, k, valid in zip(
                logs.record_query[r, u], logs.record_position[r, u], logs.record_valid[r, u]
            ):
                if valid:
                    assert shown[q, k]
                    p = (1.0 / (k + 1)) ** gammas[r, u] if propensity == "known" else 1.0
                    records.append((q, k, 1.0 / p))
            assert len(records) <= cfg.clicks_per_user
            assert len(records) == min(cfg.clicks_per_user, logs.clicks[r, u].sum())
            mine = {k: np.asarray(v[r], np.float64) for k, v in start.items()}
            if ranker == "linear":
                w = numpy_local_sgd(prepared.train, shown_index, mine["w"], records, cfg.local_lr)
                trained = {"w": w}
            else:
                trained = numpy_neural_local_sgd(
                    prepared.train, shown_index, mine, records, cfg.local_lr
                )
            deltas.append({k: trained[k] - mine[k] for k in mine})
        expected.append(
            {
                k: np.asarray(start[k][r]) + cfg.global_lr * np.mean([d[k] for d in deltas], 0)
                for k in start
            }
        )
    for name in start:
        wanted = np.asarray([e[name] for e in expected])
        np.testing.assert_allclose(new_state.params[name], wanted, rtol=1e-4, atol=1e-5)
        moved = np.abs(wanted - np.asarray(start[name]))
        assert np.any(moved > 1e-3 if ranker == "linear" else moved > 1e-5), name  # it moved
    assert np.array_equal(round_metrics.clicks, logs.record_valid.sum(axis=(1, 2)))


def test_fedips_with_the_neural_ranker_learns():
    """FedIPS through the neural ranker (the one registry): its runs start from the ranker's own
    random initialisation, each run's differently, and improve NDCG@5 over it (fixed seed)."""
    train, test = data.synthetic_train_test(
        3, n_train_queries=60, n_test_queries=30, n_features=6, mean_docs_per_query=12
    )
    config = fedips.FedIpsConfig(
        n_users=16,
        queries_per_user=4,
        clicks_per_user=4,
        max_sessions=12,
        local_lr=0.1,
        rounds=40,
        n_runs=2,
        chunk_rounds=40,
        logging_fraction=0.1,
        logging_steps=20,
        ranker="neural",
    )
    spec, arrays, _ = fedips.build(config, train, test)
    result = fedips.run(spec, arrays)
    first = result.final_params["w1"]
    assert first.shape == (2, 6, 64) and not np.allclose(first[0], first[1])
    start = fedips.initial_state(spec).params
    assert not np.allclose(start["w1"][0], start["w1"][1])  # each run its own initialisation
    initial, final = np.asarray(result.initial_offline_ndcg5), result.offline_ndcg5[:, -1]
    assert np.all(final > initial + 0.05), (initial, final)


def test_click_log_stops_at_the_mth_click():
    spec, arrays, _ = tiny_experiment("known")
    log = jax.jit(functools.partial(fedips.user_click_log, spec, arrays.train))(
        jax.random.PRNGKey(11), jnp.float32(0.5)
    )
    n_clicks, n_records = int(log.clicks.sum()), int(log.record_valid.sum())
    # the clicks of the shown sessions: exactly m, unless max_sessions ran out first
    assert n_records == min(n_clicks, 4)
    assert n_clicks == 4 or int(log.sessions) == spec.config.max_sessions
    assert int(log.impressions.sum()) == int(
        arrays.train.shown[log.queries].sum(1)
        @ np.bincount(np.arange(int(log.sessions)) % 2, minlength=2)
    )


# --- (d) regression-EM recovers position propensities -------------------------------------------


def simulated_em_log(n_clients=4, n=6000, k=5, eta=1.0, seed=0):
    rng = np.random.default_rng(seed)
    features = rng.random((n_clients, n, 3)).astype(np.float32)
    relevance = 1 / (1 + np.exp(-(features @ np.array([3.0, -2.0, 1.5]) - 0.5)))
    positions = rng.integers(0, k, size=(n_clients, n))
    theta = (1.0 / (np.arange(k) + 1)) ** eta
    clicks = (rng.random((n_clients, n)) < theta[positions] * relevance).astype(np.float32)
    return jnp.asarray(features), jnp.asarray(positions), jnp.asarray(clicks), theta


def production_em_log(features, positions, clicks, k):
    """The simulated log as the users' round logs the library's EM reads (``em_round``):
    impression n of user c is a query of its own, c·N + n, with that document at every
    position, shown once at its own position.  Returns (training data, logs)."""
    c, n, f = features.shape
    one_hot = jax.nn.one_hot(positions, k)
    shown = jnp.broadcast_to(features.reshape(c * n, 1, f), (c * n, k, f))
    logs = types.SimpleNamespace(
        queries=jnp.arange(c * n).reshape(c, n),
        impressions=one_hot,
        clicks=one_hot * clicks[..., None],
    )
    return types.SimpleNamespace(shown_features=shown), logs


def em_spec(n_users, k, scope):
    """What the EM reads of a FedIPS method: its config and the number of features."""
    config = fedips.FedIpsConfig(n_users=n_users, top_k=k, em_scope=scope, em_learning_rate=5.0)
    return types.SimpleNamespace(config=config.validate(), n_features=3)


@pytest.mark.parametrize("scope", ["user", "global"])
def test_a_round_of_the_em_is_an_iteration_of_regression_em(scope):
    """The library's EM round (``em_round``) from its initial state (θ = 0.5 everywhere, F = 0)
    adds to the users' running sums exactly the E-step counts of the first iteration of
    regression-EM written out (``reference.regression_em``: θ₁ = their ratio) and steps F as
    it does."""
    features, positions, clicks, _ = simulated_em_log()
    spec = em_spec(4, 5, scope)
    train, logs = production_em_log(features, positions, clicks, 5)
    em = fedips_em.em_round(spec, train, fedips_em.init_em(spec), logs)
    prior = spec.config.em_prior_count
    examined = np.sum(np.asarray(em.examined, np.float64) - 0.5 * prior, axis=0)
    shown = np.sum(np.asarray(em.impressions, np.float64) - prior, axis=0)
    theta, (v, b) = reference.regression_em(features, positions, clicks, 5, 1, 5.0)
    np.testing.assert_allclose(examined / shown, theta, rtol=1e-5)
    np.testing.assert_allclose(em.relevance["v"], v, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(em.relevance["b"], b, rtol=1e-5, atol=1e-6)


def test_the_em_recovers_the_propensities():
    """Regression-EM recovers (1/rank)^η: written out in batch (``reference``, 400
    iterations) and the library's online EM (``em_round`` once a round on the same log,
    pooled over the users, then ``estimated_propensities``), whose running sums approach it
    more slowly (1,000 rounds) and get closer with more rounds."""
    features, positions, clicks, truth = simulated_em_log()
    theta, _ = reference.regression_em(features, positions, clicks, 5, 400, 5.0)
    np.testing.assert_allclose(theta / theta[0], truth, atol=0.01)
    spec = em_spec(4, 5, "global")
    train, logs = production_em_log(features, positions, clicks, 5)
    step = lambda em, _: (fedips_em.em_round(spec, train, em, logs), None)
    rounds_of_em = jax.jit(
        lambda em, n: jax.lax.scan(step, em, None, length=n)[0], static_argnums=1
    )
    estimates = {}
    for rounds in (100, 1000):
        em = rounds_of_em(fedips_em.init_em(spec), rounds)
        estimates[rounds] = np.asarray(fedips_em.estimated_propensities(spec, em)[0])
    np.testing.assert_allclose(estimates[1000], truth, atol=0.04)
    error = {r: np.max(np.abs(e - truth)) for r, e in estimates.items()}
    assert error[1000] < 0.6 * error[100], error


# --- config and binary ---------------------------------------------------------------------------


def test_config_validation_names_the_field():
    with pytest.raises(ConfigError) as error:
        fedips.FedIpsConfig(propensity="maybe").validate()
    assert error.value.field == "propensity"
    with pytest.raises(ConfigError) as error:
        fedips.FedIpsConfig(local_lr=0).validate()
    assert error.value.field == "local_lr"


def test_validation_queries_are_held_out_of_f0s_and_leave_one():
    from foltr_jax.methods.fedips.lambdarank import validation_queries

    f0 = np.array([2, 7])
    held = validation_queries(20, 0.25, 3, f0)
    assert len(held) == 5 and not set(held) & {2, 7} and list(held) == sorted(set(held))
    assert np.array_equal(held, validation_queries(20, 0.25, 3, f0))  # from the seed
    assert not np.array_equal(held, validation_queries(20, 0.25, 4, f0))
    assert len(validation_queries(5, 0.9, 0, [0])) == 3  # one query is left to train on
    with pytest.raises(ValueError, match="held out"):
        validation_queries(2, 0.5, 0, [0])
    for bad in (1.0, -0.1, float("nan")):
        with pytest.raises(ConfigError) as error:
            fedips.FedIpsConfig(validation_fraction=bad).validate()
        assert error.value.field == "validation_fraction"


def test_validation_fraction_moves_the_metrics_off_the_test_split_and_keeps_f0():
    """With a validation share the offline metrics are on held-out training queries the users
    never issue, and f₀ is the one trained without it."""
    train, test = tiny_data()
    *_, plain = fedips.build(tiny_config("known"), train, test)
    _, arrays, prepared = fedips.build(tiny_config("known", validation_fraction=0.25), train, test)
    held, kept = prepared.validation_queries, plain.train  # kept: single-label ones dropped
    assert plain.validation_queries is None and len(held) == round(0.25 * kept.n_queries) > 0
    assert np.array_equal(prepared.logging_params["w"], plain.logging_params["w"])
    assert not set(held) & set(prepared.logging_queries)
    assert prepared.train.n_queries == kept.n_queries - len(held)
    assert arrays.train.query_offsets.shape == (kept.n_queries - len(held),)  # the users'
    assert np.array_equal(prepared.test.labels, kept.subset(held).labels)
    assert np.array_equal(
        np.asarray(arrays.test.labels), np.asarray(kept.subset(held).labels)
    )  # what the offline metrics read


SMALL = [
    "--synthetic_queries=30",
    "--synthetic_features=8",
    "--synthetic_docs_per_query=15",
    "--n_users=20",
    "--rounds=6",
    "--chunk_rounds=3",  # one compilation
    "--logging_steps=10",
]


_SMALL_DATA = data.synthetic_train_test(
    0, n_train_queries=30, n_test_queries=15, n_features=8, mean_docs_per_query=15
)  # SMALL's data, as the binary makes it


def run_binary(*args, cache_dir):
    return call("fedips", *args, cache_dir=cache_dir)


@pytest.mark.slow  # the same results from two processes of their own
def test_binary_writes_results_and_is_deterministic(tmp_path):
    a, b, result = run_twice(
        "fedips", *SMALL, "--n_runs=2", "--propensity=estimated", tmp_path=tmp_path
    )
    assert without_timings(a) == without_timings(b)
    assert a["method"] == "fedips/estimated" and a["config"]["n_users"] == 20
    (cell,) = a["cells"]
    assert a["metric"] == "ndcg5"  # the headline curves: NDCG@5
    assert sorted(cell["curves"]) == ["offline_ndcg10", "offline_ndcg5"]
    for key in ("offline_ndcg5", "offline_ndcg10"):
        assert np.asarray(cell["curves"][key]).shape == (2, 6), key
    assert np.asarray(cell["per_run"]["clicks_per_user"]).shape == (2, 6)
    per_run = cell["per_run"]
    assert len(per_run["final_offline_ndcg5"]) == 2 and len(per_run["initial_offline_ndcg10"]) == 2
    assert np.asarray(cell["estimated_propensities"]).shape == (2, 5)
    assert 0 < a["logging_policy"]["offline_ndcg5"] <= 1 and len(a["logging_policy"]["queries"])
    assert a["interactions"] > 0 and a["interactions_per_second"] > 0
    assert "round 6/6" in result.stderr  # progress


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_binary_lambdarank_baseline(tmp_path):
    result = run_binary(
        *SMALL,
        "--baseline=lambdarank",
        "--lambdarank_steps=5",
        "--logging_steps=0",  # f₀ = zero weights: nothing to compile for it
        f"--output_dir={tmp_path}",
        cache_dir=tmp_path / "cache",
    )
    assert result.returncode == 0, result.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["method"] == "lambdarank"
    assert np.asarray(results["cells"][0]["curves"]["offline_ndcg5"]).shape == (1, 5)
    # compiling is timed apart from the steps (engine.run's seconds)
    assert results["compile_seconds"] > 0 and results["seconds"] > 0
    # the library's baseline and document are the file, but for what describes the run
    config = fedips.FedIpsConfig(n_users=20, rounds=6, chunk_rounds=3, logging_steps=0)
    ours = _api_document(
        config, results, lambda spec, a, p: experiment.lambdarank_baseline(p, a.test, 0.1, 5)
    )
    assert ours["lambdarank"] == {"learning_rate": 0.1, "steps": 5} and ours["interactions"] == 0
    _assert_same_but_the_run(ours, results)


def _api_document(config, written, run) -> dict:
    """results.json from the library: ``run(spec, arrays, prepared) -> (cell, fields)`` on
    ``SMALL``'s synthetic data, the data's source as ``written`` records it."""
    spec, arrays, prepared = fedips.build(config, *_SMALL_DATA)
    cell, fields = run(spec, arrays, prepared)
    source = {"synthetic": written["data"]["synthetic"]}
    return experiment.results_document(
        config, written["method"], spec, prepared, source, cell, **fields
    )


def _assert_same_but_the_run(ours: dict, written: dict) -> None:
    run_fields = {"provenance", "versions", "seconds", "compile_seconds", "timings"}
    run_fields |= {"interactions_per_second"}
    assert [k for k in ours if k not in run_fields] == [k for k in written if k not in run_fields]
    for key in ours.keys() - run_fields:
        assert ours[key] == written[key], key


@pytest.mark.slow  # a binary's run and the library's, compiled once in this process
def test_the_api_writes_what_the_binary_writes(tmp_path):
    result = run_binary(
        *SMALL, "--propensity=estimated", f"--output_dir={tmp_path}", cache_dir=tmp_path / "cache"
    )
    assert result.returncode == 0, result.stderr
    written = json.loads((tmp_path / "results.json").read_text())
    config = fedips.FedIpsConfig(
        n_users=20, rounds=6, chunk_rounds=3, logging_steps=10, propensity="estimated"
    )

    def run(spec, arrays, prepared):
        return experiment.run_record(config, fedips.run(spec, arrays))

    ours = _api_document(config, written, run)
    assert ours["method"] == "fedips/estimated" and ours["clicks"] > 0
    assert ours["cells"][0]["estimated_propensities"] is not None
    _assert_same_but_the_run(ours, written)


def test_the_lambdarank_baseline_refuses_bad_arguments_naming_them():
    """A learning rate or step count out of range is refused before any work, naming the
    argument (not a binary's flag)."""
    for lr, steps, named in [(0.0, 5, "learning_rate"), (math.inf, 5, "learning_rate")]:
        with pytest.raises(ValueError, match=f"^{named} must be positive and finite"):
            experiment.lambdarank_baseline(None, None, lr, steps)
    with pytest.raises(ValueError, match="^steps must be at least 1, got 0"):
        experiment.lambdarank_baseline(None, None, 0.1, 0)


def test_binary_takes_the_ranker(tmp_path):
    result = run_binary(
        *SMALL, "--ranker=neural", f"--output_dir={tmp_path}", cache_dir=tmp_path / "cache"
    )
    assert result.returncode == 0, result.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["config"]["ranker"] == "neural"
    assert np.asarray(results["cells"][0]["curves"]["offline_ndcg5"]).shape == (1, 6)


@pytest.mark.parametrize(
    "flag, named",
    [
        ("--propensity=maybe", "--propensity"),
        ("--local_learning_rate=0", "--local_learning_rate"),
        ("--n_users=0", "--n_users"),
        ("--ranker=forest", "--ranker"),
    ],
)
def test_binary_refuses_bad_flags_with_one_line(tmp_path, flag, named):
    result = run_binary(*SMALL, flag, f"--output_dir={tmp_path}", cache_dir=tmp_path / "cache")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"fedips: error: {named}:"), lines
    assert not (tmp_path / "results.json").exists()


def test_lambdarank_on_the_shared_run_is_plain_full_batch_gradient_descent():
    """``train_lambdarank`` (``engine.run`` of ``lambdarank.FullBatch``) equals steps of
    w ← w − η ∇loss(w) written out by hand, and its curve is the test NDCG after each."""
    from foltr_jax.methods.fedips import lambdarank

    train, test = data.synthetic_train_test(
        3, n_train_queries=12, n_test_queries=6, n_features=5, mean_docs_per_query=7
    )
    held = lambdarank.test_data(test)
    params, (ndcg5, ndcg10) = lambdarank.train_lambdarank(train, 0.5, 4, held)
    batches = lambdarank.rank_batches(train)
    w = {"w": jnp.zeros(train.n_features, jnp.float32)}
    gradient = jax.jit(jax.grad(lambdarank.lambdarank_loss))  # compiled once, not op by op
    evaluate = jax.jit(lambdarank.evaluate)
    for step in range(4):
        g = gradient(w, batches)
        w = {"w": w["w"] - 0.5 * g["w"]}
        expected = evaluate(w, held)
        np.testing.assert_allclose([ndcg5[step], ndcg10[step]], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(params["w"], w["w"], rtol=1e-5, atol=1e-6)
    assert np.any(params["w"] != 0)
    alone, curve = lambdarank.train_lambdarank(train, 0.5, 4)  # f₀'s form: no test split
    assert curve is None
    np.testing.assert_array_equal(alone["w"], params["w"])
