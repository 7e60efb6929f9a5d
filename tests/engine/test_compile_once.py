"""Runs that differ only in traced values (ε, Δ, click model, m, learning rates; FOLtR-ES: p, σ)
share one compiled program, use their own values, and never resume each other's checkpoints."""

import dataclasses

import jax
import numpy as np
import pytest

import foltr_jax
from foltr_jax import data

PROGRAMS = ("_initial", "run_chunk")  # the run's programs (engine.runner)
EVENTS = {  # JAX's monitoring events, by what they count
    "/jax/core/compile/jaxpr_trace_duration": "traced",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lowered",
    "/jax/core/compile/backend_compile_duration": "compiled",
}

FIRST = foltr_jax.FpdgdConfig(
    n_clients=5,
    local_updates=2,
    rounds=3,
    chunk_rounds=3,
    n_runs=2,
    click_model="informational",
    epsilon=4.5,
    sensitivity=5.0,
    learning_rate=0.1,
    server_optimizer="momentum",
    server_learning_rate=0.5,
    attack="data_poisoning",
    n_malicious=1,
)
SECOND = dataclasses.replace(
    FIRST,
    click_model="perfect",
    epsilon=1.2,
    sensitivity=3.0,
    learning_rate=0.05,
    server_learning_rate=1.5,
    n_malicious=2,
)


@pytest.fixture(scope="module")
def splits():
    return data.synthetic_train_test(
        0, n_train_queries=12, n_test_queries=8, n_features=8, max_docs_per_query=24
    )


class Programs:
    """Counts, by program name, what JAX traces to a jaxpr, lowers to MLIR and XLA compiles
    (JAX's monitoring events; this process keeps no persistent compilation cache: conftest)."""

    def __init__(self):
        self.seen = {kind: [] for kind in EVENTS.values()}

    def __call__(self, event, duration, **kwargs):
        name = str(kwargs.get("fun_name"))
        if name.startswith("jit(") and name.endswith(")"):
            name = name[4:-1]
        if event in EVENTS:
            self.seen[EVENTS[event]].append(name)

    def of_the_run(self, kind=None):
        """The run's programs among those traced, lowered or compiled (``kind``: one)."""
        kinds = [kind] if kind else list(self.seen)
        return sorted({n for k in kinds for n in self.seen[k] if n in PROGRAMS})

    def __enter__(self):
        jax.monitoring.register_event_duration_secs_listener(self)
        return self

    def __exit__(self, *exc):
        jax.monitoring.unregister_event_duration_listener(self)


def curves(result):
    return {name: np.asarray(values) for name, values in result.curves.items()}


def assert_same_run(a, b):
    assert curves(a).keys() == curves(b).keys()
    for name, values in curves(a).items():
        np.testing.assert_array_equal(values, curves(b)[name], err_msg=name)
    for x, y in zip(
        jax.tree_util.tree_leaves(a.final_params), jax.tree_util.tree_leaves(b.final_params)
    ):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_a_run_differing_in_privacy_clicks_attackers_and_learning_rates_compiles_nothing_new(
    splits,
):
    assert not jax.config.jax_enable_compilation_cache  # every program counted is compiled
    train, test = splits
    jax.clear_caches()
    with Programs() as first:
        first_run = foltr_jax.run_fpdgd(FIRST, train, test)
    assert first.of_the_run("compiled") == sorted(PROGRAMS)  # what is counted is seen
    with Programs() as second:
        second_run = foltr_jax.run_fpdgd(SECOND, train, test)
    assert second.of_the_run() == []
    # The values are the second run's own: not the first run's results, and bit for bit
    # those of the same run compiled afresh.
    assert not np.array_equal(curves(first_run)["online_ndcg"], curves(second_run)["online_ndcg"])
    jax.clear_caches()
    with Programs() as fresh:
        fresh_run = foltr_jax.run_fpdgd(SECOND, train, test)
    assert fresh.of_the_run("compiled") == sorted(PROGRAMS)
    assert_same_run(second_run, fresh_run)


def test_a_checkpoint_is_not_resumed_by_a_run_with_another_learning_rate(splits, tmp_path):
    train, test = splits
    checkpoint = str(tmp_path / ".checkpoint.npz")
    foltr_jax.run_fpdgd(FIRST, train, test, checkpoint=checkpoint)  # kept: the finished run
    other = dataclasses.replace(FIRST, learning_rate=0.05)
    with pytest.warns(RuntimeWarning, match="ignoring"):
        resumed = foltr_jax.run_fpdgd(other, train, test, checkpoint=checkpoint)
    assert_same_run(resumed, foltr_jax.run_fpdgd(other, train, test))


ES_FIRST = foltr_jax.FoltrEsConfig(
    n_clients=4,
    local_updates=2,
    rounds=3,
    chunk_rounds=3,
    n_runs=2,
    click_model="informational",
    privacy_p=0.9,
    sigma=0.01,
    learning_rate=0.001,
)
ES_SECOND = dataclasses.replace(
    ES_FIRST, click_model="perfect", privacy_p=0.5, sigma=0.05, learning_rate=0.01
)


def test_a_foltr_es_run_differing_in_p_sigma_clicks_and_learning_rate_compiles_nothing_new(
    splits,
):
    train, test = splits
    jax.clear_caches()
    with Programs() as first:
        first_run = foltr_jax.run_foltr_es(ES_FIRST, train, test)
    assert first.of_the_run("compiled") == sorted(PROGRAMS)
    with Programs() as second:
        second_run = foltr_jax.run_foltr_es(ES_SECOND, train, test)
    assert second.of_the_run() == []
    assert second_run.extras["epsilon"] == ES_SECOND.epsilon != ES_FIRST.epsilon
    assert not np.array_equal(curves(first_run)["online_ndcg"], curves(second_run)["online_ndcg"])
    jax.clear_caches()
    assert_same_run(second_run, foltr_jax.run_foltr_es(ES_SECOND, train, test))
