"""Untargeted model poisoning attacks on FOLTR (poisoning paper §4.3; Baruch et al. 2019;
Fang et al. 2020).

Conventions: ``models`` float [n, d] holds every client's flattened model after local training
and before any attack; ``global_model`` [d] is the model all clients started the round from
(w_g); the malicious clients are the first ``n_malicious`` = m rows (poisoning paper §4.1,
"without loss of generality, we assume the first m participants are compromised").  m may be
a traced scalar (one program for m = 1..4 under vmap), so it never determines a shape: the
malicious rows are selected by the mask ``arange(n) < m``.  Every attack has the signature
``(key, models, global_model, n_malicious) -> models`` (extra options as keywords), replaces
only the first m rows and leaves the benign rows bit-for-bit untouched; with m = 0 it is the
identity.

* ``little_is_enough`` (LIE, poisoning paper §4.3.1; Baruch et al. 2019): every malicious row
  becomes μ − zσ, with μ, σ the per-coordinate mean and population standard deviation of the
  malicious clients' own before-attack models and z from Baruch et al.'s Eq. for z_max.
* ``fang_krum`` (poisoning paper §4.3.2; Fang et al. 2020 §IV-A): the crafted model
  w′ = w_g − λ·sign(μ − w_g) with the first λ of λ₀, λ₀/2, λ₀/4, ... for which Krum selects
  it (none above the threshold: models unchanged).  Partial knowledge simulates Krum over the
  m attackers' own before-attack models plus one crafted model, assuming one attacker.
* ``scaled_negation`` (unlearning paper §3.4, eq. 3): every malicious row becomes −z·θ with
  z = 2, the clearly distinguishable client whose removal the unlearning evaluation measures.
* ``fang_trimmed_mean`` (poisoning paper §4.3.2; Fang et al. 2020 §IV-B, shared by Trimmed
  Mean and Median): every crafted coordinate is sampled just beyond the benign extreme that
  pulls the aggregate against the coordinate's change direction.

An attack is one function and one ``register`` call (bottom of this module); ``names()``
lists them and ``by_index`` dispatches on a (possibly traced) index into it with ``lax.switch``.
Data poisoning is a click model (``click_models``), not a model attack, so it is not here.
One concern (the model attacks and their registry); each attack is a few dozen lines.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtri

from foltr_jax.core.registry import Registry


def _malicious_mask(n: int, n_malicious) -> jax.Array:
    """[n] bool, True for the first m rows (m may be traced)."""
    return jnp.arange(n) < jnp.asarray(n_malicious)


def _masked_mean_std(models: jax.Array, mask: jax.Array):
    """Per-coordinate mean and population standard deviation of the rows where mask holds.

    Returns zeros (not NaN) when the mask is empty.
    """
    weights = mask.astype(models.dtype)
    count = jnp.maximum(jnp.sum(weights), 1.0)
    mean = jnp.sum(weights[:, None] * models, axis=0) / count
    variance = jnp.sum(weights[:, None] * jnp.square(models - mean), axis=0) / count
    return mean, jnp.sqrt(variance)


def _replace_malicious(models: jax.Array, crafted: jax.Array, n_malicious) -> jax.Array:
    """Rows < m from ``crafted`` ([d] broadcast or [n, d]), the others from ``models``."""
    mask = _malicious_mask(models.shape[0], n_malicious)
    crafted = jnp.broadcast_to(crafted, models.shape).astype(models.dtype)
    return jnp.where(mask[:, None], crafted, models)


def no_attack(key, models, global_model, n_malicious):
    """The identity: every client sends its honestly trained model."""
    del key, global_model, n_malicious
    return models


# --------------------------------------------------------------------------------------------
# Little Is Enough


def lie_z(n, n_malicious) -> jax.Array:
    """Baruch et al. (2019) z_max: s = ⌊n/2 + 1⌋ − m, z = Φ⁻¹((n − s)/n).

    s is the number of benign clients the attackers need on their side for a majority; z is
    the largest deviation (in standard deviations) such that s benign clients are still
    farther from the mean than the attackers.  n = 10: m = 1, 2, 3, 4 → z = 0, 0.2533,
    0.5244, 0.8416.  Both arguments may be traced.
    """
    n = jnp.asarray(n, jnp.int32)
    s = n // 2 + 1 - jnp.asarray(n_malicious, jnp.int32)
    return ndtri((n - s).astype(jnp.float32) / n.astype(jnp.float32))


def little_is_enough(key, models, global_model, n_malicious):
    """LIE (poisoning paper §4.3.1; Baruch et al. 2019): every malicious row becomes μ − zσ.

    μ and σ are the per-coordinate mean and population standard deviation of the m malicious
    clients' own before-attack models ("the average μ and standard deviation σ of the
    before-attack benign local model updates of all collusive attackers (w_1, ..., w_m)");
    z = ``lie_z(n, m)``.  With m = 1, σ = 0 and z = 0, so the single attacker sends its honest
    model.
    """
    del key, global_model
    mask = _malicious_mask(models.shape[0], n_malicious)
    mean, std = _masked_mean_std(models, mask)
    z = lie_z(models.shape[0], n_malicious).astype(models.dtype)
    return _replace_malicious(models, mean - z * std, n_malicious)


# --------------------------------------------------------------------------------------------
# Fang et al. (2020) on Krum / Multi-Krum


def _pairwise_squared(rows: jax.Array) -> jax.Array:
    """[N, N] squared Euclidean distances, by explicit differences (no cancellation)."""
    return jnp.sum(jnp.square(rows[:, None, :] - rows[None, :, :]), axis=-1)


def _sum_nearest(distances: jax.Array, candidates: jax.Array, count) -> jax.Array:
    """Row i: sum of the ``count`` smallest ``distances[i, j]`` over j ≠ i with candidates[j].

    ``count`` may be traced; if fewer candidates exist, all of them are summed.
    """
    n = distances.shape[0]
    allowed = candidates[None, :] & ~jnp.eye(n, dtype=bool)
    ordered = jnp.sort(jnp.where(allowed, distances, jnp.inf), axis=1)
    take = (jnp.arange(n) < count)[None, :] & jnp.isfinite(ordered)
    return jnp.sum(jnp.where(take, ordered, 0.0), axis=1)


def _krum_scores(distances: jax.Array, valid: jax.Array, n_byzantine) -> jax.Array:
    """Krum scores (poisoning paper Eq. 2; Blanchard et al. 2017) over the rows where valid.

    score(i) = sum of the distances from row i to its n′ − f − 2 nearest other valid rows,
    where n′ = number of valid rows and f = ``n_byzantine``; the neighbour count is clamped to
    [1, n′ − 1].  Invalid rows score +inf.  Both counts may be traced.
    """
    n_valid = jnp.sum(valid.astype(jnp.int32))
    count = jnp.clip(n_valid - jnp.asarray(n_byzantine) - 2, 1, jnp.maximum(n_valid - 1, 1))
    scores = _sum_nearest(distances, valid, count)
    return jnp.where(valid, scores, jnp.inf)


class _KrumView(NamedTuple):
    """The federation the attacker simulates Krum on (Fang et al. 2020 §IV-A).

    Full knowledge: all n rows, the first m of them crafted, Krum assuming f = m.  Partial
    knowledge: the attacker knows only its m before-attack models and stands them in for the
    benign clients, with ONE crafted model among them (n + 1 slots: the first n hold the
    before-attack models, of which the first m are valid; the last is the crafted slot), and
    Krum assuming f = 1.  With m identical crafted copies and f = m the copies would be each
    other's nearest neighbours at distance 0 and the check could never fail.
    """

    rows: jax.Array  # [N, d] before-attack models (crafted slots are overwritten per λ)
    valid: jax.Array  # [N] bool, rows Krum sees
    crafted: jax.Array  # [N] bool, crafted rows (a subset of valid)
    benign: jax.Array  # [N] bool, rows the attacker treats as benign for λ's upper bound
    n_total: jax.Array  # [] the n in Fang et al.'s bound: n (full) or m + 1 (partial)
    n_byzantine: jax.Array  # [] Krum's f and the c of the bound: m (full) or 1 (partial)


def _krum_view(models, n_malicious, full_knowledge: bool) -> _KrumView:
    n = models.shape[0]
    m = jnp.asarray(n_malicious, jnp.int32)
    mask = _malicious_mask(n, m)
    if full_knowledge:
        return _KrumView(models, jnp.ones(n, bool), mask, ~mask, jnp.int32(n), m)
    rows = jnp.concatenate([models, models[:1]], axis=0)
    crafted = jnp.arange(n + 1) == n
    valid = jnp.concatenate([mask, (m > 0)[None]])
    return _KrumView(rows, valid, crafted & valid, valid & ~crafted, m + 1, jnp.int32(1))


def _lambda_upper_bound(view: _KrumView, global_model, squared_rows) -> jax.Array:
    """λ's starting value (Fang et al. 2020 §IV-A, Eq. for the upper bound of λ).

    λ₀ = 1/((n − 2c − 1)√d) · min_{i benign} Σ_{l ∈ Γ_i} D(w_l, w_i)
         + 1/√d · max_{i benign} D(w_i, w_g),
    D Euclidean, c the attackers the view assumes, Γ_i the n − c − 2 benign models nearest
    to w_i; n − 2c − 1 and n − c − 2 are clamped to ≥ 1 (and Γ_i to the benign models
    available).  Partial knowledge: n = m + 1, c = 1, the benign models the attacker's own.
    """
    d = view.rows.shape[1]
    c = view.n_byzantine
    euclid = jnp.sqrt(squared_rows)
    denominator = jnp.maximum(view.n_total - 2 * c - 1, 1).astype(view.rows.dtype)
    neighbours = jnp.maximum(view.n_total - c - 2, 1)
    spread = _sum_nearest(euclid, view.benign, neighbours)
    spread = jnp.min(jnp.where(view.benign, spread, jnp.inf))
    to_global = jnp.sqrt(jnp.sum(jnp.square(view.rows - global_model[None, :]), axis=1))
    to_global = jnp.max(jnp.where(view.benign, to_global, -jnp.inf))
    any_benign = jnp.any(view.benign)
    spread = jnp.where(any_benign, spread, 0.0)
    to_global = jnp.where(any_benign, to_global, 0.0)
    root_d = jnp.sqrt(jnp.asarray(d, view.rows.dtype))
    return spread / (denominator * root_d) + to_global / root_d


class FangKrumSearch(NamedTuple):
    """Result of Fang et al.'s λ search: the crafted model is w_g − lam · direction."""

    lam: jax.Array  # [] the λ used; 0 when no λ ≥ the threshold passed (models unchanged)
    lam0: jax.Array  # [] the upper bound the search started from
    halvings: jax.Array  # [] int, halvings done (lam = lam0 / 2**halvings when selected)
    selected: jax.Array  # [] bool, Krum over the attacker's view selects the crafted model
    direction: jax.Array  # [d] s = sign(μ − w_g)


