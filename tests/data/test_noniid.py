"""Non-IID clients (thesis ch. 4): partitions, per-client data/clicks/steps, remedies."""

import dataclasses
import json

import jax
import jax.flatten_util
import numpy as np
import pytest

from foltr_jax import data
from foltr_jax.core import metrics, rankers
from foltr_jax.data import noniid
from foltr_jax.methods.fpdgd import federation, rounds
from tests.binaries import call
from tests.engine.test_compile_once import Programs


def _config(**overrides):
    base = {
        "n_clients": 5,
        "local_updates": 3,
        "rounds": 6,
        "n_runs": 2,
        "chunk_rounds": 6,
        "click_model": "perfect",
    }
    return federation.FpdgdConfig(**{**base, **overrides})


def _run(config, train, test, plan=None, **kwargs):
    spec, arrays = federation.build(config, train, test, clients=plan, **kwargs.pop("build", {}))
    return federation.run(spec, arrays, **kwargs)


CURVES = ("offline_ndcg", "offline_mrr", "online_ndcg", "online_max_rr")


def _assert_same(a, b):
    for field in CURVES:
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)


# --- Type 2 partitions -------------------------------------------------------


@pytest.mark.parametrize("n_clients, k", [(5, 1), (10, 1), (10, 2)])
def test_type2_partition_invariants(synthetic_split, n_clients, k):
    train = synthetic_split[0]
    rows, holders = noniid.label_partition(train, n_clients, k, seed=1)
    everything = np.concatenate(rows)
    np.testing.assert_array_equal(np.sort(everything), np.arange(train.n_docs))  # once each
    assert all(len(h) == k for h in holders)
    for c, r in enumerate(rows):
        assert set(train.labels[r].tolist()) <= set(holders[c])
    for grade in range(5):
        owners = [c for c in range(n_clients) if grade in holders[c]]
        sizes = [int(np.sum(train.labels[rows[c]] == grade)) for c in owners]
        assert len(owners) == n_clients * k // 5
        assert max(sizes) - min(sizes) <= 1 and sum(sizes) == np.sum(train.labels == grade)
    flat, extra, _ = noniid.type2_setup(train, n_clients, k, seed=1)
    assert flat.n_docs == train.n_docs
    lists = extra["queries"]
    for c in range(n_clients):
        mine = lists[c][lists[c] >= 0]
        assert np.sum(flat.query_lengths[mine]) == len(rows[c])
        labels = np.concatenate(
            [
                flat.labels[o : o + n]
                for o, n in zip(flat.query_offsets[mine], flat.query_lengths[mine])
            ]
        )
        assert set(labels.tolist()) <= set(holders[c])


def test_type2_refuses_clients_without_pairs(synthetic_split):
    train = synthetic_split[0]
    few = dataclasses.replace(train, labels=np.minimum(train.labels, 3))  # no grade 4
    with pytest.raises(noniid.PartitionError, match="client .* gets no query-document pairs"):
        noniid.label_partition(few, 5, 1, seed=0, n_grades=5)
    with pytest.raises(ValueError, match="multiple of C"):
        noniid.label_partition(train, 7, 1, seed=0)


def test_type2_saturation_online_performance(synthetic_split):
    """Thesis Table 4.3: one grade per client: the grade-0 client's lists score 0 (ideal
    0), every other list 1, so online performance is 0.8·Σ_t γ^(t−1)."""
    train, test = synthetic_split
    flat, extra, _ = noniid.type2_setup(train, 5, 1, seed=0)
    rounds = 40
    result = _run(
        _config(rounds=rounds, chunk_rounds=20), flat, test, federation.ClientPlan(**extra)
    )
    np.testing.assert_allclose(result.online_ndcg, 0.8, rtol=1e-6)
    expected = 0.8 * np.sum(metrics.ONLINE_DISCOUNT ** np.arange(rounds))
    np.testing.assert_allclose(result.online_performance, expected, rtol=1e-6)
    # at T = 10,000 the same formula gives the thesis's 1589.23
    assert round(0.8 * np.sum(metrics.ONLINE_DISCOUNT ** np.arange(10_000)), 2) == 1589.23


