"""paper.json and paper_tables.md: the structure of a page's figures and its tables."""

from __future__ import annotations

import numpy as np

from experiments.lib.paper_figures.drawing import _legend_entries
from experiments.lib.paper_figures.structure import Line


def describe(paper_figures: list, tables: list) -> dict:
    """The structure of a recipe's figures and tables, JSON-ready (strict: no NaN)."""

    def line(line: Line) -> dict:
        s = line.series
        return {
            "label": line.label,
            "source": s.source,
            "run": s.run,
            "n_runs": len(s.final_offline_ndcg),
            "folds": s.folds,
            "colour": line.colour,
            "linestyle": line.linestyle,
            "x_per_round": line.x_per_round,
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
                "xlabel": f.xlabel,
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


def markdown_cell(value) -> str:
    """A Markdown table cell: a pipe in it (|B|, |C|) escaped."""
    return str(value).replace("|", "\\|")


def markdown(recipe_name: str, tables: list, datasets=()) -> str:
    lines = [f"# {recipe_name}: the papers' tables", ""]
    lines += [f"Data: {', '.join(datasets) or 'none'}.", ""]
    for t in tables:
        lines += [f"## {t.name}: {t.caption}", ""]
        lines.append("| " + " | ".join(markdown_cell(x) for x in t.header) + " |")
        lines.append("|---" * len(t.header) + "|")
        lines += ["| " + " | ".join(markdown_cell(x) for x in row) + " |" for row in t.rows]
        lines += ["", t.note, ""]
    return "\n".join(lines)
