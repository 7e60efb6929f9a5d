"""The on-disk cache of parsed LETOR files: one ``.npz`` per file and parse options.

An entry is keyed by the SHA-256 of the source file's bytes plus the parse options
(``normalise``, ``n_features``) and :data:`CACHE_FORMAT_VERSION`, so that
re-reading a 1 GB MSLR fold is a fast ``np.load``.  An entry is used only when it
proves it belongs to its source (stored hash and parse options, the version of the
parser that wrote it, :data:`PARSER_VERSION`, a SHA-256 of its arrays, shapes, finite
values, label range): one another parser wrote is parsed again and rewritten; a folder,
FIFO or symbolic link where an entry should be is never read; else the file is parsed
again with a warning.  Entries
are written atomically; an unwritable cache only produces a warning, and so does a
cache folder that is a symbolic link: it is never followed (:func:`own_folder`).
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import warnings

import numpy as np

from foltr_jax.core import files
from foltr_jax.data.letor import MAX_LABEL
from foltr_jax.data.ranking_dataset import RankingDataset

__all__ = [
    "CACHE_FORMAT_VERSION",
    "PARSER_VERSION",
    "arrays_of",
    "default_cache_dir",
    "file_name",
    "known_sha256",
    "load",
    "own_folder",
    "path_for",
    "sha256_file",
    "source",
    "stat_key",
    "write",
]

# Bump whenever the cached array layout changes: old cache entries then simply stop being
# found.
CACHE_FORMAT_VERSION = 2  # 2: entries carry a SHA-256 of their arrays

# The version of what the parser makes of a file (foltr_jax/data/letor.py, letor_blocks.py and
# ranking_dataset.normalise_into), stored in every entry: an entry another version wrote is
# parsed again and rewritten, never read.  PARSER_SOURCES_SHA256 is the SHA-256 of those
# sources at this version: tests/data/test_cache_versions.py fails when they change and it does
# not, so that a change of the parser comes with a new version.  1: the entries that record
# none; 2: text decoded with surrogateescape, so that two query ids that differ only in
# bytes that are not UTF-8 stay two queries.
PARSER_VERSION = 2
PARSER_SOURCES_SHA256 = "801334e021900aefe56226edd3dd718c3450c18f1477f976b41666d51c5f2c53"

# Bytes per step when hashing a file for the cache key.
_HASH_BLOCK_BYTES = 1 << 20


def default_cache_dir() -> pathlib.Path:
    """``$FOLTR_JAX_CACHE`` if set (and non-empty), else ``~/.cache/foltr_jax``."""
    env = os.environ.get("FOLTR_JAX_CACHE")
    if env:
        return pathlib.Path(env).expanduser()
    return pathlib.Path.home() / ".cache" / "foltr_jax"


def sha256_file(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while True:
            block = fh.read(_HASH_BLOCK_BYTES)
            if not block:
                break
            h.update(block)
    return h.hexdigest()


def stat_key(path) -> tuple:
    """What identifies the file at ``path`` as it is now: (absolute path, device, inode,
    size, time of change in ns); OSError if it cannot be read."""
    path = os.path.abspath(path)
    info = os.stat(path)
    return (path, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


_READ: dict = {}  # stat_key -> the SHA-256 of the bytes read_letor read from that file


def note_sha256(key: tuple, digest: str) -> None:
    """Records that the file ``key`` (:func:`stat_key`, taken before it was read) held
    bytes of SHA-256 ``digest`` when ``data.read_letor`` read it."""
    _READ[key] = digest


def known_sha256(path) -> str | None:
    """The SHA-256 ``data.read_letor`` found for the file at ``path`` while it keeps the
    identity, size and time of change it had then (so a caller that records the data files
    a run read need not read them again), else None."""
    try:
        return _READ.get(stat_key(path))
    except OSError:
        return None


def file_name(digest: str, normalise: bool, n_features: int | None) -> str:
    nf = "auto" if n_features is None else str(n_features)
    return f"letor-{digest}-norm{int(normalise)}-nf{nf}-v{CACHE_FORMAT_VERSION}.npz"


def path_for(cache_dir, digest: str, normalise: bool, n_features: int | None) -> pathlib.Path:
    """The entry's path in ``cache_dir`` (``None``: :func:`default_cache_dir`)."""
    base = pathlib.Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return base / file_name(digest, normalise, n_features)


