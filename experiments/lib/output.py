"""A binary's --output_dir: ``foltr_jax.engine.results_files``'s folder, checkpoints and
finished parts, with what the flags decide (--checkpoint, --distributed) and the code
version of the binaries; and the names of a grid's cells, checked against their flags."""

from __future__ import annotations

import pathlib

from absl import flags

from experiments.lib.cli import UserError
from experiments.lib.distributed import is_distributed, is_writer
from foltr_jax.core import files
from foltr_jax.engine import results_files

FLAGS = flags.FLAGS

EXPERIMENTS_DIR = pathlib.Path(__file__).resolve().parents[1]  # experiments/, the binaries and lib/


def code() -> str:
    """The code version finished parts are saved by: foltr_jax's and the binaries'."""
    return files.code_version(EXPERIMENTS_DIR, EXPERIMENTS_DIR / "lib")


class FinishedParts(results_files.FinishedParts):
    """``results_files.FinishedParts`` saved by the binaries' code version, its errors
    naming --output_dir."""

    def __init__(self, folder):
        super().__init__(folder, code(), "--output_dir")


class Output(results_files.Output):
    """``results_files.Output`` of a binary: ``checkpoints`` None: --checkpoint decides;
    no finished parts are kept in a --distributed run (the other processes cannot read
    them)."""

    def __init__(
        self, path, outputs=("results.json",), flag: str = "output_dir", checkpoints=None,
        below=None,
    ):  # fmt: skip
        super().__init__(path, outputs, f"--{flag}", checkpoints, below, code())

    @property
    def keeps_checkpoints(self) -> bool:
        if self.checkpoints is not None:
            return bool(self.checkpoints)
        return "checkpoint" in FLAGS and bool(FLAGS.checkpoint)

    @property
    def keeps_parts(self) -> bool:
        return self.keeps_checkpoints and not is_distributed()


def stop_cleanly(cells=(), n_runs: int = 1, what: str = "cell"):
    """``results_files.stop_cleanly`` of a binary: a checkpoint that cannot be saved names
    --checkpoint."""
    return results_files.stop_cleanly(cells, n_runs, what, checkpoint="--checkpoint")


def claim_output(outputs=("results.json",)):
    """``Output`` of --output_dir (OutputError naming the flag when it cannot be used,
    UserError when it is empty: never the current folder by accident); a
    ``ReadOnlyOutput`` on the processes of a --distributed run other than process 0."""
    if not FLAGS.output_dir.strip():
        raise UserError("--output_dir: empty; name the folder for the results")
    if not is_writer():
        return results_files.ReadOnlyOutput(FLAGS.output_dir, FLAGS.checkpoint)
    return Output(FLAGS.output_dir, outputs)


def unique_names(short, full, flag: str) -> list:
    """Names of a grid's cells, unique by construction: each cell's ``short`` name (e.g.
    values printed with ``:g``) where no other cell shares it, else its ``full`` name
    (values printed with ``repr``, which tells every two floats apart).  Two cells with
    the same full name are the same cell twice: UserError naming ``--flag``."""
    short, full = list(short), list(full)
    repeated = sorted({f for f in full if full.count(f) > 1})
    if repeated:
        raise UserError(f"--{flag}: the cell {repeated[0]} is asked for twice")
    names = [s if short.count(s) == 1 else f for s, f in zip(short, full)]
    return names if len(set(names)) == len(names) else full


def refuse_repeats(values, flag: str, same=None) -> None:
    """UserError naming ``--flag`` when a value of its list is given twice (as read: 1 and
    01 are one value; with ``same``, values whose ``same(value)`` are equal are one: a click
    model by what it is, so 'pbm:1' and 'pbm:1.0'): the same cell computed twice and written
    under two names.  A value ``same`` cannot read (ValueError) is compared as it is."""
    seen = {}
    for value in values:
        try:
            key = value if same is None else same(value)
        except ValueError:
            key = value
        if key in seen:
            spelled = "" if seen[key] == value else f" (as {seen[key]})"
            raise UserError(f"--{flag}: {value} is asked for twice{spelled}; name each value once")
        seen[key] = value
