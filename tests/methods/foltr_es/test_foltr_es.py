"""FOLtR-ES (thesis §3.1): privatisation, the ES gradient against a slow NumPy
reference, antithetic pairs, learning, and the binary."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from foltr_jax import data, engine
from foltr_jax.core import click_models
from foltr_jax.engine import loop
from foltr_jax.methods import foltr_es
from foltr_jax.methods.foltr_es import es_rewards, query_blocks
from foltr_jax.methods.fpdgd import federation
from tests.binaries import call, run_twice, without_timings

# Upper 0.1 % point of the chi-square distribution with 10 degrees of freedom.
CHI2_10_999 = 29.588


@pytest.mark.parametrize("p", [0.25, 0.5, 0.9])
def test_privatised_reward_distribution(p):
    """True value w.p. p, each of the 10 others w.p. (1 − p)/10, for every true value."""
    n, per_value = 11, 20_000
    truth = jnp.repeat(jnp.arange(n), per_value)
    reported = np.asarray(
        jax.jit(es_rewards.privatise_reward, static_argnums=3)(jax.random.PRNGKey(7), truth, p, n)
    )
    assert reported.min() >= 0 and reported.max() < n
    counts = np.zeros((n, n))
    np.add.at(counts, (np.asarray(truth), reported), 1)
    expected = np.full((n, n), (1 - p) / (n - 1) * per_value)
    np.fill_diagonal(expected, p * per_value)
    for t in range(n):  # one chi-square test (10 dof) per true value, α = 0.001
        chi2 = np.sum((counts[t] - expected[t]) ** 2 / expected[t])
        assert chi2 < CHI2_10_999, (t, chi2, counts[t])
    kept = np.trace(counts)  # pooled binomial check of P(true value reported) = p
    total = n * per_value
    assert abs(kept - p * total) < 4 * math.sqrt(total * p * (1 - p))


def test_no_privatisation_at_p_one():
    truth = jnp.arange(11).repeat(100)
    out = es_rewards.privatise_reward(jax.random.PRNGKey(0), truth, 1.0, 11)
    np.testing.assert_array_equal(out, truth)


def test_epsilon_bound():
    for p, rounded in ((0.25, 1.2), (0.5, 2.3), (0.9, 4.5)):
        exact = math.log(p * 10 / (1 - p))
        assert es_rewards.epsilon_bound(p) == pytest.approx(exact, rel=1e-12)
        assert round(exact, 1) == rounded
    assert es_rewards.epsilon_bound(1.0) == math.inf
    assert foltr_es.FoltrEsConfig(privacy_p=0.5).epsilon == pytest.approx(math.log(10))
    for bad in (1 / 11, 0.05, 0.0, 1.5):
        with pytest.raises(ValueError):
            es_rewards.epsilon_bound(bad)


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"privacy_p": 1 / 11}, "privacy_p"),
        ({"privacy_p": 1.01}, "privacy_p"),
        ({"local_updates": 3}, "local_updates"),
        ({"sigma": 0.0}, "sigma"),
        ({"learning_rate": float("nan")}, "learning_rate"),
        ({"n_clients": 0}, "n_clients"),
        ({"ranker": "tree"}, "ranker"),
        ({"click_model": "perfekt"}, "click_model"),
    ],
)
def test_config_refuses_bad_values(overrides, field):
    with pytest.raises(federation.ConfigError) as error:
        foltr_es.FoltrEsConfig(**overrides).validate()
    assert error.value.field == field


def test_odd_batches_without_antithetic_pairs_are_allowed():
    foltr_es.FoltrEsConfig(local_updates=3, antithetic=False).validate()
    np.testing.assert_array_equal(es_rewards.interaction_signs(4), [1, 1, -1, -1])
    np.testing.assert_array_equal(es_rewards.interaction_signs(3, antithetic=False), [1, 1, 1])


def test_neural_ranker_is_zero_initialised_relu():
    ranker = foltr_es.make_ranker("neural", 4)
    params = ranker.init(jax.random.PRNGKey(0))
    assert {k: v.shape for k, v in params.items()} == {"w1": (4, 10), "b1": (10,), "w2": (10,)}
    assert all(not np.any(v) for v in params.values())
    x = jnp.asarray(np.random.default_rng(0).uniform(size=(6, 4)), jnp.float32)
    np.testing.assert_array_equal(ranker.apply(params, x), np.zeros(6))
    # A perturbation (as ES makes) moves the scores: relu(x W1 + b1) · w2.
    w1, b1, w2 = np.full((4, 10), 0.1), np.full(10, -0.1), np.arange(10.0)
    perturbed = {"w1": jnp.asarray(w1), "b1": jnp.asarray(b1), "w2": jnp.asarray(w2)}
    want = np.maximum(np.asarray(x) @ w1 + b1, 0) @ w2
    np.testing.assert_allclose(ranker.apply(perturbed, x), want, rtol=1e-5)


def reference_gradient(noise, reward_indices, sigma, antithetic):
    """The public code's estimator, client by client: 1/(Nσ²) Σ_c ½(f⁺ − f⁻) ε_c."""
    values = np.array([0.0] + [1.0 / r for r in range(1, 11)])
    n_clients, b = reward_indices.shape
    gradient = np.zeros(noise.shape[1])
    for c in range(n_clients):
        f = values[reward_indices[c]]
        if antithetic:
            plus, minus = f[: b // 2].mean(), f[b // 2 :].mean()
            gradient += 0.5 * (plus - minus) * noise[c]
        else:
            gradient += f.mean() * noise[c]
    return gradient / (n_clients * sigma**2)


@pytest.mark.parametrize("antithetic", [True, False])
def test_es_gradient_matches_numpy(antithetic):
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 0.01, (7, 5)).astype(np.float32)
    rewards = rng.integers(0, 11, (7, 4))
    values = np.asarray(es_rewards.reward_values(11))[rewards]
    signs = es_rewards.interaction_signs(4, antithetic)
    # ĝ: the mean of the clients' messages, as the server's FedAvg takes it
    got = es_rewards.client_gradient(jnp.asarray(noise), jnp.asarray(values), signs, 0.01).mean(0)
    want = reference_gradient(noise.astype(np.float64), rewards, 0.01, antithetic)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def es_split():
    return data.synthetic_train_test(
        3, n_train_queries=12, n_test_queries=6, n_features=5, mean_docs_per_query=14
    )


