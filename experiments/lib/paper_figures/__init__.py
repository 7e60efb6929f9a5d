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

import json
import pathlib

import numpy as np

from experiments.lib import figures, recipes
from experiments.lib.paper_figures import (
    fedips,
    fpdgd,
    noniid,
    poisoning,
    thesis_foltr_es,
    unlearning,
)
from experiments.lib.paper_figures.drawing import _draw_all
from experiments.lib.paper_figures.pool import Pool
from experiments.lib.paper_figures.summary import describe, markdown

LAYOUTS = {
    "thesis_fig3_1": thesis_foltr_es.fig3_1,
    "thesis_fig3_2": thesis_foltr_es.fig3_2,
    "fpdgd_fig2": fpdgd.fig2,
    "fpdgd_fig4": fpdgd.fig4,
    "fpdgd_fig5": fpdgd.fig5,
    "fpdgd_fig6": fpdgd.fig6,
    "noniid_type1": noniid.type1,
    "noniid_type2": noniid.type2,
    "noniid_type2_r2": noniid.type2_r2,
    "noniid_type3": noniid.type3,
    "noniid_type4": noniid.type4,
    "poisoning_figs2_4": poisoning.figs2_4,
    "unlearning_table3": unlearning.table3,
    "fedips_fig1": fedips.fig1,
    "fedips_fig2": fedips.fig2,
}


def _rounds(series) -> int:
    if series.offline_rounds is not None and len(series.offline_rounds):
        return int(series.offline_rounds[-1])
    for curve in (series.online_ndcg, series.offline_ndcg):
        if curve is not None:
            return int(np.shape(curve)[-1])
    return 0


def run_scale(series, recipe) -> str:
    """How big the runs behind a page are: rounds and runs per setting, and whether they are
    a --quick batch's (the recipe differs from the full one of that name)."""
    rounds = sorted({_rounds(s) for s in series} - {0})
    runs = sorted({len(s.final_offline_ndcg) for s in series})
    if not rounds and not runs:
        return ""

    def span(values, unit):
        if not values:
            return ""
        text = f"{values[0]:,}" if len(values) == 1 else f"{values[0]:,}-{values[-1]:,}"
        return f"{text} {unit}{'s' * (values[-1] != 1)}"

    text = ", ".join(p for p in (span(rounds, "round"), span(runs, "run")) if p)
    full = recipes.recipes(quick=False).get(recipe.name)
    if full is not None and full != recipe:
        text += " (--quick: smaller than the paper's runs)"
    return text


def make_page(results_dir, recipe, output_dir=None, draw: bool = True, accept=None) -> dict:
    """Draws a recipe's figures and tables (one file each, and all on page.png/.pdf) and
    writes paper.json and paper_tables.md; returns the paper.json content.  ``accept(path)``:
    whether a results file under results_dir is read (None: every one)."""
    results_dir = pathlib.Path(results_dir)
    output_dir = pathlib.Path(output_dir) if output_dir else results_dir / "report"
    series = figures.load_series(results_dir, accept)
    pool = Pool(series, recipe)
    paper_figures, tables = LAYOUTS[recipe.name](pool, recipe)
    scale = run_scale(pool.series, recipe)
    summary = {"recipe": recipe.name, "title": recipe.title, "datasets": pool.datasets}
    summary["scale"] = scale
    summary.update(describe(paper_figures, tables))
    written = []
    if draw:
        labelled = [f"{', '.join(pool.datasets) or 'no data'}; {scale}"] if scale else pool.datasets
        written = _draw_all(paper_figures, tables, recipe, output_dir, labelled)
    summary["files"] = written
    tables_md = output_dir / "paper_tables.md"
    if tables:  # a recipe of figures only gets no tables file (an old one is removed)
        data = [f"{', '.join(pool.datasets) or 'none'}; {scale}"] if scale else pool.datasets
        figures._write_text(tables_md, markdown(recipe.name, tables, data))
    elif tables_md.is_file():
        tables_md.unlink()
    figures._write_text(
        output_dir / "paper.json", json.dumps(summary, indent=1, allow_nan=False) + "\n"
    )
    return summary
