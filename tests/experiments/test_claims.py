"""experiments.claims and experiments/lib/claims: the claims' catalogue, the statistics of
their checks, every cell's check failing on a constructed counter-example, the table, and
(slow) the reduced set on the MSLR excerpt, which fails when one of its claims stops holding."""

import itertools
import json
import re

import numpy as np
import pytest
from scipy import stats

from experiments.lib import claims as catalogue
from experiments.lib.claims import core, table
from experiments.lib.claims import runs as claim_runs
from tests.binaries import call, load, run
from tests.sample_data import REPO_ROOT, SAMPLE_DIR, needs_sample


def test_every_claim_quotes_its_paper_and_names_known_runs():
    keys = [c.key for c in catalogue.CLAIMS]
    assert len(keys) == len(set(keys)) and len(keys) >= 33
    for claim in catalogue.CLAIMS:
        assert claim.paper and claim.where and claim.words and claim.setting, claim.key
        assert claim.statistic, claim.key
        assert claim.cells and claim.runs, claim.key
        assert all(name in catalogue.RUNS for name in claim.runs), claim.key
        labels = [cell.label for cell in claim.cells]
        assert len(labels) == len(set(labels)), (claim.key, labels)
        assert not all(cell.exception for cell in claim.cells), claim.key
    assert {c.key for c in catalogue.CLAIMS if c.reduced} <= set(keys)


def test_claims_quote_the_papers_words():
    """The quoted words are the papers' own, between '[...]' cuts and '[...]' insertions
    (where the paper's text has a formula or a footnote), whitespace aside."""
    folder = REPO_ROOT.parent / "shared" / "papers"
    if not folder.is_dir():
        pytest.skip("the papers' texts are not beside the repository")
    text = " ".join(" ".join(p.read_text().split()) for p in folder.glob("*.txt"))
    for claim in catalogue.CLAIMS:
        for piece in re.split(r"\[[^\]]*\]", claim.words):
            piece = piece.strip()
            assert not piece or piece in text, (claim.key, piece)


def test_shared_runs_run_once_per_fold_and_own_data_runs_once(tmp_path):
    folds = [("Fold1", ("--fold_dir=/d/Fold1",)), ("Fold2", ("--fold_dir=/d/Fold2",))]
    names = catalogue.run_names(catalogue.CLAIMS)
    commands = claim_runs.commands(names, tmp_path, folds, n_runs=3, eval_every=5)
    folders = [out.relative_to(tmp_path).as_posix() for out, _ in commands]
    assert len(folders) == len(set(folders))
    for name in names:
        own = catalogue.RUNS[name].own_data
        expected = ["synthetic"] if own else ["Fold1", "Fold2"]
        assert [f.split("/")[0] for f in folders if f.split("/")[1] == name] == expected
    for out, argv in commands:
        every_round = catalogue.RUNS[out.name].every_round
        # a run of its own data runs once: as many runs in all as the others' 2 folds
        n_runs = 6 if catalogue.RUNS[out.name].own_data else 3
        assert f"--n_runs={n_runs}" in argv and ("--eval_every=5" in argv) != every_round
        assert argv[-1] == f"--output_dir={out}"
        assert ("--fold_dir" in " ".join(argv)) == (out.parent.name != "synthetic")


# ------------------------------------------------------------------------------ statistics

HIGH = np.array([0.5, 0.52, 0.51, 0.53, 0.50])
LOW = np.array([0.3, 0.31, 0.29, 0.30, 0.32])
ACTED = core.Verdict("the factor acted", "", core.HOLDS)  # a control that passed


