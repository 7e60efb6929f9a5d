"""Folds of a train/test pair: the original split and seeded re-partitions of its queries.

The learning-to-rank papers average over the five folds of their datasets, so that a
result's spread is the data's as well as the clicks'.  A dataset that comes as one train
file and one test file (the MSLR-WEB10K excerpt: 43 + 43 queries) has one fold; this
module makes more from its queries:

* fold 1 is the original pair of files, unchanged;
* fold k (k ≥ 2) puts the queries of both files, whole (a query's lines are never split),
  into a train and a test file as large as the original ones (in queries), drawn by a
  random permutation from ``numpy.random.default_rng([seed, k])``; a draw that repeats an
  earlier fold's train queries is drawn again, so that no two folds are the same split.

Fold k depends on the two files' bytes, the seed and k only (not on how many folds are
asked for).  Each file of a fold lists its queries in the order they have in the original
pair (train file first), each query's lines byte for byte as they are there, a final line
without its line end given one.  Blank lines and comment lines (``#``) hold no document and
are left out.  A file's query lines must be contiguous (as the LETOR reader requires) and no
query may be in both files.

:func:`fold_texts` is the pure part (bytes in, bytes out); :func:`write_folds` writes folds
2..n into a cache folder named by the SHA-256 of the two files, the seed and
:data:`FOLDS_FORMAT`, each file written to a temporary file and renamed into place; a file
already there is used only when its bytes are exactly those the fold should have (else it is
written again), so a half-written or altered fold is never read.
"""

from __future__ import annotations

import gzip
import hashlib
import operator
import pathlib

import numpy as np

from foltr_jax.core import files

__all__ = ["FOLDS_FORMAT", "fold_texts", "folds_folder", "partitions", "queries", "write_folds"]

# Bump whenever what a fold holds changes (the draw, the order of queries or lines): folds
# an earlier version wrote are then in another folder, never read.
FOLDS_FORMAT = 1
_MAX_DRAWS = 1000  # draws of one fold before it is said that there are not enough splits


def _read_bytes(path) -> bytes:
    """The file's bytes, a gzip-compressed file's decompressed (the LETOR reader takes both)."""
    data = pathlib.Path(path).read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def queries(data: bytes, source: str = "") -> list[tuple[bytes, list[bytes]]]:
    """[(query id, its lines)] of a LETOR text, in the order of the file; each line as its
    bytes with its line end (one added to a last line without).  ValueError naming
    ``source`` and the line for a document line without a ``qid:`` and for a query whose
    lines are not contiguous."""
    out: list[tuple[bytes, list[bytes]]] = []
    seen: set[bytes] = set()
    for number, line in enumerate(data.splitlines(keepends=True), 1):
        body = line.split(b"#", 1)[0].strip()
        if not body:
            continue  # blank or comment only: no document
        parts = body.split()
        if len(parts) < 2 or not parts[1].startswith(b"qid:"):
            raise ValueError(f"{source}:{number}: no 'qid:' after the label")
        qid = parts[1][4:]
        if not line.endswith(b"\n"):
            line += b"\n"
        if out and out[-1][0] == qid:
            out[-1][1].append(line)
            continue
        if qid in seen:
            raise ValueError(
                f"{source}:{number}: query {qid.decode(errors='replace')} is not contiguous"
            )
        seen.add(qid)
        out.append((qid, [line]))
    return out


def partitions(n_train: int, n_test: int, n_folds: int, seed: int) -> list[np.ndarray]:
    """For each fold, a boolean mask over the n_train + n_test queries (the train file's
    first): True for the fold's train queries.  Fold 1 is the original split; fold k ≥ 2 the
    first n_train of a permutation drawn by ``numpy.random.default_rng([seed, k])``, drawn
    again (the same generator) while it repeats an earlier fold.  ValueError when the queries
    have fewer distinct splits than ``n_folds``."""
    if n_folds < 1:
        raise ValueError(f"n_folds must be at least 1, got {n_folds}")
    if seed < 0:
        raise ValueError(f"seed must be non-negative, got {seed}")
    total = n_train + n_test
    first = np.zeros(total, bool)
    first[:n_train] = True
    masks, seen = [first], {first.tobytes()}
    for k in range(2, n_folds + 1):
        rng = np.random.default_rng([seed, k])
        for _ in range(_MAX_DRAWS):
            mask = np.zeros(total, bool)
            mask[rng.permutation(total)[:n_train]] = True
            if mask.tobytes() not in seen:
                break
        else:
            raise ValueError(
                f"fold {k}: {n_train} + {n_test} queries do not give {n_folds} distinct splits"
            )
        seen.add(mask.tobytes())
        masks.append(mask)
    return masks


