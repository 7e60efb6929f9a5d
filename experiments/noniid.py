r"""Non-IID data in FPDGD (thesis ch. 4): the four types, their IID baselines, remedies.

  python -m experiments.noniid --type=1 --n_runs=5 --rounds=1000           # intents
  python -m experiments.noniid --type=1 --train_path=t.txt --intent_files=i1,i2,i3,i4
  python -m experiments.noniid --type=2 --grades_per_client=1 --n_clients=5 \
      --fold_dir=MSLR-WEB10K/Fold1 --remedies=none,fedprox,fedper,sharing --ranker=neural
  python -m experiments.noniid --type=3 --clicks=pbm
  python -m experiments.noniid --type=4 --mix=2
  python -m experiments.noniid --type=1 --ranker=neural --remedies=fedper --fedper_eval=clients

Cells: 'iid' (the type's IID baseline, unless --noiid), 'noniid', and one per remedy:
fedprox (one per --prox_mu; these and 'noniid', run as FedProx at mu = 0, are one compiled
program), fedper (--ranker=neural; the hidden-to-output weights w2 stay on the clients),
sharing (Type 2: a random --share_fraction of the training queries is shared, a warm-up
model is trained on it by centralised PDGD for --warmup_interactions updates, every client
samples from its own plus the shared queries).  Defaults follow the thesis (T = 10,000; Type 1: 4
clients, B = 5; Type 2: |C| = 5 (#R = 1) or 10 (#R = 2), B = 5; Type 3: B = 5, 3
CCM or 5 PBM clients; Type 4: 5 clients doing 1, 3, 5, 7, 9 interactions (IID: 5)).

Type 1 has no held-out test set: offline nDCG@10 on the training queries under every
intent's labels, online nDCG averaged over the intents; run r reshuffles the intents
per query.  FedPer's offline nDCG (--fedper_eval; the thesis does not say): 'server'
(default) the server model, whose w2 is the FedAvg of the clients' personal w2 (the
public FedPer code), or 'clients' the mean over clients of each personalised model
(shared w1, b1 with the client's own w2).  Training is the same under both.

Writes <output_dir>/results.json and table.txt; progress on stderr.  An interrupted
invocation started again with the same flags (--checkpoint) skips the cells it finished
(<output_dir>/.cells/<cell>.npz) and resumes the cell it was running
(<output_dir>/.checkpoint-<cell>.npz, and .checkpoint-<cell>-warmup.npz for sharing's
warm-up).
"""

from __future__ import annotations

import dataclasses
import sys
import time

from absl import app, flags

from experiments.lib import config_flags, program, results, shared_flags
from experiments.lib.cli import ProgressLog, UserError
from experiments.lib.config_flags import user_error
from experiments.lib.distributed import check_same_everywhere, is_writer, on_every_process
from experiments.lib.output import FinishedParts, Output, claim_output, stop_cleanly
from foltr_jax import data
from foltr_jax.data import noniid
from foltr_jax.engine.config import ConfigError, setting_help
from foltr_jax.engine.results_files import dataset_summary, timings
from foltr_jax.methods.fpdgd import federation
from foltr_jax.methods.fpdgd import noniid_experiment as experiment
from foltr_jax.methods.fpdgd.noniid_experiment import NoniidCell, NoniidConfig

FLAGS = flags.FLAGS
shared_flags.define_data_flags()
shared_flags.define_checkpoint_flag()
shared_flags.define_distributed_flags()
flags.adopt_module_key_flags(shared_flags)
_DEFAULT = NoniidConfig()


def _help(name: str) -> str:
    return setting_help(NoniidConfig, name)


