"""Claims of the unlearning paper: S. Wang, B. Liu, G. Zuccon, "How to Forget Clients in
Federated Online Learning to Rank?", ECIR 2024.

Its setting (§4): 10 clients, the client to forget c* malicious (M = −z·M_local, z = 2, §3.4),
n = 5 local updates, T = 10,000 global updates, linear ranker (η = 0.1, zero initialisation),
three click models; 10H-0M, 9H-1M and 9H-0M (retrained from scratch) trained, then U(9H-1M)
unlearnt by replaying the updates stored every Δt rounds with n′ local steps each
(n′ ∈ {1, 2, 3, 4} × Δt ∈ {5, 10, 20}, Table 3); final offline nDCG@10.  Ours: the same
(``python -m experiments.unlearning``, the whole Table 3 grid and every click model in one
run) with T = 1,000 (scaled in rounds only: the replay has ⌈T/Δt⌉ = 200, 100 and 50 rounds
where the paper's has 2,000, 1,000 and 500).  T = 1,000 rather than the 300 of the poisoning claims:
at T = 300 the replay has 60, 30 and 15 rounds, and on the MSLR excerpt (5 runs) U(9H-1M)
ended where retraining is after as many rounds, far below 9H-0M's final value (perfect clicks,
n′ = 3, Δt = 10: 0.304 against 0.362, 11 % of the gap recovered; 9H-0M's curve was still
rising, 0.331 at round 100 and 0.362 at 300); the paper's replay, 500 to 2,000 rounds, starts
from a curve that has levelled off.  Runs share their random streams across configurations
and cells (run r's seeds), so the comparisons are paired.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from experiments.lib.claims.core import (
    CONTRADICTED,
    HOLDS,
    Cell,
    Claim,
    Diagnosis,
    Verdict,
    above,
    acted,
    both,
    controls,
    equivalent,
    ms,
    recheck,
)
from experiments.lib.recipes import CLICKS
from experiments.lib.recipes.unlearning import DELTAS, LOCAL, ROUNDS, RUN, SEED1, STEPS, T3000

PAPER = "Unlearning paper (Wang, Liu and Zuccon, ECIR 2024)"
PAPER_ROUNDS = 10_000
SAME_MARGIN = 0.01  # nDCG@10: "indistinguishable"

SETTING = (
    f"final offline nDCG@10, 10 clients (client 0 malicious, z = 2), n = {LOCAL}, T = {ROUNDS} "
    f"(the paper: {PAPER_ROUNDS:,}; scaled in rounds only), linear ranker, every click model "
    "and Table 3 cell in one run (paired runs); T = 1,000 rather than 300 because at T = 300 "
    "the replay (15 to 60 rounds) ended where retraining is after as many rounds (perfect, "
    "n′ = 3, Δt = 10: 0.304 vs 9H-0M 0.362 on the excerpt), not near 9H-0M's final value"
)

# Table 3, MSLR-10k: 9H-0M, and U(9H-1M) per click model, n′ (rows a–d: 4, 3, 2, 1) and Δt
TABLE3_RETRAINED = {"perfect": 0.439, "navigational": 0.439, "informational": 0.436}
TABLE3 = {
    "perfect": {4: (0.436, 0.433, 0.429), 3: (0.435, 0.432, 0.427),
                2: (0.432, 0.431, 0.423), 1: (0.430, 0.422, 0.414)},
    "navigational": {4: (0.433, 0.428, 0.422), 3: (0.429, 0.428, 0.414),
                     2: (0.426, 0.421, 0.389), 1: (0.418, 0.382, 0.344)},
    "informational": {4: (0.429, 0.413, 0.389), 3: (0.424, 0.412, 0.361),
                      2: (0.420, 0.386, 0.348), 1: (0.393, 0.343, 0.332)},
}  # fmt: skip


def configuration(r, click: str, name: str, run: str = RUN) -> np.ndarray:
    """[runs] final offline nDCG@10 of 10H-0M, 9H-1M or 9H-0M."""
    return r.final(run, click, method=name)


def unlearned(r, click: str, steps: int, delta: int, run: str = RUN) -> np.ndarray:
    """[runs] final offline nDCG@10 of U(9H-1M) with n′ = steps, Δt = delta."""
    return r.final(run, click, method="U(9H-1M)", **{"n′": steps, "Δt": delta})


def slope(samples, xs) -> np.ndarray:
    """[runs] each run's least-squares slope of the samples (one [runs] array per x) on xs."""
    y = np.stack([np.asarray(s, float) for s in samples])  # [len(xs), runs]
    x = np.asarray(xs, float) - np.mean(xs)
    return (x[:, None] * (y - y.mean(axis=0))).sum(axis=0) / (x**2).sum()


def _paper_slope(values, xs) -> float:
    return float(slope([[v] for v in values], xs)[0])


