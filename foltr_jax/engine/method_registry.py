"""Methods by name: ``register_method`` and ``METHODS``, which the method binary
(``python -m experiments.method --method=NAME``) and the docs read."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from foltr_jax.core.registry import Registry


class MethodEntry(NamedTuple):
    """A method a binary runs by name (``python -m experiments.method --method=NAME``)."""

    summary: str  # one line for --help
    config: type  # a frozen dataclass of int, float, str and bool settings (``seed``,
    # ``n_runs``, ``rounds``, ...); a ``validate()`` method, when it has one, raises
    # ConfigError naming the field
    run: Callable  # run(config, train, test, *, progress=None, checkpoint=None) -> RunResult
    internal: tuple = ()  # the config's fields that are not settings on the command line


METHODS: Registry[MethodEntry] = Registry("method")


def register_method(
    name: str, config: type, run: Callable, summary: str, internal: tuple = ()
) -> MethodEntry:
    """Registers a method under ``name``: its config class (one flag per field) and its
    ``run``, usually ``engine.run`` of its ``Method``.  Registered from a ``--plugin``, it
    is a name of ``experiments.method`` and of batch recipes like the built-in ones."""
    return METHODS.add(name, MethodEntry(summary, config, run, tuple(internal)))
