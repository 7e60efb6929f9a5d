"""FedIPS's propensities (FedIPS paper §5, Figure 2 right): each user's true examination
probabilities ('known'), the federated regression-EM's estimates ('estimated'), or 1
('none', the FedAvg baseline).

Regression-EM: every user keeps running E-step sums of examined and shown counts per
position; the relevance model F is one federated model, stepped each round with the mean
of the users' gradients (FedSGD).  θ̂ relative to rank 1, floored, is a user's propensity
(per user, or pooled over users with ``em_scope='global'``).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from foltr_jax.methods.fedips.ips import em_statistics, examination, init_relevance_model


class EmState(NamedTuple):
    """Regression-EM state of one run: each user's running E-step sums and the model F."""

    examined: jax.Array  # [n_users, K]
    impressions: jax.Array  # [n_users, K]
    relevance: dict  # F params


def init_em(spec) -> EmState:
    """The EM state before round 1: prior counts (propensity 0.5 per position) and F at zero."""
    cfg = spec.config
    prior = jnp.full((cfg.n_users, cfg.top_k), cfg.em_prior_count, jnp.float32)
    return EmState(0.5 * prior, prior, init_relevance_model(spec.n_features))


def estimated_propensities(spec, em: EmState):
    """θ̂ per user [n_users, K] relative to rank 1, floored (per user, or pooled with 'global')."""
    examined, impressions = em.examined, em.impressions
    if spec.config.em_scope == "global":
        examined = jnp.sum(examined, 0, keepdims=True)
        impressions = jnp.sum(impressions, 0, keepdims=True)
    theta = examined / impressions
    theta = theta / theta[:, :1]
    theta = jnp.clip(theta, spec.config.propensity_floor, 1.0)
    return jnp.broadcast_to(theta, (spec.config.n_users, spec.config.top_k))


def em_round(spec, train, em: EmState, logs) -> EmState:
    """One online regression-EM step of a run: every user computes E-step statistics of its round
    (with its current θ̂ and the global F), adds them to its running sums (online EM with step
    1/t), and the server steps F with the mean of the users' gradients (FedSGD)."""
    cfg = spec.config
    theta = em.examined / em.impressions
    if cfg.em_scope == "global":
        theta = jnp.broadcast_to(jnp.sum(em.examined, 0) / jnp.sum(em.impressions, 0), theta.shape)
    features = train.shown_features[logs.queries]  # [U, Q, K, F]
    stats = jax.vmap(em_statistics, in_axes=(0, None, 0, 0, 0))(
        theta[:, None, :], em.relevance, features, logs.impressions, logs.clicks
    )
    relevance = jax.tree_util.tree_map(
        lambda p, g: p - cfg.em_learning_rate * jnp.mean(g, 0),
        em.relevance,
        stats.relevance_gradient,
    )
    return EmState(em.examined + stats.examined, em.impressions + stats.impressions, relevance)


def round_propensities(spec, arrays, em: EmState | None, logs, gammas):
    """Every user's propensities [n_runs, n_users, K] of the round (``config.propensity``)
    and the regression-EM state after the round's E-step statistics ('estimated')."""
    cfg = spec.config
    if cfg.propensity == "known":
        return jax.vmap(jax.vmap(lambda g: examination(g, cfg.top_k)))(gammas), em
    if cfg.propensity == "estimated":
        assert em is not None  # initial_state keeps the EM's state for estimated propensities
        em = jax.vmap(functools.partial(em_round, spec, arrays.train))(em, logs)
        return jax.vmap(functools.partial(estimated_propensities, spec))(em), em
    return jnp.ones(gammas.shape + (cfg.top_k,), jnp.float32), em
