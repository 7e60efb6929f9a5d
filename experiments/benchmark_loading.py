r"""Time to load a LETOR file: today's line-by-line parser, the vectorised one, scikit-learn.

  python -m experiments.benchmark_loading --path=MSLR-WEB10K/Fold1/train.txt   # a full fold

Each case runs in its own process, one after the other (one sitting), and reports wall
time and CPU time (all threads); MB/s is the file's size over the time.  On a machine
shared with other work the CPU-time rate is the steadier figure.  Cases:

* ``line_by_line``: ``letor.parse_file_by_lines``, the parser before the vectorised one;
* ``vectorised_1_thread`` / ``vectorised_2_threads``: ``letor.parse_file``;
* ``sklearn``: ``sklearn.datasets.load_svmlight_file(query_id=True)`` (float32), when
  scikit-learn is installed (it is no dependency of foltr_jax);
* ``read_letor_cold`` / ``read_letor_cached``: ``data.read_letor`` end to end (SHA-256,
  parse, per-query normalisation, cache write) and again from its ``.npz`` cache;
* ``binary``: the file as a binary reads it (``experiments.fpdgd --train_path``, an
  empty dataset cache, one round): the time its ``[loading]`` line gives for the parse
  (its CPU time is not separable from the rest of the run, so none is given).

The parsers' arrays are compared through a SHA-256 of their bytes: the vectorised
reader's must equal the line-by-line reader's.  A markdown table is printed, and last
one JSON object with every case.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

from absl import app, flags

from experiments.lib import program

FLAGS = flags.FLAGS
flags.DEFINE_string("path", None, "The LETOR file to load.")
flags.DEFINE_list(
    "cases",
    [
        "line_by_line",
        "vectorised_1_thread",
        "vectorised_2_threads",
        "sklearn",
        "read_letor_cold",
        "read_letor_cached",
        "binary",
    ],
    "Cases to run, in this order.",
)
flags.DEFINE_string("case", None, "Internal: run one case in this process, print its JSON.")
flags.DEFINE_string("cache_dir", None, "Internal: the cache folder of the read_letor cases.")


def _digest(arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(str((a.dtype.str, a.shape)).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


_LOADED = re.compile(r"^\[loading\] (.*): .* done in ([0-9.]+) s$")


def _binary_case(path: pathlib.Path) -> dict:
    """The seconds the ``[loading]`` line of ``experiments.fpdgd`` gives for ``path``."""
    with tempfile.TemporaryDirectory(prefix="foltr_jax_binary_") as work:
        result = subprocess.run(
            [sys.executable, "-m", "experiments.fpdgd", f"--train_path={path}"]
            + [f"--test_path={path}", "--rounds=1", "--n_clients=1"]
            + [f"--cache_dir={work}/cache", f"--output_dir={work}/run"],
            check=False,
            capture_output=True,
            text=True,
        )
    for line in result.stderr.splitlines():
        found = _LOADED.match(line)
        if found and found.group(1) == str(path):
            return {"case": "binary", "wall_s": float(found.group(2)), "cpu_s": None}
    tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
    raise RuntimeError(
        f"experiments.fpdgd gave no [loading] line, as for a load under 3 s ({tail})"
    )


def _run_case(case: str, path: pathlib.Path, cache_dir: str | None) -> dict:
    """Loads ``path`` one way; wall and CPU seconds and a digest of what was read."""
    import numpy as np

    from foltr_jax import data
    from foltr_jax.data import letor

    if case == "binary":
        return {**_binary_case(path), "digest": None}
    if case == "line_by_line":
        load = lambda: letor.parse_file_by_lines(path, None)
    elif case.startswith("vectorised_"):
        threads = int(case.split("_")[1])
        load = lambda: letor.parse_file(path, None, threads=threads)
    elif case == "sklearn":
        from sklearn.datasets import load_svmlight_file

        load = lambda: load_svmlight_file(str(path), query_id=True, dtype=np.float32)
    elif case in ("read_letor_cold", "read_letor_cached"):
        load = lambda: data.read_letor(path, cache_dir=cache_dir)
    else:
        raise app.UsageError(f"unknown case {case!r}")
    wall, cpu = time.perf_counter(), time.process_time()
    out = load()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if case in ("line_by_line",) or case.startswith("vectorised_"):
        digest = _digest(out)
    elif case == "sklearn":
        digest = None
    else:
        digest = _digest([out.features, out.labels, out.query_offsets, out.query_lengths])
    return {"case": case, "wall_s": wall, "cpu_s": cpu, "digest": digest}


def _number(value, digits: int = 0) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def main(argv) -> None:
    del argv
    if not FLAGS.path:
        raise app.UsageError("--path is required")
    path = pathlib.Path(FLAGS.path)
    if FLAGS.case:
        print(json.dumps(_run_case(FLAGS.case, path, FLAGS.cache_dir)))
        return
    size = path.stat().st_size
    rows = []
    with tempfile.TemporaryDirectory(prefix="foltr_jax_cache_") as cache_dir:
        for case in FLAGS.cases:
            result = subprocess.run(
                [sys.executable, "-m", "experiments.benchmark_loading", f"--path={path}"]
                + [f"--case={case}", f"--cache_dir={cache_dir}"],
                check=False,
                capture_output=True,
                text=True,
                env={**os.environ, "PYTHONWARNINGS": "ignore"},
            )
            if result.returncode != 0:
                tail = (result.stderr.strip().splitlines() or ["?"])[-1]
                print(f"{case}: failed ({tail})", file=sys.stderr)
                continue
            row = json.loads(result.stdout.strip().splitlines()[-1])
            row["wall_mb_s"] = size / 1e6 / row["wall_s"]
            row["cpu_mb_s"] = size / 1e6 / row["cpu_s"] if row["cpu_s"] else None
            row["load"] = os.getloadavg()[0]
            rows.append(row)
            print(
                f"{case}: {row['wall_s']:.1f} s, {row['wall_mb_s']:.0f} MB/s "
                f"(CPU {_number(row['cpu_s'], 1)} s, {_number(row['cpu_mb_s'])} MB/s; "
                f"load {row['load']:.1f})",
                file=sys.stderr,
                flush=True,
            )
    digests = {r["case"]: r["digest"] for r in rows}
    reference = digests.get("line_by_line")
    same = {
        case: digest == reference
        for case, digest in digests.items()
        if case.startswith("vectorised_") and reference is not None
    }
    print(f"\n{path}: {size / 1e6:.0f} MB, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print("| parser | wall s | MB/s | CPU s | MB/s of CPU time | load after |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['case']} | {r['wall_s']:.1f} | {r['wall_mb_s']:.0f} "
            f"| {_number(r['cpu_s'], 1)} | {_number(r['cpu_mb_s'])} | {r['load']:.1f} |"
        )
    if same:
        print("arrays equal to line_by_line's: " + ", ".join(f"{c} {s}" for c, s in same.items()))
    print(json.dumps({"path": str(path), "bytes": size, "cases": rows, "same_arrays": same}))
    if not all(same.values()):
        sys.exit(1)


if __name__ == "__main__":
    app.run(main, flags_parser=program.parse_flags)
