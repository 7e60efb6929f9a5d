"""Trustworthy results, as a careless or hostile user meets them: a model that
breaks (NaN or infinity) is never a result, a run touches only its own files, every
output path is probed before the work, what is read back is checked against its content,
integers and types are checked where they are read, names never collide, and files follow
the user's umask.  Most tests call the library in-process; those that start a binary are
marked slow."""

import errno
import functools
import json
import math
import os
import pathlib
import stat
import subprocess
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.lib.cli import UserError
from experiments.lib.output import Output, stop_cleanly, unique_names
from foltr_jax import FedIpsConfig, FpdgdConfig, Setting, data
from foltr_jax.core import files
from foltr_jax.engine import loop
from foltr_jax.engine.config import ConfigError
from foltr_jax.engine.results_files import OutputError
from foltr_jax.methods.foltr_es import FoltrEsConfig
from foltr_jax.methods.fpdgd import federation
from foltr_jax.server import aggregators
from tests import binaries
from tests.sample_data import REPO_ROOT

# ---------------------------------------------------------------------------------------
# 1. A non-finite model is never a result
# ---------------------------------------------------------------------------------------


@functools.partial(jax.jit, static_argnums=(0, 1), donate_argnums=(3,))
def _breaking_chunk(static, n, consts, state, first):
    """n rounds of a toy run with slots [3, d]: slot ``static`` becomes NaN in round
    ``consts`` (1-based); every other slot stays finite."""

    def step(params, t):
        broken = (t + 1 == consts) & (jnp.arange(params.shape[0]) == static)
        params = jnp.where(broken[:, None], jnp.nan, params + 1.0)
        return params, params.sum(axis=1)

    return jax.lax.scan(step, state, first + jnp.arange(n))


def _toy(total=9, chunk=3, breaks_at=5, slot=1, checkpoint=None):
    return loop.scan_in_chunks(
        _breaking_chunk,
        slot,
        jnp.int32(breaks_at),
        jnp.zeros((3, 2)),
        total,
        chunk,
        checkpoint=checkpoint,
    )


@pytest.mark.parametrize("checkpointed", [False, True])
def test_a_model_that_breaks_mid_chunk_stops_the_run_naming_slot_and_round(checkpointed, tmp_path):
    checkpoint = str(tmp_path / ".checkpoint.npz") if checkpointed else None
    with pytest.raises(loop.NonFiniteModel) as caught:
        _toy(breaks_at=5, slot=1, checkpoint=checkpoint)
    assert caught.value.slots == [1] and caught.value.round == 5
    assert "run slot 1" in str(caught.value) and "after round 5" in str(caught.value)
    assert "\n" not in str(caught.value)
    if checkpointed:  # the last checkpoint is the last finite state, never a broken one
        meta, arrays = files.load_arrays(checkpoint, _key(checkpoint))
        assert meta["done"] == 3 and np.isfinite(arrays[0]).all()


def _key(path):
    import zipfile

    with zipfile.ZipFile(path) as z, z.open("meta.npy") as stream:
        return json.loads(str(np.lib.format.read_array(stream)[()]))["fingerprint"]


def test_a_broken_model_given_to_a_run_stops_it_before_the_first_round():
    with pytest.raises(loop.NonFiniteModel, match="before the first round"):
        loop.scan_in_chunks(_breaking_chunk, 0, jnp.int32(99), jnp.full((3, 2), jnp.inf), 3, 3)


def test_a_finite_run_is_unchanged_by_the_check():
    state, outputs, _, _ = _toy(breaks_at=99)
    assert np.array_equal(np.asarray(state), np.full((3, 2), 9.0))
    assert len(outputs) == 3


@pytest.fixture(scope="module")
def tiny_split():
    return data.synthetic_train_test(
        0, n_train_queries=12, n_test_queries=6, n_features=6, mean_docs_per_query=8
    )


@pytest.fixture
def nan_aggregator():
    name = "returns_nan_for_test"
    if name not in aggregators.names():
        aggregators.register(name, "a user's rule that returns NaN")(
            lambda models, weights, n_malicious: jnp.full(models.shape[1:], jnp.nan)
        )
    return name


