"""The claims table: evaluating every claim's cells on the runs' results, and writing it as
Markdown (claims.md) and JSON (claims.json).

Each claim and cell has a ``verdict``: holds, contradicted, inconclusive or not testable
(None: its results are missing); the headline counts the four over the findings, and lists
the bookkeeping checks apart.
"""

from __future__ import annotations

from experiments.lib.claims.core import (
    CONTRADICTED,
    HOLDS,
    INCONCLUSIVE,
    NOT_TESTABLE,
    OUTCOMES,
    Claim,
    Results,
    check_cell,
    claim_verdict,
    counted,
)
from experiments.lib.paper_figures.summary import markdown_cell

VERDICT_WORDS = {HOLDS: "holds", CONTRADICTED: "**contradicted**",
                 INCONCLUSIVE: "*inconclusive*", NOT_TESTABLE: "not testable here",
                 None: "not run"}  # fmt: skip
WHY = {
    CONTRADICTED: "significantly the other way, or absent although the runs had the power "
    "(≥ 0.8) to show the paper's effect",
    INCONCLUSIVE: "the runs lack the power to tell (the cells say how many runs would give "
    "it), or a no-difference cell's factor was not shown to act",
    NOT_TESTABLE: "the paper states it for data this run does not have",
}


def evaluate(claims: list[Claim], results: Results, diagnoses: dict | None = None) -> list[dict]:
    """One row per claim: the paper's side, the setting, each cell's verdict and the claim's
    (None: results missing).  ``diagnoses``: claim key -> what its diagnosis runs showed."""
    rows = []
    for claim in claims:
        cells = [check_cell(cell, results) for cell in claim.cells]
        testable = [c for c in counted(cells) if c["verdict"] != NOT_TESTABLE]
        verdict = claim_verdict(cells)
        row = {
            "claim": claim.key,
            "paper": claim.paper,
            "where": claim.where,
            "words": claim.words,
            "setting": claim.setting,
            "statistic": claim.statistic,
            "bookkeeping": claim.bookkeeping,
            "cells": cells,
            "cells_held": sum(c["verdict"] == HOLDS for c in testable),
            "cells_counted": len(testable),
            "verdict": verdict,
            "holds": None if verdict is None else verdict == HOLDS,
        }
        needed = [c.get("runs_needed") for c in testable if c["verdict"] == INCONCLUSIVE]
        if needed and verdict == INCONCLUSIVE:
            known = [n for n in needed if n is not None]
            row["runs_needed"] = max(known) if known and len(known) == len(needed) else None
        if claim.diagnosis is not None:
            row["diagnosis_change"] = claim.diagnosis.change
        if diagnoses and claim.key in diagnoses:
            row["diagnosis"] = diagnoses[claim.key]
        rows.append(row)
    return rows


def findings(rows: list[dict]) -> list[dict]:
    """The rows that are findings of the papers (not bookkeeping)."""
    return [r for r in rows if not r.get("bookkeeping")]


def verdict_counts(rows: list[dict]) -> dict:
    """{verdict: how many findings have it} for the four verdicts, and 'not run' when some
    claims have no results."""
    found = findings(rows)
    counts = {outcome: sum(r["verdict"] == outcome for r in found) for outcome in OUTCOMES}
    missing = sum(r["verdict"] is None for r in found)
    if missing:
        counts["not run"] = missing
    return counts


def headline(rows: list[dict]) -> str:
    """'N findings: a hold, b contradicted, c inconclusive, d not testable here' (and the
    bookkeeping checks apart)."""
    counts = verdict_counts(rows)
    parts = [f"**{counts[HOLDS]} hold**", f"{counts[CONTRADICTED]} contradicted",
             f"{counts[INCONCLUSIVE]} inconclusive",
             f"{counts[NOT_TESTABLE]} not testable here"]  # fmt: skip
    if "not run" in counts:
        parts.append(f"{counts['not run']} not run")
    text = f"of the {len(findings(rows))} findings, " + ", ".join(parts)
    books = [r for r in rows if r.get("bookkeeping")]
    run = [r for r in books if r["verdict"] is not None]
    if run:
        held = sum(r["verdict"] == HOLDS for r in run)
        text += (f"; and {held} of {len(run)} bookkeeping check(s) (arithmetic of the run "
                 "schedule, not counted) pass")  # fmt: skip
    if len(run) < len(books):
        text += f"; {len(books) - len(run)} bookkeeping check(s) not run"
    return text


def _ratio(cell: dict) -> tuple[str, str]:
    if "ratio" not in cell:
        return cell.get("paper", ""), ""
    ours = " / ".join(f"{v:.3f}" for v in cell["our_values"])
    ratio = " / ".join("–" if r is None else f"{r:.2f}" for r in cell["ratio"])
    return cell["paper"], f"{ours} (× {ratio})"


def _cell_words(cell: dict) -> str:
    words = VERDICT_WORDS[cell["verdict"]]
    if cell["verdict"] == INCONCLUSIVE and cell.get("runs_needed"):
        words += f" ({cell['runs_needed']} runs needed)"
    if cell["exception"]:
        words += f" (the paper's exception, not counted: {cell['exception']})"
    return words


def _effect_or_control(cell: dict) -> str:
    if cell.get("control"):
        return "control " + cell["control"]
    if cell.get("min_effect") is not None:
        return f"least effect {cell['min_effect']:g}"
    return ""