def test_above_holds_only_above_the_least_effect():
    assert core.above(HIGH, LOW, "a", "b", paired=False, effect=0.2).outcome == core.HOLDS
    assert core.above(HIGH, LOW, "a", "b", paired=True, effect=0.2).outcome == core.HOLDS
    # significant (p far below 0.05 against 0) but below the least effect: does not hold
    small = HIGH - 0.01
    assert core.statistics.paired_t_test(HIGH, small).p < 1e-6
    verdict = core.above(HIGH, small, "a", "b", paired=True, effect=0.04)
    assert verdict.outcome != core.HOLDS and verdict.min_effect == 0.02
    # the least effect can be set apart from half the paper's effect
    assert core.above(HIGH, small, "a", "b", paired=True, effect=0.04,
                      min_effect=0.005).outcome == core.HOLDS  # fmt: skip
    verdict = core.above(HIGH, LOW, "a", "b", paired=False, effect=0.2)
    assert "power" in verdict.test and verdict.values == (HIGH.mean(), LOW.mean())
    assert "found a above b by 0.208" in verdict.test
    for bad in ({"effect": 0.0}, {"effect": 0.1, "min_effect": 0.1}):
        with pytest.raises(ValueError):
            core.above(HIGH, LOW, "a", "b", paired=False, **bad)


def test_a_reversed_difference_is_contradicted_and_says_its_direction():
    verdict = core.above(LOW, HIGH, "a", "b", paired=False, effect=0.05)
    assert verdict.outcome == core.CONTRADICTED
    assert "found a below b by 0.208" in verdict.test and "the other way" in verdict.test


def test_a_gap_below_the_least_effect_rarely_passes():
    """The old rule (a two-sided test against 0) passed a true gap of one spread 77 % of the
    time at 5 runs; against half the claim's effect (10 spreads here) it passes at most at
    the test's level."""
    rng = np.random.default_rng(3)
    passed = 0
    for _ in range(200):
        a, b = rng.normal(0.301, 0.001, 5), rng.normal(0.300, 0.001, 5)
        passed += core.above(a, b, "a", "b", paired=False, effect=0.02).holds
    assert passed / 200 <= 0.02


def test_an_under_powered_difference_is_inconclusive_and_names_the_runs_needed():
    """Few runs, large spread: neither shown nor refuted; the runs needed give the test power
    0.8 at the paper's effect in simulation (and one run fewer does not)."""
    rng = np.random.default_rng(4)
    sd, effect = 0.03, 0.04
    a = rng.normal(0.0, 1.0, 4)
    a = (a - a.mean()) / a.std(ddof=1) * sd + 0.32  # observed spread exactly sd
    b = np.full(4, 0.30)
    verdict = core.above(a, b, "a", "b", paired=True, effect=effect)
    assert verdict.outcome == core.INCONCLUSIVE
    n = verdict.runs_needed
    assert n is not None and n > 4 and f"{n} runs (now 4)" in verdict.test

    def simulated_power(runs):
        draws = rng.normal(effect, sd, (4000, runs))
        p = stats.ttest_1samp(draws, effect / 2, axis=1, alternative="greater").pvalue
        return np.mean(p < 0.05)

    assert simulated_power(n) >= 0.78 and simulated_power(n - 1) < 0.82


def test_power_matches_a_simulation():
    """The noncentral-t power of the one-sided paired test against a bound, against 20,000
    simulated experiments with the same effect, spread and runs."""
    rng = np.random.default_rng(2)
    n, sd, effect, bound = 5, 0.02, 0.04, 0.01
    d = rng.normal(0, sd, n)
    d = (d - d.mean()) / d.std(ddof=1) * sd  # the observed spread is exactly sd
    computed = core.power(effect, d, np.zeros(n), paired=True, bound=bound)
    draws = rng.normal(effect, sd, (20000, n))
    p = stats.ttest_1samp(draws, bound, axis=1, alternative="greater").pvalue
    assert abs(computed - np.mean(p < 0.05)) < 0.015


