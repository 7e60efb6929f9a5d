"""Files: one way to write them, and one way to store arrays that cannot run code.

Writing goes through a temporary file in the same folder and a rename: readers never
see a half-written results file, checkpoint, cache entry or figure; the target either
keeps its old content or has the complete new one.  On any error the temporary file
is removed and the error is raised.

Checkpoints and finished parts are ``.npz`` files of plain arrays with a JSON header
(format, code version, fingerprint of the settings), read with ``allow_pickle=False``
and checked before any array is used: nothing read back can run code or pass for
another run's data.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import json
import os
import pathlib
import stat
import tempfile
import zipfile
from collections.abc import Callable
from typing import BinaryIO

import numpy as np


def umask() -> int:
    """The process's umask, read without changing it where Linux tells it (/proc), else
    by setting and restoring it."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def write_atomically(path, write: Callable[[BinaryIO], object]) -> None:
    """Calls ``write(stream)`` on a binary temporary file beside ``path``, then renames it
    over ``path`` (creating the folder first).  The file gets the mode a plain ``open``
    would give it (0666 less the umask), not the temporary file's 0600."""
    write_together({path: write})


class LinkedPathError(OSError):
    """A folder a tool would write into is a symbolic link (``refuse_links``)."""


def linked_part(path, below=None) -> pathlib.Path | None:
    """The first (outermost) of ``path`` and the folders above it, down to but not including
    ``below``, that is a symbolic link; ``below`` None (or not above ``path``): ``path``
    alone is looked at.  None when none is a link (or nothing is there)."""
    path = pathlib.Path(path)
    chain = [path]
    if below is not None:
        try:
            parts = path.relative_to(pathlib.Path(below)).parts
        except ValueError:
            parts = ()
        chain = [pathlib.Path(below).joinpath(*parts[:i]) for i in range(1, len(parts) + 1)]
        chain = chain or [path]
    for candidate in chain:
        if os.path.islink(candidate):
            return candidate
    return None


def refuse_links(path, below=None) -> None:
    """The one check of every place a tool writes (results, reports, tables, checkpoints,
    cache entries): LinkedPathError when ``path`` (or a folder above it, down to ``below``)
    is a symbolic link, which is never followed, so nothing is ever written through a link
    into a folder that is not the tool's."""
    found = linked_part(path, below)
    if found is not None:
        raise LinkedPathError(
            errno.ELOOP,
            f"{found} is a symbolic link, which is never followed (nothing is written through "
            "a link): remove it, or name the folder it points to",
        )


def write_together(writes: dict) -> None:
    """``write_atomically`` for several files ``{path: write}`` that belong together (a
    table and its record): every one is written to its temporary file first, and only
    when all are complete are they renamed over their paths, so that a full disk or a
    refused folder leaves every path as it was (and no temporary file).  A folder that is
    a symbolic link is never written into (``refuse_links``: LinkedPathError); a link
    standing at a file's own name is replaced, not followed."""
    done = []  # (temporary, path) of the complete files
    try:
        for path, write in writes.items():
            path = pathlib.Path(path)
            refuse_links(path.parent)
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(
                dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"
            )
            done.append((temporary, path))
            with os.fdopen(handle, "wb") as stream:
                os.fchmod(stream.fileno(), 0o666 & ~umask())
                write(stream)
                stream.flush()
                os.fsync(stream.fileno())
        while done:
            os.replace(*done[0])
            done.pop(0)
    except BaseException:
        for temporary, _ in done:
            try:
                os.unlink(temporary)
            except OSError:
                pass
        raise


def special_file(path) -> str | None:
    """What stands at ``path`` when it is neither missing nor a regular file (after
    links): 'a folder', 'a FIFO', 'a device', 'a socket'; None when nothing is there or a
    regular file is.  Such a path is never opened: reading a FIFO would wait forever."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as error:  # a link loop, a path through a file, ...
        return f"unusable ({error.strerror or error})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device or other special file"


def remove_own(path) -> None:
    """Removes ``path`` when it is a regular file or a link (never a folder or anything a
    planted link points to); a missing file is fine."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        pathlib.Path(path).unlink(missing_ok=True)


def leftovers(path) -> list:
    """The temporary files ``write_atomically`` left beside ``path`` when its writer was
    killed (``.<name>.<random>.tmp``): regular files only."""
    path = pathlib.Path(path)
    found = []
    for candidate in path.parent.glob(f".{glob_escape(path.name)}.*.tmp"):
        try:
            if stat.S_ISREG(os.lstat(candidate).st_mode):
                found.append(candidate)
        except OSError:
            pass
    return found


