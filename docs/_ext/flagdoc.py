"""Sphinx extension: the reference pages that are generated from the code at build time.

- ``_generated/binaries/<name>.md``: one page per binary (every ``experiments/*.py`` that
  runs as ``__main__``), holding a ``binary-flags`` directive;
- ``_generated/api/{public,internal}/<module>.md``: one autodoc page per ``foltr_jax``
  module, found by walking the package's folders (``methods.fpdgd.rounds.md``, so the
  pages sort by layer folder), the public ones (``PUBLIC_MODULES``) apart from the
  internals.

The ``binary-flags`` directive renders the binary's docstring and every flag it defines,
read from absl's FLAGS in a process of its own (``flag_dump.py``), so the pages follow
the flag definitions; nothing is copied by hand.  ``_generated`` is rewritten on every
build and git-ignored.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

from experiments.lib import usage  # the flags' concerns, as --help groups them (conf.py's path)

HERE = pathlib.Path(__file__).resolve().parent
DOCS = HERE.parent
ROOT = DOCS.parent
GENERATED = DOCS / "_generated"


def binaries() -> list:
    """The modules of ``experiments/`` that are binaries (they run as ``__main__``)."""
    found = []
    for path in sorted((ROOT / "experiments").glob("*.py")):
        if re.search(r"^if __name__ == .__main__.:", path.read_text(), re.MULTILINE):
            found.append(path.stem)
    return found


def library_modules() -> list:
    """Every module of ``foltr_jax`` by its dotted name below the package, walking the
    folders (``methods.fpdgd.rounds``; a folder's ``__init__.py`` is the folder's name);
    the front door itself is the API page's own."""
    package = ROOT / "foltr_jax"
    found = []
    for path in package.rglob("*.py"):
        parts = path.relative_to(package).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if parts and not any(part.startswith("_") for part in parts):
            found.append(".".join(parts))
    return sorted(found)


# The modules a user imports and extends: the folders' overviews, the configs, runs,
# results, data, metrics and registries, the methods, and the parts a plugin names.  Every
# other module of the package is an internal (the reference lists them apart).
PUBLIC_MODULES = (
    "core", "core.metrics", "core.registry", "core.click_models", "core.rankers",
    "core.privacy", "data", "data.noniid", "server", "server.aggregators", "server.attacks",
    "server.pipeline", "engine", "engine.config", "engine.lists", "engine.federated",
    "engine.method_registry", "engine.results", "engine.results_files", "engine.runner",
    "engine.serving",
    "engine.shared_round", "methods", "methods.fpdgd", "methods.fpdgd.config",
    "methods.fpdgd.client_plan", "methods.fpdgd.federation",
    "methods.fpdgd.noniid_experiment", "methods.foltr_es",
    "methods.fedips", "methods.fedips.config", "methods.unlearning",
    "methods.unlearning.experiment", "methods.fedips.experiment",
)


def internal_modules() -> list:
    return [m for m in library_modules() if m not in PUBLIC_MODULES]


_DUMP = {}


def flag_dump() -> dict:
    if not _DUMP:
        _DUMP.update(json.loads(_dump(*binaries())))
    return _DUMP


