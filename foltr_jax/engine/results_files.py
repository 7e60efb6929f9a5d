"""Results files: results.json, the folder a run writes it in, and what a run keeps there
while it computes.  The experiment binaries write their results with this module; a Python
caller writes the same file with ``write_results``.

results.json, format 2, is the one structure every results file holds:

::

    {
      "results_format": 2,              # this structure's version (a reader refuses another)
      "method": "fpdgd",                # what ran
      "versions": {...},                # foltr_jax, jax, python, platform
      "provenance": {...},              # what made it: command, flags, code version,
                                        # plugins' and data files' SHA-256 (provenance.py)
      "config": {...},                  # the settings the cells share
      "data": {...},                    # where the data came from, and its size
      "metric": "ndcg",                 # the headline offline metric: curves["offline_<metric>"]
      "cells": [                        # one entry per cell, even when a binary has one
        {
          "name": "...",                # unique in the file
          "setting": {...},             # what sets this cell apart from "config"
          "labels": {...},              # how reports name and place it (see labels())
          "evaluated_rounds": [1, ...], # the 1-based round of each offline curve column
          "curves": {                   # by metric name, [run][column]
            "offline_ndcg": [[...]],    # the global model on the test split, evaluated rounds
            "online_ndcg": [[...]],     # the lists shown, every round
            ...
          },
          "per_run": {                  # one number per run, by name
            "initial_offline_ndcg": [...], "final_offline_ndcg": [...],
            "online_performance": [...], ...
          },
          "summary": {...},             # optional: means and sds over the runs
          ...                           # the binary's own per-cell fields
        }
      ],
      "interactions": ..., "seconds": ..., "compile_seconds": ..., "timings": {...},
      ...                               # the binary's own fields
    }

Its JSON Schema is ``SCHEMA_PATH`` (results.schema.json beside this module; ``schema()``
reads it); experiments/lib/series.py reads the files back (reports, tables, paper figures).

The folder (``Output``) is claimed before any work: created, locked against a second run
(``<folder>/.lock``, held with ``flock`` while the process lives), probed for writing,
never a symbolic link.  Results are written strictly (finite numbers only: strict JSON has
no token for others) and atomically (``files.write_atomically``: a reader never sees a
half-written file); the run's checkpoints go only once its results are written
(``Output.finish``).  A run of several parts keeps each finished part (``FinishedParts``:
plain arrays and JSON, never pickle, checked before use), so that an interrupted run
started again skips what it already computed.

A problem a user can fix (a folder that cannot be used or written, a result that is not
finite) is an ``OutputError`` of one line; it names the argument that chose the path
(``argument``: ``"folder"`` by default; the binaries pass their flag, e.g. ``"--output_dir"``).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import json
import math
import os
import pathlib
import platform
import resource
import stat
import subprocess
import sys
import tempfile
import warnings

import numpy as np

from foltr_jax import data
from foltr_jax.core import files
from foltr_jax.data import dataset_cache as data_cache
from foltr_jax.engine import loop

# The version of results.json's structure (``SCHEMA_PATH`` describes it):
# a reader refuses another, so a changed structure never passes for the old one.
RESULTS_FORMAT = 2
HEADLINE_METRIC = "ndcg"  # nDCG@10
SCHEMA_PATH = pathlib.Path(__file__).with_name("results.schema.json")  # JSON Schema 2020-12
# The output folders this process holds (claimed, not yet released): an interrupt names
# the checkpoints found there.
CLAIMED: list = []


class OutputError(Exception):
    """A results folder or file that cannot be used or written, or a result that is not
    finite: one line, naming the flag (or argument) to change."""


def schema() -> dict:
    """results.json's JSON Schema (``SCHEMA_PATH``), e.g. for ``jsonschema.validate``."""
    return json.loads(SCHEMA_PATH.read_text())


def header(method: str, provenance: dict | None = None) -> dict:
    """The first fields of every results.json: the format version, the method, the
    versions of the code that made it and, when given, what made it (``provenance``: the
    binaries record their command line, flags, code and data files)."""
    out = {"results_format": RESULTS_FORMAT, "method": method, "versions": versions()}
    if provenance is not None:
        out["provenance"] = provenance
    return out


