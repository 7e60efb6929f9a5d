r"""The papers' headline claims, checked in one command on real data.

  python -m experiments.claims                       # the MSLR excerpt (fetched when absent)
  python -m experiments.claims --eval_every=10       # faster: offline metrics every 10 rounds
  python -m experiments.claims --data_root=/data/MSLR-WEB10K --n_runs=5
  python -m experiments.claims --claims=fpdgd_table2,poisoning_lie   # some claims only
  python -m experiments.claims --list

Each claim quotes its paper (the claim in the paper's words, where it is, the paper's
numbers), names the runs that measure it (the experiment binaries with small settings,
stated in the table) and a check that reads their results: ours as mean ± sd over runs
(pooled over folds), the statistical test used, and whether the claim holds.  The table
is printed and written to <results_dir>/claims.md and claims.json.

Runs shared by several claims run once.  Every run writes
<results_dir>/<fold>/<run>/results.json; a run whose results exist is not run again, and
an interrupted run resumes from its checkpoint (the binaries' --checkpoint), so the same
command after a kill continues where it stopped.  --data_root takes a LETOR dataset
(Fold1/ ... or train.txt + test.txt; every fold is run and pooled); without it the MSLR
excerpt (43 + 43 queries, experiments/lib/runs.py) is used and fetched when absent.
Non-IID Type 1 runs on synthetic intents whatever the data (the thesis's intent-change
collection is not a LETOR fold).  --eval_every=K evaluates the test split after every
K-th round only (the checks read final values; the runs Figures 5 and 6 read early are
evaluated every round regardless, EVERY_ROUND).

The settings are the papers' scaled down to minutes per run on two CPU cores (fewer
rounds; Table 'settings' in claims.md); where a claim is about a difference the papers
found significant, ours must be significant too (two-tailed t-test, p < 0.05; paired where
the runs share their random streams); where the papers found no (or a minimal)
difference, ours must be small (stated per claim).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import sys
import time
from collections.abc import Callable

import numpy as np
from absl import app, flags

from experiments import common
from experiments.lib import program, runs

common.need_report_extra("claims")  # the t-tests and figures: scipy, matplotlib
from experiments.lib import figures as report  # noqa: E402
from experiments.lib import statistics  # noqa: E402
from experiments.lib.paper_figures.fpdgd import (  # noqa: E402
    interactions_per_round,
    ndcg_after_interactions,
)
from experiments.lib.paper_figures.pool import Pool  # noqa: E402
from experiments.lib.paper_figures.summary import markdown_cell  # noqa: E402
from experiments.lib.recipes import Run  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string(
    "data_root",
    "",
    "LETOR dataset (Fold*/ or train.txt + test.txt); empty: the MSLR excerpt, fetched by "
    "third_party/mslr_sample/fetch.py when absent; 'synthetic': the synthetic dataset.",
)
flags.DEFINE_string("results_dir", "results/claims", "Where the runs and the table go.")
flags.DEFINE_list("claims", [], "Claims to check (see --list); empty: all of them.")
flags.DEFINE_bool("reduced", False, "Only the reduced set (the CI's claims, a few minutes).")
flags.DEFINE_bool("list", False, "List the claims and their runs, and exit.")
flags.DEFINE_integer("n_runs", 5, "Repetitions per run and fold (at least 2: the t-tests).")
flags.DEFINE_integer("eval_every", 1, "Offline metrics every K rounds (and the last).")
flags.DEFINE_integer("jobs", 1, "Runs at a time (one process each).")

ALPHA = 0.05
CLICKS = ("perfect", "navigational", "informational")


def _f(**values) -> tuple:
    return tuple(f"--{k}={v}" for k, v in values.items())


# ------------------------------------------------------------------------------------ runs

FPDGD_ROUNDS = 50  # T of the FPDGD-paper runs (its MSLR setting: 200)
POISONING_ROUNDS = 300  # the poisoning paper: 10,000
UNLEARNING_ROUNDS = 300  # the unlearning paper: 10,000
NONIID_ROUNDS = 500  # the thesis: 10,000
FEDIPS_ROUNDS = 100  # the FedIPS paper's figures: 500
ALL_CLICKS = _f(click_models=",".join(CLICKS))
RUNS = {
    run.name: run
    for run in (
        # FPDGD paper: |C| = 1,000, B = 2, with and without DP (ε = 4.5, Δ = 5)
        Run(
            "fpdgd_c1000",
            "fpdgd",
            ALL_CLICKS + _f(n_clients=1000, local_updates=2, rounds=FPDGD_ROUNDS)
            + _f(privacy_grid="none,4.5:5"),
        ),
        Run(
            "fpdgd_c10",
            "fpdgd",
            ALL_CLICKS + _f(n_clients=10, local_updates=2, rounds=FPDGD_ROUNDS)
            + _f(privacy_grid="none,4.5:5"),
        ),
        # Figures 5 and 6 (perfect clicks, DP): B = 4 and 8; B = 2 is fpdgd_c1000's cell
        *(
            Run(
                f"fpdgd_b{b}",
                "fpdgd",
                _f(click_models="perfect", n_clients=1000, local_updates=b, rounds=FPDGD_ROUNDS)
                + _f(privacy_grid="4.5:5"),
            )
            for b in (4, 8)
        ),
        # FOLtR-ES as in the FPDGD paper's comparison (linear, lr 0.001, p = 0.9 ↔ ε = 4.5)
        *(
            Run(
                f"foltr_es_{click}",
                "foltr_es",
                _f(click_model=click, privacy_p=0.9, rounds=FPDGD_ROUNDS),
            )
            for click in CLICKS
        ),
        Run(
            "poisoning",
            "poisoning",
            _f(grid="paper", malicious_counts="1,3", click_models="informational")
            + _f(rounds=POISONING_ROUNDS, chunk_rounds=100),
        ),
        Run(
            "unlearning",
            "unlearning",
            _f(click_models="informational", delta_t=10, unlearn_local_updates=3)
            + _f(rounds=UNLEARNING_ROUNDS, chunk_rounds=100),
        ),
        Run(
            "noniid_type2_r1",
            "noniid",
            _f(type=2, grades_per_client=1, n_clients=5, local_updates=5, rounds=NONIID_ROUNDS)
            + _f(click_model="perfect", remedies="fedprox,sharing", prox_mu=0.1)
            + _f(chunk_rounds=250),
        ),
        Run(
            "noniid_type2_r2",
            "noniid",
            _f(type=2, grades_per_client=2, n_clients=10, local_updates=5, rounds=NONIID_ROUNDS)
            + _f(click_model="perfect", chunk_rounds=250),
        ),
        Run(
            "noniid_type3",
            "noniid",
            _f(type=3, clicks="ccm", rounds=NONIID_ROUNDS, chunk_rounds=250),
        ),
        Run(
            "noniid_type4",
            "noniid",
            _f(type=4, click_model="perfect", rounds=NONIID_ROUNDS, chunk_rounds=250),
        ),
        Run(
            "noniid_type1",
            "noniid",
            _f(type=1, click_model="perfect", rounds=NONIID_ROUNDS, chunk_rounds=250),
            own_data=True,
        ),
        # thesis §3.1.3 (RQ1.1.3): FOLtR-ES at p = 1, 2,000 clients, B = 4, against PDGD
        # updated in batches of the same 8,000 interactions (perfect clicks)
        Run(
            "foltr_es_p1_perfect",
            "foltr_es",
            _f(click_model="perfect", privacy_p=1.0, rounds=FPDGD_ROUNDS),
        ),
        Run(
            "pdgd_batch_perfect",
            "fpdgd",
            ("--centralised", "--centralised_form=batch")
            + _f(click_models="perfect", n_clients=2000, local_updates=4, rounds=FPDGD_ROUNDS),
        ),
        *(
            Run(
                f"fedips_{p}",
                "fedips",
                _f(propensity=p, gamma=1.0, rounds=FEDIPS_ROUNDS, n_users=500),
            )
            for p in ("known", "none", "estimated")
        ),
    )
}


# Figure 6 reads these runs' curves at the smallest B's first update (and Figure 5 over the
# whole curve): they are evaluated every round whatever --eval_every (with 1,000 clients a
# round's training costs far more than its evaluation on the test split).
EVERY_ROUND = ("fpdgd_c1000", "fpdgd_b4", "fpdgd_b8")

# ---------------------------------------------------------------------------------- checks


class MissingResults(Exception):
    """A run's results lack the Series a check needs."""


