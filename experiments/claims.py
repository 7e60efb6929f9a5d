r"""The papers' claims, checked in one command on real data.

  python -m experiments.claims                       # the MSLR excerpt (fetched when absent)
  python -m experiments.claims --jobs=2              # two runs at a time (two cores)
  python -m experiments.claims --data_root=/data/MSLR-WEB10K   # its five folds, 3 runs each
  python -m experiments.claims --folds=1 --n_runs=5          # the excerpt's own split alone
  python -m experiments.claims --claims=fpdgd_table2,poisoning_lie   # some claims only
  python -m experiments.claims --list

Each claim quotes its paper (its words, where they are) and lists its cells: every setting the
paper makes the claim for (click models, rankers, ε, m, n′, Δt, γ, …), the papers' grids scaled
in rounds and runs, and narrowed where a claim's setting says so.  Each cell has a check reading
the runs' results: ours as mean ± sd over runs (pooled over folds), the paper's number beside ours
where the paper prints one (with the ratio), the test (with the direction it found) and one of
four verdicts: *holds*; *contradicted* (significantly the other way, or absent although the runs
had the power to show the claim's effect); *inconclusive* (not the power to tell: the cell says
how many runs would give power 0.8; or a no-difference cell whose factor was not shown to act);
*not testable here* (the paper states it for data this run lacks: listed, not counted).  A
difference must be shown above a least effect stated per claim (one-sided t-test, paired where
runs share their random streams); a claim of no difference must pass an equivalence test (two
one-sided tests against a margin stated per claim) and its control, a check in the same cell that
the factor it varies acted.  A claim's verdict combines its cells but those the paper states as
exceptions; bookkeeping checks (arithmetic of the run schedule) are shown apart and not counted.
A claim that does not hold gets its diagnosis: runs that change the one setting suspected, run
after the table's runs, and what they showed.  The claims and their
checks are in experiments/lib/claims/, the runs they read in the run catalogue
(experiments/lib/recipes/), one module per paper; the table is printed and written to
<results_dir>/claims.md and claims.json.

The runs share the persistent compilation cache of every binary (``--compile_cache``, by
default ~/.cache/foltr_jax/jax), so runs of one shape compile once.  Runs shared by
several claims run once.  Every run writes <results_dir>/<fold>/<run>/results.json;
a run whose results were made by the same command, code and data (their provenance) is not run
again, a run made otherwise is missing for the table (``provenance.same_run``: with --norun it is
not read, said in one line), and an interrupted run resumes from its checkpoint,
so the same command after a kill continues where it stopped.  --data_root takes a LETOR dataset
(Fold1/ ... or train.txt + test.txt); without it the MSLR excerpt (43 + 43 queries) is used and
fetched when absent.  Non-IID Type 1 runs on synthetic intents whatever the data (the thesis's
intent-change collection is not a LETOR fold).

Folds: the papers average over five folds, and so do the claims (--folds=5): a Fold*/ dataset's
first five, and for a train.txt + test.txt pair such as the excerpt the pair itself (fold 1) and
four seeded re-partitions of its queries (foltr_jax.data.folds: 43 + 43 whole queries each,
seed 0; written once in the datasets' cache folder).  A setting has --n_runs runs in each fold
(3: 15 in all); a run whose setting names its own runs has that many in all, shared by the
folds.  The folds' runs are pooled: a paired test pairs runs of the same fold and seed, a
Welch test sees the spread between folds; a run lacking a fold's results is missing.
"""

from __future__ import annotations

import json
import pathlib
import sys
import time

from absl import app, flags

from experiments.lib import program, provenance, runs, shared_flags
from experiments.lib.cli import UserError, need_report_extra
from foltr_jax.core import files

need_report_extra("claims")  # the t-tests: scipy
from experiments.lib import claims as catalogue
from experiments.lib.claims import ledger, pages
from experiments.lib.claims.runs import (
    MISSING_DIAGNOSIS,
    commands,
    diagnose,
    reader,
)
from experiments.lib.claims.table import document, evaluate, verdict_counts
from foltr_jax.engine.results_files import refuse_links

