"""A folder of results.json files -> learning-curve figures, tables and summary.json.

Every results.json becomes a list of Series (one setting, one click model, its runs) through
the first adapter in ADAPTERS that recognises its layout: `run_results` for the fpdgd-style
files (one setting per file), `poisoning_results` for a grid's `cells`, `unlearning_results`
and `noniid_results` for those binaries. A new layout needs one adapter function returning
Series, or None when the layout is not its own.

Series are grouped by dataset (and experiment: poisoning grids, non-IID types, or a file's
"experiment" key). Each group gets one figure (a panel per click model, a mean ± sd line per
setting; a second one of offline MaxRR where every setting recorded it) and one table
per metric (a row per setting, a column per click model), with a two-tailed t-test of every cell
against the baseline row of its column, Bonferroni-corrected over the table's comparisons.
Labels name the method and the config fields that differ between the group's settings.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import itertools
import json
import math
import pathlib
import re

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from foltr_jax import files, statistics

RESULTS_NAME = "results.json"
PANEL_ORDER = ("perfect", "navigational", "informational")
METRICS = {  # key -> (title, number format)
    "final_offline_ndcg": ("Final offline {offline}", "{:.4f}"),
    "online_performance": ("Online performance", "{:.2f}"),
}
MARK = "†"
EXECUTION_FIELDS = {"chunk_rounds", "window_scoring", "eval_every"}  # not what a run learns
MAX_POINTS = 1000  # per plotted curve; longer curves are thinned evenly


class ReportError(Exception):
    """Bad input (no results, a malformed file): one line, naming the file."""


class LayoutError(ValueError):
    """Raised by adapters: a results file's content is not what its layout needs."""


@dataclasses.dataclass
class Series:
    """The runs of one setting under one click model: a line of a figure, a cell of a table."""

    source: str  # the results.json it came from, relative to the results dir
    group: str  # figure and tables: dataset (and experiment)
    panel: str  # click model
    fields: dict  # what identifies the setting (method, config values), for labels
    always: tuple  # fields named in the label even when no other setting differs
    run_ids: list  # (seed, repetition) of each run, to pair runs across settings
    final_offline_ndcg: np.ndarray  # [runs]
    online_performance: np.ndarray | None = None  # [runs]
    offline_ndcg: np.ndarray | None = None  # [runs, rounds]
    offline_mrr: np.ndarray | None = None  # [runs, rounds]: MaxRR curves (FPDGD paper Figure 3)
    # [columns] the 1-based round of each offline column (--eval_every > 1); None: 1..T
    offline_rounds: np.ndarray | None = None
    initial_offline_ndcg: np.ndarray | None = None  # [runs]
    figure: str | None = ""  # splits a group's curves into figures; None: drawn in all of them
    offline: str = "nDCG@10"  # the offline metric (FedIPS files: nDCG@5)
    label: str = ""


# ---------------------------------------------------------------------------------- adapters


def _numbers(container: dict, key: str, ndim: int, where: str = "") -> np.ndarray | None:
    """container[key] as a float array of ndim dimensions, None when absent."""
    if key not in container:
        return None
    shape = "a list of numbers" if ndim == 1 else "a list of equal-length lists of numbers"
    try:
        array = np.asarray(container[key], dtype=float)
    except (TypeError, ValueError):
        raise LayoutError(f"{where}{key!r} is not {shape}") from None
    if array.ndim != ndim or 0 in array.shape:
        raise LayoutError(f"{where}{key!r} is not {shape} (shape {array.shape})")
    if not np.all(np.isfinite(array)):
        raise LayoutError(f"{where}{key!r} contains NaN or infinity")
    return array


def _runs(container: dict, where: str, config: dict) -> dict:
    """The per-run arrays of one setting, checked to agree on the number of runs."""
    arrays = {
        "offline_ndcg": _numbers(container, "offline_ndcg", 2, where),
        "offline_mrr": _numbers(container, "offline_mrr", 2, where),
        "initial_offline_ndcg": _numbers(container, "initial_offline_ndcg", 1, where),
        "final_offline_ndcg": _numbers(container, "final_offline_ndcg", 1, where),
        "online_performance": _numbers(container, "online_performance", 1, where),
    }
    if arrays["final_offline_ndcg"] is None:
        if arrays["offline_ndcg"] is None:
            raise LayoutError(f"{where}no 'final_offline_ndcg' or 'offline_ndcg'")
        arrays["final_offline_ndcg"] = arrays["offline_ndcg"][:, -1]
    n = len(arrays["final_offline_ndcg"])
    for key, array in arrays.items():
        if array is not None and len(array) != n:
            raise LayoutError(
                f"{where}{key!r} has {len(array)} runs but 'final_offline_ndcg' has {n}"
            )
    seed = config.get("seed")
    rounds = _offline_rounds(container, arrays, where)
    return {**arrays, "offline_rounds": rounds, "run_ids": [(seed, r) for r in range(n)]}


