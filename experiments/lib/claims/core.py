"""The claims table's machinery: reading the runs' results, the statistical checks, a claim
and its cells, the paper's numbers beside ours, and the diagnosis of a claim that fails.

A **claim** quotes a paper (its words, the section, the paper's own numbers) and lists its
**cells**: every setting the paper makes the claim for (click models, rankers, ε, m, n′, Δt,
γ, …).  Each cell has a check that reads the runs' results and returns a :class:`Verdict`
with one of four outcomes:

* *holds*: the finding shows, with its cause shown to act;
* *contradicted*: significantly the other way, or absent although the runs had the power
  (≥ POWER_WANTED) to show the paper's effect;
* *inconclusive*: the runs lack the power to tell (the verdict says how many runs would
  reach it), or a no-difference cell's factor was not shown to act;
* *not testable here*: the paper states it for data this run does not have; listed, not
  counted.

A claim's outcome combines its counted cells (:func:`combined`): the cells the paper itself
states as exceptions (``Cell.exception``) are checked and shown and do not count.  A
bookkeeping claim (``Claim.bookkeeping``: arithmetic of the run schedule that cannot fail)
is shown apart and not counted among the findings.

Statistics (``ALPHA`` = 0.05, SciPy's t-tests, paired where the runs share their random
streams, Welch otherwise):

* a difference the paper reports (:func:`above`, :func:`ordered` for every adjacent step):
  a one-sided test that the difference exceeds a **least effect** stated per claim from the
  paper (by default half the paper's size), not merely 0, with its power at the paper's size;
* a claim of no (or little) difference (:func:`equivalent`, :func:`not_above`): two
  one-sided tests against a margin stated per claim, **and a manipulation check** in the same
  cell showing that the factor the claim varies acted (:func:`acted`: the paired runs differ;
  or a positive control): without it the cell is inconclusive, never holds.

A claim that does not hold carries a :class:`Diagnosis`: the runs that change the one setting
suspected and what they showed; the driver runs them only when the claim fails.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
import warnings
from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats as scipy_stats

from experiments.lib import figures as report
from experiments.lib import statistics
from experiments.lib.paper_figures.pool import Pool

ALPHA = 0.05
POWER_WANTED = 0.8  # the power a test should have against the claim's effect size
MAX_RUNS = 200  # the most runs a setting is said to need for that power
HOLDS, CONTRADICTED, INCONCLUSIVE, NOT_TESTABLE = (
    "holds", "contradicted", "inconclusive", "not testable")  # fmt: skip
OUTCOMES = (HOLDS, CONTRADICTED, INCONCLUSIVE, NOT_TESTABLE)
ONLINE_GAMMA = 0.9995  # the discount of online performance (FPDGD paper eq. 17)


class MissingResults(Exception):
    """A run's results lack the Series a check needs."""


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One cell's outcome: our numbers in words, the test (with the direction it found),
    the outcome (one of OUTCOMES; None: results missing), and our values to set beside the
    paper's numbers (``values``, in the units of ``Cell.paper``).  A difference check states
    the least effect it had to exceed (``min_effect``), a no-difference check its
    manipulation check (``control``), an inconclusive one the runs per setting that would
    give it power POWER_WANTED (``runs_needed``; None: more than MAX_RUNS or not known)."""

    ours: str
    test: str
    outcome: str | None
    values: tuple = ()
    min_effect: float | None = None
    control: str = ""
    runs_needed: int | None = None

    def __post_init__(self):
        if self.outcome is not None and self.outcome not in OUTCOMES:
            raise ValueError(f"a verdict's outcome is one of {OUTCOMES}, got {self.outcome!r}")

    @property
    def holds(self) -> bool | None:
        return None if self.outcome is None else self.outcome == HOLDS


def discount_sum(rounds: int, gamma: float = ONLINE_GAMMA) -> float:
    """Σ_{t=1..T} γ^(t−1): online performance divided by it is the mean nDCG per round."""
    return float((1 - gamma**rounds) / (1 - gamma))


def paper_online(pairs, rounds: int, before: str = "", after: str = "") -> dict:
    """Cell(paper=..., paper_text=...) for a paper's online performance values, given as
    (label, value) pairs over ``rounds`` rounds: the values per round (over Σ γ^(t−1)), set
    beside ours, and the paper's values as it prints them."""
    per = discount_sum(rounds)
    printed = " vs ".join(f"{label}{value}" for label, value in pairs)
    per_round = " vs ".join(f"{value / per:.3f}" for _, value in pairs)
    return {"paper": tuple(round(value / per, 4) for _, value in pairs),
            "paper_text": f"{printed} ({before}per round {per_round}{after})"}  # fmt: skip


