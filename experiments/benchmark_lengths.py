r"""Does the cost of an interaction follow its query's length?  A benchmark that prints numbers.

  python -m experiments.benchmark_lengths [--n_clients=1000 --rounds=50]

Data: MSLR-WEB10K-shaped synthetic queries (136 features, lognormal documents per
query with mean 120, capped at 908 documents like MSLR-WEB10K's longest query).
The same FPDGD run (linear ranker, B = 2) is timed three ways:

  ladder           the default: each lane scores its query at the narrowest width of
                   lists.window_widths that holds it, and lists are sampled in
                   groups of similar length, each at its group's width;
  one width        the same program with a single width, the longest query: what an
                   implementation padding every query to the longest one pays;
  vmap, one width  window_scoring=vmap and one display group (the accelerator path).

All three compute the same rankings from the same keys; the script prints the largest
difference between their offline nDCG curves next to the throughput.  The last line is
one JSON object; --output also writes it to a file.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import platform

import numpy as np
from absl import app, flags

from experiments.lib import program
from experiments.lib.cli import fail, quiet_logs
from foltr_jax import data
from foltr_jax.engine.results_files import versions, write_json_atomic
from foltr_jax.methods.fpdgd import federation

FLAGS = flags.FLAGS
flags.DEFINE_integer("n_clients", 1000, "Clients per round |C|.")
flags.DEFINE_integer("rounds", 50, "Rounds per timed run.")
flags.DEFINE_integer("queries", 1000, "Training queries of the synthetic dataset.")
flags.DEFINE_float("mean_docs", 120.0, "Mean documents per query (MSLR-WEB10K: about 120).")
flags.DEFINE_integer("max_docs", 908, "Longest query (MSLR-WEB10K's: 908 documents).")
flags.DEFINE_integer("repeats", 2, "Timed repetitions of each variant; the best is reported.")
flags.DEFINE_string("output", "", "Optional JSON file for the result.")


def variants(config: federation.FpdgdConfig) -> dict:
    """name -> (config, whether to force a single width)."""
    return {
        "ladder": (config, False),
        "one width": (config, True),
        "vmap, one width": (
            dataclasses.replace(config, window_scoring="vmap", display_groups=1),
            True,
        ),
    }


def main(argv):
    quiet_logs()
    if len(argv) > 1:
        fail("benchmark_lengths", f"unexpected arguments {argv[1:]}")
    for name in ("n_clients", "rounds", "queries", "repeats"):
        if getattr(FLAGS, name) < 1:
            fail("benchmark_lengths", f"--{name} must be at least 1")
    if not 2 <= FLAGS.mean_docs <= FLAGS.max_docs:
        fail("benchmark_lengths", "--mean_docs must lie in [2, --max_docs]")
    train, test = data.synthetic_train_test(
        0,
        n_train_queries=FLAGS.queries,
        n_test_queries=FLAGS.queries // 2 or 1,
        n_features=136,
        mean_docs_per_query=FLAGS.mean_docs,
        max_docs_per_query=FLAGS.max_docs,
    )
    lengths = np.asarray(train.query_lengths)
    config = federation.FpdgdConfig(
        n_clients=FLAGS.n_clients,
        local_updates=2,
        rounds=FLAGS.rounds,
        chunk_rounds=FLAGS.rounds,
        click_model="informational",
    )
    print(
        f"{train.n_queries} queries, documents per query: mean {lengths.mean():.0f}, "
        f"median {np.median(lengths):.0f}, 99th percentile {np.percentile(lengths, 99):.0f}, "
        f"longest {lengths.max()}; {FLAGS.n_clients} clients, B = 2, {FLAGS.rounds} rounds"
    )
    rows, curves = [], {}
    for name, (cfg, one_width) in variants(config).items():
        spec, arrays = federation.build(cfg, train, test)
        if one_width:
            spec = dataclasses.replace(spec, widths=(spec.window,))
        results = [federation.run(spec, arrays) for _ in range(FLAGS.repeats)]
        best = min(results, key=lambda r: r.run_seconds)
        curves[name] = best.offline_ndcg
        rows.append(
            {
                "variant": name,
                "widths": list(spec.widths),
                "interactions_per_second": round(best.interactions_per_second, 1),
                "seconds": round(best.run_seconds, 3),
                "compile_seconds": round(results[0].compile_seconds, 2),
            }
        )
    base = rows[0]["interactions_per_second"]
    print(f"{'variant':<18}{'interactions/s':>16}{'vs ladder':>11}{'max |Δ nDCG|':>14}")
    for row in rows:
        difference = float(np.max(np.abs(curves[row["variant"]] - curves["ladder"])))
        row["max_ndcg_difference_to_ladder"] = difference
        print(
            f"{row['variant']:<18}{row['interactions_per_second']:>16,.0f}"
            f"{row['interactions_per_second'] / base:>10.2f}x{difference:>14.2g}"
        )
    record = {
        "rows": rows,
        "data": {
            "queries": int(train.n_queries),
            "mean_docs": float(lengths.mean()),
            "longest": int(lengths.max()),
        },
        "config": dataclasses.asdict(config),
        "machine": {"cpus": os.cpu_count(), "processor": platform.machine()},
        "versions": versions(),
    }
    if FLAGS.output:
        write_json_atomic(pathlib.Path(FLAGS.output), record)
    print(json.dumps(record))


if __name__ == "__main__":
    app.run(main, flags_parser=program.parse_flags)
