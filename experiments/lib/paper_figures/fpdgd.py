"""The FPDGD paper's Figures 2-6 and Table 2."""

from __future__ import annotations

import numpy as np

from experiments.lib import figures
from experiments.lib.paper_figures.pool import Pool, _clicks
from experiments.lib.paper_figures.structure import (
    BLUES,
    CYCLE,
    REDS,
    PaperFigure,
    PaperTable,
    _click_title,
    _grid,
    _line,
    _mean_text,
    _number,
    _panel,
    _pvalue,
    colour_for,
)


def fig2(pool: Pool, recipe):
    clicks = _clicks(pool)
    eps = sorted({s.fields.get("epsilon") for s in pool.find(run="fpdgd")} - {None})
    ps = sorted({float(s.run_label.split("= ")[1]) for s in pool.find(prefix="foltr_es")})

    def lines(dataset, click):
        out = []
        for i, e in enumerate(eps):
            s = pool.one(run="fpdgd", panel=click, dataset=dataset, epsilon=e)
            out.append(_line(s, f"FPDGD ε = {_number(e)}", BLUES[i % 4], "-", "v^sD"[i % 4]))
        for run, style in (("pdgd_same_updates", "--"), ("pdgd", "-.")):
            s = pool.one(run=run, panel=click, dataset=dataset)
            out.append(_line(s, s and s.run_label, s and colour_for(s.run_label), style))
        for i, p in enumerate(ps):
            s = pool.one(run=f"foltr_es_p{p}_{click}", dataset=dataset)
            out.append(_line(s, f"FOLtR-ES p = {_number(p)}", REDS[i % 4], ":", "o"))
        return _panel(f"{dataset}, {_click_title(click)}", out)

    panels = _grid(pool.datasets, clicks, lines)
    rows, columns = pool.datasets, [_click_title(c) for c in clicks]
    out = [
        PaperFigure(
            "Figure 2",
            "Offline performance (nDCG@10) across datasets, under different click models; "
            "shaded areas: standard deviation.",
            rows,
            columns,
            panels,
        ),
        PaperFigure(
            "Figure 3",
            "Offline performance in terms of MaxRR across datasets, under three click models.",
            rows,
            columns,
            panels,
            curve="offline_mrr",
            ylabel="offline MaxRR",
        ),
    ]
    # Table 2: online performance, FPDGD ε against FOLtR-ES p (p ↔ ε: 0.25 ↔ 1.2, ...).
    pairs = list(zip(eps, ps))
    table_rows, tests = [], []
    for dataset in pool.datasets:
        table_rows.append([dataset] + [""] * len(pairs))
        for click in clicks:
            fp = [pool.one(run="fpdgd", panel=click, dataset=dataset, epsilon=e) for e, _ in pairs]
            es = [pool.one(run=f"foltr_es_p{p}_{click}", dataset=dataset) for _, p in pairs]
            row_f, row_e = [f"{_click_title(click)}: FPDGD"], ["FOLtR-ES"]
            for a, b in zip(fp, es):
                va = None if a is None else a.online_performance
                vb = None if b is None else b.online_performance
                row_f.append(_mean_text(va, 2))
                row_e.append(_mean_text(vb, 2))
                tests.append((len(table_rows), len(row_f) - 1, va, vb))
            table_rows += [row_f, row_e]
    ps_found = [(r, c, va, vb, _pvalue(va, vb)) for r, c, va, vb in tests]
    k = max(1, sum(p is not None for *_, p in ps_found))
    for r, c, va, vb, p in ps_found:
        if p is None:
            continue
        up = np.mean(va) > np.mean(vb)
        if p * k < 0.01:
            table_rows[r][c] += " ▲" if up else " ▼"
        elif p * k < 0.05:
            table_rows[r][c] += " △" if up else " ▽"
    tables = [
        PaperTable(
            "Table 2",
            "Online performance under different instantiations of CCM.",
            [""] + [f"ε = {_number(e)} (p = {_number(p)})" for e, p in pairs],
            table_rows,
            "Significant gains and losses of FPDGD over FOLtR-ES: △ ▽ (p < 0.05), ▲ ▼ "
            f"(p < 0.01); two-tailed Student's t-test, Bonferroni over {k} comparisons.",
        )
    ]
    return out, tables


