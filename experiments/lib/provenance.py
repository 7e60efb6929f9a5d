"""What made a result: recorded in every results.json ("provenance"), and compared before a
batch or the claims check reuses a finished run.

::

    "provenance": {
      "command": ["experiments.fpdgd", "--rounds=4", ...],  # the program and its arguments,
                                                             # less --output_dir
      "flags": {"rounds": 4, ...},      # every flag of the program as it was read (flag
                                        # files included), less --output_dir
      "code": "<16 hex digits>",        # SHA-256 of foltr_jax's and the binaries' sources,
                                        # with the jax and numpy versions
      "foltr_jax": "<version>",
      "plugins": [{"plugin": "x.py", "path": "/abs/x.py", "sha256": "..."}],
      "data_files": [{"path": "/abs/train.txt", "bytes": 123, "sha256": "..."}],
      "flag_files": [{"path": "/abs/run.flags", "sha256": "..."}]  # --flagfile, as named
    }

``differences(recorded, argv)`` says what differs between a results file's provenance and
the command ``argv`` as it would run now (arguments, code, plugins' sources, data files'
contents, the contents of the flag files its command line names): a run is reused only when
nothing does.
"""

from __future__ import annotations

import hashlib
import math
import os
import pathlib
import sys

from absl import flags

import foltr_jax
from foltr_jax.core import files

FLAGS = flags.FLAGS
EXPERIMENTS_DIR = pathlib.Path(__file__).resolve().parents[1]  # experiments/

_STATE: dict = {"program": None, "data": []}
_HASHES: dict = {}  # (path, device, inode, size, mtime) -> sha256: each file hashed once


def start(program: str) -> None:
    """Called as a binary starts (``program.main``): forgets the data files of an earlier
    call in this process."""
    _STATE["program"] = f"experiments.{program}"
    _STATE["data"] = []


def sha256_file(path) -> str:
    """SHA-256 of the bytes of the regular file at ``path`` (OSError if it cannot be read),
    remembered while the file keeps its identity, size and time of change."""
    path = os.path.abspath(path)
    if files.special_file(path):
        raise OSError(f"{path} is {files.special_file(path)}, not a file")
    info = os.stat(path)
    key = (path, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    if key not in _HASHES:
        digest = hashlib.sha256()
        with open(path, "rb") as stream:
            for block in iter(lambda: stream.read(1 << 22), b""):
                digest.update(block)
        _HASHES[key] = digest.hexdigest()
    return _HASHES[key]


def note_data(*paths) -> None:
    """Records the data files a run reads (path, size and SHA-256 of their content)."""
    for path in paths:
        path = os.path.abspath(path)
        if any(entry["path"] == path for entry in _STATE["data"]):
            continue
        digest = sha256_file(path)
        _STATE["data"].append({"path": path, "bytes": os.stat(path).st_size, "sha256": digest})


def code() -> str:
    """The code version of foltr_jax and the binaries (the plugins are listed apart)."""
    return files.source_version(EXPERIMENTS_DIR, EXPERIMENTS_DIR / "lib")


def _take_flag(args, name: str) -> tuple[list, list]:
    """``args`` less the flag ``name`` (``--name=X``, ``-name=X``, or the flag and its value
    as two arguments), and the values it was given, in order."""
    rest, values, args = [], [], [str(a) for a in args]
    i = 0
    while i < len(args):
        flag, equals, value = args[i].lstrip("-").partition("=")
        if not args[i].startswith("-") or flag != name:
            rest.append(args[i])
        elif equals:
            values.append(value)
        else:  # the value is the next argument
            values.append(args[i + 1] if i + 1 < len(args) else "")
            i += 1
        i += 1
    return rest, values


def without_output_dir(args) -> list:
    """``args`` less --output_dir: where a run writes is not what it computes."""
    return _take_flag(args, "output_dir")[0]


def command_of(argv) -> list:
    """The provenance "command" of a command line ``[python, -m, module, args...]`` (or
    ``[program, args...]``)."""
    argv = [str(a) for a in argv]
    if len(argv) >= 3 and argv[1] == "-m":
        return [argv[2], *without_output_dir(argv[3:])]
    return [argv[0], *without_output_dir(argv[1:])]


def flag_files(args) -> list:
    """The files ``--flagfile`` names in ``args``, absolute, in order: what they hold is part
    of the command (a flag file named inside a flag file is not followed)."""
    values = _take_flag(args, "flagfile")[1]
    return [os.path.abspath(v) for value in values for v in value.split(",") if v]


def _flag_file_entry(path: str) -> dict:
    try:
        return {"path": path, "sha256": sha256_file(path)}
    except OSError:  # absl has read it, or the run would not have started
        return {"path": path, "sha256": None}


def _plain(value):
    """A flag's value as JSON takes it (a non-finite float as its name)."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def flag_values() -> dict:
    """Every flag the program defines (absl's own left out) as it was read, less
    --output_dir."""
    found = {}
    for module, defined in FLAGS.flags_by_module_dict().items():
        if module.startswith("absl."):
            continue
        for flag in defined:
            if flag.name != "output_dir":
                found[flag.name] = _plain(flag.value)
    return dict(sorted(found.items()))


def record() -> dict:
    """results.json's "provenance" (the structure above) of this process's run."""
    from experiments.lib import plugins

    program = _STATE["program"] or pathlib.Path(sys.argv[0]).stem
    return {
        "command": [program, *without_output_dir(sys.argv[1:])],
        "flags": flag_values(),
        "code": code(),
        "foltr_jax": foltr_jax.__version__,
        "plugins": plugins.loaded(),
        "data_files": [dict(entry) for entry in _STATE["data"]],
        "flag_files": [_flag_file_entry(path) for path in flag_files(sys.argv[1:])],
    }


def differences(recorded, argv) -> str | None:
    """What differs between the provenance ``recorded`` in a results file and the command
    line ``argv`` as it would run now, in words; None when nothing does."""
    if not isinstance(recorded, dict):
        return "it records no provenance (an older version wrote it)"
    expected = command_of(argv)
    found = recorded.get("command")
    if found != expected:
        if not (isinstance(found, list) and found and found[0] == expected[0]):
            return f"it was made by {found[:1] if isinstance(found, list) else found!r}"
        before, now = set(map(str, found[1:])), set(expected[1:])
        gone, new = sorted(before - now), sorted(now - before)
        if gone or new:
            then, now = ", ".join(gone) or "none", ", ".join(new) or "none"
            return f"other arguments ({then} then; {now} now)"
        return "the same arguments in another order"
    if recorded.get("code") != code():
        return f"other code (version {recorded.get('code')}; this is {code()})"
    for entry in recorded.get("plugins") or []:
        problem = _file_changed(entry, "plugin")
        if problem:
            return problem
    for entry in recorded.get("flag_files") or []:
        problem = _file_changed(entry, "flag file")
        if problem:
            return problem
    data = recorded.get("data_files")
    if not isinstance(data, list):
        return "it records no data files"
    for entry in data:
        problem = _file_changed(entry, "data file")
        if problem:
            return problem
    return None


def _file_changed(entry, what: str) -> str | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), (str, type(None))):
        return f"an unreadable {what} entry"
    path = entry.get("path")
    if not isinstance(path, str):
        return None if what == "plugin" else f"a {what} without a path"
    try:
        now = sha256_file(path)
    except OSError:
        return f"the {what} {path} cannot be read now"
    if now != entry.get("sha256"):
        return f"the {what} {path} has changed since"
    return None
