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
import math
import sys
import time

import numpy as np
from absl import app, flags

from experiments.lib import config_flags, program, results, shared_flags
from experiments.lib.cli import ProgressLog, UserError
from experiments.lib.config_flags import user_error
from experiments.lib.distributed import check_same_everywhere, is_writer, on_every_process
from experiments.lib.output import (
    FinishedParts,
    Output,
    claim_output,
    refuse_repeats,
    unique_names,
)
from foltr_jax import data
from foltr_jax.core import click_models
from foltr_jax.core.registry import one_of
from foltr_jax.data import noniid
from foltr_jax.engine import loop
from foltr_jax.engine.results_files import dataset_summary, stop_cleanly, timings
from foltr_jax.methods.fpdgd import federation
from foltr_jax.methods.fpdgd.client_plan import PERSONAL_EVALUATIONS

FLAGS = flags.FLAGS
shared_flags.define_data_flags()
shared_flags.define_checkpoint_flag()
shared_flags.define_distributed_flags()
flags.adopt_module_key_flags(shared_flags)
flags.DEFINE_string(
    "type", "2", "Non-IID type: 1 (intents) | 2 (labels) | 3 (clicks) | 4 (quantity)."
)
flags.DEFINE_list(
    "remedies", ["none"], "Cells beyond the IID baseline: none,fedprox,fedper,sharing."
)
flags.DEFINE_bool("iid", True, "Also run the type's IID baseline (--noiid to skip).")
flags.DEFINE_integer("grades_per_client", 1, "Type 2: #R, grades per client (1 or 2).")
flags.DEFINE_string("clicks", "ccm", "Type 3: ccm (3 clients) | pbm (5 clients, η 0..2).")
flags.DEFINE_string("mix", "none", "Type 4 mixed with: none | 1 (intents) | 2 (labels, #R).")
flags.DEFINE_list(
    "steps", [], "Type 4: interactions per client (default 1,3,5,7,9; mix=1: 1,3,7,9)."
)
flags.DEFINE_list(
    "prox_mu", ["0.001", "0.01", "0.1", "1", "10"], "FedProx μ values (one cell each)."
)
flags.DEFINE_string(
    "fedper_eval",
    "server",
    "FedPer's offline model: server (the server model: FedAvg of every layer, personal w2 "
    "included; public code) | clients (mean nDCG of the clients' personalised models).",
)
flags.DEFINE_float("share_fraction", 0.1, "Data sharing: fraction of training queries shared.")
flags.DEFINE_integer("warmup_interactions", 1000, "Data sharing: centralised warm-up updates.")
flags.DEFINE_list(
    "intent_files", [], "Type 1: per-intent files '<qid> <doc> <label>' (--train_path)."
)
flags.DEFINE_integer("synthetic_intents", 4, "Type 1 without files: intents of the synthetic data.")
flags.DEFINE_enum(
    "type1_iid_measure",
    "intents",
    list(noniid.IID_MEASURES),
    "Type 1's IID baseline measured under every intent's labels, as the non-IID cell "
    "(intents: the thesis's text) or on the merged labels it trains on (merged: the public "
    "code, whose IID test set is the merged judgements).",
)
flags.DEFINE_string("output_dir", "results/noniid", "Folder for results.json and table.txt.")
# FPDGD's settings; the thesis's defaults (T = 10,000, 5 runs); |C| and B follow the type.
CONFIG_FLAGS = config_flags.define(
    federation.FpdgdConfig,
    skip=shared_flags.FEDERATION_INTERNAL,
    defaults={
        "n_clients": 0,
        "local_updates": 0,
        "rounds": 10_000,
        "n_runs": 5,
        "chunk_rounds": 500,
    },
    help={
        "n_clients": "Clients |C|; 0: the type's default (see above).",
        "local_updates": "Interactions per client per round B; 0: the default (5).",
    },
)
flags.adopt_module_key_flags(config_flags)

REMEDIES = ("none", "fedprox", "fedper", "sharing")
PROGRAM = "noniid"


@dataclasses.dataclass
class Cell:
    name: str
    config: federation.FpdgdConfig
    train: data.RankingDataset
    test: data.RankingDataset
    plan: federation.ClientPlan | None
    describe: dict
    warmup: data.RankingDataset | None = None