class Results:
    """The runs' results pooled over folds, read by run name, click model and fields.

    A run's values are its folds' runs, fold after fold in the order of the folds' names
    (``Pool``), so that two runs line up (fold, run) with (fold, run) for a paired test,
    and a Welch test sees the spread between folds as well as within them.  A run whose
    results lack one of its folds is missing (``MissingResults``), never pooled over fewer
    folds: its values would pair runs of different folds.  Its folds are those ``folds``
    names for it (the driver's commands: {run name: fold folders}), else those any run of
    its dataset has results in.

    Checks read runs through these methods only (``final``, ``online``, ``per_round``,
    ``curve``, ``initial``, ``after_interactions``, ``online_curve``, ``rounds``), so that a test can
    feed them constructed values (``tests/experiments/test_claims.py``).
    """

    def __init__(self, root, accept=None, folds=None):
        """``accept(path)``: whether a results file under ``root`` may be read (None: all);
        ``folds``: {run name: the fold folders it must have results in} (None: see above)."""
        root = pathlib.Path(root)
        try:
            paths = report.find_results(root)
        except report.ReportError:  # no results yet
            paths = []
        paths = [path for path in paths if accept is None or accept(path)]
        series = []
        for path in paths:  # a file it cannot read (an older format, damage) is named
            try:
                series += report.read_results(path, path.relative_to(root).as_posix())
            except report.ReportError as error:
                warnings.warn(f"{error}; the claims reading its runs find them missing")
        report.label_series(series)
        self.pool = Pool(series)
        self.expected = {run: set(names) for run, names in (folds or {}).items()}
        self.folds = {}  # dataset: the folds any of its runs has results in
        for pooled in self.pool.series:
            self.folds.setdefault(pooled.dataset, set()).update(pooled.fold_names)

    def series(self, run: str, panel=None, **fields):
        found = self.pool.find(run=run, panel=panel, **fields)
        if len(found) != 1:
            raise MissingResults(f"{run} {panel or ''} {fields}: {len(found)} series")
        wanted = self.expected.get(run) or self.folds[found[0].dataset]
        lacking = sorted(wanted - set(found[0].fold_names))
        if lacking:
            raise MissingResults(f"{run} {panel or ''} {fields}: no results in fold(s) "
                                 f"{', '.join(lacking)} (other runs have them)")  # fmt: skip
        return found[0]

    def final(self, run: str, panel=None, **fields) -> np.ndarray:
        """[runs] the final offline metric (nDCG@10; FedIPS: nDCG@5)."""
        return np.asarray(self.series(run, panel, **fields).final_offline_ndcg)

    def initial(self, run: str, panel=None, **fields) -> np.ndarray:
        """[runs] the initial model's offline metric."""
        values = self.series(run, panel, **fields).initial_offline_ndcg
        if values is None:
            raise MissingResults(f"{run}: no initial offline metric")
        return np.asarray(values)

    def online(self, run: str, panel=None, **fields) -> np.ndarray:
        """[runs] online performance Σ_t γ^(t−1)·nDCG_t."""
        values = self.series(run, panel, **fields).online_performance
        if values is None:
            raise MissingResults(f"{run}: no online performance")
        return np.asarray(values)

    def per_round(self, run: str, panel=None, **fields) -> np.ndarray:
        """[runs] online performance over Σ γ^(t−1): the discounted mean nDCG@10 of the lists
        shown per round, comparable across numbers of rounds (and with a paper's table)."""
        s = self.series(run, panel, **fields)
        if s.online_performance is None or s.online_ndcg is None:
            raise MissingResults(f"{run}: no online performance")
        return np.asarray(s.online_performance) / discount_sum(s.online_ndcg.shape[1])

    def online_curve(self, run: str, panel=None, metric: str = "ndcg", **fields) -> np.ndarray:
        """[runs, rounds] every round: nDCG@10 of the lists shown (``metric`` 'ndcg'), or
        the MaxRR of their clicks ('max_rr': the thesis's "mean batch MaxRR")."""
        values = getattr(self.series(run, panel, **fields), f"online_{metric}")
        if values is None:
            raise MissingResults(f"{run}: no online {metric} curve")
        return np.asarray(values)

    def curve(self, run: str, panel=None, **fields) -> np.ndarray:
        """[runs, 1 + evaluations] the offline curve, the initial model's value first."""
        s = self.series(run, panel, **fields)
        if s.offline_ndcg is None or s.initial_offline_ndcg is None:
            raise MissingResults(f"{run}: no offline curve")
        return np.column_stack([s.initial_offline_ndcg, s.offline_ndcg])

    def rounds(self, run: str, panel=None, **fields) -> int:
        """The run's last evaluated global update: the rounds it ran."""
        s = self.series(run, panel, **fields)
        if s.offline_ndcg is None:
            raise MissingResults(f"{run}: no offline curve")
        return int(report.curve_rounds(s, s.offline_ndcg)[-1])

    def after_interactions(self, run: str, interactions: int, panel=None, **fields):
        """[runs] offline nDCG@10 once ``interactions`` (|C|·B per round) are spent: after the
        last evaluated global update the budget covers, the initial model's before any."""
        s = self.series(run, panel, **fields)
        per_round = int(s.fields["n_clients"]) * int(s.fields["local_updates"])
        done = interactions // per_round
        rounds = report.curve_rounds(s, s.offline_ndcg)
        column = int(np.searchsorted(rounds, done, side="right")) - 1
        if column < 0:
            return np.asarray(s.initial_offline_ndcg)
        if rounds[column] != done:
            raise MissingResults(f"{run}: round {done} was not evaluated (--eval_every)")
        return np.asarray(s.offline_ndcg[:, column])


