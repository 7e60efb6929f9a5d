"""A folder of results.json files -> learning-curve figures, tables and summary.json.

The files are read into labelled Series (experiments/lib/series.py), grouped by dataset (and
experiment: a cell's labels name it, e.g. poisoning, a non-IID type). Each group gets one
figure (a panel per click model, a mean ± sd line per setting; a second one of offline MaxRR
where every setting recorded it) and one table per metric (experiments/lib/tables.py).
"""

from __future__ import annotations

import json
import math
import pathlib
import re

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

# The readers and tables are re-exported: callers use them as figures.<name>.
from experiments.lib.series import (  # noqa: F401
    EXECUTION_FIELDS,
    PANEL_ORDER,
    RESULTS_NAME,
    LayoutError,
    ReportError,
    Series,
    by_group,
    cell_series,
    curve_rounds,
    dataset_name,
    find_results,
    label_series,
    load_series,
    metric_label,
    ordered_panels,
    read_results,
)
from experiments.lib.tables import (  # noqa: F401
    MARK,
    METRICS,
    TEST_NAMES,
    latex_tables,
    markdown_tables,
    resolve_baseline,
    summarise_group,
)
from foltr_jax.core import files

MAX_POINTS = 1000  # per plotted curve; longer curves are thinned evenly


# ------------------------------------------------------------------------------------ figures


