"""FPDGD rounds: determinism, invariances, aggregation, learning."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from foltr_jax import data, engine
from foltr_jax.core import click_models
from foltr_jax.methods.fpdgd import federation, pdgd, rounds
from foltr_jax.methods.fpdgd import lanes as fpdgd_lanes
from foltr_jax.methods.fpdgd.config import centralised
from tests.methods.fpdgd import reference_fpdgd


def _run(synthetic_split, **overrides):
    settings = dict(
        n_clients=8, local_updates=3, rounds=12, n_runs=2, chunk_rounds=5, click_model="perfect"
    )
    config = federation.FpdgdConfig(**{**settings, **overrides})
    spec, arrays = federation.build(config, *synthetic_split)
    return spec, federation.run(spec, arrays)


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_same_seed_same_curves_and_chunking_does_not_matter(synthetic_split):
    _, a = _run(synthetic_split)
    _, b = _run(synthetic_split, chunk_rounds=12)
    for field in ("offline_ndcg", "online_ndcg", "online_max_rr", "offline_mrr"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert a.offline_ndcg.shape == (2, 12)
    # the two runs are independent repetitions
    assert not np.array_equal(a.online_ndcg[0], a.online_ndcg[1])
    _, c = _run(synthetic_split, seed=1)
    assert not np.array_equal(a.online_ndcg, c.online_ndcg)


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_scoring_width_does_not_change_results(synthetic_split, monkeypatch):
    spec, base = _run(synthetic_split)
    assert len(spec.widths) > 1
    monkeypatch.setattr(federation, "window_widths", lambda longest, k: (max(longest, k),))
    single_spec, single = _run(synthetic_split)
    assert len(single_spec.widths) == 1
    np.testing.assert_allclose(base.offline_ndcg, single.offline_ndcg, atol=1e-5)
    np.testing.assert_allclose(base.online_ndcg, single.online_ndcg, atol=1e-5)


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_runs_do_not_depend_on_how_many_run_together(synthetic_split):
    _, two = _run(synthetic_split)
    _, one = _run(synthetic_split, n_runs=1)
    np.testing.assert_allclose(two.online_ndcg[:1], one.online_ndcg, atol=1e-6)
    np.testing.assert_allclose(two.offline_ndcg[:1], one.offline_ndcg, atol=1e-6)


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_window_scoring_and_display_groups_do_not_change_results(synthetic_split, monkeypatch):
    """'map' and 'vmap' scoring give the same run; so does sampling in display groups
    (4 written out with 'map', 16 looped with 'vmap'), which a run this small leaves to
    one group (fpdgd_lanes.GROUPED_SAMPLING_BYTES)."""
    _, one_group = _run(synthetic_split)
    runs = {"vmap": _run(synthetic_split, window_scoring="vmap")[1]}
    monkeypatch.setattr(fpdgd_lanes, "GROUPED_SAMPLING_BYTES", 0)
    runs["map, 4 groups"] = _run(synthetic_split)[1]
    runs["vmap, 16 groups"] = _run(synthetic_split, window_scoring="vmap")[1]
    for name, run in runs.items():
        for curve in ("offline_ndcg", "online_ndcg"):
            np.testing.assert_allclose(
                getattr(run, curve), getattr(one_group, curve), atol=1e-6, err_msg=name
            )


@pytest.mark.parametrize("client_chunk", [0, 1])
def test_a_rounds_server_side_is_fedavg_or_the_sum_of_updates(synthetic_split, client_chunk):
    """The server's side of an FPDGD round as ``FpdgdMethod.round`` runs it: ``engine.serve``
    of what three clients send (their models, weight B each) through the slot's pipeline
    (``FpdgdMethod.stages`` of its settings) from its initial server state.  FedAvg gives the
    models' mean; the 'batch' baseline's aggregation the start plus the sum of the clients'
    updates.  A round streamed one client at a time gives the same up to float sums."""
    rng = np.random.default_rng(0)
    for aggregation in ("fedavg", "sum_of_updates"):
        config = federation.FpdgdConfig(
            n_clients=3, local_updates=2, n_runs=1, aggregation=aggregation
        )
        spec, arrays = federation.build(config, *synthetic_split)
        d = engine.flatten(jax.vmap(spec.ranker.init)(jax.random.split(jax.random.PRNGKey(0), 1)))
        start = jnp.asarray(rng.normal(size=d.shape), jnp.float32)  # [1 slot, d]
        models = jnp.asarray(rng.normal(size=(1, 3, d.shape[1])), jnp.float32)
        settings = arrays.settings  # one setting, one run: the slot's settings

        def train(first, size, models=models):
            chunk = jax.lax.dynamic_slice_in_dim(models, first, size, axis=1)
            return engine.Sent(chunk, jnp.full(chunk.shape[:2], 2.0), {})

        aggregate, _, _, _ = engine.serve(
            train,
            spec.stages,
            settings,
            start,
            settings.n_malicious,
            rounds.initial_server_state(spec, arrays, start),
            jax.random.split(jax.random.PRNGKey(1), 1),
            n_clients=3,
            client_chunk=client_chunk,
        )
        if aggregation == "fedavg":
            want = np.mean(np.asarray(models, np.float64), axis=1)
        else:
            want = np.asarray(start, np.float64) + np.sum(models - start[:, None], axis=1)
        np.testing.assert_allclose(aggregate, want, rtol=1e-6, atol=1e-6, err_msg=aggregation)


def test_centralised_forms():
    cfg = federation.FpdgdConfig(n_clients=100, local_updates=4)
    assert centralised(cfg, "same_updates").n_clients == 1
    assert centralised(cfg, "same_updates").local_updates == 1
    assert centralised(cfg, "same_budget").local_updates == 400
    batch = centralised(cfg, "batch")
    assert (batch.n_clients, batch.local_updates, batch.aggregation) == (400, 1, "sum_of_updates")
    with pytest.raises(ValueError):
        centralised(cfg, "other")


@pytest.mark.parametrize(
    "field, value",
    [
        ("n_clients", 0),
        ("local_updates", -1),
        ("learning_rate", 0.0),
        ("ranker", "tree"),
        ("click_model", "perfekt"),
        ("n_grades", 4),
    ],
)
def test_bad_settings_name_the_field(field, value):
    config = dataclasses.replace(federation.FpdgdConfig(), **{field: value})
    with pytest.raises(federation.ConfigError) as error:
        config.validate()
    assert error.value.field == field


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
@pytest.mark.parametrize("ranker", ["linear", "neural"])
def test_fpdgd_learns_on_synthetic_data(ranker):
    train, test = data.synthetic_train_test(0, n_train_queries=100, n_test_queries=50)
    config = federation.FpdgdConfig(
        n_clients=20, local_updates=2, rounds=60, n_runs=3, click_model="perfect", ranker=ranker
    )
    spec, arrays = federation.build(config, train, test)
    result = federation.run(spec, arrays)
    gain = result.offline_ndcg[:, -5:].mean(axis=1) - result.initial_offline_ndcg
    assert np.all(gain > 0.1), gain
    if ranker == "linear":  # online quality rises too (the neural ranker is slower)
        assert np.all(result.online_ndcg[:, -10:].mean(1) > result.online_ndcg[:, :3].mean(1))


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_neural_ranker_through_privacy_attacks_and_robust_aggregators(synthetic_split):
    """Every server stage sees the neural pytree (hidden biases too) flattened: DP clips
    all of it, attacks and robust aggregators run, and the biases train."""
    settings = [
        federation.Setting(click_model="perfect", sensitivity=2.0, epsilon=1e6),
        federation.Setting(click_model="perfect", n_malicious=1, attack="lie", aggregator="krum"),
        federation.Setting(
            click_model="perfect",
            n_malicious=1,
            attack="fang_trimmed_mean_full",
            aggregator="trimmed_mean",
        ),
        federation.Setting(click_model="perfect", n_malicious=1, attack="scaled_negation"),
    ]
    config = federation.FpdgdConfig(
        n_clients=5, local_updates=3, rounds=4, n_runs=1, chunk_rounds=4, ranker="neural"
    )
    spec, arrays = federation.build(config, *synthetic_split, settings)
    params = federation.run(spec, arrays).final_params
    assert set(params) == {"w1", "b1", "w2"}
    flat = np.concatenate([params[k].reshape(len(settings), -1) for k in params], axis=1)
    assert np.all(np.isfinite(flat)) and np.all(params["b1"] != 0)
    # DP: every client's model is clipped to factor·Δ = 1; their average stays inside
    # (the start, of norm ≈ 2.8, is far outside); the noise (Δ/ε) is negligible
    assert np.linalg.norm(flat[0]) <= 1.0 + 1e-3
    assert np.all(np.linalg.norm(flat[1:3], axis=1) > 1.5)  # robust aggregators: no clipping


def _random_params(ranker, rng):
    """Parameters with every entry non-zero (neural: hidden biases too), scores of order 1."""
    if ranker == "linear":
        return {"w": jnp.asarray(rng.normal(size=8), jnp.float32)}
    return {
        "w1": jnp.asarray(rng.normal(size=(8, 64)), jnp.float32),
        "b1": jnp.asarray(rng.normal(size=64), jnp.float32),
        "w2": jnp.asarray(rng.normal(size=64) / 4, jnp.float32),
    }


def _reference_theta(ranker, params):
    """The NumPy reference's flat parameter vector (neural: W1, b1, w2)."""
    if ranker == "linear":
        return np.asarray(params["w"], np.float64)
    return reference_fpdgd.Neural(8).join(*(np.asarray(params[k]) for k in ("w1", "b1", "w2")))


