"""``jax.random.normal`` for many keys at once, bit for bit, without JAX's CPU lowering of
the Threefry-2x32 hash.

On the CPU JAX lowers the hash (Salmon et al., "Parallel random numbers: as easy as 1, 2,
3", SC 2011) as a rolled loop of five steps, each reading and writing the whole
[keys, n] counter arrays, and the float transform after it runs as separate passes: drawing
FOLtR-ES's perturbations (5 runs x 2,000 clients x 1,380 weights a round) took about 1 s.
Written out as plain integer operations, the twenty rounds and the transform to a normal
fuse into one elementwise pass.  The integer hash is exact and the float transform is
JAX's own sequence of operations (``jax.random.uniform``'s mantissa trick on [nextafter(−1,
0), 1), then √2·erfinv), so the draws are JAX's; ``tests/core/test_threefry.py`` checks them
against ``jax.random.normal``.

Only JAX's default generator with ``jax_threefry_partitionable`` (the default since JAX
0.5) draws this stream; under any other setting ``normal`` calls ``jax.random.normal``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = np.uint32(0x1BD11BDA)


def threefry2x32(k1, k2, x1, x2):
    """The Threefry-2x32 hash (20 rounds) of the counter pairs (x1, x2) under the key
    (k1, k2), uint32 arrays that broadcast together: JAX's ``threefry2x32_p``, unrolled."""
    ks = (k1, k2, k1 ^ k2 ^ _PARITY)
    x1 = x1 + ks[0]
    x2 = x2 + ks[1]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x1 = x1 + x2
            x2 = (x2 << np.uint32(r)) | (x2 >> np.uint32(32 - r))
            x2 = x1 ^ x2
        x1 = x1 + ks[(i + 1) % 3]
        x2 = x2 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x1, x2


def draws_jax_stream(keys) -> bool:
    """Whether ``normal`` can draw JAX's stream for ``keys`` itself: raw uint32 [..., 2]
    keys of the default generator with partitionable Threefry."""
    return (
        bool(jax.config.jax_threefry_partitionable)  # type: ignore[attr-defined]  # run-time option
        and jax.config.jax_default_prng_impl == "threefry2x32"  # type: ignore[attr-defined]
        and keys.dtype == jnp.uint32
        and keys.ndim >= 1
        and keys.shape[-1] == 2
    )


def normal(keys: jax.Array, n: int) -> jax.Array:
    """float32 [..., n]: ``jax.random.normal(key, (n,))`` of every key of ``keys`` (raw
    uint32 keys [..., 2]), the same numbers bit for bit."""
    if not draws_jax_stream(keys) or n >= 2**32:
        typed = jax.dtypes.issubdtype(keys.dtype, jax.dtypes.prng_key)
        lead = keys.shape if typed else keys.shape[:-1]
        flat = keys.reshape((-1,) + keys.shape[len(lead) :])
        out = jax.vmap(lambda key: jax.random.normal(key, (n,)))(flat)
        return out.reshape(lead + (n,))
    # Partitionable Threefry: the counters of element i are (0, i); the bits, x1 ^ x2.
    b1, b2 = threefry2x32(
        keys[..., 0:1], keys[..., 1:2], jnp.zeros((n,), jnp.uint32), jnp.arange(n, dtype=jnp.uint32)
    )
    bits = b1 ^ b2
    # jax.random.uniform on [lo, hi): 23 random mantissa bits under the exponent of 1.0.
    one = np.uint32(np.array(1.0, np.float32).view(np.uint32))
    floats = jax.lax.bitcast_convert_type((bits >> np.uint32(9)) | one, jnp.float32)
    floats = floats - np.float32(1.0)
    lo = np.nextafter(np.float32(-1.0), np.float32(0.0), dtype=np.float32)
    hi = np.float32(1.0)
    uniform = jnp.maximum(lo, floats * (hi - lo) + lo)
    return np.float32(np.sqrt(2)) * jax.lax.erf_inv(uniform)
