"""The claims' runs as processes: each run's command per fold (``commands``), and the
diagnosis runs of the claims that do not hold (``diagnose``).  No flags are read here: the
binary (experiments.claims) passes its settings down."""

from __future__ import annotations

import pathlib
import sys

from experiments.lib import runs
from experiments.lib.claims import RUNS
from experiments.lib.claims.core import CONTRADICTED, INCONCLUSIVE, MissingResults, Results


MISSING_DIAGNOSIS = "its runs are missing"  # a diagnosis that could not read its runs


def commands(names, results_dir: pathlib.Path, folds, n_runs: int, eval_every: int) -> list:
    """(output folder, argv) of every named run, each once per fold (own-data runs once)."""
    out = []
    for fold_index, (fold, data) in enumerate(folds):
        for name in dict.fromkeys(names):
            run = RUNS[name]
            if run.own_data and fold_index:  # its own synthetic data: once
                continue
            folder = results_dir / ("synthetic" if run.own_data else fold) / name
            extra = [f"--n_runs={n_runs}"]
            if eval_every > 1 and not run.every_round:
                extra.append(f"--eval_every={eval_every}")
            argv = [sys.executable, "-m", f"experiments.{run.binary}"]
            argv += [] if run.own_data else list(data)
            # the run's own flags last: a diagnosis run may set its own --n_runs
            argv += [*extra, *run.flags, f"--output_dir={folder}"]
            out.append((folder, argv))
    return out


def reader(results_dir, todo, said=()) -> Results:
    """The results of the runs of ``todo`` and ``said`` ((folder, argv)) that their very
    command made (``provenance.same_run``); a run there made otherwise (other clients, rounds,
    runs, data, code) is missing for the claims, said in one line (for ``said``: already)."""
    accept = runs.made_as_asked(todo, "claims")
    accept.paths |= runs.made_as_asked(said, "claims", say=False).paths
    return Results(results_dir, accept=accept)


def diagnose(claims, rows, results_dir, folds, *, n_runs, eval_every, jobs, run=True, table=()):
    """Runs (``run``; else reads what is there) the diagnosis runs of every claim of
    ``claims`` that does not hold in ``rows``; ({claim key: its explanation}, the folders
    whose run failed).  The diagnoses read the runs of ``table`` (the table's commands) and
    their own, each only as its very command made it (``reader``)."""
    failing = {r["claim"] for r in rows if r["verdict"] in (CONTRADICTED, INCONCLUSIVE)}
    chosen = [c for c in claims if c.key in failing and c.diagnosis is not None]
    if not chosen:
        return {}, []
    names = [name for c in chosen for name in c.diagnosis.runs]
    todo = commands(names, results_dir, folds, n_runs, eval_every)
    print(f"[claims] diagnosing {len(chosen)} claim(s): {len(todo)} run(s)", file=sys.stderr)
    failed = runs.run_missing(todo, jobs, "claims") if run else []
    results = reader(results_dir, todo, said=table)
    out = {}
    for claim in chosen:
        try:
            text = claim.diagnosis.explain(results)
        except MissingResults as error:
            text = f"{MISSING_DIAGNOSIS} ({error})"
        out[claim.key] = f"{claim.diagnosis.change}: {text}"
    return out, failed
