r"""FPDGD (Wang et al., ICTIR 2021) or its centralised PDGD baseline.

    python -m experiments.fpdgd                       # synthetic default dataset
    python -m experiments.fpdgd --fold_dir=MSLR-WEB10K/Fold1 --n_runs=5
    python -m experiments.fpdgd --train_path=train.txt --test_path=test.txt \
            --n_clients=10 --local_updates=5 --rounds=100 --click_model=perfect

Writes <output_dir>/results.json: the config, per-round offline nDCG@10 and MRR
of the global model on the test split, per-round online nDCG@10 and MaxRR of the
displayed lists, the discounted online performance, and timings.

A grid of click models × (ε, Δ) pairs runs as ONE compiled program:

    python -m experiments.fpdgd --click_models=perfect,navigational,informational \
            --privacy_grid=1.2:3,2.3:3,4.5:5,10:5

writes one results.json per cell in <output_dir>/<click model>_eps<ε>_delta<Δ>/ and
lists them in <output_dir>/grid.json (written last: the grid is complete).
"""

from __future__ import annotations

import dataclasses
import sys

from absl import app, flags

from experiments.lib import config_flags, program, shared_flags
from experiments.lib.cli import ProgressLog, UserError
from experiments.lib.distributed import is_writer, on_every_process
from experiments.lib.output import claim_output, refuse_repeats, stop_cleanly, unique_names
from experiments.lib.results import results_file
from foltr_jax.core import click_models
from foltr_jax.engine.results_files import curve_summary
from foltr_jax.methods.fpdgd import federation

FLAGS = flags.FLAGS
shared_flags.define_data_flags()
CONFIG_FLAGS = shared_flags.define_federation_flags()
shared_flags.define_checkpoint_flag()
flags.adopt_module_key_flags(shared_flags)  # --help lists the shared flags too
flags.adopt_module_key_flags(config_flags)
flags.DEFINE_string("output_dir", "results/fpdgd", "Folder for results.json.")
flags.DEFINE_list(
    "click_models", [], "A grid of click models run in one program (instead of --click_model)."
)
flags.DEFINE_list(
    "privacy_grid",
    [],
    "A grid of ε:Δ pairs run in one program, e.g. 1.2:3,4.5:5 ('none' = no privacy).",
)


def grid_settings(config: federation.FpdgdConfig) -> list | None:
    """The cells of --click_models × --privacy_grid, or None without a grid."""
    if not FLAGS.click_models and not FLAGS.privacy_grid:
        return None
    refuse_repeats(FLAGS.click_models, "click_models", same=click_models.identity)
    pairs = []
    for item in FLAGS.privacy_grid or [f"{config.epsilon}:{config.sensitivity}"]:
        if item == "none":
            pairs.append((0.0, 0.0))
            continue
        try:
            epsilon, delta = (float(x) for x in item.split(":"))
        except ValueError:
            raise UserError(
                f"--privacy_grid: expected ε:Δ pairs such as 4.5:5, got {item!r}"
            ) from None
        pairs.append((epsilon, delta))
    settings = []
    for click in FLAGS.click_models or [config.click_model]:
        for epsilon, delta in pairs:
            setting = dataclasses.replace(
                config.as_setting(), click_model=click, epsilon=epsilon, sensitivity=delta
            )
            try:
                setting.validate(config.n_clients)
            except federation.ConfigError as error:
                flag = {"click_model": "click_models"}.get(error.field, "privacy_grid")
                raise UserError(f"--{flag}: {error.message}") from None
            settings.append(setting)
    return settings


def cell_name(setting: federation.Setting, exact: bool = False) -> str:
    if exact:  # repr tells every two floats apart
        return f"{setting.click_model}_eps{setting.epsilon!r}_delta{setting.sensitivity!r}"
    return f"{setting.click_model}_eps{setting.epsilon:g}_delta{setting.sensitivity:g}"


def cell_names(settings) -> list:
    """The grid's folder names, unique by construction (``unique_names``): cells
    whose ε or Δ print alike with 6 digits get their exact values."""
    flag = (
        "click_models"
        if len(set(FLAGS.click_models)) < len(FLAGS.click_models)
        else ("privacy_grid")
    )
    return unique_names(
        [cell_name(s) for s in settings], [cell_name(s, exact=True) for s in settings], flag
    )


def run_experiment(config, settings, checkpoint: str | None = None) -> list:
    """[(cell folder or None, results)]: one entry, or one per grid cell."""
    train, test, source = on_every_process(shared_flags.load_datasets)
    spec, arrays = on_every_process(shared_flags.build, config, train, test, settings)
    method = f"centralised_pdgd/{FLAGS.centralised_form}" if FLAGS.centralised else "fpdgd"
    what = (
        f"{len(settings)} settings in one program" if settings else f"{config.click_model} clicks"
    )
    writer = is_writer()  # process 0 of a --distributed run prints and writes
    if writer:
        print(
            f"{method}: {config.n_runs} run(s) x {config.rounds} rounds x {config.n_clients} "
            f"clients x {config.local_updates} interactions, {config.ranker} ranker, "
            f"{what}, {train.n_queries} training queries",
            file=sys.stderr,
        )
    log = ProgressLog(method)
    names = cell_names(settings) if settings else []
    with stop_cleanly(names, config.n_runs):
        result = federation.run(
            spec, arrays, progress=log if writer else None, checkpoint=checkpoint
        )
    if not settings:
        return [(None, results_of(method, config, result, slice(None), train, test, source, log))]
    cells = []
    for i, setting in enumerate(settings):
        cell_config = dataclasses.replace(
            config,
            click_model=setting.click_model,
            epsilon=setting.epsilon,
            sensitivity=setting.sensitivity,
        )
        slots = slice(i * config.n_runs, (i + 1) * config.n_runs)
        cells.append(
            (
                names[i],
                results_of(method, cell_config, result, slots, train, test, source, log),
            )
        )
    return cells


def results_of(method, config, result, slots, train, test, source, log) -> dict:
    """The results file of the runs in ``slots`` (one setting's repetitions)."""
    results = results_file(method, config, result, train, test, source, slots, log)
    runs = len(results["cells"][0]["per_run"]["final_offline_ndcg"])
    results["program_cells"] = len(result.offline_ndcg) // runs
    return results


def run() -> program.Done:
    config = shared_flags.federation_config(CONFIG_FLAGS)
    settings = grid_settings(config)
    names = cell_names(settings) if settings else []
    files = [f"{n}/results.json" for n in names] + ["grid.json"] if names else ["results.json"]
    output = on_every_process(claim_output, files)  # before any work
    cells = run_experiment(config, settings, output.checkpoint())
    for name, results in cells:
        path = output.write_json(f"{name}/results.json" if name else "results.json", results)
        if is_writer():
            print((f"{name}: " if name else "") + summary(results) + f"; results in {path}")
    if names:
        output.write_json("grid.json", {"cells": names})
    return program.Done(output)


def summary(results: dict) -> str:
    """One line: the mean offline nDCG@10 curve at a few rounds, and the speed."""
    return f"{curve_summary(results)}; {results['interactions_per_second']:,.0f} interactions/s"


main = program.main("fpdgd", run)

if __name__ == "__main__":
    app.run(main, flags_parser=program.parse_flags)