def why_not(rows: list[dict]) -> list[str]:
    """The summary at the top of the table: the findings that do not hold, by verdict."""
    lines = []
    for outcome in (CONTRADICTED, INCONCLUSIVE, NOT_TESTABLE):
        keys = [r["claim"] for r in findings(rows) if r["verdict"] == outcome]
        if keys:
            links = ", ".join(f"[{k}](#{k.lower()})" for k in keys)
            lines.append(f"- {VERDICT_WORDS[outcome]} ({WHY[outcome]}): {links}")
    return lines


def markdown(rows: list[dict], heading: str, data: str, detail: str = "") -> str:
    cells = sum(r["cells_counted"] for r in findings(rows))
    cells_held = sum(r["cells_held"] for r in findings(rows))
    lines = [
        f"# {heading}",
        "",
        f"Data: {data}. Of the claims table, {headline(rows)}; {cells_held} of {cells} "
        "counted cells hold (the paper's stated exceptions are shown and not counted)."
        + (f" {detail}" if detail else ""),
        "",
        (
            "A difference must be shown above a least effect stated per claim (one-sided "
            "t-tests); a no-difference cell holds only with its control, a check in the same "
            "cell that the factor it varies acted."
        ),
    ]
    why = why_not(rows)
    if why:
        lines += ["", "Why these do not hold:", "", *why]
    lines += ["", "| claim | where | cells held | verdict |", "|---|---|---|---|"]
    for r in rows:
        verdict = VERDICT_WORDS[r["verdict"]]
        if r.get("bookkeeping"):
            verdict += " (bookkeeping, not counted)"
        lines.append(
            f"| [{r['claim']}](#{r['claim'].lower()}) | {markdown_cell(r['paper'] + ', ' + r['where'])} "
            f"| {r['cells_held']} / {r['cells_counted']} | {verdict} |"
        )
    for r in rows:
        verdict = VERDICT_WORDS[r["verdict"]]
        if r.get("runs_needed"):
            verdict += f"; {r['runs_needed']} runs per setting would give power 0.8"
        lines += [
            "",
            f"## {r['claim']}",
            "",
            f"{r['paper']}, {r['where']}: “{r['words']}”",
            "",
            (
                f"Ours: {r['setting']}. Test: {r['statistic']}. "
                f"Verdict: {verdict} ({r['cells_held']} of {r['cells_counted']} cells hold)."
            ),
            "",
            (
                "| cell | ours (mean ± sd over runs) | test | least effect or control | verdict "
                "| paper's number | ours (× paper) |"
            ),
            "|---|---|---|---|---|---|---|",
        ]
        for c in r["cells"]:
            paper, ratio = _ratio(c)
            values = [c["cell"], c["ours"], c["test"], _effect_or_control(c), _cell_words(c),
                      paper, ratio]  # fmt: skip
            lines.append("| " + " | ".join(markdown_cell(v) for v in values) + " |")
        if r["verdict"] in (CONTRADICTED, INCONCLUSIVE):
            lines += [
                "",
                "**Diagnosis.** "
                + r.get("diagnosis", "none recorded: no diagnosis run is defined for this claim."),
            ]
    return "\n".join(lines) + "\n"


def runs_text(payload: dict) -> str:
    """The runs a setting of a table, in words: '5 runs a setting', and with its folds
    (a record from before the folds has none) '10 runs a setting, 2 in each of 5 folds (the
    original split and 4 re-partitions of its queries, seed 0)'."""
    folds = payload.get("folds")
    if not folds:
        return f"{payload['n_runs']} runs a setting"
    text = (f"{payload['n_runs'] * len(folds)} runs a setting, {payload['n_runs']} in each of "
            f"{len(folds)} fold{'s' if len(folds) > 1 else ''}")  # fmt: skip
    made = [name for name in folds if "_fold" in name]
    if made:
        text += (
            f" (the original split and {len(made)} re-partition"
            f"{'s' if len(made) > 1 else ''} of its queries, seed {payload['fold_seed']})"
        )
    return text


def document(payload: dict) -> str:
    """claims.md of a run's claims.json payload."""
    if payload.get("folds"):
        runs = f"{runs_text(payload)}, pooled (unless a claim's setting says more)"
    else:
        runs = f"{payload['n_runs']} runs per setting and fold (unless a claim's setting says more)"
    detail = (f"{runs}, offline metrics every {payload['eval_every']} round(s); "
              + timing(payload) + ".")  # fmt: skip
    return markdown(payload["claims"], "The papers' claims", payload["data"], detail)


def timing(payload: dict) -> str:
    """How the table's runs were made: by this invocation, or (--norun) by an earlier one
    (``runs_made``: its command, code version, wall time and jobs, or how far it got)."""
    if payload.get("ran", True):
        code = f" at code {payload['source_version']}" if payload.get("source_version") else ""
        n = payload.get("invocations", 1)
        if n > 1:
            return (f"made by {n} invocations of the same command{code} (interrupted and "
                    f"started again), {payload['wall_seconds'] / 60:.0f} min wall in all with "
                    f"--jobs={payload['jobs']}")  # fmt: skip
        return (f"this invocation{code}: {payload.get('wall_seconds', payload['seconds']) / 60:.0f}"
                f" min wall with --jobs={payload['jobs']}")  # fmt: skip
    made = payload.get("runs_made")
    if not made:
        return "the table read from runs made earlier (--norun)"
    text = (f"the table read (--norun) from the runs of `{made['command']}` at code "
            f"{made['source_version']}")  # fmt: skip
    if made.get("wall_seconds"):
        return text + f", {made['wall_seconds'] / 60:.0f} min wall"
    return text + f", still running ({made['runs_done']} runs done)"
