"""Flags, data loading and result files shared by the experiment binaries.

Library code never reads flags: these helpers turn flags into frozen config
dataclasses and datasets, and the binaries pass those down.
"""

from __future__ import annotations

import atexit
import dataclasses
import fcntl
import json
import math
import os
import pathlib
import platform
import resource
import sys
import tempfile
import warnings

import numpy as np
from absl import flags, logging

import foltr_jax
from foltr_jax import aggregators, attacks, data, federation, files, loop
from foltr_jax.config import PRIVACY_NOISE, FederationConfig, centralised, resolve_window_scoring

FLAGS = flags.FLAGS


def define_data_flags():
    flags.DEFINE_string(
        "train_path", "", "LETOR training file; empty: the synthetic default dataset."
    )
    flags.DEFINE_string("test_path", "", "LETOR test file (required with --train_path).")
    flags.DEFINE_string(
        "fold_dir", "", "A FoldN folder with train.txt and test.txt (instead of the paths)."
    )
    flags.DEFINE_bool(
        "normalise", True, "Query-level min-max feature normalisation (the papers' setting)."
    )
    flags.DEFINE_string(
        "cache_dir",
        "",
        "Where parsed datasets are cached; empty: $FOLTR_JAX_CACHE or ~/.cache/foltr_jax.",
    )
    flags.DEFINE_integer("synthetic_queries", 200, "Training queries of the synthetic dataset.")
    flags.DEFINE_integer("synthetic_features", 32, "Features of the synthetic dataset.")
    flags.DEFINE_float(
        "synthetic_docs_per_query", 40.0, "Mean documents per query of the synthetic dataset."
    )
    flags.DEFINE_integer("synthetic_seed", 0, "Seed of the synthetic dataset.")


def define_federation_flags():
    defaults = federation.FederationConfig()
    flags.DEFINE_integer("n_clients", defaults.n_clients, "Clients per round |C|.")
    flags.DEFINE_integer(
        "local_updates", defaults.local_updates, "Local interactions per client per round B."
    )
    flags.DEFINE_integer("rounds", defaults.rounds, "Global updates T.")
    flags.DEFINE_float("learning_rate", defaults.learning_rate, "PDGD learning rate η.")
    flags.DEFINE_string(
        "ranker",
        defaults.ranker,
        "linear | neural (one hidden layer of 64 sigmoid units with biases).",
    )
    flags.DEFINE_string(
        "click_model",
        defaults.click_model,
        "perfect | navigational | informational | poison (CCM/SDBN) or pbm:<eta>.",
    )
    flags.DEFINE_integer(
        "n_grades",
        defaults.n_grades,
        "Relevance grades of the click tables (2, 3 or 5); 0 infers from the labels.",
    )
    flags.DEFINE_integer(
        "n_runs", defaults.n_runs, "Independent repetitions, run together in one program."
    )
    flags.DEFINE_integer(
        "seed", defaults.seed, "Seed of the simulation (rankings, clicks, queries, initial models)."
    )
    flags.DEFINE_integer(
        "chunk_rounds",
        defaults.chunk_rounds,
        "Rounds per compiled chunk (progress is reported between chunks).",
    )
    flags.DEFINE_integer(
        "eval_every",
        defaults.eval_every,
        "Offline metrics (the test split) after rounds K, 2K, ... and the last round only; "
        "results.json's offline curves then list those rounds in offline_rounds. "
        "1: every round. Online metrics are every round's.",
    )
    flags.DEFINE_string(
        "window_scoring",
        defaults.window_scoring,
        "auto: map on a CPU, vmap on an accelerator; map: score each client's candidates in turn "
        "(fast on CPU); vmap: batched (for GPU).",
    )
    flags.DEFINE_float(
        "epsilon", defaults.epsilon, "ε of FPDGD's differential privacy (needs --sensitivity)."
    )
    flags.DEFINE_float(
        "sensitivity", defaults.sensitivity, "Δ of FPDGD's differential privacy; 0 turns it off."
    )
    flags.DEFINE_float(
        "clip_factor",
        defaults.clip_factor,
        "Clip models to clip_factor·Δ after every local update (paper 0.5; public code 1.0).",
    )
    flags.DEFINE_enum(
        "privacy_noise",
        defaults.privacy_noise,
        list(PRIVACY_NOISE),
        "auto: with FedAvg of equal weights and no model attack, draw the average's noise once "
        "per round (the same distribution as the clients' Gamma shares, much cheaper); "
        "per_client: every client always draws its own share (FPDGD Algorithm 3 as written).",
    )
    define_poisoning_flags()
    flags.DEFINE_string(
        "server_optimizer",
        defaults.server_optimizer,
        "Server optimiser on the aggregate (FedOpt): none (the aggregate is the new model, "
        "FPDGD's Algorithm 2) | sgd (θ + η_s·Δ) | momentum (FedAvgM, 0.9) | adam (FedAdam).",
    )
    flags.DEFINE_float(
        "server_learning_rate", defaults.server_learning_rate, "η_s of --server_optimizer."
    )
    flags.DEFINE_integer(
        "client_chunk",
        defaults.client_chunk,
        "Train a round's clients this many at a time (memory follows the chunk); 0: all at once.",
    )
    flags.DEFINE_integer(
        "n_devices", defaults.n_devices, "Shard the clients of a round over this many devices."
    )
    define_distributed_flags()
    flags.DEFINE_bool("centralised", False, "Run the centralised PDGD baseline instead of FPDGD.")
    flags.DEFINE_string(
        "centralised_form",
        "same_budget",
        "same_updates | same_budget | batch: which reading of the FPDGD paper's baseline (§4).",
    )


