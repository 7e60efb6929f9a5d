"""Scale: client chunking and device sharding give the results of the plain round."""

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from foltr_jax import data
from foltr_jax.methods.fpdgd import federation
from foltr_jax.methods.fpdgd import lanes as fpdgd_lanes
from foltr_jax.methods.fpdgd.config import centralised
from tests import binaries
from tests.sample_data import REPO_ROOT

TRAIN, TEST = data.synthetic_train_test(
    0, n_train_queries=60, n_test_queries=30, n_features=8, mean_docs_per_query=20
)
BASE = federation.FpdgdConfig(n_clients=12, local_updates=2, rounds=5, n_runs=2)
SETTINGS = [
    federation.Setting(click_model="informational"),
    federation.Setting(click_model="perfect", n_absent=2),
    federation.Setting(click_model="navigational", n_malicious=3, attack="data_poisoning"),
]


def run(config, settings=SETTINGS):
    spec, arrays = federation.build(config, TRAIN, TEST, settings)
    return federation.run(spec, arrays)


def assert_same_run(a, b):
    """Equal up to the order of float32 sums (chunked sums, per-device batch shapes)."""
    for field in ("offline_ndcg", "offline_mrr", "online_ndcg", "online_max_rr"):
        np.testing.assert_allclose(getattr(a, field), getattr(b, field), atol=1e-6)
    np.testing.assert_allclose(a.final_params["w"], b.final_params["w"], atol=1e-6)
    assert a.interactions == b.interactions


@pytest.fixture(scope="module")
def unchunked_run():
    return run(BASE)


@pytest.mark.parametrize("chunk", [4])
def test_chunked_clients_give_the_unchunked_results(unchunked_run, chunk):
    assert_same_run(run(dataclasses.replace(BASE, client_chunk=chunk)), unchunked_run)


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_chunked_sum_of_updates_equals_the_unchunked_batch_baseline():
    batch = centralised(dataclasses.replace(BASE, rounds=3), "batch")
    settings = [federation.Setting()]
    assert_same_run(run(dataclasses.replace(batch, client_chunk=6), settings), run(batch, settings))


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_chunked_differential_privacy_adds_the_unchunked_rounds_noise():
    # every client draws its noise from its own key, so chunks add the same noise (the
    # noise drawn once on the average streams too: tests/core/test_privacy.py)
    dp = dataclasses.replace(
        BASE, rounds=4, epsilon=0.5, sensitivity=1.0, privacy_noise="per_client"
    )
    plain_dp, chunked_dp = (
        run(c, [dp.as_setting()]) for c in (dp, dataclasses.replace(dp, client_chunk=4))
    )
    assert_same_run(chunked_dp, plain_dp)
    # and the noise is there: the global model is far from the one with negligible noise
    quiet = dataclasses.replace(dp, epsilon=1e7)
    noiseless = run(quiet, [quiet.as_setting()]).final_params["w"]
    assert np.abs(plain_dp.final_params["w"] - noiseless).max() > 0.1


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_chunked_non_iid_plans_and_server_optimiser_give_the_unchunked_results():
    # Type 2 query lists, Type 3 click models, Type 4 step counts (unequal FedAvg
    # weights), FedProx and a stateful server optimiser all stream over chunks
    rng = np.random.default_rng(3)
    plan = federation.ClientPlan(
        queries=rng.integers(0, TRAIN.n_queries, size=(12, 5)),
        click_models=("perfect", "informational", "navigational") * 4,
        steps=(1, 2) * 6,
        prox_mu=0.1,
    )
    config = dataclasses.replace(
        BASE, rounds=3, server_optimizer="momentum", server_learning_rate=0.5
    )

    def run_plan(c):
        spec, arrays = federation.build(c, TRAIN, TEST, [c.as_setting()], clients=plan)
        return federation.run(spec, arrays)

    chunked, unchunked_run = run_plan(dataclasses.replace(config, client_chunk=4)), run_plan(config)
    assert_same_run(chunked, unchunked_run)
    assert not np.allclose(unchunked_run.offline_ndcg[:, 0], unchunked_run.offline_ndcg[:, -1])


