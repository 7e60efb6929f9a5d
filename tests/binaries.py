"""Running the binaries as a user does, in a subprocess (``run``), or their ``main`` in this
process (``call``) where the process boundary is not what a test is about.

``run`` starts ``python -m experiments.<module>``: a JAX import, and an XLA compilation of
every program the binary runs (the session's persistent compilation cache, set up in
conftest, spares a later process some of it).  ``call`` gives the same three things back
(exit status, stdout, stderr) from the binary's ``main`` after absl has parsed the flags,
and the compiled programs stay in this process's memory: a second call with the same
shapes compiles nothing.  It is for what a binary computes, writes and refuses; what only
a process shows stays with ``run``: a flag absl itself rejects, a second process, a
killed run, several devices (``XLA_FLAGS``), the exact bits of a user's compilation (the
pytest process compiles at XLA's optimisation level 0, see conftest).
"""

import atexit
import contextlib
import importlib
import io
import json
import os
import pathlib
import subprocess
import sys
import traceback
import warnings

from absl import flags
from absl import logging as absl_logging

from tests.sample_data import REPO_ROOT

SCHEMA = json.loads((REPO_ROOT / "foltr_jax" / "engine" / "results.schema.json").read_text())


def check_results_files(args) -> None:
    """Every results.json under the run's --output_dir validates against the results
    format's schema (foltr_jax/engine/results.schema.json): each test that runs a binary
    checks its output's structure too."""
    import jsonschema

    outputs = [a.split("=", 1)[1] for a in args if str(a).startswith("--output_dir=")]
    for output in outputs:
        for path in pathlib.Path(output).rglob("results.json"):
            jsonschema.validate(json.loads(path.read_text()), SCHEMA)


TIMINGS = {"seconds", "compile_seconds", "interactions_per_second", "versions", "timings"}


