r"""Unlearning a client from FPDGD (Wang et al., ECIR 2024): Figures 2-3 and Table 3.

The paper's setup: 10 clients, n = 5 local updates, T = 10,000 rounds, linear
ranker; the client to forget is malicious (M = −z·M_local, z = 2).  Trains 10H-0M,
9H-1M (storing every client's update every gcd(Δt) rounds) and 9H-0M (the retrain
from scratch), then unlearns with every n′ × Δt × click model in ONE program.

  python -m experiments.unlearning --fold_dir=MSLR-WEB10K/Fold1 --n_runs=5
  python -m experiments.unlearning --train_path=train.txt --test_path=test.txt \
      --rounds=1000 --delta_t=10 --unlearn_local_updates=3        # Figure 3's cell
  python -m experiments.unlearning --forget_clients=0,3            # two clients at once

Writes <output_dir>/results.json (curves of every configuration and cell, the
efficiency accounting, history memory, timings) and <output_dir>/table.txt (the
Table-3 grid: final offline nDCG@10, mean ± sd over runs, paired t-tests against
the retrained model with Bonferroni correction).

An interrupted invocation started again with the same flags (--checkpoint) reuses the
trainings it finished (<output_dir>/.phases/<honest|malicious|retrained>.npz) and
resumes the phase it was running (<output_dir>/.checkpoint-<phase>.npz, the replay's
phase being 'replay').
"""

from __future__ import annotations

import dataclasses
import functools
import sys

import numpy as np
from absl import app, flags

from experiments.lib import config_flags, program, provenance, shared_flags
from experiments.lib.cli import ProgressLog, UserError, need_report_extra
from experiments.lib.config_flags import user_error
from experiments.lib.distributed import check_same_everywhere, is_writer, on_every_process
from experiments.lib.output import FinishedParts, Output, claim_output, refuse_repeats, stop_cleanly
from foltr_jax.core import click_models
from foltr_jax.engine import loop, results_files
from foltr_jax.engine.results_files import timings
from foltr_jax.methods import unlearning
from foltr_jax.methods.fpdgd import federation

FLAGS = flags.FLAGS
shared_flags.define_data_flags()
CONFIG_FLAGS = shared_flags.define_federation_flags(shared_flags.TEN_CLIENT_DEFAULTS)
shared_flags.define_checkpoint_flag()
flags.adopt_module_key_flags(shared_flags)  # --help lists the shared flags too
flags.adopt_module_key_flags(config_flags)
flags.DEFINE_string("output_dir", "results/unlearning", "Folder for results.json and table.txt.")
flags.DEFINE_list(
    "click_models", ["perfect", "navigational", "informational"], "Click models (all clients)."
)
flags.DEFINE_list(
    "forget_clients", ["0"], "Ids of the clients to forget (they act maliciously before)."
)
flags.DEFINE_list(
    "delta_t",
    [str(d) for d in unlearning.UnlearningConfig().delta_t],  # (5, 10, 20): the paper's
    "Δt values: updates are stored every Δt rounds.",
)
flags.DEFINE_list(
    "unlearn_local_updates", ["1", "2", "3", "4"], "n′ values: local steps per replayed round."
)

# ConfigError fields that are not flag names.
_FLAG_OF = {"click_model": "click_models", "n_malicious": "forget_clients"}


def _int_list(name: str) -> tuple:
    values = getattr(FLAGS, name)
    try:
        return tuple(int(v) for v in values)
    except ValueError:
        raise UserError(f"--{name} must be integers, got {','.join(values)}") from None


def unlearning_config() -> unlearning.UnlearningConfig:
    refuse_repeats(FLAGS.click_models, "click_models", same=click_models.identity)
    for name in ("forget_clients", "delta_t", "unlearn_local_updates"):
        refuse_repeats(_int_list(name), name)
    config = unlearning.UnlearningConfig(
        federation=shared_flags.federation_config(CONFIG_FLAGS),
        click_models=tuple(FLAGS.click_models),
        forget_clients=_int_list("forget_clients"),
        delta_t=_int_list("delta_t"),
        unlearn_local_updates=_int_list("unlearn_local_updates"),
    )
    try:
        return config.validate()
    except federation.ConfigError as error:
        raise user_error(error, _FLAG_OF) from None


def run_experiment(config, output: Output, finished: FinishedParts) -> dict:
    """The results file; the trainings finished by an earlier, interrupted invocation
    come from ``finished``, the others run (resuming from their checkpoints) and are
    saved there."""
    train, test, source = on_every_process(shared_flags.load_datasets)
    cfg, labels = config.federation, config.labels()
    n_runs, n_clicks = cfg.n_runs, len(config.click_models)
    writer = is_writer()  # process 0 of a --distributed run prints and writes
    if writer:
        print(
            f"unlearning: forget client(s) {list(config.forget_clients)} of {cfg.n_clients}; "
            f"{n_clicks} click model(s) x {n_runs} run(s) x {cfg.rounds} rounds; "
            f"{len(config.cells())} unlearning cells (n′ x Δt x click model) in one program",
            file=sys.stderr,
        )
    logs = []

    def replay_one(replay):
        logs.append(ProgressLog(labels["unlearned"]))
        with stop_cleanly(what="unlearning replay"):
            return replay(
                progress=logs[-1] if writer else None, checkpoint=output.checkpoint("replay")
            )

    protocol = unlearning.run_protocol(
        config,
        train,
        test,
        train_one=functools.partial(_train_one, config, labels, output, finished, logs),
        replay_one=replay_one,
    )
    return unlearning.results_document(
        config,
        protocol,
        results_files.data_summary(source, train, test),
        timings=timings(*logs),
        provenance=provenance.record(),
    )