@dataclasses.dataclass
class Verdict:
    ours: str  # our numbers, in words
    test: str  # the test used and its outcome
    holds: bool


class Results:
    """The runs' results pooled over folds (experiments.lib.paper_figures.pool), read by name."""

    def __init__(self, root: pathlib.Path):
        try:
            series = report.load_series(root)
        except report.ReportError:  # no results yet
            series = []
        self.pool = Pool(series)

    def series(self, run: str, panel=None, **fields):
        found = self.pool.find(run=run, panel=panel, **fields)
        if len(found) != 1:
            raise MissingResults(f"{run} {panel or ''} {fields}: {len(found)} series")
        return found[0]

    def final(self, run: str, panel=None, **fields) -> np.ndarray:
        return np.asarray(self.series(run, panel, **fields).final_offline_ndcg)

    def online(self, run: str, panel=None, **fields) -> np.ndarray:
        values = self.series(run, panel, **fields).online_performance
        if values is None:
            raise MissingResults(f"{run}: no online performance")
        return np.asarray(values)


def _ms(values, digits=3) -> str:
    mean, sd, _ = statistics.summarise(values)
    return f"{mean:.{digits}f} ± {sd:.{digits}f}"


def _p(test) -> str:
    return f"p = {test.p:.2g}"


def significantly_above(a, b, name_a, name_b, paired=False, digits=3, what="") -> Verdict:
    """a above b: mean(a) > mean(b) with p < ALPHA (two-tailed t-test)."""
    test = statistics.paired_t_test(a, b) if paired else statistics.t_test(a, b)
    holds = bool(np.mean(a) > np.mean(b) and test.p < ALPHA)
    kind = "paired t-test" if paired else "t-test"
    ours = f"{what}{name_a} {_ms(a, digits)} vs {name_b} {_ms(b, digits)}"
    return Verdict(ours, f"{kind}, {_p(test)}: {name_a} above", holds)


def all_hold(parts: list[tuple[str, Verdict]]) -> Verdict:
    """Several comparisons (one per click model, say): the claim holds if each does."""
    ours = "; ".join(f"{label}: {v.ours}" for label, v in parts)
    tests = "; ".join(f"{label}: {v.test}{'' if v.holds else ' (fails)'}" for label, v in parts)
    return Verdict(ours, tests, all(v.holds for _, v in parts))


