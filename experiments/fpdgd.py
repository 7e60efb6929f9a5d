r"""FPDGD (Wang et al., ICTIR 2021) or its centralised PDGD baseline.

    python -m experiments.fpdgd                       # synthetic default dataset
    python -m experiments.fpdgd --fold_dir=MSLR-WEB10K/Fold1 --n_runs=5
    python -m experiments.fpdgd --train_path=train.txt --test_path=test.txt \
            --n_clients=10 --local_updates=5 --rounds=100 --click_model=perfect

Writes <output_dir>/results.json: the config, per-round offline nDCG@10 and MRR
of the global model on the test split, per-round online nDCG@10 and MaxRR of the
displayed lists, the discounted online performance, and timings.
"""

from __future__ import annotations

import dataclasses
import pathlib
import sys

from absl import app, flags

from experiments import common
from foltr_jax import federation

FLAGS = flags.FLAGS
common.define_data_flags()
common.define_federation_flags()
flags.adopt_module_key_flags(common)  # --help lists the shared flags too
flags.DEFINE_string("output_dir", "results/fpdgd", "Folder for results.json.")


def run_experiment() -> dict:
    config = common.federation_config()
    train, test, source = common.load_datasets()
    spec, arrays = federation.build(config, train, test)
    method = f"centralised_pdgd/{FLAGS.centralised_form}" if FLAGS.centralised else "fpdgd"
    print(
        f"{method}: {config.n_runs} run(s) x {config.rounds} rounds x {config.n_clients} clients "
        f"x {config.local_updates} interactions, {config.ranker} ranker, "
        f"{config.click_model} clicks, {train.n_queries} training queries",
        file=sys.stderr,
    )
    result = federation.run(spec, arrays, progress=common.ProgressLog(method))
    return {
        "method": method,
        "config": dataclasses.asdict(config),
        "data": {
            **source,
            "train": common.dataset_summary(train),
            "test": common.dataset_summary(test),
            "normalise": FLAGS.normalise,
        },
        "versions": common.versions(),
        "initial_offline_ndcg": result.initial_offline_ndcg.tolist(),
        "offline_ndcg": result.offline_ndcg.tolist(),
        "offline_mrr": result.offline_mrr.tolist(),
        "online_ndcg": result.online_ndcg.tolist(),
        "online_max_rr": result.online_max_rr.tolist(),
        "online_performance": result.online_performance.tolist(),
        "final_offline_ndcg": result.offline_ndcg[:, -1].tolist(),
        "interactions": result.interactions,
        "seconds": result.run_seconds,
        "compile_seconds": result.compile_seconds,
        "interactions_per_second": result.interactions_per_second,
    }


def main(argv):
    common.quiet_logs()
    if len(argv) > 1:
        common.fail("fpdgd", f"unexpected arguments {argv[1:]}; flags look like --name=value")
    output = pathlib.Path(FLAGS.output_dir) / "results.json"
    try:
        results = run_experiment()
    except common.UserError as error:
        common.fail("fpdgd", str(error))
    common.write_json_atomic(output, results)
    print(summary(results) + f"; results in {output}")


def summary(results: dict) -> str:
    """One line: the mean offline nDCG@10 curve at a few rounds, and the speed."""
    curves = results["offline_ndcg"]
    rounds = len(curves[0])
    mean_at = lambda t: sum(c[t - 1] for c in curves) / len(curves)
    initial = sum(results["initial_offline_ndcg"]) / len(curves)
    marks = sorted({1, max(rounds // 10, 1), max(rounds // 2, 1), rounds})
    curve = ", ".join(f"round {t}: {mean_at(t):.4f}" for t in marks)
    return (
        f"offline nDCG@10 (mean of {len(curves)} run(s)) initial: {initial:.4f}, {curve}; "
        f"{results['interactions_per_second']:,.0f} interactions/s"
    )


if __name__ == "__main__":
    app.run(main)
