"""LETOR/SVMlight text files: format checks and a strict, fast parser.

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
message starts with ``"<path>:<line>: "``.  The file is read in blocks of whole
lines.  A block is first read by :mod:`foltr_jax.data.letor_blocks` (a fixed number of
numpy passes over its bytes, several hundred MB/s), which hands back any block it
cannot vouch for; such a block is read line by line: each line's header (label,
query id) in Python, the block's features at once by ``np.fromstring``, falling
back to a token-by-token parse that names the first bad token.  Errors therefore
always come from the line-by-line reader, and :func:`parse_file_by_lines` (that
reader alone, the parser before the vectorised one) is the reference the tests
hold :func:`parse_file` to.  :func:`foltr_jax.data.read_letor` builds a dataset
from what :func:`parse_file` returns.

One concern, the file format's strict reader, in one module: its checks, errors and
block reading share the line numbering and the error messages.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import gzip
import math
import os
import pathlib
import re
import time
import warnings
import zlib
from collections.abc import Iterator
from typing import NoReturn

import numpy as np

from foltr_jax.data import letor_blocks

__all__ = [
    "MAX_FEATURE_ID",
    "MAX_LABEL",
    "READ_ERRORS",
    "DatasetError",
    "LetorFormatError",
    "LoadProgress",
    "check_file",
    "open_text",
    "parse_file",
    "parse_file_by_lines",
    "read_error",
]


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

# Bytes read (and hashed) per step; every block is parsed as one chunk.  1 MB keeps the
# vectorised reader's arrays (8 bytes per token) in cache: 4 MB reads 30 % slower.
_READ_BLOCK_BYTES = 1 << 20

# Threads that read blocks with the vectorised reader at once (numpy releases the GIL).
_MAX_THREADS = 2

# Values at or beyond this magnitude round to infinity in float32 (FLOAT32_MAX itself, as
# 3.4028235e38, rounds to FLOAT32_MAX and is kept).
_FLOAT32_OVERFLOW = 2.0**128 - 2.0**103


class LetorFormatError(ValueError):
    """A malformed line in a LETOR file; message is ``"<path>:<line>: <what>"``."""


class DatasetError(ValueError):
    """Any other bad input (empty file, missing file); the message names the path."""


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

        def fail(msg: str, line_no: int = line_no) -> NoReturn:
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
            if not math.isfinite(val) or abs(val) >= _FLOAT32_OVERFLOW:
                fail(f"feature value out of float32 range in token {_short(tok)}")
            ids.append(fid)
            vals.append(val)
        counts[k] = len(tokens)
    return (np.asarray(ids, dtype=np.float64), np.asarray(vals, dtype=np.float64), counts)


def _feature_limit(n_features: int | None) -> tuple[int, str]:
    """The largest feature id allowed, and what an error says of an id above it."""
    if n_features is None:
        return MAX_FEATURE_ID, f"exceeds the supported maximum {MAX_FEATURE_ID}"
    return n_features, f"> n_features={n_features}"


def _chunk_to_dense(chunk: _Chunk, path: str, n_features: int | None) -> np.ndarray:
    """Dense float32 [len(chunk), max id in chunk] matrix of the chunk's features."""
    max_id, max_id_msg = _feature_limit(n_features)
    parsed = _parse_features_fast(chunk.rests)
    if parsed is not None:
        ids, vals, counts = parsed
        rows = np.repeat(np.arange(len(chunk.rests)), counts)
        same_row = rows[1:] == rows[:-1]
        suspicious = (
            (ids.size and (ids.min() < 1 or ids.max() > max_id))
            or not np.all(np.isfinite(vals))
            or (vals.size and np.abs(vals).max() >= _FLOAT32_OVERFLOW)
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


def _iter_byte_blocks(fh) -> Iterator[bytes]:
    """Blocks of whole lines (each ends with a newline except maybe the last).  The part
    of a line that a read leaves over is kept as a list of pieces, joined once its newline
    comes: a line of any length costs time in proportion to its length."""
    pending: list[bytes] = []  # the start of a line whose newline has not come yet
    while True:
        buf = fh.read(_READ_BLOCK_BYTES)
        if not buf:
            break
        cut = buf.rfind(b"\n") + 1
        if not cut:
            pending.append(buf)
            continue
        yield b"".join([*pending, buf[:cut]]) if pending else buf[:cut]
        pending = [buf[cut:]] if cut < len(buf) else []
    if pending:
        yield b"".join(pending)


def _decode(block: bytes) -> str:
    """A block as text: UTF-8, and every byte that is not UTF-8 kept as its own character
    (``surrogateescape``), so that two query ids are the same only when their bytes are.
    Blocks end at a newline, so no multi-byte character is split."""
    return block.decode("utf-8", errors="surrogateescape")


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


class _Headers:
    """The header (label, query id) of every line read so far, and the queries they make."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.line_no = 0
        self.qids: list[str] = []
        self.query_starts: list[int] = []  # document index where each query begins
        self.first_line_of: dict[str, int] = {}
        self.current_qid: str | None = None

    def read(self, lines: list[str], chunk: _Chunk, n_docs: int) -> LetorFormatError | None:
        """Adds the documents of ``lines`` to ``chunk`` (``n_docs`` documents came before);
        returns the first header error, whose line ends the reading, or None."""
        spath = self.path
        for line in lines:
            self.line_no += 1
            line_no = self.line_no
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
                    return LetorFormatError(
                        f"{spath}:{line_no}: label {_short(label_s)} is above {MAX_LABEL}, "
                        f"the largest grade read (the gain 2^rel - 1 would overflow)"
                    )
            else:
                return LetorFormatError(f"{spath}:{line_no}: {_label_error(label_s)}")
            if len(parts) < 2 or not parts[1].startswith("qid:"):
                found = _short(parts[1]) if len(parts) > 1 else "end of line"
                return LetorFormatError(
                    f"{spath}:{line_no}: missing 'qid:' token after the label (found {found})"
                )
            qid = parts[1][4:]
            if not qid:
                return LetorFormatError(f"{spath}:{line_no}: empty query id in 'qid:'")
            if qid != self.current_qid:
                error = self._begin_query(qid, n_docs + len(chunk.labels))
                if error is not None:
                    return error
            chunk.labels.append(label)
            chunk.rests.append(parts[2] if len(parts) > 2 else "")
            chunk.line_nos.append(line_no)
        return None

    def add_block(self, docs: letor_blocks.BlockDocs, n_docs: int) -> bool:
        """Adds the documents the vectorised reader found in a block (``n_docs`` documents
        came before); False, changing nothing, when one of its queries began earlier (the
        line-by-line reader then names the line)."""
        new = []
        seen = set()
        for d, qid in docs.starts:
            if d == 0 and qid == self.current_qid:
                continue  # the query of the previous block goes on
            if qid in self.first_line_of or qid in seen:
                return False
            seen.add(qid)
            new.append((d, qid))
        first_line = self.line_no + 1
        for d, qid in new:
            self.first_line_of[qid] = first_line + int(docs.doc_lines[d])
            self.qids.append(qid)
            self.query_starts.append(n_docs + d)
        if new:
            self.current_qid = new[-1][1]
        self.line_no += docs.n_lines
        return True

    def _begin_query(self, qid: str, start: int) -> LetorFormatError | None:
        """Starts query ``qid`` at document ``start``; an error if its block began before."""
        began = self.first_line_of.get(qid)
        if began is not None:
            return LetorFormatError(
                f"{self.path}:{self.line_no}: query {_short(qid)} reappears here but its "
                f"block began at line {began} and other queries came in between "
                f"(the lines of a query must be contiguous)"
            )
        self.first_line_of[qid] = self.line_no
        self.qids.append(qid)
        self.query_starts.append(start)
        self.current_qid = qid
        return None


def _open_byte_blocks(raw, path: str, hasher) -> Iterator[bytes]:
    """The blocks of whole lines of an open binary file, gunzipped if it is gzip; every
    byte read feeds ``hasher`` when one is given.  DatasetError if the file is not text."""
    head = raw.read(_SNIFF_BYTES)
    raw.seek(0)
    _check_text(path, head)
    fh = raw if hasher is None else _HashingReader(raw, hasher)
    if head.startswith(_GZIP_MAGIC):
        # arg-type: GzipFile reads forward only here, and _HashingReader has no seek
        fh = gzip.GzipFile(filename=path, fileobj=fh, mode="rb")  # type: ignore[arg-type]
    return _iter_byte_blocks(fh)


def _stack(dense_chunks: list[np.ndarray], n_docs: int, n_features: int | None) -> np.ndarray:
    """One float32 [n_docs, width] matrix of the chunks' rows (narrower chunks padded
    with zeros); the list is emptied as the chunks are copied."""
    width = n_features if n_features is not None else max(c.shape[1] for c in dense_chunks)
    if (
        len(dense_chunks) == 1
        and dense_chunks[0].shape[1] == width
        and dense_chunks[0].flags.c_contiguous
    ):
        features = dense_chunks.pop()
    else:
        features = np.zeros((n_docs, width), dtype=np.float32)
    row = 0
    while dense_chunks:
        c = dense_chunks.pop(0)  # release chunks as they are copied
        features[row : row + c.shape[0], : c.shape[1]] = c
        row += c.shape[0]
    return features


@dataclasses.dataclass(frozen=True)
class LoadProgress:
    """How far :func:`parse_file` has read a file, given to its ``progress`` callback
    after every block (and once more, with ``done`` set, at the end)."""

    path: str
    bytes_read: int  # of the file on disk (compressed bytes for a gzip file)
    total_bytes: int  # the file's size on disk
    documents: int
    queries: int
    seconds: float  # since the parse began
    done: bool = False

    @property
    def mb_per_s(self) -> float:
        """Bytes of the file read per second, in MB (10^6 bytes)."""
        return self.bytes_read / 1e6 / max(self.seconds, 1e-9)

    @property
    def seconds_left(self) -> float:
        """Time left at the rate so far."""
        rate = self.bytes_read / max(self.seconds, 1e-9)
        return (self.total_bytes - self.bytes_read) / rate if rate > 0 else math.inf


def _default_threads() -> int:
    return max(1, min(_MAX_THREADS, os.cpu_count() or 1))


def parse_file(
    path: pathlib.Path,
    n_features: int | None,
    hasher=None,
    progress=None,
    threads=None,
    *,
    vectorised: bool = True,
):
    """Parse a LETOR file into raw (unnormalised) arrays.

    Returns ``(features, labels, query_offsets, query_lengths, query_ids)``.
    If ``hasher`` is given it is fed every byte of the file; if ``progress`` is given
    it is called with a :class:`LoadProgress` after every block read.  ``threads``
    (default: up to 2, the cores there are) read blocks at once with the vectorised
    reader; the result does not depend on it.

    Each block of lines is read by :func:`foltr_jax.data.letor_blocks.parse_block` (numpy
    over the whole block) when it can vouch for it, else line by line, which also names
    the first bad line: the arrays and the errors are those of the line-by-line reader.
    ``vectorised=False`` reads every block line by line (:func:`parse_file_by_lines`).
    """
    spath = str(path)
    max_id = _feature_limit(n_features)[0]
    dense_chunks: list[np.ndarray] = []
    label_chunks: list[np.ndarray] = []
    headers = _Headers(spath)
    n_docs = 0
    if not vectorised:
        threads = 1
    threads = _default_threads() if threads is None else max(1, int(threads))
    start = time.perf_counter()

    def by_lines(block: bytes) -> None:
        nonlocal n_docs
        text = _decode(block)
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        chunk = _Chunk()
        header_error = headers.read(lines, chunk, n_docs)
        if chunk.labels:
            # Parse the features before raising a header error, so that an
            # earlier bad line in this chunk is the one reported.
            dense_chunks.append(_chunk_to_dense(chunk, spath, n_features))
            label_chunks.append(np.asarray(chunk.labels, dtype=np.int32))
            n_docs += len(chunk.labels)
        if header_error is not None:
            raise header_error

    def add(block: bytes, docs) -> None:
        nonlocal n_docs
        if docs is None or not headers.add_block(docs, n_docs):
            by_lines(block)
        elif docs.labels.size:
            dense_chunks.append(docs.features)
            label_chunks.append(docs.labels)
            n_docs += docs.labels.size

    def parse(block: bytes) -> letor_blocks.BlockDocs | None:
        return letor_blocks.parse_block(block, max_id, MAX_LABEL) if vectorised else None

    with open(path, "rb") as raw:
        total = os.fstat(raw.fileno()).st_size

        def report(done: bool = False) -> None:
            if progress is not None:
                progress(
                    LoadProgress(
                        spath,
                        total if done else min(raw.tell(), total),
                        total,
                        n_docs,
                        len(headers.qids),
                        time.perf_counter() - start,
                        done,
                    )
                )

        blocks = _open_byte_blocks(raw, spath, hasher)
        if threads == 1:
            try:
                for block in blocks:
                    add(block, parse(block))
                    report()
            finally:
                letor_blocks.release_scratch()
        else:
            with concurrent.futures.ThreadPoolExecutor(threads) as pool:
                pending: collections.deque = collections.deque()
                for block in blocks:
                    pending.append((block, pool.submit(parse, block)))
                    while len(pending) > threads or (pending and pending[0][1].done()):
                        done_block, future = pending.popleft()
                        add(done_block, future.result())
                        report()
                while pending:
                    done_block, future = pending.popleft()
                    add(done_block, future.result())
                    report()
        report(done=True)

    return _arrays(spath, dense_chunks, label_chunks, headers, n_docs, n_features)


def _arrays(spath, dense_chunks, label_chunks, headers, n_docs, n_features):
    """What :func:`parse_file` returns, from the blocks' documents."""
    if n_docs == 0:
        raise DatasetError(f"{spath}: no documents (empty file, or only comments/blank lines)")
    features = _stack(dense_chunks, n_docs, n_features)
    labels = np.concatenate(label_chunks).astype(np.int32, copy=False)
    starts = np.asarray(headers.query_starts, dtype=np.int64)
    lengths = np.diff(np.append(starts, n_docs))
    return (
        features,
        labels,
        starts.astype(np.int32),
        lengths.astype(np.int32),
        np.asarray(headers.qids, dtype=np.str_),
    )


def parse_file_by_lines(path: pathlib.Path, n_features: int | None, hasher=None):
    """:func:`parse_file` reading every line with the line-by-line reader: the parser
    as it was before the vectorised reader (kept as the reference that the tests and
    ``experiments/benchmark_loading.py`` compare with; about 15-20 MB/s)."""
    return parse_file(path, n_features, hasher, vectorised=False)


# --------------------------------------------------------------------------
# Opening data files
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
    """A text stream of a data file (gzip read as it is; bytes that are not UTF-8 kept
    apart as the LETOR reader keeps them, ``_decode``); DatasetError naming the file when
    it is missing, a folder, unreadable, otherwise compressed or binary."""
    path = check_file(path)
    try:
        with open(path, "rb") as raw:
            head = raw.read(_SNIFF_BYTES)
    except READ_ERRORS as error:
        raise read_error(path, error) from None
    _check_text(str(path), head)
    opener = gzip.open if head.startswith(_GZIP_MAGIC) else open
    return opener(path, "rt", encoding="utf-8", errors="surrogateescape")
