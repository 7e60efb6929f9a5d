"""What a binary prints: one-line errors and warnings, progress between chunks and while a
data file is read."""

from __future__ import annotations

import contextlib
import os
import pathlib
import sys
import time
import warnings

from absl import logging


def _process_age() -> float | None:
    """Seconds since this process started, from Linux's /proc (None elsewhere)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            fields = stat.read().rpartition(")")[2].split()  # from field 3, the state, on
        with open("/proc/uptime", encoding="ascii") as uptime:
            since_boot = float(uptime.read().split()[0])
        age = since_boot - int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime
    except (OSError, ValueError, IndexError):
        return None
    return age if age >= 0 else None


_STARTED = time.perf_counter() - (_process_age() or 0.0)  # the command's start


def command_seconds() -> float:
    """Seconds since the command started: since its process started where Linux says when
    (imports included), else since this module was imported."""
    return time.perf_counter() - _STARTED


_BEFORE_COMPILING = []  # what the command did before its first compilation, said once


def command_starts() -> None:
    """Forgets what an earlier command in this process timed (a binary called in a test)."""
    _BEFORE_COMPILING.clear()


@contextlib.contextmanager
def timed(what: str):
    """Times ``what`` (e.g. 'data loaded'), said with the line that says compiling starts
    ('data loaded in 2.1 s; compiling ...').  Nothing is printed on the way: a bad file
    stays one error line."""
    start = time.perf_counter()
    yield
    _BEFORE_COMPILING.append(f"{what} in {time.perf_counter() - start:.1f} s")


class UserError(Exception):
    """A problem with the user's input: printed as one line, no traceback."""


# Where the work is, for the one line an interrupt prints (``program.interrupted``): the
# last progress line's part, rounds done and rounds in all (``ProgressLog``), and a batch's
# runs done and in all (``runs.run_missing``).
PROGRESS: dict = {}


def quiet_logs() -> None:
    """Keeps absl's INFO chatter (e.g. JAX probing for absent TPUs) off the terminal, and
    prints Python warnings as one line each ('<program>: warning: ...')."""
    logging.set_verbosity(logging.WARNING)
    program = pathlib.Path(sys.argv[0]).stem
    warnings.formatwarning = lambda message, *_, **__: f"{program}: warning: {message}\n"


def fail(program: str, message: str) -> None:
    """Prints one error line and exits with status 2 (a claimed output folder is released
    on the way out)."""
    print(f"{program}: error: {message}", file=sys.stderr)
    sys.exit(2)


REPORT_PACKAGES = ("matplotlib", "scipy")  # the report extra (setup.cfg)


def need_report_extra(program: str, packages: tuple = REPORT_PACKAGES) -> None:
    """Ends ``program`` with one line when the report extra's ``packages`` (matplotlib,
    scipy: figures, tables, significance tests) are not installed; the core (``pip
    install -e .``) needs neither."""
    import importlib.util

    missing = [name for name in packages if importlib.util.find_spec(name) is None]
    if missing:
        fail(
            program,
            f"{' and '.join(missing)} missing: figures, tables and significance tests need "
            'the report extra: pip install -e ".[report]"',
        )


class ProgressLog:
    """Prints 'round t/T, elapsed, time left' lines between compiled chunks (elapsed: since
    the command started), and a line when compiling starts and one when it ends (the
    engine calls ``compiling`` and ``compiled``)."""

    def __init__(self, label: str, stream=sys.stderr):
        self.label, self.stream = label, stream
        self.resumed_at = 0  # rounds done by an earlier, interrupted invocation
        self._compile_start = None

    def compiling(self) -> None:
        self._compile_start = time.perf_counter()
        before = "".join(f"{what}; " for what in _BEFORE_COMPILING)
        _BEFORE_COMPILING.clear()
        print(
            f"[{self.label}] {before}compiling ... ({command_seconds():.1f} s since the start)",
            file=self.stream or sys.stderr,
            flush=True,
        )

    def compiled(self) -> None:
        if self._compile_start is None:
            return
        seconds, self._compile_start = time.perf_counter() - self._compile_start, None
        stream = self.stream or sys.stderr
        print(f"[{self.label}] compiled in {seconds:.1f} s", file=stream, flush=True)

    def __call__(self, done: int, total: int, seconds: float) -> None:
        PROGRESS["rounds"] = (self.label, done, total)
        if seconds == 0 and done > 0:  # scan_in_chunks resuming from a checkpoint
            self.resumed_at = done
            print(
                f"[{self.label}] round {done}/{total} resumed from the checkpoint", file=self.stream
            )
            return
        left = seconds / max(done - self.resumed_at, 1) * (total - done)
        print(
            f"[{self.label}] round {done}/{total} ({100 * done / total:.0f}%), "
            f"{command_seconds():.1f} s elapsed, ~{left:.1f} s left",
            file=self.stream or sys.stderr,
            flush=True,
        )


class LoadLog:
    """Prints 'file: MB read, queries, MB/s, time left' lines while a LETOR file is parsed
    (the ``progress`` of ``data.read_letor``): nothing for a load that ends within
    ``quiet_s`` seconds, then a line every ``every_s`` seconds and one at the end."""

    def __init__(self, stream=None, quiet_s: float = 3.0, every_s: float = 5.0):
        self.stream, self.quiet_s, self.every_s = stream, quiet_s, every_s
        self._path, self._next, self._printed = None, quiet_s, False

    def __call__(self, p) -> None:
        if p.path != self._path:  # a new file
            self._path, self._next, self._printed = p.path, self.quiet_s, False
        if p.seconds < self._next and not (p.done and self._printed):
            return
        self._next = p.seconds + self.every_s
        self._printed = True
        if p.done:
            where = f"done in {p.seconds:.1f} s"
        else:
            share = 100 * p.bytes_read / max(p.total_bytes, 1)
            where = f"{share:.0f}%, ~{p.seconds_left:.0f} s left"
        print(
            f"[loading] {p.path}: {p.bytes_read / 1e6:.0f}/{p.total_bytes / 1e6:.0f} MB, "
            f"{p.queries} queries, {p.documents} documents, {p.mb_per_s:.0f} MB/s, {where}",
            file=self.stream or sys.stderr,
            flush=True,
        )
