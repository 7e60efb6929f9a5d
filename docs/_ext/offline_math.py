"""Sphinx extension: MathJax served from the built site, so math renders with no network.

``sphinx.ext.mathjax`` points pages at a CDN by default; a reader offline (a laptop on a
train, a cluster node) then sees the LaTeX source.  This extension copies MathJax 3 from
the ``sphinx-mathjax-offline`` wheel (a docs extra; it ships MathJax's files) into
``_static/mathjax`` and points ``mathjax_path`` there.  It uses the SVG output: glyphs are
drawn from paths inside the script, so no web font has to load (Chromium refuses fonts
from ``file://`` pages opened straight from ``docs/_build/html``).
"""

from __future__ import annotations

import importlib.util
import pathlib
import shutil

from sphinx.errors import ExtensionError

_PACKAGE = "sphinx-mathjax-offline"  # the wheel's import name has hyphens
ENTRY = "tex-svg.js"
# The one combined component the pages load, and what it loads on demand: TeX packages
# (autoload), the accessibility and menu components; the other combined builds and the
# CHTML fonts are left out (about 12 of the wheel's 24 MB).
_PARTS = (ENTRY, "input", "a11y", "ui", "sre", "adaptors")


def mathjax_source() -> pathlib.Path:
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ExtensionError(
            'offline math needs the docs extra: .venv/bin/pip install -e ".[docs]" '
            f"(the {_PACKAGE} wheel ships MathJax)"
        )
    source = pathlib.Path(list(spec.submodule_search_locations)[0]) / "static" / "mathjax"
    if not (source / ENTRY).is_file():
        raise ExtensionError(f"{source / ENTRY} is missing: reinstall {_PACKAGE}")
    return source


def _copy(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    source = mathjax_source()
    target = pathlib.Path(app.outdir) / "_static" / "mathjax"
    for part in _PARTS:
        src, dst = source / part, target / part
        if src.is_dir():
            shutil.copytree(src, dst, dirs_exist_ok=True)
        elif src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)


def setup(app):
    app.setup_extension("sphinx.ext.mathjax")
    mathjax_source()  # fail at start, not after the build, when the wheel is missing
    app.config.mathjax_path = f"mathjax/{ENTRY}"
    app.connect("build-finished", _copy)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
