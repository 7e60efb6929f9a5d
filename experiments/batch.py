r"""Reproduce the papers' figures and tables: one recipe per figure or table.

  python -m experiments.batch --list
  python -m experiments.batch --recipe=fpdgd_fig4 --data_root=/data/MSLR-WEB10K
  python -m experiments.batch --recipe=unlearning_table3 --quick    # minutes, the MSLR excerpt
  python -m experiments.batch --recipe=all --quick --data_root=synthetic

A recipe is a list of runs of the experiment binaries.  Each run writes
<results_dir>/<recipe>/<fold>/<run>/results.json, which records what made it (its
arguments, the code, the plugins' and data files' SHA-256); a run whose results.json was
made by the very command, code and data that would make it now is skipped, so
re-running a recipe (e.g. after an interruption) only does what is missing, and one made
otherwise (another --n_runs, an edited data file or plugin) runs again, saying why.  A
recipe's folder holds one batch's runs: <results_dir>/<recipe>/batch.json records whether it
was a --quick or a full batch and on which data, and a batch of the other kind or other
data into the same --results_dir is refused (give each its own --results_dir).  Before the
first run the batch names the data (folds, files, size), the runs to do and, from the runs
--results_dir already holds, an estimate of their time; runs of a long binary report their
own progress; the batch prints how many runs are done and an estimate of the time left.
When its runs are done, the recipe's figures and tables are made by experiments.lib.figures
into <results_dir>/<recipe>/report/.

--data_root is a dataset in the standard layout: Fold1/ ... Fold5/ with
train.txt and test.txt (MQ2007, MSLR-WEB10K), or one train.txt + test.txt
(Yahoo, Istella-S); every fold found is a separate run, as the papers average
over folds.  Without --data_root a --quick batch runs on the real MSLR-WEB10K excerpt
(43 + 43 queries; experiments/lib/runs.py: a developers' copy beside the repository, or
third_party/mslr_sample/data, fetched by third_party/mslr_sample/fetch.py when absent)
and only falls back to the synthetic dataset when the excerpt cannot be had; a full batch
without --data_root, and --data_root=synthetic, use the synthetic dataset.  Every page
names the data it shows.
--quick shrinks every recipe (rounds, runs, clients) to finish in minutes.
--jobs=N runs N runs at a time (worth it with many cores, or one GPU per run).
--n_devices=D shards every run's clients over D devices (on a CPU: D of its cores; it
pays where a run's clients' training is most of its round, e.g. FPDGD at 1,000 clients).

Non-IID Type 1 (intents) runs are always on synthetic intents (they need the
thesis's intent-change collection, not a LETOR fold; give its files to
experiments/noniid.py --intent_files directly).
"""

from __future__ import annotations

import os
import pathlib
import sys

from absl import app, flags

from experiments.lib import plugins, program, runs, shared_flags
from experiments.lib.cli import UserError, need_report_extra
from experiments.lib.output import Output

need_report_extra("batch")  # the figures and pages: matplotlib, scipy
from experiments.lib import figures as report
from experiments.lib import paper_figures
from experiments.lib.recipes import Recipe, recipes
from foltr_jax.engine.results_files import refuse_links, write_json_atomic

