"""The batch recipes: one list of runs per figure or table of the papers.

Each run names its binary and flags, and its label in the paper's words (``Run.label``),
which experiments/lib/paper_figures/ uses for the figures' lines.  No flags are defined
here, so that experiments/batch.py and experiments/report.py can both import it.
"""

from __future__ import annotations

import dataclasses

CLICKS = ("perfect", "navigational", "informational")
DP_GRID = ((1.2, 3.0), (2.3, 3.0), (4.5, 5.0), (10.0, 5.0))  # (ε, Δ), FPDGD paper §4
# FPDGD paper Figure 6: T of B = 2 (T·2/B for B = 4, 8): the MSLR budget 1,000·2·200; quick 1/5
FIG6_BUDGET_ROUNDS, FIG6_QUICK_ROUNDS = 200, 40


@dataclasses.dataclass(frozen=True)
class Run:
    """One invocation of a binary: ``python -m experiments.<binary> <flags>``."""

    name: str  # folder under the recipe's folder
    binary: str
    flags: tuple  # ("--name=value", ...)
    own_data: bool = False  # ignores --data_root (non-IID Type 1: intents, not a LETOR fold)
    # The run in the paper's words (e.g. "FOLtR-ES p = 0.25", "|C| = 10"): the figures'
    # line labels (experiments/lib/paper_figures/); a grid run's cells add their own part.
    label: str = ""


@dataclasses.dataclass(frozen=True)
class Recipe:
    name: str
    title: str
    runs: tuple
    baseline: str = ""  # report's --baseline
    paired: bool = False


def _f(**values) -> tuple:
    return tuple(f"--{k}={v}" for k, v in values.items())


# FOLtR-ES as its public code runs it: its data loader reads the LETOR files as they are, so on
# MSLR-WEB10K (whose files are not normalised) it trains and scores on raw features, while the
# FPDGD code normalises per query.  The FOLtR-ES runs of the recipes and claims do the same.
RAW = ("--nonormalise",)


_USER_RECIPES = []  # recipes(quick) functions of user code (``register``)


def register(make):
    """Adds the recipes of user code (a ``--plugin``): ``make(quick)`` returns a list of
    Recipe, listed and run with the built-in ones.  Usable as a decorator."""
    if make not in _USER_RECIPES:
        _USER_RECIPES.append(make)
    return make


def recipes(quick: bool) -> dict:
    """Every recipe (the papers', then those of user code); ``quick`` shrinks rounds,
    clients and runs."""
    out = []
    for paper in (
        _foltr_es_study_recipes,
        _fpdgd_recipes,
        _noniid_recipes,
        _poisoning_recipes,
        _unlearning_recipes,
        _fedips_recipes,
        *_USER_RECIPES,
    ):
        out.extend(paper(quick))
    return {recipe.name: recipe for recipe in out}


FOLTR_ES_PS = (0.5, 0.9, 1.0)  # thesis §3.1: the privatisation p of Figures 3.1 and 3.4
FOLTR_ES_BUDGET = 2_000_000  # thesis §3.1.3 (RQ1.1.2): ranker updates (interactions) fixed