# --- Type 1 -------------------------------------------------------------------


def _write_letor(path):
    lines = []
    for q in range(2):
        for d in range(3):
            lines.append(f"{d % 2} qid:{q} 1:{d * 0.5 + q} 2:{1 - d * 0.3}")
    path.write_text("\n".join(lines) + "\n")


def test_multi_intent_reader(tmp_path):
    letor = tmp_path / "train.txt"
    _write_letor(letor)
    (tmp_path / "a.txt").write_text("# intent a\n0 2 1\n1 0 2\n\n")
    (tmp_path / "b.txt").write_text("1 1 1\n")
    mi = noniid.read_multi_intent(letor, [tmp_path / "a.txt", tmp_path / "b.txt"], use_cache=False)
    np.testing.assert_array_equal(mi.intent_labels, [[0, 0, 1, 2, 0, 0], [0, 0, 0, 0, 1, 0]])
    np.testing.assert_array_equal(mi.merged().labels, [0, 0, 1, 2, 1, 0])
    stacked = mi.stacked()
    assert stacked.n_queries == 4 and stacked.n_docs == 12


@pytest.mark.parametrize(
    "text, problem",
    [
        ("0 1\n", "expected '<qid> <doc> <label>'"),
        ("7 0 1\n", "unknown query id '7'"),
        ("0 3 1\n", "document 3 out of range"),
        ("0 1 x\n", "document position and label must be integers"),
        ("0 1 -1\n", "label must be >= 0"),
        ("0 1 99999999999\n", "label 99999999999 is above 31"),
        ("0 1 1\n\n0 1 2\n", "query '0' document 1 already judged on line 1"),
    ],
)
def test_multi_intent_reader_refuses_bad_files(tmp_path, text, problem):
    letor = tmp_path / "train.txt"
    _write_letor(letor)
    bad = tmp_path / "bad.txt"
    bad.write_text(text)
    line = text.count("\n")
    with pytest.raises(data.LetorFormatError, match=f"bad.txt:{line}: {problem}"):
        noniid.read_multi_intent(letor, [bad], use_cache=False)
    with pytest.raises(data.DatasetError, match="no such file"):
        noniid.read_multi_intent(letor, [tmp_path / "missing.txt"], use_cache=False)


def test_intent_reshuffles_are_per_query_permutations():
    mi = noniid.synthetic_multi_intent(0, n_queries=12, n_features=6, mean_docs_per_query=10)
    assert mi.intent_labels.shape == (4, mi.base.n_docs)
    assert len({tuple(row) for row in mi.intent_labels}) == 4  # intents differ
    lists = noniid.intent_queries(mi, n_runs=5, seed=0)
    nq = mi.base.n_queries
    assert lists.shape == (5, 4, nq)
    np.testing.assert_array_equal(lists % nq, np.broadcast_to(np.arange(nq), lists.shape))
    intents = lists // nq  # [run, client, query]: every query's intents go to distinct clients
    np.testing.assert_array_equal(
        np.sort(intents, axis=1), np.broadcast_to(np.arange(4)[None, :, None], intents.shape)
    )
    assert not np.array_equal(intents[0], intents[1])


def test_synthetic_intents_are_sparse_and_disagree():
    """Like the intent-change collection: binary, sparse, intents relevant on disjoint
    documents of each query, all of them among the query's topical documents."""
    mi = noniid.synthetic_multi_intent(0, n_queries=100)
    labels = mi.intent_labels
    assert labels.shape == (4, mi.base.n_docs) and set(np.unique(labels)) == {0, 1}
    share = labels.mean(axis=1)
    assert np.all((share > 0.03) & (share < 0.08)), share  # ~5 % relevant per intent
    assert labels.sum(axis=0).max() == 1  # no document is relevant to two intents
    merged = mi.merged().labels
    assert merged.mean() == pytest.approx(labels.sum() / labels.shape[1])
    # every intent has relevant documents in most queries
    per_query = np.add.reduceat(labels, mi.base.query_offsets, axis=1)
    assert np.all((per_query > 0).mean(axis=1) > 0.7)
    # the relevant documents are topical: their shared grade is high
    grade = mi.base.labels
    assert grade[merged > 0].mean() > grade[merged == 0].mean() + 0.8
    three = noniid.synthetic_multi_intent(0, n_queries=100, n_grades=3)
    np.testing.assert_array_equal(three.intent_labels > 0, labels > 0)
    assert set(np.unique(three.intent_labels)) == {0, 1, 2}