FLAGS = flags.FLAGS
shared_flags.define_plugin_flag()  # imported before the recipes are read, passed on to every run
shared_flags.define_compile_cache_flag()  # handed on to every run (program.main)
flags.DEFINE_list("recipe", [], "Recipes to run (see --list), or 'all'.")
flags.DEFINE_bool("list", False, "List the recipes and exit.")
flags.DEFINE_bool("quick", False, "A small version of every run (minutes on a laptop).")
flags.DEFINE_string(
    "data_root",
    "",
    "Dataset folder (FoldN/ or train.txt + test.txt), 'mslr_sample' (the MSLR-WEB10K excerpt, "
    "fetched when absent) or 'synthetic'; empty: the MSLR excerpt with --quick (synthetic if it "
    "cannot be had), else synthetic.",
)
flags.DEFINE_string("results_dir", "results/batch", "Where every run's results go.")
flags.DEFINE_integer("n_runs", 0, "Repetitions per fold; 0: 5 as the papers (2 with --quick).")
flags.DEFINE_bool("dry_run", False, "Print the commands instead of running them.")
flags.DEFINE_integer(
    "jobs", 1, "Runs at a time (each is one process; on a many-core machine or one per GPU)."
)
flags.DEFINE_integer(
    "n_devices",
    1,
    "Passed to every run as --n_devices: its clients sharded over this many devices (on a "
    "CPU, this many of its cores; results equal one device's up to float32 rounding).",
)

# --quick without --data_root: these binaries share a smaller synthetic dataset (the same
# one, so that FPDGD and FOLtR-ES are compared on the same queries).
SMALL_SYNTHETIC = ("fpdgd", "foltr_es", "poisoning", "unlearning")


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
            if FLAGS.n_devices > 1:
                extra += (f"--n_devices={FLAGS.n_devices}",)
            if quick and run.binary in SMALL_SYNTHETIC and not data:
                extra += ("--synthetic_queries=60",)
            data_flags = () if run.own_data else data
            argv = [sys.executable, "-m", f"experiments.{run.binary}", *data_flags, *run.flags]
            argv += extra + tuple(f"--plugin={plugins.as_argument(p)}" for p in FLAGS.plugin)
            commands.append((out, argv + [f"--output_dir={out}"]))
    return commands


def run_recipe(
    recipe: Recipe, results_dir: pathlib.Path, folds, n_runs, quick, dry_run, jobs=1
) -> bool:
    """Runs what is missing, then the report; False when a run failed."""
    commands = _commands(recipe, results_dir, folds, n_runs, quick)
    todo = runs.missing(commands, say=False)
    print(
        f"[{recipe.name}] {recipe.title}: {len(commands)} run(s), "
        f"{len(commands) - len(todo)} already done",
        file=sys.stderr,
    )
    if dry_run:
        for _, argv in todo:
            print(" ".join(argv))
        return True
    failed = runs.run_missing(commands, jobs, recipe.name, below=results_dir)
    if failed:
        return not failed
    # the recipe's runs as it makes them now: a run that left the recipe, or results its
    # folder holds from other settings, are not in its report
    accept = runs.made_as_asked(commands, recipe.name)
    summary = report.build_report(
        results_dir / recipe.name, baseline=recipe.baseline, paired=recipe.paired, accept=accept
    )
    figures = [f for group in summary["groups"].values() for f in group.get("figures", [])]
    where = results_dir / recipe.name / "report"
    if recipe.name not in paper_figures.LAYOUTS:  # a plugin's recipe: no paper's layout
        print(f"[{recipe.name}] report: {len(figures)} figure file(s) in {where} (a recipe "
              "without a paper's layout: no page.png)", file=sys.stderr)  # fmt: skip
        return True
    try:
        paper_figures.make_page(results_dir / recipe.name, recipe, accept=accept)
    except (report.ReportError, ValueError, KeyError, IndexError, TypeError) as error:
        # the runs and the report are on disk; `experiments.report --recipe` redraws the page
        print(f"[{recipe.name}] paper figures not drawn: {error!r}", file=sys.stderr)
    print(
        f"[{recipe.name}] report: {len(figures)} figure file(s), and the paper's figures and "
        f"tables on page.png/page.pdf in {where}",
        file=sys.stderr,
    )
    return True


def describe_data(data_root: str) -> str:
    """The data's name: the MSLR excerpt named as such, else its folder."""
    if data_root and pathlib.Path(data_root).resolve() in [p.resolve() for p in runs.PLACES]:
        return f"the MSLR-WEB10K excerpt at {data_root}"
    return os.path.abspath(data_root) if data_root else "synthetic"