def _foltr_es_study_recipes(quick: bool) -> list:
    """Thesis §3.1, the FOLtR-ES reproducibility study: Figures 3.1-3.5.

    B = 4, antithetic pairs, MaxRR as the reward, Adam with its defaults, linear and neural
    (10 hidden units) rankers, raw features (``RAW``); 2,000 clients (RQ1.1.1, 1.1.3, 1.1.4); PDGD updated in batches
    of the same 8,000 interactions (RQ1.1.3: the fpdgd binary's centralised 'batch' form).
    T = 250 rounds of 2,000 × 4 interactions is the 2,000,000 ranker updates RQ1.1.2 fixes
    (the thesis does not give T for the other figures: the same budget).
    """
    clients = 200 if quick else 2000
    rounds = 20 if quick else FOLTR_ES_BUDGET // (4 * 2000)
    runs = []
    for ranker in ("linear", "neural"):
        for click in CLICKS:
            for p in FOLTR_ES_PS:
                values = RAW + _f(click_model=click, privacy_p=p, ranker=ranker)
                values += _f(n_clients=clients, local_updates=4, rounds=rounds)
                runs.append(
                    Run(f"foltr_es_{ranker}_p{p}_{click}", "foltr_es", values, label=f"p = {p}")
                )
        values = ("--centralised", "--centralised_form=batch") + _f(
            click_models=",".join(CLICKS), ranker=ranker, n_clients=clients, local_updates=4
        )
        runs.append(Run(f"pdgd_{ranker}", "fpdgd", values + _f(rounds=rounds), label="PDGD"))
    out = [
        Recipe(
            "thesis_fig3_1",
            "Thesis §3.1 Figures 3.1, 3.3-3.5: FOLtR-ES over click models, p and rankers "
            "(MaxRR, online and offline nDCG@10); against PDGD at p = 1",
            tuple(runs),
        )
    ]
    budget = FOLTR_ES_BUDGET // (10 if quick else 1)
    clients_runs = []
    for ranker in ("linear", "neural"):
        for click in CLICKS:
            for n in (50, 1000, 2000):
                values = RAW + _f(click_model=click, privacy_p=0.9, ranker=ranker)
                values += _f(n_clients=n, local_updates=4, rounds=budget // (4 * n))
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


def _fpdgd_recipes(quick: bool) -> list:
    """FPDGD paper (ICTIR 2021): Figures 2-6 and Table 2."""

    def rounds(full, small):
        return small if quick else full

    out = []
    # Click models and (ε, Δ) pairs are grids run as one program by the fpdgd binary.
    clicks = _f(click_models=",".join(CLICKS))
    dp_grid = _f(privacy_grid=",".join(f"{e}:{d}" for e, d in DP_GRID))
    short = _f(rounds=rounds(200, 20))
    fig2 = [
        Run("fpdgd", "fpdgd", clicks + dp_grid + short, label="FPDGD"),
        Run("pdgd", "fpdgd", ("--centralised",) + clicks + short, label="PDGD (same budget)"),
        Run(
            "pdgd_same_updates",
            "fpdgd",
            ("--centralised", "--centralised_form=same_updates") + clicks + short,
            label="PDGD (same updates)",
        ),
    ]
    for click in CLICKS:
        for p in (0.25, 0.5, 0.9, 1.0):
            fig2.append(
                Run(
                    f"foltr_es_p{p}_{click}",
                    "foltr_es",
                    RAW
                    + _f(click_model=click, privacy_p=p, ranker="linear", learning_rate=0.001)
                    + _f(n_clients=1000, local_updates=2)
                    + short,
                    label=f"FOLtR-ES p = {p}",
                )
            )
    out.append(
        Recipe(
            "fpdgd_fig2",
            "FPDGD paper Figures 2-3 and Table 2: FPDGD (ε), PDGD, FOLtR-ES (p); nDCG, MaxRR",
            tuple(fig2),
            baseline="epsilon=4.5",
        )
    )
    fig4 = [
        Run(
            f"clients{n}",
            "fpdgd",
            clicks + _f(n_clients=n, privacy_grid="none,4.5:5") + short,
            label=f"|C| = {n}",
        )
        for n in (10, 100, 1000)
    ]
    out.append(
        Recipe(
            "fpdgd_fig4",
            "FPDGD paper Figure 4: number of clients |C|, with and without DP",
            tuple(fig4),
        )
    )
    few_clients = _f(n_clients=100) if quick else ()
    fig5 = [
        Run(
            f"batch{b}",
            "fpdgd",
            clicks + _f(local_updates=b, privacy_grid="4.5:5") + short + few_clients,
            label=f"|B| = {b}",
        )
        for b in (2, 4, 8)
    ]
    out.append(Recipe("fpdgd_fig5", "FPDGD paper Figure 5: local updates B with DP", tuple(fig5)))
    # §5.3: the total interaction budget |C|·B·T fixed with |C| = 1,000 kept, so a smaller B
    # means more global updates (MSLR: B = 2/4/8, T = 200/100/50), with DP (ε = 4.5, Δ = 5).
    fig6 = [
        Run(
            f"batch{b}",
            "fpdgd",
            clicks
            + _f(local_updates=b, n_clients=1000, privacy_grid="4.5:5")
            + _f(rounds=rounds(FIG6_BUDGET_ROUNDS, FIG6_QUICK_ROUNDS) * 2 // b),
            label=f"|B| = {b}",
        )
        for b in (2, 4, 8)
    ]
    out.append(
        Recipe(
            "fpdgd_fig6",
            "FPDGD paper Figure 6: B under a fixed interaction budget |C|·|B|·T (|C| = 1,000, "
            "ε = 4.5, Δ = 5)",
            tuple(fig6),
        )
    )
    return out


def _noniid_recipes(quick: bool) -> list:
    """Thesis ch. 4, non-IID data: a run per click model, each run's cells one program."""

    def rounds(full, small):
        return small if quick else full

    out = []

    def per_click(name: str, values: tuple, own_data: bool = False, label: str = "") -> list:
        return [
            Run(f"{name}_{click}", "noniid", values + _f(click_model=click), own_data, label)
            for click in CLICKS
        ]

    noniid_rounds = _f(rounds=rounds(10_000, 40), chunk_rounds=rounds(500, 20))
    mus = _f(prox_mu="0.01,1" if quick else "0.001,0.01,0.1,1,10")
    type1 = _f(type=1) + noniid_rounds
    out.append(
        Recipe(
            "noniid_type1",
            "Thesis Figures 4.3-4.4, Table 4.2: Type 1 (intents); FedProx, FedPer",
            tuple(
                per_click(
                    "linear", type1 + _f(remedies="fedprox") + mus, True, "intent-change (linear)"
                )
                + per_click(
                    "neural",
                    type1 + _f(remedies="fedper", ranker="neural"),
                    True,
                    "intent-change (neural)",
                )
            ),
            baseline="iid",
        )
    )
    type2 = _f(type=2, grades_per_client=1, n_clients=5) + noniid_rounds
    runs = []
    for ranker in ("linear", "neural"):
        for b in (2, 5, 10):
            if quick and ranker == "neural" and b != 5:
                continue
            values = type2 + _f(ranker=ranker, local_updates=b)
            if b == 5:  # Figure 4.7: the remedies at |C| = 5, B = 5
                remedies = "fedprox,sharing" if ranker == "linear" else "fedprox,fedper,sharing"
                values += _f(remedies=remedies) + (_f(prox_mu=0.1) if quick else mus)
            runs += per_click(f"{ranker}_b{b}", values, label=f"{ranker} ranker, B = {b}")
    out.append(
        Recipe(
            "noniid_type2",
            "Thesis Figures 4.5 and 4.7, Table 4.3: Type 2 (#R = 1), B; data sharing, FedProx, "
            "FedPer",
            tuple(runs),
            baseline="iid",
        )
    )
    type2_r2 = _f(type=2, grades_per_client=2, n_clients=10, local_updates=5) + noniid_rounds
    out.append(
        Recipe(
            "noniid_type2_r2",
            "Thesis Figure 4.6: Type 2 (#R = 2)",
            tuple(
                run
                for ranker in (("linear",) if quick else ("linear", "neural"))
                for run in per_click(ranker, type2_r2 + _f(ranker=ranker), label=f"{ranker} ranker")
            ),
            baseline="iid",
        )
    )
    out.append(
        Recipe(
            "noniid_type3",
            "Thesis Figure 4.8: Type 3 (each client its own click model: CCM, PBM)",
            tuple(
                Run(c, "noniid", _f(type=3, clicks=c) + noniid_rounds, label=f"{c.upper()} clicks")
                for c in ("ccm", "pbm")
            ),
            baseline="iid",
        )
    )
    out.append(
        Recipe(
            "noniid_type4",
            "Thesis Figure 4.9: Type 4 (data quantity), alone and mixed with Types 1 and 2",
            tuple(
                per_click("alone", _f(type=4) + noniid_rounds, label="Type 4")
                + per_click(
                    "intents", _f(type=4, mix=1) + noniid_rounds, True, "Type 4 mixed with type 1"
                )
                + per_click(
                    "labels",
                    _f(type=4, mix=2) + noniid_rounds,
                    label="Type 4 mixed with type 2 (#R = 1)",
                )
            ),
            baseline="iid",
        )
    )
    return out


def _poisoning_recipes(quick: bool) -> list:
    """Poisoning paper (ICTIR 2023): one grid program covers Figures 2-4."""

    def rounds(full, small):
        return small if quick else full

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
                    _f(rounds=rounds(10_000, 40), chunk_rounds=rounds(500, 20))
                    + (() if quick else _f(eval_every=50)),
                    label="FPDGD",
                ),
            ),
        )
    )
    return out


