"""Server aggregation rules: FedAvg and the Byzantine-robust defences of the poisoning paper.

The server sees the clients' models flattened and stacked: ``models`` float32 [n, d] (row i is
client i's θ_i), ``weights`` float32 [n] (n_c, each client's number of local interactions) and
``n_malicious`` m, which may be a traced JAX integer so that one compiled program can run several
m under ``vmap``.  m is therefore never used as a Python shape: rules keep ranks through masks (Krum sorts or,
with a static bound on m, selects; Median and Trimmed Mean find order statistics by counting).  n = ``models.shape[0]`` is static.

Rules (as compared in the poisoning paper, ICTIR 2023, an analysis of untargeted poisoning attacks
and defences for federated online learning to rank):

* FedAvg (McMahan et al. 2017): Σ n_c θ_c / Σ n_c.
* Krum (Blanchard et al. 2017): the model whose summed distance to its n − m − 2 nearest other
  models is smallest.  Blanchard et al. use squared Euclidean distance, the poisoning paper says
  Euclidean; ``squared`` picks one (default: Blanchard).  Rules with ``distances`` also take
  ``max_malicious``, a static bound on m that lets them select instead of sort.
* Multi-Krum (Blanchard et al. 2017): the plain mean of the f = n − m models of lowest Krum score.
* Trimmed Mean (Yin et al. 2018): per coordinate, drop the β = m largest and β = m smallest values
  and average the rest.
* Median (Yin et al. 2018): per coordinate median (even n: mean of the two middle values).

The rules do not check m against n (it may be traced); ``check_settings`` does, on Python ints,
before a run.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from foltr_jax.core.registry import PartError, Registry


class Stream(NamedTuple):
    """How a rule runs over a round's clients a chunk at a time (``--client_chunk``):
    ``part(models [k, d], weights [k])`` of every chunk are added up (a pytree of sums),
    then ``finish(sums) -> [d]`` gives the rule's value on all the clients."""

    part: Callable[[jax.Array, jax.Array], Any]  # the sums: any pytree
    finish: Callable[[Any], jax.Array]


class Aggregator(NamedTuple):
    """A registered aggregation rule: ``rule(models, weights, n_malicious[, squared=])``."""

    name: str
    rule: Callable[..., jax.Array]
    summary: str  # one line for --help
    distances: bool  # takes ``squared`` (static): Euclidean or squared distances
    check: Callable[[int, int], None] | None  # raises ValueError for an impossible (n, m)
    stream: Stream | None = None  # the rule in chunks of clients; None: needs every client


_REGISTRY: Registry[Aggregator] = Registry("aggregator")


def register(
    name: str,
    summary: str,
    *,
    distances: bool = False,
    check: Callable[[int, int], None] | None = None,
    stream: Stream | None = None,
):
    """Decorator: registers ``rule(models [n, d], weights [n], n_malicious) -> [d]`` as ``name``.

    The rule must accept a traced ``n_malicious`` (see the module doc).  Once registered
    it can be named in a config (``aggregator=name``), a grid ``Setting`` and the
    binaries' ``--aggregator``; ``distances`` rules also get ``squared=``.  A rule given a
    ``stream`` (sums over chunks of clients, then the value) also runs with client chunks.
    """

    def add(rule):
        _REGISTRY.add(name, Aggregator(name, rule, summary, distances, check, stream))
        return rule

    return add


names = _REGISTRY.names  # every registered aggregator, the built-in ones first
get = _REGISTRY.get
help_text = _REGISTRY.help_text


def call(
    name: str, models, weights, n_malicious, squared: bool = True, max_malicious=None
) -> jax.Array:
    """Aggregator ``name`` on one run's models; ``squared`` reaches distance-based rules, and
    so does ``max_malicious`` (static bound on m: partial selection instead of sorts)."""
    found = get(name)
    if found.distances:
        out = found.rule(models, weights, n_malicious, squared=squared, max_malicious=max_malicious)
    else:
        out = found.rule(models, weights, n_malicious)
    shape, dtype = getattr(out, "shape", None), getattr(out, "dtype", None)
    if shape != models.shape[1:] or dtype != models.dtype:
        got = type(out).__name__ if shape is None else f"shape {tuple(shape)} and dtype {dtype}"
        raise PartError(
            f"aggregator {name!r} returned {got}; expected one model of shape "
            f"{tuple(models.shape[1:])} and dtype {models.dtype} (the rule maps the client "
            "models [n, d] to one [d])"
        )
    return out


