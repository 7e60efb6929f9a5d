"""Pairwise Differentiable Gradient Descent for one interaction (FPDGD paper §3.1,
Algorithm 1, eqs. 3-6; Oosterhuis & de Rijke 2018).

Preferences: every clicked document is preferred over every unclicked document
shown above the last click and over the one unclicked document directly after the
last click (public code and the original PDGD paper).

Pair weight for d_k >_c d_l::

    w = ρ(d_k, d_l, R, D) · e^{f(d_k)} e^{f(d_l)} / (e^{f(d_k)} + e^{f(d_l)})²,
    ρ = P(R*|D) / (P(R|D) + P(R*|D)),

where R* swaps the two documents.  With a < b their positions, only the
Plackett-Luce denominators Z_p for a < p ≤ b differ::

    Z_p  = rest + Σ_{q ≥ p} e^{s_q}
    Z*_p = rest + Σ_{q ≥ p, q ≠ b} e^{s_q} + e^{s_a},

where ``rest`` sums over the candidates never shown.  Hence::

    ρ = 1 / (1 + Π_{a<p≤b} Z*_p / Z_p).

Each Z_p is scaled by exp(-m_p), m_p the largest score in its own set, so Z_p ≥ 1
and Z*_p / Z_p ≤ 2: the product cannot overflow and no difference of large sums
is ever taken.  The gradient is Σ w (∇f(d_k) − ∇f(d_l)), returned here as one
coefficient per displayed position so any ranker can apply it with a vjp.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def preference_pairs(clicks: jax.Array, shown: jax.Array) -> jax.Array:
    """bool [k, k]: pairs[i, j] is True when position i is preferred over j."""
    k = clicks.shape[0]
    positions = jnp.arange(k)
    last_click = jnp.max(jnp.where(clicks, positions, -1))
    negative = shown & ~clicks & (positions <= last_click + 1)
    return clicks[:, None] & negative[None, :]


def debias_weights(
    shown_scores: jax.Array, shown: jax.Array, rest_logsumexp: jax.Array
) -> jax.Array:
    """ρ for every ordered pair of displayed positions, float [k, k] (eq. 6).

    Args:
        shown_scores: float [k] scores of the documents in displayed order.
        shown: bool [k] which positions are displayed.
        rest_logsumexp: log Σ e^{s} over the valid candidates that were not shown
            (-inf when every candidate was shown).
    """
    k = shown_scores.shape[0]
    positions = jnp.arange(k)
    s = jnp.where(shown, shown_scores, -jnp.inf)
    upper = positions[None, :] >= positions[:, None]  # [p, q]: q ≥ p
    # m_p: max over the set of Z_p = {not shown} ∪ {q ≥ p}.
    m = jnp.maximum(jnp.max(jnp.where(upper, s[None, :], -jnp.inf), axis=1), rest_logsumexp)
    m = jnp.where(jnp.isfinite(m), m, 0.0)
    scaled = jnp.exp(s[None, :] - m[:, None])  # [p, q] = e^{s_q − m_p}
    e = jnp.where(upper, scaled, 0.0)
    rest = jnp.exp(rest_logsumexp - m)
    z = rest + jnp.sum(e, axis=1)  # [p]
    # z_without[p, b] = rest_p + Σ_{q ≥ p, q ≠ b} e[p, q]: sums of positive terms
    # over q < b and q > b (triangular matmuls), so no large sum is subtracted.
    strictly_before = (positions[:, None] < positions[None, :]).astype(e.dtype)  # [q, b]
    before_b = e @ strictly_before
    after_b = e @ strictly_before.T
    z_without = rest[:, None] + before_b + after_b
    # ratio[a, b, p] = Z*_p / Z_p = (z_without[p, b] + e^{s_a − m_p}) / Z_p.
    ratio = (z_without.T[None, :, :] + scaled.T[:, None, :]) * (1.0 / z)[None, None, :]
    between = (positions[None, None, :] > positions[:, None, None]) & (
        positions[None, None, :] <= positions[None, :, None]
    )
    product = jnp.prod(jnp.where(between, ratio, 1.0), axis=2)  # [a, b], a < b
    product = jnp.where(positions[:, None] < positions[None, :], product, product.T)
    return 1.0 / (1.0 + product)


def position_coefficients(
    shown_scores: jax.Array, shown: jax.Array, clicks: jax.Array, rest_logsumexp: jax.Array
) -> jax.Array:
    """d(PDGD objective)/d(score) for each displayed position, float [k] (eq. 5).

    The model gradient is Σ_i coef_i ∇f(d_i) over displayed documents d_i.
    """
    pairs = preference_pairs(clicks, shown)
    diff = shown_scores[:, None] - shown_scores[None, :]
    # e^a e^b / (e^a + e^b)^2 = σ(a − b) σ(b − a), stable for any magnitude.
    pair_weight = jax.nn.sigmoid(diff) * jax.nn.sigmoid(-diff)
    w = jnp.where(pairs, debias_weights(shown_scores, shown, rest_logsumexp) * pair_weight, 0.0)
    return jnp.sum(w, axis=1) - jnp.sum(w, axis=0)


def unshown_logsumexp(
    scores: jax.Array, mask: jax.Array, ranking: jax.Array, shown: jax.Array
) -> jax.Array:
    """log Σ e^{f(d)} over the valid candidates that were not displayed (-inf if none)."""
    displayed = jnp.zeros(scores.shape, jnp.int32).at[ranking].add(shown.astype(jnp.int32)) > 0
    return jax.nn.logsumexp(jnp.where(mask & ~displayed, scores, -jnp.inf))
