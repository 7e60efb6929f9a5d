"""The claims' runs as processes: each run's command per fold (``commands``), and the
diagnosis runs of the claims that do not hold (``diagnose``): each claim's own diagnosis, and
for an inconclusive claim its runs again with the runs per setting its cells say would give
power 0.8 (``power_runs``).  No flags are read here: the binary (experiments.claims) passes
its settings down."""

from __future__ import annotations

import pathlib
import sys

from experiments.lib import runs
from experiments.lib.claims import RUNS
from experiments.lib.claims.core import (
    CONTRADICTED,
    INCONCLUSIVE,
    POWER_WANTED,
    MissingResults,
    Results,
    recheck_text,
)

MISSING_DIAGNOSIS = "its runs are missing"  # a diagnosis that could not read its runs
POWER_CAP = 40  # the most runs per setting a power diagnosis runs (more: said, not run)


def _own_flag(run, name: str) -> int | None:
    """The integer the run's own flags give --``name`` (the last one counts), or None."""
    own = [f.split("=", 1)[1] for f in run.flags if f.startswith(f"--{name}=")]
    return int(own[-1]) if own else None


def _own_runs(run) -> int | None:
    """The runs a setting the run's own flags name (--n_runs), or None."""
    return _own_flag(run, "n_runs")