# ------------------------------------------------------------------------------ statistics


def ms(values, digits: int = 3) -> str:
    """'mean ± sd' over runs."""
    mean, sd, _ = statistics.summarise(values)
    return f"{mean:.{digits}f} ± {sd:.{digits}f}"


def _pair(a, b) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(a, float).ravel(), np.asarray(b, float).ravel()


def _no_spread(a, b, paired: bool) -> bool:
    """The runs' difference has no spread (identical values): SciPy's t is undefined there."""
    if paired:
        d = a - b
        return bool(np.all(d == d[0]))
    return bool(np.all(a == a[0]) and np.all(b == b[0]))


def p_greater(a, b, shift: float, *, paired: bool) -> float:
    """One-sided p-value of H1: mean(a) − mean(b) > ``shift`` (SciPy's paired t-test on
    a − b, or Welch's on a against b + shift).  Without spread: 0 when the difference is
    above ``shift``, else 1 (the limit of the test)."""
    a, b = _pair(a, b)
    if _no_spread(a, b, paired):
        return 0.0 if float(np.mean(a) - np.mean(b)) > shift else 1.0
    if paired:
        result = scipy_stats.ttest_1samp(a - b, shift, alternative="greater")
    else:
        result = scipy_stats.ttest_ind(a, b + shift, equal_var=False, alternative="greater")
    return float(result.pvalue)


def p_less(a, b, shift: float, *, paired: bool) -> float:
    """One-sided p-value of H1: mean(a) − mean(b) < ``shift`` (as :func:`p_greater`)."""
    return p_greater(b, a, -shift, paired=paired)


def spread(a, b, *, paired: bool) -> tuple[float, float]:
    """(standard error of mean(a) − mean(b), degrees of freedom), read off SciPy's 95 %
    confidence interval of the paired or Welch t-test; (0, n − 1 or n_a + n_b − 2) without
    spread."""
    a, b = _pair(a, b)
    if _no_spread(a, b, paired):
        return 0.0, float(a.size - 1 if paired else a.size + b.size - 2)
    if paired:
        result = scipy_stats.ttest_1samp(a - b, 0.0)
    else:
        result = scipy_stats.ttest_ind(a, b, equal_var=False)
    interval = result.confidence_interval(0.95)
    df = float(result.df)
    return float((interval.high - interval.low) / (2 * scipy_stats.t.ppf(0.975, df))), df


def _power_above(true_gap: float, bound: float, se: float, df: float) -> float:
    """P(the one-sided test of Δ > ``bound`` rejects at ALPHA) when Δ = ``true_gap``."""
    if se == 0:
        return 1.0 if true_gap > bound else 0.0
    critical = scipy_stats.t.ppf(1 - ALPHA, df)
    shift = (true_gap - bound) / se
    exact = float(scipy_stats.nct.sf(critical, df, shift))
    if not np.isfinite(exact):  # SciPy's noncentral t fails far in the tail
        exact = float(scipy_stats.norm.sf(critical - shift))
    return min(max(exact, 0.0), 1.0)


