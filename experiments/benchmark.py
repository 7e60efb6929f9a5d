r"""Throughput of FPDGD: interactions per second and peak memory.

Takes the same data and federation flags as experiments/fpdgd.py, e.g.

  python -m experiments.benchmark --train_path=../shared/data/mslr_sample/train.txt \
      --test_path=../shared/data/mslr_sample/test.txt --n_clients=1000 --local_updates=2

Compile time is reported on its own line and not counted; offline evaluation of
the global model after every round is included.  The last line printed is one
JSON object with interactions_per_second, peak_rss_mb and the settings.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform

from absl import app, flags

from experiments import common
from foltr_jax import federation

FLAGS = flags.FLAGS
common.define_data_flags()
common.define_federation_flags()
flags.adopt_module_key_flags(common)  # --help lists the shared flags too
flags.DEFINE_integer("repeats", 1, "Timed repetitions of the whole run; the best is reported.")


def main(argv):
    common.quiet_logs()
    if len(argv) > 1:
        common.fail("benchmark", f"unexpected arguments {argv[1:]}")
    try:
        config = common.federation_config()
        train, test, source = common.load_datasets()
    except common.UserError as error:
        common.fail("benchmark", str(error))
    spec, arrays = federation.build(config, train, test)
    results = [federation.run(spec, arrays) for _ in range(max(FLAGS.repeats, 1))]
    best = min(results, key=lambda r: r.run_seconds)
    compile_seconds = results[0].compile_seconds  # later repeats reuse the compiled program
    print(f"compile_seconds {compile_seconds:.2f}")
    print(
        json.dumps(
            {
                "interactions_per_second": round(best.interactions_per_second, 1),
                "peak_rss_mb": round(common.peak_rss_mb(), 1),
                "seconds": round(best.run_seconds, 4),
                "compile_seconds": round(compile_seconds, 3),
                "interactions": best.interactions,
                "config": dataclasses.asdict(config),
                "data": {**source, "train": common.dataset_summary(train)},
                "machine": {"cpus": os.cpu_count(), "processor": platform.machine()},
                "versions": common.versions(),
            }
        )
    )


if __name__ == "__main__":
    app.run(main)