def _train_one(config, labels, output, finished, logs, kind, spec, arrays):
    """One training of the protocol (``unlearning.run_protocol``'s ``train_one``): reused
    from ``finished``, or run (resuming from its checkpoint, its progress log appended to
    ``logs``) and saved there."""
    check_same_everywhere((config, kind, spec), arrays)

    def train():
        logs.append(ProgressLog(labels[kind]))
        names = [f"{labels[kind]} {c}" for c in config.click_models]
        with stop_cleanly(names, config.federation.n_runs, "training"):
            return federation.run(
                spec,
                arrays,
                progress=logs[-1] if is_writer() else None,
                checkpoint=output.checkpoint(kind),
            )

    return finished.reuse(
        kind,
        lambda: loop.fingerprint((config, kind, spec), arrays),
        train,
        read=_run_result,
        plain=_plain,
        checkpoints=(output.checkpoint(kind),),
        label=labels[kind],
    )


def _plain(result: federation.RunResult) -> dict:
    """A finished training as plain data for FinishedParts."""
    return {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}


def _run_result(saved) -> federation.RunResult | None:
    """The training a FinishedParts entry holds (None when there is none, or it does not
    fit today's RunResult)."""
    if not isinstance(saved, dict):
        return None
    try:
        return federation.RunResult(**saved)
    except TypeError:
        return None


def format_table(written: dict) -> str:
    """Table 3 of the paper: final nDCG@10 per click model, n′ and Δt, mean ± sd.

    Each U(·) cell is compared with the retrained model by a two-tailed paired
    t-test over runs (runs share their seeds), Bonferroni-corrected over all
    cells; '*' marks a significant difference (p ≤ 0.05 after correction).
    """
    from experiments.lib import statistics  # scipy: the report extra, checked before the run

    labels = written["labels"]
    deltas = written["config"]["delta_t"]
    steps = sorted(written["config"]["unlearn_local_updates"], reverse=True)

    def fmt(v):
        return f"{np.mean(v):.4f} ± {np.std(v, ddof=1) if len(v) > 1 else 0.0:.4f}"

    settings = [(c["setting"], c["per_run"]["final_offline_ndcg"]) for c in written["cells"]]
    reference = {
        (s["configuration"], s["click_model"]): final for s, final in settings if "delta_t" not in s
    }
    cells = {
        (s["click_model"], s["unlearn_local_updates"], s["delta_t"]): final
        for s, final in settings
        if "delta_t" in s
    }
    p_values = {}
    for (click, n, dt), values in cells.items():
        retrained = reference[(labels["retrained"], click)]
        if len(values) > 1:
            p_values[(click, n, dt)] = statistics.paired_t_test(values, retrained).p
    significant = dict(
        zip(p_values, statistics.bonferroni_significant(list(p_values.values())))
        if p_values
        else []
    )
    width = 20
    lines = [
        (
            "final offline nDCG@10, mean ± sd over runs; * = differs from "
            f"{labels['retrained']} (paired t-test, Bonferroni over {len(p_values)} cells, "
            "p ≤ 0.05)"
        )
    ]
    for click in written["config"]["click_models"]:
        lines.append("")
        lines.append(f"click model: {click}")
        lines.append(f"{'ranker':<24}" + "".join(f"{f'Δt = {dt}':<{width}}" for dt in deltas))
        for kind in ("retrained", "malicious", "honest"):
            value = fmt(reference[(labels[kind], click)])
            lines.append(f"{labels[kind]:<24}" + f"{value:<{width}}" * len(deltas))
        for n in steps:
            row = f"{labels['unlearned'] + f', n′ = {n}':<24}"
            for dt in deltas:
                mark = "*" if significant.get((click, n, dt)) else ""
                row += f"{fmt(cells[(click, n, dt)]) + mark:<{width}}"
            lines.append(row)
    return "\n".join(lines) + "\n"


def run() -> program.Done:
    need_report_extra("unlearning", ("scipy",))  # Table 3's t-tests, before any work
    config = unlearning_config()
    output = on_every_process(claim_output, ("results.json", "table.txt"))
    finished = output.finished_parts(".phases")
    written = run_experiment(config, output, finished)
    table = format_table(written)
    path = output.write_json("results.json", written)
    output.write_text("table.txt", table)
    finished.clear()
    wall = written["wall_seconds"]
    return program.Done(
        output,
        f"{table}\nretraining from scratch {wall['retraining_from_scratch']:.1f} s, unlearning "
        f"grid {wall['unlearning_grid']:.1f} s; results in {path}",
    )


main = program.main("unlearning", run)

if __name__ == "__main__":
    app.run(main, flags_parser=program.parse_flags)