def test_the_one_sided_p_values_are_scipys():
    rng = np.random.default_rng(5)
    a, b = rng.normal(0.3, 0.01, 6), rng.normal(0.29, 0.02, 6)
    welch = stats.ttest_ind(a, b + 0.003, equal_var=False, alternative="greater").pvalue
    assert core.p_greater(a, b, 0.003, paired=False) == pytest.approx(welch, rel=1e-12)
    paired = stats.ttest_rel(a, b + 0.003, alternative="less").pvalue
    assert core.p_less(a, b, 0.003, paired=True) == pytest.approx(paired, rel=1e-12)
    # no spread: the limit of the test
    assert core.p_greater(np.full(3, 0.5), np.full(3, 0.4), 0.05, paired=False) == 0.0
    assert core.p_greater(np.full(3, 0.5), np.full(3, 0.4), 0.2, paired=True) == 1.0


@pytest.mark.parametrize("paired", [True, False])
def test_equivalence_is_the_90_percent_interval_inside_the_margin(paired):
    """TOST at α = 0.05 holds (its control passing) exactly when SciPy's 90 % confidence
    interval of the difference lies inside ±margin."""
    rng = np.random.default_rng(0)
    for trial in range(60):
        a = rng.normal(0.3, rng.uniform(0.001, 0.02), 5)
        b = a + rng.normal(rng.uniform(-0.02, 0.02), 0.005, 5)
        margin = rng.uniform(0.002, 0.03)
        if paired:
            ci = stats.ttest_rel(a, b).confidence_interval(confidence_level=0.9)
        else:
            ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.9)
        expected = -margin < ci.low and ci.high < margin
        got = core.equivalent(a, b, "a", "b", margin=margin, paired=paired, control=ACTED)
        assert got.holds == expected, (trial, ci, margin)
        if ci.low > margin or ci.high < -margin:
            assert got.outcome == core.CONTRADICTED


def test_identical_inputs_do_not_make_a_no_difference_claim_hold():
    """A factor that does nothing leaves the paired runs identical: equivalence is 'shown'
    with p = 0, and the manipulation check (the paired runs differ) fails, so the cell is
    inconclusive, never holds; the same with an acting factor holds."""
    curves = np.linspace(0.2, 0.4, 50)[None, :] + np.arange(5)[:, None] * 0.01
    finals = curves[:, -1]
    control = core.acted(curves, curves.copy(), "the privacy stage")
    assert control.outcome == core.CONTRADICTED and "did not act" in control.ours
    for check in (core.equivalent, core.not_above):
        verdict = check(finals, finals.copy(), "ε", "none", margin=0.01, paired=True,
                        control=control)  # fmt: skip
        assert verdict.outcome == core.INCONCLUSIVE, verdict
        assert "not shown to act" in verdict.test and verdict.control.startswith("FAILED")
    moved = curves + 0.002 * np.sin(np.arange(50))[None, :]
    control = core.acted(moved, curves, "the privacy stage")
    assert control.holds and "acted" in control.ours
    wobble = finals + np.array([0.001, -0.001, 0.0005, -0.0005, 0.0])
    verdict = core.equivalent(wobble, finals, "ε", "none", margin=0.01, paired=True,
                              control=control)  # fmt: skip
    assert verdict.outcome == core.HOLDS and verdict.control.startswith("passed")


def test_no_difference_needs_the_runs_to_show_it():
    """An under-powered comparison (few runs, large spread) cannot pass as 'no difference':
    TOST says inconclusive, with the runs it would need."""
    rng = np.random.default_rng(1)
    a, b = rng.normal(0.3, 0.05, 3), rng.normal(0.3, 0.05, 3)
    assert core.above(a, b, "a", "b", paired=False, effect=0.02).holds is False
    verdict = core.equivalent(a, b, "a", "b", margin=0.01, paired=False, control=ACTED)
    assert verdict.outcome == core.INCONCLUSIVE and verdict.runs_needed is None
    assert "more than 200 runs would be needed" in verdict.test
    tight = np.array([0.300, 0.301, 0.299, 0.300, 0.300])
    assert core.equivalent(tight, tight + 0.001, "a", "b", margin=0.01, paired=False,
                           control=ACTED).holds  # fmt: skip