def close(a, b, name_a, name_b, tolerance, paired=False) -> Verdict:
    """No meaningful difference: |mean(a) − mean(b)| ≤ tolerance, or not significant."""
    test = statistics.paired_t_test(a, b) if paired else statistics.t_test(a, b)
    gap = float(np.mean(a) - np.mean(b))
    holds = bool(abs(gap) <= tolerance or test.p >= ALPHA)
    ours = f"{name_a} {_ms(a)} vs {name_b} {_ms(b)} (Δ = {gap:+.3f})"
    kind = "paired t-test" if paired else "t-test"
    rule = f"holds if p ≥ {ALPHA} or |Δ| ≤ {tolerance}"
    return Verdict(ours, f"{kind}, {_p(test)}; {rule}", holds)


# One function per claim: Results -> Verdict.


def check_fpdgd_table2(r: Results) -> Verdict:
    return all_hold(
        [
            (
                click,
                significantly_above(
                    r.online("fpdgd_c1000", click, epsilon=4.5),
                    r.online(f"foltr_es_{click}", click),
                    "FPDGD",
                    "FOLtR-ES",
                    digits=2,
                ),
            )
            for click in CLICKS
        ]
    )


def check_fpdgd_offline_vs_foltr_es(r: Results) -> Verdict:
    return all_hold(
        [
            (
                click,
                significantly_above(
                    r.final("fpdgd_c1000", click, epsilon=4.5),
                    r.final(f"foltr_es_{click}", click),
                    "FPDGD",
                    "FOLtR-ES",
                ),
            )
            for click in CLICKS
        ]
    )


def check_fpdgd_fig4(r: Results) -> Verdict:
    """DP costs much at |C| = 10 (significant drop) and little at |C| = 1,000."""
    parts = []
    for click in CLICKS:
        few = significantly_above(
            r.final("fpdgd_c10", click, epsilon=0.0),
            r.final("fpdgd_c10", click, epsilon=4.5),
            "w/o DP",
            "w DP",
            what="|C| = 10: ",
        )
        many = close(
            r.final("fpdgd_c1000", click, epsilon=4.5),
            r.final("fpdgd_c1000", click, epsilon=0.0),
            "|C| = 1,000 w DP",
            "w/o DP",
            tolerance=0.01,
        )
        parts.append((click, Verdict(f"{few.ours}; {many.ours}", f"{few.test}; {many.test}",
                                     few.holds and many.holds)))  # fmt: skip
    return all_hold(parts)


def _curve_mean(s) -> np.ndarray:
    """[runs] the mean of the offline curve (initial model included): the area under it."""
    curves = np.column_stack([s.initial_offline_ndcg, s.offline_ndcg])
    return curves.mean(axis=1)


def check_fpdgd_fig5(r: Results) -> Verdict:
    """Larger B better at fixed T (perfect clicks, DP): B = 8 above B = 2 over the curve."""
    b2 = r.series("fpdgd_c1000", "perfect", epsilon=4.5)
    b4 = r.series("fpdgd_b4", "perfect")
    b8 = r.series("fpdgd_b8", "perfect")
    verdict = significantly_above(
        _curve_mean(b8), _curve_mean(b2), "|B| = 8", "|B| = 2", what="mean over the curve: "
    )
    order = np.mean(_curve_mean(b8)) >= np.mean(_curve_mean(b4)) >= np.mean(_curve_mean(b2))
    ours = f"{verdict.ours}, |B| = 4 {_ms(_curve_mean(b4))}"
    return Verdict(ours, verdict.test + "; and B = 8 ≥ 4 ≥ 2 in mean", verdict.holds and order)


def check_fpdgd_fig6(r: Results) -> Verdict:
    """Fixed budget |C|·B·T (perfect clicks, DP; B = 4 and 8 read within B = 2's budget):
    small B stronger early, quite similar at the end."""
    b2 = r.series("fpdgd_c1000", "perfect", epsilon=4.5)
    b4 = r.series("fpdgd_b4", "perfect")
    b8 = r.series("fpdgd_b8", "perfect")
    early = interactions_per_round(b2)  # B = 2's first update (EVERY_ROUND: evaluated)
    budget = interactions_per_round(b2) * b2.offline_ndcg.shape[1]
    first = significantly_above(
        ndcg_after_interactions(b2, early),
        ndcg_after_interactions(b8, early),
        "|B| = 2",
        "|B| = 8",
        what=f"after {early:,} interactions: ",
    )
    middle = ndcg_after_interactions(b4, early)
    ordered = np.mean(ndcg_after_interactions(b2, early)) >= np.mean(middle)
    ordered &= np.mean(middle) >= np.mean(ndcg_after_interactions(b8, early))
    end = close(
        ndcg_after_interactions(b2, budget),
        ndcg_after_interactions(b8, budget),
        f"after {budget:,}: |B| = 2",
        "|B| = 8",
        tolerance=0.02,
    )
    ours = f"{first.ours}, |B| = 4 {_ms(middle)}; {end.ours}"
    test = f"{first.test}, and 2 ≥ 4 ≥ 8 in mean; at the budget's end: {end.test}"
    return Verdict(ours, test, bool(first.holds and ordered and end.holds))