def document(
    method: str,
    config: dict,
    data: dict,
    cells: list,
    metric: str = HEADLINE_METRIC,
    *,
    provenance: dict | None = None,
    **rest,
) -> dict:
    """A whole results.json: header, config, data, the headline metric, the cells and the
    binary's other fields (timings, totals, its own notes)."""
    return {
        **header(method, provenance),
        "config": config,
        "data": data,
        "metric": metric,
        "cells": cells,
        **rest,
    }


def labels(
    method: str,
    panel: str,
    *,
    group: str | None = None,
    figure: str | None = "",
    fields: dict | None = None,
    always=("method",),
    config: bool = True,
) -> dict:
    """How reports name and place a cell.

    method: its name in labels; panel: the panel it is drawn in (the click model);
    group: what its figure and table are about, after the dataset (None: the dataset
    alone); figure: splits a group's curves into figures (None: drawn in all of them);
    fields: what else identifies it, in order; always: the names shown in its label even
    when no other cell differs there (the others only when they differ); config: whether
    the file's "config" (less the cell's "setting" and click_model) identifies it too.
    """
    return {
        "method": method,
        "panel": panel,
        "group": group,
        "figure": figure,
        "fields": dict(fields or {}),
        "always": list(always),
        "config": config,
    }


def cell(
    name: str,
    *,
    labels: dict,
    evaluated_rounds,
    curves: dict,
    per_run: dict,
    setting: dict | None = None,
    summary: dict | None = None,
    **extra,
) -> dict:
    """One cell of a results file (the structure above)."""
    out = {
        "name": name,
        "setting": dict(setting or {}),
        "labels": labels,
        "evaluated_rounds": [int(r) for r in evaluated_rounds],
        "curves": curves,
        "per_run": per_run,
    }
    if summary is not None:
        out["summary"] = summary
    return {**out, **extra}


def evaluated_rounds(config, result, columns: int | None = None) -> list[int]:
    """The 1-based round of each offline column: ``result.offline_rounds`` with
    ``eval_every`` > 1, else 1..T (T: ``columns``, or the curves' length)."""
    if getattr(config, "eval_every", 1) != 1:
        return [int(r) for r in result.offline_rounds]
    n = result.offline_ndcg.shape[-1] if columns is None else columns
    return list(range(1, n + 1))


def data_summary(source: dict, train, test, **more) -> dict:
    """results.json's "data": where it came from (``source``, e.g. ``{"dataset":
    "synthetic"}``) and the sizes of its splits."""
    return {**source, "train": dataset_summary(train), "test": dataset_summary(test), **more}


def totals(result, log=None) -> dict:
    """The program's totals and timings (a grid's cells share them)."""
    return {
        "interactions": result.interactions,
        "seconds": result.run_seconds,
        "compile_seconds": result.compile_seconds,
        "interactions_per_second": result.interactions_per_second,
        "timings": timings(log),
    }


def results_file(
    method,
    config,
    result,
    train,
    test,
    source,
    slots=slice(None),
    log=None,
    *,
    normalise: bool = True,
    provenance: dict | None = None,
) -> dict:
    """The results.json of a method's run, as every method's binary writes it: config
    (a dataclass), data (``source`` and the splits' sizes; ``normalise``: whether the
    features were normalised per query), one cell with every curve of the RunResult, by
    name, for the runs in ``slots`` (one setting's repetitions), their per-run numbers
    (initial and final offline nDCG@10, online performance when the run has an online
    curve) and the program's timings (what they cover from ``log``, the run's
    progress log: anything with ``label`` and ``resumed_at``)."""

    def pick(values):
        return np.asarray(values)[slots].tolist()

    curves = {name: pick(values) for name, values in result.curves.items()}
    per_run = {}
    if "offline_ndcg" in result.initial:
        per_run["initial_offline_ndcg"] = pick(result.initial["offline_ndcg"])
    per_run["final_offline_ndcg"] = pick(np.asarray(result.curves["offline_ndcg"])[:, -1])
    if "online_ndcg" in result.curves:
        per_run["online_performance"] = pick(result.online_performance)
    panel = getattr(config, "click_model", method)
    one = cell(
        panel,
        labels=labels(method, panel),
        evaluated_rounds=evaluated_rounds(config, result),
        curves=curves,
        per_run=per_run,
    )
    return document(
        method,
        dataclasses.asdict(config),
        data_summary(source, train, test, normalise=normalise),
        [one],
        provenance=provenance,
        **totals(result, log),
    )


