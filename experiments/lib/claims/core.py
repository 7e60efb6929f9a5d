"""The claims table's machinery: reading the runs' results, the statistical checks, a claim
and its cells, the paper's numbers beside ours, and the diagnosis of a claim that fails.

A **claim** quotes a paper (its words, the section, the paper's own numbers) and lists its
**cells**: every setting the paper makes the claim for (click models, rankers, ε, m, n′, Δt,
γ, …), with the paper's grid scaled in rounds and runs only.  Each cell has a check that
reads the runs' results and returns a :class:`Verdict`.  A claim holds when every cell holds,
except the cells the paper itself states as exceptions (``Cell.exception``): they are checked
and shown, and do not count.

Statistics (``ALPHA`` = 0.05, two-tailed):

* a difference the paper calls significant: a t-test, paired where the runs share their
  random streams (cells of one compiled grid: same seeds, same queries), Welch otherwise;
  its power against the effect size the claim states (``power``), so that a difference of
  the paper's size would show with the runs we have;
* a claim of no (or little) difference: two one-sided tests (TOST) against a margin stated
  per claim: the difference must be shown to lie within ±margin, so a test that lacks the
  runs to see a difference cannot pass;
* an ordering: the extremes significantly apart and the means in order.

A claim that does not hold carries a :class:`Diagnosis`: the runs that change the one setting
suspected and what they showed; the driver runs them only when the claim fails.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
import re
import warnings
from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats as scipy_stats

from experiments.lib import figures as report
from experiments.lib import statistics
from experiments.lib.paper_figures.pool import Pool

ALPHA = 0.05
POWER_WANTED = 0.8  # the power a test should have against the claim's effect size
ONLINE_GAMMA = 0.9995  # the discount of online performance (FPDGD paper eq. 17)


class MissingResults(Exception):
    """A run's results lack the Series a check needs."""


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One cell's outcome: our numbers in words, the test, whether it holds, and our values
    to set beside the paper's numbers (``values``, in the units of ``Cell.paper``)."""

    ours: str
    test: str
    holds: bool | None
    values: tuple = ()


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

    Checks read runs through these methods only (``final``, ``online``, ``per_round``,
    ``curve``, ``initial``, ``after_interactions``, ``online_curve``, ``rounds``), so that a test can
    feed them constructed values (``tests/test_claims_checks.py``).
    """

    def __init__(self, root, accept=None):
        """``accept(path)``: whether a results file under ``root`` may be read (None: all)."""
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

    def series(self, run: str, panel=None, **fields):
        found = self.pool.find(run=run, panel=panel, **fields)
        if len(found) != 1:
            raise MissingResults(f"{run} {panel or ''} {fields}: {len(found)} series")
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


def _standard_error(a, b, paired: bool) -> tuple[float, float]:
    """(standard error of mean(a) − mean(b), degrees of freedom): paired or Welch."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if paired:
        d = a - b
        return float(np.std(d, ddof=1) / math.sqrt(d.size)), float(d.size - 1)
    va, vb = np.var(a, ddof=1) / a.size, np.var(b, ddof=1) / b.size
    se = math.sqrt(va + vb)
    if va + vb == 0:
        return 0.0, float(a.size + b.size - 2)
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    return se, float(df)


def power(effect: float, a, b, paired: bool, alpha: float = ALPHA) -> float:
    """The two-tailed t-test's power to detect a true difference ``effect`` with the runs
    and spread observed: P(|T| > t_{1−α/2}) with T noncentral, δ = effect / standard error."""
    se, df = _standard_error(a, b, paired)
    if se == 0:
        return 1.0 if effect != 0 else 0.0
    critical = scipy_stats.t.ppf(1 - alpha / 2, df)
    shift = abs(effect) / se
    exact = scipy_stats.nct.sf(critical, df, shift) + scipy_stats.nct.cdf(-critical, df, shift)
    if not np.isfinite(exact):  # SciPy's noncentral t fails far in the tail: power is ~1
        exact = scipy_stats.norm.sf(critical - shift) + scipy_stats.norm.cdf(-critical - shift)
    return float(min(exact, 1.0))


