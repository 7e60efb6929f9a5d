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

JAX keys an entry by the lowered program, so a process traces and lowers every program
before it can look it up.  ``compiled`` (the engine's run programs: the initial evaluation's
and the chunk of rounds') keys a program by what tracing it reads instead and keeps JAX's
serialised executable in ``programs/`` of the same folder: a later process reads it back
without tracing or lowering (see ``compiled`` and ``program_key``).

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

import functools
import hashlib
import os
import pathlib
import platform
import zlib
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


# ---------------------------------------------------------------------------------------
# Whole programs remembered: a run's compiled programs read back without tracing them.
#
# JAX's cache above is keyed by the lowered program, so a process still traces and lowers
# every program before it can look it up: seconds for a run's chunk of rounds (the main
# job's: 2.4 s tracing and 1.7 s lowering of its 4.1 s, under load).  ``compiled`` keys a
# program by everything its tracing reads instead, and keeps the executable JAX compiled
# for it (``jax.experimental.serialize_executable``) in ``programs/`` of the same folder.
# ---------------------------------------------------------------------------------------

PROGRAMS = "programs"  # the subfolder of whole programs in the cache folder
_PROGRAM_FORMAT = "foltr_jax program 3"  # 1 kept programs JAX had read back; 2 rebuilt
# the outputs' named tuples as new classes, which a chunk's next call refused


_IN_PROCESS: dict[str, Any] = {}  # entry path -> program, the ones this process used last
_IN_PROCESS_PROGRAMS = 16


class Uncacheable(Exception):
    """A program whose key cannot be made honestly: it is compiled as usual, not kept."""


def compiled(jitted, static_args: tuple, dynamic_args: tuple, name: str):
    """``jitted.lower(*static_args, *dynamic_args).compile()``: a ``jax.stages.Compiled``
    taking ``dynamic_args``.  With the cache on (``folder()``), the program is read back from
    ``programs/`` when a process with the same key compiled it before (nothing traced,
    lowered or compiled), else compiled, and kept there when XLA compiled it (not when JAX
    read it back from its own cache: ``_compile``).  The key (``program_key``) holds
    what tracing reads: the function, the static arguments' values, the dynamic arguments'
    structure, shapes, types and shardings, the source of every module loaded (and of all
    of foltr_jax), JAX's options and numerics variables, the devices.  A program whose key
    cannot be made (an argument of an unknown kind, code without a source file, several
    processes) is compiled as usual and not kept; an unreadable entry is compiled again."""
    root = folder()
    key = None
    if root is not None:
        try:
            key = program_key(jitted, static_args, dynamic_args, name)
        except Uncacheable:
            key = None
    if root is None or key is None:
        return jitted.lower(*static_args, *dynamic_args).compile()
    path = pathlib.Path(root) / PROGRAMS / f"{name}-{key}.bin"
    program = _IN_PROCESS.pop(str(path), None) or _load_program(path, dynamic_args)
    if program is None:
        program, fresh = _compile(jitted, static_args, dynamic_args)
        if fresh:
            _store_program(path, program)
    _IN_PROCESS[str(path)] = program  # the most recent last
    while len(_IN_PROCESS) > _IN_PROCESS_PROGRAMS:
        _IN_PROCESS.pop(next(iter(_IN_PROCESS)))
    return program


_JAX_CACHE_EVENTS = {
    "/jax/compilation_cache/compile_requests_use_cache": "requests",
    "/jax/compilation_cache/cache_misses": "misses",
    "/jax/compilation_cache/cache_hits": "hits",
}


def _compile(jitted, static_args: tuple, dynamic_args: tuple):
    """(the program compiled, whether XLA compiled it just now).  Only such a program is
    kept: one JAX read back from its own cache (or from its memory, where it may have come
    from that cache) serialises without parts of its code (jaxlib 0.10.2: read back again,
    it fails with "Function ... not found")."""
    seen = {name: 0 for name in _JAX_CACHE_EVENTS.values()}

    def listen(event: str, **kwargs) -> None:
        if event in _JAX_CACHE_EVENTS:
            seen[_JAX_CACHE_EVENTS[event]] += 1

    jax.monitoring.register_event_listener(listen)
    try:
        program = jitted.lower(*static_args, *dynamic_args).compile()
    finally:
        jax.monitoring.unregister_event_listener(listen)
    return program, seen == {"requests": 1, "misses": 1, "hits": 0}


def program_key(jitted, static_args: tuple, dynamic_args: tuple, name: str) -> str:
    """SHA-256 of what ``compiled``'s program depends on (module doc); raises Uncacheable
    when some part cannot be named exactly."""
    from jax._src.lib import version_str as jaxlib_version

    if jax.process_count() > 1:
        raise Uncacheable("several processes")
    function = getattr(jitted, "__wrapped__", None)
    if function is None:
        raise Uncacheable("not a jitted function")
    parts = [
        _PROGRAM_FORMAT,
        name,
        _canonical(function),
        f"jax {jax.__version__} jaxlib {jaxlib_version} {key()}",
        _canonical(static_args),
        _arguments(dynamic_args),
        _environment(),
        _code(),
    ]
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()


def _canonical(value) -> str:
    """A text that names ``value`` exactly (two values with one text trace alike), from
    its contents, never from ``repr`` alone; Uncacheable for a kind it cannot name."""
    import dataclasses
    import enum
    import functools
    import types

    import numpy as np

    if value is None or isinstance(value, (bool, int, str, bytes)):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, float):
        return f"float:{value.hex()}"
    if isinstance(value, enum.Enum):
        return f"enum:{_qualified(type(value))}.{value.name}"
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        if array.dtype.hasobject:
            raise Uncacheable("an array of objects")
        data = hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()
        return f"array:{array.dtype.str}{array.shape}{data}"
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a NamedTuple
        fields = ",".join(_canonical(v) for v in value)
        return f"namedtuple:{_qualified(type(value))}{value._fields}({fields})"
    if type(value) in (tuple, list, frozenset, set):
        items = [_canonical(v) for v in value]
        if isinstance(value, (frozenset, set)):
            items.sort()
        return f"{type(value).__name__}({','.join(items)})"
    if type(value) is dict:
        pairs = sorted(f"{_canonical(k)}={_canonical(v)}" for k, v in value.items())
        return f"dict({','.join(pairs)})"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = [f.name for f in dataclasses.fields(value)]
        # and what was set beside the fields, but for values cached from them
        names += sorted(
            k
            for k in getattr(value, "__dict__", {})
            if k not in names
            and not isinstance(getattr(type(value), k, None), functools.cached_property)
        )
        fields = ",".join(f"{k}={_canonical(getattr(value, k))}" for k in names)
        return f"dataclass:{_qualified(type(value))}({fields})"
    if isinstance(value, functools.partial):
        return (
            f"partial:{_canonical(value.func)}{_canonical(value.args)}"
            f"{_canonical(dict(value.keywords))}"
        )
    if isinstance(value, types.FunctionType):
        if value.__closure__ or value.__defaults__ or value.__kwdefaults__:
            raise Uncacheable(f"{value.__qualname__} holds values of its own")
        return f"function:{_qualified(value)}"
    if isinstance(value, type):
        return f"class:{_qualified(value)}"
    raise Uncacheable(f"a {type(value).__name__} argument")


