"""``RunResult``: what ``engine.run`` returns for every method, the curves of every run slot
by name, with its cells and runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from foltr_jax.core import metrics


@dataclasses.dataclass
class RunResult:
    """What ``run`` returns for every method: the curves of every run slot, by name.

    A run holds ``n_cells`` cells (the settings of a grid, one by default), each repeated
    ``n_runs`` times; slot ``cell * n_runs + run`` is repetition ``run`` of cell ``cell``.
    ``curves`` maps a metric's name to its values per slot and round ``[n_slots, rounds]``
    (``by_cell`` gives them ``[n_cells, n_runs, rounds]``, ``cell`` one cell's curves);
    an offline metric (named in ``offline``) holds the columns of ``offline_rounds`` only
    (1-based; every round with ``eval_every`` = 1, else rounds K, 2K, ... and always the
    last, so ``[..., -1]`` is final).  ``initial`` maps each offline metric to its value
    [n_slots] for the models before round 1; ``extras`` holds what a method adds
    (FOLtR-ES's ε, FedIPS's propensities, an update history).  Every entry is also an
    attribute: ``result.offline_ndcg``, ``result.initial_offline_ndcg``,
    ``result.epsilon``.

    ``cells`` are the cells' descriptions (the ``Setting`` of each cell of
    ``run_fpdgd``; empty when a method runs one cell); ``n_runs`` the repetitions of each.

    Example::

        result = foltr_jax.run_fpdgd(config, train, test, [Setting(), Setting(aggregator="median")])
        result                                  # RunResult(2 cells x 3 runs, 30 rounds, ...)
        result.by_cell("offline_ndcg")[:, :, -1]  # final nDCG@10 [cells, runs]
        result.cell(1)["offline_ndcg"]          # the median cell's curves [runs, rounds]
    """

    curves: dict
    initial: dict
    final_params: Any
    compile_seconds: float
    run_seconds: float
    interactions: int
    offline_rounds: np.ndarray
    offline: tuple = ()
    extras: dict = dataclasses.field(default_factory=dict)
    cells: Sequence = ()  # a list for run_fpdgd and the replay
    n_runs: int = 0

    def __getattr__(self, name: str):
        fields = self.__dict__
        if name.startswith("__") or "curves" not in fields:
            raise AttributeError(name)
        if name in fields["curves"]:
            return fields["curves"][name]
        if name.startswith("initial_") and name[len("initial_") :] in fields["initial"]:
            return fields["initial"][name[len("initial_") :]]
        if name in fields["extras"]:
            return fields["extras"][name]
        raise AttributeError(f"{type(self).__name__} has no metric or field {name!r}")

    def __repr__(self) -> str:
        rounds = max((np.shape(v)[1] for v in self.curves.values() if np.ndim(v) > 1), default=0)
        runs = self.n_runs or self.n_slots
        return (
            f"{type(self).__name__}({self.n_cells} cell{'s' * (self.n_cells != 1)} x "
            f"{runs} run{'s' * (runs != 1)}, {rounds} rounds; curves: "
            f"{', '.join(self.curves)}; {self.interactions:,} interactions in "
            f"{self.run_seconds:.2f} s + {self.compile_seconds:.2f} s compiling)"
        )

    @property
    def metrics(self) -> dict:
        """The same mapping as ``curves`` (an older name, kept for callers)."""
        return self.curves

    @property
    def n_slots(self) -> int:
        """Run slots: ``n_cells * n_runs``."""
        for values in self.curves.values():
            return int(np.shape(values)[0])
        return 0

    @property
    def n_cells(self) -> int:
        """The cells of the run (the settings of a grid; 1 without one)."""
        if self.cells:
            return len(self.cells)
        return max(1, self.n_slots // self.n_runs) if self.n_runs else 1

    @property
    def online_performance(self) -> np.ndarray:
        """Σ_t γ^(t−1) online nDCG_t (thesis §2.2.1) of every slot, one number a slot [n_slots]."""
        return metrics.online_performance(self.curves["online_ndcg"])

    @property
    def interactions_per_second(self) -> float:
        return self.interactions / max(self.run_seconds, 1e-9)

    def by_cell(self, curve) -> np.ndarray:
        """A curve split by cell: ``[n_cells, n_runs, ...]``.

        Args:
            curve: a curve's name (``"offline_ndcg"``; ``"online_performance"`` and the
                ``extras`` too) or an array with one row per run slot.

        Returns:
            The values as ``[n_cells, n_runs]`` followed by the curve's other axes
            (rounds).
        """
        values = np.asarray(getattr(self, curve) if isinstance(curve, str) else curve)
        return values.reshape((self.n_cells, -1) + values.shape[1:])

    def cell(self, which) -> dict:
        """Every curve of one cell, ``[n_runs, rounds]`` each, by name.

        Args:
            which: the cell's index, or the cell itself (an element of ``cells``: with
                ``run_fpdgd`` the ``Setting`` it ran).
        """
        if isinstance(which, (int, np.integer)):
            index = int(which)
            if not -self.n_cells <= index < self.n_cells:
                raise IndexError(f"cell {index} of a run with {self.n_cells} cells")
        else:
            if which not in self.cells:
                raise KeyError(f"{which!r} is not one of the run's cells {list(self.cells)}")
            index = list(self.cells).index(which)
        return {name: self.by_cell(name)[index] for name in self.curves}

    def per_setting(self, values: np.ndarray, n_settings: int | None = None) -> np.ndarray:
        """Reshapes a per-slot array to [n_settings, n_runs, ...]; ``by_cell`` does the same
        without being told the count (``n_settings``, kept for callers that pass it)."""
        n = self.n_cells if n_settings is None else n_settings
        return np.asarray(values).reshape((n, -1) + np.shape(values)[1:])