def test_one_round_matches_a_slow_numpy_implementation(es_split):
    """Perturbations, ±pairs, deterministic top-k, MaxRR, privatised messages and ĝ of the
    clients' side of round 3 (``es_clients``, what the round's clients run, with the round's
    keys), and the engine's round itself (``FoltrEsMethod.round``): its new models are φ plus
    Adam's first step on ĝ written out in NumPy, φ + η ĝ / (|ĝ| + 1e-8).

    Clicks come from a deterministic model (click the first relevant document and
    stop), so the true rewards follow from the rankings alone.
    """
    train, test = es_split
    config = foltr_es.FoltrEsConfig(n_clients=5, local_updates=4, n_runs=2, privacy_p=0.5)
    spec, arrays = foltr_es.build(config, train, test)
    assert len(spec.widths) > 1  # the lanes are scored at several widths
    first_relevant = click_models.ClickModel(
        jnp.array([0.0, 1, 1, 1, 1]), jnp.ones(5), jnp.float32(0.0)
    )
    arrays = arrays._replace(click_model=first_relevant)
    init_keys, run_keys = loop.run_keys(config.seed, np.arange(config.n_runs))
    # Run 0 at the zero model (ranked by ±noise alone), run 1 at a random model.
    phi = np.stack([np.zeros(5), np.random.default_rng(1).normal(0, 0.02, 5)]).astype(np.float32)
    t = jnp.int32(3)
    details = jax.jit(foltr_es.es_clients, static_argnums=0)(
        spec, arrays, jnp.asarray(phi), engine.round_keys(run_keys, t)
    )
    details = jax.tree_util.tree_map(np.asarray, details)
    consts, (_, server_state) = spec.init(arrays, init_keys)
    (new_phi, _), round_metrics = jax.jit(spec.round)(
        consts, (jnp.asarray(phi), server_state), run_keys, t, None
    )
    noise = details.noise  # [R, N, P]
    assert noise.shape == (2, 5, 5) and abs(noise.std() / 0.01 - 1) < 0.3

    signs = np.array([1, 1, -1, -1])
    mismatched_with_plus_only = 0
    for r in range(2):
        for c in range(5):
            for i in range(4):
                q = details.queries[r, c, i]
                start, length = train.query_offsets[q], train.query_lengths[q]
                x = train.features[start : start + length].astype(np.float64)
                scores = x @ (phi[r] + signs[i] * noise[r, c])
                ranking = np.argsort(-scores, kind="stable")[:10]
                shown = min(length, 10)
                np.testing.assert_array_equal(details.rankings[r, c, i, :shown], ranking)
                plus_only = np.argsort(-(x @ (phi[r] + noise[r, c])), kind="stable")[:10]
                mismatched_with_plus_only += not np.array_equal(plus_only, ranking)
                relevant = np.nonzero(train.labels[start + ranking] > 0)[0]
                maxrr_index = relevant[0] + 1 if len(relevant) else 0
                assert details.true_reward[r, c, i] == maxrr_index
        want = reference_gradient(
            noise[r].astype(np.float64), details.private_reward[r], 0.01, antithetic=True
        )
        np.testing.assert_allclose(details.gradient[r], want, rtol=1e-5, atol=1e-5)
        step = config.learning_rate * want / (np.abs(want) + 1e-8)  # Adam's first step
        np.testing.assert_allclose(new_phi[r] - phi[r], step, rtol=1e-4, atol=1e-9)
        assert np.all(np.abs(step) > 0.5 * config.learning_rate)  # every weight moved
    np.testing.assert_allclose(round_metrics.online_ndcg, details.ndcg.mean(axis=(1, 2)), rtol=1e-6)
    # The −noise halves really rank differently from the +noise halves.
    assert mismatched_with_plus_only >= 5
    # p = 0.5: some rewards were changed, always to a different value.
    changed = details.private_reward != details.true_reward
    assert 0 < changed.mean() < 1


