"""Print, as JSON, every flag each named binary defines (``python flag_dump.py fpdgd ...``),
or the recipes (``python flag_dump.py --catalogue``).

Run by ``flagdoc`` in a process of its own (the binaries define their flags in absl's
global FLAGS when imported, and several of them share flag names).  For each binary the
flags any earlier one defined are removed and the ``experiments`` modules imported afresh,
so each list is exactly what ``python -m experiments.<name> --helpfull`` shows, less
absl's own flags.
"""

import importlib
import json
import sys

from absl import flags


def _forget_experiments():
    for module, defined in list(flags.FLAGS.flags_by_module_dict().items()):
        if module.startswith("absl"):
            continue
        for flag in list(defined):
            if flag.name in flags.FLAGS:
                delattr(flags.FLAGS, flag.name)
    for name in list(sys.modules):
        if name == "experiments" or name.startswith("experiments."):
            del sys.modules[name]


def _describe(flag) -> dict:
    choices = getattr(flag.parser, "enum_values", None)
    return {
        "name": flag.name,
        "short_name": flag.short_name,
        "type": flag.flag_type(),
        "default": flag.default_as_str,
        "help": flag.help or "",
        "choices": list(choices) if choices else None,
        "boolean": bool(flag.boolean),
    }


def dump(binaries: list) -> dict:
    out = {}
    for binary in binaries:
        _forget_experiments()
        module = importlib.import_module(f"experiments.{binary}")
        groups = []
        for definer, defined in flags.FLAGS.flags_by_module_dict().items():
            if definer.startswith("absl"):
                continue
            seen = []
            for flag in defined:
                if flag.name not in [f["name"] for f in seen]:
                    seen.append(_describe(flag))
            if seen:
                groups.append({"module": definer, "flags": seen})
        own = f"experiments.{binary}"
        groups.sort(key=lambda g: (g["module"] != own, g["module"]))
        out[binary] = {"doc": module.__doc__ or "", "groups": groups}
    return out


def catalogue() -> dict:
    """The batch recipes (experiments/lib/recipes/, full size), for the papers' pages."""
    _forget_experiments()
    recipes = importlib.import_module("experiments.lib.recipes")
    return {
        "recipes": [
            {
                "name": r.name,
                "title": r.title,
                "runs": [
                    {"name": run.name, "binary": run.binary, "flags": list(run.flags),
                     "label": run.label}
                    for run in r.runs
                ],
            }
            for r in recipes.recipes(quick=False).values()
        ],
    }


if __name__ == "__main__":
    if sys.argv[1:] == ["--catalogue"]:
        json.dump(catalogue(), sys.stdout)
    else:
        json.dump(dump(sys.argv[1:]), sys.stdout)