def _poison(r: Results, aggregator: str, attack: str, m: int) -> np.ndarray:
    return r.final("poisoning", "informational", aggregator=aggregator, attack=attack, m=m)


def check_poisoning_attackers(r: Results) -> Verdict:
    honest = _poison(r, "fedavg", "none", 0)
    m1, m3 = (_poison(r, "fedavg", "data_poisoning", m) for m in (1, 3))
    below = significantly_above(honest, m3, "honest", "30 % attackers", paired=True)
    more = np.mean(m3) < np.mean(m1)
    ours = f"{below.ours}; 10 % attackers {_ms(m1)}"
    return Verdict(ours, below.test + "; and 30 % below 10 % in mean", bool(below.holds and more))


def check_poisoning_lie(r: Results) -> Verdict:
    return significantly_above(
        _poison(r, "fedavg", "lie", 3),
        _poison(r, "fedavg", "data_poisoning", 3),
        "LIE",
        "data poisoning",
        paired=True,
        what="FedAvg, 30 % attackers: ",
    )


def check_poisoning_krum_defends(r: Results) -> Verdict:
    return significantly_above(
        _poison(r, "krum", "data_poisoning", 3),
        _poison(r, "fedavg", "data_poisoning", 3),
        "Krum",
        "FedAvg",
        paired=True,
        what="data poisoning, 30 % attackers: ",
    )


def check_poisoning_fang_vs_data(r: Results) -> Verdict:
    return all_hold(
        [
            (
                f"{10 * m} %",
                significantly_above(
                    _poison(r, "krum", "data_poisoning", m),
                    _poison(r, "krum", "fang_krum_full", m),
                    "data poisoning",
                    "Fang (full)",
                    paired=True,
                    what="Krum: ",
                ),
            )
            for m in (1, 3)
        ]
    )


def check_poisoning_fang_knowledge(r: Results) -> Verdict:
    full1, part1 = (_poison(r, "krum", f"fang_krum_{k}", 1) for k in ("full", "partial"))
    full3, part3 = (_poison(r, "krum", f"fang_krum_{k}", 3) for k in ("full", "partial"))
    few = significantly_above(part1, full1, "partial", "full", paired=True, what="10 %: ")
    gap1, gap3 = np.mean(part1 - full1), np.mean(part3 - full3)
    ours = f"{few.ours}; 30 %: partial {_ms(part3)} vs full {_ms(full3)}"
    test = f"{few.test}; gap 10 % {gap1:+.3f} > gap 30 % {gap3:+.3f}"
    return Verdict(ours, test, bool(few.holds and gap3 < gap1))


def check_poisoning_no_attack(r: Results) -> Verdict:
    fedavg = _poison(r, "fedavg", "none", 0)
    return all_hold(
        [
            (
                name,
                significantly_above(
                    fedavg,
                    _poison(r, rule, "none", 1),
                    "FedAvg",
                    name,
                    paired=True,
                ),
            )
            for rule, name in (("krum", "Krum"), ("median", "Median"))
        ]
    )


def _unlearning(r: Results, configuration: str, **fields) -> np.ndarray:
    return r.final("unlearning", "informational", method=configuration, **fields)


def check_unlearning_fig2(r: Results) -> Verdict:
    malicious, retrained = _unlearning(r, "9H-1M"), _unlearning(r, "9H-0M")
    hurt = significantly_above(retrained, malicious, "9H-0M", "9H-1M", paired=True)
    same = close(_unlearning(r, "10H-0M"), retrained, "10H-0M", "9H-0M", 0.01, paired=True)
    return Verdict(f"{hurt.ours}; {same.ours}", f"{hurt.test}; {same.test}",
                   hurt.holds and same.holds)  # fmt: skip


def check_unlearning_fig3(r: Results) -> Verdict:
    malicious, retrained = _unlearning(r, "9H-1M"), _unlearning(r, "9H-0M")
    unlearned = _unlearning(r, "U(9H-1M)", **{"n′": 3, "Δt": 10})
    above = significantly_above(unlearned, malicious, "U(9H-1M)", "9H-1M", paired=True)
    recovered = float(np.mean(unlearned - malicious) / max(np.mean(retrained - malicious), 1e-9))
    ours = f"{above.ours}; 9H-0M {_ms(retrained)}: {recovered:.0%} of the gap recovered"
    test = f"{above.test}; and at least half the gap to 9H-0M recovered"
    return Verdict(ours, test, bool(above.holds and recovered >= 0.5))


def _noniid(r: Results, run: str, cell: str, panel=None) -> np.ndarray:
    return r.final(run, panel, method=cell)


def check_noniid_type2(r: Results) -> Verdict:
    iid1, non1 = (_noniid(r, "noniid_type2_r1", c) for c in ("iid", "noniid"))
    iid2, non2 = (_noniid(r, "noniid_type2_r2", c) for c in ("iid", "noniid"))
    gap = significantly_above(iid1, non1, "IID", "#R = 1", paired=True)
    gap1, gap2 = np.mean(iid1 - non1), np.mean(iid2 - non2)
    ours = f"{gap.ours}; #R = 2: IID {_ms(iid2)} vs non-IID {_ms(non2)}"
    test = f"{gap.test}; #R = 2 gap {gap2:+.3f} at most a quarter of #R = 1's {gap1:+.3f}"
    return Verdict(ours, test, bool(gap.holds and gap2 <= 0.25 * gap1))