@pytest.mark.parametrize(
    "change, settings, field, message",
    [
        ({"client_chunk": 5}, None, "client_chunk", "must divide n_clients = 12"),
        ({"client_chunk": -1}, None, "client_chunk", "at least 0"),
        (
            {"client_chunk": 4},
            [federation.Setting(aggregator="krum", n_malicious=1)],
            "client_chunk",
            "aggregator krum needs every client",
        ),
        (
            {"client_chunk": 4},
            [federation.Setting(attack="lie", n_malicious=1)],
            "client_chunk",
            "model attacks needs every client",
        ),
        ({"n_devices": 64}, None, "n_devices", "visible"),
        ({"n_devices": 0}, None, "n_devices", "at least 1"),
    ],
)
def test_bad_scale_settings_are_refused(change, settings, field, message):
    with pytest.raises(federation.ConfigError, match=message) as error:
        federation.build(dataclasses.replace(BASE, **change), TRAIN, TEST, settings)
    assert error.value.field == field


SHARDED = """
import dataclasses, numpy as np, jax
from foltr_jax import data
from foltr_jax.methods.fpdgd import federation
assert jax.device_count() == 8, jax.devices()
train, test = data.synthetic_train_test(
    0, n_train_queries=60, n_test_queries=30, n_features=8, mean_docs_per_query=20)
base = federation.FpdgdConfig(n_clients=12, local_updates=2, rounds=4, n_runs=2)
settings = [federation.Setting(click_model="informational"),
            federation.Setting(click_model="perfect", n_malicious=3, attack="data_poisoning")]
def run(config):
    spec, arrays = federation.build(config, train, test, settings)
    return federation.run(spec, arrays)
one = run(base)
for config in (dataclasses.replace(base, n_devices=8),
               dataclasses.replace(base, n_devices=4, client_chunk=6)):
    other = run(config)
    for field in ("offline_ndcg", "online_ndcg"):
        np.testing.assert_allclose(getattr(other, field), getattr(one, field), atol=1e-6)
    np.testing.assert_allclose(other.final_params["w"], one.final_params["w"], atol=1e-6)
print("sharded runs match")
"""


@pytest.mark.slow  # a process of its own with eight CPU devices
def test_sharding_over_eight_cpu_devices_gives_the_single_device_results():
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=8",
        "JAX_PLATFORMS": "cpu",
    }
    done = subprocess.run(
        [sys.executable, "-c", SHARDED],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "sharded runs match" in done.stdout


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_the_length_ladder_gives_the_results_of_scoring_every_query_at_full_width(monkeypatch):
    # long-tailed lengths (2..120 documents), so lanes take different ladder widths
    train, test = data.synthetic_train_test(
        1,
        n_train_queries=80,
        n_test_queries=20,
        n_features=8,
        mean_docs_per_query=30,
        max_docs_per_query=120,
    )
    config = dataclasses.replace(BASE, display_groups=3)
    monkeypatch.setattr(fpdgd_lanes, "GROUPED_SAMPLING_BYTES", 0)  # 3 groups, however small
    spec, arrays = federation.build(config, train, test)
    assert len(spec.widths) > 3 and spec.widths[-1] == int(max(train.query_lengths))
    ladder = federation.run(spec, arrays)
    one_width = federation.run(dataclasses.replace(spec, widths=(spec.window,)), arrays)
    np.testing.assert_array_equal(ladder.offline_ndcg, one_width.offline_ndcg)
    np.testing.assert_array_equal(ladder.online_ndcg, one_width.online_ndcg)
    # the gradient sums run over differently padded rows: equal up to float32 rounding
    np.testing.assert_allclose(ladder.final_params["w"], one_width.final_params["w"], atol=1e-6)


@pytest.mark.slow  # the suite runs each case in a process of its own
def test_benchmark_suite_writes_its_table_and_json(tmp_path):
    output = tmp_path / "suite.json"
    done = binaries.run(
        "benchmark",
        "--suite",
        "--suite_clients=10",
        "--suite_rankers=linear",
        "--suite_variants=plain",
        "--suite_interactions=40",
        "--window_scoring=vmap",
        f"--suite_output={output}",
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "10 clients, linear, plain" in done.stdout
    (case,) = json.loads(output.read_text())["cases"]
    assert case["interactions"] == 2 * 10 * 2  # 2 rounds (the minimum) x 10 clients x B = 2
    assert case["interactions_per_second"] > 0 and case["peak_rss_mb"] > 0
    assert case["config"]["window_scoring"] == "vmap"  # passed on to the case
    assert case["data"]["train"]["queries"] == 1000  # MSLR-shaped synthetic data
    assert case["data"]["train"]["features"] == 136