@pytest.mark.parametrize("ranker", ["linear", "neural"])
@pytest.mark.parametrize("seed", range(6))
def test_one_interaction_matches_the_reference_update(synthetic_split, seed, ranker):
    """display_list + pdgd_update move the model by η × the pair-by-pair PDGD gradient
    (the neural ranker's per-document gradients written out by hand in the reference)."""
    train, test = synthetic_split
    config = federation.FpdgdConfig(click_model="informational", learning_rate=0.1, ranker=ranker)
    spec, arrays = federation.build(config, train, test)
    rng = np.random.default_rng(seed)
    params = _random_params(ranker, rng)
    query = int(rng.integers(train.n_queries))
    start, length = int(train.query_offsets[query]), int(train.query_lengths[query])
    key_rank, key_click = jax.random.split(jax.random.PRNGKey(seed))
    scores = spec.ranker.apply(params, arrays.train.features[start : start + spec.window])
    displayed = pdgd.display_list(key_rank, scores, length, 10)
    click_model = jax.tree_util.tree_map(lambda x: x[0], arrays.click_table)
    new, outcome = pdgd.pdgd_update(
        params,
        key_click,
        query,
        displayed,
        arrays.train,
        spec.ranker,
        click_model,
        learning_rate=0.1,
    )
    n_shown = min(length, 10)
    ranking = np.asarray(displayed.ranking)[:n_shown]
    shown = jnp.arange(10) < n_shown
    labels = jnp.where(shown, arrays.train.labels[start + displayed.ranking], 0)
    clicks = np.asarray(click_models.simulate_clicks(key_click, click_model, labels, shown))[
        :n_shown
    ]
    features = train.features[start : start + length].astype(np.float64)
    model = reference_fpdgd.make_ranker(ranker, train.n_features)
    theta = _reference_theta(ranker, params)
    expected = reference_fpdgd.pdgd_gradient(
        model.doc_gradients(theta, features), model.scores(theta, features), ranking, clicks
    )
    got = _reference_theta(ranker, new) - theta
    np.testing.assert_allclose(got, 0.1 * expected, atol=2e-6 if ranker == "linear" else 1e-5)
    if ranker == "neural" and clicks.any() and not clicks.all():
        b1 = slice(8 * 64, 8 * 64 + 64)
        assert np.abs(got[b1]).max() > 1e-4  # the hidden biases move
    expected_rr = 1.0 / (np.argmax(clicks) + 1) if clicks.any() else 0.0
    assert float(outcome.max_rr) == pytest.approx(expected_rr)


