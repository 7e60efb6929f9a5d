"""Every method's clients split over devices (``engine.on_devices``) give the one-device
results: FOLtR-ES and FedIPS with 4 and 2 forced CPU devices, with and without client
chunks (FPDGD's lanes: tests/test_scale.py)."""

import os
import subprocess
import sys

from sample_data import REPO_ROOT

SCRIPT = """
import dataclasses, numpy as np, jax
from foltr_jax import data, foltr_es, fedips
assert jax.device_count() == 4, jax.devices()
train, test = data.synthetic_train_test(
    0, n_train_queries=40, n_test_queries=20, n_features=8, mean_docs_per_query=12)
es = foltr_es.FoltrEsConfig(
    n_clients=8, local_updates=2, rounds=3, n_runs=2, privacy_p=0.9, chunk_rounds=2,
    attack="data_poisoning", n_malicious=3)
ips = fedips.FedIpsConfig(
    n_users=8, rounds=3, n_runs=2, top_k=3, clicks_per_user=4, max_sessions=6,
    queries_per_user=2, propensity="estimated")
def es_run(c):
    return foltr_es.run(*foltr_es.build(c, train, test))
def ips_run(c):
    return fedips.run(*fedips.build(c, train, test)[:2])
for run, base in ((es_run, es), (ips_run, ips)):
    one = run(base)
    for change in ({"n_devices": 4}, {"n_devices": 2, "client_chunk": 4}):
        other = run(dataclasses.replace(base, **change))
        assert other.curves.keys() == one.curves.keys()
        for name, curve in one.curves.items():
            np.testing.assert_allclose(other.curves[name], curve, rtol=1e-5, atol=1e-6)
        for a, b in zip(jax.tree_util.tree_leaves(other.final_params),
                        jax.tree_util.tree_leaves(one.final_params)):
            np.testing.assert_allclose(a, b, atol=1e-6)
    print(type(base).__name__, "matches")
"""


def test_foltr_es_and_fedips_over_devices_give_the_single_device_results():
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=4",
        "JAX_PLATFORMS": "cpu",
    }
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[:2] == ["FoltrEsConfig matches", "FedIpsConfig matches"]
