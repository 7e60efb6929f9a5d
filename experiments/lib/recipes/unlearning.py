"""Unlearning paper (Wang, Liu and Zuccon, ECIR 2024): the batch's Figures 2-3 and Table 3,
and the runs its claims read (experiments/lib/claims/unlearning.py)."""

from __future__ import annotations

from experiments.lib.recipes import CLICKS, Recipe, Run, opts, ten_thousand_rounds


def recipes(quick: bool) -> list:
    """Unlearning paper (ECIR 2024): Figures 2-3 and Table 3 in one program."""

    out = []
    unlearning = ten_thousand_rounds(quick)
    if quick:
        unlearning += opts(delta_t="2,4", unlearn_local_updates="1,3")
    out.append(
        Recipe(
            "unlearning_table3",
            "Unlearning paper Figures 2-3 and Table 3",
            (Run("grid", "unlearning", unlearning, label="FPDGD"),),
            baseline="9H-0M",
            paired=True,
        )
    )
    return out


# ----------------------------------------------------------------------------- the claims

ROUNDS = 1000  # T (the paper: 10,000)
LOCAL = 5  # n, the local updates per round before unlearning
STEPS = (4, 3, 2, 1)  # n′, Table 3's rows a–d
DELTAS = (5, 10, 20)  # Δt, Table 3's columns
RUN = "unlearning"
SEED1 = "unlearning_seed1"  # diagnosis: 5 more runs (another seed): 10 runs pooled
T3000 = "unlearning_t3000"  # diagnosis: T = 3,000 (Figure 3's cell only): a 300-round replay
_GRID = opts(click_models=",".join(CLICKS), delta_t=",".join(map(str, DELTAS)),
             unlearn_local_updates=",".join(map(str, sorted(STEPS))), n_clients=10,
             local_updates=LOCAL, rounds=ROUNDS, chunk_rounds=250)  # fmt: skip
CLAIM_RUNS = Recipe(
    "unlearning_claims",
    "Unlearning paper: the runs its claims read",
    (
        Run(RUN, "unlearning", _GRID),
        Run(SEED1, "unlearning", _GRID + opts(seed=1)),
        Run(T3000, "unlearning",
            opts(click_models=",".join(CLICKS), delta_t=10, unlearn_local_updates=3, n_clients=10,
                 local_updates=LOCAL, rounds=3000, chunk_rounds=500)),
    ),
)  # fmt: skip
