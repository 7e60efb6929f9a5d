"""What made a result: recorded in every results.json ("provenance"), and compared before a
batch, the claims check or a report reuses a finished run.

::

    "provenance": {
      "command": ["experiments.fpdgd", "--rounds=4", ...],  # the program and its arguments,
                                                             # less --output_dir
      "arguments": ["--rounds=4", "--seed=3", ...],  # the arguments with every --flagfile read
                                                     # in (nested ones too), less --output_dir
      "flags": {"rounds": 4, ...},      # every flag of the program as it was read (flag
                                        # files included), less --output_dir
      "code": "<16 hex digits>",        # SHA-256 of foltr_jax's and the binaries' sources,
                                        # with the jax and numpy versions
      "foltr_jax": "<version>",
      "plugins": [{"plugin": "x.py", "path": "/abs/x.py", "sha256": "..."}],
      "data_files": [{"path": "/abs/train.txt", "bytes": 123, "sha256": "..."}],
      "flag_files": [{"path": "/abs/run.flags", "sha256": "..."}],  # every flag file read
      "dataset_cache": {"format": 2, "parser": 2},  # the versions of the cache's entries
      "runtime": {"jax": "0.10.2", "jaxlib": "0.10.2", "numpy": "2.3.1"},
      "device": {"platform": "cpu", "kind": "cpu"},   # the kind of device it computed on
      "environment": {"JAX_ENABLE_X64": "1"}         # the variables that change numbers, as set
    }

``record`` fills ``foltr_jax.engine.results_files.provenance_record`` (which hashes the data
files and reads the versions, the device and the environment) with the binary's command line,
flags, code version, plugins and flag files.

``same_run(recorded, argv)`` is the one judge of "same run": it says what differs between a
results file's provenance and the command ``argv`` as it would run now, in this process's
environment (``COMPARED`` lists what it compares, in order), or None when nothing does.
``experiments.batch``, ``experiments.claims`` and the batch's report reuse or read a run
only when it says None; a run's own resume compares its checkpoint's code version, which
covers the same environment variables (``files.code_version``).
"""

from __future__ import annotations

import math
import os
import pathlib
import sys

from absl import flags

from foltr_jax.core import files
from foltr_jax.engine import results_files

FLAGS = flags.FLAGS
EXPERIMENTS_DIR = pathlib.Path(__file__).resolve().parents[1]  # experiments/

_STATE: dict = {"program": None, "data": [], "arguments": None, "flag_files": []}


def start(program: str) -> None:
    """Called as a binary starts (``program.main``): forgets the data files of an earlier
    call in this process, and reads the flag files of its command line (what they hold now
    is what absl read)."""
    _STATE["program"] = f"experiments.{program}"
    _STATE["data"] = []
    _STATE["arguments"] = None
    _note_arguments()  # the flag files as the run read them


def note_data(*paths) -> None:
    """Records the data files a run reads (path, size and SHA-256 of their content)."""
    for path in paths:
        path = os.path.abspath(path)
        if any(entry["path"] == path for entry in _STATE["data"]):
            continue
        _STATE["data"].append(results_files.data_file(path))


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


class FlagFileError(ValueError):
    """A flag file that cannot be read (missing, a folder or FIFO, not text)."""


def _flag_file_name(arg: str) -> str | None:
    """The file of a ``--flagfile=F``/``-flagfile=F`` argument (absl's spelling), else None."""
    for prefix in ("--flagfile=", "-flagfile="):
        if arg.startswith(prefix):
            return os.path.expanduser(arg[len(prefix) :].strip())
    return None