def _power_within(margin: float, se: float, df: float) -> float:
    """P(TOST shows |Δ| < ``margin`` at ALPHA) when the true Δ is 0."""
    if se == 0:
        return 1.0
    critical = scipy_stats.t.ppf(1 - ALPHA, df)
    return float(max(0.0, 2 * scipy_stats.t.cdf(margin / se - critical, df) - 1))


def power(effect: float, a, b, paired: bool, bound: float = 0.0) -> float:
    """The power of the one-sided t-test of mean(a) − mean(b) > ``bound`` at ALPHA when the
    true difference is ``effect``, with the runs and spread observed (noncentral t)."""
    se, df = spread(a, b, paired=paired)
    return _power_above(effect, bound, se, df)


def _runs_needed(a, paired: bool, power_at) -> int | None:
    """The fewest runs per setting whose power (``power_at(se, df)``) reaches POWER_WANTED,
    the spread per run as observed (se ∝ 1/√n); None beyond MAX_RUNS.  Power grows with the
    runs, so a bisection finds it."""
    n_now = np.asarray(a).size
    se_now, df_now = power_at.spread

    def enough(n: int) -> bool:
        se = se_now * math.sqrt(n_now / n)
        df = (n - 1) if paired else max(1.0, df_now * (n - 1) / max(n_now - 1, 1))
        return power_at(se, df) >= POWER_WANTED

    if not enough(MAX_RUNS):
        return None
    low, high = 1, MAX_RUNS  # enough(high), and not enough(low) (one run: no test)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle, high)
    return high


class _PowerAt:
    """power(se, df) of one test, with the spread observed (for :func:`_runs_needed`)."""

    def __init__(self, function, spread_now):
        self.function, self.spread = function, spread_now

    def __call__(self, se, df):
        return self.function(se, df)


def _needed_text(needed: int | None, now: int) -> str:
    if needed is None:
        return f"more than {MAX_RUNS} runs would be needed for power {POWER_WANTED}"
    return f"{needed} runs (now {now}) would give power {POWER_WANTED}"


def _gap_text(gap: float, name_a: str, name_b: str, digits: int) -> str:
    """The direction found, in words."""
    if gap > 0:
        return f"found {name_a} above {name_b} by {gap:.{digits}f}"
    if gap < 0:
        return f"found {name_a} below {name_b} by {-gap:.{digits}f}"
    return f"found {name_a} and {name_b} equal"


def _decide(p, p_against, against: str, strength, lacking: str, a, paired, power_at, text):
    """The verdict ladder of every test: *holds* when p < ALPHA; *contradicted* when the
    test the other way (``p_against``) is significant (``against``: what that means, in
    words) or when the runs had the power to show the claim and did not (``lacking``);
    *inconclusive* otherwise, with the runs that would give the power (``power_at``).
    Returns (outcome, text with the reason added, runs needed or None)."""
    if p < ALPHA:
        return HOLDS, text, None
    if p_against < ALPHA:
        return CONTRADICTED, text + f", {against} (p = {p_against:.2g})", None
    if strength >= POWER_WANTED:
        return CONTRADICTED, text + f", {lacking}", None
    needed = _runs_needed(a, paired, power_at)
    return INCONCLUSIVE, text + f"; {_needed_text(needed, np.asarray(a).size)}", needed


