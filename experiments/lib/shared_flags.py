"""The flags every binary shares and what they build: configs, datasets.

Library code never reads flags: these helpers turn flags into frozen config
dataclasses and datasets, and the binaries pass those down.  The flags are defined
here, so that a binary's ``flags.adopt_module_key_flags(shared_flags)`` lists them in
its --help.
"""

from __future__ import annotations

import os

from absl import flags

from experiments.lib import config_flags, provenance
from experiments.lib.cli import LoadLog, UserError, timed
from experiments.lib.config_flags import user_error
from experiments.lib.distributed import check_same_everywhere
from foltr_jax import data
from foltr_jax.core.registry import one_of
from foltr_jax.engine import serving
from foltr_jax.engine.config import INT32_MAX
from foltr_jax.methods.fpdgd import federation
from foltr_jax.methods.fpdgd.config import FpdgdConfig, centralised

FLAGS = flags.FLAGS


def define_plugin_flag():
    """--plugin (``experiments.lib.plugins``; ``program.main`` imports them first)."""
    flags.DEFINE_multi_string(
        "plugin",
        [],
        "User code to import first (repeatable): a module name or a .py file; what it "
        "registers (aggregators, attacks, click models, rankers, recipes) is then a name "
        "like the built-in ones.",
    )


# The datasets --data names (the rest are given by --fold_dir or --train_path/--test_path).
DATA_NAMES = ("synthetic", "mslr_sample")


def define_compile_cache_flag():
    """--compile_cache (``program.main`` applies it before anything compiles, and hands it
    on to the processes the program starts)."""
    flags.DEFINE_string(
        "compile_cache",
        "",
        "Where compiled programs are remembered (JAX's persistent compilation cache), or "
        "'none'; empty: $FOLTR_JAX_COMPILE_CACHE, else JAX_COMPILATION_CACHE_DIR, else "
        "$FOLTR_JAX_CACHE/jax or ~/.cache/foltr_jax/jax.",
    )


def define_data_flags():
    define_plugin_flag()
    define_compile_cache_flag()
    flags.DEFINE_string(
        "data",
        "",
        "A dataset by name: mslr_sample (the real MSLR-WEB10K excerpt for trying things: "
        "Fold 1, 43 training and 43 test queries, 136 features; fetched from PyPI on first "
        "use) or synthetic (the embedded synthetic dataset, the default); a dataset of your "
        "own is --fold_dir or --train_path and --test_path.",
    )
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


# FpdgdConfig's fields that are not flags: fixed by the papers (top_k) or set by a
# binary (aggregation by --centralised_form, display_groups by the program).
FEDERATION_INTERNAL = ("top_k", "aggregation", "display_groups")
# The poisoning and unlearning papers' setting (10 clients, B = 5, T = 10,000).
TEN_CLIENT_DEFAULTS = {
    "n_clients": 10,
    "local_updates": 5,
    "rounds": 10_000,
    "chunk_rounds": 500,
}


def define_federation_flags(defaults: dict | None = None) -> config_flags.ConfigFlags:
    """FpdgdConfig's flags (``config_flags``; ``defaults``: a binary's paper defaults),
    --distributed, and --centralised/--centralised_form; ``federation_config`` reads them."""
    generated = config_flags.define(FpdgdConfig, skip=FEDERATION_INTERNAL, defaults=defaults)
    define_distributed_flags()
    flags.DEFINE_bool("centralised", False, "Run the centralised PDGD baseline instead of FPDGD.")
    flags.DEFINE_string(
        "centralised_form",
        "same_budget",
        "same_updates | same_budget | batch: which reading of the FPDGD paper's baseline (§4).",
    )
    return generated


