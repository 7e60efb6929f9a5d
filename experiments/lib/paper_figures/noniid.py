"""The thesis's non-IID figures (4.x) and Tables 4.2-4.3."""

from __future__ import annotations

from experiments.lib.paper_figures.structure import (
    CLICKS,
    CYCLE,
    PaperFigure,
    PaperTable,
    _click_title,
    _line,
    _mean_text,
    _panel,
    _pvalue,
    colour_for,
)


def _cell_name(name: str) -> str:
    """A non-IID cell's name in the thesis's words."""
    if name == "iid":
        return "IID"
    if name == "noniid":
        return "non-IID"
    if name.startswith("fedprox"):
        return "FedProx μ = " + name.split("=")[-1]
    return {"fedper": "FedPer", "sharing": "Data-sharing"}.get(name, name)


def _cell_colour(name: str, i: int) -> str:
    if name.startswith("FedProx"):
        greens = ("#74c476", "#31a354", "#006d2c", "#00441b", "#a1d99b")
        return greens[i % len(greens)]
    return colour_for(name, i)


def _noniid_lines(series_list, names=None, suffix="", linestyle="-", colour=None):
    out, prox = [], 0
    for s in series_list:
        name = _cell_name(s.fields["method"])
        if names is not None and not any(name.startswith(n) for n in names):
            continue
        c = colour or _cell_colour(name, prox)
        marker = {"FedPer": "P", "Data-sharing": "*"}.get(name)
        if name.startswith("FedProx"):
            marker = "osv^D"[prox % 5]
        prox += name.startswith("FedProx")
        style = "-" if name == "IID" else ("--" if name == "non-IID" else linestyle)
        out.append(_line(s, name + suffix, c, style, marker))
    return out


def _online_table(pool, name, caption, row_groups, columns):
    """Thesis Tables 4.2-4.3: online performance of IID and non-IID, ▲ where they differ."""
    header = [""] + [title for title, _ in columns]
    rows, k, cells = [], 0, {}
    for group_title, click in row_groups:
        for cell in ("iid", "noniid"):
            row = [f"{_cell_name(cell)}, {group_title}"]
            for _, runs in columns:
                s = pool.one(prefix=runs(click), method=cell)
                values = None if s is None else s.online_performance
                row.append(_mean_text(values, 2))
                cells[(group_title, cell, runs(click))] = values
            rows.append(row)
    marks = []
    for r, (group_title, click) in enumerate(row_groups):
        for c, (_, runs) in enumerate(columns):
            p = _pvalue(
                cells[(group_title, "iid", runs(click))],
                cells[(group_title, "noniid", runs(click))],
            )
            if p is not None:
                k += 1
                marks.append((2 * r, c + 1, p))
    for r, c, p in marks:
        if p * k < 0.05:
            rows[r][c] += " ▲"
    note = (
        f"▲: IID differs from non-IID (two-tailed Student's t-test, Bonferroni over {k} "
        "comparisons, p < 0.05)."
    )
    return PaperTable(name, caption, header, rows, note)


def type1(pool, recipe):
    clicks = CLICKS
    rankers = [
        ("linear", "intent-change (linear ranker)"),
        ("neural", "intent-change (neural ranker)"),
    ]
    rankers = [(r, t) for r, t in rankers if pool.find(prefix=f"{r}_")]

    def fig43(ranker, click):
        found = pool.find(run=f"{ranker}_{click}")
        return _panel(_click_title(click), _noniid_lines(found, ("IID", "non-IID")))

    def fig44(ranker, click):
        return _panel(_click_title(click), _noniid_lines(pool.find(run=f"{ranker}_{click}")))

    remedies = {"linear": "FedProx", "neural": "FedPer"}
    out = [
        PaperFigure(
            "Figure 4.3",
            "Offline performance (nDCG@10) on Type 1 data.",
            [t for _, t in rankers],
            [_click_title(c) for c in clicks],
            [[fig43(r, c) for c in clicks] for r, _ in rankers],
        ),
        PaperFigure(
            "Figure 4.4",
            "Offline performance on Type 1 data for FedProx and FedPer.",
            [f"{t} - {remedies[r]}" for r, t in rankers],
            [_click_title(c) for c in clicks],
            [[fig44(r, c) for c in clicks] for r, _ in rankers],
        ),
    ]
    table = _online_table(
        pool,
        "Table 4.2",
        "Online performance (discounted cumulative nDCG@10) on Type 1 data.",
        [(f"{r} ranker", r) for r, _ in rankers],
        [(_click_title(c), (lambda r, c=c: f"{r}_{c}")) for c in clicks],
    )
    return out, [table]


