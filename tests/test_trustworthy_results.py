"""Trustworthy results (issue 26), as a careless or hostile user meets them: a model that
breaks (NaN or infinity) is never a result, a run touches only its own files, every
output path is probed before the work, what is read back is checked against its content,
integers and types are checked where they are read, names never collide, and files follow
the user's umask.  Most tests call the library in-process; those that start a binary are
marked slow."""

import functools
import json
import os
import pathlib
import stat
import subprocess
import sys
import warnings

import binaries
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sample_data import REPO_ROOT

from experiments import common
from foltr_jax import FederationConfig, Setting, aggregators, data, federation, files, loop
from foltr_jax.config import ConfigError


# ---------------------------------------------------------------------------------------
# 1. A non-finite model is never a result
# ---------------------------------------------------------------------------------------


@functools.partial(jax.jit, static_argnums=(0, 1), donate_argnums=(3,))
def _breaking_chunk(static, n, consts, state, first):
    """n rounds of a toy run with slots [3, d]: slot ``static`` becomes NaN in round
    ``consts`` (1-based); every other slot stays finite."""

    def step(params, t):
        broken = (t + 1 == consts) & (jnp.arange(params.shape[0]) == static)
        params = jnp.where(broken[:, None], jnp.nan, params + 1.0)
        return params, params.sum(axis=1)

    return jax.lax.scan(step, state, first + jnp.arange(n))


def _toy(total=9, chunk=3, breaks_at=5, slot=1, checkpoint=None):
    return loop.scan_in_chunks(
        _breaking_chunk, slot, jnp.int32(breaks_at), jnp.zeros((3, 2)), total, chunk,
        checkpoint=checkpoint,
    )


@pytest.mark.parametrize("checkpointed", [False, True])
def test_a_model_that_breaks_mid_chunk_stops_the_run_naming_slot_and_round(checkpointed, tmp_path):
    checkpoint = str(tmp_path / ".checkpoint.npz") if checkpointed else None
    with pytest.raises(loop.NonFiniteModel) as caught:
        _toy(breaks_at=5, slot=1, checkpoint=checkpoint)
    assert caught.value.slots == [1] and caught.value.round == 5
    assert "run slot 1" in str(caught.value) and "after round 5" in str(caught.value)
    assert "\n" not in str(caught.value)
    if checkpointed:  # the last checkpoint is the last finite state, never a broken one
        meta, arrays = files.load_arrays(checkpoint, _key(checkpoint))
        assert meta["done"] == 3 and np.isfinite(arrays[0]).all()


def _key(path):
    import zipfile

    with zipfile.ZipFile(path) as z, z.open("meta.npy") as stream:
        return json.loads(str(np.lib.format.read_array(stream)[()]))["fingerprint"]


def test_a_broken_model_given_to_a_run_stops_it_before_the_first_round():
    with pytest.raises(loop.NonFiniteModel, match="before the first round"):
        loop.scan_in_chunks(
            _breaking_chunk, 0, jnp.int32(99), jnp.full((3, 2), jnp.inf), 3, 3
        )


def test_a_finite_run_is_unchanged_by_the_check():
    state, outputs, _, _ = _toy(breaks_at=99)
    assert np.array_equal(np.asarray(state), np.full((3, 2), 9.0))
    assert len(outputs) == 3


@pytest.fixture(scope="module")
def tiny_split():
    return data.synthetic_train_test(
        0, n_train_queries=12, n_test_queries=6, n_features=6, mean_docs_per_query=8
    )


@pytest.fixture
def nan_aggregator():
    name = "returns_nan_for_test"
    if name not in aggregators.names():
        aggregators.register(name, "a user's rule that returns NaN")(
            lambda models, weights, n_malicious: jnp.full(models.shape[1:], jnp.nan)
        )
    return name


def test_a_users_aggregator_returning_nan_is_never_a_result(tiny_split, nan_aggregator):
    train, test = tiny_split
    config = FederationConfig(
        n_clients=3, local_updates=2, rounds=4, n_runs=2, chunk_rounds=4,
        aggregator=nan_aggregator,
    )
    spec, arrays = federation.build(config, train, test)
    with pytest.raises(loop.NonFiniteModel) as caught:
        federation.run(spec, arrays)
    assert caught.value.slots == [0, 1] and caught.value.round == 1
    # what a binary prints: one line naming the cell, repetition and round
    with pytest.raises(common.UserError) as line:
        with common.stop_if_not_finite(["perfect_eps0_delta0"], 2):
            raise caught.value
    message = str(line.value)
    assert message.startswith("cell perfect_eps0_delta0, repetition 0 (run slot 0) (and 1 more")
    assert "after round 1" in message and "\n" not in message


@pytest.mark.parametrize(
    "epsilon, sensitivity, clip_factor, field",
    [
        (1e-320, 5.0, 0.5, "epsilon"),
        (1e-38, 1e3, 0.5, "epsilon"),
        (4.5, 3e38, 2.0, "clip_factor"),
    ],
)
def test_settings_whose_noise_scale_or_clipping_norm_overflow_are_refused(
    epsilon, sensitivity, clip_factor, field
):
    config = FederationConfig(epsilon=epsilon, sensitivity=sensitivity, clip_factor=clip_factor)
    with pytest.raises(ConfigError) as caught:
        config.validate()
    assert caught.value.field == field and "float32" in caught.value.message


def test_a_grid_cell_whose_noise_scale_overflows_is_refused():
    with pytest.raises(ConfigError, match="^epsilon gives a noise scale"):
        Setting(epsilon=1e-320, sensitivity=5.0).validate(10)


def _fpdgd_flags(tmp_path, *extra):
    return [
        "--synthetic_queries=20", "--synthetic_features=8", "--synthetic_docs_per_query=10",
        "--n_clients=4", "--local_updates=2", "--rounds=4", "--chunk_rounds=2", "--click_model=perfect",
        f"--output_dir={tmp_path / 'out'}", *extra,
    ]


@pytest.mark.slow
def test_binary_diverging_learning_rate_writes_nothing_and_names_slot_and_round(tmp_path):
    done = binaries.run("fpdgd", *_fpdgd_flags(tmp_path, "--learning_rate=3e38"))
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "run slot 0" in errors[0] and "after round 1" in errors[0]
    assert not (tmp_path / "out" / "results.json").exists()


@pytest.mark.slow
def test_binary_with_a_users_nan_aggregator_writes_nothing(tmp_path):
    script = (
        "import sys, jax.numpy as jnp; from absl import app; from foltr_jax import aggregators; "
        "aggregators.register('nan_rule', 'NaN')(lambda m, w, n: jnp.full(m.shape[1:], jnp.nan)); "
        "from experiments import fpdgd; app.run(fpdgd.main, argv=sys.argv)"
    )
    args = _fpdgd_flags(tmp_path, "--aggregator=nan_rule", "--click_models=perfect,navigational")
    done = subprocess.run(
        [sys.executable, "-c", script, *args], cwd=REPO_ROOT, capture_output=True, text=True,
        env={**os.environ, "JAX_PLATFORMS": "cpu"}, timeout=300, check=False,
    )
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(errors) == 1, done.stderr
    assert "cell perfect_eps0_delta0, repetition 0" in errors[0] and "after round 1" in errors[0]
    assert not list((tmp_path / "out").rglob("results.json"))
