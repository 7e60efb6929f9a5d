"""The part of every binary's ``main`` that is not the binary's own.

``main(program, run)`` gives absl's ``main``: quiet logs; extra arguments refused;
``--plugin`` code imported; ``--distributed`` joined (or refused in one line where the
binary does not run over several processes); ``run()`` called; a ``UserError`` printed
as one line ``<program>: error: ...`` (status 2), and so is a --distributed step that
failed (a peer died; status 1); the claimed output folder finished;
the result line printed by the process that writes, and its exit status.  An interrupt
(Ctrl-C) is one line too (``interrupted``): where the run was, where its checkpoint is and
that the same command continues from it; status 130.  ``parse_flags``
is every binary's absl flag parser: a flag absl itself refuses is one line too.  The tools
that run no simulation themselves (batch, claims, report, paper_budget) use it with
``distributed=None``: they have no --distributed flag.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable

import jax
from absl import flags

from experiments.lib import plugins, provenance, usage
from experiments.lib.cli import PROGRESS, UserError, command_starts, fail, quiet_logs
from experiments.lib.distributed import (
    end_after_failed_step,
    is_distributed,
    is_writer,
    refuse_distributed,
    start_distributed,
)
from foltr_jax.core import compile_cache
from foltr_jax.core.registry import PartError
from foltr_jax.engine import results_files
from foltr_jax.engine.results_files import OutputError

FLAGS = flags.FLAGS


OUT_OF_MEMORY = (
    "the run does not fit in memory ({}); ask for fewer clients (--n_clients, or "
    "--client_chunk), runs (--n_runs), cells or interactions per client (--local_updates)"
)


def provide_cpu_devices() -> None:
    """--n_devices=D in one process: give JAX's CPU backend D devices (``jax_num_cpu_devices``),
    so that on a CPU the lanes are sharded over D of its cores without XLA_FLAGS.  Left alone
    where the user's XLA_FLAGS sets the count, or where JAX's backends have already started
    (a binary called inside a test process).  On an accelerator the CPU devices are unused."""
    if "n_devices" not in FLAGS or FLAGS.n_devices <= 1:
        return
    if "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", ""):
        return
    try:
        jax.config.update("jax_num_cpu_devices", FLAGS.n_devices)
    except RuntimeError:  # backends already started: the devices they have are the devices
        pass


def early_values(argv: list, name: str) -> list:
    """The values of ``--name``, read before absl parses the flags (for --help, which absl
    acts on while parsing, and for flags that decide which flags exist) the way absl reads
    them: ``--name=V``, ``-name=V``, ``--name V`` and ``-name V``, in ``argv`` and in the
    flag files it names (``--flagfile``), up to a lone ``--``.  A flag file that cannot be
    read is a UserError naming it."""
    try:
        args = FLAGS.read_flags_from_files(list(argv), force_gnu=False)[1:]
    except flags.Error as error:
        raise UserError(f"--flagfile: {str(error).replace('ERROR:: ', '')}") from None
    values = []
    for i, arg in enumerate(args):
        if arg == "--":
            break
        for dashes in ("--", "-"):
            if arg.startswith(f"{dashes}{name}="):
                values.append(arg.split("=", 1)[1])
            elif arg == f"{dashes}{name}" and i + 1 < len(args):
                values.append(args[i + 1])
    return values


def print_help(program: str, argv: list, module=None) -> None:
    """--help: the binary's docstring, what the ``--plugin`` files on the command line
    register, and its flags by concern (``experiments.lib.usage``); status 0.  ``module``:
    the binary's module (None: ``__main__``, whose flags absl files under ``sys.argv[0]``)."""
    try:
        named = early_values(argv, "plugin") if "plugin" in FLAGS else []
        plugins.load(named)
    except UserError as error:
        fail(program, str(error))
    shown = FLAGS.get_key_flags_for_module(module.__name__ if module else sys.argv[0])
    doc = getattr(module or sys.modules.get("__main__"), "__doc__", "") or ""
    print(usage.render(doc, shown, plugins.registered()), end="")
    sys.exit(0)


def parse_flags(argv: list) -> list:
    """absl's flag parsing, for ``app.run(main, flags_parser=parse_flags)``: a flag absl
    refuses (unknown, or not of its type, e.g. ``--n_clients=abc``) is one line
    ``<program>: error: ...`` naming it, status 2, like every other bad flag (absl's own
    parser prints two lines and exits 1).  ``--help`` is ``print_help``'s."""
    program = os.path.splitext(os.path.basename(argv[0]))[0]
    try:
        if usage.asked(argv):
            print_help(program, argv)
        return FLAGS(argv)
    except flags.Error as error:
        fail(program, " ".join(str(error).split()))
    except KeyboardInterrupt:
        interrupted(program)


