"""Running the binaries as a user does: ``python -m experiments.<module>`` in a subprocess."""

import json
import os
import subprocess
import sys

from sample_data import REPO_ROOT

TIMINGS = {"seconds", "compile_seconds", "interactions_per_second", "versions", "timings"}


def run(module, *args, cache_dir=None, env=None, timeout=300):
    """``python -m experiments.<module> args`` from the repository root, JAX on the CPU,
    with its own cache folder when ``cache_dir`` is given; ``env`` adds variables."""
    environment = {**os.environ, **(env or {}), "JAX_PLATFORMS": "cpu"}
    if cache_dir is not None:
        environment["FOLTR_JAX_CACHE"] = str(cache_dir)
    return subprocess.run(
        [sys.executable, "-m", f"experiments.{module}", *args],
        cwd=REPO_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def without_timings(results: dict) -> dict:
    """A results file without the fields that differ between identical runs."""
    return {k: v for k, v in results.items() if k not in TIMINGS}


def run_twice(module, *args, tmp_path):
    """Runs a binary twice, into tmp_path/a and tmp_path/b.

    Returns (results a, results b, the second process); both runs must succeed and
    name their results file.
    """
    outputs = []
    for name in ("a", "b"):
        output = tmp_path / name
        result = run(module, *args, f"--output_dir={output}", cache_dir=tmp_path / "cache")
        assert result.returncode == 0, result.stderr
        assert str(output / "results.json") in result.stdout
        outputs.append(json.loads((output / "results.json").read_text()))
    return outputs[0], outputs[1], result
