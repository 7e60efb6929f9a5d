"""PDGD gradients against a slow, plainly written per-interaction reference."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from foltr_jax.core import rankers
from foltr_jax.methods.fpdgd import pdgd
from tests.methods.fpdgd import reference_fpdgd as reference


def reference_pdgd(scores, ranking, clicks, doc_gradients):
    """Algorithm 1 lines 7-11 for one interaction, written out pair by pair.

    scores: float64 [n_candidates]; ranking: displayed candidates, top first;
    clicks: bools per displayed position; doc_gradients[d]: ∇f(d) flattened.
    ρ and the pair weight come from the plain NumPy reference simulator.
    """
    clicked = [i for i, c in enumerate(clicks) if c]
    gradient = np.zeros_like(doc_gradients[0])
    if not clicked:
        return gradient
    unclicked = [j for j in range(len(ranking)) if not clicks[j] and j <= max(clicked) + 1]
    for i in clicked:
        for j in unclicked:
            dk, dl = ranking[i], ranking[j]
            weight = reference.debias_weight(scores, ranking, i, j) * reference.pair_weight(
                scores[dk], scores[dl]
            )
            gradient += weight * (doc_gradients[dk] - doc_gradients[dl])
    return gradient


def _jax_cotangent(scores, ranking, clicks, window, k):
    n = len(scores)
    padded_scores = np.zeros(window, np.float32)
    padded_scores[:n] = scores
    mask = np.arange(window) < n
    padded_ranking = np.zeros(k, np.int32)
    padded_ranking[: len(ranking)] = ranking
    # padding positions point at padding candidates, as top_k of -inf would
    padded_ranking[len(ranking) :] = np.arange(n, n + k - len(ranking)) % window
    shown = np.arange(k) < len(ranking)
    padded_clicks = np.zeros(k, bool)
    padded_clicks[: len(ranking)] = clicks
    rest = pdgd.unshown_logsumexp(
        jnp.asarray(padded_scores),
        jnp.asarray(mask),
        jnp.asarray(padded_ranking),
        jnp.asarray(shown),
    )
    coefficients = pdgd.position_coefficients(
        jnp.asarray(padded_scores[padded_ranking]),
        jnp.asarray(shown),
        jnp.asarray(padded_clicks),
        rest,
    )
    coefficients = jnp.where(jnp.asarray(shown), coefficients, 0.0)
    cotangent = np.zeros(window, np.float32)
    np.add.at(cotangent, padded_ranking, np.asarray(coefficients))
    return cotangent


@pytest.mark.parametrize("seed", range(30))
def test_linear_gradient_matches_reference(seed):
    rng = np.random.default_rng(seed)
    n_candidates = int(rng.integers(2, 25))
    window, k, n_features = 32, 10, 7
    features = rng.random((n_candidates, n_features))
    weights = rng.normal(size=n_features) * 1.5
    scores = (features @ weights).astype(np.float32).astype(np.float64)
    ranking = rng.permutation(n_candidates)[: min(k, n_candidates)]
    clicks = rng.random(len(ranking)) < 0.4
    expected = reference_pdgd(scores, ranking, clicks, features)
    cotangent = np.asarray(_jax_cotangent(scores, ranking, clicks, window, k))
    got = cotangent[:n_candidates] @ features
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-4)
    assert np.all(cotangent[n_candidates:] == 0)


@pytest.mark.parametrize("seed", range(10))
def test_neural_gradient_matches_reference(seed):
    """The vjp of the JAX ranker against the reference's hand-written ∇f(d) (biases too)."""
    rng = np.random.default_rng(100 + seed)
    n_candidates, window, k, n_features = 15, 16, 10, 5
    ranker = rankers.NeuralRanker(n_features, hidden_units=8)
    params = ranker.init(jax.random.PRNGKey(seed))
    params = jax.tree_util.tree_map(lambda p: p * 20.0, params)  # non-trivial scores
    params["b1"] = jnp.asarray(rng.normal(size=8), jnp.float32)
    features = rng.random((n_candidates, n_features)).astype(np.float32)
    model = reference.Neural(n_features, hidden_units=8)
    flat = lambda tree: model.join(*(np.asarray(tree[name]) for name in ("w1", "b1", "w2")))
    theta = flat(params)
    scores = model.scores(theta, features.astype(np.float64))
    # float32 sums of 8 terms of magnitude ~2.5: absolute rounding ~1e-6 (a score near 0
    # cannot meet a relative bound alone)
    np.testing.assert_allclose(
        np.asarray(ranker.apply(params, features)), scores, rtol=1e-5, atol=1e-5
    )
    doc_gradients = model.doc_gradients(theta, features.astype(np.float64))
    ranking = rng.permutation(n_candidates)[:k]
    clicks = rng.random(k) < 0.5
    expected = reference_pdgd(scores, ranking, clicks, doc_gradients)
    padded = np.zeros((window, n_features), np.float32)
    padded[:n_candidates] = features
    cotangent = _jax_cotangent(scores, ranking, clicks, window, k)
    _, pullback = jax.vjp(lambda p: ranker.apply(p, jnp.asarray(padded)), params)
    (got,) = pullback(cotangent)
    np.testing.assert_allclose(flat(got), expected, atol=1e-5, rtol=1e-4)


def test_preference_pairs_follow_the_last_click_rule():
    clicks = jnp.array([False, True, False, True, False, False, False, False, False, False])
    shown = jnp.arange(10) < 8
    pairs = np.asarray(pdgd.preference_pairs(clicks, shown))
    # clicked positions 1 and 3 over unclicked 0, 2 (above the last click) and 4 (just below)
    expected = np.zeros((10, 10), bool)
    for i, j in itertools.product([1, 3], [0, 2, 4]):
        expected[i, j] = True
    np.testing.assert_array_equal(pairs, expected)