def data_files(data_flags) -> list[pathlib.Path]:
    """The LETOR files a run's data flags name (--fold_dir: its train, vali and test)."""
    found = []
    for flag in data_flags:
        name, _, value = flag.lstrip("-").partition("=")
        if name == "fold_dir":
            found += [pathlib.Path(value, f"{s}.txt") for s in ("train", "vali", "test")]
        elif name in ("train_path", "test_path"):
            found.append(pathlib.Path(value))
    return [path for path in found if path.is_file()]


def timed_seconds(results_dir: pathlib.Path) -> dict:
    """{binary: compute seconds (compile included) of each of its runs finished under
    results_dir}, one number a run folder (a grid's cells share their run's program: its
    longest cell); the binary is the one the run's provenance names (unnamed: left out)."""
    by_run: dict = {}
    for path in results_dir.rglob("results.json") if results_dir.is_dir() else ():
        found = runs.read_object(path)
        if not isinstance(found, dict) or not isinstance(found.get("provenance"), dict):
            continue
        command = found["provenance"].get("command")
        seconds = [found.get(k) for k in ("seconds", "compile_seconds")]
        if not (isinstance(command, list) and command and isinstance(command[0], str)):
            continue
        if not all(isinstance(x, (int, float)) and x >= 0 for x in seconds):
            continue
        run = path.parent.parent if (path.parent.parent / "grid.json").exists() else path.parent
        longest = max(by_run.get(run, ("", 0.0))[1], float(sum(seconds)))
        by_run[run] = (command[0].rpartition(".")[2], longest)  # experiments.<binary>
    timed: dict = {}
    for binary, seconds in by_run.values():
        timed.setdefault(binary, []).append(seconds)
    return timed


def estimate_time(todo: list, timed: dict, results_dir: pathlib.Path) -> str:
    """The time of the runs to do (their binaries, ``todo``), each from the mean time of the
    finished runs of its own binary (a FOLtR-ES run says nothing of an unlearning grid's
    time); runs whose binary has no timed run are named apart."""
    means = {binary: sum(t) / len(t) for binary, t in timed.items()}
    known = [b for b in todo if b in means]
    if not known:
        return "no run timed here yet: the first estimate follows the first finished run"
    minutes = sum(means[b] for b in known) / 60
    said = (
        f"about {minutes:.0f} min for {len(known)} of them (each from the mean time of its "
        f"binary's runs timed in {results_dir}; start-up adds seconds each)"
    )
    unknown = sorted(set(todo) - set(known))
    if unknown:
        said += f"; {len(todo) - len(known)} run(s) of {', '.join(unknown)} not timed here yet"
    return said


def announce(recipe_commands: list, results_dir: pathlib.Path, folds, data: str) -> None:
    """Before the first run: the data (where, folds, size), the runs to do and an estimate
    of their time from the runs this --results_dir already holds (else when the first
    estimate comes)."""
    paths = sorted({p for _, flags_ in folds for p in data_files(flags_)})
    size = sum(p.stat().st_size for p in paths)
    fold_names = ", ".join(fold for fold, _ in folds)
    what = (
        f"{data} ({fold_names}: {len(paths)} file(s), {size / 1e6:.1f} MB)" if paths else
        "synthetic (each run generates its own queries; --data_root names a LETOR dataset)"
    )  # fmt: skip
    todo = [argv for out, argv in recipe_commands if not runs.complete(out, argv, say=False)]
    if not todo:
        estimate = "nothing to run"
    else:  # argv: python -m experiments.<binary> ...
        binaries = [argv[2].rpartition(".")[2] for argv in todo]
        estimate = estimate_time(binaries, timed_seconds(results_dir), results_dir)
    print(
        f"[batch] data: {what}; {len(todo)} of {len(recipe_commands)} run(s) to do: {estimate}",
        file=sys.stderr,
        flush=True,
    )


