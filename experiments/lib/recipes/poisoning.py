"""Poisoning paper (Wang and Zuccon, ICTIR 2023): the batch's Figures 2-4 and the runs its
claims read (experiments/lib/claims/poisoning.py)."""

from __future__ import annotations

from experiments.lib.recipes import CLICKS, Recipe, Run, opts, ten_thousand_rounds


def recipes(quick: bool) -> list:
    """Poisoning paper (ICTIR 2023): one grid program covers Figures 2-4."""

    out = []
    out.append(
        Recipe(
            "poisoning_figs2_4",
            "Poisoning paper Figures 2-4: data and model poisoning against the defences"
            + ("" if quick else " (offline nDCG of every 50th of the 10,000 rounds, as plotted)"),
            (
                Run(
                    "grid",
                    "poisoning",
                    # The figures plot offline nDCG over 10,000 rounds: every 50th round is
                    # 200 points a curve, and evaluating the 1,095 slots' models on 2,000
                    # test queries takes ~5 s on a CPU, half a round's time at every 10th
                    # round (docs/performance.md).
                    ten_thousand_rounds(quick) + (() if quick else opts(eval_every=50)),
                    label="FPDGD",
                ),
            ),
        )
    )
    return out


# ----------------------------------------------------------------------------- the claims

ROUNDS = 300  # T (the paper: 10,000)
COUNTS = (1, 2, 3, 4)  # m of n = 10: 10 %, 20 %, 30 %, 40 %
RUN = "poisoning"
SEED1 = "poisoning_seed1"  # diagnosis: 5 more runs (another seed): 10 runs pooled
EUCLIDEAN = "poisoning_euclidean"  # diagnosis: Krum with the paper's Euclidean distances
T1000 = "poisoning_t1000"  # diagnosis: T = 1,000 rounds, m = 3
# the neural ranker under data poisoning against FedAvg (§7.1: "similar to those for the linear
# ranker"): the one finding the paper states of it, in a grid of its own
NEURAL = "poisoning_neural"
_GRID = opts(grid="paper", rounds=ROUNDS, chunk_rounds=100, n_clients=10, local_updates=5)
_ALL = opts(click_models=",".join(CLICKS))
CLAIM_RUNS = Recipe(
    "poisoning_claims",
    "Poisoning paper: the runs its claims read",
    (
        Run(RUN, "poisoning", _GRID + _ALL + opts(malicious_counts=",".join(map(str, COUNTS)))),
        Run(NEURAL, "poisoning",
            _GRID + _ALL + opts(malicious_counts=",".join(map(str, COUNTS)), ranker="neural",
                                attacks="none,data_poisoning", aggregators="fedavg")),
        Run(SEED1, "poisoning",
            _GRID + _ALL + opts(malicious_counts=",".join(map(str, COUNTS)), seed=1)),
        Run(EUCLIDEAN, "poisoning",
            _GRID + _ALL + opts(malicious_counts="1,2,3") + ("--nokrum_squared_distances",)),
        Run(T1000, "poisoning",
            opts(grid="paper", rounds=1000, chunk_rounds=250, n_clients=10, local_updates=5,
                 malicious_counts=3) + _ALL),
    ),
)  # fmt: skip
