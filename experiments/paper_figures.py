"""The papers' figures and tables, panel for panel, from a batch recipe's results.

A recipe (experiments/batch.py) names each of its runs in the paper's words (``Run.label``:
"FOLtR-ES p = 0.25", "|C| = 10", "FedIPS, γ = 0.5"); a grid run's cells add their own part
in the paper's words too (FPDGD's ε, the poisoning paper's share of attackers, the
unlearning paper's 9H-1M).  LAYOUTS holds, per recipe, a function that picks the Series of
each panel of each of the paper's figures and tables:

    layout(pool: Pool, recipe) -> (list[PaperFigure], list[PaperTable])

``make_page`` draws them: every figure to figure_<n>.png/.pdf, everything on one page
(page.png, page.pdf) to lay next to the paper, and paper.json (the structure: panels, line
labels, table cells; strict JSON) for tests and readers.  Runs of the same setting on several
folds of a dataset are pooled, as the papers average over folds.

Where the paper's text does not fix the layout (its figure images are not in papers/), the
layout is a reading of its caption and text:
- poisoning Figure 4: the defences are drawn with the smallest m of the grid as their assumed
  number of attackers (the paper does not say which m its no-attack defences assumed);
- thesis Figure 4.4: one row per ranker with the remedy the recipe runs for it (linear: FedProx
  over μ, neural: FedPer); Figure 4.7: one row per ranker with every remedy run at B = 5;
- thesis Figure 4.8: one panel per click-model family (CCM, PBM), as its sub-captions;
- FedIPS Figure 1: one panel per γ (the paper also varies the dataset, K and m); λLinear is a
  horizontal line at its final NDCG@5; Figure 2 (right) has one m, not the paper's several;
- unlearning Figure 3 and Table 3 use the n′ and Δt of the grid nearest to the paper's
  (n′ = 3, Δt = 10) when the grid (--quick) lacks them; Table 3's superscripts mark the rows the
  retrained 9H-0M is significantly better than.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import re

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from experiments import figures
from foltr_jax import statistics

CLICK_NAMES = {
    "perfect": "Perfect",
    "navigational": "Navigational",
    "informational": "Informational",
}
CLICKS = tuple(CLICK_NAMES)
POISON_NAMES = {
    "fedavg": "FedAvg",
    "krum": "Krum",
    "multi_krum": "Multi-Krum",
    "trimmed_mean": "Trimmed Mean",
    "median": "Median",
}
DEFENCES = ("krum", "multi_krum", "trimmed_mean", "median")
MAX_POINTS = 400  # per drawn curve

# One colour per method (or per value of the parameter a figure varies), whatever the figure.
BLUES = ("#9ecae1", "#4292c6", "#2171b5", "#08306b")
REDS = ("#fdae6b", "#f16913", "#d94801", "#7f2704")
PURPLES = ("#bcbddc", "#9e9ac8", "#807dba", "#6a51a3", "#3f007d")
CYCLE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
COLOURS = {
    "PDGD (same budget)": "#000000",
    "PDGD (same updates)": "#7f7f7f",
    "honest": "#000000",
    "IID": "#000000",
    "non-IID": "#d62728",
    "Data-sharing": "#ff7f0e",
    "FedPer": "#9467bd",
    "FedAvg": "#d62728",
    "FedIPS": "#1f77b4",
    "FedIPS (real IPS)": "#1f77b4",
    "FedIPS (estimated IPS)": "#2ca02c",
    "Krum": "#1f77b4",
    "Multi-Krum": "#ff7f0e",
    "Trimmed Mean": "#2ca02c",
    "Median": "#9467bd",
    "10H-0M": "#000000",
    "9H-1M": "#2ca02c",
    "9H-0M": "#e377c2",
    "unlearn": "#1f77b4",
    "baseline": "#e377c2",
}
SHARE_COLOURS = {10: "#1f77b4", 20: "#ff7f0e", 30: "#2ca02c", 40: "#d62728"}


def colour_for(key: str, i: int = 0) -> str:
    return COLOURS.get(key, CYCLE[i % len(CYCLE)])


# -------------------------------------------------------------------------------- structure


@dataclasses.dataclass
class Line:
    label: str
    series: figures.Series
    colour: str
    linestyle: str = "-"
    marker: str | None = None
    constant: bool = False  # drawn as its final mean across the panel (unlearning Figure 3)


@dataclasses.dataclass
class Panel:
    title: str
    lines: list


@dataclasses.dataclass
class PaperFigure:
    name: str  # "Figure 2"
    caption: str  # the paper's caption, short
    rows: list  # row titles ("" for none)
    columns: list  # column titles
    panels: list  # [row][column] -> Panel | None
    curve: str = "offline_ndcg"  # the Series attribute drawn
    ylabel: str = "offline nDCG@10"
    xlabel: str = "global updates"


@dataclasses.dataclass
class PaperTable:
    name: str
    caption: str
    header: list  # column titles (the first: the row titles' header)
    rows: list  # [[row title, cell, cell, ...]]
    note: str = ""


# ------------------------------------------------------------------------------------ pool


def dataset_of(series: figures.Series) -> str:
    """The dataset, without its fold: 'MSLR-WEB10K', 'synthetic', 'synthetic intents'."""
    group = series.group
    if group.startswith("synthetic intents"):
        return "intent-change (synthetic)"
    if group.startswith("synthetic"):
        return "synthetic"
    name = group.split(", ")[0]
    return re.sub(r"/Fold\d+$", "", name).split("/")[-1] if "/" in name else name


def run_of(series: figures.Series) -> str:
    """The recipe run a Series came from: the folder under the fold's folder."""
    parts = pathlib.PurePosixPath(series.source).parts
    return parts[1] if len(parts) >= 3 else parts[0]


