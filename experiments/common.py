"""The flags shared by the experiment binaries and what they build: configs, datasets.

Library code never reads flags: these helpers turn flags into frozen config
dataclasses and datasets, and the binaries pass those down.  The flags are defined
here, so that a binary's ``flags.adopt_module_key_flags(common)`` lists them in its
--help.  The rest of what the binaries share lives in its own module and is
re-exported here: ``cli`` (one-line errors, progress), ``distributed`` (runs over
several processes), ``output`` (the claimed output folder, checkpoints, strict
writes) and ``results`` (the shared fields of results.json).
"""

from __future__ import annotations

import os

from absl import flags

from experiments.cli import LoadLog, ProgressLog, UserError, fail, quiet_logs
from experiments.distributed import (
    check_same_everywhere,
    is_writer,
    on_every_process,
    refuse_distributed,
    start_distributed,
)
from experiments.output import (
    EXPERIMENTS_DIR,
    FinishedParts,
    Output,
    ReadOnlyOutput,
    check_finite,
    checkpoint_file,
    claim_output,
    probe_output_file,
    slot_namer,
    stop_cleanly,
    unique_names,
    write_bytes_atomic,
    write_json_atomic,
    write_output_file,
    write_text_atomic,
)
from experiments.results import (
    curve_summary,
    dataset_summary,
    offline_rounds,
    peak_rss_mb,
    results_file,
    timings,
    versions,
)
from foltr_jax import aggregators, attacks, click_models, data, federation, rankers
from foltr_jax.config import (
    INT32_MAX,
    PRIVACY_NOISE,
    FederationConfig,
    centralised,
    resolve_window_scoring,
)