# --------------------------------------------------------------------------- checks


def _fig2_cell(click: str) -> Cell:
    def check(r):
        malicious = configuration(r, click, "9H-1M")
        retrained = configuration(r, click, "9H-0M")
        hurt = above(retrained, malicious, "9H-0M", "9H-1M", paired=True, effect=0.05)
        ten = configuration(r, click, "10H-0M")
        # the control: removing an honest client does change the runs (paired)
        control = acted(ten, retrained, "removing one honest client",
                        "the final nDCG@10 of the paired runs")  # fmt: skip
        same = equivalent(ten, retrained, "10H-0M", "9H-0M", margin=SAME_MARGIN, paired=True,
                          control=control)  # fmt: skip
        return both(hurt, same)

    return Cell(click, check)


def _fig3_cell(click: str) -> Cell:
    def check(r):
        malicious = configuration(r, click, "9H-1M")
        retrained = configuration(r, click, "9H-0M")
        u = unlearned(r, click, 3, 10)
        better = above(u, malicious, "U(9H-1M)", "9H-1M", paired=True, effect=0.05)
        # converges towards 9H-0M: U beyond the midpoint of 9H-1M and 9H-0M (more than half
        # the gap recovered), significantly
        midpoint = (malicious + retrained) / 2
        towards = above(u, midpoint, "U(9H-1M)", "midpoint 9H-1M/9H-0M", paired=True,
                        effect=0.02)  # fmt: skip
        gap = float(np.mean(retrained - malicious))
        share = float(np.mean(u - malicious)) / gap if gap else float("nan")
        verdict = both(better, towards)
        return dataclasses.replace(
            verdict,
            ours=f"{better.ours}; 9H-0M {ms(retrained)}: {share:.0%} of the gap recovered",
            values=(float(np.mean(u)), float(np.mean(retrained))),
        )

    paper = (TABLE3[click][3][1], TABLE3_RETRAINED[click])
    return Cell(click, check, paper=paper,
                paper_text=f"Table 3 (n′ = 3, Δt = 10): U(9H-1M) {paper[0]} vs 9H-0M "
                f"{paper[1]}")  # fmt: skip


def _rises(samples, xs, labels, effect: float, name: str, per: str, axis: str) -> Verdict:
    """Final nDCG@10 rises along ``xs``: each run's least-squares slope on xs above 0 (paired
    t-test against 0, power at the paper's slope ``effect``)."""
    per_run = slope(samples, xs)
    test = above(per_run, np.zeros_like(per_run), name, "0", paired=True, effect=effect)
    means = tuple(float(np.mean(s)) for s in samples)
    ours = ", ".join(f"{label} {ms(s)}" for label, s in zip(labels, samples))
    return dataclasses.replace(test, ours=f"{ours}; {name} {per} {ms(per_run, 4)}",
                               test=f"slope of final nDCG@10 on {axis}, per run: {test.test}",
                               values=means)  # fmt: skip


def _steps_cell(click: str, delta: int) -> Cell:
    column = DELTAS.index(delta)
    paper = tuple(TABLE3[click][n][column] for n in STEPS)
    effect = _paper_slope(paper, STEPS)

    def check(r):
        samples = [unlearned(r, click, n, delta) for n in STEPS]
        return _rises(samples, STEPS, [f"n′ = {n}" for n in STEPS], effect, "slope",
                      "per local step", "n′")  # fmt: skip

    return Cell(f"{click}, Δt = {delta}", check, paper=paper,
                paper_text="Table 3, n′ = 4/3/2/1: " + " / ".join(f"{v:.3f}" for v in paper)
                + f" (slope {effect:.4f})")  # fmt: skip


def _delta_cell(click: str, steps: int) -> Cell:
    paper = TABLE3[click][steps]
    xs = np.log2(DELTAS)
    effect = -_paper_slope(paper, xs)

    def check(r):  # the slope on −log2 Δt: nDCG@10 gained per halving of Δt
        samples = [unlearned(r, click, steps, d) for d in DELTAS]
        return _rises(samples, -xs, [f"Δt = {d}" for d in DELTAS], effect, "gain",
                      "per halving of Δt", "−log2 Δt")  # fmt: skip

    return Cell(f"{click}, n′ = {steps}", check, paper=paper,
                paper_text="Table 3, Δt = 5/10/20: " + " / ".join(f"{v:.3f}" for v in paper)
                + f" (gain per halving {effect:.4f})")  # fmt: skip


