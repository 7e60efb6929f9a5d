"""Ctrl-C is one line: where the run was, where its checkpoint is, that the same command
continues; exit status 130, no traceback, nothing half-written."""

import io
import os
import pathlib
import signal
import subprocess
import sys
import textwrap

import pytest

from experiments.lib import cli, output, program
from foltr_jax.engine import results_files
from tests.sample_data import REPO_ROOT


@pytest.fixture
def progress(monkeypatch):
    """A clean record of where the work is, and no output folder held."""
    monkeypatch.setattr(cli, "PROGRESS", {})
    monkeypatch.setattr(program, "PROGRESS", cli.PROGRESS)
    monkeypatch.setattr(results_files, "CLAIMED", [])
    return cli.PROGRESS


def _interrupted(program_name, capsys) -> str:
    with pytest.raises(SystemExit) as ended:
        program.interrupted(program_name)
    assert ended.value.code == 130
    (line,) = capsys.readouterr().err.splitlines()
    return line


def test_an_interrupt_names_the_round_and_the_checkpoint(tmp_path, progress, capsys):
    claimed = output.Output(tmp_path / "out", checkpoints=True)
    try:
        (tmp_path / "out" / ".checkpoint.npz").write_bytes(b"saved")
        cli.ProgressLog("fpdgd", stream=io.StringIO())(100, 3000, 1.0)
        line = _interrupted("fpdgd", capsys)
    finally:
        claimed.release()
    assert line == (
        f"fpdgd: interrupted at round 100/3,000; the checkpoint is in "
        f"{tmp_path / 'out' / '.checkpoint.npz'}; run the same command to continue"
    )


def test_a_part_is_named_and_several_checkpoints_by_their_folder(tmp_path, progress, capsys):
    claimed = output.Output(tmp_path / "out", checkpoints=True)
    try:
        (tmp_path / "out" / ".cells").mkdir()
        (tmp_path / "out" / ".cells" / "iid.npz").write_bytes(b"part")
        (tmp_path / "out" / ".checkpoint-skewed.npz").write_bytes(b"saved")
        progress["rounds"] = ("noniid skewed", 40, 200)
        line = _interrupted("noniid", capsys)
    finally:
        claimed.release()
    assert line == (
        f"noniid: interrupted at round 40/200 of noniid skewed; the checkpoints are in "
        f"{tmp_path / 'out'}; run the same command to continue"
    )


def test_an_interrupt_without_a_checkpoint_says_the_run_starts_over(tmp_path, progress, capsys):
    claimed = output.Output(tmp_path / "out", checkpoints=False)
    try:
        progress["rounds"] = ("fpdgd", 60, 200)
        line = _interrupted("fpdgd", capsys)
        assert line == (
            "fpdgd: interrupted at round 60/200; no checkpoint is kept (--nocheckpoint); "
            "run the same command to start over"
        )
        progress.clear()
        claimed.checkpoints = True
        line = _interrupted("fpdgd", capsys)
        assert line == (
            "fpdgd: interrupted before the first round; nothing was saved yet; run the same "
            "command to start again"
        )
    finally:
        claimed.release()


def test_an_interrupted_batch_counts_its_runs_and_a_tool_says_nothing_is_half_written(
    progress, capsys
):
    progress["runs"] = (3, 7)
    assert _interrupted("batch", capsys) == (
        "batch: interrupted with 3 of 7 run(s) done; the finished runs' results are kept and "
        "an interrupted run keeps its checkpoint; run the same command to continue"
    )
    progress.clear()
    assert _interrupted("report", capsys) == (
        "report: interrupted; no file is left half-written; run the same command to start again"
    )


def _start(args, out: pathlib.Path):
    return subprocess.Popen(
        [sys.executable, "-m", "experiments.fpdgd", *args, f"--output_dir={out}"],
        cwd=REPO_ROOT,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow  # a binary in its own process, interrupted, then run again
def test_ctrl_c_in_a_binary_is_one_line_and_the_same_command_continues(tmp_path):
    args = ["--synthetic_queries=40", "--n_clients=20", "--rounds=600", "--chunk_rounds=10"]
    out = tmp_path / "out"
    process = _start(args, out)
    seen = []
    for line in process.stderr:
        seen.append(line)
        if "[fpdgd] round 10/600" in line:
            process.send_signal(signal.SIGINT)
            break
    rest = process.stderr.read().strip().splitlines()
    assert process.wait(timeout=120) == 130, "".join(seen) + "\n".join(rest)
    assert rest, "".join(seen)
    assert "Traceback" not in "\n".join(rest)
    last = rest[-1]
    assert last.startswith("fpdgd: interrupted at round "), last
    assert last.endswith(
        f"/600; the checkpoint is in {out / '.checkpoint.npz'}; run the same command to continue"
    ), last
    assert sorted(p.name for p in out.iterdir()) == [".checkpoint.npz"]  # no .tmp, no lock
    again = subprocess.run(
        [sys.executable, "-m", "experiments.fpdgd", *args, f"--output_dir={out}"],
        check=False,
        cwd=REPO_ROOT,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert "resumed from the checkpoint" in again.stderr
    assert (out / "results.json").is_file() and not (out / ".checkpoint.npz").exists()


BATCH_LIKE = """
    import pathlib, sys
    from absl import app
    from experiments.lib import program, runs

    folder = pathlib.Path(sys.argv[1])
    sleeper = ("import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); "
               "time.sleep(120)")

    def run():
        commands = [(folder / f"run{i}", [sys.executable, "-c", sleeper, str(folder / f"pid{i}")])
                    for i in range(2)]
        print("started", file=sys.stderr, flush=True)
        runs.run_missing(commands, 2, "test")
        return program.Done()

    app.run(program.main("batchlike", run, distributed=None), argv=sys.argv[:1])
"""


@pytest.mark.slow  # processes started and interrupted
def test_an_interrupted_batch_stops_its_runs_and_says_how_many_were_done(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(BATCH_LIKE), str(tmp_path)],
        cwd=REPO_ROOT,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        stderr=subprocess.PIPE,
        text=True,
    )
    pids = [tmp_path / "pid0", tmp_path / "pid1"]
    assert process.stderr.readline().strip() == "started"
    while not all(p.is_file() and p.read_text() for p in pids):
        assert process.poll() is None, process.stderr.read()
    process.send_signal(signal.SIGINT)
    rest = process.stderr.read().strip().splitlines()
    assert process.wait(timeout=60) == 130, rest
    assert rest == [
        (
            "batchlike: interrupted with 0 of 2 run(s) done; the finished runs' results are kept "
            "and an interrupted run keeps its checkpoint; run the same command to continue"
        )
    ]
    for pid in pids:  # each run had SIGINT and was waited for: gone
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid.read_text()), 0)