def _concat(arrays):
    if any(a is None for a in arrays):
        return None
    if arrays[0].ndim == 2:
        width = min(a.shape[1] for a in arrays)
        return np.concatenate([a[:, :width] for a in arrays])
    return np.concatenate(arrays)


class Pool:
    """Every Series of a recipe's results, pooled across folds, found by run and fields."""

    def __init__(self, series: list, recipe=None):
        labels = {run.name: run.label for run in getattr(recipe, "runs", ())}
        merged = {}
        for s in series:
            fields = json.dumps(s.fields, sort_keys=True, default=str)
            key = (run_of(s), dataset_of(s), s.panel, fields)
            merged.setdefault(key, []).append(s)
        self.series = []
        for (run, dataset, _, _), found in merged.items():
            first = found[0]
            pooled = dataclasses.replace(
                first,
                run_ids=[r for s in found for r in s.run_ids],
                **{
                    name: _concat([getattr(s, name) for s in found])
                    for name in (
                        "final_offline_ndcg",
                        "online_performance",
                        "offline_ndcg",
                        "offline_mrr",
                        "initial_offline_ndcg",
                    )
                },
            )
            pooled.run = run
            pooled.dataset = dataset
            pooled.run_label = labels.get(run, "")
            pooled.folds = len(found)
            self.series.append(pooled)
        self.datasets = list(dict.fromkeys(s.dataset for s in self.series))

    def find(self, run=None, panel=None, dataset=None, prefix=None, **fields) -> list:
        """The Series matching: run name (or its prefix), panel, dataset and field values."""
        out = []
        for s in self.series:
            if run is not None and s.run != run:
                continue
            if prefix is not None and not s.run.startswith(prefix):
                continue
            if panel is not None and s.panel != panel:
                continue
            if dataset is not None and s.dataset != dataset:
                continue
            if any(s.fields.get(k) != v for k, v in fields.items()):
                continue
            out.append(s)
        return out

    def one(self, **conditions):
        found = self.find(**conditions)
        return found[0] if found else None


def _grid(rows, columns, make) -> list:
    return [[make(r, c) for c in columns] for r in rows]


def _panel(title, lines) -> Panel | None:
    lines = [line for line in lines if line is not None and line.series is not None]
    return Panel(title, lines) if lines else None


def _line(series, label, colour, linestyle="-", marker=None, constant=False):
    if series is None:
        return None
    return Line(label, series, colour, linestyle, marker, constant)


def _number(value) -> str:
    value = float(value)
    return f"{value:g}"


def _clicks(pool: Pool) -> list:
    found = {s.panel for s in pool.series}
    return [c for c in CLICKS if c in found] + sorted(found - set(CLICKS))


def _click_title(click: str) -> str:
    return CLICK_NAMES.get(click, click)


def _mean_text(values, digits=4) -> str:
    return "–" if values is None else f"{np.mean(values):.{digits}f}"


