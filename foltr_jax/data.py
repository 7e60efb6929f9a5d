"""Learning-to-rank datasets: LETOR/SVMlight reader, on-disk cache, synthetic data.

Everything here is plain numpy; the arrays are meant to be handed to JAX code
later.  A dataset is stored *flat*: all documents of all queries are rows of a
single ``[n_docs, n_features]`` float32 matrix, queries occupy contiguous row
ranges described by ``query_offsets`` / ``query_lengths``.  Nothing is padded to
the longest query.

File format (one document per line)::

    <label> qid:<query id> <id>:<value> <id>:<value> ...  # optional comment

* ``label`` is a non-negative integer relevance grade (0-4 for MSLR, 0-2 for
  MQ2007/MQ2008), at most :data:`MAX_LABEL`.
* feature ids are 1-based integers; lines may be sparse, missing features are 0.
* everything after ``#`` is ignored, blank lines are skipped.
* the lines of one query must form one contiguous block.
* a gzip-compressed file is read as it is; other compressed or binary files are
  refused, naming what they are.

The reader is strict: any malformed line raises :class:`LetorFormatError` whose
message starts with ``"<path>:<line>: "``.  Parsed (and optionally normalised)
arrays are cached as ``.npz`` files keyed by the SHA-256 of the source file, so
that re-reading a 1 GB MSLR fold is a fast ``np.load``; an entry is used only when it
proves it belongs to its source (stored hash and parse options, shapes, finite values,
label range), else the file is parsed again with a warning.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import math
import os
import pathlib
import re
import warnings
import zlib
from collections.abc import Iterator

import numpy as np

from foltr_jax import files

__all__ = [
    "CACHE_FORMAT_VERSION",
    "MAX_LABEL",
    "DatasetError",
    "LetorFormatError",
    "RankingDataset",
    "default_cache_dir",
    "load_fold",
    "normalise_per_query",
    "read_letor",
    "synthetic_dataset",
    "synthetic_train_test",
]

# Bump whenever the parser or the cached array layout changes in a way that
# changes the result: old cache entries then simply stop being found.
CACHE_FORMAT_VERSION = 1

# Feature ids above this are rejected when ``n_features`` is not given: a typo
# such as ``1000000000:0.3`` would otherwise make the reader allocate a dense
# matrix with a billion columns.  Real LETOR data sets have at most ~700.
MAX_FEATURE_ID = 100_000

# Labels above this are rejected: LETOR grades are small (at most 4 in MSLR, Yahoo and
# Istella), and the gain 2^rel - 1 of nDCG must stay finite in float32 (2^128 is not).
MAX_LABEL = 31

# What the first bytes of a file say it is, when it is not text.
_GZIP_MAGIC = b"\x1f\x8b"
_OTHER_FORMATS = {
    b"BZh": "bzip2-compressed",
    b"\xfd7zXZ\x00": "xz-compressed",
    b"\x28\xb5\x2f\xfd": "zstd-compressed",
    b"PK\x03\x04": "a zip archive",
    b"\x93NUMPY": "a numpy array file",
}
_SNIFF_BYTES = 4096

# Bytes read (and hashed) per step; every block is parsed as one chunk.
_READ_BLOCK_BYTES = 4 << 20
# Bytes per step when hashing a file for the cache key.
_HASH_BLOCK_BYTES = 1 << 20
# Rows per step in normalise_per_query (bounds the float64 temporaries).
_NORMALISE_BLOCK_ROWS = 1 << 15

_FLOAT32_MAX = float(np.finfo(np.float32).max)


class LetorFormatError(ValueError):
    """A malformed line in a LETOR file; message is ``"<path>:<line>: <what>"``."""


class DatasetError(ValueError):
    """Any other bad input (empty file, missing file); the message names the path."""


# --------------------------------------------------------------------------
# Dataset container
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class RankingDataset:
    """A flat learning-to-rank dataset.

    Attributes:
      features: float32 ``[n_docs, n_features]``; the rows of query ``i`` are
        ``features[query_offsets[i]:query_offsets[i] + query_lengths[i]]``.
      labels: int32 ``[n_docs]`` relevance grades (>= 0).
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
            value = np.asarray(getattr(self, field), dtype=dtype)
            object.__setattr__(self, field, value)
            return value

        features = coerce("features", np.float32)
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
    return _normalise_into(x, query_offsets, query_lengths, np.empty(x.shape, dtype=np.float32))


def _normalise_into(x: np.ndarray, query_offsets, query_lengths, out: np.ndarray) -> np.ndarray:
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


# --------------------------------------------------------------------------
# LETOR parser
# --------------------------------------------------------------------------

_INLINE_WS = r"[ \t\r\f\v]"
# Fast-path token: digits ':' then characters that can make up a decimal
# number.  Whether the value really is *one* number is checked by counting the
# numbers np.fromstring finds (each token must yield exactly two).
_FAST_LINE_RE = re.compile(
    rf"(?:{_INLINE_WS}*+[0-9]++:[-+.0-9eE]++(?={_INLINE_WS}|$))*+{_INLINE_WS}*+", re.ASCII
)
_WS_SPLIT_RE = re.compile(rf"{_INLINE_WS}+", re.ASCII)
_INT_RE = re.compile(r"[-+]?[0-9]+", re.ASCII)
_FLOAT_RE = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?", re.ASCII)


def _short(text: str, limit: int = 40) -> str:
    """repr() of a token for an error message, truncated, always one line."""
    r = repr(text)
    return r if len(r) <= limit else r[: limit - 4] + "...'"


