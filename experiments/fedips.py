r"""FedIPS (Li & Ouyang, federated unbiased learning to rank), FedAvg, or the λLinear baseline.

    python -m experiments.fedips                              # synthetic data, γ = 1, known IPS
    python -m experiments.fedips --propensity=none            # FedAvg: no IPS weighting
    python -m experiments.fedips --propensity=estimated       # federated regression-EM propensities
    python -m experiments.fedips --train_path=train.txt --test_path=test.txt --gamma=2 --n_runs=5
    python -m experiments.fedips --baseline=lambdarank        # full-information linear LambdaRank

Writes <output_dir>/results.json: the config, the logging policy f₀ and its NDCG, per-round offline
NDCG@5 and NDCG@10 of the global model on the test split, clicks and lists per user, and timings.
With --validation_fraction=F the metrics are on F of the training queries held out instead (the
users never issue them): the runs that choose the learning rates (``validation``: their queries).
``offline_ndcg``, ``initial_offline_ndcg`` and ``final_offline_ndcg`` are NDCG@5 (the paper's
metric; the same values as the ``...ndcg5`` keys); the ``...ndcg10`` keys hold NDCG@10.
"""

from __future__ import annotations

import math
import sys

from absl import app, flags

from experiments.lib import config_flags, program, provenance, shared_flags
from experiments.lib.cli import ProgressLog, UserError
from experiments.lib.distributed import check_same_everywhere, is_writer, on_every_process
from experiments.lib.output import claim_output, stop_cleanly
from foltr_jax.core.registry import one_of
from foltr_jax.engine.results_files import curve_summary, timings
from foltr_jax.methods import fedips
from foltr_jax.methods.fedips import experiment
from foltr_jax.methods.fpdgd import federation

FLAGS = flags.FLAGS
shared_flags.define_data_flags()
shared_flags.define_checkpoint_flag()
shared_flags.define_distributed_flags()
# Config fields whose flag has another name.
FLAG_OF_FIELD = {"local_lr": "local_learning_rate", "global_lr": "global_learning_rate"}
CONFIG_FLAGS = config_flags.define(fedips.FedIpsConfig, rename=FLAG_OF_FIELD)
flags.adopt_module_key_flags(shared_flags)  # --help lists the shared flags too
flags.adopt_module_key_flags(config_flags)
flags.DEFINE_string(
    "baseline", "none", "none: FedIPS/FedAvg; lambdarank: full-information linear LambdaRank."
)
flags.DEFINE_float("lambdarank_learning_rate", 0.1, "λLinear baseline: gradient-descent step.")
flags.DEFINE_integer("lambdarank_steps", 300, "λLinear baseline: full-batch steps.")
flags.DEFINE_string("output_dir", "results/fedips", "Folder for results.json.")

PROGRAM = "fedips"
BASELINES = ("none", "lambdarank")


def config_from_flags() -> fedips.FedIpsConfig:
    config = CONFIG_FLAGS.build()
    if FLAGS.baseline not in BASELINES:
        raise UserError(f"--baseline: {one_of(BASELINES, FLAGS.baseline)}")
    if FLAGS.baseline == "lambdarank":
        if not 0 < FLAGS.lambdarank_learning_rate < math.inf:
            raise UserError(
                "--lambdarank_learning_rate: must be positive and finite, got "
                f"{FLAGS.lambdarank_learning_rate}"
            )
        if FLAGS.lambdarank_steps < 1:
            raise UserError(f"--lambdarank_steps: must be at least 1, got {FLAGS.lambdarank_steps}")
    return config


def method_name(config: fedips.FedIpsConfig) -> str:
    if FLAGS.baseline == "lambdarank":
        return "lambdarank"
    return "fedavg" if config.propensity == "none" else f"fedips/{config.propensity}"


def run_experiment(config, checkpoint: str | None = None) -> dict:
    train, test, source = shared_flags.load_datasets()
    try:
        spec, arrays, prepared = fedips.build(config, train, test)
    except federation.ConfigError as error:
        raise CONFIG_FLAGS.error(error) from None
    except ValueError as error:
        raise UserError(str(error)) from None
    method = method_name(config)
    writer = is_writer()  # process 0 of a --distributed run prints and writes
    if method == "lambdarank":
        steps, lr = FLAGS.lambdarank_steps, FLAGS.lambdarank_learning_rate
        if writer:
            print(
                f"lambdarank: {steps} full-batch steps, learning rate {lr}, "
                f"{prepared.train.n_queries} training queries",
                file=sys.stderr,
            )
        cell, fields = experiment.lambdarank_baseline(prepared, arrays.test, lr, steps)
        if writer:
            print(
                f"[lambdarank] {steps} steps, {fields['seconds']:.1f} s "
                f"(compiled in {fields['compile_seconds']:.1f} s)",
                file=sys.stderr,
            )
    else:
        check_same_everywhere(spec, arrays)
        if writer:
            print(
                f"{method}: {config.n_runs} run(s) x {config.rounds} rounds x "
                f"{config.n_users} users x {config.queries_per_user} queries, "
                f"m = {config.clicks_per_user} clicks, K = {config.top_k}, γ = {config.gamma}, "
                f"{prepared.train.n_queries} training queries; "
                f"f₀ NDCG@5 {prepared.logging_ndcg5:.4f}"
                + (
                    f"; offline metrics on {prepared.test.n_queries} held-out training queries "
                    "(validation), not the test split"
                    if prepared.validation_queries is not None
                    else ""
                ),
                file=sys.stderr,
            )
        log = ProgressLog(method)
        with stop_cleanly():
            result = fedips.run(
                spec, arrays, progress=log if writer else None, checkpoint=checkpoint
            )
        cell, fields = experiment.run_record(config, result)
        fields["timings"] = timings(log)
    return experiment.results_document(
        config, method, spec, prepared, source, cell,
        normalise=FLAGS.normalise, provenance=provenance.record(), **fields,
    )  # fmt: skip


def summary(results: dict) -> str:
    """One line: the mean offline NDCG@5 curve at a few rounds, f₀'s NDCG@5, and the speed."""
    unit = "step" if results["method"] == "lambdarank" else "round"
    curve = curve_summary(results, "ndcg5", "NDCG@5", unit)
    return (
        f"{results['method']}: {curve}; f₀ {results['logging_policy']['offline_ndcg5']:.4f}; "
        f"{results['interactions_per_second']:,.0f} lists/s"
    )


def run() -> program.Done:
    config = config_from_flags()
    output = on_every_process(claim_output)  # before any work
    results = run_experiment(config, output.checkpoint())
    path = output.write_json("results.json", results)
    return program.Done(output, summary(results) + f"; results in {path}")


main = program.main(PROGRAM, run)

if __name__ == "__main__":
    app.run(main, flags_parser=program.parse_flags)
