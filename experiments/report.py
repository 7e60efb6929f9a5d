r"""Figures and tables from a folder of results.json files.

    python -m experiments.report --results_dir=results
    python -m experiments.report --results_dir=results --baseline=fpdgd --output_dir=paper

Finds every results.json under --results_dir (fpdgd-style files and poisoning grids) and writes
to --output_dir (default <results_dir>/report): curves_<group>.png/.pdf (offline nDCG@10 per
round, mean ± sd, a panel per click model), table.md and table.tex (final offline nDCG@10 and
online performance, mean ± sd, † against --baseline) and summary.json (the numbers).
"""

from __future__ import annotations

import pathlib
import sys

from absl import app, flags

from experiments import common
from experiments import figures as report

FLAGS = flags.FLAGS
flags.DEFINE_string("results_dir", "", "Folder searched recursively for results.json files.")
flags.DEFINE_string("output_dir", "", "Where the report goes; empty: <results_dir>/report.")
flags.DEFINE_string(
    "baseline",
    "",
    "The setting to test the others against: its label, or a part of it that is in exactly "
    "one label per group; empty: no tests.",
)
flags.DEFINE_float("alpha", 0.05, "Significance level, after Bonferroni correction.")
flags.DEFINE_bool(
    "paired", False, "Paired t-tests where two settings' runs share seed and repetition."
)
flags.DEFINE_bool("welch", False, "Welch's t-test instead of Student's (unequal variances).")


def main(argv):
    common.quiet_logs()
    if len(argv) > 1:
        common.fail("report", f"unexpected arguments {argv[1:]}; flags look like --name=value")
    if not FLAGS.results_dir:
        common.fail("report", "--results_dir is required")
    try:
        summary = report.build_report(
            FLAGS.results_dir,
            FLAGS.output_dir or None,
            baseline=FLAGS.baseline,
            alpha=FLAGS.alpha,
            paired=FLAGS.paired,
            equal_var=not FLAGS.welch,
        )
    except report.ReportError as error:
        common.fail("report", str(error).replace("\n", " "))
    groups = summary["groups"]
    for name, group in groups.items():
        if group.get("baseline_note"):
            print(f"report: {name}: {group['baseline_note']}", file=sys.stderr)
    figures = sum(f.endswith(".png") for group in groups.values() for f in group["figures"])
    output = pathlib.Path(summary["output_dir"])
    print(
        f"{len(summary['files'])} results file(s), {len(groups)} group(s): {figures} figure(s) "
        f"(PNG and PDF), table.md, table.tex and summary.json in {output}"
    )


if __name__ == "__main__":
    app.run(main)
