"""Model poisoning attacks (poisoning paper §4.3; Baruch et al. 2019; Fang et al. 2020),
checked against plain NumPy references."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from foltr_jax.server import attacks, pipeline

N, D = 10, 6
LIE_Z_N10 = {1: 0.0, 2: 0.2533, 3: 0.5244, 4: 0.8416}  # Baruch et al. z_max for n = 10


def make_models(seed=0, n=N, d=D, drift=0.3, spread=1.0):
    """Clients' models scattered around global + drift, and the global model."""
    rng = np.random.default_rng(seed)
    global_model = rng.normal(size=d).astype(np.float32)
    models = global_model + drift + spread * rng.normal(size=(n, d))
    return models.astype(np.float32), global_model


# ------------------------------------------------------------------ NumPy references


def np_krum_scores(rows, n_byzantine, squared=True):
    """Krum: sum of distances to the n' − f − 2 nearest other rows (clamped to [1, n' − 1])."""
    n = len(rows)
    dist = ((rows[:, None, :] - rows[None, :, :]) ** 2).sum(-1)
    if not squared:
        dist = np.sqrt(dist)
    k = min(max(n - n_byzantine - 2, 1), n - 1)
    return np.array([np.sort(np.delete(dist[i], i))[:k].sum() for i in range(n)])


def np_lambda0(benign, global_model, n_total, c):
    """Fang et al. 2020 §IV-A upper bound of λ, with the documented clamps (c attackers)."""
    d = benign.shape[1]
    dist = np.sqrt(((benign[:, None, :] - benign[None, :, :]) ** 2).sum(-1))
    k = max(n_total - c - 2, 1)
    spreads = [np.sort(np.delete(dist[i], i))[:k].sum() for i in range(len(benign))]
    to_global = np.sqrt(((benign - global_model) ** 2).sum(-1)).max()
    return min(spreads) / (max(n_total - 2 * c - 1, 1) * math.sqrt(d)) + to_global / math.sqrt(d)


def np_fang_krum(models, global_model, m, full, squared=True, threshold=1e-5, max_halvings=64):
    """Fang et al.'s halving search, written as a plain loop; returns (λ, λ₀, halvings, s,
    selected).  Full knowledge: Krum (f = m) over m crafted copies and the n − m benign
    models.  Partial: Krum (f = 1) over one crafted model and the m attackers' own models.
    No λ ≥ threshold passes: λ = 0."""
    models = models.astype(np.float64)
    known = models if full else models[:m]
    s = np.sign(known.mean(0) - global_model)
    if full:
        others, n_crafted, c = models[m:], m, m
    else:
        others, n_crafted, c = models[:m], 1, 1
    lam0 = np_lambda0(others, global_model, len(others) + n_crafted, c)
    lam, halvings, selected = lam0, 0, False
    while m > 0 and lam >= threshold and halvings < max_halvings:
        crafted = global_model - lam * s
        view = np.concatenate([np.repeat(crafted[None], n_crafted, 0), others])
        if np.argmin(np_krum_scores(view, c, squared)) < n_crafted:  # ties: crafted
            selected = True
            break
        lam, halvings = lam / 2, halvings + 1
    return (lam if selected else 0.0), lam0, halvings, s, selected


def trimmed_mean(x, beta):
    return np.sort(x, axis=0)[beta : len(x) - beta].mean(0)


# ------------------------------------------------------------------ generic properties


ALL = [attacks.by_name(name) for name in attacks.BUILT_IN]


@pytest.mark.parametrize("name", attacks.BUILT_IN)
def test_benign_rows_unchanged_and_zero_attackers_is_identity(name):
    models, g = make_models(1)
    attack = jax.jit(attacks.by_name(name))
    for m in range(5):
        out = np.asarray(attack(jax.random.key(m), models, g, m))
        assert out.shape == models.shape and out.dtype == models.dtype
        np.testing.assert_array_equal(out[m:], models[m:])
        assert np.all(np.isfinite(out))
    np.testing.assert_array_equal(attack(jax.random.key(0), models, g, 0), models)


