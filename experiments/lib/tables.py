"""A group's numbers (mean ± sd, t-tests against the baseline) and its tables.

A table per metric: a row per setting, a column per click model, with a two-tailed t-test of
every cell against the baseline row of its column, Bonferroni-corrected over the table's
comparisons; written as Markdown and as LaTeX.
"""

from __future__ import annotations

import math

import numpy as np

from experiments.lib import statistics
from experiments.lib.series import Series, curve_rounds, ordered_panels

METRICS = {  # key -> (title, number format)
    "final_offline_ndcg": ("Final offline {offline}", "{:.4f}"),
    "online_performance": ("Online performance", "{:.2f}"),
}
MARK = "†"


# --------------------------------------------------------------------------------- statistics


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _describe(values: np.ndarray) -> dict:
    if len(values) < 2:
        return {"mean": float(values[0]), "sd": None, "n": 1}
    mean, sd, n = statistics.summarise(values)
    return {"mean": mean, "sd": sd, "n": n}


def resolve_baseline(labels: list[str], substring: str) -> tuple[str | None, str | None]:
    """(baseline label, None) or (None, why not): an exact label, or the one containing it."""
    if not substring:
        return None, None
    if substring in labels:
        return substring, None
    matches = [label for label in labels if substring in label]
    if len(matches) == 1:
        return matches[0], None
    if not matches:
        return None, f"no setting's label contains {substring!r}"
    return None, f"{substring!r} is in several labels ({'; '.join(matches)}), no tests"


def summarise_group(
    members: list[Series], baseline: str, alpha: float, paired: bool, equal_var: bool
) -> dict:
    """Means, sds, n and tests against the baseline of one group, JSON-ready."""
    panels = ordered_panels(members)
    labels = list(dict.fromkeys(s.label for s in members))
    cells = {(s.label, s.panel): s for s in members}
    base, note = resolve_baseline(labels, baseline)
    rows = {label: {} for label in labels}
    for (label, panel), s in cells.items():
        rows[label][panel] = {
            "source": s.source,
            "fields": s.fields,
            "n_runs": len(s.final_offline_ndcg),
            "rounds": None if s.offline_ndcg is None else int(curve_rounds(s, s.offline_ndcg)[-1]),
        }
        for metric in METRICS:
            values = getattr(s, metric)
            if values is not None:
                rows[label][panel][metric] = _describe(values)
    comparisons = {}
    for metric in METRICS:
        pairs = []  # (method, baseline) Series of this table's tests
        for panel in panels:
            b = cells.get((base, panel))
            if b is None or getattr(b, metric) is None or len(getattr(b, metric)) < 2:
                continue
            for label in labels:
                s = cells.get((label, panel))
                values = None if s is None else getattr(s, metric)
                if label != base and values is not None and len(values) >= 2:
                    pairs.append((s, b))
        for s, b in pairs:
            pair = paired and s.run_ids == b.run_ids and None not in (r[0] for r in s.run_ids)
            result = statistics.compare_to_baseline(
                dict(zip(b.run_ids, getattr(b, metric))),
                {s.label: dict(zip(s.run_ids, getattr(s, metric)))},
                paired=pair,
                equal_var=equal_var,
                alpha=alpha,
                n_comparisons=len(pairs),
            )[s.label]
            rows[s.label][s.panel][metric].update(
                test=result.test,
                t=_finite(result.t),
                df=_finite(result.df),
                p=result.p,
                p_adjusted=result.p_adjusted,
                significant=result.significant,
            )
        comparisons[metric] = {"n_comparisons": len(pairs)}
    summary = {
        "offline_metric": members[0].offline,
        "panels": panels,
        "labels": labels,
        "words": {s.label: s.words or s.label for s in members},  # the rows' names in words
        "baseline": base,
        "comparisons": comparisons,
        "rows": rows,
    }
    if note:
        summary["baseline_note"] = note
    return summary


# ------------------------------------------------------------------------------------- tables


def _cell_text(cell: dict | None, metric: str, show_n: bool, latex: bool) -> str:
    if cell is None or metric not in cell:
        return "--" if latex else "–"
    number = METRICS[metric][1]
    stats = cell[metric]
    text = number.format(stats["mean"])
    if stats["sd"] is not None:
        text += (r" \pm " if latex else " ± ") + number.format(stats["sd"])
    if stats.get("significant"):
        text += r"^\dagger" if latex else f" {MARK}"
    if latex:
        text = f"${text}$"
    if show_n:
        text += f" (n={stats['n']})"
    return text