def runs_a_fold(run, n_runs: int, n_folds: int) -> int:
    """The --n_runs of ``run`` in each fold, so that every setting has as many runs in all
    whatever data it runs on: the driver's ``n_runs`` a fold (an own-data run, run once, has
    ``n_runs`` × ``n_folds``); a run whose flags name its own runs has that many in all,
    shared by its folds (rounded up)."""
    folds = 1 if run.own_data else n_folds
    own = _own_runs(run)
    if own is not None:
        return -(-own // folds)
    return n_runs * (n_folds if run.own_data else 1)


def runs_a_setting(run, n_runs: int, n_folds: int) -> int:
    """The runs a setting of ``run`` has in all (``runs_a_fold`` × its folds)."""
    return runs_a_fold(run, n_runs, n_folds) * (1 if run.own_data else n_folds)


FOLD_SEED_STRIDE = 1000  # fold k's runs (k ≥ 2) take seed + (k − 1) × this


def _own_seed(run) -> int:
    """The --seed the run's own flags name (0: the binaries' default)."""
    own = _own_flag(run, "seed")
    return 0 if own is None else own


def commands(names, results_dir: pathlib.Path, folds, n_runs: int, eval_every: int,
             more=None) -> list:  # fmt: skip
    """(output folder, argv) of every named run, each once per fold (own-data runs once),
    with ``runs_a_fold`` runs; ``more``: runs by name beside the catalogue's (a power
    diagnosis's).  Fold 1 runs with the run's own seed, fold k with that seed
    + (k − 1) × FOLD_SEED_STRIDE, so that no two folds share their clicks' and models'
    random streams."""
    catalogue = {**RUNS, **(more or {})}
    out = []
    for fold_index, (fold, data) in enumerate(folds):
        for name in dict.fromkeys(names):
            run = catalogue[name]
            if run.own_data and fold_index:  # its own synthetic data: once
                continue
            folder = results_dir / ("synthetic" if run.own_data else fold) / name
            per_fold = runs_a_fold(run, n_runs, len(folds))
            # the driver's runs a fold first (with one fold: the argv of earlier versions)
            extra = [f"--n_runs={n_runs * (len(folds) if run.own_data else 1)}"]
            if eval_every > 1 and not run.every_round:
                extra.append(f"--eval_every={eval_every}")
            own = [
                f"--n_runs={per_fold}" if f.startswith("--n_runs=") else f for f in run.flags
            ]  # its own --n_runs (its runs in all), a fold's share
            argv = [sys.executable, "-m", f"experiments.{run.binary}"]
            argv += [] if run.own_data else list(data)
            argv += [*extra, *own]  # the run's own flags last
            if fold_index:  # its own random streams: fold k's run i is not fold 1's run i
                argv.append(f"--seed={_own_seed(run) + fold_index * FOLD_SEED_STRIDE}")
            argv.append(f"--output_dir={folder}")
            out.append((folder, argv))
    return out


def reader(results_dir, todo, said=()) -> Results:
    """The results of the runs of ``todo`` and ``said`` ((folder, argv)) that their very
    command made (``provenance.same_run``); a run there made otherwise (other clients, rounds,
    runs, data, code) is missing for the claims, said in one line (for ``said``: already), and
    so is a run whose results lack one of the folds it is asked for."""
    accept = runs.made_as_asked(todo, "claims")
    accept.paths |= runs.made_as_asked(said, "claims", say=False).paths
    folds = {}  # every fold a run is asked for: one without its results makes it missing
    for folder, _ in [*todo, *said]:
        folds.setdefault(pathlib.Path(folder).name, set()).add(pathlib.Path(folder).parent.name)
    return Results(results_dir, accept=accept, folds=folds)


def power_runs(claims, rows, n_runs: int, n_folds: int = 1) -> dict:
    """{claim key: (runs per setting, {claim run: its variant with that many runs})} for each
    inconclusive claim whose cells say how many runs would give power POWER_WANTED (at most
    POWER_CAP), runs in all over the ``n_folds`` folds (``runs_a_setting``); a run that
    already has as many is read as it is."""
    by_key = {c.key: c for c in claims}
    out = {}
    for row in rows:
        needed = row.get("runs_needed")
        if row["verdict"] != INCONCLUSIVE or not needed or needed > POWER_CAP:
            continue
        names = {name: RUNS[name].variant(f"{name}_n{needed}", n_runs=needed)
                 for name in by_key[row["claim"]].runs
                 if runs_a_setting(RUNS[name], n_runs, n_folds) < needed}  # fmt: skip
        if names:
            out[row["claim"]] = (needed, names)
    return out


def diagnose(claims, rows, results_dir, folds, *, n_runs, eval_every, jobs, run=True, table=()):
    """Runs (``run``; else reads what is there) the diagnosis runs of every claim of
    ``claims`` that does not hold in ``rows`` (its own, and for an inconclusive one the power
    runs); ({claim key: its explanation}, the folders whose run failed).  The diagnoses read
    the runs of ``table`` (the table's commands) and their own, each only as its very command
    made it (``reader``)."""
    failing = {r["claim"] for r in rows if r["verdict"] in (CONTRADICTED, INCONCLUSIVE)}
    chosen = [c for c in claims if c.key in failing and c.diagnosis is not None]
    power = power_runs(claims, rows, n_runs, len(folds))
    more = {variant.name: variant for _, names in power.values() for variant in names.values()}
    if not chosen and not power:
        return {}, []
    names = [name for c in chosen for name in c.diagnosis.runs] + list(more)
    todo = commands(names, results_dir, folds, n_runs, eval_every, more)
    print(f"[claims] diagnosing {len({c.key for c in chosen} | set(power))} claim(s): "
          f"{len(todo)} run(s)", file=sys.stderr)  # fmt: skip
    failed = runs.run_missing(todo, jobs, "claims") if run else []
    results = reader(results_dir, todo, said=table)
    out = {}
    for claim in chosen:
        try:
            text = claim.diagnosis.explain(results)
        except MissingResults as error:
            text = f"{MISSING_DIAGNOSIS} ({error})"
        out[claim.key] = f"{claim.diagnosis.change}: {text}"
    for claim in claims:
        if claim.key not in power:
            continue
        needed, variants = power[claim.key]
        renamed = {name: variant.name for name, variant in variants.items()}
        try:
            text = recheck_text(claim.cells, results, renamed,
                                f"with {needed} runs a setting (power {POWER_WANTED} at the "
                                "claim's effect, from the spread seen)")  # fmt: skip
        except MissingResults as error:
            text = f"{MISSING_DIAGNOSIS} ({error})"
        change = f"Power: {needed} runs of {', '.join(variants)} instead of the table's"
        own = out.get(claim.key)
        out[claim.key] = f"{own} {change}: {text}" if own else f"{change}: {text}"
    return out, failed