def check_noniid_sharing(r: Results) -> Verdict:
    return significantly_above(
        _noniid(r, "noniid_type2_r1", "sharing"),
        _noniid(r, "noniid_type2_r1", "noniid"),
        "data sharing",
        "non-IID FPDGD",
        paired=True,
    )


def check_noniid_fedprox(r: Results) -> Verdict:
    prox = _noniid(r, "noniid_type2_r1", "fedprox_mu=0.1")
    base = _noniid(r, "noniid_type2_r1", "noniid")
    test = statistics.paired_t_test(prox, base)
    holds = not (np.mean(prox) > np.mean(base) and test.p < ALPHA)
    ours = f"FedProx (μ = 0.1) {_ms(prox)} vs non-IID FPDGD {_ms(base)}"
    return Verdict(ours, f"paired t-test, {_p(test)}: no significant gain", bool(holds))


def check_noniid_type3(r: Results) -> Verdict:
    panel = "CCM clients"
    return close(
        _noniid(r, "noniid_type3", "iid", panel),
        _noniid(r, "noniid_type3", "noniid", panel),
        "IID",
        "non-IID",
        tolerance=0.01,
        paired=True,
    )


def check_noniid_type4(r: Results) -> Verdict:
    return close(
        _noniid(r, "noniid_type4", "iid"),
        _noniid(r, "noniid_type4", "noniid"),
        "IID",
        "non-IID",
        tolerance=0.01,
        paired=True,
    )


def check_noniid_type1(r: Results) -> Verdict:
    iid = r.online("noniid_type1", method="iid")
    non = r.online("noniid_type1", method="noniid")
    verdict = significantly_above(iid, non, "IID", "non-IID", paired=True, digits=1,
                                  what="online: ")  # fmt: skip
    drop = 1 - np.mean(non) / np.mean(iid)
    return dataclasses.replace(verdict, ours=f"{verdict.ours} (drop {drop:.0%})")


def check_fedips_known(r: Results) -> Verdict:
    return significantly_above(
        r.final("fedips_known"), r.final("fedips_none"), "FedIPS", "FedAvg", digits=3,
        what="NDCG@5: ",
    )  # fmt: skip


def check_fedips_estimated(r: Results) -> Verdict:
    return significantly_above(
        r.final("fedips_estimated"), r.final("fedips_none"), "FedIPS (estimated IPS)", "FedAvg",
        what="NDCG@5: ",
    )  # fmt: skip


def check_foltr_es_learns(r: Results) -> Verdict:
    parts = []
    for click in CLICKS:
        s = r.series(f"foltr_es_{click}", click)
        parts.append(
            (
                click,
                significantly_above(
                    s.final_offline_ndcg, s.initial_offline_ndcg, "final", "initial", paired=True
                ),
            )
        )
    return all_hold(parts)


def check_thesis_pdgd_above_foltr_es(r: Results) -> Verdict:
    return significantly_above(
        r.final("pdgd_batch_perfect", "perfect"),
        r.final("foltr_es_p1_perfect", "perfect"),
        "PDGD (batch)",
        "FOLtR-ES p = 1",
        what="final offline nDCG@10: ",
    )


# ---------------------------------------------------------------------------------- claims


@dataclasses.dataclass(frozen=True)
class Claim:
    key: str
    paper: str  # which of the five documents
    where: str  # section, figure or table
    words: str  # the claim, quoted from the paper
    paper_numbers: str  # the paper's own numbers for it ("" where it gives none in text)
    runs: tuple  # names in RUNS
    check: Callable[[Results], Verdict]
    setting: str  # ours, in short
    reduced: bool = False  # in the reduced set (the CI's slow test)


FPDGD = "FPDGD paper (ICTIR 2021)"
POISONING = "Poisoning paper (ICTIR 2023)"
UNLEARNING = "Unlearning paper (ECIR 2024)"
THESIS = "Thesis"
FEDIPS = "FedIPS paper"
FOLTR_ES_RUNS = tuple(f"foltr_es_{c}" for c in CLICKS)

