"""FedIPS paper (Li & Ouyang, 2021): the batch's Figures 1-2 and the runs its claims read
(experiments/lib/claims/fedips.py)."""

from __future__ import annotations

import numpy as np

from experiments.lib.recipes import Recipe, Run, opts

GAMMAS = (0.5, 1.0, 1.5, 2.0)  # the position bias γ of Figure 1


def recipes(quick: bool) -> list:
    """FedIPS paper: Figure 1 (γ), Figure 2 (|U|; estimated propensities)."""
    rounds = 20 if quick else 500

    out = []
    fig1 = []
    for gamma in GAMMAS:
        for propensity in ("known", "none"):
            fig1.append(
                Run(
                    f"gamma{gamma}_{propensity}",
                    "fedips",
                    opts(gamma=gamma, propensity=propensity, rounds=rounds)
                    + (opts(n_users=200) if quick else ()),
                    label=("FedIPS" if propensity == "known" else "FedAvg") + f", γ = {gamma}",
                )
            )
    # λLinear: full-information LambdaRank, the same in every γ panel (no clicks involved)
    fig1.append(
        Run(
            "lambda_linear",
            "fedips",
            opts(baseline="lambdarank", gamma=1.0) + (opts(n_users=200) if quick else ()),
            label="λLinear",
        )
    )
    out.append(
        Recipe(
            "fedips_fig1",
            "FedIPS paper Figure 1: position bias γ, FedIPS vs FedAvg and λLinear",
            tuple(fig1),
        )
    )
    users = (100, 500) if quick else (100, 500, 2500, 12500, 62500)
    fig2_ips = [
        Run(
            f"users{u}",
            "fedips",
            opts(n_users=u, gamma=1.0, rounds=rounds),
            label=f"|U| = {u}",
        )
        for u in users
    ] + [
        Run(
            f"estimated_{p}",
            "fedips",
            opts(propensity=p, gamma=1.0, rounds=rounds) + (opts(n_users=200) if quick else ()),
            label={"estimated": "FedIPS (estimated IPS)", "known": "FedIPS (real IPS)"}.get(
                p, "FedAvg"
            ),
        )
        for p in ("estimated", "known", "none")
    ]
    out.append(
        Recipe(
            "fedips_fig2", "FedIPS paper Figure 2: |U| and estimated propensities", tuple(fig2_ips)
        )
    )
    return out


# ----------------------------------------------------------------------------- the claims

ROUNDS = 150  # T (the paper: 500; at m = 5 FedIPS "outperforms FedAvg only after about 100 rounds")
USERS = 2000  # |U| (the paper's)
CLICKS_PER_USER = (5, 10)  # m: the values the text names: 5 (the sparsest) and 10 (the default)
# Figure 2 (left): the paper's |U| ∈ {100, 500, 2,500, 12,500, 62,500}; 12,500 and 62,500 left
# out: a 12,500-user run is ~6 times a 2,000-user one (~30 min on the shared two cores)
USER_COUNTS = (100, 500, 2500)
# f₀ (§4: "sample 1% queries to train a linear ranker in a full-information manner"): 1 % of
# Yahoo is ~144 queries, of the excerpt's 41 one query, on which f₀ is no ranker (NDCG@5 0.186
# at seed 0, 0.134 at seed 1, against 0.144 ± 0.020 for a random ranking of the test split).
# 10 % is 4 queries: f₀ NDCG@5 0.279 at the claims' seed 0 (0.227, 0.248 at seeds 1, 2), weak
# but real, below λLinear's 0.362 and LambdaRank on all 41 queries' 0.381.
LOGGING_FRACTION = 0.1
# The learning rates (§4: "we use a grid search to choose parameters from ranges of: η_l ∈
# {0.00001, 0.0001, ..., 0.1} and η_g ∈ {0.05, 0.5, 1, 2}"): η_l from LR_GRID for FedIPS and
# for FedAvg apart, each the best final NDCG@5 on VALIDATION_FRACTION of the training queries
# held out (experiments.fedips --validation_fraction: the users never issue them, the test split
# is not read), γ = 1, m = 10, T = ROUNDS, 2 runs (the lr_grid runs; fedips_lr_choice checks
# LOCAL_LR against them).  η_g stays 1: for small local steps the update is ≈ η_g·η_l·Σ∇, so the
# η_l decades cover most of the product; 1e-5 is left out (1e-4 is already the worst of both).
VALIDATION_FRACTION = 0.25
LR_GRID = (1e-4, 1e-3, 1e-2, 1e-1)
LR_PROPENSITIES = ("known", "none")  # FedIPS and FedAvg; estimated IPS takes FedIPS's η_l
# The choice (choose_lr of the lr_grid runs), their final validation NDCG@5 (mean of 2 runs)
# for η_l = 0.0001 / 0.001 / 0.01 / 0.1: FedIPS 0.264 / 0.284 / 0.292 / 0.284, FedAvg 0.262 /
# 0.267 / 0.266 / 0.290 (f₀ 0.267 on those queries).
LOCAL_LR = {"known": 0.01, "none": 0.1}


