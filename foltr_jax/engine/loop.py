"""The run loop shared by every method: rounds under ``lax.scan`` in jit-compiled
chunks, progress between chunks, checkpoint and resume, and run fingerprints.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
import warnings
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from foltr_jax.core import compile_cache, files, multiprocess

ProgressFn = Callable[[int, int, float], None]  # (rounds done, rounds total, seconds so far)


def scan_in_chunks(
    chunk_fn,
    static,
    consts,
    state,
    total: int,
    chunk: int,
    progress=None,
    checkpoint=None,
    checkpoint_key: str | None = None,
    compiled_before: float = 0.0,
):
    """Runs ``total`` steps of ``chunk_fn(static, n, consts, state, first) -> (state, out)``.

    ``chunk_fn`` is jitted with ``static`` and the chunk length n static.  Steps go
    in chunks of ``chunk`` (one compilation per distinct chunk length, timed
    apart), and ``progress(done, total, seconds)`` is called between chunks (and
    with seconds 0 where a resumed run starts).  With ``checkpoint`` (a file
    path) the state and outputs so far are saved atomically after every chunk
    (``files.save_arrays``: arrays and JSON, no pickle), and a run started again with
    the same ``checkpoint_key`` (by default the ``fingerprint`` of ``static``,
    ``consts`` and the initial ``state``) and the same code continues from the last
    saved chunk: every key derives from the step index, so the result is the
    uninterrupted run's.  A checkpoint of other settings or code, or one that is not
    a checkpoint at all, is ignored with a warning and replaced.  The last save holds
    the finished run, so a run started again returns its results at once: the caller
    removes the file (``remove_checkpoint``) once it has stored the results.
    A ``progress`` with a ``compiled()`` method hears when the chunks are compiled (``tell``).
    Each chunk length's program comes from ``compile_cache.compiled``: read back, without
    tracing, where an earlier process compiled the same program.
    Returns (final state, [out per chunk] on the host, compile seconds, run seconds);
    the compile seconds count ``compiled_before`` (the caller's own programs: the initial
    evaluation's) with the chunks'; after a resume the seconds are summed over every
    invocation that computed the kept chunks.

    Over several processes (``multiprocess``) ``consts`` and ``state`` are global
    arrays and ``chunk_fn``'s outputs replicated: process 0 alone reads and writes the
    checkpoint, and sends what it read to the others (no shared filesystem needed).
    """
    chunk = min(chunk, total)
    lengths = [chunk] * (total // chunk) + ([total % chunk] if total % chunk else [])
    outputs, done = [], 0
    earlier = {"compile": 0.0, "run": 0.0}  # seconds of earlier invocations
    writer = multiprocess.is_writer()
    if checkpoint and writer and files.special_file(checkpoint):
        warnings.warn(
            f"ignoring {checkpoint}: it is {files.special_file(checkpoint)}, not a file; "
            "this run keeps no checkpoint",
            RuntimeWarning,
            stacklevel=2,
        )
        writer = False  # neither read nor written (the other processes still take part)
    if checkpoint and checkpoint_key is None and writer:
        checkpoint_key = fingerprint(static, consts, state)
    if checkpoint:

        def out_shapes():
            return chunk_fn.eval_shape(static, lengths[0], consts, state, jnp.int32(0))[1]

        saved = None
        if writer:
            saved = _load_checkpoint(checkpoint, checkpoint_key, total, chunk, state, out_shapes)
        if multiprocess.is_multiprocess():
            saved = _share_checkpoint(saved, state, out_shapes)
        if saved is not None:
            state, outputs, done, earlier = saved
            while lengths and sum(lengths) > total - done:  # drop the chunks already done
                lengths.pop(0)
            if progress is not None:
                progress(done, total, 0.0)  # where it resumes; nothing timed yet
    check_finite_state(state, done)  # a model handed in broken (initial parameters, a resume)
    compile_start = time.perf_counter()
    name = getattr(getattr(chunk_fn, "__wrapped__", None), "__name__", "chunk")
    compiled = {
        n: compile_cache.compiled(chunk_fn, (static, n), (consts, state, jnp.int32(0)), name)
        for n in sorted(set(lengths))
    }
    compile_seconds = earlier["compile"] + compiled_before + time.perf_counter() - compile_start
    tell(progress, "compiled")
    multiprocess.wait_for_the_others("compiled")  # before the first collective step
    run_start = time.perf_counter()
    # The last state known finite, on the host (the chunk function donates its input): a
    # chunk that breaks the model is replayed from it round by round to name the round.
    finite_at = (done, jax.device_get(state))
    for n in lengths:
        state, out = compiled[n](consts, state, jnp.int32(done))
        outputs.append(jax.device_get(out))
        done += n
        bad = non_finite_slots(state)
        if bad.any():
            _name_the_round(chunk_fn, static, consts, finite_at, compiled, done - n, done, bad)
        if checkpoint:  # on the host for the checkpoint, and kept as the last finite state
            finite_at = (done, jax.device_get(state))
        if checkpoint and writer:
            seconds = {"compile": compile_seconds, "run": earlier["run"] + _since(run_start)}
            host = finite_at[1]
            try:
                _save_checkpoint(checkpoint, checkpoint_key, total, done, host, outputs, seconds)
            except OSError as error:  # a full disk, a removed folder: the old file stays
                before = done - n  # rounds the checkpoint on disk holds (saved or resumed)
                kept = (
                    f"the checkpoint of round {before} is kept: the same command resumes from it"
                    if before
                    else "no checkpoint was saved before: the same command starts over"
                )
                raise CheckpointError(
                    f"cannot save {checkpoint} after round {done} ({error.strerror or error}); "
                    f"{kept}"
                ) from None
        if progress is not None:
            progress(done, total, time.perf_counter() - run_start)
    state = jax.block_until_ready(state)
    return state, outputs, compile_seconds, earlier["run"] + time.perf_counter() - run_start


def tell(progress, event: str) -> None:
    """Calls ``progress.<event>()`` where the progress object has that method (a binary's
    progress log prints when compiling starts and ends); a plain function is not told."""
    method = getattr(progress, event, None)
    if callable(method):
        method()


class CheckpointError(RuntimeError):
    """A checkpoint could not be saved (the previous one is kept); the message is one line."""


class NonFiniteModel(ValueError):
    """A run slot's model or server state holds a NaN or an infinity after ``round``
    (1-based; 0: before the first round): a diverging model, never a result.  ``slots``
    are the broken run slots (slot s * n_runs + r is repetition r of setting s)."""

    def __init__(self, slots, round_: int):
        self.slots = [int(s) for s in slots]
        self.round = int(round_)
        super().__init__(self.describe(lambda s: f"run slot {s}"))

    def describe(self, name: Callable[[int], str]) -> str:
        """One line, naming the first broken slot with ``name(slot)``."""
        more = len(self.slots) - 1
        when = f"after round {self.round}" if self.round else "before the first round"
        return (
            f"{name(self.slots[0])}{f' (and {more} more run slot(s))' if more else ''}: "
            f"the model or server state is not finite (NaN or infinity) {when}: a diverging "
            "run (try a smaller learning rate) or a component returning NaN; nothing written"
        )


@jax.jit
def _non_finite_per_slot(leaves):
    return [
        ~jnp.isfinite(x).reshape(x.shape[0], -1).all(axis=1) if x.ndim else ~jnp.isfinite(x)
        for x in leaves
    ]


def non_finite_slots(state) -> np.ndarray:
    """bool [n_slots]: which run slots' float leaves of ``state`` (leaves [n_slots, ...]:
    global parameters, server state, ...) hold a NaN or an infinity; a leaf without the
    slot axis counts for every slot.  One reduction on the device, a few bytes back."""
    leaves = [
        x
        for x in jax.tree_util.tree_leaves(state)
        if jnp.issubdtype(jnp.result_type(x), jnp.inexact)
    ]
    if not leaves:
        return np.zeros(1, bool)
    per_leaf = [np.asarray(b) for b in jax.device_get(_non_finite_per_slot(leaves))]
    n = max(b.size for b in per_leaf)
    bad = np.zeros(n, bool)
    for b in per_leaf:
        bad |= b if b.size == n else np.broadcast_to(b.any(), (n,))
    return bad


def check_finite_state(state, round_: int) -> None:
    """Raises NonFiniteModel when some run slot's ``state`` is not finite after ``round_``."""
    bad = non_finite_slots(state)
    if bad.any():
        raise NonFiniteModel(np.flatnonzero(bad), round_)