def test_window_scoring_auto_follows_the_backend_and_explicit_values_stay():
    from foltr_jax.engine.config import resolve_window_scoring

    assert jax.default_backend() == "cpu"  # the suite runs on CPU
    assert resolve_window_scoring("auto") == "map"
    assert resolve_window_scoring("vmap") == "vmap"
    train, test = data.synthetic_train_test(
        1, n_train_queries=10, n_test_queries=5, n_features=4, mean_docs_per_query=12
    )
    assert federation.FpdgdConfig().window_scoring == "auto"
    spec, _ = federation.build(federation.FpdgdConfig(n_clients=2, rounds=1), train, test)
    assert spec.config.window_scoring == "map"
    explicit = federation.FpdgdConfig(n_clients=2, rounds=1, window_scoring="vmap")
    assert federation.build(explicit, train, test)[0].config.window_scoring == "vmap"
    with pytest.raises(federation.ConfigError, match="window_scoring"):
        federation.FpdgdConfig(window_scoring="gpu").validate()


def test_display_groups_zero_follows_the_window_scoring_and_explicit_values_stay():
    from foltr_jax.engine.config import DISPLAY_GROUPS, resolve_display_groups

    assert resolve_display_groups(0, "map") == DISPLAY_GROUPS["map"] == 4
    assert resolve_display_groups(0, "vmap") == DISPLAY_GROUPS["vmap"] == 16
    assert resolve_display_groups(3, "vmap") == 3
    train, test = data.synthetic_train_test(
        1, n_train_queries=10, n_test_queries=5, n_features=4, mean_docs_per_query=12
    )
    assert federation.FpdgdConfig().display_groups == 0
    for scoring, groups in (("auto", 4), ("vmap", 16)):
        config = federation.FpdgdConfig(n_clients=2, rounds=1, window_scoring=scoring)
        spec, _ = federation.build(config, train, test)
        assert spec.config.display_groups == spec.lane_spec.display_groups == groups
    explicit = federation.FpdgdConfig(n_clients=2, rounds=1, display_groups=2)
    assert federation.build(explicit, train, test)[0].lane_spec.display_groups == 2
    with pytest.raises(federation.ConfigError, match="display_groups"):
        federation.FpdgdConfig(display_groups=-1).validate()


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_server_optimiser_on_fpdgd(synthetic_split, optimizer):
    """A server optimiser stage (FedOpt) carried through the run: server SGD with η_s = 1 is
    FedAvg; Adam changes the run; chunked clients give the unchunked run (momentum, chunked,
    in tests/methods/fpdgd/test_scale.py)."""
    base = federation.FpdgdConfig(
        n_clients=6, local_updates=2, rounds=6, n_runs=2, chunk_rounds=4, click_model="perfect"
    )

    def run(config):
        spec, arrays = federation.build(config, *synthetic_split)
        return federation.run(spec, arrays)

    plain = run(base)
    config = dataclasses.replace(
        base, server_optimizer=optimizer, server_learning_rate=1.0 if optimizer == "sgd" else 0.05
    )
    with_optimizer = run(config)
    chunked = run(dataclasses.replace(config, client_chunk=3))
    np.testing.assert_allclose(chunked.offline_ndcg, with_optimizer.offline_ndcg, atol=1e-5)
    if optimizer == "sgd":
        np.testing.assert_allclose(with_optimizer.offline_ndcg, plain.offline_ndcg, atol=1e-5)
        np.testing.assert_allclose(
            with_optimizer.final_params["w"], plain.final_params["w"], rtol=1e-4, atol=1e-6
        )
    else:
        assert not np.allclose(with_optimizer.final_params["w"], plain.final_params["w"])


