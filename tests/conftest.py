"""Test-session setup: one persistent JAX compilation cache for the binaries' processes.

The binaries' tests start many Python processes that compile the same programs
(determinism checks run a binary twice, the resume tests three times, the golden runs
every session); one on-disk folder for them all, kept between sessions
(.pytest_cache/foltr_jax_compile_cache, emptied when it passes 2 GB), lets a process
read back what an earlier one compiled.  Results do not depend on it.  A cache the
user set (FOLTR_JAX_COMPILE_CACHE, JAX_COMPILATION_CACHE_DIR) is used instead.  The
pytest process itself never uses it: it gains nothing from it (its programs stay in
memory), and once, late in a full run, XLA aborted the process while serialising an
executable for that cache.

Two tiers: ``python -m pytest`` runs the tests not marked ``slow`` (pyproject's addopts
deselect them) and ``python -m pytest -m slow`` the others: golden runs, binaries end to
end in their own processes, several processes, the papers' orderings.  CI runs the fast
tier and, of the slow tier, the golden runs (README).
When the MSLR excerpt is missing, the session fetches it first (sample_data.ensure).
"""

import os
import pathlib
import resource
import shutil

import jax
import pytest

PROGRAMS = pathlib.Path(__file__).resolve().parents[1] / ".pytest_cache" / "foltr_jax_compile_cache"
PROGRAMS_MAX_BYTES = 2 << 30
if not (os.environ.get("FOLTR_JAX_COMPILE_CACHE") or os.environ.get("JAX_COMPILATION_CACHE_DIR")):
    os.environ["FOLTR_JAX_COMPILE_CACHE"] = str(PROGRAMS)  # the binaries' processes inherit it
# Never in this process, whatever turns the cache on here: a full run once ended in a
# segmentation fault inside XLA while this process compiled and serialised for the cache.
jax.config.update("jax_enable_compilation_cache", False)
# This process compiles hundreds of small programs whose run time is negligible: XLA's CPU
# backend at optimisation level 0 compiles them about a third faster, with the same
# semantics (no fast-math; the last bits of transcendental functions may differ).  Only
# this process: the binaries the tests start (golden runs included) compile as users do,
# so XLA_FLAGS is restored once the backend has read it.
_user_xla_flags = os.environ.get("XLA_FLAGS")
os.environ["XLA_FLAGS"] = f"{_user_xla_flags or ''} --xla_backend_optimization_level=0".strip()
jax.devices()  # the CPU backend reads XLA_FLAGS here, once
if _user_xla_flags is None:
    del os.environ["XLA_FLAGS"]
else:
    os.environ["XLA_FLAGS"] = _user_xla_flags
# Full runs segfaulted twice inside XLA's compiler late in the session (the same FedPer test
# passes alone): give the main thread all the stack it may have, and drop each module's
# compiled programs before the next module (below).
_soft, _hard = resource.getrlimit(resource.RLIMIT_STACK)
if _soft != resource.RLIM_INFINITY and (_hard == resource.RLIM_INFINITY or _soft < _hard):
    resource.setrlimit(resource.RLIMIT_STACK, (_hard, _hard))


@pytest.fixture(autouse=True, scope="module")
def _fresh_jax_caches():
    yield
    jax.clear_caches()


@pytest.fixture(autouse=True, scope="module")
def _registrations_end_with_their_module():
    """Parts a test module registers (an aggregator, attack, click model, ranker or method,
    as a user's plugin would) are dropped after it, so no later module in the same worker
    sees them: the flag pages' help text, for one, lists the built-in parts only."""
    from foltr_jax import engine
    from foltr_jax.core import click_models, rankers
    from foltr_jax.server import aggregators, attacks

    registries = (
        aggregators._REGISTRY,
        attacks._REGISTRY,
        click_models._REGISTRY,
        rankers._REGISTRY,
        engine.METHODS,
    )
    before = [dict(registry._entries) for registry in registries]
    yield
    for registry, entries in zip(registries, before):
        registry._entries.clear()
        registry._entries.update(entries)


@pytest.fixture(scope="module")
def synthetic_split():
    """A small synthetic train/test split (seed 3) that the federation-level tests share."""
    from foltr_jax import data

    return data.synthetic_train_test(
        3, n_train_queries=40, n_test_queries=20, n_features=8, mean_docs_per_query=20
    )


def _bound_programs() -> None:
    """Empties the session's folder of compiled programs when it holds more than
    PROGRAMS_MAX_BYTES (nothing in it is ever evicted otherwise)."""
    if os.environ.get("FOLTR_JAX_COMPILE_CACHE") != str(PROGRAMS) or not PROGRAMS.is_dir():
        return
    size = sum(p.stat().st_size for p in PROGRAMS.rglob("*") if p.is_file())
    if size > PROGRAMS_MAX_BYTES:
        shutil.rmtree(PROGRAMS, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist starts its workers
def pytest_sessionstart(session):
    if hasattr(session.config, "workerinput"):
        return  # a worker: the process that started it has fetched what could be fetched
    _bound_programs()
    from tests import sample_data

    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    sample_data.ensure(say=reporter.write_line if reporter else print)