def _name_the_round(chunk_fn, static, consts, finite_at, compiled, chunk_start, chunk_end, bad):
    """Raises NonFiniteModel naming the first round after which a model broke in the chunk
    of rounds ``chunk_start`` + 1 .. ``chunk_end``: replays the run from the last state known
    finite (whole chunks up to ``chunk_start``, then one round at a time; every key derives
    from the round index, so the replay is the run itself).  ``bad``: the broken slots."""
    done, host_state = finite_at
    state = multiprocess.replicated(jax.tree_util.tree_map(jnp.asarray, host_state))
    length = max(compiled)
    while done < chunk_start:  # whole chunks: every chunk before the last is this long
        state, _ = compiled[length](consts, state, jnp.int32(done))
        done += length
    one = chunk_fn.lower(static, 1, consts, state, jnp.int32(0)).compile()
    while done < chunk_end:
        state, _ = one(consts, state, jnp.int32(done))
        done += 1
        check_finite_state(state, done)
    raise NonFiniteModel(np.flatnonzero(bad), chunk_end)  # not reproduced: the chunk's end


def remove_checkpoint(path) -> None:
    """Removes a checkpoint once the run's results are stored (a missing file is fine;
    a folder or FIFO standing there is left alone)."""
    if path:
        files.remove_own(path)


