"""The run loop shared by every method: rounds under ``lax.scan`` in jit-compiled
chunks, progress between chunks, checkpoint and resume, and run fingerprints.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from foltr_jax import files

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
):
    """Runs ``total`` steps of ``chunk_fn(static, n, consts, state, first) -> (state, out)``.

    ``chunk_fn`` is jitted with ``static`` and the chunk length n static.  Steps go
    in chunks of ``chunk`` (one compilation per distinct chunk length, timed
    apart), and ``progress(done, total, seconds)`` is called between chunks (and
    with seconds 0 where a resumed run starts).  With ``checkpoint`` (a file
    path) the state and outputs so far are saved atomically after every chunk, and
    a run started again with the same ``checkpoint_key`` (by default the
    ``fingerprint`` of ``static``, ``consts`` and the initial ``state``) continues from the last
    saved chunk: every key derives from the step index, so the result is the
    uninterrupted run's.  The file is removed when the run completes.
    Returns (final state, [out per chunk] on the host, compile seconds, run seconds).
    """
    chunk = min(chunk, total)
    lengths = [chunk] * (total // chunk) + ([total % chunk] if total % chunk else [])
    outputs, done = [], 0
    if checkpoint and checkpoint_key is None:
        checkpoint_key = fingerprint(static, consts, state)
    saved = _load_checkpoint(checkpoint, checkpoint_key, total)
    if saved is not None:
        state = jax.tree_util.tree_map(jnp.asarray, saved["state"])
        outputs, done = saved["outputs"], saved["done"]
        while lengths and sum(lengths) > total - done:  # drop the chunks already done
            lengths.pop(0)
        if progress is not None:
            progress(done, total, 0.0)  # where it resumes; nothing timed yet
    compile_start = time.perf_counter()
    compiled = {
        n: chunk_fn.lower(static, n, consts, state, jnp.int32(0)).compile()
        for n in sorted(set(lengths))
    }
    compile_seconds = time.perf_counter() - compile_start
    run_start = time.perf_counter()
    for n in lengths:
        state, out = compiled[n](consts, state, jnp.int32(done))
        outputs.append(jax.device_get(out))
        done += n
        if checkpoint and done < total:
            _save_checkpoint(checkpoint, checkpoint_key, total, done, state, outputs)
        if progress is not None:
            progress(done, total, time.perf_counter() - run_start)
    state = jax.block_until_ready(state)
    if checkpoint and os.path.exists(checkpoint):
        os.remove(checkpoint)
    return state, outputs, compile_seconds, time.perf_counter() - run_start


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
    """``scan_in_chunks``'s per-chunk metric tuples as curves ``{field: [slots, rounds]}``."""
    return {
        f: np.concatenate([np.asarray(getattr(o, f)) for o in outputs], axis=0).T
        for f in outputs[0]._fields
    }


def _save_checkpoint(path, fingerprint, total, done, state, outputs) -> None:
    """Writes the scan state through a temporary file and a rename (never half-written)."""
    payload = {
        "fingerprint": fingerprint,
        "total": total,
        "done": done,
        "state": jax.device_get(state),
        "outputs": outputs,
    }
    files.write_atomically(path, lambda stream: pickle.dump(payload, stream))


def _load_checkpoint(path, fingerprint, total):
    """The saved payload when ``path`` holds a checkpoint of this very run, else None."""
    if not path or not os.path.exists(path):
        return None
    try:
        with open(path, "rb") as stream:
            saved = pickle.load(stream)
    except (OSError, pickle.UnpicklingError, EOFError):
        return None
    if saved.get("fingerprint") != fingerprint or saved.get("total") != total:
        return None
    return saved


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