def _style(i: int) -> dict:
    colours = [f"C{k}" for k in range(10)]
    return {"color": colours[i % 10], "linestyle": ("-", "--", ":", "-.")[(i // 10) % 4]}


def figure_sets(members: list[Series]) -> dict[str, list[Series]]:
    """The Series of each figure of a group, by Series.figure (None: in every figure)."""
    members = [s for s in members if s.offline_ndcg is not None]
    keys = list(dict.fromkeys(s.figure for s in members if s.figure is not None)) or [""]
    return {key: [s for s in members if s.figure in (key, None)] for key in keys}


CURVES = {  # Series attribute -> y-axis name ({offline}: the group's offline metric)
    "offline_ndcg": "offline {offline}",
    "offline_mrr": "offline MaxRR",  # reciprocal rank of the top relevant document
}


def plot_curves(title: str, members: list[Series], curve: str = "offline_ndcg") -> Figure:
    """A metric per round: a panel per click model, mean line and ±sd band per setting.

    ``curve`` names the Series attribute drawn (CURVES): offline nDCG, or offline
    MaxRR as the FPDGD paper's Figure 3 draws it.
    """
    panels = ordered_panels(members)
    labels = list(dict.fromkeys(s.label for s in members))
    width = max(4.0 * len(panels), 7.0)
    longest = max(len(label) for label in labels)
    ncol = max(1, min(len(labels), int(width / (0.062 * longest + 0.6))))
    legend_height = 0.22 * math.ceil(len(labels) / ncol) + 0.2
    figure = Figure(figsize=(width, 3.4 + legend_height), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    for ax, panel in zip(axes, panels):
        for i, label in enumerate(labels):
            s = next((s for s in members if s.label == label and s.panel == panel), None)
            if s is None:
                continue
            curves = getattr(s, curve)
            x = curve_rounds(s, curves)
            if curve == "offline_ndcg" and s.initial_offline_ndcg is not None:
                curves = np.column_stack([s.initial_offline_ndcg, curves])
                x = np.concatenate([[0], x])
            keep = np.unique(np.linspace(0, len(x) - 1, min(len(x), MAX_POINTS)).astype(int))
            mean = curves.mean(axis=0)[keep]
            ax.plot(x[keep], mean, linewidth=1.2, **_style(i))
            if len(curves) > 1:
                sd = curves.std(axis=0, ddof=1)[keep]
                colour = _style(i)["color"]
                ax.fill_between(x[keep], mean - sd, mean + sd, color=colour, alpha=0.2, lw=0)
        ax.set_title(panel)
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # rounds are whole
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(CURVES[curve].format(offline=members[0].offline))
    handles = [Line2D([], [], **_style(i)) for i in range(len(labels))]
    figure.legend(handles, labels, loc="outside lower center", ncol=ncol, fontsize="small")
    figure.suptitle(title)
    return figure


def _save_figure(figure: Figure, path: pathlib.Path) -> None:
    suffix = path.suffix[1:]
    metadata = {"CreationDate": None} if suffix == "pdf" else None  # same input, same PDF
    try:
        files.write_atomically(
            path, lambda stream: figure.savefig(stream, format=suffix, dpi=150, metadata=metadata)
        )
    except (ValueError, OverflowError, FloatingPointError) as error:
        # curves valid as JSON that matplotlib cannot place (e.g. ±1e308: no axis ticks)
        raise ReportError(
            f"{path.name}: cannot be drawn: its curves hold values the axes cannot span "
            f"({type(error).__name__}: {error})"
        ) from None


def _write_text(path: pathlib.Path, text: str) -> None:
    files.write_atomically(path, lambda stream: stream.write(text.encode()))


def _slug(name: str, taken: set) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "group"
    unique, k = slug, 2
    while unique in taken:
        unique, k = f"{slug}-{k}", k + 1
    taken.add(unique)
    return unique


# ------------------------------------------------------------------------------------- report


def build_report(
    results_dir,
    output_dir=None,
    *,
    baseline: str = "",
    alpha: float = 0.05,
    paired: bool = False,
    equal_var: bool = True,
    accept=None,
) -> dict:
    """Reads results_dir, writes figures, table.md, table.tex, summary.json; returns the summary.
    ``accept(path)``: whether a results file under results_dir is read (None: every one).

    output_dir defaults to results_dir/report. baseline: a label, or a substring of exactly one
    label per group. paired: paired t-tests where two settings' runs share (seed, repetition),
    else independent ones (Student's, or Welch's with equal_var=False).
    """
    if not 0 < alpha < 1:
        raise ReportError(f"alpha must lie in (0, 1), got {alpha}")
    results_dir = pathlib.Path(results_dir)
    output_dir = pathlib.Path(output_dir) if output_dir else results_dir / "report"
    series = load_series(results_dir, accept)
    groups = by_group(series)
    all_labels = list(dict.fromkeys(s.label for s in series))
    if baseline and not any(baseline in label for label in all_labels):
        shown = "; ".join(all_labels[:10]) + ("; ..." if len(all_labels) > 10 else "")
        raise ReportError(f"baseline {baseline!r} is in no setting's label (labels: {shown})")
    summary = {
        "results_dir": str(results_dir),
        "output_dir": str(output_dir),
        "files": sorted(dict.fromkeys(s.source for s in series)),
        "options": {
            "baseline": baseline,
            "alpha": alpha,
            "paired": paired,
            "equal_var": equal_var,
        },
        "groups": {
            name: summarise_group(members, baseline, alpha, paired, equal_var)
            for name, members in groups.items()
        },
    }
    taken = set()
    for name, members in groups.items():
        summary["groups"][name]["figures"] = []
        for key, shown in figure_sets(members).items():
            title = f"{name}, {key}" if key else name
            if not shown:
                continue
            stem = "curves_" + _slug(title, taken)
            for curve in CURVES:
                if any(getattr(s, curve) is None for s in shown):
                    continue  # MaxRR curves only where every setting recorded them
                figure = plot_curves(title, shown, curve)
                name_of = stem if curve == "offline_ndcg" else f"{stem}_maxrr"
                for suffix in ("png", "pdf"):
                    _save_figure(figure, output_dir / f"{name_of}.{suffix}")
                    summary["groups"][name]["figures"].append(f"{name_of}.{suffix}")
    _write_text(output_dir / "table.md", markdown_tables(summary))
    _write_text(output_dir / "table.tex", latex_tables(summary))
    _write_text(output_dir / "summary.json", json.dumps(summary, indent=1) + "\n")
    return summary