def _ndcg10(labels, score, dataset):
    """Mean nDCG@10 of ranking every query by ``score`` (queries without a relevant
    document skipped): a plain loop, independent of foltr_jax.metrics."""
    values = []
    for start, n in zip(dataset.query_offsets, dataset.query_lengths):
        rel = labels[start : start + n].astype(float)
        if rel.max() == 0:
            continue
        gains = 2.0**rel - 1
        top = gains[np.argsort(-score[start : start + n], kind="stable")][:10]
        ideal = np.sort(gains)[::-1][:10]
        discount = 1 / np.log2(np.arange(2, 12))
        values.append((top * discount[: top.size]).sum() / (ideal * discount[: ideal.size]).sum())
    return float(np.mean(values))


def _cross_intent_transfer(mi):
    """How much the intents share their signal: a least-squares linear ranker fitted to
    each intent's labels, its nDCG@10 under the other intents over its nDCG@10 under its
    own (1: one signal for all intents; 0: nothing in common)."""
    x = np.c_[mi.base.features.astype(np.float64), np.ones(mi.base.n_docs)]
    own, other = [], []
    for k in range(mi.n_intents):
        w = np.linalg.lstsq(x, mi.intent_labels[k].astype(np.float64), rcond=None)[0]
        for j in range(mi.n_intents):
            (own if j == k else other).append(_ndcg10(mi.intent_labels[j], x @ w, mi.base))
    return np.mean(other) / np.mean(own)


def test_feature_group_intents_come_from_distinct_signals():
    """Intents whose relevance comes from disjoint feature groups share far less
    signal than the topical intents (seed 0, 100 queries: transfer 0.30 against 0.83)."""
    topical = noniid.synthetic_multi_intent(0, n_queries=100)
    distinct = noniid.feature_group_intents(topical.base, 0)
    assert _cross_intent_transfer(topical) > 0.7
    assert _cross_intent_transfer(distinct) < 0.45
    labels = distinct.intent_labels
    assert labels.shape == (4, topical.base.n_docs) and set(np.unique(labels)) == {0, 1}
    # every query: exactly max(1, round(5 % of its documents)) relevant per intent
    per_query = np.add.reduceat(labels, topical.base.query_offsets, axis=1)
    expected = np.maximum(1, np.rint(0.05 * topical.base.query_lengths))
    np.testing.assert_array_equal(per_query, np.broadcast_to(expected, per_query.shape))
    # seeded: the same seed gives the same intents, another seed others
    again = noniid.feature_group_intents(topical.base, 0).intent_labels
    np.testing.assert_array_equal(again, labels)
    assert not np.array_equal(noniid.feature_group_intents(topical.base, 1).intent_labels, labels)


def test_feature_group_intent_depends_only_on_its_group():
    """Intent k's labels are a function of its own feature group: scrambling every other
    column leaves them as they are (and changes the intents that read those columns)."""
    base = noniid.synthetic_multi_intent(2, n_queries=30).base
    groups = [list(range(8)), list(range(8, 20)), list(range(20, 32))]
    mi = noniid.feature_group_intents(base, 3, groups=groups, n_grades=3)
    assert set(np.unique(mi.intent_labels)) == {0, 1, 2}
    features = base.features.copy()
    features[:, 8:] = np.random.default_rng(0).permutation(features[:, 8:])
    scrambled = noniid.feature_group_intents(
        dataclasses.replace(base, features=features), 3, groups=groups, n_grades=3
    )
    np.testing.assert_array_equal(scrambled.intent_labels[0], mi.intent_labels[0])
    assert not np.array_equal(scrambled.intent_labels[1:], mi.intent_labels[1:])