def write_results(
    folder,
    method: str,
    config,
    result,
    train,
    test,
    source: dict | None = None,
    *,
    normalise: bool = True,
    data_files=(),
    provenance: dict | None = None,
    name: str = "results.json",
) -> pathlib.Path:
    """Writes the results.json of a run (``results_file``) into ``folder``, as the binaries
    write it: the folder claimed first (``Output``: created, locked, never through a
    symbolic link), the file written strictly and atomically.  ``source`` says where the
    data came from, as the binaries say it (``{"train_path": ..., "test_path": ...}``, or
    ``{"synthetic": {"seed": 0, ...}}``; default: nothing but the splits' sizes).
    ``provenance`` (default: this process's, ``provenance_record(data_files=data_files)``) says
    what made it.  Returns the file's path; OutputError when the folder cannot be used or a
    number is not finite.

    Example::

        result = foltr_jax.run_fpdgd(config, train, test)
        results_files.write_results("out", "fpdgd", config, result, train, test)
    """
    if provenance is None:
        provenance = provenance_record(data_files=data_files)
    payload = results_file(
        method, config, result, train, test, source or {},
        normalise=normalise, provenance=provenance,
    )  # fmt: skip
    output = Output(folder, (name,), checkpoints=False)
    try:
        path = output.write_json(name, payload)
    except BaseException:
        output.release()
        raise
    output.finish()
    return path