def define_distributed_flags():
    """--distributed and --distributed_timeout (every binary has them; those that do not run
    over several processes refuse --distributed with ``refuse_distributed``)."""
    flags.DEFINE_bool(
        "distributed",
        False,
        "Run as one of several processes (one per host or GPU): jax.distributed.initialize() "
        "with JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID when set, else the "
        "cluster JAX detects (SLURM, ...); process 0 writes the files. See the README.",
    )
    flags.DEFINE_integer(
        "distributed_timeout",
        300,
        "With --distributed: seconds to wait for the coordinator and every process.",
    )


_CLUSTER_VARIABLES = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")


def start_distributed(program: str) -> None:
    """With --distributed: joins the other processes (``multiprocess.initialize``, from
    the JAX_* variables when set), then checks that every process got the same flags.
    UserError naming the flag or variable otherwise."""
    if not FLAGS.distributed:
        return
    from foltr_jax import multiprocess

    values = {name: os.environ.get(name) or None for name in _CLUSTER_VARIABLES}
    numbers = {}
    for name in _CLUSTER_VARIABLES[1:]:
        if values[name] is not None:
            try:
                numbers[name] = int(values[name])
            except ValueError:
                raise UserError(
                    f"--distributed: {name} must be an integer, got {values[name]!r}"
                ) from None
    try:
        multiprocess.initialize(
            values["JAX_COORDINATOR_ADDRESS"],
            numbers.get("JAX_NUM_PROCESSES"),
            numbers.get("JAX_PROCESS_ID"),
            timeout=FLAGS.distributed_timeout,
            program=program,
        )
        flag_values = {
            name: value
            for name, value in sorted(FLAGS.flag_values_dict().items())
            if name not in _PER_PROCESS_FLAGS
        }
        multiprocess.check_agreement(repr(flag_values), "flags")
    except multiprocess.DistributedError as error:
        raise UserError(f"--distributed: {error}") from None


# Flags that may differ between the processes of one run (absl's own, logging).
_PER_PROCESS_FLAGS = {"logtostderr", "alsologtostderr", "log_dir", "verbosity", "v"}


def refuse_distributed(program: str, what: str) -> None:
    """Ends a binary that does not run over several processes with one line when
    --distributed is given."""
    if FLAGS.distributed:
        fail(
            program,
            f"--distributed: {what} does not run over several processes (only "
            "experiments.fpdgd and experiments.benchmark do); run it without --distributed",
        )


def check_same_everywhere(*trees, what: str = "data or settings") -> None:
    """With --distributed: UserError unless every process holds the same ``trees``
    (configs, data, keys), compared by ``loop.fingerprint``."""
    if not FLAGS.distributed:
        return
    from foltr_jax import multiprocess

    try:
        multiprocess.check_agreement(loop.fingerprint(*trees), what)
    except multiprocess.DistributedError as error:
        raise UserError(f"--distributed: {error}") from None


