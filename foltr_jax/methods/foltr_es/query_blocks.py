"""FOLtR-ES's lanes scored in blocks of one query: a round's lanes are grouped by their
query and each group cut into blocks of ``size`` lanes, so that a block's lanes share
one candidate window and their perturbed rankers score it together
(``Ranker.apply_lanes``: one product for the block where ``lax.map`` made one a lane).

Every lane is scored with its own model exactly as it is alone (the ranker's
``apply_lanes`` promises that), so the blocks change the work's shape, not a number.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from foltr_jax.engine import lists


class Blocks(NamedTuple):
    """Lanes grouped by query, ``size`` to a block (int32 each)."""

    query: jax.Array  # [n_blocks] the block's query (n_queries: an empty block)
    lanes: jax.Array  # [n_blocks, size] its lanes (n_lanes: an empty slot)
    position: jax.Array  # [n_lanes] where lane i is in ``lanes`` (flat index)


def max_blocks(n_lanes: int, n_queries: int, size: int) -> int:
    """The most blocks ``n_lanes`` lanes over ``n_queries`` queries need: each query's
    lanes fill whole blocks but its last."""
    return min(n_lanes, -(-(n_lanes + min(n_queries, n_lanes) * (size - 1)) // size))


def query_blocks(queries: jax.Array, n_queries: int, size: int) -> Blocks:
    """``Blocks`` of the lanes whose queries are ``queries`` (int [n_lanes]): the lanes of
    each query in lane order, the queries in index order, empty blocks at the end."""
    n_lanes = queries.shape[0]
    n_blocks = max_blocks(n_lanes, n_queries, size)
    order = jnp.argsort(queries, stable=True).astype(jnp.int32)  # lanes by query
    counts = jnp.bincount(queries, length=n_queries)
    first_lane = jnp.cumsum(counts) - counts  # each query's first place in ``order``
    per_query = -(-counts // size)
    first_block = jnp.cumsum(per_query) - per_query
    block = jnp.arange(n_blocks)
    # The query of block b: the last query whose first block is at or before b.
    query = (jnp.searchsorted(first_block + per_query, block, side="right")).astype(jnp.int32)
    used = query < n_queries
    q = jnp.minimum(query, n_queries - 1)
    rank = (block - first_block[q])[:, None] * size + jnp.arange(size)[None, :]  # in query
    filled = used[:, None] & (rank < counts[q][:, None])
    place = jnp.where(filled, first_lane[q][:, None] + rank, 0)
    lanes = jnp.where(filled, order[place], n_lanes).astype(jnp.int32)
    # Lane order[j] is the j-th lane by query: its block and slot from its rank in its query.
    sorted_query = queries[order]
    in_query = jnp.arange(n_lanes) - first_lane[sorted_query]
    slot = (first_block[sorted_query] + in_query // size) * size + in_query % size
    position = jnp.zeros(n_lanes, jnp.int32).at[order].set(slot.astype(jnp.int32))
    return Blocks(jnp.where(used, query, n_queries).astype(jnp.int32), lanes, position)


def score_blocks(scoring: lists.Scoring, data, blocks: Blocks, params_of, finish):
    """``finish(width, scores [size, width], length)`` of every block (one output row
    per slot, [n_blocks, size, ...]), the block's models ``params_of(lanes)`` (leaves
    [size, ...]; an empty slot's lane is out of range) scoring its query's window at the
    narrowest width that holds it (``lists.at_narrowest_width``), one block after
    another (``lax.map``).  An empty block is scored as the narrowest width."""
    ranker = scoring.ranker
    n_queries = data.query_offsets.shape[0]

    def at_width(width, params, query):
        start = data.query_offsets[query]
        window = jax.lax.dynamic_slice_in_dim(data.features, start, width, axis=0)
        return finish(width, ranker.apply_lanes(params, window), data.query_lengths[query])

    def one(args):
        query, lanes = args
        used = query < n_queries
        query = jnp.minimum(query, n_queries - 1)
        length = jnp.where(used, data.query_lengths[query], 0)
        return lists.at_narrowest_width(scoring.widths, length, at_width, params_of(lanes), query)

    return jax.lax.map(one, (blocks.query, blocks.lanes))