CLAIMS = [
    Claim(
        "fpdgd_table2",
        FPDGD,
        "§5.1, Table 2",
        "on MSLR-WEB10k dataset (Table 2): FPDGD is significantly better than FOLtR-ES under "
        "all three click models within different privacy budgets",
        "MSLR-10k online, ε = 4.5 (p = 0.9): perfect 54.64 vs 40.87, navigational 52.30 vs "
        "40.32, informational 51.14 vs 37.21",
        ("fpdgd_c1000", *FOLTR_ES_RUNS),
        check_fpdgd_table2,
        "online performance, FPDGD |C| = 1,000, B = 2, ε = 4.5, Δ = 5 vs FOLtR-ES p = 0.9 "
        f"(2,000 clients, B = 4), T = {FPDGD_ROUNDS}",
    ),
    Claim(
        "fpdgd_offline_vs_foltr_es",
        FPDGD,
        "§5.1, Figure 2",
        "FPDGD consistently outperforms FOLtR-ES on offline performance across datasets, click "
        "models, and differential privacy settings",
        "(curves only)",
        ("fpdgd_c1000", *FOLTR_ES_RUNS),
        check_fpdgd_offline_vs_foltr_es,
        "final offline nDCG@10, as fpdgd_table2",
    ),
    Claim(
        "fpdgd_fig4",
        FPDGD,
        "§5.2, Figure 4",
        "if differential privacy is used, when only a small number of clients participates to "
        "the federation, then FPDGD performs poorly [...] differential privacy has little to "
        "no impact on performance if numerous clients participate [(|C| = 100, 1000)]",
        "(curves only)",
        ("fpdgd_c10", "fpdgd_c1000"),
        check_fpdgd_fig4,
        f"final offline nDCG@10, |C| ∈ {{10, 1,000}}, B = 2, T = {FPDGD_ROUNDS}, w/o DP and "
        "ε = 4.5, Δ = 5",
        reduced=True,
    ),
    Claim(
        "fpdgd_fig5",
        FPDGD,
        "§5.3, Figure 5",
        "the larger the batch size, the better the offline performance. This trend is "
        "especially significant on the perfect click model",
        "(curves only)",
        ("fpdgd_c1000", "fpdgd_b4", "fpdgd_b8"),
        check_fpdgd_fig5,
        "mean offline nDCG@10 over the curve, perfect clicks, |C| = 1,000, ε = 4.5, Δ = 5, "
        f"B ∈ {{2, 4, 8}}, T = {FPDGD_ROUNDS}",
    ),
    Claim(
        "fpdgd_fig6",
        FPDGD,
        "§5.3, Figure 6",
        "when the budget is maintained equal across different batch sizes [...] the performance "
        "obtained across different values of [|B|] is quite similar [...] although a small batch "
        "size guarantees earlier updates, thus resulting in stronger initial performance",
        "(curves only)",
        ("fpdgd_c1000", "fpdgd_b4", "fpdgd_b8"),
        check_fpdgd_fig6,
        "offline nDCG@10 at a fixed interaction count, perfect clicks, |C| = 1,000, ε = 4.5, "
        f"Δ = 5; B = 2/4/8 with T = {FPDGD_ROUNDS}/{FPDGD_ROUNDS // 2}/{FPDGD_ROUNDS // 4} "
        "(the first rounds of the Figure 5 runs)",
        reduced=True,
    ),
    Claim(
        "poisoning_attackers",
        POISONING,
        "§7.1, Figure 2",
        "the higher the number of attackers, the more degradation on the FOLTR system is "
        "experienced",
        "(curves only)",
        ("poisoning",),
        check_poisoning_attackers,
        f"final offline nDCG@10, informational clicks, n = 10, B = 5, T = {POISONING_ROUNDS}, "
        "m ∈ {0, 1, 3}, FedAvg",
    ),
    Claim(
        "poisoning_lie",
        POISONING,
        "§8.1, Figure 3(a)",
        "LIE is less effective in attacking the performance of the global model compared to "
        "data poisoning",
        "(curves only)",
        ("poisoning",),
        check_poisoning_lie,
        "as poisoning_attackers, m = 3, FedAvg",
    ),
    Claim(
        "poisoning_krum",
        POISONING,
        "§7.2, Figure 2",
        "Krum performs well across all datasets and for all three types of click models once "
        "the percentage of malicious clients reaches 20% or higher",
        "(curves only)",
        ("poisoning",),
        check_poisoning_krum_defends,
        "as poisoning_attackers, data poisoning, m = 3, Krum vs FedAvg",
    ),
    Claim(
        "poisoning_fang_vs_data",
        POISONING,
        "§8.2, Figure 3(c)",
        "Fang's attack can successfully poison FOLTR and mitigate the impact of defense methods "
        "compared to data poisoning",
        "(curves only)",
        ("poisoning",),
        check_poisoning_fang_vs_data,
        "as poisoning_attackers, Krum, m ∈ {1, 3}",
    ),
    Claim(
        "poisoning_fang_knowledge",
        POISONING,
        "§8.2, Figure 3(b)",
        "full knowledge performs better with fewer malicious clients (10% and 20%), but the gap "
        "in effectiveness obtained between full and partial knowledge decreases as the number "
        "of malicious clients increases (30% and 40%)",
        "(curves only)",
        ("poisoning",),
        check_poisoning_fang_knowledge,
        "as poisoning_attackers, Fang's Krum attack against Krum, m ∈ {1, 3}",
    ),
    Claim(
        "poisoning_no_attack",
        POISONING,
        "§9, Figure 4",
        "using Krum and Median leads to a decrease in performance compared to the FedAvg "
        "baseline when no attacks are present",
        "(curves only)",
        ("poisoning",),
        check_poisoning_no_attack,
        "as poisoning_attackers, no attack, Krum and Median assuming m = 1",
    ),
    Claim(
        "unlearning_fig2",
        UNLEARNING,
        "§5.1, Figure 2",
        "it is the addition of the malicious client [...] that sensibly reduces the "
        "effectiveness of the ranker [...] the effectiveness of two rankers [10H-0M and 9H-0M] "
        "is indistinguishable",
        "(curves only)",
        ("unlearning",),
        check_unlearning_fig2,
        "final offline nDCG@10, informational clicks, 10 clients, n = 5, "
        f"T = {UNLEARNING_ROUNDS}, z = 2",
        reduced=True,
    ),
    Claim(
        "unlearning_fig3",
        UNLEARNING,
        "§5.2, Figure 3; §6",
        "Compared to the original model 9H-1M [...] the unlearned model [U(9H-1M)] achieves "
        "better effectiveness and it gradually converges towards the effectiveness of the 9H-0M "
        "model",
        "MSLR-10k, informational, Δt = 10: U(9H-1M) n′ = 3 0.412 vs 9H-0M 0.436 (Table 3)",
        ("unlearning",),
        check_unlearning_fig3,
        f"as unlearning_fig2; n′ = 3, Δt = 10: {UNLEARNING_ROUNDS // 10} replay rounds of 3 "
        f"local steps (the original {UNLEARNING_ROUNDS} rounds of 5)",
        reduced=True,
    ),
    Claim(
        "noniid_type2",
        THESIS,
        "§4.4.2, Figures 4.5-4.6",
        "the effectiveness of FOLTR (and specifically of FPDGD) is seriously affected in the "
        "case of #R = 1; however, if #R = 2 then gaps in effectiveness compared to IID settings "
        "are minimal",
        "(curves only)",
        ("noniid_type2_r1", "noniid_type2_r2"),
        check_noniid_type2,
        f"final offline nDCG@10, perfect clicks, B = 5, T = {NONIID_ROUNDS}; #R = 1 with "
        "|C| = 5, #R = 2 with |C| = 10",
    ),
    Claim(
        "noniid_sharing",
        THESIS,
        "§4.4.3, Figure 4.7",
        "the global performance can be significantly enhanced with data-sharing for both linear "
        "and neural rankers",
        "(curves only)",
        ("noniid_type2_r1",),
        check_noniid_sharing,
        "as noniid_type2 (#R = 1), linear ranker, 10 % of the queries shared",
    ),
    Claim(
        "noniid_fedprox",
        THESIS,
        "§4.4.3, Figure 4.7",
        "neither FedProx nor FedPer provides statistically significant gains over the basic "
        "FPDGD on Type 2 non-IID data (with #R = 1)",
        "(curves only)",
        ("noniid_type2_r1",),
        check_noniid_fedprox,
        "as noniid_type2 (#R = 1), linear ranker, FedProx μ = 0.1",
    ),
    Claim(
        "noniid_type3",
        THESIS,
        "§4.5.1, Figure 4.8",
        "the difference between non-IID and IID data for Type 3 is not significant",
        "(curves only)",
        ("noniid_type3",),
        check_noniid_type3,
        "final offline nDCG@10, 3 clients with perfect/navigational/informational CCM, B = 5, "
        f"T = {NONIID_ROUNDS}",
    ),
    Claim(
        "noniid_type4",
        THESIS,
        "§4.5.2, Figure 4.9",
        "if data is distributed in a non-IID manner across clients according to Type 4, the "
        "effectiveness of FPDGD is not impacted",
        "(curves only)",
        ("noniid_type4",),
        check_noniid_type4,
        "final offline nDCG@10, perfect clicks, 5 clients doing 1/3/5/7/9 interactions, "
        f"T = {NONIID_ROUNDS}",
    ),
    Claim(
        "noniid_type1",
        THESIS,
        "§4.3.2, Table 4.2",
        "In terms of online performance, rankers obtained in the presence of non-IID data are "
        "also worse than when trained with IID data",
        "linear, perfect: IID 1002.36 vs non-IID 648.71 (drop 35 %)",
        ("noniid_type1",),
        check_noniid_type1,
        f"online performance, synthetic intents (4 clients), B = 5, T = {NONIID_ROUNDS}, "
        "perfect clicks",
    ),
    Claim(
        "fedips_known",
        FEDIPS,
        "§5, Figure 1",
        "FedIPS significantly outperforms FedAvg",
        "(curves only)",
        ("fedips_known", "fedips_none"),
        check_fedips_known,
        f"final offline NDCG@5, γ = 1, |U| = 500, T = {FEDIPS_ROUNDS}, known propensities",
    ),
    Claim(
        "fedips_estimated",
        FEDIPS,
        "§5, Figure 2 (right)",
        "for all m values, FedIPS with the estimated IPS eventually outperforms FedAvg",
        "(curves only)",
        ("fedips_estimated", "fedips_none"),
        check_fedips_estimated,
        "as fedips_known, propensities from the federated regression-EM",
    ),
    Claim(
        "foltr_es_learns",
        THESIS,
        "§3.1.3 (RQ1.1.1), Figure 3.1",
        "FOLtR-ES allows for the iterative learning of effective rankers",
        "(MQ2007/2008; curves only)",
        FOLTR_ES_RUNS,
        check_foltr_es_learns,
        "final vs initial offline nDCG@10 of FOLtR-ES, p = 0.9, 2,000 clients, B = 4, "
        f"T = {FPDGD_ROUNDS}",
    ),
    Claim(
        "thesis_pdgd_above_foltr_es",
        THESIS,
        "§3.1.3 (RQ1.1.3), Figures 3.3 and 3.5",
        "For MQ2007 and MSLR-WEB10K datasets, regardless of linear or neural ranker, FOLtR-ES "
        "is less effective than PDGD",
        "(curves only)",
        ("pdgd_batch_perfect", "foltr_es_p1_perfect"),
        check_thesis_pdgd_above_foltr_es,
        "final offline nDCG@10, perfect clicks, linear rankers, FOLtR-ES p = 1 with 2,000 "
        f"clients and B = 4 vs PDGD in batches of 8,000 interactions, T = {FPDGD_ROUNDS}",
    ),
]