def on_every_process(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``; with --distributed every process calls it and they compare:
    when it raised UserError on some process, every process ends (this one with its own
    error, the others with one line naming the processes that failed) instead of waiting
    for them in the next collective step."""
    if not FLAGS.distributed:
        return fn(*args, **kwargs)
    from foltr_jax import multiprocess

    result = error = None
    try:
        result = fn(*args, **kwargs)
    except UserError as raised:
        error = raised
    failed = multiprocess.failed_processes(error is not None)
    if error is not None:
        raise error
    if failed:
        raise UserError(f"--distributed: process(es) {failed} failed (see their error); stopping")
    return result


def is_writer() -> bool:
    """Whether this process writes files (always, unless it is not process 0 of a
    --distributed run)."""
    if not FLAGS.distributed:
        return True
    from foltr_jax import multiprocess

    return multiprocess.is_writer()


def define_poisoning_flags():
    """--attack, --aggregator, --n_malicious, --krum_squared_distances: shared by every method."""
    defaults = FederationConfig()
    flags.DEFINE_string(
        "aggregator", defaults.aggregator, f"Server aggregation rule: {aggregators.help_text()}."
    )
    flags.DEFINE_string(
        "attack",
        defaults.attack,
        "The first --n_malicious clients attack: none | data_poisoning (they click with the "
        f"poison model) | {attacks.help_text().split(' | ', 1)[1]}.",
    )
    flags.DEFINE_integer(
        "n_malicious", defaults.n_malicious, "m: the first m clients are malicious."
    )
    flags.DEFINE_bool(
        "krum_squared_distances",
        defaults.krum_squared_distances,
        "Krum and Fang's Krum attack score with squared Euclidean distances (Blanchard et al.); "
        "--nokrum_squared_distances: Euclidean, as the poisoning paper says.",
    )


def define_checkpoint_flag():
    flags.DEFINE_bool(
        "checkpoint",
        True,
        "Resume an interrupted run: save the simulation's state in <output_dir>/.checkpoint*.npz "
        "after every chunk of rounds (a binary running several cells or phases keeps one file "
        "per part, and each finished part's results in <output_dir>/.cells/ or .phases/); a run "
        "started again with the same flags and code continues from there instead of starting "
        "over, with the same results. The files hold arrays and JSON only (never pickle) and "
        "are removed once results.json is written; --nocheckpoint turns this off.",
    )


EXPERIMENTS_DIR = pathlib.Path(__file__).resolve().parent


def checkpoint_file(output_dir, part: str = "") -> str | None:
    """The checkpoint of the run (or of one ``part`` of it) under ``output_dir``; None
    with --nocheckpoint."""
    if not FLAGS.checkpoint:
        return None
    name = f".checkpoint-{part}.npz" if part else ".checkpoint.npz"
    return str(pathlib.Path(output_dir) / name)


class FinishedParts:
    """The results of the finished parts (cells, phases) of a binary that runs several,
    so that an interrupted invocation started again skips what it already computed.

    Each part is saved atomically in ``<folder>/<name>.npz`` (``files.save_arrays``:
    its arrays, and the rest as JSON) with the fingerprint of its settings
    (``loop.fingerprint``) and the code version of foltr_jax and the binaries: a part
    of other settings or code is never reused, and nothing read back can run code.
    Results are dicts, lists, tuples, arrays, numbers and strings (``files.to_plain``).
    ``clear`` removes them once results.json is written.  With ``folder`` None
    (--nocheckpoint) nothing is saved or reused.
    """

    def __init__(self, folder):
        self.folder = None if folder is None else pathlib.Path(folder)
        self.code = files.code_version(EXPERIMENTS_DIR)

    @property
    def enabled(self) -> bool:
        return self.folder is not None

    def _path(self, name: str) -> pathlib.Path:
        return self.folder / f"{name}.npz"

    def load(self, name: str, fingerprint: str):
        """The saved result of part ``name`` when it is this run's, else None (with a
        warning when a file was there)."""
        if self.folder is None or not self._path(name).exists():
            return None
        try:
            meta, arrays = files.load_arrays(self._path(name), fingerprint, self.code)
            return files.from_plain(meta.get("result"), arrays)
        except files.StoredFileError as error:
            warnings.warn(f"ignoring {self._path(name)}: {error}; the part runs again")
            return None

    def save(self, name: str, fingerprint: str, result) -> None:
        if self.folder is None:
            return
        check_finite(result, f"part {name!r}")
        arrays = []
        meta = {"result": files.to_plain(result, arrays)}
        files.save_arrays(self._path(name), fingerprint, meta, arrays, self.code)

    def clear(self) -> None:
        """Removes the saved parts (and the folder when nothing else is in it)."""
        if self.folder is None or not self.folder.is_dir():
            return
        for path in [*self.folder.glob("*.npz"), *self.folder.glob(".*.tmp")]:
            path.unlink(missing_ok=True)
        try:
            self.folder.rmdir()
        except OSError:
            pass  # something else lives there: leave it


class UserError(Exception):
    """A problem with the user's input: printed as one line, no traceback."""


