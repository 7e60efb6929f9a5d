"""The claims table: evaluating every claim's cells on the runs' results, and writing it as
Markdown (claims.md) and JSON (claims.json)."""

from __future__ import annotations

from experiments.lib.claims.core import Claim, Results, check_cell, claim_holds
from experiments.lib.paper_figures.summary import markdown_cell

VERDICT_WORDS = {True: "holds", False: "**does not hold**", None: "not run"}
CELL_WORDS = {True: "yes", False: "**no**", None: "not run"}


def evaluate(claims: list[Claim], results: Results, diagnoses: dict | None = None) -> list[dict]:
    """One row per claim: the paper's side, the setting, each cell's verdict and the claim's
    (None: results missing).  ``diagnoses``: claim key -> what its diagnosis runs showed."""
    rows = []
    for claim in claims:
        cells = [check_cell(cell, results) for cell in claim.cells]
        row = {
            "claim": claim.key,
            "paper": claim.paper,
            "where": claim.where,
            "words": claim.words,
            "setting": claim.setting,
            "statistic": claim.statistic,
            "cells": cells,
            "cells_held": sum(c["holds"] is True for c in cells if not c["exception"]),
            "cells_counted": sum(not c["exception"] for c in cells),
            "holds": claim_holds(cells),
        }
        if claim.diagnosis is not None:
            row["diagnosis_change"] = claim.diagnosis.change
        if diagnoses and claim.key in diagnoses:
            row["diagnosis"] = diagnoses[claim.key]
        rows.append(row)
    return rows


def _ratio(cell: dict) -> tuple[str, str]:
    if "ratio" not in cell:
        return cell.get("paper", ""), ""
    ours = " / ".join(f"{v:.3f}" for v in cell["our_values"])
    ratio = " / ".join("–" if r is None else f"{r:.2f}" for r in cell["ratio"])
    return cell["paper"], f"{ours} (× {ratio})"


def markdown(rows: list[dict], heading: str, data: str, detail: str = "") -> str:
    held = sum(r["holds"] is True for r in rows)
    cells = sum(r["cells_counted"] for r in rows)
    cells_held = sum(r["cells_held"] for r in rows)
    lines = [
        f"# {heading}",
        "",
        f"Data: {data}. **{held} of {len(rows)} claims hold**; {cells_held} of {cells} cells "
        "(the paper's stated exceptions are shown and not counted)." + (f" {detail}" if detail else ""),
        "",
        "| claim | where | cells held | verdict |",
        "|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| [{r['claim']}](#{r['claim'].lower()}) | {markdown_cell(r['paper'] + ', ' + r['where'])} "
            f"| {r['cells_held']} / {r['cells_counted']} | {VERDICT_WORDS[r['holds']]} |"
        )
    for r in rows:
        lines += [
            "",
            f"## {r['claim']}",
            "",
            f"{r['paper']}, {r['where']}: “{r['words']}”",
            "",
            f"Ours: {r['setting']}. Test: {r['statistic']}. "
            f"Verdict: {VERDICT_WORDS[r['holds']]} ({r['cells_held']} of {r['cells_counted']} cells).",
            "",
            "| cell | ours (mean ± sd over runs) | test | holds | paper's number | ours (× paper) |",
            "|---|---|---|---|---|---|",
        ]
        for c in r["cells"]:
            holds = CELL_WORDS[c["holds"]]
            if c["exception"]:
                holds += f" (the paper's exception: {c['exception']})"
            paper, ratio = _ratio(c)
            values = [c["cell"], c["ours"], c["test"], holds, paper, ratio]
            lines.append("| " + " | ".join(markdown_cell(v) for v in values) + " |")
        if r["holds"] is False:
            lines += ["", "**Diagnosis.** " + r.get("diagnosis", "none recorded: no diagnosis run is defined for this claim.")]
    return "\n".join(lines) + "\n"


def document(payload: dict) -> str:
    """claims.md of a run's claims.json payload."""
    detail = (f"{payload['n_runs']} runs per setting and fold (unless a claim's setting says "
              f"more), offline metrics every {payload['eval_every']} round(s); "
              + timing(payload) + ".")  # fmt: skip
    return markdown(payload["claims"], "The papers' claims", payload["data"], detail)


def timing(payload: dict) -> str:
    if not payload.get("ran", True):
        return "the table read from runs made earlier (--norun)"
    return f"this invocation: {payload['seconds'] / 60:.0f} min wall with --jobs={payload['jobs']}"
