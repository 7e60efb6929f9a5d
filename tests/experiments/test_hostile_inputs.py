"""Broken and hostile inputs: stored files that would run code or pass for
other data, output folders that cannot take the results, two runs in one folder, labels
and numbers out of range, unreadable or compressed files, bad flag values, and timings
after a resume.  Each test is named after its hazard; most call the library directly."""

import bz2
import functools
import gzip
import io
import json
import os
import pathlib
import pickle
import time
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from experiments.lib.cli import ProgressLog
from experiments.lib.output import FinishedParts, Output
from foltr_jax import FedIpsConfig, FpdgdConfig, Setting, data
from foltr_jax.core import click_models, files
from foltr_jax.data import dataset_cache
from foltr_jax.engine import loop
from foltr_jax.engine.config import ConfigError
from foltr_jax.engine.results_files import OutputError, timings
from foltr_jax.methods.fpdgd import federation
from tests import binaries

LETOR = "2 qid:1 1:0.5 2:0.1\n0 qid:1 1:0.1 2:0.9\n1 qid:2 1:0.3 2:0.3\n0 qid:2 1:0.7 2:0.2\n"


class _Planted:
    """Unpickling this creates the marker file: the code a hostile file would run."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _plant(path: pathlib.Path, marker: pathlib.Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps({"fingerprint": "x", "state": _Planted(marker)}))


class Out(NamedTuple):
    total: jax.Array
    norm: jax.Array


@functools.partial(jax.jit, static_argnums=(0, 1))
def _toy_chunk(static, n, consts, state, first):
    """n steps of a toy run whose state is shaped like a real one (params, optax state)."""

    def step(state, t):
        params, opt = state
        updates, opt = optax.adam(0.1).update({"w": consts * t}, opt)
        params = optax.apply_updates(params, updates)
        return (params, opt), Out(params["w"].sum(), jnp.linalg.norm(params["w"]))

    return jax.lax.scan(step, state, first + jnp.arange(n, dtype=jnp.float32))


class _Run(NamedTuple):
    curves: np.ndarray
    compile_seconds: float
    run_seconds: float


def toy_run(checkpoint=None, progress=None, total=6) -> _Run:
    """A 6-step run in chunks of 2 through loop.scan_in_chunks."""
    params = {"w": jnp.zeros(3)}
    state = (params, optax.adam(0.1).init(params))
    _, outputs, compile_seconds, run_seconds = loop.scan_in_chunks(
        _toy_chunk, "toy", jnp.arange(3.0), state, total, 2, progress, checkpoint
    )
    curves = np.stack([np.concatenate([np.asarray(f) for f in o]) for o in zip(*outputs)])
    return _Run(curves, compile_seconds, run_seconds)


@pytest.fixture(scope="module")
def whole() -> _Run:
    return toy_run()


# 1. Resuming never runs what sits in the output folder ---------------------------------


def test_planted_pickle_checkpoint_is_never_unpickled(whole, tmp_path):
    marker, checkpoint = tmp_path / "ran", tmp_path / ".checkpoint.npz"
    _plant(checkpoint, marker)
    with pytest.warns(RuntimeWarning, match="ignoring .*not a foltr_jax .npz"):
        result = toy_run(str(checkpoint))
    assert not marker.exists()
    np.testing.assert_array_equal(whole.curves, result.curves)
    # An .npz with a valid header whose array is a pickled object: refused, not run.
    meta = {"format": files.ARRAYS_FORMAT, "version": files.ARRAYS_VERSION, "arrays": 1}
    header = {**meta, "code": files.code_version(), "fingerprint": "f", "meta": {}}
    with open(checkpoint, "wb") as stream:
        np.savez(stream, meta=np.str_(json.dumps(header)), a0=np.array([_Planted(marker)]))
    with pytest.raises(files.StoredFileError, match="unreadable"):
        files.load_arrays(checkpoint, "f")
    assert not marker.exists()


def test_planted_finished_part_and_old_pickles_are_never_unpickled(tmp_path):
    marker = tmp_path / "ran"
    finished = FinishedParts(tmp_path / "out" / ".phases")
    _plant(tmp_path / "out" / ".phases" / "honest.npz", marker)
    _plant(tmp_path / "out" / ".phases" / "malicious.pkl", marker)  # the old format
    _plant(tmp_path / "out" / ".checkpoint-honest.pkl", marker)
    with pytest.warns(UserWarning, match="not a foltr_jax .npz"):
        assert finished.load("honest", "f") is None
    with pytest.warns(UserWarning, match="2 pickle file.*never loaded"):
        Output(tmp_path / "out").finish()
    assert not marker.exists()
    result = {"curve": np.arange(3.0), "params": ({"w": np.ones(2)}, None), "n": 3, "s": "x"}
    finished.save("honest", "f", result)
    back = finished.load("honest", "f")
    np.testing.assert_array_equal(back["curve"], result["curve"])
    assert back["params"][1] is None and back["n"] == 3 and back["s"] == "x"
    with pytest.warns(UserWarning, match="other settings"):
        assert finished.load("honest", "other fingerprint") is None


def _header(path) -> dict:
    with np.load(path, allow_pickle=False) as z:
        return json.loads(str(z["meta"][()]))


def test_checkpoint_of_other_code_is_not_resumed_silently(whole, tmp_path):
    checkpoint = tmp_path / ".checkpoint.npz"
    toy_run(str(checkpoint))
    key = _header(checkpoint)["fingerprint"]
    meta, stored = files.load_arrays(checkpoint, key)
    files.save_arrays(checkpoint, key, meta, stored, code="0ld")
    seen = []
    with pytest.warns(RuntimeWarning, match="written by other code"):
        result = toy_run(str(checkpoint), progress=lambda *a: seen.append(a))
    assert [done for done, _, _ in seen] == [2, 4, 6]  # started over, no resume
    np.testing.assert_array_equal(whole.curves, result.curves)


# 2. The parse cache cannot lie ----------------------------------------------------------


def _entry(cache: pathlib.Path) -> pathlib.Path:
    (entry,) = cache.glob("*.npz")
    return entry


def _rewrite(entry: pathlib.Path, **changes) -> None:
    """Changes arrays of a cache entry and, as a careful forger would, its checksum: the
    content checks behind the checksum still refuse it."""
    with np.load(entry, allow_pickle=False) as z:
        stored = {k: z[k] for k in z.files}
    stored.update(changes)
    stored["arrays_sha256"] = np.str_(dataset_cache.checksum(stored))
    np.savez(entry, **stored)


@pytest.mark.parametrize(
    "hazard, change, reason",
    [
        ("other data under this file's name", "other", "made from other data"),
        ("wrong number of columns", "columns", "feature columns"),
        ("NaN features", "nan", "non-finite"),
        ("labels out of range", "labels", "labels outside"),
    ],
)
def test_cache_entry_that_does_not_prove_its_source_is_rebuilt(tmp_path, hazard, change, reason):
    path, cache = tmp_path / "train.txt", tmp_path / "cache"
    path.write_text(LETOR)
    fresh = data.read_letor(path, n_features=2, use_cache=False)
    data.read_letor(path, n_features=2, cache_dir=cache)
    entry = _entry(cache)
    if change == "other":  # a valid entry of another file, stored under this file's name
        other = tmp_path / "other.txt"
        other.write_text(LETOR.replace("2 qid:1", "1 qid:1"))
        data.read_letor(other, n_features=2, cache_dir=tmp_path / "c2")
        _entry(tmp_path / "c2").replace(entry)
    elif change == "columns":
        with np.load(entry, allow_pickle=False) as z:
            _rewrite(entry, features=np.zeros((z["features"].shape[0], 3), np.float32))
    elif change == "nan":
        with np.load(entry, allow_pickle=False) as z:
            _rewrite(entry, features=np.where(z["features"] > 0.5, np.nan, z["features"]))
    else:
        with np.load(entry, allow_pickle=False) as z:
            _rewrite(entry, labels=z["labels"] + 1000)
    with pytest.warns(RuntimeWarning, match=f"unusable cache file .*{reason}"):
        again = data.read_letor(path, n_features=2, cache_dir=cache)
    np.testing.assert_array_equal(again.features, fresh.features)
    np.testing.assert_array_equal(again.labels, fresh.labels)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # rebuilt: the next read uses it silently
        data.read_letor(path, n_features=2, cache_dir=cache)


# 3. Output problems show before any work, and computed work is never lost --------------


def test_results_that_cannot_be_written_keep_the_checkpoint(whole, tmp_path):
    output = Output(tmp_path / "out", checkpoints=True)
    checkpoint = output.checkpoint()  # named by the run: finish removes it
    toy_run(checkpoint)
    (output.path / "results.json").mkdir()  # broken after the claim
    with pytest.raises(OutputError, match="^--output_dir: cannot write .*checkpoints are kept"):
        output.write_json("results.json", {"curve": whole.curves.tolist()})
    assert os.path.exists(checkpoint)
    seen = []  # the same command again: the finished run comes back without computing
    again = toy_run(checkpoint, progress=lambda *a: seen.append(a))
    assert seen == [(6, 6, 0.0)]
    np.testing.assert_array_equal(whole.curves, again.curves)
    (output.path / "results.json").rmdir()
    output.write_json("results.json", {"curve": again.curves.tolist()})
    output.finish()
    assert sorted(p.name for p in output.path.iterdir()) == ["results.json"]


def test_results_json_as_a_folder_stops_the_binary_before_any_work(tmp_path):
    (tmp_path / "out" / "results.json").mkdir(parents=True)
    done = binaries.call(
        "fpdgd",
        "--rounds=2",
        "--n_clients=2",
        f"--output_dir={tmp_path / 'out'}",
        cache_dir=tmp_path / "cache",
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fpdgd: error: --output_dir: "), lines
    assert "results.json is not a file" in lines[0]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["results.json"]


# 4. Labels and numbers -----------------------------------------------------------------


@pytest.mark.parametrize("label", ["99999999999", "200", "32"])
def test_label_too_large_for_the_gain_names_file_and_line(tmp_path, label):
    path = tmp_path / "big.txt"
    path.write_text(LETOR + f"{label} qid:3 1:0.1\n")
    with pytest.raises(data.LetorFormatError, match=f"^{path}:5: label '{label}' is above 31"):
        data.read_letor(path, use_cache=False)


def test_labels_above_the_click_tables_warn_that_they_are_clipped():
    with pytest.warns(RuntimeWarning, match="labels go up to 4 .* 3 grades.*clicked as grade 2"):
        assert click_models.table_grades(3, 4) == 3
    with pytest.warns(RuntimeWarning, match="labels go up to 9 .* 5 grades"):
        assert click_models.table_grades(0, 9) == 5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert click_models.table_grades(0, 2) == 3 and click_models.table_grades(5, 4) == 5
    train, test = data.synthetic_train_test(0, n_train_queries=10, n_test_queries=5)
    with pytest.warns(RuntimeWarning, match="clicked as grade 1"):
        federation.build(FpdgdConfig(n_clients=2, n_grades=2), train, test)


def test_test_split_without_relevant_documents_warns(tmp_path):
    fold = tmp_path / "Fold1"
    fold.mkdir()
    (fold / "train.txt").write_text(LETOR)
    (fold / "test.txt").write_text("0 qid:5 1:0.1\n0 qid:5 1:0.3\n")
    with pytest.warns(RuntimeWarning, match="test.txt: no document has a label above 0"):
        data.load_fold(fold, use_cache=False)


# 5. Files ------------------------------------------------------------------------------


def test_unreadable_file_is_one_line_naming_it(tmp_path):
    if os.geteuid() == 0:  # root reads any mode: a file the kernel refuses to read
        path = pathlib.Path("/proc/self/mem")
        if not path.exists():
            pytest.skip("no /proc/self/mem")
    else:
        path = tmp_path / "locked.txt"
        path.write_text(LETOR)
        path.chmod(0)
    for use_cache in (True, False):
        with pytest.raises(data.DatasetError, match=f"^{path}: cannot read it"):
            data.read_letor(path, use_cache=use_cache, cache_dir=tmp_path / "cache")


def test_folder_passed_as_a_file_is_called_a_folder(tmp_path):
    with pytest.raises(data.DatasetError, match=f"^{tmp_path}: a folder, not a data file"):
        data.read_letor(tmp_path, use_cache=False)
    with pytest.raises(data.DatasetError, match="no such file"):
        data.read_letor(tmp_path / "missing.txt", use_cache=False)


def test_gzip_letor_file_is_read_and_other_compression_is_named(tmp_path):
    plain, packed = tmp_path / "train.txt", tmp_path / "train.txt.gz"
    plain.write_text(LETOR)
    packed.write_bytes(gzip.compress(LETOR.encode()))
    expected = data.read_letor(plain, use_cache=False)
    for _ in range(2):  # parsed, then from the cache
        got = data.read_letor(packed, cache_dir=tmp_path / "cache")
        np.testing.assert_array_equal(got.features, expected.features)
        np.testing.assert_array_equal(got.labels, expected.labels)
    bad_line = tmp_path / "bad.txt.gz"
    bad_line.write_bytes(gzip.compress((LETOR + "x qid:3 1:1\n").encode()))
    with pytest.raises(data.LetorFormatError, match=f"^{bad_line}:5: non-numeric label 'x'"):
        data.read_letor(bad_line, use_cache=False)
    truncated = tmp_path / "cut.txt.gz"
    truncated.write_bytes(gzip.compress(LETOR.encode() * 50)[:40])
    with pytest.raises(data.DatasetError, match=f"^{truncated}: cannot read it"):
        data.read_letor(truncated, use_cache=False)
    other = tmp_path / "train.txt.bz2"
    other.write_bytes(bz2.compress(LETOR.encode()))
    with pytest.raises(data.DatasetError, match=f"^{other}: bzip2-compressed, not a LETOR"):
        data.read_letor(other, use_cache=False)
    binary = tmp_path / "blob.txt"
    binary.write_bytes(b"1 qid:1 \x00\x01\x02")
    with pytest.raises(data.DatasetError, match=f"^{binary}: binary data"):
        data.read_letor(binary, use_cache=False)


# 6. Flags ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: FpdgdConfig(learning_rate=float("inf")).validate(), "learning_rate"),
        (lambda: FpdgdConfig(learning_rate=float("nan")).validate(), "learning_rate"),
        (lambda: FpdgdConfig(sensitivity=float("inf"), epsilon=1.0).validate(), "sensitivity"),
        (lambda: FpdgdConfig(clip_factor=float("inf")).validate(), "clip_factor"),
        (lambda: FedIpsConfig(local_lr=float("inf")).validate(), "local_lr"),
        (lambda: FedIpsConfig(global_lr=float("nan")).validate(), "global_lr"),
        (lambda: Setting(click_model="pbm:-0.5").validate(10), "click_model"),
        (lambda: Setting(click_model="pbm:inf").validate(10), "click_model"),
    ],
)
def test_non_finite_learning_rates_and_negative_pbm_eta_are_refused(make, field):
    with pytest.raises(ConfigError) as error:
        make()
    assert error.value.field == field
    Setting(click_model="pbm:0").validate(10)  # η = 0 (no position bias) stays valid


# 7. Honest timings after a resume ------------------------------------------------------


def test_timings_after_a_resume_cover_every_round(whole, tmp_path):
    checkpoint = str(tmp_path / ".checkpoint.npz")

    class Killed(Exception):
        pass

    def slow_then_killed(done, total, seconds):
        time.sleep(0.3)  # rounds 1-2 "took" 0.3 s more: counted in the saved time
        if done == 4:
            raise Killed

    with pytest.raises(Killed):
        toy_run(checkpoint, progress=slow_then_killed)
    log = ProgressLog("fpdgd", stream=io.StringIO())
    resumed = toy_run(checkpoint, progress=log)
    np.testing.assert_array_equal(whole.curves, resumed.curves)
    assert resumed.run_seconds >= 0.3  # not just the resumed chunk's milliseconds
    assert timings(log)["resumed_at_round"] == {"fpdgd": 4}