def _unlearning_recipes(quick: bool) -> list:
    """Unlearning paper (ECIR 2024): Figures 2-3 and Table 3 in one program."""

    def rounds(full, small):
        return small if quick else full

    out = []
    unlearning = _f(rounds=rounds(10_000, 40), chunk_rounds=rounds(500, 20))
    if quick:
        unlearning += _f(delta_t="2,4", unlearn_local_updates="1,3")
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


def _fedips_recipes(quick: bool) -> list:
    """FedIPS paper: Figure 1 (γ), Figure 2 (|U|; estimated propensities)."""

    def rounds(full, small):
        return small if quick else full

    out = []
    fig1 = []
    for gamma in (0.5, 1.0, 1.5, 2.0):
        for propensity in ("known", "none"):
            fig1.append(
                Run(
                    f"gamma{gamma}_{propensity}",
                    "fedips",
                    _f(gamma=gamma, propensity=propensity, rounds=rounds(500, 20))
                    + (_f(n_users=200) if quick else ()),
                    label=("FedIPS" if propensity == "known" else "FedAvg") + f", γ = {gamma}",
                )
            )
    # λLinear: full-information LambdaRank, the same in every γ panel (no clicks involved)
    fig1.append(
        Run(
            "lambda_linear",
            "fedips",
            _f(baseline="lambdarank", gamma=1.0) + (_f(n_users=200) if quick else ()),
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
            _f(n_users=u, gamma=1.0, rounds=rounds(500, 20)),
            label=f"|U| = {u}",
        )
        for u in users
    ] + [
        Run(
            f"estimated_{p}",
            "fedips",
            _f(propensity=p, gamma=1.0, rounds=rounds(500, 20))
            + (_f(n_users=200) if quick else ()),
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
