"""Rankers: initialisation and scores against plain NumPy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from foltr_jax.core import rankers


def test_linear_ranker_starts_at_zero():
    params = rankers.make_ranker("linear", 7).init(jax.random.PRNGKey(3))
    assert set(params) == {"w"} and params["w"].shape == (7,) and not np.any(params["w"])


def test_neural_ranker_fan_in_weights_and_hidden_biases():
    """Public code (PDGDNeuralRanker): W1 and b1 ~ N(0, (1/n_features)^2), w2 ~ N(0, (1/64)^2)."""
    params = rankers.make_ranker("neural", 50).init(jax.random.PRNGKey(0))
    assert {k: v.shape for k, v in params.items()} == {"w1": (50, 64), "b1": (64,), "w2": (64,)}
    # N(0, (1/fan_in)^2): sample sd of 3200 and 64 draws within ~4 standard errors
    assert abs(float(jnp.std(params["w1"])) * 50 - 1) < 4 / np.sqrt(2 * 3200)
    assert abs(float(jnp.std(params["b1"])) * 50 - 1) < 4 / np.sqrt(2 * 64)
    assert abs(float(jnp.mean(params["b1"])) * 50) < 4 / np.sqrt(64)
    assert len(set(np.asarray(params["b1"]).tolist())) == 64  # 64 draws of their own
    for row in (params["w1"][0], params["w1"][-1], params["w2"] * 64 / 50):
        assert not np.allclose(params["b1"], row)  # not a copy of another stream
    assert abs(float(jnp.std(params["w2"])) * 64 - 1) < 4 / np.sqrt(2 * 64)
    assert abs(float(jnp.mean(params["w1"])) * 50) < 4 / np.sqrt(3200)


def test_neural_scores_match_numpy():
    rng = np.random.default_rng(1)
    ranker = rankers.NeuralRanker(6, hidden_units=5)
    w1, b1, w2 = rng.normal(size=(6, 5)), rng.normal(size=5), rng.normal(size=5)
    x = rng.random((9, 6))
    params = {k: jnp.asarray(v, jnp.float32) for k, v in {"w1": w1, "b1": b1, "w2": w2}.items()}
    expected = (1 / (1 + np.exp(-(x @ w1 + b1)))) @ w2
    got = ranker.apply(params, jnp.asarray(x, jnp.float32))
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-5, atol=1e-6)


def test_hidden_bias_is_a_constant_feature():
    """sigmoid(x W1 + b1) = sigmoid([x, 1] [W1; b1]): b1 acts as a bias, per hidden unit."""
    rng = np.random.default_rng(2)
    params = {
        "w1": jnp.asarray(rng.normal(size=(4, 8)), jnp.float32),
        "b1": jnp.asarray(rng.normal(size=8), jnp.float32),
        "w2": jnp.asarray(rng.normal(size=8), jnp.float32),
    }
    x = jnp.asarray(rng.random((6, 4)), jnp.float32)
    augmented = {
        "w1": jnp.vstack([params["w1"], params["b1"]]),
        "b1": jnp.zeros(8),
        "w2": params["w2"],
    }
    with_bias = rankers.NeuralRanker(4, 8).apply(params, x)
    with_feature = rankers.NeuralRanker(5, 8).apply(augmented, jnp.hstack([x, jnp.ones((6, 1))]))
    np.testing.assert_allclose(with_bias, with_feature, rtol=1e-5, atol=1e-6)
    no_bias = rankers.NeuralRanker(4, 8).apply({**params, "b1": jnp.zeros(8)}, x)
    assert np.abs(np.asarray(with_bias - no_bias)).max() > 1e-2


def test_unknown_ranker_is_refused():
    with pytest.raises(ValueError, match="unknown ranker"):
        rankers.make_ranker("tree", 3)


@pytest.mark.parametrize("n_features", [136, 46])
def test_relu_apply_lanes_is_each_model_alone(n_features):
    """ReluRanker.apply_lanes scores L models' windows as ``apply`` scores each alone, bit
    for bit, at FOLtR-ES's block size and the widths a window is scored at (their
    product's kernel sums every column over the features in the one-model order)."""
    from foltr_jax.methods import foltr_es

    rng = np.random.default_rng(3)
    ranker = rankers.ReluRanker(n_features)
    lanes = foltr_es.BLOCK
    params = {
        "w1": jnp.asarray(rng.normal(0, 0.1, (lanes, n_features, 10)), jnp.float32),
        "b1": jnp.asarray(rng.normal(0, 0.1, (lanes, 10)), jnp.float32),
        "w2": jnp.asarray(rng.normal(0, 1, (lanes, 10)), jnp.float32),
    }
    together = jax.jit(ranker.apply_lanes)
    alone = jax.jit(ranker.apply)
    for width in (1, 7, 16, 24, 40, 61, 64, 96, 144, 216, 308):
        # features of LETOR's kind: non-negative, some large (MSLR's are unnormalised)
        x = rng.exponential(1.0, (width, n_features)) * rng.choice([1, 100], (1, n_features))
        x = jnp.asarray(x, jnp.float32)
        want = np.stack(
            [
                np.asarray(alone(jax.tree_util.tree_map(lambda p, i=i: p[i], params), x))
                for i in range(lanes)
            ]
        )
        np.testing.assert_array_equal(np.asarray(together(params, x)), want, err_msg=str(width))