def _pvalue(a, b, paired=False) -> float | None:
    if a is None or b is None or len(a) < 2 or len(b) < 2:
        return None
    if paired and len(a) == len(b):
        return statistics.paired_t_test(a, b).p
    return statistics.t_test(a, b).p


# ------------------------------------------------------------------------------ FPDGD paper


def _fpdgd_fig2(pool: Pool, recipe):
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


def _fpdgd_by_run(pool: Pool, recipe, name, caption, dp_split: bool):
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
                out.append(_line(s, label, CYCLE[i], "-" if dp or not dp_split else "--"))
        return _panel(_click_title(click), out)

    panels = [[lines(c) for c in clicks]]
    return [PaperFigure(name, caption, [dataset], [_click_title(c) for c in clicks], panels)], []


def _fpdgd_fig4(pool, recipe):
    return _fpdgd_by_run(
        pool,
        recipe,
        "Figure 4",
        "Offline performance for different numbers of clients |C|, FPDGD with (w DP) and "
        "without (w/o DP) differential privacy.",
        True,
    )


def _fpdgd_fig5(pool, recipe):
    return _fpdgd_by_run(
        pool,
        recipe,
        "Figure 5",
        "Influence of batch size |B| on offline performance (ε = 4.5, Δ = 5).",
        False,
    )


def _fpdgd_fig6(pool, recipe):
    return _fpdgd_by_run(
        pool,
        recipe,
        "Figure 6",
        "Influence of batch size |B| on offline performance under a fixed budget |C|·|B|.",
        False,
    )


# ------------------------------------------------------------------------- thesis, non-IID


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


def _noniid_type1(pool, recipe):
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


def _noniid_type2(pool, recipe):
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


def _noniid_type2_r2(pool, recipe):
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


def _noniid_type3(pool, recipe):
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


def _noniid_type4(pool, recipe):
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


# -------------------------------------------------------------------------- poisoning paper


def _share(s) -> int:
    n = s.fields.get("n_clients") or 10
    return int(round(100 * s.fields.get("m", 0) / n))


def _poisoning(pool, recipe):
    clicks = _clicks(pool)
    counts = sorted({s.fields.get("m", 0) for s in pool.series} - {0})

    def honest(click):
        s = pool.one(panel=click, attack="none", aggregator="fedavg")
        return _line(s, "honest", "#000000", "-")

    def attacked(click, attack, aggregator, style, suffix=""):
        out = []
        for m in counts:
            s = pool.one(panel=click, attack=attack, aggregator=aggregator, m=m)
            if s is not None:
                share = _share(s)
                marker = None if style == "-" else "x"
                label = f"{share}%{suffix}"
                out.append(_line(s, label, SHARE_COLOURS.get(share, "#7f7f7f"), style, marker))
        return out

    columns = [_click_title(c) for c in clicks]
    fig2 = PaperFigure(
        "Figure 2",
        "Offline performance under data poisoning and the defences, attackers "
        "{10%, 20%, 30%, 40%}; solid: no defence, dashed: with the defence.",
        [POISON_NAMES[d] for d in DEFENCES],
        columns,
        [
            [
                _panel(
                    f"{POISON_NAMES[d]}, {_click_title(c)}",
                    [honest(c)]
                    + attacked(c, "data_poisoning", "fedavg", "-", ", no defence")
                    + attacked(c, "data_poisoning", d, "--", ", with the defence"),
                )
                for c in clicks
            ]
            for d in DEFENCES
        ],
    )
    fig3_rows = [
        (
            "(a) LIE vs data poisoning",
            lambda c: (
                [honest(c)]
                + attacked(c, "lie", "fedavg", "-", ", LIE")
                + attacked(c, "data_poisoning", "fedavg", "--", ", data poisoning")
            ),
        ),
        (
            "(b) Fang: full vs partial (Krum)",
            lambda c: (
                [honest(c)]
                + attacked(c, "fang_krum_full", "krum", "-", ", full knowledge")
                + attacked(c, "fang_krum_partial", "krum", "--", ", partial knowledge")
            ),
        ),
        (
            "(c) Fang vs data poisoning (Krum)",
            lambda c: (
                [honest(c)]
                + attacked(c, "fang_krum_full", "krum", "-", ", Fang")
                + attacked(c, "data_poisoning", "krum", "--", ", data poisoning")
            ),
        ),
    ]
    fig3 = PaperFigure(
        "Figure 3",
        "Offline performance under model poisoning attacks, attackers {10%, 20%, 30%, 40%}.",
        [t for t, _ in fig3_rows],
        columns,
        [
            [_panel(f"{t.split(')')[0]}) {_click_title(c)}", make(c)) for c in clicks]
            for t, make in fig3_rows
        ],
    )
    assumed = counts[0] if counts else 0

    def fig4(click):
        out = [
            _line(pool.one(panel=click, attack="none", aggregator="fedavg"), "FedAvg", "#000000")
        ]
        for i, d in enumerate(DEFENCES):
            s = pool.one(panel=click, attack="none", aggregator=d, m=assumed)
            out.append(
                _line(
                    s,
                    POISON_NAMES[d],
                    colour_for(POISON_NAMES[d]),
                    ("--", "-.", ":", "--")[i],
                    ("o", "s", "^", "D")[i],
                )
            )
        return _panel(_click_title(click), out)

    fig4_figure = PaperFigure(
        "Figure 4",
        "Offline performance when no attack is present but the defences are deployed "
        f"(each assuming {assumed} of the clients malicious).",
        [""],
        columns,
        [[fig4(c) for c in clicks]],
    )
    return [fig2, fig3, fig4_figure], []


