"""Equal cells are one cell however spelled: values are compared as read (a click model by
what it is), in every binary with a grid and in the API."""

import pytest

from tests import binaries

TINY = ("--synthetic_queries=20", "--synthetic_features=6", "--synthetic_docs_per_query=10",
        "--n_runs=1", "--rounds=2")  # fmt: skip


def test_two_spellings_of_one_click_model_are_one_model():
    from foltr_jax.core import click_models

    assert click_models.identity("pbm:1") == click_models.identity("pbm:1.0")
    assert click_models.identity("pbm:1") == click_models.identity("pbm:1e0")
    assert click_models.identity("pbm:1") != click_models.identity("pbm:2")
    assert click_models.identity("perfect") != click_models.identity("navigational")
    with pytest.raises(ValueError):
        click_models.identity("no_such_model")


@pytest.mark.parametrize("module", ["fpdgd", "poisoning", "unlearning"])
def test_every_binary_refuses_one_click_model_spelled_twice(tmp_path, module):
    out = tmp_path / "out"
    done = binaries.call(module, *TINY, "--click_models=pbm:1,pbm:1.0", f"--output_dir={out}",
                         cache_dir=tmp_path / "c")  # fmt: skip
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "--click_models: pbm:1.0 is asked for twice (as pbm:1)" in line, line
    assert not out.exists() or not any(out.rglob("results.json"))


def test_the_api_refuses_two_equal_cells_before_any_work():
    import foltr_jax
    from foltr_jax.engine.config import ConfigError

    train, test = foltr_jax.data.synthetic_train_test(seed=0, n_train_queries=8,
                                                      n_test_queries=4, n_features=4)  # fmt: skip
    config = foltr_jax.FpdgdConfig(n_clients=4, rounds=2, n_runs=1)
    for cells in ([foltr_jax.Setting(), foltr_jax.Setting()],
                  [foltr_jax.Setting(click_model="pbm:1"),
                   foltr_jax.Setting(click_model="pbm:1.0")],
                  [foltr_jax.Setting(epsilon=4.5, sensitivity=5),
                   foltr_jax.Setting(epsilon=4.50, sensitivity=5.0)]):  # fmt: skip
        with pytest.raises(ConfigError, match="cells 0 and 1 are the same cell"):
            foltr_jax.run_fpdgd(config, train, test, cells)