class _Chunk:
    """Documents of one read block: headers already parsed, features pending."""

    __slots__ = ("labels", "line_nos", "rests")

    def __init__(self) -> None:
        self.rests: list[str] = []
        self.line_nos: list[int] = []
        self.labels: list[int] = []


def _parse_features_fast(rests: list[str]):
    """(ids float64, values float64, counts int64) or None if anything looks off."""
    if not all(map(_FAST_LINE_RE.fullmatch, rests)):
        return None
    counts = np.fromiter((r.count(":") for r in rests), dtype=np.int64, count=len(rests))
    total = int(counts.sum())
    if total == 0:
        empty = np.zeros(0, dtype=np.float64)
        return empty, empty, counts
    text = "\n".join(rests).replace(":", " ")
    try:
        with warnings.catch_warnings():
            # Older numpy warns (DeprecationWarning) and returns a short array
            # on unparsable data, newer numpy raises ValueError.
            warnings.simplefilter("error", DeprecationWarning)
            numbers = np.fromstring(text, dtype=np.float64, sep=" ")
    except (ValueError, DeprecationWarning):
        return None
    if numbers.size != 2 * total:
        return None
    return numbers[0::2], numbers[1::2], counts


def _parse_features_slow(
    rests: list[str], line_nos: list[int], path: str, max_id: int, max_id_msg: str
):
    """Token-by-token parse; raises LetorFormatError at the first bad token."""
    ids: list[int] = []
    vals: list[float] = []
    counts = np.zeros(len(rests), dtype=np.int64)
    for k, (rest, line_no) in enumerate(zip(rests, line_nos)):

        def fail(msg: str) -> None:
            raise LetorFormatError(f"{path}:{line_no}: {msg}")

        stripped = rest.strip(" \t\r\f\v")
        tokens = _WS_SPLIT_RE.split(stripped) if stripped else []
        seen: set[int] = set()
        for tok in tokens:
            id_s, colon, val_s = tok.partition(":")
            if not colon or not id_s or not val_s or ":" in val_s:
                fail(f"malformed feature token {_short(tok)} (expected <id>:<value>)")
            if not _INT_RE.fullmatch(id_s):
                fail(f"malformed feature id in token {_short(tok)}")
            fid = int(id_s)
            if fid < 1:
                fail(f"feature id {fid} < 1 in token {_short(tok)} (feature ids are 1-based)")
            if fid > max_id:
                fail(f"feature id {fid} {max_id_msg}")
            if fid in seen:
                fail(f"duplicate feature id {fid}")
            seen.add(fid)
            if not _FLOAT_RE.fullmatch(val_s):
                fail(f"non-numeric feature value in token {_short(tok)}")
            val = float(val_s)
            if not math.isfinite(val) or abs(val) > _FLOAT32_MAX:
                fail(f"feature value out of float32 range in token {_short(tok)}")
            ids.append(fid)
            vals.append(val)
        counts[k] = len(tokens)
    return (np.asarray(ids, dtype=np.float64), np.asarray(vals, dtype=np.float64), counts)


def _chunk_to_dense(chunk: _Chunk, path: str, n_features: int | None) -> np.ndarray:
    """Dense float32 [len(chunk), max id in chunk] matrix of the chunk's features."""
    if n_features is None:
        max_id, max_id_msg = MAX_FEATURE_ID, f"exceeds the supported maximum {MAX_FEATURE_ID}"
    else:
        max_id, max_id_msg = n_features, f"> n_features={n_features}"
    parsed = _parse_features_fast(chunk.rests)
    if parsed is not None:
        ids, vals, counts = parsed
        rows = np.repeat(np.arange(len(chunk.rests)), counts)
        same_row = rows[1:] == rows[:-1]
        suspicious = (
            (ids.size and (ids.min() < 1 or ids.max() > max_id))
            or not np.all(np.isfinite(vals))
            or (vals.size and np.abs(vals).max() > _FLOAT32_MAX)
            # Not strictly increasing within a line: maybe a duplicate id.
            # Unsorted but unique ids are legal; the slow path sorts that out.
            or np.any(same_row & (ids[1:] <= ids[:-1]))
        )
        if suspicious:
            parsed = None
    if parsed is None:
        ids, vals, counts = _parse_features_slow(
            chunk.rests, chunk.line_nos, path, max_id, max_id_msg
        )
        rows = np.repeat(np.arange(len(chunk.rests)), counts)
    width = int(ids.max()) if ids.size else 0
    dense = np.zeros((len(chunk.rests), width), dtype=np.float32)
    dense[rows, ids.astype(np.int64) - 1] = vals
    return dense


def _iter_blocks(fh) -> Iterator[str]:
    """Decoded text blocks of whole lines (each ends with a newline except maybe the last)."""
    leftover = b""
    while True:
        buf = fh.read(_READ_BLOCK_BYTES)
        if not buf:
            break
        buf = leftover + buf
        cut = buf.rfind(b"\n") + 1
        leftover = buf[cut:]
        if cut:
            # Blocks end at a newline, so no multi-byte character is split.
            yield buf[:cut].decode("utf-8", errors="replace")
    if leftover:
        yield leftover.decode("utf-8", errors="replace")


class _HashingReader:
    """A binary file whose bytes feed ``hasher`` as they are read."""

    def __init__(self, raw, hasher):
        self.raw, self.hasher = raw, hasher

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        self.hasher.update(data)
        return data


