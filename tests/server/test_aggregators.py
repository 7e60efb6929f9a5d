"""Aggregation rules: hand-worked cases, plain NumPy references, vmap/jit with traced m."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from foltr_jax.server import aggregators

# Five clients in d = 2: a cross around (1, 1) and one outlier.
CROSS = np.array([[0, 0], [2, 0], [0, 2], [1, 1], [10, 10]], dtype=np.float32)
# Coordinate-wise cases: odd n = 5, and even n = 6 (COLUMNS_ODD plus one row).
COLUMNS_ODD = np.array(
    [[3, 0.5], [-1, 0.25], [7, -4], [100, 1], [2, 2]],
    dtype=np.float32,
)
COLUMNS_EVEN = np.concatenate([COLUMNS_ODD, np.array([[5, -2]], dtype=np.float32)])


def _ones(n):
    return jnp.ones(n, dtype=jnp.float32)


def _call(name, x, w, m, squared):
    fn = getattr(aggregators, name)
    return fn(x, w, m, squared) if "krum" in name else fn(x, w, m)


# ---------------------------------------------------------------- plain references


def reference_distances(x, squared):
    n = len(x)
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            s = sum((float(a) - float(b)) ** 2 for a, b in zip(x[i], x[j]))
            out[i, j] = s if squared else math.sqrt(s)
    return out


def reference_krum_scores(x, m, squared):
    n = len(x)
    dist = reference_distances(x, squared)
    scores = []
    for i in range(n):
        others = sorted(dist[i, j] for j in range(n) if j != i)
        scores.append(sum(others[: n - m - 2]))
    return np.array(scores)


def reference_krum(x, m, squared):
    scores = list(reference_krum_scores(x, m, squared))
    return np.asarray(x[scores.index(min(scores))], dtype=np.float64)


def reference_multi_krum(x, m, squared):
    scores = reference_krum_scores(x, m, squared)
    chosen = sorted(range(len(x)), key=lambda i: (scores[i], i))[: len(x) - m]
    return np.mean([np.asarray(x[i], dtype=np.float64) for i in chosen], axis=0)


def reference_trimmed_mean(x, m):
    n, d = x.shape
    out = []
    for k in range(d):
        values = sorted(float(x[i, k]) for i in range(n))
        kept = values[m : n - m]
        out.append(sum(kept) / len(kept))
    return np.array(out)


def reference_median(x):
    n, d = x.shape
    out = []
    for k in range(d):
        values = sorted(float(x[i, k]) for i in range(n))
        out.append(values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2)
    return np.array(out)


def reference_fedavg(x, w):
    total = sum(float(w[i]) * np.asarray(x[i], dtype=np.float64) for i in range(len(x)))
    return total / sum(float(v) for v in w)


def reference(name, x, w, m, squared):
    if name == "fedavg":
        return reference_fedavg(x, w)
    if name == "krum":
        return reference_krum(x, m, squared)
    if name == "multi_krum":
        return reference_multi_krum(x, m, squared)
    if name == "trimmed_mean":
        return reference_trimmed_mean(x, m)
    return reference_median(x)


# ---------------------------------------------------------------- hand-worked cases


def test_krum_hand_worked_squared():
    # Squared distances of CROSS (m = 1, so each score sums the n - m - 2 = 2 nearest others):
    #   0-1: 4  0-2: 4  0-3: 2  0-4: 200
    #   1-2: 8  1-3: 2  1-4: 164
    #   2-3: 2  2-4: 164
    #   3-4: 162
    # scores: c0 = 2 + 4 = 6, c1 = 2 + 4 = 6, c2 = 2 + 4 = 6, c3 = 2 + 2 = 4, c4 = 162 + 164 = 326.
    scores = aggregators.krum_scores(jnp.asarray(CROSS), 1, squared=True)
    np.testing.assert_allclose(np.asarray(scores), [6, 6, 6, 4, 326], rtol=1e-6)
    chosen = aggregators.krum(jnp.asarray(CROSS), _ones(5), 1)
    np.testing.assert_array_equal(np.asarray(chosen), [1, 1])
    # Multi-Krum keeps the f = n - m = 4 lowest scores (clients 0-3): mean (3/4, 3/4).
    mean = aggregators.multi_krum(jnp.asarray(CROSS), _ones(5), 1)
    np.testing.assert_allclose(np.asarray(mean), [0.75, 0.75], rtol=1e-6)


def test_krum_hand_worked_euclidean():
    # Euclidean distances: 0-1: 2, 0-2: 2, 0-3: √2, 1-2: 2√2, 1-3: √2, 2-3: √2, 3-4: 9√2,
    # 1-4 = 2-4 = √164, 0-4 = 10√2.  Two nearest: c0 = c1 = c2 = √2 + 2, c3 = 2√2,
    # c4 = 9√2 + √164.
    r2 = math.sqrt(2)
    scores = aggregators.krum_scores(jnp.asarray(CROSS), 1, squared=False)
    expected = [r2 + 2, r2 + 2, r2 + 2, 2 * r2, 9 * r2 + math.sqrt(164)]
    np.testing.assert_allclose(np.asarray(scores), expected, rtol=1e-5)
    chosen = aggregators.krum(jnp.asarray(CROSS), _ones(5), 1, squared=False)
    np.testing.assert_array_equal(np.asarray(chosen), [1, 1])
    mean = aggregators.multi_krum(jnp.asarray(CROSS), _ones(5), 1, squared=False)
    np.testing.assert_allclose(np.asarray(mean), [0.75, 0.75], rtol=1e-6)


def test_krum_and_multi_krum_break_ties_by_index():
    # Unit square plus an outlier.  m = 2: one nearest neighbour each, so the four corners all
    # score 1 and the outlier (10, 10) scores 9² + 9² = 162.
    square = np.array([[0, 0], [1, 0], [0, 1], [1, 1], [10, 10]], dtype=np.float32)
    scores = aggregators.krum_scores(jnp.asarray(square), 2)
    np.testing.assert_allclose(np.asarray(scores), [1, 1, 1, 1, 162], rtol=1e-6)
    chosen = aggregators.krum(jnp.asarray(square), _ones(5), 2)
    np.testing.assert_array_equal(np.asarray(chosen), [0, 0])  # the first of the tied corners
    # Multi-Krum keeps f = 3 of the four tied corners: clients 0, 1, 2, mean (1/3, 1/3).
    mean = aggregators.multi_krum(jnp.asarray(square), _ones(5), 2)
    np.testing.assert_allclose(np.asarray(mean), [1 / 3, 1 / 3], rtol=1e-6)


def test_trimmed_mean_and_median_odd_n():
    x = jnp.asarray(COLUMNS_ODD)
    # Column 0 sorted: -1, 2, 3, 7, 100.  Column 1 sorted: -4, 0.25, 0.5, 1, 2.
    np.testing.assert_allclose(
        np.asarray(aggregators.trimmed_mean(x, _ones(5), 1)), [4.0, 1.75 / 3], rtol=1e-6
    )
    np.testing.assert_allclose(np.asarray(aggregators.trimmed_mean(x, _ones(5), 2)), [3.0, 0.5])
    np.testing.assert_allclose(np.asarray(aggregators.trimmed_mean(x, _ones(5), 0)), [22.2, -0.05])
    np.testing.assert_array_equal(np.asarray(aggregators.median(x, _ones(5))), [3.0, 0.5])


def test_trimmed_mean_and_median_even_n():
    x = jnp.asarray(COLUMNS_EVEN)
    # Column 0 sorted: -1, 2, 3, 5, 7, 100.  Column 1 sorted: -4, -2, 0.25, 0.5, 1, 2.
    np.testing.assert_allclose(
        np.asarray(aggregators.trimmed_mean(x, _ones(6), 1)), [17 / 4, -0.0625], rtol=1e-6
    )
    np.testing.assert_allclose(np.asarray(aggregators.trimmed_mean(x, _ones(6), 2)), [4.0, 0.375])
    # Median = mean of the two middle values: (3 + 5) / 2 and (0.25 + 0.5) / 2.
    np.testing.assert_array_equal(np.asarray(aggregators.median(x, _ones(6))), [4.0, 0.375])


@pytest.mark.parametrize("n, d", [(7, 5), (10, 300), (31, 600)])
def test_order_statistics_by_counting_equal_sorting(n, d):
    """Median, Trimmed Mean and kth_smallest find order statistics by counting (no sort):
    the same values as NumPy's sort, with ties, ±0, values from 1e-20 to 3.4e38 and
    columns past one block (d > 256), for every m (traced under jit)."""
    rng = np.random.default_rng(n + d)
    scale = rng.choice([1e-20, 1.0, 1e20], size=(n, d))
    x = (rng.normal(size=(n, d)) * scale).astype(np.float32)
    x[:, ::3] = np.round(x[:, ::3])  # many ties, zeros among them
    x[0, ::4], x[1, ::4] = 0.0, -0.0
    ordered = np.sort(x, axis=0)
    huge = x.copy()
    huge[2, 1::5] = 3.4e38
    for k in sorted({0, n // 3, (n - 1) // 2, n // 2, n - 1}):
        for values in (x, huge):
            np.testing.assert_array_equal(
                np.asarray(jax.jit(aggregators.kth_smallest)(jnp.asarray(values), k)),
                np.sort(values, axis=0)[k],
            )
    np.testing.assert_allclose(  # the two middle values, exact above; their mean
        np.asarray(aggregators.median(jnp.asarray(x), _ones(n))),
        0.5 * (ordered[(n - 1) // 2].astype(np.float64) + ordered[n // 2]),
        rtol=1e-7,
    )
    trimmed = jax.jit(aggregators.trimmed_mean)
    for m in range((n + 1) // 2):
        kept = ordered[m : n - m].astype(np.float64)
        got = np.asarray(trimmed(jnp.asarray(x), _ones(n), m), np.float64)
        # float32 sums of values up to 1e20 that cancel: the error scales with the largest
        error = np.abs(got - kept.mean(axis=0))
        assert np.all(error <= 1e-6 * np.abs(kept).max(axis=0) + 1e-30), (m, error.max())


def test_fedavg_weights_by_interactions():
    x = jnp.asarray([[1.0, 0.0], [3.0, 4.0]])
    # (1·[1, 0] + 3·[3, 4]) / 4 = [2.5, 3].
    np.testing.assert_allclose(
        np.asarray(aggregators.fedavg(x, jnp.asarray([1.0, 3.0]))), [2.5, 3.0], rtol=1e-6
    )
    np.testing.assert_allclose(
        np.asarray(aggregators.fedavg(x, jnp.asarray([2.0, 2.0]))), [2.0, 2.0], rtol=1e-6
    )
    # Only the proportions of the weights matter; a zero weight drops a client.
    np.testing.assert_allclose(
        np.asarray(aggregators.fedavg(x, jnp.asarray([10.0, 30.0]))), [2.5, 3.0], rtol=1e-6
    )
    np.testing.assert_allclose(
        np.asarray(aggregators.fedavg(x, jnp.asarray([0.0, 5.0]))), [3.0, 4.0], rtol=1e-6
    )


# ---------------------------------------------------------------- against the references

SETTINGS = [(5, 1, 2), (7, 2, 3), (10, 1, 6), (10, 4, 17), (12, 3, 40), (20, 9, 5), (31, 7, 64)]


def _random_case(n, d, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype(np.float32)
    x[: n // 4] += rng.normal(scale=5.0, size=(n // 4, d)).astype(np.float32)  # some outliers
    w = rng.integers(1, 10, size=n).astype(np.float32)
    return x, w


@pytest.mark.parametrize("squared", [True, False])
def test_pairwise_distances_match_double_loop(squared):
    x, _ = _random_case(9, 13, seed=1)
    dist = np.asarray(aggregators.pairwise_distances(jnp.asarray(x), squared))
    np.testing.assert_allclose(dist, reference_distances(x, squared), rtol=1e-4, atol=1e-4)
    assert np.all(np.diag(dist) == 0.0)
    assert np.all(dist >= 0.0)
    np.testing.assert_array_equal(dist, dist.T)


@pytest.mark.parametrize("squared", [True, False])
@pytest.mark.parametrize("n,m,d", SETTINGS)
def test_rules_match_references(n, m, d, squared):
    x, w = _random_case(n, d, seed=n * 100 + m * 10 + d)
    xj, wj = jnp.asarray(x), jnp.asarray(w)
    np.testing.assert_allclose(
        np.asarray(aggregators.krum_scores(xj, m, squared)),
        reference_krum_scores(x, m, squared),
        rtol=1e-4,
    )
    for name in aggregators.BUILT_IN:
        got = np.asarray(_call(name, xj, wj, m, squared))
        np.testing.assert_allclose(
            got, reference(name, x, w, m, squared), rtol=1e-4, atol=1e-5, err_msg=name
        )


# ---------------------------------------------------------------- vmap / jit with traced m


@pytest.mark.parametrize("squared", [True, False])
def test_by_index_under_vmap_matches_direct_calls(squared):
    n, d = 9, 6
    x, w = _random_case(n, d, seed=7)
    xj, wj = jnp.asarray(x), jnp.asarray(w)
    pairs = [(i, m) for i in range(len(aggregators.BUILT_IN)) for m in (1, 2, 3, 4)]
    index = jnp.asarray([p[0] for p in pairs], dtype=jnp.int32)
    malicious = jnp.asarray([p[1] for p in pairs], dtype=jnp.int32)
    batched = jax.jit(jax.vmap(lambda i, m: aggregators.by_index(i, xj, wj, m, squared=squared)))(
        index, malicious
    )
    for row, (i, m) in enumerate(pairs):
        name = aggregators.BUILT_IN[i]
        direct = _call(name, xj, wj, m, squared)
        np.testing.assert_allclose(
            np.asarray(batched[row]), np.asarray(direct), rtol=1e-6, atol=1e-6, err_msg=name
        )
        np.testing.assert_allclose(
            np.asarray(batched[row]), reference(name, x, w, m, squared), rtol=1e-4, atol=1e-5
        )
    # The unbatched switch agrees too.
    single = aggregators.by_index(jnp.int32(2), xj, wj, jnp.int32(3), squared)
    np.testing.assert_allclose(np.asarray(single), np.asarray(batched[pairs.index((2, 3))]))


def test_vmap_over_models_and_malicious_counts():
    n, d = 8, 5
    cases = [_random_case(n, d, seed=s) for s in range(4)]
    xs = jnp.asarray(np.stack([c[0] for c in cases]))
    ws = jnp.asarray(np.stack([c[1] for c in cases]))
    ms = jnp.asarray([0, 1, 2, 3], dtype=jnp.int32)
    for name in ("multi_krum", "trimmed_mean"):
        out = jax.vmap(getattr(aggregators, name))(xs, ws, ms)
        for k, (x, w) in enumerate(cases):
            np.testing.assert_allclose(
                np.asarray(out[k]), reference(name, x, w, k, True), rtol=1e-4, atol=1e-5
            )


def test_jit_with_traced_malicious_count_compiles_once():
    n, d = 10, 4
    x, w = _random_case(n, d, seed=3)
    xj, wj = jnp.asarray(x), jnp.asarray(w)
    traces = []

    @jax.jit
    def run(m):
        traces.append(None)
        return (
            aggregators.krum_scores(xj, m),
            aggregators.krum(xj, wj, m),
            aggregators.multi_krum(xj, wj, m),
            aggregators.trimmed_mean(xj, wj, m),
        )

    for m in (1, 2, 3, 4):
        scores, chosen, mean, trimmed = run(jnp.int32(m))
        np.testing.assert_allclose(np.asarray(scores), reference_krum_scores(x, m, True), rtol=1e-4)
        np.testing.assert_allclose(np.asarray(chosen), reference_krum(x, m, True), rtol=1e-6)
        np.testing.assert_allclose(
            np.asarray(mean), reference_multi_krum(x, m, True), rtol=1e-4, atol=1e-5
        )
        np.testing.assert_allclose(
            np.asarray(trimmed), reference_trimmed_mean(x, m), rtol=1e-4, atol=1e-5
        )
    assert len(traces) == 1


@pytest.mark.parametrize("squared", [True, False])
def test_krum_selection_with_a_bound_on_m_matches_the_reference(squared):
    # partial selection (top_k of the m_max + 3 largest) instead of sorting every row,
    # for every m up to the bound under one traced m, and with ties (duplicated models)
    n, d = 12, 5
    x, w = _random_case(n, d, seed=11)
    x[5] = x[6] = x[7]  # three identical models: tied distances, some of them 0
    xj, wj = jnp.asarray(x), jnp.asarray(w)

    @jax.jit
    def scores(m):
        return (
            aggregators.krum_scores(xj, m, squared, max_malicious=4),
            aggregators.krum(xj, wj, m, squared, max_malicious=4),
            aggregators.multi_krum(xj, wj, m, squared, max_malicious=4),
        )

    for m in range(5):
        got, chosen, mean = scores(jnp.int32(m))
        np.testing.assert_allclose(
            np.asarray(got), reference_krum_scores(x, m, squared), rtol=1e-5, atol=1e-5
        )
        np.testing.assert_allclose(np.asarray(chosen), reference_krum(x, m, squared), rtol=1e-6)
        np.testing.assert_allclose(
            np.asarray(mean), reference_multi_krum(x, m, squared), rtol=1e-4, atol=1e-5
        )
    # a bound too large for n falls back to the sort
    np.testing.assert_allclose(
        np.asarray(aggregators.krum_scores(xj, 2, squared, max_malicious=n)),
        reference_krum_scores(x, 2, squared),
        rtol=1e-5,
        atol=1e-5,
    )


# ---------------------------------------------------------------- settings


def test_check_settings():
    for name in aggregators.BUILT_IN:
        with pytest.raises(ValueError, match="must be below n/2"):
            aggregators.check_settings(name, 10, 5)
        with pytest.raises(ValueError, match="at least 0"):
            aggregators.check_settings(name, 10, -1)
        aggregators.check_settings(name, 10, 4)
    for name in ("krum", "multi_krum"):
        aggregators.check_settings(name, 4, 1)  # n - m - 2 = 1 neighbour: fine
        with pytest.raises(ValueError, match="n - m - 2"):
            aggregators.check_settings(name, 3, 1)
    aggregators.check_settings("trimmed_mean", 3, 1)  # one value left after trimming
    aggregators.check_settings("median", 3, 1)
    aggregators.check_settings("fedavg", 1, 0)
    with pytest.raises(ValueError, match="unknown aggregator"):
        aggregators.check_settings("bulyan", 10, 1)
