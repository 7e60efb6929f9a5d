"""The README's "Add a method": federated DBGD written outside the package
(examples/federated_dbgd.py) runs on the public engine with client chunks, an attack and
a robust aggregator (over devices: tests/engine/test_devices.py)."""

import dataclasses
import sys

import jax
import numpy as np
import pytest

from tests.sample_data import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "examples"))
import federated_dbgd as dbgd

from foltr_jax import data


def slow_team_draft(ranking_a, ranking_b, coins):
    """Team-draft interleaving as Radlinski et al. (2008) describe it, in plain Python."""
    used, shown, from_b, picks = set(), [], [], {False: 0, True: 0}
    for coin in coins:
        b_turn = picks[True] < picks[False] or (picks[True] == picks[False] and bool(coin))
        doc = next(d for d in (ranking_b if b_turn else ranking_a) if d not in used)
        used.add(doc)
        shown.append(doc)
        from_b.append(b_turn)
        picks[b_turn] += 1
    return shown, from_b


def test_team_draft_matches_the_slow_interleaving():
    rng = np.random.default_rng(0)
    for trial in range(20):
        n, k = int(rng.integers(3, 15)), int(rng.integers(1, 8))
        k = min(k, n)
        a, b = rng.permutation(n), rng.permutation(n)
        key = jax.random.PRNGKey(trial)
        shown, from_b = dbgd.team_draft(key, jax.numpy.asarray(a), jax.numpy.asarray(b), k)
        coins = np.asarray(jax.random.bernoulli(key, shape=(k,)))
        expected = slow_team_draft(a.tolist(), b.tolist(), coins)
        assert np.asarray(shown).tolist() == expected[0]
        assert np.asarray(from_b).tolist() == expected[1]
        assert abs(int(np.sum(from_b)) - (k - int(np.sum(from_b)))) <= 1  # fair split


@pytest.fixture(scope="module")
def small():
    return data.synthetic_train_test(
        0, n_train_queries=40, n_test_queries=20, n_features=8, mean_docs_per_query=12
    )


BASE = dbgd.DbgdConfig(n_clients=12, local_updates=3, rounds=30, n_runs=2, click_model="perfect")


def test_federated_dbgd_learns_and_chunks_give_the_same_run(small):
    plain = dbgd.run_dbgd(BASE, *small)
    assert np.all(plain.offline_ndcg[:, -1] > plain.initial_offline_ndcg + 0.05)
    chunked = dbgd.run_dbgd(dataclasses.replace(BASE, client_chunk=4, eval_every=5), *small)
    np.testing.assert_array_equal(chunked.offline_rounds, [5, 10, 15, 20, 25, 30])
    np.testing.assert_allclose(chunked.online_ndcg, plain.online_ndcg, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        chunked.offline_ndcg, plain.offline_ndcg[:, 4::5], rtol=1e-5, atol=1e-6
    )


@pytest.mark.slow  # a second program of the example; the test above runs it in the fast tier
def test_federated_dbgd_under_attack_with_a_robust_rule(small):
    attacked = dataclasses.replace(BASE, attack="lie", n_malicious=3, rounds=10)
    plain = dbgd.run_dbgd(dataclasses.replace(BASE, rounds=10), *small)
    lie = dbgd.run_dbgd(attacked, *small)
    defended = dbgd.run_dbgd(dataclasses.replace(attacked, aggregator="trimmed_mean"), *small)
    for result in (lie, defended):
        assert np.all(np.isfinite(result.final_params))
        assert not np.allclose(result.final_params, plain.final_params)
    assert not np.allclose(lie.final_params, defended.final_params)