def quiet_logs() -> None:
    """Keeps absl's INFO chatter (e.g. JAX probing for absent TPUs) off the terminal, and
    prints Python warnings as one line each ('<program>: warning: ...')."""
    logging.set_verbosity(logging.WARNING)
    program = pathlib.Path(sys.argv[0]).stem
    warnings.formatwarning = lambda message, *_, **__: f"{program}: warning: {message}\n"


def fail(program: str, message: str) -> None:
    """Prints one error line and exits with status 2 (a claimed output folder is released
    on the way out)."""
    print(f"{program}: error: {message}", file=sys.stderr)
    sys.exit(2)


class Output:
    """A run's --output_dir, claimed before any work: created, locked against a second
    run (``<output_dir>/.lock``, held with ``flock`` while the process lives) and probed
    for writing, with the files the run will write checked to be writable files.

    Results are written strictly (``write_json``: finite numbers only) and the run's
    checkpoints are removed only afterwards (``finish``).  A run that fails releases the
    lock and removes the folders it created when they are empty.
    """

    def __init__(self, path, outputs=("results.json",), flag: str = "output_dir"):
        self.path, self.flag = pathlib.Path(path), flag
        self._created: list[pathlib.Path] = []
        self._lock_fd: int | None = None
        where = f"--{flag}: {self.path}"
        if self.path.exists() and not self.path.is_dir():
            raise UserError(f"{where} exists and is not a folder")
        missing = [p for p in (self.path, *self.path.parents) if not p.exists()]
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UserError(f"{where}: cannot create it ({error.strerror or error})") from None
        self._created = missing  # deepest first
        atexit.register(self.release)
        try:
            self._lock()
            self._probe()
        except UserError:
            self.release()
            raise
        for name in outputs:
            target, problem = self.path / name, None
            if target.parent.exists() and not target.parent.is_dir():
                problem = f"{target.parent} is not a folder"
            elif target.exists() and not target.is_file():
                problem = f"{target} is not a file"
            if problem:
                self.release()
                raise UserError(f"--{flag}: {problem}, so {target} cannot be written")
        stale = sorted(self.path.glob(".checkpoint*.pkl")) + sorted(self.path.glob(".*/*.pkl"))
        if stale:
            warnings.warn(
                f"ignoring {len(stale)} pickle file(s) of an older version in {self.path} "
                f"(e.g. {stale[0].name}): they are never loaded, since unpickling can run code; "
                "delete them"
            )

    def _lock(self) -> None:
        lock = self.path / ".lock"
        while True:
            try:
                fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as error:
                raise UserError(
                    f"--{self.flag}: cannot write into {self.path} ({error.strerror or error})"
                ) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
                os.close(fd)
                raise UserError(
                    f"--{self.flag}: {self.path} is in use by another run (process {holder}); "
                    "wait for it to finish or choose another folder"
                ) from None
            try:  # its last holder may have removed it meanwhile: lock the file on disk
                if os.stat(lock).st_ino == os.fstat(fd).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def _probe(self) -> None:
        try:
            handle, probe = tempfile.mkstemp(dir=self.path, prefix=".probe-")
            os.close(handle)
            os.unlink(probe)
        except OSError as error:
            raise UserError(
                f"--{self.flag}: cannot write into {self.path} ({error.strerror or error})"
            ) from None

    def checkpoint(self, part: str = "") -> str | None:
        """The checkpoint of the run or of one ``part`` (None with --nocheckpoint)."""
        return checkpoint_file(self.path, part)

    def finished_parts(self, folder: str) -> FinishedParts:
        """Finished parts kept in ``<output_dir>/<folder>`` (disabled with --nocheckpoint)."""
        return FinishedParts(self.path / folder if FLAGS.checkpoint else None)

    def write_json(self, name, payload: dict) -> pathlib.Path:
        """Writes ``<output_dir>/<name>`` as strict JSON; UserError naming the flag if it
        cannot be written or holds a non-finite number (nothing is written then)."""
        target = self.path / name
        check_finite(payload, str(target))
        self._write(target, (json.dumps(payload, indent=1, allow_nan=False)).encode())
        return target

    def write_text(self, name, text: str) -> pathlib.Path:
        target = self.path / name
        self._write(target, text.encode())
        return target

    def _write(self, target: pathlib.Path, payload: bytes) -> None:
        try:
            write_bytes_atomic(target, payload)
        except OSError as error:
            raise UserError(
                f"--{self.flag}: cannot write {target} ({error.strerror or error}); the "
                "checkpoints are kept: the same command finishes without computing again"
            ) from None

    def finish(self) -> None:
        """After the results are written: removes the run's checkpoints, what a killed
        writer left half-written (``.*.tmp``) and the lock."""
        for path in [*self.path.glob(".checkpoint*.npz"), *self.path.glob(".*.tmp")]:
            loop.remove_checkpoint(path)
        self._created = []  # the folders hold results now
        self.release()

    def release(self) -> None:
        """Unlocks; removes the folders this run created if they are still empty."""
        if self._lock_fd is not None:
            (self.path / ".lock").unlink(missing_ok=True)
            os.close(self._lock_fd)
            self._lock_fd = None
        for folder in self._created:
            try:
                folder.rmdir()
            except OSError:
                break
        self._created = []


