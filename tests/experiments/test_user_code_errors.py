"""User code that returns the wrong shape or type ends the run in one line naming it and
what was expected, never a traceback, and writes nothing."""

import pytest

from tests import binaries

PLUGIN = """
import jax.numpy as jnp

import foltr_jax


@foltr_jax.aggregators.register("all_rows", "returns every client's model")
def all_rows(models, weights, n_malicious):
    return models


@foltr_jax.aggregators.register("integer_mean", "the mean, in int32")
def integer_mean(models, weights, n_malicious):
    return jnp.mean(models, axis=0).astype(jnp.int32)


@foltr_jax.aggregators.register("nothing", "returns None")
def nothing(models, weights, n_malicious):
    return None
"""


@pytest.fixture(scope="module")
def bad_rules_plugin(tmp_path_factory):
    path = tmp_path_factory.mktemp("plugin") / "bad_rules.py"
    path.write_text(PLUGIN)
    return path


@pytest.mark.parametrize(
    "rule, got",
    [
        ("all_rows", "returned shape (4, 6) and dtype float32"),
        ("integer_mean", "returned shape (6,) and dtype int32"),
        ("nothing", "returned NoneType"),
    ],
)
def test_an_aggregator_of_the_wrong_shape_or_dtype_is_one_line(
    tmp_path, bad_rules_plugin, rule, got
):
    out = tmp_path / "out"
    done = binaries.call(
        "fpdgd", f"--plugin={bad_rules_plugin}", f"--aggregator={rule}", "--synthetic_queries=20",
        "--synthetic_features=6", "--n_clients=4", "--rounds=2", "--nocheckpoint",
        f"--output_dir={out}", cache_dir=tmp_path / "cache",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-3000:]
    line = done.stderr.strip().splitlines()[-1]
    assert line == (
        f"fpdgd: error: aggregator {rule!r} {got}; expected one model of shape (6,) and dtype "
        "float32 (the rule maps the client models [n, d] to one [d])"
    ), line
    assert "Traceback" not in done.stderr
    assert not (out / "results.json").exists()


def _results(curve):
    from experiments.lib import results
    from foltr_jax.engine import results_files

    cell = results_files.cell(
        "perfect",
        labels=results_files.labels("fpdgd", "perfect"),
        evaluated_rounds=[1, 2, 3],
        curves={"offline_ndcg": [curve], "online_ndcg": [curve]},
        per_run={"initial_offline_ndcg": [0.1], "final_offline_ndcg": [curve[-1]]},
    )
    return results.document("fpdgd", {"rounds": 3}, {"synthetic": {}}, [cell])


def test_a_report_of_unreadable_or_undrawable_results_is_one_line(tmp_path):
    import json

    from experiments.lib import series

    path = tmp_path / "digits" / "results.json"
    path.parent.mkdir()
    path.write_text(json.dumps(_results([0.1, 0.2, 0.3])).replace("0.3", "1" * 5000, 1))
    with pytest.raises(series.ReportError, match=r"results.json: not valid JSON: .*digits"):
        series.read_results(path, "x")
    listed = _results([0.1, 0.2, 0.3])
    listed["cells"][0]["labels"]["fields"] = ["a", "b"]
    path.write_text(json.dumps(listed))
    with pytest.raises(series.ReportError, match=r"labels.fields: not an object"):
        series.read_results(path, "x")

    extreme = tmp_path / "extreme" / "run"
    extreme.mkdir(parents=True)
    (extreme / "results.json").write_text(json.dumps(_results([-1e308, 1e308, -1e308])))
    done = binaries.call("report", f"--results_dir={tmp_path / 'extreme'}")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("report: error: ") and "cannot be drawn" in line, line


@pytest.mark.parametrize(
    "module, args, message",
    [
        ("benchmark", ("--suite", "--suite_clients=0"), "--suite_clients: client counts must be"),
        ("profile_round", ("--reps=0",), "--reps: must be at least 1, got 0"),
        ("profile_round", ("--round_reps=0",), "--round_reps: must be at least 1, got 0"),
        ("profile_round", ("--peak_gbps=0",), "--peak_gbps: must be a positive number"),
        ("profile_round", ("--trace_dir=/proc/x",), "--trace_dir: cannot write into /proc/x"),
    ],
)
def test_tools_refuse_what_they_cannot_honour_before_compiling(tmp_path, module, args, message):
    done = binaries.call(module, *args, "--synthetic_queries=10", cache_dir=tmp_path / "c")
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"{module}: error: {message}"), line


def test_a_plugin_that_exits_while_imported_is_one_line(tmp_path):
    bad_rules_plugin = tmp_path / "leaves.py"
    bad_rules_plugin.write_text("import sys\nsys.exit(0)\n")
    out = tmp_path / "out"
    done = binaries.call("fpdgd", f"--plugin={bad_rules_plugin}", f"--output_dir={out}")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert (
        line == f"fpdgd: error: --plugin: {bad_rules_plugin}: called sys.exit(0) while imported"
    ), line


@pytest.mark.parametrize("name", ["gamma", "gamma_sd", "local_lr"])
def test_fedips_settings_must_be_finite_in_float32(name):
    from foltr_jax.engine.config import ConfigError
    from foltr_jax.methods import fedips

    with pytest.raises(ConfigError, match="finite in float32, got 1e"):
        fedips.FedIpsConfig(**{name: 1e39}).validate()
    fedips.FedIpsConfig(**{name: 3.4028235e38}).validate()  # float32's largest: fine


def test_a_recipe_s_report_refuses_results_that_are_not_its_runs(tmp_path):
    import json

    folder = tmp_path / "poisoning"
    (folder / "fedavg").mkdir(parents=True)
    (folder / "fedavg" / "results.json").write_text(json.dumps(_results([0.1, 0.2, 0.3])))
    done = binaries.call("report", "--recipe=poisoning_figs2_4", f"--results_dir={folder}")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"report: error: --recipe: poisoning_figs2_4: {folder} does not hold")
    assert "no results of its run(s) grid" in line and "not its runs': fedavg/results.json" in line
    assert not (folder / "report").exists()  # nothing drawn

    report = binaries.load("report")
    from experiments.lib import recipes

    recipe = recipes.recipes(quick=True)["fpdgd_fig5"]
    for run in recipe.runs:  # the batch's layout: <fold>/<run>/results.json
        (tmp_path / "fig5" / "Fold1" / run.name).mkdir(parents=True)
        (tmp_path / "fig5" / "Fold1" / run.name / "results.json").write_text("{}")
    report.check_recipe_runs(tmp_path / "fig5", recipe)  # the recipe's runs: accepted