def test_not_above_passes_a_decrease_and_fails_a_gain_or_noise():
    first = np.array([0.30, 0.31, 0.30, 0.32, 0.31])
    kw = {"margin": 0.01, "paired": True, "control": ACTED}
    assert core.not_above(first - 0.05, first, "last", "first", **kw).holds
    gain = core.not_above(first + 0.05, first, "l", "f", **kw)
    assert gain.outcome == core.CONTRADICTED and "significantly above the margin" in gain.test
    noisy = first + np.array([0.2, -0.2, 0.1, -0.1, 0.0])
    assert core.not_above(noisy, first, "l", "f", **kw).outcome == core.INCONCLUSIVE


def test_ordered_needs_every_adjacent_step():
    middle = (HIGH + LOW) / 2
    assert core.ordered([HIGH, middle, LOW], ["a", "b", "c"], paired=False,
                        effect=0.1).holds  # fmt: skip
    # a flat middle step: the ends are far apart, the step a > b is not there
    flat = core.ordered([HIGH, HIGH + 0.001, LOW], ["a", "b", "c"], paired=True, effect=0.1)
    assert not flat.holds and "a > b: contradicted" in flat.test
    swapped = core.ordered([HIGH, LOW, middle], ["a", "b", "c"], paired=False, effect=0.1)
    assert swapped.outcome == core.CONTRADICTED and "b > c: contradicted" in swapped.test


def test_outcomes_combine_as_the_weakest():
    v = {o: core.Verdict("", "", o) for o in core.OUTCOMES}
    assert core.combined([v["holds"], v["holds"]]) == core.HOLDS
    assert core.combined([v["holds"], v["inconclusive"]]) == core.INCONCLUSIVE
    assert core.combined([v["inconclusive"], v["contradicted"]]) == core.CONTRADICTED
    assert core.combined([v["holds"], v["not testable"]]) == core.HOLDS
    assert core.combined([v["not testable"]]) == core.NOT_TESTABLE
    assert core.combined([v["contradicted"], core.Verdict("", "", None)]) is None
    with pytest.raises(ValueError):
        core.Verdict("", "", True)


# --------------------------------------------------------------- counter-examples for every cell


class CounterExample:
    """Results with no effect anywhere and spread everywhere: every lookup gives 3 runs whose
    values are a permutation of (0.25, 0.5, 0.75) around the same mean, exactly (so no mean is
    above another and paired differences have spread), and every curve rises by 0.01 a round
    (learning, where a claim says there is none).  Every cell's check must fail on it."""

    PERMUTATIONS = tuple(itertools.permutations([0.25, 0.5, 0.75]))

    def __init__(self):
        self.calls = 0

    def _runs(self) -> np.ndarray:
        self.calls += 1
        return np.array(self.PERMUTATIONS[self.calls % len(self.PERMUTATIONS)])

    def final(self, run, panel=None, **fields):
        return self._runs()

    initial = online = per_round = final

    def after_interactions(self, run, interactions, panel=None, **fields):
        return self._runs()

    def online_curve(self, run, panel=None, metric="ndcg", **fields):
        return self._runs()[:, None] + 0.01 * (np.arange(2000) - 999.5)

    def curve(self, run, panel=None, **fields):
        return self._runs()[:, None] + 0.01 * (np.arange(61) - 30)

    def rounds(self, run, panel=None, **fields):
        self.calls += 1
        return 7 + self.calls  # no two runs ran rounds in the proportion a claim expects

    def series(self, *args, **kwargs):
        raise AssertionError("checks read results through core.Results' readers only")


@pytest.mark.parametrize("claim", catalogue.CLAIMS, ids=lambda c: c.key)
def test_every_cell_fails_on_a_counter_example(claim):
    for cell in claim.cells:
        if cell.not_testable:
            assert cell.check is None  # listed with its reason, never checked
            continue
        verdict = cell.check(CounterExample())
        assert verdict.holds is False, (claim.key, cell.label, verdict)