def claim_output(outputs=("results.json",)):
    """``Output`` of --output_dir (UserError naming the flag when it cannot be used); a
    ``ReadOnlyOutput`` on the processes of a --distributed run other than process 0."""
    if not is_writer():
        return ReadOnlyOutput(FLAGS.output_dir)
    return Output(FLAGS.output_dir, outputs)


class ReadOnlyOutput:
    """--output_dir seen from a process that does not write (process k > 0 of a
    --distributed run): the same names as ``Output``, and nothing is created there.
    The run's checkpoint is read by process 0 and sent to the others (``loop``)."""

    def __init__(self, path):
        self.path = pathlib.Path(path)

    def checkpoint(self, part: str = "") -> str | None:
        return checkpoint_file(self.path, part)

    def finished_parts(self, folder: str) -> FinishedParts:
        return FinishedParts(None)

    def write_json(self, name, payload: dict) -> pathlib.Path:
        check_finite(payload, str(self.path / name))
        return self.path / name

    def write_text(self, name, text: str) -> pathlib.Path:
        return self.path / name

    def finish(self) -> None:
        pass

    def release(self) -> None:
        pass


def check_finite(value, where: str) -> None:
    """UserError naming the first NaN or infinity in ``value`` (dicts, lists, arrays,
    numbers): results hold finite numbers only, and strict JSON has no token for others."""
    path = _first_non_finite(value, "")
    if path is not None:
        found, number = path
        raise UserError(
            f"{where}: {found.lstrip('.') or 'value'} is {number}: the run produced a "
            "non-finite number (a diverging model? try a smaller --learning_rate); not written"
        )


def _first_non_finite(value, where: str):
    if isinstance(value, dict):
        items = ((f"{where}.{k}", v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"{where}[{i}]", v) for i, v in enumerate(value))
    elif isinstance(value, float) and not math.isfinite(value):
        return where, value
    elif hasattr(value, "dtype") and getattr(value.dtype, "kind", "") == "f":
        bad = ~np.isfinite(np.asarray(value))
        if bad.any():
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            return where + "".join(f"[{i}]" for i in index), float(np.asarray(value)[index])
        return None
    else:
        return None
    for key, item in items:
        found = _first_non_finite(item, key)
        if found is not None:
            return found
    return None


