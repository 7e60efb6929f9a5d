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
  parse, per-query normalisation, cache write) and again from its ``.npz`` cache.

The parsers' arrays are compared through a SHA-256 of their bytes: the vectorised
reader's must equal the line-by-line reader's.  A markdown table is printed, and last
one JSON object with every case.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
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


def _run_case(case: str, path: pathlib.Path, cache_dir: str | None) -> dict:
    """Loads ``path`` one way; wall and CPU seconds and a digest of what was read."""
    import numpy as np

    from foltr_jax import data
    from foltr_jax.data import letor

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
            row["cpu_mb_s"] = size / 1e6 / row["cpu_s"]
            rows.append(row)
            print(
                f"{case}: {row['wall_s']:.1f} s, {row['wall_mb_s']:.0f} MB/s "
                f"(CPU {row['cpu_s']:.1f} s, {row['cpu_mb_s']:.0f} MB/s)",
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
    print("| parser | wall s | MB/s | CPU s | MB/s of CPU time |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['case']} | {r['wall_s']:.1f} | {r['wall_mb_s']:.0f} "
            f"| {r['cpu_s']:.1f} | {r['cpu_mb_s']:.0f} |"
        )
    if same:
        print("arrays equal to line_by_line's: " + ", ".join(f"{c} {s}" for c, s in same.items()))
    print(json.dumps({"path": str(path), "bytes": size, "cases": rows, "same_arrays": same}))
    if not all(same.values()):
        sys.exit(1)


if __name__ == "__main__":
    app.run(main, flags_parser=program.parse_flags)
