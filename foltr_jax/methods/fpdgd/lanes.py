"""FPDGD's lanes: the PDGD interaction of every lane at once (the displayed lists, then
``pdgd.pdgd_update_lanes``: clicks and the update, FPDGD paper Algorithm 1), local
training (Algorithm 2's ClientUpdate) and the sharding of lanes over devices.

A *lane* is one client of one run slot; every function here maps over the stacked lane
axis.  ``LaneSpec`` (PDGD's local training) is its static description, ``LaneData`` the
arrays every lane reads and ``Lanes`` the per-lane facts; how candidate windows are
scored (``lists.Scoring``) and the other list helpers every method shares are ``lists``'.
One concern, the clients' side of an FPDGD round over the lane axis, in one module.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from foltr_jax.core import click_models, metrics
from foltr_jax.engine.lists import DeviceData, Scoring, at_narrowest_width, sample_query
from foltr_jax.engine.serving import device_mesh, on_mesh
from foltr_jax.methods.fpdgd import pdgd


@dataclasses.dataclass(frozen=True)
class LaneSpec:
    """PDGD's local training of every lane (static, hashable): the scoring, the B local
    interactions, the groups lists are sampled in (``_display_in_groups``) and the devices
    the lanes are sharded over (``train_lanes``).  The step size η is a traced value of
    every lane (``Lanes.learning_rate``), so runs differing in η share one program."""

    scoring: Scoring
    local_updates: int
    display_groups: int = 1
    n_devices: int = 1


class LaneData(NamedTuple):
    """What every lane reads (replicated over devices): the training data and the client
    plan's facts shared by the lanes (None keeps the IID behaviour)."""

    train: DeviceData
    prox_mu: jax.Array | None = None  # float32 []: FedProx's μ (thesis §4.3.3)
    online_labels: jax.Array | None = None  # int32 [V, n_docs + window]: label views
    online_ideal: jax.Array | None = None  # float32 [V, n_queries]: their ideal DCG@k
    click_pool: click_models.ClickModel | None = None  # leaves [P, ...]: drawn per interaction


def display_lists(
    lane_spec: LaneSpec, data: LaneData, lane_params, keys, queries, lane_slots, global_scores
):
    """Scores every lane's candidates and samples its displayed list.

    Scoring follows ``Scoring.score_lanes``; a lane's window past its scoring width is
    -inf.  Sampling is vmapped over the lanes, in blocks of lanes on a CPU
    (``_display_in_groups``).  With ``global_scores`` [n_slots, n_docs + window] (a
    round's first step) every lane takes its slot's (``lane_slots``) scores instead.

    With several display groups and a [lanes, window] array of scores larger than
    ``GROUPED_SCORING_BYTES``, each group's lanes are scored and sampled together at the
    group's width (``_score_and_display_in_groups``), so that array is never written and
    read back ('map', a CPU) and no lane is scored past its group's width ('vmap', an
    accelerator); the lists are the same.
    """
    scoring, train = lane_spec.scoring, data.train
    lengths = train.query_lengths[queries]
    if global_scores is not None:
        # A round's first step: every lane scores with its run's global model.
        scores = jax.vmap(
            lambda run, query: jax.lax.dynamic_slice(
                global_scores, (run, train.query_offsets[query]), (1, scoring.window)
            )[0]
        )(lane_slots, queries)
    elif _scores_group_by_group(lane_spec, lengths.shape[0]):
        return _score_and_display_in_groups(lane_spec, train, lane_params, keys, queries, lengths)
    else:
        scores = scoring.score_lanes(train, lane_params, queries, _padded_to(scoring.window))
    return _display_in_groups(lane_spec, keys, scores, lengths)


def _padded_to(width: int):
    """``Scoring.score_lanes``'s ``finish``: a lane's scores padded with -inf to ``width``."""

    def pad(lane_width, scores, length):
        return jnp.pad(scores, (0, width - lane_width), constant_values=-jnp.inf)

    return pad


GROUPED_SCORING_BYTES = 8 << 20  # a [lanes, window] float32 score array above this: by group


