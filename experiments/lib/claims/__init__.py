"""The papers' claims, one module per paper, and the machinery that checks them
(experiments.claims is the binary).  ``CLAIMS`` lists every claim, ``RUNS`` every run they
read (by name), ``EVERY_ROUND`` the runs evaluated every round whatever --eval_every."""

from __future__ import annotations

from experiments.lib.claims import fedips, fpdgd, noniid, poisoning, thesis, unlearning

PAPERS = (fpdgd, thesis, noniid, poisoning, unlearning, fedips)
CLAIMS = [claim for paper in PAPERS for claim in paper.CLAIMS]
RUNS = {run.name: run for paper in PAPERS for run in paper.RUNS}
EVERY_ROUND = tuple(name for paper in PAPERS for name in getattr(paper, "EVERY_ROUND", ()))


def _check_catalogue() -> None:
    keys = [c.key for c in CLAIMS]
    duplicate = {k for k in keys if keys.count(k) > 1}
    if duplicate:
        raise ValueError(f"claims defined twice: {sorted(duplicate)}")
    for claim in CLAIMS:
        runs = claim.runs + (claim.diagnosis.runs if claim.diagnosis else ())
        missing = [name for name in runs if name not in RUNS]
        if missing:
            raise ValueError(f"claim {claim.key} reads runs that are not defined: {missing}")


_check_catalogue()