FLAGS = flags.FLAGS
# 5 folds (the papers') x 3 runs: 15 runs a setting, above the 12 the median inconclusive cell
# of the single-fold table needed for power 0.8.  A run's process costs more than its runs
# (fpdgd_c1000 on one fold, load 5-7: 194 s with 2 runs, 214-249 s with 3, 275 s with 5):
# fpdgd_dp_little_impact took 283 s on one fold x 5 runs, 1,150 s on 5 folds x 3
DEFAULT_FOLDS, DEFAULT_RUNS = 5, 3
flags.DEFINE_string(
    "data_root",
    "",
    "LETOR dataset (Fold*/ or train.txt + test.txt); empty: the MSLR excerpt, fetched by "
    "third_party/mslr_sample/fetch.py when absent; 'synthetic': the synthetic dataset.",
)
flags.DEFINE_string("results_dir", "results/claims", "Where the runs and the table go.")
shared_flags.define_compile_cache_flag()  # handed on to every run (program.main)
flags.DEFINE_list("claims", [], "Claims to check (see --list); empty: all of them.")
flags.DEFINE_bool("reduced", False, "Only the reduced set (the CI's claims, a few minutes).")
flags.DEFINE_bool("list", False, "List the claims, their cells and runs, and exit.")
flags.DEFINE_integer(
    "folds",
    DEFAULT_FOLDS,
    "Folds to run and pool, as the papers average over five: of a Fold*/ dataset its first N; "
    "of a train.txt + test.txt pair (the MSLR excerpt) the pair itself and N-1 seeded "
    "re-partitions of its queries (foltr_jax.data.folds, seed 0); 1: the pair alone. "
    "Synthetic data has one.",
)
flags.DEFINE_integer(
    "n_runs",
    DEFAULT_RUNS,
    "Repetitions per run and fold: a setting has N x --folds runs (at least 2 in all: the "
    "t-tests); a run whose setting names its own runs has them in all, shared by the folds.",
)
flags.DEFINE_integer("eval_every", 1, "Offline metrics every K rounds (and the last).")
flags.DEFINE_integer("jobs", 1, "Runs at a time (one process each).")
flags.DEFINE_bool(
    "write_docs",
    False,
    "After the run, record its table as the documentation's (docs/claims.md, docs/claims.json) "
    "and regenerate the claims blocks of the paper pages, reproduce.md and README.md; only "
    "from a complete run of every claim and its diagnoses on the MSLR excerpt.",
)
flags.DEFINE_bool(
    "run",
    True,
    "Run the missing runs (--norun: only read what --results_dir holds and write the table; "
    "a claim without its results is 'not run').",
)
flags.DEFINE_bool(
    "diagnose", True, "Run the diagnosis of every claim that does not hold (its own runs)."
)


def write_table(results_dir: pathlib.Path, record: str, text: str) -> None:
    """claims.json and claims.md, both or neither (a read-only folder, a full disk: one
    line, and the table of an earlier run, if any, left whole)."""
    try:
        files.write_together({
            results_dir / "claims.json": lambda stream: stream.write(record.encode()),
            results_dir / "claims.md": lambda stream: stream.write(text.encode()),
        })  # fmt: skip
    except OSError as error:
        raise UserError(
            f"--results_dir: cannot write claims.json and claims.md in {results_dir} "
            f"({error.strerror or error}); neither was written"
        ) from None


def docs_data(data_root: str) -> None:
    """UserError naming --write_docs unless ``data_root`` is the MSLR excerpt: the pages
    say their numbers were measured on it."""
    if runs.describe(data_root) != runs.describe(str(runs.PLACES[0])):
        raise UserError(
            f"--write_docs: the pages record a run on the MSLR excerpt, and this one is on "
            f"{runs.describe(data_root)}; run without --data_root, or without --write_docs"
        )


def docs_complete(table: list, failed: list, diagnoses: dict) -> None:
    """UserError naming --write_docs (after the table is written to --results_dir) unless
    every run of the table is complete as its command makes it now (this code, data and
    environment), none failed and every diagnosis read its runs: the pages record a
    complete run of every claim."""
    missing = [out for out, _ in runs.missing(table, say=False)]
    missing += [out for out in failed if out not in missing]  # a failed diagnosis run
    undiagnosed = [key for key, text in diagnoses.items() if MISSING_DIAGNOSIS in text]
    if missing or undiagnosed:
        problems = []
        if missing:
            more = ", ..." if len(missing) > 3 else ""
            shown = ", ".join(str(p) for p in missing[:3]) + more
            problems.append(f"{len(missing)} run(s) missing, failed or made otherwise ({shown})")
        if undiagnosed:
            problems.append(f"diagnosis runs missing for {', '.join(undiagnosed)}")
        raise UserError(
            f"--write_docs: the documentation was not written: {'; '.join(problems)}; the pages "
            "record a complete run of every claim (run without --norun to make them)"
        )