def _check_krum(n: int, m: int) -> None:
    if n - m - 2 < 1:
        raise ValueError(
            f"Krum needs n - m - 2 >= 1 neighbours to score each client, "
            f"got n={n}, m={m} (n - m - 2 = {n - m - 2})"
        )


def _check_trimmed(n: int, m: int) -> None:
    if n - 2 * m < 1:
        raise ValueError(
            f"trimmed_mean needs n - 2m >= 1 values left after trimming, got n={n}, m={m}"
        )


def _as_int(n_malicious) -> jax.Array:
    return jnp.asarray(n_malicious, dtype=jnp.int32)


@register(
    "fedavg",
    "weighted mean of the client models",
    # Σ_c n_c θ_c and Σ_c n_c add up over chunks
    stream=Stream(
        part=lambda models, weights: (weighted_sum(models, weights), jnp.sum(weights)),
        finish=lambda sums: sums[0] / sums[1],
    ),
)
def fedavg(models: jax.Array, weights: jax.Array, n_malicious=0) -> jax.Array:
    """FedAvg (McMahan et al. 2017; FPDGD Alg. 2): Σ_c n_c θ_c / Σ_c n_c.  m is ignored."""
    del n_malicious
    weights = weights.astype(models.dtype)
    return weighted_sum(models, weights) / jnp.sum(weights)


def weighted_sum(models: jax.Array, weights: jax.Array) -> jax.Array:
    """Σ_c w_c θ_c [d] of ``models`` [n, d] as one matrix-vector product, not
    sum(weights[:, None] * models, axis=0): XLA:CPU runs that reduction over the client
    axis ~100x slower (143 ms against 1.4 ms for 1,000 x 8,832, the neural ranker's
    round).  HIGHEST keeps GPUs off TF32."""
    return jnp.matmul(weights, models, precision=jax.lax.Precision.HIGHEST)


def pairwise_distances(models: jax.Array, squared: bool) -> jax.Array:
    """[n, n] Euclidean (or squared) distances via the Gram matrix ‖a‖² + ‖b‖² − 2 a·b.

    Clamped at 0 against rounding, with an exactly zero diagonal.  The Gram product runs at
    HIGHEST precision so that GPUs do not fall back to TF32.
    """
    sq_norms = jnp.sum(models * models, axis=1)
    gram = jnp.matmul(models, models.T, precision=jax.lax.Precision.HIGHEST)
    dist = jnp.maximum(sq_norms[:, None] + sq_norms[None, :] - 2.0 * gram, 0.0)
    n = models.shape[0]
    dist = jnp.where(jnp.eye(n, dtype=bool), 0.0, dist)
    return dist if squared else jnp.sqrt(dist)


def krum_scores(
    models: jax.Array, n_malicious, squared: bool = True, max_malicious: int | None = None
) -> jax.Array:
    """Krum score (Blanchard et al. 2017): Σ distances to the n − m − 2 nearest other clients.

    ``max_malicious`` (static, ≥ every m the traced ``n_malicious`` takes) replaces the full
    sort of each row of distances by a partial selection of its m_max + 3 largest: the
    largest kept distance t is the (m + 3)-th largest of the row (self counts as +inf), and
    the score is Σ_{d < t} d + (n − m − 2 − #{d < t})·t, the same sum (ties included) in
    another order.  On a CPU at n = 1,000 that is ~2 ms against ~130 ms for the sort.
    """
    n = models.shape[0]
    m = _as_int(n_malicious)
    dist = pairwise_distances(models, squared)
    dist = jnp.where(jnp.eye(n, dtype=bool), jnp.inf, dist)  # a client is not its own neighbour
    if max_malicious is not None and max_malicious + 3 <= n:
        largest = jax.lax.top_k(dist, max_malicious + 3)[0]  # descending, self (inf) first
        kept_max = jnp.take(largest, m + 2, axis=1)  # t: the largest distance kept
        below = dist < kept_max[:, None]
        ties = (n - 2 - m) - jnp.sum(below, axis=1)  # kept distances equal to t
        return jnp.sum(jnp.where(below, dist, 0.0), axis=1) + ties.astype(dist.dtype) * kept_max
    nearest = jnp.sort(dist, axis=1)  # the inf (self) sorts last
    keep = jnp.arange(n) < n - 2 - m
    return jnp.sum(jnp.where(keep[None, :], nearest, 0.0), axis=1)


