"""--plugin: user code named on the command line registers names every binary and batch
recipe can use."""

import json
import textwrap

import pytest

from tests import binaries

PLUGIN = textwrap.dedent(
    '''
    """The README's closest_half rule, and a recipe that uses it."""
    import jax.numpy as jnp

    import foltr_jax
    from experiments.lib import recipes


    @foltr_jax.aggregators.register("closest_half", "mean of the half nearest the median")
    def closest_half(models, weights, n_malicious):
        distance = jnp.linalg.norm(models - jnp.median(models, axis=0), axis=1)
        return foltr_jax.aggregators.fedavg(models, weights * (distance <= jnp.median(distance)))


    @recipes.register
    def closest_half_recipes(quick):
        run = recipes.Run(
            "closest_half",
            "fpdgd",
            ("--aggregator=closest_half", "--n_clients=8", "--local_updates=2",
             "--rounds=4", "--chunk_rounds=4"),
        )
        return [recipes.Recipe("closest_half_demo", "closest_half against nothing", (run,))]
    '''
)
SMALL = (
    "--n_clients=8",
    "--local_updates=2",
    "--rounds=3",
    "--chunk_rounds=3",
    "--synthetic_queries=30",
    "--nocheckpoint",
)


@pytest.fixture(scope="module", autouse=True)
def forget_the_plugin_s_recipes():
    """binaries.call runs a binary in this process: the recipe its plugin registers would
    otherwise stay listed for the tests that run after these (test_report's pages)."""
    from experiments.lib import recipes

    saved = list(recipes._USER_RECIPES)
    yield
    recipes._USER_RECIPES[:] = saved


@pytest.fixture(scope="module")
def rules_plugin(tmp_path_factory):
    """One file for the module: a process imports a plugin file once (a second file
    registering closest_half again with another function would be refused)."""
    path = tmp_path_factory.mktemp("plugin") / "my_rules.py"
    path.write_text(PLUGIN)
    return path


def test_a_plugin_s_aggregator_is_a_name_in_a_binary(tmp_path, rules_plugin):
    out = tmp_path / "out"
    result = binaries.call(
        "fpdgd",
        f"--plugin={rules_plugin}",
        "--aggregator=closest_half",
        *SMALL,
        f"--output_dir={out}",
    )
    assert result.returncode == 0, result.stderr
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["aggregator"] == "closest_half"
    assert all(0 <= v <= 1 for v in results["cells"][0]["curves"]["offline_ndcg"][0])


def test_without_the_plugin_the_name_is_refused_in_one_line(tmp_path):
    result = binaries.call("fpdgd", "--aggregator=no_such_rule", *SMALL, f"--output_dir={tmp_path}")
    assert result.returncode == 2
    assert "--aggregator: must be one of" in result.stderr
    assert not (tmp_path / "results.json").exists()


@pytest.mark.parametrize(
    "source, expected",
    [
        ("x = 1 / 0\n", "ZeroDivisionError: division by zero ("),
        ("import no_such_module_anywhere\n", "ModuleNotFoundError"),
    ],
)
def test_a_plugin_that_fails_is_one_line_naming_it_and_where(tmp_path, source, expected):
    path = tmp_path / "broken.py"
    path.write_text(source)
    result = binaries.call("foltr_es", f"--plugin={path}", f"--output_dir={tmp_path / 'o'}")
    assert result.returncode == 2
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"foltr_es: error: --plugin: {path}: ")
    assert expected in line
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "o").exists()


def test_a_missing_plugin_file_or_module_is_refused(tmp_path):
    missing = binaries.call("fedips", f"--plugin={tmp_path / 'nope.py'}")
    assert missing.returncode == 2 and "no such file" in missing.stderr
    module = binaries.call("fedips", "--plugin=no_such_plugin_module")
    assert module.returncode == 2 and "ModuleNotFoundError" in module.stderr


def test_a_batch_recipe_of_a_plugin_names_the_plugin_in_every_run(tmp_path, rules_plugin):
    result = binaries.call(
        "batch",
        f"--plugin={rules_plugin}",
        "--recipe=closest_half_demo",
        "--data_root=synthetic",
        "--dry_run",
        f"--results_dir={tmp_path}",
    )
    assert result.returncode == 0, result.stderr
    commands = [line for line in result.stdout.splitlines() if "experiments.fpdgd" in line]
    assert len(commands) == 1
    assert f"--plugin={rules_plugin}" in commands[0] and "--aggregator=closest_half" in commands[0]


@pytest.mark.slow
def test_a_batch_runs_a_plugin_s_recipe_end_to_end(tmp_path, rules_plugin):
    result = binaries.run(
        "batch",
        f"--plugin={rules_plugin}",
        "--recipe=closest_half_demo",
        "--data_root=synthetic",
        "--n_runs=1",
        f"--results_dir={tmp_path}",
        cache_dir=tmp_path / "cache",
    )
    assert result.returncode == 0, result.stderr
    assert "paper figures not drawn" not in result.stderr  # no paper's layout: no page
    (found,) = tmp_path.glob("closest_half_demo/*/closest_half/results.json")
    assert json.loads(found.read_text())["config"]["aggregator"] == "closest_half"