def define_distributed_flags():
    """--distributed and --distributed_timeout (every binary has them; those that do not run
    over several processes refuse --distributed with ``refuse_distributed``)."""
    flags.DEFINE_bool(
        "distributed",
        False,
        "Run as one of several processes (one per host or GPU): jax.distributed.initialize() "
        "with JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID when set, else the "
        "cluster JAX detects (SLURM, ...); process 0 writes the files. See docs/howto/scale.md.",
    )
    flags.DEFINE_integer(
        "distributed_timeout",
        300,
        "With --distributed: seconds to wait for the coordinator and every process.",
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


def federation_config(generated: config_flags.ConfigFlags) -> federation.FpdgdConfig:
    """The FpdgdConfig of ``generated`` (a binary's ``define_federation_flags``) and
    the flags (the centralised baseline's with --centralised)."""
    config = generated.build()
    if FLAGS.centralised:
        try:
            config = centralised(config, FLAGS.centralised_form)
        except ValueError as error:
            raise UserError(f"--centralised_form: {error}") from None
    return config


def build(config, train, test, settings=None):
    """federation.build, with a bad combination of settings as a UserError naming the flag."""
    try:
        spec, arrays = federation.build(config, train, test, settings)
    except federation.ConfigError as error:
        raise user_error(error) from None
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
    needed, available = queries * docs * FLAGS.synthetic_features * 4, serving.host_memory()
    if available is not None and needed > available:  # float32 features, before any is made
        raise UserError(
            f"--synthetic_features: the synthetic dataset needs at least "
            f"{serving.in_bytes(needed)} (synthetic_queries = {FLAGS.synthetic_queries:,}, "
            f"about {docs:g} documents a query, synthetic_features = "
            f"{FLAGS.synthetic_features:,}: float32 features), more than the "
            f"{serving.in_bytes(available)} of memory here; ask for fewer"
        )


def note_data_files(*paths, flag: str) -> None:
    """Records the data files read (their SHA-256 in results.json's provenance);
    UserError naming ``--flag`` when one cannot be read again."""
    try:
        provenance.note_data(*paths)
    except OSError as error:
        raise UserError(f"--{flag}: {error.strerror or error}") from None


def named_data() -> str:
    """The folder of --data=mslr_sample (fetched when absent), '' for the synthetic
    dataset; a UserError naming --data for another name, or given with a path."""
    name = FLAGS.data
    if not name or name == "synthetic":
        if name and (FLAGS.fold_dir or FLAGS.train_path or FLAGS.test_path):
            raise UserError("--data=synthetic: given with a data path; name the data once")
        return ""
    if name not in DATA_NAMES:
        raise UserError(
            f"--data: {one_of(DATA_NAMES, name)}; a dataset of your own is --fold_dir or "
            "--train_path and --test_path"
        )
    if FLAGS.fold_dir or FLAGS.train_path or FLAGS.test_path:
        raise UserError(
            f"--data={name}: given with --fold_dir/--train_path/--test_path; name the data once"
        )
    from experiments.lib import runs  # the excerpt's places and its fetch

    found = runs.find_or_fetch_excerpt()
    if found is None:
        raise UserError(
            f"--data={name}: the MSLR excerpt is not here and could not be fetched "
            "(python third_party/mslr_sample/fetch.py fetches it from PyPI)"
        )
    return str(found)


def load_datasets():
    """(train, test, description) from the data flags; how long it took is said with the
    line that says compiling starts (``cli.timed``)."""
    files = FLAGS.data not in ("", "synthetic") or FLAGS.fold_dir or FLAGS.train_path
    with timed("data loaded" if files else "synthetic data made"):
        return _load_datasets()


def _load_datasets():
    excerpt = named_data()
    if excerpt:
        train_path, test_path = (os.path.join(excerpt, f"{s}.txt") for s in ("train", "test"))
        cache = {"normalise": FLAGS.normalise, "cache_dir": FLAGS.cache_dir or None}
        try:
            train = data.read_letor(train_path, progress=LoadLog(), **cache)
            test = data.read_letor(test_path, n_features=train.n_features, **cache)
        except (data.DatasetError, data.LetorFormatError) as error:
            raise UserError(f"--data={FLAGS.data}: {error}") from None
        note_data_files(train_path, test_path, flag="data")
        source = {
            "name": FLAGS.data,
            "train_path": os.path.abspath(train_path),
            "test_path": os.path.abspath(test_path),
        }
        return train, test, source
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
    flag = "fold_dir" if FLAGS.fold_dir else "train_path"  # the flag a missing file names
    try:
        if FLAGS.fold_dir:
            fold = data.load_fold(FLAGS.fold_dir, **cache)
            note_data_files(
                *(
                    os.path.join(FLAGS.fold_dir, f"{split}.txt")
                    for split in ("train", "vali", "test")
                    if split in fold
                ),
                flag="fold_dir",
            )
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
            flag = "test_path"
            test = data.read_letor(FLAGS.test_path, n_features=train.n_features, **cache)
            data.warn_without_relevant(test, FLAGS.test_path)
            note_data_files(FLAGS.train_path, FLAGS.test_path, flag="train_path")
            return (
                train,
                test,
                {
                    "train_path": os.path.abspath(FLAGS.train_path),
                    "test_path": os.path.abspath(FLAGS.test_path),
                },
            )
    except data.DatasetError as error:  # a missing or unreadable file or folder
        raise UserError(f"--{flag}: {error}") from None
    except data.LetorFormatError as error:  # names file:line
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
