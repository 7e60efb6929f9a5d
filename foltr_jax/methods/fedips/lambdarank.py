"""Full-information linear LambdaRank for FedIPS (FedIPS paper §4): the logging policy f₀,
trained on a small share of the training queries, and the λLinear baseline, trained on all
of them; and the offline NDCG@5 and NDCG@10 FedIPS reports for a linear ranker."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from foltr_jax import engine
from foltr_jax.core import metrics, rankers
from foltr_jax.data import RankingDataset
from foltr_jax.engine.lists import window_widths


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
    total: jax.Array | float = 0.0
    n_queries: jax.Array | float = 0.0
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


class LambdaRankConfig(NamedTuple):
    """What ``engine.run`` reads of a LambdaRank run: one slot, ``rounds`` full-batch steps."""

    rounds: int  # gradient steps
    chunk_rounds: int
    seed: int = 0
    n_runs: int = 1
    eval_every: int = 1


class _Consts(NamedTuple):
    batches: tuple  # RankBatch per query length
    test: TestData | None
    learning_rate: jax.Array  # float32 scalar


class Metrics(NamedTuple):
    offline_ndcg5: jax.Array  # [1]
    offline_ndcg10: jax.Array


@dataclasses.dataclass(frozen=True)
class FullBatch:
    """Linear LambdaRank as ``engine.run`` takes it (``engine.Method``): one run slot from
    zero weights, each round one full-batch gradient step on every query, and the test
    split's NDCG@5 and NDCG@10 after it when there is a test split."""

    config: LambdaRankConfig
    n_features: int
    with_test: bool

    @property
    def offline(self) -> tuple:
        return Metrics._fields if self.with_test else ()

    def repetitions(self) -> np.ndarray:
        return np.zeros(1, np.int64)

    def init(self, consts: _Consts, init_keys):
        params = rankers.LinearRanker(self.n_features).init(None)
        return consts, jax.tree_util.tree_map(lambda x: jnp.asarray(x)[None], params)

    def evaluate(self, consts: _Consts, state):
        if not self.with_test or consts.test is None:
            return ()
        one = jax.tree_util.tree_map(lambda x: x[0], state)
        return tuple(m[None] for m in evaluate(one, consts.test))

    def round(self, consts: _Consts, state, train_keys, t, evaluate_now):
        params = jax.tree_util.tree_map(lambda x: x[0], state)
        grad = jax.grad(lambdarank_loss)(params, consts.batches)
        params = jax.tree_util.tree_map(lambda a, b: a - consts.learning_rate * b, params, grad)
        state = jax.tree_util.tree_map(lambda x: x[None], params)
        if not self.with_test:
            return state, {}
        return state, Metrics(
            *engine.offline_when(lambda s: self.evaluate(consts, s), state, evaluate_now)
        )

    def finish(self, consts: _Consts, state, curves):
        return jax.device_get(jax.tree_util.tree_map(lambda x: x[0], state)), {}, 0


def train_lambdarank(
    dataset: RankingDataset,
    learning_rate: float,
    steps: int,
    test: TestData | None = None,
    progress=None,
):
    """Full-batch gradient descent on :func:`lambdarank_loss` from zero weights
    (``engine.run`` of ``FullBatch``, all steps in one chunk).

    Returns (params, curve) where curve is (NDCG@5 [steps], NDCG@10 [steps]) on ``test`` after
    every step, or None without ``test``.
    """
    if steps == 0:
        return rankers.LinearRanker(dataset.n_features).init(None), None
    result = lambdarank_run(dataset, learning_rate, steps, test, progress)
    if test is None:
        return result.final_params, None
    return result.final_params, (result.offline_ndcg5[0], result.offline_ndcg10[0])


def lambdarank_run(
    dataset: RankingDataset,
    learning_rate: float,
    steps: int,
    test: TestData | None = None,
    progress=None,
) -> engine.RunResult:
    """``train_lambdarank``'s ``engine.run`` of ``FullBatch`` (``steps`` ≥ 1), whole: the
    final params, the curves on ``test`` and the compile and run seconds apart."""
    method = FullBatch(LambdaRankConfig(steps, steps), dataset.n_features, test is not None)
    consts = _Consts(rank_batches(dataset), test, jnp.float32(learning_rate))
    return engine.run(method, consts, progress)


def logging_queries(n_queries: int, fraction: float, seed: int) -> np.ndarray:
    """The ``fraction`` of training queries f₀ is trained on (at least one), drawn from ``seed``."""
    n = min(max(1, round(fraction * n_queries)), n_queries)
    return np.sort(np.random.default_rng(seed).choice(n_queries, n, replace=False))


_VALIDATION = 0x56414C  # the validation queries' stream beside f₀'s (seed, _VALIDATION)


def validation_queries(n_queries: int, fraction: float, seed: int, exclude) -> np.ndarray:
    """The ``fraction`` of the ``n_queries`` training queries held out to choose learning
    rates on (at least one), drawn from ``seed`` among the queries not in ``exclude`` (f₀'s,
    so f₀ is the same with and without the hold-out); at least one query is left to train on.
    Raises ValueError when no query can be held out."""
    pool = np.setdiff1d(np.arange(n_queries), np.asarray(exclude, np.int64))
    n = min(max(1, round(fraction * n_queries)), len(pool) - 1)
    if n < 1:
        raise ValueError(
            f"no training query can be held out for validation: {n_queries} queries, "
            f"{n_queries - len(pool)} of them f₀'s"
        )
    rng = np.random.default_rng([seed, _VALIDATION])
    return np.sort(rng.choice(pool, n, replace=False))