def _test(a, b, paired: bool):
    if paired:
        return statistics.paired_t_test(a, b), "paired t-test"
    return statistics.t_test(a, b, equal_var=False), "Welch t-test"


def above(
    a,
    b,
    name_a: str,
    name_b: str,
    *,
    paired: bool,
    effect: float | None = None,
    digits: int = 3,
    what: str = "",
) -> Verdict:
    """a significantly above b: mean(a) > mean(b) and p < ALPHA (two-tailed).  ``effect``:
    the difference of interest (the paper's size, in our units): its power is stated."""
    test, kind = _test(a, b, paired)
    holds = bool(np.mean(a) > np.mean(b) and test.p < ALPHA)
    ours = f"{what}{name_a} {ms(a, digits)} vs {name_b} {ms(b, digits)}"
    text = f"{kind}, p = {test.p:.2g}"
    if effect is not None:
        text += f"; power {power(effect, a, b, paired):.2f} at Δ = {effect:.3g}"
    return Verdict(ours, text + f": {name_a} above", holds, (float(np.mean(a)), float(np.mean(b))))


def equivalent(
    a, b, name_a: str, name_b: str, *, margin: float, paired: bool, digits: int = 3, what: str = ""
) -> Verdict:
    """No meaningful difference: two one-sided tests (TOST) at ALPHA that mean(a) − mean(b)
    lies within ±margin, i.e. the (1 − 2α) confidence interval of the difference inside it.
    With too few runs or too much spread the interval is wide and the check fails."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    gap = float(np.mean(a) - np.mean(b))
    se, df = _standard_error(a, b, paired)
    if se == 0:
        p = 0.0 if abs(gap) < margin else 1.0
        low = high = gap
    else:
        p_lower = scipy_stats.t.sf((gap + margin) / se, df)  # H0: gap ≤ −margin
        p_upper = scipy_stats.t.cdf((gap - margin) / se, df)  # H0: gap ≥ +margin
        p = float(max(p_lower, p_upper))
        half = scipy_stats.t.ppf(1 - ALPHA, df) * se
        low, high = gap - half, gap + half
    holds = bool(p < ALPHA)
    ours = f"{what}{name_a} {ms(a, digits)} vs {name_b} {ms(b, digits)} (Δ = {gap:+.{digits}f})"
    kind = "paired TOST" if paired else "Welch TOST"
    text = f"{kind}, margin ±{margin:g}: 90 % CI [{low:+.{digits}f}, {high:+.{digits}f}], p = {p:.2g}"
    return Verdict(ours, text, holds, (float(np.mean(a)), float(np.mean(b))))


def not_above(
    a, b, name_a: str, name_b: str, *, margin: float, paired: bool, digits: int = 3,
    what: str = "",
) -> Verdict:  # fmt: skip
    """a not meaningfully above b ("no learning"): a one-sided t-test at ALPHA that
    mean(a) − mean(b) < margin, i.e. the upper end of the (1 − 2α) interval below the margin.
    A decrease passes; too few runs or too much spread fail."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    gap = float(np.mean(a) - np.mean(b))
    se, df = _standard_error(a, b, paired)
    if se == 0:
        p, high = (0.0 if gap < margin else 1.0), gap
    else:
        p = float(scipy_stats.t.cdf((gap - margin) / se, df))  # H0: gap ≥ margin
        high = gap + scipy_stats.t.ppf(1 - ALPHA, df) * se
    ours = f"{what}{name_a} {ms(a, digits)} vs {name_b} {ms(b, digits)} (Δ = {gap:+.{digits}f})"
    kind = "paired" if paired else "Welch"
    text = (f"{kind} one-sided t-test that Δ < {margin:g}: upper 95 % bound {high:+.{digits}f}, "
            f"p = {p:.2g}")  # fmt: skip
    return Verdict(ours, text, bool(p < ALPHA), (float(np.mean(a)), float(np.mean(b))))


