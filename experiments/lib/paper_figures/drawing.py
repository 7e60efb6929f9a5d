"""Drawing a page's figures and tables with matplotlib: panels, legends, tables, and the
files (paper_<figure>.png/.pdf, page.png/.pdf)."""

from __future__ import annotations

import math
import pathlib
import re

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from experiments.lib import figures, words
from experiments.lib.paper_figures.structure import Line, PaperFigure, PaperTable

MAX_POINTS = 400  # per drawn curve
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
    if curve.startswith("online_"):  # every round's, whatever --eval_every
        x = np.arange(1, curves.shape[1] + 1)
    else:
        x = figures.curve_rounds(s, curves)[: curves.shape[1]]
    if curve == "offline_ndcg" and s.initial_offline_ndcg is not None and not line.constant:
        curves = np.column_stack([s.initial_offline_ndcg, curves])
        x = np.concatenate([[0], x])
    if line.constant:
        final = curves[:, -1]
        ax.axhline(np.mean(final), color=line.colour, linestyle=line.linestyle, lw=1.4)
        return
    x = x * line.x_per_round
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


def draw_figure(figure: PaperFigure, container, heading: str = "") -> None:
    """Draws ``figure`` into a matplotlib Figure or SubFigure: panels, then a legend below;
    ``heading``: a line under its title (the data and size of the runs it shows)."""
    width, _ = figure_size(figure)
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
            ax.margins(x=0)  # the axis ends where the data ends
            ax.tick_params(labelsize="x-small")
            # Rounds, updates and interactions are whole: no 2.5 between quick runs' ticks.
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
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
    title = f"{figure.name}: {figure.caption}" + (f"\n{heading}" if heading else "")
    container.suptitle(title, fontsize="small", wrap=True)


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


def _draw_all(paper_figures, tables, recipe, output_dir, datasets=()) -> list:
    """paper_<figure>.png/.pdf for every figure, and page.png/.pdf with figures and tables,
    the page titled with the data it shows (``datasets``)."""
    written = []
    sizes = [figure_size(f) for f in paper_figures] + [table_size(t) for t in tables]
    data = ", ".join(datasets) or "no data"
    heading = f"data: {data}; each line: {figures.BAND}"
    alikes = [
        words.shared([line.series.fields for row in f.panels for panel in row if panel
                      for line in panel.lines])
        for f in paper_figures
    ]  # fmt: skip
    for i, f in enumerate(paper_figures):
        width, height = sizes[i]
        fig = Figure(figsize=(width, height + 0.4), layout="constrained")
        FigureCanvasAgg(fig)
        own = heading + (f"\nevery line: {alikes[i]}" if alikes[i] else "")
        draw_figure(f, fig, own)
        fig.foltr_title = f"{recipe.name}, {f.name}: {f.caption}"
        fig.foltr_description = "; ".join(  # the file's text fields (figures._save_figure)
            [f"{recipe.name}, {f.name}: {f.caption}", own.replace("\n", "; "),
             "legend: " + " | ".join(e[0] for e in _legend_entries(f))]
        )  # fmt: skip
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
        page.suptitle(f"{recipe.name}: {recipe.title}\n{heading}", fontsize="medium")
        page.foltr_title = f"{recipe.name}: {recipe.title}"
        page.foltr_description = f"{recipe.name}: {recipe.title}; {heading}"
        subs = page.subfigures(len(sizes), 1, height_ratios=[h for _, h in sizes])
        subs = np.atleast_1d(subs)
        for sub, f, alike in zip(subs, paper_figures, alikes):
            draw_figure(f, sub, f"every line: {alike}" if alike else "")
        for sub, t in zip(subs[len(paper_figures) :], tables):
            draw_table(t, sub)
        for suffix in ("png", "pdf"):
            _save(page, output_dir / f"page.{suffix}")
            written.append(f"page.{suffix}")
    return written
