"""Thesis (Wang, UQ 2024) ch. 3, the FOLtR-ES reproducibility study: the batch's Figures
3.1-3.5 and the runs its claims read (experiments/lib/claims/thesis.py)."""

from __future__ import annotations

from experiments.lib.recipes import CLICKS, RAW, Recipe, Run, opts

P_VALUES = (0.5, 0.9, 1.0)  # §3.1: the privatisation p of Figures 3.1 and 3.4
PAPER_BUDGET = 2_000_000  # §3.1.3 (RQ1.1.2): ranker updates (interactions) fixed
RANKERS = ("linear", "neural")

# ---------------------------------------------------------------------------- the figures


def recipes(quick: bool) -> list:
    """Thesis §3.1, the FOLtR-ES reproducibility study: Figures 3.1-3.5.

    B = 4, antithetic pairs, MaxRR as the reward, Adam with its defaults, linear and neural
    (10 hidden units) rankers, raw features (``RAW``); 2,000 clients (RQ1.1.1, 1.1.3,
    1.1.4); PDGD updated in batches of the same 8,000 interactions (RQ1.1.3: the fpdgd
    binary's centralised 'batch' form).
    T = 250 rounds of 2,000 × 4 interactions is the 2,000,000 ranker updates RQ1.1.2 fixes
    (the thesis does not give T for the other figures: the same budget).
    """
    clients = 200 if quick else 2000
    rounds = 20 if quick else PAPER_BUDGET // (4 * 2000)
    runs = []
    for ranker in RANKERS:
        for click in CLICKS:
            for p in P_VALUES:
                values = RAW + opts(click_model=click, privacy_p=p, ranker=ranker)
                values += opts(n_clients=clients, local_updates=4, rounds=rounds)
                runs.append(
                    Run(f"foltr_es_{ranker}_p{p}_{click}", "foltr_es", values, label=f"p = {p}")
                )
        values = ("--centralised", "--centralised_form=batch") + opts(
            click_models=",".join(CLICKS), ranker=ranker, n_clients=clients, local_updates=4
        )
        runs.append(Run(f"pdgd_{ranker}", "fpdgd", values + opts(rounds=rounds), label="PDGD"))
    out = [
        Recipe(
            "thesis_fig3_1",
            "Thesis §3.1 Figures 3.1, 3.3-3.5: FOLtR-ES over click models, p and rankers "
            "(MaxRR, online and offline nDCG@10); against PDGD at p = 1",
            tuple(runs),
        )
    ]
    budget = PAPER_BUDGET // (10 if quick else 1)
    clients_runs = []
    for ranker in RANKERS:
        for click in CLICKS:
            for n in (50, 1000, 2000):
                values = RAW + opts(click_model=click, privacy_p=0.9, ranker=ranker)
                values += opts(n_clients=n, local_updates=4, rounds=budget // (4 * n))
                clients_runs.append(
                    Run(f"foltr_es_{ranker}_c{n}_{click}", "foltr_es", values, label=f"|C| = {n}")
                )
    out.append(
        Recipe(
            "thesis_fig3_2",
            "Thesis §3.1 Figure 3.2: FOLtR-ES with |C| ∈ {50, 1,000, 2,000} at a fixed "
            f"{budget:,} ranker updates (B = 4, p = 0.9)",
            tuple(clients_runs),
        )
    )
    return out


# ----------------------------------------------------------------------------- the claims

ROUNDS = 50  # T with 2,000 clients
CLIENTS, B = 2000, 4
BUDGET = CLIENTS * B * ROUNDS  # RQ1.1.2's fixed interaction budget, scaled in rounds


def es_run(ranker: str, click: str, p: float, clients: int = CLIENTS) -> str:
    base = f"thesis_es_{ranker}_{click}_p{p:g}"
    return base if clients == CLIENTS else f"{base}_c{clients}"


def _es(ranker: str, click: str, p: float, clients: int = CLIENTS) -> Run:
    """FOLtR-ES's neural ranker: --ranker=relu (10 ReLU units)."""
    rounds = BUDGET // (clients * B)
    return Run(
        es_run(ranker, click, p, clients),
        "foltr_es",
        RAW
        + opts(click_model=click, privacy_p=p, ranker="relu" if ranker == "neural" else "linear",
               n_clients=clients, local_updates=B, rounds=rounds),
    )  # fmt: skip


LONG = 2 * ROUNDS  # the informational trend claims' diagnosis: twice the rounds (p = 1)


def long_run(ranker: str, p: float) -> str:
    return es_run(ranker, "informational", p) + f"_t{LONG}"


THESIS_BUDGET = 2_000_000  # RQ1.1.2's ranker updates (ours: BUDGET)


def full_budget(run: str) -> str:
    return f"{run}_budget{THESIS_BUDGET // 1000}k"


def seed1(run: str) -> str:
    return f"{run}_seed1"


def pdgd_run(ranker: str) -> str:
    return f"thesis_pdgd_batch_{ranker}"


def _pdgd(ranker: str, clicks=CLICKS) -> tuple:
    """RQ1.1.3: PDGD updated in batches of B × |C| interactions."""
    return ("--centralised", "--centralised_form=batch") + opts(
        click_models=",".join(clicks), ranker=ranker, n_clients=CLIENTS, local_updates=B,
        rounds=ROUNDS)  # fmt: skip


CLAIM_RUNS = Recipe(
    "thesis_claims",
    "Thesis ch. 3: the runs its claims read",
    (
        *(_es(r, c, p) for r in RANKERS for c in CLICKS for p in P_VALUES),
        # diagnoses: the informational trend claims over twice the rounds (p = 1); 5 more
        # runs (another seed, pooled with the table's 5) of the cells that fell short
        *(_es(r, "informational", 1.0).variant(long_run(r, 1.0), f"--rounds={LONG}")
          for r in RANKERS),
        *(_es("neural", "perfect", p).variant(seed1(es_run("neural", "perfect", p)), "--seed=1")
          for p in (0.9, 1.0)),
        *(_es(r, c, 0.9, n) for r in RANKERS for c in CLICKS for n in (50, 1000)),
        *(Run(pdgd_run(r), "fpdgd", _pdgd(r)) for r in RANKERS),
        # perfect clicks only: the failing cell
        Run(seed1(pdgd_run("neural")), "fpdgd",
            ("--centralised", "--centralised_form=batch", "--seed=1")
            + _pdgd("neural", ("perfect",))[2:]),
        # the linear cells of thesis_gap_grows_with_noise: 5 more runs of both methods
        *(_es("linear", c, 1.0).variant(seed1(es_run("linear", c, 1.0)), "--seed=1")
          for c in CLICKS),
        Run(seed1(pdgd_run("linear")), "fpdgd", (*_pdgd("linear"), "--seed=1")),
        # thesis_clients_50: the linear, informational cell at the thesis's budget
        *(_es("linear", "informational", 0.9, n).variant(
            full_budget(es_run("linear", "informational", 0.9, n)),
            f"--rounds={THESIS_BUDGET // (n * B)}") for n in (50, 1000, CLIENTS)),
    ),
)  # fmt: skip