def _saving_cell(steps: int, delta: int) -> Cell:
    expected = LOCAL / steps * delta

    def check(r):
        """The local updates each remaining client made, counted from what the runs record:
        the replay's rounds (the rounds its offline curve covers) × n′, against the
        retraining's rounds (9H-0M's last evaluated round) × n; and the rounds (messages)."""
        measured, rounds = [], []
        for click in CLICKS:
            replay_rounds = r.rounds(RUN, click, method="U(9H-1M)", **{"n′": steps, "Δt": delta})
            retrain_rounds = r.rounds(RUN, click, method="9H-0M")
            measured.append(LOCAL * retrain_rounds / (steps * replay_rounds))
            rounds.append(retrain_rounds / replay_rounds)
        ok = all(abs(m - expected) < 1e-9 for m in measured) and all(
            abs(x - delta) < 1e-9 for x in rounds
        )
        return Verdict(
            f"local updates per client: retraining {LOCAL}·{retrain_rounds} vs unlearning "
            f"{steps}·{replay_rounds}: × {measured[0]:g} fewer; rounds × {rounds[0]:g} fewer "
            f"(the same in all {len(CLICKS)} click models: "
            f"{'yes' if len(set(measured)) == 1 else 'no'})",
            f"equal to (n/n′)·Δt = {expected:g} and Δt = {delta}: {'yes' if ok else 'no'}",
            HOLDS if ok else CONTRADICTED,
            (measured[0], rounds[0]),
        )

    return Cell(f"n′ = {steps}, Δt = {delta}", check, paper=(expected, float(delta)),
                paper_text=f"(n/n′)·Δt = {expected:g} fewer local updates, Δt = {delta} fewer "
                "rounds")  # fmt: skip


# Table 3, MSLR-10k: the (click model, Δt) columns and the n′ whose U(9H-1M) the superscripts
# on 9H-0M do NOT mark as significantly below retraining (paired t-test, Bonferroni)
TABLE3_NOT_SIGNIFICANT = {
    ("perfect", 5): (4, 3, 2, 1), ("perfect", 10): (4, 3, 2), ("perfect", 20): (4, 3),
    ("navigational", 5): (4, 3, 2), ("navigational", 10): (4, 3),
    ("informational", 5): (4, 3),
}  # fmt: skip
NO_DIFFERENCE_MARGIN = 0.015  # the largest such gap in Table 3's MSLR rows is 0.013


def _like_retraining_cell(click: str, delta: int, steps: int) -> Cell:
    def check(r):
        retrained = configuration(r, click, "9H-0M")
        # the control: the malicious client does lower nDCG@10, so there is something to undo
        control = controls(above(retrained, configuration(r, click, "9H-1M"), "9H-0M", "9H-1M",
                                 paired=True, effect=0.05))  # fmt: skip
        return equivalent(
            unlearned(r, click, steps, delta),
            retrained,
            "U(9H-1M)",
            "9H-0M",
            margin=NO_DIFFERENCE_MARGIN,
            paired=True,
            control=control,
        )

    paper = (TABLE3[click][steps][DELTAS.index(delta)], TABLE3_RETRAINED[click])
    return Cell(f"{click}, Δt = {delta}, n′ = {steps}", check, paper=paper,
                paper_text=f"Table 3: U(9H-1M) {paper[0]} vs 9H-0M {paper[1]}, not marked "
                "significant")  # fmt: skip


