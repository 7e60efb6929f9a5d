"""results.json files -> labelled Series (one setting, one click model, its runs).

Every results.json has one structure (foltr_jax.engine.results_files, format 2): each entry of its
"cells" becomes a Series, placed and named by the cell's "labels". A file of another
format version is refused, naming the file. Labels name the method and the fields that
differ within a group.
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

from experiments.lib import words
from foltr_jax.engine.results_files import RESULTS_FORMAT

RESULTS_NAME = "results.json"
PANEL_ORDER = ("perfect", "navigational", "informational")
EXECUTION_FIELDS = {"chunk_rounds", "window_scoring", "display_groups", "eval_every"}  # not learnt


class ReportError(Exception):
    """Bad input (no results, a malformed file): one line, naming the file."""


class LayoutError(ValueError):
    """A results file's content is not what its structure needs."""


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
    label: str = ""  # the fields that tell it apart as name=value: what --baseline matches
    words: str = ""  # the same in words (experiments/lib/words.py): legends and tables
    dataset: str = ""  # its data in words (``dataset_name``)


# ------------------------------------------------------------------------------------ reading


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


def _object(container: dict, key: str, where: str) -> dict:
    value = container.get(key)
    if not isinstance(value, dict):
        raise LayoutError(f"{where}{key!r} is not an object")
    return value


def _runs(cell: dict, metric: str, where: str, config: dict) -> dict:
    """The per-run arrays of one cell, checked to agree on the number of runs and with
    the cell's evaluated rounds."""
    curves = _object(cell, "curves", where)
    per_run = _object(cell, "per_run", where)
    offline = f"offline_{metric}"
    arrays = {
        "offline_ndcg": _numbers(curves, offline, 2, f"{where}curves: "),
        "offline_mrr": _numbers(curves, "offline_mrr", 2, f"{where}curves: "),
        "online_ndcg": _numbers(curves, "online_ndcg", 2, f"{where}curves: "),
        "online_max_rr": _numbers(curves, "online_max_rr", 2, f"{where}curves: "),
        "initial_offline_ndcg": _numbers(per_run, f"initial_{offline}", 1, f"{where}per_run: "),
        "final_offline_ndcg": _numbers(per_run, f"final_{offline}", 1, f"{where}per_run: "),
        "online_performance": _numbers(per_run, "online_performance", 1, f"{where}per_run: "),
    }
    if arrays["offline_ndcg"] is None:
        raise LayoutError(f"{where}no curves[{offline!r}] (the file's metric {metric!r})")
    if arrays["final_offline_ndcg"] is None:
        arrays["final_offline_ndcg"] = arrays["offline_ndcg"][:, -1]
    n = len(arrays["final_offline_ndcg"])
    for key, array in arrays.items():
        if array is not None and len(array) != n:
            raise LayoutError(
                f"{where}{key!r} has {len(array)} runs but 'final_offline_ndcg' has {n}"
            )
    rounds = _evaluated_rounds(cell, arrays, where)
    return {
        **arrays,
        "offline_rounds": rounds,
        "run_ids": [(config.get("seed"), r) for r in range(n)],
    }


def _evaluated_rounds(cell: dict, arrays: dict, where: str) -> np.ndarray | None:
    """The cell's "evaluated_rounds" (the round of each offline column), checked against
    the curves: None when they are 1..T (every round evaluated), else an int array."""
    rounds = cell.get("evaluated_rounds")
    what = f"{where}'evaluated_rounds' is not a strictly increasing list of rounds >= 1"
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
                f"{where}{key!r} has {curves.shape[1]} rounds but 'evaluated_rounds' lists "
                f"{len(rounds)}"
            )
    if rounds == list(range(1, len(rounds) + 1)):
        return None
    return np.asarray(rounds, dtype=int)


def curve_rounds(s: Series, curves: np.ndarray) -> np.ndarray:
    """The round (x) of each column of an offline curve of ``s``: its offline_rounds,
    or 1..T when every round was evaluated."""
    if s.offline_rounds is not None:
        return s.offline_rounds
    return np.arange(1, curves.shape[1] + 1)


EXCERPT_NAME = "MSLR-WEB10K excerpt (43 + 43 queries of Fold 1)"


def _is_excerpt(path) -> bool:
    """Whether a training file is the MSLR excerpt's: in a folder named mslr_sample, or in
    third_party/mslr_sample/data where its fetch recipe puts it, or one of its re-partitioned
    folds (foltr_jax.data.folds: a folder mslr_sample_fold<k>; the same 86 queries of Fold 1)."""
    if not isinstance(path, str):
        return False
    parts = pathlib.PurePath(path).parent.parts
    if parts and re.fullmatch(r"mslr_sample_fold\d+", parts[-1]):
        return True
    return parts[-1:] == ("mslr_sample",) or parts[-2:] == ("mslr_sample", "data")


def dataset_name(data) -> str:
    """A short name for the dataset described by a results file's "data"."""
    if isinstance(data, dict):
        if data.get("name") == "mslr_sample" or _is_excerpt(data.get("train_path")):
            return EXCERPT_NAME
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


