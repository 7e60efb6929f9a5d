"""Sanity tests of the NumPy FPDGD reference (tests/methods/fpdgd/reference_fpdgd.py)."""

import math

import numpy as np
import pytest

from foltr_jax.data import RankingDataset, synthetic_train_test
from tests.methods.fpdgd import reference_fpdgd as ref


def test_plackett_luce_probability_counts_undisplayed_documents():
    scores = np.log([1.0, 2.0, 3.0])
    # Displayed prefix [0, 1] of 3 documents: 1/6 * 2/(6-1).
    assert ref.plackett_luce_prob(scores, np.array([0, 1])) == pytest.approx(1 / 15)
    assert ref.plackett_luce_prob(scores, np.array([1, 0])) == pytest.approx(1 / 12)
    # Full rankings sum to one.
    total = sum(
        ref.plackett_luce_prob(scores, np.array(r))
        for r in ([0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0])
    )
    assert total == pytest.approx(1.0)


def test_debias_weight_hand_computed():
    scores = np.log([1.0, 2.0, 3.0])
    # P(R) = 1/15, P(R*) = 1/12 -> rho = (1/12) / (1/15 + 1/12) = 5/9.
    # (Leaving the undisplayed document out of the denominators would give 2/3.)
    assert ref.debias_weight(scores, np.array([0, 1]), 0, 1) == pytest.approx(5 / 9)
    # Shift invariance, and no overflow for huge scores.
    assert ref.debias_weight(scores + 1000.0, np.array([0, 1]), 0, 1) == pytest.approx(5 / 9)


def test_pdgd_gradient_hand_computed():
    scores = np.log([1.0, 2.0, 3.0])
    features = np.eye(3)
    ranking = np.array([0, 1, 2])
    clicks = np.array([False, True, False])
    # Pairs: (pos 1, neg 0): rho 5/9, pair weight 2/9; (pos 1, neg 2): rho 3/5, pair weight 6/25.
    w10, w12 = 5 / 9 * 2 / 9, 3 / 5 * 6 / 25
    expected = np.array([-w10, w10 + w12, -w12])
    np.testing.assert_allclose(
        ref.pdgd_gradient(features, scores, ranking, clicks), expected, rtol=1e-12
    )
    # No click, no update.
    assert not ref.pdgd_gradient(features, scores, ranking, np.zeros(3, bool)).any()


def test_negatives_stop_one_below_last_click():
    # 5 docs displayed, click at position 1 only: negatives are positions 0 and 2, not 3, 4.
    features = np.eye(5)
    scores = np.zeros(5)
    grad = ref.pdgd_gradient(
        features, scores, np.arange(5), np.array([False, True, False, False, False])
    )
    assert grad[0] < 0 and grad[1] > 0 and grad[2] < 0
    assert grad[3] == 0 and grad[4] == 0


def test_perfect_click_model_never_clicks_label_zero():
    rng = np.random.default_rng(0)
    for _ in range(2000):
        labels = rng.integers(0, 5, size=10)
        clicks = ref.simulate_clicks(labels, "perfect", rng)
        assert not clicks[labels == 0].any()
        # perfect never stops and clicks label 4 with probability 1.
        assert clicks[labels == 4].all()


def test_sample_ranking_is_plackett_luce():
    rng = np.random.default_rng(1)
    scores = np.log([1.0, 2.0, 3.0, 4.0])
    first = np.zeros(4)
    for _ in range(4000):
        r = ref.sample_ranking(scores, 3, rng)
        assert len(set(r.tolist())) == 3
        first[r[0]] += 1
    np.testing.assert_allclose(first / first.sum(), np.array([1, 2, 3, 4]) / 10, atol=0.03)


def test_offline_ndcg_hand_computed():
    ds = RankingDataset(
        features=np.array([[1.0], [2.0], [3.0], [1.0], [2.0]], np.float32),
        labels=np.array([2, 0, 1, 0, 0]),
        query_offsets=np.array([0, 3]),
        query_lengths=np.array([3, 2]),
        query_ids=np.array(["a", "b"]),
    )
    # Query a ranked by w=1: labels [1, 0, 2]; query b has no relevant doc and is skipped.
    dcg = 1.0 + 3.0 / math.log2(4)
    ideal = 3.0 + 1.0 / math.log2(3)
    assert ref.offline_ndcg(np.array([1.0]), ds) == pytest.approx(dcg / ideal)


def test_learning_improves_offline_ndcg_on_synthetic_data():
    train, test = synthetic_train_test(
        0, n_train_queries=30, n_test_queries=20, n_features=8, mean_docs_per_query=15
    )
    gains = []
    for seed in range(3):
        result = ref.run_reference(
            train,
            test,
            n_clients=4,
            local_updates=5,
            rounds=30,
            click_model="perfect",
            seed=seed,
        )
        assert result["offline_ndcg_before"].shape == (30,)
        assert result["offline_ndcg_after"].shape == (30,)
        assert result["online_ndcg"].shape == (30,)
        np.testing.assert_array_equal(
            result["offline_ndcg_before"][1:], result["offline_ndcg_after"][:-1]
        )
        gains.append(result["offline_ndcg_after"][-1] - result["offline_ndcg_before"][0])
    assert np.mean(gains) > 0.05


def test_neural_doc_gradients_match_finite_differences():
    rng = np.random.default_rng(0)
    model = ref.Neural(4, hidden_units=3)
    theta = rng.normal(size=4 * 3 + 3 + 3)
    features = rng.random((5, 4))
    analytic = model.doc_gradients(theta, features)
    assert analytic.shape == (5, theta.size)
    eps = 1e-6
    for j in range(theta.size):
        step = np.zeros_like(theta)
        step[j] = eps
        numeric = (model.scores(theta + step, features) - model.scores(theta - step, features)) / (
            2 * eps
        )
        np.testing.assert_allclose(analytic[:, j], numeric, rtol=1e-6, atol=1e-9)
    w1, b1, w2 = model.split(theta)
    hidden = 1 / (1 + np.exp(-(features @ w1 + b1)))
    np.testing.assert_allclose(model.scores(theta, features), hidden @ w2, rtol=1e-12)


def test_neural_init_fan_in_weights_and_biases():
    model = ref.Neural(20, hidden_units=64)
    w1, b1, w2 = model.split(model.init(np.random.default_rng(0)))
    assert w1.shape == (20, 64) and b1.shape == (64,) and w2.shape == (64,)
    # sd 1/fan_in (b1: W1's fan-in, as the public code): sample sd within ~4 standard errors
    assert abs(w1.std() * 20 - 1) < 4 / np.sqrt(2 * 1280)
    assert abs(b1.std() * 20 - 1) < 4 / np.sqrt(2 * 64)
    assert abs(w2.std() * 64 - 1) < 4 / np.sqrt(2 * 64)
