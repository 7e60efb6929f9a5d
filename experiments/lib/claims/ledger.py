"""The claims tool's invocations on one results folder, so that a table whose runs were made
over several invocations (one interrupted and started again) states its whole wall time.

``<results_dir>/claims_invocations.json`` holds one entry per invocation: when it started, the
code version it ran (``provenance.code()``), whether it ran runs (not --norun), a fingerprint of
the runs it was asked for, and its wall seconds and runs done so far, rewritten after every
finished run (so a killed invocation keeps its time up to its last finished run).  The table's
``wall_seconds`` sums the invocations that ran the same runs at the same code.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import pathlib

from experiments.lib.cli import UserError
from foltr_jax.engine.results_files import write_text_atomic

NAME = "claims_invocations.json"
_FIELDS = {"started": str, "source_version": str, "ran": bool, "runs": str, "jobs": int}


def runs_fingerprint(todo) -> str:
    """The runs asked for (their output folders and commands), as 16 hex digits."""
    text = json.dumps(sorted([str(out), list(map(str, argv))] for out, argv in todo))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _valid(entry) -> bool:
    if not isinstance(entry, dict):
        return False
    if any(not isinstance(entry.get(k), t) for k, t in _FIELDS.items()):
        return False
    seconds, done = entry.get("seconds"), entry.get("runs_done")
    return (
        isinstance(seconds, int | float)
        and not isinstance(seconds, bool)
        and math.isfinite(seconds)
        and seconds >= 0
        and isinstance(done, int)
        and not isinstance(done, bool)
        and done >= 0
    )


def read(results_dir: pathlib.Path) -> list[dict]:
    """The folder's invocations ([] without the file); a file that is not a list of entries
    as this module writes them is a UserError naming it."""
    path = pathlib.Path(results_dir) / NAME
    if not path.is_file():
        return []
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise UserError(f"--results_dir: {path} is unreadable ({error}); move it away") from None
    if not isinstance(entries, list) or not all(_valid(e) for e in entries):
        raise UserError(
            f"--results_dir: {path} is not a list of the claims tool's invocations; move it away"
        )
    return entries


class Invocation:
    """This invocation's entry, appended to the folder's ledger and rewritten as runs end."""

    def __init__(self, results_dir, source_version: str, ran: bool, todo, jobs: int, clock):
        self.results_dir, self.clock = pathlib.Path(results_dir), clock
        self.entries = read(self.results_dir)
        self.start = clock()
        self.entry = {
            "started": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "source_version": source_version,
            "ran": ran,
            "runs": runs_fingerprint(todo),
            "jobs": jobs,
            "seconds": 0.0,
            "runs_done": 0,
        }
        self.entries.append(self.entry)
        self.save()

    def save(self, runs_done: int | None = None) -> None:
        """Rewrites the ledger with this invocation's seconds so far (and runs done)."""
        self.entry["seconds"] = round(self.clock() - self.start, 1)
        if runs_done is not None:
            self.entry["runs_done"] = runs_done
        try:
            write_text_atomic(self.results_dir / NAME, json.dumps(self.entries, indent=1) + "\n")
        except OSError as error:
            raise UserError(
                f"--results_dir: cannot write {self.results_dir / NAME} ({error.strerror or error})"
            ) from None

    def wall_seconds(self) -> float:
        """Seconds of every invocation that ran these runs at this code, this one included."""
        return wall_seconds(self.entries, self.entry["source_version"], self.entry["runs"])

    def count(self) -> int:
        """How many invocations ``wall_seconds`` sums."""
        return len(_same(self.entries, self.entry["source_version"], self.entry["runs"]))


def _same(entries, source_version: str, runs: str) -> list[dict]:
    return [
        e
        for e in entries
        if e["ran"] and e["source_version"] == source_version and e["runs"] == runs
    ]


def wall_seconds(entries, source_version: str, runs: str) -> float:
    """The summed seconds of the invocations that ran ``runs`` at ``source_version``."""
    return round(sum(e["seconds"] for e in _same(entries, source_version, runs)), 1)
