"""Plackett-Luce sampling against the distribution's definition."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np

from foltr_jax.core import plackett_luce


def _sample(scores, mask, k, n, seed=0):
    keys = jax.random.split(jax.random.PRNGKey(seed), n)
    return np.asarray(
        jax.vmap(
            lambda key: plackett_luce.sample_top_k(key, jnp.asarray(scores), jnp.asarray(mask), k)
        )(keys)
    )


def test_top_two_frequencies_match_plackett_luce():
    scores = np.array([1.0, 0.2, -0.5, 2.0, 0.0], np.float32)
    n = 200_000
    rankings = _sample(scores, np.ones(5, bool), 2, n)
    weights = np.exp(scores.astype(np.float64))
    for a, b in itertools.permutations(range(5), 2):
        p = weights[a] / weights.sum() * weights[b] / (weights.sum() - weights[a])
        freq = np.mean((rankings[:, 0] == a) & (rankings[:, 1] == b))
        assert abs(freq - p) < 5 * math.sqrt(p * (1 - p) / n), (a, b, freq, p)


def test_padding_is_never_ranked_above_real_candidates():
    scores = np.array([0.0, 1.0, 50.0, 100.0], np.float32)  # padding carries huge scores
    mask = np.array([True, True, False, False])
    rankings = _sample(scores, mask, 3, 1000)
    assert set(rankings[:, :2].ravel()) <= {0, 1}


def test_extreme_scores_stay_exact():
    scores = np.array([1e30, -1e30, 0.0, 3e4], np.float32)
    rankings = _sample(scores, np.ones(4, bool), 4, 200)
    np.testing.assert_array_equal(rankings, np.tile([0, 3, 2, 1], (200, 1)))


def test_log_prob_matches_definition():
    scores = jnp.array([0.3, -1.0, 2.0, 0.5, 0.0, 1.5])
    mask = jnp.array([True] * 5 + [False])
    ranking = jnp.array([2, 0, 4])
    logp = float(plackett_luce.log_prob(scores, mask, ranking, jnp.int32(3)))
    w = np.exp(np.array([0.3, -1.0, 2.0, 0.5, 0.0]))
    expected = math.log(w[2] / w.sum() * w[0] / (w.sum() - w[2]) * w[4] / (w.sum() - w[2] - w[0]))
    assert abs(logp - expected) < 1e-5