def above(
    a,
    b,
    name_a: str,
    name_b: str,
    *,
    paired: bool,
    effect: float,
    min_effect: float | None = None,
    digits: int = 3,
    what: str = "",
) -> Verdict:
    """A difference claim: mean(a) − mean(b) > ``min_effect``, one-sided t-test at ALPHA
    (paired or Welch).  ``effect``: the paper's size of the difference in our units;
    ``min_effect`` (default half of it): the least the difference must be shown to exceed.

    *holds*: shown above ``min_effect``; *contradicted*: significantly the other way, or not
    shown although the test had power ≥ POWER_WANTED at ``effect``; *inconclusive*:
    otherwise, with the runs that would give that power."""
    if not effect > 0:
        raise ValueError(f"above: the claim's effect must be positive, got {effect}")
    bound = effect / 2 if min_effect is None else min_effect
    if not 0 <= bound < effect:
        raise ValueError(f"above: min_effect must lie in [0, effect), got {bound} and {effect}")
    a, b = _pair(a, b)
    gap = float(np.mean(a) - np.mean(b))
    se, df = spread(a, b, paired=paired)
    p = p_greater(a, b, bound, paired=paired)
    p_reverse = p_less(a, b, 0.0, paired=paired)
    strength = _power_above(effect, bound, se, df)
    kind = "paired" if paired else "Welch"
    text = (f"{kind} one-sided t-test of Δ > {bound:.{digits}g} (the least effect; the claim's "
            f"Δ = {effect:.{digits}g}): p = {p:.2g}; power {strength:.2f} at Δ; "
            f"{_gap_text(gap, name_a, name_b, digits)}")  # fmt: skip
    outcome, text, needed = _decide(
        p, p_reverse, "significantly the other way", strength,
        "not above the least effect although the runs had the power to show Δ", a, paired,
        _PowerAt(lambda s, d: _power_above(effect, bound, s, d), (se, df)), text,
    )  # fmt: skip
    ours = f"{what}{name_a} {ms(a, digits)} vs {name_b} {ms(b, digits)}"
    return Verdict(ours, text, outcome, (float(np.mean(a)), float(np.mean(b))),
                   min_effect=bound, runs_needed=needed)  # fmt: skip


def _with_control(outcome: str, text: str, control: Verdict) -> tuple[str, str]:
    """A no-difference outcome given its manipulation check: it holds only when the check
    shows the factor acted; otherwise the cell is inconclusive."""
    if outcome == HOLDS and not control.holds:
        return INCONCLUSIVE, text + "; the factor was not shown to act, so this cannot hold"
    return outcome, text


def equivalent(
    a,
    b,
    name_a: str,
    name_b: str,
    *,
    margin: float,
    paired: bool,
    control: Verdict,
    digits: int = 3,
    what: str = "",
) -> Verdict:
    """A no-difference claim: two one-sided tests (TOST, SciPy's t-tests shifted by
    ±``margin``) at ALPHA that mean(a) − mean(b) lies within ±margin, i.e. the (1 − 2α)
    confidence interval inside it, and ``control`` (the manipulation check: the factor the
    claim varies acted) holds.

    *holds*: both; *contradicted*: the difference is significantly outside the margin, or
    not shown inside it although TOST had power ≥ POWER_WANTED (at Δ = 0); *inconclusive*:
    otherwise, or shown inside without the control."""
    a, b = _pair(a, b)
    gap = float(np.mean(a) - np.mean(b))
    se, df = spread(a, b, paired=paired)
    p = max(p_greater(a, b, -margin, paired=paired), p_less(a, b, margin, paired=paired))
    p_outside = min(p_greater(a, b, margin, paired=paired), p_less(a, b, -margin, paired=paired))
    half = scipy_stats.t.ppf(1 - ALPHA, df) * se if se else 0.0
    strength = _power_within(margin, se, df)
    kind = "paired TOST" if paired else "Welch TOST"
    text = (f"{kind}, margin ±{margin:g}: 90 % CI [{gap - half:+.{digits}f}, "
            f"{gap + half:+.{digits}f}], p = {p:.2g}; power {strength:.2f} at Δ = 0; "
            f"{_gap_text(gap, name_a, name_b, digits)}")  # fmt: skip
    outcome, text, needed = _decide(
        p, p_outside, "significantly outside the margin", strength,
        "not inside the margin with the power to show it", a, paired,
        _PowerAt(lambda s, d: _power_within(margin, s, d), (se, df)), text,
    )  # fmt: skip
    outcome, text = _with_control(outcome, text, control)
    ours = f"{what}{name_a} {ms(a, digits)} vs {name_b} {ms(b, digits)} (Δ = {gap:+.{digits}f})"
    return Verdict(ours, text, outcome, (float(np.mean(a)), float(np.mean(b))),
                   control=control_text(control), runs_needed=needed)  # fmt: skip


