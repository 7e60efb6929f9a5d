"""The list helpers every method shares: a dataset's device arrays (``Lists``: both splits
and the users' click model), sampling a query and its candidates (``draw_query``), ranking
them (``by_score``), showing a list to a user (``display``: clicks and nDCG@k), scoring
candidate windows at the narrowest width that holds a query (``Scoring``) and the quality
of a ranking of the test split (nDCG@k and MRR@k, FPDGD paper §4).

FPDGD's lanes, FOLtR-ES's perturbed rankers, FedIPS's users and a method written outside
the package (examples/federated_dbgd.py) read and score their lists with these.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from foltr_jax.core import click_models, metrics
from foltr_jax.core.rankers import Ranker
from foltr_jax.data import RankingDataset


class DeviceData(NamedTuple):
    """A dataset as flat device arrays; ``features``/``labels`` carry ``window``
    zero rows of padding at the end so every query's window slice is in range."""

    features: jax.Array  # float32 [n_docs + window, n_features]
    labels: jax.Array  # int32 [n_docs + window]
    query_offsets: jax.Array  # int32 [n_queries]
    query_lengths: jax.Array  # int32 [n_queries]
    ideal_dcg: jax.Array  # float32 [n_queries], DCG@k of the ideal list
    eval_buckets: tuple  # metrics.LengthBucket per width (test split only), for ranking queries


def to_device(dataset: RankingDataset, window: int, k: int, ranked: bool = False) -> DeviceData:
    """Flat device arrays; ``ranked`` adds the length buckets offline evaluation ranks by."""
    pad = ((0, window), (0, 0))
    return DeviceData(
        features=jnp.asarray(np.pad(dataset.features, pad), jnp.float32),
        labels=jnp.asarray(np.pad(dataset.labels, (0, window)), jnp.int32),
        query_offsets=jnp.asarray(dataset.query_offsets, jnp.int32),
        query_lengths=jnp.asarray(dataset.query_lengths, jnp.int32),
        ideal_dcg=jnp.asarray(
            metrics.ideal_dcg(dataset.labels, dataset.query_offsets, dataset.query_lengths, k)
        ),
        eval_buckets=metrics.length_buckets(
            dataset.query_offsets,
            dataset.query_lengths,
            window_widths(dataset.max_query_length, k),
        )
        if ranked
        else (),
    )


class Lists(NamedTuple):
    """A method's device data on LETOR lists: the training split its users query, the test
    split its models are evaluated on (ranked: ``to_device``) and its users' click model."""

    train: DeviceData
    test: DeviceData
    clicks: click_models.ClickModel


def on_device(train: RankingDataset, test: RankingDataset, window: int, k: int, clicks: str):
    """``Lists`` of the two splits (``window`` rows of padding, nDCG@``k``) and the click
    model named ``clicks`` (five relevance grades)."""
    click_model = click_models.by_name(clicks, 5)
    return Lists(to_device(train, window, k), to_device(test, window, k, ranked=True), click_model)


def sample_query(key, data: DeviceData):
    """A query drawn uniformly from the client's queries: (index, first row, length)."""
    query = jax.random.randint(key, (), 0, data.query_offsets.shape[0])
    return query, data.query_offsets[query], data.query_lengths[query]


class Query(NamedTuple):
    """A query and its candidates, as ``draw_query`` gives them."""

    id: jax.Array  # int: the query (its index in the split)
    features: jax.Array  # float [window, n_features]: its candidates' (then padding rows)
    labels: jax.Array  # int [window]
    valid: jax.Array  # bool [window]: the query's own candidates


def draw_query(key, data: DeviceData, window: int) -> Query:
    """A query drawn uniformly (``sample_query``) with the ``window`` rows from its first
    candidate (``window``: the longest query, at least k)."""
    query, start, length = sample_query(key, data)
    rows = lambda x: jax.lax.dynamic_slice_in_dim(x, start, window, axis=0)
    return Query(query, rows(data.features), rows(data.labels), jnp.arange(window) < length)


def by_score(scores, valid):
    """int [window]: the candidates by descending score (ties: the lower position first),
    the query's own (``valid``) before the padding."""
    return jnp.argsort(jnp.where(valid, -scores, jnp.inf), stable=True)


