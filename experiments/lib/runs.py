"""Running many experiment binaries (experiments.batch, experiments.claims): their data and
their processes.  No flags are defined here.

Data: a dataset root's folds (``dataset_flags``), or the real MSLR-WEB10K excerpt (43 + 43
queries of Fold 1), which the quick recipes and the claims check use whenever it is at
hand: in shared/data/mslr_sample/ in the folder that holds the repository (a developers'
copy), or in third_party/mslr_sample/data/, where ``third_party/mslr_sample/fetch.py`` puts it (from the
rankeval 0.8.2 sdist on PyPI; provenance in that folder's README).

Processes: ``run_missing`` runs the commands whose output folder holds no results made by
that very command (``provenance.same_run``: its arguments with their flag files, the code,
the plugins' sources, the data files' contents, the versions, environment and device that
compute it: ``complete``), a few at a time; a binary started again resumes from its own
checkpoint.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

from experiments.lib import provenance
from experiments.lib.cli import PROGRESS, UserError
from foltr_jax.core import files
from foltr_jax.data import dataset_cache
from foltr_jax.data import folds as data_folds
from foltr_jax.engine.results_files import RESULTS_FORMAT

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]  # experiments/lib/runs.py
FETCH = REPO_ROOT / "third_party" / "mslr_sample" / "fetch.py"
PLACES = (
    REPO_ROOT.parent / "shared" / "data" / "mslr_sample",
    REPO_ROOT / "third_party" / "mslr_sample" / "data",
)


def find_excerpt() -> pathlib.Path | None:
    """The first folder of PLACES holding train.txt and test.txt, or None."""
    for place in PLACES:
        if (place / "train.txt").is_file() and (place / "test.txt").is_file():
            return place
    return None


def find_or_fetch_excerpt(timeout: float = 600) -> pathlib.Path | None:
    """The excerpt's folder, running the fetch recipe when it is nowhere; None when the
    fetch fails (no network, no pip): the caller falls back to synthetic data."""
    found = find_excerpt()
    if found is not None:
        return found
    print("the MSLR excerpt is not here: fetching it (third_party/mslr_sample/fetch.py)",
          file=sys.stderr)  # fmt: skip
    try:
        done = subprocess.run(
            [sys.executable, str(FETCH)],
            check=False,  # a failure is reported below, with stderr's last lines
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        print(f"fetching the MSLR excerpt failed: {error}", file=sys.stderr)
        return None
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-2:])
        print(f"fetching the MSLR excerpt failed: {tail}", file=sys.stderr)
        return None
    return find_excerpt()


EXCERPT_NAME = "mslr_sample"  # --data=mslr_sample, --data_root=mslr_sample


def default_data_root(data_root: str, quick: bool, fetch: bool = True) -> str:
    """--data_root as given ('synthetic': ''); empty with ``quick``, or 'mslr_sample': the
    MSLR excerpt's folder when it is here or (``fetch``) fetchable, else '' (synthetic) or,
    named, a UserError."""
    if data_root == "synthetic":
        return ""
    if data_root == EXCERPT_NAME:
        found = find_or_fetch_excerpt() if fetch else find_excerpt()
        if found is None:
            raise UserError(
                "--data_root=mslr_sample: the MSLR excerpt is not here and could not be fetched "
                "(third_party/mslr_sample/fetch.py)"
            )
        return str(found)
    if data_root or not quick:
        return data_root
    found = find_or_fetch_excerpt() if fetch else find_excerpt()
    return str(found) if found else ""


def excerpt_unless_given(data_root: str) -> str:
    """--data_root as given ('synthetic': ''); empty: the MSLR excerpt's folder, fetched when
    absent ('mslr_sample' too); UserError naming --data_root when it cannot be had."""
    if data_root == "synthetic":
        return ""
    if data_root and data_root != EXCERPT_NAME:
        return data_root
    found = find_or_fetch_excerpt()
    if found is None:
        raise UserError(
            "--data_root: the MSLR excerpt is absent and could not be fetched "
            "(third_party/mslr_sample/fetch.py); give a dataset, or --data_root=synthetic"
        )
    return str(found)


def describe(data_root: str) -> str:
    """The data of ``data_root`` in words ('' : synthetic)."""
    if not data_root:
        return "synthetic"
    if pathlib.Path(data_root).resolve() in [p.resolve() for p in PLACES]:
        return "MSLR-WEB10K excerpt (Fold 1, 43 + 43 queries)"
    return data_root


FOLD_SEED = 0  # the seed of a train/test pair's re-partitioned folds (foltr_jax.data.folds)


def dataset_flags(data_root: str, folds: int | None = None, cache_dir=None) -> list:
    """[(fold name, data flags)] of the folds under data_root (synthetic when empty: one).

    ``folds`` None: every Fold*/ folder, or the one train.txt + test.txt pair.  ``folds`` N:
    the first N Fold*/ folders (UserError naming --folds when there are fewer); of a
    train.txt + test.txt pair (the MSLR excerpt) the pair itself, named after its folder,
    and N − 1 seeded re-partitions of its queries (``foltr_jax.data.folds.write_folds``,
    seed FOLD_SEED), named <folder>_fold<k> and written in ``cache_dir`` (None: the
    datasets' cache folder, $FOLTR_JAX_CACHE or ~/.cache/foltr_jax)."""
    if not data_root:
        return [("synthetic", ())]
    if folds is not None and folds < 1:
        raise UserError(f"--folds: must be at least 1, got {folds}")
    root = pathlib.Path(data_root)
    if not root.is_dir():
        raise UserError(f"--data_root: no such folder {data_root}")
    found = sorted(p for p in root.glob("Fold*") if p.is_dir())
    if found:
        if folds is not None and folds > len(found):
            raise UserError(f"--folds: {data_root} has {len(found)} Fold*/ folders, not {folds}")
        return [(fold.name, (f"--fold_dir={fold.resolve()}",)) for fold in found[:folds]]
    if not ((root / "train.txt").is_file() and (root / "test.txt").is_file()):
        raise UserError(f"--data_root: {data_root} has neither Fold*/ nor train.txt and test.txt")
    pair = ((root / "train.txt").resolve(), (root / "test.txt").resolve())
    pairs = [pair]
    if folds is not None and folds > 1:
        pairs = repartitioned(pair, folds, cache_dir)
    return [
        (root.name if k == 1 else train.parent.name,
         (f"--train_path={train}", f"--test_path={test}"))
        for k, (train, test) in enumerate(pairs, 1)
    ]  # fmt: skip


def repartitioned(pair, folds: int, cache_dir=None) -> list:
    """[(train path, test path)] of ``folds`` folds of a train/test pair: the pair and its
    seeded re-partitions (``foltr_jax.data.folds``), written in the cache; a UserError in one
    line when they cannot be made (naming --data_root for the data, the folder otherwise)."""
    cache = pathlib.Path(cache_dir) if cache_dir is not None else dataset_cache.default_cache_dir()
    # the excerpt's folds are mslr_sample_fold<k> wherever it is (third_party/.../data too):
    # the results name them the excerpt's, and pool them with its own split
    excerpt = pair[0].parent in [place.resolve() for place in PLACES]
    try:
        files.refuse_links(cache)
        return data_folds.write_folds(*pair, folds, FOLD_SEED, cache,
                                      EXCERPT_NAME if excerpt else None)  # fmt: skip
    except ValueError as error:
        raise UserError(
            f"--data_root: cannot make {folds} folds of {pair[0].parent}: {error}"
        ) from None
    except OSError as error:
        raise UserError(
            f"--folds: cannot write the folds of {pair[0].parent} in {cache} "
            f"({error.strerror or error})"
        ) from None


def complete(out: pathlib.Path, argv=None, say: bool = True) -> bool:
    """A run is done when its results.json (or a grid's grid.json, written last, and every
    cell's results.json it lists) exists and reads as a JSON object of this results format,
    and, with ``argv`` (the command that would make it now), when what made it (its
    "provenance") is what would make it now: ``provenance.same_run``.  One that is not done
    runs again, and (``say``) the reason is printed on stderr."""
    reason = not_done(out, argv)
    if reason and say:
        print(f"{reason}; running it again", file=sys.stderr)
    return reason is None


def not_done(out: pathlib.Path, argv=None) -> str | None:
    """Why the run in ``out`` is not ``complete`` for ``argv``, in words ('' when no results
    are there at all); None when it is."""
    out = pathlib.Path(out)
    names = results_files(out)
    if isinstance(names, str):
        return names
    for path in names:
        found = read_object(path)
        if not isinstance(found, dict):
            return f"{path}: cannot be read as results"
        if found.get("results_format") != RESULTS_FORMAT:
            return (
                f"{path}: results format {found.get('results_format')} (this version "
                f"writes {RESULTS_FORMAT})"
            )
        if argv is not None:
            difference = provenance.same_run(found.get("provenance"), argv)
            if difference:
                return f"{path}: not made by this command: {difference}"
    return None


def results_files(out: pathlib.Path) -> list | str:
    """The results files of the run in ``out``: its results.json, or those of the cells its
    grid.json (written last) lists; why not, in words, when there are none ('': nothing is
    there)."""
    grid = out / "grid.json"
    if os.path.lexists(grid):
        listed = read_object(grid)
        cells = listed.get("cells") if isinstance(listed, dict) else None
        if not (isinstance(cells, list) and all(isinstance(c, str) for c in cells)):
            return f"{grid}: cannot be read as a grid"
        return [out / cell / "results.json" for cell in cells]
    if not os.path.lexists(out / "results.json"):
        return ""
    return [out / "results.json"]


def made_as_asked(commands, tag: str, say: bool = True) -> Accept:
    """Which results files of ``commands`` ((output folder, argv)) a reader may take: those
    of the runs ``complete`` for their command (``provenance.same_run``).  Results there
    made otherwise (other flags, data, code, environment) are left out, said (``say``) in
    one line on stderr as '[tag] ...': for the reader they are missing."""
    accepted, other = [], []
    for out, argv in commands:
        reason = not_done(out, argv)
        if reason is None:
            accepted += results_files(pathlib.Path(out))
        elif reason:
            other.append(reason)
    if other and say:
        print(
            f"[{tag}] {len(other)} run(s) hold results not made by the command that would make "
            f"them now, read as missing (first: {other[0]})",
            file=sys.stderr,
        )
    return Accept(accepted)


class Accept:
    """``accept(path)``: whether the results file ``path`` is one of ``paths``."""

    def __init__(self, paths):
        self.paths = {os.path.abspath(p) for p in paths}

    def __call__(self, path) -> bool:
        return os.path.abspath(path) in self.paths


def forget(out: pathlib.Path) -> None:
    """Removes the results files of a run that is to run again (grid.json first: a grid is
    then not done), so that results of other settings never outlive a failed new run."""
    listed = read_object(out / "grid.json")
    cells = listed.get("cells") if isinstance(listed, dict) else None
    files.remove_own(out / "grid.json")
    if isinstance(cells, list):
        for cell in cells:
            if isinstance(cell, str) and "/" not in cell and cell not in ("", ".", ".."):
                files.remove_own(out / cell / "results.json")
    files.remove_own(out / "results.json")


def read_object(path: pathlib.Path):
    """The JSON in a regular file ``path``, or None when it cannot be read."""
    if files.special_file(path) or not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None


def missing(commands, say: bool = True) -> list:
    """The (output folder, argv) commands whose run is not ``complete`` (made by this very
    command, code and data); ``say``: why, on stderr, for results made otherwise."""
    return [(out, argv) for out, argv in commands if not complete(pathlib.Path(out), argv, say)]


class Started:
    """The processes a batch's runs are in now; ``stop`` sends each one SIGINT and lets no
    other start."""

    def __init__(self):
        self.live, self.lock, self.stopping = set(), threading.Lock(), False

    def stop(self) -> None:
        with self.lock:
            self.stopping = True
            for process in self.live:
                if process.poll() is None:
                    process.send_signal(signal.SIGINT)


def run_one(argv, started: Started):
    """One run's process to its end (a CompletedProcess with its output), or None when the
    batch stopped before it began."""
    with started.lock:
        if started.stopping:
            return None
        # Its own session: a Ctrl-C at the terminal reaches the batch alone, which passes
        # one SIGINT on to each run (two could cut a run's own clean exit short).
        process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        )  # fmt: skip
        started.live.add(process)
    try:
        stdout, stderr = process.communicate()
    finally:
        with started.lock:
            started.live.discard(process)
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)


