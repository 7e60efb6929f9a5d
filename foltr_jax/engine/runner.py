"""The run every method shares: the ``Method`` protocol and ``run`` (keys, rounds in
compiled chunks with progress and checkpoints, the evaluated rounds, the ``RunResult``)."""

from __future__ import annotations

import functools
import time
from typing import Any, Protocol

import jax
import numpy as np

from foltr_jax.core import compile_cache, multiprocess
from foltr_jax.engine import loop
from foltr_jax.engine.results import RunResult
from foltr_jax.engine.shared_round import evaluated_rounds, is_evaluated, scan_rounds


class Method(Protocol):
    """What a method supplies to ``run``.

    A method's *spec* is a frozen, hashable dataclass (one compilation per value) with a
    ``config`` holding ``seed``, ``n_runs``, ``rounds``, ``chunk_rounds`` and
    ``eval_every``, and these methods:

    - ``repetitions()``: int [n_slots] the repetition of every run slot (slots of a grid's
      cells that share a repetition share its keys: cells are compared on paired runs);
    - ``init(arrays, init_keys) -> (consts, state)``: the round's constants (the device
      data, and whatever the method derives from the slots' initialisation keys) and the
      scan state before round 1 (the global models, leaves [n_slots, ...], and the
      server's state);
    - ``evaluate(consts, state)``: the offline metrics [n_slots] of the state's global
      models, named by ``offline``;
    - ``round(consts, state, train_keys, t, evaluate_now) -> (state, metrics)``: round t
      (0-based, traced) of every slot, usually ``serve`` with the method's client update;
      ``metrics`` is a NamedTuple of [n_slots] values whose ``offline`` fields are NaN
      where ``evaluate_now`` is false (``offline_when``);
    - ``finish(consts, state, curves) -> (final_params, extras, interactions)``: the
      final models on the host, the result fields the method adds, and the number of
      interactions the run simulated.
    """

    @property
    def config(self) -> Any: ...

    @property
    def offline(self) -> tuple: ...

    def repetitions(self) -> np.ndarray: ...

    def init(self, arrays, init_keys): ...

    def evaluate(self, consts, state): ...

    def round(self, consts, state, train_keys, t, evaluate_now): ...

    def finish(self, consts, state, curves: dict): ...


def run_chunk(method: Method, n_rounds: int, consts, state, first_round):
    """``n_rounds`` rounds of ``method`` under ``lax.scan`` from ``first_round`` (the
    body of a ``loop.scan_in_chunks`` chunk); ``consts`` = (the method's constants, the
    slots' training keys)."""
    arrays, train_keys = consts
    cfg = method.config

    def body(carry, t):
        evaluate_now = is_evaluated(cfg.rounds, cfg.eval_every, t)
        return method.round(arrays, carry, train_keys, t, evaluate_now)

    return scan_rounds(body, state, first_round, n_rounds)


run_chunk_jit = jax.jit(run_chunk, static_argnums=(0, 1), donate_argnums=(3,))


@functools.cache
def _run_chunk_replicated():
    """``run_chunk_jit`` for a multi-process run: replicated outputs (multiprocess)."""
    return multiprocess.replicated_jit(run_chunk, static_argnums=(0, 1), donate_argnums=(3,))


@functools.partial(jax.jit, static_argnums=0)
def _initial(method: Method, arrays, init_keys):
    consts, state = method.init(arrays, init_keys)
    return consts, state, method.evaluate(consts, state)


def run(method: Method, arrays, progress=None, checkpoint: str | None = None) -> RunResult:
    """Runs ``config.rounds`` rounds of every run slot of ``method`` on ``arrays``.

    Keys: slot s's repetition key fold_in(PRNGKey(seed), repetition) splits into its
    initialisation and training keys (``loop.run_keys``); round t's key is
    fold_in(training key, t) and client c's fold_in(round key, c) (``round_keys``,
    ``client_keys``).  Rounds run in jit-compiled chunks of ``chunk_rounds`` (one
    compilation per chunk length, timed apart) with ``progress(done, total, seconds)``
    between chunks; over several processes the inputs are replicated global arrays.
    ``checkpoint``: a file where the run saves its state after every chunk and from
    which an interrupted run resumes (``loop.scan_in_chunks``).  A ``progress`` object
    with ``compiling()`` and ``compiled()`` methods is told when compiling starts (before
    the initial evaluation's program) and ends (the chunks compiled): ``loop.tell``.
    The compile seconds count the initial evaluation's program and the chunks'; every
    program comes from ``compile_cache.compiled`` (read back, untraced, where an earlier
    process compiled it).
    """
    cfg = method.config
    init_keys, train_keys = loop.run_keys(cfg.seed, method.repetitions())
    loop.tell(progress, "compiling")  # until the chunks are compiled (scan_in_chunks)
    compile_start = time.perf_counter()
    initial_program = compile_cache.compiled(_initial, (method,), (arrays, init_keys), "_initial")
    initial_seconds = time.perf_counter() - compile_start
    consts, state, initial = initial_program(arrays, init_keys)
    chunk_fn = _run_chunk_replicated() if multiprocess.is_multiprocess() else run_chunk_jit
    state, outputs, compile_seconds, run_seconds = loop.scan_in_chunks(
        chunk_fn,
        method,
        multiprocess.replicated((consts, train_keys)),
        multiprocess.replicated(state),
        cfg.rounds,
        cfg.chunk_rounds,
        progress,
        checkpoint,
        compiled_before=initial_seconds,
    )
    curves = loop.round_curves(outputs)
    offline_rounds = select_evaluated(curves, method.offline, cfg.rounds, cfg.eval_every)
    final_params, extras, interactions = method.finish(consts, state, curves)
    return RunResult(
        curves=curves,
        initial={name: np.asarray(v) for name, v in zip(method.offline, initial)},
        final_params=final_params,
        compile_seconds=compile_seconds,
        run_seconds=run_seconds,
        interactions=int(interactions),
        offline_rounds=offline_rounds,
        offline=tuple(method.offline),
        extras=extras,
        cells=extras.get("cells", ()),
        n_runs=_runs_per_cell(method.repetitions()),
    )


def select_evaluated(curves: dict, names, rounds: int, every: int):
    """Keeps the offline ``curves[name]`` columns of ``evaluated_rounds`` (the skipped
    rounds hold NaN) and returns those rounds as an int array (1-based)."""
    kept = np.asarray(evaluated_rounds(rounds, every), np.int64)
    for name in names:
        curves[name] = curves[name][:, kept - 1]
    return kept


def _runs_per_cell(repetitions) -> int:
    """The repetitions of each cell: slots are cell-major, repetition r of every cell shares
    r's keys (``Method.repetitions``)."""
    repetitions = np.asarray(repetitions)
    if repetitions.size == 0:
        return 0
    n_runs = int(repetitions.max()) + 1
    return n_runs if repetitions.size % n_runs == 0 else int(repetitions.size)
