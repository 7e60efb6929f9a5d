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

from experiments import common
from foltr_jax import click_models, federation, foltr_es
from foltr_jax.config import resolve_window_scoring

FLAGS = flags.FLAGS
common.define_data_flags()
common.define_checkpoint_flag()
common.define_distributed_flags()
common.define_poisoning_flags()
flags.adopt_module_key_flags(common)  # --help lists the shared flags too
_DEFAULTS = foltr_es.FoltrEsConfig()
flags.DEFINE_integer("n_clients", _DEFAULTS.n_clients, "Clients per round N.")
flags.DEFINE_integer(
    "local_updates",
    _DEFAULTS.local_updates,
    "Interactions per client per round B (even with antithetic pairs).",
)
flags.DEFINE_integer("rounds", _DEFAULTS.rounds, "Global updates T.")
flags.DEFINE_float("learning_rate", _DEFAULTS.learning_rate, "Adam learning rate.")
flags.DEFINE_float("sigma", _DEFAULTS.sigma, "Standard deviation σ of the ES perturbations.")
flags.DEFINE_float(
    "privacy_p",
    _DEFAULTS.privacy_p,
    "Probability p of reporting the true MaxRR, in (1/11, 1]; 1 = no privatisation.",
)
flags.DEFINE_bool(
    "antithetic", _DEFAULTS.antithetic, "Antithetic pairs: half the interactions use −noise."
)
flags.DEFINE_string("ranker", _DEFAULTS.ranker, f"Ranker: {foltr_es.ranker_help()}.")
flags.DEFINE_string(
    "click_model",
    _DEFAULTS.click_model,
    f"Click model: {click_models.help_text()}.",
)
flags.DEFINE_integer(
    "n_grades",
    _DEFAULTS.n_grades,
    "Relevance grades of the click tables (2, 3 or 5); 0 infers from the labels.",
)
flags.DEFINE_integer(
    "n_runs", _DEFAULTS.n_runs, "Independent repetitions, run together in one program."
)
flags.DEFINE_integer("seed", _DEFAULTS.seed, "Seed of the simulation (noise, queries, clicks).")
flags.DEFINE_integer(
    "chunk_rounds",
    _DEFAULTS.chunk_rounds,
    "Rounds per compiled chunk (progress is reported between chunks).",
)
common.define_eval_every_flag(_DEFAULTS.eval_every)
common.define_client_chunk_flag(_DEFAULTS.client_chunk)
common.define_n_devices_flag(_DEFAULTS.n_devices)
flags.DEFINE_string(
    "window_scoring",
    _DEFAULTS.window_scoring,
    "auto: map on a CPU, vmap on an accelerator; map: score each interaction's candidates in "
    "turn (fast on CPU); vmap: batched (for GPU).",
)
flags.DEFINE_string("output_dir", "results/foltr_es", "Folder for results.json.")


def config_from_flags() -> foltr_es.FoltrEsConfig:
    config = foltr_es.FoltrEsConfig(
        n_clients=FLAGS.n_clients,
        local_updates=FLAGS.local_updates,
        rounds=FLAGS.rounds,
        learning_rate=FLAGS.learning_rate,
        sigma=FLAGS.sigma,
        privacy_p=FLAGS.privacy_p,
        antithetic=FLAGS.antithetic,
        ranker=FLAGS.ranker,
        click_model=FLAGS.click_model,
        n_grades=FLAGS.n_grades,
        n_runs=FLAGS.n_runs,
        seed=FLAGS.seed,
        window_scoring=resolve_window_scoring(FLAGS.window_scoring),
        chunk_rounds=FLAGS.chunk_rounds,
        eval_every=FLAGS.eval_every,
        client_chunk=FLAGS.client_chunk,
        n_devices=FLAGS.n_devices,
        attack=FLAGS.attack,
        aggregator=FLAGS.aggregator,
        n_malicious=FLAGS.n_malicious,
        krum_squared_distances=FLAGS.krum_squared_distances,
    )
    try:
        return config.validate()
    except federation.ConfigError as error:
        raise common.UserError(f"--{error.field}: {error.message}") from None


def run_experiment(config, checkpoint: str | None = None) -> dict:
    train, test, source = common.load_datasets()
    try:
        spec, arrays = foltr_es.build(config, train, test)
    except federation.ConfigError as error:
        raise common.UserError(f"--{error.field}: {error.message}") from None
    common.check_same_everywhere(spec, arrays)
    epsilon = config.epsilon
    writer = common.is_writer()
    if writer:
        print(
            f"foltr_es: {config.n_runs} run(s) x {config.rounds} rounds x {config.n_clients} "
            f"clients x {config.local_updates} interactions, {config.ranker} ranker, "
            f"{config.click_model} clicks, p = {config.privacy_p} (epsilon <= {epsilon:.2f}), "
            f"{train.n_queries} training queries",
            file=sys.stderr,
        )
    log = common.ProgressLog("foltr_es")
    with common.stop_cleanly():
        result = foltr_es.run(spec, arrays, progress=log if writer else None, checkpoint=checkpoint)
    results = common.results_file("foltr_es", config, result, train, test, source, log=log)
    results["epsilon"] = epsilon if math.isfinite(epsilon) else None
    return results


def summary(results: dict) -> str:
    """One line: the mean offline nDCG@10 curve at a few rounds, ε, and the speed."""
    epsilon = results["epsilon"]
    privacy = "no privatisation" if epsilon is None else f"epsilon <= {epsilon:.2f}"
    return (
        f"{common.curve_summary(results)}; {privacy}; "
        f"{results['interactions_per_second']:,.0f} interactions/s"
    )


def main(argv):
    common.quiet_logs()
    if len(argv) > 1:
        common.fail("foltr_es", f"unexpected arguments {argv[1:]}; flags look like --name=value")
    try:
        common.start_distributed("foltr_es")
        config = config_from_flags()
        output = common.on_every_process(common.claim_output)  # before any work
        results = run_experiment(config, output.checkpoint())
        path = output.write_json("results.json", results)
    except common.UserError as error:
        common.fail("foltr_es", str(error))
    output.finish()
    if common.is_writer():
        print(summary(results) + f"; results in {path}")


if __name__ == "__main__":
    app.run(main)