def run_missing(commands, jobs: int, tag: str, below=None, on_done=None) -> list:
    """Runs the ``missing`` (output folder, argv) commands, ``jobs`` at a time, printing
    progress as '[tag] ...' on stderr; returns the folders whose run failed.  The results
    of a run made otherwise are removed before it runs again.  An interrupt (Ctrl-C) stops
    the runs started (each gets SIGINT, saves nothing more and keeps its checkpoint) and
    starts no other; the runs done so far are in ``cli.PROGRESS`` for the line it prints.
    Before any run, a symbolic link among the output folders and the folders above them
    down to ``below`` (the --results_dir) is a UserError naming --results_dir.  ``on_done``,
    when given, is called with the number of runs done after each run ends."""
    for out, _ in commands:
        try:
            files.refuse_links(out, below)
        except files.LinkedPathError as error:
            raise UserError(f"--results_dir: {error.strerror}") from None
    todo = missing(commands)
    for out, _ in todo:
        forget(pathlib.Path(out))
    done_before = len(commands) - len(todo)
    PROGRESS["runs"] = (done_before, len(commands))
    failed, start = [], time.perf_counter()
    runs_now = Started()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs)
    try:
        futures = {pool.submit(run_one, argv, runs_now): out for out, argv in todo}
        for i, future in enumerate(concurrent.futures.as_completed(futures), 1):
            out, result = futures[future], future.result()
            if result.returncode != 0:
                failed.append(out)
                tail = result.stderr.strip().splitlines()[-3:]
                print(f"[{tag}] FAILED {out}: {' | '.join(tail)}", file=sys.stderr)
            else:
                PROGRESS["runs"] = (PROGRESS["runs"][0] + 1, len(commands))
            elapsed = time.perf_counter() - start
            print(
                f"[{tag}] {done_before + i}/{len(commands)} runs done, {elapsed:.0f} s, "
                f"~{elapsed / i * (len(todo) - i):.0f} s left",
                file=sys.stderr,
                flush=True,
            )
            if on_done is not None:
                on_done(PROGRESS["runs"][0])
    except KeyboardInterrupt:
        runs_now.stop()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return failed
