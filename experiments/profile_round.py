r"""Where a round of FPDGD spends its time: a per-stage table.

  python -m experiments.profile_round --train_path=…/mslr_sample/train.txt \
      --test_path=…/mslr_sample/test.txt --n_clients=1000 --local_updates=2

Builds the experiment as ``experiments.benchmark`` does (same flags) and times, each
jit-compiled on its own at the round's shapes (median of --reps calls after a warm-up,
compile excluded; the best wall time and the median CPU time of the process), the
stages of one round:

- the whole round (``engine.run_chunk`` over --rounds rounds, per round);
- the first step's shared training-set scores (``rounds.first_step_scores``), when the
  round uses them;
- query sampling and the per-lane key split (``fpdgd_lanes.interaction_step``'s first lines);
- scoring: the first step's window gather from the shared scores (when used), and a
  later step's scoring as the round does it (``fpdgd_lanes.scores_by_group``: by length
  group at many lanes, each lane's window otherwise), padded to the window;
- Plackett-Luce sampling of the displayed lists (``fpdgd_lanes._display_in_groups``);
- a later step's scoring and sampling together (``fpdgd_lanes.display_lists``: with
  several display groups and many lanes each group is scored and sampled at its own
  width);
- clicks (``click_models.simulate_clicks`` on every lane);
- clicks and the PDGD update (``pdgd.pdgd_update_lanes``: the clicks, the
  debiasing weights, the vjp and the step);
- local training (``fpdgd_lanes.local_training``: B steps of all of the above);
- the server's side (``engine.serve``'s aggregation of the trained models);
- offline evaluation of the new global models (``rounds.offline_metrics``).

The stages are timed apart, so their sum need not equal the round (XLA fuses across
stage boundaries inside the round); the table says what each costs on its own.
``--cost_analysis`` adds XLA's estimate of each stage's bytes and FLOPs and the bandwidth
they imply against ``--peak_gbps`` (XLA counts a loop's body once, so the figures hold for
``--window_scoring=vmap`` with B = 2, the accelerator's setting, not for the CPU's ``map``).
``--trace_dir`` also writes a ``jax.profiler`` trace of a few whole rounds.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import pathlib
import statistics
import tempfile
import time

import jax
import jax.numpy as jnp
from absl import app, flags

from experiments.lib import program, shared_flags
from experiments.lib.cli import UserError
from foltr_jax import engine
from foltr_jax.core import click_models
from foltr_jax.engine import lists, loop
from foltr_jax.methods.fpdgd import lanes as fpdgd_lanes
from foltr_jax.methods.fpdgd import pdgd, rounds

FLAGS = flags.FLAGS
shared_flags.define_data_flags()
CONFIG_FLAGS = shared_flags.define_federation_flags()
flags.adopt_module_key_flags(shared_flags)
flags.DEFINE_integer("reps", 30, "Timed calls of each stage (the median is reported).")
flags.DEFINE_integer("round_reps", 5, "Timed calls of the whole-round chunk (best reported).")
flags.DEFINE_bool(
    "cost_analysis",
    False,
    "Add XLA's estimate of each stage's bytes accessed and the bandwidth they imply (a loop's "
    "body is counted once: right for --window_scoring=vmap with B = 2, not for map).",
)
flags.DEFINE_float("peak_gbps", 3350.0, "Memory bandwidth to compare with (H100 SXM: 3,350 GB/s).")
flags.DEFINE_string("trace_dir", "", "Also write a jax.profiler trace of whole rounds here.")
flags.DEFINE_bool("stages", True, "Time every stage apart; --nostages times the whole round only.")
flags.DEFINE_integer(
    "display_groups",
    None,
    "Groups of similar query length the lanes are scored and sampled in (default: the "
    "library's by the window scoring, foltr_jax.engine.config.DISPLAY_GROUPS: 4 with map, 16 with "
    "vmap).",
    lower_bound=1,
)


def timed(fn, *args, reps: int) -> tuple:
    """(best wall seconds, median CPU seconds of the process) of ``fn(*args)`` (jitted,
    compiled by a first call).  On a shared machine the best wall time and the CPU time
    (every thread of this process) are the steadier figures."""
    jax.block_until_ready(fn(*args))
    walls, cpus = [], []
    for _ in range(reps):
        start, cpu = time.perf_counter(), time.process_time()
        jax.block_until_ready(fn(*args))
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return min(walls), statistics.median(cpus)


def initial_state(spec, arrays):
    """(global params, server state, training keys) before round 1."""
    init_keys, train_keys = loop.run_keys(spec.config.seed, spec.repetitions())
    _, (params, server_state, _) = spec.init(arrays, init_keys)
    return params, server_state, train_keys


def stage_functions(spec, arrays):
    """(name, jitted fn, args) of every stage at one round's shapes."""
    cfg, lane_spec = spec.config, spec.lane_spec
    n_slots, n = spec.n_slots, cfg.n_clients
    data = rounds.lane_data(arrays)
    params, server_state, train_keys = initial_state(spec, arrays)
    settings = jax.tree_util.tree_map(lambda x: jnp.repeat(x, cfg.n_runs), arrays.settings)
    keys = engine.round_keys(train_keys, 0)
    lanes = rounds.lane_facts(spec, arrays, settings, jnp.arange(n))
    lane_keys = rounds.client_lane_keys(keys, arrays.client_ids)
    lane_params = rounds.to_lanes(params, n)
    global_scores = rounds.first_step_scores(spec, arrays, params)
    step_keys = jax.vmap(lambda k: jax.random.fold_in(k, 1))(lane_keys)

    def split_and_queries(keys):
        key_query, key_rank, key_click = jnp.moveaxis(
            jax.vmap(lambda key: jax.random.split(key, 3))(keys), 1, 0
        )
        queries, _, _ = jax.vmap(lists.sample_query, in_axes=(0, None))(key_query, data.train)
        return queries, key_rank, key_click

    queries, key_rank, key_click = jax.jit(split_and_queries)(step_keys)
    train = data.train

    def gather_first(global_scores, queries):
        return jax.vmap(
            lambda run, query: jax.lax.dynamic_slice(
                global_scores, (run, train.query_offsets[query]), (1, spec.window)
            )[0]
        )(lanes.slot, queries)

    def score_later(lane_params, queries):
        return fpdgd_lanes.scores_by_group(lane_spec, train, lane_params, queries)

    scores = jax.jit(score_later)(lane_params, queries)
    lengths = train.query_lengths[queries]

    def sample(key_rank, scores, lengths):
        return fpdgd_lanes._display_in_groups(lane_spec, key_rank, scores, lengths)

    displayed = jax.jit(sample)(key_rank, scores, lengths)

    def display_later(lane_params, key_rank, queries):
        return fpdgd_lanes.display_lists(
            lane_spec, data, lane_params, key_rank, queries, lanes.slot, None
        )

    k = cfg.top_k

    def clicks_of(key_click, queries, ranking):
        def one(key, model, query, ranking):
            length = train.query_lengths[query]
            shown = jnp.arange(k) < jnp.minimum(length, k)
            labels = jnp.where(shown, train.labels[train.query_offsets[query] + ranking], 0)
            return click_models.simulate_clicks(key, model, labels, shown)

        return jax.vmap(one)(key_click, lanes.click_model, queries, ranking)

    def pdgd_step(lane_params, key_click, queries, displayed):
        return pdgd.pdgd_update_lanes(
            lane_params,
            key_click,
            queries,
            displayed,
            train,
            spec.ranker,
            lanes.click_model,
            learning_rate=lanes.learning_rate,
            clip_norm=lanes.clip_norm,
            lists_per_block=pdgd.LISTS_PER_BLOCK if cfg.window_scoring == "map" else 0,
        )

    def local(lane_params, lane_keys, global_scores):
        return fpdgd_lanes.local_training(
            lane_spec, data, lane_params, lane_keys, lanes, global_scores
        )

    trained, _ = jax.jit(local)(lane_params, lane_keys, global_scores)
    models = engine.flatten(trained).reshape(n_slots, n, -1)
    flat_global = engine.flatten(params)

    def server(models, flat_global, server_state):
        weights = jnp.full(models.shape[:2], float(cfg.local_updates))
        sent = engine.Sent(models, weights, None)
        aggregate, state, _, _ = engine.serve(
            lambda start, size: sent,
            functools.partial(rounds.server_stages, spec),
            settings,
            flat_global,
            settings.n_malicious,
            server_state,
            engine.server_keys(keys, n),
            n,
        )
        return aggregate, state

    def evaluate(params):
        return rounds.offline_metrics(spec, arrays, params)

    by_group = fpdgd_lanes._scores_group_by_group(lane_spec, n_slots * n)
    shared = []  # the first step's shared scores, when the round uses them
    if global_scores is not None:
        shared = [
            (
                "first-step shared scores",
                jax.jit(functools.partial(rounds.first_step_scores, spec)),
                (arrays, params),
            ),
            (
                "scoring: first step (window gather)",
                jax.jit(gather_first),
                (global_scores, queries),
            ),
        ]
    return shared + [
        ("key split + query draw", jax.jit(split_and_queries), (step_keys,)),
        (
            "scoring: later step" + (" (by length group)" if by_group else " (per-lane windows)"),
            jax.jit(score_later),
            (lane_params, queries),
        ),
        ("Plackett-Luce sampling", jax.jit(sample), (key_rank, scores, lengths)),
        (
            "scoring + sampling: later step",
            jax.jit(display_later),
            (lane_params, key_rank, queries),
        ),
        ("clicks", jax.jit(clicks_of), (key_click, queries, displayed.ranking)),
        (
            "clicks + PDGD gradient + step",
            jax.jit(pdgd_step),
            (lane_params, key_click, queries, displayed),
        ),
        (
            "local training (B steps, all lanes)",
            jax.jit(local),
            (lane_params, lane_keys, global_scores),
        ),
        ("server (aggregation pipeline)", jax.jit(server), (models, flat_global, server_state)),
        ("offline evaluation", jax.jit(evaluate), (params,)),
    ]