def test_vmap_scoring_matches_map(es_split):
    train, test = es_split
    rng = np.random.default_rng(4)
    n_lanes = 24
    lanes = (
        jnp.asarray(rng.normal(0, 0.1, (2, 5)), jnp.float32),  # φ of two runs
        jnp.asarray(rng.normal(0, 0.01, (6, 5)), jnp.float32),  # ε of six clients
        jnp.asarray(rng.integers(0, 2, n_lanes)),
        jnp.asarray(rng.integers(0, 6, n_lanes)),
        jnp.asarray(rng.choice([-1.0, 1.0], n_lanes), jnp.float32),
    )
    queries = jnp.asarray(rng.integers(0, train.n_queries, n_lanes))
    rankings = {}
    for scoring in ("map", "vmap"):
        config = foltr_es.FoltrEsConfig(window_scoring=scoring)
        spec, arrays = foltr_es.build(config, train, test)
        rank = jax.jit(foltr_es.rank_lanes, static_argnums=0)
        rankings[scoring] = np.asarray(rank(spec, arrays, lanes, queries))
    np.testing.assert_array_equal(rankings["map"], rankings["vmap"])


@pytest.fixture(scope="module")
def learning():
    train, test = data.synthetic_train_test(
        1, n_train_queries=60, n_test_queries=30, n_features=10, mean_docs_per_query=20
    )
    config = foltr_es.FoltrEsConfig(
        n_clients=100, rounds=40, n_runs=2, chunk_rounds=20, click_model="perfect"
    )
    spec, arrays = foltr_es.build(config, train, test)
    return train, test, config, foltr_es.run(spec, arrays)


def test_learning_improves_offline_ndcg_with_perfect_clicks(learning):
    *_, result = learning
    assert result.offline_ndcg.shape == (2, 40) and result.online_max_rr.shape == (2, 40)
    assert result.interactions == 2 * 100 * 4 * 40 and result.epsilon == math.inf
    # zero init: every run starts from the same model
    assert result.initial_offline_ndcg[0] == result.initial_offline_ndcg[1]
    for initial, curve in zip(result.initial_offline_ndcg, result.offline_ndcg):
        assert curve[-5:].mean() > initial + 0.15, (initial, curve)
    online = result.online_ndcg
    assert np.all(online[:, -5:].mean(axis=1) > online[:, :5].mean(axis=1) + 0.1)
    assert result.final_params["w"].shape == (2, 10)


def test_runs_and_chunks_do_not_change_results(learning):
    """One run alone, in one chunk, repeats run 0 of two runs in two chunks."""
    train, test, config, two = learning
    one_config = dataclasses.replace(config, n_runs=1, chunk_rounds=config.rounds)
    one = foltr_es.run(*foltr_es.build(one_config, train, test))
    np.testing.assert_allclose(one.online_ndcg, two.online_ndcg[:1], atol=1e-6)
    np.testing.assert_allclose(one.offline_ndcg, two.offline_ndcg[:1], atol=1e-6)
    assert not np.array_equal(two.online_ndcg[0], two.online_ndcg[1])


SMALL = [
    "--synthetic_queries=30",
    "--synthetic_features=8",
    "--synthetic_docs_per_query=15",
    "--n_clients=8",
    "--rounds=6",
    "--chunk_rounds=6",
]
KEYS = {
    "results_format",
    "method",
    "config",
    "data",
    "versions",
    "provenance",
    "epsilon",
    "metric",
    "cells",
    "interactions",
    "seconds",
    "compile_seconds",
    "interactions_per_second",
    "timings",
}


def run_binary(*args, cache_dir):
    return call("foltr_es", *args, cache_dir=cache_dir)