def _qualified(thing) -> str:
    """module.qualname of a module-level function or class (the module's source is in the
    key); Uncacheable for one defined inside a function or a lambda."""
    name = f"{thing.__module__}.{thing.__qualname__}"
    if "<" in name:
        raise Uncacheable(f"{name} is not defined at a module's top level")
    return name


def _arguments(arguments: tuple) -> str:
    """The dynamic arguments' tree, and the shape, type, weak type and sharding of every
    leaf (their values are the program's inputs, not part of it)."""
    leaves, tree = jax.tree_util.tree_flatten(arguments)
    described = [str(tree)]
    for leaf in leaves:
        if not isinstance(leaf, jax.Array):
            raise Uncacheable(f"a {type(leaf).__name__} leaf")
        described.append(f"{leaf.aval.str_short()} {leaf.weak_type} {leaf.sharding!r}")
    return "\n".join(described)


# JAX's options that say what is logged, dumped or cached, never what a program computes
_NOT_IN_PROGRAMS = frozenset(
    {
        "jax_log_compiles",
        "jax_explain_cache_misses",
        "jax_logging_level",
        "jax_debug_log_modules",
        "jax_log_checkpoint_residuals",
        "jax_compilation_cache_dir",
        "jax_enable_compilation_cache",
        "jax_persistent_cache_min_compile_time_secs",
        "jax_persistent_cache_min_entry_size_bytes",
        "jax_compilation_cache_max_size",
        "jax_raise_persistent_cache_errors",
        "jax_pprint_use_color",
        "jax_traceback_filtering",
        "jax_tracer_error_num_traceback_frames",
        "jax_dump_ir_to",
        "jax_dump_ir_modes",
    }
)