def _since(start: float) -> float:
    return time.perf_counter() - start


def repetition_keys(seed: int, repetitions) -> jax.Array:
    """Key of every run slot: fold_in(PRNGKey(seed), r) for its repetition r.

    Slots of different grid cells with the same repetition share their key, so cells are
    compared on paired runs.  Every method derives its run keys here.
    """
    base = jax.random.PRNGKey(seed)
    return jax.vmap(lambda r: jax.random.fold_in(base, r))(jnp.asarray(repetitions))


def run_keys(seed: int, repetitions) -> tuple[jax.Array, jax.Array]:
    """(initialisation keys, training keys) of the run slots: each repetition key split in two."""
    keys = jax.vmap(jax.random.split)(repetition_keys(seed, repetitions))
    return keys[:, 0], keys[:, 1]


def round_curves(outputs) -> dict:
    """``scan_in_chunks``'s per-chunk metrics (NamedTuples or dicts of [rounds, slots]) as
    curves ``{name: [slots, rounds]}``."""
    as_dict = [o if isinstance(o, dict) else o._asdict() for o in outputs]
    return {f: np.concatenate([np.asarray(o[f]) for o in as_dict], axis=0).T for f in as_dict[0]}


_CHECKPOINT = "scan checkpoint"


def _save_checkpoint(path, key, total, done, state, outputs, seconds) -> None:
    """Saves the scan state and the outputs so far (each leaf concatenated over chunks)."""
    state_leaves, state_tree = jax.tree_util.tree_flatten(jax.device_get(state))
    out_leaves = [
        np.concatenate(parts, axis=0)
        for parts in zip(*(jax.tree_util.tree_leaves(o) for o in outputs))
    ]
    meta = {
        "kind": _CHECKPOINT,
        "total": total,
        "done": done,
        "state_tree": str(state_tree),
        "state_leaves": len(state_leaves),
        "output_tree": str(jax.tree_util.tree_structure(outputs[0])),
        "seconds": seconds,
    }
    files.save_arrays(path, key, meta, state_leaves + out_leaves)