def federation_config(program: str = "foltr_jax") -> federation.FederationConfig:
    start_distributed(program)
    config = federation.FederationConfig(
        n_clients=FLAGS.n_clients,
        local_updates=FLAGS.local_updates,
        rounds=FLAGS.rounds,
        learning_rate=FLAGS.learning_rate,
        ranker=FLAGS.ranker,
        click_model=FLAGS.click_model,
        n_grades=FLAGS.n_grades,
        n_runs=FLAGS.n_runs,
        epsilon=FLAGS.epsilon,
        sensitivity=FLAGS.sensitivity,
        clip_factor=FLAGS.clip_factor,
        privacy_noise=FLAGS.privacy_noise,
        aggregator=FLAGS.aggregator,
        attack=FLAGS.attack,
        n_malicious=FLAGS.n_malicious,
        krum_squared_distances=FLAGS.krum_squared_distances,
        server_optimizer=FLAGS.server_optimizer,
        server_learning_rate=FLAGS.server_learning_rate,
        seed=FLAGS.seed,
        chunk_rounds=FLAGS.chunk_rounds,
        eval_every=FLAGS.eval_every,
        window_scoring=resolve_window_scoring(FLAGS.window_scoring),
        client_chunk=FLAGS.client_chunk,
        n_devices=FLAGS.n_devices,
    )
    try:
        config.validate()
        if FLAGS.centralised:
            try:
                config = centralised(config, FLAGS.centralised_form)
            except ValueError as error:
                raise federation.ConfigError("centralised_form", str(error)) from None
    except federation.ConfigError as error:
        raise UserError(f"--{error.field}: {error.message}") from None
    return config


def build(config, train, test, settings=None):
    """federation.build, with a bad combination of settings as a UserError naming the flag."""
    try:
        spec, arrays = federation.build(config, train, test, settings)
    except federation.ConfigError as error:
        raise UserError(f"--{error.field}: {error.message}") from None
    check_same_everywhere(spec, arrays)
    return spec, arrays


