"""The run catalogue: every run of the papers' figures, tables and claims, one module per
paper (fpdgd, thesis: the FOLtR-ES study, noniid, poisoning, unlearning, fedips).

A ``Run`` names its binary and flags, and its label in the paper's words (``Run.label``),
which experiments/lib/paper_figures/ uses for the figures' lines.  A ``Recipe`` is a list
of runs: ``recipes(quick)`` gives the batch recipes, one per figure or table of the papers
(experiments.batch runs them), ``claim_recipes()`` the runs each paper's claims read
(experiments.claims runs them; experiments/lib/claims/ checks them).  No flags are defined
here, so that experiments/batch.py and experiments/report.py can both import it.
"""

from __future__ import annotations

import dataclasses

CLICKS = ("perfect", "navigational", "informational")


@dataclasses.dataclass(frozen=True)
class Run:
    """One invocation of a binary: ``python -m experiments.<binary> <flags>``."""

    name: str  # folder under the recipe's folder
    binary: str
    flags: tuple  # ("--name=value", ...)
    own_data: bool = False  # ignores --data_root (non-IID Type 1: intents, not a LETOR fold)
    # The run in the paper's words (e.g. "FOLtR-ES p = 0.25", "|C| = 10"): the figures'
    # line labels (experiments/lib/paper_figures/); a grid run's cells add their own part.
    label: str = ""
    # evaluated every round whatever the claims' --eval_every (a claim reads it at fixed
    # interaction counts)
    every_round: bool = False

    def variant(self, name: str, *more: str, **replaced) -> Run:
        """This run as ``name`` with the flags ``replaced`` (given last) and ``more`` after
        them; the rest the same."""
        kept = tuple(f for f in self.flags if f.split("=")[0].lstrip("-") not in replaced)
        return dataclasses.replace(self, name=name, flags=kept + opts(**replaced) + more)


@dataclasses.dataclass(frozen=True)
class Recipe:
    name: str
    title: str
    runs: tuple
    baseline: str = ""  # report's --baseline
    paired: bool = False


def opts(**values) -> tuple:
    """("--name=value", ...) of the keyword arguments, in their order."""
    return tuple(f"--{k}={v}" for k, v in values.items())


def ten_thousand_rounds(quick: bool) -> tuple:
    """--rounds and --chunk_rounds of the 10,000 rounds of the poisoning, unlearning and
    non-IID papers (quick: 40 rounds in chunks of 20)."""
    return opts(rounds=40, chunk_rounds=20) if quick else opts(rounds=10_000, chunk_rounds=500)


# FOLtR-ES as its public code runs it: its data loader reads the LETOR files as they are, so on
# MSLR-WEB10K (whose files are not normalised) it trains and scores on raw features, while the
# FPDGD code normalises per query.  The FOLtR-ES runs of the recipes and claims do the same.
RAW = ("--nonormalise",)


_USER_RECIPES = []  # recipes(quick) functions of user code (``register``)


def register(make):
    """Adds the recipes of user code (a ``--plugin``): ``make(quick)`` returns a list of
    Recipe, listed and run with the built-in ones.  Usable as a decorator."""
    if make not in _USER_RECIPES:
        _USER_RECIPES.append(make)
    return make


def recipes(quick: bool) -> dict:
    """Every batch recipe (the papers', then those of user code); ``quick`` shrinks rounds,
    clients and runs."""
    out = []
    for make in (*(paper.recipes for paper in PAPERS), *_USER_RECIPES):
        out.extend(make(quick))
    return {recipe.name: recipe for recipe in out}


def claim_recipes() -> list:
    """Each paper's claim runs (and its claims' diagnosis runs), one Recipe a paper."""
    return [paper.CLAIM_RUNS for paper in PAPERS]


# the papers' modules use the names above
from experiments.lib.recipes import fedips, fpdgd, noniid, poisoning, thesis, unlearning

PAPERS = (thesis, fpdgd, noniid, poisoning, unlearning, fedips)  # the batch's order