def test_a_users_aggregator_returning_nan_is_never_a_result(tiny_split, nan_aggregator):
    train, test = tiny_split
    config = FpdgdConfig(
        n_clients=3,
        local_updates=2,
        rounds=4,
        n_runs=2,
        chunk_rounds=4,
        aggregator=nan_aggregator,
    )
    spec, arrays = federation.build(config, train, test)
    with pytest.raises(loop.NonFiniteModel) as caught:
        federation.run(spec, arrays)
    assert caught.value.slots == [0, 1] and caught.value.round == 1
    # what a binary prints: one line naming the cell, repetition and round
    with pytest.raises(OutputError) as line, stop_cleanly(["perfect_eps0_delta0"], 2):
        raise caught.value
    message = str(line.value)
    assert message.startswith("cell perfect_eps0_delta0, repetition 0 (run slot 0) (and 1 more")
    assert "after round 1" in message and "\n" not in message


@pytest.mark.parametrize(
    "epsilon, sensitivity, clip_factor, field",
    [
        (1e-320, 5.0, 0.5, "epsilon"),
        (1e-38, 1e3, 0.5, "epsilon"),
        (4.5, 3e38, 2.0, "clip_factor"),
    ],
)
def test_settings_whose_noise_scale_or_clipping_norm_overflow_are_refused(
    epsilon, sensitivity, clip_factor, field
):
    config = FpdgdConfig(epsilon=epsilon, sensitivity=sensitivity, clip_factor=clip_factor)
    with pytest.raises(ConfigError) as caught:
        config.validate()
    assert caught.value.field == field and "float32" in caught.value.message


def test_a_grid_cell_whose_noise_scale_overflows_is_refused():
    with pytest.raises(ConfigError, match="^epsilon gives a noise scale"):
        Setting(epsilon=1e-320, sensitivity=5.0).validate(10)


def _fpdgd_flags(tmp_path, *extra):
    return [
        "--synthetic_queries=20",
        "--synthetic_features=8",
        "--synthetic_docs_per_query=10",
        "--n_clients=4",
        "--local_updates=2",
        "--rounds=4",
        "--chunk_rounds=2",
        "--click_model=perfect",
        f"--output_dir={tmp_path / 'out'}",
        *extra,
    ]


@pytest.mark.slow
def test_binary_diverging_learning_rate_writes_nothing_and_names_slot_and_round(tmp_path):
    done = binaries.run("fpdgd", *_fpdgd_flags(tmp_path, "--learning_rate=3e38"))
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "run slot 0" in errors[0] and "after round 1" in errors[0]
    assert not (tmp_path / "out" / "results.json").exists()


@pytest.mark.slow
def test_binary_with_a_users_nan_aggregator_writes_nothing(tmp_path):
    script = (
        "import sys, jax.numpy as jnp; from absl import app; from foltr_jax import aggregators; "
        "aggregators.register('nan_rule', 'NaN')(lambda m, w, n: jnp.full(m.shape[1:], jnp.nan)); "
        "from experiments import fpdgd; app.run(fpdgd.main, argv=sys.argv)"
    )
    args = _fpdgd_flags(tmp_path, "--aggregator=nan_rule", "--click_models=perfect,navigational")
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        timeout=300,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(errors) == 1, done.stderr
    assert "cell perfect_eps0_delta0, repetition 0" in errors[0] and "after round 1" in errors[0]
    assert not list((tmp_path / "out").rglob("results.json"))


