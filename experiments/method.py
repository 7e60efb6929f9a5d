r"""Any registered method by name, its settings as flags.

    python -m experiments.method --method=foltr_es --rounds=50
    python -m experiments.method --plugin=examples/federated_dbgd.py --method=dbgd \
            --n_clients=50 --rounds=20 --train_path=train.txt --test_path=test.txt
    python -m experiments.method --plugin=examples/federated_dbgd.py --method=dbgd --help

A method is registered with ``foltr_jax.engine.register_method(name, config class, run,
summary)`` (the built-in fpdgd, foltr_es and fedips are; a ``--plugin`` adds its own).
The method's config class gives the flags, one per field, as for every binary
(``experiments.config_flags``): ``--method`` and ``--plugin`` are read from the command
line first, as absl reads them (one dash or two, ``=V`` or a separate value, in the
``--flagfile`` files too), so ``--help`` lists the chosen method's settings; a run in which
absl then reads them otherwise is refused in one line, never run as another method.  Writes
<output_dir>/results.json with the method's curves (the results format of every binary).
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
from absl import app, flags

from experiments.lib import cli, config_flags, plugins, program, shared_flags
from experiments.lib.cli import ProgressLog
from experiments.lib.output import claim_output, stop_cleanly
from experiments.lib.results import results_file
from foltr_jax import engine
from foltr_jax.core.registry import did_you_mean
from foltr_jax.engine.results_files import curve_summary

FLAGS = flags.FLAGS
PROGRAM = "method"


def _chosen_method() -> tuple:
    """(name, entry) of --method (default fpdgd), the plugins on the command line imported
    first; a bad plugin or an unknown name ends in one line."""
    try:
        EARLY_PLUGINS[:] = program.early_values(sys.argv, "plugin")
        plugins.load(EARLY_PLUGINS)
        name = (program.early_values(sys.argv, "method") or ["fpdgd"])[-1]
    except cli.UserError as error:
        cli.fail(PROGRAM, str(error))
    if name not in engine.METHODS:
        cli.fail(PROGRAM, f"--method: unknown method {name!r}"
                 f"{did_you_mean(name, engine.METHODS.names())}; one of {engine.METHODS.names()}"
                 " (a --plugin registers more)")  # fmt: skip
    return name, engine.METHODS.get(name)


EARLY_PLUGINS: list = []  # the --plugin values imported to choose the method
METHOD, ENTRY = _chosen_method()
shared_flags.define_data_flags()
shared_flags.define_checkpoint_flag()
shared_flags.define_distributed_flags()
flags.DEFINE_string("method", "fpdgd", f"The method to run: {engine.METHODS.help_text()}.")
flags.DEFINE_string("output_dir", f"results/{METHOD}", "Folder for results.json.")


def _help_of_every_field(config_class, internal) -> dict:
    """A help text for the fields that have none (a user's config): its class and field."""
    from foltr_jax.engine.config import setting_help

    found = {}
    for field in dataclasses.fields(config_class):
        if field.name in internal:
            continue
        try:
            setting_help(config_class, field.name)
        except KeyError:
            found[field.name] = f"{config_class.__name__}.{field.name} ({METHOD})"
    return found


def _config_flags() -> config_flags.ConfigFlags:
    """The chosen method's settings as flags; a config class that cannot give them (a
    field without a default, of a type with no flag, named as a flag of this binary) ends
    in one line naming the method and the field."""
    try:
        if not dataclasses.is_dataclass(ENTRY.config):
            raise TypeError(f"{ENTRY.config!r} is not a dataclass")
        helps = _help_of_every_field(ENTRY.config, ENTRY.internal)
        return config_flags.define(ENTRY.config, skip=ENTRY.internal, help=helps)
    except (TypeError, KeyError, ValueError, flags.Error) as error:
        message = str(error).strip("'\"")
        cli.fail(PROGRAM, f"--method: {METHOD}: its config cannot be flags: {message}")


CONFIG_FLAGS = _config_flags()
flags.adopt_module_key_flags(shared_flags)
flags.adopt_module_key_flags(config_flags)


# Settings many methods share, checked for a method whose config has no validate().
AT_LEAST_ONE = ("n_clients", "local_updates", "rounds", "n_runs", "chunk_rounds", "eval_every",
                "top_k", "n_devices")  # fmt: skip
AT_LEAST_ZERO = ("client_chunk", "n_malicious")
REGISTERED = {"click_model": "click_models", "aggregator": "aggregators", "attack": "attacks",
              "ranker": "rankers"}  # fmt: skip


def check_shared_settings(config) -> None:
    """ConfigError for a shared setting out of range or an unregistered name: the checks
    a config's own validate() would make, for a user's config that has none."""
    import foltr_jax

    for name in AT_LEAST_ONE + AT_LEAST_ZERO:
        least = 1 if name in AT_LEAST_ONE else 0
        value = getattr(config, name, least)
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise engine.ConfigError(name, f"must be an integer of at least {least}, got {value}")
    n_clients, chunk = getattr(config, "n_clients", 1), getattr(config, "client_chunk", 0)
    if chunk and n_clients % chunk:
        raise engine.ConfigError(
            "client_chunk", f"must divide the {n_clients} clients, got {chunk}"
        )
    if getattr(config, "n_malicious", 0) > n_clients:
        raise engine.ConfigError("n_malicious", f"must be at most the {n_clients} clients")
    for name, module in REGISTERED.items():
        value = getattr(config, name, None)
        if value is None or name == "attack" and value == "none":
            continue
        registry = getattr(foltr_jax, module)
        if name == "click_model":
            try:
                registry.by_name(value, 5)
            except ValueError as error:
                raise engine.ConfigError(name, str(error)) from None
        elif value not in registry.names():
            raise engine.ConfigError(
                name,
                f"unknown {name} {value!r}{did_you_mean(value, registry.names())}; one of "
                f"{registry.names()}",
            )


def _described(value) -> str:
    """What a returned value is, for an error line: its type, and its shape and dtype."""
    try:
        array = np.asarray(value)
    except Exception:  # noqa: BLE001  (anything a user's code returns)
        return type(value).__name__
    if value is None or array.dtype.kind == "O":
        return type(value).__name__ if value is None else f"{type(value).__name__} of objects"
    return f"{type(value).__name__} of shape {list(array.shape)} and dtype {array.dtype}"


def check_method_result(result) -> None:
    """UserError naming the method and what it returned when its run's result is not a
    RunResult of [runs, columns] numeric curves (offline_ndcg among them) with an initial
    value per run for each offline curve: a user's method is checked before its numbers
    are written, never a traceback."""
    where = f"--method: {METHOD}: its run returned"
    if not isinstance(result, engine.RunResult):
        raise cli.UserError(f"{where} {_described(result)}, not a foltr_jax.engine.RunResult")
    curves = result.curves
    if not isinstance(curves, dict) or "offline_ndcg" not in curves:
        raise cli.UserError(f"{where} no 'offline_ndcg' curve (the headline metric)")
    rows = None
    for name, values in curves.items():
        array = None if values is None else np.asarray(values)
        if array is None or array.dtype.kind not in "biuf" or array.ndim != 2:
            raise cli.UserError(
                f"{where} curve {name!r} as {_described(values)}; expected a [runs, rounds] "
                "array of numbers"
            )
        if rows is not None and array.shape[0] != rows:
            raise cli.UserError(f"{where} curve {name!r} with {array.shape[0]} runs, not {rows}")
        rows = array.shape[0]
    for name in result.offline:
        initial = result.initial.get(name) if isinstance(result.initial, dict) else None
        array = None if initial is None else np.asarray(initial)
        if array is None or array.dtype.kind not in "biuf" or array.shape != (rows,):
            raise cli.UserError(
                f"{where} initial {name!r} as {_described(initial)}; expected one number per "
                f"run ({rows})"
            )


def check_read_as_chosen() -> None:
    """UserError when absl read --method or --plugin otherwise than they were read to
    choose the method's flags (a spelling absl reads and ``early_values`` does not): the
    run would be another method's, under the name of the one asked for."""
    if FLAGS.method != METHOD:
        raise cli.UserError(
            f"--method: absl read {FLAGS.method!r} but the flags were chosen for {METHOD!r}; "
            "write it --method=NAME on the command line or in a --flagfile"
        )
    if list(FLAGS.plugin) != EARLY_PLUGINS:
        raise cli.UserError(
            f"--plugin: absl read {list(FLAGS.plugin)} but {EARLY_PLUGINS} were imported to choose "
            "the method; write each --plugin=FILE on the command line or in a --flagfile"
        )


def run() -> program.Done:
    check_read_as_chosen()
    builtin = hasattr(ENTRY.config, "validate")
    config = CONFIG_FLAGS.build(validate=builtin)
    if not builtin:
        try:
            check_shared_settings(config)
        except engine.ConfigError as error:
            raise CONFIG_FLAGS.error(error) from None
    output = claim_output()  # before any work
    train, test, source = shared_flags.load_datasets()
    print(f"{METHOD}: {ENTRY.summary}; {train.n_queries} training queries", file=sys.stderr)
    log = ProgressLog(METHOD)
    try:
        with stop_cleanly():
            result = ENTRY.run(config, train, test, progress=log, checkpoint=output.checkpoint())
    except engine.ConfigError as error:
        raise CONFIG_FLAGS.error(error) from None
    except Exception as error:
        if builtin:
            raise
        raise cli.UserError(f"--method: {METHOD}: {plugins.where_it_failed(error)}") from None
    check_method_result(result)
    results = results_file(METHOD, config, result, train, test, source, log=log)
    path = output.write_json("results.json", results)
    return program.Done(output, f"{curve_summary(results)}; results in {path}")


main = program.main(PROGRAM, run, distributed=False, what="experiments.method")

if __name__ == "__main__":
    app.run(main, flags_parser=program.parse_flags)
