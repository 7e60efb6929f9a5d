"""foltr_jax: Federated Online Learning to Rank simulated in JAX."""

__version__ = "0.1.0"
