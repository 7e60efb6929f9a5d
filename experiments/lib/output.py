"""A run's output folder: claimed and locked before any work, checkpoints and the
saved results of finished parts, strict (finite-only) atomic writes of results."""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import json
import math
import os
import pathlib
import stat
import sys
import tempfile
import warnings

import numpy as np
from absl import flags

from experiments.lib.cli import UserError
from experiments.lib.distributed import is_distributed, is_writer
from foltr_jax.core import files
from foltr_jax.engine import loop

FLAGS = flags.FLAGS

EXPERIMENTS_DIR = pathlib.Path(__file__).resolve().parents[1]  # experiments/, the binaries and lib/
# The output folders this process holds (claimed, not yet released): an interrupt names
# the checkpoints found there (``program.interrupted``).
CLAIMED: list = []


def checkpoint_file(output_dir, part: str = "", enabled: bool | None = None) -> str | None:
    """The checkpoint of the run (or of one ``part`` of it) under ``output_dir``; None
    with --nocheckpoint (``enabled`` None: the flag decides)."""
    if not (FLAGS.checkpoint if enabled is None else enabled):
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
    link or anything but a folder standing at its name is refused (UserError naming
    --output_dir), never followed, like the lock.
    """

    def __init__(self, folder):
        self.folder = None if folder is None else pathlib.Path(folder)
        self.code = files.code_version(EXPERIMENTS_DIR, EXPERIMENTS_DIR / "lib")
        self._named: set[str] = set()  # the parts this run named: the only ones it removes
        self._check_own()

    def _check_own(self) -> None:
        """UserError unless the folder is missing or a real folder (not a link to one)."""
        if self.folder is None:
            return
        refuse_links(self.folder)
        try:
            mode = os.lstat(self.folder).st_mode
        except FileNotFoundError:
            return
        except OSError as error:
            raise UserError(
                f"--output_dir: cannot use {self.folder} ({error.strerror or error})"
            ) from None
        if not stat.S_ISDIR(mode):
            raise UserError(
                f"--output_dir: {self.folder} is not a folder (the run keeps its finished "
                "parts there); remove it"
            )

    @property
    def enabled(self) -> bool:
        return self.folder is not None

    def _path(self, name: str) -> pathlib.Path:
        self._named.add(name)
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
        arrays = []
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
        self, path, outputs=("results.json",), flag: str = "output_dir", checkpoints=None,
        below=None,
    ):  # fmt: skip
        self.path, self.flag = pathlib.Path(path), flag
        self.checkpoints = checkpoints  # None: --checkpoint decides
        self._named = {self.path / name for name in outputs}  # what finish may tidy
        self._created: list[pathlib.Path] = []
        self._lock_fd: int | None = None
        where = f"--{flag}: {self.path}"
        refuse_links(self.path, below, flag)
        if self.path.exists() and not self.path.is_dir():
            raise UserError(f"{where} exists and is not a folder")
        missing = [p for p in (self.path, *self.path.parents) if not p.exists()]
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UserError(f"{where}: cannot create it ({error.strerror or error})") from None
        self._created = missing  # deepest first
        atexit.register(self.release)
        try:
            self._lock()
            self._probe()
        except UserError:
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
                raise UserError(f"--{flag}: {problem}, so {target} cannot be written")
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
                raise UserError(f"--{self.flag}: cannot lock {lock} ({why})") from None
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise UserError(
                    f"--{self.flag}: cannot lock {lock}: it is not a regular file; remove it"
                )
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
                os.close(fd)
                raise UserError(
                    f"--{self.flag}: {self.path} is in use by another run (process {holder}); "
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
            raise UserError(
                f"--{self.flag}: cannot write into {self.path} ({error.strerror or error})"
            ) from None

    @property
    def keeps_checkpoints(self) -> bool:
        """Whether the run saves checkpoints here (False with --nocheckpoint)."""
        if self.checkpoints is not None:
            return bool(self.checkpoints)
        return "checkpoint" in FLAGS and bool(FLAGS.checkpoint)

    def saved(self) -> list:
        """The checkpoints and finished parts on disk now (``.checkpoint*.npz``, and
        ``.cells/`` or ``.phases/``'s files), for the line an interrupt prints."""
        found = sorted(self.path.glob(".checkpoint*.npz"))
        for folder in (".cells", ".phases"):
            found += sorted((self.path / folder).glob("*.npz"))
        return [path for path in found if path.is_file()]

    def checkpoint(self, part: str = "") -> str | None:
        """The checkpoint of the run or of one ``part`` (None with --nocheckpoint)."""
        path = checkpoint_file(self.path, part, self.checkpoints)
        if path:
            self._named.add(pathlib.Path(path))
        return path

    def finished_parts(self, folder: str) -> FinishedParts:
        """Finished parts kept in ``<output_dir>/<folder>`` (disabled with --nocheckpoint,
        and in a --distributed run: the other processes cannot read them, so every part
        runs on all of them and its own checkpoint, which process 0 reads and shares,
        returns a finished part at once)."""
        enabled = FLAGS.checkpoint if self.checkpoints is None else self.checkpoints
        enabled = enabled and not is_distributed()
        return FinishedParts(self.path / folder if enabled else None)

    def write_json(self, name, payload: dict) -> pathlib.Path:
        """Writes ``<output_dir>/<name>`` as strict JSON; UserError naming the flag if it
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
            raise UserError(
                f"--{self.flag}: cannot write {target} ({error.strerror or error}); the "
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


def refuse_links(path, below=None, flag: str = "output_dir") -> None:
    """``files.refuse_links`` as a UserError naming ``--flag``."""
    try:
        files.refuse_links(path, below)
    except files.LinkedPathError as error:
        raise UserError(f"--{flag}: {error.strerror}") from None


def claim_output(outputs=("results.json",)):
    """``Output`` of --output_dir (UserError naming the flag when it cannot be used, or
    is empty: never the current folder by accident); a ``ReadOnlyOutput`` on the processes
    of a --distributed run other than process 0."""
    if not FLAGS.output_dir.strip():
        raise UserError("--output_dir: empty; name the folder for the results")
    if not is_writer():
        return ReadOnlyOutput(FLAGS.output_dir)
    return Output(FLAGS.output_dir, outputs)


def probe_output_file(path, flag: str) -> pathlib.Path:
    """Checks, before any work, that the file ``path`` of ``--flag`` can be written: a
    name that is not empty, not a folder or special file, in a folder that exists or can be
    created and takes a new file (probed).  UserError naming the flag otherwise."""
    if not str(path).strip():
        raise UserError(f"--{flag}: empty; name the file to write")
    target = pathlib.Path(path)
    where = f"--{flag}: {target}"
    if target.name in ("", ".", ".."):
        raise UserError(f"{where} names a folder, not a file")
    special = files.special_file(target)
    if special:
        raise UserError(f"{where} is {special}, not a file that can be replaced")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.probe-")
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        raise UserError(f"{where}: cannot write there ({error.strerror or error})") from None
    return target


def write_output_file(path, payload: dict, flag: str) -> None:
    """``write_json_atomic`` of a file probed with ``probe_output_file``: a failure now
    (a full disk, a folder removed meanwhile) is one UserError naming the flag."""
    try:
        write_json_atomic(pathlib.Path(path), payload)
    except OSError as error:
        raise UserError(f"--{flag}: cannot write {path} ({error.strerror or error})") from None


class ReadOnlyOutput:
    """--output_dir seen from a process that does not write (process k > 0 of a
    --distributed run): the same names as ``Output``, and nothing is created there.
    The run's checkpoint is read by process 0 and sent to the others (``loop``)."""

    def __init__(self, path):
        self.path = pathlib.Path(path)

    def checkpoint(self, part: str = "") -> str | None:
        return checkpoint_file(self.path, part)

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
def stop_cleanly(cells=(), n_runs: int = 1, what: str = "cell"):
    """Around a run: turns its ``loop.NonFiniteModel`` (a model or server state with a
    NaN or an infinity) into a UserError of one line naming the run slot, or with
    ``cells`` (the names of the program's settings, ``n_runs`` slots each) the cell and
    repetition, and the round; and a checkpoint that could not be saved
    (``loop.CheckpointError``) into one line naming --checkpoint.  The binary then exits
    with status 2 and writes no results."""
    try:
        yield
    except loop.NonFiniteModel as error:
        raise UserError(error.describe(slot_namer(cells, n_runs, what))) from None
    except loop.CheckpointError as error:
        raise UserError(f"--checkpoint: {error}") from None


def unique_names(short, full, flag: str) -> list:
    """Names of a grid's cells, unique by construction: each cell's ``short`` name (e.g.
    values printed with ``:g``) where no other cell shares it, else its ``full`` name
    (values printed with ``repr``, which tells every two floats apart).  Two cells with
    the same full name are the same cell twice: UserError naming ``--flag``."""
    short, full = list(short), list(full)
    repeated = sorted({f for f in full if full.count(f) > 1})
    if repeated:
        raise UserError(f"--{flag}: the cell {repeated[0]} is asked for twice")
    names = [s if short.count(s) == 1 else f for s, f in zip(short, full)]
    return names if len(set(names)) == len(names) else full


def refuse_repeats(values, flag: str, same=None) -> None:
    """UserError naming ``--flag`` when a value of its list is given twice (as read: 1 and
    01 are one value; with ``same``, values whose ``same(value)`` are equal are one: a click
    model by what it is, so 'pbm:1' and 'pbm:1.0'): the same cell computed twice and written
    under two names.  A value ``same`` cannot read (ValueError) is compared as it is."""
    seen = {}
    for value in values:
        try:
            key = value if same is None else same(value)
        except ValueError:
            key = value
        if key in seen:
            spelled = "" if seen[key] == value else f" (as {seen[key]})"
            raise UserError(f"--{flag}: {value} is asked for twice{spelled}; name each value once")
        seen[key] = value


def slot_namer(cells=(), n_runs: int = 1, what: str = "cell"):
    """``name(slot)``: 'run slot s' or, with ``cells``, '<what> <name>, repetition r'."""
    cells = list(cells)

    def name(slot: int) -> str:
        if cells and 0 <= slot // max(n_runs, 1) < len(cells):
            return f"{what} {cells[slot // n_runs]}, repetition {slot % n_runs} (run slot {slot})"
        return f"run slot {slot}" + (f" (repetition {slot})" if n_runs > 1 and not cells else "")

    return name


def check_finite(value, where: str) -> None:
    """UserError naming the first NaN or infinity in ``value`` (dicts, lists, arrays,
    numbers): results hold finite numbers only, and strict JSON has no token for others."""
    path = _first_non_finite(value, "")
    if path is not None:
        found, number = path
        raise UserError(
            f"{where}: {found.lstrip('.') or 'value'} is {number}: the run produced a "
            "non-finite number (a diverging model? try a smaller --learning_rate); not written"
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
    file, never a NaN (UserError naming it)."""
    check_finite(payload, str(path))
    write_text_atomic(path, json.dumps(payload, indent=1, allow_nan=False))


def write_text_atomic(path: pathlib.Path, text: str) -> None:
    """Writes text through a temporary file and a rename."""
    write_bytes_atomic(path, text.encode())


def write_bytes_atomic(path: pathlib.Path, payload: bytes) -> None:
    """Writes bytes through a temporary file and a rename."""
    files.write_atomically(path, lambda stream: stream.write(payload))
