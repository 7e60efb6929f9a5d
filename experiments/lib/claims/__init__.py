"""The papers' claims, one module per paper, and the machinery that checks them
(experiments.claims is the binary).  ``CLAIMS`` lists every claim; the runs they read are
the run catalogue's (``experiments.lib.recipes``: each paper's ``CLAIM_RUNS``), ``RUNS``
by name."""

from __future__ import annotations

from experiments.lib import recipes
from experiments.lib.claims import fedips, fpdgd, noniid, poisoning, thesis, unlearning
from experiments.lib.cli import UserError

PAPERS = (fpdgd, thesis, noniid, poisoning, unlearning, fedips)
CLAIMS = [claim for paper in PAPERS for claim in paper.CLAIMS]
RUNS = {run.name: run for recipe in recipes.claim_recipes() for run in recipe.runs}


def select(names, reduced: bool) -> list:
    """The claims named (all of them when none is), the reduced set's only with ``reduced``;
    UserError naming --claims for a name that is no claim's."""
    by_key = {c.key: c for c in CLAIMS}
    unknown = [n for n in names if n not in by_key]
    if unknown:
        raise UserError(f"--claims: unknown claim(s) {unknown}; see --list")
    chosen = [by_key[n] for n in names] if names else list(CLAIMS)
    return [c for c in chosen if c.reduced] if reduced else chosen


def run_names(claims) -> list:
    """The runs ``claims`` read, each once, in their order."""
    return list(dict.fromkeys(name for c in claims for name in c.runs))


def by_module() -> dict:
    """{claims module name: its claims' keys} (the pages show each module's claims)."""
    return {p.__name__.rsplit(".", 1)[-1]: [c.key for c in p.CLAIMS] for p in PAPERS}


def _check_catalogue() -> None:
    for what, names in (
        ("claims", [c.key for c in CLAIMS]),
        ("claim runs", [run.name for recipe in recipes.claim_recipes() for run in recipe.runs]),
    ):
        duplicate = {n for n in names if names.count(n) > 1}
        if duplicate:
            raise ValueError(f"{what} defined twice: {sorted(duplicate)}")
    for claim in CLAIMS:
        runs = claim.runs + (claim.diagnosis.runs if claim.diagnosis else ())
        missing = [name for name in runs if name not in RUNS]
        if missing:
            raise ValueError(f"claim {claim.key} reads runs that are not defined: {missing}")


_check_catalogue()