def fang_krum_lambda(
    models,
    global_model,
    n_malicious,
    full_knowledge: bool,
    *,
    krum_squared: bool = True,
    threshold: float = 1e-5,
    max_halvings: int = 64,
) -> FangKrumSearch:
    """Fang et al. (2020) §IV-A λ search for the attack on Krum / Multi-Krum.

    s = sign(μ − w_g), μ the mean of the before-attack models the attacker knows (full
    knowledge: all n rows; partial: the m malicious rows).  Starting from λ₀ (see
    ``_lambda_upper_bound``), λ is halved until Krum, run on the attacker's view (see
    ``_KrumView``) with every crafted row equal to w_g − λ·s, selects a crafted row (ties go
    to the crafted row, as when an argmin scans the crafted rows first).  If λ falls below
    ``threshold`` (or ``max_halvings`` halvings pass) first, λ = 0 and ``selected`` is
    False: Fang et al.'s code then leaves the models unchanged.  Krum's distances are squared
    Euclidean unless ``krum_squared`` is False, as the server's Krum.

    Partial knowledge: the view is the m before-attack models plus one crafted model, Krum
    assuming one attacker (score: the m − 2 nearest, at least 1).  The crafted model passes
    when it is as central among the attacker's own models as they are among themselves; with
    m = 1 the two rows tie and it always passes at λ₀ = ‖w₁ − w_g‖/√d.
    """
    n = models.shape[0]
    m = jnp.asarray(n_malicious, jnp.int32)
    mask = _malicious_mask(n, m)
    known = jnp.ones(n, bool) if full_knowledge else mask
    mean, _ = _masked_mean_std(models, known)
    direction = jnp.sign(mean - global_model)

    view = _krum_view(models, m, full_knowledge)
    squared_rows = _pairwise_squared(view.rows)
    base = squared_rows if krum_squared else jnp.sqrt(squared_rows)
    lam0 = _lambda_upper_bound(view, global_model, squared_rows)
    crafted_pair = view.crafted[:, None] & view.crafted[None, :]
    crafted_row = view.crafted[:, None] & ~view.crafted[None, :]
    crafted_col = ~view.crafted[:, None] & view.crafted[None, :]

    def selects_crafted(lam):
        crafted_model = global_model - lam * direction
        to_crafted = jnp.sum(jnp.square(view.rows - crafted_model[None, :]), axis=1)
        if not krum_squared:
            to_crafted = jnp.sqrt(to_crafted)
        distances = jnp.where(crafted_row, to_crafted[None, :], base)
        distances = jnp.where(crafted_col, to_crafted[:, None], distances)
        distances = jnp.where(crafted_pair, 0.0, distances)
        scores = _krum_scores(distances, view.valid, view.n_byzantine)
        best_crafted = jnp.min(jnp.where(view.crafted, scores, jnp.inf))
        best_other = jnp.min(jnp.where(view.valid & ~view.crafted, scores, jnp.inf))
        return jnp.any(view.crafted) & (best_crafted <= best_other)

    def cond(state):
        return ~state[3]

    def body(state):
        lam, halvings, _, _ = state
        selected = selects_crafted(lam)
        lam = jnp.where(selected, lam, lam / 2)
        halvings = halvings + jnp.where(selected, 0, 1)
        done = selected | (lam < threshold) | (halvings >= max_halvings)
        return lam, halvings, selected, done

    no_search = (lam0 < threshold) | (m <= 0)
    init = (lam0, jnp.int32(0), jnp.bool_(False), no_search)
    lam, halvings, selected, _ = jax.lax.while_loop(cond, body, init)
    lam = jnp.where(selected, lam, 0.0)
    return FangKrumSearch(lam, lam0, halvings, selected, direction)


