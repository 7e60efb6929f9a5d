"""The claims tool's ledger of invocations: a table made over several invocations states the
wall time of all of them, and only of those that ran the same runs at the same code."""

from __future__ import annotations

import json
import subprocess

import pytest

from experiments.lib import runs
from experiments.lib.claims import ledger
from experiments.lib.cli import UserError

TODO = [("out/a", ["python", "-m", "experiments.fpdgd", "--n_runs=1"]), ("out/b", ["x"])]


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_invocations_of_the_same_runs_at_the_same_code_add_up(tmp_path):
    clock = Clock()
    first = ledger.Invocation(tmp_path, "code1", True, TODO, 2, clock)
    clock.now += 30.0
    first.save(runs_done=1)  # killed after this: its 30 s stay in the ledger
    clock.now += 5.0  # lost: no run finished after it
    second = ledger.Invocation(tmp_path, "code1", True, list(reversed(TODO)), 2, clock)
    clock.now += 12.5
    second.save(runs_done=2)
    assert second.wall_seconds() == 42.5 and second.count() == 2
    entries = ledger.read(tmp_path)
    assert [e["runs_done"] for e in entries] == [1, 2]
    assert [e["seconds"] for e in entries] == [30.0, 12.5]


@pytest.mark.parametrize(
    "other",
    [
        dict(source_version="code2"),  # other code
        dict(todo=TODO[:1]),  # other runs
        dict(ran=False),  # --norun
    ],
)
def test_an_invocation_of_other_runs_or_code_is_not_counted(tmp_path, other):
    clock = Clock()
    settings = dict(source_version="code1", ran=True, todo=TODO) | other
    before = ledger.Invocation(tmp_path, settings["source_version"], settings["ran"],
                               settings["todo"], 1, clock)  # fmt: skip
    clock.now += 1000.0
    before.save(runs_done=1)
    now = ledger.Invocation(tmp_path, "code1", True, TODO, 1, clock)
    clock.now += 7.0
    now.save()
    assert now.wall_seconds() == 7.0 and now.count() == 1


def _entry(**changed) -> str:
    entry = {"started": "t", "source_version": "c", "ran": True, "runs": "r", "jobs": 1,
             "seconds": 3.0, "runs_done": 0}  # fmt: skip
    return json.dumps([entry | changed])


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        json.dumps({"started": "x"}),
        json.dumps([{"started": "x"}]),
        _entry(seconds=float("nan")),
        _entry(runs_done=True),
        _entry(ran=1),
        _entry(jobs="2"),
    ],
)
def test_a_ledger_not_written_by_the_tool_is_refused_naming_it(tmp_path, text):
    (tmp_path / ledger.NAME).write_text(text)
    with pytest.raises(UserError, match=f"--results_dir: {tmp_path / ledger.NAME}"):
        ledger.read(tmp_path)
    assert (tmp_path / ledger.NAME).read_text() == text  # left as it was


def test_run_missing_reports_each_finished_run(tmp_path, monkeypatch):
    monkeypatch.setattr(
        runs, "run_one", lambda argv, *_: subprocess.CompletedProcess(argv, 0, "", "")
    )
    todo = [(tmp_path / name, ["true", name]) for name in ("a", "b", "c")]
    seen = []
    assert runs.run_missing(todo, 1, "t", on_done=seen.append) == []
    assert seen == [1, 2, 3]