def test_mslr_streams_and_bad_groups():
    streams = [set(s) for s in noniid.MSLR_STREAMS]
    assert len(streams) == len(noniid.MSLR_STREAM_NAMES) == 5
    assert all(len(s) == 25 for s in streams) and set().union(*streams) == set(range(125))
    assert 2 in streams[2] and 120 in streams[0]  # features 3 (title) and 121 (body), 1-based
    base = noniid.synthetic_multi_intent(0, n_queries=5).base
    for groups, problem in [
        ([[0, 1], [1, 2]], "disjoint"),
        ([[0], [40]], r"columns in \[0, 32\)"),
        ([[0, 1]], "at least 2"),
        ([[0], []], "non-empty"),
    ]:
        with pytest.raises(ValueError, match=problem):
            noniid.feature_group_intents(base, groups=groups)
    with pytest.raises(ValueError, match="3 feature groups for n_intents = 4"):
        noniid.feature_group_intents(base, groups=[[0], [1], [2]], n_intents=4)


def test_intent_files_round_trip(tmp_path):
    letor = tmp_path / "train.txt"
    _write_letor(letor)
    base = data.read_letor(letor, use_cache=False)
    mi = noniid.feature_group_intents(base, 0, groups=[[0], [1]], relevant_fraction=0.6, n_grades=3)
    assert set(np.unique(mi.intent_labels)) == {0, 1, 2}
    paths = noniid.write_intent_files(mi, tmp_path / "intents")
    assert [p.name for p in paths] == ["intent0.txt", "intent1.txt"]
    back = noniid.read_multi_intent(letor, paths, use_cache=False)
    np.testing.assert_array_equal(back.intent_labels, mi.intent_labels)


def test_topical_intents_are_the_synthetic_construction():
    mi = noniid.synthetic_multi_intent(3, n_queries=20, n_grades=3)
    again = noniid.topical_intents(mi.base, 3, n_grades=3)
    np.testing.assert_array_equal(again.intent_labels, mi.intent_labels)


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_type1_non_iid_is_below_iid_on_synthetic_intents():
    """Thesis Fig. 4.3, Table 4.2: clients with one intent each learn a worse ranker than
    clients clicking by the merged labels (linear, 4 clients, B = 5, fixed seeds; the binary
    click tables, as the experiment uses for the binary intent labels)."""
    mi = noniid.synthetic_multi_intent(0, n_queries=100)
    config = _config(n_clients=4, local_updates=5, rounds=200, chunk_rounds=200, n_grades=2)
    config = dataclasses.replace(config, click_model="informational")
    final, online = {}, {}
    for iid in (True, False):
        train, test, extra = noniid.type1_setup(mi, config.n_runs, 0, iid=iid)
        result = _run(config, train, test, federation.ClientPlan(**extra))
        final[iid] = result.offline_ndcg[:, -50:].mean(axis=1)
        online[iid] = np.asarray(result.online_performance)
    assert final[True].min() > final[False].max() + 0.01, final
    assert final[True].mean() > final[False].mean() + 0.02, final
    assert online[True].mean() > online[False].mean(), online


def test_type1_online_ndcg_averages_the_intents():
    mi = noniid.synthetic_multi_intent(1, n_queries=10, n_features=6, mean_docs_per_query=10)
    config = _config(n_clients=4, n_grades=3, rounds=3, chunk_rounds=3)
    train, test, extra = noniid.type1_setup(mi, 2, 0, iid=True)
    with_views = _run(config, train, test, federation.ClientPlan(**extra))
    without = _run(config, train, test)
    # same lists are shown (views change only the measurement), measured differently
    np.testing.assert_array_equal(with_views.offline_ndcg, without.offline_ndcg)
    assert not np.allclose(with_views.online_ndcg, without.online_ndcg)


