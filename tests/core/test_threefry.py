"""``threefry.normal`` draws ``jax.random.normal``'s numbers bit for bit (FOLtR-ES's
perturbations come from it, so a golden run depends on this)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from foltr_jax.core import threefry


def jax_normal(keys, n):
    flat = keys.reshape(-1, 2)
    return jax.vmap(lambda key: jax.random.normal(key, (n,)))(flat).reshape(keys.shape[:-1] + (n,))


def keys_of(shape, seed=0):
    """Raw keys [*shape, 2] made the way the methods make them (split, fold_in)."""
    base = jax.random.split(jax.random.PRNGKey(seed), shape[0])
    if len(shape) == 1:
        return base
    return jax.vmap(lambda k: jax.vmap(lambda c: jax.random.fold_in(k, c))(jnp.arange(shape[1])))(
        base
    )


@pytest.mark.parametrize("n", [1, 2, 7, 136, 1380])
def test_normal_is_jax_random_normal_bit_for_bit(n):
    keys = keys_of((3, 50), seed=n)
    got = np.asarray(jax.jit(threefry.normal, static_argnums=1)(keys, n))
    want = np.asarray(jax.jit(jax_normal, static_argnums=1)(keys, n))
    assert got.dtype == np.float32 and got.shape == (3, 50, n)
    np.testing.assert_array_equal(got, want)


def test_normal_under_vmap_and_unjitted():
    keys = keys_of((40,), seed=3)
    want = np.asarray(jax_normal(keys, 33))
    np.testing.assert_array_equal(np.asarray(threefry.normal(keys, 33)), want)
    by_vmap = jax.jit(jax.vmap(lambda k: threefry.normal(k, 33)))(keys)
    np.testing.assert_array_equal(np.asarray(by_vmap), want)


def test_hash_is_jax_threefry():
    """The unrolled hash equals JAX's Threefry-2x32 on arbitrary counters."""
    from jax.extend.random import threefry_2x32

    key = jnp.asarray([0x12345678, 0x9ABCDEF0], jnp.uint32)
    counts = jnp.arange(1000, dtype=jnp.uint32) * np.uint32(2654435761)
    want = np.asarray(threefry_2x32(key, counts))
    x1, x2 = counts[:500], counts[500:]  # threefry_2x32 hashes the halves as pairs
    got = np.concatenate([np.asarray(a) for a in threefry.threefry2x32(key[0], key[1], x1, x2)])
    np.testing.assert_array_equal(got, want)


def test_other_settings_fall_back_to_jax():
    keys = keys_of((5,), seed=9)
    with jax.threefry_partitionable(False):
        assert not threefry.draws_jax_stream(keys)
        np.testing.assert_array_equal(
            np.asarray(threefry.normal(keys, 11)), np.asarray(jax_normal(keys, 11))
        )
    typed = jax.random.split(jax.random.key(4), 6)
    assert not threefry.draws_jax_stream(typed)
    want = jax.vmap(lambda key: jax.random.normal(key, (5,)))(typed)
    np.testing.assert_array_equal(np.asarray(threefry.normal(typed, 5)), np.asarray(want))
