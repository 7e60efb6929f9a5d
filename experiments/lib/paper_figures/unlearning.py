"""The unlearning paper's Figures 2-3 and Table 3."""

from __future__ import annotations

import numpy as np

from experiments.lib.paper_figures.pool import _clicks
from experiments.lib.paper_figures.structure import (
    COLOURS,
    PaperFigure,
    PaperTable,
    _click_title,
    _line,
    _mean_text,
    _panel,
    _pvalue,
)


def _nearest(values, target):
    return min(values, key=lambda v: (abs(v - target), -v)) if values else None


def _cell(cells, click, n, d):
    """The unlearning cell of ``click`` with n′ = ``n`` and Δt = ``d`` (None if not run)."""
    return next(
        (s for s in cells if s.panel == click and s.fields["n′"] == n and s.fields["Δt"] == d),
        None,
    )


def table3(pool, recipe):
    clicks = _clicks(pool)
    configurations = [s.fields["method"] for s in pool.series if "Δt" not in s.fields]
    names = list(dict.fromkeys(configurations))  # 10H-0M, 9H-1M, 9H-0M
    honest, malicious, retrained = (names + ["", "", ""])[:3]
    fig2 = _figure2(pool, clicks, names, honest, malicious, retrained)
    cells = [s for s in pool.series if "Δt" in s.fields]
    steps = sorted({s.fields["n′"] for s in cells}, reverse=True)
    deltas = sorted({s.fields["Δt"] for s in cells})
    n3, d10 = _nearest(steps, 3), _nearest(deltas, 10)
    unlearned = cells[0].fields["method"] if cells else "U(9H-1M)"
    fig3 = _figure3(pool, clicks, cells, n3, d10, unlearned, retrained)
    table = _table3(pool, clicks, cells, steps, deltas, unlearned, retrained)
    return [fig2, fig3], [table]


def _figure2(pool, clicks, names, honest, malicious, retrained) -> PaperFigure:
    """Fig. 2: the three configurations' learning curves, one panel per click model."""
    colours = {honest: COLOURS["10H-0M"], malicious: COLOURS["9H-1M"], retrained: COLOURS["9H-0M"]}
    styles = {honest: "-", malicious: "--", retrained: ":"}
    return PaperFigure(
        "Fig. 2",
        f"Offline effectiveness (nDCG@10) under the {malicious} (green), {honest} (black) and "
        f"{retrained} (pink) configurations.",
        [pool.datasets[0] if pool.datasets else ""],
        [_click_title(c) for c in clicks],
        [
            [
                _panel(
                    _click_title(c),
                    [_line(pool.one(panel=c, method=n), n, colours[n], styles[n]) for n in names],
                )
                for c in clicks
            ]
        ],
    )


def _figure3(pool, clicks, cells, n3, d10, unlearned, retrained) -> PaperFigure:
    """Fig. 3: unlearning (n′ = n3, Δt = d10) against the retrained ranker's final value."""
    return PaperFigure(
        "Fig. 3",
        f"Offline effectiveness after unlearning ({unlearned}, 'unlearn', n′ = {n3}, Δt = "
        f"{d10}) against the ranker retrained from scratch ({retrained}, 'baseline': its final "
        "nDCG@10).",
        [pool.datasets[0] if pool.datasets else ""],
        [_click_title(c) for c in clicks],
        [
            [
                _panel(
                    _click_title(c),
                    [
                        _line(_cell(cells, c, n3, d10), "unlearn", COLOURS["unlearn"]),
                        _line(
                            pool.one(panel=c, method=retrained),
                            "baseline",
                            COLOURS["baseline"],
                            "--",
                            constant=True,
                        ),
                    ],
                )
                for c in clicks
            ]
        ],
        xlabel="global steps of unlearning",
    )


def _table3(pool, clicks, cells, steps, deltas, unlearned, retrained) -> PaperTable:
    """Table 3: 9H-0M and U(9H-1M) per n′ (rows a, b, ...) by click model and Δt."""
    letters = "abcdefgh"
    header = ["#", "Ranker"] + [f"{_click_title(c)}, Δt = {d}" for c in clicks for d in deltas]
    base_row = ["", retrained]
    rows = [[letters[i], f"{unlearned}, n′ = {n}"] for i, n in enumerate(steps)]
    k = 0
    pending = []
    for c in clicks:
        base = pool.one(panel=c, method=retrained)
        for d in deltas:
            values = [_cell(cells, c, n, d) for n in steps]
            finals = [None if s is None else s.final_offline_ndcg for s in values]
            b = None if base is None else base.final_offline_ndcg
            means = [np.mean(v) for v in finals if v is not None] + (
                [np.mean(b)] if b is not None else []
            )
            best = max(means) if means else None
            marks = ""
            for i, v in enumerate(finals):
                p = _pvalue(b, v, paired=True)
                if p is not None:
                    k += 1
                    pending.append((len(base_row), i, p, float(np.mean(b) - np.mean(v))))
            for i, v in enumerate(finals):
                text = _mean_text(v, 3)
                if v is not None and np.mean(v) == best:
                    text = f"**{text}**"
                rows[i].append(text)
            text = _mean_text(b, 3)
            if b is not None and np.mean(b) == best:
                text = f"**{text}**"
            base_row.append(text + marks)
    for column, i, p, difference in pending:
        if p * k <= 0.05 and difference > 0:
            base_row[column] += f"^{letters[i]}"
    return PaperTable(
        "Table 3",
        f"Offline effectiveness (nDCG@10) of {retrained} (retrained from scratch) and "
        f"{unlearned} by n′ and Δt.",
        header,
        [base_row] + rows,
        "bold: best; ^x: the retrained ranker is significantly better than row x (paired "
        f"Student's t-test, Bonferroni over {k} comparisons, p ≤ 0.05).",
    )
