"""Ranking metrics (thesis §2.2.1; FPDGD paper §4).

nDCG@k: gain 2^rel − 1, discount log2(rank + 1) with 1-based rank, ideal DCG from
the documents available for the query (public code).  Offline nDCG averages over
test queries with at least one relevant document; online nDCG of a shown list
counts 0 when its query has no relevant document.  MaxRR: reciprocal rank of the
highest clicked result, 0 without clicks.  Online performance: Σ_t γ^(t−1) nDCG_t
over rounds (DESIGN.md: the per-round reading of FPDGD eq. 17), γ = 0.9995.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

ONLINE_DISCOUNT = 0.9995


def discounts(k: int) -> np.ndarray:
    """1 / log2(rank + 1) for ranks 1..k."""
    return (1.0 / np.log2(np.arange(2, k + 2))).astype(np.float32)


def gains(labels):
    return 2.0**labels - 1.0


def ideal_dcg(
    labels: np.ndarray, query_offsets: np.ndarray, query_lengths: np.ndarray, k: int = 10
) -> np.ndarray:
    """float32 [n_queries] ideal DCG@k of each query from its own labels."""
    disc = discounts(k)
    out = np.zeros(len(query_offsets), np.float32)
    for i, (start, length) in enumerate(zip(query_offsets, query_lengths)):
        best = np.sort(labels[start : start + length])[::-1][:k]
        out[i] = np.sum(gains(best.astype(np.float64)) * disc[: len(best)])
    return out


def dcg_of_list(labels: jax.Array, shown: jax.Array) -> jax.Array:
    """DCG of a displayed list of ``k`` labels (positions where ``shown`` is False count 0)."""
    k = labels.shape[-1]
    g = jnp.where(shown, gains(labels.astype(jnp.float32)), 0.0)
    return jnp.sum(g * discounts(k), axis=-1)


def ndcg_of_list(labels, shown, ideal):
    """nDCG of a displayed list; 0 when the query has no relevant document (ideal 0)."""
    return jnp.where(ideal > 0, dcg_of_list(labels, shown) / jnp.where(ideal > 0, ideal, 1.0), 0.0)


def max_reciprocal_rank(clicks: jax.Array) -> jax.Array:
    """MaxRR: 1 / rank of the highest (top-most) click, 0 without clicks."""
    first = jnp.argmax(clicks, axis=-1)
    return jnp.where(jnp.any(clicks, axis=-1), 1.0 / (first + 1.0), 0.0)


def online_performance(per_round_ndcg, gamma: float = ONLINE_DISCOUNT):
    """Σ_t γ^(t−1) nDCG_t over the last axis (one value per round)."""
    per_round_ndcg = np.asarray(per_round_ndcg, np.float64)
    weights = gamma ** np.arange(per_round_ndcg.shape[-1])
    return per_round_ndcg @ weights


def per_query_rank_metrics(
    scores: jax.Array,
    labels: jax.Array,
    doc_query: jax.Array,
    query_offsets: jax.Array,
    ideal: jax.Array,
    k: int = 10,
):
    """nDCG@k and reciprocal rank of the first relevant document, per query.

    Works on the flat document layout: one sort by (query, −score, document) ranks
    every query at once, so no query is padded.  Ties keep the file order.

    Returns:
        (ndcg [n_queries], reciprocal_rank [n_queries]); queries without relevant
        documents get 0 for both.
    """
    n_docs = scores.shape[0]
    n_queries = query_offsets.shape[0]
    doc_index = jnp.arange(n_docs)
    _, _, order = jax.lax.sort((doc_query, -scores, doc_index), num_keys=2)
    sorted_labels = labels[order]
    rank = doc_index - query_offsets[doc_query]  # doc_query is sorted already
    in_top = rank < k
    disc = 1.0 / jnp.log2(rank.astype(jnp.float32) + 2.0)
    dcg = jax.ops.segment_sum(
        jnp.where(in_top, gains(sorted_labels.astype(jnp.float32)) * disc, 0.0),
        doc_query,
        num_segments=n_queries,
        indices_are_sorted=True,
    )
    ndcg = jnp.where(ideal > 0, dcg / jnp.where(ideal > 0, ideal, 1.0), 0.0)
    rr = jnp.where(in_top & (sorted_labels > 0), 1.0 / (rank + 1.0), 0.0)
    mrr = jax.ops.segment_max(rr, doc_query, num_segments=n_queries, indices_are_sorted=True)
    return ndcg, jnp.maximum(mrr, 0.0)