def fang_krum(
    key,
    models,
    global_model,
    n_malicious,
    full_knowledge: bool,
    *,
    krum_squared: bool = True,
    threshold: float = 1e-5,
    max_halvings: int = 64,
):
    """Fang et al. (2020) attack on Krum / Multi-Krum (poisoning paper §4.3.2).

    Every malicious row becomes w′ = w_g − λ·s, s = sign(μ − w_g) (the poisoning paper's
    w_g + λ·s′ with s′ = −s), λ from ``fang_krum_lambda``.  Fang et al. let the other m − 1
    crafted models be close to w′; here they all equal w′.  When the search finds no λ
    (λ below the threshold), the malicious clients send their before-attack models, as in
    Fang et al.'s code.  Deterministic (``key`` unused).
    """
    del key
    search = fang_krum_lambda(
        models,
        global_model,
        n_malicious,
        full_knowledge,
        krum_squared=krum_squared,
        threshold=threshold,
        max_halvings=max_halvings,
    )
    crafted = global_model - search.lam * search.direction
    attacked = _replace_malicious(models, crafted, n_malicious)
    return jnp.where(search.selected, attacked, models)


# --------------------------------------------------------------------------------------------
# Fang et al. (2020) on Trimmed Mean / Median


def fang_trimmed_mean_intervals(models, global_model, n_malicious, full_knowledge: bool, b=2.0):
    """Per-coordinate sampling interval [lo, hi] ([d] each) of Fang et al.'s attack on
    Trimmed Mean / Median (Fang et al. 2020 §IV-B; poisoning paper §4.3.2).

    s_j = sign(μ_j − w_g,j) is coordinate j's change direction without attack (μ over all n
    before-attack models with full knowledge, over the m malicious ones with partial), and the
    attackers push the other way.  Full knowledge, with w_max,j / w_min,j the max / min over the
    n − m benign before-attack models::

      s_j > 0: [w_min,j / b, w_min,j] if w_min,j > 0 else [b·w_min,j, w_min,j];
      s_j ≤ 0: [w_max,j, b·w_max,j] if w_max,j > 0 else [w_max,j / b, w_max,j].

    Partial knowledge, with μ_j, σ_j (population) over the m malicious before-attack models::

      s_j > 0: [μ_j − 4σ_j, μ_j − 3σ_j];  s_j ≤ 0: [μ_j + 3σ_j, μ_j + 4σ_j].
    """
    n = models.shape[0]
    mask = _malicious_mask(n, n_malicious)
    b = jnp.asarray(b, models.dtype)
    if full_knowledge:
        mean, _ = _masked_mean_std(models, jnp.ones(n, bool))
        increasing = (mean - global_model) > 0
        benign = ~mask[:, None]
        w_max = jnp.max(jnp.where(benign, models, -jnp.inf), axis=0)
        w_min = jnp.min(jnp.where(benign, models, jnp.inf), axis=0)
        below_lo = jnp.where(w_min > 0, w_min / b, b * w_min)
        above_hi = jnp.where(w_max > 0, b * w_max, w_max / b)
        lo = jnp.where(increasing, below_lo, w_max)
        hi = jnp.where(increasing, w_min, above_hi)
    else:
        mean, std = _masked_mean_std(models, mask)
        increasing = (mean - global_model) > 0
        lo = jnp.where(increasing, mean - 4 * std, mean + 3 * std)
        hi = jnp.where(increasing, mean - 3 * std, mean + 4 * std)
    return lo, hi