def expand_flag_files(args) -> tuple[list, list]:
    """(``args`` with every ``--flagfile`` read in where it stands, as absl reads them: nested
    flag files too, comments and blank lines left out, nothing after a lone ``--``; the flag
    files read, [{"path": absolute, "sha256": of its content}] in the order read).
    FlagFileError naming a file that cannot be read (a folder or FIFO is never opened)."""
    read: list = []

    def lines(name: str, stack: tuple) -> list:
        if not name or name in stack:  # absl: an empty name is nothing, a cycle is cut
            return []
        path = os.path.abspath(name)
        try:
            if files.special_file(path):
                raise OSError(f"it is {files.special_file(path)}")
            with open(name) as stream:  # as absl opens it
                text = stream.readlines()
            read.append({"path": path, "sha256": results_files.sha256_file(path)})
        except (OSError, UnicodeDecodeError) as error:
            why = getattr(error, "strerror", None) or error
            raise FlagFileError(f"the flag file {path} cannot be read ({why})") from None
        found = []
        for line in text:
            if line.isspace() or line.startswith(("#", "//")):
                continue
            nested = _flag_file_name(line)
            if nested is not None:
                found += lines(nested, (*stack, name))
            else:
                found.append(line.strip())
        return found

    args, out, i = [str(a) for a in args], [], 0
    while i < len(args):
        arg = args[i]
        if arg in ("--flagfile", "-flagfile"):
            if i + 1 >= len(args):
                raise FlagFileError("--flagfile with no file")
            out += lines(os.path.expanduser(args[i + 1]), ())
            i += 2
            continue
        name = _flag_file_name(arg)
        if name is not None:
            out += lines(name, ())
        else:
            out.append(arg)
            if arg == "--":
                out += args[i + 1 :]
                break
        i += 1
    return out, read


def flag_files(args) -> list:
    """The flag files ``args`` reads (nested ones too), absolute, in the order read."""
    return [entry["path"] for entry in expand_flag_files(args)[1]]


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


def _arguments(args) -> tuple[list, list]:
    """(the arguments with their flag files read in, less --output_dir; the flag files)."""
    expanded, read = expand_flag_files(args)
    return without_output_dir(expanded), read


def record() -> dict:
    """results.json's "provenance" (the structure above) of this process's run: the flag
    files as they were when the run started (``start``), the rest as it is now."""
    from experiments.lib import plugins

    program = _STATE["program"] or pathlib.Path(sys.argv[0]).stem
    if _STATE.get("arguments") is None:
        _note_arguments()
    return results_files.provenance_record(
        command=[program, *without_output_dir(sys.argv[1:])],
        arguments=_STATE["arguments"],
        flags=flag_values(),
        code=code(),
        plugins=plugins.loaded(),
        data_files=_STATE["data"],
        flag_files=_STATE["flag_files"],
    )


def _note_arguments() -> None:
    try:
        _STATE["arguments"], _STATE["flag_files"] = _arguments(sys.argv[1:])
    except FlagFileError:  # absl has read them, or the run would not have started
        _STATE["arguments"] = without_output_dir(sys.argv[1:])
        _STATE["flag_files"] = [{"path": p, "sha256": None} for p in _top_flag_files()]


def _top_flag_files() -> list:
    values = _take_flag(sys.argv[1:], "flagfile")[1]
    return [os.path.abspath(os.path.expanduser(v.strip())) for v in values if v.strip()]


def same_run(recorded, argv) -> str | None:
    """None when the provenance ``recorded`` in a results file is that of the command line
    ``argv`` (``[python, -m, module, args...]`` or ``[program, args...]``) as it would run
    now from this process (its environment, its device); else what differs, in words.

    Compared (``COMPARED``): the program; the arguments with every flag file read in,
    nested ones too, less --output_dir (in order: the last of a repeated flag wins); the
    content of every flag file read; the code version; every plugin's source; every data
    file's content; the dataset cache's format and parser versions; the jax, jaxlib and numpy
    versions; the environment variables that
    change numbers (``files.NUMERICS_VARIABLES``); the kind of device.  A file that records
    one of them not (an older version wrote it) is never the same run."""
    if not isinstance(recorded, dict):
        return "it records no provenance (an older version wrote it)"
    for check in _CHECKS.values():
        difference = check(recorded, argv)
        if difference:
            return difference
    return None


differences = same_run  # the name its first callers knew


def _program(recorded, argv):
    found, expected = recorded.get("command"), command_of(argv)
    if not (isinstance(found, list) and found and found[0] == expected[0]):
        return f"it was made by {found[:1] if isinstance(found, list) else found!r}"
    return None


