"""What a round's clients send and how it reaches the server: ``Sent``, ``serve`` (the
clients train, all at once or ``client_chunk`` at a time under ``lax.scan`` through the
server pipeline's streaming form, and every slot's pipeline aggregates), the clients and
slots split over devices (``on_devices``, ``slots_on_devices``), and the checks that a
run's devices and chunks fit (``check_scale``).  ``on_mesh`` is the one place the
package maps work over devices (``shard_map``): the slots' evaluation, the clients of a
round and FPDGD's lanes all go through it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from foltr_jax.engine.config import INT32_MAX, ConfigError
from foltr_jax.server import pipeline


class Sent(NamedTuple):
    """What a run of clients sends the server in a round, in every run slot."""

    models: jax.Array  # float [n_slots, size, d]: models (reference: the global model) or updates
    weights: jax.Array  # float [n_slots, size]: FedAvg weights n_c; 0 for absent clients
    online: Any  # pytree of float [n_slots]: sums over these clients (online metrics)
    kept: Any = None  # per-client results the method wants back (an unchunked round only)


def serve(
    train: Callable[[Any, int], Sent],
    slot_stages: Callable[[Any], tuple],
    settings,
    reference: jax.Array,
    n_malicious: jax.Array,
    state,
    keys: jax.Array,
    n_clients: int,
    client_chunk: int = 0,
):
    """The clients train and every slot's server pipeline aggregates what they send.

    Args:
        train: ``train(start, size) -> Sent`` for clients ``start .. start + size - 1``
            (``start`` may be traced; ``size`` is static).
        slot_stages: ``slot_stages(slot_settings) -> stages`` (``pipeline.server_stages``)
            of one slot; called under ``vmap`` over ``settings``' leading slot axis.
        settings: a pytree with leading axis n_slots (None when no stage varies).
        reference: float [n_slots, d] the pipeline's ``global_model``: the model the
            clients started from when they send models, 0 when they send updates.
        n_malicious: int [n_slots]; the first n_malicious clients are malicious.
        state: the slots' server chain states (leaves [n_slots, ...]).
        keys: [n_slots] the server's key of the round in each slot.
        client_chunk: clients per chunk; 0 (or ``n_clients``) trains them all at once.
            Chunks need a pipeline that streams (``pipeline.streaming_split``); client c
            keeps its key and noise, so results equal the unchunked round's up to the
            order of floating-point sums.

    Returns (aggregates [n_slots, d], new state, online sums, kept: ``Sent.kept`` of an
    unchunked round, None when chunked).
    """

    def messages(sent: Sent, start) -> pipeline.ClientUpdates:
        def one(models, weights, global_model, m):
            return pipeline.ClientUpdates(models, weights, global_model, m, global_model, start)

        return jax.vmap(one)(sent.models, sent.weights, reference, n_malicious)

    if not 0 < client_chunk < n_clients:
        sent = train(0, n_clients)
        updates, state = jax.vmap(
            lambda s, st, u, k: pipeline.chain(*slot_stages(s)).update(st, u, k)
        )(settings, state, messages(sent, 0), keys)
        return updates.aggregate, state, sent.online, sent.kept

    def chunk_sums(j):
        sent = train(j * client_chunk, client_chunk)
        part = jax.vmap(lambda s, u, k: pipeline.stream_part(slot_stages(s), u, k))(
            settings, messages(sent, j * client_chunk), keys
        )
        return part, sent.online

    def one_chunk(sums, j):
        return jax.tree_util.tree_map(jnp.add, sums, chunk_sums(j)), None

    zeros = jax.tree_util.tree_map(
        lambda x: jnp.zeros(x.shape, x.dtype), jax.eval_shape(chunk_sums, 0)
    )
    (sums, online), _ = jax.lax.scan(one_chunk, zeros, jnp.arange(n_clients // client_chunk))
    # What the stages after the aggregation see: the reference, no client rows.
    template = messages(Sent(reference[:, None], jnp.zeros_like(reference[:, :1]), None), 0)
    updates, state = jax.vmap(
        lambda s, st, x, u, k: pipeline.stream_finish(slot_stages(s), st, x, u, k)
    )(settings, state, sums, template, keys)
    return updates.aggregate, state, online, None


def device_mesh(n_devices: int, axis: str) -> jax.sharding.Mesh:
    """The first ``n_devices`` devices (every process's) as a one-axis mesh named ``axis``."""
    return jax.sharding.Mesh(np.asarray(jax.devices()[:n_devices]), (axis,))


def on_mesh(fn: Callable, mesh: jax.sharding.Mesh, in_specs, out_specs) -> Callable:
    """``fn`` on every device of ``mesh`` (``shard_map``): the arguments split or
    replicated as ``in_specs`` say, the results gathered as ``out_specs`` say.  The work
    the package splits over devices is independent per part (a slot, a client, a lane),
    so the results are the single-device results; the arguments go in as arguments, not
    closed over: over several processes they are global arrays the mapped function must
    see in its own (manual) view."""
    return jax.shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)


