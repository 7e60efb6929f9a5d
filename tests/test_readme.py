"""The README's set-up commands and CI's must not drift apart."""

from sample_data import REPO_ROOT


def test_ci_runs_the_readme_commands():
    readme = (REPO_ROOT / "README.md").read_text()
    block = readme.split("```bash", 1)[1].split("```", 1)[0].strip().splitlines()
    assert len(block) == 2, "the README opens with exactly two set-up commands"
    ci = (REPO_ROOT / ".ci" / "run").read_text().splitlines()
    for command in block:
        assert command in ci, command
    assert "pytest" in block[1]