def claim_recipe_folder(folder: pathlib.Path, batch: dict) -> None:
    """Records in ``<folder>/batch.json`` which batch (quick or full, which data and folds)
    fills the recipe's folder; UserError naming --results_dir when another batch's runs are
    there: a recipe's report reads every run in its folder, so quick and full runs, or runs
    of two datasets, never share one.  A run of the same batch under other settings (e.g.
    --n_runs) is found by its provenance and runs again (``runs.complete``)."""
    refuse_links(folder / "report", folder.parent, "--results_dir")  # never through a link
    marker = folder / "batch.json"
    found = runs.read_object(marker)
    if os.path.lexists(marker) and found != batch:
        if not isinstance(found, dict):
            raise UserError(f"--results_dir: {marker} cannot be read; remove it")
        kind = {True: "a --quick batch", False: "a full batch"}
        differs = [
            f"{key} {found.get(key)!r} there, {batch[key]!r} now"
            for key in batch
            if found.get(key) != batch[key]
        ]
        raise UserError(
            f"--results_dir: {folder} holds the runs of "
            f"{kind.get(found.get('quick'), 'another batch')} ({'; '.join(differs)}); "
            "a recipe's folder never mixes two batches' runs: give "
            "another --results_dir, or remove that folder"
        )
    if found is None:
        try:
            write_json_atomic(marker, batch)
        except OSError as error:
            raise UserError(
                f"--results_dir: cannot write {marker} ({error.strerror or error})"
            ) from None


def run() -> program.Done:
    available = recipes(FLAGS.quick)
    if FLAGS.list:
        for recipe in available.values():
            print(f"{recipe.name:<20} {len(recipe.runs):>3} run(s)  {recipe.title}")
        return program.Done()
    names = list(available) if FLAGS.recipe == ["all"] else FLAGS.recipe
    if not names:
        raise UserError("--recipe: name one or more recipes (see --list), or 'all'")
    unknown = [n for n in names if n not in available]
    if unknown:
        raise UserError(f"--recipe: unknown recipe(s) {unknown}; see --list")
    if FLAGS.jobs < 1:
        raise UserError(f"--jobs must be at least 1, got {FLAGS.jobs}")
    if FLAGS.n_devices < 1:
        raise UserError(f"--n_devices must be at least 1, got {FLAGS.n_devices}")
    if FLAGS.n_runs < 0:
        raise UserError(f"--n_runs must be at least 0, got {FLAGS.n_runs}")
    # a dry run fetches nothing
    data_root = runs.default_data_root(FLAGS.data_root, FLAGS.quick, fetch=not FLAGS.dry_run)
    folds = runs.dataset_flags(data_root)
    n_runs = FLAGS.n_runs or (2 if FLAGS.quick else 5)
    results_dir = pathlib.Path(FLAGS.results_dir)
    claimed = None
    if not FLAGS.dry_run:  # one batch at a time in a results folder, writable, before any run
        claimed = Output(results_dir, outputs=(), flag="results_dir")
        data = os.path.abspath(data_root) if data_root else "synthetic"
        batch = {"quick": FLAGS.quick, "data": data, "folds": [fold for fold, _ in folds]}
        for name in names:  # every recipe's folder checked before any run
            claim_recipe_folder(results_dir / name, batch)
    every = [c for n in names for c in _commands(available[n], results_dir, folds, n_runs,
                                                   FLAGS.quick)]  # fmt: skip
    announce(every, results_dir, folds, describe_data(data_root))
    outcomes = [
        run_recipe(available[n], results_dir, folds, n_runs, FLAGS.quick, FLAGS.dry_run, FLAGS.jobs)
        for n in names
    ]
    if claimed is not None:
        claimed.release()
    return program.Done(status=0 if all(outcomes) else 1)


main = program.main("batch", run, distributed=None)

if __name__ == "__main__":
    app.run(main, flags_parser=program.parse_flags)
