"""One source for every number: the README, Getting started and Performance quote their
throughput, test counts, first-hour times and ratios to the published code from
docs/numbers.json, rendered into marked blocks (docs/_ext/page_numbers.py)."""

import importlib.util
import re

import pytest

from tests.sample_data import REPO_ROOT

_SPEC = importlib.util.spec_from_file_location(
    "page_numbers", REPO_ROOT / "docs" / "_ext" / "page_numbers.py"
)
page_numbers = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(page_numbers)


@pytest.mark.parametrize("page", page_numbers.PAGES)
def test_every_numbers_block_is_its_rendering(page):
    text = (REPO_ROOT / page).read_text(encoding="utf-8")
    assert page_numbers.blocks(text), f"{page} quotes no numbers block"
    assert page_numbers.render(text, page_numbers.load()) == text, (
        f"{page}: a numbers block differs from docs/numbers.json; run "
        "python docs/_ext/page_numbers.py --write"
    )


def test_every_block_is_on_a_page_once():
    found = [b for page in page_numbers.PAGES
             for b in page_numbers.blocks((REPO_ROOT / page).read_text(encoding="utf-8"))]  # fmt: skip
    assert sorted(found) == sorted(page_numbers.BLOCKS)


def _outside_blocks(text: str) -> str:
    """A page less its generated blocks (numbers, claims) and its code blocks."""
    text = page_numbers.BLOCK.sub("", text)
    text = re.sub(r"<!-- BEGIN claims.*?<!-- END claims -->", "", text, flags=re.DOTALL)
    return re.sub(r"```.*?```", "", text, flags=re.DOTALL)


@pytest.mark.parametrize("page", page_numbers.PAGES)
def test_no_throughput_or_test_count_is_written_outside_the_blocks(page):
    text = _outside_blocks((REPO_ROOT / page).read_text(encoding="utf-8"))
    rates = re.findall(r"\d[\d,.]*\s*(?:million\s+)?interactions/s", text)
    counts = re.findall(r"\d[\d,]*\s+(?:fast\s+)?tests\b(?!/)", text)
    assert (rates, counts) == ([], []), page


def _range(text: str) -> tuple:
    """(low, high) of '2,199–2,228 interactions/s' or '130,000 interactions/s (mean of 3)'."""
    values = [float(v.replace(",", "")) for v in re.findall(r"\d[\d,]*", text.split(" (")[0])]
    return min(values), max(values)


def test_the_ratios_to_the_published_code_follow_from_its_numbers():
    for row in page_numbers.load()["published"]["rows"]:
        published, ours = _range(row["published"]), _range(row["ours"])
        low, high = round(ours[0] / published[1]), round(ours[1] / published[0])
        stated = f"{low}×" if low == high else f"{low}–{high}×"
        assert row["ratio"] == stated, row


def test_the_readme_and_performance_quote_the_same_throughput():
    data = page_numbers.load()
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    performance = (REPO_ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    rows = {row["key"]: row for row in data["throughput"]}
    for key in ("cpu_one_core", "cpu_million"):
        assert rows[key]["short"] in readme and rows[key]["result"] in performance
    assert data["published"]["rows"][0]["ratio"] in readme
    assert data["published"]["rows"][0]["ratio"] in performance