CLAIMS = [
    Claim(
        "unlearning_fig2",
        PAPER,
        "§5.1, Figure 2",
        "The results highlight that it is the addition of the malicious client [(i.e. client "
        "c* that will be the target of the unlearning)] that sensibly reduces the effectiveness "
        "of the ranker [...] In fact, 10H-0M and 9H-0M only consider honest clients, but in the "
        "9H-0M one of these clients has been removed – but the effectiveness of two rankers is "
        "indistinguishable",
        (RUN,),
        tuple(_fig2_cell(c) for c in CLICKS),
        SETTING,
        "9H-0M above 9H-1M (paired one-sided t-test above 0.025, half of Δ = 0.05); 10H-0M "
        f"and 9H-0M: paired TOST, margin ±{SAME_MARGIN} nDCG@10, control: removing one honest "
        "client changes the paired runs",
    ),
    Claim(
        "unlearning_fig3",
        PAPER,
        "§5.2, Figure 3",
        "Compared to the original model 9H-1M[...], the unlearned model [U(9H-1M)] achieves "
        "better effectiveness and it gradually converges towards the effectiveness of the 9H-0M "
        "model, showing that the unlearned model is able to successfully remove the impact of "
        "the unlearned client",
        (RUN,),
        tuple(_fig3_cell(c) for c in CLICKS),
        SETTING + f"; n′ = 3, Δt = 10: {ROUNDS // 10} replayed rounds of 3 local steps (the "
        f"original {ROUNDS} rounds of {LOCAL})",
        "U(9H-1M) above 9H-1M (paired one-sided t-test above 0.025, half of Δ = 0.05), and "
        "above the midpoint of 9H-1M and 9H-0M, i.e. more than half the gap recovered (above "
        "0.01, half of Δ = 0.02)",
    ),
    Claim(
        "unlearning_more_local_updates",
        PAPER,
        "§5.3, Table 3",
        "Our experimental findings display this trade-off with relative higher effectiveness "
        "obtained when more local updates [(n′)] are used during the unlearning process",
        (RUN,),
        tuple(_steps_cell(c, d) for c in CLICKS for d in DELTAS),
        SETTING + "; U(9H-1M) for n′ ∈ {1, 2, 3, 4} at each Δt",
        "each run's least-squares slope of final nDCG@10 on n′, one-sided t-test that its "
        "mean is above half the slope of Table 3's MSLR row; power at that slope",
    ),
    Claim(
        "unlearning_smaller_delta_t",
        PAPER,
        "§5.3, Table 3",
        "Table 3 shows that, in most cases, the model for which unlearning has taken place "
        "delivers higher ranking effectiveness for small values of [Δt]",
        (RUN,),
        tuple(_delta_cell(c, n) for c in CLICKS for n in STEPS),
        SETTING + "; U(9H-1M) for Δt ∈ {5, 10, 20} at each n′ (Table 3's MSLR cells all show "
        "it, so none is an exception here)",
        "each run's least-squares slope of final nDCG@10 on −log2 Δt (the gain per halving), "
        "one-sided t-test that its mean is above half the slope of Table 3's MSLR row; power "
        "at that slope",
    ),
    Claim(
        "unlearning_table3_like_retraining",
        PAPER,
        "§5.2, Table 3",
        "The best results are highlighted in boldface with superscripts denoting results for "
        "statistical significance study (paired Student's t-test with [p ≤ 0.05] with Bonferroni "
        "correction) [: on MSLR-10k, U(9H-1M) is not marked significantly below 9H-0M at small "
        "Δt and large n′]",
        (RUN,),
        tuple(
            _like_retraining_cell(c, d, n)
            for (c, d), steps in TABLE3_NOT_SIGNIFICANT.items()
            for n in steps
        ),
        SETTING + "; U(9H-1M) against 9H-0M in every MSLR cell of Table 3 whose superscripts "
        "mark no significant difference",
        f"paired TOST, margin ±{NO_DIFFERENCE_MARGIN} nDCG@10 (Table 3's largest unmarked MSLR "
        "gap is 0.013); control: 9H-0M above 9H-1M (paired one-sided t-test above 0.025, half "
        "of Δ = 0.05): the malicious client left something to undo",
    ),
    Claim(
        "unlearning_saving",
        PAPER,
        "§3.3 (and §6)",
        "Thus, in terms of training efficiency compared to the baseline condition of retraining "
        "from scratch, the unlearning approach provides a reduction of [(n·T)/(n′·T_unlearn) = "
        "(n/n′)·Δt] local updates for each client [...] Along with a reduction in local "
        "training, the unlearning process also reduces the communications required between "
        "each client and the central server by [T/T_unlearn = Δt] times",
        (RUN,),
        tuple(_saving_cell(n, d) for n in STEPS for d in DELTAS),
        SETTING + f"; counted from the runs: the rounds the replay ran (its offline curve "
        f"has one value per replayed round) × n′ against the rounds 9H-0M ran × n = {LOCAL}",
        "exact: the counted reduction equals (n/n′)·Δt, and the rounds' Δt, in every click "
        "model (bookkeeping of the replay schedule, not a finding: shown apart)",
        reduced=True,
        bookkeeping=True,
    ),
]


# ------------------------------------------------------------------------------ diagnoses
# Each failing claim's diagnosis re-checks its cells with ONE setting changed.

MORE_RUNS = (
    "more runs: 5 more (--seed=1, the same grid), pooled with the claim's 5",
    {RUN: (RUN, SEED1)},
    "with 10 runs",
)
MORE_ROUNDS = (
    "more rounds: T = 3,000 instead of 1,000 (n′ = 3, Δt = 10: a 300-round replay)",
    {RUN: (T3000,)},
    "at T = 3,000",
)
DIAGNOSES = {
    "unlearning_fig2": MORE_RUNS,
    "unlearning_fig3": MORE_ROUNDS,
    "unlearning_more_local_updates": MORE_RUNS,
    "unlearning_smaller_delta_t": MORE_RUNS,
    "unlearning_table3_like_retraining": MORE_RUNS,
    "unlearning_saving": MORE_RUNS,
}


def _diagnosis(claim: Claim) -> Diagnosis:
    change, runs, what = DIAGNOSES[claim.key]
    names = tuple(dict.fromkeys(n for group in runs.values() for n in group if n != RUN))
    return Diagnosis(change, names, recheck(claim.cells, runs, what))


CLAIMS = [dataclasses.replace(c, diagnosis=_diagnosis(c)) for c in CLAIMS]
