r"""Poisoning attacks and robust aggregation in FPDGD (Wang et al., ICTIR 2023).

The paper's setup: n = 10 clients, m ∈ {1, 2, 3, 4} malicious (the first m),
B = 5, T = 10,000 rounds, three benign click models.  Every cell of the grid runs,
with --n_runs repetitions each, in ONE compiled program.

  python -m experiments.poisoning --fold_dir=MSLR-WEB10K/Fold1 --n_runs=5
  python -m experiments.poisoning --train_path=train.txt --test_path=test.txt \
      --rounds=500 --grid=full --ranker=neural

--grid=paper: no attack (FedAvg, and every defence assuming m attackers), data
poisoning against every defence, LIE without defence, Fang's Krum attack (full and
partial knowledge) against Krum and Multi-Krum, Fang's Trimmed-Mean attack against
Trimmed Mean and Median.  --grid=full: every attack against every defence.

--aggregators and --attacks choose the grid's rules and attacks (a --plugin's names too):

  python -m experiments.poisoning --plugin=my_rules.py --grid=full \
      --aggregators=fedavg,krum,closest_half --attacks=none,data_poisoning,lie

runs every chosen attack against every chosen rule (--grid=paper: the paper's cells among
them; a rule of yours there meets no attack and data poisoning, as every defence does).
Every grid keeps each click model's no-attack FedAvg cell, the baseline.

Writes <output_dir>/results.json (the fpdgd results format, one entry per cell) and
<output_dir>/table.txt (final offline nDCG@10, mean ± sd over runs).
"""

from __future__ import annotations

import dataclasses
import itertools
import sys

from absl import app, flags

from experiments.lib import config_flags, program, results, series, shared_flags, words
from experiments.lib.cli import ProgressLog, UserError
from experiments.lib.config_flags import user_error
from experiments.lib.distributed import is_writer, on_every_process
from experiments.lib.output import claim_output, refuse_repeats, stop_cleanly
from foltr_jax.core import click_models
from foltr_jax.core.registry import one_of
from foltr_jax.engine import results_files
from foltr_jax.engine.config import ATTACKS, attack_names
from foltr_jax.methods.fpdgd import federation
from foltr_jax.server import aggregators

FLAGS = flags.FLAGS
shared_flags.define_data_flags()
CONFIG_FLAGS = shared_flags.define_federation_flags(shared_flags.TEN_CLIENT_DEFAULTS)
shared_flags.define_checkpoint_flag()
flags.adopt_module_key_flags(shared_flags)  # --help lists the shared flags too
flags.adopt_module_key_flags(config_flags)
flags.DEFINE_string("output_dir", "results/poisoning", "Folder for results.json and table.txt.")
flags.DEFINE_enum("grid", "paper", ["paper", "full"], "Which cells to run (see the module doc).")
flags.DEFINE_list("malicious_counts", ["1", "2", "3", "4"], "Values of m (malicious clients).")
flags.DEFINE_list(
    "click_models", ["perfect", "navigational", "informational"], "Benign clients' click models."
)
flags.DEFINE_list(
    "aggregators",
    [],
    "The aggregation rules (defences) of the grid, e.g. fedavg,krum,my_rule; empty: every "
    "built-in one.",
)
flags.DEFINE_list(
    "attacks", [], "The attacks of the grid, e.g. none,lie; empty: every built-in one."
)

DEFENCES = aggregators.BUILT_IN[1:]
TARGETS = {
    "fang_krum_full": ("krum", "multi_krum"),
    "fang_krum_partial": ("krum", "multi_krum"),
    "fang_trimmed_mean_full": ("trimmed_mean", "median"),
    "fang_trimmed_mean_partial": ("trimmed_mean", "median"),
}


def grid_settings(
    grid: str, click_models, counts, rules=(), attacks=()
) -> list[federation.Setting]:
    """The cells of the paper's grid, or of every attack against every defence, among the
    chosen ``rules`` and ``attacks`` (empty: every built-in one); each click model's
    no-attack FedAvg cell always."""
    rules = tuple(rules) or aggregators.BUILT_IN
    attacks = tuple(attacks) or ATTACKS
    cells = []
    for click in click_models:
        cells.append(federation.Setting(click_model=click))  # no attack, no defence
        for m in counts:
            if grid == "full":
                for attack, aggregator in itertools.product(attacks, rules):
                    if attack == "none" and aggregator == "fedavg":
                        continue
                    cells.append(federation.Setting(click, m, attack, aggregator))
                continue
            found = [("none", d) for d in rules if d != "fedavg"]
            found += [("data_poisoning", d) for d in rules]
            found += [("lie", "fedavg")] if "fedavg" in rules else []
            for attack, defences in TARGETS.items():
                found += [(attack, d) for d in defences if d in rules]
            cells += [federation.Setting(click, m, a, d) for a, d in found if a in attacks]
    return cells


def chosen(flag: str, names: tuple) -> list:
    """The values of --aggregators or --attacks, each a registered name (UserError naming
    the flag, with the nearest name, otherwise) and named once."""
    values = getattr(FLAGS, flag)
    refuse_repeats(values, flag)
    for value in values:
        if value not in names:
            raise UserError(f"--{flag}: {one_of(names, value)}")
    return list(values)


