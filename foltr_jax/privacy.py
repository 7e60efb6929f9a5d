"""Differential privacy for FPDGD (FPDGD paper §3.3, Algorithm 3).

Each client clips its locally trained weights (Eq. 13) and adds γ − γ′ per coordinate, where
γ and γ′ are independent Gamma(shape = 1/|C|, scale = Δ/ε) variables (Eq. 16).  A Gamma(1/n)
variable is infinitely divisible into the exponential distribution: the sum of n independent
Gamma(1/n, s) draws is Gamma(1, s) = Exponential(s), and the difference of two independent
Exponential(s) variables is Laplace(0, s).  So once the server sums the |C| clients' noise
(Eq. 15 with μ = 0), the total is Laplace(0, Δ/ε), the Laplace mechanism's noise for
sensitivity Δ and privacy budget ε (Eq. 14), while no single client reveals its own share.

All functions are pure and jit/vmap friendly; randomness comes from explicit keys.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def laplace_scale(sensitivity, epsilon):
    """Scale λ = Δ/ε of the Laplace mechanism (FPDGD paper §3.3, text after Eq. 14)."""
    return jnp.asarray(sensitivity, jnp.float32) / jnp.asarray(epsilon, jnp.float32)


def clip(flat_params: jax.Array, sensitivity, factor: float = 0.5) -> jax.Array:
    """Clips the weights to norm ``factor``·Δ: θ · min(1, factor·Δ / ‖θ‖) (FPDGD Eq. 13).

    The paper uses factor 0.5 (bound Δ/2, so two clipped models differ by at most Δ); the
    public FPDGD implementation clips to Δ itself (factor 1.0).  A zero vector is returned
    unchanged (no division by zero, finite gradients).
    """
    bound = jnp.asarray(factor, flat_params.dtype) * jnp.asarray(sensitivity, flat_params.dtype)
    squared_norm = jnp.sum(jnp.square(flat_params))
    positive = squared_norm > 0
    norm = jnp.sqrt(jnp.where(positive, squared_norm, 1.0))
    scale = jnp.where(positive & (norm > bound), bound / norm, 1.0)
    return flat_params * scale.astype(flat_params.dtype)


def gamma_noise(key: jax.Array, shape, n_clients, sensitivity, epsilon) -> jax.Array:
    """One client's share γ − γ′ of the Laplace noise (FPDGD paper Eqs. 15-16, Algorithm 3).

    γ, γ′ ~ Gamma(shape = 1/n_clients, scale = Δ/ε) independently per coordinate, so the sum
    of ``n_clients`` independent shares is Laplace(0, Δ/ε).  ``n_clients`` may be traced.
    """
    key_plus, key_minus = jax.random.split(key)
    concentration = 1.0 / jnp.asarray(n_clients, jnp.float32)
    plus = jax.random.gamma(key_plus, concentration, shape, jnp.float32)
    minus = jax.random.gamma(key_minus, concentration, shape, jnp.float32)
    return laplace_scale(sensitivity, epsilon) * (plus - minus)