def test_by_index_under_vmap_equals_direct_calls():
    models, g = make_models(2)
    key = jax.random.key(7)
    index, m = np.meshgrid(np.arange(len(attacks.BUILT_IN)), np.arange(1, 5), indexing="ij")
    index, m = index.ravel(), m.ravel()
    grid = jax.jit(
        jax.vmap(lambda i, mm: attacks.by_index(i, key, jnp.asarray(models), jnp.asarray(g), mm))
    )(jnp.asarray(index), jnp.asarray(m))
    for row, (i, mm) in enumerate(zip(index, m)):
        direct = attacks.by_name(attacks.BUILT_IN[i])(key, models, g, int(mm))
        np.testing.assert_allclose(grid[row], direct, rtol=1e-5, atol=1e-6)


def test_by_name_rejects_unknown():
    with pytest.raises(ValueError, match="unknown attack"):
        attacks.by_name("data_poisoning")


# ------------------------------------------------------------------ LIE


@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_lie_z_values_for_ten_clients(m):
    assert float(attacks.lie_z(10, m)) == pytest.approx(LIE_Z_N10[m], abs=1e-4)
    traced = jax.jit(attacks.lie_z, static_argnums=0)(10, jnp.int32(m))
    assert float(traced) == pytest.approx(LIE_Z_N10[m], abs=1e-4)


