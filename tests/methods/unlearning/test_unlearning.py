"""Unlearning (ECIR 2024 §3): stored history, calibrated replay, evaluation protocol."""

import dataclasses
import json
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import foltr_jax
from foltr_jax import data, engine
from foltr_jax.engine import loop, results_files
from foltr_jax.methods import unlearning
from foltr_jax.methods.fpdgd import federation
from foltr_jax.methods.unlearning import calibrated_replay, experiment
from foltr_jax.server import attacks, pipeline
from tests.binaries import call as run_binary
from tests.methods.unlearning import reference

TRAIN, TEST = data.synthetic_train_test(
    3, n_train_queries=40, n_test_queries=20, n_features=8, mean_docs_per_query=15
)
FEDERATION = federation.FpdgdConfig(
    n_clients=6, local_updates=3, rounds=24, n_runs=3, chunk_rounds=12, seed=1
)
CONFIG = unlearning.UnlearningConfig(
    federation=FEDERATION,
    click_models=("informational",),
    forget_clients=(4,),
    delta_t=(2, 4),
    unlearn_local_updates=(1, 3),
)


# ------------------------------------------------------------------ pure functions


def test_calibrate_keeps_the_stored_norm_and_the_new_direction():
    rng = np.random.default_rng(0)
    new, stored = rng.normal(size=(5, 7)), rng.normal(size=(5, 7))
    new[2] = 0.0  # a client whose new update is zero sends zero
    out = np.asarray(unlearning.calibrate(jnp.asarray(new), jnp.asarray(stored)))
    for i in range(5):
        if i == 2:
            np.testing.assert_array_equal(out[i], 0.0)
            continue
        expected = np.linalg.norm(stored[i]) * new[i] / np.linalg.norm(new[i])
        np.testing.assert_allclose(out[i], expected, rtol=1e-5)


@pytest.mark.parametrize("client_chunk", [0, 2])
def test_a_replayed_rounds_server_side_is_fedavg_of_calibrated_updates(client_chunk):
    """The replay's server chain (``replay_stages``: calibration, FedAvg) as its round runs it
    (``engine.serve`` of the clients' models, the slot's stored rows and global model as its
    settings, then M + the aggregate) equals eqs. 1-2 written out (``reference``), unchunked
    and two clients at a time; the forgotten client (weight 0) does not count."""
    rng = np.random.default_rng(1)
    n_slots, n, d = 2, 4, 5
    model = jnp.asarray(rng.normal(size=(n_slots, d)), jnp.float32)
    new = jnp.asarray(rng.normal(size=(n_slots, n, d)), jnp.float32)
    stored = jnp.asarray(rng.normal(size=(n_slots, n, d)), jnp.float32)
    weights = jnp.asarray([[0.0, 1.0, 1.0, 1.0]] * n_slots)  # position 0 is forgotten

    def train(start, size):
        rows = lambda x: jax.lax.dynamic_slice_in_dim(x, start, size, axis=1)
        return engine.Sent(model[:, None] + rows(new), rows(weights), {})

    zeros = jnp.zeros_like(model)
    server = jax.vmap(pipeline.chain(*calibrated_replay.replay_stages((None, None))).init)(zeros)
    aggregate, _, _, _ = engine.serve(
        train,
        calibrated_replay.replay_stages,
        (stored, model),
        zeros,  # the replay's clients send updates
        jnp.zeros(n_slots, jnp.int32),
        server,
        jax.random.split(jax.random.PRNGKey(0), n_slots),
        n_clients=n,
        client_chunk=client_chunk,
    )
    for s in range(n_slots):
        want = reference.unlearning_round(model[s], new[s], stored[s], weights[s])
        np.testing.assert_allclose(model[s] + aggregate[s], want, rtol=1e-5, atol=1e-6)


def fixed_update(positions, d: int):
    """The new update ΔM′ of the clients at ``positions`` [size] in every replayed round:
    sin(j + 1.7 (c + 1)) for weight j of client c, float32 [size, d]."""
    return jnp.sin(jnp.arange(d)[None, :] + 1.7 * (positions[:, None] + 1.0))