def choose_lr(finals: dict) -> float:
    """The grid's η_l with the best mean final validation NDCG@5 (``finals``: η_l → the runs'
    values); the smaller η_l on a tie."""
    return max(sorted(finals), key=lambda lr: (float(np.mean(finals[lr])), -lr))


def lr_grid(lr: float, propensity: str) -> str:
    return f"fi_val_lr{lr:g}_{propensity}"


def local_lr(propensity: str) -> float:
    """The η_l a claim run of these propensities takes (estimated: FedIPS's)."""
    return LOCAL_LR["known" if propensity == "estimated" else propensity]


def g(gamma: float, propensity: str) -> str:
    return f"fi_g{gamma:g}_{propensity}"


def m_run(m: int, propensity: str) -> str:
    if m == 10 and propensity == "none":
        return g(1.0, "none")
    return f"fi_m{m}_{propensity}"


def users(n: int) -> str:
    return f"fi_u{n}"


LAMBDA = "fi_lambdalinear"
REL2_GAMMAS = (0.5, 1.0, 2.0)  # the γ of the relevant-from-2 diagnosis runs


def rel2(name: str) -> str:
    """The diagnosis run of ``name`` with clicks on grades {2, 3, 4}."""
    return f"{name}_rel2"


def run(name: str, propensity: str, **flags) -> Run:
    """A claim run of FedIPS (propensity known or estimated) or FedAvg (none): T = ROUNDS,
    f₀ on LOGGING_FRACTION of the training queries and the chosen η_l."""
    return Run(
        name,
        "fedips",
        opts(propensity=propensity, **flags)
        + opts(local_learning_rate=local_lr(propensity), logging_fraction=LOGGING_FRACTION)
        + _BASE,
    )


_BASE = opts(rounds=ROUNDS, chunk_rounds=ROUNDS)
CLAIM_RUNS = Recipe(
    "fedips_claims",
    "FedIPS paper: the runs its claims read",
    (
        *(run(g(gamma, p), p, gamma=gamma, n_users=USERS) for gamma in GAMMAS
          for p in ("known", "none")),
        Run(LAMBDA, "fedips", opts(baseline="lambdarank", gamma=1.0, n_users=USERS) + _BASE),
        *(run(m_run(m, "estimated"), "estimated", gamma=1.0, n_users=USERS, clicks_per_user=m)
          for m in CLICKS_PER_USER),
        *(run(m_run(m, "none"), "none", gamma=1.0, n_users=USERS, clicks_per_user=m)
          for m in CLICKS_PER_USER if m != 10),
        *(run(users(n), "known", gamma=1.0, n_users=n) for n in USER_COUNTS),
        # the choice of η_l (fedips_lr_choice): on held-out training queries, 2 runs each
        *(Run(lr_grid(lr, p), "fedips",
              opts(propensity=p, gamma=1.0, n_users=USERS, local_learning_rate=lr,
                   logging_fraction=LOGGING_FRACTION, validation_fraction=VALIDATION_FRACTION,
                   n_runs=2, eval_every=10) + _BASE)
          for p in LR_PROPENSITIES for lr in LR_GRID),
        # diagnosis of fedips_estimated: m = 5 with the true propensities instead of the
        # estimated
        run(m_run(5, "known"), "known", gamma=1.0, n_users=USERS, clicks_per_user=5),
        # diagnoses of fedips_users and of the γ = 1 and γ claims: clicks on grades {2, 3, 4}
        # instead of eq. 11's {3, 4}, which are 1.7 % of the excerpt's documents, so that most
        # clicks are noise clicks (the one setting suspected: how much relevance signal a
        # click has)
        *(run(rel2(users(n)), "known", gamma=1.0, n_users=n, relevant_from=2)
          for n in (100, 2500)),
        *(run(rel2(g(gamma, p)), p, gamma=gamma, n_users=USERS, relevant_from=2)
          for gamma in REL2_GAMMAS for p in ("known", "none")),
    ),
)  # fmt: skip