def test_no_clicks_no_gradient():
    cotangent = _jax_cotangent(
        np.array([0.3, -1.0, 2.0, 0.5]), np.array([2, 0, 3, 1]), np.zeros(4, bool), 16, 10
    )
    assert np.all(np.asarray(cotangent) == 0)


def test_debiasing_is_stable_for_extreme_scores():
    # The top document outscores the rest by far more than float32 exp can hold.
    shown_scores = np.array([500.0, 1.0, 0.0, 2.0, -3.0, -400.0])
    rho = np.asarray(
        pdgd.debias_weights(
            jnp.asarray(shown_scores, jnp.float32), jnp.ones(6, bool), jnp.float32(-jnp.inf)
        )
    )
    assert np.all(np.isfinite(rho)) and np.all((rho >= 0) & (rho <= 1))
    # Swapping positions 1 and 3 changes the denominators at positions 2 and 3:
    z2, z2_swapped = [
        sum(math.exp(s) for s in group)
        for group in ([0.0, 2.0, -3.0, -400.0], [0.0, 1.0, -3.0, -400.0])
    ]
    z3, z3_swapped = [
        sum(math.exp(s) for s in group) for group in ([2.0, -3.0, -400.0], [1.0, -3.0, -400.0])
    ]
    expected = 1.0 / (1.0 + (z2_swapped / z2) * (z3_swapped / z3))
    np.testing.assert_allclose(rho[1, 3], expected, rtol=1e-5)
    np.testing.assert_allclose(rho[3, 1], expected, rtol=1e-5)
    # Swapping the dominant document down: P(R*) is negligible, ρ ≈ 0.
    assert rho[0, 2] < 1e-30
    scores = np.array([500.0, 0.0, -3.0, 1.0, -400.0, 2.0])
    cotangent = np.asarray(
        _jax_cotangent(
            scores,
            np.array([0, 3, 1, 5, 2, 4]),
            np.array([False, True, False, True, False, False]),
            16,
            10,
        )
    )
    assert np.all(np.isfinite(cotangent))


def test_coefficients_of_many_lists_match_the_reference_list_by_list():
    """position_coefficients_of_lists (the lists' axis minor inside) gives every list the
    pair-by-pair reference's coefficients, lists of different lengths and clicks together."""
    rng = np.random.default_rng(7)
    k, n_lists = 10, 12
    batch_scores, batch_shown, batch_clicks, batch_rest, expected = [], [], [], [], []
    for _ in range(n_lists):
        n = int(rng.integers(2, 25))
        scores = (rng.normal(size=n) * 2).astype(np.float32).astype(np.float64)
        ranking = rng.permutation(n)[: min(k, n)]
        clicks = rng.random(len(ranking)) < 0.4
        # The reference's gradient with ∇f(d) = e_d is the coefficient of every candidate.
        per_candidate = reference_pdgd(scores, ranking, clicks, np.eye(n))
        want = np.zeros(k)
        want[: len(ranking)] = per_candidate[ranking]
        expected.append(want)
        shown = np.arange(k) < len(ranking)
        padded = np.zeros(k, np.float32)
        padded[: len(ranking)] = scores[ranking]
        padded_clicks = np.zeros(k, bool)
        padded_clicks[: len(ranking)] = clicks
        unshown = np.setdiff1d(np.arange(n), ranking)
        rest = np.log(np.sum(np.exp(scores[unshown]))) if len(unshown) else -np.inf
        batch_scores.append(padded)
        batch_shown.append(shown)
        batch_clicks.append(padded_clicks)
        batch_rest.append(rest)
    got = pdgd.position_coefficients_of_lists(
        jnp.asarray(np.stack(batch_scores)),
        jnp.asarray(np.stack(batch_shown)),
        jnp.asarray(np.stack(batch_clicks)),
        jnp.asarray(np.array(batch_rest, np.float32)),
    )
    got = np.where(np.stack(batch_shown), np.asarray(got), 0.0)
    np.testing.assert_allclose(got, np.stack(expected), atol=1e-5, rtol=1e-4)


def test_coefficients_in_blocks_equal_one_block():
    """More lists than a block (pdgd.LISTS_PER_BLOCK) run block by block, padded: every
    list's coefficients are the ones it gets in a small batch of its own (up to float32
    rounding: XLA's vector code rounds a list's last bits by where it sits in a vector)."""
    rng = np.random.default_rng(3)
    k, block = 10, pdgd.LISTS_PER_BLOCK
    n = block + 37
    scores = jnp.asarray(rng.normal(size=(n, k)) * 2, jnp.float32)
    shown = jnp.asarray(np.arange(k)[None, :] < rng.integers(1, k + 1, size=(n, 1)))
    clicks = jnp.asarray(rng.random((n, k)) < 0.4) & shown
    rest = jnp.asarray(np.where(rng.random(n) < 0.3, -np.inf, rng.normal(size=n)), jnp.float32)
    together = np.asarray(pdgd.position_coefficients_of_lists(scores, shown, clicks, rest, block))
    at_once = np.asarray(pdgd.position_coefficients_of_lists(scores, shown, clicks, rest))
    np.testing.assert_allclose(together, at_once, rtol=1e-6, atol=1e-7)
    assert together.shape == (n, k)
    for start in (0, block - 5, n - 7):
        part = slice(start, start + 7)
        alone = pdgd.position_coefficients_of_lists(
            scores[part], shown[part], clicks[part], rest[part]
        )
        np.testing.assert_allclose(together[part], np.asarray(alone), rtol=1e-6, atol=1e-7)
