"""Click models: statistics of simulated clicks against the models' definitions."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from foltr_jax.core import click_models

N = 100_000


def _simulate(model, labels, seed=0, n=N):
    keys = jax.random.split(jax.random.PRNGKey(seed), n)
    labels = jnp.asarray(labels)
    shown = jnp.ones(labels.shape, bool)
    return np.asarray(
        jax.vmap(lambda k: click_models.simulate_clicks(k, model, labels, shown))(keys)
    )


def _cascade_click_rates(click, stop, labels):
    """P(click at position i) under CCM, computed by the definition."""
    rates, p_examined = [], 1.0
    for label in labels:
        p_click = p_examined * click[label]
        rates.append(p_click)
        p_examined *= 1.0 - click[label] * stop[label]
    return np.array(rates)


@pytest.mark.parametrize("name", ["perfect", "navigational", "informational", "poison"])
@pytest.mark.parametrize("n_grades", [2, 3, 5])
def test_ccm_click_rates_match_the_cascade(name, n_grades):
    model = click_models.ccm(name, n_grades)
    labels = np.array([n_grades - 1, 0, 1, n_grades - 1, 2, 0, 1, n_grades - 2, 0, 1]) % n_grades
    clicks = _simulate(model, labels)
    expected = _cascade_click_rates(
        np.asarray(model.click_prob), np.asarray(model.stop_prob), labels
    )
    stderr = np.sqrt(expected * (1 - expected) / N) + 1e-12
    assert np.all(np.abs(clicks.mean(axis=0) - expected) < 5 * stderr + 1e-9)


def test_tables_are_the_papers():
    perfect5 = click_models.ccm("perfect", 5)
    np.testing.assert_allclose(perfect5.click_prob, [0.0, 0.2, 0.4, 0.8, 1.0])
    nav3 = click_models.ccm("navigational", 3)
    np.testing.assert_allclose(nav3.click_prob, [0.05, 0.5, 0.95])
    np.testing.assert_allclose(nav3.stop_prob, [0.2, 0.5, 0.9])
    info5 = click_models.ccm("informational", 5)
    np.testing.assert_allclose(info5.stop_prob, [0.1, 0.2, 0.3, 0.4, 0.5])
    poison = click_models.ccm("poison", 5)
    np.testing.assert_allclose(poison.click_prob, [1.0, 0.8, 0.4, 0.2, 0.0])
    assert not np.any(np.asarray(poison.stop_prob))


def test_perfect_never_clicks_irrelevant_and_stop_ends_the_scan():
    clicks = _simulate(click_models.ccm("perfect", 5), np.array([0, 4, 0, 0, 3]), n=2000)
    assert not clicks[:, [0, 2, 3]].any() and clicks[:, 1].all()
    nav = _simulate(click_models.ccm("navigational", 5), np.array([4, 4, 4]), n=20_000)
    # after a click on grade 4 the user stops with probability 0.9
    assert abs(nav[:, 1].mean() - 0.95 * (1 - 0.95 * 0.9) * 1.0) < 0.01


@pytest.mark.parametrize("eta", [0.0, 1.0, 2.0])
def test_pbm_examination_follows_rank_power(eta):
    labels = np.full(10, 4)
    clicks = _simulate(click_models.pbm(eta, 5), labels)
    expected = (1.0 / np.arange(1, 11)) ** eta
    assert np.all(
        np.abs(clicks.mean(axis=0) - expected) < 5 * np.sqrt(expected * (1 - expected) / N) + 1e-9
    )


def test_hidden_positions_are_never_clicked():
    model = click_models.ccm("informational", 5)
    shown = jnp.arange(10) < 4
    keys = jax.random.split(jax.random.PRNGKey(1), 5000)
    clicks = jax.vmap(lambda k: click_models.simulate_clicks(k, model, jnp.full(10, 4), shown))(
        keys
    )
    assert not np.asarray(clicks)[:, 4:].any()


def test_per_client_models_in_one_vmapped_step():
    models = jax.tree_util.tree_map(
        lambda *x: jnp.stack(x), click_models.ccm("perfect", 5), click_models.ccm("poison", 5)
    )
    labels = jnp.array([0, 4, 0, 4, 0, 4, 0, 4, 0, 4])
    keys = jax.random.split(jax.random.PRNGKey(2), 2)
    clicks = np.asarray(
        jax.vmap(click_models.simulate_clicks, in_axes=(0, 0, None, None))(
            keys, models, labels, jnp.ones(10, bool)
        )
    )
    np.testing.assert_array_equal(clicks[0], labels == 4)  # perfect: every grade-4, no grade-0
    np.testing.assert_array_equal(clicks[1], labels == 0)  # poison: the reverse


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="unknown click model"):
        click_models.by_name("perfekt", 5)
    with pytest.raises(ValueError, match="pbm"):
        click_models.by_name("pbm:x", 5)


# Public FPDGD code's tables for binary labels (the intent-change collection).
BINARY_TABLES = {
    "perfect": ((0.0, 1.0), (0.0, 0.0)),
    "navigational": ((0.05, 0.95), (0.2, 0.9)),
    "informational": ((0.3, 0.7), (0.1, 0.5)),
}


@pytest.mark.parametrize("max_label, n_grades", [(0, 2), (1, 2), (2, 3), (3, 5), (4, 5)])
def test_table_size_follows_the_largest_label(max_label, n_grades):
    assert click_models.n_grades_for(max_label) == n_grades


@pytest.mark.parametrize("name", sorted(BINARY_TABLES))
def test_binary_labels_use_the_binary_tables(name):
    click, stop = BINARY_TABLES[name]
    model = click_models.by_name(name, click_models.n_grades_for(1))
    np.testing.assert_array_equal(model.click_prob, np.float32(click))
    np.testing.assert_array_equal(model.stop_prob, np.float32(stop))


@pytest.mark.parametrize("name", sorted(BINARY_TABLES))
def test_binary_click_and_stop_rates_by_grade_equal_the_tables(name):
    """Simulated P(click | grade) at the top (always examined) and P(stop | click, grade),
    read off the clicks on a second, relevant document, equal the binary tables."""
    click, stop = BINARY_TABLES[name]
    model = click_models.by_name(name, 2)
    n = 200_000
    for grade in (0, 1):
        clicks = _simulate(model, np.array([grade, 1]), seed=10 + grade, n=n)
        first = clicks[:, 0]
        rate = first.mean()
        assert abs(rate - click[grade]) <= 5 * np.sqrt(click[grade] * (1 - click[grade]) / n)
        # after a click on position 1 the user goes on with 1 − P(stop), then clicks a
        # grade-1 document with P(click | 1)
        n_clicked = int(first.sum())
        if n_clicked == 0:
            continue
        went_on = clicks[first, 1].mean() / click[1]
        sd = np.sqrt((1 - stop[grade]) * stop[grade] / n_clicked) / click[1]
        assert abs(went_on - (1 - stop[grade])) <= 5 * sd + 1e-12
    # perfect clicks: a relevant document always, an irrelevant one never
    if name == "perfect":
        clicks = _simulate(model, np.array([0, 1, 0, 1]), n=1000)
        np.testing.assert_array_equal(clicks, np.tile([False, True, False, True], (1000, 1)))