def slots_on_devices(fn: Callable, shared, slotted, n_devices: int):
    """``fn(shared, slot)`` of every slot of ``slotted`` (vmapped over its leading axis),
    with the slots split over ``n_devices`` devices (``shard_map`` over a one-axis mesh
    ``slots``).

    For work where every slot's result depends only on its own slice and ``shared``
    (offline evaluation of the slots' models): the slots are padded to a multiple of
    ``n_devices`` with copies of the last, each device runs its part, and the padding is
    dropped.  ``shared`` goes in replicated, as an argument (see ``on_devices``)."""
    fn = jax.vmap(fn, in_axes=(None, 0))
    if n_devices == 1:
        return fn(shared, slotted)
    n = jax.tree_util.tree_leaves(slotted)[0].shape[0]
    extra = -(-n // n_devices) * n_devices - n
    mesh = device_mesh(n_devices, "slots")
    whole, split = jax.sharding.PartitionSpec(), jax.sharding.PartitionSpec("slots")
    # Replicated where the split starts: else XLA may carry the split back into whatever
    # ``slotted`` came from (a scan chunk's state), which then leaves the chunk split.
    slotted = jax.lax.with_sharding_constraint(
        jax.tree_util.tree_map(
            lambda x: jnp.concatenate([x, jnp.repeat(x[-1:], extra, axis=0)]), slotted
        ),
        jax.sharding.NamedSharding(mesh, whole),
    )
    out = on_mesh(fn, mesh, (whole, split), split)(shared, slotted)
    return jax.tree_util.tree_map(lambda x: x[:n], out)


def on_devices(train: Callable, inputs, n_devices: int) -> Callable[[Any, int], Sent]:
    """``train(inputs, start, size) -> Sent`` as ``serve`` takes it (``train(start,
    size)``), with the clients of every call split over ``n_devices`` devices.

    Each device trains its ``size / n_devices`` clients (``shard_map`` over a one-axis
    mesh ``clients``); a client's work depends only on its own key and the inputs, so
    the models are the single-device models, gathered in client order, and the online
    sums add the devices' parts.  ``inputs`` go in as an argument, replicated, not
    closed over: over several processes they are global arrays the mapped function
    must see in its own view.
    """
    if n_devices == 1:
        return lambda start, size: train(inputs, start, size)
    mesh = device_mesh(n_devices, "clients")
    whole, split = jax.sharding.PartitionSpec(), jax.sharding.PartitionSpec(None, "clients")

    def call(start, size: int) -> Sent:
        per_device = size // n_devices

        def shard(inputs, start):
            first = start + jax.lax.axis_index("clients") * per_device
            sent = train(inputs, first, per_device)
            return sent._replace(online=jax.tree_util.tree_map(lambda x: x[None], sent.online))

        by_client = jax.sharding.PartitionSpec("clients")
        # shard_map's out_specs: a Sent of PartitionSpecs, not of arrays
        specs = Sent(split, split, by_client, split)  # type: ignore[arg-type]
        sent = on_mesh(shard, mesh, (whole, whole), specs)(inputs, jnp.asarray(start, jnp.int32))
        return sent._replace(online=jax.tree_util.tree_map(lambda x: x.sum(0), sent.online))

    return call


def check_devices(n_devices: int, count: int, what: str = "clients trained at a time") -> None:
    """Raises ConfigError('n_devices') unless ``n_devices`` devices are visible (every
    process's devices in a multi-process run) and split the ``count`` ``what`` (a round's
    clients, or FPDGD's lanes) evenly."""
    if n_devices < 1:
        raise ConfigError("n_devices", f"must be at least 1, got {n_devices}")
    if jax.process_count() > 1 and n_devices != jax.device_count():
        raise ConfigError(
            "n_devices",
            f"must be the {jax.device_count()} devices of the {jax.process_count()} processes "
            f"in a multi-process run, got {n_devices}",
        )
    if n_devices > len(jax.devices()):
        raise ConfigError(
            "n_devices", f"asks for {n_devices} devices but {len(jax.devices())} are visible"
        )
    if count % n_devices:
        raise ConfigError("n_devices", f"must divide the {count} {what}")


def device_memory(n_devices: int = 1) -> int | None:
    """Bytes the run's devices can hold: an accelerator's memory limit times ``n_devices``,
    or on the CPU the machine's physical memory; None where it cannot be told."""
    device = jax.local_devices()[0]
    if device.platform != "cpu":
        try:
            stats = device.memory_stats() or {}
        except Exception:  # noqa: BLE001  (a backend without memory statistics)
            stats = {}
        limit = stats.get("bytes_limit")
        return int(limit) * max(n_devices, 1) if limit else None
    return host_memory()


def host_memory() -> int | None:
    """Bytes of the machine's physical memory (where data is read and made); None where it
    cannot be told."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def in_bytes(count: float) -> str:
    """``count`` bytes in words: '8.0 TB', '25.3 GB'."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if count >= size:
            return f"{count / size:,.1f} {unit}"
    return f"{count:,.0f} bytes"


def check_memory(needed: float, sizes: dict, what: str, n_devices: int = 1) -> None:
    """ConfigError naming the largest of ``sizes`` ({setting: value}, e.g. n_clients,
    n_runs, local_updates) when the ``needed`` bytes, a lower bound estimated from the run's
    shapes before anything is allocated or compiled (``what`` says of what), exceed what
    the devices hold (``device_memory``): a run that cannot fit is refused in one line, not
    killed or ended by an allocation failure after minutes."""
    available = device_memory(n_devices)
    if available is None or needed <= available:
        return
    field = max(sizes, key=lambda name: sizes[name])
    said = ", ".join(f"{name} = {value:,}" for name, value in sizes.items())
    raise ConfigError(
        field,
        f"the run needs at least {in_bytes(needed)} ({said}: {what}), more than the "
        f"{in_bytes(available)} of memory here; ask for less",
    )


def check_streams(stages: tuple, flag: str = "client_chunk") -> None:
    """Raises ConfigError naming ``flag`` when ``stages`` cannot run a chunk of clients
    at a time (a stage needs every client of a round at once)."""
    try:
        pipeline.streaming_split(stages)
    except ValueError as error:
        raise ConfigError(flag, f"streams the server pipeline over client chunks, but {error}")


def check_scale(config, stages: tuple) -> None:
    """Raises ConfigError naming the flag when ``config`` (a ``config.RunConfig``) chunks
    its clients but ``stages`` cannot stream, or when its devices do not split a round's
    (or chunk's) clients evenly."""
    if config.chunked:
        check_streams(stages)
    count = config.client_chunk if config.chunked else config.n_round_clients
    check_devices(config.n_devices, count)
    per_client = getattr(config, "local_updates", 1)
    field = config.clients_field
    if config.n_round_clients * per_client > INT32_MAX:  # a round's interactions, in int32
        raise ConfigError(
            field if config.n_round_clients >= per_client else "local_updates",
            f"{config.n_round_clients:,} clients x {per_client:,} interactions a round "
            f"is more than the {INT32_MAX:,} a round can count",
        )
    check_memory(  # every lane of a round holds its interactions' keys
        count * config.n_runs * per_client * 8,
        {field: config.n_round_clients, "n_runs": config.n_runs, "local_updates": per_client},
        f"{count * config.n_runs:,} lanes of clients x runs, each with its interactions",
        config.n_devices,
    )
