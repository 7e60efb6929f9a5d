"""results.json as the binaries write it: ``foltr_jax.engine.results_files``'s structure
(its docstring describes it) with the provenance of the binary's run (``provenance.record``:
its command line, flags, code and data files) and its --normalise."""

from __future__ import annotations

from absl import flags

from experiments.lib import provenance
from foltr_jax.engine import results_files

FLAGS = flags.FLAGS


def document(
    method: str, config: dict, data: dict, cells: list,
    metric: str = results_files.HEADLINE_METRIC, **rest,
) -> dict:  # fmt: skip
    """``results_files.document`` with this run's provenance."""
    return results_files.document(
        method, config, data, cells, metric, provenance=provenance.record(), **rest
    )


def results_file(method, config, result, train, test, source, slots=slice(None), log=None) -> dict:
    """``results_files.results_file`` of a method's binary (every method's, and
    ``experiments.method``): its --normalise and this run's provenance."""
    return results_files.results_file(
        method, config, result, train, test, source, slots, log,
        normalise=FLAGS.normalise, provenance=provenance.record(),
    )  # fmt: skip
