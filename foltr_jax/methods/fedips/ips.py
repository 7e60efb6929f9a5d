"""FedIPS's click model and loss (FedIPS paper §3-5): PBM clicks (eq. 11), the hinge bound
of eq. 4 whose IPS-weighted steps the users take (eq. 7, ``fedips.local_sgd``) and the
users' E-step of the federated regression-EM propensity estimation (§5; its rounds are
``fedips_em``)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


def examination(gamma_s, k: int):
    """p(e) at ranks 1..k for position bias γ_s: (1/rank)^γ_s (§4), float32 [k]."""
    return (1.0 / jnp.arange(1, k + 1, dtype=jnp.float32)) ** gamma_s


def click_probabilities(relevant, shown, gamma_s, noise_click_prob):
    """Eq. 11: p(e) for relevant documents, noise·p(e) for the others, 0 where nothing is shown.

    ``relevant``/``shown``: bool [..., K] in displayed order.
    """
    k = relevant.shape[-1]
    p = examination(gamma_s, k) * jnp.where(relevant, 1.0, noise_click_prob)
    return jnp.where(shown, p, 0.0)


def pbm_clicks(key, relevant, shown, gamma_s, noise_click_prob, uniforms=None):
    """Independent Bernoulli clicks of eq. 11 (PBM), bool [..., K]: click where U(0, 1) < p.

    ``uniforms`` (same shape) replace the draw from ``key`` when given.
    """
    p = click_probabilities(relevant, shown, gamma_s, noise_click_prob)
    if uniforms is None:
        uniforms = jax.random.uniform(key, p.shape)
    return uniforms < p


def sample_user_gammas(key, n_users: int, gamma: float, sd: float):
    """Per-user γ_s ~ N(γ, sd²) left-truncated at 0 (§4), float32 [n_users]."""
    if sd == 0:
        return jnp.full((n_users,), gamma, jnp.float32)
    lower = -gamma / sd
    z = jax.random.truncated_normal(key, lower, jnp.inf, (n_users,), jnp.float32)
    return jnp.maximum(gamma + sd * z, 0.0)


def hinge_rank_bound(scores, valid, index):
    """h_{q,d}(w) = Σ_{d' ∈ D_q} max(0, 1 − (f(d) − f(d'))) for d = candidate ``index`` (eq. 4).

    ``scores`` [W] over the query's candidates, ``valid`` [W] marks real ones; ``index`` may be an
    array of candidates (the result then has its shape).
    """
    margins = 1.0 - (scores[jnp.asarray(index)][..., None] - scores)
    return jnp.sum(jnp.where(valid, jnp.maximum(margins, 0.0), 0.0), axis=-1)


# Regression-EM propensity estimation (Wang et al. 2018, federated as in FedIPS §5)


def relevance_model(params, features):
    """F: the estimated relevance σ(x·v + b), a logistic-linear function (FedIPS §5)."""
    return jax.nn.sigmoid(features @ params["v"] + params["b"])


def init_relevance_model(n_features: int):
    return {"v": jnp.zeros((n_features,), jnp.float32), "b": jnp.zeros((), jnp.float32)}


class EmStatistics(NamedTuple):
    """One client's E-step statistics (Wang et al. 2018, Algorithm 1)."""

    examined: jax.Array  # [K] Σ P(E = 1 | c, θ, γ) of the impressions at each position
    impressions: jax.Array  # [K] impressions at each position
    relevance_gradient: object  # ∇ of the mean cross-entropy of F against P(R = 1 | c)


def em_statistics(theta, rel_params, features, impressions, clicks) -> EmStatistics:
    """E-step of regression-EM on one client's log under the PBM c = e·r.

    ``features`` [..., K, F] of the shown documents, ``impressions``/``clicks`` [..., K]: how often
    each was shown and clicked; ``theta`` [K] the client's current propensities.  For a skip,
    P(E=1 | c=0) = θ(1−γ)/(1−θγ) and P(R=1 | c=0) = (1−θ)γ/(1−θγ); a click has both 1.  The
    server's M-step: θ_k = Σ examined_k / Σ impressions_k, and F steps against the mean of
    the clients' gradients (FedSGD; soft targets P(R=1 | c) instead of Wang et al.'s sampled
    labels).
    """
    gamma = relevance_model(rel_params, features)
    denom = jnp.maximum(1.0 - theta * gamma, 1e-6)
    skips = impressions - clicks
    examined = clicks + skips * theta * (1.0 - gamma) / denom
    target = jax.lax.stop_gradient(clicks + skips * (1.0 - theta) * gamma / denom)
    n = jnp.maximum(jnp.sum(impressions), 1.0)
    axes = tuple(range(impressions.ndim - 1))

    def cross_entropy(p):
        logit = features @ p["v"] + p["b"]
        # Σ over impressions i of −[t_i log σ + (1 − t_i) log(1 − σ)]; ``target`` is Σ_i t_i.
        return jnp.sum(impressions * jax.nn.softplus(logit) - target * logit) / n

    return EmStatistics(
        jnp.sum(examined, axis=axes),
        jnp.sum(impressions, axis=axes),
        jax.grad(cross_entropy)(rel_params),
    )
