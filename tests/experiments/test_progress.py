"""What a binary says in its first seconds: how long loading and compiling took, and
progress whose elapsed time counts from the start of the command (imports included)."""

import io
import os
import subprocess
import sys
import time

import jax.numpy as jnp
import pytest

from experiments.lib import cli
from foltr_jax.engine import loop
from tests.sample_data import REPO_ROOT


def test_elapsed_counts_from_the_start_of_the_command(monkeypatch):
    monkeypatch.setattr(cli, "_STARTED", time.perf_counter() - 100.0)  # started 100 s ago
    stream = io.StringIO()
    log = cli.ProgressLog("fpdgd", stream=stream)
    log(2, 4, 1.5)  # 1.5 s of rounds: the estimate of what is left stays theirs
    (line,) = stream.getvalue().splitlines()
    head, elapsed, left = line.split(", ")
    assert head == "[fpdgd] round 2/4 (50%)" and left == "~1.5 s left"
    assert elapsed.endswith(" s elapsed") and float(elapsed.split()[0]) >= 100.0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the process's start: /proc")
def test_the_command_s_start_is_its_process_s_start():
    """A process that waits a second before importing the module still counts that second."""
    program = (
        "import time; time.sleep(1.0)\n"
        "from experiments.lib import cli\n"
        "print(cli.command_seconds())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=REPO_ROOT, capture_output=True, text=True,
        timeout=120, check=True, env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )  # fmt: skip
    assert float(done.stdout) >= 1.0  # from the module's import it would be about 0


def test_compiling_is_said_with_what_came_before_it(monkeypatch):
    monkeypatch.setattr(cli, "_BEFORE_COMPILING", [])
    stream = io.StringIO()
    log = cli.ProgressLog("poisoning", stream=stream)
    with cli.timed("data loaded"):
        pass
    assert stream.getvalue() == ""  # nothing on the way: a bad file stays one error line
    log.compiling()
    log.compiled()
    log.compiling()  # a second program of the same command
    first, done, second = stream.getvalue().splitlines()
    assert first.startswith("[poisoning] data loaded in 0.0 s; compiling ... (")
    assert first.endswith(" s since the start)")
    assert done.startswith("[poisoning] compiled in ") and done.endswith(" s")
    assert second.startswith("[poisoning] compiling ... (")  # said once


def _chunk(static, n, consts, state, first):
    del static, first
    state = state + consts.sum() * n
    return state, (jnp.full((n, 1), state),)


def test_the_run_loop_says_when_its_chunks_are_compiled():
    events = []

    class Progress:
        def compiled(self):
            events.append("compiled")

        def __call__(self, done, total, seconds):
            events.append(done)

    import jax

    chunk = jax.jit(_chunk, static_argnums=(0, 1))
    loop.scan_in_chunks(chunk, "toy", jnp.ones(2), jnp.float32(0), 4, 2, Progress())
    assert events == ["compiled", 2, 4]
    seen = []  # a plain function is told the rounds only
    loop.scan_in_chunks(chunk, "toy", jnp.ones(2), jnp.float32(0), 4, 2, lambda *a: seen.append(a))
    assert [a[0] for a in seen] == [2, 4]