def run() -> program.Done:
    try:
        counts = [int(m) for m in FLAGS.malicious_counts]
    except ValueError:
        raise UserError(
            f"--malicious_counts must be integers, got {FLAGS.malicious_counts}"
        ) from None
    refuse_repeats(counts, "malicious_counts")
    refuse_repeats(FLAGS.click_models, "click_models", same=click_models.identity)
    config = shared_flags.federation_config(CONFIG_FLAGS)
    rules = chosen("aggregators", aggregators.names())
    attacks = chosen("attacks", attack_names())
    settings = grid_settings(FLAGS.grid, FLAGS.click_models, counts, rules, attacks)
    for setting in settings:
        try:
            setting.validate(config.n_clients)
        except federation.ConfigError as error:
            rename = {"n_malicious": "malicious_counts", "click_model": "click_models"}
            raise user_error(error, rename) from None
    outputs = ("results.json", "table.txt")
    output = on_every_process(claim_output, outputs)  # before any work
    train, test, source = on_every_process(shared_flags.load_datasets)
    spec, arrays = on_every_process(shared_flags.build, config, train, test, settings)
    writer = is_writer()  # process 0 of a --distributed run prints and writes
    if writer:
        print(
            f"poisoning: {len(settings)} settings x {config.n_runs} run(s) x {config.rounds} "
            f"rounds x {config.n_clients} clients x {config.local_updates} interactions in "
            "one program",
            file=sys.stderr,
        )
    log = ProgressLog("poisoning")
    names = [f"{s.click_model} m={s.n_malicious} {s.attack}/{s.aggregator}" for s in settings]
    with stop_cleanly(names, config.n_runs):
        result = federation.run(
            spec, arrays, progress=log if writer else None, checkpoint=output.checkpoint()
        )
    written = results_of(config, settings, result, train, test, source, log)
    path = output.write_json("results.json", written)
    table = format_table(written["cells"], heading(config, written["data"]))
    output.write_text("table.txt", table)
    return program.Done(
        output,
        f"{table}\n{len(settings)} settings in {result.run_seconds:.1f} s "
        f"(+{result.compile_seconds:.1f} s compile); results in {path}",
    )


def results_of(config, settings, result, train, test, source, log) -> dict:
    """The results file: one cell per setting, the program's timings."""
    n = len(settings)
    offline = result.per_setting(result.offline_ndcg, n)
    online = result.per_setting(result.online_ndcg, n)
    performance = result.per_setting(result.online_performance, n)
    method = f"fpdgd/poisoning/{FLAGS.grid}"
    main = {"aggregator": "aggregator", "attack": "attack", "m": "n_malicious"}
    cells = []
    for i, setting in enumerate(settings):
        final = offline[i, :, -1]
        values = dataclasses.asdict(setting)
        fields = {short: values[name] for short, name in main.items()}
        rest = set(main.values()) | {"click_model"}
        fields.update((k, v) for k, v in values.items() if k not in rest)
        m = setting.n_malicious
        cells.append(
            results_files.cell(
                f"{setting.click_model} m={m} {setting.attack}/{setting.aggregator}",
                setting=values,
                labels=results_files.labels(
                    method,
                    setting.click_model,
                    group="poisoning",
                    figure=f"m={m}" if m else None,  # a figure per m; no-attack cells in each
                    fields=fields,
                    always=tuple(main),
                ),
                evaluated_rounds=results_files.evaluated_rounds(config, result),
                curves={"offline_ndcg": offline[i].tolist(), "online_ndcg": online[i].tolist()},
                per_run={
                    "final_offline_ndcg": final.tolist(),
                    "online_performance": performance[i].tolist(),
                },
                summary={
                    "final_offline_ndcg_mean": float(final.mean()),
                    "final_offline_ndcg_sd": float(final.std(ddof=1)) if len(final) > 1 else 0.0,
                },
            )
        )
    return results.document(
        method,
        dataclasses.asdict(config),
        results_files.data_summary(source, train, test),
        cells,
        **results_files.totals(result, log),
    )


def heading(config, data: dict) -> str:
    """The table's first line: its data, rounds and runs, and the federation every cell has."""
    return (
        f"# {series.dataset_name(data)}; T = {config.rounds:,} rounds, {config.n_runs} run(s) a "
        f"cell (mean ± sd); |C| = {config.n_clients}, B = {config.local_updates}, "
        f"{words.field('epsilon', config.epsilon)}"
        + (f", {words.field('sensitivity', config.sensitivity, {'epsilon': config.epsilon})}"
           if config.epsilon else "")
    )  # fmt: skip


def format_table(cells, first: str = "") -> str:
    lines = [first] if first else []
    lines.append(f"{'click model':<14}{'m':>3}  {'attack':<26}{'aggregator':<14}"
                 "final offline nDCG@10")  # fmt: skip
    for cell in cells:
        s, summary = cell["setting"], cell["summary"]
        lines.append(
            f"{s['click_model']:<14}{s['n_malicious']:>3}  {s['attack']:<26}{s['aggregator']:<14}"
            f"{summary['final_offline_ndcg_mean']:.4f} ± {summary['final_offline_ndcg_sd']:.4f}"
        )
    return "\n".join(lines) + "\n"


main = program.main("poisoning", run)

if __name__ == "__main__":
    app.run(main, flags_parser=program.parse_flags)