def _offline_rounds(container: dict, arrays: dict, where: str) -> np.ndarray | None:
    """container's "offline_rounds" (the round of each offline column, written with
    --eval_every > 1) as an int array, checked against the curves; None when absent."""
    if "offline_rounds" not in container:
        return None
    rounds = container["offline_rounds"]
    what = f"{where}'offline_rounds' is not a strictly increasing list of rounds >= 1"
    if not (
        isinstance(rounds, list)
        and rounds
        and all(isinstance(r, int) and not isinstance(r, bool) and r >= 1 for r in rounds)
        and all(a < b for a, b in itertools.pairwise(rounds))
    ):
        raise LayoutError(what)
    for key in ("offline_ndcg", "offline_mrr"):
        curves = arrays[key]
        if curves is not None and curves.shape[1] != len(rounds):
            raise LayoutError(
                f"{where}{key!r} has {curves.shape[1]} rounds but 'offline_rounds' lists "
                f"{len(rounds)}"
            )
    return np.asarray(rounds, dtype=int)


def curve_rounds(s: Series, curves: np.ndarray) -> np.ndarray:
    """The round (x) of each column of an offline curve of ``s``: its offline_rounds,
    or 1..T when every round was evaluated."""
    if s.offline_rounds is not None:
        return s.offline_rounds
    return np.arange(1, curves.shape[1] + 1)


def _config(payload: dict) -> dict:
    config = payload.get("config", {})
    if not isinstance(config, dict):
        raise LayoutError("'config' is not an object")
    return config


def dataset_name(data) -> str:
    """A short name for the dataset described by a results file's "data"."""
    if isinstance(data, dict):
        for key in ("fold_dir", "train_path"):
            if isinstance(data.get(key), str):
                path = pathlib.PurePath(data[key])
                path = path if key == "fold_dir" else path.parent
                return "/".join(path.parts[-2:])
        intents = data.get("synthetic_multi_intent")
        if isinstance(intents, dict):
            return (
                f"synthetic intents (seed {intents.get('seed')}, {intents.get('intents')} intents)"
            )
        synthetic = data.get("synthetic")
        if isinstance(synthetic, dict):
            return (
                f"synthetic (seed {synthetic.get('seed')}, {synthetic.get('queries')} queries, "
                f"{synthetic.get('features')} features)"
            )
    digest = hashlib.sha1(json.dumps(data, sort_keys=True).encode()).hexdigest()[:8]
    return f"dataset {digest}"


def offline_metric(payload: dict) -> str:
    """nDCG@10, unless the file's "metric" note names another cutoff (FedIPS: NDCG@5)."""
    found = re.search(r"ndcg@(\d+)", str(payload.get("metric", "")), re.IGNORECASE)
    return f"nDCG@{found.group(1)}" if found else "nDCG@10"


def _group(payload: dict, experiment: str | None = None) -> str:
    """Dataset, experiment (a file's "experiment", or the adapter's) and a non-default metric."""
    parts = [dataset_name(payload.get("data")), payload.get("experiment") or experiment]
    if offline_metric(payload) != "nDCG@10":
        parts.append(offline_metric(payload))
    return ", ".join(str(part) for part in parts if part)


def run_results(payload: dict, source: str) -> list[Series] | None:
    """fpdgd-style results: one setting per file, curves [n_runs][rounds]."""
    if "offline_ndcg" not in payload and "final_offline_ndcg" not in payload:
        return None
    config = _config(payload)
    fields = {"method": payload.get("method", "unknown method")}
    fields.update((k, v) for k, v in config.items() if k != "click_model")
    return [
        Series(
            source=source,
            group=_group(payload),
            panel=str(config.get("click_model", "(no click_model)")),
            fields=fields,
            always=("method",),
            offline=offline_metric(payload),
            **_runs(payload, "", config),
        )
    ]