def _parse():
    """Flag values checked; UserError '--flag: ...' otherwise."""
    err = UserError
    if FLAGS.type not in ("1", "2", "3", "4"):
        raise err(f"--type: must be 1, 2, 3 or 4, got {FLAGS.type!r}")
    kind = int(FLAGS.type)
    remedies = [r for r in FLAGS.remedies if r]
    for r in remedies:
        if r not in REMEDIES:
            raise err(f"--remedies: must be among {REMEDIES}, got {r!r}")
    if FLAGS.grades_per_client not in (1, 2):
        raise err(f"--grades_per_client: must be 1 or 2, got {FLAGS.grades_per_client}")
    if FLAGS.clicks not in ("ccm", "pbm"):
        raise err(f"--clicks: must be ccm or pbm, got {FLAGS.clicks!r}")
    if FLAGS.mix not in ("none", "1", "2"):
        raise err(f"--mix: must be none, 1 or 2, got {FLAGS.mix!r}")
    try:
        mus = [float(m) for m in FLAGS.prox_mu]
        steps = [int(s) for s in FLAGS.steps]
    except ValueError as error:
        raise err(f"--prox_mu/--steps: not a number ({error})") from None
    if any(not 0 <= m < math.inf for m in mus) or ("fedprox" in remedies and not mus):
        raise err(f"--prox_mu: values must be finite and at least 0, got {FLAGS.prox_mu}")
    if any(s < 1 for s in steps):
        raise err(f"--steps: must be at least 1, got {FLAGS.steps}")
    for name, values in (("remedies", remedies), ("prox_mu", mus), ("steps", steps)):
        refuse_repeats(values, name)
    if FLAGS.fedper_eval not in PERSONAL_EVALUATIONS:
        raise err(f"--fedper_eval: {one_of(PERSONAL_EVALUATIONS, FLAGS.fedper_eval)}")
    if "fedper" in remedies and FLAGS.ranker != "neural":
        raise err("--remedies: fedper keeps the last layer personal: it needs --ranker=neural")
    if "sharing" in remedies and not (kind == 2 or (kind == 4 and FLAGS.mix == "2")):
        raise err("--remedies: sharing applies to Type 2 data (--type=2 or --type=4 --mix=2)")
    if not 0 < FLAGS.share_fraction < 1:
        raise err(f"--share_fraction: must be in (0, 1), got {FLAGS.share_fraction}")
    if FLAGS.warmup_interactions < 1:
        raise err(f"--warmup_interactions: must be at least 1, got {FLAGS.warmup_interactions}")
    if FLAGS.synthetic_intents < 2:
        raise err(f"--synthetic_intents: must be at least 2, got {FLAGS.synthetic_intents}")
    for name in ("rounds", "n_runs", "chunk_rounds"):
        if getattr(FLAGS, name) < 1:
            raise err(f"--{name}: must be at least 1, got {getattr(FLAGS, name)}")
    for name in ("n_clients", "local_updates"):
        if getattr(FLAGS, name) < 0:
            raise err(f"--{name}: must be at least 0, got {getattr(FLAGS, name)}")
    try:
        click_models.by_name(FLAGS.click_model, 5)
    except ValueError as error:
        raise err(f"--click_model: {error}") from None
    return kind, remedies, mus, steps


def _config(n_clients: int, local_updates: int, n_grades: int) -> federation.FpdgdConfig:
    return CONFIG_FLAGS.build(n_clients=n_clients, local_updates=local_updates, n_grades=n_grades)


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


def _partition(dataset, n_clients, shared=None):
    try:
        return noniid.type2_setup(
            dataset, n_clients, FLAGS.grades_per_client, FLAGS.seed, shared=shared
        )
    except noniid.PartitionError as error:
        raise UserError(
            f"--n_clients: {error} (with --grades_per_client={FLAGS.grades_per_client}); "
            "use fewer clients or more data"
        ) from None
    except ValueError as error:
        raise UserError(f"--n_clients: {error}") from None


def _load_data(intents: bool):
    """(the multi-intent dataset or None, train, test, source) of the experiment."""
    if intents:
        mi, source = _load_intents()
        return mi, mi.merged(), mi.stacked(), source
    full_train, full_test, source = shared_flags.load_datasets()
    return None, full_train, full_test, source


