"""The shared round (foltr_jax.engine): chunked and unchunked clients give the same
round, and every method on it (FOLtR-ES, FedIPS) gains client chunks and --eval_every
with the results of its plain run."""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from foltr_jax import data, engine
from foltr_jax.engine.config import ConfigError
from foltr_jax.methods import fedips, foltr_es
from foltr_jax.server import pipeline
from tests.binaries import call
from tests.methods.fedips.test_fedips import tiny_config, tiny_data


def _toy_train(n_slots, d):
    """Client c of slot s sends a fixed pseudo-random model and weight 1 + c % 3; the
    online sums count the clients and add up their ids."""

    def train(start, size):
        positions = start + jnp.arange(size)
        keys = jax.vmap(lambda c: jax.random.fold_in(jax.random.PRNGKey(7), c))(positions)
        rows = jax.vmap(lambda k: jax.random.normal(k, (n_slots, d)))(keys)  # [size, S, d]
        models = jnp.moveaxis(rows, 0, 1) + jnp.arange(n_slots)[:, None, None]
        weights = jnp.broadcast_to(1.0 + positions % 3, (n_slots, size)).astype(jnp.float32)
        online = (jnp.full(n_slots, size), jnp.full(n_slots, positions.sum()))
        return engine.Sent(models, weights, online)

    return train


