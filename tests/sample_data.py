"""Where the tests find the real MSLR excerpt: ../shared first, then the fetch recipe's folder.

When neither holds it, the test session fetches it once with the project's own recipe
(``third_party/mslr_sample/fetch.py``: the PyPI sdist of rankeval 0.8.2, SHA-256 checked)
before any test is collected: see ``ensure`` and conftest's ``pytest_sessionstart``.  If that
fails (no network, say), the tests that need the excerpt are skipped with a reason naming
the command to run.  FOLTR_JAX_FETCH_SAMPLE=0 turns the fetch off.
"""

import os
import pathlib
import subprocess
import sys

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
FETCH_SCRIPT = REPO_ROOT / "third_party" / "mslr_sample" / "fetch.py"
_SAMPLE_DIRS = [
    REPO_ROOT.parent / "shared" / "data" / "mslr_sample",
    FETCH_SCRIPT.parent / "data",
]
# Set by the session that tried to fetch the excerpt and failed (its workers read it).
_FAILED = "FOLTR_JAX_SAMPLE_FETCH_FAILED"


def _sample_dir():
    for directory in _SAMPLE_DIRS:
        if (directory / "train.txt").is_file() and (directory / "test.txt").is_file():
            return directory
    return None


def fetch_command() -> str:
    """The command that fetches the excerpt, as a user types it from the repository root."""
    python = pathlib.Path(sys.executable)
    try:
        python = python.relative_to(REPO_ROOT)
    except ValueError:
        python = pathlib.Path("python") if python.name.startswith("python") else python
    return f"{python} {FETCH_SCRIPT.relative_to(REPO_ROOT)}"


def _skip_reason() -> str:
    why = os.environ.get(_FAILED)
    return (
        "the MSLR sample is in neither ../shared/data/mslr_sample nor "
        "third_party/mslr_sample/data"
        + (f", and {why}" if why else "")
        + f": run `{fetch_command()}` (it downloads rankeval==0.8.2's sdist from PyPI), "
        "then run the tests again"
    )


SAMPLE_DIR = _sample_dir()
needs_sample = pytest.mark.skipif(SAMPLE_DIR is None, reason=_skip_reason())


def ensure(say=print) -> None:
    """Fetches the excerpt with the recipe when no folder holds it (once per session, in the
    process that starts the others, before the test modules are imported); a failure is
    recorded for the skip reasons, never raised."""
    global SAMPLE_DIR, needs_sample
    if SAMPLE_DIR is not None or os.environ.get(_FAILED):
        return
    if os.environ.get("FOLTR_JAX_FETCH_SAMPLE", "1") == "0":
        os.environ[_FAILED] = "FOLTR_JAX_FETCH_SAMPLE=0 kept the session from fetching it"
    else:
        say(f"MSLR sample missing: fetching it with `{fetch_command()}` (about a minute) ...")
        try:
            done = subprocess.run(
                [sys.executable, str(FETCH_SCRIPT)],
                cwd=REPO_ROOT,
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
            )
            if done.returncode != 0:
                lines = (done.stderr or done.stdout).strip().splitlines()
                os.environ[_FAILED] = (
                    f"fetching it failed (exit status {done.returncode}: "
                    + (lines[-1] if lines else "no output")
                    + ")"
                )
        except (OSError, subprocess.TimeoutExpired) as error:
            os.environ[_FAILED] = f"fetching it failed ({error})"
        SAMPLE_DIR = _sample_dir()
        if SAMPLE_DIR is None and not os.environ.get(_FAILED):
            os.environ[_FAILED] = "fetching it wrote no files"
        say(f"MSLR sample: {SAMPLE_DIR}" if SAMPLE_DIR else f"MSLR sample: {_skip_reason()}")
    needs_sample = pytest.mark.skipif(SAMPLE_DIR is None, reason=_skip_reason())
