"""The Python API: the README's "Use from Python" example runs, and a registered rule is used."""

import subprocess
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import foltr_jax
from foltr_jax.engine import runner
from foltr_jax.server import aggregators
from tests.sample_data import REPO_ROOT


def readme_python_example() -> str:
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme.split("## Use from Python", 1)[1]
    return section.split("```python", 1)[1].split("```", 1)[0]


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_readme_example_runs_a_registered_aggregator_next_to_the_built_in_ones():
    done = subprocess.run(
        [sys.executable, "-c", readme_python_example()],
        check=False,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    finals = {}
    for line in lines:
        name, value = line.split(": final nDCG@10 ")
        finals[name] = float(value)
    assert list(finals) == ["fedavg", "median", "closest_half"]
    assert all(0.0 < v <= 1.0 for v in finals.values())
    # The three rules aggregate differently, so their curves differ.
    assert len(set(finals.values())) == 3


def _half_weight_mean(models, weights, n_malicious):
    return aggregators.fedavg(models, weights * (jnp.arange(models.shape[0]) % 2 == 0))


def test_registered_rule_is_what_the_server_runs():
    aggregators.register("even_clients_mean", "FedAvg over even-numbered clients")(
        _half_weight_mean
    )
    assert "even_clients_mean" in aggregators.names()
    assert "even_clients_mean" not in aggregators.BUILT_IN
    models = jnp.arange(12.0).reshape(4, 3)
    np.testing.assert_allclose(
        aggregators.call("even_clients_mean", models, jnp.ones(4), 0), (models[0] + models[2]) / 2
    )
    index = aggregators.names().index("even_clients_mean")
    np.testing.assert_allclose(
        aggregators.by_index(index, models, jnp.ones(4), 0), (models[0] + models[2]) / 2
    )
    # Validation knows it; a config naming it is accepted, a misspelt one is refused.
    foltr_jax.FpdgdConfig(n_clients=4, aggregator="even_clients_mean").validate()
    with pytest.raises(foltr_jax.ConfigError, match="aggregator"):
        foltr_jax.FpdgdConfig(n_clients=4, aggregator="even_client_mean").validate()
    # Registering another function under a taken name is refused.
    with pytest.raises(ValueError, match="already registered"):
        aggregators.register("krum", "not Krum")(_half_weight_mean)


def _zero_the_attackers(key, models, global_model, n_malicious):
    del key, global_model
    return jnp.where((jnp.arange(models.shape[0]) < n_malicious)[:, None], 0.0, models)


def test_registered_attack_is_named_like_the_built_in_ones():
    from foltr_jax.server import attacks

    attacks.register("zero_models", "the attackers send zeros", _zero_the_attackers)
    assert "zero_models" in attacks.names() and "zero_models" not in attacks.BUILT_IN
    models = jnp.ones((4, 3))
    np.testing.assert_allclose(
        attacks.by_name("zero_models")(None, models, models[0], 2), [[0] * 3] * 2 + [[1] * 3] * 2
    )
    index = attacks.names().index("zero_models")
    np.testing.assert_allclose(
        attacks.by_index(index, jax.random.PRNGKey(0), models, models[0], 1).sum(), 9.0
    )
    foltr_jax.Setting(n_malicious=1, attack="zero_models").validate(4)
    with pytest.raises(foltr_jax.ConfigError, match="attack"):
        foltr_jax.Setting(n_malicious=1, attack="zero_model").validate(4)
    with pytest.raises(ValueError, match="already registered"):
        attacks.register("lie", "not LIE", _zero_the_attackers)


def _small_run(**config):
    train, test = foltr_jax.data.synthetic_train_test(
        n_train_queries=30, n_test_queries=10, n_features=6, seed=3
    )
    base = {"n_clients": 4, "local_updates": 2, "rounds": 3, "n_runs": 1}
    return foltr_jax.run_fpdgd(foltr_jax.FpdgdConfig(**{**base, **config}), train, test)


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_registered_click_model_is_what_the_clients_click_with():
    from foltr_jax.core import click_models

    def never_clicks(n_grades):
        zeros = jnp.zeros((n_grades,), jnp.float32)
        return click_models.ClickModel(zeros, zeros, jnp.float32(0.0))

    click_models.register("never_clicks", "a user who never clicks", never_clicks)
    assert "never_clicks" in click_models.names()
    assert "never_clicks" in click_models.help_text()
    # Without clicks PDGD has no preference pair: the model never moves.  With them it does.
    still = _small_run(click_model="never_clicks")
    np.testing.assert_array_equal(still.final_params["w"], 0.0)
    np.testing.assert_array_equal(still.offline_ndcg, still.offline_ndcg[:, :1].repeat(3, 1))
    moved = _small_run(click_model="perfect")
    assert np.abs(moved.final_params["w"]).max() > 0
    with pytest.raises(foltr_jax.ConfigError, match="click_model"):
        foltr_jax.FpdgdConfig(click_model="never_click").validate()
    with pytest.raises(ValueError, match="already registered"):
        click_models.register("perfect", "not perfect", never_clicks)


class _DoubledLinear(foltr_jax.rankers.LinearRanker):
    """x · 2w: the same ranking as linear from zero, and the gradient twice linear's."""

    def apply(self, params, features):
        return features @ (2.0 * params["w"])


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_registered_ranker_is_what_the_clients_train():
    from foltr_jax.core import rankers

    rankers.register("doubled_linear", "x · 2w", _DoubledLinear)
    assert "doubled_linear" in rankers.names() and "doubled_linear" not in rankers.RANKERS
    # From w = 0 both rank alike and PDGD's step on w is twice linear's: after one round of
    # one interaction per client (the second would already rank differently) w is doubled.
    one_step = {"rounds": 1, "local_updates": 1, "click_model": "perfect"}
    doubled = _small_run(ranker="doubled_linear", **one_step)
    linear = _small_run(ranker="linear", **one_step)
    w_doubled, w_linear = doubled.final_params["w"], linear.final_params["w"]
    assert np.abs(w_linear).max() > 0
    np.testing.assert_allclose(w_doubled, 2 * w_linear, rtol=1e-5, atol=1e-7)
    with pytest.raises(foltr_jax.ConfigError, match="ranker"):
        foltr_jax.FpdgdConfig(ranker="doubled_linaer").validate()
    # One registry: FOLtR-ES takes the registered ranker too ('neural' is its ReLU network).
    train, test = foltr_jax.data.synthetic_train_test(
        0, n_train_queries=20, n_test_queries=10, n_features=6, mean_docs_per_query=8
    )
    es = foltr_jax.FoltrEsConfig(n_clients=4, local_updates=2, rounds=1, ranker="doubled_linear")
    result = foltr_jax.run_foltr_es(es, train, test)
    assert set(result.final_params) == {"w"} and np.abs(result.final_params["w"]).max() > 0
    assert set(foltr_jax.methods.foltr_es.make_ranker("neural", 6).init(None)) == {"w1", "b1", "w2"}


@pytest.fixture(scope="module")
def public_data():
    return foltr_jax.data.synthetic_train_test(
        0, n_train_queries=30, n_test_queries=15, n_features=6, mean_docs_per_query=10
    )


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_every_method_runs_through_the_public_names(public_data):
    """run_fpdgd (IID and a non-IID Type 2 plan), run_foltr_es, run_fedips and
    run_unlearning, each giving the one RunResult with its metrics."""
    train, test = public_data
    small = {"rounds": 3, "n_runs": 2}
    results = {
        "fpdgd": foltr_jax.run_fpdgd(
            foltr_jax.FpdgdConfig(n_clients=5, local_updates=2, **small), train, test
        ),
        "foltr_es": foltr_jax.run_foltr_es(
            foltr_jax.FoltrEsConfig(n_clients=6, local_updates=2, **small), train, test
        ),
        "fedips": foltr_jax.run_fedips(
            foltr_jax.FedIpsConfig(n_users=4, top_k=3, clicks_per_user=3, **small), train, test
        ),
    }
    flat, plan, holders = foltr_jax.noniid.type2_setup(train, 5, 1, seed=0)
    results["noniid"] = foltr_jax.run_fpdgd(
        foltr_jax.FpdgdConfig(n_clients=5, local_updates=2, **small),
        flat,
        test,
        clients=foltr_jax.ClientPlan(**plan),
    )
    assert sorted(len(h) for h in holders) == [1] * 5
    for name, result in results.items():
        assert isinstance(result, foltr_jax.RunResult), name
        offline = result.offline[0]
        assert result.curves[offline].shape == (2, 3), name
        assert result.metrics is result.curves, name  # the older name still works
        assert np.all(np.isfinite(result.curves[offline])), name
        assert (result.n_cells, result.n_runs) == (1, 2), name
        assert result.by_cell(offline).shape == (1, 2, 3), name
        assert result.initial[offline].shape == (2,), name
        assert result.interactions > 0, name
    assert results["foltr_es"].epsilon == np.inf
    assert not np.allclose(results["noniid"].online_ndcg, results["fpdgd"].online_ndcg)

    config = foltr_jax.UnlearningConfig(
        federation=foltr_jax.FpdgdConfig(n_clients=4, local_updates=2, rounds=4, n_runs=2),
        click_models=("perfect",),
        delta_t=(2,),
        unlearn_local_updates=(1,),
    )
    protocol = foltr_jax.run_unlearning(config, train, test)
    assert sorted(protocol.trained) == ["honest", "malicious", "retrained"]
    assert protocol.trained["malicious"].history.shape[:3] == (2, 2, 4)
    assert protocol.replayed.offline_ndcg.shape == (2, 2)
    assert protocol.replayed.cells == [("perfect", 1, 2)]
    assert protocol.replayed.by_cell("offline_ndcg").shape == (1, 2, 2)
    assert np.all(np.isfinite(protocol.replayed.final_offline_ndcg()))


def _result(n_cells, n_runs, rounds=4, cells=()):
    slots = n_cells * n_runs
    values = np.arange(slots * rounds, dtype=float).reshape(slots, rounds)
    return foltr_jax.RunResult(
        curves={"offline_ndcg": values, "online_ndcg": values / 100},
        initial={"offline_ndcg": np.zeros(slots)},
        final_params=None,
        compile_seconds=1.5,
        run_seconds=0.25,
        interactions=12_000,
        offline_rounds=np.arange(1, rounds + 1),
        offline=("offline_ndcg",),
        cells=cells,
        n_runs=n_runs,
    )


def test_a_result_splits_its_curves_by_cell_without_being_told_the_count():
    cells = (
        foltr_jax.Setting(),
        foltr_jax.Setting(aggregator="median"),
        foltr_jax.Setting(aggregator="krum"),
    )
    result = _result(3, 2, cells=cells)
    by_cell = result.by_cell("offline_ndcg")
    assert by_cell.shape == (3, 2, 4)
    # Slot cell * n_runs + run: cell 1's runs are slots 2 and 3.
    np.testing.assert_array_equal(by_cell[1], result.offline_ndcg[2:4])
    np.testing.assert_array_equal(result.by_cell(result.online_ndcg)[2], result.online_ndcg[4:6])
    assert result.by_cell("online_performance").shape == (3, 2)  # one number a run
    median = result.cell(cells[1])
    assert sorted(median) == ["offline_ndcg", "online_ndcg"]
    np.testing.assert_array_equal(median["offline_ndcg"], by_cell[1])
    np.testing.assert_array_equal(result.cell(-1)["online_ndcg"], result.online_ndcg[4:6])
    with pytest.raises(KeyError, match="not one of the run's cells"):
        result.cell(foltr_jax.Setting(aggregator="trimmed_mean"))
    with pytest.raises(IndexError, match="cell 3 of a run with 3 cells"):
        result.cell(3)
    # The older call, with the count passed back, gives the same.
    np.testing.assert_array_equal(result.per_setting(result.offline_ndcg, 3), by_cell)
    np.testing.assert_array_equal(result.per_setting(result.offline_ndcg), by_cell)


def test_a_result_without_named_cells_counts_them_from_its_runs():
    result = _result(2, 3)
    assert (result.n_cells, result.n_runs, result.n_slots) == (2, 3, 6)
    assert result.by_cell("offline_ndcg").shape == (2, 3, 4)


def test_a_result_prints_in_one_short_line():
    text = repr(_result(3, 2, rounds=200))
    assert text == (
        "RunResult(3 cells x 2 runs, 200 rounds; curves: offline_ndcg, online_ndcg; "
        "12,000 interactions in 0.25 s + 1.50 s compiling)"
    )
    assert repr(_result(1, 1)).startswith("RunResult(1 cell x 1 run, 4 rounds;")


def test_runs_per_cell_come_from_the_slots_repetitions():
    assert runner._runs_per_cell(np.tile(np.arange(3), 4)) == 3
    assert runner._runs_per_cell(np.zeros(1, np.int64)) == 1
    assert runner._runs_per_cell(np.array([0, 1, 0])) == 3  # not cell-major: one cell


def _docstring_example(function) -> str:
    import textwrap

    block = function.__doc__.split("Example::\n", 1)[1]
    lines = []
    for line in block.splitlines():
        if line.strip() and not line.startswith("        "):
            break
        lines.append(line)
    return textwrap.dedent("\n".join(lines))


@pytest.mark.slow  # five small compilations
@pytest.mark.parametrize(
    "name", ["run_fpdgd", "run_foltr_es", "run_fedips", "run_unlearning", "run_noniid"]
)
def test_the_run_functions_examples_run(name, public_data):
    """The example in each ``run_*`` docstring (the API reference shows it) runs as written,
    given a small ``train, test``."""
    code = _docstring_example(getattr(foltr_jax, name))
    assert f"foltr_jax.{name}(" in code
    train, test = public_data
    exec(
        compile(code, f"<{name} example>", "exec"),
        {"foltr_jax": foltr_jax, "train": train, "test": test},
    )


def _split_cases():
    """(train, empty split, a test split whose every label is 0) for the split checks."""
    train, test = foltr_jax.data.synthetic_train_test(
        0, n_train_queries=4, n_test_queries=3, n_features=3, mean_docs_per_query=4
    )
    fields = ("features", "labels", "query_offsets", "query_lengths", "query_ids")
    empty = foltr_jax.data.RankingDataset(**{f: getattr(test, f)[:0] for f in fields})
    unlabelled = foltr_jax.data.RankingDataset(
        **{f: getattr(test, f) for f in fields[:-1] if f != "labels"},
        labels=np.zeros_like(test.labels),
        query_ids=test.query_ids,
    )
    return train, empty, unlabelled


RUN_FUNCTIONS = {  # each with the module whose build it starts: stopped there in the test
    "run_fpdgd": (
        "methods.fpdgd.federation",
        "build",
        foltr_jax.FpdgdConfig(n_clients=2, rounds=2),
    ),
    "run_foltr_es": ("methods.foltr_es", "build", foltr_jax.FoltrEsConfig(n_clients=2, rounds=2)),
    "run_fedips": ("methods.fedips", "build", foltr_jax.FedIpsConfig(n_users=2, rounds=2)),
    "run_unlearning": ("methods.unlearning", "run_protocol", foltr_jax.UnlearningConfig()),
    "run_noniid": ("methods.fpdgd.noniid_experiment", "plan_cells", foltr_jax.NoniidConfig()),
}


@pytest.mark.parametrize("name", sorted(RUN_FUNCTIONS))
def test_every_run_function_refuses_an_empty_split_and_warns_of_an_unlabelled_test_split(
    name, monkeypatch
):
    """Before any JAX program: an empty training or test split is one DatasetError naming
    it; a test split without a relevant document gets the binaries' warning (offline nDCG
    would be 0 in every round, silently)."""
    import importlib

    module, builder, config = RUN_FUNCTIONS[name]

    class Started(Exception):
        pass

    def started(*args, **kwargs):
        raise Started

    monkeypatch.setattr(importlib.import_module(f"foltr_jax.{module}"), builder, started)
    run = getattr(foltr_jax, name)
    train, empty, unlabelled = _split_cases()
    with pytest.raises(foltr_jax.data.DatasetError, match="^the training split has no query$"):
        run(config, empty, unlabelled)
    with pytest.raises(foltr_jax.data.DatasetError, match="^the test split has no query$"):
        run(config, train, empty)
    with (
        pytest.warns(RuntimeWarning, match="^the test split: no document has a label above 0"),
        pytest.raises(Started),
    ):
        run(config, train, unlabelled)
    with pytest.raises(Started), warnings.catch_warnings():
        warnings.simplefilter("error")  # once per dataset
        run(config, train, unlabelled)