# ---------------------------------------------------------------------------------------
# 2. A run touches only the files it names; special files are never read or waited on
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_special_file_where_the_checkpoint_goes_is_ignored_with_one_warning(kind, tmp_path):
    checkpoint = tmp_path / ".checkpoint.npz"
    os.mkdir(checkpoint) if kind == "folder" else os.mkfifo(checkpoint)
    with pytest.warns(RuntimeWarning) as caught:
        state, _, _, _ = _toy(breaks_at=99, checkpoint=str(checkpoint))
    assert len(caught) == 1 and "not a file" in str(caught[0].message)
    assert np.array_equal(np.asarray(state), np.full((3, 2), 9.0))
    assert checkpoint.is_dir() if kind == "folder" else stat.S_ISFIFO(os.lstat(checkpoint).st_mode)
    loop.remove_checkpoint(str(checkpoint))  # finishing leaves it alone too
    assert os.path.lexists(checkpoint)


LETOR = "2 qid:1 1:0.5 2:0.1\n0 qid:1 1:0.1 2:0.9\n1 qid:2 1:0.3 2:0.3\n0 qid:2 1:0.7 2:0.2\n"


def _cached(tmp_path):
    path, cache = tmp_path / "train.txt", tmp_path / "cache"
    path.write_text(LETOR)
    data.read_letor(path, n_features=2, cache_dir=cache)
    (entry,) = cache.glob("*.npz")
    return path, cache, entry


def test_a_fifo_where_a_cache_entry_goes_is_never_read(tmp_path):
    path, cache, entry = _cached(tmp_path)
    entry.unlink()
    os.mkfifo(entry)
    with pytest.warns(RuntimeWarning, match="FIFO, not a file") as caught:
        dataset = data.read_letor(path, n_features=2, cache_dir=cache)
    assert len(caught) == 1 and dataset.n_queries == 2
    assert stat.S_ISFIFO(os.lstat(entry).st_mode)


# ---------------------------------------------------------------------------------------
# 4. What is read back is checked against its content
# ---------------------------------------------------------------------------------------


def test_a_cache_entry_whose_arrays_belong_to_other_data_is_rebuilt(tmp_path):
    path, cache, entry = _cached(tmp_path)
    fresh = data.read_letor(path, n_features=2, use_cache=False)
    with np.load(entry, allow_pickle=False) as z:
        stored = {k: z[k] for k in z.files}
    stored["labels"] = stored["labels"][::-1].copy()  # same header, shapes and ranges
    np.savez(entry, **stored)
    with pytest.warns(RuntimeWarning, match="do not match their checksum"):
        again = data.read_letor(path, n_features=2, cache_dir=cache)
    np.testing.assert_array_equal(again.labels, fresh.labels)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"labels": [0, 40]}, "at most 31"),
        ({"features": [[np.nan], [0.0]]}, "finite"),
        ({"features": [[1e300], [0.0]]}, "finite"),  # float64 beyond float32: infinity
    ],
)
def test_the_python_api_refuses_labels_and_features_that_break_metrics(change, message):
    fields = dict(
        features=[[0.5], [0.1]],
        labels=[1, 0],
        query_offsets=[0],
        query_lengths=[2],
        query_ids=["q"],
    )
    with pytest.raises(ValueError, match=message):
        data.RankingDataset(**{**fields, **change})


