"""The FedIPS claims' own checks on stand-in results: the choice of η_l on held-out queries,
the robustness cells' control, and the growth cells."""

import numpy as np
import pytest

from experiments.lib.claims import fedips as claims
from experiments.lib.recipes import fedips as recipes

RUNS = 5
SPREAD = np.array([0.000, 0.002, -0.001, 0.001, -0.002])  # per run, shared by paired runs


class Curves:
    """Results given as offline curves [runs, 1 + rounds] by run name; finals their last
    column (as core.Results reads them)."""

    def __init__(self, curves):
        self.curves = {name: np.asarray(c, float) for name, c in curves.items()}

    def curve(self, run, panel=None, **fields):
        return self.curves[run]

    def final(self, run, panel=None, **fields):
        return self.curves[run][:, -1]


def rising(start, end, rounds=10, wobble=0.0):
    """A curve per run from ``start`` after round 1 to ``end`` at the last round (column 0:
    the initial model's 0.1), the runs apart by SPREAD (+ ``wobble`` · round)."""
    t = np.arange(1, rounds + 1)
    body = start + (end - start) * (t - 1) / (rounds - 1) + wobble * t
    return np.column_stack([np.full(RUNS, 0.1), SPREAD[:, None] + body[None, :]])


def test_choose_lr_takes_the_best_mean_validation_value():
    finals = {1e-4: [0.20, 0.22], 1e-3: [0.30, 0.26], 1e-2: [0.29, 0.28], 1e-1: [0.1, 0.1]}
    assert recipes.choose_lr(finals) == 1e-2  # the best mean (0.285), not the best run's
    finals[1e-3] = [0.31, 0.29]
    assert recipes.choose_lr(finals) == 1e-3
    assert recipes.choose_lr({1e-3: [0.3], 1e-2: [0.3]}) == 1e-3  # a tie: the smaller step


def test_the_lr_choice_cell_holds_only_for_the_strictly_best_grid_value():
    cell = claims._lr_choice_cell("known", "FedIPS")
    used = recipes.LOCAL_LR["known"]

    def results(best):
        return Curves({recipes.lr_grid(lr, "known"): rising(0.2, 0.3 if lr == best else 0.25)
                       for lr in recipes.LR_GRID})  # fmt: skip

    assert cell.check(results(used)).holds
    other = next(lr for lr in recipes.LR_GRID if lr != used)
    verdict = cell.check(results(other))
    assert verdict.holds is False and f"best η_l = {other:g}" in verdict.ours
    tie = Curves({recipes.lr_grid(lr, "known"): rising(0.2, 0.3) for lr in recipes.LR_GRID})
    assert cell.check(tie).holds is False


def _gamma_runs(fedips_05, fedips_x, fedavg=None):
    fedavg = rising(0.25, 0.25) if fedavg is None else fedavg
    return Curves({recipes.g(0.5, "known"): fedips_05, recipes.g(1.0, "known"): fedips_x,
                   recipes.g(0.5, "none"): fedavg, recipes.g(1.0, "none"): fedavg})  # fmt: skip


def test_a_robustness_cell_holds_where_fedips_learns_and_gamma_acted():
    cell = claims._robust_cell(1.0)
    # FedIPS learns at both γ (0.25 after round 1 → 0.30, FedAvg flat at 0.25), the curves
    # differ along the way and end within the margin
    verdict = cell.check(_gamma_runs(rising(0.25, 0.30), rising(0.25, 0.30, wobble=0.0003)))
    assert verdict.holds, verdict


@pytest.mark.parametrize("why", ["identical curves", "not learning", "below FedAvg"])
def test_a_robustness_cell_is_inconclusive_without_its_control(why):
    cell = claims._robust_cell(1.0)
    if why == "identical curves":  # γ did nothing: equal curves prove no robustness
        results = _gamma_runs(rising(0.25, 0.30), rising(0.25, 0.30))
    elif why == "not learning":  # no better than after round 1
        results = _gamma_runs(rising(0.30, 0.30), rising(0.30, 0.30, wobble=0.0003))
    else:
        results = _gamma_runs(rising(0.25, 0.30), rising(0.25, 0.30, wobble=0.0003),
                              fedavg=rising(0.25, 0.31))  # fmt: skip
    verdict = cell.check(results)
    assert verdict.outcome == "inconclusive" and verdict.control.startswith("FAILED"), verdict
    assert "cannot hold" in verdict.test
    if why == "identical curves":
        assert "γ did not act" in verdict.control


def test_the_growth_cells_need_fedips_rising_in_the_second_half_and_fedavg_less():
    grows, tapers = claims._grows_cell(), claims._taper_cell()
    fedips, fedavg = recipes.g(1.0, "known"), recipes.g(1.0, "none")
    flat_late = rising(0.25, 0.25)
    flat_late[:, 1:3] -= 0.05  # FedAvg: up in the first rounds, then flat
    good = Curves({fedips: rising(0.25, 0.32), fedavg: flat_late})
    assert grows.check(good).holds and tapers.check(good).holds
    swapped = Curves({fedips: flat_late, fedavg: rising(0.25, 0.32)})
    assert grows.check(swapped).holds is False and tapers.check(swapped).holds is False