def not_above(
    a,
    b,
    name_a: str,
    name_b: str,
    *,
    margin: float,
    paired: bool,
    control: Verdict,
    digits: int = 3,
    what: str = "",
) -> Verdict:
    """a not meaningfully above b ("no learning"): a one-sided t-test at ALPHA that
    mean(a) − mean(b) < margin, and ``control`` (the manipulation check) holds.  A decrease
    passes.  *contradicted*: significantly above the margin, or not shown below it with power
    ≥ POWER_WANTED (at Δ = 0); *inconclusive* otherwise, or without the control."""
    a, b = _pair(a, b)
    gap = float(np.mean(a) - np.mean(b))
    se, df = spread(a, b, paired=paired)
    p = p_less(a, b, margin, paired=paired)
    p_over = p_greater(a, b, margin, paired=paired)
    high = gap + (scipy_stats.t.ppf(1 - ALPHA, df) * se if se else 0.0)
    strength = _power_above(margin, 0.0, se, df)  # −Δ > −margin at Δ = 0
    kind = "paired" if paired else "Welch"
    text = (f"{kind} one-sided t-test that Δ < {margin:g}: upper 95 % bound {high:+.{digits}f}, "
            f"p = {p:.2g}; power {strength:.2f} at Δ = 0; "
            f"{_gap_text(gap, name_a, name_b, digits)}")  # fmt: skip
    outcome, text, needed = _decide(
        p, p_over, "significantly above the margin", strength,
        "not below the margin with the power to show it", a, paired,
        _PowerAt(lambda s, d: _power_above(margin, 0.0, s, d), (se, df)), text,
    )  # fmt: skip
    outcome, text = _with_control(outcome, text, control)
    ours = f"{what}{name_a} {ms(a, digits)} vs {name_b} {ms(b, digits)} (Δ = {gap:+.{digits}f})"
    return Verdict(ours, text, outcome, (float(np.mean(a)), float(np.mean(b))),
                   control=control_text(control), runs_needed=needed)  # fmt: skip


def ordered(
    samples: Sequence, names: Sequence[str], *, paired: bool, effect: float,
    min_effect: float | None = None, what: str = "", digits: int = 3,
) -> Verdict:  # fmt: skip
    """samples[0] > samples[1] > …: every adjacent step an :func:`above` with the claim's
    ``effect`` and ``min_effect`` per step.  Holds when every step does; contradicted when one
    is; inconclusive otherwise."""
    steps = [
        above(x, y, n, m, paired=paired, effect=effect, min_effect=min_effect, digits=digits)
        for x, y, n, m in zip(samples, samples[1:], names, names[1:])
    ]
    outcome = combined(steps)
    ours = what + ", ".join(f"{n} {ms(s, digits)}" for n, s in zip(names, samples))
    test = "; ".join(f"{n} > {m}: {step.outcome} ({step.test})"
                     for step, n, m in zip(steps, names, names[1:]))  # fmt: skip
    needed = max((s.runs_needed or 0 for s in steps), default=0) or None
    means = tuple(float(np.mean(s)) for s in samples)
    return Verdict(ours, test, outcome, means, min_effect=steps[0].min_effect,
                   runs_needed=needed if outcome == INCONCLUSIVE else None)  # fmt: skip


def combined(verdicts: Sequence[Verdict]) -> str | None:
    """The outcome of checks that must all hold: missing if one is, contradicted if one is,
    holds if all do, inconclusive otherwise (not testable ones left out)."""
    outcomes = [v.outcome for v in verdicts if v.outcome != NOT_TESTABLE]
    if not outcomes:
        return NOT_TESTABLE
    if any(o is None for o in outcomes):
        return None
    if CONTRADICTED in outcomes:
        return CONTRADICTED
    if all(o == HOLDS for o in outcomes):
        return HOLDS
    return INCONCLUSIVE


def both(first: Verdict, second: Verdict) -> Verdict:
    """Two checks of one cell: holds when both do (:func:`combined`)."""
    needed = max(first.runs_needed or 0, second.runs_needed or 0) or None
    return Verdict(
        f"{first.ours}; {second.ours}",
        f"{first.test}; {second.test}",
        combined([first, second]),
        first.values + second.values,
        min_effect=first.min_effect if first.min_effect is not None else second.min_effect,
        control="; ".join(c for c in (first.control, second.control) if c),
        runs_needed=needed,
    )


# ------------------------------------------------------------------- manipulation checks

ACTED = 1e-4  # mean |Δ| between paired runs above which a factor moved the lists shown


