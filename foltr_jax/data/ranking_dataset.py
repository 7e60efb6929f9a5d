"""The flat learning-to-rank dataset and its per-query feature normalisation.

A dataset is stored *flat*: all documents of all queries are rows of a single
``[n_docs, n_features]`` float32 matrix, queries occupy contiguous row ranges
described by ``query_offsets`` / ``query_lengths``.  Nothing is padded to the
longest query.  Everything here is plain numpy; the arrays are meant to be
handed to JAX code later.  Readers and generators of datasets are in
:mod:`foltr_jax.data`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["LABEL_LIMIT", "RankingDataset", "normalise_per_query"]

# The largest relevance grade a dataset may hold: the gain 2^rel - 1 of nDCG must stay
# finite in float32 (2^128 is not); the LETOR reader refuses the same (letor.MAX_LABEL).
LABEL_LIMIT = 31

# Rows per step in normalise_per_query (bounds the float64 temporaries).
_NORMALISE_BLOCK_ROWS = 1 << 15


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class RankingDataset:
    """A flat learning-to-rank dataset.

    Attributes:
      features: float32 ``[n_docs, n_features]``, finite; the rows of query ``i`` are
        ``features[query_offsets[i]:query_offsets[i] + query_lengths[i]]``.
      labels: int32 ``[n_docs]`` relevance grades (0 .. LABEL_LIMIT).
      query_offsets: int32 ``[n_queries]`` first row of every query; queries
        are packed back to back in order (``offsets[0] == 0``,
        ``offsets[i + 1] == offsets[i] + lengths[i]``).
      query_lengths: int32 ``[n_queries]`` documents per query (>= 1).
      query_ids: unicode ``[n_queries]`` query id strings.
      name: free-form label used in logs.

    Equality is identity (``eq=False``): comparing numpy arrays field by field
    has no single truth value.
    """

    features: np.ndarray
    labels: np.ndarray
    query_offsets: np.ndarray
    query_lengths: np.ndarray
    query_ids: np.ndarray
    name: str = ""

    def __post_init__(self) -> None:
        def coerce(field: str, dtype) -> np.ndarray:
            with np.errstate(over="ignore"):  # beyond float32: infinity, refused below
                value = np.asarray(getattr(self, field), dtype=dtype)
            object.__setattr__(self, field, value)
            return value

        features = coerce("features", np.float32)
        _check_labels(np.asarray(self.labels))  # before int32: 2.9 is not 2, 2^32 is not 0
        labels = coerce("labels", np.int32)
        offsets = coerce("query_offsets", np.int32)
        lengths = coerce("query_lengths", np.int32)
        qids = coerce("query_ids", np.str_)
        if features.ndim != 2:
            raise ValueError(f"features must be 2-D, got shape {features.shape}")
        n_docs = features.shape[0]
        if labels.shape != (n_docs,):
            raise ValueError(f"labels shape {labels.shape} != ({n_docs},)")
        n_queries = lengths.shape[0] if lengths.ndim == 1 else -1
        for field, arr in (
            ("query_offsets", offsets),
            ("query_lengths", lengths),
            ("query_ids", qids),
        ):
            if arr.ndim != 1 or arr.shape[0] != n_queries:
                raise ValueError(
                    f"{field} must be 1-D with one entry per query; "
                    f"got shape {arr.shape}, query_lengths {lengths.shape}"
                )
        if n_queries and lengths.min() < 1:
            raise ValueError("every query needs at least one document")
        if int(lengths.sum(dtype=np.int64)) != n_docs:
            raise ValueError(
                f"query_lengths sum to {int(lengths.sum(dtype=np.int64))}, "
                f"but there are {n_docs} documents"
            )
        expected = np.cumsum(lengths, dtype=np.int64) - lengths
        if not np.array_equal(offsets, expected):
            raise ValueError(
                "query_offsets must pack the queries back to back "
                "(offsets == cumsum(lengths) - lengths)"
            )
        if n_docs and labels.min() < 0:
            raise ValueError("labels must be >= 0")
        if n_docs and labels.max() > LABEL_LIMIT:
            raise ValueError(
                f"labels must be at most {LABEL_LIMIT} (nDCG's gain 2^rel - 1 must stay finite), "
                f"got {labels.max()}"
            )
        if features.size and not np.isfinite(features).all():
            row = int(np.argwhere(~np.isfinite(features))[0][0])
            raise ValueError(f"features must be finite, got a NaN or infinity in row {row}")

    # -- properties --------------------------------------------------------

    @property
    def n_docs(self) -> int:
        return int(self.features.shape[0])

    @property
    def n_queries(self) -> int:
        return int(self.query_lengths.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.features.shape[1])

    @property
    def max_query_length(self) -> int:
        """Length of the longest query (0 for an empty dataset)."""
        return int(self.query_lengths.max()) if self.n_queries else 0

    @property
    def max_label(self) -> int:
        """Largest relevance grade present (0 for an empty dataset)."""
        return int(self.labels.max()) if self.n_docs else 0

    # -- methods -----------------------------------------------------------

    def subset(self, query_indices) -> RankingDataset:
        """A new dataset holding the given queries, in the given order, re-packed.

        ``query_indices`` is a sequence of query positions (negative values
        count from the end, as in numpy; repeats are allowed and copy the
        query) or a boolean mask of length ``n_queries``.
        """
        idx = np.asarray(query_indices)
        if idx.dtype == np.bool_:
            if idx.shape != (self.n_queries,):
                raise IndexError(
                    f"boolean mask has shape {idx.shape}, expected ({self.n_queries},)"
                )
            idx = np.flatnonzero(idx)
        elif idx.size == 0:
            idx = np.zeros(0, dtype=np.int64)
        elif not np.issubdtype(idx.dtype, np.integer):
            raise TypeError(
                f"query_indices must be integers or a boolean mask, got dtype {idx.dtype}"
            )
        idx = idx.reshape(-1).astype(np.int64)
        if idx.size and (idx.min() < -self.n_queries or idx.max() >= self.n_queries):
            raise IndexError(f"query index out of range for {self.n_queries} queries")
        idx = np.where(idx < 0, idx + self.n_queries, idx)
        lengths = self.query_lengths[idx].astype(np.int64)
        new_offsets = np.cumsum(lengths) - lengths
        rows = np.repeat(
            self.query_offsets[idx].astype(np.int64) - new_offsets, lengths
        ) + np.arange(int(lengths.sum()))
        return RankingDataset(
            features=self.features[rows],
            labels=self.labels[rows],
            query_offsets=new_offsets.astype(np.int32),
            query_lengths=lengths.astype(np.int32),
            query_ids=self.query_ids[idx],
            name=self.name,
        )

    def __repr__(self) -> str:
        return (
            f"RankingDataset(name={self.name!r}, n_queries={self.n_queries}, "
            f"n_docs={self.n_docs}, n_features={self.n_features}, "
            f"max_query_length={self.max_query_length}, max_label={self.max_label})"
        )


# --------------------------------------------------------------------------
# Normalisation
# --------------------------------------------------------------------------


def normalise_per_query(features, query_offsets, query_lengths) -> np.ndarray:
    """Min-max normalise every feature within every query to ``[0, 1]``.

    ``x' = (x - min_q) / (max_q - min_q)`` per query ``q`` and feature; a
    feature that is constant within a query (including every feature of a
    one-document query) becomes 0.  This is the query-level normalisation used
    by the public code of the federated OLTR papers.  Queries must be packed
    back to back (the :class:`RankingDataset` layout).  Returns a new float32
    array; the input is not modified.  Arithmetic is done in float64 in blocks
    of queries, so memory overhead stays bounded for large datasets.
    """
    x = np.asarray(features)
    return normalise_into(x, query_offsets, query_lengths, np.empty(x.shape, dtype=np.float32))


def normalise_into(x: np.ndarray, query_offsets, query_lengths, out: np.ndarray) -> np.ndarray:
    """normalise_per_query writing into ``out`` (which may be ``x`` itself)."""
    if x.ndim != 2:
        raise ValueError(f"features must be 2-D, got shape {x.shape}")
    offsets = np.asarray(query_offsets, dtype=np.int64).reshape(-1)
    lengths = np.asarray(query_lengths, dtype=np.int64).reshape(-1)
    if offsets.shape != lengths.shape:
        raise ValueError("query_offsets and query_lengths differ in length")
    if lengths.size and lengths.min() < 1:
        raise ValueError("every query needs at least one document")
    ends = np.cumsum(lengths)
    if (
        not np.array_equal(offsets, ends - lengths)
        or (int(ends[-1]) if ends.size else 0) != x.shape[0]
    ):
        raise ValueError("queries must be packed back to back and cover all rows")

    n_queries = lengths.size
    q0 = 0
    while q0 < n_queries:
        start = int(offsets[q0])
        # Queries whose last row fits in this block (always at least one).
        q1 = int(np.searchsorted(ends, start + _NORMALISE_BLOCK_ROWS, side="right"))
        q1 = max(q1, q0 + 1)
        stop = int(ends[q1 - 1])
        block = x[start:stop].astype(np.float64)  # a copy, so out may alias x
        rel = offsets[q0:q1] - start
        lens = lengths[q0:q1]
        lo = np.minimum.reduceat(block, rel, axis=0)
        hi = np.maximum.reduceat(block, rel, axis=0)
        constant = hi == lo
        span = np.where(constant, 1.0, hi - lo)
        block -= np.repeat(lo, lens, axis=0)
        # Divide (rather than multiply by a reciprocal) so that the maximum
        # maps to exactly 1.0; constant features are zeroed afterwards.
        block /= np.repeat(span, lens, axis=0)
        block *= np.repeat(~constant, lens, axis=0)
        out[start:stop] = block
        q0 = q1
    return out


def _check_labels(labels: np.ndarray) -> None:
    """ValueError unless every label is an integer grade in 0 .. LABEL_LIMIT, as given
    (before the cast to int32, which would truncate 1.9 to 1 and wrap 2^32 to 0)."""
    if labels.dtype.kind not in "biuf":
        raise ValueError(f"labels must be integer grades, got dtype {labels.dtype}")
    if not labels.size:
        return
    if labels.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(labels) | (labels != np.floor(labels))
        if bad.any():
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(f"labels must be integer grades, got {labels[at]!r} at {list(at)}")
    low, high = labels.min(), labels.max()
    if low < 0:
        raise ValueError(f"labels must be >= 0, got {low}")
    if high > LABEL_LIMIT:
        raise ValueError(
            f"labels must be at most {LABEL_LIMIT} (nDCG's gain 2^rel - 1 must stay finite), "
            f"got {high}"
        )