__all__ = [
    "EXPERIMENTS_DIR",
    "FLAGS",
    "FinishedParts",
    "Output",
    "ProgressLog",
    "ReadOnlyOutput",
    "UserError",
    "build",
    "check_finite",
    "check_same_everywhere",
    "checkpoint_file",
    "claim_output",
    "curve_summary",
    "dataset_summary",
    "define_checkpoint_flag",
    "define_data_flags",
    "define_distributed_flags",
    "define_n_devices_flag",
    "define_federation_flags",
    "define_poisoning_flags",
    "fail",
    "federation_config",
    "is_writer",
    "load_datasets",
    "offline_rounds",
    "on_every_process",
    "peak_rss_mb",
    "probe_output_file",
    "quiet_logs",
    "refuse_distributed",
    "results_file",
    "slot_namer",
    "start_distributed",
    "stop_cleanly",
    "unique_names",
    "timings",
    "versions",
    "write_bytes_atomic",
    "write_json_atomic",
    "write_output_file",
    "write_text_atomic",
]

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
    flags.DEFINE_integer(
        "synthetic_test_queries", 0, "Test queries of the synthetic dataset; 0: half the training."
    )
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
        f"Ranker: {rankers.help_text()}.",
    )
    flags.DEFINE_string(
        "click_model",
        defaults.click_model,
        f"Click model: {click_models.help_text()}.",
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
    define_eval_every_flag(defaults.eval_every)
    flags.DEFINE_string(
        "window_scoring",
        defaults.window_scoring,
        "auto: map on a CPU, vmap on an accelerator; map: score each client's candidates in turn "
        "(fast on CPU); vmap: batched (for GPU).",
    )
    _define_privacy_flags(defaults)
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
    define_client_chunk_flag(defaults.client_chunk)
    define_n_devices_flag(defaults.n_devices)
    define_distributed_flags()
    flags.DEFINE_bool("centralised", False, "Run the centralised PDGD baseline instead of FPDGD.")
    flags.DEFINE_string(
        "centralised_form",
        "same_budget",
        "same_updates | same_budget | batch: which reading of the FPDGD paper's baseline (§4).",
    )


def define_eval_every_flag(default: int = 1):
    """--eval_every (every method: ``engine.offline_when``)."""
    flags.DEFINE_integer(
        "eval_every",
        default,
        "Offline metrics (the test split) after rounds K, 2K, ... and the last round only; "
        "results.json's offline curves then list those rounds in offline_rounds. "
        "1: every round. Online metrics are every round's.",
    )


def define_client_chunk_flag(default: int = 0, clients: str = "clients"):
    """--client_chunk (every method: ``engine.serve``)."""
    flags.DEFINE_integer(
        "client_chunk",
        default,
        f"Train a round's {clients} this many at a time (memory follows the chunk; the server "
        "pipeline must stream: FedAvg, privacy noise, a server optimiser); 0: all at once.",
    )


def define_n_devices_flag(default: int = 1, clients: str = "clients"):
    """--n_devices (every method: ``engine.on_devices``, FPDGD's lanes)."""
    flags.DEFINE_integer(
        "n_devices", default, f"Shard the {clients} of a round over this many devices."
    )


def _define_privacy_flags(defaults):
    """--epsilon, --sensitivity, --clip_factor, --privacy_noise (FPDGD's differential privacy)."""
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


def check_synthetic_flags() -> None:
    """UserError naming the synthetic-data flag that is out of range: sizes within int32
    (documents are counted in int32), a finite number of documents per query, a seed numpy
    takes."""
    limits = {
        "synthetic_queries": (1, INT32_MAX),
        "synthetic_test_queries": (0, INT32_MAX),
        "synthetic_features": (1, INT32_MAX),
        "synthetic_seed": (0, 2**64 - 1),
    }
    for name, (low, high) in limits.items():
        if not low <= getattr(FLAGS, name) <= high:
            raise UserError(f"--{name} must lie in {low}..{high}, got {getattr(FLAGS, name)}")
    docs = FLAGS.synthetic_docs_per_query
    if not 2 <= docs <= INT32_MAX:  # NaN and infinity fail too
        raise UserError(f"--synthetic_docs_per_query must lie in 2..{INT32_MAX}, got {docs}")
    queries = FLAGS.synthetic_queries + (FLAGS.synthetic_test_queries or FLAGS.synthetic_queries)
    if queries * docs > INT32_MAX:
        raise UserError(
            f"--synthetic_queries: about {queries * docs:.3g} documents, more than int32 "
            f"offsets can address ({INT32_MAX})"
        )


def load_datasets():
    """(train, test, description) from the data flags."""
    if FLAGS.fold_dir and (FLAGS.train_path or FLAGS.test_path):
        raise UserError(
            "--fold_dir: given with --train_path/--test_path; name the data once (a fold "
            "folder, or the two files)"
        )
    cache = {
        "normalise": FLAGS.normalise,
        "cache_dir": FLAGS.cache_dir or None,
        "progress": LoadLog(),  # lines on stderr once a file takes more than a few seconds
    }
    try:
        if FLAGS.fold_dir:
            fold = data.load_fold(FLAGS.fold_dir, **cache)
            if fold["train"].n_features < 1:
                raise UserError(
                    f"--fold_dir: {FLAGS.fold_dir}: no line of train.txt or test.txt carries a "
                    "feature (id:value)"
                )
            return fold["train"], fold["test"], {"fold_dir": os.path.abspath(FLAGS.fold_dir)}
        if FLAGS.train_path or FLAGS.test_path:
            if not (FLAGS.train_path and FLAGS.test_path):
                raise UserError("--train_path and --test_path go together (or use --fold_dir)")
            train = data.read_letor(FLAGS.train_path, **cache)
            if train.n_features < 1:  # the test file is read with the training file's width
                raise UserError(
                    f"--train_path: {FLAGS.train_path}: no line carries a feature (id:value)"
                )
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
    check_synthetic_flags()
    n_test = FLAGS.synthetic_test_queries or max(FLAGS.synthetic_queries // 2, 1)
    try:
        train, test = data.synthetic_train_test(
            FLAGS.synthetic_seed,
            n_train_queries=FLAGS.synthetic_queries,
            n_test_queries=n_test,
            n_features=FLAGS.synthetic_features,
            mean_docs_per_query=FLAGS.synthetic_docs_per_query,
        )
    except MemoryError:
        raise UserError(
            "--synthetic_queries: the synthetic dataset does not fit in memory; ask for fewer "
            "queries, features or documents per query"
        ) from None
    return (
        train,
        test,
        {
            "synthetic": {
                "seed": FLAGS.synthetic_seed,
                "queries": FLAGS.synthetic_queries,
                "test_queries": n_test,
                "features": FLAGS.synthetic_features,
                "docs_per_query": FLAGS.synthetic_docs_per_query,
            }
        },
    )
