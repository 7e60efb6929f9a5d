"""Full-information linear LambdaRank for FedIPS (FedIPS paper §4): the logging policy f₀,
trained on a small share of the training queries, and the λLinear baseline, trained on all
of them; and the offline NDCG@5 and NDCG@10 FedIPS reports for a linear ranker."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from foltr_jax import metrics, rankers
from foltr_jax.data import RankingDataset
from foltr_jax.interaction import window_widths


class RankBatch(NamedTuple):
    """Queries padded to one width (for full-information training and evaluation)."""

    features: jax.Array  # float32 [n, width, F]
    labels: jax.Array  # int32 [n, width]
    valid: jax.Array  # bool [n, width]


def rank_batches(dataset: RankingDataset, k: int = 10) -> tuple:
    """The queries grouped by length (metrics.length_buckets), features gathered once."""
    widths = window_widths(dataset.max_query_length, k)
    batches = []
    for bucket in metrics.length_buckets(dataset.query_offsets, dataset.query_lengths, widths):
        index, valid = np.asarray(bucket.doc_index), np.asarray(bucket.valid)
        batches.append(
            RankBatch(
                jnp.asarray(np.where(valid[..., None], dataset.features[index], 0.0), jnp.float32),
                jnp.asarray(np.where(valid, dataset.labels[index], 0), jnp.int32),
                jnp.asarray(valid),
            )
        )
    return tuple(batches)


class TestData(NamedTuple):
    """The test split for offline NDCG@5 and NDCG@10."""

    features: jax.Array  # float32 [n_docs, F]
    labels: jax.Array  # int32 [n_docs]
    ideal5: jax.Array  # float32 [n_queries]
    ideal10: jax.Array
    buckets: tuple  # metrics.LengthBucket


def test_data(dataset: RankingDataset) -> TestData:
    args = (dataset.labels, dataset.query_offsets, dataset.query_lengths)
    return TestData(
        jnp.asarray(dataset.features, jnp.float32),
        jnp.asarray(dataset.labels, jnp.int32),
        jnp.asarray(metrics.ideal_dcg(*args, 5)),
        jnp.asarray(metrics.ideal_dcg(*args, 10)),
        metrics.length_buckets(
            dataset.query_offsets,
            dataset.query_lengths,
            window_widths(dataset.max_query_length, 10),
        ),
    )


def evaluate(params, test: TestData):
    """Offline (NDCG@5, NDCG@10) of a linear ranker, over test queries with a relevant doc."""
    return evaluate_scores(test.features @ params["w"], test)


def evaluate_scores(scores, test: TestData):
    """Offline (NDCG@5, NDCG@10) of ranking the test split by ``scores`` [n_docs], over test
    queries with a relevant doc."""
    relevant = test.ideal10 > 0
    n_relevant = jnp.maximum(jnp.sum(relevant), 1)
    out = []
    for k, ideal in ((5, test.ideal5), (10, test.ideal10)):
        ndcg, _ = metrics.per_query_rank_metrics(scores, test.labels, ideal, test.buckets, k)
        out.append(jnp.sum(jnp.where(relevant, ndcg, 0.0)) / n_relevant)
    return tuple(out)


def lambdarank_loss(params, batches: tuple):
    """LambdaRank (Burges 2010): Σ_{y_i > y_j} |ΔNDCG_ij| · log(1 + e^{−(s_i − s_j)}) per query,
    |ΔNDCG_ij| from the current ranking of the whole list (not truncated), averaged over the
    queries that have a pair."""
    total, n_queries = 0.0, 0.0
    for batch in batches:
        width = batch.valid.shape[1]
        scores = batch.features @ params["w"]
        masked = jnp.where(batch.valid, jax.lax.stop_gradient(scores), -jnp.inf)
        order = jnp.argsort(-masked, axis=1, stable=True)
        rank = jnp.argsort(order, axis=1)
        discount = 1.0 / jnp.log2(rank + 2.0)
        gain = jnp.where(batch.valid, metrics.gains(batch.labels.astype(jnp.float32)), 0.0)
        ideal = jnp.sum(-jnp.sort(-gain, axis=1) / jnp.log2(jnp.arange(width) + 2.0), axis=1)
        delta = jnp.abs(gain[:, :, None] - gain[:, None, :]) * jnp.abs(
            discount[:, :, None] - discount[:, None, :]
        )
        delta = delta / jnp.where(ideal > 0, ideal, 1.0)[:, None, None]
        pairs = (
            (batch.labels[:, :, None] > batch.labels[:, None, :])
            & batch.valid[:, :, None]
            & batch.valid[:, None, :]
        )
        pair_loss = jax.nn.softplus(-(scores[:, :, None] - scores[:, None, :]))
        total = total + jnp.sum(jnp.where(pairs, delta * pair_loss, 0.0))
        n_queries = n_queries + jnp.sum(jnp.any(pairs, axis=(1, 2)))
    return total / jnp.maximum(n_queries, 1.0)


@functools.partial(jax.jit, static_argnames=("steps", "with_curve"))
def _lambdarank_steps(params, batches, test, learning_rate, steps: int, with_curve: bool):
    grad = jax.grad(lambdarank_loss)

    def step(p, _):
        g = grad(p, batches)
        p = jax.tree_util.tree_map(lambda a, b: a - learning_rate * b, p, g)
        return p, (evaluate(p, test) if with_curve else None)

    return jax.lax.scan(step, params, None, length=steps)


def train_lambdarank(
    dataset: RankingDataset,
    learning_rate: float,
    steps: int,
    test: TestData | None = None,
):
    """Full-batch gradient descent on :func:`lambdarank_loss` from zero weights.

    Returns (params, curve) where curve is (NDCG@5 [steps], NDCG@10 [steps]) on ``test`` after
    every step, or None without ``test``.
    """
    params = rankers.LinearRanker(dataset.n_features).init(None)
    if steps == 0:
        return params, None
    params, curve = _lambdarank_steps(
        params, rank_batches(dataset), test, jnp.float32(learning_rate), steps, test is not None
    )
    return jax.device_get(params), (None if curve is None else jax.device_get(curve))


def logging_queries(n_queries: int, fraction: float, seed: int) -> np.ndarray:
    """The ``fraction`` of training queries f₀ is trained on (at least one), drawn from ``seed``."""
    n = min(max(1, round(fraction * n_queries)), n_queries)
    return np.sort(np.random.default_rng(seed).choice(n_queries, n, replace=False))
