"""The pages' numbers from one source: ``docs/numbers.json`` rendered into marked blocks.

A block is the text between ``<!-- BEGIN numbers:NAME -->`` and ``<!-- END numbers -->`` in
README.md, docs/getting-started.md or docs/performance.md; ``BLOCKS[NAME]`` renders it from
the data file.  A number is changed in the data file, then the pages are rewritten:

    python docs/_ext/page_numbers.py --write      # rewrite every block
    python docs/_ext/page_numbers.py              # exit 1, naming the blocks that differ

``tests/test_numbers.py`` checks that every block is its rendering, so the README, Getting
started and Performance never disagree.
"""

from __future__ import annotations

import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "docs" / "numbers.json"
PAGES = ("README.md", "docs/getting-started.md", "docs/performance.md")
BLOCK = re.compile(r"(<!-- BEGIN numbers:([a-z0-9-]+) -->\n)(.*?)(<!-- END numbers -->)", re.S)


def load() -> dict:
    return json.loads(DATA.read_text(encoding="utf-8"))


def _by_key(data: dict) -> dict:
    """Every row of the data file by its key."""
    rows = [*data["throughput"], *data["budget"], *data["data"], *data["compiling"]]
    rows += data["first_hour"]
    rows += data["published"]["rows"]
    return {row["key"]: row for row in rows}


def _table(header: list, rows: list) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _measurements(rows: list) -> str:
    return _table(
        ["what", "where", "result", "measured", "command"],
        [[r["what"], r["where"], r["result"], r["measured"], _code(r["command"])] for r in rows],
    )


def _code(command: str) -> str:
    """A command in backticks, unless it is words ('the same with ...')."""
    if command.startswith(("the same", "python -m experiments.benchmark --suite (")):
        if command.startswith("python"):
            code, _, rest = command.partition(" (")
            return f"`{code}` ({rest}"
        return command
    return f"`{command}`"


def performance_throughput(data: dict) -> str:
    return _measurements(data["throughput"])


def performance_published(data: dict) -> str:
    published = data["published"]
    rows = [
        [r["sitting"], r["published"], r["ours"], r["ratio"], r["measured"]]
        for r in published["rows"]
    ]
    table = _table(["sitting", "published FPDGD code", "foltr_jax", "ratio", "measured"], rows)
    first = published["rows"][0]
    return (
        f"{published['about']} Measured in one sitting ({first['measured']}), the published "
        f"code ran {first['published']} and foltr_jax {first['ours']} on one core: "
        f"{first['ratio']}. Our command is the first row of [Throughput](#throughput); the "
        "published code is not part of this repository.\n\n" + table
    )


def performance_budget(data: dict) -> str:
    return _measurements(data["budget"])


def performance_data(data: dict) -> str:
    return _measurements(data["data"])


def performance_compiling(data: dict) -> str:
    return _measurements(data["compiling"])


def performance_first_hour(data: dict) -> str:
    rows = []
    for step in data["first_hour"]:
        if "what" not in step:
            continue
        time = step["time"] + (f" ({step['cpu_time']})" if step.get("cpu_time") else "")
        command = f"python -m {step['short_command']}"
        rows.append([step["what"], "2-core CPU", time, step["measured"], f"`{command}`"])
    tests = data["tests"]
    rows.append(
        [
            "the fast test tier",
            "2-core CPU, idle",
            f"{tests['fast_time']} ({tests['fast_time_tests']} tests then; {tests['fast']} on "
            f"{tests['counted']})",
            tests["fast_time_measured"],
            f"`{tests['command']}`",
        ]
    )
    table = _table(["what", "where", "result", "measured", "command"], rows)
    return f"{table}\n\n{data['first_hour_note']}"


def getting_started_first_hour(data: dict) -> str:
    rows = [
        [s["step"], f"`{s['command']}`" if "python" in s["command"] else s["command"],
         s["time"] + (" (and the install about a minute)" if s["key"] == "main_job" else ""),
         s["leaves"]]
        for s in data["first_hour"]
    ]  # fmt: skip
    for row, step in zip(rows, data["first_hour"]):
        if step["key"] == "report":  # the install, then the command
            install, _, command = step["command"].partition(" (matplotlib, scipy), then ")
            row[1] = f"`{install}` (matplotlib, scipy), then `{command}`"
    return _table(["step", "command", "time on 2 idle cores", "what it leaves"], rows)


def readme_first_hour(data: dict) -> str:
    rows = [
        [f"`{s['short_command']}`" + (" (the first command)" if s["key"] == "main_job" else ""),
         s["time"], s["leaves"]]
        for s in data["first_hour"]
        if "short_command" in s
    ]  # fmt: skip
    return _table(["step", "time on 2 cores", "where the output lands"], rows)


def readme_tests(data: dict) -> str:
    tests = data["tests"]
    return (
        f"The fast tier holds {tests['fast']} tests ({tests['counted']}; the slow tier "
        f"{tests['slow']}); it took {tests['fast_time']} on 2 idle cores when it held "
        f"{tests['fast_time_tests']} ({tests['fast_time_measured']}; "
        "[Performance](docs/performance.md#the-first-hour))."
    )


def readme_performance(data: dict) -> str:
    n = _by_key(data)
    return (
        f"Linear FPDGD at a million clients a round runs at {n['h200_million']['short']} on one "
        f"NVIDIA H200 and at {n['cpu_million']['short']} on a 2-core CPU; at 1,000 clients on "
        f"the MSLR excerpt the 2-core CPU runs {n['cpu_one_core']['short']} on one core, "
        f"{n['published_one_core']['ratio']} the published FPDGD code measured beside it, and "
        f"{n['cpu_two_cores']['short']} on both (`--n_devices=2`). The poisoning paper's "
        f"219-cell grid takes {n['h200_poisoning_fold']['short']} per fold on the H200 and "
        f"{n['cpu_poisoning_fold']['short']} per fold on the 2-core CPU. "
        "[Performance](docs/performance.md) gives each number with its command and date; "
        "[the changelog](docs/changelog.md) how they came about; [Fidelity](docs/fidelity.md) "
        "the agreement with a NumPy implementation of the published code."
    )


BLOCKS = {
    "performance-throughput": performance_throughput,
    "performance-published": performance_published,
    "performance-budget": performance_budget,
    "performance-data": performance_data,
    "performance-compiling": performance_compiling,
    "performance-first-hour": performance_first_hour,
    "getting-started-first-hour": getting_started_first_hour,
    "readme-first-hour": readme_first_hour,
    "readme-tests": readme_tests,
    "readme-performance": readme_performance,
}


def render(text: str, data: dict) -> str:
    """``text`` with every numbers block rendered anew; KeyError for an unknown block."""

    def block(found: re.Match) -> str:
        return f"{found.group(1)}{BLOCKS[found.group(2)](data)}\n{found.group(4)}"

    return BLOCK.sub(block, text)


def blocks(text: str) -> list:
    """The names of the numbers blocks in ``text``, in order."""
    return [found.group(2) for found in BLOCK.finditer(text)]


def main(argv: list) -> int:
    data, stale = load(), []
    for page in PAGES:
        path = ROOT / page
        text = path.read_text(encoding="utf-8")
        new = render(text, data)
        if new != text:
            stale.append(page)
            if "--write" in argv:
                path.write_text(new, encoding="utf-8")
    if stale and "--write" not in argv:
        print(f"numbers blocks differ from docs/numbers.json: {', '.join(stale)} "
              "(python docs/_ext/page_numbers.py --write)", file=sys.stderr)  # fmt: skip
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