def run() -> program.Done:
    claims = catalogue.select([n for n in FLAGS.claims if n], FLAGS.reduced)
    if FLAGS.write_docs and (FLAGS.claims or FLAGS.reduced or not FLAGS.diagnose):
        raise UserError(
            "--write_docs: records the full claims and their diagnoses only (no --claims, "
            "--reduced, --nodiagnose)"
        )
    if FLAGS.list:
        for c in claims:
            cells = "; ".join(cell.label for cell in c.cells)
            print(f"{c.key:<28} {c.paper}, {c.where}\n{'':<28} cells: {cells}\n"
                  f"{'':<28} runs: {', '.join(c.runs)}")  # fmt: skip
        return program.Done()
    for name, least in (("n_runs", 1), ("folds", 1), ("eval_every", 1), ("jobs", 1)):
        value = getattr(FLAGS, name)
        if value < least:
            raise UserError(f"--{name}: must be at least {least}, got {value}")
    data_root = runs.excerpt_unless_given(FLAGS.data_root)
    folds = runs.dataset_flags(data_root, FLAGS.folds)
    if FLAGS.n_runs * len(folds) < 2:  # a t-test needs two runs a setting
        raise UserError(
            f"--n_runs: {FLAGS.n_runs} run(s) a fold on {len(folds)} fold(s) is one run a "
            "setting; the t-tests need at least 2"
        )
    if FLAGS.write_docs:
        docs_data(data_root)
    results_dir = pathlib.Path(FLAGS.results_dir)
    refuse_links(results_dir, argument="--results_dir")  # never written through a link
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(
            f"--results_dir: cannot make {results_dir} ({error.strerror or error})"
        ) from None
    start = time.perf_counter()
    todo = commands(catalogue.run_names(claims), results_dir, folds, FLAGS.n_runs, FLAGS.eval_every)
    print(f"[claims] {len(claims)} claim(s), {len(todo)} run(s)", file=sys.stderr)
    failed = []
    invocation, code = None, provenance.code()
    if FLAGS.run:
        invocation = ledger.Invocation(results_dir, code, True, todo, FLAGS.jobs, time.perf_counter)
        failed = runs.run_missing(
            todo, FLAGS.jobs, "claims", below=results_dir, on_done=invocation.save
        )
    results = reader(results_dir, todo)  # only the runs made as the claims ask
    rows = evaluate(claims, results)
    diagnoses = {}
    if FLAGS.diagnose:
        diagnoses, more_failed = diagnose(
            claims,
            rows,
            results_dir,
            folds,
            n_runs=FLAGS.n_runs,
            eval_every=FLAGS.eval_every,
            jobs=FLAGS.jobs,
            run=FLAGS.run,
            table=todo,
        )
        failed += more_failed
        rows = evaluate(claims, results, diagnoses)
    seconds = time.perf_counter() - start
    data = runs.describe(data_root)
    payload = {"data": data, "seconds": seconds, "ran": FLAGS.run,
               "source_version": code, "verdicts": verdict_counts(rows),
               "n_runs": FLAGS.n_runs, "folds": [name for name, _ in folds],
               "fold_seed": runs.FOLD_SEED, "eval_every": FLAGS.eval_every, "jobs": FLAGS.jobs,
               "claims": rows}  # fmt: skip
    if invocation is not None:
        invocation.save()
        payload["wall_seconds"] = invocation.wall_seconds()
        payload["invocations"] = invocation.count()
    text = document(payload)
    write_table(results_dir, json.dumps(payload, indent=1) + "\n", text)
    print(text)
    if FLAGS.write_docs:
        docs_complete(todo, failed, diagnoses)
        pages.write_docs(payload, text, catalogue.by_module())
    print(f"[claims] table: {results_dir / 'claims.md'}", file=sys.stderr)
    return program.Done(status=1 if failed else 0)


main = program.main("claims", run, distributed=None)

if __name__ == "__main__":
    app.run(main, flags_parser=program.parse_flags)
