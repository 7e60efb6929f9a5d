"""Metrics against plain reference computations."""

import math

import jax.numpy as jnp
import numpy as np

from foltr_jax.core import metrics


def reference_ndcg(labels_in_order, all_labels, k=10):
    dcg = sum((2**r - 1) / math.log2(i + 2) for i, r in enumerate(labels_in_order[:k]))
    ideal = sorted(all_labels, reverse=True)[:k]
    idcg = sum((2**r - 1) / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def test_per_query_metrics_match_reference():
    rng = np.random.default_rng(0)
    lengths = np.array([3, 12, 1, 25, 7, 4])
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    labels = rng.integers(0, 5, lengths.sum()) * (rng.random(lengths.sum()) < 0.5)
    labels[offsets[4] : offsets[4] + lengths[4]] = 0  # a query without relevant documents
    scores = rng.normal(size=lengths.sum()).astype(np.float32)
    scores[offsets[3] : offsets[3] + 5] = 0.25  # ties keep the file order
    ideal = metrics.ideal_dcg(labels, offsets, lengths)
    buckets = metrics.length_buckets(offsets, lengths, (4, 8, 16, 25))
    assert len(buckets) == 4  # the 1- and 3-document queries share the narrowest bucket
    ndcg, rr = metrics.per_query_rank_metrics(
        jnp.asarray(scores), jnp.asarray(labels), jnp.asarray(ideal), buckets
    )
    for q, (start, n) in enumerate(zip(offsets, lengths)):
        order = np.argsort(-scores[start : start + n], kind="stable")
        ranked = labels[start : start + n][order]
        assert (
            abs(float(ndcg[q]) - reference_ndcg(list(ranked), list(labels[start : start + n])))
            < 1e-5
        )
        relevant = np.nonzero(ranked[:10] > 0)[0]
        assert abs(float(rr[q]) - (1.0 / (relevant[0] + 1) if len(relevant) else 0.0)) < 1e-6


def test_online_ndcg_of_a_list():
    labels = jnp.array([2, 0, 1, 0, 0, 0, 0, 0, 0, 0])
    shown = jnp.arange(10) < 3
    ideal = (2**2 - 1) + (2**1 - 1) / math.log2(3)  # ideal from the query's own labels [2, 1]
    got = float(metrics.ndcg_of_list(labels, shown, jnp.float32(ideal)))
    assert abs(got - (3 + 1 / math.log2(4)) / ideal) < 1e-6
    assert float(metrics.ndcg_of_list(labels * 0, shown, jnp.float32(0.0))) == 0.0


def test_max_reciprocal_rank():
    clicks = jnp.array([[False, False, True, True], [False] * 4, [True, False, False, True]])
    np.testing.assert_allclose(metrics.max_reciprocal_rank(clicks), [1 / 3, 0.0, 1.0])


def test_online_performance_matches_thesis_table_4_3():
    # Thesis Table 4.3: nDCG 0.8 every round for 10,000 rounds gives 1589.23.
    assert abs(metrics.online_performance(np.full(10_000, 0.8)) - 1589.23) < 0.01