def fang_trimmed_mean(key, models, global_model, n_malicious, full_knowledge: bool, *, b=2.0):
    """Fang et al. (2020) attack on Trimmed Mean / Median (poisoning paper §4.3.2).

    Each malicious row's coordinate j is sampled independently and uniformly from the interval
    of ``fang_trimmed_mean_intervals``.
    """
    lo, hi = fang_trimmed_mean_intervals(models, global_model, n_malicious, full_knowledge, b)
    u = jax.random.uniform(key, models.shape, models.dtype)
    crafted = lo[None, :] + u * (hi - lo)[None, :]
    return _replace_malicious(models, crafted, n_malicious)


# --------------------------------------------------------------------------------------------
# Scaled negation (unlearning evaluation)

NEGATION_Z = 2.0  # unlearning paper §3.4: "we set z = 2"


def scaled_negation(key, models, global_model, n_malicious, *, z=NEGATION_Z):
    """M_mal = −z·M_local for the malicious rows (unlearning paper eq. 3).

    As an update against the global model this is eq. 4:
    ΔM_mal = −z·ΔM_local − (z + 1)·M_global.
    """
    del key, global_model
    return _replace_malicious(models, -z * models, n_malicious)


# --------------------------------------------------------------------------------------------
# The registry: an attack is one function and one registration.


