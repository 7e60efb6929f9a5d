"""Model poisoning attacks (poisoning paper §4.3; Baruch et al. 2019; Fang et al. 2020),
checked against plain NumPy references."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from foltr_jax import attacks

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


def np_lambda0(benign, global_model, n_total, m):
    """Fang et al. 2020 §IV-A upper bound of λ, with the documented clamps."""
    d = benign.shape[1]
    dist = np.sqrt(((benign[:, None, :] - benign[None, :, :]) ** 2).sum(-1))
    k = max(n_total - m - 2, 1)
    spread = min(np.sort(np.delete(dist[i], i))[:k].sum() for i in range(len(benign)))
    to_global = np.sqrt(((benign - global_model) ** 2).sum(-1)).max()
    return spread / (max(n_total - 2 * m - 1, 1) * math.sqrt(d)) + to_global / math.sqrt(d)


def np_fang_krum(models, global_model, m, full, squared=True, threshold=1e-5, max_halvings=64):
    """Fang et al.'s halving search, written as a plain loop; returns (λ, λ₀, halvings, s)."""
    known = models if full else models[:m]
    s = np.sign(known.mean(0) - global_model)
    if full:
        benign, n_total = models[m:], len(models)
    else:
        benign, n_total = models[:m], 2 * m
    lam0 = np_lambda0(benign.astype(np.float64), global_model, n_total, m)
    lam, halvings = lam0, 0
    while lam >= threshold and halvings < max_halvings:
        crafted = global_model - lam * s
        if full:
            view = np.concatenate([np.repeat(crafted[None], m, 0), models[m:]])
        else:
            view = np.concatenate([np.repeat(crafted[None], m, 0), models[:m]])
        scores = np_krum_scores(view, m, squared)
        if np.argmin(scores) < m:  # crafted rows first: ties go to the crafted model
            break
        lam, halvings = lam / 2, halvings + 1
    return lam, lam0, halvings, s


def trimmed_mean(x, beta):
    return np.sort(x, axis=0)[beta : len(x) - beta].mean(0)


# ------------------------------------------------------------------ generic properties


ALL = [attacks.by_name(name) for name in attacks.ATTACKS]


@pytest.mark.parametrize("name", attacks.ATTACKS)
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
    index, m = np.meshgrid(np.arange(len(attacks.ATTACKS)), np.arange(1, 5), indexing="ij")
    index, m = index.ravel(), m.ravel()
    grid = jax.jit(
        jax.vmap(lambda i, mm: attacks.by_index(i, key, jnp.asarray(models), jnp.asarray(g), mm))
    )(jnp.asarray(index), jnp.asarray(m))
    for row, (i, mm) in enumerate(zip(index, m)):
        direct = attacks.by_name(attacks.ATTACKS[i])(key, models, g, int(mm))
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


@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("squared", [True, False])
@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_fang_krum_lambda_matches_numpy_halving_search(m, full, squared):
    models, g = make_models(5, drift=0.3, spread=1.0)
    search = attacks.fang_krum_lambda(models, g, m, full, krum_squared=squared)
    lam, lam0, halvings, s = np_fang_krum(models, g, m, full, squared)
    assert float(search.lam0) == pytest.approx(lam0, rel=1e-5)
    assert int(search.halvings) == halvings
    assert float(search.lam) == pytest.approx(lam, rel=1e-5)
    # λ = λ₀ / 2^k exactly (halving is exact in floating point), λ ≤ λ₀
    assert float(search.lam) == float(search.lam0) / 2 ** int(search.halvings)
    assert float(search.lam) <= float(search.lam0)
    np.testing.assert_array_equal(search.direction, s)
    out = attacks.fang_krum(jax.random.key(0), models, g, m, full, krum_squared=squared)
    expected = g - np.float32(search.lam) * s.astype(np.float32)
    np.testing.assert_allclose(np.asarray(out)[:m], np.broadcast_to(expected, (m, D)), rtol=1e-6)


def test_fang_krum_full_knowledge_search_halves_on_the_constructed_case():
    """On this case λ₀ is too large and the search must halve before Krum picks w′."""
    models, g = make_models(4, drift=0.3, spread=1.0)
    for m in (1, 2, 3, 4):
        search = attacks.fang_krum_lambda(models, g, m, True)
        assert bool(search.selected) and int(search.halvings) >= 1


def test_fang_krum_partial_with_identical_crafted_rows_keeps_lambda0():
    """Partial knowledge: Krum over m before-attack + m identical crafted rows always picks
    a crafted row (they are each other's nearest neighbours at distance 0; for m = 1 it is a
    tie, which goes to the crafted row), so λ = λ₀."""
    models, g = make_models(6)
    for m in (1, 2, 3, 4):
        search = attacks.fang_krum_lambda(models, g, m, False)
        assert bool(search.selected) and int(search.halvings) == 0


def test_fang_krum_stops_below_threshold_when_never_selected():
    """Identical benign models away from w_g: Krum never picks w′, λ ends just below the
    threshold and that last λ is used."""
    g = np.zeros(D, np.float32)
    models = np.tile(np.float32(1.0) + np.arange(D, dtype=np.float32), (N, 1))
    threshold = 1e-3
    search = attacks.fang_krum_lambda(models, g, 3, True, threshold=threshold)
    lam0 = np.sqrt(((models[0] - g) ** 2).sum()) / math.sqrt(D)  # spread term is 0
    assert float(search.lam0) == pytest.approx(lam0, rel=1e-6)
    assert not bool(search.selected)
    assert float(search.lam) < threshold <= 2 * float(search.lam)
    assert float(search.lam) == float(search.lam0) / 2 ** int(search.halvings)
    capped = attacks.fang_krum_lambda(models, g, 3, True, threshold=threshold, max_halvings=2)
    assert int(capped.halvings) == 2
    assert float(capped.lam) == float(capped.lam0) / 4


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
