"""Plackett-Luce rankings (FPDGD paper eqs. 1-2).

P(d | D) = exp f(d) / Σ_{d'∈D} exp f(d'); a ranking is drawn by sampling without
replacement.  Adding i.i.d. Gumbel noise to the scores and taking the top k is
exactly that sequential sampling (the Gumbel-top-k trick), and it stays exact for
scores of any magnitude because nothing is exponentiated.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def sample_top_k(key: jax.Array, scores: jax.Array, mask: jax.Array, k: int):
    """Samples a top-``k`` ranking of the valid candidates.

    Args:
        key: PRNG key.
        scores: float [W] candidate scores.
        mask: bool [W] which candidates exist (padding is False).
        k: static list length; if fewer than k candidates exist the tail of the
            ranking points at padding and must be ignored (see ``n_shown``).
    Returns:
        int [k] candidate indices, top first.
    """
    perturbed = scores + jax.random.gumbel(key, scores.shape, scores.dtype)
    _, ranking = jax.lax.top_k(jnp.where(mask, perturbed, -jnp.inf), k)
    return ranking


def log_prob(
    scores: jax.Array, mask: jax.Array, ranking: jax.Array, n_shown: jax.Array
) -> jax.Array:
    """log P(R | D) of the displayed prefix ``ranking[:n_shown]`` (eq. 2).

    Denominators run over every valid candidate not yet placed, shown or not.
    """
    k = ranking.shape[0]
    placed = jnp.zeros(scores.shape, bool)
    total = jnp.float32(0.0)
    for i in range(k):  # k is a small static constant (10)
        remaining = jnp.where(mask & ~placed, scores, -jnp.inf)
        term = scores[ranking[i]] - jax.nn.logsumexp(remaining)
        total = total + jnp.where(i < n_shown, term, 0.0)
        placed = placed.at[ranking[i]].set(True)
    return total
