"""The layering of the package, read from its folders.

A module's layer is its folder under ``foltr_jax/`` (``LAYERS``, lowest first): ``core``
(numerics, registries, files), ``data``, ``server`` (aggregators, attacks, the pipeline),
``engine`` (the shared round, the run, the shared config), ``methods`` (one folder per
method) and the package's front door (``foltr_jax/__init__.py``).  A module imports
modules of its own layer or lower ones only, not even under TYPE_CHECKING or inside a
function; within ``methods`` a method imports its own folder only (and the unlearning
protocol, which runs on FPDGD, FPDGD's).  So a method is added on top without touching
what is below it, and the lower layers never import a method.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "foltr_jax"
LAYERS = ("core", "data", "server", "engine", "methods", "front door")
FRONT_DOOR = "front door"
ALSO_ALLOWED = {"unlearning": {"fpdgd"}}  # a method folder -> the other methods it may use


def dotted(path: pathlib.Path) -> str:
    """``foltr_jax/methods/fpdgd/rounds.py`` -> ``methods.fpdgd.rounds`` (a package's
    ``__init__.py`` is the package; the front door is ``""``)."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def place(module: str) -> tuple:
    """(layer index, method folder or None) of a module named as ``dotted`` names it; a
    name that is not a layer folder is the front door's (``from foltr_jax import Setting``)."""
    parts = module.split(".") if module else []
    if not parts or parts[0] not in LAYERS:
        return LAYERS.index(FRONT_DOOR), None
    method = parts[1] if parts[0] == "methods" and len(parts) > 1 else None
    return LAYERS.index(parts[0]), method


def may_import(importer: str, imported: str) -> bool:
    (layer, method), (other_layer, other_method) = place(importer), place(imported)
    if other_layer != layer or LAYERS[layer] != "methods":
        return other_layer <= layer
    return other_method in {method, *ALSO_ALLOWED.get(method, ())}


def imported_modules(path: pathlib.Path, package: str) -> set:
    """Every foltr_jax module the file at ``path`` imports, anywhere in it, named as
    ``dotted`` names them; relative imports are resolved against ``package`` (the file's
    own package, dotted)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "foltr_jax":
                    found.add(".".join(parts[1:]))
        elif isinstance(node, ast.ImportFrom):
            parts = node.module.split(".") if node.module else []
            if node.level == 0:
                if parts[:1] != ["foltr_jax"]:
                    continue
                base = parts[1:]
            else:
                here = package.split(".") if package else []
                base = here[: len(here) - (node.level - 1)] + parts
            for alias in node.names:  # a name is a module or a name of the module `base`
                below = ".".join([*base, alias.name])
                found.add(
                    below
                    if (PACKAGE / below.replace(".", "/")).exists()
                    or (PACKAGE / f"{below.replace('.', '/')}.py").exists()
                    else ".".join(base)
                )
    return found


FILES = sorted(PACKAGE.rglob("*.py"))
MODULES = {dotted(p): p for p in FILES}


def test_every_module_lies_in_one_layer_folder():
    folders = {p.relative_to(PACKAGE).parts[0] for p in PACKAGE.iterdir() if p.is_dir()}
    assert folders - {"__pycache__"} == set(LAYERS) - {FRONT_DOOR}
    for module, path in MODULES.items():
        assert (module == "") == (path == PACKAGE / "__init__.py"), module
    methods = {p.name for p in (PACKAGE / "methods").iterdir() if (p / "__init__.py").exists()}
    assert methods == {"fpdgd", "foltr_es", "fedips", "unlearning"}


@pytest.mark.parametrize("module", sorted(MODULES), ids=lambda m: m or "__init__")
def test_a_module_imports_its_own_layer_or_lower_ones(module):
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    refused = {m for m in imported_modules(path, package) if not may_import(module, m)}
    assert refused == set(), f"{module} ({LAYERS[place(module)[0]]}) imports {sorted(refused)}"


def test_the_layer_check_fails_on_a_lower_module_importing_a_method(tmp_path):
    source = tmp_path / "lists.py"
    source.write_text("def late():\n    from foltr_jax.methods.fpdgd import rounds\n")
    imported = imported_modules(source, "engine")
    assert {m for m in imported if not may_import("engine.lists", m)} == {"methods.fpdgd.rounds"}


def test_the_layer_check_fails_on_a_method_importing_another_method(tmp_path):
    source = tmp_path / "es_rewards.py"
    source.write_text("from foltr_jax.methods.fpdgd import pdgd\nfrom . import foltr_es\n")
    imported = imported_modules(source, "methods.foltr_es")
    assert {m for m in imported if not may_import("methods.foltr_es.es_rewards", m)} == {
        "methods.fpdgd.pdgd"
    }
    assert may_import("methods.unlearning", "methods.fpdgd.federation")
    assert not may_import("methods.fpdgd.rounds", "methods.unlearning")
    assert not may_import("data.noniid", "")  # the front door is above everything


def test_the_import_reader_sees_every_form(tmp_path):
    source = tmp_path / "example.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import foltr_jax.methods.fpdgd.rounds\n"
        "from foltr_jax import engine, Setting as S\n"
        "from foltr_jax.methods import fedips as f\n"
        "from foltr_jax.methods.fpdgd.federation import run\n"
        "from .noniid import plan\n"
        "from . import synthetic\n"
        "from .. import server\n"
        "import numpy\n"
        "if TYPE_CHECKING:\n"
        "    from foltr_jax.methods.unlearning import UnlearningConfig\n"
        "def late():\n"
        "    from foltr_jax.core import metrics\n"
    )
    assert imported_modules(source, "data") == {
        "methods.fpdgd.rounds",
        "engine",
        "",
        "methods.fedips",
        "methods.fpdgd.federation",
        "data.noniid",
        "data.synthetic",
        "server",
        "methods.unlearning",
        "core.metrics",
    }
