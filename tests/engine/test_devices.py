"""Every method's clients split over devices give the one-device results, with 4 and 2
forced CPU devices: FOLtR-ES and FedIPS with and without client chunks, a non-IID Type 2
cell with FedProx, FPDGD with an odd number of runs (the offline evaluation splits the
runs over the devices: engine.slots_on_devices), the unlearning training and replay, and
the README's example method (FPDGD's lanes: tests/methods/fpdgd/test_scale.py)."""

import os
import subprocess
import sys

import pytest

from tests.sample_data import REPO_ROOT

pytestmark = pytest.mark.slow  # a subprocess with forced devices compiling five methods twice

SCRIPT = """
import dataclasses, numpy as np, jax
from foltr_jax import data
from foltr_jax.methods import foltr_es, fedips
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

from foltr_jax import ClientPlan, FpdgdConfig
from foltr_jax.data import noniid
from foltr_jax.methods import unlearning
from foltr_jax.methods.fpdgd import federation
def same(a, b):
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
flat, extra, _ = noniid.type2_setup(train, 10, 1, seed=1)
cell = FpdgdConfig(n_clients=10, local_updates=3, rounds=3, n_runs=2)
plan = ClientPlan(queries=extra["queries"], prox_mu=0.1)
def cell_run(c):
    return federation.run(*federation.build(c, flat, test, clients=plan))
one, two = cell_run(cell), cell_run(dataclasses.replace(cell, n_devices=2))
same((one.curves, one.final_params), (two.curves, two.final_params))
print("non-IID cell matches")
odd = FpdgdConfig(n_clients=4, local_updates=2, rounds=3, n_runs=3, eval_every=1)
def fpdgd_run(c):
    return federation.run(*federation.build(c, train, test))
one, two = fpdgd_run(odd), fpdgd_run(dataclasses.replace(odd, n_devices=2))
same((one.curves, one.final_params), (two.curves, two.final_params))
print("3 runs' evaluation over 2 devices matches")
forget = unlearning.UnlearningConfig(
    federation=dataclasses.replace(cell, rounds=4), click_models=("perfect",),
    delta_t=(2,), unlearn_local_updates=(1, 2))
def forget_run(config):
    spec, arrays, trained = unlearning.train(config, train, test, "malicious")
    replayed = unlearning.replay(config, spec, arrays, trained.history)
    return trained.curves, trained.history, replayed.offline_ndcg, replayed.final_params
two_devices = dataclasses.replace(
    forget, federation=dataclasses.replace(forget.federation, n_devices=2))
same(forget_run(forget), forget_run(two_devices))
print("unlearning matches")

import sys
sys.path.insert(0, "examples")
import federated_dbgd as dbgd
method = dbgd.DbgdConfig(n_clients=8, local_updates=2, rounds=3, n_runs=2, client_chunk=4)
one = dbgd.run_dbgd(method, train, test)
two = dbgd.run_dbgd(dataclasses.replace(method, n_devices=2), train, test)
same((one.curves, one.final_params), (two.curves, two.final_params))
print("federated DBGD matches")
"""


def test_every_method_over_devices_gives_the_single_device_results():
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
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[:6] == [
        "FoltrEsConfig matches",
        "FedIpsConfig matches",
        "non-IID cell matches",
        "3 runs' evaluation over 2 devices matches",
        "unlearning matches",
        "federated DBGD matches",
    ]


@pytest.mark.parametrize(
    "module, settings",
    [
        (
            "noniid",
            (
                "--type=2",
                "--remedies=fedprox",
                "--prox_mu=0.1",
                "--rounds=3",
                "--n_runs=2",
                "--chunk_rounds=3",
                "--n_clients=10",
            ),
        ),
        ("foltr_es", ("--n_clients=8", "--rounds=3", "--n_runs=2", "--chunk_rounds=3")),
    ],
)
def test_a_binary_over_two_devices_writes_the_single_device_results(tmp_path, module, settings):
    """The binaries reach the devices (noniid since its flags come from FpdgdConfig),
    with no XLA_FLAGS: --n_devices=2 gives the CPU two devices (program.main).  The
    unlearning trainings and replay over devices are in the test above."""
    import json

    import numpy as np

    from tests import binaries

    found = {}
    for n in (1, 2):
        out = tmp_path / f"d{n}"
        done = binaries.run(
            module,
            *settings,
            "--synthetic_queries=40",
            "--nocheckpoint",
            f"--n_devices={n}",
            f"--output_dir={out}",
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        found[n] = json.loads((out / "results.json").read_text())
    cells = found[1]["cells"]
    assert len(cells) == len(found[2]["cells"]) > 0
    for one, two in zip(cells, found[2]["cells"]):
        keys = [k for k in ("offline_ndcg", "online_ndcg") if k in one["curves"]]
        assert "offline_ndcg" in keys
        for key in keys:
            np.testing.assert_allclose(two["curves"][key], one["curves"][key], rtol=1e-5, atol=1e-6)
    assert found[2]["config"]["n_devices"] == 2