def _clients(kind, mix, mi, steps):
    """(n_clients, the clients' click models of Type 3 or None), checked against the data."""
    if mi is not None:
        default_clients = mi.n_intents
    elif kind == 3:
        default_clients = len(noniid.CCM_CLIENTS if FLAGS.clicks == "ccm" else noniid.PBM_CLIENTS)
    elif kind == 4 and mix == "none":
        default_clients = len(steps)
    else:
        default_clients = 5 if FLAGS.grades_per_client == 1 else 10
    n_clients = FLAGS.n_clients or default_clients
    if mi is not None and n_clients != mi.n_intents:
        raise UserError(f"--n_clients: Type 1 has one client per intent ({mi.n_intents})")
    if kind == 4 and len(steps) != n_clients:
        raise UserError(f"--steps: needs one value per client ({n_clients}), got {steps}")
    clicks = None
    if kind == 3:
        clicks = noniid.CCM_CLIENTS if FLAGS.clicks == "ccm" else noniid.PBM_CLIENTS
        if n_clients != len(clicks):
            raise UserError(
                f"--n_clients: --clicks={FLAGS.clicks} has one client per click model "
                f"({len(clicks)})"
            )
    return n_clients, clicks


def _iid_cell(config, kind, mi, full_train, full_test, clicks) -> Cell:
    """The IID baseline."""
    if mi is not None:
        train, test, extra = noniid.type1_setup(
            mi, FLAGS.n_runs, FLAGS.seed, iid=True, iid_measure=FLAGS.type1_iid_measure
        )
        plan = federation.ClientPlan(**extra)
    elif kind == 3:
        train, test, plan = (
            full_train,
            full_test,
            federation.ClientPlan(random_click_models=clicks),
        )
    else:
        train, test, plan = full_train, full_test, None
    return Cell("iid", config, train, test, plan, {"data": "iid"})


def _noniid_data(kind, mix, mi, full_train, full_test, n_clients, clicks, steps):
    """(train, test, the ClientPlan's fields, description) of the non-IID data."""
    describe = {"data": f"type{kind}"}
    extra = {}
    if mi is not None:
        train, test, extra = noniid.type1_setup(mi, FLAGS.n_runs, FLAGS.seed, iid=False)
    elif kind == 2 or mix == "2":
        train, extra, holders = _partition(full_train, n_clients)
        test = full_test
        describe["grades"] = [list(h) for h in holders]
    else:
        train, test = full_train, full_test
    if kind == 3:
        extra["click_models"] = tuple(clicks)
        describe["click_models"] = list(clicks)
    if kind == 4:
        extra["steps"] = tuple(steps)
        describe["steps"] = list(steps)
        describe["mix"] = mix
    return train, test, extra, describe


def _remedy_cells(remedy, mus, config, train, test, extra, describe) -> list[Cell]:
    """The non-IID data's cells of one remedy: none, fedprox (a cell per μ) or fedper."""
    if remedy == "none":
        return [Cell("noniid", config, train, test, federation.ClientPlan(**extra), describe)]
    if remedy == "fedprox":
        cells = []
        names = unique_names(
            [f"fedprox_mu={mu:g}" for mu in mus], [f"fedprox_mu={mu!r}" for mu in mus], "prox_mu"
        )
        for name, mu in zip(names, mus):
            plan = federation.ClientPlan(**extra, prox_mu=mu)
            cells.append(Cell(name, config, train, test, plan, {**describe, "mu": mu}))
        return cells
    if remedy == "fedper":
        plan = federation.ClientPlan(**extra, personal=("w2",), personal_eval=FLAGS.fedper_eval)
        info = {**describe, "personal": ["w2"], "evaluation": FLAGS.fedper_eval}
        return [Cell("fedper", config, train, test, plan, info)]
    return []


def _sharing_cell(config, full_train, full_test, n_clients, steps, describe) -> Cell:
    """Data sharing: a share of the queries for everyone, the rest split as Type 2;
    ``steps``: Type 4's local steps per client, None otherwise."""
    shared, rest = noniid.share_queries(full_train, FLAGS.share_fraction, FLAGS.seed)
    s_train, s_extra, s_holders = _partition(rest, n_clients, shared=shared)
    if steps is not None:
        s_extra["steps"] = tuple(steps)
    info = {
        **describe,
        "grades": [list(h) for h in s_holders],
        "shared_queries": shared.n_queries,
        "warmup_interactions": FLAGS.warmup_interactions,
    }
    plan = federation.ClientPlan(**s_extra)
    return Cell("sharing", config, s_train, full_test, plan, info, warmup=shared)