def type2(pool, recipe):
    clicks = CLICKS
    rankers = [r for r in ("linear", "neural") if pool.find(prefix=f"{r}_b")]
    bs = sorted(
        {int(s.run.split("_b")[1].split("_")[0]) for s in pool.find(prefix="") if "_b" in s.run}
    )

    def fig45(ranker, click):
        out = []
        for i, b in enumerate(bs):
            found = pool.find(run=f"{ranker}_b{b}_{click}")
            for s in found:
                if s.fields["method"] in ("iid", "noniid"):
                    iid = s.fields["method"] == "iid"
                    label = f"{'IID' if iid else 'non-IID'}, B = {b}"
                    out.append(_line(s, label, CYCLE[i], "-" if iid else "--"))
        return _panel(_click_title(click), out)

    def fig47(ranker, click):
        b = 5 if 5 in bs else bs[len(bs) // 2]
        return _panel(_click_title(click), _noniid_lines(pool.find(run=f"{ranker}_b{b}_{click}")))

    rows = [f"{', '.join(pool.datasets)} ({r} ranker)" for r in rankers]
    out = [
        PaperFigure(
            "Figure 4.5",
            "Offline performance (nDCG@10) for Type 2 (#R = 1), B ∈ {2, 5, 10}.",
            rows,
            [_click_title(c) for c in clicks],
            [[fig45(r, c) for c in clicks] for r in rankers],
        ),
        PaperFigure(
            "Figure 4.7",
            "Offline performance when using Data-sharing, FedProx and FedPer on Type 2 "
            "non-IID data (#R = 1), |C| = 5, B = 5.",
            rows,
            [_click_title(c) for c in clicks],
            [[fig47(r, c) for c in clicks] for r in rankers],
        ),
    ]
    columns = [
        (f"{r} ranker, B = {b}", (lambda click, r=r, b=b: f"{r}_b{b}_{click}"))
        for r in rankers
        for b in bs
        if pool.find(prefix=f"{r}_b{b}_")
    ]
    table = _online_table(
        pool,
        "Table 4.3",
        "Online performance (discounted cumulative nDCG@10) for Type 2 (#R = 1).",
        [(_click_title(c), c) for c in clicks],
        columns,
    )
    return out, [table]


def type2_r2(pool, recipe):
    rankers = [r for r in ("linear", "neural") if pool.find(prefix=f"{r}_")]
    return [
        PaperFigure(
            "Figure 4.6",
            "Offline performance (nDCG@10) for Type 2 (#R = 2), |C| = 10, B = 5.",
            [f"{', '.join(pool.datasets)} ({r} ranker)" for r in rankers],
            [_click_title(c) for c in CLICKS],
            [
                [_panel(_click_title(c), _noniid_lines(pool.find(run=f"{r}_{c}"))) for c in CLICKS]
                for r in rankers
            ],
        )
    ], []


def type3(pool, recipe):
    kinds = [k for k in ("ccm", "pbm") if pool.find(run=k)]
    return [
        PaperFigure(
            "Figure 4.8",
            "Offline performance (nDCG@10) for Type 3, separately under CCM and PBM clicks.",
            [", ".join(pool.datasets)],
            [f"linear ranker under {k.upper()} clicks" for k in kinds],
            [
                [
                    _panel(
                        f"linear ranker under {k.upper()} clicks", _noniid_lines(pool.find(run=k))
                    )
                    for k in kinds
                ]
            ],
        )
    ], []


def type4(pool, recipe):
    parts = [
        ("alone", "(a) Type 4"),
        ("intents", "(b) intent-change mixed with type 1"),
        ("labels", "(c) mixed with type 2 (#R = 1)"),
    ]
    parts = [(p, t) for p, t in parts if pool.find(prefix=f"{p}_")]
    return [
        PaperFigure(
            "Figure 4.9",
            "Offline performance (nDCG@10) for Type 4, under three instantiations of CCM.",
            [t for _, t in parts],
            [_click_title(c) for c in CLICKS],
            [
                [_panel(_click_title(c), _noniid_lines(pool.find(run=f"{p}_{c}"))) for c in CLICKS]
                for p, _ in parts
            ],
        )
    ], []
