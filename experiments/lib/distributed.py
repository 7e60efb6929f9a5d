"""--distributed runs seen from a binary: joining the other processes, checking that
they agree (flags, data, settings), ending all of them when one fails, and which
process writes files.  The flags themselves are defined in ``experiments.lib.shared_flags``."""

from __future__ import annotations

import os

from absl import flags

from experiments.lib.cli import UserError, fail
from foltr_jax.engine import loop
from foltr_jax.engine.results_files import OutputError

FLAGS = flags.FLAGS

_CLUSTER_VARIABLES = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")


def start_distributed(program: str) -> None:
    """With --distributed: joins the other processes (``multiprocess.initialize``, from
    the JAX_* variables when set), then checks that every process got the same flags.
    UserError naming the flag or variable otherwise."""
    if not FLAGS.distributed:
        return
    from foltr_jax.core import multiprocess

    values = {name: os.environ.get(name) or None for name in _CLUSTER_VARIABLES}
    numbers = {}
    for name in _CLUSTER_VARIABLES[1:]:
        if values[name] is not None:
            try:
                numbers[name] = int(values[name])
            except ValueError:
                raise UserError(
                    f"--distributed: {name} must be an integer, got {values[name]!r}"
                ) from None
    try:
        multiprocess.initialize(
            values["JAX_COORDINATOR_ADDRESS"],
            numbers.get("JAX_NUM_PROCESSES"),
            numbers.get("JAX_PROCESS_ID"),
            timeout=FLAGS.distributed_timeout,
            program=program,
        )
        flag_values = {
            name: value
            for name, value in sorted(FLAGS.flag_values_dict().items())
            if name not in _PER_PROCESS_FLAGS
        }
        multiprocess.check_agreement(repr(flag_values), "flags")
    except multiprocess.DistributedError as error:
        raise UserError(f"--distributed: {error}") from None


# Flags that may differ between the processes of one run (absl's own, logging).
_PER_PROCESS_FLAGS = {"logtostderr", "alsologtostderr", "log_dir", "verbosity", "v"}


def refuse_distributed(program: str, what: str) -> None:
    """Ends a binary that does not run over several processes with one line when
    --distributed is given."""
    if FLAGS.distributed:
        fail(
            program,
            f"--distributed: {what} does not run over several processes (fpdgd, "
            "poisoning, benchmark, foltr_es, fedips, noniid and unlearning do); run it "
            "without --distributed",
        )


def check_same_everywhere(*trees, what: str = "data or settings") -> None:
    """With --distributed: UserError unless every process holds the same ``trees``
    (configs, data, keys), compared by ``loop.fingerprint``."""
    if not FLAGS.distributed:
        return
    from foltr_jax.core import multiprocess

    try:
        multiprocess.check_agreement(loop.fingerprint(*trees), what)
    except multiprocess.DistributedError as error:
        raise UserError(f"--distributed: {error}") from None


def on_every_process(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``; with --distributed every process calls it and they compare:
    when it raised UserError on some process, every process ends (this one with its own
    error, the others with one line naming the processes that failed) instead of waiting
    for them in the next collective step."""
    if not FLAGS.distributed:
        return fn(*args, **kwargs)
    from foltr_jax.core import multiprocess

    result = error = None
    try:
        result = fn(*args, **kwargs)
    except (UserError, OutputError) as raised:
        error = raised
    failed = multiprocess.failed_processes(error is not None)
    if error is not None:
        raise error
    if failed:
        raise UserError(f"--distributed: process(es) {failed} failed (see their error); stopping")
    return result


def end_after_failed_step(program: str, error: Exception) -> None:
    """Ends a --distributed process whose step over the processes failed (typically: a
    peer was killed, and gloo's collective lost its connection) with one line naming the
    processes and the way on.  It ends at once (``os._exit``, status 1): at a normal exit
    JAX shuts the distributed client down, which waits for the dead process at a barrier
    and then aborts in C++ (a check-failure stack, status 134), which Python cannot catch.
    The checkpoint, written atomically after every chunk, is left as it was; the output
    folder's lock goes with the process."""
    import re
    import sys

    import jax

    detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    detail = re.sub(r"^[A-Z_]+: ", "", re.sub(r"\[[^\]]*\.cc:\d+\] ", "", detail))
    me, count = jax.process_index(), jax.process_count()
    others = f"process {1 - me}" if count == 2 else "another process"
    sys.stdout.flush()
    print(
        f"{program}: error: --distributed: a step over the {count} processes failed in "
        f"process {me} ({detail}); if {others} stopped, start every process again with the "
        "same command: the run resumes from its last checkpoint, which is kept",
        file=sys.stderr,
        flush=True,
    )
    os._exit(1)


def is_distributed() -> bool:
    """Whether this process is one of a --distributed run."""
    return "distributed" in FLAGS and FLAGS.distributed


def is_writer() -> bool:
    """Whether this process writes files (always, unless it is not process 0 of a
    --distributed run)."""
    if "distributed" not in FLAGS or not FLAGS.distributed:
        return True
    from foltr_jax.core import multiprocess

    return multiprocess.is_writer()