def poisoning_results(payload: dict, source: str) -> list[Series] | None:
    """experiments/poisoning.py: a Series per cell (click model, aggregator, attack, m)."""
    if "cells" not in payload:
        return None
    cells = payload["cells"]
    if not isinstance(cells, list) or not cells:
        raise LayoutError("'cells' is not a non-empty list")
    config = _config(payload)
    series = []
    for i, cell in enumerate(cells):
        where = f"cells[{i}]: "
        if not isinstance(cell, dict) or not isinstance(cell.get("setting"), dict):
            raise LayoutError(f"{where}no 'setting' object")
        setting = cell["setting"]
        fields = {"method": payload.get("method", "unknown method")}
        fields.update((k, v) for k, v in config.items() if k not in setting)
        main = {"aggregator": "aggregator", "attack": "attack", "m": "n_malicious"}
        fields.update((short, setting[k]) for short, k in main.items() if k in setting)
        rest = set(main.values()) | {"click_model"}
        fields.update((k, v) for k, v in setting.items() if k not in rest)
        m = fields.get("m", 0)
        series.append(
            Series(
                source=source,
                group=_group(payload, "poisoning"),
                panel=str(setting.get("click_model", "(no click_model)")),
                fields=fields,
                always=tuple(main),
                offline=offline_metric(payload),
                figure=f"m={m}" if m else None,  # a figure per m; no-attack cells in each
                **_runs(cell, where, config),
            )
        )
    return series


def unlearning_results(payload: dict, source: str) -> list[Series] | None:
    """experiments/unlearning.py: the trained configurations (10H-0M, 9H-1M, 9H-0M; paper
    Figure 2), drawn in every figure, and each U(9H-1M) cell (Figure 3, Table 3), a figure
    per Δt."""
    if "unlearning" not in payload or "training" not in payload:
        return None
    config = _config(payload)
    rows = [("training", row) for row in payload["training"]]
    rows += [("unlearning", row) for row in payload["unlearning"]]
    series = []
    for i, (part, row) in enumerate(rows):
        where = f"{part}[{i}]: "
        if not isinstance(row, dict) or "configuration" not in row:
            raise LayoutError(f"{where}no 'configuration'")
        fields = {"method": row["configuration"]}
        figure = None
        if part == "unlearning":
            fields.update({"n′": row.get("unlearn_local_updates"), "Δt": row.get("delta_t")})
            figure = f"Δt={row.get('delta_t')}"
        series.append(
            Series(
                source=source,
                group=_group(payload, "unlearning"),
                panel=str(row.get("click_model", "(no click_model)")),
                fields=fields,
                always=tuple(fields),
                figure=figure,
                **_runs(row, where, config),
            )
        )
    return series


def noniid_results(payload: dict, source: str) -> list[Series] | None:
    """experiments/noniid.py: a Series per cell (iid, noniid, fedprox_mu=…, fedper, sharing).

    The group is the dataset, the non-IID type and what sets its figure apart in the
    thesis (ch. 4): #R and |C| (Type 2), the clients' click models (Type 3), the mix
    (Type 4), the ranker and B; so every group has its own IID baseline and non-IID
    cell, as in Figures 4.3-4.9.  Panels are the click model (Type 3: CCM or PBM).
    """
    info = payload.get("noniid")
    if not isinstance(info, dict) or "cells" not in payload:
        return None
    cells = payload["cells"]
    if not isinstance(cells, list) or not cells:
        raise LayoutError("'cells' is not a non-empty list")
    config = _config(payload)
    kind = info.get("type")
    parts = [f"non-IID type {kind}"]
    if kind == 2:
        parts.append(f"#R={info.get('grades_per_client')}, |C|={config.get('n_clients')}")
    if kind == 4 and info.get("mix") not in (None, "none"):
        parts.append(f"mixed with type {info.get('mix')}")
    parts.append(f"{config.get('ranker')} ranker")
    if kind != 4:
        parts.append(f"B={config.get('local_updates')}")
    group = ", ".join([dataset_name(payload.get("data")), *parts])
    if kind == 3:
        panel = f"{str(info.get('clicks', '')).upper()} clients"
    else:
        panel = str(config.get("click_model", "(no click_model)"))
    series = []
    for i, cell in enumerate(cells):
        where = f"cells[{i}]: "
        if not isinstance(cell, dict) or not isinstance(cell.get("name"), str):
            raise LayoutError(f"{where}no 'name'")
        series.append(
            Series(
                source=source,
                group=group,
                panel=panel,
                fields={"method": cell["name"]},
                always=("method",),
                **_runs(cell, where, config),
            )
        )
    return series


ADAPTERS = [unlearning_results, noniid_results, poisoning_results, run_results]


# ------------------------------------------------------------------------------------ loading


def find_results(results_dir) -> list[pathlib.Path]:
    """Every results.json under results_dir, in sorted order; ReportError when there is none."""
    root = pathlib.Path(results_dir)
    if not root.is_dir():
        raise ReportError(f"results dir {root} does not exist or is not a folder")
    paths = sorted(p for p in root.rglob(RESULTS_NAME) if p.is_file())
    if not paths:
        raise ReportError(f"no {RESULTS_NAME} under {root}")
    return paths


