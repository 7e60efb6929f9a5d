"""Named parts chosen by a setting: one registry per kind (aggregator, attack, click model,
ranker).

A part is one function and one registration; the names a config accepts, the error for an
unknown name and the flags' help text all come from its registry, so a part registered
outside the package is accepted everywhere a built-in one is.
"""

from __future__ import annotations

import difflib
from typing import Generic, Protocol, TypeVar


class _Summarised(Protocol):
    @property
    def summary(self) -> str: ...  # one line for --help


Entry = TypeVar("Entry", bound=_Summarised)  # a NamedTuple with a ``summary`` field


class PartError(ValueError):
    """A registered part returned what its kind cannot use (a wrong shape or dtype): the
    message names the part and what was expected.  Raised while the round is traced, before
    it runs; the binaries print it as one line."""


def did_you_mean(value, choices) -> str:
    """``" (did you mean 'krum'?)"`` when ``value`` (a string) is close to one of
    ``choices`` (a misspelling, as absl suggests for a flag's name), else ``""``."""
    if not isinstance(value, str):
        return ""
    close = difflib.get_close_matches(value, [str(c) for c in choices], n=1, cutoff=0.6)
    if not close:
        lowered = {str(c).lower(): str(c) for c in choices}
        close = [lowered[value.lower()]] if value.lower() in lowered else []
    return f" (did you mean {close[0]!r}?)" if close else ""


def one_of(choices, value) -> str:
    """``"must be one of (...), got 'x'"`` and, for a near miss, which one was meant."""
    return f"must be one of {tuple(choices)}, got {value!r}{did_you_mean(value, choices)}"


_EVERY: list = []  # every Registry made, in order (``registries``)


def registries() -> tuple:
    """Every registry (aggregators, attacks, click models, rankers, methods): what a
    plugin adds is found by comparing their names before and after it is imported."""
    return tuple(_EVERY)


class Registry(Generic[Entry]):
    """Entries of one kind by name, in registration order."""

    def __init__(self, kind: str):
        self.kind = kind  # 'aggregator', 'attack', ...: named in errors
        self._entries: dict[str, Entry] = {}
        _EVERY.append(self)

    def add(self, name: str, entry: Entry) -> Entry:
        """Registers ``entry`` as ``name``; registering the same entry again is a no-op, a
        different one under a taken name is refused."""
        if not name or not isinstance(name, str):
            raise ValueError(f"a {self.kind} needs a non-empty name, got {name!r}")
        if name in self._entries and self._entries[name] != entry:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = entry
        return entry

    def get(self, name: str) -> Entry:
        if name not in self._entries:
            raise ValueError(
                f"unknown {self.kind} {name!r}{did_you_mean(name, self.names())}; choose one "
                f"of {self.names()}"
            )
        return self._entries[name]

    def names(self) -> tuple:
        """Every registered name, the built-in ones first."""
        return tuple(self._entries)

    def __contains__(self, name) -> bool:
        return name in self._entries

    def summary(self, name: str) -> str:
        """The one-line summary ``name`` was registered with."""
        return self.get(name).summary

    def help_text(self) -> str:
        """``name (summary) | ...`` for a flag's help."""
        return " | ".join(f"{name} ({entry.summary})" for name, entry in self._entries.items())
