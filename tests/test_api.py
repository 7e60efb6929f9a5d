"""The Python API: the README's "Use from Python" example runs, and a registered rule is used."""

import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sample_data import REPO_ROOT

import foltr_jax
from foltr_jax import aggregators


def readme_python_example() -> str:
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme.split("## Use from Python", 1)[1]
    return section.split("```python", 1)[1].split("```", 1)[0]


def test_readme_example_runs_a_registered_aggregator_next_to_the_built_in_ones():
    done = subprocess.run(
        [sys.executable, "-c", readme_python_example()],
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
    foltr_jax.FederationConfig(n_clients=4, aggregator="even_clients_mean").validate()
    with pytest.raises(foltr_jax.ConfigError, match="aggregator"):
        foltr_jax.FederationConfig(n_clients=4, aggregator="even_client_mean").validate()
    # Registering another function under a taken name is refused.
    with pytest.raises(ValueError, match="already registered"):
        aggregators.register("krum", "not Krum")(_half_weight_mean)


def _zero_the_attackers(key, models, global_model, n_malicious):
    del key, global_model
    return jnp.where((jnp.arange(models.shape[0]) < n_malicious)[:, None], 0.0, models)


def test_registered_attack_is_named_like_the_built_in_ones():
    from foltr_jax import attacks

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