_WARNED_LINKS: set = set()


def own_folder(cache_dir) -> bool:
    """Whether the cache folder (``None``: :func:`default_cache_dir`) may be used: not
    when a symbolic link stands at its name (a planted link would have entries read from
    and written into a folder that is not the cache), which is warned about in one line
    and never followed, like a run's own work folders."""
    folder = pathlib.Path(cache_dir) if cache_dir is not None else default_cache_dir()
    if not folder.is_symlink():
        return True
    if folder in _WARNED_LINKS:  # once per folder: a fold reads two or three files
        return False
    _WARNED_LINKS.add(folder)
    warnings.warn(
        f"cache folder {folder} is a symbolic link, which is never followed; reading the "
        "data without the cache (remove the link, or name a real folder)",
        RuntimeWarning,
        stacklevel=3,
    )
    return False


_CACHE_KEYS = ("features", "labels", "query_offsets", "query_lengths", "query_ids")
_CHECKSUM = "arrays_sha256"


def checksum(arrays: dict) -> str:
    """SHA-256 of the dataset arrays of an entry (names, dtypes, shapes and bytes) and of
    its source fields: an entry whose arrays were swapped or damaged is never used."""
    digest = hashlib.sha256()
    for key in sorted(k for k in arrays if k != _CHECKSUM):
        value = np.ascontiguousarray(arrays[key])
        digest.update(f"{key} {value.dtype.str} {value.shape}\0".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def load(cache_path: pathlib.Path, name: str, source: dict) -> RankingDataset | None:
    """The cached dataset when the entry proves it was made from ``source`` (the file's
    SHA-256 and the parse options, as :func:`source` gives them) and holds sound arrays;
    else None, with a warning if a file was there."""
    if not os.path.lexists(cache_path):
        return None
    try:
        if cache_path.is_symlink():
            raise ValueError("it is a symbolic link, which is never followed")
        special = files.special_file(cache_path)
        if special:
            raise ValueError(f"it is {special}, not a file (never read; nothing is cached)")
        with np.load(cache_path, allow_pickle=False) as z:
            if "parser_version" not in z.files:
                raise ValueError(f"an older parser wrote it (no version; this is {PARSER_VERSION})")
            stored = {k: z[k] for k in (*_CACHE_KEYS, *source, _CHECKSUM)}
        if str(stored[_CHECKSUM]) != checksum(stored):
            raise ValueError("its arrays do not match their checksum (other data or damage)")
        if int(stored["format_version"]) != CACHE_FORMAT_VERSION:
            raise ValueError("format version mismatch")
        if int(stored["parser_version"]) != PARSER_VERSION:
            raise ValueError(
                f"another parser version wrote it ({int(stored['parser_version'])}; this is "
                f"{PARSER_VERSION})"
            )
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
    except Exception as exc:  # noqa: BLE001 - corrupt / truncated / foreign file: re-parse
        warnings.warn(
            f"ignoring unusable cache file {cache_path}: {exc}; parsing the file again",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


def write(cache_path: pathlib.Path, arrays: dict) -> bool:
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
    if files.special_file(cache_path):
        return False  # a folder or FIFO stands there: load warned once
    try:
        arrays = {**arrays, _CHECKSUM: np.str_(checksum(arrays))}
        files.write_atomically(cache_path, lambda stream: np.savez(stream, **arrays))
    except OSError as exc:
        warnings.warn(
            f"could not write cache file {cache_path} ({exc}); continuing without caching",
            RuntimeWarning,
            stacklevel=3,
        )
        return False
    return True


def source(digest: str, normalise: bool, n_features: int | None) -> dict:
    """What a cache entry stores to prove which file and options it was made from."""
    return {
        "format_version": np.int64(CACHE_FORMAT_VERSION),
        "parser_version": np.int64(PARSER_VERSION),
        "normalise": np.bool_(normalise),
        "n_features": np.int64(-1 if n_features is None else n_features),
        "source_sha256": np.str_(digest),
    }


def arrays_of(dataset: RankingDataset, source: dict) -> dict:
    """What an entry stores: the dataset's arrays and its ``source``."""
    return {**{k: getattr(dataset, k) for k in _CACHE_KEYS}, **source}