def _dump(*args) -> str:
    done = subprocess.run(
        [sys.executable, str(HERE / "flag_dump.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        # This checkout's experiments/, whatever an installed foltr_jax points at.
        env={
            **os.environ,
            "JAX_PLATFORMS": "cpu",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        },
    )
    if done.returncode:
        raise RuntimeError(f"flag_dump.py {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


_CATALOGUE = {}


def catalogue() -> dict:
    """The batch recipes of experiments/lib/recipes/, as JSON."""
    if not _CATALOGUE:
        _CATALOGUE.update(json.loads(_dump("--catalogue")))
    return _CATALOGUE


def _write(path: pathlib.Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:  # unchanged pages are not rebuilt
        path.write_text(text)


def write_generated_pages(app) -> None:
    keep = set()
    for name in binaries():
        path = GENERATED / "binaries" / f"{name}.md"
        _write(
            path,
            f"# `experiments.{name}`\n\n"
            f"`python -m experiments.{name} --help` prints the same flags, by concern.\n\n"
            f"```{{binary-flags}} {name}\n```\n",
        )
        keep.add(path)
    for name in library_modules():
        kind = "internal" if name in internal_modules() else "public"
        path = GENERATED / "api" / kind / f"{name}.md"
        _write(
            path,
            f"# `foltr_jax.{name}`{' (internal)' if kind == 'internal' else ''}\n\n"
            "```{eval-rst}\n"
            f".. automodule:: foltr_jax.{name}\n"
            "   :ignore-module-all:\n"
            "   :members:\n"
            "   :show-inheritance:\n"
            "```\n",
        )
        keep.add(path)
    for stale in GENERATED.rglob("*.md"):
        if stale not in keep:
            stale.unlink()


class _Named:
    """A dumped flag as ``usage.grouped`` reads it (its name)."""

    def __init__(self, flag: dict):
        self.flag, self.name = flag, flag["name"]


class BinaryFlags(SphinxDirective):
    """``binary-flags NAME``: the docstring and the flags of ``experiments.NAME``."""

    required_arguments = 1

    def run(self):
        name = self.arguments[0]
        dump = flag_dump()
        if name not in dump:
            raise self.error(f"no binary experiments.{name}")
        self.env.note_dependency(str(ROOT / "experiments" / f"{name}.py"))
        self.env.note_dependency(str(ROOT / "experiments" / "lib" / "shared_flags.py"))
        self.env.note_dependency(str(ROOT / "experiments" / "lib" / "usage.py"))
        entry = dump[name]
        out = []
        if entry["doc"].strip():
            out.append(nodes.literal_block(text=_dedent_doc(entry["doc"])))
        every = [flag for group in entry["groups"] for flag in group["flags"]]
        for title, about, found in usage.grouped([_Named(flag) for flag in every]):
            out.append(nodes.rubric(text=f"{title}: {about}"))
            items = nodes.definition_list()
            for flag in (named.flag for named in found):
                term = nodes.term()
                term += nodes.literal(text=f"--{flag['name']}")
                if flag["short_name"]:
                    term += nodes.Text(", ")
                    term += nodes.literal(text=f"-{flag['short_name']}")
                default = flag["default"] or ""
                if len(default) >= 2 and default[0] == default[-1] == "'":
                    default = default[1:-1]  # absl quotes every default
                term += nodes.Text(f"  ({flag['type']}, default ")
                term += nodes.literal(text=default) if default else nodes.Text("empty")
                term += nodes.Text(")")
                body = nodes.definition()
                body += nodes.paragraph(text=flag["help"])
                if flag["choices"]:
                    choice = nodes.paragraph(text="One of: ")
                    for i, value in enumerate(flag["choices"]):
                        if i:
                            choice += nodes.Text(", ")
                        choice += nodes.literal(text=value)
                    body += choice
                item = nodes.definition_list_item()
                item += term
                item += body
                items += item
            out.append(items)
        return out


class PaperRecipes(SphinxDirective):
    """``paper-recipes PREFIX...``: the batch recipes whose names start with a prefix, with
    every run's command line (``experiments/lib/recipes/``, full size; ``--quick`` shrinks)."""

    required_arguments = 1
    optional_arguments = 10

    def run(self):
        for module in (ROOT / "experiments" / "lib" / "recipes").glob("*.py"):
            self.env.note_dependency(str(module))
        found = [
            r for r in catalogue()["recipes"]
            if any(r["name"].startswith(prefix) for prefix in self.arguments)
        ]
        if not found:
            raise self.error(f"no recipe starts with {self.arguments}")
        out = []
        for recipe in found:
            head = nodes.paragraph()
            head += nodes.strong(text=recipe["name"])
            head += nodes.Text(f": {recipe['title']}")
            out.append(head)
            runs = nodes.bullet_list()
            for run in recipe["runs"]:
                item = nodes.list_item()
                line = nodes.paragraph()
                line += nodes.Text(f"{run['label'] or run['name']}: ")
                line += nodes.literal(
                    text=" ".join([f"python -m experiments.{run['binary']}", *run["flags"]])
                )
                item += line
                runs += item
            out.append(runs)
        return out


def _dedent_doc(doc: str) -> str:
    lines = doc.strip("\n").splitlines()
    rest = [line for line in lines[1:] if line.strip()]
    indent = min((len(line) - len(line.lstrip()) for line in rest), default=0)
    return "\n".join([lines[0].strip()] + [line[indent:] for line in lines[1:]])


def setup(app):
    app.connect("builder-inited", write_generated_pages)
    app.add_directive("binary-flags", BinaryFlags)
    app.add_directive("paper-recipes", PaperRecipes)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