def fold_texts(train: bytes, test: bytes, n_folds: int, seed: int,
               sources=("train", "test")) -> list[tuple[bytes, bytes]]:  # fmt: skip
    """[(train text, test text)] of folds 1..n_folds of the LETOR texts ``train`` and
    ``test`` (the module's docstring says how they are made); fold 1 is (train, test) as
    given.  ValueError when a text cannot be split into queries, a query is in both, or
    there are not enough distinct splits."""
    train_queries = queries(train, sources[0])
    test_queries = queries(test, sources[1])
    both = {q for q, _ in train_queries} & {q for q, _ in test_queries}
    if both:
        shown = ", ".join(sorted(q.decode(errors="replace") for q in both)[:3])
        raise ValueError(f"{len(both)} query id(s) in both {sources[0]} and {sources[1]}: {shown}")
    every = train_queries + test_queries
    out = [(train, test)]
    for mask in partitions(len(train_queries), len(test_queries), n_folds, seed)[1:]:
        fold_train, fold_test = (
            b"".join(line for (_, lines), side in zip(every, mask) if side == wanted
                     for line in lines)
            for wanted in (True, False)
        )  # fmt: skip
        out.append((fold_train, fold_test))
    return out


def folds_folder(train_path, test_path, seed: int, cache_dir) -> pathlib.Path:
    """The cache folder of the folds of this pair: named by the SHA-256 of both files' bytes,
    the seed and FOLDS_FORMAT."""
    return _folder_of(_read_bytes(train_path), _read_bytes(test_path), seed, cache_dir)


def _folder_of(train: bytes, test: bytes, seed: int, cache_dir) -> pathlib.Path:
    """``folds_folder`` of the two files' bytes."""
    digest = hashlib.sha256()
    for data in (train, test):
        digest.update(hashlib.sha256(data).digest())
    return pathlib.Path(cache_dir) / f"folds-{digest.hexdigest()[:20]}-seed{seed}-v{FOLDS_FORMAT}"


def write_folds(train_path, test_path, n_folds: int, seed: int, cache_dir,
                name: str | None = None) -> list[tuple[pathlib.Path, pathlib.Path]]:  # fmt: skip
    """[(train path, test path)] of folds 1..n_folds: fold 1 the files given, fold k ≥ 2
    ``<folds_folder>/<name>_fold<k>/train.txt`` and ``test.txt`` (``name`` None: the
    folder the given train file is in), each written unless the file there already holds
    exactly the fold's bytes.  A symbolic link in the way is never followed
    (files.LinkedPathError)."""
    train_path, test_path = pathlib.Path(train_path), pathlib.Path(test_path)
    train, test = _read_bytes(train_path), _read_bytes(test_path)
    texts = fold_texts(train, test, n_folds, seed, (str(train_path), str(test_path)))
    folder = _folder_of(train, test, seed, cache_dir)  # the bytes read once
    name = name or train_path.resolve().parent.name or "data"
    out = [(train_path, test_path)]
    for k, pair in enumerate(texts[1:], 2):
        fold = folder / f"{name}_fold{k}"
        paths = (fold / "train.txt", fold / "test.txt")
        for path, text in zip(paths, pair):
            files.refuse_links(path, below=pathlib.Path(cache_dir))
            if files.special_file(path) is None and path.is_file() and path.read_bytes() == text:
                continue
            files.write_atomically(path, operator.methodcaller("write", text))
        out.append(paths)
    return out