def _scores_group_by_group(lane_spec: LaneSpec, n_lanes: int) -> bool:
    """Whether ``display_lists`` scores and samples group by group: with several groups,
    when the [lanes, window] scores would outgrow ``GROUPED_SCORING_BYTES``.  Measured on
    a 2-core CPU with a 32 MB L3 (window 1,064, 'map'): 1,000 lanes (4 MB) gain nothing
    and compile twice as long (3 → 6 s); 3,000 lanes (13 MB) take 18 ms against 22-27,
    10,950 lanes (47 MB) 57 ms against 88.  With 'vmap' (an accelerator) every lane is
    otherwise scored at the full window: on an H200 at 10^6 lanes that scoring was 65 %
    of the round (146 of 225 ms)."""
    grouped = _n_groups(lane_spec, n_lanes) > 1
    return grouped and _scores_bytes(lane_spec, n_lanes) > GROUPED_SCORING_BYTES


def _scores_bytes(lane_spec: LaneSpec, n_lanes: int) -> int:
    """The size of the [lanes, window] float32 scores ``n_lanes`` lanes sample from."""
    return n_lanes * lane_spec.scoring.window * 4


GROUPED_SAMPLING_BYTES = 1 << 20  # a [lanes, window] float32 array up to this: one group


def _n_groups(lane_spec: LaneSpec, n_lanes: int) -> int:
    """Display groups of ``n_lanes`` lanes: 1 when there is one width to choose from, or
    when the [lanes, window] array sampled from is no larger than
    ``GROUPED_SAMPLING_BYTES``.  Grouping pays back only on large arrays: on a 2-core CPU
    ('map') 4 groups of the MSLR excerpt's 1,000 lanes (window 308, 1.2 MB) cost about
    what they save; smaller arrays gain nothing and each group is one more ``lax.switch``
    over the widths to compile (a 16-lane test run: 5 s instead of 12 at XLA's -O0)."""
    if len(lane_spec.scoring.widths) == 1:
        return 1
    if _scores_bytes(lane_spec, n_lanes) <= GROUPED_SAMPLING_BYTES:
        return 1
    return min(lane_spec.display_groups, n_lanes)


