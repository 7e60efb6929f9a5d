"""experiments.claims and experiments/lib/claims: the claims' catalogue, the statistics of
their checks, every cell's check failing on a constructed counter-example, the table, and
(slow) the reduced set on the MSLR excerpt, which fails when one of its claims stops holding."""

import itertools
import json
import re

import numpy as np
import pytest
from binaries import call, load, run
from sample_data import REPO_ROOT, SAMPLE_DIR, needs_sample
from scipy import stats

from experiments.lib import claims as catalogue
from experiments.lib.claims import core, table
from experiments.lib.claims import runs as claim_runs


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
        assert "--n_runs=3" in argv and ("--eval_every=5" in argv) != every_round
        assert argv[-1] == f"--output_dir={out}"
        assert ("--fold_dir" in " ".join(argv)) == (out.parent.name != "synthetic")


# ------------------------------------------------------------------------------ statistics

HIGH = np.array([0.5, 0.52, 0.51, 0.53, 0.50])
LOW = np.array([0.3, 0.31, 0.29, 0.30, 0.32])


def test_above_needs_the_direction_and_significance():
    assert core.above(HIGH, LOW, "a", "b", paired=False).holds
    assert core.above(HIGH, LOW, "a", "b", paired=True).holds
    assert not core.above(LOW, HIGH, "a", "b", paired=False).holds
    assert not core.above(HIGH, HIGH - 1e-3 * np.arange(5), "a", "b", paired=False).holds
    verdict = core.above(HIGH, LOW, "a", "b", paired=False, effect=0.2)
    assert "power" in verdict.test and verdict.values == (HIGH.mean(), LOW.mean())


@pytest.mark.parametrize("paired", [True, False])
def test_equivalence_is_the_90_percent_interval_inside_the_margin(paired):
    """TOST at α = 0.05 holds exactly when SciPy's 90 % confidence interval of the difference
    lies inside ±margin (an independent computation of the same interval)."""
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
        got = core.equivalent(a, b, "a", "b", margin=margin, paired=paired).holds
        assert got == expected, (trial, ci, margin)


def test_no_difference_needs_the_runs_to_show_it():
    """An under-powered comparison (few runs, large spread) cannot pass as 'no difference':
    the old rule (|Δ| small or p ≥ 0.05) passed it; TOST does not."""
    rng = np.random.default_rng(1)
    a, b = rng.normal(0.3, 0.05, 3), rng.normal(0.3, 0.05, 3)
    assert core.above(a, b, "a", "b", paired=False).holds is False  # not significant either
    assert not core.equivalent(a, b, "a", "b", margin=0.01, paired=False).holds
    tight = np.array([0.300, 0.301, 0.299, 0.300, 0.300])
    assert core.equivalent(tight, tight + 0.001, "a", "b", margin=0.01, paired=False).holds


def test_not_above_passes_a_decrease_and_fails_a_gain_or_noise():
    first = np.array([0.30, 0.31, 0.30, 0.32, 0.31])
    assert core.not_above(first - 0.05, first, "last", "first", margin=0.01, paired=True).holds
    assert not core.not_above(first + 0.05, first, "l", "f", margin=0.01, paired=True).holds
    noisy = first + np.array([0.2, -0.2, 0.1, -0.1, 0.0])
    assert not core.not_above(noisy, first, "l", "f", margin=0.01, paired=True).holds


def test_power_matches_a_simulation():
    """The noncentral-t power of the two-tailed paired test against 20,000 simulated
    experiments with the same effect, spread and runs."""
    rng = np.random.default_rng(2)
    n, sd, effect = 5, 0.02, 0.025
    d = rng.normal(0, sd, n)
    d = (d - d.mean()) / d.std(ddof=1) * sd  # the observed spread is exactly sd
    computed = core.power(effect, d, np.zeros(n), paired=True)
    draws = rng.normal(effect, sd, (20000, n))
    p = stats.ttest_1samp(draws, 0.0, axis=1).pvalue
    assert abs(computed - np.mean(p < 0.05)) < 0.015


def test_ordered_needs_every_step_and_the_ends_apart():
    samples = [HIGH, (HIGH + LOW) / 2, LOW]
    assert core.ordered(samples, ["a", "b", "c"], paired=False).holds
    assert not core.ordered([HIGH, LOW, (HIGH + LOW) / 2], ["a", "b", "c"], paired=False).holds


# --------------------------------------------------------------- counter-examples for every cell


class CounterExample:
    """Results with no effect anywhere and spread everywhere: every lookup gives 3 runs whose
    values are a permutation of (0.25, 0.5, 0.75) around the same mean, exactly (so no mean is
    above another and paired differences have spread), and every curve rises by 0.01 a round
    (learning, where a claim says there is none).  Every cell's check must fail on it."""

    PERMUTATIONS = list(itertools.permutations([0.25, 0.5, 0.75]))

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
        verdict = cell.check(CounterExample())
        assert verdict.holds is False, (claim.key, cell.label, verdict)


# ----------------------------------------------------------------------------------- the table


def test_a_claim_without_results_is_not_run_and_the_table_says_so(tmp_path):
    rows = table.evaluate(catalogue.CLAIMS[:1], core.Results(tmp_path))
    assert rows[0]["holds"] is None
    assert rows[0]["cells"][0]["ours"].startswith("missing results")
    text = table.markdown(rows, "Claims", "nothing")
    assert "not run" in text and "0 of 1 claims hold" in text


