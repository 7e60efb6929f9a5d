"""User code on the command line: ``--plugin=MODULE_OR_FILE`` (repeatable).

A plugin is imported before the binary reads its settings, so whatever it registers (an
aggregator, attack, click model or ranker in ``foltr_jax``'s registries, a recipe in
``experiments.lib.recipes``) is a name like the built-in ones.  Loading code is the user's
explicit act: only the command line names a plugin, never a results or cache folder; a
batch passes its plugins on to every run it starts.

What was loaded is recorded (``loaded``: each plugin's file and the SHA-256 of its source):
results.json names it, and the code version of checkpoints and finished parts covers it
(``foltr_jax.core.files.set_user_code``), so that a run killed and started again after a plugin
was edited starts over instead of mixing the two versions' rounds.  A module plugin is
fingerprinted by its module's file (a package: its ``__init__.py``; what it imports from
elsewhere is not covered).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
import traceback

from experiments.lib.cli import UserError
from foltr_jax.core import files

# What ``load`` imported last: [{'plugin', 'path', 'sha256'}] (``loaded``).
_LOADED: list = []
# What each plugin registered: [(plugin, {kind: [(name, summary)]})] (``registered``), and
# by its file or module (a plugin loaded again registers nothing new: its first record).
_REGISTERED: list = []
_ADDED_BY: dict = {}


def _names() -> dict:
    """{kind: {name: summary}} of every registry, and the batch recipes {name: title}."""
    from experiments.lib import recipes
    from foltr_jax.core.registry import registries

    found = {r.kind: {n: r.get(n).summary for n in r.names()} for r in registries()}
    try:
        found["recipe"] = {n: r.title for n, r in recipes.recipes(quick=False).items()}
    except Exception:  # noqa: BLE001  (a user's recipe that fails is the batch's to report)
        found["recipe"] = {}
    return found


def registered() -> list:
    """What each plugin ``load`` imported registered: [(plugin, {kind: [(name, summary)]})]
    (aggregators, attacks, click models, rankers, methods, recipes), for --help."""
    return [(plugin, {k: list(v) for k, v in kinds.items()}) for plugin, kinds in _REGISTERED]


def is_file(plugin: str) -> bool:
    return plugin.endswith(".py") or os.sep in plugin


def as_argument(plugin: str) -> str:
    """The plugin as another process (a batch's run) names it: files by absolute path."""
    return os.path.abspath(plugin) if is_file(plugin) else plugin


def _import_file(path: str):
    if not os.path.isfile(path):
        raise UserError(f"--plugin: {path}: no such file")
    # One module per file, whatever the working folder: loading it twice registers nothing twice.
    name = "foltr_jax_plugin_" + hashlib.sha256(path.encode()).hexdigest()[:16]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load(plugins) -> list:
    """Imports every plugin (a module name, or a .py file); a plugin that fails to import
    is a UserError naming it and where its code failed."""
    modules, loaded = [], []
    _LOADED.clear()
    _REGISTERED.clear()
    files.set_user_code({})
    before = _names() if plugins else {}
    for plugin in plugins:
        try:
            if is_file(plugin):
                path = os.path.abspath(plugin)
                if not os.path.isfile(path):  # never opened: a folder, a FIFO
                    raise UserError(f"--plugin: {path}: no such file")
                source = _source_digest(path)  # what is executed, read before it runs
                modules.append(_import_file(path))
            else:
                modules.append(importlib.import_module(plugin))
                path = getattr(modules[-1], "__file__", None)
                source = _source_digest(path) if path else None
        except UserError:
            raise
        except SystemExit as error:  # the program's exit is not a plugin's to decide
            raise UserError(
                f"--plugin: {plugin}: called sys.exit({error.code!r}) while imported"
            ) from None
        except Exception as error:  # noqa: BLE001  (the user's code: say where it failed)
            raise UserError(f"--plugin: {plugin}: {where_it_failed(error)}") from None
        loaded.append({"plugin": plugin, "path": path, "sha256": source})
        after = _names()
        added = {
            kind: [(n, s) for n, s in names.items() if n not in before.get(kind, {})]
            for kind, names in after.items()
        }
        key = (path or plugin, source)
        if any(added.values()) or key not in _ADDED_BY:
            _ADDED_BY[key] = {kind: found for kind, found in added.items() if found}
        _REGISTERED.append((plugin, _ADDED_BY[key]))
        before = after
    _LOADED[:] = loaded
    files.set_user_code({p["path"] or p["plugin"]: p["sha256"] or "" for p in loaded})
    return modules


def loaded() -> list:
    """The plugins ``load`` imported: [{'plugin': as named, 'path': its file (None when it
    has none), 'sha256': of the file's bytes}], in order."""
    return [dict(p) for p in _LOADED]


def _source_digest(path: str) -> str | None:
    """SHA-256 of the file at ``path`` (None when it cannot be read)."""
    try:
        with open(path, "rb") as stream:
            return hashlib.sha256(stream.read()).hexdigest()
    except (OSError, ValueError):
        return None


def where_it_failed(error: BaseException) -> str:
    """'Type: message (file:line)' of an error raised in user code: its innermost frame."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(error).__name__}: {error}{where}"
