"""The layering of the package, read from the sources: the lower layers (lanes and
scoring, client plans, the engine, the server pipeline, numerics, data) never import a
method module, not even under TYPE_CHECKING or inside a function."""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "foltr_jax"
METHODS = {"rounds", "federation", "foltr_es", "fedips", "unlearning", "noniid"}
# The package's front door and the methods' own parts may import methods.
UPPER = METHODS | {"__init__", "fedips_em"}


def imported_modules(path: pathlib.Path) -> set:
    """Every foltr_jax module ``path`` imports, anywhere in the file (relative imports
    resolved against the package)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "foltr_jax" and len(parts) > 1:
                    found.add(parts[1])
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            parts = module.split(".") if module else []
            if node.level == 0 and parts[:1] != ["foltr_jax"]:
                continue
            inner = parts[1:] if node.level == 0 else parts
            if inner:
                found.add(inner[0])
            else:  # from foltr_jax import a, b  /  from . import a
                found.update(alias.name for alias in node.names)
    return found


LOWER = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in UPPER)


def test_the_layers_named_here_exist():
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    assert METHODS <= modules
    assert {"interaction", "client_plan", "engine", "pipeline"} <= set(LOWER)


@pytest.mark.parametrize("module", LOWER)
def test_lower_layers_import_no_method(module):
    assert imported_modules(PACKAGE / f"{module}.py") & METHODS == set()


def test_the_import_reader_sees_every_form(tmp_path):
    source = tmp_path / "example.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import foltr_jax.rounds\n"
        "from foltr_jax import engine, fedips as f\n"
        "from foltr_jax.federation import run\n"
        "from .noniid import plan\n"
        "from . import foltr_es\n"
        "import numpy\n"
        "if TYPE_CHECKING:\n"
        "    from foltr_jax.unlearning import UnlearningConfig\n"
        "def late():\n"
        "    from foltr_jax import metrics\n"
    )
    assert imported_modules(source) == {
        "rounds",
        "engine",
        "fedips",
        "federation",
        "noniid",
        "foltr_es",
        "unlearning",
        "metrics",
    }
