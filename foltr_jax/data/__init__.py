"""Learning-to-rank datasets: where to read them and how (the public entry points).

A dataset is a flat :class:`RankingDataset` (all documents of all queries as rows
of one ``[n_docs, n_features]`` float32 matrix; queries are contiguous row ranges).
:func:`read_letor` reads a LETOR/SVMlight file, strictly (:class:`LetorFormatError`
names ``"<path>:<line>"``), normalises it per query and caches the arrays as an
``.npz`` keyed by the SHA-256 of the file; :func:`load_fold` reads a fold folder;
:func:`synthetic_dataset` and :func:`synthetic_train_test` generate LETOR-like data.

The parts live in their own modules and are re-exported here:

* :mod:`foltr_jax.data.ranking_dataset`: the container and :func:`normalise_per_query`;
* :mod:`foltr_jax.data.letor`: the file format, its parser and errors;
* :mod:`foltr_jax.data.dataset_cache`: the content-hashed ``.npz`` cache;
* :mod:`foltr_jax.data.synthetic`: the synthetic generator.
"""

from __future__ import annotations

import dataclasses
import hashlib
import pathlib
import warnings
import weakref

import numpy as np

from foltr_jax.data import dataset_cache, letor
from foltr_jax.data.dataset_cache import CACHE_FORMAT_VERSION, default_cache_dir
from foltr_jax.data.letor import (
    MAX_FEATURE_ID,
    MAX_LABEL,
    READ_ERRORS,
    DatasetError,
    LetorFormatError,
    check_file,
    open_text,
    read_error,
)
from foltr_jax.data.ranking_dataset import RankingDataset, normalise_into, normalise_per_query
from foltr_jax.data.synthetic import synthetic_dataset, synthetic_train_test

__all__ = [
    "CACHE_FORMAT_VERSION",
    "MAX_FEATURE_ID",
    "MAX_LABEL",
    "READ_ERRORS",
    "DatasetError",
    "LetorFormatError",
    "RankingDataset",
    "check_file",
    "default_cache_dir",
    "load_fold",
    "normalise_per_query",
    "open_text",
    "read_error",
    "read_letor",
    "synthetic_dataset",
    "synthetic_train_test",
    "warn_without_relevant",
]


def _dataset_name(path: pathlib.Path) -> str:
    return f"{path.parent.name}/{path.stem}" if path.parent.name else path.stem


def _checked_n_features(n_features) -> int | None:
    """``n_features`` as an int (or None); ValueError unless a positive integer."""
    if n_features is not None:
        if isinstance(n_features, bool) or int(n_features) != n_features or n_features < 1:
            raise ValueError(f"n_features must be a positive integer, got {n_features!r}")
        n_features = int(n_features)
    return n_features


def read_letor(
    path,
    *,
    normalise: bool = True,
    n_features: int | None = None,
    cache_dir=None,
    use_cache: bool = True,
    progress=None,
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
        :data:`CACHE_FORMAT_VERSION`.  An unwritable cache directory, or one
        that is a symbolic link (never followed), only produces a warning.
      progress: called with a :class:`foltr_jax.data.letor.LoadProgress` (bytes read,
        documents, queries, seconds) after every block the parser reads; not called
        when the cache answers.  ``experiments.lib.cli.LoadLog`` prints it.

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
    n_features = _checked_n_features(n_features)
    name = _dataset_name(path)
    use_cache = use_cache and dataset_cache.own_folder(cache_dir)

    cache_path = None
    hasher = None
    digest = None
    try:
        if use_cache:
            key = dataset_cache.stat_key(path)
            digest = dataset_cache.sha256_file(path)
            cache_path = dataset_cache.path_for(cache_dir, digest, normalise, n_features)
            source = dataset_cache.source(digest, normalise, n_features)
            cached = dataset_cache.load(cache_path, name, source)
            if cached is not None:
                dataset_cache.note_sha256(key, digest)
                return cached
            hasher = hashlib.sha256()
        features, labels, offsets, lengths, qids = letor.parse_file(
            path, n_features, hasher, progress=progress
        )
    except READ_ERRORS as error:
        raise read_error(path, error) from None
    if normalise:  # in place: the raw array is ours, saves one copy of the data
        features = normalise_into(features, offsets, lengths, features)
    dataset = RankingDataset(
        features=features,
        labels=labels,
        query_offsets=offsets,
        query_lengths=lengths,
        query_ids=qids,
        name=name,
    )

    if cache_path is not None and hasher is not None:
        if hasher.hexdigest() != digest:  # truncated or rewritten meanwhile: part of it read
            raise DatasetError(
                f"{path}: changed while it was being read (its SHA-256 before and after "
                "differ); read it again once nothing writes it"
            )
        else:
            dataset_cache.note_sha256(key, digest)
            dataset_cache.write(cache_path, dataset_cache.arrays_of(dataset, source))
    return dataset


_WARNED: weakref.WeakSet[RankingDataset] = (
    weakref.WeakSet()
)  # the datasets warn_without_relevant has warned about


def warn_without_relevant(dataset: RankingDataset, source, stacklevel: int = 2) -> None:
    """Warns when no document of a test split is relevant: offline nDCG is then 0 in
    every round, as no query has a relevant document to find.  Once per dataset (a
    binary warns when it reads the file, the ``run_*`` functions when they start)."""
    if dataset.n_docs and dataset.max_label == 0 and dataset not in _WARNED:
        _WARNED.add(dataset)
        warnings.warn(
            f"{source}: no document has a label above 0, so offline nDCG is 0 in every "
            "round (a test split without relevant documents)",
            RuntimeWarning,
            stacklevel=stacklevel,
        )


_FOLD_SPLITS = ("train", "vali", "test")


def load_fold(
    fold_dir,
    *,
    normalise: bool = True,
    n_features: int | None = None,
    cache_dir=None,
    use_cache: bool = True,
    progress=None,
) -> dict:
    """Read ``train.txt``, ``vali.txt`` and ``test.txt`` from a fold folder.

    Returns a dict with keys ``'train'``, ``'vali'``, ``'test'`` for the files
    that exist; ``train.txt`` and ``test.txt`` are required (DatasetError
    naming the missing file otherwise), ``vali.txt`` is optional.  With
    ``n_features=None`` all splits are padded to the widest split so that
    they share one feature space.  ``progress`` is given to :func:`read_letor` for
    every file.
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
                progress=progress,
            )
    warn_without_relevant(out["test"], fold_dir / "test.txt")
    if n_features is None:
        width = max(ds.n_features for ds in out.values())
        for split, ds in out.items():
            if ds.n_features < width:
                pad = np.zeros((ds.n_docs, width - ds.n_features), dtype=np.float32)
                out[split] = dataclasses.replace(ds, features=np.hstack([ds.features, pad]))
    return out