def test_serve_in_chunks_equals_all_clients_at_once():
    """Per-client Gamma noise, weighted FedAvg and a server step with momentum (state):
    the chunked round (three chunks through the streaming form) is the unchunked one up
    to float32 sums, the momentum included, over two rounds."""
    n_slots, n, d = 2, 12, 5

    def stages(settings):
        return (
            pipeline.gamma_noise(n, settings, 2.0),
            pipeline.aggregate(("fedavg",), 0),
            pipeline.server_step(optax.sgd(0.5, momentum=0.9)),
        )

    sensitivity = jnp.array([0.0, 3.0])  # slot 0 without noise, slot 1 with
    reference = jnp.stack([jnp.zeros(d), jnp.ones(d)])
    keys = jax.random.split(jax.random.PRNGKey(1), n_slots)
    init = jax.vmap(lambda s, g: pipeline.chain(*stages(s)).init(g))(sensitivity, reference)
    results = {}
    for chunk in (0, 4):
        state, aggregates = init, []
        serve = jax.jit(  # one compilation for both rounds
            lambda st, chunk=chunk: engine.serve(
                _toy_train(n_slots, d),
                stages,
                sensitivity,
                reference,
                jnp.zeros(n_slots, jnp.int32),
                st,
                keys,
                n,
                chunk,
            )
        )
        for _ in range(2):
            aggregate, state, online, kept = serve(state)
            aggregates.append(aggregate)
        results[chunk] = (np.asarray(aggregates), jax.tree_util.tree_leaves(state), online)
        assert kept is None
    (plain, plain_state, plain_online), (chunked, chunked_state, chunked_online) = results.values()
    np.testing.assert_allclose(chunked, plain, rtol=1e-5, atol=1e-6)
    for a, b in zip(chunked_state, plain_state):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(chunked_online[0], [n, n])
    np.testing.assert_array_equal(chunked_online[1], [n * (n - 1) // 2] * 2)
    np.testing.assert_array_equal(plain_online[1], chunked_online[1])
    # Round 1 of the noiseless slot 0: θ + 0.5·(weighted mean − θ) with θ = 0.
    sent = _toy_train(n_slots, d)(0, n)
    weights = np.asarray(sent.weights[0], np.float64)
    mean = weights @ np.asarray(sent.models[0], np.float64) / weights.sum()
    np.testing.assert_allclose(plain[0, 0], 0.5 * mean, rtol=1e-5, atol=1e-6)
    # Slot 1's clients added their Gamma shares: its step is not the noiseless one.
    noiseless = 1.0 + 0.5 * (weights @ np.asarray(sent.models[1], np.float64) / weights.sum() - 1)
    assert np.abs(plain[0, 1] - noiseless).max() > 1e-3


def test_offline_when_skips_to_nan_and_every_one_evaluates():
    def evaluate(p):
        return (p * 2.0, p + 1.0)

    params = jnp.arange(3.0)
    assert engine.is_evaluated(10, 1, 4) is None
    on = engine.offline_when(evaluate, params, jnp.bool_(True))
    off = engine.offline_when(evaluate, params, jnp.bool_(False))
    np.testing.assert_array_equal(on[0], [0, 2, 4])
    assert np.isnan(np.asarray(off[0])).all() and np.isnan(np.asarray(off[1])).all()
    assert engine.evaluated_rounds(10, 4) == [4, 8, 10]
    flags = [bool(engine.is_evaluated(10, 4, t)) for t in range(10)]
    assert [t + 1 for t, f in enumerate(flags) if f] == [4, 8, 10]


@pytest.fixture(scope="module")
def es_data():
    return data.synthetic_train_test(
        2, n_train_queries=40, n_test_queries=20, n_features=6, mean_docs_per_query=15
    )


def test_foltr_es_in_chunks_and_every_kth_round_repeats_the_plain_run(es_data):
    """FOLtR-ES under data poisoning (the malicious clients span the first chunk and a
    part of the second) with privatised rewards: chunks of 4 clients and offline
    metrics every 3rd round give the plain run's curves at those rounds."""
    train, test = es_data
    config = foltr_es.FoltrEsConfig(
        n_clients=12,
        rounds=6,
        n_runs=2,
        privacy_p=0.9,
        attack="data_poisoning",
        n_malicious=5,
        learning_rate=0.01,
    )
    plain = foltr_es.run(*foltr_es.build(config, train, test))
    chunked_config = dataclasses.replace(config, client_chunk=4, eval_every=3)
    chunked = foltr_es.run(*foltr_es.build(chunked_config, train, test))
    np.testing.assert_array_equal(chunked.offline_rounds, [3, 6])
    assert chunked.offline_ndcg.shape == (2, 2) and chunked.online_ndcg.shape == (2, 6)
    np.testing.assert_allclose(chunked.online_ndcg, plain.online_ndcg, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(chunked.online_max_rr, plain.online_max_rr, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        chunked.offline_ndcg, plain.offline_ndcg[:, [2, 5]], rtol=1e-5, atol=1e-6
    )
    assert np.ptp(plain.offline_ndcg) > 0.01  # the curves moved
    np.testing.assert_array_equal(plain.offline_rounds, np.arange(1, 7))


@pytest.mark.parametrize(  # known propensities: a second program, the slow tier's
    "propensity", ["estimated", pytest.param("known", marks=pytest.mark.slow)]
)
def test_fedips_in_chunks_and_every_kth_round_repeats_the_plain_run(propensity):
    train, test = tiny_data()
    config = tiny_config(propensity, n_users=6, rounds=4)
    plain = fedips.run(*fedips.build(config, train, test)[:2])
    chunked_config = dataclasses.replace(config, client_chunk=2, eval_every=2)
    chunked = fedips.run(*fedips.build(chunked_config, train, test)[:2])
    np.testing.assert_array_equal(chunked.offline_rounds, [2, 4])
    np.testing.assert_allclose(
        chunked.offline_ndcg5, plain.offline_ndcg5[:, [1, 3]], rtol=1e-5, atol=1e-6
    )
    np.testing.assert_array_equal(chunked.clicks, plain.clicks)
    np.testing.assert_allclose(
        chunked.final_params["w"], plain.final_params["w"], rtol=1e-5, atol=1e-6
    )
    assert np.abs(plain.final_params["w"]).max() > 1e-3  # the models moved


@pytest.mark.parametrize("method", ["foltr_es", "fedips"])
def test_chunks_refuse_a_robust_aggregator_naming_the_field(method, es_data):
    train, test = es_data
    if method == "foltr_es":
        config = foltr_es.FoltrEsConfig(
            n_clients=8, client_chunk=4, aggregator="krum", attack="lie", n_malicious=1
        )
        build = foltr_es.build
    else:
        config = fedips.FedIpsConfig(
            n_users=8, client_chunk=4, aggregator="median", logging_steps=2
        )
        build = fedips.build
    with pytest.raises(ConfigError, match="needs every client") as error:
        build(config, train, test)
    assert error.value.field == "client_chunk"


@pytest.mark.slow  # two binaries end to end; the library tests above cover the chunks
def test_binaries_take_eval_every_and_client_chunk(tmp_path):
    flags = (
        "--synthetic_queries=30",
        "--synthetic_features=8",
        "--synthetic_docs_per_query=15",
        "--rounds=4",
        "--eval_every=2",
        "--client_chunk=4",
    )
    for binary, clients in (("foltr_es", "--n_clients=8"), ("fedips", "--n_users=8")):
        out = tmp_path / binary
        result = call(binary, *flags, clients, f"--output_dir={out}", cache_dir=tmp_path / "c")
        assert result.returncode == 0, result.stderr
        results = json.loads((out / "results.json").read_text())
        (cell,) = results["cells"]
        assert cell["evaluated_rounds"] == [2, 4]
        assert np.asarray(cell["curves"][f"offline_{results['metric']}"]).shape == (1, 2)
        assert results["config"]["client_chunk"] == 4 and "round 4:" in result.stdout
    bad = call(
        "fedips", *flags, "--n_users=6", f"--output_dir={tmp_path / 'bad'}", cache_dir=tmp_path
    )
    lines = bad.stderr.strip().splitlines()
    assert bad.returncode == 2 and lines[-1].startswith("fedips: error: --client_chunk: must")
    assert "n_users = 6" in lines[-1]


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_a_registered_streaming_rule_and_a_per_client_attack_run_in_chunks(synthetic_split):
    """An aggregator registered with a ``stream`` and a ``per_client`` attack pass the
    client_chunk check, and the chunked run repeats the plain one."""
    from foltr_jax.methods.fpdgd import federation
    from foltr_jax.server import aggregators, attacks

    if "unweighted_mean" not in aggregators.names():

        @aggregators.register(
            "unweighted_mean",
            "mean of the client models, ignoring n_c",
            stream=aggregators.Stream(
                part=lambda models, weights: (models.sum(axis=0), models.shape[0]),
                finish=lambda sums: sums[0] / sums[1],
            ),
        )
        def unweighted_mean(models, weights, n_malicious):
            return models.mean(axis=0)

    assert attacks.get("scaled_negation").per_client and not attacks.get("lie").per_client
    base = federation.FpdgdConfig(
        n_clients=9,
        local_updates=2,
        rounds=3,
        n_runs=2,
        aggregator="unweighted_mean",
        attack="scaled_negation",
        n_malicious=4,  # spans the first two chunks
    )
    plain = federation.run(*federation.build(base, *synthetic_split))
    chunked = federation.run(
        *federation.build(dataclasses.replace(base, client_chunk=3), *synthetic_split)
    )
    no_attack = dataclasses.replace(base, attack="none", n_malicious=0)
    honest = federation.run(*federation.build(no_attack, *synthetic_split))
    assert not np.allclose(plain.final_params["w"], honest.final_params["w"])
    np.testing.assert_allclose(chunked.final_params["w"], plain.final_params["w"], atol=1e-6)
    np.testing.assert_allclose(chunked.online_ndcg, plain.online_ndcg, rtol=1e-5, atol=1e-6)
    with pytest.raises(ConfigError, match="model attacks needs every client"):
        federation.build(dataclasses.replace(base, attack="lie", client_chunk=3), *synthetic_split)