flags.DEFINE_string("type", str(_DEFAULT.type), _help("type"))
flags.DEFINE_list("remedies", list(_DEFAULT.remedies), _help("remedies"))
flags.DEFINE_bool("iid", _DEFAULT.iid, _help("iid"))
flags.DEFINE_integer("grades_per_client", _DEFAULT.grades_per_client, _help("grades_per_client"))
flags.DEFINE_string("clicks", _DEFAULT.clicks, _help("clicks"))
flags.DEFINE_string("mix", _DEFAULT.mix, _help("mix"))
flags.DEFINE_list("steps", [], _help("steps"))
flags.DEFINE_list("prox_mu", ["0.001", "0.01", "0.1", "1", "10"], _help("prox_mu"))
flags.DEFINE_string("fedper_eval", _DEFAULT.fedper_eval, _help("fedper_eval"))
flags.DEFINE_float("share_fraction", _DEFAULT.share_fraction, _help("share_fraction"))
flags.DEFINE_integer(
    "warmup_interactions", _DEFAULT.warmup_interactions, _help("warmup_interactions")
)
flags.DEFINE_list(
    "intent_files", [], "Type 1: per-intent files '<qid> <doc> <label>' (--train_path)."
)
flags.DEFINE_integer("synthetic_intents", 4, "Type 1 without files: intents of the synthetic data.")
flags.DEFINE_enum(
    "type1_iid_measure",
    _DEFAULT.type1_iid_measure,
    list(noniid.IID_MEASURES),
    _help("type1_iid_measure"),
)
flags.DEFINE_string("output_dir", "results/noniid", "Folder for results.json and table.txt.")
# FPDGD's settings; the thesis's defaults (T = 10,000, 5 runs); |C| and B follow the type.
_FEDERATION = _DEFAULT.federation
CONFIG_FLAGS = config_flags.define(
    federation.FpdgdConfig,
    skip=shared_flags.FEDERATION_INTERNAL,
    defaults={
        name: getattr(_FEDERATION, name)
        for name in ("n_clients", "local_updates", "rounds", "n_runs", "chunk_rounds")
    },
    help={
        "n_clients": "Clients |C|; 0: the type's default (see above).",
        "local_updates": "Interactions per client per round B; 0: the default (5).",
    },
)
flags.adopt_module_key_flags(config_flags)

PROGRAM = "noniid"


def noniid_config() -> NoniidConfig:
    """The experiment's config from the flags, checked; UserError '--flag: ...' otherwise."""
    if FLAGS.type not in ("1", "2", "3", "4"):
        raise UserError(f"--type: must be 1, 2, 3 or 4, got {FLAGS.type!r}")
    try:
        mus = tuple(float(m) for m in FLAGS.prox_mu)
        steps = tuple(int(s) for s in FLAGS.steps)
    except ValueError as error:
        raise UserError(f"--prox_mu/--steps: not a number ({error})") from None
    config = NoniidConfig(
        federation=CONFIG_FLAGS.build(validate=False),
        type=int(FLAGS.type),
        remedies=tuple(r for r in FLAGS.remedies if r),
        iid=FLAGS.iid,
        grades_per_client=FLAGS.grades_per_client,
        clicks=FLAGS.clicks,
        mix=FLAGS.mix,
        steps=steps,
        prox_mu=mus,
        fedper_eval=FLAGS.fedper_eval,
        share_fraction=FLAGS.share_fraction,
        warmup_interactions=FLAGS.warmup_interactions,
        type1_iid_measure=FLAGS.type1_iid_measure,
    )
    try:
        config.validate()
    except ConfigError as error:
        raise user_error(error) from None
    if FLAGS.synthetic_intents < 2:
        raise UserError(f"--synthetic_intents: must be at least 2, got {FLAGS.synthetic_intents}")
    return config


def _load_intents() -> tuple[noniid.MultiIntentDataset, dict]:
    if FLAGS.data and FLAGS.data != "synthetic":
        raise UserError(
            f"--data={FLAGS.data}: Type 1 needs intent files (--train_path and --intent_files) "
            "or synthetic intents, not a LETOR dataset"
        )
    if FLAGS.train_path or FLAGS.intent_files:
        if not (FLAGS.train_path and FLAGS.intent_files):
            raise UserError("--intent_files: Type 1 files need --train_path and intents")
        try:
            mi = noniid.read_multi_intent(
                FLAGS.train_path,
                FLAGS.intent_files,
                normalise=FLAGS.normalise,
                cache_dir=FLAGS.cache_dir or None,
            )
        except (data.LetorFormatError, data.DatasetError) as error:
            raise UserError(str(error)) from None
        shared_flags.note_data_files(FLAGS.train_path, *FLAGS.intent_files, flag="intent_files")
        return mi, {"train_path": FLAGS.train_path, "intent_files": list(FLAGS.intent_files)}
    mi = noniid.synthetic_multi_intent(
        FLAGS.synthetic_seed,
        n_queries=FLAGS.synthetic_queries,
        n_features=FLAGS.synthetic_features,
        mean_docs_per_query=FLAGS.synthetic_docs_per_query,
        n_intents=FLAGS.synthetic_intents,
    )
    return mi, {"synthetic_multi_intent": {"seed": FLAGS.synthetic_seed, "intents": mi.n_intents}}


