"""Ranking metrics (thesis §2.2.1; FPDGD paper §4).

nDCG@k: gain 2^rel − 1, discount log2(rank + 1) with 1-based rank, ideal DCG from
the documents available for the query (public code).  Offline nDCG averages over
test queries with at least one relevant document; online nDCG of a shown list
counts 0 when its query has no relevant document.  MaxRR: reciprocal rank of the
highest clicked result, 0 without clicks.  Online performance: Σ_t γ^(t−1) nDCG_t
over rounds (the per-round reading of FPDGD eq. 17), γ = 0.9995.
"""

from __future__ import annotations

from typing import NamedTuple

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


class LengthBucket(NamedTuple):
    """Queries whose length fits ``width``, as a padded [n, width] index matrix."""

    doc_index: jax.Array  # int32 [n, width] flat document rows (padding repeats row 0)
    valid: jax.Array  # bool [n, width]
    query_index: jax.Array  # int32 [n]


def length_buckets(query_offsets, query_lengths, widths) -> tuple:
    """Groups queries by the narrowest of ``widths`` that holds them (static, numpy).

    Only ranking a query needs a fixed width; grouping keeps the padding small.
    """
    query_offsets, query_lengths = np.asarray(query_offsets), np.asarray(query_lengths)
    bucket_of = np.searchsorted(np.asarray(widths), query_lengths)
    buckets = []
    for b, width in enumerate(widths):
        queries = np.nonzero(bucket_of == b)[0]
        if len(queries) == 0:
            continue
        positions = np.arange(width)[None, :]
        valid = positions < query_lengths[queries, None]
        index = np.where(valid, query_offsets[queries, None] + positions, 0)
        buckets.append(
            LengthBucket(
                jnp.asarray(index, jnp.int32), jnp.asarray(valid), jnp.asarray(queries, jnp.int32)
            )
        )
    return tuple(buckets)


def per_query_rank_metrics(
    scores: jax.Array, labels: jax.Array, ideal: jax.Array, buckets: tuple, k: int = 10
):
    """nDCG@k and reciprocal rank of the first relevant document, per query.

    Every query is ranked by descending score (ties keep the file order) within
    its length bucket.  Queries without relevant documents get 0 for both.

    Returns:
        (ndcg [n_queries], reciprocal_rank [n_queries]).
    """
    n_queries = ideal.shape[0]
    ndcg = jnp.zeros(n_queries, jnp.float32)
    rr = jnp.zeros(n_queries, jnp.float32)
    for bucket in buckets:
        width = bucket.doc_index.shape[1]
        masked = jnp.where(bucket.valid, scores[bucket.doc_index], -jnp.inf)
        _, top = jax.lax.top_k(masked, min(k, width))
        shown = jnp.take_along_axis(bucket.valid, top, axis=1)
        top_labels = jnp.where(shown, labels[jnp.take_along_axis(bucket.doc_index, top, axis=1)], 0)
        top_labels = jnp.pad(top_labels, ((0, 0), (0, k - top_labels.shape[1])))
        shown = jnp.pad(shown, ((0, 0), (0, k - shown.shape[1])))
        ndcg = ndcg.at[bucket.query_index].set(
            ndcg_of_list(top_labels, shown, ideal[bucket.query_index])
        )
        relevant = top_labels > 0
        first = jnp.argmax(relevant, axis=1)
        rr = rr.at[bucket.query_index].set(
            jnp.where(jnp.any(relevant, axis=1), 1.0 / (first + 1.0), 0.0)
        )
    return ndcg, rr