def plan_cells(kind, remedies, mus, steps):
    """(cells, data description) of the requested experiment."""
    mix = FLAGS.mix if kind == 4 else "none"
    mi, full_train, full_test, source = _load_data(kind == 1 or mix == "1")
    n_grades = FLAGS.n_grades or click_models.n_grades_for(
        max(full_train.max_label, full_test.max_label)
    )
    B = FLAGS.local_updates or 5
    if kind == 4:
        steps = steps or ([1, 3, 7, 9] if mix == "1" else list(noniid.TYPE4_STEPS))
        B_iid = FLAGS.local_updates or round(np.mean(steps))
    n_clients, clicks = _clients(kind, mix, mi, steps)

    cells = []
    noniid_b = max(steps) if kind == 4 else B
    base = _config(n_clients, noniid_b, n_grades)
    iid_config = dataclasses.replace(base, local_updates=B_iid) if kind == 4 else base
    if FLAGS.iid:
        cells.append(_iid_cell(iid_config, kind, mi, full_train, full_test, clicks))
    # The non-IID data and its remedies.
    train, test, extra, describe = _noniid_data(
        kind, mix, mi, full_train, full_test, n_clients, clicks, steps
    )
    for remedy in ["none"] + [r for r in remedies if r != "none"]:
        if remedy == "sharing":
            type4_steps = steps if kind == 4 else None
            cells.append(
                _sharing_cell(base, full_train, full_test, n_clients, type4_steps, describe)
            )
        else:
            cell_extra = extra
            if remedy == "none" and "fedprox" in remedies:
                # FedProx at mu = 0 is FedAvg, bit for bit (the pull mu(theta - theta_global)
                # is 0): the non-IID cell and the FedProx cells are one compiled program,
                # mu a traced value.
                cell_extra = {**extra, "prox_mu": 0.0}
            cells += _remedy_cells(remedy, mus, base, train, test, cell_extra, describe)
    return cells, {
        **source,
        "train": dataset_summary(full_train),
        "test": dataset_summary(full_test),
        "n_grades": n_grades,
    }


def cell_fingerprint(cell: Cell, spec, arrays) -> str:
    """Everything the cell's results follow from: its name, settings and data (the built
    spec and arrays) and the warm-up's shared queries."""
    warmup = None
    if cell.warmup is not None:
        w = cell.warmup
        warmup = (w.features, w.labels, w.query_offsets, w.query_lengths)
    static = (cell.name, spec, cell.describe, cell.warmup is not None, FLAGS.warmup_interactions)
    return loop.fingerprint(static, arrays, warmup)


def cell_labels(name: str, kind: int, config) -> dict:
    """How reports place a cell: a group per dataset, non-IID type and what sets its
    figure apart in the thesis (ch. 4): #R and |C| (Type 2), the mix (Type 4), the
    ranker and B (``config``: the first cell's), so every group has its own IID baseline
    and non-IID cell, as in Figures 4.3-4.9; panels are the click model (Type 3: the
    clients' CCM or PBM)."""
    parts = [f"non-IID type {kind}"]
    if kind == 2:
        parts.append(f"#R={FLAGS.grades_per_client}, |C|={config.n_clients}")
    if kind == 4 and FLAGS.mix not in (None, "none"):
        parts.append(f"mixed with type {FLAGS.mix}")
    parts.append(f"{config.ranker} ranker")
    if kind != 4:
        parts.append(f"B={config.local_updates}")
    panel = f"{str(FLAGS.clicks).upper()} clients" if kind == 3 else config.click_model
    return results.labels(name, panel, group=", ".join(parts), config=False)


def run_cell(cell: Cell, output: Output, finished: FinishedParts, labels: dict) -> dict:
    """The cell's results (``labels``: its cell_labels): saved by an earlier, interrupted
    invocation, or computed now (resuming from the cell's checkpoint) and saved in
    ``finished``, after which its checkpoints go."""
    start = time.perf_counter()
    try:
        spec, arrays = federation.build(cell.config, cell.train, cell.test, clients=cell.plan)
    except federation.ConfigError as error:
        raise user_error(error) from None
    check_same_everywhere((cell.name, spec, cell.describe), arrays)
    return finished.reuse(
        cell.name,
        lambda: cell_fingerprint(cell, spec, arrays),
        lambda: compute_cell(cell, spec, arrays, output, labels, start),
        # a saved cell of an older results format has no "curves": computed again
        read=lambda saved: saved if isinstance(saved, dict) and "curves" in saved else None,
        checkpoints=(output.checkpoint(f"{cell.name}-warmup"), output.checkpoint(cell.name)),
        label=cell.name,
    )