def _in_length_groups(lane_spec: LaneSpec, lengths, fn, *lane_args):
    """``fn(width, *group_args)`` of every display group, put back in lane order.

    Lanes are sorted by query length and cut into equal groups (the last padded with
    the longest lane); each group runs at the narrowest width holding its longest
    query (``at_narrowest_width``).  With 'map' scoring (a CPU) the groups are written
    out one after another, so XLA:CPU may run them side by side; with 'vmap' (an
    accelerator, every group's lanes batched) one ``lax.map`` step per group runs the
    one ``lax.switch`` over the widths, so compiling costs one group's branches whatever
    the number of groups (20,000 lanes with 'vmap' on a CPU: 16 groups written out took
    140 s to compile and run a chunk, looped 12 s)."""
    n_lanes = lengths.shape[0]
    n_groups = _n_groups(lane_spec, n_lanes)
    size = -(-n_lanes // n_groups)
    order = jnp.argsort(lengths)
    order = jnp.concatenate([order, jnp.full(size * n_groups - n_lanes, order[-1])])

    def group(lanes):
        group_args = jax.tree_util.tree_map(lambda x: x[lanes], lane_args)
        return at_narrowest_width(lane_spec.scoring.widths, lengths[lanes[-1]], fn, *group_args)

    if lane_spec.scoring.window_scoring == "vmap":
        parts = jax.lax.map(group, order.reshape(n_groups, size))
        lane_order = jax.tree_util.tree_map(lambda x: x.reshape((-1,) + x.shape[2:]), parts)
    else:
        parts = [group(order[g * size : (g + 1) * size]) for g in range(n_groups)]
        lane_order = jax.tree_util.tree_map(lambda *p: jnp.concatenate(p), *parts)
    inverse = jnp.argsort(order[:n_lanes])
    return jax.tree_util.tree_map(lambda x: x[inverse], lane_order)


def _lane_sampler(lane_spec: LaneSpec, lanes_per_block=None):
    """Vmapped ``display_list`` in blocks of ``lanes_per_block`` lanes (default:
    ``sampling_block`` of the scoring; ``in_lane_blocks``)."""
    if lanes_per_block is None:
        lanes_per_block = sampling_block(lane_spec.scoring)
    return in_lane_blocks(
        jax.vmap(functools.partial(pdgd.display_list, k=lane_spec.scoring.top_k)), lanes_per_block
    )


def _display_in_groups(lane_spec: LaneSpec, keys, scores, lengths, lanes_per_block=None):
    """Vmapped ``display_list`` over lanes, in ``display_groups`` groups of similar length.

    Lanes are sorted by query length and cut into equal groups; each group samples
    at the narrowest width holding its longest query (``lax.switch``), so the
    sampling work follows the lengths too.  The rankings do not depend on the grouping
    (a lane's log-sum-exp of the unshown candidates can differ in its last bit between
    widths: the sum runs over a differently padded row).

    Inside a group, more lanes than ``lanes_per_block`` (default: ``sampling_block``
    of the scoring) are sampled in blocks of that many (``in_lane_blocks``).  Each
    lane's draws come from its own key and every block samples at its group's width,
    so the blocks give every lane the list and log-sum-exp it gets unblocked, bit for
    bit (tests/methods/fpdgd/test_lanes.py).
    """
    display = _lane_sampler(lane_spec, lanes_per_block)
    if _n_groups(lane_spec, lengths.shape[0]) == 1:
        return display(keys, scores, lengths)

    def display_at(width, k, s, n):
        return display(k, s[:, :width], n)

    return _in_length_groups(lane_spec, lengths, display_at, keys, scores, lengths)


def _score_and_display_in_groups(
    lane_spec: LaneSpec, train: DeviceData, lane_params, keys, queries, lengths
):
    """``_display_in_groups`` of ``Scoring.score_lanes``'s scores, each group's lanes
    scored at their own widths ('map') or at the group's ('vmap') and padded to the
    group's width only: every lane gets the scores and the list it gets through a
    [lanes, window] array of scores (tests/methods/fpdgd/test_lanes.py), without writing that
    array (at 10,950 lanes and a 1,064 window, 47 MB a step) or scoring past the group's
    width."""
    display = _lane_sampler(lane_spec)

    def score_and_display(width, params, query, key, length):
        scores = narrowed(lane_spec.scoring, width).score_lanes(
            train, params, query, _padded_to(width)
        )
        return display(key, scores, length)

    return _in_length_groups(
        lane_spec, lengths, score_and_display, lane_params, queries, keys, lengths
    )


def narrowed(scoring: Scoring, width: int) -> Scoring:
    """``scoring`` for lanes whose queries are no longer than ``width`` (a display
    group's): the ladder stops at ``width``, and batched ('vmap') scoring reads ``width``
    rows, not the whole window."""
    return dataclasses.replace(
        scoring, window=width, widths=tuple(w for w in scoring.widths if w <= width)
    )


def scores_by_group(lane_spec: LaneSpec, train: DeviceData, lane_params, queries):
    """float [lanes, window]: every lane's scores as ``display_lists`` computes them when
    it goes group by group (``_scores_group_by_group``: each display group scored at its
    width), padded with -inf to the window; ``Scoring.score_lanes``' scores otherwise.
    For profiling a step's scoring apart from its sampling (``experiments.profile_round``)."""
    scoring, pad = lane_spec.scoring, _padded_to(lane_spec.scoring.window)
    lengths = train.query_lengths[queries]
    if not _scores_group_by_group(lane_spec, lengths.shape[0]):
        return scoring.score_lanes(train, lane_params, queries, pad)
    return _in_length_groups(
        lane_spec,
        lengths,
        lambda width, params, query: narrowed(scoring, width).score_lanes(
            train, params, query, pad
        ),
        lane_params,
        queries,
    )


def in_lane_blocks(fn, lanes_per_block: int):
    """``fn`` (vmapped over a leading lane axis of every argument) run on blocks of
    ``lanes_per_block`` lanes one after another (``lax.map``), so a block's
    [lanes, window] intermediates stay in cache; the lane count is padded to whole
    blocks with copies of the last lane, and the padding dropped.  0, or no more lanes
    than a block, calls ``fn`` on every lane at once."""

    def blocked(*args):
        n = jax.tree_util.tree_leaves(args)[0].shape[0]
        if not 0 < lanes_per_block < n:
            return fn(*args)
        blocks = -(-n // lanes_per_block)

        def split(x):
            x = jnp.concatenate([x, jnp.repeat(x[-1:], blocks * lanes_per_block - n, axis=0)])
            return x.reshape((blocks, lanes_per_block) + x.shape[1:])

        out = jax.lax.map(lambda block: fn(*block), jax.tree_util.tree_map(split, args))
        return jax.tree_util.tree_map(lambda x: x.reshape((-1,) + x.shape[2:])[:n], out)

    return blocked


LANES_PER_SAMPLING_BLOCK = 256  # lanes per block of Plackett-Luce sampling on a CPU


def sampling_block(scoring: Scoring) -> int:
    """Lanes per block of ``_display_in_groups``'s sampling: ``LANES_PER_SAMPLING_BLOCK``
    on a CPU ('map' scoring), 0 (every lane at once) on an accelerator ('vmap').  On a
    CPU, 10,950 lanes at once (a [lanes, window] array per intermediate, far past the
    cache) sampled in 63-77 ms, in blocks of 256 in 51-53 ms (128: 62, 512: 54); at
    1,000 lanes with 4 display groups every group fits one block."""
    return LANES_PER_SAMPLING_BLOCK if scoring.window_scoring == "map" else 0


def interaction_step(
    lane_spec: LaneSpec, data: LaneData, lane_params, keys, lanes: Lanes, global_scores=None
):
    """One PDGD interaction on every lane.

    Args:
        lane_params: lane models, leading axis [lanes].
        keys: [lanes] PRNG keys of this interaction.
        lanes: per-lane slot, click model, clipping norm and step size η.
        global_scores: optional [n_slots, n_docs + window] training-set scores under
            the lanes' current models (a round's first step starts from the global model).
    """
    train = data.train
    key_query, key_rank, key_click = jnp.moveaxis(
        jax.vmap(lambda key: jax.random.split(key, 3))(keys), 1, 0
    )
    if lanes.queries is None:
        queries, _, _ = jax.vmap(sample_query, in_axes=(0, None))(key_query, train)
    else:  # each lane draws from its own query list (non-IID, thesis ch. 4)
        queries = jax.vmap(lambda k, table, n: table[jax.random.randint(k, (), 0, n)])(
            key_query, lanes.queries, lanes.query_count
        )
    displayed = display_lists(
        lane_spec, data, lane_params, key_rank, queries, lanes.slot, global_scores
    )
    click_model = lanes.click_model
    if data.click_pool is not None:
        # Type 3's IID baseline: every interaction draws a click model (thesis §4.5.1).
        pool = data.click_pool
        draw = jax.vmap(
            lambda key: jax.random.randint(
                jax.random.fold_in(key, _CLICK_DRAW), (), 0, pool.eta.shape[0]
            )
        )(keys)
        click_model = jax.tree_util.tree_map(lambda x: x[draw], pool)
    params, outcome = pdgd.pdgd_update_lanes(
        lane_params,
        key_click,
        queries,
        displayed,
        train,
        lane_spec.scoring.ranker,
        click_model,
        learning_rate=lanes.learning_rate,
        clip_norm=lanes.clip_norm,
        # Blocks of lists on a CPU ('map' scoring); an accelerator takes every lane at once.
        lists_per_block=pdgd.LISTS_PER_BLOCK if lane_spec.scoring.window_scoring == "map" else 0,
    )
    if data.online_labels is not None:
        outcome = outcome._replace(
            ndcg=_online_ndcg_over_views(lane_spec, data, queries, displayed.ranking)
        )
    return params, outcome


_CLICK_DRAW = 0x5EED  # fold_in tag of the per-interaction click-model draw


def _online_ndcg_over_views(lane_spec: LaneSpec, data: LaneData, queries, ranking):
    """Online nDCG@k of the shown lists averaged over label views (thesis §4.3.1)."""
    assert data.online_labels is not None and data.online_ideal is not None  # label views
    train, k = data.train, lane_spec.scoring.top_k
    lengths = train.query_lengths[queries]
    shown = jnp.arange(k)[None, :] < jnp.minimum(lengths, k)[:, None]  # [lanes, k]
    rows = train.query_offsets[queries][:, None] + ranking
    labels = jnp.where(shown, data.online_labels[:, rows], 0)  # [V, lanes, k]
    ideal = data.online_ideal[:, queries]  # [V, lanes]
    return jnp.mean(metrics.ndcg_of_list(labels, shown, ideal), axis=0)


class Lanes(NamedTuple):
    """Per-lane facts of a round (a lane is one client of one run slot); every leaf has
    the lane axis first."""

    slot: jax.Array  # int [lanes] run slot (setting x repetition)
    click_model: click_models.ClickModel  # leaves [lanes, ...]
    clip_norm: jax.Array | None  # float [lanes]; None without differential privacy
    learning_rate: jax.Array  # float [lanes]: the PDGD step η
    queries: jax.Array | None = None  # int [lanes, L] the lane's query list (None: all)
    query_count: jax.Array | None = None  # int [lanes] valid entries of ``queries``


def local_training(
    lane_spec: LaneSpec,
    data: LaneData,
    lane_params,
    lane_keys,
    lanes: Lanes,
    global_scores=None,
    lane_steps=None,
):
    """ClientUpdate (Algorithm 2) for every lane: B sequential PDGD interactions.

    Args:
        lane_params: every lane's starting model, leading axis [lanes].
        lane_keys: one PRNG key per lane.
        lanes: per-lane slot, click model, clipping norm and step size η.
        global_scores: optional [n_slots, n_docs + window] training-set scores under
            the starting (global) models, used for the first interaction.
        lane_steps: optional int [lanes] ≤ B: a lane keeps its model after its own
            number of interactions (one program for several local step counts).
    With ``data.prox_mu`` (FedProx, thesis §4.3.3) every step also pulls the model
    towards its starting (global) model: θ ← θ + η∇ − ημ(θ − θ_global).
    Returns:
        (trained lane params, pdgd.InteractionOutcome with leaves [lanes, B]).
    """
    mu = data.prox_mu

    def step(params, b, scores=None):
        keys = jax.vmap(lambda key: jax.random.fold_in(key, b))(lane_keys)
        new, outcome = interaction_step(lane_spec, data, params, keys, lanes, scores)
        if mu is not None:
            pull = lanes.learning_rate * mu  # [lanes]
            new = jax.tree_util.tree_map(
                lambda n, p, g: n - _per_lane(pull, n) * (p - g), new, params, lane_params
            )
        if lane_steps is not None:
            active = b < lane_steps
            new = jax.tree_util.tree_map(
                lambda n, p: jnp.where(_per_lane(active, n), n, p),
                new,
                params,
            )
        return new, outcome

    params, first = step(lane_params, 0, global_scores)
    params, later = jax.lax.scan(step, params, jnp.arange(1, lane_spec.local_updates))
    outcome = jax.tree_util.tree_map(
        lambda a, b: jnp.concatenate([a[:, None], b.T], axis=1), first, later
    )
    return params, outcome


def _per_lane(values, leaf):
    """``values`` [lanes] shaped to broadcast against a lane-major ``leaf`` [lanes, ...]."""
    return values.reshape((-1,) + (1,) * (leaf.ndim - 1))


def train_lanes(
    lane_spec: LaneSpec,
    data: LaneData,
    lane_params,
    lane_keys,
    lanes: Lanes,
    global_scores,
    lane_steps,
):
    """``local_training``, with the lanes sharded over ``lane_spec.n_devices`` devices.

    Every lane's interactions depend only on its own key and model, so each device
    trains its shard of lanes (``engine.on_mesh`` over a one-axis mesh) and the
    results are the single-device results, gathered in lane order.
    """
    n_devices = lane_spec.n_devices
    if n_devices == 1:
        return local_training(
            lane_spec, data, lane_params, lane_keys, lanes, global_scores, lane_steps
        )
    split, whole = jax.sharding.PartitionSpec("lanes"), jax.sharding.PartitionSpec()

    def shard(data, params, keys, lane_facts, scores, steps):
        return local_training(lane_spec, data, params, keys, lane_facts, scores, steps)

    return on_mesh(
        shard,
        device_mesh(n_devices, "lanes"),
        (whole, split, split, split, whole, split),
        split,
    )(data, lane_params, lane_keys, lanes, global_scores, lane_steps)
