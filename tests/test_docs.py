"""The documentation's code runs: every ```python block of docs/**/*.md that is marked
runnable (a ``% runnable`` MyST comment on the line before the fence) is executed here, in
this process, and must finish without an exception (the blocks assert what they show).
Its pages point at files that exist, and the reference pages stay generated from the code.

The build (``python -m sphinx -W``, about 20 s) and the pages opened in headless Chromium
(tests/browser.py: math typeset offline, nothing cut) are in the slow tier.
"""

import re

import pytest

from tests.sample_data import REPO_ROOT

DOCS = REPO_ROOT / "docs"
_FENCE = re.compile(r"^% runnable[ \t]*\n```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def runnable_blocks() -> list:
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        if "_build" in page.parts or "_generated" in page.parts:
            continue
        for number, match in enumerate(_FENCE.finditer(page.read_text()), start=1):
            found.append(pytest.param(match.group(1), id=f"{page.relative_to(DOCS)}#{number}"))
    return found


def test_the_pages_mark_their_examples_runnable():
    ids = [block.id for block in runnable_blocks()]
    assert any(i.startswith("getting-started.md") for i in ids), ids
    assert sum(i.startswith("howto/plugins.md") for i in ids) >= 2, ids
    # A marker that is not followed by a python fence would be silently ignored.
    for page in DOCS.rglob("*.md"):
        text = page.read_text()
        markers = re.findall(r"^% runnable", text, re.MULTILINE)
        assert len(markers) == len(_FENCE.findall(text)), page


@pytest.fixture(scope="module")
def after_the_first_command(tmp_path_factory):
    """A folder where the README's first command has run (smaller: 20 clients, 10 rounds,
    40 training queries), for the examples that read its ``results/fpdgd/results.json``."""
    from tests import binaries

    folder = tmp_path_factory.mktemp("repository")
    done = binaries.call(
        "fpdgd",
        "--n_clients=20",
        "--rounds=10",
        "--synthetic_queries=40",
        f"--output_dir={folder / 'results' / 'fpdgd'}",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return folder


@pytest.mark.parametrize("code", runnable_blocks())
def test_docs_example_runs(code, request, monkeypatch):
    if "results/fpdgd/" in code:
        monkeypatch.chdir(request.getfixturevalue("after_the_first_command"))
    exec(compile(code, "<docs example>", "exec"), {"__name__": "__docs_example__"})


def test_literalinclude_and_relative_links_point_at_files():
    for page in DOCS.rglob("*.md"):
        if "_build" in page.parts or "_generated" in page.parts:
            continue
        text = page.read_text()
        for target in re.findall(r"```\{literalinclude\} (\S+)", text):
            assert (page.parent / target).is_file(), (page, target)
        for target in re.findall(r"\]\(([^)#:]+\.md)(?:#[^)]*)?\)", text):
            path = (page.parent / target).resolve()
            if "_generated" in path.parts:  # written by the docs build: one page a binary
                if path.parent.name == "binaries":
                    assert (REPO_ROOT / "experiments" / f"{path.stem}.py").is_file(), (page, target)
                continue
            assert path.is_file(), (page, target)


def test_reference_pages_are_generated_from_the_code():
    import sys

    sys.path.insert(0, str(DOCS / "_ext"))
    import flagdoc

    binaries = flagdoc.binaries()
    for name in (
        "fpdgd",
        "poisoning",
        "noniid",
        "unlearning",
        "foltr_es",
        "fedips",
        "batch",
        "claims",
        "benchmark",
    ):
        assert name in binaries
    assert "common" not in binaries and "recipes" not in binaries
    modules = flagdoc.library_modules()
    assert "engine" in modules and "methods.fpdgd.rounds" in modules
    assert not [m for m in modules if "__init__" in m or m.startswith("_")]
    assert set(flagdoc.PUBLIC_MODULES) <= set(modules)
    internals = set(flagdoc.internal_modules())
    assert {"data.letor_blocks", "core.files", "core.multiprocess"} <= internals


def test_readme_links_point_at_pages():
    readme = (REPO_ROOT / "README.md").read_text()
    targets = re.findall(r"\]\((docs/[^)#]+\.md)(?:#[^)]*)?\)", readme)
    assert len(targets) >= 10, targets
    for target in targets:
        assert (REPO_ROOT / target).is_file(), target


@pytest.fixture(scope="module")
def built_site(tmp_path_factory):
    """The README's build command, into a temporary folder (about 20 s): (html, stderr)."""
    import subprocess
    import sys

    for module in ("sphinx", "myst_parser", "furo", "sphinx_copybutton"):
        pytest.importorskip(module, reason='needs the docs extra: pip install -e ".[docs]"')
    html = tmp_path_factory.mktemp("docs") / "html"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-q",
            "-b",
            "html",
            "docs",
            str(html),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return html, done.stderr


@pytest.mark.slow
def test_docs_build_without_warnings(built_site):
    html, stderr = built_site
    assert stderr.strip() == "", stderr[-3000:]
    flags = (html / "_generated" / "binaries" / "fpdgd.html").read_text()
    assert "--n_clients" in flags and "--privacy_grid" in flags
    api = (html / "_generated" / "api" / "public" / "engine.runner.html").read_text()
    assert "foltr_jax.engine.runner.run" in api
    # MathJax is served from the site itself; no page loads anything from a network.
    assert (html / "_static" / "mathjax" / "tex-svg.js").is_file()
    for page in html.rglob("*.html"):
        text = page.read_text()
        assert not re.search(r"<script[^>]+src=\"(https?:)?//", text), page
        assert "mailto:" not in text, page


# The pages a newcomer opens first, the ones with math, wide tables or wide code.
BROWSER_PAGES = (
    "index",
    "getting-started",
    "concepts",
    "papers/fpdgd",
    "papers/poisoning",
    "papers/thesis",
    "papers/unlearning",
    "howto/reproduce",
    "reference/api",
    "performance",
    "_generated/api/public/engine.runner",
    "_generated/binaries/fpdgd",
)


def _browser():
    from tests import browser

    if browser.chromium() is None:
        pytest.skip("needs Debian's chromium for the browser check: apt-get install -y chromium")
    return browser


@pytest.mark.slow
def test_the_check_sees_raw_tex_and_cut_content(tmp_path):
    """The browser check itself: a page with TeX left as source and a box that clips."""
    browser = _browser()
    page = tmp_path / "bad.html"
    page.write_text(
        "<html><body><article role=main style='width:400px'>"
        "<p>where \\(\\kappa\\) is the clip factor</p>"
        "<pre style='overflow:hidden;width:300px'>" + "x" * 200 + "</pre>"
        "<table style='width:900px'><tr><td>wide</td></tr></table>"
        "</article></body></html>"
    )
    found = browser.check(page)
    assert found["raw_tex"] == ["where \\(\\kappa\\) is the clip factor"]
    assert any(c.startswith("pre") and "clips" in c for c in found["cut"]), found["cut"]
    assert any(c.startswith("table") and "ends at" in c for c in found["cut"]), found["cut"]


@pytest.mark.slow
@pytest.mark.parametrize("name", BROWSER_PAGES)
def test_pages_read_offline_in_a_browser(built_site, name):
    """Headless Chromium, 1280 px, no network: math typeset, nothing cut, outline and copy
    buttons present."""
    browser = _browser()
    html, _ = built_site
    found = browser.check(html / f"{name}.html")
    assert found["raw_tex"] == [] and found["math_errors"] == [], found
    assert found["cut"] == [], found["cut"]
    assert found["broken_images"] == [], found["broken_images"]
    assert found["page_width"] <= found["window_width"], found
    assert found["external"] == [], found["external"]
    assert found["copy_buttons"] == found["code_blocks"], found
    assert "the foltr_jax authors" in found["footer"], found["footer"]
    if name == "concepts":
        assert found["math"] >= 5, found
        assert found["outline"] >= 5, found
    if name in ("concepts", "getting-started") or name.startswith("papers/"):
        assert found["images"] >= 1, found  # the data flow, the first curve, quick figures


def test_flag_pages_list_what_the_binary_defines():
    """The flags the reference shows for a binary are the ones absl holds once it is loaded
    (its --helpfull, less absl's own), with their defaults and help."""
    import sys

    from absl import flags

    from tests import binaries

    sys.path.insert(0, str(DOCS / "_ext"))
    import json

    import flagdoc

    dumped = json.loads(flagdoc._dump("fedips"))["fedips"]
    # The project's flags: a library another test imported in this process (chex) may have
    # defined its own, which the build's fresh process does not hold.
    documented = {
        f["name"]: f
        for group in dumped["groups"]
        if group["module"].startswith("experiments")
        for f in group["flags"]
    }
    binaries.load("fedips")
    defined = {
        flag.name: flag
        for module, module_flags in flags.FLAGS.flags_by_module_dict().items()
        if module.startswith("experiments")
        for flag in module_flags
    }
    assert len(defined) > 40
    assert set(documented) == set(defined)
    for name, flag in defined.items():
        # The registries' help lists every registered name; the docs' examples, run in this
        # process, register more after the build's own (fresh) process read them.
        if "docs_" in flag.help:
            assert flag.help.startswith(documented[name]["help"].rstrip(".")), name
        else:
            assert documented[name]["help"] == flag.help, name
        assert documented[name]["default"] == flag.default_as_str, name
    assert dumped["groups"][0]["module"] == "experiments.fedips"


def test_citation_file_and_paper_pages_cite_the_same_papers():
    """CITATION.cff is valid YAML for this version, and every DOI or arXiv id a paper page
    cites is among its references (and the other way round)."""
    yaml = pytest.importorskip("yaml", reason="PyYAML comes with the docs extra (myst-parser)")
    import foltr_jax

    cff = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["version"] == foltr_jax.__version__
    assert cff["title"].startswith("foltr_jax") and cff["authors"]
    cited = set()
    for reference in cff["references"]:
        assert reference["title"] and reference["authors"] and reference["year"], reference
        cited.add(reference.get("doi") or reference["url"].rsplit("/", 1)[1])
    on_pages = set()
    for name in ("fpdgd", "poisoning", "thesis", "unlearning", "fedips"):
        page = (DOCS / "papers" / f"{name}.md").read_text()
        head = page.split("**What it claims.**", 1)[0]
        found = re.findall(r"\((?:https://doi.org/|https://arxiv.org/abs/)([^)\s]+)\)", head)
        assert found, f"{name}.md opens without its reference"
        on_pages.update(found)
    assert {c for c in on_pages if not c.startswith("2412.")} == cited


MAX_PARAGRAPH_WORDS = 150


def paragraphs(text: str) -> list:
    """The prose paragraphs of a Markdown page: runs of lines outside code fences, tables,
    headings and MyST directives; a list item starts a paragraph of its own."""
    found, current, fence = [], [], None
    for line in text.splitlines():
        stripped = line.strip()
        marker = re.match(r"(`{3,}|:{3,})", stripped)
        if marker and (fence is None or stripped.startswith(fence)):
            fence = None if fence else marker.group(1)
            found.append(current)
            current = []
            continue
        if fence:
            continue
        if not stripped or stripped.startswith(("#", "|", "%", "<!--")):
            found.append(current)
            current = []
            continue
        if re.match(r"([-*+]|\d+\.)\s", stripped):
            found.append(current)
            current = []
        current.append(stripped)
    found.append(current)
    return [" ".join(p) for p in found if p]


def _prose_pages():
    for page in [REPO_ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]:
        if "_build" in page.parts or "_generated" in page.parts:
            continue
        if page == DOCS / "claims.md":  # the claims table: generated (experiments.claims)
            continue
        text = page.read_text()  # less the claims blocks generated from that table
        text = re.sub(
            r"^<!-- BEGIN claims.*?^<!-- END claims -->", "", text, flags=re.MULTILINE | re.DOTALL
        )
        yield page, text


def test_no_paragraph_runs_over_150_words():
    long = [
        (str(page.relative_to(REPO_ROOT)), len(p.split()), p[:60])
        for page, text in _prose_pages()
        for p in paragraphs(text)
        if len(p.split()) > MAX_PARAGRAPH_WORDS
    ]
    assert long == []


def test_the_paragraph_count_sees_long_paragraphs():
    words = " ".join(["word"] * 151)
    text = (
        f"# Title\n\nshort one\n\n{words[:300]}\n{words[300:]}\n\n```text\n{words}\n```\n- item\n"
    )
    assert [len(p.split()) for p in paragraphs(text)] == [2, 151, 2]