def _arguments_differ(recorded, argv):
    found = recorded.get("arguments")
    if not (isinstance(found, list) and all(isinstance(a, str) for a in found)):
        return "it records no arguments with their flag files read in (an older version wrote it)"
    try:
        expected = _arguments(command_of(argv)[1:])[0]
    except FlagFileError as error:
        return str(error)
    if found == expected:
        return None
    before, now = set(found), set(expected)
    gone, new = sorted(before - now), sorted(now - before)
    if gone or new:
        then, now = ", ".join(gone) or "none", ", ".join(new) or "none"
        return f"other arguments ({then} then; {now} now)"
    return "the same arguments in another order or number"


def _flag_files_differ(recorded, argv):
    found = recorded.get("flag_files")
    if not isinstance(found, list):
        return "it records no flag files (an older version wrote it)"
    try:
        expected = _arguments(command_of(argv)[1:])[1]
    except FlagFileError as error:
        return str(error)
    for entry in found:
        if not isinstance(entry, dict):
            return "an unreadable flag file entry"
    paths = [entry.get("path") for entry in found]
    if paths != [entry["path"] for entry in expected]:
        return f"other flag files ({', '.join(map(str, paths)) or 'none'} then)"
    for then, now in zip(found, expected):
        if then.get("sha256") != now["sha256"]:
            return f"the flag file {now['path']} has changed since"
    return None


def _code_differs(recorded, argv):
    if recorded.get("code") != code():
        return f"other code (version {recorded.get('code')}; this is {code()})"
    return None


def _plugins_differ(recorded, argv):
    for entry in recorded.get("plugins") or []:
        problem = _file_changed(entry, "plugin")
        if problem:
            return problem
    return None


def _data_differ(recorded, argv):
    data = recorded.get("data_files")
    if not isinstance(data, list):
        return "it records no data files"
    for entry in data:
        problem = _file_changed(entry, "data file")
        if problem:
            return problem
    return None


def _mapping_differs(what: str, found, expected: dict, unset: str = "unset"):
    """'other <what> (a=1 then; a=2 now)' when the dicts differ, None when they do not."""
    if not isinstance(found, dict):
        return f"it records no {what} (an older version wrote it)"
    if found == expected:
        return None
    keys = sorted(set(found) | set(expected))
    changed = [k for k in keys if found.get(k) != expected.get(k)]

    def said(values):
        return ", ".join(f"{k}={values[k]}" if k in values else f"{k} {unset}" for k in changed)

    return f"other {what} ({said(found)} then; {said(expected)} now)"


def _dataset_cache_differs(recorded, argv):
    return _mapping_differs("dataset cache versions", recorded.get("dataset_cache"),
                            results_files.dataset_cache())  # fmt: skip


def _runtime_differs(recorded, argv):
    return _mapping_differs("versions", recorded.get("runtime"), results_files.runtime())


def _environment_differs(recorded, argv):
    return _mapping_differs(
        "numerics environment variables", recorded.get("environment"),
        files.numerics_environment(),
    )  # fmt: skip


def _device_differs(recorded, argv):
    found = recorded.get("device")
    if not isinstance(found, dict):
        return "it records no device (an older version wrote it)"
    now = results_files.device()
    if now["kind"] is None:
        return "the device a run would compute on now cannot be told (JAX did not start)"
    return _mapping_differs("device", found, now, unset="unknown")


# What ``same_run`` compares, in the order it compares them (the cheap first).
_CHECKS = {
    "program": _program,
    "arguments": _arguments_differ,
    "flag files": _flag_files_differ,
    "code": _code_differs,
    "plugins": _plugins_differ,
    "data files": _data_differ,
    "dataset cache": _dataset_cache_differs,
    "runtime": _runtime_differs,
    "environment": _environment_differs,
    "device": _device_differs,
}
COMPARED = tuple(_CHECKS)


def _file_changed(entry, what: str) -> str | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), (str, type(None))):
        return f"an unreadable {what} entry"
    path = entry.get("path")
    if not isinstance(path, str):
        return None if what == "plugin" else f"a {what} without a path"
    try:
        now = results_files.sha256_file(path)
    except OSError:
        return f"the {what} {path} cannot be read now"
    if now != entry.get("sha256"):
        return f"the {what} {path} has changed since"
    return None