# ---------------------------------------------------------------------------------------
# 3. Every output path is claimed and probed before any work
# ---------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "module, args, flag",
    [
        ("paper_budget", ["--recipes=fpdgd_fig2"], "--output"),
        ("benchmark", ["--suite", "--suite_clients=10"], "--suite_output"),
        ("report", ["--results_dir={tmp}"], "--output_dir"),
    ],
)
def test_binaries_refuse_an_unusable_output_before_measuring(module, args, flag, tmp_path):
    (tmp_path / "taken").write_text("a file where a folder must go")
    target = tmp_path / "taken" / "out"
    args = [a.format(tmp=tmp_path) for a in args]
    done = binaries.run(module, *args, f"{flag}={target}", timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(f"{module}: error: {flag}: ")
    assert "interactions/s" not in done.stdout and "recipe" not in done.stdout


def _stored(path):
    """(header, arrays) of a stored .npz, read as plain data."""
    with np.load(path, allow_pickle=False) as z:
        header = json.loads(str(z["meta"][()]))
        return header, [z[f"a{i}"] for i in range(header["arrays"])]


def _store(path, header, arrays, checksum=True):
    """Writes a stored .npz by hand, as a hostile or buggy tool would: any header (even
    JSON's Infinity), the checksum recomputed unless ``checksum`` is False."""
    if checksum:
        header = {**header, "sha256": files.arrays_digest(arrays)}
    entries = {f"a{i}": a for i, a in enumerate(arrays)}
    np.savez(path, meta=np.str_(json.dumps(header)), **entries)


def _finished_toy(tmp_path):
    checkpoint = tmp_path / ".checkpoint.npz"
    state, _, _, _ = _toy(breaks_at=99, checkpoint=str(checkpoint))
    return checkpoint, np.asarray(state)


def _edit_meta(header, **meta):
    return {**header, "meta": {**header["meta"], **meta}}


@pytest.mark.parametrize(
    "damage, reason",
    [
        ("done_off_chunk", "not whole chunks"),
        ("infinite_seconds", "finite seconds"),
        ("nan_state", "not finite"),
        ("swapped_arrays", "checksum"),
    ],
)
def test_a_checkpoint_consistent_in_its_header_but_not_its_content_is_rebuilt(
    damage, reason, tmp_path
):
    checkpoint, whole = _finished_toy(tmp_path)
    header, arrays = _stored(checkpoint)  # arrays: state [3, 2], outputs [9, 3]
    if damage == "done_off_chunk":
        _store(checkpoint, _edit_meta(header, done=4), [arrays[0], arrays[1][:4]])
    elif damage == "infinite_seconds":
        _store(checkpoint, _edit_meta(header, seconds={"compile": 1.0, "run": math.inf}), arrays)
    elif damage == "nan_state":
        _store(checkpoint, header, [np.full_like(arrays[0], np.nan), arrays[1]])
    else:
        _store(checkpoint, header, [arrays[0] + 1, arrays[1]], checksum=False)
    with pytest.warns(RuntimeWarning, match=reason) as caught:
        state, _, _, _ = _toy(breaks_at=99, checkpoint=str(checkpoint))
    assert len(caught) == 1
    np.testing.assert_array_equal(np.asarray(state), whole)  # started over, same result
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # replaced: the next run resumes from it silently
        _toy(breaks_at=99, checkpoint=str(checkpoint))


def test_a_failed_checkpoint_save_keeps_the_previous_one_and_ends_in_one_line(
    tmp_path, monkeypatch
):
    checkpoint = tmp_path / ".checkpoint.npz"
    real, calls = loop._save_checkpoint, []

    def disk_fills(*args):
        calls.append(args)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(*args)

    monkeypatch.setattr(loop, "_save_checkpoint", disk_fills)
    with pytest.raises(OutputError) as caught, stop_cleanly():
        _toy(breaks_at=99, checkpoint=str(checkpoint))
    message = str(caught.value)
    assert message.startswith("--checkpoint: cannot save") and "No space left" in message
    assert "the checkpoint of round 3 is kept: the same command resumes" in message
    assert "\n" not in message
    header, _ = _stored(checkpoint)
    assert header["meta"]["done"] == 3  # the first chunk's save, intact
    monkeypatch.setattr(loop, "_save_checkpoint", real)
    state, _, _, _ = _toy(breaks_at=99, checkpoint=str(checkpoint))  # resumes from it
    np.testing.assert_array_equal(np.asarray(state), np.full((3, 2), 9.0))


def test_a_failed_first_checkpoint_save_does_not_claim_one_is_kept(tmp_path, monkeypatch):
    def disk_full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(loop, "_save_checkpoint", disk_full)
    with pytest.raises(OutputError) as caught, stop_cleanly():
        _toy(breaks_at=99, checkpoint=str(tmp_path / ".checkpoint.npz"))
    message = str(caught.value)
    assert "after round 3" in message and "is kept" not in message
    assert message.endswith("no checkpoint was saved before: the same command starts over")


# ---------------------------------------------------------------------------------------
# 5. Integers are range-checked where they are read; configs check types, naming the field
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, field, words",
    [
        (lambda: FpdgdConfig(rounds=2.5), "rounds", "must be an int"),
        (lambda: FpdgdConfig(n_clients="10"), "n_clients", "must be an int"),
        (lambda: FpdgdConfig(n_runs=True), "n_runs", "must be an int"),
        (lambda: FpdgdConfig(learning_rate="0.1"), "learning_rate", "must be a float"),
        (lambda: FpdgdConfig(ranker=3), "ranker", "must be a str"),
        (lambda: FpdgdConfig(seed=2**64), "seed", "0..4294967295"),
        (lambda: FpdgdConfig(seed=-1), "seed", "0..4294967295"),
        (lambda: FpdgdConfig(rounds=2**31), "rounds", "2147483647"),
        (lambda: FedIpsConfig(n_users=1.5), "n_users", "must be an int"),
        (lambda: FoltrEsConfig(local_updates="4"), "local_updates", "must be an int"),
    ],
)
def test_python_configs_name_the_field_of_a_wrong_type_or_range(make, field, words):
    with pytest.raises(ConfigError) as caught:
        make().validate()
    assert caught.value.field == field and words in caught.value.message


