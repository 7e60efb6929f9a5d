r"""Throughput of FPDGD: interactions per second and peak memory.

Takes the same data and federation flags as experiments/fpdgd.py, e.g.

  python -m experiments.benchmark --train_path=third_party/mslr_sample/data/train.txt \
      --test_path=third_party/mslr_sample/data/test.txt --n_clients=1000 --local_updates=2

(the MSLR excerpt, where third_party/mslr_sample/fetch.py puts it)

Compile time is reported on its own line and not counted; offline evaluation of
the global model after every round (or every --eval_every rounds) is included.  The last line printed is one
JSON object with interactions_per_second, peak_rss_mb and the settings.

  python -m experiments.benchmark --suite [--suite_clients=10,1000,100000,1000000]

runs the performance record: FPDGD with B = 2 on MSLR-shaped synthetic data
(136 features, ~120 documents per query, long-tailed lengths) for each number of
clients, linear and neural rankers, plain / with DP (ε = 4.5, Δ = 5) / with Krum,
each case in its own process (so peak memory is the case's own).  It prints a
table and writes --suite_output (JSON).  Krum is O(n²) in the clients and is
skipped above --suite_krum_max_clients.  --window_scoring is passed on to every case
(vmap on a GPU).
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import subprocess
import sys
import time

import jax
from absl import app, flags

from experiments.lib import config_flags, program, shared_flags
from experiments.lib.cli import UserError
from experiments.lib.distributed import is_writer, on_every_process
from foltr_jax.engine.results_files import (
    dataset_summary,
    peak_rss_mb,
    probe_output_file,
    stop_cleanly,
    versions,
    write_output_file,
)
from foltr_jax.methods.fpdgd import federation

FLAGS = flags.FLAGS
shared_flags.define_data_flags()
CONFIG_FLAGS = shared_flags.define_federation_flags()
flags.adopt_module_key_flags(shared_flags)  # --help lists the shared flags too
flags.adopt_module_key_flags(config_flags)
flags.DEFINE_integer("repeats", 1, "Timed repetitions of the whole run; the best is reported.")
flags.DEFINE_bool("suite", False, "Run the performance record (see the module doc).")
flags.DEFINE_list(
    "suite_clients", ["10", "1000", "100000", "1000000"], "Client counts of the suite."
)
flags.DEFINE_list("suite_rankers", ["linear", "neural"], "Rankers of the suite.")
flags.DEFINE_list("suite_variants", ["plain", "dp", "krum"], "plain | dp | krum.")
flags.DEFINE_integer("suite_krum_max_clients", 10_000, "Larger client counts skip Krum.")
flags.DEFINE_integer(
    "suite_interactions",
    400_000,
    "Interactions per case (rounds = this / (clients·B), between 2 and 200).",
)
flags.DEFINE_integer(
    "suite_client_chunk", 20_000, "Rounds with more clients train them in chunks of this many."
)
flags.DEFINE_string("suite_output", "results/benchmark/suite.json", "The suite's JSON file.")

# MSLR-WEB10K-shaped synthetic data: 136 features, mean ~120 documents per query.
SUITE_DATA = (
    "--synthetic_queries=1000",
    "--synthetic_features=136",
    "--synthetic_docs_per_query=120",
)
VARIANTS = {
    "plain": (),
    "dp": ("--epsilon=4.5", "--sensitivity=5"),
    "krum": ("--aggregator=krum", "--n_malicious=1"),
}


def suite_cases() -> list:
    """(name, flags) of every case of the suite."""
    cases = []
    for n in (int(c) for c in FLAGS.suite_clients):
        rounds = min(max(2, FLAGS.suite_interactions // (2 * n)), 200)
        for ranker in FLAGS.suite_rankers:
            for variant in FLAGS.suite_variants:
                if variant == "krum" and n > FLAGS.suite_krum_max_clients:
                    continue
                chunk = FLAGS.suite_client_chunk if n > FLAGS.suite_client_chunk else 0
                args = (
                    *SUITE_DATA,
                    f"--n_clients={n}",
                    f"--client_chunk={chunk}",
                    "--local_updates=2",
                    f"--rounds={rounds}",
                    f"--chunk_rounds={rounds}",
                    f"--ranker={ranker}",
                    f"--window_scoring={FLAGS.window_scoring}",  # vmap on accelerators
                    *VARIANTS[variant],
                )
                cases.append((f"{n} clients, {ranker}, {variant}", args))
    return cases


def run_suite() -> int:
    """Runs every case in a subprocess; prints a table and writes the JSON record.  Returns
    the exit status: 1 when every case failed."""
    unknown = set(FLAGS.suite_variants) - set(VARIANTS)
    if unknown:
        raise UserError(f"--suite_variants: unknown {sorted(unknown)}; use {list(VARIANTS)}")
    try:
        clients = [int(c) for c in FLAGS.suite_clients]
    except ValueError:
        raise UserError(f"--suite_clients must be integers, got {FLAGS.suite_clients}") from None
    if not clients or min(clients) < 1:
        raise UserError(
            f"--suite_clients: client counts must be at least 1, got {FLAGS.suite_clients}"
        )
    cases = suite_cases()
    if not cases:
        raise UserError("--suite_rankers/--suite_variants: the suite has no case")
    output = probe_output_file(FLAGS.suite_output, "--suite_output")  # before any case
    rows = []
    print(f"{'case':<34}{'interactions/s':>16}{'peak RSS':>11}{'compile':>9}", flush=True)
    for name, args in cases:
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "experiments.benchmark", *args],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            tail = done.stderr.strip().splitlines()[-1:] or ["(no output)"]
            rows.append({"case": name, "error": tail[0]})
            print(f"{name:<34}  failed: {tail[0]}", flush=True)
            continue
        record = json.loads(done.stdout.strip().splitlines()[-1])
        record.update(case=name, wall_seconds=round(time.perf_counter() - start, 1))
        rows.append(record)
        print(
            f"{name:<34}{record['interactions_per_second']:>16,.0f}"
            f"{record['peak_rss_mb'] / 1024:>9.1f} GB{record['compile_seconds']:>8.1f}s",
            flush=True,
        )
    record = {
        "cases": rows,
        "machine": {"cpus": os.cpu_count(), "processor": platform.machine()},
        "versions": versions(),
    }
    write_output_file(output, record, "--suite_output")  # the table keeps the numbers
    print(f"suite written to {FLAGS.suite_output}")
    if all("error" in row for row in rows):
        print(f"benchmark: every case of the suite failed ({len(rows)})", file=sys.stderr)
        return 1
    return 0


def run() -> program.Done:
    if FLAGS.suite:
        return program.Done(status=run_suite())
    config = shared_flags.federation_config(CONFIG_FLAGS)
    train, test, source = on_every_process(shared_flags.load_datasets)
    spec, arrays = on_every_process(shared_flags.build, config, train, test)
    with stop_cleanly():
        results = [federation.run(spec, arrays) for _ in range(max(FLAGS.repeats, 1))]
    best = min(results, key=lambda r: r.run_seconds)
    compile_seconds = results[0].compile_seconds  # later repeats reuse the compiled program
    if not is_writer():  # process 0 of a --distributed run reports
        return program.Done()
    print(f"compile_seconds {compile_seconds:.2f}")
    record = {
        "interactions_per_second": round(best.interactions_per_second, 1),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "seconds": round(best.run_seconds, 4),
        "compile_seconds": round(compile_seconds, 3),
        "interactions": best.interactions,
        "config": dataclasses.asdict(config),
        "data": {**source, "train": dataset_summary(train)},
        "machine": {"cpus": os.cpu_count(), "processor": platform.machine()},
        "devices": [str(d) for d in jax.devices()],
        "processes": jax.process_count(),
        "versions": versions(),
    }
    return program.Done(message=json.dumps(record))


main = program.main("benchmark", run, distributed=lambda: not FLAGS.suite, what="benchmark --suite")

if __name__ == "__main__":
    app.run(main, flags_parser=program.parse_flags)
