r"""Figures and tables from a folder of results.json files.

    python -m experiments.report --results_dir=results
    python -m experiments.report --results_dir=results --baseline=fpdgd --output_dir=paper
    python -m experiments.report --recipe=fpdgd_fig2 [--quick]   # the paper's figures

With --recipe (a batch recipe, see `python -m experiments.batch --list`; --results_dir
defaults to results/batch/<recipe>), the report also draws the paper's figures and tables
panel for panel (experiments/lib/paper_figures/): paper_<figure>.png/.pdf, page.png/.pdf
(every figure and table of the recipe on one page), paper_tables.md (for a recipe with tables)
and paper.json.

Finds every results.json under --results_dir (every binary's, results format 2) and writes
to --output_dir (default <results_dir>/report): curves_<group>.png/.pdf (offline nDCG@10 per
round, mean ± sd, a panel per click model), table.md and table.tex (final offline nDCG@10 and
online performance, mean ± sd, † against --baseline) and summary.json (the numbers).
"""

from __future__ import annotations

import pathlib
import sys

from absl import app, flags

from experiments.lib import program, recipes
from experiments.lib.cli import UserError, need_report_extra
from experiments.lib.output import Output

need_report_extra("report")  # matplotlib, scipy
from experiments.lib import figures as report
from experiments.lib import paper_figures

FLAGS = flags.FLAGS
REPORT_FILES = ("table.md", "table.tex", "summary.json")
flags.DEFINE_string("results_dir", "", "Folder searched recursively for results.json files.")
flags.DEFINE_string(
    "recipe", "", "A batch recipe: also draw its paper's figures and tables (paper_figures)."
)
flags.DEFINE_bool("quick", False, "The recipe as `batch --quick` ran it (its runs' labels).")
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


def check_recipe_runs(results_dir, recipe) -> None:
    """UserError unless the results under ``results_dir`` are the recipe's: every run of
    the recipe has its results (<fold>/<run>/results.json, a grid's cells below it) and no
    results file is foreign to it, so that a paper's figures never show other runs as its
    lines (naming what is missing or foreign)."""
    root = pathlib.Path(results_dir)
    try:
        paths = report.find_results(root)
    except report.ReportError as error:
        raise UserError(str(error)) from None
    names = {run.name for run in recipe.runs}
    found, foreign = set(), []
    for path in paths:
        parts = path.relative_to(root).parts
        if len(parts) >= 3 and parts[1] in names:
            found.add(parts[1])
        else:
            foreign.append(str(path.relative_to(root)))
    missing = sorted(names - found)
    if missing or foreign:
        problems = []
        if missing:
            problems.append(f"no results of its run(s) {_few(missing)} (<fold>/<run>/results.json)")
        if foreign:
            problems.append(f"results that are not its runs': {_few(foreign)}")
        raise UserError(
            f"--recipe: {recipe.name}: {root} does not hold the recipe's runs: "
            f"{'; '.join(problems)} (python -m experiments.batch --recipe={recipe.name} makes them)"
        )


def _few(names: list, shown: int = 4) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def run() -> program.Done:
    recipe = None
    if FLAGS.recipe:
        available = recipes.recipes(FLAGS.quick)
        if FLAGS.recipe not in available:
            raise UserError(f"--recipe: unknown recipe {FLAGS.recipe!r}; see batch --list")
        recipe = available[FLAGS.recipe]
    results_dir = FLAGS.results_dir or (f"results/batch/{recipe.name}" if recipe else "")
    if not results_dir:
        raise UserError("--results_dir is required (or --recipe)")
    if recipe is not None:  # before anything is claimed or drawn
        check_recipe_runs(results_dir, recipe)
    output_dir = FLAGS.output_dir or str(pathlib.Path(results_dir) / "report")
    # claimed, locked and probed before any results are read or drawn
    claimed = Output(  # its own folder, never one a link points to
        output_dir, outputs=REPORT_FILES, flag="output_dir" if FLAGS.output_dir else "results_dir",
        below=None if FLAGS.output_dir else results_dir,
    )  # fmt: skip
    try:
        summary = report.build_report(
            results_dir,
            output_dir,
            baseline=FLAGS.baseline or (recipe.baseline if recipe else ""),
            alpha=FLAGS.alpha,
            paired=FLAGS.paired or (recipe.paired if recipe else False),
            equal_var=not FLAGS.welch,
        )
        paper = None
        if recipe is not None and recipe.name in paper_figures.LAYOUTS:  # a plugin's: none
            paper = paper_figures.make_page(results_dir, recipe, output_dir)
    except report.ReportError as error:
        raise UserError(str(error).replace("\n", " ")) from None
    except OSError as error:
        raise UserError(
            f"--output_dir: cannot write {error.filename or output_dir} ({error.strerror or error})"
        ) from None
    groups = summary["groups"]
    for name, group in groups.items():
        if group.get("baseline_note"):
            print(f"report: {name}: {group['baseline_note']}", file=sys.stderr)
    figures = sum(f.endswith(".png") for group in groups.values() for f in group["figures"])
    output = pathlib.Path(summary["output_dir"])
    message = (
        f"{len(summary['files'])} results file(s), {len(groups)} group(s): {figures} figure(s) "
        f"(PNG and PDF), table.md, table.tex and summary.json in {output}"
    )
    if paper is not None:
        names = ", ".join(f["name"] for f in paper["figures"] + paper["tables"])
        message += f"\n{recipe.name}: {names} on {output / 'page.png'} (and .pdf), paper.json"
    return program.Done(claimed, message)


main = program.main("report", run, distributed=None)


if __name__ == "__main__":
    app.run(main, flags_parser=program.parse_flags)