# ------------------------------------------------------------------------- unlearning paper


def _nearest(values, target):
    return min(values, key=lambda v: (abs(v - target), -v)) if values else None


def _unlearning(pool, recipe):
    clicks = _clicks(pool)
    configurations = [s.fields["method"] for s in pool.series if "Δt" not in s.fields]
    names = list(dict.fromkeys(configurations))  # 10H-0M, 9H-1M, 9H-0M
    honest, malicious, retrained = (names + ["", "", ""])[:3]
    colours = {honest: COLOURS["10H-0M"], malicious: COLOURS["9H-1M"], retrained: COLOURS["9H-0M"]}
    styles = {honest: "-", malicious: "--", retrained: ":"}
    fig2 = PaperFigure(
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
    cells = [s for s in pool.series if "Δt" in s.fields]
    steps = sorted({s.fields["n′"] for s in cells}, reverse=True)
    deltas = sorted({s.fields["Δt"] for s in cells})
    n3, d10 = _nearest(steps, 3), _nearest(deltas, 10)
    unlearned = cells[0].fields["method"] if cells else "U(9H-1M)"
    fig3 = PaperFigure(
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
                        _line(
                            next(
                                (
                                    s
                                    for s in cells
                                    if s.panel == c
                                    and s.fields["n′"] == n3
                                    and s.fields["Δt"] == d10
                                ),
                                None,
                            ),
                            "unlearn",
                            COLOURS["unlearn"],
                        ),
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
    # Table 3: 9H-0M and U(9H-1M) per n′ (rows a, b, ...) by click model and Δt.
    letters = "abcdefgh"
    header = ["#", "Ranker"] + [f"{_click_title(c)}, Δt = {d}" for c in clicks for d in deltas]
    base_row = ["", retrained]
    rows = [[letters[i], f"{unlearned}, n′ = {n}"] for i, n in enumerate(steps)]
    k = 0
    pending = []
    for c in clicks:
        base = pool.one(panel=c, method=retrained)
        for d in deltas:
            values = [
                next(
                    (
                        s
                        for s in cells
                        if s.panel == c and s.fields["n′"] == n and s.fields["Δt"] == d
                    ),
                    None,
                )
                for n in steps
            ]
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
    table = PaperTable(
        "Table 3",
        f"Offline effectiveness (nDCG@10) of {retrained} (retrained from scratch) and "
        f"{unlearned} by n′ and Δt.",
        header,
        [base_row] + rows,
        "bold: best; ^x: the retrained ranker is significantly better than row x (paired "
        f"Student's t-test, Bonferroni over {k} comparisons, p ≤ 0.05).",
    )
    return [fig2, fig3], [table]


# ---------------------------------------------------------------------------- FedIPS paper


def _fedips_fig1(pool, recipe):
    gammas = sorted({float(s.run.split("_")[0][5:]) for s in pool.find(prefix="gamma")})
    full_information = pool.one(run="lambda_linear")
    dataset = pool.datasets[0] if pool.datasets else ""

    def panel(g):
        out = []
        for run, name, style in (
            (f"gamma{g}_known", "FedIPS", "-"),
            (f"gamma{g}_none", "FedAvg", "--"),
        ):
            for s in pool.find(run=run):
                out.append(_line(s, name, COLOURS[name], style))
        out.append(_line(full_information, "λLinear", "#000000", ":", constant=True))
        return _panel(f"γ = {_number(g)}", out)

    return [
        PaperFigure(
            "Figure 1",
            "NDCG@5 of FedIPS, FedAvg and λLinear (its final NDCG@5) by position bias γ "
            "(shaded: standard deviation; the paper shades the standard error).",
            [dataset],
            [f"γ = {_number(g)}" for g in gammas],
            [[panel(g) for g in gammas]],
            ylabel="NDCG@5",
            xlabel="rounds",
        )
    ], []


def _fedips_fig2(pool, recipe):
    users = sorted(int(s.run[5:]) for s in pool.series if s.run.startswith("users"))
    left = [
        _line(pool.one(run=f"users{u}"), f"|U| = {u}", PURPLES[i % 5], "-", "os^vD"[i % 5])
        for i, u in enumerate(users)
    ]
    right = []
    for p, style in (("estimated", "-"), ("known", "--"), ("none", ":")):
        s = pool.one(run=f"estimated_{p}")
        right.append(_line(s, s and s.run_label, s and colour_for(s.run_label), style))
    return [
        PaperFigure(
            "Figure 2",
            "Left: impact of the number of clients |U| on FedIPS. Right: estimated IPS.",
            [pool.datasets[0] if pool.datasets else ""],
            ["number of clients |U|", "estimated IPS"],
            [[_panel("FedIPS, |U|", left), _panel("estimated IPS", right)]],
            ylabel="NDCG@5",
            xlabel="rounds",
        )
    ], []


LAYOUTS = {
    "fpdgd_fig2": _fpdgd_fig2,
    "fpdgd_fig4": _fpdgd_fig4,
    "fpdgd_fig5": _fpdgd_fig5,
    "fpdgd_fig6": _fpdgd_fig6,
    "noniid_type1": _noniid_type1,
    "noniid_type2": _noniid_type2,
    "noniid_type2_r2": _noniid_type2_r2,
    "noniid_type3": _noniid_type3,
    "noniid_type4": _noniid_type4,
    "poisoning_figs2_4": _poisoning,
    "unlearning_table3": _unlearning,
    "fedips_fig1": _fedips_fig1,
    "fedips_fig2": _fedips_fig2,
}


# -------------------------------------------------------------------------------- drawing

PANEL_W, PANEL_H = 3.6, 2.6


def _legend_entries(figure: PaperFigure) -> list:
    """(label, colour, linestyle, marker) of every line, once, in drawing order."""
    seen = {}
    for row in figure.panels:
        for panel in row:
            for line in panel.lines if panel else ():
                seen.setdefault(line.label, (line.colour, line.linestyle, line.marker))
    return [(label, *style) for label, style in seen.items()]


def _legend_layout(figure: PaperFigure, width: float) -> tuple[int, int]:
    entries = _legend_entries(figure)
    if not entries:
        return 1, 0
    longest = max(len(e[0]) for e in entries)
    ncol = max(1, min(len(entries), int(width / (0.065 * longest + 0.6))))
    return ncol, math.ceil(len(entries) / ncol)


def figure_size(figure: PaperFigure) -> tuple[float, float]:
    width = max(PANEL_W * len(figure.columns), 7.5)
    _, legend_rows = _legend_layout(figure, width)
    return width, PANEL_H * len(figure.rows) + 0.22 * legend_rows + 0.9


def _draw_line(ax, line: Line, curve: str, index: int = 0) -> None:
    """Mean curve and ±sd band; markers staggered by ``index`` so that equal curves show."""
    s = line.series
    curves = getattr(s, curve)
    if curves is None:
        return
    x = figures.curve_rounds(s, curves)[: curves.shape[1]]
    if curve == "offline_ndcg" and s.initial_offline_ndcg is not None and not line.constant:
        curves = np.column_stack([s.initial_offline_ndcg, curves])
        x = np.concatenate([[0], x])
    if line.constant:
        final = curves[:, -1]
        ax.axhline(np.mean(final), color=line.colour, linestyle=line.linestyle, lw=1.4)
        return
    keep = np.unique(np.linspace(0, len(x) - 1, min(len(x), MAX_POINTS)).astype(int))
    mean = curves.mean(axis=0)[keep]
    every = max(1, len(keep) // 8)
    ax.plot(
        x[keep],
        mean,
        color=line.colour,
        linestyle=line.linestyle,
        marker=line.marker,
        markevery=(index * max(1, every // 4) % every, every),
        markersize=3.5,
        linewidth=1.3,
    )
    if len(curves) > 1:
        sd = curves.std(axis=0, ddof=1)[keep]
        ax.fill_between(x[keep], mean - sd, mean + sd, color=line.colour, alpha=0.15, lw=0)


def draw_figure(figure: PaperFigure, container) -> None:
    """Draws ``figure`` into a matplotlib Figure or SubFigure: panels, then a legend below."""
    width, height = figure_size(figure)
    ncol, legend_rows = _legend_layout(figure, width)
    legend_h = 0.22 * legend_rows + 0.15
    ratios = [PANEL_H] * len(figure.rows) + [legend_h]
    grid = container.add_gridspec(len(figure.rows) + 1, len(figure.columns), height_ratios=ratios)
    first = None
    for r, row in enumerate(figure.panels):
        for c, panel in enumerate(row):
            ax = container.add_subplot(grid[r, c], sharey=first)
            first = first or ax
            if panel is None:
                ax.text(0.5, 0.5, "not run", ha="center", va="center", transform=ax.transAxes)
                ax.set_xticks([])
            else:
                for index, line in enumerate(panel.lines):
                    _draw_line(ax, line, figure.curve, index)
                ax.set_title(panel.title, fontsize="small")
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize="x-small")
            if r == len(figure.rows) - 1:
                ax.set_xlabel(figure.xlabel, fontsize="small")
            if c == 0:
                ylabel = figure.ylabel
                if figure.rows[r]:
                    ylabel = f"{figure.rows[r]}\n{ylabel}"
                ax.set_ylabel(ylabel, fontsize="small")
    legend_ax = container.add_subplot(grid[-1, :])
    legend_ax.axis("off")
    entries = _legend_entries(figure)
    handles = [
        Line2D([], [], color=c, linestyle=ls, marker=m, markersize=4) for _, c, ls, m in entries
    ]
    if handles:
        legend_ax.legend(
            handles,
            [e[0] for e in entries],
            loc="center",
            ncol=ncol,
            fontsize="x-small",
            frameon=False,
        )
    container.suptitle(f"{figure.name}: {figure.caption}", fontsize="small", wrap=True)


def _clean(text: str) -> str:
    return text.replace("**", "")


def table_size(table: PaperTable) -> tuple[float, float]:
    widths = [
        max(len(_clean(str(row[i]))) for row in [table.header] + table.rows)
        for i in range(len(table.header))
    ]
    return max(7.5, 0.085 * sum(widths) + 0.5), 0.2 * (len(table.rows) + 1) + 0.9


def draw_table(table: PaperTable, container) -> None:
    ax = container.add_subplot(1, 1, 1)
    ax.axis("off")
    cells = [[_clean(str(x)) for x in row] for row in table.rows]
    widths = [
        max(len(_clean(str(row[i]))) for row in [table.header] + table.rows) + 2
        for i in range(len(table.header))
    ]
    total = sum(widths)
    drawn = ax.table(
        cellText=cells,
        colLabels=table.header,
        colWidths=[w / total for w in widths],
        bbox=[0, 0, 1, 1],
        cellLoc="center",
    )
    drawn.auto_set_font_size(False)
    drawn.set_fontsize(7)
    for (r, c), cell in drawn.get_celld().items():
        cell.set_linewidth(0.3)
        if r > 0 and "**" in str(table.rows[r - 1][c]):
            cell.get_text().set_fontweight("bold")
    container.suptitle(f"{table.name}: {table.caption}", fontsize="small", wrap=True)
    if table.note:
        container.supxlabel(table.note, fontsize="x-small", wrap=True)


def _save(fig: Figure, path: pathlib.Path) -> None:
    figures._save_figure(fig, path)


# -------------------------------------------------------------------------------- summary


def describe(paper_figures: list, tables: list) -> dict:
    """The structure of a recipe's figures and tables, JSON-ready (strict: no NaN)."""

    def line(line: Line) -> dict:
        s = line.series
        return {
            "label": line.label,
            "source": s.source,
            "run": s.run,
            "n_runs": int(len(s.final_offline_ndcg)),
            "folds": s.folds,
            "colour": line.colour,
            "linestyle": line.linestyle,
            "final_offline_ndcg": float(np.mean(s.final_offline_ndcg)),
        }

    out = {"figures": [], "tables": []}
    for f in paper_figures:
        panels = []
        for r, row in enumerate(f.panels):
            for c, panel in enumerate(row):
                panels.append(
                    {
                        "row": f.rows[r],
                        "column": f.columns[c],
                        "title": panel.title if panel else None,
                        "lines": [line(x) for x in panel.lines] if panel else [],
                    }
                )
        out["figures"].append(
            {
                "name": f.name,
                "caption": f.caption,
                "metric": f.ylabel,
                "rows": f.rows,
                "columns": f.columns,
                "panels": panels,
                "legend": [e[0] for e in _legend_entries(f)],
            }
        )
    for t in tables:
        out["tables"].append(
            {
                "name": t.name,
                "caption": t.caption,
                "header": t.header,
                "rows": t.rows,
                "note": t.note,
            }
        )
    return out


def markdown(recipe_name: str, tables: list) -> str:
    lines = [f"# {recipe_name}: the papers' tables", ""]
    for t in tables:
        lines += [f"## {t.name}: {t.caption}", ""]
        lines.append("| " + " | ".join(t.header) + " |")
        lines.append("|---" * len(t.header) + "|")
        lines += ["| " + " | ".join(str(x) for x in row) + " |" for row in t.rows]
        lines += ["", t.note, ""]
    return "\n".join(lines)


def _draw_all(paper_figures, tables, recipe, output_dir) -> list:
    """paper_<figure>.png/.pdf for every figure, and page.png/.pdf with figures and tables."""
    written = []
    sizes = [figure_size(f) for f in paper_figures] + [table_size(t) for t in tables]
    for i, f in enumerate(paper_figures):
        fig = Figure(figsize=sizes[i], layout="constrained")
        FigureCanvasAgg(fig)
        draw_figure(f, fig)
        stem = "paper_" + re.sub(r"[^a-z0-9]+", "_", f.name.lower()).strip("_")
        if f.curve != "offline_ndcg":
            stem += "_" + f.curve
        for suffix in ("png", "pdf"):
            _save(fig, output_dir / f"{stem}.{suffix}")
            written.append(f"{stem}.{suffix}")
    if sizes:
        width = max(w for w, _ in sizes)
        page = Figure(figsize=(width, sum(h for _, h in sizes) + 0.5), layout="constrained")
        FigureCanvasAgg(page)
        page.suptitle(f"{recipe.name}: {recipe.title}", fontsize="medium")
        subs = page.subfigures(len(sizes), 1, height_ratios=[h for _, h in sizes])
        subs = np.atleast_1d(subs)
        for sub, f in zip(subs, paper_figures):
            draw_figure(f, sub)
        for sub, t in zip(subs[len(paper_figures) :], tables):
            draw_table(t, sub)
        for suffix in ("png", "pdf"):
            _save(page, output_dir / f"page.{suffix}")
            written.append(f"page.{suffix}")
    return written


def make_page(results_dir, recipe, output_dir=None, draw: bool = True) -> dict:
    """Draws a recipe's figures and tables (one file each, and all on page.png/.pdf) and
    writes paper.json and paper_tables.md; returns the paper.json content."""
    results_dir = pathlib.Path(results_dir)
    output_dir = pathlib.Path(output_dir) if output_dir else results_dir / "report"
    series = figures.load_series(results_dir)
    pool = Pool(series, recipe)
    paper_figures, tables = LAYOUTS[recipe.name](pool, recipe)
    summary = {"recipe": recipe.name, "title": recipe.title, "datasets": pool.datasets}
    summary.update(describe(paper_figures, tables))
    written = []
    if draw:
        written = _draw_all(paper_figures, tables, recipe, output_dir)
    summary["files"] = written
    figures._write_text(output_dir / "paper_tables.md", markdown(recipe.name, tables))
    figures._write_text(
        output_dir / "paper.json", json.dumps(summary, indent=1, allow_nan=False) + "\n"
    )
    return summary
