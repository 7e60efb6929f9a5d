"""FPDGD on the default synthetic data: it keeps learning and orders clicks."""

import numpy as np
import pytest

from foltr_jax import data
from foltr_jax.methods.fpdgd import federation

# Learning curves over 100 rounds and the click models' ordering: the slow tier's, with the
# papers' orderings (tests/experiments/test_experiments.py checks in the fast tier that a run
# learns).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def default_data():
    return data.synthetic_train_test(0)


@pytest.fixture(scope="module")
def click_grid(default_data):
    """Linear FPDGD, 50 clients x 2 interactions x 100 rounds, the three CCM click
    models in one program, 2 runs each: offline nDCG@10 [model, run, round]."""
    config = federation.FpdgdConfig(
        n_clients=50, local_updates=2, rounds=100, n_runs=2, chunk_rounds=100, seed=0
    )
    names = ("perfect", "navigational", "informational")
    settings = [federation.Setting(click_model=name) for name in names]
    result = federation.run(*federation.build(config, *default_data, settings))
    curves = np.asarray(result.offline_ndcg).reshape(3, 2, -1)
    initial = np.asarray(result.initial_offline_ndcg).reshape(3, 2)
    return dict(zip(names, curves)), initial


def test_linear_ranker_improves_well_after_round_one(click_grid):
    curves, initial = click_grid
    shares = []
    for name, curve in curves.items():
        first, last = curve[:, 0], curve[:, -10:].mean(axis=1)
        assert np.all(first > initial[0] + 0.03), (name, first)  # learns at once ...
        assert np.all(last > first + 0.06), (name, first, last)  # ... and keeps learning
        shares.append((first - initial[0]) / (last - initial[0]))
    # Round 1 brings well under the gain of 100 rounds (about half here; the default
    # run of 1,000 clients: 0.15 of 0.26 by round 200, README).  The data before issue
    # 15 item 5 brought about 80 % in round 1.
    assert np.mean(shares) < 0.7, shares


def test_click_models_are_ordered(click_grid):
    curves, _ = click_grid
    final = {name: curve[:, -20:].mean() for name, curve in curves.items()}
    assert final["perfect"] > final["navigational"] > final["informational"], final