def compute_cell(cell: Cell, spec, arrays, output: Output, labels: dict, start: float) -> dict:
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
                initial, _ = federation.warm_up(
                    cell.config,
                    cell.warmup,
                    cell.test,
                    FLAGS.warmup_interactions,
                    checkpoint=output.checkpoint(f"{cell.name}-warmup"),
                )
            except federation.ConfigError as error:
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
    final = result.offline_ndcg[:, -1]
    performance = result.online_performance

    def sd(x):
        return float(np.std(x, ddof=1)) if len(x) > 1 else 0.0

    written = results.cell(
        cell.name,
        setting=cell.describe,
        labels=labels,
        evaluated_rounds=results.evaluated_rounds(cell.config, result),
        curves={
            "offline_ndcg": result.offline_ndcg.tolist(),
            "online_ndcg": result.online_ndcg.tolist(),
        },
        per_run={
            "initial_offline_ndcg": result.initial_offline_ndcg.tolist(),
            "final_offline_ndcg": final.tolist(),
            "online_performance": performance.tolist(),
        },
        summary={
            "final_offline_ndcg_mean": float(final.mean()),
            "final_offline_ndcg_sd": sd(final),
            "online_performance_mean": float(performance.mean()),
            "online_performance_sd": sd(performance),
        },
        n_clients=cell.config.n_clients,
        local_updates=cell.config.local_updates,
        interactions=result.interactions,
        seconds=result.run_seconds,
        compile_seconds=result.compile_seconds,
        wall_seconds=time.perf_counter() - start,
        timings=timings(log),
    )
    return written


def format_table(kind: int, cells) -> str:
    lines = [f"type {kind}: {'cell':<18}{'final offline nDCG@10':>26}{'online performance':>24}"]
    for name, c in ((c["name"], c["summary"]) for c in cells):
        lines.append(
            f"        {name:<18}{c['final_offline_ndcg_mean']:>16.4f} ± "
            f"{c['final_offline_ndcg_sd']:.4f}{c['online_performance_mean']:>14.2f} ± "
            f"{c['online_performance_sd']:.2f}"
        )
    return "\n".join(lines) + "\n"


def _checked_cells(kind, remedies, mus, steps) -> tuple:
    """``plan_cells``, with every cell's settings checked before any run."""
    cells, source = plan_cells(kind, remedies, mus, steps)
    for cell in cells:  # refuse bad plans before any run
        try:
            federation.build(cell.config, cell.train, cell.test, clients=cell.plan)
        except federation.ConfigError as error:
            raise user_error(error) from None
    return cells, source


def run() -> program.Done:
    kind, remedies, mus, steps = _parse()
    output = on_every_process(claim_output, ("results.json", "table.txt"))
    finished = output.finished_parts(".cells")  # a planted link refused before any work
    cells, source = on_every_process(_checked_cells, kind, remedies, mus, steps)
    if is_writer():
        print(
            f"{PROGRAM}: type {kind}, {len(cells)} cell(s) x {FLAGS.n_runs} run(s) x "
            f"{FLAGS.rounds} rounds",
            file=sys.stderr,
        )
    results_cells = [
        run_cell(cell, output, finished, cell_labels(cell.name, kind, cells[0].config))
        for cell in cells
    ]
    written = results.document(
        f"fpdgd/noniid/type{kind}",
        dataclasses.asdict(cells[0].config),
        source,
        results_cells,
        noniid={
            "type": kind,
            "remedies": remedies,
            "grades_per_client": FLAGS.grades_per_client,
            "clicks": FLAGS.clicks,
            "mix": FLAGS.mix,
            "steps": steps,
            "prox_mu": mus,
            "fedper_eval": FLAGS.fedper_eval,
            "type1_iid_measure": FLAGS.type1_iid_measure,
            "share_fraction": FLAGS.share_fraction,
            "warmup_interactions": FLAGS.warmup_interactions,
        },
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
