r"""Reproduce the papers' figures and tables: one recipe per figure or table.

  python -m experiments.batch --list
  python -m experiments.batch --recipe=fpdgd_fig4 --data_root=/data/MSLR-WEB10K
  python -m experiments.batch --recipe=unlearning_table3 --quick        # minutes, synthetic
  python -m experiments.batch --recipe=all --quick --data_root=../shared/data/mslr_sample

A recipe is a list of runs of the experiment binaries.  Each run writes
<results_dir>/<recipe>/<fold>/<run>/results.json; a run whose results.json exists is
skipped, so re-running a recipe (e.g. after an interruption) only does what is
missing.  Runs of a long binary report their own progress; the batch prints how
many runs are done and an estimate of the time left.  When its runs are done,
the recipe's figures and tables are made by experiments.figures into
<results_dir>/<recipe>/report/.

--data_root is a dataset in the standard layout: Fold1/ ... Fold5/ with
train.txt and test.txt (MQ2007, MSLR-WEB10K), or one train.txt + test.txt
(Yahoo, Istella-S); every fold found is a separate run, as the papers average
over folds.  Without --data_root the runs use the synthetic dataset.
--quick shrinks every recipe (rounds, runs, clients) to finish in minutes.
--jobs=N runs N runs at a time (worth it with many cores, or one GPU per run).

Non-IID Type 1 (intents) runs are always on synthetic intents (they need the
thesis's intent-change collection, not a LETOR fold; give its files to
experiments/noniid.py --intent_files directly).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import pathlib
import subprocess
import sys
import time

from absl import app, flags

from experiments import common, paper_figures
from experiments import figures as report
from experiments.recipes import CLICKS, DP_GRID, Recipe, Run, recipes  # noqa: F401
from foltr_jax import files

FLAGS = flags.FLAGS
flags.DEFINE_list("recipe", [], "Recipes to run (see --list), or 'all'.")
flags.DEFINE_bool("list", False, "List the recipes and exit.")
flags.DEFINE_bool("quick", False, "A small version of every run (minutes on a laptop).")
flags.DEFINE_string("data_root", "", "Dataset folder (FoldN/ or train.txt + test.txt).")
flags.DEFINE_string("results_dir", "results/batch", "Where every run's results go.")
flags.DEFINE_integer("n_runs", 0, "Repetitions per fold; 0: 5 as the papers (2 with --quick).")
flags.DEFINE_bool("dry_run", False, "Print the commands instead of running them.")
flags.DEFINE_integer(
    "jobs", 1, "Runs at a time (each is one process; on a many-core machine or one per GPU)."
)

# --quick without --data_root: these binaries share a smaller synthetic dataset (the same
# one, so that FPDGD and FOLtR-ES are compared on the same queries).
SMALL_SYNTHETIC = ("fpdgd", "foltr_es", "poisoning", "unlearning")


def dataset_flags(data_root: str) -> list:
    """[(fold name, data flags)] for every fold under data_root (synthetic when empty)."""
    if not data_root:
        return [("synthetic", ())]
    root = pathlib.Path(data_root)
    if not root.is_dir():
        raise common.UserError(f"--data_root: no such folder {data_root}")
    folds = sorted(p for p in root.glob("Fold*") if p.is_dir())
    if folds:
        return [(fold.name, (f"--fold_dir={fold.resolve()}",)) for fold in folds]
    if (root / "train.txt").is_file() and (root / "test.txt").is_file():
        return [
            (
                root.name,
                (
                    f"--train_path={(root / 'train.txt').resolve()}",
                    f"--test_path={(root / 'test.txt').resolve()}",
                ),
            )
        ]
    raise common.UserError(
        f"--data_root: {data_root} has neither Fold*/ nor train.txt and test.txt"
    )


def _commands(recipe: Recipe, results_dir: pathlib.Path, folds, n_runs: int, quick: bool):
    """(output folder, argv) for every run of ``recipe`` on every fold."""
    commands = []
    for fold, data in folds:
        for run in recipe.runs:
            own = run.own_data and data  # the run's synthetic data, once for all folds
            if own and fold != folds[0][0]:
                continue
            out = results_dir / recipe.name / ("synthetic" if own else fold) / run.name
            extra = (f"--n_runs={n_runs}",) if n_runs else ()
            if quick and run.binary in SMALL_SYNTHETIC and not data:
                extra += ("--synthetic_queries=60",)
            data_flags = () if run.own_data else data
            argv = [sys.executable, "-m", f"experiments.{run.binary}", *data_flags, *run.flags]
            argv += extra
            commands.append((out, argv + [f"--output_dir={out}"]))
    return commands


def _complete(out: pathlib.Path) -> bool:
    """A run is done when its results.json (or a grid's grid.json, written last, and every
    cell's results.json it lists) exists and reads as a JSON object.  One whose files exist
    but cannot be read is not done: it runs again, and the batch says so."""
    grid = out / "grid.json"
    names = ["results.json"]
    if os.path.lexists(grid):
        listed = _read_object(grid)
        cells = listed.get("cells") if isinstance(listed, dict) else None
        if not (isinstance(cells, list) and all(isinstance(c, str) for c in cells)):
            print(f"{grid}: cannot be read as a grid; running it again", file=sys.stderr)
            return False
        names = [f"{cell}/results.json" for cell in cells]
    elif not os.path.lexists(out / "results.json"):
        return False
    for name in names:
        if not isinstance(_read_object(out / name), dict):
            print(f"{out / name}: cannot be read as results; running it again", file=sys.stderr)
            return False
    return True


def _read_object(path: pathlib.Path):
    """The JSON in a regular file ``path``, or None when it cannot be read."""
    if files.special_file(path) or not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None


def run_recipe(
    recipe: Recipe, results_dir: pathlib.Path, folds, n_runs, quick, dry_run, jobs=1
) -> bool:
    """Runs what is missing, then the report; False when a run failed."""
    commands = _commands(recipe, results_dir, folds, n_runs, quick)
    todo = [(out, argv) for out, argv in commands if not _complete(out)]
    done_before = len(commands) - len(todo)
    print(
        f"[{recipe.name}] {recipe.title}: {len(commands)} run(s), {done_before} already done",
        file=sys.stderr,
    )
    if dry_run:
        for _, argv in todo:
            print(" ".join(argv))
        return True
    failed, start = [], time.perf_counter()

    def execute(argv):
        return subprocess.run(argv, capture_output=True, text=True, check=False)

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(execute, argv): out for out, argv in todo}
        for i, future in enumerate(concurrent.futures.as_completed(futures), 1):
            out, result = futures[future], future.result()
            if result.returncode != 0:
                failed.append(out)
                tail = result.stderr.strip().splitlines()[-3:]
                print(f"[{recipe.name}] FAILED {out}: {' | '.join(tail)}", file=sys.stderr)
            elapsed = time.perf_counter() - start
            print(
                f"[{recipe.name}] {done_before + i}/{len(commands)} runs done, {elapsed:.0f} s, "
                f"~{elapsed / i * (len(todo) - i):.0f} s left",
                file=sys.stderr,
                flush=True,
            )
    if failed:
        return not failed
    summary = report.build_report(
        results_dir / recipe.name, baseline=recipe.baseline, paired=recipe.paired
    )
    figures = [f for group in summary["groups"].values() for f in group.get("figures", [])]
    try:
        paper_figures.make_page(results_dir / recipe.name, recipe)
    except (report.ReportError, ValueError, KeyError, IndexError, TypeError) as error:
        # the runs and the report are on disk; `experiments.report --recipe` redraws the page
        print(f"[{recipe.name}] paper figures not drawn: {error!r}", file=sys.stderr)
    print(
        f"[{recipe.name}] report: {len(figures)} figure file(s), and the paper's figures and "
        f"tables on page.png/page.pdf in {results_dir / recipe.name / 'report'}",
        file=sys.stderr,
    )
    return True


def main(argv):
    common.quiet_logs()
    if len(argv) > 1:
        common.fail("batch", f"unexpected arguments {argv[1:]}")
    available = recipes(FLAGS.quick)
    if FLAGS.list:
        for recipe in available.values():
            print(f"{recipe.name:<20} {len(recipe.runs):>3} run(s)  {recipe.title}")
        return
    names = list(available) if FLAGS.recipe == ["all"] else FLAGS.recipe
    if not names:
        common.fail("batch", "--recipe: name one or more recipes (see --list), or 'all'")
    unknown = [n for n in names if n not in available]
    if unknown:
        common.fail("batch", f"--recipe: unknown recipe(s) {unknown}; see --list")
    if FLAGS.jobs < 1:
        common.fail("batch", f"--jobs must be at least 1, got {FLAGS.jobs}")
    if FLAGS.n_runs < 0:
        common.fail("batch", f"--n_runs must be at least 0, got {FLAGS.n_runs}")
    try:
        folds = dataset_flags(FLAGS.data_root)
    except common.UserError as error:
        common.fail("batch", str(error))
    n_runs = FLAGS.n_runs or (2 if FLAGS.quick else 5)
    results_dir = pathlib.Path(FLAGS.results_dir)
    claimed = None
    if not FLAGS.dry_run:  # one batch at a time in a results folder, writable, before any run
        try:
            claimed = common.Output(results_dir, outputs=(), flag="results_dir")
        except common.UserError as error:
            common.fail("batch", str(error))
    outcomes = [
        run_recipe(available[n], results_dir, folds, n_runs, FLAGS.quick, FLAGS.dry_run, FLAGS.jobs)
        for n in names
    ]
    if claimed is not None:
        claimed.release()
    ok = all(outcomes)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    app.run(main)
