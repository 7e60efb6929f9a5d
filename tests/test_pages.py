"""Pages in a user's order: Concepts starts from what a researcher sets and sees and keeps the
engine's internals last; the changelog is not in the main navigation; no paragraph of the
pages a person reads runs over 150 words (the generated claims page and the changelog aside)."""

import re

import pytest

from tests.sample_data import REPO_ROOT

DOCS = REPO_ROOT / "docs"
LONGEST = 150  # words in a paragraph or a list item


def _pages():
    skip = ("_build", "_generated", "claims.md", "changelog.md")
    found = [p for p in DOCS.rglob("*.md") if not any(s in str(p) for s in skip)]
    return sorted(found) + [REPO_ROOT / "README.md"]


def paragraphs(text: str):
    """The prose of a Markdown page: paragraphs and list items, less code, tables, headings,
    directives and generated blocks."""
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    text = re.sub(r"<!-- BEGIN.*?<!-- END[^>]*-->", "", text, flags=re.DOTALL)
    for block in re.split(r"\n\s*\n", text):
        item = []
        for line in block.splitlines():
            if line.lstrip().startswith(("|", "#", ":", "%", "<!--")):
                continue
            if re.match(r"\s*(- |\d+\. )", line) and item:
                yield " ".join(item)
                item = []
            item.append(line)
        if item:
            yield " ".join(item)


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_no_paragraph_runs_over_150_words(page):
    long = [
        p[:80] for p in paragraphs(page.read_text(encoding="utf-8")) if len(p.split()) > LONGEST
    ]
    assert long == [], f"{page.name}: paragraphs over {LONGEST} words: {long}"


def test_paragraphs_are_found_apart_from_code_and_tables():
    text = (
        "One two.\n\n```\ncode " + "x " * 200 + "\n```\n\n| a |\n|---|\n\n- item one\n- item two\n"
    )
    assert list(paragraphs(text)) == ["One two.", "- item one", "- item two"]


def test_concepts_start_from_what_a_researcher_sets_and_keep_internals_last():
    text = (DOCS / "concepts.md").read_text(encoding="utf-8")
    sections = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert sections[0] == "What you set and what you see"
    assert sections[1] == "What is measured"
    assert sections[-1] == "Inside the engine"
    inside = text.index("## Inside the engine")
    for internal in ("`engine.serve`", "`engine.offline_when`", "federated_round", "`lax.map`"):
        assert text.index(internal) > inside, internal


def test_the_changelog_is_not_in_the_main_navigation():
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    main = re.search(r"```\{toctree\}(.*?)```", index, flags=re.DOTALL).group(1)
    assert "performance" in main.split() and "changelog" not in main.split()
    performance = (DOCS / "performance.md").read_text(encoding="utf-8")
    assert re.search(r"```\{toctree\}\n:hidden:\n\nchangelog\n```", performance)
