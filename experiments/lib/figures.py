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
import textwrap

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from experiments.lib import words

# The readers and tables are re-exported: callers use them as figures.<name>.
from experiments.lib.series import (  # noqa: F401
    EXCERPT_NAME,
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


def _style(i: int, baseline: bool = False) -> dict:
    """Line i's colour and dash; the baseline's line is black and thicker."""
    if baseline:
        return {"color": "black", "linestyle": "-", "linewidth": 2.2}
    colours = [f"C{k}" for k in range(10)]
    return {
        "color": colours[i % 10],
        "linestyle": ("-", "--", ":", "-.")[(i // 10) % 4],
        "linewidth": 1.2,
    }


def figure_sets(members: list[Series]) -> dict[str, list[Series]]:
    """The Series of each figure of a group, by Series.figure (None: in every figure)."""
    members = [s for s in members if s.offline_ndcg is not None]
    keys = list(dict.fromkeys(s.figure for s in members if s.figure is not None)) or [""]
    return {key: [s for s in members if s.figure in (key, None)] for key in keys}


CURVES = {  # Series attribute -> y-axis name ({offline}: the group's offline metric)
    "offline_ndcg": "offline {offline}",  # the global model on the test split
    "offline_mrr": "offline MaxRR",  # its reciprocal rank of the top relevant document
}
BAND = "mean over runs, shaded ±1 sd"  # how every curve is drawn


def _count(values, unit: str) -> str:
    """'20 rounds', '2-3 runs' of the distinct ``values``."""
    values = sorted(set(values))
    text = f"{values[0]:,}" if len(values) == 1 else f"{values[0]:,}-{values[-1]:,}"
    return f"{text} {unit}{'s' * (values[-1] != 1)}"


def setting_lines(members: list[Series], data: str, quick: bool | None = None) -> list[str]:
    """What a figure or table of ``members`` shows, in words: its data; its rounds and runs
    (a --quick batch's said so) and that lines are means with a ±1 sd band; the settings
    every line shares."""
    rounds = _count([int(curve_rounds(s, s.offline_ndcg)[-1]) for s in members
                     if s.offline_ndcg is not None] or [0], "round")  # fmt: skip
    runs = _count([len(s.final_offline_ndcg) for s in members], "run")
    several = max(len(s.final_offline_ndcg) for s in members) > 1
    scale = f"{rounds}, {runs} a line" + (f" ({BAND})" if several else "")
    if quick:
        scale += "; a --quick batch: smaller than the papers' runs"
    lines = [f"data: {data}", scale]
    alike = words.shared([s.fields for s in members])
    if alike:
        lines.append(f"every line: {alike}")
    return lines


def plot_curves(
    title: str,
    members: list[Series],
    curve: str = "offline_ndcg",
    *,
    heading: list | None = None,
    baseline: str | None = None,
) -> Figure:
    """A metric per round: a panel per click model, mean line and ±sd band per setting.

    ``curve`` names the Series attribute drawn (CURVES): offline nDCG, or offline
    MaxRR as the FPDGD paper's Figure 3 draws it.  ``heading``: lines under the title
    (``setting_lines``); ``baseline``: the label of the line the others are tested
    against, drawn thicker and named so in the legend.  Each x axis ends at the last round.
    """
    panels = ordered_panels(members)
    labels = list(dict.fromkeys(s.label for s in members))
    shown = {s.label: s.words or s.label for s in members}
    names = [shown[label] + (" (baseline)" if label == baseline else "") for label in labels]
    width = max(4.0 * len(panels), 7.0)
    longest = max(len(name) for name in names)
    ncol = max(1, min(len(labels), int(width / (0.062 * longest + 0.6))))
    legend_height = 0.22 * math.ceil(len(labels) / ncol) + 0.2
    # The data line is left out where the title (the group) begins with the data already;
    # each line is wrapped to the figure's width.
    heading = list(heading or [])
    said = [line for line in heading if not (line.startswith("data: ") and line[6:] in title)]
    said = [part for line in said for part in textwrap.wrap(line, int(width * 11.5))]
    figure = Figure(figsize=(width, 3.4 + legend_height + 0.2 * len(said)), layout="constrained")
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
            style = _style(i, label == baseline)
            ax.plot(x[keep], mean, **style)
            if len(curves) > 1:
                sd = curves.std(axis=0, ddof=1)[keep]
                ax.fill_between(x[keep], mean - sd, mean + sd, color=style["color"], alpha=0.2,
                                lw=0)  # fmt: skip
        ax.set_title(panel)
        ax.set_xlabel("round")
        ax.margins(x=0)  # the axis ends where the rounds end
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # rounds are whole
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(CURVES[curve].format(offline=members[0].offline))
    handles = [Line2D([], [], **_style(i, label == baseline)) for i, label in enumerate(labels)]
    figure.legend(handles, names, loc="outside lower center", ncol=ncol, fontsize="small")
    figure.suptitle("\n".join([title, *said]), fontsize="medium")
    figure.foltr_title = title
    figure.foltr_description = "; ".join(  # the PNG's and PDF's text (``_save_figure``)
        [title, *heading, f"y: {CURVES[curve].format(offline=members[0].offline)}",
         "legend: " + " | ".join(names)]
    )  # fmt: skip
    return figure


def _save_figure(figure: Figure, path: pathlib.Path) -> None:
    """Writes ``figure`` whole (atomically); its title and description (the setting it shows,
    ``foltr_description``) go into the file's text fields too: PNG Title and Description,
    PDF Title and Subject."""
    suffix = path.suffix[1:]
    described = getattr(figure, "foltr_description", "")
    title = getattr(figure, "foltr_title", described.split("; ")[0])
    if suffix == "pdf":
        metadata = {"CreationDate": None}  # same input, same PDF
        metadata.update({"Title": title, "Subject": described} if described else {})
    else:
        metadata = {"Title": title, "Description": described} if described else None
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


def _quick_batch(results_dir: pathlib.Path) -> bool | None:
    """Whether ``results_dir`` is a batch recipe's folder that a --quick batch filled (its
    batch.json says so); None when it is not a batch's."""
    try:
        found = json.loads((results_dir / "batch.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found.get("quick") if isinstance(found, dict) else None


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
    quick = _quick_batch(results_dir)
    for name, members in groups.items():
        summary["groups"][name]["figures"] = []
        data = members[0].dataset
        summary["groups"][name]["setting"] = setting_lines(members, data, quick)
        base = summary["groups"][name]["baseline"]
        for key, shown in figure_sets(members).items():
            title = f"{name}, {key}" if key else name
            if not shown:
                continue
            stem = "curves_" + _slug(title, taken)
            heading = setting_lines(shown, data, quick)
            for curve in CURVES:
                if any(getattr(s, curve) is None for s in shown):
                    continue  # MaxRR curves only where every setting recorded them
                figure = plot_curves(title, shown, curve, heading=heading, baseline=base)
                name_of = stem if curve == "offline_ndcg" else f"{stem}_maxrr"
                for suffix in ("png", "pdf"):
                    _save_figure(figure, output_dir / f"{name_of}.{suffix}")
                    summary["groups"][name]["figures"].append(f"{name_of}.{suffix}")
    _write_text(output_dir / "table.md", markdown_tables(summary))
    _write_text(output_dir / "table.tex", latex_tables(summary))
    _write_text(output_dir / "summary.json", json.dumps(summary, indent=1) + "\n")
    return summary