def test_type1_iid_measured_on_merged_labels():
    """The public code's reading: the IID baseline measured on the merged labels it is
    trained on is the plain run on the merged data, and scores above the same lists
    measured under every intent (a document relevant to any intent counts)."""
    mi = noniid.synthetic_multi_intent(1, n_queries=10, n_features=6, mean_docs_per_query=10)
    config = _config(n_clients=4, n_grades=2, rounds=3, chunk_rounds=3)
    train, test, extra = noniid.type1_setup(mi, 2, 0, iid=True, iid_measure="merged")
    assert extra == {}
    np.testing.assert_array_equal(test.labels, mi.merged().labels)
    merged = _run(config, train, test)
    _assert_same(merged, _run(config, mi.merged(), mi.merged()))
    train, test, extra = noniid.type1_setup(mi, 2, 0, iid=True)
    intents = _run(config, train, test, federation.ClientPlan(**extra))
    assert np.mean(merged.online_ndcg) > np.mean(intents.online_ndcg)
    with pytest.raises(ValueError, match="iid_measure"):
        noniid.type1_setup(mi, 2, 0, iid=True, iid_measure="clients")


# --- Engine: IID unchanged, Types 3 and 4 ---------------------------------------


@pytest.fixture(scope="module")
def iid_run(synthetic_split):
    """IID FPDGD (no ClientPlan), storing client updates."""
    return _run(_config(), *synthetic_split, build={"history_every": 1})


def test_iid_plans_equal_plain_fpdgd(synthetic_split, iid_run):
    """Every client holding all queries, and one click model for all, is IID FPDGD."""
    train, test = synthetic_split
    same = federation.ClientPlan(
        queries=np.tile(np.arange(train.n_queries), (5, 1)),
        click_models=("perfect",) * 5,
        random_click_models=("perfect",),
        prox_mu=0.0,  # FedProx with μ = 0 is FPDGD exactly
    )
    result = _run(_config(), train, test, same, build={"history_every": 1})
    _assert_same(iid_run, result)
    np.testing.assert_array_equal(iid_run.history, result.history)


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_per_client_click_models_are_used(synthetic_split, iid_run):
    train, test = synthetic_split
    config = _config()
    poisoned = _run(
        config, train, test, federation.ClientPlan(click_models=("poison",) + ("perfect",) * 4)
    )
    assert not np.array_equal(iid_run.offline_ndcg, poisoned.offline_ndcg)
    pool = _run(
        config, train, test, federation.ClientPlan(random_click_models=("perfect", "pbm:2"))
    )
    assert not np.array_equal(iid_run.online_max_rr, pool.online_max_rr)


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_one_step_clients_equal_b1(synthetic_split):
    train, test = synthetic_split
    b1 = _run(_config(local_updates=1), train, test)
    masked = _run(_config(local_updates=3), train, test, federation.ClientPlan(steps=(1,) * 5))
    for field in CURVES:
        np.testing.assert_allclose(getattr(b1, field), getattr(masked, field), atol=1e-6)
    assert masked.interactions == b1.interactions == 5 * 6 * 2
    with pytest.raises(federation.ConfigError, match="steps"):
        federation.build(_config(), train, test, clients=federation.ClientPlan(steps=(4,) * 5))


def test_fedavg_weights_are_the_step_counts(synthetic_split):
    """One round from zero: the global linear model is Σ n_c θ_c / Σ n_c."""
    train, test = synthetic_split
    config = _config(local_updates=4, rounds=1, n_runs=1, chunk_rounds=1)
    steps = (1, 4, 2, 3, 1)
    result = _run(
        config, train, test, federation.ClientPlan(steps=steps), build={"history_every": 1}
    )
    assert result.interactions == sum(steps)
    updates = result.history[0, 0]  # θ_c − 0
    weights = np.asarray(steps, np.float32)
    np.testing.assert_allclose(
        result.final_params["w"][0], weights @ updates / weights.sum(), atol=1e-6
    )