def _load_checkpoint(path, key, total, chunk, state, out_shapes):
    """(state, [outputs so far], rounds done, earlier seconds) from ``path`` when it holds
    a checkpoint of this very run (settings, data, code, shapes); else None, with a
    warning when a file was there."""
    if not os.path.lexists(path):
        return None
    try:
        meta, arrays = files.load_arrays(path, key)
        state_leaves, state_tree = jax.tree_util.tree_flatten(state)
        n = len(state_leaves)
        done, seconds = meta.get("done"), meta.get("seconds")
        if meta.get("kind") != _CHECKPOINT or meta.get("total") != total:
            raise files.StoredFileError(f"not a checkpoint of {total} steps")
        if not (isinstance(done, int) and 0 < done <= total):
            raise files.StoredFileError(f"a step count {done!r} outside 1..{total}")
        if not (done == total or done % chunk == 0):
            raise files.StoredFileError(f"{done} steps done, not whole chunks of {chunk}")
        if not (
            isinstance(seconds, dict)
            and all(
                isinstance(seconds.get(k), (int, float))
                and not isinstance(seconds.get(k), bool)
                and 0 <= seconds[k] < math.inf
                for k in ("compile", "run")
            )
        ):
            raise files.StoredFileError("no timings (finite seconds)")
        if meta.get("state_tree") != str(state_tree) or meta.get("state_leaves") != n:
            raise files.StoredFileError("a state of another structure")
        for saved, live in zip(arrays, state_leaves):
            if saved.shape != np.shape(live) or saved.dtype != live.dtype:
                raise files.StoredFileError("a state of other shapes or types")
        if non_finite_slots(arrays[:n]).any():
            raise files.StoredFileError("a state that is not finite")
        expected, tree = jax.tree_util.tree_flatten(out_shapes())  # one chunk's outputs
        outputs = arrays[n:]
        if meta.get("output_tree") != str(tree) or len(outputs) != len(expected):
            raise files.StoredFileError("outputs of another structure")
        for saved, live in zip(outputs, expected):
            if saved.shape[:1] != (done,) or saved.shape[1:] != live.shape[1:]:
                raise files.StoredFileError(f"outputs that do not cover {done} steps")
            if saved.dtype != live.dtype:
                raise files.StoredFileError("outputs of other types")
    except files.StoredFileError as error:
        warnings.warn(
            f"ignoring {path}: {error}; the run starts over and replaces it",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    restored = jax.tree_util.tree_unflatten(state_tree, [jnp.asarray(a) for a in arrays[:n]])
    return restored, [tree.unflatten(outputs)], done, seconds


def _share_checkpoint(saved, state, out_shapes):
    """What process 0 read from the checkpoint (``_load_checkpoint``'s tuple or None),
    on every process, with the state as global replicated arrays."""
    done = int(multiprocess.broadcast(np.int32(saved[2] if saved is not None else 0)))
    if not done:
        return None
    state_leaves, state_tree = jax.tree_util.tree_flatten(state)
    expected, out_tree = jax.tree_util.tree_flatten(out_shapes())
    if saved is not None:
        restored, outputs, _, seconds = saved
        payload = (
            [np.asarray(a) for a in jax.tree_util.tree_leaves(restored)],
            [np.asarray(a) for a in jax.tree_util.tree_leaves(outputs[0])],
            np.array([seconds["compile"], seconds["run"]], np.float32),
        )
    else:
        payload = (
            [np.zeros(np.shape(a), a.dtype) for a in state_leaves],
            [np.zeros((done,) + o.shape[1:], o.dtype) for o in expected],
            np.zeros(2, np.float32),
        )
    state_part, output_part, seconds = multiprocess.broadcast(payload)
    restored = jax.tree_util.tree_unflatten(state_tree, state_part)
    return (
        multiprocess.replicated(restored),
        [out_tree.unflatten(output_part)],
        done,
        {"compile": float(seconds[0]), "run": float(seconds[1])},
    )


def fingerprint(static, *trees) -> str:
    """What must match for a checkpoint to belong to a run: the repr of its static
    settings (frozen configs, specs) and the shape, type and bytes of every array leaf
    of ``trees`` (data, keys, initial parameters)."""
    digest = hashlib.sha256(repr(static).encode())
    for leaf in jax.tree_util.tree_leaves(trees):
        value = np.ascontiguousarray(jax.device_get(leaf))
        digest.update(f"{value.shape}{value.dtype}".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()
