"""The README's set-up and test commands and CI's must not drift apart."""

from sample_data import REPO_ROOT


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


def test_ci_runs_the_slow_tier_as_the_readme_says():
    readme = (REPO_ROOT / "README.md").read_text()
    slow = [line for block in _blocks(readme) for line in block if "pytest -m slow" in line]
    assert slow, "the README gives the slow tier's command"
    assert slow[0] == ".venv/bin/python -m pytest -m slow"
    ci = (REPO_ROOT / ".ci" / "run").read_text().splitlines()
    assert slow[0] in ci
    assert ci.index(slow[0]) > ci.index(_blocks(readme)[0][1]), "after the fast tier"


def test_ci_builds_the_docs_as_the_readme_says():
    readme = (REPO_ROOT / "README.md").read_text()
    docs = [line for block in _blocks(readme) for line in block if "sphinx" in line]
    assert docs, "the README gives the documentation's build command"
    assert "-W" in docs[0].split() and docs[0].endswith(" docs docs/_build/html")
    ci = (REPO_ROOT / ".ci" / "run").read_text().splitlines()
    assert docs[0] in ci
    fast, slow = _blocks(readme)[0][1], ".venv/bin/python -m pytest -m slow"
    assert ci.index(fast) < ci.index(docs[0]) < ci.index(slow), "after the fast tier, before the slow"
    index = (REPO_ROOT / "docs" / "index.md").read_text()
    assert docs[0] in index, "docs/index.md gives the same command"
    ignored = (REPO_ROOT / ".gitignore").read_text().splitlines()
    assert "docs/_build/" in ignored and "docs/_generated/" in ignored