def _environment() -> str:
    """JAX's options, the numerics variables (``files.NUMERICS_VARIABLES``), XLA's options,
    the backend and its devices."""
    from jax._src import config as jax_config

    options = sorted(
        (k, repr(v)) for k, v in _JAX_CONFIG.values.items() if k not in _NOT_IN_PROGRAMS
    )
    # and the options set in a context (``with jax.default_matmul_precision(...)``)
    context = []
    for value in jax_config.trace_context():
        slots = getattr(type(value), "__slots__", None)
        if type(value).__name__ == "AxisEnv" and slots:  # the named axes of vmap and shard_map
            value = [(slot, repr(getattr(value, slot))) for slot in slots if slot[:2] != "__"]
        if " at 0x" in repr(value):
            raise Uncacheable(f"JAX's option {value!r}")
        context.append(repr(value))
    devices = [(d.platform, d.device_kind, d.id, d.process_index) for d in jax.devices()]
    from jax._src.lib import xla_client

    backend = jax.devices()[0].client
    # XLA's options as this process parsed them (XLA_FLAGS read when the backend started,
    # whatever the variable says now)
    xla = hashlib.sha256(xla_client.CompileOptions().SerializeAsString()).hexdigest()
    return repr(
        (options, context, files.numerics_environment(), xla, backend.platform,
         backend.platform_version, devices)
    )  # fmt: skip


_SEEN: dict[tuple, tuple] = {}  # (module name, id, file) -> (module, how _code names it)


def _code() -> str:
    """foltr_jax's sources (``files.source_version``), and every other loaded module's
    source file by content (site-packages' and the standard library's by path, size and
    modification time: their versions), each looked at once a process (the code a process
    runs is what it loaded); Uncacheable when a module of code has no file (``python -c``,
    a notebook's cells)."""
    import sys

    described = [files.source_version()]
    for module_name, module in sorted(sys.modules.items(), key=lambda item: item[0]):
        path = getattr(module, "__file__", None)
        if path is None:
            if module_name == "__main__":
                raise Uncacheable("__main__ has no source file")
            continue  # built in, or a namespace package
        seen = (module_name, id(module), path)
        if seen not in _SEEN:  # the module is kept with it: its id is not reused
            _SEEN[seen] = (module, _describe(module_name, path))
        if _SEEN[seen][1]:
            described.append(_SEEN[seen][1])
    return "\n".join(described)


def _describe(module_name: str, path) -> str:
    """How ``_code`` names a module's file: '' for foltr_jax's (in ``source_version``)."""
    try:
        resolved, place = _place(path)
        if place == "package":
            return ""
        status = os.stat(resolved)
        if place == "installed":
            return repr((resolved, status.st_size, status.st_mtime_ns))
        with open(resolved, "rb") as source:
            return f"{resolved} {hashlib.sha256(source.read()).hexdigest()}"
    except (OSError, TypeError, ValueError):
        raise Uncacheable(f"{module_name}'s file {path!r} cannot be read") from None


def _place(path: str) -> tuple:
    """(the absolute path of a module's file, "package" (foltr_jax), "installed" (the
    standard library, site-packages) or "source" (anything else: a project, a plugin))."""
    resolved = os.path.abspath(path)
    package, installed = _places()
    if resolved.startswith(package):
        place = "package"
    elif resolved.startswith(installed):
        place = "installed"
    else:
        place = "source"
    return resolved, place