def read_results(path: pathlib.Path, source: str) -> list[Series]:
    """The Series of one results.json; ReportError naming the file when it is malformed."""
    try:
        payload = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise ReportError(f"{path}: cannot read: {error}") from None
    except json.JSONDecodeError as error:
        raise ReportError(f"{path}: not valid JSON: {error}") from None
    if not isinstance(payload, dict):
        raise ReportError(f"{path}: not a results file: the top level is not a JSON object")
    try:
        for adapter in ADAPTERS:
            series = adapter(payload, source)
            if series is not None:
                return series
    except LayoutError as error:
        raise ReportError(f"{path}: {error}") from None
    raise ReportError(
        f"{path}: not a results file: no 'offline_ndcg', 'final_offline_ndcg' or 'cells'"
    )


def load_series(results_dir) -> list[Series]:
    """All Series under results_dir, labelled."""
    root = pathlib.Path(results_dir)
    series = []
    for path in find_results(root):
        series += read_results(path, path.relative_to(root).as_posix())
    label_series(series)
    return series


def _show(value) -> str:
    return json.dumps(value) if isinstance(value, (dict, list)) else str(value)


def label_series(series: list[Series]) -> None:
    """Labels: the method and the fields whose values differ within the group.

    A field only some settings have (another method's own option) does not count as
    differing; EXECUTION_FIELDS never do. Labels are then made unique per panel.
    """
    for members in _by_group(series).values():
        keys = list(dict.fromkeys(k for s in members for k in s.fields))
        differing = {
            k
            for k in keys
            if k not in EXECUTION_FIELDS
            and len({json.dumps(s.fields[k], sort_keys=True) for s in members if k in s.fields}) > 1
        }
        for s in members:
            shown = [k for k in keys if k in s.fields and (k in s.always or k in differing)]
            parts = [
                _show(s.fields[k]) if k == "method" else f"{k}={_show(s.fields[k])}" for k in shown
            ]
            s.label = ", ".join(parts) or "all runs"
        _make_unique(members)


def _make_unique(members: list[Series]) -> None:
    """Same label twice in a panel (same setting in two files): add the file's folder."""
    counts = collections.Counter((s.panel, s.label) for s in members)
    for s in members:
        if counts[(s.panel, s.label)] > 1:
            s.label += f" ({pathlib.PurePosixPath(s.source).parent.as_posix()})"
    seen = collections.Counter()
    for s in members:
        seen[(s.panel, s.label)] += 1
        if seen[(s.panel, s.label)] > 1:
            s.label += f" #{seen[(s.panel, s.label)]}"


def _by_group(series: list[Series]) -> dict[str, list[Series]]:
    groups = collections.defaultdict(list)
    for s in series:
        groups[s.group].append(s)
    return dict(groups)


def _panels(members: list[Series]) -> list[str]:
    found = list(dict.fromkeys(s.panel for s in members))
    return [p for p in PANEL_ORDER if p in found] + [p for p in found if p not in PANEL_ORDER]


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
    panels = _panels(members)
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
        name = label + (" (baseline)" if label == group["baseline"] else "")
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
            caption = f"{name}: {title}; " + _footnote(group, metric, ns, options["alpha"])
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
    panels = _panels(members)
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
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(CURVES[curve].format(offline=members[0].offline))
    handles = [Line2D([], [], **_style(i)) for i in range(len(labels))]
    figure.legend(handles, labels, loc="outside lower center", ncol=ncol, fontsize="small")
    figure.suptitle(title)
    return figure


def _save_figure(figure: Figure, path: pathlib.Path) -> None:
    suffix = path.suffix[1:]
    metadata = {"CreationDate": None} if suffix == "pdf" else None  # same input, same PDF
    files.write_atomically(
        path, lambda stream: figure.savefig(stream, format=suffix, dpi=150, metadata=metadata)
    )


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
) -> dict:
    """Reads results_dir, writes figures, table.md, table.tex, summary.json; returns the summary.

    output_dir defaults to results_dir/report. baseline: a label, or a substring of exactly one
    label per group. paired: paired t-tests where two settings' runs share (seed, repetition),
    else independent ones (Student's, or Welch's with equal_var=False).
    """
    if not 0 < alpha < 1:
        raise ReportError(f"alpha must lie in (0, 1), got {alpha}")
    results_dir = pathlib.Path(results_dir)
    output_dir = pathlib.Path(output_dir) if output_dir else results_dir / "report"
    series = load_series(results_dir)
    groups = _by_group(series)
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