INTERRUPTED = 130  # the shell's status for a process ended by SIGINT (128 + 2)


def interrupt_message(program: str) -> str:
    """What an interrupt leaves, in one line: the round the run had reached (or a batch's
    runs done), where its checkpoint is, and what running the same command again does.
    Files are only ever replaced whole (``files.write_atomically``), so none is left
    half-written."""
    runs = PROGRESS.get("runs")
    if runs:
        done, total = runs
        return (
            f"interrupted with {done} of {total} run(s) done; the finished runs' results are "
            "kept and an interrupted run keeps its checkpoint; run the same command to continue"
        )
    rounds = PROGRESS.get("rounds")
    held = [claimed for claimed in results_files.CLAIMED if claimed.path.is_dir()]
    saved = [path for claimed in held for path in claimed.saved()]
    if rounds:
        label, done, total = rounds
        at = f"at round {done:,}/{total:,}" + (f" of {label}" if label != program else "")
    else:
        at = "before the first round" if held else ""
    at = f"interrupted {at}".rstrip()
    if saved:
        where = (
            f"the checkpoint is in {saved[0]}"
            if len(saved) == 1
            else f"the checkpoints are in {os.path.commonpath([str(p.parent) for p in saved])}"
        )
        return f"{at}; {where}; run the same command to continue"
    if held and not all(claimed.keeps_checkpoints for claimed in held):
        return f"{at}; no checkpoint is kept (--nocheckpoint); run the same command to start over"
    if rounds or held:
        return f"{at}; nothing was saved yet; run the same command to start again"
    return f"{at}; no file is left half-written; run the same command to start again"


def interrupted(program: str) -> None:
    """Prints ``<program>: interrupted ...`` (``interrupt_message``) and exits with 130; a
    claimed output folder is released on the way out (its lock; its checkpoints stay)."""
    print(f"{program}: {interrupt_message(program)}", file=sys.stderr, flush=True)
    sys.exit(INTERRUPTED)


def use_compile_cache() -> None:
    """--compile_cache given: JAX's persistent compilation cache goes there (or is off), for
    this process and, through $FOLTR_JAX_COMPILE_CACHE, the runs it starts (batch, claims,
    paper_budget); not given: the environment's or the default folder
    (``foltr_jax.core.compile_cache``)."""
    setting = FLAGS.compile_cache if "compile_cache" in FLAGS else ""
    if setting:
        chosen = (
            setting
            if setting.strip().lower() == compile_cache.OFF
            else os.path.abspath(os.path.expanduser(setting))
        )
        os.environ[compile_cache.ENV] = chosen
    compile_cache.configure(setting or None)


@dataclasses.dataclass
class Done:
    """What a run leaves: its claimed output folder (finished, i.e. released, once the run
    returns) and the line it prints last."""

    output: object = None  # experiments.lib.output.Output
    message: str = ""
    status: int = 0  # the exit status (a tool whose runs failed: 1)


def main(
    program: str,
    run: Callable[[], Done],
    *,
    distributed: bool | Callable[[], bool] | None = True,
    what: str = "",
) -> Callable:
    """absl's ``main`` for a binary whose own work is ``run``.  ``distributed``: whether it
    runs over several processes (a callable when that depends on the flags; None: it has
    no --distributed flag); ``what`` names it in the refusal."""

    def absl_main(argv):
        quiet_logs()
        command_starts()
        if len(argv) > 1:
            fail(program, f"unexpected arguments {argv[1:]}; flags look like --name=value")
        many = distributed() if callable(distributed) else distributed
        if many is False:
            refuse_distributed(program, what or f"experiments.{program}")
        provenance.start(program)
        use_compile_cache()
        try:
            plugins.load(FLAGS.plugin if "plugin" in FLAGS else [])
            if many:
                start_distributed(program)
            if not ("distributed" in FLAGS and FLAGS.distributed):
                provide_cpu_devices()
            done = run()
        except (UserError, OutputError, PartError) as error:
            fail(program, str(error))
        except MemoryError:
            fail(program, OUT_OF_MEMORY.format("the host's memory ran out"))
        except jax.errors.JaxRuntimeError as error:
            said = str(error).strip().splitlines()[0] if str(error).strip() else ""
            if said.startswith("RESOURCE_EXHAUSTED"):  # what the shapes' estimate let pass
                fail(program, OUT_OF_MEMORY.format(said))
            if not is_distributed():
                raise
            end_after_failed_step(program, error)  # a peer died: one line, not an abort
        except KeyboardInterrupt:
            interrupted(program)
        if done.output is not None:
            done.output.finish()
        if done.message and is_writer():
            print(done.message)
        if done.status:
            sys.exit(done.status)

    return absl_main