class Identical(CounterExample):
    """Results where no factor acted: every lookup gives the same runs (5 values with
    spread) and the same learning curves, as if privacy, the client plan, the remedy, the
    attack or the rule changed nothing.  A no-difference claim's equivalence is then 'shown'
    with p = 0; every cell must still not hold (its control finds that nothing acted)."""

    RUNS = np.array([0.30, 0.32, 0.31, 0.29, 0.33])

    def _runs(self) -> np.ndarray:
        return self.RUNS.copy()

    def online_curve(self, run, panel=None, metric="ndcg", **fields):
        return self.RUNS[:, None] + 0.0001 * np.arange(2000)

    def curve(self, run, panel=None, **fields):
        return self.RUNS[:, None] + 0.001 * np.arange(61)

    def rounds(self, run, panel=None, **fields):
        return 7  # no two runs ran rounds in the proportion a claim expects


@pytest.mark.parametrize("claim", catalogue.CLAIMS, ids=lambda c: c.key)
def test_no_cell_holds_when_nothing_acted(claim):
    for cell in claim.cells:
        if cell.check is None:
            continue
        verdict = cell.check(Identical())
        assert verdict.holds is False, (claim.key, cell.label, verdict)


# ----------------------------------------------------------------------------------- the table


def test_a_claim_without_results_is_not_run_and_the_table_says_so(tmp_path):
    rows = table.evaluate(catalogue.CLAIMS[:1], core.Results(tmp_path))
    assert rows[0]["verdict"] is None and rows[0]["holds"] is None
    assert rows[0]["cells"][0]["ours"].startswith("missing results")
    text = table.markdown(rows, "Claims", "nothing")
    assert "not run" in text and "**0 hold**" in text and "1 not run" in text


def _claim(key, *cells, **more):
    return core.Claim(key, "Paper", "§1", "words", ("r",), cells, "setting", "test", **more)


def test_a_claims_verdict_and_the_four_counts(tmp_path):
    """A claim holds when every counted cell does (the paper's exceptions shown, not
    counted); one contradicted cell makes it contradicted; not testable cells are listed
    and not counted; bookkeeping is counted apart."""
    verdicts = {o: core.Verdict(o, "t", o, min_effect=0.01) for o in core.OUTCOMES}

    def cell(label, outcome, **more):
        return core.Cell(label, lambda r, o=outcome: verdicts[o], **more)

    claims = [
        _claim("holding", cell("a", "holds", paper=(0.5,), paper_text="0.50"),
               cell("b", "contradicted", exception="the paper's words")),
        _claim("refuted", cell("a", "holds"), cell("b", "contradicted"), cell("c", "inconclusive")),
        _claim("unsure", cell("a", "holds"), cell("b", "inconclusive")),
        _claim("elsewhere", core.Cell("MQ2007", None, not_testable="MQ2007 only")),
        _claim("arithmetic", cell("a", "holds"), bookkeeping=True),
    ]  # fmt: skip
    rows = table.evaluate(claims, core.Results(tmp_path))
    by = {r["claim"]: r for r in rows}
    assert by["holding"]["verdict"] == "holds" and by["holding"]["cells_counted"] == 1
    assert json.loads(json.dumps(by["holding"]))["holds"] is True
    assert by["refuted"]["verdict"] == "contradicted" and by["unsure"]["verdict"] == "inconclusive"
    assert by["elsewhere"]["verdict"] == "not testable"
    assert by["elsewhere"]["cells"][0]["ours"] == "not testable here: MQ2007 only"
    assert by["holding"]["cells"][0]["min_effect"] == 0.01
    assert table.verdict_counts(rows) == {"holds": 1, "contradicted": 1, "inconclusive": 1,
                                          "not testable": 1}  # fmt: skip
    text = table.markdown(rows, "C", "d")
    assert ("of the 4 findings, **1 hold**, 1 contradicted, 1 inconclusive, 1 not testable "
            "here; and 1 of 1 bookkeeping check(s)") in text  # fmt: skip
    assert "Why these do not hold:" in text and "[refuted](#refuted)" in text
    (row,) = table.evaluate([claims[1]], core.Results(tmp_path), {"refuted": "more runs: no"})
    assert "**Diagnosis.** more runs: no" in table.markdown([row], "C", "d")


