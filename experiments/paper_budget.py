r"""A time budget for the papers: every batch recipe's projected wall time on this machine.

  python -m experiments.paper_budget                       # every recipe
  python -m experiments.paper_budget --recipes=poisoning_figs2_4,fpdgd_fig4

For each run of a recipe (experiments/lib/recipes/, the full version) this launches the run's
binary with the recipe's flags but a few rounds (--measure_chunks chunks of
--measure_chunk_rounds rounds, compile timed apart; more chunks where the run's flags need
more rounds: the unlearning replay's largest Δt) and --n_runs=5, on MSLR-WEB10K-shaped
synthetic data (6,000 training and 2,000 test queries, ~120 documents × 136 features), reads
the binary's results.json (``seconds``, ``compile_seconds``, ``interactions``) and projects

  seconds per round × T + compile seconds, times the folds (5 for MSLR-WEB10K),

with T the recipe's --rounds (the paper's).  A run on its own synthetic data (non-IID Type 1)
runs once, not per fold.  Runs of a recipe that differ only in a value of the program
(--click_model, --privacy_p, --gamma) are measured once (the first of them stands for the rest,
which are assumed to cost the same).  The published implementation (the public FPDGD code,
NumPy, one client at a time) is projected from its measured rate, the better end of
1,200-1,700 interactions/s at 1,000 clients (docs/changelog.md): the recipe's interactions (clients × B ×
T × runs × cells × folds) / 1,700.  FOLtR-ES, FedIPS and unlearning runs have no measured
published rate ("not measured").

Prints one line per run and a table per recipe, and writes --output (JSON).
"""

from __future__ import annotations

import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

from absl import app, flags

from experiments.lib import program, shared_flags
from experiments.lib.cli import UserError
from experiments.lib.recipes import Recipe, Run, recipes
from foltr_jax.engine.results_files import probe_output_file, versions, write_output_file

FLAGS = flags.FLAGS
flags.DEFINE_list("recipes", ["all"], "Recipes to measure, or 'all'.")
flags.DEFINE_integer("measure_chunk_rounds", 5, "Rounds per chunk of a measured run.")
flags.DEFINE_integer("measure_chunks", 2, "Chunks of a measured run (after compiling).")
flags.DEFINE_integer("folds", 5, "Folds the papers average over (MSLR-WEB10K: 5).")
flags.DEFINE_integer("n_runs", 5, "Runs per fold (the papers': 5).")
flags.DEFINE_list(
    "data",
    [
        "--synthetic_queries=6000",
        "--synthetic_test_queries=2000",
        "--synthetic_features=136",
        "--synthetic_docs_per_query=120",
    ],
    "Data flags of the measured runs (default: MSLR-WEB10K-shaped synthetic data).",
)
flags.DEFINE_list("extra_flags", [], "More flags for every measured run (e.g. --ranker=neural).")
flags.DEFINE_string("output", "results/paper_budget.json", "The JSON record.")
shared_flags.define_compile_cache_flag()  # handed on to every measured run (program.main)

PUBLISHED_RATE = 1_700.0  # interactions/s of the public FPDGD code, the better end of 1,200-1,700
PUBLISHED_BINARIES = ("fpdgd", "poisoning", "noniid")  # FPDGD's algorithm, the public code's
DEFAULT_ROUNDS = {"poisoning": 10_000, "unlearning": 10_000}  # binaries' own --rounds defaults
VALUE_FLAGS = ("--click_model=", "--privacy_p=", "--gamma=")  # values of one compiled program


def project_seconds(seconds_per_round: float, compile_seconds: float, rounds: int, folds: int):
    """Wall seconds of ``rounds`` rounds on each of ``folds`` folds, each fold compiling once."""
    return (seconds_per_round * rounds + compile_seconds) * folds


def published_seconds(interactions_per_round: float, rounds: int, folds: int, rate=PUBLISHED_RATE):
    """Seconds of the published implementation at ``rate`` interactions/s."""
    return interactions_per_round * rounds * folds / rate


def flag_value(run_flags, name: str):
    """The value of --name in ``run_flags`` (the last one), or None."""
    values = [f.split("=", 1)[1] for f in run_flags if f.startswith(f"--{name}=")]
    return values[-1] if values else None


def paper_rounds(run: Run) -> int:
    value = flag_value(run.flags, "rounds")
    if value is not None:
        return int(value)
    if run.binary in DEFAULT_ROUNDS:
        return DEFAULT_ROUNDS[run.binary]
    from foltr_jax.methods.fpdgd.config import FpdgdConfig

    return FpdgdConfig().rounds


def needed_rounds(run: Run) -> int:
    """The fewest rounds the run's flags allow: the unlearning replay stores updates every Δt
    rounds, so its largest Δt (--delta_t, or the binary's default); 1 for every other run."""
    if run.binary != "unlearning":
        return 1
    from foltr_jax.methods.unlearning import UnlearningConfig

    value = flag_value(run.flags, "delta_t")
    deltas = [int(v) for v in value.split(",") if v] if value else UnlearningConfig().delta_t
    return max(deltas, default=1)