def plan_cells(config: NoniidConfig) -> tuple[experiment.NoniidPlan, dict]:
    """The experiment's data loaded and its cells planned and checked (``plan_cells``):
    (the plan, the data's description)."""
    if config.intents:
        mi, source = _load_intents()
        planned = (mi, None)
    else:
        full_train, full_test, source = shared_flags.load_datasets()
        planned = (full_train, full_test)
    try:
        plan = experiment.plan_cells(config, *planned)
    except ConfigError as error:
        raise user_error(error) from None
    return plan, {
        **source,
        "train": dataset_summary(plan.train),
        "test": dataset_summary(plan.test),
        "n_grades": plan.n_grades,
    }


def run_cell(cell: NoniidCell, output: Output, finished: FinishedParts, labels: dict) -> dict:
    """The cell's results (``labels``: its cell_labels): saved by an earlier, interrupted
    invocation, or computed now (resuming from the cell's checkpoint) and saved in
    ``finished``, after which its checkpoints go."""
    start = time.perf_counter()
    try:
        spec, arrays = cell.build()
    except ConfigError as error:
        raise user_error(error) from None
    check_same_everywhere((cell.name, spec, cell.describe), arrays)
    return finished.reuse(
        cell.name,
        lambda: cell.fingerprint(spec, arrays),
        lambda: compute_cell(cell, spec, arrays, output, labels, start),
        # a saved cell of an older results format has no "curves": computed again
        read=lambda saved: saved if isinstance(saved, dict) and "curves" in saved else None,
        checkpoints=(output.checkpoint(f"{cell.name}-warmup"), output.checkpoint(cell.name)),
        label=cell.name,
    )


def compute_cell(cell: NoniidCell, spec, arrays, output: Output, labels: dict, start) -> dict:
    """The cell's results cell (``start``: when its work began): the warm-up when it has
    one, then the run, resuming from their checkpoints."""
    initial = None
    writer = is_writer()  # process 0 of a --distributed run prints and writes
    if cell.warmup is not None:
        if writer:
            print(
                f"{PROGRAM}: [{cell.name}] warm-up on {cell.warmup.n_queries} shared queries",
                file=sys.stderr,
            )
        with stop_cleanly([f"{cell.name} warm-up"], cell.config.n_runs):
            try:
                initial = cell.warm_up(output.checkpoint(f"{cell.name}-warmup"))
            except ConfigError as error:
                raise user_error(error) from None
    log = ProgressLog(f"{PROGRAM} {cell.name}")
    with stop_cleanly([cell.name], cell.config.n_runs):
        result = federation.run(
            spec,
            arrays,
            progress=log if writer else None,
            initial_params=initial,
            checkpoint=output.checkpoint(cell.name),
        )
    return experiment.results_cell(
        cell, result, labels, wall_seconds=time.perf_counter() - start, timings=timings(log)
    )


def format_table(kind: int, cells) -> str:
    lines = [f"type {kind}: {'cell':<18}{'final offline nDCG@10':>26}{'online performance':>24}"]
    for name, c in ((c["name"], c["summary"]) for c in cells):
        lines.append(
            f"        {name:<18}{c['final_offline_ndcg_mean']:>16.4f} ± "
            f"{c['final_offline_ndcg_sd']:.4f}{c['online_performance_mean']:>14.2f} ± "
            f"{c['online_performance_sd']:.2f}"
        )
    return "\n".join(lines) + "\n"


def run() -> program.Done:
    config = noniid_config()
    kind, fed = config.type, config.federation
    output = on_every_process(claim_output, ("results.json", "table.txt"))
    finished = output.finished_parts(".cells")  # a planted link refused before any work
    plan, source = on_every_process(plan_cells, config)
    cells = plan.cells
    if is_writer():
        print(
            f"{PROGRAM}: type {kind}, {len(cells)} cell(s) x {fed.n_runs} run(s) x "
            f"{fed.rounds} rounds",
            file=sys.stderr,
        )
    results_cells = [
        run_cell(cell, output, finished, experiment.cell_labels(config, cell.name, cells[0].config))
        for cell in cells
    ]
    written = results.document(
        f"fpdgd/noniid/type{kind}",
        dataclasses.asdict(cells[0].config),
        source,
        results_cells,
        noniid=experiment.settings_record(config),
        seconds=sum(c["seconds"] for c in results_cells),
        compile_seconds=sum(c["compile_seconds"] for c in results_cells),
    )
    path = output.write_json("results.json", written)
    table = format_table(kind, results_cells)
    output.write_text("table.txt", table)
    finished.clear()
    summary = ", ".join(
        f"{c['name']} {c['summary']['final_offline_ndcg_mean']:.4f}" for c in results_cells
    )
    return program.Done(output, f"{table}type {kind}: {summary}; results in {path}")


main = program.main(PROGRAM, run)

if __name__ == "__main__":
    app.run(main, flags_parser=program.parse_flags)