@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_lie_rows_are_mean_minus_z_std_of_attackers(m):
    models, g = make_models(3)
    out = np.asarray(attacks.little_is_enough(jax.random.key(0), models, g, m))
    mu = models[:m].astype(np.float64).mean(0)
    sigma = models[:m].astype(np.float64).std(0)  # population (ddof = 0)
    expected = mu - LIE_Z_N10[m] * sigma
    np.testing.assert_allclose(out[:m], np.broadcast_to(expected, (m, D)), rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------ Fang on Krum


@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_fang_krum_full_knowledge_is_selected_by_krum_and_moves_against_benign(m):
    models, g = make_models(4, drift=0.3, spread=1.0)
    out = np.asarray(attacks.fang_krum(jax.random.key(0), models, g, m, True))
    crafted = out[:m]
    assert np.all(crafted == crafted[0])
    # plain NumPy Krum over the attacked set selects a crafted model
    assert np.argmin(np_krum_scores(out.astype(np.float64), m)) < m
    # the crafted model moves against the benign direction on every coordinate
    mu = models.mean(0)
    moved = mu != g
    assert moved.all()
    np.testing.assert_array_equal(
        np.sign(crafted[0] - g)[moved], -np.sign(mu - g)[moved].astype(np.float32)
    )


@pytest.mark.parametrize("seed", [1, 2, 4])
@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("squared", [True, False])
@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_fang_krum_lambda_matches_numpy_halving_search(m, full, squared, seed):
    """Exact λ₀, halvings, λ and outcome against the loop; the seeds give searches that
    pass after halvings and (partial, m ≥ 2) searches that never pass."""
    models, g = make_models(seed, drift=0.3, spread=1.0)
    search = attacks.fang_krum_lambda(models, g, m, full, krum_squared=squared)
    lam, lam0, halvings, s, selected = np_fang_krum(models, g, m, full, squared)
    assert float(search.lam0) == pytest.approx(lam0, rel=1e-5)
    assert bool(search.selected) == selected
    assert int(search.halvings) == halvings
    assert float(search.lam) == pytest.approx(lam, rel=1e-5)
    np.testing.assert_array_equal(search.direction, s)
    out = np.asarray(attacks.fang_krum(jax.random.key(0), models, g, m, full, krum_squared=squared))
    np.testing.assert_array_equal(out[m:], models[m:])
    if selected:  # λ = λ₀ / 2^k exactly (halving is exact in floating point)
        assert float(search.lam) == float(search.lam0) / 2 ** int(search.halvings)
        expected = g - np.float32(search.lam) * s.astype(np.float32)
        np.testing.assert_allclose(out[:m], np.broadcast_to(expected, (m, D)), rtol=1e-6)
    else:  # Fang et al.'s code: below the threshold the models stay as they are
        assert float(search.lam) == 0.0
        np.testing.assert_array_equal(out, models)


def test_fang_krum_full_knowledge_search_halves_on_the_constructed_case():
    """On this case λ₀ is too large and the search must halve before Krum picks w′."""
    models, g = make_models(4, drift=0.3, spread=1.0)
    for m in (1, 2, 3, 4):
        search = attacks.fang_krum_lambda(models, g, m, True)
        assert bool(search.selected) and int(search.halvings) >= 1


def test_fang_krum_partial_check_can_fail():
    """Partial knowledge: one crafted model among the attackers' own models, Krum assuming
    one attacker.  For m = 2, λ₀ = (D(w₁, w₂) + max_i D(w_i, w_g))/√d puts w′ at least
    D(w₁, w₂) from both w_i (triangle inequality), so λ₀ itself fails and the search halves;
    across seeds some searches pass after halving and some never pass."""
    outcomes = set()
    for seed in range(8):
        models, g = make_models(seed, drift=0.3, spread=1.0)
        assert int(attacks.fang_krum_lambda(models, g, 2, False).halvings) >= 1
        for m in (2, 3, 4):
            search = attacks.fang_krum_lambda(models, g, m, False)
            outcomes.add((bool(search.selected), int(search.halvings) >= 1))
    assert outcomes == {(True, True), (False, True)}


def test_fang_krum_partial_with_one_attacker_passes_at_lambda0():
    """m = 1: the view is w₁ and w′, each the other's only neighbour, a tie that goes to
    w′, so λ = λ₀ = ‖w₁ − w_g‖/√d (the spread term has no other benign model)."""
    models, g = make_models(6)
    search = attacks.fang_krum_lambda(models, g, 1, False)
    assert bool(search.selected) and int(search.halvings) == 0
    expected = np.sqrt(((models[0].astype(np.float64) - g) ** 2).sum()) / math.sqrt(D)
    assert float(search.lam) == pytest.approx(expected, rel=1e-6)
    np.testing.assert_array_equal(search.direction, np.sign(models[0] - g))


@pytest.mark.parametrize("full", [True, False])
def test_fang_krum_below_threshold_leaves_the_models_unchanged(full):
    """Krum never picks w′ for any λ ≥ the threshold: λ = 0 and every client sends its
    before-attack model (Fang et al.'s code).  Full: identical benign models away from
    w_g.  Partial: the attackers' own models in a tight cluster away from w_g."""
    g = np.zeros(D, np.float32)
    models = np.tile(np.float32(1.0) + np.arange(D, dtype=np.float32), (N, 1))
    if not full:
        models[:3] += np.float32(1e-3) * np.arange(3, dtype=np.float32)[:, None]
    threshold = 1e-3
    search = attacks.fang_krum_lambda(models, g, 3, full, threshold=threshold)
    assert float(search.lam0) > threshold
    assert not bool(search.selected) and float(search.lam) == 0.0
    # every λ ≥ threshold was tried: the last one tried is below 2·threshold
    assert float(search.lam0) / 2 ** int(search.halvings) < threshold
    out = attacks.fang_krum(jax.random.key(0), models, g, 3, full, threshold=threshold)
    np.testing.assert_array_equal(out, models)
    capped = attacks.fang_krum_lambda(models, g, 3, full, threshold=threshold, max_halvings=2)
    assert int(capped.halvings) == 2 and float(capped.lam) == 0.0


def test_krum_distances_reach_the_attacks_simulated_krum():
    """The pipeline's attack stage passes the server Krum's distances to Fang's search; on
    this case squared and plain Euclidean distances give different λ (full knowledge)."""
    models, g = make_models(1, drift=0.3, spread=1.0)
    key = jax.random.key(0)
    names = ("fang_krum_full", "fang_krum_partial")
    updates = pipeline.ClientUpdates(
        jnp.asarray(models), jnp.ones(N), jnp.asarray(g), jnp.int32(3), jnp.asarray(g)
    )
    for squared in (True, False):
        for index, full in enumerate((True, False)):
            stage = pipeline.model_attack(names, index, krum_squared_distances=squared)
            attacked, _ = stage.update(stage.init(), updates, key)
            direct = attacks.fang_krum(key, models, g, 3, full, krum_squared=squared)
            np.testing.assert_array_equal(attacked.models, direct)
            np.testing.assert_array_equal(
                attacks.by_index(index + 2, key, models, g, 3, krum_squared=squared), direct
            )
    euclid = attacks.fang_krum(key, models, g, 3, True, krum_squared=False)
    assert not np.array_equal(euclid, attacks.fang_krum(key, models, g, 3, True))


# ------------------------------------------------------------------ Fang on Trimmed Mean


def np_tm_intervals(models, g, m, full, b=2.0):
    models = models.astype(np.float64)
    if full:
        increasing = models.mean(0) - g > 0
        w_max, w_min = models[m:].max(0), models[m:].min(0)
        lo = np.where(increasing, np.where(w_min > 0, w_min / b, b * w_min), w_max)
        hi = np.where(increasing, w_min, np.where(w_max > 0, b * w_max, w_max / b))
    else:
        mu, sigma = models[:m].mean(0), models[:m].std(0)
        increasing = mu - g > 0
        lo = np.where(increasing, mu - 4 * sigma, mu + 3 * sigma)
        hi = np.where(increasing, mu - 3 * sigma, mu + 4 * sigma)
    return lo, hi, np.where(increasing, 1.0, -1.0)


@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_fang_trimmed_mean_samples_lie_in_documented_intervals(m, full):
    # coordinates of both signs, so every branch (w > 0 and w ≤ 0, s > 0 and s ≤ 0) is hit
    models, g = make_models(7, d=40, drift=0.0, spread=1.0)
    out = np.asarray(attacks.fang_trimmed_mean(jax.random.key(m), models, g, m, full))
    lo, hi, _ = np_tm_intervals(models, g, m, full)
    assert np.all(lo <= hi)
    tol = 1e-5 * (1 + np.abs(lo) + np.abs(hi))
    assert np.all(out[:m] >= lo - tol) and np.all(out[:m] <= hi + tol)
    if m > 1:  # each malicious row draws its own samples
        assert not np.array_equal(out[0], out[1])
    if full:
        lo_j, hi_j = attacks.fang_trimmed_mean_intervals(models, g, m, True)
        np.testing.assert_allclose(lo_j, lo, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(hi_j, hi, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_fang_trimmed_mean_moves_trimmed_mean_and_median_against_direction(m, full):
    """Constructed case: benign models drift upward on half the coordinates and downward
    on the other half; the attackers' own models sit in the middle of the benign ones and
    are spread out, so even partial knowledge lands beyond the benign extremes."""
    rng = np.random.default_rng(8)
    d = 8
    g = np.zeros(d, np.float32)
    drift = np.where(np.arange(d) < d // 2, 0.5, -0.5)
    models = drift + 0.5 * rng.normal(size=(N, d))
    models[:m] = drift + np.linspace(-0.2, 0.2, m)[:, None] if m > 1 else drift
    if not full:
        models[:m] = drift + np.linspace(-1.0, 1.0, m)[:, None] if m > 1 else drift
    models = models.astype(np.float32)
    out = np.asarray(attacks.fang_trimmed_mean(jax.random.key(0), models, g, m, full))
    _, _, s = np_tm_intervals(models, g, m, full)
    clean_tm, attacked_tm = trimmed_mean(models, m), trimmed_mean(out, m)
    clean_med, attacked_med = np.median(models, 0), np.median(out, 0)
    if full or m > 1:
        assert np.all(s * (attacked_tm - clean_tm) < 0)
        assert np.all(s * (attacked_med - clean_med) < 0)
    else:  # partial knowledge with one attacker: σ = 0, the crafted row is its own model
        np.testing.assert_array_equal(out, models)


def test_fang_attacks_are_jittable_with_traced_m():
    models, g = make_models(9)

    @functools.partial(jax.jit, static_argnums=2)
    def run(key, mm, full):
        a = attacks.fang_krum(key, models, g, mm, full)
        b = attacks.fang_trimmed_mean(key, models, g, mm, full)
        return a, b

    for full in (True, False):
        a, b = run(jax.random.key(0), jnp.int32(3), full)
        np.testing.assert_allclose(
            a, attacks.fang_krum(jax.random.key(0), models, g, 3, full), atol=1e-6
        )
        np.testing.assert_allclose(
            b, attacks.fang_trimmed_mean(jax.random.key(0), models, g, 3, full), atol=1e-6
        )
