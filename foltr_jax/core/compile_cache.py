"""Compiled programs remembered across processes: JAX's persistent compilation cache.

A run's programs take seconds to compile (tens on a loaded machine); the same program
compiled again in a later process is read back from disk instead.  ``configure`` turns
JAX's persistent compilation cache on in one folder per user, machine and JAX version;
importing foltr_jax calls it with no setting, so the Python API uses it by default, and
every binary calls it again with its ``--compile_cache`` flag before anything compiles.

Where the programs go, the first that applies:

1. ``setting`` (a binary's ``--compile_cache``): a folder, or ``none`` (off);
2. ``$FOLTR_JAX_COMPILE_CACHE``: a folder, or ``none`` (off);
3. JAX's own setting, left as it is: ``JAX_COMPILATION_CACHE_DIR`` or a
   ``jax.config.update("jax_compilation_cache_dir", ...)`` made before, or
   ``jax_enable_compilation_cache`` set to False (off);
4. ``$FOLTR_JAX_CACHE/jax`` (the datasets' cache folder), by default
   ``~/.cache/foltr_jax/jax``.

In 1, 2 and 4 the entries go in a subfolder named by ``key()``: the jax and jaxlib
versions, the machine and a digest of its CPU's instruction-set flags.  JAX's own key of
an entry already holds the jaxlib version, the backend's platform and version (e.g. the
CUDA version), the devices' kind and topology, the XLA flags and compile options and the
program itself, but on a CPU the device is only "cpu": the subfolder keeps a program
compiled for one instruction set from being loaded on a machine without it (a home
folder shared by several machines), and entries of an older JAX from being looked at.

Small programs are cached too (JAX's default skips those compiled in under a second):
``jax_persistent_cache_min_compile_time_secs`` is set to 0 unless the user set it
(``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS``, or a value other than JAX's default);
JAX's minimum entry size is 0 (every size) on a local disk.

Several processes may share one folder (the claims' and batch's parallel runs, a user's
runs beside them): an entry is written to a temporary file and renamed into place
(``files.write_atomically``), so a process reads a whole entry or none, and a killed
writer leaves a ``.tmp`` file, never a truncated entry.  JAX (0.10) writes entries in
place; ``_whole_entries`` makes its writes go through the rename.  An entry found
unreadable is compiled again, with JAX's warning.  Results do not depend on the cache:
a program read back is the program compiled.  The folder holds executable code: like any
cache of programs it must not be writable by people one does not trust.  Nothing is ever
removed from it; deleting the folder is safe (programs are compiled again).
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import platform
from typing import Any

import jax

from foltr_jax.core import files

# JAX's options: attributes of jax.config made at run time, which type checkers cannot see.
_JAX_CONFIG: Any = jax.config

ENV = "FOLTR_JAX_COMPILE_CACHE"
OFF = "none"
_JAX_DEFAULT_MIN_COMPILE_TIME = 1.0  # jax_persistent_cache_min_compile_time_secs
_STATE: dict[str, str | None] = {
    "folder": None
}  # the folder configure() last gave JAX (None: none of ours)


def _cpu_flags() -> str:
    """The CPU's instruction-set flags as Linux lists them (x86: "flags", Arm: "Features"),
    or what ``platform`` says elsewhere."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            for line in info:
                name, _, value = line.partition(":")
                if name.strip() in ("flags", "Features"):
                    return " ".join(sorted(value.split()))
    except OSError:
        pass
    return platform.processor()


def key() -> str:
    """The subfolder of this JAX and machine, e.g. ``jax-0.10.2-jaxlib-0.10.2-x86_64-1a2b3c4d``."""
    from jax._src.lib import version_str as jaxlib_version

    cpu = hashlib.sha256(_cpu_flags().encode()).hexdigest()[:8]
    return f"jax-{jax.__version__}-jaxlib-{jaxlib_version}-{platform.machine()}-{cpu}"


def default_root() -> pathlib.Path:
    """``$FOLTR_JAX_CACHE/jax`` if that variable is set (and non-empty), else
    ``~/.cache/foltr_jax/jax``."""
    env = os.environ.get("FOLTR_JAX_CACHE")
    root = pathlib.Path(env).expanduser() if env else pathlib.Path.home() / ".cache" / "foltr_jax"
    return root / "jax"


def folder() -> str | None:
    """The folder JAX reads and writes compiled programs in now; None when the cache is
    off."""
    if not _JAX_CONFIG.jax_enable_compilation_cache:
        return None
    return _JAX_CONFIG.jax_compilation_cache_dir


def configure(setting: str | None = None) -> str | None:
    """Turns the persistent compilation cache on (or off) as the module doc says;
    ``setting``: a folder, ``none``, or None/empty (the environment or the default).
    Returns the folder in use (None: off).  Call it before the first compilation whose
    program should be remembered; a later call moves the cache (JAX's is reset)."""
    setting = setting or os.environ.get(ENV) or None
    current = _JAX_CONFIG.jax_compilation_cache_dir
    if setting is not None and setting.strip().lower() == OFF:
        jax.config.update("jax_enable_compilation_cache", False)
        _reset()
        return None
    if setting is None:
        if current is not None and current != _STATE["folder"]:
            return folder()  # JAX's own setting (JAX_COMPILATION_CACHE_DIR): as it is
        if not _JAX_CONFIG.jax_enable_compilation_cache:
            return None  # turned off in JAX's own config: as it is
        root = default_root()
    else:
        root = pathlib.Path(setting).expanduser()
    path = str(root.absolute() / key())
    if path != current:
        jax.config.update("jax_compilation_cache_dir", path)
        _reset()
    _STATE["folder"] = path
    if (
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ
        and _JAX_CONFIG.jax_persistent_cache_min_compile_time_secs == _JAX_DEFAULT_MIN_COMPILE_TIME
    ):
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    _whole_entries()
    return folder()


def _reset() -> None:
    """JAX opens its cache once, at the first compilation: a moved or closed cache is
    opened again at the next one."""
    from jax.experimental.compilation_cache import compilation_cache

    compilation_cache.reset_cache()


def _whole_entries() -> None:
    """Makes JAX's file cache write each entry to a temporary file and rename it into
    place (once per process).  Only where JAX's cache is what this was written against
    (``jax._src.lru_cache.LRUCache`` in a local folder, without LRU eviction, which takes
    a lock of its own): anything else keeps JAX's own writing."""
    try:
        from jax._src import lru_cache
    except ImportError:
        return
    cache = getattr(lru_cache, "LRUCache", None)
    suffix = getattr(lru_cache, "_CACHE_SUFFIX", None)
    put = getattr(cache, "put", None)
    if cache is None or put is None or not isinstance(suffix, str) or getattr(put, "_whole", False):
        return

    def whole_put(self, key: str, value: bytes) -> None:
        try:
            local = os.path.isdir(os.fspath(self.path))  # not, e.g., a gs:// bucket
        except (AttributeError, TypeError):
            local = False
        if getattr(self, "eviction_enabled", True) or not local:
            return put(self, key, value)
        if not key:
            raise ValueError("key cannot be empty")
        entry = pathlib.Path(os.fspath(self.path)) / f"{key}{suffix}"
        if not entry.exists():
            files.write_atomically(entry, lambda stream: stream.write(value))

    whole_put._whole = True  # type: ignore[attr-defined]  # marks the wrapped put
    whole_put.__doc__ = put.__doc__
    cache.put = whole_put