def metric_label(metric: str) -> str:
    """A metric name as labels show it: ndcg (nDCG@10), ndcg5 -> nDCG@5, mrr -> MRR."""
    found = re.fullmatch(r"ndcg(\d*)", metric)
    if found:
        return f"nDCG@{found.group(1) or 10}"
    return metric.replace("_", " ").upper()


def cell_series(payload: dict, source: str) -> list[Series]:
    """A Series per cell of a results file (format 2), placed and named by its labels."""
    config = payload.get("config")
    if not isinstance(config, dict):
        raise LayoutError("'config' is not an object")
    metric = payload.get("metric")
    if not isinstance(metric, str) or not re.fullmatch(r"[a-z_]+[0-9]*", metric):
        raise LayoutError("'metric' is not a metric name (e.g. ndcg, ndcg5)")
    offline = metric_label(metric)
    cells = payload.get("cells")
    if not isinstance(cells, list) or not cells:
        raise LayoutError("'cells' is not a non-empty list")
    series = []
    for i, cell in enumerate(cells):
        where = f"cells[{i}]: "
        if not isinstance(cell, dict):
            raise LayoutError(f"{where}not an object")
        setting = _object(cell, "setting", where)
        labels = _object(cell, "labels", where)
        if not isinstance(labels.get("method"), str) or not isinstance(labels.get("panel"), str):
            raise LayoutError(f"{where}labels: no 'method' or 'panel' name")
        fields = {"method": labels["method"]}
        if labels.get("config", True):
            fields.update(
                (k, v) for k, v in config.items() if k not in setting and k != "click_model"
            )
        given = labels.get("fields") or {}
        if not isinstance(given, dict):
            raise LayoutError(f"{where}labels.fields: not an object (name -> value)")
        fields.update(given)
        dataset = dataset_name(payload.get("data"))
        group = [dataset, labels.get("group")]
        if offline != "nDCG@10":
            group.append(offline)
        series.append(
            Series(
                source=source,
                group=", ".join(str(part) for part in group if part),
                panel=labels["panel"],
                fields=fields,
                always=tuple(labels.get("always", ("method",))),
                offline=offline,
                figure=labels.get("figure", ""),
                dataset=dataset,
                **_runs(cell, metric, where, config),
            )
        )
    return series


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
    except ValueError as error:  # e.g. an integer of more digits than Python converts
        raise ReportError(f"{path}: not valid JSON: {error}") from None
    if not isinstance(payload, dict):
        raise ReportError(f"{path}: not a results file: the top level is not a JSON object")
    found = payload.get("results_format")
    if found != RESULTS_FORMAT:
        if isinstance(found, int) and not isinstance(found, bool) and found < RESULTS_FORMAT:
            what = f"results format {found}"
        elif found is None:
            what = "no results_format"
        else:
            what = None
        if what is not None:
            raise ReportError(
                f"{path}: {what}: written by an older version of foltr_jax; this version "
                f"reads results format {RESULTS_FORMAT} (foltr_jax/engine/results.schema.json): "
                "run the binary again"
            )
        raise ReportError(
            f"{path}: results format {found!r}; this version reads format {RESULTS_FORMAT} "
            "(foltr_jax/engine/results.schema.json)"
        )
    try:
        return cell_series(payload, source)
    except LayoutError as error:
        raise ReportError(f"{path}: {error}") from None


def load_series(results_dir, accept=None) -> list[Series]:
    """All Series under results_dir, labelled; ``accept(path)``: whether a results file may be
    read (None: every one; ReportError when it accepts none)."""
    root = pathlib.Path(results_dir)
    series = []
    paths = [path for path in find_results(root) if accept is None or accept(path)]
    if not paths:
        raise ReportError(f"no results under {root} are of the runs asked for")
    for path in paths:
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
            # In words the method is left out where every line shares it (the heading says it)
            own = [k for k in shown if k in differing] or shown
            s.words = words.setting(s.fields, own) or s.label
        _make_unique(members)


def _make_unique(members: list[Series]) -> None:
    """Same label twice in a panel (same setting in two files): add the file's folder."""
    counts = collections.Counter((s.panel, s.label) for s in members)
    for s in members:
        if counts[(s.panel, s.label)] > 1:
            folder = f" ({pathlib.PurePosixPath(s.source).parent.as_posix()})"
            s.label, s.words = s.label + folder, s.words + folder
    seen = collections.Counter()
    for s in members:
        seen[(s.panel, s.label)] += 1
        if seen[(s.panel, s.label)] > 1:
            number = f" #{seen[(s.panel, s.label)]}"
            s.label, s.words = s.label + number, s.words + number
    # Two settings whose words read alike (a field words leave out): their labels tell apart
    by_words = collections.defaultdict(set)
    for s in members:
        by_words[s.words].add(s.label)
    for s in members:
        if len(by_words[s.words]) > 1:
            s.words = s.label


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
