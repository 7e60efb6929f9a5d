"""results_files: the results folder (claimed, locked, never through a link), strict and
atomic results, finished parts kept without pickle, and results.json from the Python API."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from experiments.lib import output
from foltr_jax import FpdgdConfig, data
from foltr_jax.core import files
from foltr_jax.engine import RunResult, results_files
from foltr_jax.engine.results_files import (
    FinishedParts,
    Output,
    OutputError,
    probe_output_file,
    write_output_file,
)
from tests.sample_data import REPO_ROOT

# 1. The folder is refused before any work when it cannot take the results ---------------


def test_output_dir_that_cannot_take_results_is_refused_before_work(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    for path, problem in [
        (a_file, "exists and is not a folder"),
        (a_file / "sub", "cannot create it"),
    ]:
        with pytest.raises(OutputError, match=f"^folder: .*{problem}"):
            Output(path)
    (tmp_path / "out" / "results.json").mkdir(parents=True)
    with pytest.raises(OutputError, match="^folder: .*results.json is not a file"):
        Output(tmp_path / "out")
    assert not (tmp_path / "out" / ".lock").exists()
    (tmp_path / "grid" / "cell").parent.mkdir()
    (tmp_path / "grid" / "cell").write_text("")  # a file where a grid cell's folder goes
    with pytest.raises(OutputError, match="^folder: .*cell is not a folder"):
        Output(tmp_path / "grid", outputs=("cell/results.json",))
    Output(tmp_path / "new" / "deeper").release()  # a failed run: what it made goes
    assert not (tmp_path / "new").exists()


def test_unwritable_output_dir_is_refused_before_work(tmp_path, monkeypatch):
    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refused)  # what Output probes with
    with pytest.raises(OutputError, match="^folder: cannot write into .*denied"):
        Output(tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_argument_named_in_errors_is_the_callers(tmp_path):
    (tmp_path / "a_file").write_text("")
    with pytest.raises(OutputError, match="^--results_dir: .*exists and is not a folder"):
        Output(tmp_path / "a_file", argument="--results_dir")
    with pytest.raises(OutputError, match="^folder: .*exists and is not a folder"):
        Output(tmp_path / "a_file")  # a Python caller's error names no binary's flag
    with pytest.raises(OutputError, match="^--output_dir: .*exists and is not a folder"):
        output.Output(tmp_path / "a_file")  # the binaries' Output names their flag


# 2. Two runs into one folder -------------------------------------------------------------


def test_second_run_into_the_same_output_dir_is_refused(tmp_path):
    first = Output(tmp_path / "out")
    with pytest.raises(OutputError, match=f"^folder: .*in use by another run .*{os.getpid()}"):
        Output(tmp_path / "out")
    first.finish()
    (tmp_path / "out" / ".lock").write_text("12345\n")  # left by a killed run: not held
    Output(tmp_path / "out").finish()
    assert not (tmp_path / "out" / ".lock").exists()


def test_second_process_into_the_same_output_dir_is_refused(tmp_path):
    held = Output(tmp_path / "out")
    code = (
        "import sys\nfrom foltr_jax.engine.results_files import Output, OutputError\n"
        "try:\n    Output(sys.argv[1])\n"
        "except OutputError as e:\n    print(e); sys.exit(2)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "out")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    held.finish()
    assert done.returncode == 2 and "in use by another run" in done.stdout, done


def test_a_planted_lock_symlink_is_never_followed(tmp_path):
    out, victim = tmp_path / "out", tmp_path / "precious.txt"
    out.mkdir()
    victim.write_text("keep me")
    (out / ".lock").symlink_to(victim)
    with pytest.raises(OutputError, match=r"^folder: cannot lock .*symbolic link"):
        Output(out)
    assert victim.read_text() == "keep me"


def test_a_fifo_as_lock_file_is_refused_without_waiting(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / ".lock")
    with pytest.raises(OutputError, match="not a regular file"):
        Output(out)


# 3. A run touches only the files it names -----------------------------------------------


def test_finishing_removes_only_what_the_run_named(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    foreign = [
        out / ".checkpoint-someone-else.npz",
        out / ".notes.txt.abc.tmp",
        out / "mine.npz",
    ]
    for path in foreign:
        path.write_text("not the run's")
    output = Output(out, checkpoints=True)
    own = pathlib.Path(output.checkpoint("cell"))
    own.write_text("the run's checkpoint")
    leftover = out / ".results.json.x1y2.tmp"  # what a killed writer of results.json left
    leftover.write_text("half")
    output.write_json("results.json", {"x": 1})
    output.finish()
    assert not own.exists() and not leftover.exists()
    assert all(path.read_text() == "not the run's" for path in foreign)
    assert (out / "results.json").exists() and not (out / ".lock").exists()


def test_without_checkpoints_no_checkpoint_or_part_is_named(tmp_path):
    output = Output(tmp_path / "out", checkpoints=False)
    assert output.checkpoint() is None and not output.keeps_checkpoints
    assert not output.finished_parts(".cells").enabled
    output.finish()


def test_clearing_finished_parts_leaves_other_files(tmp_path):
    parts = FinishedParts(tmp_path / ".cells")
    parts.save("mine", "f", {"x": np.arange(3.0)})
    (tmp_path / ".cells" / "theirs.npz").write_text("someone else's")
    parts.clear()
    assert not (tmp_path / ".cells" / "mine.npz").exists()
    assert (tmp_path / ".cells" / "theirs.npz").read_text() == "someone else's"


def test_finished_parts_refuse_a_linked_or_non_folder_place(tmp_path):
    target = tmp_path / "theirs"
    target.mkdir()
    (tmp_path / "out").mkdir()
    os.symlink(target, tmp_path / "out" / ".cells")
    with pytest.raises(OutputError, match=r"\.cells is a symbolic link, which is never followed"):
        FinishedParts(tmp_path / "out" / ".cells")
    (tmp_path / "out" / ".phases").write_text("a file")
    with pytest.raises(OutputError, match=r"\.phases is not a folder"):
        FinishedParts(tmp_path / "out" / ".phases")
    parts = FinishedParts(tmp_path / "out" / ".fresh")  # missing: made when a part is saved
    os.symlink(target, tmp_path / "out" / ".fresh")  # planted after the run began
    with pytest.raises(OutputError, match="symbolic link"):
        parts.save("cell", "f", {"x": 1.0})
    assert list(target.iterdir()) == []


def test_a_finished_part_is_reused_only_by_the_same_settings_and_code(tmp_path):
    parts = FinishedParts(tmp_path / ".cells", code="a")
    computed = []

    def compute():
        computed.append(1)
        return {"curve": np.arange(3.0), "name": "x"}

    first = parts.reuse("cell", lambda: "f", compute)
    again = parts.reuse("cell", lambda: "f", compute)
    assert len(computed) == 1 and again["name"] == "x"
    np.testing.assert_array_equal(again["curve"], first["curve"])
    with pytest.warns(UserWarning, match="ignoring"):
        FinishedParts(tmp_path / ".cells", code="b").reuse("cell", lambda: "f", compute)
    assert len(computed) == 2
    with pytest.warns(UserWarning, match="ignoring"):  # saved by code b; then other settings
        parts.reuse("cell", lambda: "other settings", compute)
    assert len(computed) == 3


def test_a_finished_part_that_is_not_finite_is_run_again(tmp_path):
    parts = FinishedParts(tmp_path / ".phases")
    parts.save("honest", "f", {"curve": np.arange(3.0)})
    path = tmp_path / ".phases" / "honest.npz"
    with np.load(path, allow_pickle=False) as z:
        header = json.loads(str(z["meta"][()]))
    arrays = [np.array([0.0, np.nan, 1.0])]
    header = {**header, "sha256": files.arrays_digest(arrays)}
    np.savez(path, meta=np.str_(json.dumps(header)), a0=arrays[0])
    with pytest.warns(UserWarning, match="not finite"):
        assert parts.load("honest", "f") is None


# 4. Results hold finite numbers only, in strict JSON ------------------------------------


def test_nan_in_results_is_an_error_where_it_arises_and_json_is_strict(tmp_path):
    output = Output(tmp_path / "out")
    curves = np.array([[0.5, 0.25], [0.5, np.nan]])
    with pytest.raises(OutputError, match=r"results.json: offline_ndcg\[1\]\[1\] is nan"):
        output.write_json("results.json", {"offline_ndcg": curves.tolist()})
    with pytest.raises(OutputError, match=r"part 'x': curve\[1\] is inf"):
        FinishedParts(tmp_path / "parts").save("x", "f", {"curve": np.array([0, np.inf])})
    assert not (output.path / "results.json").exists()
    output.write_json("results.json", {"offline_ndcg": [[0.5, 0.25]], "epsilon": None})

    def no_constants(name):
        raise AssertionError(f"{name} in results.json")

    json.loads((output.path / "results.json").read_text(), parse_constant=no_constants)
    output.finish()


@pytest.mark.parametrize("case", ["folder", "fifo", "parent_is_a_file", "read_only", "empty"])
def test_an_unusable_output_file_is_refused_before_any_work(case, tmp_path):
    target = tmp_path / "budget.json"
    if case == "folder":
        target.mkdir()
    elif case == "fifo":
        os.mkfifo(target)
    elif case == "parent_is_a_file":
        (tmp_path / "file").write_text("x")
        target = tmp_path / "file" / "budget.json"
    elif case == "read_only":
        (tmp_path / "ro").mkdir()
        os.chmod(tmp_path / "ro", 0o500)
        target = tmp_path / "ro" / "budget.json"
        if os.access(tmp_path / "ro", os.W_OK):
            pytest.skip("running as a user who may write anywhere")
    elif case == "empty":
        target = ""
    with pytest.raises(OutputError) as caught:
        probe_output_file(target, "--output")
    assert str(caught.value).startswith("--output: ") and "\n" not in str(caught.value)
    assert not list(tmp_path.rglob("*.tmp")) and not list(tmp_path.rglob(".*probe*"))


def test_a_writable_output_file_is_probed_without_leaving_anything(tmp_path):
    target = probe_output_file(tmp_path / "new" / "suite.json", "suite_output")
    assert target.parent.is_dir() and list(target.parent.iterdir()) == []
    write_output_file(target, {"x": 1}, "suite_output")
    assert json.loads(target.read_text()) == {"x": 1}


# 5. results.json from the Python API ----------------------------------------------------


def _result(n_slots=2, rounds=3):
    offline = np.linspace(0.1, 0.6, n_slots * rounds).reshape(n_slots, rounds)
    return RunResult(
        curves={"offline_ndcg": offline, "online_ndcg": offline / 2},
        initial={"offline_ndcg": np.full(n_slots, 0.05)},
        final_params=None,
        compile_seconds=1.5,
        run_seconds=2.0,
        interactions=400,
        offline_rounds=np.arange(1, rounds + 1),
        offline=("offline_ndcg",),
    )


def test_write_results_writes_the_binaries_structure(tmp_path):
    train, test = data.synthetic_train_test(0, n_train_queries=6, n_test_queries=4)
    config, result = FpdgdConfig(rounds=3, n_runs=2), _result()
    path = results_files.write_results(
        tmp_path / "out", "fpdgd", config, result, train, test, {"name": "synthetic"}
    )
    assert path == tmp_path / "out" / "results.json"
    assert sorted(p.name for p in path.parent.iterdir()) == ["results.json"]  # lock gone
    written = json.loads(path.read_text())
    expected = results_files.results_file(
        "fpdgd", config, result, train, test, {"name": "synthetic"}, provenance={}
    )
    assert {**written, "provenance": {}} == json.loads(json.dumps(expected))
    assert list(written)[:5] == ["results_format", "method", "versions", "provenance", "config"]
    assert written["provenance"]["code"] == files.source_version()
    assert written["results_format"] == results_files.RESULTS_FORMAT
    assert written["config"] == dataclasses.asdict(config)
    assert written["data"]["name"] == "synthetic" and written["data"]["normalise"] is True
    assert written["data"]["train"] == results_files.dataset_summary(train)
    assert written["data"]["train"]["queries"] == 6
    (cell,) = written["cells"]
    assert cell["name"] == config.click_model and cell["evaluated_rounds"] == [1, 2, 3]
    assert cell["per_run"]["final_offline_ndcg"] == result.offline_ndcg[:, -1].tolist()
    assert cell["per_run"]["initial_offline_ndcg"] == [0.05, 0.05]
    assert len(cell["per_run"]["online_performance"]) == 2
    assert written["interactions_per_second"] == 200.0
    assert results_files.curve_summary(written).startswith(
        "offline nDCG@10 (mean of 2 run(s)) initial: 0.0500, round 1:"
    )


def test_a_python_callers_provenance_has_the_binaries_fields(tmp_path):
    schema = results_files.schema()
    train = tmp_path / "train.txt"
    train.write_bytes(b"0 qid:1 1:0.5\n")
    made = results_files.provenance_record(data_files=[train])
    assert set(made) == set(schema["properties"]["provenance"]["required"])
    assert made["command"] == sys.argv and made["flags"] == {} and made["plugins"] == []
    digest = hashlib.sha256(train.read_bytes()).hexdigest()
    assert made["data_files"] == [{"path": str(train), "bytes": 14, "sha256": digest}]
    assert made["code"] == files.source_version() and made["device"]["platform"] is not None
    json.dumps(made, allow_nan=False)


def test_provenance_is_written_when_given_and_a_slice_picks_the_runs(tmp_path):
    train, test = data.synthetic_train_test(0, n_train_queries=6, n_test_queries=4)
    result = _result(n_slots=4)
    made = {"command": ["mine.py"]}
    written = results_files.results_file(
        "fpdgd", FpdgdConfig(rounds=3), result, train, test, {}, slice(2, 4),
        normalise=False, provenance=made,
    )  # fmt: skip
    assert list(written)[:4] == ["results_format", "method", "versions", "provenance"]
    assert written["provenance"] == made and written["data"]["normalise"] is False
    curves = written["cells"][0]["curves"]["offline_ndcg"]
    assert curves == result.offline_ndcg[2:4].tolist()


def test_write_results_refuses_a_result_that_is_not_finite(tmp_path):
    train, test = data.synthetic_train_test(0, n_train_queries=6, n_test_queries=4)
    result = _result()
    result.curves["offline_ndcg"][1, 2] = np.nan
    with pytest.raises(OutputError, match=r"offline_ndcg\[1\]\[2\] is nan"):
        results_files.write_results(tmp_path / "out", "fpdgd", FpdgdConfig(), result, train, test)
    assert not (tmp_path / "out").exists()  # the folder it made goes with the failed run
