"""Whole learning curves: the JAX engine against the plain NumPy reference simulator.

The two share no code (different random streams), so final offline nDCG@10 is
compared as a distribution over runs: the difference of means must lie within
four standard errors.  Linear and neural rankers (the neural reference writes its
gradient, hidden biases included, by hand).
"""

import numpy as np
import pytest

from foltr_jax import data
from foltr_jax.methods.fpdgd import federation
from tests.methods.fpdgd import reference_fpdgd

N_RUNS = 8


@pytest.fixture(scope="module")
def dataset():
    return data.synthetic_train_test(
        5, n_train_queries=60, n_test_queries=40, n_features=10, mean_docs_per_query=25
    )


# Two of the four pairs run in the fast tier (each model and each click model once); the
# other two, tens of seconds each, in the slow tier.
@pytest.mark.parametrize(
    "click_model, ranker",
    [
        ("perfect", "linear"),
        ("informational", "neural"),
        pytest.param("informational", "linear", marks=pytest.mark.slow),
        pytest.param("perfect", "neural", marks=pytest.mark.slow),
    ],
)
def test_final_offline_ndcg_matches_reference(dataset, click_model, ranker):
    train, test = dataset
    settings = dict(n_clients=5, local_updates=3, rounds=15, click_model=click_model)
    config = federation.FpdgdConfig(n_runs=N_RUNS, seed=0, ranker=ranker, **settings)
    ours = federation.run(*federation.build(config, train, test)).offline_ndcg[:, -1]
    theirs = np.array(
        [
            reference_fpdgd.run_reference(
                train, test, seed=s, init="zero", ranker=ranker, **settings
            )["offline_ndcg_after"][-1]
            for s in range(N_RUNS)
        ]
    )
    stderr = np.sqrt(ours.var(ddof=1) / N_RUNS + theirs.var(ddof=1) / N_RUNS)
    assert abs(ours.mean() - theirs.mean()) < 4 * stderr + 0.01, (ours, theirs)
    # both clearly learn from the initial model
    assert ours.mean() > 0.5 and theirs.mean() > 0.5