@pytest.mark.slow  # the same results from two processes of their own
def test_binary_writes_results_and_is_deterministic(tmp_path):
    a, b, result = run_twice("foltr_es", *SMALL, "--n_runs=2", "--privacy_p=0.9", tmp_path=tmp_path)
    assert set(a) == KEYS
    assert without_timings(a) == without_timings(b)
    assert a["method"] == "foltr_es" and a["epsilon"] == pytest.approx(math.log(90))
    (cell,) = a["cells"]
    assert cell["evaluated_rounds"] == [1, 2, 3, 4, 5, 6]
    for key in ("offline_ndcg", "offline_mrr", "online_ndcg", "online_max_rr"):
        assert np.asarray(cell["curves"][key]).shape == (2, 6), key
    for key in ("initial_offline_ndcg", "online_performance", "final_offline_ndcg"):
        assert np.asarray(cell["per_run"][key]).shape == (2,), key
    assert a["config"]["n_clients"] == 8 and a["config"]["local_updates"] == 4
    assert a["interactions"] == 2 * 8 * 4 * 6 and a["interactions_per_second"] > 0
    assert "round 6/6" in result.stderr  # progress


@pytest.mark.parametrize(
    "flag, named",
    [("--local_updates=3", "--local_updates"), ("--privacy_p=0.05", "--privacy_p")],
)
def test_binary_refuses_bad_flags_with_one_line(tmp_path, flag, named):
    result = run_binary(*SMALL, flag, f"--output_dir={tmp_path}", cache_dir=tmp_path / "cache")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("foltr_es: error: " + named), lines
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "results.json").exists()


@pytest.mark.parametrize("size", [1, 4, 16])
def test_query_blocks_hold_every_lane_once_with_its_query(size):
    rng = np.random.default_rng(size)
    n_queries, n_lanes = 9, 50
    queries = rng.choice([0, 2, 3, 8], n_lanes, p=[0.6, 0.2, 0.15, 0.05])  # 5 queries unused
    blocks = jax.jit(query_blocks.query_blocks, static_argnums=(1, 2))(
        jnp.asarray(queries), n_queries, size
    )
    lanes, query = np.asarray(blocks.lanes), np.asarray(blocks.query)
    assert lanes.shape == (query_blocks.max_blocks(n_lanes, n_queries, size), size)
    filled = lanes < n_lanes
    np.testing.assert_array_equal(np.sort(lanes[filled]), np.arange(n_lanes))
    for b in range(len(query)):
        if query[b] == n_queries:  # an empty block at the end
            assert not filled[b].any() and not filled[b:].any()
            continue
        assert filled[b, 0]
        np.testing.assert_array_equal(queries[lanes[b][filled[b]]], query[b])
        assert np.all(np.diff(lanes[b][filled[b]]) > 0)  # lane order within a query
    np.testing.assert_array_equal(
        lanes.reshape(-1)[np.asarray(blocks.position)], np.arange(n_lanes)
    )


def test_blocks_of_relu_lanes_rank_as_lanes_alone(es_split):
    """The relu ranker's lanes ranked a block of one query at a time (apply_lanes) are
    ranked as each lane alone (lists.Scoring.score_lanes, lax.map), and score alike."""
    train, test = es_split
    rng = np.random.default_rng(5)
    n_lanes, n_params = 70, 5 * 10 + 20
    lanes = (
        jnp.asarray(rng.normal(0, 0.3, (2, n_params)), jnp.float32),
        jnp.asarray(rng.normal(0, 0.1, (6, n_params)), jnp.float32),
        jnp.asarray(rng.integers(0, 2, n_lanes)),
        jnp.asarray(rng.integers(0, 6, n_lanes)),
        jnp.asarray(rng.choice([-1.0, 1.0], n_lanes), jnp.float32),
    )
    queries = jnp.asarray(rng.integers(0, train.n_queries, n_lanes))
    spec, arrays = foltr_es.build(foltr_es.FoltrEsConfig(ranker="relu"), train, test)
    assert spec.scoring.window_scoring == "map"
    blocked = jax.jit(foltr_es.rank_lanes, static_argnums=0)(spec, arrays, lanes, queries)

    def alone(lanes, queries):
        flat_global, noise, run, client, sign = lanes

        def top_k(width, scores, length):
            scores = jnp.where(jnp.arange(width) < length, scores, -jnp.inf)
            return jax.lax.top_k(scores, spec.config.top_k)[1].astype(jnp.int32)

        def params_of(args):
            r, c, s = args
            return spec.unravel(flat_global[r] + s * noise[c])

        return spec.scoring.score_lanes(
            arrays.train, (run, client, sign), queries, top_k, params_of
        )

    np.testing.assert_array_equal(np.asarray(blocked), np.asarray(jax.jit(alone)(lanes, queries)))