def glob_escape(name: str) -> str:
    """``name`` with glob's special characters taken literally."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


# --------------------------------------------------------------------------
# Arrays and plain metadata: checkpoints and finished parts, never pickle
# --------------------------------------------------------------------------

ARRAYS_FORMAT = "foltr_jax.arrays"
ARRAYS_VERSION = 2  # 2: the header holds a SHA-256 of the arrays
_ZIP_MAGIC = b"PK\x03\x04"
_META = "meta"


class StoredFileError(ValueError):
    """A stored checkpoint or finished part that may not be used; the message says why."""


# The user code this process runs besides the package (a binary's --plugin files): name ->
# SHA-256 of its source, set by whoever imports it (``set_user_code``).  It is part of
# ``code_version``: a checkpoint written while a plugin read otherwise is not resumed.
_USER_CODE: dict[str, str] = {}


def set_user_code(sources: dict) -> None:
    """Declares the user code this process runs (name -> SHA-256 of its source), replacing
    what was declared before; ``code_version`` covers it from now on."""
    _USER_CODE.clear()
    _USER_CODE.update({str(k): str(v) for k, v in sources.items()})


@functools.cache
def source_version(*folders) -> str:
    """SHA-256 (first 16 hex digits) of the ``.py`` files of foltr_jax (every folder) and of
    ``folders``, with the jax and numpy versions (the user code not included)."""
    import jax

    digest = hashlib.sha256(f"jax {jax.__version__} numpy {np.__version__}".encode())
    package = pathlib.Path(__file__).resolve().parent.parent
    sources = [(p.relative_to(package).as_posix(), p) for p in sorted(package.rglob("*.py"))]
    for folder in map(pathlib.Path, folders):
        sources += [(p.name, p) for p in sorted(folder.glob("*.py"))]
    for name, source in sources:
        digest.update(name.encode() + b"\0" + source.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


# The environment variables that change what JAX computes, read when a program compiles:
# precision (x64, matmul precision, default dtype bits, dtype promotion), random streams
# (PRNG implementation, partitionable threefry), XLA's own flags and NVIDIA's TF32
# override.  A results file records those set (its provenance's "environment"), and a
# checkpoint's code version covers them: a run is never resumed or reused under others.
NUMERICS_VARIABLES = (
    "JAX_ENABLE_X64",
    "JAX_DEFAULT_MATMUL_PRECISION",
    "JAX_DEFAULT_DTYPE_BITS",
    "JAX_NUMPY_DTYPE_PROMOTION",
    "JAX_DEFAULT_PRNG_IMPL",
    "JAX_THREEFRY_PARTITIONABLE",
    "JAX_ENABLE_CUSTOM_PRNG",
    "JAX_DISABLE_JIT",
    "JAX_SOFTMAX_CUSTOM_JVP",
    "XLA_FLAGS",
    "LIBTPU_INIT_ARGS",
    "NVIDIA_TF32_OVERRIDE",
)


def numerics_environment() -> dict:
    """{name: value} of the ``NUMERICS_VARIABLES`` set in this process's environment."""
    return {name: os.environ[name] for name in NUMERICS_VARIABLES if name in os.environ}


def code_version(*folders) -> str:
    """``source_version(*folders)``, and the user code declared (``set_user_code``) and the
    variables of ``numerics_environment`` when there are any: a file written by other code,
    while a plugin read otherwise, or under other numerics (``JAX_ENABLE_X64``, ``XLA_FLAGS``)
    is never resumed."""
    base = source_version(*folders)
    environment = numerics_environment()
    if not _USER_CODE and not environment:
        return base
    digest = hashlib.sha256(base.encode())
    for name, sha in sorted(_USER_CODE.items()):
        digest.update(name.encode() + b"\0" + sha.encode() + b"\0")
    for name, value in sorted(environment.items()):
        digest.update(b"env\0" + name.encode() + b"=" + value.encode() + b"\0")
    return digest.hexdigest()[:16]


def arrays_digest(arrays) -> str:
    """SHA-256 of a list of arrays: dtype, shape and bytes of each, in order."""
    digest = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        digest.update(f"{a.dtype.str} {a.shape}\0".encode())
        digest.update(a.tobytes())
    return digest.hexdigest()