def acted(a, b, factor: str, what: str = "the online nDCG@10 curves") -> Verdict:
    """The manipulation check of a no-difference claim with paired runs (the same seeds, the
    same queries and clicks until the factor acts): the factor acted when the paired runs'
    values differ, mean |Δ| > ACTED (runs where it did nothing are identical: float noise is
    below 1e-6).  ``a``, ``b``: [runs] or [runs, rounds]."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    width = min(a.shape[-1], b.shape[-1]) if a.ndim == 2 else None
    if width is not None:
        a, b = a[:, :width], b[:, :width]
    distance = float(np.mean(np.abs(a - b)))
    moved = distance > ACTED
    share = float(np.mean(np.abs(a - b) > ACTED))
    ours = (f"{factor} {'acted' if moved else 'did not act'}: {what} of the paired runs differ "
            f"by mean |Δ| = {distance:.2g} ({share:.0%} of values)")  # fmt: skip
    return Verdict(ours, f"mean |Δ| > {ACTED:g}", HOLDS if moved else CONTRADICTED)


def controls(*checks: Verdict) -> Verdict:
    """Several manipulation checks, all needed."""
    return Verdict("; ".join(c.ours for c in checks), "; ".join(c.test for c in checks),
                   HOLDS if all(c.holds for c in checks) else CONTRADICTED)  # fmt: skip


def control_text(control: Verdict) -> str:
    """A control as the table shows it: what it found and whether it passed."""
    return f"{'passed' if control.holds else 'FAILED'}: {control.ours}"


# ----------------------------------------------------------------------------- the claims


@dataclasses.dataclass(frozen=True)
class Cell:
    """One setting a claim is made for, with its check and the paper's number for it.

    ``paper``: the paper's values for the cell, in the units of the check's
    ``Verdict.values`` (converted where needed, e.g. online performance per round), with
    ``paper_text`` saying how the paper prints them; the table shows ours, the paper's and
    their ratio.  ``exception``: the paper states this cell as an exception to the claim (its
    words); it is checked and shown but does not count.  ``not_testable``: why this run
    cannot test the cell (the paper states it for data we do not have); it is listed with
    that reason, not checked and not counted."""

    label: str
    check: Callable[[Results], Verdict] | None
    paper: tuple = ()
    paper_text: str = ""
    exception: str = ""
    not_testable: str = ""


@dataclasses.dataclass(frozen=True)
class Diagnosis:
    """What a failing claim's cause is, shown by runs: ``runs`` change the one setting
    suspected (named in ``change``); ``explain`` reads them (and the claim's own runs) and
    says what they showed."""

    change: str
    runs: tuple
    explain: Callable[[Results], str]


@dataclasses.dataclass(frozen=True)
class Claim:
    key: str
    paper: str  # which of the five documents
    where: str  # section, figure or table
    words: str  # the claim, quoted from the paper ([...] marks cuts and insertions)
    runs: tuple  # names of the runs (the claims' run catalogue) it reads
    cells: tuple  # Cell, one per setting the paper makes the claim for
    setting: str  # ours, in short (what is scaled, and any departure, with why)
    statistic: str = ""  # the test, least effect or margin, and the control, in words
    reduced: bool = False  # in the reduced set (the slow tier's claims test)
    diagnosis: Diagnosis | None = None
    # arithmetic of the run schedule that cannot fail: shown apart, not counted as a finding
    bookkeeping: bool = False


class Renamed:
    """Results read with some runs replaced (a diagnosis's runs: the same setting with one
    thing changed), through the same readers.  ``names`` maps a run to the run read in its
    place, or to several runs pooled side by side (e.g. the claim's run and the same run with
    another seed: twice the runs)."""

    READERS = ("final", "initial", "online", "per_round", "online_curve", "curve",
               "after_interactions", "rounds")  # fmt: skip

    def __init__(self, results, names: dict):
        self.results, self.names = results, names

    def __getattr__(self, attribute):
        if attribute not in self.READERS:
            raise AttributeError(attribute)
        reader = getattr(self.results, attribute)

        def read(run, *args, **kwargs):
            names = self.names.get(run, run)
            if isinstance(names, str):
                return reader(names, *args, **kwargs)
            parts = [reader(name, *args, **kwargs) for name in names]
            if attribute == "rounds":
                return parts[0]
            if parts[0].ndim == 2:  # curves: as many columns as the shortest
                width = min(part.shape[1] for part in parts)
                parts = [part[:, :width] for part in parts]
            return np.concatenate(parts)

        return read


SHOWN = 8  # failing cells a diagnosis lists


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def recheck_text(cells: Sequence[Cell], results, names: dict, what: str = "") -> str:
    """The claim's counted cells checked on its own runs and with ``names``' runs in their
    place (:class:`Renamed`): how many hold each way, the cells that now hold, and those that
    still do not with their numbers and outcome (contradicted: the runs had the power to see
    the claim's difference; inconclusive: they had not)."""
    counted = [c for c in cells if not c.exception and not c.not_testable]
    before = [check_cell(c, results) for c in counted]
    after = [check_cell(c, Renamed(results, names)) for c in counted]
    checked = [a for a in after if a["verdict"] is not None]
    if not checked:  # the diagnosis's runs are not there: say so, not "0 of 0 cells hold"
        runs = {run for v in names.values() for run in (v if isinstance(v, tuple) else (v,))}
        raise MissingResults(f"no cell could be read with {', '.join(sorted(runs))}")
    held_before = sum(b["verdict"] == HOLDS for b in before)
    held_after = sum(a["verdict"] == HOLDS for a in checked)
    fixed = [a["cell"] for b, a in zip(before, after) if b["verdict"] != HOLDS
             and a["verdict"] == HOLDS]  # fmt: skip
    still = [a for a in checked if a["verdict"] != HOLDS]
    text = (f"{what + ': ' if what else ''}{held_after} of {len(checked)} cells hold (the "
            f"claim's own runs: {held_before} of {len(before)})")  # fmt: skip
    if len(checked) < len(after):
        text += f"; {len(after) - len(checked)} cell(s) not in the diagnosis runs"
    if fixed:
        text += f". Now holding: {', '.join(fixed)}"
    if still:
        contradicted = sum(a["verdict"] == CONTRADICTED for a in still)
        text += (f". Of the {len(still)} that do not, {contradicted} contradicted (the runs "
                 f"had the power to see the claim's difference), {len(still) - contradicted} "
                 "inconclusive")  # fmt: skip
        shown = still[:SHOWN]
        text += ". Not holding: " + "; ".join(
            f"{a['cell']}: {_short(a['ours'])} ({_short(a['test'], 120)})" for a in shown
        )
        if len(still) > len(shown):
            text += f"; and {len(still) - len(shown)} more"
    return text + "."


def recheck(cells, names: dict, what: str = "") -> Callable[[Results], str]:
    """A diagnosis's explanation (:func:`recheck_text`); ``cells``: the claim's cells, or a
    function giving them (a claim defined after its diagnosis)."""
    return lambda results: recheck_text(cells() if callable(cells) else cells, results, names, what)


def check_cell(cell: Cell, results: Results) -> dict:
    """The cell's row of the table: its verdict (one of OUTCOMES, None: results missing),
    ``holds`` (the verdict is 'holds'), our numbers, the test, the least effect or the
    control, the runs an inconclusive cell needs, and the paper's numbers beside ours."""
    if cell.not_testable:
        verdict = Verdict(f"not testable here: {cell.not_testable}", "", NOT_TESTABLE)
    else:
        try:
            verdict = cell.check(results)
        except MissingResults as error:
            verdict = Verdict(f"missing results ({error})", "", None)
    row = {"cell": cell.label, "ours": verdict.ours, "test": verdict.test,
           "verdict": verdict.outcome, "holds": verdict.holds,
           "exception": cell.exception, "paper": cell.paper_text}  # fmt: skip
    if verdict.min_effect is not None:
        row["min_effect"] = round(float(verdict.min_effect), 6)
    if verdict.control:
        row["control"] = verdict.control
    if verdict.outcome == INCONCLUSIVE:
        row["runs_needed"] = verdict.runs_needed
    if cell.paper and len(verdict.values) >= len(cell.paper):
        ours = verdict.values[: len(cell.paper)]
        row["paper_values"] = list(cell.paper)
        row["our_values"] = [round(v, 4) for v in ours]
        row["ratio"] = [round(o / p, 3) if p else None for o, p in zip(ours, cell.paper)]
    return row


def counted(cells: list[dict]) -> list[dict]:
    """The rows that count towards a claim's verdict: not the paper's exceptions."""
    return [c for c in cells if not c["exception"]]


def claim_verdict(cells: list[dict]) -> str | None:
    """The claim's outcome over its counted cells (:func:`combined`); None when one has no
    results."""
    return combined([Verdict("", "", c["verdict"]) for c in counted(cells)])


def claim_holds(cells: list[dict]) -> bool | None:
    """Every counted cell holds; None when one has no results."""
    verdict = claim_verdict(cells)
    return None if verdict is None else verdict == HOLDS
