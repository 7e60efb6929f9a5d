"""Sampling the displayed lists in blocks of lanes (fpdgd_lanes._display_in_groups)."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from foltr_jax import data
from foltr_jax.core import rankers
from foltr_jax.engine import lists
from foltr_jax.methods.fpdgd import lanes as fpdgd_lanes
from foltr_jax.methods.fpdgd import pdgd

K = 10


@pytest.fixture(autouse=True)
def _groups_whatever_the_size(monkeypatch):
    """These tests are about the groups themselves: every array is sampled in groups, not
    only those over ``GROUPED_SAMPLING_BYTES``."""
    monkeypatch.setattr(fpdgd_lanes, "GROUPED_SAMPLING_BYTES", 0)


def test_small_arrays_are_sampled_in_one_group(monkeypatch):
    """Up to GROUPED_SAMPLING_BYTES a [lanes, window] array is one display group: the
    lists come out of one sampler, no lax.switch over the widths."""
    window, n = 120, 200
    keys, scores, lengths = lanes(n, window, seed=4)
    spec = lane_spec(window, 4)

    def switches():  # a new function each time: JAX caches traces by function
        fn = functools.partial(fpdgd_lanes._display_in_groups, spec, lanes_per_block=0)
        return str(jax.make_jaxpr(fn)(keys, scores, lengths)).count(" cond[")

    monkeypatch.setattr(fpdgd_lanes, "GROUPED_SAMPLING_BYTES", n * window * 4)
    assert fpdgd_lanes._n_groups(spec, n) == 1 and switches() == 0
    monkeypatch.setattr(fpdgd_lanes, "GROUPED_SAMPLING_BYTES", n * window * 4 - 1)
    assert fpdgd_lanes._n_groups(spec, n) == 4 and switches() == 4


def lane_spec(window: int, display_groups: int, window_scoring: str = "map"):
    scoring = lists.Scoring(
        ranker=None,
        window=window,
        widths=lists.window_widths(window, K),
        top_k=K,
        window_scoring=window_scoring,
    )
    return fpdgd_lanes.LaneSpec(scoring, 1, display_groups=display_groups)


def lanes(n: int, window: int, seed: int = 0):
    """Keys, scores [n, window] and long-tailed lengths (some under k) as display_lists
    hands them over: a lane's window holds its query, then its neighbours' scores up to
    its scoring width, then -inf."""
    rng = np.random.default_rng(seed)
    lengths = np.minimum(rng.geometric(1 / 20, n) + 1, window).astype(np.int32)
    lengths[:3] = (2, window, 5)
    widths = np.asarray(lists.window_widths(window, K))
    scored = widths[np.searchsorted(widths, lengths)]
    scores = (rng.normal(size=(n, window)) * 3).astype(np.float32)
    scores = np.where(np.arange(window)[None] < scored[:, None], scores, -np.inf)
    keys = jax.random.split(jax.random.PRNGKey(seed + 1), n)
    return keys, jnp.asarray(scores, jnp.float32), jnp.asarray(lengths)


@pytest.mark.parametrize(
    "n, display_groups",
    [
        (fpdgd_lanes.LANES_PER_SAMPLING_BLOCK + 37, 1),  # 2 blocks, the last padded
        (2 * fpdgd_lanes.LANES_PER_SAMPLING_BLOCK + 37, 2),  # 2 padded blocks a group
        pytest.param(  # slow tier: a third group adds compilation, not a case
            3 * fpdgd_lanes.LANES_PER_SAMPLING_BLOCK + 37, 3, marks=pytest.mark.slow
        ),
        pytest.param(  # whole blocks, no padding
            4 * fpdgd_lanes.LANES_PER_SAMPLING_BLOCK, 2, marks=pytest.mark.slow
        ),
    ],
)
def test_sampling_in_blocks_equals_every_lane_at_once_bit_for_bit(n, display_groups):
    window = 120
    spec = lane_spec(window, display_groups)
    keys, scores, lengths = lanes(n, window, seed=n + display_groups)

    def sample(lanes_per_block):
        fn = functools.partial(
            fpdgd_lanes._display_in_groups, spec, lanes_per_block=lanes_per_block
        )
        return fn, jax.jit(fn)(keys, scores, lengths)

    blocked_fn, blocked = sample(None)  # the CPU's default: sampling_block
    at_once_fn, at_once = sample(0)
    # the blocked form really splits every group's keys into blocks; the other does not
    size = fpdgd_lanes.LANES_PER_SAMPLING_BLOCK
    in_blocks = f"u32[{-(-n // display_groups // size)},{size},2]"
    assert in_blocks in str(jax.make_jaxpr(blocked_fn)(keys, scores, lengths))
    assert f",{size},2]" not in str(jax.make_jaxpr(at_once_fn)(keys, scores, lengths))
    for got, want in zip(blocked, at_once):
        assert got.shape == want.shape and got.shape[0] == n
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    # every lane's list is its own Plackett-Luce draw: the ranking display_list gives
    # the lane alone, at its full window
    ranking = np.asarray(blocked.ranking)
    alone = jax.jit(functools.partial(pdgd.display_list, k=K))
    for lane in range(0, n, 7):
        mine = alone(keys[lane], scores[lane], lengths[lane])
        shown = min(int(lengths[lane]), K)
        np.testing.assert_array_equal(ranking[lane, :shown], np.asarray(mine.ranking)[:shown])
        assert len(set(ranking[lane, :shown])) == shown
        assert ranking[lane, :shown].max() < lengths[lane]


def test_the_accelerator_samples_every_lane_at_once():
    assert fpdgd_lanes.sampling_block(lane_spec(120, 1, "vmap").scoring) == 0
    assert (
        fpdgd_lanes.sampling_block(lane_spec(120, 1).scoring)
        == fpdgd_lanes.LANES_PER_SAMPLING_BLOCK
    )
    spec = lane_spec(120, 1, "vmap")
    keys, scores, lengths = lanes(fpdgd_lanes.LANES_PER_SAMPLING_BLOCK + 5, 120)
    jaxpr = str(
        jax.make_jaxpr(functools.partial(fpdgd_lanes._display_in_groups, spec))(
            keys, scores, lengths
        )
    )
    assert f",{fpdgd_lanes.LANES_PER_SAMPLING_BLOCK},2]" not in jaxpr


# 16 (the accelerator's default) writes out 16 switches: the slow tier's
@pytest.mark.parametrize("display_groups", [3, pytest.param(16, marks=pytest.mark.slow)])
def test_the_accelerator_loops_over_groups_with_the_written_out_groups_lists(display_groups):
    """With 'vmap' scoring the display groups run as steps of one lax.map over one
    lax.switch (compiling one group's branches, whatever the number of groups); with
    'map' every group is written out with its own switch.  Same lists, bit for bit."""
    window, n = 120, 1000
    keys, scores, lengths = lanes(n, window, seed=11)

    def sample(window_scoring):
        spec = lane_spec(window, display_groups, window_scoring)
        fn = functools.partial(fpdgd_lanes._display_in_groups, spec, lanes_per_block=0)
        jaxpr = str(jax.make_jaxpr(fn)(keys, scores, lengths))
        return jaxpr.count(" cond["), jaxpr.count(" scan["), jax.jit(fn)(keys, scores, lengths)

    written_switches, written_loops, written = sample("map")
    looped_switches, looped_loops, looped = sample("vmap")
    assert (written_switches, looped_switches) == (display_groups, 1)
    assert looped_loops == written_loops + 1
    for got, want in zip(looped, written):
        assert got.shape == want.shape and got.shape[0] == n
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_lane_blocks_pad_and_drop_the_padding():
    def fn(x, y):
        return {"sum": x + y[:, 0], "y": y * 2}

    x = jnp.arange(23, dtype=jnp.float32)
    y = jnp.arange(46, dtype=jnp.float32).reshape(23, 2)
    for block in (0, 5, 23, 30):
        got = fpdgd_lanes.in_lane_blocks(fn, block)(x, y)
        np.testing.assert_array_equal(got["sum"], x + y[:, 0])
        np.testing.assert_array_equal(got["y"], y * 2)


# each ranker and each scoring once in the fast tier, the other two pairs in the slow
@pytest.mark.parametrize(
    "ranker_name, window_scoring",
    [
        ("linear", "map"),
        ("neural", "vmap"),
        pytest.param("neural", "map", marks=pytest.mark.slow),
        pytest.param("linear", "vmap", marks=pytest.mark.slow),
    ],
)
def test_scoring_each_group_at_its_width_gives_the_lists_of_one_scores_array(
    ranker_name, window_scoring, monkeypatch
):
    """With several display groups, display_lists scores each group at the group's width
    and samples it there; the lists are, bit for bit, those sampled from one
    [lanes, window] array of every lane's scores (Scoring.score_lanes padded to the
    window, then _display_in_groups), with blocks in the groups on a CPU ('map', 600
    lanes).  Small score arrays (under fpdgd_lanes.GROUPED_SCORING_BYTES) keep the one
    array."""
    train, _ = data.synthetic_train_test(
        3,
        n_train_queries=60,
        n_test_queries=5,
        n_features=8,
        mean_docs_per_query=25,
        max_docs_per_query=90,
    )
    window = int(train.max_query_length)
    device = lists.to_device(train, window, K)
    ranker = rankers.make_ranker(ranker_name, 8)
    n = 600
    lane_params = jax.vmap(ranker.init)(jax.random.split(jax.random.PRNGKey(5), n))
    lane_params = jax.tree_util.tree_map(
        lambda x: x + 0.3 * jax.random.normal(jax.random.PRNGKey(6), x.shape), lane_params
    )
    queries = jax.random.randint(jax.random.PRNGKey(7), (n,), 0, 60)
    keys = jax.random.split(jax.random.PRNGKey(8), n)
    spec = lane_spec(window, 3, window_scoring)  # 3: not a divisor of the lanes' widths
    spec = dataclasses.replace(spec, scoring=dataclasses.replace(spec.scoring, ranker=ranker))
    assert len(spec.scoring.widths) > 3

    def one_array(lane_params, keys, queries):
        def pad(width, scores, length):
            return jnp.pad(scores, (0, window - width), constant_values=-jnp.inf)

        scores = spec.scoring.score_lanes(device, lane_params, queries, pad)
        lengths = device.query_lengths[queries]
        return fpdgd_lanes._display_in_groups(spec, keys, scores, lengths)

    def display_lists():  # a new function each time: JAX caches traces by function
        def fn(lane_params, keys, queries):
            lane_data = fpdgd_lanes.LaneData(device)
            return fpdgd_lanes.display_lists(
                spec, lane_data, lane_params, keys, queries, None, None
            )

        return fn

    # 600 lanes' scores fit the cache: one array, as before
    one = f"f32[{n},{window}]"
    assert one in str(jax.make_jaxpr(display_lists())(lane_params, keys, queries))
    monkeypatch.setattr(fpdgd_lanes, "GROUPED_SCORING_BYTES", n * window * 4 - 1)
    grouped = display_lists()
    # the grouped form writes no [lanes, window] array of scores
    jaxpr = str(jax.make_jaxpr(grouped)(lane_params, keys, queries))
    assert one not in jaxpr and one in str(jax.make_jaxpr(one_array)(lane_params, keys, queries))
    want = jax.jit(one_array)(lane_params, keys, queries)
    got = jax.jit(grouped)(lane_params, keys, queries)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    assert np.isfinite(np.asarray(got.scores)).all()


def test_at_narrowest_width_picks_the_narrowest_width_holding_the_length():
    widths = lists.window_widths(300, K)  # (16, 24, 40, ..., 300)
    lengths = [1, 16, 17, 24, 25, 299, 300, 301]  # past the longest: the longest
    want = [16, 16, 24, 24, 40, 300, 300, 300]

    def width_of(length):
        return lists.at_narrowest_width(widths, length, lambda width: jnp.int32(width))

    got = jax.jit(jax.vmap(width_of))(jnp.asarray(lengths))
    np.testing.assert_array_equal(np.asarray(got), want)
    assert [int(width_of(n)) for n in lengths] == want
