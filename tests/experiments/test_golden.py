"""Recorded results of a fixed set of runs: a refactor must not change a number by accident.

Each case runs a binary on the MSLR sample (small settings) and compares its
results.json with the one recorded in tests/experiments/golden/<case>.json, leaving out the
fields that describe the run rather than its results (timings, versions, paths,
machine).  Floats are compared to float32 rounding (relative 1e-5, absolute 1e-6):
a change of summation order may move the last bits, nothing more.

A change that alters results on purpose (a new random stream, a fixed bug)
re-records the affected cases and says so in its commit message:

    python -m tests.experiments.test_golden --record [case ...]
"""

from __future__ import annotations

import concurrent.futures
import json
import math
import pathlib
import sys
import tempfile

import pytest

try:
    from tests import binaries
    from tests.sample_data import SAMPLE_DIR, needs_sample
except ImportError:  # run as a script: python tests/experiments/test_golden.py
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
    from tests import binaries
    from tests.sample_data import SAMPLE_DIR, needs_sample

GOLDEN_DIR = pathlib.Path(__file__).resolve().parent / "golden"

_SMALL = ("--n_clients=10", "--rounds=4", "--n_runs=2")
_SAMPLE = ("--train_path={train}", "--test_path={test}")

# case -> (binary, flags, extra environment)
CASES = {
    "fpdgd_linear": ("fpdgd", (*_SAMPLE, *_SMALL, "--local_updates=3"), {}),
    "fpdgd_neural": ("fpdgd", (*_SAMPLE, *_SMALL, "--local_updates=3", "--ranker=neural"), {}),
    "fpdgd_dp_krum_lie_grid": (
        "fpdgd",
        (
            *_SAMPLE,
            *_SMALL,
            "--local_updates=2",
            "--aggregator=krum",
            "--attack=lie",
            "--n_malicious=2",
            "--click_models=perfect,informational",
            "--privacy_grid=none,4.5:5",
        ),
        {},
    ),
    "fpdgd_chunked_dp": (
        "fpdgd",
        (
            *_SAMPLE,
            "--n_clients=12",
            "--client_chunk=4",
            "--rounds=4",
            "--n_runs=2",
            "--epsilon=4.5",
            "--sensitivity=5",
            "--privacy_noise=per_client",  # the clients' own Gamma shares, chunk by chunk
        ),
        {},
    ),
    "fpdgd_sharded_2_devices": (
        "fpdgd",
        (*_SAMPLE, *_SMALL, "--n_devices=2"),
        {},  # no XLA_FLAGS: the binary gives the CPU two devices itself (program.main)
    ),
    "poisoning_paper": (
        "poisoning",
        (*_SAMPLE, "--rounds=3", "--n_runs=1", "--malicious_counts=1,3"),
        {},
    ),
    "unlearning": (
        "unlearning",
        (
            *_SAMPLE,
            "--rounds=6",
            "--n_runs=1",
            "--delta_t=2,3",
            "--unlearn_local_updates=1,2",
            "--click_models=informational",
        ),
        {},
    ),
    "noniid_type2": (
        "noniid",
        (*_SAMPLE, "--type=2", "--rounds=4", "--n_runs=2", "--remedies=fedprox", "--prox_mu=0.1"),
        {},
    ),
    "noniid_type3": ("noniid", (*_SAMPLE, "--type=3", "--rounds=4", "--n_runs=2"), {}),
    "noniid_type4": ("noniid", (*_SAMPLE, "--type=4", "--rounds=4", "--n_runs=2"), {}),
    "foltr_es": ("foltr_es", (*_SAMPLE, "--n_clients=20", "--rounds=4", "--n_runs=2"), {}),
    "fedips_estimated": (
        "fedips",
        (*_SAMPLE, "--propensity=estimated", "--n_users=20", "--rounds=3", "--n_runs=2"),
        {},
    ),
}

# Keys that describe how a run went rather than what it computed.
_RUN_FIELDS = {
    "versions",
    "provenance",  # the command, paths and SHA-256s of the code and data that made it
    "machine",
    "devices",
    "timings",
    "compile_seconds",
    "run_seconds",
    "seconds",
    "wall_seconds",
    "interactions_per_second",
    "created",
    "timestamp",
    "path",
    "train_path",
    "test_path",
    "output_dir",
    "cache_dir",
    "fold_dir",
}


def strip_run_fields(value):
    """``value`` without the run-describing keys, at any depth."""
    if isinstance(value, dict):
        return {k: strip_run_fields(v) for k, v in value.items() if k not in _RUN_FIELDS}
    if isinstance(value, list):
        return [strip_run_fields(v) for v in value]
    return value


