"""What a page of the papers' figures is made of (lines, panels, figures, tables), the
names and colours every layout shares, and the small helpers that build them."""

from __future__ import annotations

import dataclasses

import numpy as np

from experiments.lib import figures, statistics

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
    x_per_round: float = 1.0  # x units per round (FPDGD Figure 6: |C|·|B| interactions)


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


def _grid(rows, columns, make) -> list:
    return [[make(r, c) for c in columns] for r in rows]


def _panel(title, lines) -> Panel | None:
    lines = [line for line in lines if line is not None and line.series is not None]
    return Panel(title, lines) if lines else None


def _line(series, label, colour, linestyle="-", marker=None, constant=False, x_per_round=1.0):
    if series is None:
        return None
    return Line(label, series, colour, linestyle, marker, constant, x_per_round)


def _number(value) -> str:
    value = float(value)
    return f"{value:g}"


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