def measured_chunks(run: Run, chunk_rounds: int, chunks: int) -> int:
    """``chunks``, or more where the run needs more rounds than ``chunks`` chunks hold."""
    return max(chunks, -(-needed_rounds(run) // chunk_rounds))


def program_key(run: Run) -> tuple:
    """Runs with the same key differ only in values of one compiled program."""
    return (run.binary, run.own_data, tuple(f for f in run.flags if not f.startswith(VALUE_FLAGS)))


def representatives(recipe: Recipe) -> dict:
    """{run name: name of the run measured for it} (the first run of each program key)."""
    first, out = {}, {}
    for run in recipe.runs:
        out[run.name] = first.setdefault(program_key(run), run.name)
    return out


def measure_argv(run: Run, output_dir, chunk_rounds, chunks, n_runs, data, extra) -> list:
    """The run's command with few rounds, the papers' runs and the shaped data.  A recipe's
    --eval_every K beyond the measured rounds becomes the measured rounds (one evaluation,
    at the last round: K must be at most the rounds)."""
    own = ("--rounds=", "--chunk_rounds=", "--n_runs=", "--eval_every=")
    kept = [f for f in run.flags if not f.startswith(own)]
    eval_every = flag_value(run.flags, "eval_every")
    if eval_every is not None:
        kept.append(f"--eval_every={min(int(eval_every), chunk_rounds * chunks)}")
    return [
        sys.executable,
        "-m",
        f"experiments.{run.binary}",
        *(() if run.own_data else data),
        *kept,
        f"--rounds={chunk_rounds * chunks}",
        f"--chunk_rounds={chunk_rounds}",
        f"--n_runs={n_runs}",
        *extra,
        f"--output_dir={output_dir}",
    ]


def read_timings(output_dir: pathlib.Path) -> dict:
    """seconds, compile_seconds and interactions of a finished run's results.json."""
    path = output_dir / "results.json"
    if not path.is_file() and (output_dir / "grid.json").is_file():  # fpdgd grid: cells share
        cell = json.loads((output_dir / "grid.json").read_text())["cells"][0]
        path = output_dir / cell / "results.json"
    results = json.loads(path.read_text())
    if "seconds" in results:
        interactions = results.get("interactions")
        if interactions is None:  # noniid: summed over its cells (one program each)
            interactions = sum(c.get("interactions", 0) for c in results.get("cells", []))
        return {
            "seconds": float(results["seconds"]),
            "compile_seconds": float(results["compile_seconds"]),
            "interactions": int(interactions),
        }
    wall = results["wall_seconds"]  # unlearning: run seconds of its phases
    seconds = sum(
        v for k, v in wall.items() if isinstance(v, (int, float)) and k != "unlearning_compile"
    )
    return {
        "seconds": float(seconds),
        "compile_seconds": float(wall.get("unlearning_compile", 0.0)),
        "interactions": int(sum(results["interactions"].values())),
        "note": "unlearning: the training phases' compile is not recorded (not counted)",
    }


def project_run(run: Run, measured: dict, measured_rounds: int, folds: int) -> dict:
    """The run's projection from a measurement of ``measured_rounds`` rounds."""
    rounds = paper_rounds(run)
    run_folds = 1 if run.own_data else folds
    per_round = measured["seconds"] / measured_rounds
    here = project_seconds(per_round, measured["compile_seconds"], rounds, run_folds)
    published = None
    if run.binary in PUBLISHED_BINARIES:
        published = published_seconds(measured["interactions"] / measured_rounds, rounds, run_folds)
    return {
        "run": run.name,
        "binary": run.binary,
        "rounds": rounds,
        "folds": run_folds,
        "seconds_per_round": per_round,
        "compile_seconds": measured["compile_seconds"],
        "interactions_per_round": measured["interactions"] / measured_rounds,
        "projected_seconds": here,
        "published_seconds": published,
    }


def summarise(recipe: Recipe, projections: list) -> dict:
    """The recipe's totals; published is None when any run has no published rate."""
    here = sum(p["projected_seconds"] for p in projections)
    published = [p["published_seconds"] for p in projections]
    known = None if any(p is None for p in published) else sum(published)
    return {
        "recipe": recipe.name,
        "runs": len(recipe.runs),
        "projected_seconds": here,
        "published_seconds": known,
        "published_partial_seconds": sum(p for p in published if p is not None),
        "ratio": known / here if known else None,
    }


def hours(seconds) -> str:
    if seconds is None:
        return "not measured"
    return f"{seconds / 3600:,.1f} h" if seconds >= 360 else f"{seconds / 60:,.1f} min"


def execute(argv) -> tuple:
    """Runs a measured command: (return code, stderr)."""
    root = pathlib.Path(__file__).resolve().parents[1]
    done = subprocess.run(argv, cwd=root, capture_output=True, text=True, check=False)
    return done.returncode, done.stderr


def why(stderr: str) -> str:
    """The line of a failed run's stderr that says why: its last line naming an error (absl
    ends an unknown flag's message with a line pointing at --helpshort), else its last."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or lines or ["(no output)"])[-1]


def measure_recipe(recipe: Recipe, workdir: pathlib.Path, settings: dict, run_command=execute):
    """Measures the recipe's programs and projects every run.  ``settings``: chunk_rounds,
    chunks, n_runs, folds, data and extra (flags), as the flags of the same names (a run
    that needs more rounds gets more chunks: ``measured_chunks``)."""
    measured, projections = {}, []
    stand_ins = representatives(recipe)
    for run in recipe.runs:
        stand_in = stand_ins[run.name]
        if stand_in not in measured:
            rep = next(r for r in recipe.runs if r.name == stand_in)
            out = workdir / recipe.name / rep.name
            chunks = measured_chunks(rep, settings["chunk_rounds"], settings["chunks"])
            argv = measure_argv(
                rep, out, settings["chunk_rounds"], chunks, settings["n_runs"],
                settings["data"], settings["extra"],
            )  # fmt: skip
            start, load = time.perf_counter(), os.getloadavg()[0]
            returncode, stderr = run_command(argv)
            if returncode != 0:
                raise UserError(f"{recipe.name}/{rep.name} failed: {why(stderr)}")
            measured[stand_in] = {
                **read_timings(out),
                "rounds": settings["chunk_rounds"] * chunks,
                "wall": time.perf_counter() - start,
                "load_average": [load, os.getloadavg()[0]],  # 1-minute, before and after
            }
        projection = project_run(
            run, measured[stand_in], measured[stand_in]["rounds"], settings["folds"]
        )
        projection.update(
            measured_as=stand_in,
            measured_rounds=measured[stand_in]["rounds"],
            wall=measured[stand_in]["wall"],
            load_average=measured[stand_in]["load_average"],
        )
        projections.append(projection)
        print(
            f"  {recipe.name}/{run.name} (as {stand_in}): {projection['seconds_per_round']:.3f} "
            f"s/round, compile {projection['compile_seconds']:.0f} s, T = {projection['rounds']},"
            f" {projection['folds']} fold(s): {hours(projection['projected_seconds'])} here, "
            f"published {hours(projection['published_seconds'])} (load average "
            f"{projection['load_average'][0]:.1f}, {projection['load_average'][1]:.1f})",
            flush=True,
        )
    return {**summarise(recipe, projections), "per_run": projections}


def table(rows) -> str:
    lines = [
        "| recipe | runs | projected here | published projected | published / here |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        ratio = "–" if not row["ratio"] else f"{row['ratio']:,.{1 if row['ratio'] < 10 else 0}f}×"
        published = hours(row["published_seconds"])
        if row["published_seconds"] is None and row["published_partial_seconds"]:
            published += f" ({hours(row['published_partial_seconds'])} for the FPDGD runs)"
        lines.append(
            f"| {row['recipe']} | {row['runs']} | {hours(row['projected_seconds'])} | "
            f"{published} | {ratio} |"
        )
    return "\n".join(lines)


def run() -> program.Done:
    available = recipes(quick=False)
    names = list(available) if FLAGS.recipes == ["all"] else [n for n in FLAGS.recipes if n]
    if not names:
        raise UserError("--recipes: name one or more recipes (experiments.batch --list), or 'all'")
    unknown = [n for n in names if n not in available]
    if unknown:
        raise UserError(f"--recipes: unknown {unknown}; see experiments.batch --list")
    if min(FLAGS.measure_chunk_rounds, FLAGS.measure_chunks, FLAGS.folds, FLAGS.n_runs) < 1:
        raise UserError("--measure_chunk_rounds, --measure_chunks, --folds, --n_runs >= 1")
    made = [p for p in pathlib.Path(FLAGS.output).absolute().parents if not p.exists()]
    output = probe_output_file(FLAGS.output, "--output")  # before any measurement
    settings = {
        "chunk_rounds": FLAGS.measure_chunk_rounds,
        "chunks": FLAGS.measure_chunks,
        "n_runs": FLAGS.n_runs,
        "folds": FLAGS.folds,
        "data": FLAGS.data,
        "extra": FLAGS.extra_flags,
    }
    try:
        with tempfile.TemporaryDirectory(prefix="paper_budget_") as workdir:
            rows = [
                measure_recipe(available[name], pathlib.Path(workdir), settings) for name in names
            ]
    except UserError:
        for folder in made:  # deepest first: the folders the probe made, if still empty
            try:
                folder.rmdir()
            except OSError:
                break
        raise
    print(table(rows))
    record = {
        "recipes": rows,
        "settings": {**settings, "published_rate": PUBLISHED_RATE},
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "processor": platform.machine()},
        "versions": versions(),
    }
    write_output_file(output, record, "--output")  # the table above keeps the measurements
    return program.Done(message=f"written to {FLAGS.output}")


main = program.main("paper_budget", run, distributed=None)


if __name__ == "__main__":
    app.run(main, flags_parser=program.parse_flags)