def test_the_papers_number_is_set_beside_ours_with_the_ratio(tmp_path):
    verdict = core.Verdict("x", "t", core.HOLDS, (0.30, 0.20))
    cell = core.Cell("perfect", lambda r: verdict, paper=(0.287, 0.215), paper_text="54.64")
    row = core.check_cell(cell, core.Results(tmp_path))
    assert row["our_values"] == [0.3, 0.2] and row["ratio"] == [1.045, 0.93]


def test_list_and_bad_requests(tmp_path):
    listed = call("claims", "--list")
    assert listed.returncode == 0, listed.stderr
    assert "fpdgd_table2" in listed.stdout and "cells: perfect, ε = 1.2" in listed.stdout
    for args, message in [
        (("--claims=nope",), "--claims: unknown claim(s) ['nope']"),
        (("--n_runs=1", "--folds=1"), "the t-tests need at least 2"),
        (("--folds=0",), "--folds: must be at least 1"),
        ((f"--data_root={tmp_path / 'missing'}",), "no such folder"),
    ]:
        result = call("claims", *args, f"--results_dir={tmp_path / 'r'}")
        assert result.returncode == 2, result.stderr
        assert message in result.stderr


@needs_sample
@pytest.mark.slow
def test_reduced_claims_hold_on_the_mslr_excerpt(tmp_path):
    """The reduced claims (experiments.claims --reduced) on the MSLR excerpt: every claim in
    it must hold; a second invocation runs nothing again.  On the excerpt's own split with 5
    runs, the setting its claims' least effects were stated for (the folds' pooling is
    tests/experiments/test_claims_folds.py's, and five folds would take five times as long)."""
    out = tmp_path / "claims"
    args = (f"--data_root={SAMPLE_DIR}", "--reduced", f"--results_dir={out}", "--jobs=2",
            "--folds=1", "--n_runs=5")  # fmt: skip
    first = run("claims", *args, cache_dir=tmp_path / "cache", timeout=3600)
    assert first.returncode == 0, first.stderr
    found = json.loads((out / "claims.json").read_text())
    assert found["data"].startswith("MSLR-WEB10K excerpt")
    failing = [(r["claim"], [c for c in r["cells"] if not c["holds"]])
               for r in found["claims"] if r["holds"] is not True]  # fmt: skip
    assert not failing, failing
    again = run("claims", *args, cache_dir=tmp_path / "cache", timeout=600)
    assert again.returncode == 0 and "runs done" not in again.stderr
    assert json.loads((out / "claims.json").read_text())["claims"] == found["claims"]


class FixedResults:
    """Results whose final values are given by run name."""

    def __init__(self, values):
        self.values = values

    def final(self, run, panel=None, **fields):
        return np.asarray(self.values[run])


def test_a_diagnosis_whose_runs_are_missing_says_so_not_zero_of_zero(tmp_path):
    """No cell readable with the diagnosis's runs: MissingResults (the table then says its
    runs are missing), never "0 of 0 cells hold"."""
    diagnosed = [c for c in catalogue.CLAIMS if c.diagnosis is not None]
    assert diagnosed
    for claim in diagnosed:
        with pytest.raises(core.MissingResults):
            claim.diagnosis.explain(core.Results(tmp_path))
    higher_p = next(c for c in diagnosed if c.key == "thesis_higher_p")  # a recheck
    with pytest.raises(core.MissingResults, match="^no cell could be read with thesis_es_"):
        higher_p.diagnosis.explain(core.Results(tmp_path))