@functools.cache
def _places() -> tuple:
    """(foltr_jax's folder, the standard library's and site-packages' folders), each as
    given and as its real path, ending in a separator."""
    import sysconfig

    def both(folder: str) -> tuple:
        return tuple({os.path.abspath(folder) + os.sep, os.path.realpath(folder) + os.sep})

    package = both(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = sysconfig.get_paths()
    installed = sum((both(paths[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib")), ())
    return package, installed


def _store_program(path: pathlib.Path, program) -> None:
    """Keeps ``program`` in ``path`` (a JSON line naming its outputs' tree, then JAX's
    serialised executable, zlib-compressed), written whole or not at all; a program JAX cannot serialise,
    or whose outputs' tree is not made of tuples, lists, dicts, None and named tuples, is
    not kept.  A full disk or an unwritable folder keeps nothing, silently: the cache is an
    optimisation."""
    import json

    from jax.experimental import serialize_executable

    try:
        payload, _, out_tree = serialize_executable.serialize(program)
        header = {"format": _PROGRAM_FORMAT, "outputs": _tree_to_json(out_tree)}
    except (Uncacheable, ValueError, NotImplementedError, TypeError):
        return
    line = json.dumps(header).encode() + b"\n"
    packed = zlib.compress(payload, 1)  # about a seventh of the size, in tens of milliseconds
    try:
        files.write_atomically(path, lambda stream: (stream.write(line), stream.write(packed)))
    except OSError:
        return


def _load_program(path: pathlib.Path, dynamic_args: tuple):
    """The program kept in ``path`` (``_store_program``), or None when there is none or it
    cannot be read back (then it is compiled again and replaced, with a warning)."""
    import json
    import warnings

    from jax.experimental import serialize_executable

    try:
        with open(path, "rb") as stream:
            line, payload = stream.readline(), stream.read()
    except FileNotFoundError:
        return None
    try:
        header = json.loads(line)
        if not isinstance(header, dict) or header.get("format") != _PROGRAM_FORMAT:
            raise ValueError("not a program of this format")
        out_tree = _tree_from_json(header["outputs"])
        in_tree = jax.tree_util.tree_structure((tuple(dynamic_args), {}))
        return serialize_executable.deserialize_and_load(
            zlib.decompress(payload), in_tree, out_tree
        )
    except Exception as error:  # noqa: BLE001  (any failure: compiled again)
        warnings.warn(
            f"ignoring the compiled program {path} ({type(error).__name__}: {error}); it is "
            "compiled again",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


def _tree_to_json(tree):
    """A JSON form of a tree of tuples, lists, dicts (string keys), None and named tuples;
    Uncacheable for other nodes."""
    if tree.num_nodes == 1 and tree.num_leaves == 1:
        return "*"
    kind, data = tree.node_data()
    children = [_tree_to_json(child) for child in tree.children()]
    if kind is type(None):
        return None
    if kind in (tuple, list):
        return {kind.__name__: children}
    if kind is dict and all(isinstance(k, str) for k in data):
        return {"dict": list(data), "children": children}
    if isinstance(kind, type) and issubclass(kind, tuple) and hasattr(kind, "_fields"):
        where = f"{kind.__module__}:{kind.__qualname__}"
        if _named_tuple(where, list(kind._fields)) is not kind:  # made in a function
            where = kind.__name__  # read back as a look-alike: never an input again
        return {"namedtuple": where, "fields": list(kind._fields), "children": children}
    raise Uncacheable(f"an output node {kind!r}")


def _named_tuple(where: str, fields: list):
    """The named tuple class ``module:qualname`` with these fields, from a module this
    process has loaded (None when there is none: a class made in a function, a module not
    loaded or renamed).  Never imports: a name read from the cache runs no code.  A
    program's outputs are rebuilt with the program's own classes: its state goes back in as
    the next chunk's input, whose tree must be the one the program was compiled with."""
    import sys

    module_name, _, qualname = where.partition(":")
    found = sys.modules.get(module_name)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    is_named_tuple = isinstance(found, type) and issubclass(found, tuple)
    if is_named_tuple and list(getattr(found, "_fields", ())) == fields:
        return found
    return None


def _tree_from_json(form):
    """The tree ``_tree_to_json`` wrote: named tuples as their own classes, imported by
    name (ValueError when one is gone or has other fields), or, for one made in a function
    (not importable: a round's metrics), a new class of its name and fields."""
    import collections

    def build(node):
        if node == "*":
            return 0
        if node is None:
            return None
        if "tuple" in node:
            return tuple(build(c) for c in node["tuple"])
        if "list" in node:
            return [build(c) for c in node["list"]]
        if "dict" in node:
            return dict(zip(node["dict"], (build(c) for c in node["children"])))
        where = node["namedtuple"]
        if ":" in where:  # the class itself, imported by name
            kind = _named_tuple(where, node["fields"])
            if kind is None:
                raise ValueError(f"the outputs' named tuple {where} is gone")
        else:  # a class made in a function (metrics): a new class of its name and fields
            kind = collections.namedtuple(where, node["fields"])
        return kind(*(build(c) for c in node["children"]))

    return jax.tree_util.tree_structure(build(form))
