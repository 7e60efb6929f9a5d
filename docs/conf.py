"""Sphinx configuration: the foltr_jax documentation, built offline from the repository.

    .venv/bin/pip install -e ".[docs]" && .venv/bin/python -m sphinx -W --keep-going -b html docs docs/_build/html

Pages are MyST Markdown; the API reference is autodoc (napoleon reads the docstrings'
sections) and the binaries' flags are read from the code at build time (``_ext/flagdoc.py``).
Math is rendered by MathJax served from the built site (``_ext/offline_math.py``): neither
the build nor the reading needs a network.  The theme is Furo (page outline on the right,
code and wide tables scroll sideways), with a copy button on every code block.
"""

import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE / "_ext"))

import foltr_jax  # noqa: E402

project = "foltr_jax"
author = "the foltr_jax authors"
copyright = "2026, the foltr_jax authors"
release = version = foltr_jax.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "offline_math",
    "sphinx_copybutton",
    "sphinx.ext.viewcode",
    "flagdoc",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build"]
smartquotes = False  # flags keep their two hyphens

myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "description"
# Types join the parameters a docstring describes; no bare list of every dataclass field.
autodoc_typehints_description_target = "documented_params"
autodoc_default_options = {"undoc-members": False}
napoleon_google_docstring = True
napoleon_numpy_docstring = True

html_theme = "furo"
html_title = "foltr_jax"
html_theme_options = {"navigation_with_keys": True}
# Copy the command, not the prompt or the output lines of a console session.
copybutton_exclude = ".linenos, .gp, .go"
html_static_path = ["_static"]
html_css_files = ["layout.css"]
napoleon_use_ivar = True  # a dataclass's "Attributes:" section is not a second description

# Type hints name classes by their short names, which two modules may define alike (a
# private helper's name and a public one); the ambiguity is left unlinked rather than guessed.
suppress_warnings = ["ref.python"]

# The docstrings write set sizes as |C|, |U|; reStructuredText reads |name| as a
# substitution.  Outside literal blocks the bars are escaped before parsing.
_BARS = re.compile(r"(?<![\\`|])\|(?=[^\s|`])([^|`\n]*?[^\s|`\\])\|(?![|`_])")


# "nDCG@10" reads to docutils as an e-mail address; the pages have none, so a mailto:
# link is put back as the text it was.
def _no_mailto(app, doctree):
    from docutils import nodes

    for node in list(doctree.findall(nodes.reference)):
        if node.get("refuri", "").startswith("mailto:"):
            node.replace_self(nodes.Text(node.astext()))


def _escape_bars(app, what, name, obj, options, lines):
    literal_indent = None
    for i, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        if literal_indent is not None:
            if line.strip() and indent <= literal_indent:
                literal_indent = None
            else:
                continue
        lines[i] = _BARS.sub(r"\\|\1\\|", line)
        if line.rstrip().endswith("::"):
            literal_indent = indent


def _config_fields(app, what, name, obj, options, lines):
    """A config's fields as a table (name, default, the help its flag shows), for the config
    dataclasses whose fields are the binaries' flags (``foltr_jax.engine.config.setting_help``)."""
    import dataclasses

    if what != "class" or not dataclasses.is_dataclass(obj):
        return
    from foltr_jax.engine import config

    rows, missing = [], 0
    for field in dataclasses.fields(obj):
        try:
            meaning = config.setting_help(obj, field.name)
        except KeyError:  # a field no binary's flag sets (the method's own)
            meaning, missing = "(no flag: set from Python or by the method)", missing + 1
        if field.default is not dataclasses.MISSING:
            default = repr(field.default)
        elif field.default_factory is not dataclasses.MISSING:
            default = repr(field.default_factory())
        else:
            default = "(required)"
        rows.append((field.name, default, " ".join(meaning.split())))
    if missing * 3 > len(rows):  # not a config of the binaries' flags
        return
    lines += ["", ".. list-table:: Fields (the binaries' flags of the same names)",
              "   :header-rows: 1", "   :widths: 22 14 64", "",
              "   * - field", "     - default", "     - meaning"]
    for field_name, default, meaning in rows:
        lines += [f"   * - ``{field_name}``", f"     - ``{default}``", f"     - {meaning}"]


def setup(app):
    app.connect("autodoc-process-docstring", _config_fields)
    app.connect("autodoc-process-docstring", _escape_bars)
    app.connect("doctree-read", _no_mailto)