def test_a_diagnosis_rechecks_the_cells_with_its_runs_in_place():
    """recheck reads the diagnosis's runs where the claim's cells read the claim's own, and
    reports the cells that changed and those that still fail."""

    def check(r):
        return core.above(r.final("a"), r.final("b"), "a", "b", paired=False, effect=0.1)

    cells = (core.Cell("few runs", check),)
    results = FixedResults({"a": [0.5, 0.1], "a_more": HIGH, "b": LOW})
    text = core.recheck(lambda: cells, {"a": "a_more"})(results)
    assert text.startswith("1 of 1 cells hold (the claim's own runs: 0 of 1)")
    assert "Now holding: few runs" in text
    text = core.recheck(lambda: cells, {"a": "b"})(results)
    assert text.startswith("0 of 1 cells hold") and "Not holding: few runs: a 0.304" in text
    assert "1 contradicted" in text


# ---------------------------------------------------------------------- the documentation's claims


def test_the_recorded_table_is_the_catalogues():
    """docs/claims.json (a full run, recorded with --write_docs) has every claim of the catalogue
    with the same words, setting and cells: a claim changed since needs the table run again."""
    from experiments.lib.claims import pages

    record = pages.read_record()
    rows = {r["claim"]: r for r in record["claims"]}
    undiagnosed = set()
    assert list(rows) == [c.key for c in catalogue.CLAIMS]
    for claim in catalogue.CLAIMS:
        row = rows[claim.key]
        assert (row["words"], row["where"], row["setting"]) == (
            claim.words,
            claim.where,
            claim.setting,
        )
        assert [c["cell"] for c in row["cells"]] == [c.label for c in claim.cells], claim.key
        assert [c["exception"] for c in row["cells"]] == [c.exception for c in claim.cells]
        assert row["verdict"] == core.claim_verdict(row["cells"])
        if row["verdict"] in ("contradicted", "inconclusive") and not row.get("diagnosis"):
            undiagnosed.add(claim.key)
    # held before the least effects were required and have no diagnosis run yet: named here,
    # so that the list can only shrink (the table says "no diagnosis run is defined")
    assert undiagnosed <= {"thesis_clients_50", "noniid_type1_remedies"}, undiagnosed
    runs_a_setting = record["n_runs"] * len(record.get("folds") or [1])  # folds: pooled
    assert record["data"].startswith("MSLR-WEB10K excerpt") and runs_a_setting >= 5


def test_the_pages_claims_are_generated_from_the_recorded_table():
    """The paper pages', reproduce.md's and README's claims blocks, and docs/claims.md, are
    what --write_docs makes of docs/claims.json: one source."""
    from experiments.lib.claims import pages

    record = pages.read_record()
    modules = catalogue.by_module()
    shown = []
    for path, block in pages.blocks(record, modules).items():
        text = (REPO_ROOT / path).read_text()
        assert pages.current(text, path) == block, f"{path}: run experiments.claims --write_docs"
        shown += re.findall(r"\[`([a-z0-9_]+)`\]", block) if path.startswith("docs/papers") else []
    assert sorted(shown) == sorted(c.key for c in catalogue.CLAIMS)  # each on its paper's page
    assert (REPO_ROOT / "docs" / "claims.md").read_text() == table.document(record)
    readme = (REPO_ROOT / "README.md").read_text()
    assert table.headline(record["claims"]) in readme