def _check_text(path: str, head: bytes) -> None:
    """DatasetError naming what the file is when its first bytes say it is not text
    (gzip is read, so it passes)."""
    for magic, what in _OTHER_FORMATS.items():
        if head.startswith(magic):
            raise DatasetError(f"{path}: {what}, not a LETOR text file (decompress it first)")
    if not head.startswith(_GZIP_MAGIC) and b"\0" in head:
        raise DatasetError(f"{path}: binary data, not a LETOR text file")


def _label_error(label: str) -> str:
    if _INT_RE.fullmatch(label) and int(label) < 0:
        return f"negative label {label}"
    if _FLOAT_RE.fullmatch(label):
        return f"label must be a non-negative integer, got {_short(label)}"
    return f"non-numeric label {_short(label)}"


def _parse_letor_file(path: pathlib.Path, n_features: int | None, hasher=None):
    """Parse a LETOR file into raw (unnormalised) arrays.

    Returns ``(features, labels, query_offsets, query_lengths, query_ids)``.
    If ``hasher`` is given it is fed every byte of the file.
    """
    spath = str(path)
    dense_chunks: list[np.ndarray] = []
    labels_all: list[int] = []
    qids: list[str] = []
    query_starts: list[int] = []  # document index where each query begins
    first_line_of: dict[str, int] = {}
    current_qid: str | None = None
    n_docs = 0
    line_no = 0

    with open(path, "rb") as raw:
        head = raw.read(_SNIFF_BYTES)
        raw.seek(0)
        _check_text(spath, head)
        fh = raw if hasher is None else _HashingReader(raw, hasher)
        if head.startswith(_GZIP_MAGIC):
            fh = gzip.GzipFile(filename=spath, fileobj=fh, mode="rb")
        for text in _iter_blocks(fh):
            lines = text.split("\n")
            if text.endswith("\n"):
                lines.pop()
            chunk = _Chunk()
            header_error: LetorFormatError | None = None
            for line in lines:
                line_no += 1
                hash_pos = line.find("#")
                if hash_pos >= 0:
                    line = line[:hash_pos]
                parts = line.split(None, 2)
                if not parts:
                    continue
                label_s = parts[0]
                if label_s.isdigit() and label_s.isascii():
                    label = int(label_s)
                    if label > MAX_LABEL:
                        header_error = LetorFormatError(
                            f"{spath}:{line_no}: label {_short(label_s)} is above {MAX_LABEL}, "
                            f"the largest grade read (the gain 2^rel - 1 would overflow)"
                        )
                        break
                else:
                    header_error = LetorFormatError(f"{spath}:{line_no}: {_label_error(label_s)}")
                    break
                if len(parts) < 2 or not parts[1].startswith("qid:"):
                    found = _short(parts[1]) if len(parts) > 1 else "end of line"
                    header_error = LetorFormatError(
                        f"{spath}:{line_no}: missing 'qid:' token after the label (found {found})"
                    )
                    break
                qid = parts[1][4:]
                if not qid:
                    header_error = LetorFormatError(f"{spath}:{line_no}: empty query id in 'qid:'")
                    break
                if qid != current_qid:
                    began = first_line_of.get(qid)
                    if began is not None:
                        header_error = LetorFormatError(
                            f"{spath}:{line_no}: query {_short(qid)} reappears here but its "
                            f"block began at line {began} and other queries came in between "
                            f"(the lines of a query must be contiguous)"
                        )
                        break
                    first_line_of[qid] = line_no
                    qids.append(qid)
                    query_starts.append(n_docs + len(chunk.labels))
                    current_qid = qid
                chunk.labels.append(label)
                chunk.rests.append(parts[2] if len(parts) > 2 else "")
                chunk.line_nos.append(line_no)
            if chunk.labels:
                # Parse the features before raising a header error, so that an
                # earlier bad line in this chunk is the one reported.
                dense_chunks.append(_chunk_to_dense(chunk, spath, n_features))
                labels_all.extend(chunk.labels)
                n_docs += len(chunk.labels)
            if header_error is not None:
                raise header_error

    if n_docs == 0:
        raise DatasetError(f"{spath}: no documents (empty file, or only comments/blank lines)")

    width = n_features if n_features is not None else max(c.shape[1] for c in dense_chunks)
    if len(dense_chunks) == 1 and dense_chunks[0].shape[1] == width:
        features = dense_chunks.pop()
    else:
        features = np.zeros((n_docs, width), dtype=np.float32)
    row = 0
    while dense_chunks:
        c = dense_chunks.pop(0)  # release chunks as they are copied
        features[row : row + c.shape[0], : c.shape[1]] = c
        row += c.shape[0]
    labels = np.asarray(labels_all, dtype=np.int32)
    starts = np.asarray(query_starts, dtype=np.int64)
    lengths = np.diff(np.append(starts, n_docs))
    return (
        features,
        labels,
        starts.astype(np.int32),
        lengths.astype(np.int32),
        np.asarray(qids, dtype=np.str_),
    )


# --------------------------------------------------------------------------
# Cache
# --------------------------------------------------------------------------


def default_cache_dir() -> pathlib.Path:
    """``$FOLTR_JAX_CACHE`` if set (and non-empty), else ``~/.cache/foltr_jax``."""
    env = os.environ.get("FOLTR_JAX_CACHE")
    if env:
        return pathlib.Path(env).expanduser()
    return pathlib.Path.home() / ".cache" / "foltr_jax"


