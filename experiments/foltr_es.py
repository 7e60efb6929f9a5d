r"""FOLtR-ES (Kharitonov 2019; thesis §3.1), the baseline of the FPDGD paper.

    python -m experiments.foltr_es                    # synthetic default dataset
    python -m experiments.foltr_es --fold_dir=MSLR-WEB10K/Fold1 --n_runs=5 --privacy_p=0.9
    python -m experiments.foltr_es --train_path=train.txt --test_path=test.txt \
            --click_model=perfect --rounds=300 --ranker=neural

Writes <output_dir>/results.json with the keys experiments/fpdgd.py writes
(per-round offline nDCG@10 and MRR of the global model on the test split, online
nDCG@10 and true MaxRR of the displayed lists, online performance, timings) plus
"epsilon", the ε-LDP bound log(p(n−1)/(1−p)) of thesis eq. 3.6 (null for p = 1:
no privatisation).
"""

from __future__ import annotations

import math
import sys

from absl import app, flags

from experiments.lib import config_flags, program, shared_flags
from experiments.lib.cli import ProgressLog
from experiments.lib.distributed import check_same_everywhere, is_writer, on_every_process
from experiments.lib.output import claim_output, stop_cleanly
from experiments.lib.results import results_file
from foltr_jax.engine.results_files import curve_summary
from foltr_jax.methods import foltr_es
from foltr_jax.methods.fpdgd import federation

FLAGS = flags.FLAGS
shared_flags.define_data_flags()
shared_flags.define_checkpoint_flag()
shared_flags.define_distributed_flags()
CONFIG_FLAGS = config_flags.define(foltr_es.FoltrEsConfig, skip=("top_k",))
flags.adopt_module_key_flags(shared_flags)  # --help lists the shared flags too
flags.adopt_module_key_flags(config_flags)
flags.DEFINE_string("output_dir", "results/foltr_es", "Folder for results.json.")


def run_experiment(config, checkpoint: str | None = None) -> dict:
    train, test, source = shared_flags.load_datasets()
    try:
        spec, arrays = foltr_es.build(config, train, test)
    except federation.ConfigError as error:
        raise CONFIG_FLAGS.error(error) from None
    check_same_everywhere(spec, arrays)
    epsilon = config.epsilon
    writer = is_writer()
    if writer:
        print(
            f"foltr_es: {config.n_runs} run(s) x {config.rounds} rounds x {config.n_clients} "
            f"clients x {config.local_updates} interactions, {config.ranker} ranker, "
            f"{config.click_model} clicks, p = {config.privacy_p} (epsilon <= {epsilon:.2f}), "
            f"{train.n_queries} training queries",
            file=sys.stderr,
        )
    log = ProgressLog("foltr_es")
    with stop_cleanly():
        result = foltr_es.run(spec, arrays, progress=log if writer else None, checkpoint=checkpoint)
    results = results_file("foltr_es", config, result, train, test, source, log=log)
    results["epsilon"] = epsilon if math.isfinite(epsilon) else None
    return results


def summary(results: dict) -> str:
    """One line: the mean offline nDCG@10 curve at a few rounds, ε, and the speed."""
    epsilon = results["epsilon"]
    privacy = "no privatisation" if epsilon is None else f"epsilon <= {epsilon:.2f}"
    return (
        f"{curve_summary(results)}; {privacy}; "
        f"{results['interactions_per_second']:,.0f} interactions/s"
    )


def run() -> program.Done:
    config = CONFIG_FLAGS.build()
    output = on_every_process(claim_output)  # before any work
    results = run_experiment(config, output.checkpoint())
    path = output.write_json("results.json", results)
    return program.Done(output, summary(results) + f"; results in {path}")


main = program.main("foltr_es", run)

if __name__ == "__main__":
    app.run(main, flags_parser=program.parse_flags)