# --- Remedies ---------------------------------------------------------------


def test_fedprox_keeps_local_models_near_global(synthetic_split, iid_run):
    strong = _run(
        _config(), *synthetic_split, federation.ClientPlan(prox_mu=10.0), build={"history_every": 1}
    )
    drift = np.linalg.norm(iid_run.history, axis=-1).mean()
    assert np.linalg.norm(strong.history, axis=-1).mean() < 0.8 * drift


def test_fedper_keeps_personal_layers(synthetic_split):
    train, test = synthetic_split
    config = _config(ranker="neural", rounds=2, n_runs=1, chunk_rounds=2)
    result = _run(
        config, train, test, federation.ClientPlan(personal=("w2",)), build={"history_every": 1}
    )
    final, personal = result.final_params
    assert personal["w2"].shape == (1, 5, 64)
    assert not np.allclose(personal["w2"][0, 0], personal["w2"][0, 1])
    # the base layer (w1, b1) is FedAvg'd: θ_T = θ_0 + Σ_rounds mean_c Δθ_c
    key = jax.random.fold_in(jax.random.PRNGKey(config.seed), 0)
    init = rankers.make_ranker("neural", 8).init(jax.random.split(key)[0])
    unravel = jax.flatten_util.ravel_pytree(init)[1]
    mean_updates = unravel(result.history[0].mean(axis=1).sum(axis=0))
    for name in ("w1", "b1"):
        np.testing.assert_allclose(
            final[name][0], np.asarray(init[name]) + mean_updates[name], atol=1e-5
        )
    assert np.all(final["b1"][0] != np.asarray(init["b1"]))  # the biases trained
    with pytest.raises(federation.ConfigError, match="personal"):
        federation.build(_config(), train, test, clients=federation.ClientPlan(personal=("w",)))


def _fedper(synthetic_split, evaluation, **overrides):
    config = _config(ranker="neural", **{"rounds": 4, "chunk_rounds": 4, **overrides})
    plan = federation.ClientPlan(personal=("w2",), personal_eval=evaluation)
    spec, arrays = federation.build(config, *synthetic_split, clients=plan)
    return spec, arrays, federation.run(spec, arrays)


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_fedper_evaluates_the_clients_or_the_server_model(synthetic_split):
    """'clients': mean nDCG of the personalised models; 'server': the FedAvg model.
    Training is the same under both: only the offline curves differ."""
    _, _, mean_of_clients = _fedper(synthetic_split, "clients")
    spec, arrays, server = _fedper(synthetic_split, "server")
    for field in ("online_ndcg", "online_max_rr", "initial_offline_ndcg"):
        np.testing.assert_array_equal(getattr(server, field), getattr(mean_of_clients, field))
    (g, personal), (g2, personal2) = mean_of_clients.final_params, server.final_params
    for name in g:
        np.testing.assert_allclose(g[name], g2[name], atol=1e-6)
    np.testing.assert_allclose(personal["w2"], personal2["w2"], atol=1e-6)
    # the server model's w2 is the FedAvg (equal steps: the mean) of the personal layers
    np.testing.assert_allclose(g["w2"], personal["w2"].mean(axis=1), atol=1e-6)
    # the last offline values, recomputed from the final models
    evaluate = jax.jit(lambda params: rounds.evaluate(spec, arrays, params)[0])
    for r in range(2):
        model = {k: v[r] for k, v in g.items()}
        assert server.offline_ndcg[r, -1] == pytest.approx(float(evaluate(model)), abs=1e-6)
        own = [float(evaluate({**model, "w2": personal["w2"][r, c]})) for c in range(5)]
        assert mean_of_clients.offline_ndcg[r, -1] == pytest.approx(np.mean(own), abs=1e-6)
        assert len(set(own)) > 1  # the personalised models rank differently
    assert np.abs(server.offline_ndcg - mean_of_clients.offline_ndcg).max() > 1e-3


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_fedper_evaluations_agree_with_one_client(synthetic_split):
    """One client: the FedAvg of its personal layer is that layer, so both options agree."""
    *_, mean_of_clients = _fedper(synthetic_split, "clients", n_clients=1)
    *_, server = _fedper(synthetic_split, "server", n_clients=1)
    np.testing.assert_allclose(server.offline_ndcg, mean_of_clients.offline_ndcg, atol=1e-6)
    np.testing.assert_allclose(server.offline_mrr, mean_of_clients.offline_mrr, atol=1e-6)


