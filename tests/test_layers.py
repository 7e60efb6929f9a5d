"""The layering of the package, read from the sources.

Every module belongs to one layer of ``LAYERS`` (lowest first) and imports modules of its
own layer or lower ones only, not even under TYPE_CHECKING or inside a function: the
numerics and registries, the data, the server pipeline, the configs, the run engine with
its lanes and client plans, the methods, and the package's front door.  So a method is
added on top without touching what is below it, and the lower layers never import a
method.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "foltr_jax"
LAYERS = {
    "numerics": {
        "registry", "files", "multiprocess", "metrics", "rankers", "plackett_luce", "pdgd",
        "click_models", "ips", "es_rewards", "privacy",
    },
    "data": {
        "ranking_dataset", "letor_blocks", "letor", "synthetic", "dataset_cache", "data", "noniid",
    },
    "server pipeline": {"aggregators", "attacks", "pipeline"},
    "configs": {"config"},
    "engine": {"lists", "interaction", "client_plan", "loop", "engine"},
    "methods": {
        "rounds", "federation", "foltr_es", "fedips", "fedips_em", "lambdarank", "unlearning",
    },
    "front door": {"__init__"},
}
METHODS = LAYERS["methods"]
LAYER_OF = {module: i for i, members in enumerate(LAYERS.values()) for module in members}


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


MODULES = sorted(p.stem for p in PACKAGE.glob("*.py"))


def test_every_module_has_one_layer():
    placed = [m for members in LAYERS.values() for m in members]
    assert len(placed) == len(set(placed))
    assert set(placed) == set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_a_module_imports_its_own_layer_or_lower_ones(module):
    layer = LAYER_OF[module]
    above = {m for m in imported_modules(PACKAGE / f"{module}.py") if LAYER_OF[m] > layer}
    assert above == set(), f"{module} ({list(LAYERS)[layer]}) imports {sorted(above)}"


def test_the_layer_check_fails_on_a_lower_module_importing_a_method(tmp_path):
    source = tmp_path / "interaction.py"
    source.write_text("def late():\n    from foltr_jax import rounds\n")
    assert {m for m in imported_modules(source) if LAYER_OF[m] > LAYER_OF["interaction"]} == {
        "rounds"
    }


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
