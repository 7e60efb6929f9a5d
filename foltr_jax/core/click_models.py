"""Click models as pure functions ``(key, model, labels_in_displayed_order) -> clicks``.

CCM/SDBN (thesis Tables 2.1-2.2; FPDGD paper Table 1; poisoning paper Table 1):
the user scans top to bottom, clicks a document with P(click | rel) and, after a
click, stops with P(stop | click, rel).  PBM (thesis §4.5.1; public code): the
document at rank i (1-based) is clicked with P(click | rel) · (1 / i)^η, no stopping.

Both are one parameterisation: a :class:`ClickModel` holds per-grade arrays and
an exponent η, so every client in a vmapped step may carry its own model.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from foltr_jax.core.registry import Registry, did_you_mean

# P(click | rel), P(stop | click, rel) per grade, for 5-grade, 3-grade and binary labels.
# Binary labels (the intent-change collection, thesis §4.2) have their own tables in the
# public FPDGD code; 'poison' there is the perfect table reversed, as for 3 and 5 grades.
_CCM_TABLES: dict[int, dict[str, tuple[tuple[float, ...], tuple[float, ...]]]] = {
    5: {
        "perfect": ((0.0, 0.2, 0.4, 0.8, 1.0), (0.0, 0.0, 0.0, 0.0, 0.0)),
        "navigational": ((0.05, 0.3, 0.5, 0.7, 0.95), (0.2, 0.3, 0.5, 0.7, 0.9)),
        "informational": ((0.4, 0.6, 0.7, 0.8, 0.9), (0.1, 0.2, 0.3, 0.4, 0.5)),
        "poison": ((1.0, 0.8, 0.4, 0.2, 0.0), (0.0, 0.0, 0.0, 0.0, 0.0)),
    },
    3: {
        "perfect": ((0.0, 0.5, 1.0), (0.0, 0.0, 0.0)),
        "navigational": ((0.05, 0.5, 0.95), (0.2, 0.5, 0.9)),
        "informational": ((0.4, 0.7, 0.9), (0.1, 0.3, 0.5)),
        "poison": ((1.0, 0.5, 0.0), (0.0, 0.0, 0.0)),
    },
    2: {
        "perfect": ((0.0, 1.0), (0.0, 0.0)),
        "navigational": ((0.05, 0.95), (0.2, 0.9)),
        "informational": ((0.3, 0.7), (0.1, 0.5)),
        "poison": ((1.0, 0.0), (0.0, 0.0)),
    },
}
N_GRADES = (2, 3, 5)  # label scales with click tables
CCM_NAMES = ("perfect", "navigational", "informational", "poison")


class ClickModel(NamedTuple):
    """Click model parameters (a pytree of arrays, so it can be stacked per client)."""

    click_prob: jax.Array  # [n_grades] P(click | rel)
    stop_prob: jax.Array  # [n_grades] P(stop | click, rel)
    eta: jax.Array  # [] examination exponent: P(examine rank i) = (1/i)^eta


class Entry(NamedTuple):
    """A registered click model: ``make(n_grades) -> ClickModel``, or for a family named
    ``name:<argument>`` (like 'pbm:1.0') ``make(n_grades, argument: str)``."""

    make: Callable[..., ClickModel]
    summary: str  # one line for --help
    family: bool = False


_REGISTRY: Registry[Entry] = Registry("click model")


def register(name: str, summary: str, make, *, family: bool = False) -> None:
    """Registers a click model under ``name`` (see :class:`Entry`); it can then be named in
    a config, a grid ``Setting`` and the binaries' ``--click_model`` / ``--click_models``.
    The model's arrays are indexed by grade, so ``make`` gets the label scale's grade count."""
    _REGISTRY.add(name, Entry(make, summary, family))


names = _REGISTRY.names  # every registered click model (a family by its prefix), CCM first
help_text = _REGISTRY.help_text


def ccm(name: str, n_grades: int) -> ClickModel:
    """CCM/SDBN instantiation ``name`` for labels with ``n_grades`` grades (2, 3 or 5)."""
    if n_grades not in _CCM_TABLES:
        raise ValueError(f"CCM tables exist for 2-, 3- and 5-grade labels, not {n_grades}")
    if name not in _CCM_TABLES[n_grades]:
        raise ValueError(
            f"unknown click model {name!r}{did_you_mean(name, CCM_NAMES)}; choose one of "
            f"{CCM_NAMES}"
        )
    click, stop = _CCM_TABLES[n_grades][name]
    return ClickModel(
        jnp.asarray(click, jnp.float32), jnp.asarray(stop, jnp.float32), jnp.float32(0.0)
    )


def pbm(eta: float, n_grades: int, relevance: str = "perfect") -> ClickModel:
    """Position-based model: P(click) = P(click | rel) · (1/rank)^eta, never stops.

    P(click | rel) is taken from the CCM instantiation ``relevance`` (the thesis
    does not tabulate it; 'perfect' by default).
    """
    click, _, _ = ccm(relevance, n_grades)
    return ClickModel(click, jnp.zeros_like(click), jnp.float32(eta))


def _pbm_by_argument(n_grades: int, argument: str) -> ClickModel:
    try:
        eta = float(argument)
    except ValueError:
        raise ValueError(f"bad PBM click model 'pbm:{argument}'; expected e.g. 'pbm:1.0'") from None
    if not 0 <= eta < math.inf:
        raise ValueError(f"PBM's η must be finite and at least 0, got 'pbm:{argument}'")
    return pbm(eta, n_grades)


def by_name(name: str, n_grades: int) -> ClickModel:
    """A registered click model by name: 'perfect' | 'navigational' | 'informational' |
    'poison' | 'pbm:<eta>' | any registered with :func:`register`."""
    family, colon, argument = name.partition(":")
    found = _REGISTRY.get(family if colon else name)
    if found.family != bool(colon):
        usage = f"'{family}:<argument>'" if found.family else repr(family)
        raise ValueError(f"bad click model {name!r}; expected {usage}")
    return found.make(n_grades, argument) if colon else found.make(n_grades)


def identity(name: str) -> tuple:
    """What the click model ``name`` is, as a hashable key: its tables and exponent for every
    label scale (``N_GRADES``), so that two spellings of one model ('pbm:1' and 'pbm:1.0')
    are one model.  ValueError for a name that is no click model."""
    key = []
    for n_grades in N_GRADES:
        key += [np.asarray(part).tobytes() for part in by_name(name, n_grades)]
    return tuple(key)


_SUMMARIES = {
    "perfect": "CCM/SDBN: clicks follow relevance, never stops",
    "navigational": "CCM/SDBN: clicks relevant documents, often stops after one",
    "informational": "CCM/SDBN: noisy clicks, seldom stops",
    "poison": "CCM/SDBN: the perfect table reversed, for data poisoning",
}
for _name in CCM_NAMES:
    register(_name, _SUMMARIES[_name], functools.partial(ccm, _name))
register(
    "pbm",
    "pbm:<eta>: position-based, P(click | rel) · (1/rank)^eta",
    _pbm_by_argument,
    family=True,
)


def simulate_clicks(
    key: jax.Array, model: ClickModel, labels: jax.Array, shown: jax.Array
) -> jax.Array:
    """Clicks on a displayed list.

    Args:
        key: PRNG key for this interaction.
        model: click model parameters.
        labels: int [k] relevance labels in displayed order (clipped to the table).
        shown: bool [k] which positions hold a displayed document.
    Returns:
        bool [k] clicks.
    """
    k = labels.shape[0]
    grades = jnp.clip(labels, 0, model.click_prob.shape[0] - 1)
    u_click, u_stop = jax.random.uniform(key, (2, k))
    examine = (1.0 / jnp.arange(1, k + 1, dtype=jnp.float32)) ** model.eta
    clicked = shown & (u_click < model.click_prob[grades] * examine)
    stops_here = clicked & (u_stop < model.stop_prob[grades])
    # The user examines position i only if no stop happened above it.
    stopped_above = jnp.cumsum(stops_here) - stops_here > 0
    return clicked & ~stopped_above


def table_grades(n_grades: int, max_label: int) -> int:
    """The click tables' grade count: ``n_grades``, or inferred from the labels when 0
    (``n_grades_for``); warns when labels above the tables' top grade will be clicked as
    that grade (nDCG still uses the labels themselves)."""
    n = n_grades or n_grades_for(max_label)
    if max_label > n - 1:
        warnings.warn(
            f"labels go up to {max_label} but the click tables have {n} grades: documents "
            f"labelled above {n - 1} are clicked as grade {n - 1}",
            RuntimeWarning,
            stacklevel=2,
        )
    return n


def n_grades_for(max_label: int) -> int:
    """The click-table size for a dataset whose largest label is ``max_label``: binary
    labels (max 1) get the binary tables, max 2 the 3-grade ones, anything larger 5."""
    max_label = int(np.asarray(max_label))
    return 2 if max_label <= 1 else 3 if max_label == 2 else 5