def curve_summary(
    results: dict, metric: str | None = None, label: str = "nDCG@10", unit: str = "round"
) -> str:
    """'offline <label> (mean of n run(s)) initial: x, round t: y, ...': the mean offline
    curve of the first cell's ``offline_<metric>`` (default: the file's metric) at a few
    of its evaluated rounds."""
    metric = metric or results["metric"]
    first = results["cells"][0]
    curves = first["curves"][f"offline_{metric}"]
    evaluated = first["evaluated_rounds"]
    n = len(evaluated)

    def mean_at(i):
        return sum(c[i] for c in curves) / len(curves)

    initial = sum(first["per_run"][f"initial_offline_{metric}"]) / len(curves)
    marks = sorted({0, max(n // 10, 1) - 1, max(n // 2, 1) - 1, n - 1})
    curve = ", ".join(f"{unit} {evaluated[i]}: {mean_at(i):.4f}" for i in marks)
    return f"offline {label} (mean of {len(curves)} run(s)) initial: {initial:.4f}, {curve}"


def timings(*logs) -> dict:
    """What the timing fields cover, and the rounds from which each part resumed."""
    return {
        "cover": (
            "every round: seconds and compile_seconds are summed over the invocations that "
            "computed the rounds (a resumed run's interrupted ones included); "
            "interactions_per_second = interactions / seconds"
        ),
        "resumed_at_round": {log.label: log.resumed_at for log in logs if log and log.resumed_at},
    }


def dataset_summary(dataset: data.RankingDataset) -> dict:
    """The sizes of a dataset's split: queries, documents, features, longest query."""
    return {
        "queries": int(dataset.n_queries),
        "documents": int(dataset.n_docs),
        "features": int(dataset.n_features),
        "max_query_length": int(dataset.max_query_length),
    }


def versions() -> dict:
    """The versions of foltr_jax, jax and Python, and the platform."""
    import jax

    return {
        # the front door's version, read without importing it (it lies above this layer)
        "foltr_jax": sys.modules["foltr_jax"].__version__,
        "jax": jax.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def peak_rss_mb() -> float:
    """This process's peak resident memory in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# What made a result: results.json's "provenance" ------------------------------------------

_HASHES: dict = {}  # (path, device, inode, size, mtime) -> sha256: each file hashed once


def provenance_record(
    *,
    command=None,
    arguments=None,
    flags: dict | None = None,
    code: str | None = None,
    plugins=(),
    data_files=(),
    flag_files=(),
) -> dict:
    """results.json's "provenance": what made a run.  A binary gives its command line less
    --output_dir (``command``), its arguments with every flag file read in, its flags as
    read, its code version (foltr_jax's and the binaries' sources), its plugins and the flag
    files read (path and SHA-256).  A Python caller's defaults: this process's ``sys.argv``,
    no flags, foltr_jax's code version (``files.source_version()``), no plugins.
    ``data_files``: the files the run read, by path (their size and the SHA-256 of their
    content are recorded) or as entries already made (``data_file``).  The rest is this
    process's: the dataset cache's format and parser versions, the jax, jaxlib and numpy
    versions, the kind of device and the environment variables that change numbers."""
    argv = [str(a) for a in sys.argv]
    return {
        "command": list(argv if command is None else command),
        "arguments": list(argv[1:] if arguments is None else arguments),
        "flags": dict(flags or {}),
        "code": files.source_version() if code is None else code,
        "foltr_jax": sys.modules["foltr_jax"].__version__,
        "plugins": [dict(entry) for entry in plugins],
        "data_files": [
            dict(entry) if isinstance(entry, dict) else data_file(entry) for entry in data_files
        ],
        "flag_files": [dict(entry) for entry in flag_files],
        "dataset_cache": dataset_cache(),
        "runtime": runtime(),
        "device": device(),
        "environment": files.numerics_environment(),
    }


def sha256_file(path) -> str:
    """SHA-256 of the bytes of the regular file at ``path`` (OSError if it cannot be read),
    remembered while the file keeps its identity, size and time of change."""
    path = os.path.abspath(path)
    if files.special_file(path):
        raise OSError(f"{path} is {files.special_file(path)}, not a file")
    info = os.stat(path)
    key = (path, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    if key not in _HASHES:
        known = data_cache.known_sha256(path)  # data.read_letor hashed it as it read it
        if known is None:
            digest = hashlib.sha256()
            with open(path, "rb") as stream:
                for block in iter(lambda: stream.read(1 << 22), b""):
                    digest.update(block)
            known = digest.hexdigest()
        _HASHES[key] = known
    return _HASHES[key]


def data_file(path) -> dict:
    """A data file's entry in the provenance: its absolute path, size and SHA-256."""
    path = os.path.abspath(path)
    digest = sha256_file(path)
    return {"path": path, "bytes": os.stat(path).st_size, "sha256": digest}


def dataset_cache() -> dict:
    """The versions of the dataset cache's entries a run reads: their format and the parser
    that writes them (an entry of another version is parsed again, never read)."""
    return {"format": data_cache.CACHE_FORMAT_VERSION, "parser": data_cache.PARSER_VERSION}


def runtime() -> dict:
    """The versions of what computes a run's numbers besides the code: jax, jaxlib, numpy."""
    import jax
    import jaxlib.version

    return {"jax": jax.__version__, "jaxlib": jaxlib.version.__version__,
            "numpy": np.__version__}  # fmt: skip


_DEVICE_QUERY = "import jax; d = jax.local_devices()[0]; print(d.platform); print(d.device_kind)"
_DEVICES: dict = {}  # (JAX_PLATFORMS, CUDA_VISIBLE_DEVICES) -> the answer of a fresh process


def _backends_started() -> bool:
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except (ImportError, AttributeError):  # another jax: ask a fresh process
        return False


def device() -> dict:
    """{"platform", "kind"} of the device a run computes on (its first local one): this
    process's when its JAX backends have started or can only be the CPU; else a fresh
    process is asked (once per process): starting an accelerator's backend here would hold
    memory the runs this process starts need.  Unknown: {"platform": None, "kind": None}."""
    platforms = os.environ.get("JAX_PLATFORMS", "").strip().lower()
    if _backends_started() or platforms == "cpu":
        import jax

        found = jax.local_devices()[0]
        return {"platform": found.platform, "kind": found.device_kind}
    key = (platforms, os.environ.get("CUDA_VISIBLE_DEVICES"))
    if key not in _DEVICES:
        try:
            done = subprocess.run([sys.executable, "-c", _DEVICE_QUERY], capture_output=True,
                                  text=True, timeout=300, check=False)  # fmt: skip
            lines = done.stdout.strip().splitlines() if done.returncode == 0 else []
        except (OSError, subprocess.TimeoutExpired):
            lines = []
        _DEVICES[key] = (
            {"platform": lines[-2], "kind": lines[-1]} if len(lines) >= 2
            else {"platform": None, "kind": None}
        )  # fmt: skip
    return dict(_DEVICES[key])


def checkpoint_file(output_dir, part: str = "", enabled: bool = True) -> str | None:
    """The checkpoint of the run (or of one ``part`` of it) under ``output_dir``; None
    when checkpoints are not ``enabled`` (a binary's --nocheckpoint)."""
    if not enabled:
        return None
    name = f".checkpoint-{part}.npz" if part else ".checkpoint.npz"
    return str(pathlib.Path(output_dir) / name)


class FinishedParts:
    """The results of the finished parts (cells, phases) of a binary that runs several,
    so that an interrupted invocation started again skips what it already computed.

    Each part is saved atomically in ``<folder>/<name>.npz`` (``files.save_arrays``:
    its arrays, and the rest as JSON) with the fingerprint of its settings
    (``loop.fingerprint``) and the code version of foltr_jax and the binaries: a part
    of other settings or code is never reused, and nothing read back can run code.
    Results are dicts, lists, tuples, arrays, numbers and strings (``files.to_plain``).
    ``clear`` removes them once results.json is written.  With ``folder`` None
    (--nocheckpoint) nothing is saved or reused.  The folder is the run's own: a symbolic
    link or anything but a folder standing at its name is refused (OutputError naming
    ``argument``, the folder's argument or flag), never followed, like the lock.
    """

    def __init__(self, folder, code: str | None = None, argument: str = "folder"):
        self.folder = None if folder is None else pathlib.Path(folder)
        self.argument = argument
        # the code version a part must have been saved by (None: foltr_jax's, with the
        # user code and numerics environment; the binaries add their own sources)
        self.code = files.code_version() if code is None else code
        self._named: set[str] = set()  # the parts this run named: the only ones it removes
        self._check_own()

    def _check_own(self) -> None:
        """OutputError unless the folder is missing or a real folder (not a link to one)."""
        if self.folder is None:
            return
        refuse_links(self.folder, argument=self.argument)
        try:
            mode = os.lstat(self.folder).st_mode
        except FileNotFoundError:
            return
        except OSError as error:
            raise OutputError(
                f"{self.argument}: cannot use {self.folder} ({error.strerror or error})"
            ) from None
        if not stat.S_ISDIR(mode):
            raise OutputError(
                f"{self.argument}: {self.folder} is not a folder (the run keeps its finished "
                "parts there); remove it"
            )

    @property
    def enabled(self) -> bool:
        return self.folder is not None

    def _path(self, name: str) -> pathlib.Path:
        self._named.add(name)
        assert self.folder is not None  # asked only when parts are kept
        return self.folder / f"{name}.npz"

    def load(self, name: str, fingerprint: str):
        """The saved result of part ``name`` when it is this run's, else None (with a
        warning when a file was there; a folder or FIFO there is never read, and the part
        is then not saved)."""
        if self.folder is None or not os.path.lexists(self._path(name)):
            return None
        try:
            meta, arrays = files.load_arrays(self._path(name), fingerprint, self.code)
            result = files.from_plain(meta.get("result"), arrays)
            if _first_non_finite(result, "") is not None:
                raise files.StoredFileError("a result that is not finite")
            return result
        except files.StoredFileError as error:
            warnings.warn(f"ignoring {self._path(name)}: {error}; the part runs again")
            return None

    def save(self, name: str, fingerprint: str, result) -> None:
        if self.folder is None:
            return
        self._check_own()  # planted meanwhile: never written through
        check_finite(result, f"part {name!r}")
        if files.special_file(self._path(name)):
            return  # a folder or FIFO stands there: load warned, the part is not kept
        arrays: list = []
        meta = {"result": files.to_plain(result, arrays)}
        files.save_arrays(self._path(name), fingerprint, meta, arrays, self.code)

    def reuse(
        self, name, fingerprint, compute, *, read=None, plain=None, checkpoints=(), label=None
    ):
        """Part ``name``'s result: the one an earlier, interrupted invocation saved when it is
        this run's (``fingerprint()``, asked only when parts are kept, names its settings and
        data; ``read`` turns the saved plain data back, None when it does not fit), said on
        stderr as ``[label] finished by an earlier run, reused``; else ``compute()``, saved
        (as ``plain(result)``), after which the checkpoints it resumed from go: the saved
        part holds it now."""
        key = fingerprint() if self.enabled else ""
        saved = self.load(name, key)
        found = saved if saved is None or read is None else read(saved)
        if found is not None:
            print(f"[{label or name}] finished by an earlier run, reused", file=sys.stderr)
            return found
        result = compute()
        self.save(name, key, result if plain is None else plain(result))
        if self.enabled:
            for checkpoint in checkpoints:
                loop.remove_checkpoint(checkpoint)
        return result

    def clear(self) -> None:
        """Removes the parts this run saved or looked for, and what their killed writers
        left (``.<part>.npz.*.tmp``), and the folder when nothing else is in it: files it
        did not name are left alone."""
        if self.folder is None or not self.folder.is_dir() or self.folder.is_symlink():
            return
        for name in sorted(self._named):
            path = self._path(name)
            for leftover in files.leftovers(path):
                files.remove_own(leftover)
            files.remove_own(path)
        try:
            self.folder.rmdir()
        except OSError:
            pass  # something else lives there: leave it


class Output:
    """A run's --output_dir, claimed before any work: created, locked against a second
    run (``<output_dir>/.lock``, held with ``flock`` while the process lives) and probed
    for writing, with the files the run will write checked to be writable files.

    Results are written strictly (``write_json``: finite numbers only) and the run's
    checkpoints are removed only afterwards (``finish``).  A run that fails releases the
    lock and removes the folders it created when they are empty.  The folder, and the
    folders above it down to ``below`` (the folder the user named, when the tool chose a
    place inside it), are never symbolic links (``files.refuse_links``).
    """

    def __init__(
        self, path, outputs=("results.json",), argument: str = "folder", checkpoints=True,
        below=None, code: str | None = None,
    ):  # fmt: skip
        self.path, self.argument = pathlib.Path(path), argument
        self.checkpoints = checkpoints  # whether the run keeps checkpoints here
        self.code = code  # the code version its finished parts are saved by (FinishedParts)
        self._named = {self.path / name for name in outputs}  # what finish may tidy
        self._created: list[pathlib.Path] = []
        self._lock_fd: int | None = None
        where = f"{argument}: {self.path}"
        refuse_links(self.path, below, argument)
        if self.path.exists() and not self.path.is_dir():
            raise OutputError(f"{where} exists and is not a folder")
        missing = [p for p in (self.path, *self.path.parents) if not p.exists()]
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise OutputError(f"{where}: cannot create it ({error.strerror or error})") from None
        self._created = missing  # deepest first
        atexit.register(self.release)
        try:
            self._lock()
            self._probe()
        except OutputError:
            self.release()
            raise
        CLAIMED.append(self)
        for name in outputs:
            target, problem = self.path / name, None
            if target.parent.exists() and not target.parent.is_dir():
                problem = f"{target.parent} is not a folder"
            elif target.exists() and not target.is_file():
                problem = f"{target} is not a file"
            if problem:
                self.release()
                raise OutputError(f"{self.argument}: {problem}, so {target} cannot be written")
        stale = sorted(self.path.glob(".checkpoint*.pkl")) + sorted(self.path.glob(".*/*.pkl"))
        if stale:
            warnings.warn(
                f"ignoring {len(stale)} pickle file(s) of an older version in {self.path} "
                f"(e.g. {stale[0].name}): they are never loaded, since unpickling can run code; "
                "delete them"
            )

    def _lock(self) -> None:
        lock = self.path / ".lock"
        while True:
            try:  # never through a planted link, never waiting on a FIFO
                fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666)
            except OSError as error:
                why = error.strerror or error
                if error.errno == errno.ELOOP:
                    why = "it is a symbolic link, which is never followed; remove it"
                raise OutputError(f"{self.argument}: cannot lock {lock} ({why})") from None
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise OutputError(
                    f"{self.argument}: cannot lock {lock}: it is not a regular file; remove it"
                )
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
                os.close(fd)
                raise OutputError(
                    f"{self.argument}: {self.path} is in use by another run (process {holder}); "
                    "wait for it to finish or choose another folder"
                ) from None
            try:  # its last holder may have removed it meanwhile: lock the file on disk
                if os.stat(lock).st_ino == os.fstat(fd).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def _probe(self) -> None:
        try:
            handle, probe = tempfile.mkstemp(dir=self.path, prefix=".probe-")
            os.close(handle)
            os.unlink(probe)
        except OSError as error:
            raise OutputError(
                f"{self.argument}: cannot write into {self.path} ({error.strerror or error})"
            ) from None

    @property
    def keeps_checkpoints(self) -> bool:
        """Whether the run saves checkpoints here (False with --nocheckpoint)."""
        return bool(self.checkpoints)

    @property
    def keeps_parts(self) -> bool:
        """Whether the run keeps its finished parts here (as it keeps checkpoints)."""
        return self.keeps_checkpoints

    def saved(self) -> list:
        """The checkpoints and finished parts on disk now (``.checkpoint*.npz``, and
        ``.cells/`` or ``.phases/``'s files), for the line an interrupt prints."""
        found = sorted(self.path.glob(".checkpoint*.npz"))
        for folder in (".cells", ".phases"):
            found += sorted((self.path / folder).glob("*.npz"))
        return [path for path in found if path.is_file()]

    def checkpoint(self, part: str = "") -> str | None:
        """The checkpoint of the run or of one ``part`` (None with --nocheckpoint)."""
        path = checkpoint_file(self.path, part, self.keeps_checkpoints)
        if path:
            self._named.add(pathlib.Path(path))
        return path

    def finished_parts(self, folder: str) -> FinishedParts:
        """Finished parts kept in ``<output_dir>/<folder>`` (disabled unless ``keeps_parts``:
        without checkpoints, and in a binary's --distributed run, where the other processes
        cannot read them, so every part runs on all of them and its own checkpoint, which
        process 0 reads and shares, returns a finished part at once)."""
        return FinishedParts(
            self.path / folder if self.keeps_parts else None, self.code, self.argument
        )

    def write_json(self, name, payload: dict) -> pathlib.Path:
        """Writes ``<output_dir>/<name>`` as strict JSON; OutputError naming ``argument`` if it
        cannot be written or holds a non-finite number (nothing is written then)."""
        target = self.path / name
        check_finite(payload, str(target))
        self._write(target, (json.dumps(payload, indent=1, allow_nan=False)).encode())
        return target

    def write_text(self, name, text: str) -> pathlib.Path:
        target = self.path / name
        self._write(target, text.encode())
        return target

    def _write(self, target: pathlib.Path, payload: bytes) -> None:
        try:
            write_bytes_atomic(target, payload)
        except OSError as error:
            raise OutputError(
                f"{self.argument}: cannot write {target} ({error.strerror or error}); the "
                "checkpoints are kept: the same command finishes without computing again"
            ) from None

    def finish(self) -> None:
        """After the results are written: removes the checkpoints this run named, what a
        killed writer left half-written beside the files it names (``.<name>.*.tmp``) and
        the lock.  Files the run did not name are left alone."""
        for path in sorted(self._named):
            for leftover in files.leftovers(path):
                files.remove_own(leftover)
            if path.name.startswith(".checkpoint"):
                files.remove_own(path)
        self._created = []  # the folders hold results now
        self.release()

    def release(self) -> None:
        """Unlocks; removes the folders this run created if they are still empty."""
        if self in CLAIMED:
            CLAIMED.remove(self)
        if self._lock_fd is not None:
            (self.path / ".lock").unlink(missing_ok=True)
            os.close(self._lock_fd)
            self._lock_fd = None
        for folder in self._created:
            try:
                folder.rmdir()
            except OSError:
                break
        self._created = []


def refuse_links(path, below=None, argument: str = "folder") -> None:
    """``files.refuse_links`` as an OutputError naming ``argument`` (how the caller names
    the path: an argument, or a binary's flag such as ``"--output_dir"``)."""
    try:
        files.refuse_links(path, below)
    except files.LinkedPathError as error:
        raise OutputError(f"{argument}: {error.strerror}") from None


def probe_output_file(path, argument: str) -> pathlib.Path:
    """Checks, before any work, that the file ``path`` (given by ``argument``, e.g. a
    binary's ``"--output"``) can be written: a name that is not empty, not a folder or
    special file, in a folder that exists or can be created and takes a new file (probed).
    OutputError naming ``argument`` otherwise."""
    if not str(path).strip():
        raise OutputError(f"{argument}: empty; name the file to write")
    target = pathlib.Path(path)
    where = f"{argument}: {target}"
    if target.name in ("", ".", ".."):
        raise OutputError(f"{where} names a folder, not a file")
    special = files.special_file(target)
    if special:
        raise OutputError(f"{where} is {special}, not a file that can be replaced")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.probe-")
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        raise OutputError(f"{where}: cannot write there ({error.strerror or error})") from None
    return target


def write_output_file(path, payload: dict, argument: str) -> None:
    """``write_json_atomic`` of a file probed with ``probe_output_file``: a failure now
    (a full disk, a folder removed meanwhile) is one OutputError naming ``argument``."""
    try:
        write_json_atomic(pathlib.Path(path), payload)
    except OSError as error:
        raise OutputError(f"{argument}: cannot write {path} ({error.strerror or error})") from None


class ReadOnlyOutput:
    """--output_dir seen from a process that does not write (process k > 0 of a
    --distributed run): the same names as ``Output``, and nothing is created there.
    The run's checkpoint is read by process 0 and sent to the others (``loop``)."""

    def __init__(self, path, checkpoints: bool = True):
        self.path = pathlib.Path(path)
        self.checkpoints = checkpoints

    def checkpoint(self, part: str = "") -> str | None:
        return checkpoint_file(self.path, part, self.checkpoints)

    def finished_parts(self, folder: str) -> FinishedParts:
        return FinishedParts(None)

    def write_json(self, name, payload: dict) -> pathlib.Path:
        check_finite(payload, str(self.path / name))
        return self.path / name

    def write_text(self, name, text: str) -> pathlib.Path:
        return self.path / name

    def finish(self) -> None:
        pass

    def release(self) -> None:
        pass


@contextlib.contextmanager
def stop_cleanly(cells=(), n_runs: int = 1, what: str = "cell", checkpoint: str = "checkpoint"):
    """Around a run: turns its ``loop.NonFiniteModel`` (a model or server state with a
    NaN or an infinity) into an OutputError of one line naming the run slot, or with
    ``cells`` (the names of the program's settings, ``n_runs`` slots each) the cell and
    repetition, and the round; and a checkpoint that could not be saved
    (``loop.CheckpointError``) into one line naming ``checkpoint`` (the argument that asked
    for checkpoints; the binaries pass ``"--checkpoint"``).  The binary then exits
    with status 2 and writes no results."""
    try:
        yield
    except loop.NonFiniteModel as error:
        raise OutputError(error.describe(slot_namer(cells, n_runs, what))) from None
    except loop.CheckpointError as error:
        raise OutputError(f"{checkpoint}: {error}") from None


def slot_namer(cells=(), n_runs: int = 1, what: str = "cell"):
    """``name(slot)``: 'run slot s' or, with ``cells``, '<what> <name>, repetition r'."""
    cells = list(cells)

    def name(slot: int) -> str:
        if cells and 0 <= slot // max(n_runs, 1) < len(cells):
            return f"{what} {cells[slot // n_runs]}, repetition {slot % n_runs} (run slot {slot})"
        return f"run slot {slot}" + (f" (repetition {slot})" if n_runs > 1 and not cells else "")

    return name


def check_finite(value, where: str) -> None:
    """OutputError naming the first NaN or infinity in ``value`` (dicts, lists, arrays,
    numbers): results hold finite numbers only, and strict JSON has no token for others."""
    path = _first_non_finite(value, "")
    if path is not None:
        found, number = path
        raise OutputError(
            f"{where}: {found.lstrip('.') or 'value'} is {number}: the run produced a "
            "non-finite number (a diverging model? try a smaller learning rate); not written"
        )


def _first_non_finite(value, where: str):
    if isinstance(value, dict):
        items = ((f"{where}.{k}", v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"{where}[{i}]", v) for i, v in enumerate(value))
    elif isinstance(value, float) and not math.isfinite(value):
        return where, value
    elif hasattr(value, "dtype") and getattr(value.dtype, "kind", "") == "f":
        bad = ~np.isfinite(np.asarray(value))
        if bad.any():
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            return where + "".join(f"[{i}]" for i in index), float(np.asarray(value)[index])
        return None
    else:
        return None
    for key, item in items:
        found = _first_non_finite(item, key)
        if found is not None:
            return found
    return None


def write_json_atomic(path: pathlib.Path, payload: dict) -> None:
    """Writes strict JSON through a temporary file and a rename: never a half-written
    file, never a NaN (OutputError naming it)."""
    check_finite(payload, str(path))
    write_text_atomic(path, json.dumps(payload, indent=1, allow_nan=False))


def write_text_atomic(path: pathlib.Path, text: str) -> None:
    """Writes text through a temporary file and a rename."""
    write_bytes_atomic(path, text.encode())


def write_bytes_atomic(path: pathlib.Path, payload: bytes) -> None:
    """Writes bytes through a temporary file and a rename."""
    files.write_atomically(path, lambda stream: stream.write(payload))