def run(module, *args, cache_dir=None, env=None, timeout=300):
    """``python -m experiments.<module> args`` from the repository root, JAX on the CPU,
    with its own cache folder when ``cache_dir`` is given; ``env`` adds variables."""
    environment = {**os.environ, **(env or {}), "JAX_PLATFORMS": "cpu"}
    if cache_dir is not None:
        environment["FOLTR_JAX_CACHE"] = str(cache_dir)
    done = subprocess.run(
        [sys.executable, "-m", f"experiments.{module}", *args],
        cwd=REPO_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode == 0:
        check_results_files(args)
    return done


# The binary whose flags absl holds now: every binary defines the shared flags again when
# it is imported, so only one can be loaded at a time.
_loaded = {"module": None}
# Modules whose functions define flags for the binary that calls them: kept imported.
SHARED_DEFINERS = ("experiments.lib.shared_flags", "experiments.lib.config_flags")


def _binary(module: str):
    """``experiments.<module>``, imported with its flags alone defined in absl's FLAGS: the
    flags any ``experiments`` module defined before (another binary's, or those of a binary
    a test module imported for its functions) are removed first, and that module is
    imported afresh by whoever imports it next."""
    name = f"experiments.{module}"
    if _loaded["module"] == name:
        return sys.modules[name]
    definers = [m for m in flags.FLAGS.flags_by_module_dict() if m.startswith("experiments.")]
    for definer in definers:
        for flag in list(flags.FLAGS.flags_by_module_dict().get(definer, [])):
            if flag.name in flags.FLAGS:
                delattr(flags.FLAGS, flag.name)
        if definer not in SHARED_DEFINERS:
            sys.modules.pop(definer, None)
    sys.modules.pop(name, None)
    _loaded["module"] = None
    binary = importlib.import_module(name)
    _loaded["module"] = name
    return binary


load = _binary  # a test that imports a binary for its functions: load("claims")


class Called:
    """What ``call`` gives back: the fields of a finished ``subprocess.run``."""

    def __init__(self, args, returncode, stdout, stderr):
        self.args, self.returncode, self.stdout, self.stderr = args, returncode, stdout, stderr


class _AtExit:
    """``atexit`` for experiments.lib.output during a call: what a run registers to happen at
    its process's exit (releasing its output folder) happens when ``main`` returns."""

    def __init__(self):
        self.callbacks = []

    def register(self, function, *args, **kwargs):
        self.callbacks.append((function, args, kwargs))
        return function

    def unregister(self, function):
        self.callbacks = [c for c in self.callbacks if c[0] is not function]

    def run(self):
        while self.callbacks:
            function, args, kwargs = self.callbacks.pop()
            function(*args, **kwargs)


def _show_warning(message, category, filename, lineno, file=None, line=None):
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def call(module, *args, cache_dir=None, env=None):
    """``python -m experiments.<module> args`` as ``run`` gives it, but ``main`` runs in this
    process: absl parses ``args`` into the binary's flags, ``main`` runs with sys.stdout and
    sys.stderr captured and Python's default warning filters, the exit handlers it registers
    run when it returns, and a traceback is printed as the interpreter would (status 1).
    ``env`` sets variables for the call (not ``XLA_FLAGS``: the backend has read it)."""
    env = dict(env or {})
    assert "XLA_FLAGS" not in env, "XLA_FLAGS needs a process of its own: use run()"
    if cache_dir is not None:
        env["FOLTR_JAX_CACHE"] = str(cache_dir)
    binary = _binary(module)
    from experiments.lib import cli
    from foltr_jax.engine import results_files

    argv = [str(REPO_ROOT / "experiments" / f"{module}.py"), *args]
    stdout, stderr = io.StringIO(), io.StringIO()
    at_exit = _AtExit()
    saved_env = {k: os.environ.get(k) for k in env}
    saved = (sys.argv, warnings.formatwarning, absl_logging.get_verbosity())
    progress_defaults = cli.ProgressLog.__init__.__defaults__
    returncode = 0
    try:
        os.environ.update(env)
        sys.argv = argv
        results_files.atexit = at_exit
        cli.ProgressLog.__init__.__defaults__ = (stderr,)  # its stream is bound at import
        flags.FLAGS.unparse_flags()
        parsed = flags.FLAGS(argv)  # a flag absl rejects raises here: such tests use run()
        with (
            contextlib.redirect_stdout(stdout),
            contextlib.redirect_stderr(stderr),
            warnings.catch_warnings(),
        ):
            warnings.resetwarnings()  # Python's defaults, not pytest's
            for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning):
                warnings.simplefilter("ignore", category)
            warnings.simplefilter("ignore", ResourceWarning)
            warnings.showwarning = _show_warning
            try:
                try:
                    binary.main(parsed)
                finally:
                    at_exit.run()
            except SystemExit as done:
                if done.code is None or isinstance(done.code, int):
                    returncode = done.code or 0
                else:
                    print(done.code, file=sys.stderr)
                    returncode = 1
            except Exception:  # noqa: BLE001  (as the interpreter ends: a traceback, status 1)
                traceback.print_exc()
                returncode = 1
    finally:
        sys.argv, warnings.formatwarning, verbosity = saved
        absl_logging.set_verbosity(verbosity)
        results_files.atexit = atexit
        cli.ProgressLog.__init__.__defaults__ = progress_defaults
        flags.FLAGS.unparse_flags()
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    if returncode == 0:
        check_results_files(args)
    return Called(argv, returncode, stdout.getvalue(), stderr.getvalue())


def without_timings(results: dict) -> dict:
    """A results file without the fields that differ between identical runs."""
    return {k: v for k, v in results.items() if k not in TIMINGS}


def run_twice(module, *args, tmp_path, launch=run):
    """Runs a binary twice, into tmp_path/a and tmp_path/b (``launch``: ``run`` or ``call``).

    Returns (results a, results b, the second run); both runs must succeed and
    name their results file.
    """
    outputs = []
    for name in ("a", "b"):
        output = tmp_path / name
        result = launch(module, *args, f"--output_dir={output}", cache_dir=tmp_path / "cache")
        assert result.returncode == 0, result.stderr
        assert str(output / "results.json") in result.stdout
        outputs.append(json.loads((output / "results.json").read_text()))
    return outputs[0], outputs[1], result
