"""FOLtR-ES's messages (Kharitonov 2019; thesis §3.1.1): the privatised MaxRR reward of an
interaction and the evolution-strategies gradient estimate the server forms from them.

A reward is the MaxRR of the clicks, one of n = k + 1 values (0, 1, 1/2, ..., 1/k),
privatised: the true value with probability p, else a uniformly chosen *different* one
("Privatization Procedure"), which is ε-locally differentially private with
ε ≤ log(p(n−1)/(1−p)) (eq. 3.6).  The estimate of eq. 3.5 is
ĝ = 1/(N σ²) Σ_c ε_c · mean_i(s_i f_ci) with signs s_i = ±1 (antithetic pairs).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np


def epsilon_bound(p: float, n_values: int = 11) -> float:
    """ε ≤ log(p(n−1)/(1−p)) (thesis eq. 3.6): the LDP level of the privatised reward.

    math.inf for p = 1 (no privatisation); ValueError outside (1/n, 1].
    """
    if not 1.0 / n_values < p <= 1.0:
        raise ValueError(f"p must be in (1/{n_values}, 1], got {p}")
    if p == 1.0:
        return math.inf
    return math.log(p * (n_values - 1) / (1.0 - p))


def reward_values(n_values: int = 11) -> jax.Array:
    """float32 [n]: the MaxRR value of each reward index: 0 (no click), 1, 1/2, ..., 1/(n−1)."""
    ranks = jnp.arange(1, n_values, dtype=jnp.float32)
    return jnp.concatenate([jnp.zeros(1, jnp.float32), 1.0 / ranks])


def reward_index(clicks: jax.Array) -> jax.Array:
    """int32 [...]: MaxRR as an index into ``reward_values``: rank of the top click, 0 if none."""
    return jnp.where(jnp.any(clicks, axis=-1), jnp.argmax(clicks, axis=-1) + 1, 0).astype(jnp.int32)


def privatise_reward(
    key: jax.Array, reward_index: jax.Array, p, n_values: int = 11, one_minus_p=None
):
    """The privatisation procedure (thesis §3.1.1): per entry of ``reward_index``, the
    true index with probability p, otherwise one of the other n − 1 indices uniformly.

    One uniform u per entry decides both: u < p keeps the truth; otherwise
    (u − p)/(1 − p) is uniform on [0, 1) and picks the shift 1..n−1 to another index.
    ``one_minus_p``: 1 − p computed where p is known exactly (a traced p is float32),
    by default from ``p``.
    """
    u = jax.random.uniform(key, jnp.shape(reward_index))
    if one_minus_p is None:
        one_minus_p = 1.0 - p
    rest = (u - p) / jnp.maximum(one_minus_p, 1e-12)
    shift = 1 + jnp.clip(jnp.floor(rest * (n_values - 1)), 0, n_values - 2).astype(jnp.int32)
    return jnp.where(u < p, reward_index, (reward_index + shift) % n_values).astype(jnp.int32)


def interaction_signs(local_updates: int, antithetic: bool = True) -> np.ndarray:
    """float32 [B]: +1 for interactions served by φ + ε, −1 for φ − ε (the last B/2)."""
    signs = np.ones(local_updates, np.float32)
    if antithetic:
        signs[local_updates // 2 :] = -1.0
    return signs


def client_gradient(
    noise: jax.Array, rewards: jax.Array, signs: jax.Array, sigma, sigma_squared=None
) -> jax.Array:
    """float [N, P]: client c's term of ĝ (thesis eq. 3.5; public code's estimator),
    mean_i(s_i f_ci) ε_c / σ², with ε_c its perturbation (already scaled by σ), f_ci its
    privatised reward values and s_i the ``interaction_signs`` (mean_i(s_i f_ci) =
    ½(f⁺_c − f⁻_c) with antithetic pairs); ĝ, an ascent direction for the reward, is their
    mean.  The server's pipeline (attack, aggregator) runs over these messages.
    ``sigma_squared``: σ² computed where σ is known exactly (a traced σ is float32), by
    default from ``sigma``."""
    scores = jnp.mean(rewards * signs, axis=-1)
    return scores[:, None] * noise / (sigma**2 if sigma_squared is None else sigma_squared)