def test_a_grid_cell_of_a_wrong_type_names_the_field():
    with pytest.raises(ConfigError, match="^n_malicious must be an int"):
        Setting(n_malicious=1.0).validate(10)


def test_numpy_numbers_are_accepted_where_python_ones_are():
    config = FpdgdConfig(rounds=np.int64(3), learning_rate=np.float32(0.1), seed=np.uint32(7))
    config.validate()


@pytest.mark.slow
@pytest.mark.parametrize(
    "flag, message",
    [
        (f"--seed={2**64}", "--seed: must lie in 0..4294967295"),
        (f"--rounds={2**31}", "--rounds: must lie in"),
        ("--synthetic_docs_per_query=inf", "--synthetic_docs_per_query must lie in 2.."),
        ("--synthetic_docs_per_query=nan", "--synthetic_docs_per_query must lie in 2.."),
        (f"--synthetic_queries={10**12}", "--synthetic_queries must lie in 1..2147483647"),
        (f"--synthetic_queries={10**9}", "--synthetic_queries: about"),
        ("--synthetic_seed=-1", "--synthetic_seed must lie in 0.."),
        ("--fold_dir=somewhere", "--fold_dir: given with --train_path"),
        ("--output_dir=", "--output_dir: empty"),
    ],
)
def test_binaries_refuse_out_of_range_and_conflicting_flags_in_one_line(flag, message, tmp_path):
    args = [f"--output_dir={tmp_path / 'out'}", "--rounds=2", flag]
    if flag.startswith("--fold_dir"):
        args += ["--train_path=a.txt", "--test_path=b.txt"]
    done = binaries.run("fpdgd", *args, timeout=120)
    assert done.returncode == 2, done.stderr
    (line,) = [x for x in done.stderr.splitlines() if "error" in x]
    assert line.startswith("fpdgd: error: " + message.split(" ")[0].rstrip(":")), line
    assert message in line, line
    assert not (tmp_path / "out").exists() and "Traceback" not in done.stderr


# ---------------------------------------------------------------------------------------
# 6. Names are unique by construction; conflicts are refused; a batch redoes unreadable runs
# ---------------------------------------------------------------------------------------


def test_cells_whose_values_print_alike_get_distinct_names():
    names = unique_names(
        ["perfect_eps1_delta5", "perfect_eps1_delta5", "perfect_eps4.5_delta5"],
        ["perfect_eps1.0000001_delta5.0", "perfect_eps1.0000002_delta5.0", "x"],
        "privacy_grid",
    )
    assert names == [
        "perfect_eps1.0000001_delta5.0",
        "perfect_eps1.0000002_delta5.0",
        "perfect_eps4.5_delta5",
    ]


def test_the_same_cell_asked_for_twice_is_refused_naming_the_flag():
    with pytest.raises(UserError, match="^--prox_mu: the cell fedprox_mu=0.1 is asked"):
        unique_names(["fedprox_mu=0.1"] * 2, ["fedprox_mu=0.1"] * 2, "prox_mu")


