"""Pairwise Differentiable Gradient Descent for one interaction (FPDGD paper §3.1,
Algorithm 1, eqs. 3-6; Oosterhuis & de Rijke 2018): the displayed list
(``display_list``), the clicks on it and the update they cause (``pdgd_update``,
``pdgd_update_lanes``), from the preference pairs and weights below.

Preferences: every clicked document is preferred over every unclicked document
shown above the last click and over the one unclicked document directly after the
last click (public code and the original PDGD paper).

Pair weight for d_k >_c d_l::

    w = ρ(d_k, d_l, R, D) · e^{f(d_k)} e^{f(d_l)} / (e^{f(d_k)} + e^{f(d_l)})²,
    ρ = P(R*|D) / (P(R|D) + P(R*|D)),

where R* swaps the two documents.  With a < b their positions, only the
Plackett-Luce denominators Z_p for a < p ≤ b differ::

    Z_p  = rest + Σ_{q ≥ p} e^{s_q}
    Z*_p = rest + Σ_{q ≥ p, q ≠ b} e^{s_q} + e^{s_a},

where ``rest`` sums over the candidates never shown.  Hence::

    ρ = 1 / (1 + Π_{a<p≤b} Z*_p / Z_p).

Each Z_p is scaled by exp(-m_p), m_p the largest score in its own set, so Z_p ≥ 1
and Z*_p / Z_p ≤ 2: the product cannot overflow and no difference of large sums
is ever taken.  The gradient is Σ w (∇f(d_k) − ∇f(d_l)), returned here as one
coefficient per displayed position so any ranker can apply it with a vjp.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.flatten_util
import jax.numpy as jnp

from foltr_jax.core import click_models, metrics, plackett_luce, privacy


def preference_pairs(clicks: jax.Array, shown: jax.Array) -> jax.Array:
    """bool [k, k]: pairs[i, j] is True when position i is preferred over j."""
    return _preference_pairs_lanes_last(clicks[:, None], shown[:, None])[..., 0]


def debias_weights(
    shown_scores: jax.Array, shown: jax.Array, rest_logsumexp: jax.Array
) -> jax.Array:
    """ρ for every ordered pair of displayed positions, float [k, k] (eq. 6).

    Args:
        shown_scores: float [k] scores of the documents in displayed order.
        shown: bool [k] which positions are displayed.
        rest_logsumexp: log Σ e^{s} over the valid candidates that were not shown
            (-inf when every candidate was shown).
    """
    rest = jnp.asarray(rest_logsumexp)[None]
    return _debias_lanes_last(shown_scores[:, None], shown[:, None], rest)[..., 0]


def position_coefficients(
    shown_scores: jax.Array, shown: jax.Array, clicks: jax.Array, rest_logsumexp: jax.Array
) -> jax.Array:
    """d(PDGD objective)/d(score) for each displayed position, float [k] (eq. 5).

    The model gradient is Σ_i coef_i ∇f(d_i) over displayed documents d_i.
    """
    rest = jnp.asarray(rest_logsumexp)[None]
    return position_coefficients_of_lists(shown_scores[None], shown[None], clicks[None], rest)[0]


def position_coefficients_of_lists(
    shown_scores: jax.Array,
    shown: jax.Array,
    clicks: jax.Array,
    rest_logsumexp: jax.Array,
    lists_per_block: int = 0,
) -> jax.Array:
    """``position_coefficients`` of n lists at once: float [n, k] from shown_scores,
    shown, clicks [n, k] and rest_logsumexp [n].

    The lists' axis is kept last inside ([k, n], [k, k, n], [k, k, k, n]), so every
    operation runs across the lists in SIMD lanes; under ``vmap`` the list axis would
    lead and the k = 10 wide minor axes would not fill a vector register (on a CPU
    this takes about half the time of the vmapped single-list form).

    ``lists_per_block`` > 0 (for a CPU: ``LISTS_PER_BLOCK``) runs more lists than that in
    blocks of that many, one after another (``lax.map``), so a block's [k, k, k, lists]
    intermediates stay in cache: all 10^4 lists at once ran 3x slower per list on a CPU.
    0 (for an accelerator) takes every list at once."""
    n = shown_scores.shape[0]
    if 0 < lists_per_block < n:
        blocks = -(-n // lists_per_block)
        extra = blocks * lists_per_block - n

        def blocked(x, fill):
            x = jnp.concatenate([x, jnp.full((extra,) + x.shape[1:], fill, x.dtype)])
            return x.reshape((blocks, lists_per_block) + x.shape[1:])

        coefficients = jax.lax.map(
            lambda args: _coefficients_lanes_last(*args),
            (
                blocked(shown_scores, 0.0),
                blocked(shown, False),
                blocked(clicks, False),
                blocked(rest_logsumexp, -jnp.inf),
            ),
        )
        return coefficients.reshape((blocks * lists_per_block,) + coefficients.shape[2:])[:n]
    return _coefficients_lanes_last(shown_scores, shown, clicks, rest_logsumexp)


LISTS_PER_BLOCK = 256  # lists per block on a CPU (256: 10,950 lists in 16 ms; 1,024: 25 ms)


def _coefficients_lanes_last(shown_scores, shown, clicks, rest_logsumexp):
    """``position_coefficients_of_lists`` of one block of lists."""
    scores, shown, clicks = shown_scores.T, shown.T, clicks.T  # [k, n]
    pairs = _preference_pairs_lanes_last(clicks, shown)
    diff = scores[:, None, :] - scores[None, :, :]
    # e^a e^b / (e^a + e^b)^2 = σ(a − b) σ(b − a), stable for any magnitude.
    pair_weight = jax.nn.sigmoid(diff) * jax.nn.sigmoid(-diff)
    rho = _debias_lanes_last(scores, shown, rest_logsumexp)
    w = jnp.where(pairs, rho * pair_weight, 0.0)
    return (jnp.sum(w, axis=1) - jnp.sum(w, axis=0)).T


def _preference_pairs_lanes_last(clicks: jax.Array, shown: jax.Array) -> jax.Array:
    """bool [k, k, n] from clicks, shown [k, n] (``preference_pairs`` of n lists)."""
    k = clicks.shape[0]
    positions = jnp.arange(k)[:, None]
    last_click = jnp.max(jnp.where(clicks, positions, -1), axis=0)  # [n]
    negative = shown & ~clicks & (positions <= last_click[None, :] + 1)
    return clicks[:, None, :] & negative[None, :, :]


def _debias_lanes_last(shown_scores: jax.Array, shown: jax.Array, rest_logsumexp) -> jax.Array:
    """ρ [k, k, n] of n lists (``debias_weights``) from shown_scores, shown [k, n] and
    rest_logsumexp [n]; the list axis last."""
    k = shown_scores.shape[0]
    positions = jnp.arange(k)
    s = jnp.where(shown, shown_scores, -jnp.inf)  # [q, n]
    upper = (positions[None, :] >= positions[:, None])[:, :, None]  # [p, q, 1]: q ≥ p
    # m_p: max over the set of Z_p = {not shown} ∪ {q ≥ p}.
    m = jnp.maximum(
        jnp.max(jnp.where(upper, s[None, :, :], -jnp.inf), axis=1), rest_logsumexp[None, :]
    )  # [p, n]
    m = jnp.where(jnp.isfinite(m), m, 0.0)
    scaled = jnp.exp(s[None, :, :] - m[:, None, :])  # [p, q, n] = e^{s_q − m_p}
    e = jnp.where(upper, scaled, 0.0)
    rest = jnp.exp(rest_logsumexp[None, :] - m)  # [p, n]
    z = rest + jnp.sum(e, axis=1)  # [p, n]
    # z_without[p, b] = rest_p + Σ_{q ≥ p, q ≠ b} e[p, q]: sums of positive terms
    # over q < b and q > b (triangular contractions), so no large sum is subtracted.
    strictly_before = (positions[:, None] < positions[None, :]).astype(e.dtype)  # [q, b]
    before_b = jnp.einsum("pqn,qb->pbn", e, strictly_before)
    after_b = jnp.einsum("pqn,bq->pbn", e, strictly_before)
    z_without = rest[:, None, :] + before_b + after_b  # [p, b, n]
    # ratio[p, a, b] = Z*_p / Z_p = (z_without[p, b] + e^{s_a − m_p}) / Z_p.
    ratio = (z_without[:, None, :, :] + scaled[:, :, None, :]) * (1.0 / z)[:, None, None, :]
    between = (positions[:, None, None] > positions[None, :, None]) & (
        positions[:, None, None] <= positions[None, None, :]
    )  # [p, a, b]: a < p ≤ b
    product = jnp.prod(jnp.where(between[..., None], ratio, 1.0), axis=0)  # [a, b, n], a < b
    below = (positions[:, None] < positions[None, :])[:, :, None]
    product = jnp.where(below, product, jnp.swapaxes(product, 0, 1))
    return 1.0 / (1.0 + product)


def unshown_logsumexp(
    scores: jax.Array, mask: jax.Array, ranking: jax.Array, shown: jax.Array
) -> jax.Array:
    """log Σ e^{f(d)} over the valid candidates that were not displayed (-inf if none)."""
    displayed = jnp.zeros(scores.shape, jnp.int32).at[ranking].add(shown.astype(jnp.int32)) > 0
    return jax.nn.logsumexp(jnp.where(mask & ~displayed, scores, -jnp.inf))


# ---------------------------------------------------------------------------------------------
# The displayed list and the update of an interaction (FPDGD paper Algorithm 1, lines 5-12)
# ---------------------------------------------------------------------------------------------


class InteractionOutcome(NamedTuple):
    ndcg: jax.Array  # nDCG@k of the displayed list
    max_rr: jax.Array  # MaxRR of the clicks


class DisplayedList(NamedTuple):
    """What PDGD needs to know about one displayed list."""

    ranking: jax.Array  # int [k] candidate positions within the query, top first
    scores: jax.Array  # float [k] f(d) of the displayed documents
    rest_logsumexp: jax.Array  # log Σ e^f over the candidates not displayed (-inf if none)


def display_list(key, scores, length, k: int) -> DisplayedList:
    """Samples the top-k list shown for a query (FPDGD eqs. 1-2, Algorithm 1 line 5).

    ``scores`` cover a candidate window (float [W], W ≥ the query's length).
    """
    mask = jnp.arange(scores.shape[0]) < length
    ranking = plackett_luce.sample_top_k(key, scores, mask, k)
    shown = jnp.arange(k) < jnp.minimum(length, k)
    rest = unshown_logsumexp(scores, mask, ranking, shown)
    return DisplayedList(ranking, scores[ranking], rest)


def pdgd_update(
    params,
    key,
    query,
    displayed: DisplayedList,
    data,
    ranker,
    click_model,
    *,
    learning_rate: float,
    clip_norm=None,
):
    """Clicks on a displayed list and the PDGD update they cause (Algorithm 1, lines 6-12);
    ``data`` is the training split's ``lists.DeviceData``, ``ranker`` a registered ranker.

    ``clip_norm`` (FPDGD Algorithm 3): after the update θ ← θ·min(1, clip_norm/‖θ‖);
    a clip_norm of 0 leaves θ alone.  ``pdgd_update_lanes`` is the same for many lanes.
    """
    batch = functools.partial(jax.tree_util.tree_map, lambda x: jnp.asarray(x)[None])
    params, outcome = pdgd_update_lanes(
        batch(params),
        batch(key),
        batch(query),
        batch(displayed),
        data,
        ranker,
        batch(click_model),
        learning_rate=learning_rate,
        clip_norm=None if clip_norm is None else batch(clip_norm),
    )
    return jax.tree_util.tree_map(lambda x: x[0], (params, outcome))


def pdgd_update_lanes(
    lane_params,
    keys,
    queries,
    displayed: DisplayedList,
    data,
    ranker,
    click_model,
    *,
    learning_rate,
    clip_norm=None,
    lists_per_block: int = 0,
):
    """``pdgd_update`` of every lane (every argument but ``data`` and ``ranker`` with a
    leading lane axis; ``learning_rate`` one η for all lanes, or float [lanes], traced or
    not): the clicks and the step are vmapped over the lanes, the PDGD
    coefficients computed for all lists at once (``position_coefficients_of_lists``,
    the lane axis minor; ``lists_per_block`` as there)."""
    k = displayed.ranking.shape[1]

    def clicked(key, query, ranking, model):
        start, length = data.query_offsets[query], data.query_lengths[query]
        shown = jnp.arange(k) < jnp.minimum(length, k)
        rows = start + ranking
        shown_labels = jnp.where(shown, data.labels[rows], 0)
        clicks = click_models.simulate_clicks(key, model, shown_labels, shown)
        return shown, rows, shown_labels, clicks

    shown, rows, shown_labels, clicks = jax.vmap(clicked)(
        keys, queries, displayed.ranking, click_model
    )
    coefficients = position_coefficients_of_lists(
        displayed.scores, shown, clicks, displayed.rest_logsumexp, lists_per_block
    )
    coefficients = jnp.where(shown, coefficients, 0.0).astype(displayed.scores.dtype)

    def step(params, rows, coefficients, norm, eta):
        _, pullback = jax.vjp(lambda p: ranker.apply(p, data.features[rows]), params)
        (gradient,) = pullback(coefficients)
        params = jax.tree_util.tree_map(lambda p, g: p + eta * g, params, gradient)
        if norm is not None:
            flat, unravel = jax.flatten_util.ravel_pytree(params)
            params = unravel(jnp.where(norm > 0, privacy.clip(flat, norm, 1.0), flat))
        return params

    etas = jnp.broadcast_to(jnp.asarray(learning_rate), queries.shape)
    params = jax.vmap(step)(lane_params, rows, coefficients, clip_norm, etas)
    outcome = InteractionOutcome(
        jax.vmap(metrics.ndcg_of_list)(shown_labels, shown, data.ideal_dcg[queries]),
        jax.vmap(metrics.max_reciprocal_rank)(clicks),
    )
    return params, outcome
