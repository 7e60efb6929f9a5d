"""Every command a binary's docstring shows (``python -m experiments.<binary> ...``) is read
by that binary's flags: a renamed or removed flag cannot linger in the documentation."""

import ast
import re
import sys

import pytest
from absl import flags

from tests import binaries
from tests.sample_data import REPO_ROOT


def documented_commands() -> list:
    """(file, binary, [flag arguments]) of every command in the binaries' docstrings: line
    continuations joined, comments and [optional] brackets dropped."""
    found = []
    for path in sorted((REPO_ROOT / "experiments").glob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        for match in re.finditer(
            r"python -m experiments\.(\w+)([^\n`]*)", doc.replace("\\\n", " ")
        ):
            text = match.group(2).split("#", 1)[0].replace("[", " ").replace("]", " ")
            args = [a for a in text.split() if a.startswith("-")]
            found.append((path.name, match.group(1), args))
    return found


COMMANDS = documented_commands()


def isolate_plugins(args, monkeypatch) -> None:
    """The command's plugin files are imported afresh, registering their names again: a
    test module may have imported the same file under its own name (test_add_a_method's
    federated_dbgd, at collection), which would make the plugin's registration a second,
    refused one.  Both are restored after the test."""
    import hashlib
    import os

    from foltr_jax import engine

    plugins = [a.split("=", 1)[1] for a in args if a.startswith("--plugin=")]
    for plugin in plugins:
        path = os.path.abspath(plugin)
        name = "foltr_jax_plugin_" + hashlib.sha256(path.encode()).hexdigest()[:16]
        monkeypatch.delitem(sys.modules, name, raising=False)
    method = dict(a.split("=", 1) for a in args if a.startswith("--method=")).get("--method")
    if plugins and method in engine.METHODS:  # the plugin's own method, registered elsewhere
        monkeypatch.delitem(engine.METHODS._entries, method)


def test_the_docstrings_show_commands_of_every_kind():
    binaries_shown = {binary for _, binary, _ in COMMANDS}
    assert {"batch", "fpdgd", "method", "paper_budget", "noniid", "report"} <= binaries_shown
    assert len(COMMANDS) >= 40


@pytest.mark.parametrize(
    "source, binary, args", COMMANDS, ids=[f"{s}:{' '.join(a)[:60]}" for s, _, a in COMMANDS]
)
def test_a_documented_command_is_read_by_its_binary(source, binary, args, monkeypatch):
    if binary == "method":  # its flags are the chosen method's: read from the command line
        monkeypatch.setattr(sys, "argv", ["method", *args])
        binaries._loaded["module"] = None
        isolate_plugins(args, monkeypatch)
    module = binaries.load(binary)
    if binary == "method":
        binaries._loaded["module"] = None  # the next command chooses its own method
    assert module is not None
    try:
        flags.FLAGS(["prog", *(a for a in args if a != "--help")])
    except flags.Error as error:
        pytest.fail(f"{source}: python -m experiments.{binary} {' '.join(args)}: {error}")
    finally:
        flags.FLAGS.unparse_flags()
