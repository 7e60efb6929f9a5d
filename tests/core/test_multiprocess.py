"""Several processes, one program: two local processes with two CPU devices each form one
4-device JAX program (jax.distributed, gloo collectives), as on several hosts.

Each process runs in its own folder with a relative --output_dir, so the files of each
can be told apart: process 0 alone writes; the other reads nothing from disk either
(process 0 sends it the checkpoint).
"""

import json
import os
import re
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from tests import binaries
from tests.sample_data import REPO_ROOT

# Tiny data (short queries compile fast): the test runs in CI on two cores.
TINY = ["--synthetic_queries=20", "--synthetic_features=8", "--synthetic_docs_per_query=8"]
# Plain and DP cells, two runs, clients in chunks: 2 clients x 2 runs x 2 cells = 8 lanes
# per chunk over 4 devices.
ARGS = [
    *TINY,
    "--n_clients=4",
    "--client_chunk=2",
    "--local_updates=2",
    "--n_runs=2",
    "--privacy_grid=none,4.5:5",
    "--rounds=30",
    "--chunk_rounds=3",
    "--n_devices=4",
]
CELLS = ["informational_eps0_delta0", "informational_eps4.5_delta5"]


def curves(results: dict) -> dict:
    """The curves and the initial offline nDCG@10 of a results file's one cell."""
    (cell,) = results["cells"]
    return {**cell["curves"], "initial_offline_ndcg": cell["per_run"]["initial_offline_ndcg"]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment(tmp_path, devices: int) -> dict:
    return {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "FOLTR_JAX_CACHE": str(tmp_path / "cache"),
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
    }


def start(module, args, tmp_path, name, n=2, process_args=None, env=None):
    """Starts ``n`` processes of ``python -m experiments.<module> --distributed args``, each
    in tmp_path/<name>/p<i>, with the JAX_* variables of a local cluster.
    Returns [(Popen, folder)]."""
    port = free_port()
    processes = []
    for i in range(n):
        folder = tmp_path / name / f"p{i}"
        folder.mkdir(parents=True, exist_ok=True)
        extra = (process_args or {}).get(i, [])
        variables = {
            **environment(tmp_path, 2),
            "JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}",
            "JAX_NUM_PROCESSES": str(n),
            "JAX_PROCESS_ID": str(i),
            **(env or {}),
        }
        command = [sys.executable, "-m", f"experiments.{module}", "--distributed", *args, *extra]
        with open(folder / "stderr", "w") as err, open(folder / "stdout", "w") as out:
            process = subprocess.Popen(command, cwd=folder, env=variables, stdout=out, stderr=err)
        processes.append((process, folder))
    return processes


def kill(processes) -> None:
    for process, _ in processes:
        if process.poll() is None:
            process.kill()
        process.wait()


def finish(processes, timeout=120) -> list:
    """Waits for every process (all are killed if one is late); returns [(rc, stderr)]."""
    deadline = time.time() + timeout
    try:
        for process, _ in processes:
            process.wait(timeout=max(deadline - time.time(), 0.1))
    except subprocess.TimeoutExpired:
        kill(processes)
        raise AssertionError("a process did not finish in time") from None
    finally:
        kill(processes)
    return [(p.returncode, (folder / "stderr").read_text()) for p, folder in processes]


def error_lines(stderr: str) -> list:
    """Our own lines: without the C++ runtime's log lines and gloo's connection notes.

    Gloo's threads write their notes ("[Gloo] Rank 1 is connected to 1 peer ranks. Expected
    number of connected peer ranks is : 1") unsynchronised, so one note can be cut by
    another anywhere: a line holding "[Gloo]", or ending as a note ends, or only a number,
    is such a piece."""
    return [
        line
        for line in stderr.strip().splitlines()
        if not (
            "[Gloo]" in line
            or re.search(r"peer ranks is : \d+$", line)
            or re.fullmatch(r"\s*\d*\s*", line)
            or re.match(r"[IWEF]\d{4} ", line)  # glog: E1127 ...
        )
    ]


def cells(folder) -> dict:
    return {c: json.loads((folder / c / "results.json").read_text()) for c in CELLS}


@pytest.mark.slow  # several processes
def test_two_processes_give_the_one_process_results_and_resume_a_killed_run(tmp_path):
    # One process with 4 devices, alongside the two processes (both compile meanwhile).
    single = tmp_path / "single"
    reference = subprocess.Popen(
        [sys.executable, "-m", "experiments.fpdgd", *ARGS, f"--output_dir={single}"],
        cwd=REPO_ROOT,
        env=environment(tmp_path, 4),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Killed (SIGKILL, both) as soon as process 0 has saved a checkpoint, then started again.
    processes = start("fpdgd", [*ARGS, "--output_dir=out"], tmp_path, "run")
    out = tmp_path / "run" / "p0" / "out"
    deadline = time.time() + 120
    try:
        while not (out / ".checkpoint.npz").exists():
            assert all(p.poll() is None for p, _ in processes), "a process ended early"
            assert time.time() < deadline, "no checkpoint in time"
            time.sleep(0.01)
    finally:
        kill(processes)
    assert not (out / "grid.json").exists(), "the run finished before it could be killed"

    assert (out / ".checkpoint.npz").exists()
    processes = start("fpdgd", [*ARGS, "--output_dir=out"], tmp_path, "run")
    for (rc, stderr), who in zip(finish(processes), ("process 0", "process 1")):
        assert rc == 0, f"{who}: {stderr}"
    try:
        _, stderr = reference.communicate(timeout=120)
    finally:
        reference.kill()
    assert reference.returncode == 0, stderr
    p0, p1 = (tmp_path / "run" / f"p{i}" for i in range(2))
    # Only process 0 wrote (results, grid; the checkpoint removed), and only it reported.
    assert sorted(p.name for p in (p0 / "out").iterdir()) == sorted(["grid.json", *CELLS])
    assert not (p1 / "out").exists()
    assert "resumed from the checkpoint" in (p0 / "stderr").read_text()
    assert "round" not in (p1 / "stderr").read_text() and not error_lines(
        (p1 / "stdout").read_text()
    )

    one, two = cells(single), cells(p0 / "out")
    for cell in CELLS:
        assert two[cell]["timings"]["resumed_at_round"]["fpdgd"] > 0
        assert two[cell]["config"] == one[cell]["config"]
        for curve, values in curves(one[cell]).items():
            np.testing.assert_allclose(curves(two[cell])[curve], values, rtol=0, atol=1e-5)


# Offline every 2nd round: after Adam's first step from the zero model every weight is ±η,
# so 0/1 features tie scores exactly and a last-bit difference of the two programs' sums
# reorders them; from the second step on the weights differ.
ES_ARGS = [
    *TINY,
    "--n_clients=8",
    "--local_updates=2",
    "--n_runs=2",
    "--rounds=4",
    "--chunk_rounds=2",
    "--eval_every=2",
    "--privacy_p=0.9",
    "--n_devices=4",
]


@pytest.mark.slow  # several processes
def test_foltr_es_over_two_processes_gives_the_one_process_results(tmp_path):
    """FOLtR-ES on the shared run: its clients split over the 4 devices of two processes."""
    single = tmp_path / "single"
    reference = subprocess.Popen(
        [sys.executable, "-m", "experiments.foltr_es", *ES_ARGS, f"--output_dir={single}"],
        cwd=REPO_ROOT,
        env=environment(tmp_path, 4),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    processes = start("foltr_es", [*ES_ARGS, "--output_dir=out"], tmp_path, "es")
    for (rc, stderr), who in zip(finish(processes, timeout=300), ("process 0", "process 1")):
        assert rc == 0, f"{who}: {stderr}"
    try:
        _, stderr = reference.communicate(timeout=300)
    finally:
        reference.kill()
    assert reference.returncode == 0, stderr
    p0, p1 = (tmp_path / "es" / f"p{i}" for i in range(2))
    assert sorted(p.name for p in (p0 / "out").iterdir()) == ["results.json"]
    assert not (p1 / "out").exists()
    one = json.loads((single / "results.json").read_text())
    two = json.loads((p0 / "out" / "results.json").read_text())
    assert two["config"] == one["config"]
    for curve, values in curves(one).items():
        np.testing.assert_allclose(curves(two)[curve], values, rtol=0, atol=1e-5)


def one_and_two_processes(module, args, tmp_path, name, timeout=300) -> tuple:
    """Runs ``experiments.<module> args`` in one process with 4 devices and in two with
    2 each (--distributed); checks that only process 0 wrote, and returns the two
    results.json."""
    single = tmp_path / "single"
    reference = subprocess.Popen(
        [sys.executable, "-m", f"experiments.{module}", *args, f"--output_dir={single}"],
        cwd=REPO_ROOT,
        env=environment(tmp_path, 4),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    processes = start(module, [*args, "--output_dir=out"], tmp_path, name)
    for (rc, stderr), who in zip(finish(processes, timeout), ("process 0", "process 1")):
        assert rc == 0, f"{who}: {stderr}"
    try:
        _, stderr = reference.communicate(timeout=timeout)
    finally:
        reference.kill()
    assert reference.returncode == 0, stderr
    p0, p1 = (tmp_path / name / f"p{i}" for i in range(2))
    assert not (p1 / "out").exists()
    assert not error_lines((p1 / "stdout").read_text())
    read = lambda folder: json.loads((folder / "results.json").read_text())
    return read(single), read(p0 / "out"), sorted(p.name for p in (p0 / "out").iterdir())


@pytest.mark.slow  # several processes
def test_unlearning_over_two_processes_gives_the_one_process_results(tmp_path):
    """The unlearning binary's three trainings and its replay over the 4 devices of two
    processes (the finished phases are not kept as parts there: each phase's checkpoint
    is, and the run removes them)."""
    args = [
        *TINY,
        "--n_clients=4",
        "--local_updates=2",
        "--n_runs=1",
        "--rounds=4",
        "--chunk_rounds=2",
        "--click_models=informational",
        "--delta_t=2",
        "--unlearn_local_updates=1,2",
        "--n_devices=4",
    ]
    one, two, written = one_and_two_processes("unlearning", args, tmp_path, "unlearn")
    assert written == ["results.json", "table.txt"]
    assert two["config"] == one["config"]
    assert len(two["cells"]) == 3 + 2  # the trainings, then the replayed cells
    for a, b in zip(one["cells"], two["cells"]):
        assert a["setting"] == b["setting"]
        np.testing.assert_allclose(
            b["curves"]["offline_ndcg"], a["curves"]["offline_ndcg"], rtol=0, atol=1e-5
        )


@pytest.mark.slow  # several processes
def test_a_noniid_cell_over_two_processes_gives_the_one_process_results(tmp_path):
    """A Type 2 cell with FedProx (the non-IID data and the remedy, no IID baseline)."""
    args = [
        *TINY,
        "--type=2",
        "--noiid",
        "--remedies=fedprox",
        "--prox_mu=0.1",
        "--n_clients=5",  # a multiple of C(5 grades, 1); 5 clients x 4 runs = 20 lanes
        "--local_updates=2",
        "--n_runs=4",
        "--rounds=4",
        "--chunk_rounds=2",
        "--n_devices=4",
    ]
    one, two, written = one_and_two_processes("noniid", args, tmp_path, "noniid")
    assert written == ["results.json", "table.txt"]
    assert [c["name"] for c in two["cells"]] == [c["name"] for c in one["cells"]]
    assert len(two["cells"]) == 2
    for a, b in zip(one["cells"], two["cells"]):
        for curve in ("offline_ndcg", "online_ndcg"):
            np.testing.assert_allclose(b["curves"][curve], a["curves"][curve], rtol=0, atol=1e-5)
        np.testing.assert_allclose(
            b["per_run"]["initial_offline_ndcg"],
            a["per_run"]["initial_offline_ndcg"],
            rtol=0,
            atol=1e-5,
        )


@pytest.mark.slow  # several processes
@pytest.mark.parametrize("baseline", ["none", "lambdarank"])
def test_fedips_over_two_processes_gives_the_one_process_results(tmp_path, baseline):
    """FedIPS (its users over the 4 devices) and its λLinear baseline, each after f₀: every
    LambdaRank run is engine.run's too."""
    args = [
        "--synthetic_queries=30",
        "--synthetic_features=8",
        "--synthetic_docs_per_query=8",
        "--n_users=8",
        "--n_runs=2",
        "--rounds=4",
        "--chunk_rounds=2",
        "--logging_steps=5",
        "--lambdarank_steps=4",
        f"--baseline={baseline}",
        "--n_devices=4",
    ]
    one, two, written = one_and_two_processes("fedips", args, tmp_path, "fedips")
    assert written == ["results.json"]
    assert two["config"] == one["config"] and two["method"] == one["method"]
    f0_one, f0_two = one["logging_policy"], two["logging_policy"]
    assert f0_two["queries"] == f0_one["queries"]
    for metric in ("offline_ndcg5", "offline_ndcg10"):
        np.testing.assert_allclose(f0_two[metric], f0_one[metric], rtol=0, atol=1e-5)
    (cell_one,), (cell_two,) = one["cells"], two["cells"]
    for curve in ("offline_ndcg5", "offline_ndcg10"):
        np.testing.assert_allclose(
            cell_two["curves"][curve], cell_one["curves"][curve], rtol=0, atol=1e-5
        )
    np.testing.assert_allclose(
        cell_two["per_run"]["initial_offline_ndcg5"],
        cell_one["per_run"]["initial_offline_ndcg5"],
        rtol=0,
        atol=1e-5,
    )


@pytest.mark.slow  # several processes
def test_processes_with_other_flags_are_refused_in_one_line(tmp_path):
    processes = start(
        "fpdgd",
        # A process that has refused waits at most this long for the other at shutdown.
        [
            *TINY,
            "--n_clients=4",
            "--rounds=2",
            "--n_devices=4",
            "--output_dir=out",
            "--distributed_timeout=60",
        ],
        tmp_path,
        "mismatch",
        process_args={1: ["--seed=7"]},
    )
    for rc, stderr in finish(processes):
        assert rc == 2, stderr
        assert error_lines(stderr) == [
            (
                "fpdgd: error: --distributed: process(es) [1] run with other flags than process 0: "
                "start every process with the same flags and data"
            )
        ], stderr
    assert not any((tmp_path / "mismatch").glob("p*/out"))


@pytest.mark.slow  # several processes
@pytest.mark.parametrize(
    "args, message",
    [
        (["--n_devices=2"], "--n_devices: must be the 4 devices of the 2 processes"),
        (["--n_clients=3", "--n_devices=4"], "--n_devices: must divide the 3 lanes of a round"),
    ],
)
def test_devices_that_do_not_fit_the_processes_are_refused_in_one_line(tmp_path, args, message):
    processes = start("fpdgd", [*TINY, "--rounds=2", *args], tmp_path, "devices")
    for rc, stderr in finish(processes):
        assert rc == 2, stderr
        (line,) = error_lines(stderr)
        assert line.startswith(f"fpdgd: error: {message}"), line


@pytest.mark.slow  # several processes
def test_a_process_that_fails_alone_stops_the_others(tmp_path):
    (tmp_path / "alone" / "p0").mkdir(parents=True)
    (tmp_path / "alone" / "p0" / "out").write_text("not a folder")  # only process 0 claims it
    processes = start("fpdgd", [*TINY, "--n_devices=4", "--output_dir=out"], tmp_path, "alone")
    (rc0, stderr0), (rc1, stderr1) = finish(processes)
    assert rc0 == 2 and error_lines(stderr0) == [
        "fpdgd: error: --output_dir: out exists and is not a folder"
    ], stderr0
    assert rc1 == 2 and error_lines(stderr1) == [
        "fpdgd: error: --distributed: process(es) [0] failed (see their error); stopping"
    ], stderr1


@pytest.mark.slow  # a process waiting for its coordinator
def test_an_unreachable_coordinator_ends_in_one_line_after_the_timeout(tmp_path):
    start_time = time.time()
    # Process 1 of 2 with nobody at the coordinator's address.
    processes = start(
        "fpdgd",
        [*TINY, "--distributed_timeout=2"],
        tmp_path,
        "alone",
        n=1,
        env={"JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "1"},
    )
    ((rc, stderr),) = finish(processes, timeout=60)
    assert rc == 2, stderr
    (line,) = error_lines(stderr)
    assert line.startswith("fpdgd: error: --distributed_timeout: the 2 processes did not all")
    assert time.time() - start_time < 30


def test_distributed_without_a_cluster_or_variables_ends_in_one_line(tmp_path):
    env = {k: v for k, v in environment(tmp_path, 1).items() if not k.startswith("JAX_PROC")}
    env.pop("JAX_COORDINATOR_ADDRESS", None)
    done = subprocess.run(
        [sys.executable, "-m", "experiments.fpdgd", "--distributed", "--output_dir=out"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    (line,) = error_lines(done.stderr)
    assert line.startswith("fpdgd: error: --distributed: jax.distributed.initialize failed")
    assert "JAX_COORDINATOR_ADDRESS" in line and not (tmp_path / "out").exists()


def test_binaries_that_do_not_run_over_processes_refuse_distributed(tmp_path, monkeypatch):
    # They refuse before anything starts: their main in this process (binaries.call), run
    # from tmp_path as the processes above are.
    monkeypatch.chdir(tmp_path)
    for module, args in [("benchmark", ["--suite"])]:
        done = binaries.call(module, "--distributed", *args, cache_dir=tmp_path / "cache")
        assert done.returncode == 2, (module, done.stderr)
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith(f"{module}: error: --distributed: "), line
        assert not list(tmp_path.glob("results*")), module


def test_a_step_that_fails_when_a_peer_dies_ends_in_one_line(monkeypatch, capsys):
    """A peer killed mid-run makes the survivor's collective fail (gloo: connection reset).
    The survivor ends at once with one line naming the processes and the way on (its
    checkpoint untouched), not a traceback followed by JAX's abort at exit (status 134).
    Here the failure is raised in this process under --distributed (which process dies,
    and when, decides whether gloo raises it or JAX's heartbeat check aborts the process
    from C++, which no Python code can catch)."""
    import jax
    from absl import flags

    from experiments.lib import distributed, program

    class Ended(Exception):
        pass

    def ended(status):
        raise Ended(status)

    def run():
        raise jax.errors.JaxRuntimeError(
            "UNKNOWN: Gloo AllGather failed: [external/gloo/gloo/transport/tcp/pair.cc:538] "
            "Read error [127.0.0.1]:14765: Connection reset by peer"
        )

    binaries.load("fpdgd")
    flags.FLAGS.unparse_flags()
    flags.FLAGS(["fpdgd", "--distributed"])
    monkeypatch.setattr(distributed.os, "_exit", ended)
    monkeypatch.setattr(program, "start_distributed", lambda name: None)
    with pytest.raises(Ended, match="^1$"):
        program.main("fpdgd", run)(["fpdgd"])
    assert capsys.readouterr().err == (
        "fpdgd: error: --distributed: a step over the 1 processes failed in process 0 (Gloo "
        "AllGather failed: Read error [127.0.0.1]:14765: Connection reset by peer); if another "
        "process stopped, start every process again with the same command: the run resumes "
        "from its last checkpoint, which is kept\n"
    )
    flags.FLAGS.distributed = False  # one process: JAX's own error
    with pytest.raises(jax.errors.JaxRuntimeError):
        program.main("fpdgd", run)(["fpdgd"])


@pytest.mark.slow  # two processes, one of them stopped for the 30 s the other waits
@pytest.mark.parametrize("how", ["killed", "frozen"])
def test_a_peer_that_dies_or_freezes_mid_run_ends_the_other_in_one_line(tmp_path, how):
    """Process 1 killed (its connections reset: the survivor's collective step fails at
    once, or its watch of the peers notices the silence) or frozen (SIGSTOP: the step
    would wait for ever; the watch ends it after 30 s of silence): process 0 ends with one
    line naming the way on, status 1, never JAX's C++ abort (134), and keeps its
    checkpoint."""
    import signal

    args = [*[a for a in ARGS if not a.startswith("--rounds")], "--rounds=3000", "--output_dir=out"]
    processes = start("fpdgd", args, tmp_path, "peer")
    out = tmp_path / "peer" / "p0" / "out"
    deadline = time.time() + 180
    try:
        while not (out / ".checkpoint.npz").exists():
            assert all(p.poll() is None for p, _ in processes), "a process ended early"
            assert time.time() < deadline, "no checkpoint in time"
            time.sleep(0.05)
        victim = processes[1][0]
        victim.send_signal(signal.SIGKILL if how == "killed" else signal.SIGSTOP)
        survivor = processes[0][0]
        survivor.wait(timeout=120)
    finally:
        kill(processes)
    lines = [x for x in error_lines((tmp_path / "peer" / "p0" / "stderr").read_text())
             if not x.startswith("[fpdgd] ")]  # progress: compiling, rounds  # fmt: skip
    assert survivor.returncode == 1, lines
    assert len(lines) == 2 and lines[0].startswith("fpdgd: 2 run(s)"), lines
    failed_step = "fpdgd: error: --distributed: a step over the 2 processes failed in process 0 ("
    silent = "fpdgd: error: --distributed: process(es) [1] stopped (nothing from them for 30 s)"
    # killed: gloo notices the reset connection, or (between steps) the watch its silence
    expected = (failed_step, silent) if how == "killed" else (silent,)
    assert lines[1].startswith(expected), lines
    assert lines[1].endswith("the run resumes from its last checkpoint, which is kept"), lines
    assert (out / ".checkpoint.npz").exists() and not (out / "grid.json").exists()
