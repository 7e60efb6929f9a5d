"""The thesis's §3.1 (the FOLtR-ES reproducibility study): Figures 3.1-3.5.

The thesis has one sub-figure per dataset (MQ2007, MQ2008, MSLR-WEB10K, Yahoo!), each with
the linear and neural rankers under three click models; here a row is a dataset and a ranker,
a column a click model.
"""

from __future__ import annotations

from experiments.lib.paper_figures.fpdgd import interactions_per_round
from experiments.lib.paper_figures.pool import Pool, _clicks
from experiments.lib.paper_figures.structure import (
    COLOURS,
    CYCLE,
    REDS,
    PaperFigure,
    _click_title,
    _grid,
    _line,
    _panel,
)
from experiments.lib.recipes.thesis import P_VALUES

RANKERS = ("linear", "neural")
MAXRR = "mean batch MaxRR"  # the thesis's axis: MaxRR of the clicks, averaged over a batch


def _rows(pool: Pool):
    return [(d, r) for d in pool.datasets for r in RANKERS]


def _row_titles(pool: Pool):
    return [f"{d}, {r} ranker" for d, r in _rows(pool)]


def _foltr_es(pool, ranker, p, click, dataset):
    return pool.one(run=f"foltr_es_{ranker}_p{p}_{click}", dataset=dataset)


def _figure(pool, name, caption, lines, curve, ylabel):
    clicks = _clicks(pool)
    panels = _grid(
        _rows(pool), clicks, lambda row, click: _panel(_click_title(click), lines(*row, click))
    )
    return PaperFigure(
        name, caption, _row_titles(pool), [_click_title(c) for c in clicks], panels, curve, ylabel
    )


def fig3_1(pool: Pool, recipe):
    def by_p(dataset, ranker, click):
        return [
            _line(_foltr_es(pool, ranker, p, click, dataset), f"FOLtR-ES p = {p:g}", REDS[i + 1])
            for i, p in enumerate(P_VALUES)
        ]

    def against_pdgd(dataset, ranker, click):
        pdgd = pool.one(run=f"pdgd_{ranker}", panel=click, dataset=dataset)
        return [
            _line(_foltr_es(pool, ranker, 1.0, click, dataset), "FOLtR-ES p = 1", REDS[3]),
            _line(pdgd, "PDGD (batch)", COLOURS["PDGD (same budget)"], "-."),
        ]

    out = [
        _figure(
            pool,
            "Figure 3.1",
            "Performance of FOLtR-ES across datasets under three click models (RQ1.1.1).",
            by_p,
            "online_max_rr",
            MAXRR,
        ),
        _figure(
            pool,
            "Figure 3.3",
            "FOLtR-ES and PDGD with p = 1 and 2,000 clients (RQ1.1.3).",
            against_pdgd,
            "online_max_rr",
            MAXRR,
        ),
        _figure(
            pool,
            "Figure 3.4",
            "FOLtR-ES in terms of online nDCG@10 from the relevance labels of the SERPs shown "
            "(RQ1.1.4).",
            by_p,
            "online_ndcg",
            "online nDCG@10",
        ),
        _figure(
            pool,
            "Figure 3.5",
            "FOLtR-ES and PDGD in terms of offline nDCG@10, p = 1, 2,000 clients (RQ1.1.4).",
            against_pdgd,
            "offline_ndcg",
            "offline nDCG@10",
        ),
    ]
    return out, []


def fig3_2(pool: Pool, recipe):
    sizes = sorted({int(run.name.split("_c")[1].split("_")[0]) for run in recipe.runs})

    def by_clients(dataset, ranker, click):
        out = []
        for i, n in enumerate(sizes):
            s = pool.one(run=f"foltr_es_{ranker}_c{n}_{click}", dataset=dataset)
            per_round = float(interactions_per_round(s)) if s is not None else 1.0
            out.append(_line(s, f"|C| = {n:,}", CYCLE[i], x_per_round=per_round))
        return out

    figure = _figure(
        pool,
        "Figure 3.2",
        "FOLtR-ES with respect to the number of clients, at a fixed number of ranker updates "
        "(B = 4, p = 0.9; RQ1.1.2).",
        by_clients,
        "online_max_rr",
        MAXRR,
    )
    figure.xlabel = "ranker updates (interactions), |C|·B per global update"
    return [figure], []