# -------------------------------------------------------------------------------- running


def selected(names, reduced: bool) -> list[Claim]:
    by_key = {c.key: c for c in CLAIMS}
    unknown = [n for n in names if n not in by_key]
    if unknown:
        raise common.UserError(f"--claims: unknown claim(s) {unknown}; see --list")
    chosen = [by_key[n] for n in names] if names else list(CLAIMS)
    return [c for c in chosen if c.reduced] if reduced else chosen


def commands(claims, results_dir: pathlib.Path, folds, n_runs: int, eval_every: int):
    """(output folder, argv) of every run the claims need, each once per fold."""
    names = list(dict.fromkeys(name for c in claims for name in c.runs))
    out = []
    for fold_index, (fold, data) in enumerate(folds):
        for name in names:
            run = RUNS[name]
            if run.own_data and fold_index:  # its own synthetic data: once
                continue
            folder = results_dir / ("synthetic" if run.own_data else fold) / name
            extra = [f"--n_runs={n_runs}"]
            if eval_every > 1 and name not in EVERY_ROUND:
                extra.append(f"--eval_every={eval_every}")
            argv = [sys.executable, "-m", f"experiments.{run.binary}"]
            argv += [] if run.own_data else list(data)
            argv += [*run.flags, *extra, f"--output_dir={folder}"]
            out.append((folder, argv))
    return out


