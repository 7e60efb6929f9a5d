"""The poisoning and unlearning papers' claims: their own helpers (per-run slopes, pooled
diagnosis runs, the unlearning saving counted from the runs' rounds)."""

import numpy as np

from experiments.lib.claims import core, poisoning, unlearning
from tests.experiments.test_claims import FixedResults


def test_slope_is_each_runs_least_squares_slope():
    rng = np.random.default_rng(0)
    xs = (4, 3, 2, 1)
    samples = [rng.normal(size=6) for _ in xs]
    expected = [np.polyfit(xs, [s[r] for s in samples], 1)[0] for r in range(6)]
    np.testing.assert_allclose(unlearning.slope(samples, xs), expected)


class Rounds:
    """Results whose runs recorded ``replayed`` rounds for U(9H-1M) and ``trained`` for 9H-0M."""

    def __init__(self, replayed, trained):
        self.replayed, self.trained = replayed, trained

    def rounds(self, run, panel=None, method=None, **fields):
        return self.trained if method == "9H-0M" else self.replayed(fields["Δt"])


def test_the_saving_is_counted_from_the_rounds_the_runs_recorded():
    t = unlearning.ROUNDS
    for cell in unlearning.CLAIMS[-1].cells:
        assert cell.check(Rounds(lambda dt: -(-t // dt), t)).holds, cell.label
        # a replay that ran every stored round as many times as the training: no saving
        assert not cell.check(Rounds(lambda dt: t, t)).holds, cell.label


def test_a_diagnosis_pools_runs_and_reports_the_change():
    def check(r):
        return poisoning.above(r.final("a"), r.final("b"), "a", "b", paired=False, effect=0.1)

    cells = (poisoning.Cell("few runs", check),)
    more = [0.51, 0.52, 0.50, 0.49]
    results = FixedResults({"a": [0.50, 0.20], "a2": more, "b": [0.30] * 3 + [0.31] * 3})
    pooled = core.Renamed(results, {"a": ("a", "a2")})
    assert len(pooled.final("a")) == 6 and len(pooled.final("b")) == 6
    text = core.recheck(cells, {"a": ("a2",)}, "with more runs")(results)
    assert text.startswith("with more runs: 1 of 1 cells hold (the claim's own runs: 0 of 1)")
    assert "Now holding: few runs" in text