class Attack(NamedTuple):
    name: str
    attack: Callable[..., jax.Array]  # (key, models, global_model, n_malicious) -> models
    summary: str  # one line for --help
    krum_distances: bool  # simulates the server's Krum: takes ``krum_squared=``
    per_client: bool = False  # each malicious row from that row alone (streams over chunks)


_REGISTRY: Registry[Attack] = Registry("attack")


def register(
    name: str, summary: str, attack, *, krum_distances: bool = False, per_client: bool = False
) -> None:
    """Registers ``attack(key, models, global_model, n_malicious) -> models`` as ``name``.

    The attack must replace only the first m rows and accept a traced m (module doc).  It
    can then be named in a config, a grid ``Setting`` and every binary's ``--attack``.
    ``krum_distances`` attacks also receive ``krum_squared=`` (the server's Krum distances).
    A ``per_client`` attack crafts each malicious row from that row alone, without drawing
    from ``key``: it then runs a chunk of clients at a time (``--client_chunk``).
    """
    _REGISTRY.add(name, Attack(name, attack, summary, krum_distances, per_client))


names = _REGISTRY.names  # every registered model attack, 'none' (the identity) first
get = _REGISTRY.get
help_text = _REGISTRY.help_text


def by_name(name: str, *, krum_squared: bool = True):
    """The attack function ``(key, models, global_model, n_malicious) -> models`` for a name.

    ``krum_squared``: whether the server's Krum uses squared distances (Fang's Krum attack).
    """
    found = _REGISTRY.get(name)
    if found.krum_distances:
        return functools.partial(found.attack, krum_squared=krum_squared)
    return found.attack


def by_index(index, key, models, global_model, n_malicious, *, krum_squared: bool = True):
    """Applies ``names()[index]`` with ``lax.switch``; ``index`` and m may be traced.

    Out-of-range indices are clamped by ``lax.switch``.
    """
    m = jnp.asarray(n_malicious, jnp.int32)
    branches = [by_name(name, krum_squared=krum_squared) for name in names()]
    return jax.lax.switch(jnp.asarray(index, jnp.int32), branches, key, models, global_model, m)


register("none", "the identity", no_attack, per_client=True)
register("lie", "μ − zσ of the attackers' models, Baruch et al.", little_is_enough)
for _knowledge in ("full", "partial"):
    register(
        f"fang_krum_{_knowledge}",
        f"Fang et al.'s attack on Krum, {_knowledge} knowledge",
        functools.partial(fang_krum, full_knowledge=_knowledge == "full"),
        krum_distances=True,
    )
for _knowledge in ("full", "partial"):
    register(
        f"fang_trimmed_mean_{_knowledge}",
        f"Fang et al.'s attack on Trimmed Mean and Median, {_knowledge} knowledge",
        functools.partial(fang_trimmed_mean, full_knowledge=_knowledge == "full"),
    )
register(
    "scaled_negation",
    "−z·θ with z = 2, the unlearning paper's eq. 3",
    scaled_negation,
    per_client=True,
)

# The attacks above, in registration order (registering more extends ``names()``, not this).
BUILT_IN = names()