def display(key, data: DeviceData, click_model, query: Query, shown):
    """A user sees the candidates ``shown`` (int [k], best first; rows past the query's
    end show nothing) of ``query``: (its clicks bool [k], the list's nDCG@k)."""
    visible = query.valid[shown]
    labels = jnp.where(visible, query.labels[shown], 0)
    clicks = click_models.simulate_clicks(key, click_model, labels, visible)
    return clicks, metrics.ndcg_of_list(labels, visible, data.ideal_dcg[query.id])


def window_widths(max_length: int, k: int) -> tuple:
    """Scoring widths: a ladder growing by ~1.5x from 16 up to the longest query.

    Each client scores its query's candidates at the narrowest width that holds
    them, so scoring cost follows the query's length, not the longest query's.
    """
    longest = max(int(max_length), k)
    widths, width = [], max(16, k)
    while width < longest:
        widths.append(width)
        width = -(-int(width * 1.5) // 8) * 8
    return tuple(widths) + (longest,)


def at_narrowest_width(widths: tuple, length, fn, *args):
    """``fn(width, *args)`` at the narrowest of ``widths`` that holds ``length`` (a traced
    query length): one ``lax.switch`` branch per width, so the work of scoring a window
    follows the query's own length, not the longest query's.  Every method that scores
    candidate windows (FPDGD, FOLtR-ES, FedIPS) picks its width here.  The branch is found
    by comparing with every width at once ('compare_all': one fused operation; the default
    binary search is a loop of its own inside every lane's step, ~1.5 µs a lane on a CPU)."""
    branches = [functools.partial(fn, width) for width in widths]
    index = jnp.searchsorted(jnp.asarray(widths), length, method="compare_all")
    return jax.lax.switch(index, branches, *args)


@dataclasses.dataclass(frozen=True)
class Scoring:
    """How a method scores candidate windows (static, hashable): the ranker, the window
    (the longest training query, at least top-k), the scoring widths (``window_widths``),
    the displayed list's length and how lanes are scored: ``'map'`` walks the lanes one
    after another (``lax.map``: XLA:CPU turns a vmapped ``dynamic_slice`` into a slow
    general gather), each at the narrowest width that holds its query; ``'vmap'`` (for
    accelerators) scores every lane batched at full width."""

    ranker: Ranker
    window: int
    widths: tuple
    top_k: int
    window_scoring: str = "map"

    def window_scores(self, params, data, query, width: int):
        """float [width]: the ranker's scores of the ``width`` rows from ``query``'s first
        candidate in ``data`` (flat ``features``, ``query_offsets``; rows past the query's
        end are its neighbours' or padding)."""
        start = data.query_offsets[query]
        window = jax.lax.dynamic_slice_in_dim(data.features, start, width, axis=0)
        return self.ranker.apply(params, window)

    def score_lanes(self, data, lane_args, queries, finish, params_of=None):
        """``finish(width, scores [width], length)`` of every lane's query window, scored
        with the lane's params ``params_of(lane_args)`` (default: ``lane_args`` are the
        params) as ``window_scoring`` says; ``finish`` gives every width one shape."""
        params_of = params_of or (lambda args: args)

        def at_width(width, params, query):
            scores = self.window_scores(params, data, query, width)
            return finish(width, scores, data.query_lengths[query])

        if self.window_scoring == "vmap":
            return jax.vmap(lambda args, query: at_width(self.window, params_of(args), query))(
                lane_args, queries
            )

        def one(args):
            args, query = args
            length = data.query_lengths[query]
            return at_narrowest_width(self.widths, length, at_width, params_of(args), query)

        return jax.lax.map(one, (lane_args, queries))


def ranking_quality(scores, test: DeviceData, k: int):
    """Mean nDCG@k and MRR@k of ranking ``test`` by ``scores`` (float [n_docs + pad]),
    over the queries with a relevant document (FPDGD paper §4)."""
    ndcg, rr = metrics.per_query_rank_metrics(
        scores, test.labels, test.ideal_dcg, test.eval_buckets, k
    )
    relevant = test.ideal_dcg > 0
    n_relevant = jnp.maximum(jnp.sum(relevant), 1)
    return (
        jnp.sum(jnp.where(relevant, ndcg, 0.0)) / n_relevant,
        jnp.sum(jnp.where(relevant, rr, 0.0)) / n_relevant,
    )