def ordered(
    samples: Sequence, names: Sequence[str], *, paired: bool, effect: float | None = None,
    what: str = "", digits: int = 3,
) -> Verdict:  # fmt: skip
    """samples[0] > samples[1] > … in mean, and the first significantly above the last."""
    means = [float(np.mean(s)) for s in samples]
    in_order = all(x > y for x, y in zip(means, means[1:]))
    ends = above(samples[0], samples[-1], names[0], names[-1], paired=paired, effect=effect)
    ours = what + ", ".join(f"{n} {ms(s, digits)}" for n, s in zip(names, samples))
    test = (f"means in the order {' > '.join(names)}: {'yes' if in_order else 'no'}; "
            f"ends: {ends.test}")  # fmt: skip
    return Verdict(ours, test, bool(in_order and ends.holds), tuple(means))


def both(first: Verdict, second: Verdict) -> Verdict:
    """Two checks of one cell: holds when both do."""
    return Verdict(
        f"{first.ours}; {second.ours}",
        f"{first.test}; {second.test}",
        bool(first.holds and second.holds),
        first.values + second.values,
    )


# ----------------------------------------------------------------------------- the claims


@dataclasses.dataclass(frozen=True)
class Cell:
    """One setting a claim is made for, with its check and the paper's number for it.

    ``paper``: the paper's values for the cell, in the units of the check's
    ``Verdict.values`` (converted where needed, e.g. online performance per round), with
    ``paper_text`` saying how the paper prints them; the table shows ours, the paper's and
    their ratio.  ``exception``: the paper states this cell as an exception to the claim (its
    words); it is checked and shown but does not count."""

    label: str
    check: Callable[[Results], Verdict]
    paper: tuple = ()
    paper_text: str = ""
    exception: str = ""


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
    setting: str  # ours, in short (scaled rounds and runs, and any departure, with why)
    statistic: str = ""  # the test, margin or effect size, in words
    reduced: bool = False  # in the reduced set (the slow tier's claims test)
    diagnosis: Diagnosis | None = None


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
    still fail with their numbers and whether their tests had the power to see the claim's
    difference."""
    counted = [c for c in cells if not c.exception]
    before = [check_cell(c, results) for c in counted]
    after = [check_cell(c, Renamed(results, names)) for c in counted]
    checked = [a for a in after if a["holds"] is not None]
    held_before = sum(b["holds"] is True for b in before)
    held_after = sum(a["holds"] is True for a in checked)
    fixed = [a["cell"] for b, a in zip(before, after) if b["holds"] is False and a["holds"]]
    still = [a for a in checked if a["holds"] is False]
    text = (f"{what + ': ' if what else ''}{held_after} of {len(checked)} cells hold (the "
            f"claim's own runs: {held_before} of {len(before)})")  # fmt: skip
    if len(checked) < len(after):
        text += f"; {len(after) - len(checked)} cell(s) not in the diagnosis runs"
    if fixed:
        text += f". Now holding: {', '.join(fixed)}"
    if still:
        powers = [min(map(float, re.findall(r"power (\d\.\d+)", a["test"])), default=None)
                  for a in still]  # fmt: skip
        known = [x for x in powers if x is not None]
        if known:
            strong = sum(x >= POWER_WANTED for x in known)
            text += (f". Of the {len(still)} still failing, {strong} had power ≥ {POWER_WANTED} "
                     "at the claim's Δ (a difference of that size would have shown)")  # fmt: skip
        shown = still[:SHOWN]
        text += ". Still failing: " + "; ".join(
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
    try:
        verdict = cell.check(results)
    except MissingResults as error:
        verdict = Verdict(f"missing results ({error})", "", None)
    row = {"cell": cell.label, "ours": verdict.ours, "test": verdict.test,
           "holds": None if verdict.holds is None else bool(verdict.holds),
           "exception": cell.exception, "paper": cell.paper_text}  # fmt: skip
    if cell.paper and len(verdict.values) >= len(cell.paper):
        ours = verdict.values[: len(cell.paper)]
        row["paper_values"] = list(cell.paper)
        row["our_values"] = [round(v, 4) for v in ours]
        row["ratio"] = [round(o / p, 3) if p else None for o, p in zip(ours, cell.paper)]
    return row


def claim_holds(cells: list[dict]) -> bool | None:
    """Every cell that is not a stated exception holds; None when one has no results."""
    counted = [c for c in cells if not c["exception"]]
    if any(c["holds"] is None for c in counted):
        return None
    return all(c["holds"] for c in counted)
