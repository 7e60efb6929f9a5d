"""What a binary prints: one-line errors and warnings, progress between chunks."""

from __future__ import annotations

import pathlib
import sys
import warnings

from absl import logging


class UserError(Exception):
    """A problem with the user's input: printed as one line, no traceback."""


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


class ProgressLog:
    """Prints 'round t/T, elapsed, time left' lines between compiled chunks."""

    def __init__(self, label: str, stream=sys.stderr):
        self.label, self.stream = label, stream
        self.resumed_at = 0  # rounds done by an earlier, interrupted invocation

    def __call__(self, done: int, total: int, seconds: float) -> None:
        if seconds == 0 and done > 0:  # scan_in_chunks resuming from a checkpoint
            self.resumed_at = done
            print(
                f"[{self.label}] round {done}/{total} resumed from the checkpoint", file=self.stream
            )
            return
        left = seconds / max(done - self.resumed_at, 1) * (total - done)
        print(
            f"[{self.label}] round {done}/{total} ({100 * done / total:.0f}%), "
            f"{seconds:.1f} s elapsed, ~{left:.1f} s left",
            file=self.stream,
            flush=True,
        )