@pytest.mark.parametrize(
    "plan, message",
    [
        (federation.ClientPlan(personal=("w2",), personal_eval="mean"), "must be one of"),
        (federation.ClientPlan(personal_eval="clients"), "applies to FedPer only"),
    ],
)
def test_fedper_evaluation_names_are_checked(synthetic_split, plan, message):
    with pytest.raises(federation.ConfigError, match=message) as error:
        federation.build(_config(ranker="neural"), *synthetic_split, clients=plan)
    assert error.value.field == "personal_eval"


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_data_sharing_warm_up(synthetic_split):
    train, test = synthetic_split
    config = _config(n_runs=1)
    shared, rest = noniid.share_queries(train, 0.1, seed=0)
    assert shared.n_queries == 4 and rest.n_queries == 36
    params, warm = federation.warm_up(config, shared, test, interactions=30)
    assert warm.offline_ndcg.shape == (1, 30) and np.any(params["w"] != 0)
    flat, extra, _ = noniid.type2_setup(rest, 5, 1, seed=0, shared=shared)
    lists = extra["queries"]
    shared_ids = np.arange(flat.n_queries - shared.n_queries, flat.n_queries)
    for c in range(5):
        assert set(shared_ids) <= set(lists[c].tolist())
    result = _run(config, flat, test, federation.ClientPlan(**extra), initial_params=params)
    np.testing.assert_allclose(result.initial_offline_ndcg, warm.offline_ndcg[:, -1], rtol=1e-6)


# --- The binary ---------------------------------------------------------------

SMALL = [
    "--synthetic_queries=30",
    "--synthetic_features=8",
    "--synthetic_docs_per_query=15",
    "--rounds=4",
    "--chunk_rounds=4",
    "--n_runs=2",
]


def _binary(*args, tmp_path):
    return call("noniid", *args, cache_dir=tmp_path / "cache")