@pytest.mark.slow
def test_a_privacy_grid_of_close_epsilons_writes_two_folders(tmp_path):
    done = binaries.run(
        "fpdgd",
        *_fpdgd_flags(tmp_path, "--learning_rate=0.1", "--privacy_grid=1.0000001:5,1.0000002:5"),
    )
    assert done.returncode == 0, done.stderr
    cells = json.loads((tmp_path / "out" / "grid.json").read_text())["cells"]
    assert len(set(cells)) == 2
    for cell in cells:
        results = json.loads((tmp_path / "out" / cell / "results.json").read_text())
        assert results["config"]["epsilon"] in (1.0000001, 1.0000002)


def test_a_batch_counts_only_readable_results_of_this_format_as_done(tmp_path, capsys):
    from experiments.lib import runs
    from foltr_jax.engine.results_files import RESULTS_FORMAT

    this_format = json.dumps({"results_format": RESULTS_FORMAT, "cells": []})
    run = tmp_path / "run"
    run.mkdir()
    assert not runs.complete(run)
    (run / "results.json").write_text('{"results_format": 2, "cells": [[0.5')  # truncated
    assert not runs.complete(run)
    assert "cannot be read as results; running it again" in capsys.readouterr().err
    (run / "results.json").write_text('{"offline_ndcg": [[0.5]]}')  # an older version's
    assert not runs.complete(run)
    assert "results format None (this version writes" in capsys.readouterr().err
    (run / "results.json").write_text(this_format)
    assert runs.complete(run)
    grid = tmp_path / "grid"
    grid.mkdir()
    (grid / "grid.json").write_text('{"cells": ["a", "b"]}')
    (grid / "a").mkdir()
    (grid / "a" / "results.json").write_text(this_format)
    assert not runs.complete(grid)  # cell b is missing
    (grid / "b").mkdir()
    (grid / "b" / "results.json").write_text(json.dumps({"results_format": 1}))
    assert not runs.complete(grid)  # cell b is of another format
    (grid / "b" / "results.json").write_text(this_format)
    assert runs.complete(grid)


# ---------------------------------------------------------------------------------------
# 7. Files are created with the user's umask
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_results_checkpoints_and_cache_entries_follow_the_umask(mask, tmp_path):
    old = os.umask(mask)
    try:
        assert files.umask() == mask
        output = Output(tmp_path / "out", checkpoints=True)
        written = [output.write_json("results.json", {"x": 1})]
        checkpoint = output.checkpoint()
        _toy(breaks_at=99, total=3, checkpoint=checkpoint)
        written.append(pathlib.Path(checkpoint))
        path, _cache, entry = _cached(tmp_path)
        written.append(entry)
        for path in written:
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o666 & ~mask, path
        output.finish()
    finally:
        os.umask(old)


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["paths", "fold"])
def test_training_data_without_any_feature_is_refused_in_one_line(layout, tmp_path):
    fold = tmp_path / "Fold1"
    fold.mkdir()
    for name in ("train.txt", "test.txt"):
        (fold / name).write_text("1 qid:1\n0 qid:1\n1 qid:2\n0 qid:2\n")
    data_flags = (
        [f"--fold_dir={fold}"]
        if layout == "fold"
        else [f"--train_path={fold / 'train.txt'}", f"--test_path={fold / 'test.txt'}"]
    )
    done = binaries.run(
        "fpdgd",
        *data_flags,
        f"--output_dir={tmp_path / 'out'}",
        "--rounds=2",
        cache_dir=tmp_path / "cache",
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    (line,) = [x for x in done.stderr.splitlines() if "error" in x]
    assert "no line" in line and "carries a feature" in line
    assert not (tmp_path / "out").exists()


def test_deeply_nested_json_given_to_the_report_is_one_line(tmp_path):
    from experiments.lib import series

    path = tmp_path / "results.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(series.ReportError, match="nested too deeply"):
        series.read_results(path, "x")
