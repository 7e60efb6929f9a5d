"""The core install (`pip install -e .`) needs only its core packages: the library
and the simulation binaries import neither matplotlib nor scipy; the reporting binaries say
in one line that they need the report extra."""

import ast
import subprocess
import sys

import pytest

from experiments.lib import cli
from tests.sample_data import REPO_ROOT

REPORT_ONLY = {"matplotlib", "scipy"}
SIMULATION_BINARIES = (
    "fpdgd",
    "poisoning",
    "noniid",
    "unlearning",
    "foltr_es",
    "fedips",
    "benchmark",
    "paper_budget",
)


def test_the_library_imports_no_reporting_package():
    for path in sorted((REPO_ROOT / "foltr_jax").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            assert not {n.split(".")[0] for n in names} & REPORT_ONLY, (path.name, names)


def test_the_simulation_binaries_load_without_matplotlib():
    code = (
        "import sys\nfrom tests import binaries\n"  # each with its own flags
        + "".join(f"binaries.load({name!r})\n" for name in SIMULATION_BINARIES)
        + "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_a_missing_report_extra_is_one_line_naming_the_install(monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name)
    )
    with pytest.raises(SystemExit) as ended:
        cli.need_report_extra("batch")
    assert ended.value.code == 2
    assert capsys.readouterr().err == (
        "batch: error: matplotlib missing: figures, tables and significance tests need the "
        'report extra: pip install -e ".[report]"\n'
    )
    cli.need_report_extra("unlearning", ("scipy",))  # present: nothing happens