def differences(expected, actual, where="results") -> list[str]:
    """Where ``actual`` differs from ``expected`` beyond float32 rounding."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        out = [f"{where}.{k}: missing" for k in expected.keys() - actual.keys()]
        if not where.endswith((".config", ".noniid")):  # a setting added since is no
            # difference in itself: what it does shows in the numbers, which are compared
            out += [f"{where}.{k}: unexpected" for k in actual.keys() - expected.keys()]
        for k in expected.keys() & actual.keys():
            out += differences(expected[k], actual[k], f"{where}.{k}")
        return out
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{where}: length {len(actual)}, recorded {len(expected)}"]
        return [
            d
            for i, (e, a) in enumerate(zip(expected, actual))
            for d in differences(e, a, f"{where}[{i}]")
        ]
    numbers = (int, float)
    if isinstance(expected, numbers) and isinstance(actual, numbers):
        if isinstance(expected, bool) or isinstance(actual, bool):
            return [] if expected == actual else [f"{where}: {actual!r}, recorded {expected!r}"]
        if math.isclose(expected, actual, rel_tol=1e-5, abs_tol=1e-6):
            return []
        return [f"{where}: {actual!r}, recorded {expected!r}"]
    return [] if expected == actual else [f"{where}: {actual!r}, recorded {expected!r}"]


def run_case(name: str, output_dir: pathlib.Path) -> dict:
    """Runs case ``name`` into ``output_dir``; returns its results.json without run fields."""
    binary, args, env = CASES[name]
    paths = {"train": SAMPLE_DIR / "train.txt", "test": SAMPLE_DIR / "test.txt"}
    argv = [a.format(**paths) for a in args]
    done = binaries.run(binary, *argv, f"--output_dir={output_dir}", env=env, timeout=900)
    assert done.returncode == 0, f"{name} failed:\n{done.stderr[-3000:]}"
    grid = output_dir / "grid.json"
    if grid.exists():  # a grid: one results.json per cell
        cells = json.loads(grid.read_text())["cells"]
        return {
            "cells": {
                cell: strip_run_fields(json.loads((output_dir / cell / "results.json").read_text()))
                for cell in cells
            }
        }
    return strip_run_fields(json.loads((output_dir / "results.json").read_text()))


@pytest.fixture(scope="module")
def case_results(tmp_path_factory):
    """Every case started at once, two processes at a time (the binaries compile mostly
    on one core); each test waits for its own."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
    futures = {
        name: pool.submit(run_case, name, tmp_path_factory.mktemp(name)) for name in sorted(CASES)
    }
    yield futures
    pool.shutdown(cancel_futures=True)


@pytest.mark.slow  # eleven binaries in their own processes, compiled as users compile
@needs_sample
@pytest.mark.parametrize("name", sorted(CASES))
def test_results_match_the_recorded_run(name, case_results):
    recorded = json.loads((GOLDEN_DIR / f"{name}.json").read_text())
    found = differences(recorded, case_results[name].result())
    assert not found, f"{name}: {len(found)} differences, first ones:\n" + "\n".join(found[:20])


def test_differences_sees_a_moved_number_and_ignores_rounding():
    recorded = {"curve": [0.25, 0.5], "n": 3, "name": "x"}
    assert differences(recorded, {"curve": [0.25, 0.5 + 1e-9], "n": 3, "name": "x"}) == []
    assert differences(recorded, {"curve": [0.25, 0.5001], "n": 3, "name": "x"}) == [
        "results.curve[1]: 0.5001, recorded 0.5"
    ]
    assert differences(recorded, {"curve": [0.25], "n": 3}) == [
        "results.name: missing",
        "results.curve: length 1, recorded 2",
    ]
    assert strip_run_fields({"a": {"run_seconds": 1.0, "b": 2}}) == {"a": {"b": 2}}
    # A new config field is not a difference; a changed or lost one is.
    assert differences({"config": {"a": 1}}, {"config": {"a": 1, "new": 0}}) == []
    assert differences({"config": {"a": 1}}, {"config": {"a": 2}}) == [
        "results.config.a: 2, recorded 1"
    ]
    assert differences({"config": {"a": 1}}, {"config": {}}) == ["results.config.a: missing"]


def _record(names) -> None:
    GOLDEN_DIR.mkdir(exist_ok=True)
    for name in names or sorted(CASES):
        with tempfile.TemporaryDirectory() as tmp:
            result = run_case(name, pathlib.Path(tmp))
        (GOLDEN_DIR / f"{name}.json").write_text(
            json.dumps(result, indent=1, sort_keys=True) + "\n"
        )
        print(f"recorded {name}", flush=True)


if __name__ == "__main__":
    if SAMPLE_DIR is None:
        sys.exit("the MSLR sample is needed: python third_party/mslr_sample/fetch.py")
    if sys.argv[1:2] != ["--record"]:
        sys.exit(__doc__)
    _record(sys.argv[2:])