def _fpdgd_by_run(pool: Pool, recipe, name, caption, dp_split: bool, interactions=False):
    """One panel per click model, a line per run (and per DP setting with ``dp_split``);
    ``interactions``: x is the interactions spent, round·|C|·|B| (a fixed budget)."""
    clicks = _clicks(pool)
    dataset = pool.datasets[0] if pool.datasets else ""
    runs = [run for run in recipe.runs]

    def lines(click):
        out = []
        for i, run in enumerate(runs):
            found = pool.find(run=run.name, panel=click)
            for s in sorted(found, key=lambda s: -(s.fields.get("epsilon") or 0)):
                dp = (s.fields.get("epsilon") or 0) > 0
                label = run.label
                if dp_split:
                    label += ", w DP" if dp else ", w/o DP"
                per_round = 1.0
                if interactions:
                    per_round = float(s.fields["n_clients"] * s.fields["local_updates"])
                style = "-" if dp or not dp_split else "--"
                out.append(_line(s, label, CYCLE[i], style, x_per_round=per_round))
        return _panel(_click_title(click), out)

    panels = [[lines(c) for c in clicks]]
    figure = PaperFigure(name, caption, [dataset], [_click_title(c) for c in clicks], panels)
    if interactions:
        figure.xlabel = "interactions (queries), |C|·|B| per global update"
    return [figure], []


def fig4(pool, recipe):
    return _fpdgd_by_run(
        pool,
        recipe,
        "Figure 4",
        "Offline performance for different numbers of clients |C|, FPDGD with (w DP) and "
        "without (w/o DP) differential privacy.",
        True,
    )


def fig5(pool, recipe):
    return _fpdgd_by_run(
        pool,
        recipe,
        "Figure 5",
        "Influence of batch size |B| on offline performance (ε = 4.5, Δ = 5).",
        False,
    )


def interactions_per_round(series) -> int:
    """|C|·|B|: the interactions one global update of an FPDGD run spends."""
    return int(series.fields["n_clients"]) * int(series.fields["local_updates"])


def ndcg_after_interactions(series, interactions: int) -> np.ndarray:
    """[runs] offline nDCG@10 of the global model once ``interactions`` are spent: after
    the last global update (of those evaluated) that the budget covers; the initial
    model's before the first."""
    done = interactions // interactions_per_round(series)
    rounds = figures.curve_rounds(series, series.offline_ndcg)
    column = np.searchsorted(rounds, done, side="right") - 1
    if column < 0:
        return np.asarray(series.initial_offline_ndcg)
    return series.offline_ndcg[:, column]


def fig6(pool, recipe):
    out, _ = _fpdgd_by_run(
        pool,
        recipe,
        "Figure 6",
        "Influence of batch size |B| on offline performance under fixed budget "
        "(|C|·|B|·T, |C| = 1,000; ε = 4.5, Δ = 5).",
        False,
        interactions=True,
    )
    # The text's reading of Figure 6 (§5.3): "a small batch size guarantees earlier updates,
    # thus resulting in stronger initial performance"; at the end "quite similar".
    found = [s for run in recipe.runs for s in pool.find(run=run.name)]
    if not found:
        return out, []
    first = min(interactions_per_round(s) for s in found)  # the smallest B's first update
    step = max(interactions_per_round(s) for s in found)  # the largest B's first update
    budget = max(interactions_per_round(s) * s.offline_ndcg.shape[1] for s in found)
    points = [first, step, budget]
    header = [""] + [f"after {p:,} interactions" for p in points]
    rows = []
    for click in _clicks(pool):
        for run in recipe.runs:
            s = pool.one(run=run.name, panel=click)
            if s is not None:
                cells = [_mean_text(ndcg_after_interactions(s, p), 3) for p in points]
                rows.append([f"{_click_title(click)}: {run.label}"] + cells)
    note = (
        f"Offline nDCG@10 (mean over runs) once the same number of interactions is spent: "
        f"{first:,} and {step:,} when the smallest and the largest |B| make their first global "
        f"update, {budget:,} the whole budget."
    )
    title = "Figure 6, read at fixed budgets"
    table = PaperTable(title, "Small |B| updates earlier.", header, rows, note)
    return out, [table]