@register("krum", "the model of lowest Krum score", distances=True, check=_check_krum)
def krum(
    models: jax.Array,
    weights: jax.Array,
    n_malicious,
    squared: bool = True,
    max_malicious: int | None = None,
) -> jax.Array:
    """Krum (Blanchard et al. 2017): the model of lowest Krum score (ties: lowest index)."""
    del weights
    return models[jnp.argmin(krum_scores(models, n_malicious, squared, max_malicious))]


def _lowest_mask(scores: jax.Array, count) -> jax.Array:
    """Boolean [n]: the ``count`` lowest scores, ties broken by the lower index."""
    n = scores.shape[0]
    order = jnp.argsort(scores, stable=True)
    return jnp.zeros(n, dtype=bool).at[order].set(jnp.arange(n) < count)


@register("multi_krum", "mean of the n - m lowest Krum scores", distances=True, check=_check_krum)
def multi_krum(
    models: jax.Array,
    weights: jax.Array,
    n_malicious,
    squared: bool = True,
    max_malicious: int | None = None,
) -> jax.Array:
    """Multi-Krum (Blanchard et al. 2017; poisoning paper): plain mean of the f = n − m best."""
    del weights
    n = models.shape[0]
    f = n - _as_int(n_malicious)
    chosen = _lowest_mask(krum_scores(models, n_malicious, squared, max_malicious), f)
    total = jnp.sum(jnp.where(chosen[:, None], models, 0.0), axis=0)
    return total / f.astype(models.dtype)


@register(
    "trimmed_mean", "coordinate-wise mean without the m largest and smallest", check=_check_trimmed
)
def trimmed_mean(models: jax.Array, weights: jax.Array, n_malicious) -> jax.Array:
    """Coordinate-wise Trimmed Mean (Yin et al. 2018): drop the β = m largest and m smallest.

    Per coordinate the kept values are ranks m .. n − m − 1: those strictly between the
    m-th and the (n − 1 − m)-th smallest (``kth_smallest``), plus as many copies of those
    two as their ties fill (no sort).
    """
    del weights
    n = models.shape[0]
    m = _as_int(n_malicious)

    def trim(block):
        keys = _order_keys(block)
        low, high = _kth_keys(keys, m), _kth_keys(keys, n - 1 - m)
        inside = (keys > low) & (keys < high)
        total = jnp.sum(jnp.where(inside, block, 0.0), axis=0)
        low_copies = jnp.sum(keys <= low, axis=0) - m
        high_copies = (n - m) - jnp.sum(keys < high, axis=0)
        low_value, high_value = _from_keys(low), _from_keys(high)
        total = total + low_copies * low_value + high_copies * high_value
        return jnp.where(low == high, (n - 2 * m) * low_value, total)

    return _by_column_blocks(trim, models) / (n - 2 * m).astype(models.dtype)


