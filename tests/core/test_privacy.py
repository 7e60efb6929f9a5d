"""FPDGD differential privacy (FPDGD paper §3.3): clipping and distributed Laplace noise."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from foltr_jax.core import privacy

N_SAMPLES = 200_000
N_CLIENTS = 10
SENSITIVITY, EPSILON = 5.0, 4.5  # FPDGD paper §5.3's setting
SCALE = SENSITIVITY / EPSILON


# Kolmogorov-Smirnov critical value at α = 0.001: sqrt(-ln(α/2)/2) / sqrt(N) ≈ 1.95/sqrt(N)
def ks_critical(n, alpha=0.001):
    """Asymptotic KS critical value sqrt(-ln(α/2)/2)/sqrt(n) (≈ 1.95/sqrt(n) at α = 0.001)."""
    return math.sqrt(-math.log(alpha / 2) / 2) / math.sqrt(n)


KS_CRITICAL = ks_critical(N_SAMPLES)
SMALL = 20_000  # sample size for checks that only need to reject grossly wrong noise


def laplace_cdf(x, scale):
    x = np.asarray(x, np.float64)
    return np.where(x < 0, 0.5 * np.exp(x / scale), 1.0 - 0.5 * np.exp(-x / scale))


def normal_cdf(x, std):
    erf = np.vectorize(math.erf)
    return 0.5 * (1.0 + erf(np.asarray(x, np.float64) / (std * math.sqrt(2.0))))


def ks_statistic(samples, cdf):
    """sup_x |F_N(x) − F(x)| for the empirical CDF F_N of ``samples``."""
    x = np.sort(np.asarray(samples, np.float64))
    f = cdf(x)
    n = len(x)
    above = np.arange(1, n + 1) / n - f
    below = f - np.arange(n) / n
    return max(above.max(), below.max())


def summed_noise(seed, n_samples, n_clients, noise_clients):
    """n_samples sums of n_clients clients' noise shares, each share generated as if there
    were ``noise_clients`` clients (one key per client, vmapped)."""
    keys = jax.random.split(jax.random.key(seed), n_clients)
    share = jax.vmap(
        lambda k: privacy.gamma_noise(k, (n_samples,), noise_clients, SENSITIVITY, EPSILON)
    )
    return np.asarray(jax.jit(lambda k: jnp.sum(share(k), axis=0))(keys), np.float64)


@pytest.fixture(scope="module")
def sums():
    return summed_noise(0, N_SAMPLES, N_CLIENTS, N_CLIENTS)


def test_laplace_scale():
    assert float(privacy.laplace_scale(5.0, 4.5)) == pytest.approx(5.0 / 4.5)


@pytest.mark.parametrize("factor", [0.5, 1.0])
def test_clip_above_bound_scales_to_bound(factor):
    theta = jnp.array([3.0, 4.0, 0.0, 12.0])  # norm 13
    clipped = privacy.clip(theta, 10.0, factor)
    bound = factor * 10.0
    np.testing.assert_allclose(clipped, np.array([3.0, 4.0, 0.0, 12.0]) * bound / 13.0, rtol=1e-6)
    assert float(jnp.linalg.norm(clipped)) == pytest.approx(bound, rel=1e-6)


@pytest.mark.parametrize("factor", [0.5, 1.0])
def test_clip_below_bound_is_identity(factor):
    theta = jnp.array([0.3, -0.4])  # norm 0.5
    np.testing.assert_array_equal(privacy.clip(theta, 3.0, factor), theta)


def test_clip_default_factor_is_half_sensitivity():
    theta = jnp.array([6.0, 8.0])  # norm 10
    np.testing.assert_allclose(privacy.clip(theta, 4.0), [1.2, 1.6], rtol=1e-6)  # bound 2
    np.testing.assert_allclose(privacy.clip(theta, 4.0, 1.0), [2.4, 3.2], rtol=1e-6)  # bound 4


def test_clip_zero_vector_and_gradient_are_finite():
    zero = jnp.zeros(5)
    np.testing.assert_array_equal(privacy.clip(zero, 3.0), zero)
    grad = jax.grad(lambda t: jnp.sum(privacy.clip(t, 3.0)))(zero)
    assert np.all(np.isfinite(grad))


def test_clip_is_jittable_and_vmappable():
    thetas = jnp.array([[3.0, 4.0], [0.1, 0.0], [0.0, 0.0]])
    out = jax.jit(jax.vmap(privacy.clip, in_axes=(0, None)))(thetas, 2.0)
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.1, 0.0], [0.0, 0.0]], rtol=1e-6)


def test_gamma_noise_shape_dtype_and_key_dependence():
    a = privacy.gamma_noise(jax.random.key(1), (3, 7), 10, 5.0, 4.5)
    b = privacy.gamma_noise(jax.random.key(2), (3, 7), 10, 5.0, 4.5)
    assert a.shape == (3, 7) and a.dtype == jnp.float32
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(a, privacy.gamma_noise(jax.random.key(1), (3, 7), 10, 5.0, 4.5))


def test_sum_of_client_noise_is_laplace(sums):
    """KS goodness of fit of Σ_clients (γ − γ′) against Laplace(0, Δ/ε) (FPDGD Eq. 15)."""
    statistic = ks_statistic(sums, lambda x: laplace_cdf(x, SCALE))
    assert statistic < KS_CRITICAL, (statistic, KS_CRITICAL)


def test_ks_check_rejects_wrong_scale_and_wrong_shape(sums):
    """The same check has power: it rejects a 20% wrong scale and a variance-matched Gaussian."""
    wrong_scale = ks_statistic(sums, lambda x: laplace_cdf(x, 1.2 * SCALE))
    assert wrong_scale > KS_CRITICAL, (wrong_scale, KS_CRITICAL)
    gaussian = ks_statistic(sums, lambda x: normal_cdf(x, math.sqrt(2.0) * SCALE))
    assert gaussian > KS_CRITICAL, (gaussian, KS_CRITICAL)
    # and wrong samples are rejected against the right distribution (noise is linear in Δ,
    # so 1.2 × the sums is exactly the noise for sensitivity 1.2·Δ)
    assert ks_statistic(1.2 * sums, lambda x: laplace_cdf(x, SCALE)) > KS_CRITICAL
    normal = math.sqrt(2.0) * SCALE * np.asarray(jax.random.normal(jax.random.key(2), (N_SAMPLES,)))
    assert ks_statistic(normal, lambda x: laplace_cdf(x, SCALE)) > KS_CRITICAL


def test_full_laplace_per_client_is_rejected():
    """A plausible bug, every client adding a whole Laplace(Δ/ε) (shape 1), fails the check."""
    wrong = summed_noise(3, SMALL, N_CLIENTS, noise_clients=1)
    assert ks_statistic(wrong, lambda x: laplace_cdf(x, SCALE)) > ks_critical(SMALL)


def test_single_client_noise_is_laplace():
    noise = np.asarray(privacy.gamma_noise(jax.random.key(4), (SMALL,), 1, 1.0, 2.0))
    assert ks_statistic(noise, lambda x: laplace_cdf(x, 0.5)) < ks_critical(SMALL)


def test_sum_moments(sums):
    """Mean 0 and variance 2(Δ/ε)², within 5 standard errors."""
    n = len(sums)
    mean_se = math.sqrt(2.0) * SCALE / math.sqrt(n)
    assert abs(sums.mean()) < 5 * mean_se
    # Var(X²) = E X⁴ − (E X²)² = 24λ⁴ − 4λ⁴ = 20λ⁴ for Laplace(λ)
    var_se = math.sqrt(20.0) * SCALE**2 / math.sqrt(n)
    assert abs(sums.var() - 2 * SCALE**2) < 5 * var_se


@pytest.mark.parametrize("alpha", [0.3, 1.0])
def test_small_shape_gamma_retries_keep_the_gamma_distribution(alpha):
    # one proposal per entry: ~5 % of the entries are rejected and retried (64 slots per
    # retry round here, most of them unused and dropped); the draws must be Gamma(α, 1)
    from scipy import stats

    draws = jax.jit(jax.vmap(lambda k: privacy.small_shape_gamma(k, alpha, (4, 50))))(
        jax.random.split(jax.random.key(7), 100)
    )
    draws = np.asarray(draws, np.float64).ravel()
    assert draws.shape == (SMALL,) and np.all(draws >= 0) and np.all(np.isfinite(draws))
    assert ks_statistic(draws, stats.gamma(alpha).cdf) < ks_critical(SMALL)
    # and a wrong shape parameter is rejected by the same check
    assert ks_statistic(draws, stats.gamma(alpha * 1.2).cdf) > ks_critical(SMALL)


# --- The average's noise drawn once (pipeline.gamma_noise_once) against per-client shares ---


def _noised_average(stages, n_clients, n_absent, d, seed):
    """The aggregate of ``n_clients`` zero models (the first ``n_absent`` weigh 0) after
    ``stages``: what the privacy noise leaves on the FedAvg."""
    from foltr_jax.server import pipeline

    weights = jnp.where(jnp.arange(n_clients) >= n_absent, 2.0, 0.0)
    zeros = jnp.zeros(d, jnp.float32)
    updates = pipeline.ClientUpdates(jnp.zeros((n_clients, d)), weights, zeros, 0, zeros)
    chain = pipeline.chain(*stages)
    out, _ = jax.jit(chain.update)(chain.init(zeros), updates, jax.random.key(seed))
    return np.asarray(out.aggregate, np.float64)


@pytest.mark.parametrize("n_absent", [0, pytest.param(3, marks=pytest.mark.slow)])
def test_noise_drawn_once_on_the_average_has_the_per_client_distribution(n_absent):
    from scipy import stats

    from foltr_jax.server import pipeline

    n, d = N_CLIENTS, N_SAMPLES
    present = n - n_absent
    fedavg = pipeline.aggregate(("fedavg",), 0)
    per_client = _noised_average(
        [pipeline.gamma_noise(n, SENSITIVITY, EPSILON), fedavg], n, n_absent, d, seed=1
    )
    once = _noised_average(
        [fedavg, pipeline.gamma_noise_once(n, present, SENSITIVITY, EPSILON)],
        n,
        n_absent,
        d,
        seed=2,
    )
    assert stats.ks_2samp(per_client, once).pvalue > 0.001
    # Var of the average: n_present shares of variance 2s²/|C| each, over n_present².
    variance = 2 * SCALE**2 / (n * present)
    for sample in (per_client, once):
        assert np.var(sample) == pytest.approx(variance, rel=0.05)
    if n_absent == 0:  # |C| · average = the Laplace mechanism's noise, exactly
        assert ks_statistic(n * once, lambda x: laplace_cdf(x, SCALE)) < KS_CRITICAL
    # the check can fail: noise not divided by the number of clients is far off
    assert stats.ks_2samp(per_client, once * present).pvalue < 1e-6


def _final_ndcg(data_pair, **overrides):
    from foltr_jax.methods.fpdgd import federation

    settings = dict(
        n_clients=8,
        local_updates=3,
        rounds=10,
        n_runs=48,
        chunk_rounds=10,
        click_model="informational",
        epsilon=1.2,
        sensitivity=5.0,
    )
    config = federation.FpdgdConfig(**{**settings, **overrides})
    spec, arrays = federation.build(config, *data_pair)
    return spec, federation.run(spec, arrays).offline_ndcg[:, -1]


@pytest.fixture(scope="module")
def small_data():
    from foltr_jax import data

    return data.synthetic_train_test(
        5, n_train_queries=40, n_test_queries=30, n_features=8, mean_docs_per_query=20
    )


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_noise_drawn_once_gives_the_per_client_final_metrics(small_data):
    from scipy import stats

    spec_once, once = _final_ndcg(small_data)
    spec_clients, per_client = _final_ndcg(small_data, privacy_noise="per_client")
    assert spec_once.noise_once and not spec_clients.noise_once
    assert not np.allclose(once, per_client)  # different draws ...
    assert stats.ks_2samp(once, per_client).pvalue > 0.001  # ... of one distribution
    assert stats.ttest_ind(once, per_client, equal_var=False).pvalue > 0.001
    # and the noise matters: without it the final nDCG differs clearly
    _, plain = _final_ndcg(small_data, epsilon=0.0, sensitivity=0.0)
    assert stats.ttest_ind(once, plain, equal_var=False).pvalue < 0.001


def test_noise_once_only_where_no_stage_sees_a_noised_client(small_data):
    from foltr_jax.methods.fpdgd import federation
    from foltr_jax.methods.fpdgd.client_plan import ClientPlan

    def spec(plan=None, **overrides):
        settings = dict(n_clients=8, rounds=2, epsilon=4.5, sensitivity=5.0)
        config = federation.FpdgdConfig(**{**settings, **overrides})
        return federation.build(config, *small_data, clients=plan)[0]

    assert spec().noise_once
    assert spec(attack="data_poisoning", n_malicious=2).noise_once  # clicks, not models
    assert not spec(privacy_noise="per_client").noise_once
    assert not spec(aggregator="median").noise_once
    assert not spec(attack="lie", n_malicious=2).noise_once
    assert not spec(ClientPlan(steps=(1, 2) * 4), local_updates=2).noise_once  # Type 4 weights


@pytest.mark.slow  # tens of seconds of compilation; smaller fast tests cover the module
def test_noise_once_streams_over_client_chunks(small_data):
    _, whole = _final_ndcg(small_data, n_runs=2, rounds=3)
    _, chunked = _final_ndcg(small_data, n_runs=2, rounds=3, client_chunk=4)
    np.testing.assert_allclose(chunked, whole, rtol=1e-5, atol=1e-6)
