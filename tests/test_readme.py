"""The README's set-up and test commands and CI's must not drift apart."""

import pytest

from tests.sample_data import REPO_ROOT


def _blocks(readme: str) -> list:
    return [b.split("```", 1)[0].strip().splitlines() for b in readme.split("```bash")[1:]]


def test_ci_runs_the_readme_commands():
    readme = (REPO_ROOT / "README.md").read_text()
    block = _blocks(readme)[0]
    assert len(block) == 2, "the README opens with exactly two set-up commands"
    ci = (REPO_ROOT / ".ci" / "run").read_text().splitlines()
    for command in block:
        assert command in ci, command
    assert "pytest" in block[1]


GOLDEN = ".venv/bin/python -m pytest -m slow tests/experiments/test_golden.py"


def test_ci_runs_the_golden_runs_as_the_readme_says():
    readme = (REPO_ROOT / "README.md").read_text()
    lines = [line for block in _blocks(readme) for line in block]
    assert ".venv/bin/python -m pytest -m slow" in lines, "the README gives the slow tier's command"
    assert GOLDEN in lines, "the README gives CI's part of the slow tier"
    ci = (REPO_ROOT / ".ci" / "run").read_text().splitlines()
    assert GOLDEN in ci and ci[-1] == GOLDEN, "the golden runs last"
    assert ci.index(GOLDEN) > ci.index(_blocks(readme)[0][1]), "after the fast tier"
    assert (REPO_ROOT / "tests" / "experiments" / "test_golden.py").exists()


def test_ci_builds_the_docs_as_the_readme_says():
    readme = (REPO_ROOT / "README.md").read_text()
    docs = [line for block in _blocks(readme) for line in block if "sphinx" in line]
    assert docs, "the README gives the documentation's build command"
    assert "-W" in docs[0].split() and docs[0].endswith(" docs docs/_build/html")
    ci = (REPO_ROOT / ".ci" / "run").read_text().splitlines()
    assert docs[0] in ci
    fast = _blocks(readme)[0][1]
    assert ci.index(fast) < ci.index(docs[0]) < ci.index(GOLDEN), (
        "after the fast tier, before the slow"
    )
    index = (REPO_ROOT / "docs" / "index.md").read_text()
    assert docs[0] in index, "docs/index.md gives the same command"
    ignored = (REPO_ROOT / ".gitignore").read_text().splitlines()
    assert "docs/_build/" in ignored and "docs/_generated/" in ignored


def test_ci_runs_the_lint_checks_as_the_readme_says():
    import configparser

    readme = (REPO_ROOT / "README.md").read_text()
    lint = [line for block in _blocks(readme) for line in block if "ruff check" in line]
    assert len(lint) == 1, "the README gives the lint and format checks in one line"
    assert '".[lint]"' in lint[0] and "ruff format --check" in lint[0]
    assert lint[0].endswith(" && .venv/bin/mypy"), "and the type check (pyproject: its files)"
    ci = (REPO_ROOT / ".ci" / "run").read_text().splitlines()
    assert lint[0] in ci
    assert ci.index(lint[0]) < ci.index(_blocks(readme)[0][1]), "before the fast tier"
    setup = configparser.ConfigParser()
    setup.read(REPO_ROOT / "setup.cfg")
    pinned = setup["options.extras_require"]["lint"].split()
    assert pinned and all("==" in p for p in pinned), "the checkers' versions are pinned"


def _first_hour(text: str) -> dict:
    """The times a first-hour table gives, by the binary each row runs."""
    import re

    found = {}
    for row in text.splitlines():
        binary = re.search(r"experiments\.(fpdgd|report|batch)\b", row)
        if not (row.startswith("|") and binary):
            continue
        for cell in row.split("|")[2:]:
            time = re.search(r"\b(?:about|under) [^|,;(]*", cell)
            if time and "`" not in cell:
                found.setdefault(binary.group(1), time.group(0).strip())
                break
    return found


def test_the_first_hour_gives_the_same_times_in_the_readme_and_getting_started():
    readme = _first_hour((REPO_ROOT / "README.md").read_text())
    guide = _first_hour((REPO_ROOT / "docs" / "getting-started.md").read_text())
    assert set(readme) == {"fpdgd", "report", "batch"}, readme
    assert readme == guide
    performance = (REPO_ROOT / "docs" / "performance.md").read_text()
    for binary, time in readme.items():
        assert time in performance, (binary, time)


def test_the_readme_counts_the_fast_tests(request):
    """The fast tier's size in docs/numbers.json (the README's and Performance's one source)
    is within 5 % of the fast tier this session collected; only a run of the whole fast tier
    (`python -m pytest`, as CI runs it) can tell."""
    import json

    config = request.config
    whole = (
        config.getoption("markexpr") == "not slow"
        and not config.getoption("keyword")
        and [str(a).rstrip("/").rsplit("/", 1)[-1] for a in config.args] == ["tests"]
    )
    if not whole:
        pytest.skip("counts the fast tier only in a run of all of it (python -m pytest)")
    counted = json.loads((REPO_ROOT / "docs" / "numbers.json").read_text())["tests"]["fast"]
    assert f"holds {counted} tests" in (REPO_ROOT / "README.md").read_text()
    stated = int(counted.replace(",", ""))
    collected = len(request.session.items)
    assert abs(collected - stated) <= 0.05 * collected, (stated, collected)
