"""The non-IID experiment's API (Wang's thesis, UQ 2024, ch. 4): ``foltr_jax.run_noniid``
and its config, its cells as planned, and the binary experiments.noniid as a thin client
of it (what the API computes is what the binary writes)."""

import json

import numpy as np
import pytest

import foltr_jax
from foltr_jax.data import noniid
from foltr_jax.methods.fpdgd import noniid_experiment
from foltr_jax.methods.fpdgd.noniid_experiment import NoniidConfig
from tests.binaries import call


def _config(**fields):
    federation = foltr_jax.FpdgdConfig(
        n_clients=0, local_updates=0, rounds=4, n_runs=2, chunk_rounds=4
    )
    return NoniidConfig(federation=fields.pop("federation", federation), **fields)


@pytest.fixture(scope="module")
def split():
    return foltr_jax.data.synthetic_train_test(
        0, n_train_queries=30, n_features=8, mean_docs_per_query=15
    )


@pytest.mark.parametrize(
    "fields, field, message",
    [
        ({"type": 5}, "type", "must be 1, 2, 3 or 4, got 5"),
        ({"remedies": ("fedavg",)}, "remedies", "must be among"),
        ({"remedies": ("fedper",)}, "remedies", "needs the neural ranker"),
        ({"remedies": ("sharing",), "type": 3}, "remedies", "sharing applies to Type 2"),
        ({"grades_per_client": 3}, "grades_per_client", "must be 1 or 2, got 3"),
        ({"clicks": "dbn"}, "clicks", "must be ccm or pbm"),
        ({"mix": "3"}, "mix", "must be none, 1 or 2"),
        ({"prox_mu": (-1.0,)}, "prox_mu", "finite and at least 0"),
        ({"prox_mu": (0.1, 0.1)}, "prox_mu", "0.1 is asked for twice"),
        ({"steps": (0, 1)}, "steps", "must be at least 1"),
        ({"fedper_eval": "mean"}, "fedper_eval", "must be one of"),
        ({"share_fraction": 1.0}, "share_fraction", "must be in (0, 1)"),
        ({"warmup_interactions": 0}, "warmup_interactions", "must be at least 1"),
    ],
)
def test_a_bad_config_raises_config_error_naming_the_field(fields, field, message):
    with pytest.raises(foltr_jax.ConfigError) as raised:
        _config(**fields).validate()
    assert raised.value.field == field and message in raised.value.message


def test_what_does_not_fit_the_data_or_the_type_names_its_field(split):
    train, test = split
    cases = [
        (_config(type=3, federation=foltr_jax.FpdgdConfig(n_clients=4)), "n_clients"),
        (_config(type=4, steps=(1, 2), federation=foltr_jax.FpdgdConfig(n_clients=3)), "steps"),
        (_config(type=2, federation=foltr_jax.FpdgdConfig(n_clients=7)), "n_clients"),
        (_config(type=2, federation=foltr_jax.FpdgdConfig(n_clients=5, client_chunk=3)),
         "client_chunk"),
    ]  # fmt: skip
    for config, field in cases:
        with pytest.raises(foltr_jax.ConfigError) as raised:
            noniid_experiment.plan_cells(config, train, test)
        assert raised.value.field == field, (config, raised.value)
    with pytest.raises(foltr_jax.ConfigError, match="^type .*MultiIntentDataset"):
        noniid_experiment.plan_cells(_config(type=1), train, test)


def test_the_cells_follow_the_thesis(split):
    train, test = split
    plan = noniid_experiment.plan_cells(
        _config(type=2, remedies=("fedprox", "sharing"), prox_mu=(0.1, 1.0)), train, test
    )
    names = [c.name for c in plan.cells]
    assert names == ["iid", "noniid", "fedprox_mu=0.1", "fedprox_mu=1", "sharing"]
    cells = {c.name: c for c in plan.cells}
    assert cells["iid"].plan is None and cells["iid"].train is train
    assert cells["noniid"].plan.prox_mu == 0.0  # one program with the FedProx cells
    assert [cells[n].plan.prox_mu for n in names[2:4]] == [0.1, 1.0]
    assert cells["sharing"].warmup is not None and cells["noniid"].warmup is None
    assert {c.config.n_clients for c in plan.cells} == {5}  # #R = 1: |C| = 5
    assert {c.config.local_updates for c in plan.cells} == {5}
    assert [len(g) for g in cells["noniid"].describe["grades"]] == [1] * 5
    # Type 4: clients doing 1, 3, 5, 7, 9 interactions; the IID baseline does 5 each
    four = {c.name: c for c in noniid_experiment.plan_cells(_config(type=4), train, test).cells}
    assert four["noniid"].plan.steps == (1, 3, 5, 7, 9)
    assert (four["iid"].config.local_updates, four["noniid"].config.local_updates) == (5, 9)
    # Type 3: CCM clients, and an IID baseline drawing their click models at random
    three = {c.name: c for c in noniid_experiment.plan_cells(_config(type=3), train, test).cells}
    assert three["noniid"].plan.click_models == noniid.CCM_CLIENTS
    assert three["iid"].plan.random_click_models == noniid.CCM_CLIENTS


def test_the_api_computes_what_the_binary_writes(tmp_path):
    """Type 1 on synthetic intents: ``run_noniid``'s cells hold the curves the binary
    writes for the same settings, number for number."""
    args = ["--synthetic_queries=30", "--synthetic_features=8", "--synthetic_docs_per_query=15"]
    out = tmp_path / "out"
    done = call(
        "noniid", "--type=1", *args, "--rounds=4", "--chunk_rounds=4", "--n_runs=2",
        f"--output_dir={out}", cache_dir=tmp_path / "cache",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    written = json.loads((out / "results.json").read_text())
    intents = noniid.synthetic_multi_intent(
        0, n_queries=30, n_features=8, mean_docs_per_query=15, n_intents=4
    )
    seen = []
    outcome = foltr_jax.run_noniid(
        _config(type=1),
        intents,
        progress=lambda name, *rounds: seen.append((name, rounds[:2])),
        checkpoint_dir=str(tmp_path / "kept"),
    )
    assert list(outcome.results) == [c["name"] for c in written["cells"]] == ["iid", "noniid"]
    assert [name for name, _ in seen] == ["iid", "noniid"] and seen[0][1] == (4, 4)
    config, first = _config(type=1), outcome.cells[0].config
    timing = {"seconds", "compile_seconds", "wall_seconds", "timings"}
    for cell, planned in zip(written["cells"], outcome.cells):
        result = outcome.results[cell["name"]]
        assert result.offline_ndcg.tolist() == cell["curves"]["offline_ndcg"]
        labels = noniid_experiment.cell_labels(config, planned.name, first)
        ours = noniid_experiment.results_cell(planned, result, labels)
        assert {k: v for k, v in ours.items() if k not in timing} == {
            k: v for k, v in cell.items() if k not in timing
        }
    assert written["noniid"] == noniid_experiment.settings_record(config)
    assert written["config"]["n_clients"] == outcome.cells[0].config.n_clients == 4
    assert not np.allclose(
        outcome.results["iid"].offline_ndcg, outcome.results["noniid"].offline_ndcg
    )