def check_flags() -> None:
    """UserError naming the flag that cannot be honoured, before anything compiles."""
    for name in ("reps", "round_reps"):
        if getattr(FLAGS, name) < 1:
            raise UserError(f"--{name}: must be at least 1, got {getattr(FLAGS, name)}")
    if not 0 < FLAGS.peak_gbps < float("inf"):
        raise UserError(f"--peak_gbps: must be a positive number, got {FLAGS.peak_gbps}")
    if FLAGS.trace_dir:
        folder = pathlib.Path(FLAGS.trace_dir)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            handle, probe = tempfile.mkstemp(dir=folder, prefix=".probe-")
            os.close(handle)
            os.unlink(probe)
        except OSError as error:
            raise UserError(
                f"--trace_dir: cannot write into {folder} ({error.strerror or error})"
            ) from None


def run() -> program.Done:
    check_flags()
    config = shared_flags.federation_config(CONFIG_FLAGS)
    if FLAGS.display_groups is not None:
        config = dataclasses.replace(config, display_groups=FLAGS.display_groups)
    train, test, _ = shared_flags.load_datasets()
    spec, arrays = shared_flags.build(config, train, test)
    params, server_state, train_keys = initial_state(spec, arrays)
    stages = stage_functions(spec, arrays) if FLAGS.stages else []
    n_rounds = config.rounds
    state = (params, server_state, None)

    def whole(state):
        return engine.run_chunk_jit(spec, n_rounds, (arrays, train_keys), state, 0)

    # run_chunk_jit donates its state: give every call its own copy.
    def copy(state):
        return jax.tree_util.tree_map(lambda x: x.copy() if x is not None else x, state)

    start = time.perf_counter()
    jax.block_until_ready(whole(copy(state)))
    first_call = time.perf_counter() - start
    walls, cpus = [], []
    for _ in range(FLAGS.round_reps):
        fresh = copy(state)
        start, cpu = time.perf_counter(), time.process_time()
        jax.block_until_ready(whole(fresh))
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    per_round, cpu_round = min(walls) / n_rounds, statistics.median(cpus) / n_rounds
    interactions = spec.n_slots * config.n_clients * config.local_updates
    if FLAGS.trace_dir:
        jax.profiler.start_trace(FLAGS.trace_dir)
        jax.block_until_ready(whole(copy(state)))
        jax.profiler.stop_trace()
    print(f"{'stage':<42}{'best ms':>9}{'% round':>9}{'CPU ms':>9}{'% round':>9}")
    print(
        f"{'whole round (' + str(n_rounds) + ' rounds)':<42}{per_round * 1e3:>9.2f}{100:>8.0f}%"
        f"{cpu_round * 1e3:>9.2f}{100:>8.0f}%"
    )
    for name, fn, args in stages:
        wall, cpu = timed(fn, *args, reps=FLAGS.reps)
        line = (
            f"{name:<42}{wall * 1e3:>9.2f}{100 * wall / per_round:>8.0f}%"
            f"{cpu * 1e3:>9.2f}{100 * cpu / cpu_round:>8.0f}%"
        )
        if FLAGS.cost_analysis:
            cost = fn.lower(*args).compile().cost_analysis() or {}
            moved = float(cost.get("bytes accessed", 0.0))
            line += (
                f"  {moved / 1e6:>9.1f} MB {float(cost.get('flops', 0.0)) / 1e9:>7.3f} GFLOP"
                f" {moved / wall / 1e9:>7.1f} GB/s ({100 * moved / wall / 1e9 / FLAGS.peak_gbps:.1f}%"
                " of peak)"
            )
        print(line, flush=True)
    print(
        f"interactions per round {interactions}: {interactions / per_round:,.0f} interactions/s "
        f"(best wall), {interactions / cpu_round:,.0f} per CPU-second; the whole-round "
        f"chunk's first call {first_call:.1f} s (compile and one run), "
        f"{spec.lane_spec.display_groups} display groups"
    )
    return program.Done()


main = program.main("profile_round", run, distributed=False)

if __name__ == "__main__":
    app.run(main, flags_parser=program.parse_flags)