def test_norun_writes_the_table_from_what_the_folder_holds(tmp_path):
    """--norun runs nothing: on an empty folder every claim is 'not run', exit 0, and the
    table says it was read from earlier runs."""
    out = tmp_path / "r"
    result = run("claims", "--norun", "--claims=fpdgd_fig4", "--data_root=synthetic",
                 f"--results_dir={out}", timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    table = json.loads((out / "claims.json").read_text())
    assert table["ran"] is False and [r["verdict"] for r in table["claims"]] == [None]
    assert "read from runs made earlier (--norun)" in (out / "claims.md").read_text()
    assert not (out / "synthetic").exists()


def test_the_table_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    """claims.json and claims.md: both or neither.  A full disk at the second file leaves
    the earlier table whole and no temporary file; the binary says so in one line."""
    import errno
    import os

    from foltr_jax.core import files

    claims = load("claims")
    for name in ("claims.json", "claims.md"):
        (tmp_path / name).write_text(f"the earlier {name}")
    real_fsync, calls = os.fsync, []

    def full_at_second(fd):
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(files.os, "fsync", full_at_second)
    with pytest.raises(claims.UserError, match=(
        f"^--results_dir: cannot write claims.json and claims.md in {tmp_path} "
        r"\(No space left on device\); neither was written$"
    )):  # fmt: skip
        claims.write_table(tmp_path, "{}\n", "# table\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["claims.json", "claims.md"]
    for name in ("claims.json", "claims.md"):
        assert (tmp_path / name).read_text() == f"the earlier {name}"
    monkeypatch.setattr(files.os, "fsync", real_fsync)
    claims.write_table(tmp_path, "{}\n", "# table\n")
    assert (tmp_path / "claims.md").read_text() == "# table\n"

    def always_full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files.os, "fsync", always_full)
    out = tmp_path / "new"
    done = call("claims", "--norun", "--claims=fpdgd_fig4", "--data_root=synthetic",
                f"--results_dir={out}")  # fmt: skip
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()[-1:]
    assert line.startswith("claims: error: --results_dir: cannot write claims.json"), line
    assert "Traceback" not in done.stderr and list(out.iterdir()) == []


def test_a_results_file_the_claims_cannot_read_is_named(tmp_path):
    """An older format's results.json among the runs: a warning naming it (its runs count
    as missing), the other runs still read."""
    old = tmp_path / "synthetic" / "fpdgd_fig4" / "results.json"
    old.parent.mkdir(parents=True)
    old.write_text(json.dumps({"results_format": 1, "method": "fpdgd"}))
    with pytest.warns(UserWarning, match=f"^{old}: results format 1: written by an older"):
        results = core.Results(tmp_path)
    with pytest.raises(core.MissingResults, match="0 series"):
        results.series("fpdgd_fig4")


def test_an_inconclusive_claim_is_diagnosed_with_the_runs_its_cells_need(tmp_path):
    """--diagnose runs an inconclusive claim's runs again with the runs per setting its
    cells say would give power 0.8 (a run that already has as many is read as it is; more
    than POWER_CAP is said, not run), and writes each with its --n_runs."""
    fig4 = next(c for c in catalogue.CLAIMS if c.key == "fpdgd_fig4")
    rows = [{"claim": "fpdgd_fig4", "verdict": "inconclusive", "runs_needed": 12},
            {"claim": "fpdgd_table2", "verdict": "inconclusive", "runs_needed": 500},
            {"claim": "fpdgd_fig5", "verdict": "contradicted", "runs_needed": None}]  # fmt: skip
    power = claim_runs.power_runs(catalogue.CLAIMS, rows, n_runs=5)
    assert list(power) == ["fpdgd_fig4"]
    needed, variants = power["fpdgd_fig4"]
    # fpdgd_c10 and fpdgd_c100 already make 20 runs; fpdgd_c1000 the driver's 5
    assert needed == 12 and set(variants) == {"fpdgd_c1000"} and set(fig4.runs) > set(variants)
    ((folder, argv),) = claim_runs.commands(
        [v.name for v in variants.values()],
        tmp_path,
        [("f", ["--train_path=x"])],
        5,
        1,
        {v.name: v for v in variants.values()},
    )
    assert folder == tmp_path / "f" / "fpdgd_c1000_n12"
    assert argv.index("--n_runs=12") > argv.index("--n_runs=5")  # the variant's own wins