def test_a_claim_holds_when_every_counted_cell_does_and_exceptions_do_not_count(tmp_path):
    holds, fails = core.Verdict("x", "t", np.bool_(True)), core.Verdict("y", "t", False)
    claim = core.Claim(
        "made_up", "Paper", "§1", "words", ("r",),
        (core.Cell("a", lambda r: holds, paper=(0.5,), paper_text="0.50"),
         core.Cell("b", lambda r: fails, exception="the paper's words")),
        "setting", "test",
    )  # fmt: skip
    (row,) = table.evaluate([claim], core.Results(tmp_path))
    assert row["holds"] is True and row["cells_held"] == 1 and row["cells_counted"] == 1
    assert json.loads(json.dumps(row))["holds"] is True  # np.bool_ written as JSON
    failing = core.Claim("f", "P", "§", "w", ("r",), (core.Cell("a", lambda r: fails),), "s")
    (row,) = table.evaluate([failing], core.Results(tmp_path), {"f": "more runs: no change"})
    assert row["holds"] is False
    assert "**Diagnosis.** more runs: no change" in table.markdown([row], "C", "d")


def test_the_papers_number_is_set_beside_ours_with_the_ratio(tmp_path):
    verdict = core.Verdict("x", "t", True, (0.30, 0.20))
    cell = core.Cell("perfect", lambda r: verdict, paper=(0.287, 0.215), paper_text="54.64")
    row = core.check_cell(cell, core.Results(tmp_path))
    assert row["our_values"] == [0.3, 0.2] and row["ratio"] == [1.045, 0.93]


def test_list_and_bad_requests(tmp_path):
    listed = call("claims", "--list")
    assert listed.returncode == 0, listed.stderr
    assert "fpdgd_table2" in listed.stdout and "cells: perfect, ε = 1.2" in listed.stdout
    for args, message in [
        (("--claims=nope",), "--claims: unknown claim(s) ['nope']"),
        (("--n_runs=1",), "--n_runs: must be at least 2"),
        ((f"--data_root={tmp_path / 'missing'}",), "no such folder"),
    ]:
        result = call("claims", *args, f"--results_dir={tmp_path / 'r'}")
        assert result.returncode == 2, result.stderr
        assert message in result.stderr


@needs_sample
@pytest.mark.slow
def test_reduced_claims_hold_on_the_mslr_excerpt(tmp_path):
    """The reduced claims (experiments.claims --reduced) on the MSLR excerpt: every claim in
    it must hold; a second invocation runs nothing again."""
    out = tmp_path / "claims"
    args = (f"--data_root={SAMPLE_DIR}", "--reduced", f"--results_dir={out}", "--jobs=2")
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


def test_a_diagnosis_rechecks_the_cells_with_its_runs_in_place():
    """recheck reads the diagnosis's runs where the claim's cells read the claim's own, and
    reports the cells that changed and those that still fail."""

    def check(r):
        return core.above(r.final("a"), r.final("b"), "a", "b", paired=False)

    cells = (core.Cell("few runs", check),)
    results = FixedResults({"a": [0.5, 0.1], "a_more": HIGH, "b": LOW})
    text = core.recheck(lambda: cells, {"a": "a_more"})(results)
    assert text.startswith("1 of 1 cells hold (the claim's own runs: 0 of 1)")
    assert "Now holding: few runs" in text
    text = core.recheck(lambda: cells, {"a": "b"})(results)
    assert text.startswith("0 of 1 cells hold") and "Still failing: few runs: a 0.304" in text


# ---------------------------------------------------------------------- the documentation's claims


def test_the_recorded_table_is_the_catalogues():
    """docs/claims.json (a full run, recorded with --write_docs) has every claim of the catalogue
    with the same words, setting and cells: a claim changed since needs the table run again."""
    from experiments.lib.claims import pages

    record = pages.read_record()
    rows = {r["claim"]: r for r in record["claims"]}
    assert list(rows) == [c.key for c in catalogue.CLAIMS]
    for claim in catalogue.CLAIMS:
        row = rows[claim.key]
        assert (row["words"], row["where"], row["setting"]) == (claim.words, claim.where, claim.setting)
        assert [c["cell"] for c in row["cells"]] == [c.label for c in claim.cells], claim.key
        assert [c["exception"] for c in row["cells"]] == [c.exception for c in claim.cells]
        assert row["holds"] == core.claim_holds(row["cells"])
        if row["holds"] is False:
            assert row.get("diagnosis"), f"{claim.key} does not hold and has no diagnosis"
    assert record["data"].startswith("MSLR-WEB10K excerpt") and record["n_runs"] >= 5


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
    assert f"{sum(r['holds'] is True for r in record['claims'])} of the claims table's" in readme


def test_norun_writes_the_table_from_what_the_folder_holds(tmp_path):
    """--norun runs nothing: on an empty folder every claim is 'not run', exit 0, and the
    table says it was read from earlier runs."""
    out = tmp_path / "r"
    result = run("claims", "--norun", "--claims=fpdgd_fig4", "--data_root=synthetic",
                 f"--results_dir={out}", timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    table = json.loads((out / "claims.json").read_text())
    assert table["ran"] is False and [r["holds"] for r in table["claims"]] == [None]
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