class FixedUpdates(calibrated_replay.Replay):
    """The replay with each client's new update ``fixed_update`` instead of what its n′ PDGD
    steps give; everything else (the clients' weights, the stored rows of each replayed
    round, calibration, FedAvg, the rounds of each cell) is the replay's own."""

    def clients(self, inputs, start, size: int) -> engine.Sent:
        sent = super().clients(inputs, start, size)
        global_models = engine.flatten(inputs[1].global_params)  # [n_slots, d]
        new = fixed_update(start + jnp.arange(size), global_models.shape[1])
        return sent._replace(models=global_models[:, None] + new[None])


def test_the_replay_is_eqs_1_2_on_the_stored_history(monkeypatch):
    """``unlearning.replay`` of the small grid, its clients' new updates fixed
    (``FixedUpdates``), on a random history: every slot's final model is its initial one
    after ⌈T/Δt⌉ rounds of eqs. 1-2 written out (``reference``), round s calibrating with
    the stored updates of round 1 + s·Δt and the forgotten client (position 0) left out."""
    spec, arrays = unlearning.build_training(CONFIG, TRAIN, TEST, "malicious")
    history = np.random.default_rng(3).normal(size=(3, 12, 6, 8)).astype(np.float32)
    monkeypatch.setattr(calibrated_replay, "Replay", FixedUpdates)
    replayed = unlearning.replay(CONFIG, spec, arrays, history)
    n_runs, store_every = FEDERATION.n_runs, CONFIG.store_every
    repetitions = np.tile(np.arange(n_runs), len(replayed.cells))
    init_keys, _ = loop.run_keys(FEDERATION.seed, repetitions)  # the replay's initial models
    initial = np.asarray(engine.flatten(jax.vmap(spec.ranker.init)(init_keys)))
    new = np.sin(np.arange(8)[None, :] + 1.7 * (np.arange(6)[:, None] + 1.0))
    weights = np.array([0.0] + [1.0] * 5)
    final = np.asarray(replayed.final_params["w"])
    for cell, ((_, _, delta_t), rounds) in enumerate(zip(replayed.cells, replayed.rounds)):
        for run in range(n_runs):
            slot = cell * n_runs + run
            model = initial[slot].astype(np.float64)
            for s in range(rounds):
                stored = history[run, s * delta_t // store_every]
                model = reference.unlearning_round(model, new, stored, weights)
            np.testing.assert_allclose(final[slot], model, rtol=1e-5, atol=1e-5)
            assert np.linalg.norm(model - initial[slot]) > 0.1  # the replay moved it


def test_scaled_negation_is_eq_3_and_its_update_is_eq_4():
    models = jnp.asarray(np.random.default_rng(2).normal(size=(4, 3)), jnp.float32)
    global_model = jnp.asarray([0.5, -1.0, 2.0])
    out = attacks.scaled_negation(None, models, global_model, 2)
    np.testing.assert_allclose(out[:2], -2.0 * models[:2])
    np.testing.assert_array_equal(out[2:], models[2:])
    local_update = models[:2] - global_model
    np.testing.assert_allclose(
        out[:2] - global_model, -2.0 * local_update - 3.0 * global_model, rtol=1e-5, atol=1e-6
    )


def test_efficiency_matches_the_papers_formula():
    config = dataclasses.replace(
        CONFIG, federation=dataclasses.replace(FEDERATION, rounds=10_000, local_updates=5)
    )
    e = unlearning.efficiency(config, local_steps=3, delta_t=10)
    assert e["unlearning_rounds"] == 1000 and e["retraining_rounds"] == 10_000
    assert e["unlearning_local_updates"] == 3000 and e["retraining_local_updates"] == 50_000
    assert e["local_update_reduction"] == pytest.approx(5 / 3 * 10)
    assert e["round_reduction"] == 10
    # The paper's setup stores 2,000 updates of 136 floats for 10 clients every Δt = 5.
    assert unlearning.history_bytes(10_000, 5, 10, 136) == 2000 * 10 * 136 * 4


@pytest.mark.parametrize(
    "change, field, message",
    [
        ({"forget_clients": (6,)}, "forget_clients", "out of range"),
        ({"forget_clients": (-1,)}, "forget_clients", "out of range"),
        ({"forget_clients": (1, 1)}, "forget_clients", "repeats"),
        ({"forget_clients": tuple(range(6))}, "forget_clients", "at least one must remain"),
        ({"delta_t": (25,)}, "delta_t", "between 1 and the 24 rounds"),
        ({"delta_t": (0,)}, "delta_t", "between 1"),
        ({"unlearn_local_updates": (0, 2)}, "unlearn_local_updates", "at least 1"),
        ({"click_models": ("nope",)}, "click_model", "unknown click model"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(change, field, message):
    with pytest.raises(federation.ConfigError, match=message) as error:
        dataclasses.replace(CONFIG, **change).validate()
    assert error.value.field == field
    assert "--" not in str(error.value)  # the library names fields, never a binary's flags


# ------------------------------------------------------------------ history and replay


@pytest.fixture(scope="module")
def trained():
    """Malicious training with history, and the replay of the whole small grid."""
    spec, arrays, result = unlearning.train(CONFIG, TRAIN, TEST, "malicious")
    return spec, arrays, result, unlearning.replay(CONFIG, spec, arrays, result.history)


def test_history_holds_every_clients_update_at_rounds_1_1_plus_dt(trained):
    _, _, result, _ = trained
    # gcd(2, 4) = 2: rounds 1, 3, 5, ... (1-based) of 24 -> 12 entries of 6 clients x 8 weights.
    assert result.history.shape == (3, 12, 6, 8)
    # Recording every round instead gives the same curves and a superset of the entries.
    spec, arrays = federation.build(
        FEDERATION,
        TRAIN,
        TEST,
        unlearning.training_settings(CONFIG, "malicious"),
        history_every=1,
        client_ids=CONFIG.client_order(),
    )
    every_round = federation.run(spec, arrays)
    np.testing.assert_array_equal(every_round.offline_ndcg, result.offline_ndcg)
    np.testing.assert_array_equal(every_round.history[:, ::2], result.history)
    # Honest clients' updates average to each round's step of the global model (FedAvg; the
    # malicious client sent −2·its model, so add its contribution back).
    history = every_round.history  # [runs, T, clients, d]
    final = np.asarray(every_round.final_params["w"])
    assert np.all(np.abs(history[:, :, 1:]).sum(axis=-1) > 0)
    models = np.zeros_like(final)
    for t in range(FEDERATION.rounds):
        local = models[:, None] + history[:, t]
        local[:, 0] = -2.0 * local[:, 0]
        models = local.mean(axis=1)
    np.testing.assert_allclose(models, final, rtol=1e-4, atol=1e-5)


def test_the_forgotten_clients_stored_updates_are_never_used(trained):
    spec, arrays, result, replayed = trained
    history = result.history.copy()
    history[:, :, 0] = 1e6  # position 0 holds client 4, the forgotten one
    again = unlearning.replay(CONFIG, spec, arrays, history)
    np.testing.assert_array_equal(again.offline_ndcg, replayed.offline_ndcg)
    # ... while the remaining clients' norms matter.
    history = result.history.copy()
    history[:, :, 1:] *= 0.0
    still = unlearning.replay(CONFIG, spec, arrays, history)
    initial = float(still.offline_ndcg[0, 0])
    assert np.all(still.offline_ndcg[~np.isnan(still.offline_ndcg)] == initial)


def test_each_cell_replays_its_own_number_of_rounds(trained):
    _, _, _, replayed = trained
    assert replayed.cells == [
        ("informational", 1, 2),
        ("informational", 1, 4),
        ("informational", 3, 2),
        ("informational", 3, 4),
    ]
    np.testing.assert_array_equal(replayed.rounds, [12, 6, 12, 6])
    curves = replayed.offline_ndcg.reshape(4, 3, 12)
    assert not np.isnan(curves[[0, 2]]).any()
    assert not np.isnan(curves[[1, 3], :, :6]).any() and np.isnan(curves[[1, 3], :, 6:]).all()
    assert replayed.final_offline_ndcg().shape == (4, 3)
    # Interactions: 5 remaining clients x n′ x rounds, per run.
    assert replayed.interactions == 3 * 5 * (1 * 12 + 1 * 6 + 3 * 12 + 3 * 6)


def test_a_grid_cell_equals_the_same_cell_replayed_alone(trained):
    spec, arrays, result, replayed = trained
    alone = dataclasses.replace(CONFIG, delta_t=(4,), unlearn_local_updates=(3,))
    # Stored every 4 rounds instead of every 2: every second entry.
    single = unlearning.replay(alone, spec, arrays, result.history[:, ::2])
    cell = replayed.cells.index(("informational", 3, 4))
    np.testing.assert_allclose(
        single.offline_ndcg, replayed.offline_ndcg[cell * 3 : cell * 3 + 3, :6], atol=1e-6
    )


# ------------------------------------------------------------------ the evaluation protocol


@pytest.fixture(scope="module")
def protocol():
    """10H-0M, 8H-2M, 8H-0M and U(8H-2M) forgetting two clients at once."""
    fed = federation.FpdgdConfig(
        n_clients=10, local_updates=5, rounds=60, n_runs=4, chunk_rounds=30, seed=5
    )
    config = unlearning.UnlearningConfig(
        federation=fed,
        click_models=("perfect",),
        forget_clients=(2, 7),
        delta_t=(3,),
        unlearn_local_updates=(1, 4),
    )
    train, test = data.synthetic_train_test(
        0, n_train_queries=80, n_test_queries=40, n_features=16, mean_docs_per_query=20
    )
    # The three trainings in one program (the binary runs them apart to time them).
    kinds = ("honest", "malicious", "retrained")
    settings = [s for kind in kinds for s in unlearning.training_settings(config, kind)]
    spec, arrays = federation.build(
        fed, train, test, settings, history_every=3, client_ids=config.client_order()
    )
    result = federation.run(spec, arrays)
    finals = dict(zip(kinds, result.per_setting(result.offline_ndcg, 3)[:, :, -1]))
    history = result.history[fed.n_runs : 2 * fed.n_runs]  # the malicious setting's slots
    replayed = unlearning.replay(config, spec, arrays, history)
    return config, finals, replayed.final_offline_ndcg()


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_forgetting_two_malicious_clients_recovers_the_retrained_model(protocol):
    config, finals, unlearned = protocol
    assert config.labels() == {
        "honest": "10H-0M",
        "malicious": "8H-2M",
        "retrained": "8H-0M",
        "unlearned": "U(8H-2M)",
    }
    honest, malicious, retrained = finals["honest"], finals["malicious"], finals["retrained"]
    # The malicious clients clearly hurt; honest and retrained are alike (paper Figure 2).
    assert malicious.mean() < honest.mean() - 0.05
    assert abs(retrained.mean() - honest.mean()) < 0.03
    # Unlearning (both n′) recovers most of the gap (Figure 3); more local steps do no worse.
    for values in unlearned:
        assert values.mean() > malicious.mean() + 0.7 * (retrained.mean() - malicious.mean())
    assert unlearned[1].mean() >= unlearned[0].mean() - 0.01


# ------------------------------------------------------------------ the binary


# The binary's small run: 4 clients, client 3 forgotten, Δt 2 and 4, n′ 1, synthetic data.
BINARY_CONFIG = unlearning.UnlearningConfig(
    federation=federation.FpdgdConfig(
        n_clients=4, local_updates=2, rounds=4, chunk_rounds=4, n_runs=2
    ),
    click_models=("perfect",),
    forget_clients=(3,),
    delta_t=(2, 4),
    unlearn_local_updates=(1,),
)


@pytest.fixture(scope="module")
def binary_run(tmp_path_factory):
    """(exit status and output, results.json, its folder) of the binary's run of
    ``BINARY_CONFIG`` on 20 synthetic queries."""
    tmp_path = tmp_path_factory.mktemp("unlearning")
    out = tmp_path / "out"
    result = run_binary(
        "unlearning",
        "--synthetic_queries=20",
        "--synthetic_features=4",
        "--synthetic_docs_per_query=10",
        "--n_clients=4",
        "--local_updates=2",
        "--rounds=4",
        "--chunk_rounds=4",
        "--n_runs=2",
        "--click_models=perfect",
        "--delta_t=2,4",
        "--unlearn_local_updates=1",
        "--forget_clients=3",
        f"--output_dir={out}",
        cache_dir=tmp_path / "cache",
    )
    assert result.returncode == 0, result.stderr
    return result, json.loads((out / "results.json").read_text()), out


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_binary_writes_the_table_3_grid_and_refuses_bad_settings(binary_run, tmp_path):
    result, results, out = binary_run
    training, cells = results["cells"][:3], results["cells"][3:]
    assert [c["setting"]["configuration"] for c in training] == ["4H-0M", "3H-1M", "3H-0M"]
    assert np.shape(training[0]["curves"]["offline_ndcg"]) == (2, 4)
    assert [c["labels"]["figure"] for c in training] == [None] * 3  # in every figure
    assert [(c["setting"]["delta_t"], c["evaluated_rounds"]) for c in cells] == [
        (2, [1, 2]),
        (4, [1]),
    ]
    assert [np.shape(c["curves"]["offline_ndcg"]) for c in cells] == [(2, 2), (2, 1)]
    assert cells[0]["efficiency"]["unlearning_local_updates"] == 2
    assert results["history"]["shape_per_run"] == [2, 4, 4]
    assert "U(3H-1M), n′ = 1" in (out / "table.txt").read_text()
    assert "[U(3H-1M)] round 2/2" in result.stderr

    for flag, message in [
        ("--forget_clients=4", "--forget_clients: client id 4 is out of range [0, 3]"),
        ("--delta_t=5", "--delta_t: Δt = 5 must be between 1 and the 4 rounds"),
        ("--unlearn_local_updates=0", "--unlearn_local_updates: n′ must be at least 1"),
        ("--delta_t=x", "--delta_t must be integers"),
    ]:
        bad = run_binary(
            "unlearning",
            "--n_clients=4",
            "--rounds=4",
            "--delta_t=2",
            flag,
            f"--output_dir={tmp_path / 'bad'}",
            cache_dir=tmp_path / "cache",
        )
        assert bad.returncode == 2 and message in bad.stderr, bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "bad").exists()


@pytest.mark.slow  # the binary's run (above): tens of seconds of compilation
def test_the_api_writes_what_the_binary_writes(binary_run):
    """``foltr_jax.run_unlearning`` and ``results_document`` of the binary's settings and
    data give its results.json, field for field, but for what describes the run (its
    provenance, wall seconds and timings)."""
    _, written, _ = binary_run
    train, test = data.synthetic_train_test(
        0, n_train_queries=20, n_test_queries=10, n_features=4, mean_docs_per_query=10
    )
    protocol = foltr_jax.run_unlearning(BINARY_CONFIG, train, test)
    source = {k: v for k, v in written["data"].items() if k not in ("train", "test")}
    ours = unlearning.results_document(
        BINARY_CONFIG, protocol, results_files.data_summary(source, train, test)
    )
    assert ours["data"] == written["data"]  # the same splits
    run_fields = {"provenance", "versions", "timings", "wall_seconds"}
    assert list(ours) == [k for k in written if k != "provenance"]
    for key in ours.keys() - run_fields:
        assert ours[key] == written[key], key
    assert ours["config"] == experiment.config_record(BINARY_CONFIG)
    assert ours["config"]["z"] == 2 and ours["config"]["delta_t"] == [2, 4]
    assert ours["wall_seconds"].keys() == written["wall_seconds"].keys()
    assert ours["wall_seconds"]["note"] == written["wall_seconds"]["note"]
    assert ours["timings"]["resumed_at_round"] == {}  # nothing resumed
    # the replay's cells come after the three trainings', with their efficiency
    assert ours["cells"][3:] == experiment.unlearning_cells(BINARY_CONFIG, protocol.replayed)
    assert ours["cells"][3]["efficiency"] == unlearning.efficiency(BINARY_CONFIG, 1, 2)


def test_results_document_refuses_a_protocol_of_another_config():
    """The cells and trainings must be the config's: a document never labels one grid's
    numbers with another's settings."""
    replayed = types.SimpleNamespace(cells=(("perfect", 1, 2),))
    trained = dict.fromkeys(unlearning.KINDS)
    with pytest.raises(ValueError, match="not those of the config"):
        unlearning.results_document(BINARY_CONFIG, unlearning.ProtocolResult(trained, replayed), {})
    with pytest.raises(ValueError, match="not those of the config"):  # a training missing
        unlearning.results_document(
            dataclasses.replace(BINARY_CONFIG, delta_t=(2,)),
            unlearning.ProtocolResult({"honest": None}, replayed),
            {},
        )


def test_stats_and_config_record():
    assert experiment.stats([1.0, 3.0]) == {"mean": 2.0, "sd": float(np.sqrt(2.0))}
    assert experiment.stats([0.5]) == {"mean": 0.5, "sd": 0.0}
    record = experiment.config_record(BINARY_CONFIG)
    assert record["n_clients"] == 4 and record["forget_clients"] == [3]
    assert record["unlearn_local_updates"] == [1] and record["click_models"] == ["perfect"]


def test_replay_rejects_a_history_from_another_config(trained):
    spec, arrays, result, _ = trained
    other = dataclasses.replace(CONFIG, delta_t=(3,))
    with pytest.raises(ValueError, match="history must come from"):
        unlearning.replay(other, spec, arrays, result.history)
