"""results.json files -> labelled Series (one setting, one click model, its runs).

Every results.json becomes a list of Series through the first adapter in ADAPTERS that
recognises its layout: `run_results` for the fpdgd-style files (one setting per file),
`poisoning_results` for a grid's `cells`, `unlearning_results` and `noniid_results` for those
binaries. A new layout needs one adapter function returning Series, or None when the layout
is not its own. Labels name the method and the config fields that differ within a group.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import itertools
import json
import pathlib
import re

import numpy as np

from experiments.results import RESULTS_FORMAT

RESULTS_NAME = "results.json"
PANEL_ORDER = ("perfect", "navigational", "informational")
EXECUTION_FIELDS = {"chunk_rounds", "window_scoring", "eval_every"}  # not what a run learns


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
    # [runs, rounds], every round whatever --eval_every: nDCG@10 of the lists shown and MaxRR of
    # the clicks (thesis Figures 3.1-3.4)
    online_ndcg: np.ndarray | None = None
    online_max_rr: np.ndarray | None = None
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
        "online_ndcg": _numbers(container, "online_ndcg", 2, where),
        "online_max_rr": _numbers(container, "online_max_rr", 2, where),
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
    except RecursionError:
        raise ReportError(f"{path}: not a results file: JSON nested too deeply") from None
    if not isinstance(payload, dict):
        raise ReportError(f"{path}: not a results file: the top level is not a JSON object")
    found = payload.get("results_format", RESULTS_FORMAT)  # files before format 1 lack it
    if found != RESULTS_FORMAT:
        raise ReportError(
            f"{path}: results format {found!r}; this version reads format {RESULTS_FORMAT} "
            "(experiments/results.schema.json)"
        )
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
    for members in by_group(series).values():
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


def by_group(series: list[Series]) -> dict[str, list[Series]]:
    """The Series of each group (a figure and its tables), in reading order."""
    groups = collections.defaultdict(list)
    for s in series:
        groups[s.group].append(s)
    return dict(groups)


def ordered_panels(members: list[Series]) -> list[str]:
    """The click models of ``members``, in the papers' order (PANEL_ORDER) first."""
    found = list(dict.fromkeys(s.panel for s in members))
    return [p for p in PANEL_ORDER if p in found] + [p for p in found if p not in PANEL_ORDER]
