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
import dataclasses
import pathlib
import subprocess
import sys
import time

from absl import app, flags

from experiments import common
from experiments import figures as report

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

CLICKS = ("perfect", "navigational", "informational")
# --quick without --data_root: these binaries share a smaller synthetic dataset (the same
# one, so that FPDGD and FOLtR-ES are compared on the same queries).
SMALL_SYNTHETIC = ("fpdgd", "foltr_es", "poisoning", "unlearning")
DP_GRID = ((1.2, 3.0), (2.3, 3.0), (4.5, 5.0), (10.0, 5.0))  # (ε, Δ), FPDGD paper §4


@dataclasses.dataclass(frozen=True)
class Run:
    """One invocation of a binary: ``python -m experiments.<binary> <flags>``."""

    name: str  # folder under the recipe's folder
    binary: str
    flags: tuple  # ("--name=value", ...)
    own_data: bool = False  # ignores --data_root (non-IID Type 1: intents, not a LETOR fold)


@dataclasses.dataclass(frozen=True)
class Recipe:
    name: str
    title: str
    runs: tuple
    baseline: str = ""  # report's --baseline
    paired: bool = False


def _f(**values) -> tuple:
    return tuple(f"--{k}={v}" for k, v in values.items())


def recipes(quick: bool) -> dict:
    """Every recipe; ``quick`` shrinks rounds, clients and runs."""
    rounds = lambda full, small: small if quick else full
    out = []

    # FPDGD paper (ICTIR 2021) -----------------------------------------------------------
    # Click models and (ε, Δ) pairs are grids run as one program by the fpdgd binary.
    clicks = _f(click_models=",".join(CLICKS))
    dp_grid = _f(privacy_grid=",".join(f"{e}:{d}" for e, d in DP_GRID))
    short = _f(rounds=rounds(200, 20))
    fig2 = [
        Run("fpdgd", "fpdgd", clicks + dp_grid + short),
        Run("pdgd", "fpdgd", ("--centralised",) + clicks + short),
    ]
    for click in CLICKS:
        for p in (0.25, 0.5, 0.9, 1.0):
            fig2.append(
                Run(
                    f"foltr_es_p{p}_{click}",
                    "foltr_es",
                    _f(click_model=click, privacy_p=p)
                    + short
                    + (_f(n_clients=200) if quick else ()),
                )
            )
    out.append(
        Recipe(
            "fpdgd_fig2",
            "FPDGD paper Figures 2-3 and Table 2: FPDGD (ε), PDGD, FOLtR-ES (p); nDCG, MaxRR",
            tuple(fig2),
            baseline="epsilon=4.5",
        )
    )
    fig4 = [
        Run(f"clients{n}", "fpdgd", clicks + _f(n_clients=n, privacy_grid="none,4.5:5") + short)
        for n in (10, 100, 1000)
    ]
    out.append(
        Recipe(
            "fpdgd_fig4",
            "FPDGD paper Figure 4: number of clients |C|, with and without DP",
            tuple(fig4),
        )
    )
    few_clients = _f(n_clients=100) if quick else ()
    fig5 = [
        Run(
            f"batch{b}",
            "fpdgd",
            clicks + _f(local_updates=b, privacy_grid="4.5:5") + short + few_clients,
        )
        for b in (2, 4, 8)
    ]
    out.append(Recipe("fpdgd_fig5", "FPDGD paper Figure 5: local updates B with DP", tuple(fig5)))
    budget = (100 if quick else 1000) * 8  # |C|·B fixed
    fig6 = [
        Run(f"batch{b}", "fpdgd", clicks + _f(local_updates=b, n_clients=budget // b) + short)
        for b in (2, 4, 8)
    ]
    out.append(
        Recipe(
            "fpdgd_fig6", "FPDGD paper Figure 6: B under a fixed interaction budget", tuple(fig6)
        )
    )

    # Thesis ch. 4, non-IID data: a run per click model, each run's cells one program each ----
    def per_click(name: str, values: tuple, own_data: bool = False) -> list:
        return [
            Run(f"{name}_{click}", "noniid", values + _f(click_model=click), own_data)
            for click in CLICKS
        ]

    noniid_rounds = _f(rounds=rounds(10_000, 40), chunk_rounds=rounds(500, 20))
    mus = _f(prox_mu="0.01,1" if quick else "0.001,0.01,0.1,1,10")
    type1 = _f(type=1) + noniid_rounds
    out.append(
        Recipe(
            "noniid_type1",
            "Thesis Figures 4.3-4.4, Table 4.2: Type 1 (intents); FedProx, FedPer",
            tuple(
                per_click("linear", type1 + _f(remedies="fedprox") + mus, own_data=True)
                + per_click("neural", type1 + _f(remedies="fedper", ranker="neural"), True)
            ),
            baseline="iid",
        )
    )
    type2 = _f(type=2, grades_per_client=1, n_clients=5) + noniid_rounds
    runs = []
    for ranker in ("linear", "neural"):
        for b in (2, 5, 10):
            if quick and ranker == "neural" and b != 5:
                continue
            values = type2 + _f(ranker=ranker, local_updates=b)
            if b == 5:  # Figure 4.7: the remedies at |C| = 5, B = 5
                remedies = "fedprox,sharing" if ranker == "linear" else "fedprox,fedper,sharing"
                values += _f(remedies=remedies) + (_f(prox_mu=0.1) if quick else mus)
            runs += per_click(f"{ranker}_b{b}", values)
    out.append(
        Recipe(
            "noniid_type2",
            "Thesis Figures 4.5 and 4.7, Table 4.3: Type 2 (#R = 1), B; data sharing, FedProx, "
            "FedPer",
            tuple(runs),
            baseline="iid",
        )
    )
    type2_r2 = _f(type=2, grades_per_client=2, n_clients=10, local_updates=5) + noniid_rounds
    out.append(
        Recipe(
            "noniid_type2_r2",
            "Thesis Figure 4.6: Type 2 (#R = 2)",
            tuple(
                run
                for ranker in (("linear",) if quick else ("linear", "neural"))
                for run in per_click(ranker, type2_r2 + _f(ranker=ranker))
            ),
            baseline="iid",
        )
    )
    out.append(
        Recipe(
            "noniid_type3",
            "Thesis Figure 4.8: Type 3 (each client its own click model: CCM, PBM)",
            tuple(Run(c, "noniid", _f(type=3, clicks=c) + noniid_rounds) for c in ("ccm", "pbm")),
            baseline="iid",
        )
    )
    out.append(
        Recipe(
            "noniid_type4",
            "Thesis Figure 4.9: Type 4 (data quantity), alone and mixed with Types 1 and 2",
            tuple(
                per_click("alone", _f(type=4) + noniid_rounds)
                + per_click("intents", _f(type=4, mix=1) + noniid_rounds, own_data=True)
                + per_click("labels", _f(type=4, mix=2) + noniid_rounds)
            ),
            baseline="iid",
        )
    )

    # Poisoning paper (ICTIR 2023): one grid program covers Figures 2-4 ----------------------
    out.append(
        Recipe(
            "poisoning_figs2_4",
            "Poisoning paper Figures 2-4: data and model poisoning against the defences",
            (
                Run(
                    "grid", "poisoning", _f(rounds=rounds(10_000, 40), chunk_rounds=rounds(500, 20))
                ),
            ),
        )
    )

    # Unlearning paper (ECIR 2024): Figures 2-3 and Table 3 in one program -------------------
    unlearning = _f(rounds=rounds(10_000, 40), chunk_rounds=rounds(500, 20))
    if quick:
        unlearning += _f(delta_t="2,4", unlearn_local_updates="1,3")
    out.append(
        Recipe(
            "unlearning_table3",
            "Unlearning paper Figures 2-3 and Table 3",
            (Run("grid", "unlearning", unlearning),),
            baseline="9H-0M",
            paired=True,
        )
    )

    # FedIPS paper: Figure 1 (γ), Figure 2 (|U|; estimated propensities) ----------------------
    fig1 = []
    for gamma in (0.5, 1.0, 1.5, 2.0):
        for propensity in ("known", "none"):
            fig1.append(
                Run(
                    f"gamma{gamma}_{propensity}",
                    "fedips",
                    _f(gamma=gamma, propensity=propensity, rounds=rounds(500, 20))
                    + (_f(n_users=200) if quick else ()),
                )
            )
    out.append(
        Recipe(
            "fedips_fig1", "FedIPS paper Figure 1: position bias γ, FedIPS vs FedAvg", tuple(fig1)
        )
    )
    users = (100, 500) if quick else (100, 500, 2500, 12500, 62500)
    fig2_ips = [
        Run(f"users{u}", "fedips", _f(n_users=u, gamma=1.0, rounds=rounds(500, 20))) for u in users
    ] + [
        Run(
            f"estimated_{p}",
            "fedips",
            _f(propensity=p, gamma=1.0, rounds=rounds(500, 20))
            + (_f(n_users=200) if quick else ()),
        )
        for p in ("estimated", "known", "none")
    ]
    out.append(
        Recipe(
            "fedips_fig2", "FedIPS paper Figure 2: |U| and estimated propensities", tuple(fig2_ips)
        )
    )
    return {recipe.name: recipe for recipe in out}


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
    """A run is done when its results.json (or a grid's grid.json, written last) exists."""
    return (out / "results.json").is_file() or (out / "grid.json").is_file()


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
    print(
        f"[{recipe.name}] report: {len(figures)} figure file(s) in "
        f"{results_dir / recipe.name / 'report'}",
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
