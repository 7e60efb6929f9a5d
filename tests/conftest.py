"""Test-session setup: one persistent JAX compilation cache for the whole run.

The binaries' tests start many Python processes that compile the same programs
(determinism checks run a binary twice, the resume test three times); a shared
on-disk cache lets the later processes skip XLA compilation.  Results do not
depend on it.
"""

import os
import tempfile

os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR", tempfile.mkdtemp(prefix="foltr_jax_test_xla_cache_")
)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")
