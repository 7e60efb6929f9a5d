"""absl-flags binaries and batch scripts of foltr_jax."""