def test_server_optimiser_settings_are_checked():
    with pytest.raises(federation.ConfigError, match="server_optimizer"):
        federation.FpdgdConfig(server_optimizer="yogi").validate()
    with pytest.raises(federation.ConfigError, match="server_learning_rate"):
        federation.FpdgdConfig(server_optimizer="adam", server_learning_rate=0).validate()
    with pytest.raises(federation.ConfigError, match="server_optimizer"):
        federation.FpdgdConfig(server_optimizer="adam", aggregation="sum_of_updates").validate()


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_first_step_scores_are_shared_per_slot_only_when_that_is_less_work():
    """A slot scores the whole training set for its clients' first step only when its
    clients together would score as many documents (|C| x mean length >= n_docs); the
    slot count does not enter (each slot scores its own model).  Both paths rank alike."""
    train, test = data.synthetic_train_test(
        0, n_train_queries=20, n_test_queries=5, n_features=4, mean_docs_per_query=10
    )
    mean_length = train.n_docs / train.n_queries
    few = federation.FpdgdConfig(n_clients=2, local_updates=2, rounds=2, n_runs=60)
    assert 2 * mean_length < train.n_docs <= 120 * mean_length  # shared under the old rule
    spec, arrays = federation.build(few, train, test)
    assert not spec.shared_first_scores
    many = dataclasses.replace(few, n_clients=int(train.n_queries), n_runs=1)
    assert federation.build(many, train, test)[0].shared_first_scores
    per_lane = federation.run(spec, arrays)
    shared = federation.run(dataclasses.replace(spec, shared_first_scores=True), arrays)
    np.testing.assert_array_equal(shared.online_ndcg, per_lane.online_ndcg)
    np.testing.assert_allclose(shared.offline_ndcg, per_lane.offline_ndcg, atol=1e-3)