def _sha256_file(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while True:
            block = fh.read(_HASH_BLOCK_BYTES)
            if not block:
                break
            h.update(block)
    return h.hexdigest()


def _cache_file_name(digest: str, normalise: bool, n_features: int | None) -> str:
    nf = "auto" if n_features is None else str(n_features)
    return f"letor-{digest}-norm{int(normalise)}-nf{nf}-v{CACHE_FORMAT_VERSION}.npz"


_CACHE_KEYS = ("features", "labels", "query_offsets", "query_lengths", "query_ids")


def _load_cache(cache_path: pathlib.Path, name: str, source: dict) -> RankingDataset | None:
    """The cached dataset when the entry proves it was made from ``source`` (the file's
    SHA-256 and the parse options, as ``read_letor`` stores them) and holds sound arrays;
    else None, with a warning if a file was there."""
    if not cache_path.exists():
        return None
    try:
        with np.load(cache_path, allow_pickle=False) as z:
            stored = {k: z[k] for k in (*_CACHE_KEYS, *source)}
        if int(stored["format_version"]) != CACHE_FORMAT_VERSION:
            raise ValueError("format version mismatch")
        if str(stored["source_sha256"]) != source["source_sha256"]:
            raise ValueError("it was made from other data")
        for option in ("normalise", "n_features"):
            if stored[option].item() != source[option].item():
                raise ValueError(f"it was made with {option}={stored[option].item()}")
        features, labels = stored["features"], stored["labels"]
        if features.dtype != np.float32 or features.ndim != 2:
            raise ValueError(f"features of dtype {features.dtype}, shape {features.shape}")
        if source["n_features"] > 0 and features.shape[1] != source["n_features"]:
            raise ValueError(f"{features.shape[1]} feature columns, not {source['n_features']}")
        if labels.dtype != np.int32 or (
            labels.size and not 0 <= labels.min() <= labels.max() <= MAX_LABEL
        ):
            raise ValueError(f"labels outside 0..{MAX_LABEL}")
        if not np.isfinite(features).all():
            raise ValueError("non-finite features")
        if source["normalise"] and features.size and not 0 <= features.min() <= features.max() <= 1:
            raise ValueError("normalised features outside [0, 1]")
        return RankingDataset(**{k: stored[k] for k in _CACHE_KEYS}, name=name)
    except Exception as exc:  # corrupt / truncated / foreign file: re-parse
        warnings.warn(
            f"ignoring unusable cache file {cache_path}: {exc}; parsing the file again",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


def _write_cache(cache_path: pathlib.Path, arrays: dict) -> bool:
    """Atomically write ``arrays`` to ``cache_path``; warn and return False on OSError.

    The data go to a temporary file in the same directory which is renamed
    over ``cache_path`` only once complete, so readers never see a partial
    file; on any error the temporary file is removed.
    """
    try:
        cache_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        warnings.warn(
            f"cache directory {cache_path.parent} is not writable ({exc}); "
            "continuing without caching",
            RuntimeWarning,
            stacklevel=3,
        )
        return False
    try:
        files.write_atomically(cache_path, lambda stream: np.savez(stream, **arrays))
    except OSError as exc:
        warnings.warn(
            f"could not write cache file {cache_path} ({exc}); continuing without caching",
            RuntimeWarning,
            stacklevel=3,
        )
        return False
    return True


# --------------------------------------------------------------------------
# Public readers
# --------------------------------------------------------------------------


# What reading a file may raise: unreadable, or a broken gzip stream.
READ_ERRORS = (OSError, EOFError, zlib.error)


def read_error(path, error: BaseException) -> DatasetError:
    """DatasetError ``"<path>: cannot read it (<reason>)"`` for one of READ_ERRORS."""
    reason = getattr(error, "strerror", None) or str(error) or type(error).__name__
    return DatasetError(f"{path}: cannot read it ({reason})")


def check_file(path) -> pathlib.Path:
    """``path`` when it is a regular file, else DatasetError saying what it is."""
    path = pathlib.Path(path)
    if not path.exists():
        raise DatasetError(f"{path}: no such file")
    if path.is_dir():
        raise DatasetError(f"{path}: a folder, not a data file")
    if not path.is_file():
        raise DatasetError(f"{path}: not a regular file")
    return path


def open_text(path):
    """A text stream of a data file (gzip read as it is); DatasetError naming the file
    when it is missing, a folder, unreadable, otherwise compressed or binary."""
    path = check_file(path)
    try:
        with open(path, "rb") as raw:
            head = raw.read(_SNIFF_BYTES)
    except READ_ERRORS as error:
        raise read_error(path, error) from None
    _check_text(str(path), head)
    opener = gzip.open if head.startswith(_GZIP_MAGIC) else open
    return opener(path, "rt", encoding="utf-8", errors="replace")


def _dataset_name(path: pathlib.Path) -> str:
    return f"{path.parent.name}/{path.stem}" if path.parent.name else path.stem


def read_letor(
    path,
    *,
    normalise: bool = True,
    n_features: int | None = None,
    cache_dir=None,
    use_cache: bool = True,
) -> RankingDataset:
    """Read a LETOR/SVMlight ranking file into a flat :class:`RankingDataset`.

    Args:
      path: the text file.
      normalise: apply :func:`normalise_per_query` (query-level min-max).
      n_features: number of feature columns.  Feature ids above it are an
        error.  ``None`` uses the largest id present (ids above
        :data:`MAX_FEATURE_ID` are then rejected as a probable typo).
      cache_dir: where parsed arrays are cached; ``None`` means
        :func:`default_cache_dir`.
      use_cache: look up / store the ``.npz`` cache.  The cache key is the
        SHA-256 of the file's bytes plus ``normalise``, ``n_features`` and
        :data:`CACHE_FORMAT_VERSION`.  An unwritable cache directory only
        produces a warning.

    Raises:
      LetorFormatError: ``"<path>:<line>: <problem>"`` for a missing ``qid:``
        token, a non-numeric / negative / non-integer label, a malformed
        ``id:value`` token, a non-numeric or non-finite value, a feature id
        < 1 or > ``n_features``, a duplicate feature id within a line, or a
        query whose lines are not contiguous.  A query id that reappears
        after other queries is *rejected*, naming the line where it reappears
        and the line where its first block began: merging the blocks would
        silently reorder the data, and in real LETOR files it signals a
        corrupted or wrongly concatenated file.
      DatasetError: missing file, or a file without any document.
    """
    path = check_file(path)
    if n_features is not None:
        if isinstance(n_features, bool) or int(n_features) != n_features or n_features < 1:
            raise ValueError(f"n_features must be a positive integer, got {n_features!r}")
        n_features = int(n_features)
    name = _dataset_name(path)

    cache_path = None
    hasher = None
    digest = None
    try:
        if use_cache:
            digest = _sha256_file(path)
            base = pathlib.Path(cache_dir) if cache_dir is not None else default_cache_dir()
            cache_path = base / _cache_file_name(digest, normalise, n_features)
            source = _cache_source(digest, normalise, n_features)
            cached = _load_cache(cache_path, name, source)
            if cached is not None:
                return cached
            hasher = hashlib.sha256()
        features, labels, offsets, lengths, qids = _parse_letor_file(path, n_features, hasher)
    except READ_ERRORS as error:
        raise read_error(path, error) from None
    if normalise:  # in place: the raw array is ours, saves one copy of the data
        features = _normalise_into(features, offsets, lengths, features)
    dataset = RankingDataset(
        features=features,
        labels=labels,
        query_offsets=offsets,
        query_lengths=lengths,
        query_ids=qids,
        name=name,
    )

    if cache_path is not None:
        if hasher.hexdigest() != digest:
            warnings.warn(
                f"{path} changed while it was being read; not caching it",
                RuntimeWarning,
                stacklevel=2,
            )
        else:
            _write_cache(
                cache_path,
                {
                    "features": dataset.features,
                    "labels": dataset.labels,
                    "query_offsets": dataset.query_offsets,
                    "query_lengths": dataset.query_lengths,
                    "query_ids": dataset.query_ids,
                    **_cache_source(digest, normalise, n_features),
                },
            )
    return dataset


def _cache_source(digest: str, normalise: bool, n_features: int | None) -> dict:
    """What a cache entry stores to prove which file and options it was made from."""
    return {
        "format_version": np.int64(CACHE_FORMAT_VERSION),
        "normalise": np.bool_(normalise),
        "n_features": np.int64(-1 if n_features is None else n_features),
        "source_sha256": np.str_(digest),
    }


def warn_without_relevant(dataset: RankingDataset, source) -> None:
    """Warns when no document of a test split is relevant: offline nDCG is then 0 in
    every round, as no query has a relevant document to find."""
    if dataset.n_docs and dataset.max_label == 0:
        warnings.warn(
            f"{source}: no document has a label above 0, so offline nDCG is 0 in every "
            "round (a test split without relevant documents)",
            RuntimeWarning,
            stacklevel=2,
        )


_FOLD_SPLITS = ("train", "vali", "test")


def load_fold(
    fold_dir,
    *,
    normalise: bool = True,
    n_features: int | None = None,
    cache_dir=None,
    use_cache: bool = True,
) -> dict:
    """Read ``train.txt``, ``vali.txt`` and ``test.txt`` from a fold folder.

    Returns a dict with keys ``'train'``, ``'vali'``, ``'test'`` for the files
    that exist; ``train.txt`` and ``test.txt`` are required (DatasetError
    naming the missing file otherwise), ``vali.txt`` is optional.  With
    ``n_features=None`` all splits are padded to the widest split so that
    they share one feature space.
    """
    fold_dir = pathlib.Path(fold_dir)
    if not fold_dir.is_dir():
        raise DatasetError(f"{fold_dir}: no such fold directory")
    for required in ("train", "test"):
        if not (fold_dir / f"{required}.txt").is_file():
            raise DatasetError(
                f"{fold_dir / (required + '.txt')}: missing {required} file "
                f"in fold directory {fold_dir}"
            )
    out = {}
    for split in _FOLD_SPLITS:
        p = fold_dir / f"{split}.txt"
        if p.is_file():
            out[split] = read_letor(
                p,
                normalise=normalise,
                n_features=n_features,
                cache_dir=cache_dir,
                use_cache=use_cache,
            )
    warn_without_relevant(out["test"], fold_dir / "test.txt")
    if n_features is None:
        width = max(ds.n_features for ds in out.values())
        for split, ds in out.items():
            if ds.n_features < width:
                pad = np.zeros((ds.n_docs, width - ds.n_features), dtype=np.float32)
                out[split] = dataclasses.replace(ds, features=np.hstack([ds.features, pad]))
    return out


# --------------------------------------------------------------------------
# Synthetic data
# --------------------------------------------------------------------------

# Label distributions: MSLR-WEB10K (5 grades: 52/32/13/2/1 %) and MQ2007 (3 grades).
_GRADE_PROPORTIONS = {
    2: (0.75, 0.25),
    3: (0.74, 0.20, 0.06),
    5: (0.52, 0.32, 0.13, 0.02, 0.01),
}

_DOC_LENGTH_SIGMA = 0.9  # lognormal shape of the docs-per-query distribution
_FEATURES_PER_FACTOR = 4  # observed features per latent factor (feature groups)
_OWN_NOISE = (0.03, 0.08)  # range of a feature's own component, relative to its factor
_NUISANCE = 0.5  # norm of a group's nuisance loadings
_COUNT_LIKE = 0.4  # share of skewed, often-zero features
_MISSING = 0.03  # chance a feature is missing (constant) for a whole query
_COARSE_SHARE = 0.02  # share of a group's linear score carried by its common factor
# Weights of the hidden score's parts, each standardised (see synthetic_dataset).
_INTERACTION_WEIGHT = 0.5  # centred products of feature pairs
_BAND_WEIGHT = 0.5  # non-monotone "neither too little nor too much" features
_QUERY_WEIGHT_JITTER = 0.2  # per-query scaling of each group's linear weights
_QUERY_OFFSET = 0.8  # per-query shift of the score (how many relevant documents)
_NOISE_SCALE = 0.3  # label noise


def _grade_proportions(n_grades: int) -> np.ndarray:
    if n_grades in _GRADE_PROPORTIONS:
        return np.asarray(_GRADE_PROPORTIONS[n_grades])
    rest = 0.5 ** np.arange(n_grades - 1)
    return np.concatenate([[0.5], 0.5 * rest / rest.sum()])


@dataclasses.dataclass(frozen=True, eq=False)
class _HiddenModel:
    """The feature structure and relevance function shared by a train/test pair."""

    loadings: np.ndarray  # [F] weight of a feature's relevance factor
    nuisance: np.ndarray  # [F] weight of its group's nuisance factor
    factor_of: np.ndarray  # [F] the factor each feature observes
    own_noise: np.ndarray  # [F] a feature's own noise scale
    count_like: np.ndarray  # [F] bool: exp-transformed, often-zero features
    weights: np.ndarray  # [F] linear weights
    pair_i: np.ndarray  # [P] feature pairs of the interaction term
    pair_j: np.ndarray
    pair_w: np.ndarray  # [P]
    band: np.ndarray  # [Bd] features whose effect peaks inside the range
    band_centre: np.ndarray  # [Bd]
    spread: np.ndarray  # [F] std of a feature's raw value within a query
    centre: np.ndarray  # [F] feature means (train set), the interaction's origin
    stats: np.ndarray  # [3, 2] mean and std of the linear, interaction, band terms
    thresholds: np.ndarray  # [n_grades - 1] score cut points


def _check_positive_int(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or int(value) != value or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _draw_hidden(rng: np.random.Generator, n_features: int, hidden_weights) -> _HiddenModel:
    """Draws feature groups and the relevance function (no statistics yet)."""
    n_factors = max(1, n_features // _FEATURES_PER_FACTOR)
    factor_of = rng.permutation(np.arange(n_features) % n_factors)
    loadings = rng.uniform(0.6, 1.0, n_features)
    own_noise = rng.uniform(*_OWN_NOISE, n_features)
    count_like = rng.random(n_features) < _COUNT_LIKE
    if hidden_weights is None:
        w = rng.normal(size=n_features)
        w[rng.random(n_features) < 0.3] = 0.0  # some features are pure noise
        if not np.any(w):
            w[rng.integers(n_features)] = 1.0
    else:
        w = np.asarray(hidden_weights, dtype=np.float64)
        if w.shape != (n_features,):
            raise ValueError(f"hidden_weights must have shape ({n_features},), got {w.shape}")
        if not np.all(np.isfinite(w)) or not np.any(w):
            raise ValueError("hidden_weights must be finite and not all zero")
    nuisance = rng.normal(size=n_features)
    for g in range(n_factors):
        members = factor_of == g
        nuisance[members] *= _NUISANCE / (np.linalg.norm(nuisance[members]) or 1.0)
    if hidden_weights is None:
        w = _split_weights(rng, w, loadings, nuisance, own_noise, factor_of, n_factors)
    # Nuisance loadings (document length, spam and the like): within each group
    # orthogonal to the weights, so that x @ w cancels the nuisance.
    for g in range(n_factors):
        members = factor_of == g
        wg = w[members]
        if np.any(wg):
            nuisance[members] -= wg * (nuisance[members] @ wg) / (wg @ wg)
        nuisance[members] *= _NUISANCE / (np.linalg.norm(nuisance[members]) or 1.0)
    n_pairs = max(1, n_features // 4)
    n_band = max(1, n_features // 8)
    return _HiddenModel(
        loadings=loadings,
        nuisance=nuisance,
        factor_of=factor_of,
        own_noise=own_noise,
        count_like=count_like,
        weights=w,
        pair_i=rng.integers(n_features, size=n_pairs),
        pair_j=rng.integers(n_features, size=n_pairs),
        pair_w=rng.normal(size=n_pairs),
        band=rng.choice(n_features, size=n_band, replace=False),
        band_centre=rng.uniform(0.3, 0.7, n_band),
        spread=np.sqrt(loadings**2 + nuisance**2 + own_noise**2),
        centre=np.zeros(n_features),
        stats=np.zeros((0, 2)),
        thresholds=np.zeros(0),
    )


def _split_weights(rng, w, loadings, nuisance, own_noise, factor_of, n_factors):
    """Rebuilds each group's weights so that the group's common factor carries only
    ``_COARSE_SHARE`` of its linear score's variance; the rest comes from the features'
    own components (fine differences between views of one quantity), which are small
    and orthogonal, within the group, to the factor and the nuisance loadings."""
    out = np.zeros_like(w)
    for g in range(n_factors):
        members = np.flatnonzero(factor_of == g)
        wg = w[members]
        if not np.any(wg):
            continue
        a, b = loadings[members], nuisance[members]
        b_unit = b / (np.linalg.norm(b) or 1.0)
        a_perp = a - (a @ b_unit) * b_unit  # the factor's direction, nuisance removed
        if np.linalg.norm(a_perp) <= 1e-9:
            out[members] = wg
            continue
        coarse = a_perp / np.linalg.norm(a_perp)
        fine = wg - (wg @ b_unit) * b_unit - (wg @ coarse) * coarse
        fine_var = ((fine * own_noise[members]) ** 2).sum()
        if fine_var <= 1e-12:  # groups of one or two features: keep the drawn weights
            out[members] = wg
            continue
        coarse_var = (coarse @ a) ** 2  # variance of the factor term per unit weight
        scale = np.sqrt(_COARSE_SHARE / (1 - _COARSE_SHARE) * fine_var / coarse_var)
        out[members] = fine + rng.choice([-1.0, 1.0]) * scale * coarse
    return out if np.any(out) else w


def _draw_lengths(rng, n_queries, mean_docs, max_docs) -> np.ndarray:
    sigma = _DOC_LENGTH_SIGMA
    mu = math.log(mean_docs) - 0.5 * sigma**2  # lognormal mean == mean_docs
    lengths = np.rint(rng.lognormal(mu, sigma, size=n_queries)).astype(np.int64)
    lengths = np.maximum(lengths, 2)
    if max_docs is not None:
        lengths = np.minimum(lengths, max_docs)
    return lengths


def _draw_features(rng, lengths: np.ndarray, hidden: _HiddenModel):
    """LETOR-looking features in correlated groups, min-max normalised per query."""
    n_features = hidden.loadings.size
    n_factors = int(hidden.factor_of.max()) + 1
    n_queries = lengths.size
    n_docs = int(lengths.sum())
    offsets = np.cumsum(lengths) - lengths
    q_of_doc = np.repeat(np.arange(n_queries), lengths)
    factors = rng.standard_normal((n_docs, n_factors))
    nuisance = rng.standard_normal((n_docs, n_factors))
    q_mean = rng.normal(size=(n_queries, n_features))
    q_scale = rng.lognormal(0.0, 0.5, size=(n_queries, n_features))
    own = hidden.own_noise * rng.standard_normal((n_docs, n_features))
    raw = q_mean[q_of_doc] + q_scale[q_of_doc] * (
        hidden.loadings * factors[:, hidden.factor_of]
        + hidden.nuisance * nuisance[:, hidden.factor_of]
        + own
    )
    # Count-like features (term frequencies etc.): skewed and often zero.
    count_like = hidden.count_like
    raw[:, count_like] = np.where(
        rng.random((n_docs, int(count_like.sum()))) < 0.3,
        0.0,
        np.exp(raw[:, count_like] / hidden.spread[count_like]),
    )
    missing = rng.random((n_queries, n_features)) < _MISSING
    raw = np.where(missing[q_of_doc], 0.0, raw)
    return normalise_per_query(raw, offsets, lengths), offsets, q_of_doc


def _score_parts(x: np.ndarray, weights: np.ndarray, hidden: _HiddenModel):
    """[3, n_docs]: the linear, interaction and band terms of the hidden score."""
    lin = np.einsum("df,df->d", x, weights) if weights.ndim == 2 else x @ weights
    xc = x - hidden.centre
    inter = (xc[:, hidden.pair_i] * xc[:, hidden.pair_j]) @ hidden.pair_w
    band = -(((x[:, hidden.band] - hidden.band_centre) / 0.2) ** 2).sum(axis=1)
    return np.stack([lin, inter, band])


def _generate(
    rng,
    *,
    n_queries,
    n_features,
    mean_docs,
    max_docs,
    n_grades,
    hidden: _HiddenModel | None,
    hidden_weights,
    name,
    qid_start,
):
    """One synthetic dataset; draws (and returns) the hidden model if not given."""
    fit = hidden is None
    if fit:
        hidden = _draw_hidden(rng, n_features, hidden_weights)
    lengths = _draw_lengths(rng, n_queries, mean_docs, max_docs)
    features, offsets, q_of_doc = _draw_features(rng, lengths, hidden)
    x = features.astype(np.float64)
    # Query-level effects: each query weighs the features a little differently and has
    # its own share of relevant documents.
    # Each query scales each feature group's weights by its own factor, so the groups'
    # structure (nuisance cancelled, factor and own components) holds in every query.
    group_factor = 1.0 + _QUERY_WEIGHT_JITTER * rng.standard_normal(
        (n_queries, int(hidden.factor_of.max()) + 1)
    )
    w_query = hidden.weights * group_factor[:, hidden.factor_of]
    if fit:
        hidden = dataclasses.replace(hidden, centre=x.mean(axis=0))
    parts = _score_parts(x, w_query[q_of_doc], hidden)
    if fit:
        stats = np.stack([parts.mean(axis=1), parts.std(axis=1)], axis=1)
        stats[:, 1] = np.where(stats[:, 1] > 0, stats[:, 1], 1.0)
        hidden = dataclasses.replace(hidden, stats=stats)
    z = (parts - hidden.stats[:, :1]) / hidden.stats[:, 1:]
    score = (
        z[0]
        + _INTERACTION_WEIGHT * z[1]
        + _BAND_WEIGHT * z[2]
        + _QUERY_OFFSET * rng.standard_normal(n_queries)[q_of_doc]
        + _NOISE_SCALE * rng.standard_normal(x.shape[0])
    )
    if fit:
        cum = np.cumsum(_grade_proportions(n_grades))[:-1]
        hidden = dataclasses.replace(hidden, thresholds=np.quantile(score, cum))
    labels = np.searchsorted(hidden.thresholds, score, side="right")
    dataset = RankingDataset(
        features=features,
        labels=labels.astype(np.int32),
        query_offsets=offsets.astype(np.int32),
        query_lengths=lengths.astype(np.int32),
        query_ids=np.asarray([f"q{qid_start + i}" for i in range(n_queries)], dtype=np.str_),
        name=name,
    )
    return dataset, hidden


def synthetic_dataset(
    seed,
    *,
    n_queries: int = 200,
    n_features: int = 32,
    mean_docs_per_query: float = 40,
    max_docs_per_query: int | None = None,
    n_grades: int = 5,
    hidden_weights=None,
    name: str = "synthetic",
) -> RankingDataset:
    """A LETOR-like synthetic dataset, deterministic in ``seed``.

    * Documents per query: lognormal (long tail) with mean
      ``mean_docs_per_query``, at least 2, at most ``max_docs_per_query``.
    * Features, in groups of about 4 (many views of one quantity, as BM25 and TF-IDF
      over several fields in LETOR): raw value = query-specific offset + query-specific
      scale × (loading × the group's common factor + nuisance loading × the group's
      nuisance factor + the feature's own component, 3-8 % of the factor's scale);
      40 % count-like (exponentiated, 30 % zeros), 3 % missing (constant) for a whole
      query; min-max normalised per query, so in ``[0, 1]``.
    * Drawn hidden weights ``w`` (~30 % zeros before the split) are split per group:
      the common factor carries only 2 % of the group's linear score, the rest is in
      the features' small own components (fine differences between views of one
      quantity), orthogonal within the group to the factor and nuisance loadings.
      The mean difference between relevant and other documents, which one FPDGD round
      from zero mostly follows, is dominated by the high-variance common factors, so
      it ranks clearly worse than the best linear model; the low-variance own
      components take a linear ranker many rounds to weigh up.
    * Labels ``0 .. n_grades-1``: a hidden score, the sum of standardised parts:
      the linear term ``x @ w_q`` with ``w_q = w`` scaled per query and group by
      ``1 + 0.2 N(0, 1)`` (queries weigh kinds of evidence differently; ``w`` =
      ``hidden_weights`` or drawn from the seed), 0.5 × a sum of products of centred
      feature pairs ``(x_i - m_i)(x_j - m_j)`` (``m``: train means; no linear part),
      0.5 × a sum of non-monotone "band" terms ``-((x_f - c_f) / 0.2)²`` (a feature
      is best in the middle of its range; a linear ranker can express neither, a
      neural one can), 0.8 × a per-query offset (queries differ in how many relevant
      documents they have; some have none) and 0.3 × Gaussian noise.  The score is
      cut at global quantiles so grades are skewed like MSLR-WEB10K (52/32/13/2/1 %
      for 5 grades)
      or MQ2007 (74/20/6 % for 3 grades).
    """
    n_queries = _check_positive_int("n_queries", n_queries, 1)
    n_features = _check_positive_int("n_features", n_features, 1)
    n_grades = _check_positive_int("n_grades", n_grades, 2)
    if not mean_docs_per_query >= 2:
        raise ValueError(f"mean_docs_per_query must be >= 2, got {mean_docs_per_query!r}")
    if max_docs_per_query is not None:
        max_docs_per_query = _check_positive_int("max_docs_per_query", max_docs_per_query, 2)
    rng = np.random.default_rng(seed)
    dataset, _ = _generate(
        rng,
        n_queries=n_queries,
        n_features=n_features,
        mean_docs=float(mean_docs_per_query),
        max_docs=max_docs_per_query,
        n_grades=n_grades,
        hidden=None,
        hidden_weights=hidden_weights,
        name=name,
        qid_start=0,
    )
    return dataset


def synthetic_train_test(
    seed=0,
    *,
    n_train_queries: int = 200,
    n_test_queries: int = 100,
    n_features: int = 32,
    mean_docs_per_query: float = 40,
    n_grades: int = 5,
    max_docs_per_query: int | None = None,
) -> tuple[RankingDataset, RankingDataset]:
    """A synthetic train and test set sharing one hidden relevance function.

    The queries (and documents) differ; the feature groups and loadings, hidden
    weights, nonlinear terms, score standardisation and grade thresholds are
    drawn/fitted on the train set and reused for the test set (see
    :func:`synthetic_dataset`).  Query ids do not overlap
    (``q0..`` for train, continuing the numbering for test).
    """
    n_train_queries = _check_positive_int("n_train_queries", n_train_queries, 1)
    n_test_queries = _check_positive_int("n_test_queries", n_test_queries, 1)
    n_features = _check_positive_int("n_features", n_features, 1)
    n_grades = _check_positive_int("n_grades", n_grades, 2)
    if not mean_docs_per_query >= 2:
        raise ValueError(f"mean_docs_per_query must be >= 2, got {mean_docs_per_query!r}")
    if max_docs_per_query is not None:
        max_docs_per_query = _check_positive_int("max_docs_per_query", max_docs_per_query, 2)
    rng = np.random.default_rng(seed)
    common = dict(
        n_features=n_features,
        mean_docs=float(mean_docs_per_query),
        max_docs=max_docs_per_query,
        n_grades=n_grades,
        hidden_weights=None,
    )
    train, hidden = _generate(
        rng, n_queries=n_train_queries, hidden=None, name="synthetic-train", qid_start=0, **common
    )
    test, _ = _generate(
        rng,
        n_queries=n_test_queries,
        hidden=hidden,
        name="synthetic-test",
        qid_start=n_train_queries,
        **common,
    )
    return train, test