@register("median", "coordinate-wise median")
def median(models: jax.Array, weights: jax.Array, n_malicious=0) -> jax.Array:
    """Coordinate-wise Median (Yin et al. 2018); even n: mean of the two middle values
    (``kth_smallest``, no sort; the same values as sorting)."""
    del weights, n_malicious
    n = models.shape[0]

    def middle(block):
        keys = _order_keys(block)
        lower = _kth_keys(keys, (n - 1) // 2)
        upper = _kth_keys(keys, n // 2) if n % 2 == 0 else lower
        return 0.5 * (_from_keys(lower) + _from_keys(upper))

    return _by_column_blocks(middle, models)


def kth_smallest(values: jax.Array, k) -> jax.Array:
    """[d]: per column the k-th smallest (0-based, k may be traced) of ``values`` [n, d],
    the value ``jnp.sort(values, axis=0)[k]`` holds, found without sorting."""
    return _by_column_blocks(lambda block: _from_keys(_kth_keys(_order_keys(block), k)), values)


def _order_keys(values: jax.Array) -> jax.Array:
    """float32 → uint32 keys in the same order (−0 before +0, as ``jnp.sort`` orders)."""
    bits = jax.lax.bitcast_convert_type(values.astype(jnp.float32), jnp.uint32)
    return bits ^ jnp.where(bits >> 31 == 1, jnp.uint32(0xFFFFFFFF), jnp.uint32(0x80000000))


def _from_keys(keys: jax.Array) -> jax.Array:
    """The float32 values of ``_order_keys``' keys."""
    bits = jnp.where(keys >> 31 == 1, keys ^ jnp.uint32(0x80000000), ~keys)
    return jax.lax.bitcast_convert_type(bits, jnp.float32)


def _kth_keys(keys: jax.Array, k) -> jax.Array:
    """Per column of ``keys`` [n, d] the k-th smallest key: the least v with at least k + 1
    keys ≤ v, built one bit at a time from the top (32 counting passes, no sort).  XLA's
    CPU sort of a [1000, d] array is 20-30x slower than these passes."""

    def bit_step(i, found):
        bit = jnp.uint32(1) << (jnp.uint32(31) - i.astype(jnp.uint32))
        below = jnp.sum(keys <= (found | (bit - jnp.uint32(1)))[None, :], axis=0)
        return jnp.where(below >= k + 1, found, found | bit)

    return jax.lax.fori_loop(0, 32, bit_step, jnp.zeros(keys.shape[1], jnp.uint32))


_COLUMN_BLOCK = 256  # columns per block: a [1000, 256] block stays in cache over the passes


def _by_column_blocks(fn, values: jax.Array) -> jax.Array:
    """``fn`` ([n, b] → [b]) over ``values`` [n, d] in blocks of ``_COLUMN_BLOCK`` columns
    (``lax.map``), so the 32 passes of ``_kth_keys`` read a block that stays in cache."""
    n, d = values.shape
    if d <= _COLUMN_BLOCK:
        return fn(values)
    pad = -d % _COLUMN_BLOCK
    blocks = jnp.pad(values, ((0, 0), (0, pad))).reshape(n, -1, _COLUMN_BLOCK)
    return jax.lax.map(fn, blocks.transpose(1, 0, 2)).reshape(-1)[:d]


def by_index(
    index, models: jax.Array, weights: jax.Array, n_malicious, squared: bool = True
) -> jax.Array:
    """Aggregate with ``names()[index]`` through ``lax.switch`` (index may be traced).

    ``squared`` (static) applies to the distance-based rules.  Under ``vmap`` with a batched
    index every branch runs and the results are selected.
    """
    branches = [lambda x, w, m, name=name: call(name, x, w, m, squared) for name in names()]
    index = jnp.asarray(index, dtype=jnp.int32)
    return jax.lax.switch(index, branches, models, weights, _as_int(n_malicious))


def check_settings(name: str, n: int, n_malicious: int) -> None:
    """Raises ValueError when aggregator ``name`` cannot run with n clients, m of them malicious."""
    found = get(name)
    n, m = operator.index(n), operator.index(n_malicious)
    if n < 1:
        raise ValueError(f"the number of clients n must be at least 1, got n={n}")
    if m < 0:
        raise ValueError(f"the number of malicious clients m must be at least 0, got m={m}")
    if 2 * m >= n:
        raise ValueError(
            f"the number of malicious clients m must be below n/2, got m={m} with n={n}"
        )
    if found.check is not None:
        found.check(n, m)


# The rules above, in registration order (registering more extends ``names()``, not this).
BUILT_IN = names()