def load_datasets():
    """(train, test, description) from the data flags."""
    cache = {"normalise": FLAGS.normalise, "cache_dir": FLAGS.cache_dir or None}
    try:
        if FLAGS.fold_dir:
            fold = data.load_fold(FLAGS.fold_dir, **cache)
            return fold["train"], fold["test"], {"fold_dir": os.path.abspath(FLAGS.fold_dir)}
        if FLAGS.train_path or FLAGS.test_path:
            if not (FLAGS.train_path and FLAGS.test_path):
                raise UserError("--train_path and --test_path go together (or use --fold_dir)")
            train = data.read_letor(FLAGS.train_path, **cache)
            test = data.read_letor(FLAGS.test_path, n_features=train.n_features, **cache)
            data.warn_without_relevant(test, FLAGS.test_path)
            return (
                train,
                test,
                {
                    "train_path": os.path.abspath(FLAGS.train_path),
                    "test_path": os.path.abspath(FLAGS.test_path),
                },
            )
    except (data.LetorFormatError, data.DatasetError) as error:
        raise UserError(str(error)) from None
    for name in ("synthetic_queries", "synthetic_features"):
        if getattr(FLAGS, name) < 1:
            raise UserError(f"--{name} must be at least 1, got {getattr(FLAGS, name)}")
    if not FLAGS.synthetic_docs_per_query >= 2:
        raise UserError(
            f"--synthetic_docs_per_query must be at least 2, got {FLAGS.synthetic_docs_per_query}"
        )
    train, test = data.synthetic_train_test(
        FLAGS.synthetic_seed,
        n_train_queries=FLAGS.synthetic_queries,
        n_test_queries=max(FLAGS.synthetic_queries // 2, 1),
        n_features=FLAGS.synthetic_features,
        mean_docs_per_query=FLAGS.synthetic_docs_per_query,
    )
    return (
        train,
        test,
        {
            "synthetic": {
                "seed": FLAGS.synthetic_seed,
                "queries": FLAGS.synthetic_queries,
                "features": FLAGS.synthetic_features,
                "docs_per_query": FLAGS.synthetic_docs_per_query,
            }
        },
    )


def results_file(method, config, result, train, test, source, slots=slice(None), log=None) -> dict:
    """The shared results.json of an online-LTR run: config, data, the per-round curves of
    the runs in ``slots`` (one setting's repetitions) and the program's timings (what
    they cover from ``log``, the run's ProgressLog)."""

    def pick(values):
        return values[slots]

    return {
        "method": method,
        "config": dataclasses.asdict(config),
        "data": {
            **source,
            "train": dataset_summary(train),
            "test": dataset_summary(test),
            "normalise": FLAGS.normalise,
        },
        "versions": versions(),
        "initial_offline_ndcg": pick(result.initial_offline_ndcg).tolist(),
        "offline_ndcg": pick(result.offline_ndcg).tolist(),
        "offline_mrr": pick(result.offline_mrr).tolist(),
        **offline_rounds(config, result),
        "online_ndcg": pick(result.online_ndcg).tolist(),
        "online_max_rr": pick(result.online_max_rr).tolist(),
        "online_performance": pick(result.online_performance).tolist(),
        "final_offline_ndcg": pick(result.offline_ndcg)[:, -1].tolist(),
        # The program's totals: a grid cell shares them with the other cells.
        "interactions": result.interactions,
        "seconds": result.run_seconds,
        "compile_seconds": result.compile_seconds,
        "interactions_per_second": result.interactions_per_second,
        "timings": timings(log),
    }


def offline_rounds(config, result) -> dict:
    """``{"offline_rounds": [the 1-based round of each offline column]}`` when
    ``--eval_every`` > 1; nothing when every round is evaluated (columns 1..T, and the
    methods without the flag: FOLtR-ES)."""
    if getattr(config, "eval_every", 1) == 1:
        return {}
    return {"offline_rounds": result.offline_rounds.tolist()}


def timings(*logs) -> dict:
    """What the timing fields cover, and the rounds from which each part resumed."""
    return {
        "cover": (
            "every round: seconds and compile_seconds are summed over the invocations that "
            "computed the rounds (a resumed run's interrupted ones included); "
            "interactions_per_second = interactions / seconds"
        ),
        "resumed_at_round": {log.label: log.resumed_at for log in logs if log and log.resumed_at},
    }


def dataset_summary(dataset: data.RankingDataset) -> dict:
    return {
        "queries": int(dataset.n_queries),
        "documents": int(dataset.n_docs),
        "features": int(dataset.n_features),
        "max_query_length": int(dataset.max_query_length),
    }


def versions() -> dict:
    import jax

    return {
        "foltr_jax": foltr_jax.__version__,
        "jax": jax.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def write_json_atomic(path: pathlib.Path, payload: dict) -> None:
    """Writes strict JSON through a temporary file and a rename: never a half-written
    file, never a NaN (UserError naming it)."""
    check_finite(payload, str(path))
    write_text_atomic(path, json.dumps(payload, indent=1, allow_nan=False))


def write_text_atomic(path: pathlib.Path, text: str) -> None:
    """Writes text through a temporary file and a rename."""
    write_bytes_atomic(path, text.encode())


def write_bytes_atomic(path: pathlib.Path, payload: bytes) -> None:
    """Writes bytes through a temporary file and a rename."""
    files.write_atomically(path, lambda stream: stream.write(payload))


class ProgressLog:
    """Prints 'round t/T, elapsed, time left' lines between compiled chunks."""

    def __init__(self, label: str, stream=sys.stderr):
        self.label, self.stream = label, stream
        self.resumed_at = 0  # rounds done by an earlier, interrupted invocation

    def __call__(self, done: int, total: int, seconds: float) -> None:
        if seconds == 0 and done > 0:  # scan_in_chunks resuming from a checkpoint
            self.resumed_at = done
            print(
                f"[{self.label}] round {done}/{total} resumed from the checkpoint", file=self.stream
            )
            return
        left = seconds / max(done - self.resumed_at, 1) * (total - done)
        print(
            f"[{self.label}] round {done}/{total} ({100 * done / total:.0f}%), "
            f"{seconds:.1f} s elapsed, ~{left:.1f} s left",
            file=self.stream,
            flush=True,
        )