def test_binary_writes_results(tmp_path):
    # One run: determinism of the binaries is checked on experiments.fpdgd, which shares
    # the engine and the key derivation; the non-IID plans come from seeded NumPy generators.
    result = _binary(
        "--type=2",
        *SMALL,
        "--noiid",
        "--remedies=sharing",
        "--warmup_interactions=5",
        f"--output_dir={tmp_path / 'a'}",
        tmp_path=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "results in" in result.stdout and "round 4/4" in result.stderr
    a = json.loads((tmp_path / "a" / "results.json").read_text())
    assert [c["name"] for c in a["cells"]] == ["noniid", "sharing"]
    for cell in a["cells"]:
        curves = cell["curves"]
        assert np.shape(curves["offline_ndcg"]) == np.shape(curves["online_ndcg"]) == (2, 4)
        assert len(cell["per_run"]["online_performance"]) == 2
        assert cell["evaluated_rounds"] == [1, 2, 3, 4]
        assert cell["labels"]["group"].startswith("non-IID type 2, #R=")
    assert a["cells"][0]["setting"]["grades"] == [
        [g] for g in np.ravel(a["cells"][0]["setting"]["grades"])
    ]


@pytest.mark.slow  # three programs of tens of seconds each
def test_the_noniid_and_fedprox_cells_are_one_program(tmp_path):
    # FedProx at mu = 0 is FedAvg: beside FedProx cells the non-IID cell runs as one, so all
    # of them are one compiled program, and it computes what it computes alone.
    with Programs() as seen:
        both = _binary(
            "--type=2", *SMALL, "--noiid", "--remedies=fedprox", "--prox_mu=0.1,1",
            f"--output_dir={tmp_path / 'both'}", tmp_path=tmp_path,
        )  # fmt: skip
    assert both.returncode == 0, both.stderr
    assert seen.seen["compiled"].count("run_chunk") == 1
    assert seen.seen["compiled"].count("_initial") == 1
    alone = _binary("--type=2", *SMALL, "--noiid", f"--output_dir={tmp_path / 'alone'}",
                    tmp_path=tmp_path)  # fmt: skip
    assert alone.returncode == 0, alone.stderr
    cells = {
        name: {
            c["name"]: c
            for c in json.loads((tmp_path / name / "results.json").read_text())["cells"]
        }
        for name in ("both", "alone")
    }
    assert list(cells["both"]) == ["noniid", "fedprox_mu=0.1", "fedprox_mu=1"]
    for part in ("curves", "per_run"):
        assert cells["both"]["noniid"][part] == cells["alone"]["noniid"][part]
    assert cells["both"]["fedprox_mu=1"]["curves"] != cells["alone"]["noniid"]["curves"]


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_binary_runs_non_iid_clients_under_attack_with_a_defence(tmp_path):
    # Type 3 (five PBM clients) with a LIE attacker, Krum and DP in one run
    result = _binary(
        "--type=3",
        *SMALL,
        "--noiid",
        "--attack=lie",
        "--aggregator=krum",
        "--n_malicious=1",
        "--clicks=pbm",
        "--epsilon=4.5",
        "--sensitivity=5",
        f"--output_dir={tmp_path / 'a'}",
        tmp_path=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    a = json.loads((tmp_path / "a" / "results.json").read_text())
    config = a["config"]
    assert (config["attack"], config["aggregator"], config["n_malicious"]) == ("lie", "krum", 1)
    assert config["sensitivity"] == 5.0
    assert np.isfinite(a["cells"][0]["curves"]["offline_ndcg"]).all()


@pytest.mark.parametrize(
    "flag, message",
    [
        ("--grades_per_client=3", "--grades_per_client: must be 1 or 2"),
        ("--remedies=fedper", "--remedies: fedper keeps the last layer personal"),
        ("--fedper_eval=mean", "--fedper_eval: must be one of ('server', 'clients')"),
        ("--n_clients=7", "--n_clients:"),
        ("--attack=lie", "--n_malicious: attack 'lie' needs n_malicious >= 1"),
    ],
)
def test_binary_refuses_bad_flags(tmp_path, flag, message):
    result = _binary(
        "--type=2", *SMALL, flag, f"--output_dir={tmp_path / 'out'}", tmp_path=tmp_path
    )
    assert result.returncode == 2
    assert f"noniid: error: {message}" in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_binary_measures_the_type1_iid_baseline_on_merged_labels_when_asked(tmp_path):
    """--type1_iid_measure=merged: the IID cell is measured on the merged labels it trains
    on (the public code) instead of under every intent's; the non-IID cell is untouched."""
    found = {}
    for measure in ("intents", "merged"):
        out = tmp_path / measure
        result = _binary(
            "--type=1",
            *SMALL,
            f"--type1_iid_measure={measure}",
            f"--output_dir={out}",
            tmp_path=tmp_path,
        )
        assert result.returncode == 0, result.stderr
        found[measure] = json.loads((out / "results.json").read_text())
        assert found[measure]["noniid"]["type1_iid_measure"] == measure
    iid = {m: next(c for c in r["cells"] if c["name"] == "iid") for m, r in found.items()}
    noniid = {m: next(c for c in r["cells"] if c["name"] == "noniid") for m, r in found.items()}
    assert noniid["intents"]["curves"] == noniid["merged"]["curves"]  # untouched
    # The same initial models (same seed), measured on other labels.
    merged, intents = (iid[m]["per_run"]["initial_offline_ndcg"] for m in ("merged", "intents"))
    assert not np.allclose(merged, intents)
