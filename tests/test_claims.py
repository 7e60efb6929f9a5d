"""experiments.claims: the claims table's machinery, and (slow) a reduced check on the MSLR
excerpt that fails when one of its claims stops holding."""

import json
import re

import numpy as np
import pytest
from binaries import load, run
from sample_data import SAMPLE_DIR, needs_sample


def test_every_claim_quotes_its_paper_and_names_known_runs():
    claims = load("claims")

    papers = {claims.FPDGD, claims.POISONING, claims.UNLEARNING, claims.THESIS, claims.FEDIPS}
    keys = [c.key for c in claims.CLAIMS]
    assert len(keys) == len(set(keys))
    for claim in claims.CLAIMS:
        assert claim.paper in papers and claim.where and claim.words and claim.setting
        assert claim.runs and all(name in claims.RUNS for name in claim.runs), claim.key
    assert {c.key for c in claims.CLAIMS if c.reduced} <= set(keys)


def test_claims_quote_the_papers_words():
    """The quoted words are the papers' own, between '[...]' cuts and '[...]' insertions
    (where the paper's text has a formula or a footnote), whitespace aside."""
    claims = load("claims")
    from sample_data import REPO_ROOT

    folder = REPO_ROOT.parent / "shared" / "papers"
    if not folder.is_dir():
        pytest.skip("the papers are not at ../shared/papers")
    text = " ".join(" ".join(p.read_text().split()) for p in folder.glob("*.txt"))
    for claim in claims.CLAIMS:
        for piece in re.split(r"\[[^\]]*\]", claim.words):
            piece = piece.strip()
            assert not piece or piece in text, (claim.key, piece)


def test_shared_runs_run_once_per_fold_and_type1_once(tmp_path):
    claims = load("claims")

    folds = [("Fold1", ("--fold_dir=/d/Fold1",)), ("Fold2", ("--fold_dir=/d/Fold2",))]
    chosen = [c for c in claims.CLAIMS if c.key in ("fpdgd_table2", "fpdgd_fig4", "noniid_type1")]
    commands = claims.commands(chosen, tmp_path, folds, n_runs=3, eval_every=5)
    folders = [out.relative_to(tmp_path).as_posix() for out, _ in commands]
    assert len(folders) == len(set(folders))
    for fold in ("Fold1", "Fold2"):
        assert f"{fold}/fpdgd_c1000" in folders and f"{fold}/fpdgd_c10" in folders
    assert folders.count("synthetic/noniid_type1") == 1
    for out, argv in commands:
        every_round = out.name in claims.EVERY_ROUND  # Figures 5-6 read their early rounds
        assert "--n_runs=3" in argv and ("--eval_every=5" in argv) != every_round
        assert argv[-1] == f"--output_dir={out}"
        assert ("--fold_dir" in " ".join(argv)) == (out.parent.name != "synthetic")


def test_verdicts_need_significance_or_closeness():
    claims = load("claims")

    high, low = np.array([0.5, 0.52, 0.51, 0.53]), np.array([0.3, 0.31, 0.29, 0.3])
    assert claims.significantly_above(high, low, "a", "b").holds
    assert not claims.significantly_above(low, high, "a", "b").holds
    assert not claims.significantly_above(high, high + 1e-3 * np.arange(4), "a", "b").holds
    assert claims.close(high, high + 0.005, "a", "b", tolerance=0.01).holds
    assert not claims.close(high, low, "a", "b", tolerance=0.01).holds
    parts = [("x", claims.Verdict("1", "t", True)), ("y", claims.Verdict("2", "t", False))]
    both = claims.all_hold(parts)
    assert not both.holds and "y: t (fails)" in both.test


def test_list_and_bad_requests(tmp_path):
    listed = run("claims", "--list", timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert "fpdgd_table2" in listed.stdout and "unlearning_fig3" in listed.stdout
    for args, message in [
        (("--claims=nope",), "--claims: unknown claim(s) ['nope']"),
        (("--n_runs=1",), "--n_runs: must be at least 2"),
        ((f"--data_root={tmp_path / 'missing'}",), "no such folder"),
    ]:
        result = run("claims", *args, f"--results_dir={tmp_path / 'r'}", timeout=120)
        assert result.returncode == 2, result.stderr
        assert message in result.stderr


def test_a_claim_without_results_is_not_run_and_the_table_says_so(tmp_path):
    claims = load("claims")

    rows = claims.evaluate([claims.CLAIMS[0]], tmp_path)
    assert rows[0]["holds"] is None and rows[0]["ours"].startswith("missing results")
    text = claims.markdown(rows, "nothing")
    assert "not run" in text and "0 of 1 claims hold" in text


def test_the_table_is_plain_json_whatever_a_check_returns(tmp_path, monkeypatch):
    """A check may compute its verdict with NumPy (np.bool_): claims.json still writes."""
    claims = load("claims")

    claim = claims.dataclasses.replace(
        claims.CLAIMS[0], check=lambda r: claims.Verdict("x", "t", np.mean([1.0]) > 0)
    )
    (row,) = claims.evaluate([claim], tmp_path)
    assert row["holds"] is True and json.loads(json.dumps(row))["holds"] is True


@needs_sample
@pytest.mark.slow
def test_reduced_claims_hold_on_the_mslr_excerpt(tmp_path):
    """The reduced claims check (experiments.claims --reduced) on the MSLR excerpt: every
    claim in it must hold; a second invocation runs nothing again."""
    out = tmp_path / "claims"
    args = (f"--data_root={SAMPLE_DIR}", "--reduced", f"--results_dir={out}")
    first = run("claims", *args, cache_dir=tmp_path / "cache", timeout=3600)
    assert first.returncode == 0, first.stderr
    table = json.loads((out / "claims.json").read_text())
    assert table["data"].startswith("MSLR-WEB10K excerpt")
    rows = table["claims"]
    failing = [(r["claim"], r["ours"], r["test"]) for r in rows if r["holds"] is not True]
    assert not failing, failing
    again = run("claims", *args, cache_dir=tmp_path / "cache", timeout=600)
    assert again.returncode == 0 and "runs done" not in again.stderr
    assert json.loads((out / "claims.json").read_text())["claims"] == table["claims"]
