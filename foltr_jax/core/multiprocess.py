"""Runs over several processes (hosts): one JAX program over every process's devices.

With ``jax.distributed`` every process runs the same program on the same data and keys
(they derive from the seed), holds its devices' share of a round's lanes (``shard_map``
over a mesh of ``jax.devices()``, every process's devices) and sees every lane's model in
the server step (the compiler gathers them).  The inputs of a compiled chunk are global
arrays, replicated over the mesh (``replicated``): each process contributes its own
identical copy, so nothing is sent to build them.  Process 0 alone writes files
(``is_writer``); checkpoints are read by process 0 and sent to the others
(``broadcast``), so no shared filesystem is needed.

With one process (``jax.process_count() == 1``) every helper here does nothing.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import itertools
import os
import sys
import threading
import time

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec


class DistributedError(Exception):
    """A multi-process set-up that cannot run; the message is one line."""


MAX_PROCESSES = 2**31 - 1  # JAX counts processes in a 32-bit integer


def check_address(coordinator: str) -> None:
    """DistributedError unless ``coordinator`` reads as host:port (an IPv6 host in
    brackets, [::1]:1234) with a port in 1..65535: a malformed address is said at once,
    not after the wait for a coordinator that cannot be reached."""
    host, port = "", ""
    if coordinator.startswith("["):
        inside, closed, rest = coordinator[1:].partition("]")
        if closed and rest.startswith(":"):
            host, port = inside, rest[1:]
    elif coordinator.count(":") == 1:
        host, _, port = coordinator.partition(":")
    if not (host and port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        raise DistributedError(
            f"the coordinator address (JAX_COORDINATOR_ADDRESS) {coordinator!r} is not "
            "host:port (e.g. 10.0.0.1:1234, [::1]:1234) with a port in 1..65535"
        )


def initialize(
    coordinator: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    timeout: int = 300,
    program: str = "foltr_jax",
) -> None:
    """``jax.distributed.initialize`` with a bounded wait and gloo collectives on CPU.

    Without ``coordinator``, ``num_processes`` and ``process_id`` JAX detects the
    cluster (SLURM, Open MPI, ...).  JAX ends the process with a C++ abort when the
    coordinator or a peer does not come; here, if the processes have not all met after
    ``timeout`` seconds, one line '<program>: error: ...' is printed and the process
    exits with status 2.
    """
    given = [coordinator is not None, num_processes is not None, process_id is not None]
    if any(given) and not all(given):
        raise DistributedError(
            "set the coordinator address, the number of processes and the process id together "
            "(JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID), or none of them"
        )
    if num_processes is not None and not 1 <= num_processes <= MAX_PROCESSES:
        raise DistributedError(
            f"the number of processes (JAX_NUM_PROCESSES) must be in 1..{MAX_PROCESSES:,}, "
            f"got {num_processes}"
        )
    if coordinator is not None:
        check_address(coordinator)
    if num_processes is not None and process_id is not None and not 0 <= process_id < num_processes:
        raise DistributedError(
            f"process id {process_id} is outside 0..{num_processes - 1} ({num_processes} processes)"
        )
    if timeout < 1:
        raise DistributedError(f"the timeout must be at least 1 second, got {timeout}")
    # CPU devices of several processes talk through gloo (it affects only the CPU backend).
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    where = f"coordinator {coordinator}" if coordinator else "the cluster's coordinator"

    def give_up():
        print(
            f"{program}: error: --distributed_timeout: the {num_processes or 'cluster'} "
            f"processes did not all reach {where} within {timeout} s (is every process "
            "started, and the address reachable?)",
            file=sys.stderr,
            flush=True,
        )
        os._exit(2)

    watchdog = threading.Timer(timeout, give_up)
    watchdog.daemon = True
    watchdog.start()
    try:
        jax.distributed.initialize(
            coordinator,
            num_processes,
            process_id,
            initialization_timeout=timeout + 30,  # the watchdog ends the wait first
            shutdown_timeout_seconds=timeout,
        )
    except (RuntimeError, ValueError) as error:
        hint = (
            ""
            if coordinator
            else (
                "; no cluster was detected: set JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and "
                "JAX_PROCESS_ID"
            )
        )
        message = str(error).rstrip(".")
        raise DistributedError(f"jax.distributed.initialize failed: {message}{hint}") from None
    finally:
        watchdog.cancel()
    watch_peers(program)


PEER_PATIENCE_S = 30.0  # a peer silent this long is taken as stopped (JAX's own check: 100 s)


def watch_peers(program: str, patience: float = PEER_PATIENCE_S, every: float = 1.0) -> None:
    """Starts a thread that notes every ``every`` s that this process lives (a key of JAX's
    coordination service) and reads the others' notes.  When a peer has been silent for
    ``patience`` s, or the coordinator (process 0) cannot be reached, it prints one line
    '<program>: error: ...' naming the process and ends this one (status 1).  Without it, a
    survivor blocked in a collective step waits for JAX's heartbeat check, which ends the
    process from C++ (a check failure and stack dumps, status 134) that Python cannot
    catch.  The checkpoint, written atomically, is left as it was."""
    from jax._src import distributed

    client, me, count = distributed.global_state.client, jax.process_index(), jax.process_count()
    if client is None or count < 2:
        return

    def stop(why: str) -> None:
        print(
            f"{program}: error: --distributed: {why} (this is process {me} of {count}); start "
            "every process again with the same command: the run resumes from its last "
            "checkpoint, which is kept",
            file=sys.stderr,
            flush=True,
        )
        os._exit(1)

    def watch() -> None:
        seen = {p: (None, time.monotonic()) for p in range(count) if p != me}
        for beat in itertools.count():
            try:
                client.key_value_set(_alive(me), str(beat), allow_overwrite=True)
            except Exception as error:  # noqa: BLE001 - whatever the lost service raises
                stop(f"the coordinator, process 0, cannot be reached ({_first_line(error)})")
            now = time.monotonic()
            for p, (value, since) in seen.items():
                try:
                    found = client.key_value_try_get(_alive(p))
                except Exception:  # noqa: BLE001 - not noted yet
                    found = None
                if found != value:
                    seen[p] = (found, now)
            silent = [
                p for p, (note, since) in seen.items()
                if note != _EXITING and now - since > patience
            ]  # fmt: skip
            if silent:
                stop(f"process(es) {silent} stopped (nothing from them for {patience:.0f} s)")
            if exiting.wait(every):
                return

    def at_exit() -> None:
        """Before JAX's own exit handler (it closes the client): the thread ends, joined
        here (a daemon thread inside a C++ call at the interpreter's end aborts it), and
        the peers are told not to wait for this process's notes any more."""
        exiting.set()
        thread.join(timeout=10)
        try:
            client.key_value_set(_alive(me), _EXITING, allow_overwrite=True)
        except Exception:  # noqa: BLE001, S110 - the service is gone: nobody waits
            pass

    exiting = threading.Event()
    thread = threading.Thread(target=watch, name="foltr_jax-peers", daemon=True)
    thread.start()
    atexit.register(at_exit)


_EXITING = "exiting"


_MEETINGS = itertools.count()


def wait_for_the_others(what: str, timeout_s: float = 3600.0) -> None:
    """Blocks until every process has reached this call (a barrier of JAX's coordination
    service).  Called once a chunk is compiled, before its first collective step: gloo
    gives up on a peer that starts a collective more than 30 s after the first (a fixed
    limit in jaxlib), and under load one process compiles that much longer than another.
    A peer that stops meanwhile is noticed by ``watch_peers``."""
    if not is_multiprocess():
        return
    from jax._src import distributed

    client = distributed.global_state.client
    assert client is not None  # is_multiprocess(): JAX's distributed client is up
    client.wait_at_barrier(f"foltr_jax/{what}/{next(_MEETINGS)}", int(timeout_s * 1000))


def _alive(process: int) -> str:
    return f"foltr_jax/alive/{process}"


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def is_multiprocess() -> bool:
    return jax.process_count() > 1


def is_writer() -> bool:
    """Whether this process writes files: process 0 (the only one without jax.distributed)."""
    return jax.process_index() == 0


def check_agreement(digest: str, what: str) -> None:
    """Raises DistributedError unless every process passes the same ``digest`` (e.g. a
    SHA-256 of its flags, data and keys); ``what`` says what the digest covers."""
    if not is_multiprocess():
        return
    mine = np.frombuffer(hashlib.sha256(digest.encode()).digest(), np.uint8)
    every = np.asarray(multihost_utils.process_allgather(mine))
    differ = [p for p in range(every.shape[0]) if not np.array_equal(every[p], every[0])]
    if differ:
        raise DistributedError(
            f"process(es) {differ} run with other {what} than process 0: start every "
            "process with the same flags and data"
        )


def failed_processes(failed: bool) -> list:
    """The processes that pass ``failed=True``, on every process (every process calls this
    at the same point, so that one process's failure stops them all)."""
    if not is_multiprocess():
        return [0] if failed else []
    every = np.asarray(multihost_utils.process_allgather(np.int32(failed)))
    return [int(p) for p in np.flatnonzero(every.reshape(-1))]


@functools.cache
def _replicated_sharding(n_devices: int) -> NamedSharding:
    mesh = Mesh(np.asarray(jax.devices()[:n_devices]), ("lanes",))
    return NamedSharding(mesh, PartitionSpec())


def replicated(tree):
    """Every array leaf of ``tree`` (identical on every process) as a global array
    replicated over every process's devices; unchanged with one process."""
    if not is_multiprocess():
        return tree
    sharding = _replicated_sharding(jax.device_count())
    return jax.tree_util.tree_map(
        lambda x: jax.make_array_from_process_local_data(sharding, np.asarray(x)), tree
    )


def replicated_jit(fn, **jit_kwargs):
    """``jax.jit(fn)`` whose outputs are replicated over every process's devices (each
    process can read them, and a chunk's state feeds the next chunk unchanged)."""
    return jax.jit(fn, out_shardings=_replicated_sharding(jax.device_count()), **jit_kwargs)


def broadcast(tree):
    """Process 0's ``tree`` (numpy leaves) on every process; the others pass a tree of
    the same shapes and types.  Unchanged with one process."""
    if not is_multiprocess():
        return tree
    return jax.tree_util.tree_map(np.asarray, multihost_utils.broadcast_one_to_all(tree))