def _table_rows(group: dict, metric: str, latex: bool) -> tuple[list[list[str]], set]:
    ns = {
        cell[metric]["n"]
        for row in group["rows"].values()
        for cell in row.values()
        if metric in cell
    }
    show_n = len(ns) > 1
    rows = []
    for label in group["labels"]:
        name = group.get("words", {}).get(label, label)
        name += " (baseline)" if label == group["baseline"] else ""
        name = _latex_escape(name) if latex else name.replace("|", r"\|")
        row = group["rows"][label]
        rows.append(
            [name] + [_cell_text(row.get(p), metric, show_n, latex) for p in group["panels"]]
        )
    return rows, ns


TEST_NAMES = {"student": "Student", "welch": "Welch", "paired": "paired"}


def _footnote(group: dict, metric: str, ns: set, alpha: float) -> str:
    parts = [f"mean ± sd over n = {min(ns)} runs" if len(ns) == 1 else "mean ± sd over n runs"]
    cells = [c[metric] for row in group["rows"].values() for c in row.values() if metric in c]
    tests = sorted({TEST_NAMES[c["test"]] for c in cells if "test" in c})
    k = group["comparisons"][metric]["n_comparisons"]
    if k:
        parts.append(
            f"{MARK} differs from the baseline (two-tailed {' or '.join(tests)} t-test, "
            f"Bonferroni over the {k} comparisons in this table, α = {alpha:g})"
        )
    elif group.get("baseline_note"):
        parts.append(f"no significance tests: {group['baseline_note']}")
    return "; ".join(parts) + "."


def markdown_tables(summary: dict) -> str:
    """Every group's tables as Markdown."""
    options = summary["options"]
    lines = [f"# Results in {summary['results_dir']}", ""]
    for name, group in summary["groups"].items():
        lines += [f"## {name}", ""]
        lines += [f"{line[0].upper()}{line[1:]}.  " for line in group.get("setting", [])]
        lines += [""] if group.get("setting") else []
        for metric, (title, _) in METRICS.items():
            title = title.format(offline=group["offline_metric"])
            rows, ns = _table_rows(group, metric, latex=False)
            if not ns:
                continue
            lines += [f"### {title}", ""]
            lines.append("| setting | " + " | ".join(group["panels"]) + " |")
            lines.append("|---" * (len(group["panels"]) + 1) + "|")
            lines += ["| " + " | ".join(row) + " |" for row in rows]
            note = _footnote(group, metric, ns, options["alpha"])
            lines += ["", note, ""]
    return "\n".join(lines)


def _latex_escape(text: str) -> str:
    replace = {
        "\\": r"\textbackslash{}",
        "&": r"\&",
        "%": r"\%",
        "$": r"\$",
        "#": r"\#",
        "_": r"\_",
        "{": r"\{",
        "}": r"\}",
        "~": r"\textasciitilde{}",
        "^": r"\textasciicircum{}",
        "±": r"$\pm$",
        "†": r"$^\dagger$",
        "α": r"$\alpha$",
        "|": r"$|$",
        "ε": r"$\varepsilon$",
        "Δ": r"$\Delta$",
        "η": r"$\eta$",
        "μ": r"$\mu$",
        "σ": r"$\sigma$",
        "γ": r"$\gamma$",
    }
    return "".join(replace.get(c, c) for c in text)


def latex_tables(summary: dict) -> str:
    """Every group's tables as LaTeX table environments (needs \\usepackage{booktabs})."""
    options = summary["options"]
    out = ["% Generated by foltr_jax.report; needs \\usepackage{booktabs}.", ""]
    for name, group in summary["groups"].items():
        for metric, (title, _) in METRICS.items():
            title = title.format(offline=group["offline_metric"])
            rows, ns = _table_rows(group, metric, latex=True)
            if not ns:
                continue
            setting = "".join(f" {line[0].upper()}{line[1:]}." for line in group.get("setting", []))
            caption = f"{name}: {title}; " + _footnote(group, metric, ns, options["alpha"])
            caption += setting
            out += [
                r"\begin{table}[t]",
                r"\centering",
                r"\caption{" + _latex_escape(caption) + "}",
                r"\begin{tabular}{l" + "c" * len(group["panels"]) + "}",
                r"\toprule",
                " & ".join(["Setting"] + [_latex_escape(p) for p in group["panels"]]) + r" \\",
                r"\midrule",
            ]
            out += [" & ".join(row) + r" \\" for row in rows]
            out += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(out)