def evaluate(claims, results_dir: pathlib.Path) -> list[dict]:
    """One row per claim: the paper's side, ours, the test, holds (None: no results)."""
    results = Results(results_dir)
    rows = []
    for claim in claims:
        try:
            verdict = claim.check(results)
        except MissingResults as error:
            verdict = Verdict(f"missing results ({error})", "", None)
        rows.append(
            {
                "claim": claim.key,
                "paper": claim.paper,
                "where": claim.where,
                "words": claim.words,
                "paper_numbers": claim.paper_numbers,
                "setting": claim.setting,
                "ours": verdict.ours,
                "test": verdict.test,
                "holds": None if verdict.holds is None else bool(verdict.holds),
            }
        )
    return rows


def markdown(rows, data: str, seconds: float | None = None) -> str:
    held = sum(r["holds"] is True for r in rows)
    lines = [
        "# The papers' claims",
        "",
        f"Data: {data}. {held} of {len(rows)} claims hold."
        + (f" This invocation: {seconds:.0f} s wall." if seconds is not None else ""),
        "",
        "| claim | where | in the paper's words | paper's numbers | ours (mean ± sd over runs) "
        "| test | holds |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        holds = {True: "yes", False: "**no**", None: "not run"}[r["holds"]]
        cells = [r["claim"], f"{r['paper']}, {r['where']}", f"“{r['words']}”",
                 r["paper_numbers"], r["ours"], r["test"], holds]  # fmt: skip
        lines.append("| " + " | ".join(markdown_cell(c) for c in cells) + " |")
    lines += ["", "## Settings", "", "| claim | our setting |", "|---|---|"]
    lines += [f"| {r['claim']} | {markdown_cell(r['setting'])} |" for r in rows]
    return "\n".join(lines) + "\n"


def data_description(data_root: str) -> str:
    if not data_root:
        return "synthetic"
    if pathlib.Path(data_root).resolve() in [p.resolve() for p in runs.PLACES]:
        return f"MSLR-WEB10K excerpt (Fold 1, 43 + 43 queries; {data_root})"
    return data_root


def resolve_data_root(data_root: str) -> str:
    if data_root == "synthetic":
        return ""
    if data_root:
        return data_root
    found = runs.find_or_fetch_excerpt()
    if found is None:
        raise common.UserError(
            "--data_root: the MSLR excerpt is absent and could not be fetched "
            "(third_party/mslr_sample/fetch.py); give a dataset, or --data_root=synthetic"
        )
    return str(found)


def run() -> program.Done:
    claims = selected([n for n in FLAGS.claims if n], FLAGS.reduced)
    if FLAGS.list:
        for c in claims:
            print(f"{c.key:<28} {c.paper}, {c.where}; runs: {', '.join(c.runs)}")
        return program.Done()
    for name, least in (("n_runs", 2), ("eval_every", 1), ("jobs", 1)):  # 2: a t-test
        value = getattr(FLAGS, name)
        if value < least:
            raise common.UserError(f"--{name}: must be at least {least}, got {value}")
    data_root = resolve_data_root(FLAGS.data_root)
    folds = runs.dataset_flags(data_root)
    results_dir = pathlib.Path(FLAGS.results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    todo = commands(claims, results_dir, folds, FLAGS.n_runs, FLAGS.eval_every)
    print(f"[claims] {len(todo)} run(s)", file=sys.stderr)
    failed = runs.run_missing(todo, FLAGS.jobs, "claims")
    seconds = time.perf_counter() - start
    rows = evaluate(claims, results_dir)
    data = data_description(data_root)
    text = markdown(rows, data, seconds)
    common.write_text_atomic(results_dir / "claims.md", text)
    payload = {"data": data, "seconds": seconds, "n_runs": FLAGS.n_runs,
               "eval_every": FLAGS.eval_every, "claims": rows}  # fmt: skip
    common.write_text_atomic(results_dir / "claims.json", json.dumps(payload, indent=1) + "\n")
    print(text)
    print(f"[claims] table: {results_dir / 'claims.md'}", file=sys.stderr)
    return program.Done(status=1 if failed else 0)


main = program.main("claims", run, distributed=None)

if __name__ == "__main__":
    app.run(main)
