"""--eval_every = K: offline metrics after rounds K, 2K, ... and the last round only,
the same values as an every-round run's at those rounds; online metrics every round."""

import json

import numpy as np
import pytest

from foltr_jax.engine.config import ConfigError
from foltr_jax.methods.fpdgd import federation, rounds
from tests import binaries


def _config(**overrides):
    settings = {
        "n_clients": 8,
        "local_updates": 3,
        "rounds": 10,
        "n_runs": 2,
        "chunk_rounds": 4,
        "click_model": "perfect",
    }
    return federation.FpdgdConfig(**{**settings, **overrides})


def _run(synthetic_split, clients=None, **overrides):
    spec, arrays = federation.build(_config(**overrides), *synthetic_split, clients=clients)
    return federation.run(spec, arrays)


@pytest.fixture(scope="module")
def every_round(synthetic_split):
    return _run(synthetic_split)


def test_evaluated_rounds():
    assert rounds.evaluated_rounds(10, 1) == list(range(1, 11))
    assert rounds.evaluated_rounds(10, 3) == [3, 6, 9, 10]
    assert rounds.evaluated_rounds(10, 5) == [5, 10]
    assert rounds.evaluated_rounds(10, 10) == [10]


@pytest.mark.slow  # compiles the every-round run the slow tests below compare with
def test_every_round_by_default(every_round):
    np.testing.assert_array_equal(every_round.offline_rounds, np.arange(1, 11))
    assert every_round.offline_ndcg.shape == every_round.online_ndcg.shape == (2, 10)
    assert np.isfinite(every_round.offline_ndcg).all()


# chunks of 4 rounds do not align with K = 3; K = 10 evaluates the last round alone
@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
@pytest.mark.parametrize("every", [3, 10])
def test_k_th_values_of_the_every_round_run(synthetic_split, every_round, every):
    sparse = _run(synthetic_split, eval_every=every)
    expected = rounds.evaluated_rounds(10, every)
    np.testing.assert_array_equal(sparse.offline_rounds, expected)
    for name in ("offline_ndcg", "offline_mrr"):
        np.testing.assert_array_equal(
            getattr(sparse, name), getattr(every_round, name)[:, np.array(expected) - 1]
        )
    for name in ("online_ndcg", "online_max_rr"):
        np.testing.assert_array_equal(getattr(sparse, name), getattr(every_round, name))
    np.testing.assert_array_equal(sparse.initial_offline_ndcg, every_round.initial_offline_ndcg)
    np.testing.assert_array_equal(sparse.final_params["w"], every_round.final_params["w"])


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_resumes_from_a_checkpoint(synthetic_split, every_round, tmp_path):
    spec, arrays = federation.build(_config(eval_every=3), *synthetic_split)
    path = str(tmp_path / "checkpoint")

    def stop_after_the_first_chunk(done, total, seconds):
        if done == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        federation.run(spec, arrays, progress=stop_after_the_first_chunk, checkpoint=path)
    resumed = federation.run(spec, arrays, checkpoint=path)
    np.testing.assert_array_equal(resumed.offline_rounds, [3, 6, 9, 10])
    np.testing.assert_array_equal(resumed.offline_ndcg, every_round.offline_ndcg[:, [2, 5, 8, 9]])
    np.testing.assert_array_equal(resumed.online_ndcg, every_round.online_ndcg)


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_client_chunks_and_fedper(synthetic_split):
    from foltr_jax.methods.fpdgd.client_plan import ClientPlan

    plan = ClientPlan(personal=("w2",), personal_eval="clients")  # the personalised models
    personal = {"ranker": "neural", "clients": plan}
    for extra in ({"client_chunk": 4}, personal):
        extra = {**extra, "chunk_rounds": 10}  # one compiled chunk (alignment: tested above)
        full, sparse = _run(synthetic_split, **extra), _run(synthetic_split, eval_every=4, **extra)
        np.testing.assert_array_equal(sparse.offline_ndcg, full.offline_ndcg[:, [3, 7, 9]])
        np.testing.assert_array_equal(sparse.online_ndcg, full.online_ndcg)


@pytest.mark.parametrize("bad", [0, -2, 11, 2.5, True])
def test_bad_k_refused(bad):
    config = federation.FpdgdConfig(rounds=10, eval_every=bad)
    with pytest.raises(ConfigError) as error:
        config.validate()
    assert error.value.field == "eval_every"


def _binary(tmp_path, *flags):
    return binaries.call(
        "fpdgd",
        "--n_clients=4",
        "--rounds=5",
        "--n_runs=1",
        "--synthetic_queries=20",
        "--synthetic_features=6",
        f"--output_dir={tmp_path}",
        *flags,
    )


def test_binary_writes_offline_rounds_and_refuses_bad_k(tmp_path):
    done = _binary(tmp_path / "a", "--eval_every=2")
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((tmp_path / "a" / "results.json").read_text())
    assert results["config"]["eval_every"] == 2
    (cell,) = results["cells"]
    assert cell["evaluated_rounds"] == [2, 4, 5]
    assert np.shape(cell["curves"]["offline_ndcg"]) == (1, 3)
    assert np.shape(cell["curves"]["online_ndcg"]) == (1, 5)
    assert cell["per_run"]["final_offline_ndcg"] == [cell["curves"]["offline_ndcg"][0][-1]]
    done = _binary(tmp_path / "b", "--eval_every=0")
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert "--eval_every: must be at least 1, got 0" in lines[-1]