def save_arrays(path, fingerprint: str, meta: dict, arrays, code: str | None = None) -> None:
    """Writes ``arrays`` and the JSON ``meta`` as one ``.npz`` (atomically), stamped with
    the format, ``fingerprint`` and the code version (``code``, default ``code_version()``)."""
    arrays = [np.asarray(a) for a in arrays]
    header = {
        "format": ARRAYS_FORMAT,
        "version": ARRAYS_VERSION,
        "code": code or code_version(),
        "fingerprint": fingerprint,
        "arrays": len(arrays),
        "sha256": arrays_digest(arrays),
        "meta": meta,
    }
    entries = {f"a{i}": a for i, a in enumerate(arrays)}
    entries[_META] = np.str_(json.dumps(header, allow_nan=False))
    write_atomically(path, lambda stream: np.savez(stream, **entries))


def load_arrays(path, fingerprint: str, code: str | None = None) -> tuple[dict, list]:
    """(meta, arrays) of a file ``save_arrays`` wrote for ``fingerprint`` with this code.

    Nothing in the file can run code: the header is JSON, the arrays are read with
    ``allow_pickle=False`` and only after the format, code version and fingerprint
    match.  Raises StoredFileError saying why the file is not this run's.
    """
    special = special_file(path)
    if special:
        raise StoredFileError(f"{special}, not a file: never read")
    try:
        with open(path, "rb") as stream:
            if stream.read(4) != _ZIP_MAGIC:
                raise StoredFileError("not a foltr_jax .npz file (an old pickle or foreign data)")
        with np.load(path, allow_pickle=False) as z:
            if _META not in z.files:
                raise StoredFileError("no foltr_jax header")
            header = json.loads(str(z[_META][()]))
            if not isinstance(header, dict) or header.get("format") != ARRAYS_FORMAT:
                raise StoredFileError("not a foltr_jax arrays file")
            if header.get("version") != ARRAYS_VERSION:
                raise StoredFileError(f"format version {header.get('version')!r}")
            if header.get("code") != (code or code_version()):
                plugins = " or plugin files" if _USER_CODE else ""
                plugins += " or under other JAX_*/XLA_FLAGS numerics variables"
                raise StoredFileError(
                    f"written by other code{plugins} (version {header.get('code')}, "
                    f"this is {code or code_version()})"
                )
            if header.get("fingerprint") != fingerprint:
                raise StoredFileError("written by a run of other settings or data")
            count = header.get("arrays")
            if not isinstance(count, int) or sorted(z.files) != sorted(
                [_META] + [f"a{i}" for i in range(count)]
            ):
                raise StoredFileError("its arrays do not match its header")
            arrays = [z[f"a{i}"] for i in range(count)]
            if header.get("sha256") != arrays_digest(arrays):
                raise StoredFileError("its arrays do not match their checksum (damaged or swapped)")
    except StoredFileError:
        raise
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        raise StoredFileError(f"unreadable ({type(error).__name__}: {error})") from None
    for a in arrays:
        if a.dtype.kind not in "biuf":
            raise StoredFileError(f"an array of dtype {a.dtype}")
    meta = header.get("meta")
    if not isinstance(meta, dict):
        raise StoredFileError("no metadata")
    return meta, arrays


def to_plain(value, arrays: list):
    """``value`` (dicts with str keys, lists, tuples, arrays, numbers, strings, None) as
    JSON, its arrays appended to ``arrays``; ``from_plain`` builds it back."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"value": value}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"dict": {k: to_plain(v, arrays) for k, v in value.items()}}
    if isinstance(value, (list, tuple)):
        return {type(value).__name__: [to_plain(v, arrays) for v in value]}
    if isinstance(value, np.generic) or hasattr(value, "__array__"):
        arrays.append(np.asarray(value))
        return {"array": len(arrays) - 1}
    raise TypeError(f"cannot store a {type(value).__name__} as plain data")


def from_plain(plain, arrays: list):
    """The value ``to_plain`` stored: only dicts, lists, tuples, arrays and JSON scalars
    are built (StoredFileError for anything else)."""
    if not isinstance(plain, dict) or len(plain) != 1:
        raise StoredFileError("malformed plain data")
    ((kind, body),) = plain.items()
    if kind == "value" and (body is None or isinstance(body, (bool, int, float, str))):
        return body
    if kind == "dict" and isinstance(body, dict):
        return {k: from_plain(v, arrays) for k, v in body.items()}
    if kind in ("list", "tuple") and isinstance(body, list):
        items = [from_plain(v, arrays) for v in body]
        return items if kind == "list" else tuple(items)
    if kind == "array" and isinstance(body, int) and 0 <= body < len(arrays):
        return arrays[body]
    raise StoredFileError(f"malformed plain data ({kind!r})")
