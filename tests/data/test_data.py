"""Tests for foltr_jax.data: LETOR parser, normalisation, cache, synthetic data."""

import hashlib
import os
import pathlib
import warnings

import numpy as np
import pytest

from foltr_jax import data
from foltr_jax.data import (
    DatasetError,
    LetorFormatError,
    RankingDataset,
    letor,
    load_fold,
    normalise_per_query,
    ranking_dataset,
    read_letor,
    synthetic_dataset,
    synthetic_train_test,
)
from tests.sample_data import SAMPLE_DIR, needs_sample


def _write(tmp_path, text, name="data.txt"):
    p = tmp_path / name
    p.write_text(text)
    return p


def _files_in(d):
    d = pathlib.Path(d)
    return sorted(os.listdir(d)) if d.exists() else []


# ---------------------------------------------------------------------------
# Parser: well-formed input
# ---------------------------------------------------------------------------

SMALL = """# a header comment line
2 qid:10 1:0.5 3:1.5 # doc a
0 qid:10 2:2.0

1 qid:7 1:1 2:2 3:3
0 qid:7 3:-1.0   #trailing comment 9:9
4 qid:3
"""


def test_parse_small_unnormalised(tmp_path):
    ds = read_letor(_write(tmp_path, SMALL), normalise=False, cache_dir=tmp_path / "c")
    np.testing.assert_array_equal(
        ds.features,
        np.array([[0.5, 0, 1.5], [0, 2, 0], [1, 2, 3], [0, 0, -1], [0, 0, 0]], dtype=np.float32),
    )
    assert ds.features.dtype == np.float32
    np.testing.assert_array_equal(ds.labels, [2, 0, 1, 0, 4])
    assert ds.labels.dtype == np.int32
    np.testing.assert_array_equal(ds.query_offsets, [0, 2, 4])
    np.testing.assert_array_equal(ds.query_lengths, [2, 2, 1])
    assert ds.query_offsets.dtype == np.int32 and ds.query_lengths.dtype == np.int32
    assert list(ds.query_ids) == ["10", "7", "3"]
    assert ds.query_ids.dtype.kind == "U"
    assert (ds.n_docs, ds.n_queries, ds.n_features) == (5, 3, 3)
    assert ds.max_query_length == 2 and ds.max_label == 4
    assert ds.name.endswith("data")


def test_parse_small_normalised(tmp_path):
    ds = read_letor(_write(tmp_path, SMALL), cache_dir=tmp_path / "c")
    np.testing.assert_array_equal(
        ds.features,
        np.array(
            [
                [1, 0, 1],
                [0, 1, 0],  # qid 10
                [1, 1, 1],
                [0, 0, 0],  # qid 7
                [0, 0, 0],
            ],  # qid 3: one document -> constant -> 0
            dtype=np.float32,
        ),
    )
    np.testing.assert_array_equal(ds.labels, [2, 0, 1, 0, 4])


def test_parse_explicit_n_features_pads(tmp_path):
    ds = read_letor(
        _write(tmp_path, SMALL), normalise=False, n_features=5, cache_dir=tmp_path / "c"
    )
    assert ds.features.shape == (5, 5)
    np.testing.assert_array_equal(ds.features[:, 3:], 0)
    np.testing.assert_array_equal(ds.features[2], [1, 2, 3, 0, 0])


def test_parse_crlf_tabs_unsorted_ids_no_final_newline(tmp_path):
    text = "1\tqid:a\t3:3\t1:1e-1\r\n0 qid:a  2:+.5 \r\n3 qid:b 2:7"
    ds = read_letor(_write(tmp_path, text), normalise=False, cache_dir=tmp_path / "c")
    np.testing.assert_allclose(ds.features, [[0.1, 0, 3], [0, 0.5, 0], [0, 7, 0]])
    np.testing.assert_array_equal(ds.labels, [1, 0, 3])
    assert list(ds.query_ids) == ["a", "b"]


def _random_letor(rng, n_queries=30, n_features=12):
    """Random sparse LETOR text plus the dense arrays it encodes."""
    lines, feats, labels, lengths = [], [], [], []
    for q in range(n_queries):
        n = int(rng.integers(1, 9))
        lengths.append(n)
        for _ in range(n):
            row = np.zeros(n_features)
            ids = np.flatnonzero(rng.random(n_features) < 0.6) + 1
            vals = np.round(rng.normal(size=ids.size) * 10, 3)
            row[ids - 1] = vals
            label = int(rng.integers(0, 5))
            toks = " ".join(f"{i}:{v}" for i, v in zip(ids, vals))
            comment = " # doc" if rng.random() < 0.3 else ""
            lines.append(f"{label} qid:{1000 + q} {toks}{comment}")
            feats.append(row)
            labels.append(label)
    feats = np.array(feats, dtype=np.float32)
    return "\n".join(lines) + "\n", feats, np.array(labels), np.array(lengths)


@pytest.mark.parametrize("block_bytes", [None, 97])
def test_parse_random_file_matches_reference(tmp_path, monkeypatch, block_bytes):
    # A tiny read block makes every chunk boundary fall somewhere inside a line.
    if block_bytes is not None:
        monkeypatch.setattr(letor, "_READ_BLOCK_BYTES", block_bytes)
    text, feats, labels, lengths = _random_letor(np.random.default_rng(3))
    ds = read_letor(_write(tmp_path, text), normalise=False, n_features=12, use_cache=False)
    np.testing.assert_array_equal(ds.features, feats)
    np.testing.assert_array_equal(ds.labels, labels)
    np.testing.assert_array_equal(ds.query_lengths, lengths)
    np.testing.assert_array_equal(ds.query_offsets, np.cumsum(lengths) - lengths)
    assert list(ds.query_ids) == [str(1000 + q) for q in range(len(lengths))]


# ---------------------------------------------------------------------------
# Normalisation
# ---------------------------------------------------------------------------


def test_normalise_exact_values():
    x = np.array([[1, 10, -2], [3, 10, 0], [2, 10, 2], [5, 0, 7]], dtype=np.float32)
    out = normalise_per_query(x, np.array([0, 3]), np.array([3, 1]))
    np.testing.assert_array_equal(
        out, np.array([[0, 0, 0], [1, 0, 0.5], [0.5, 0, 1], [0, 0, 0]], dtype=np.float32)
    )
    assert out.dtype == np.float32
    assert x[0, 0] == 1  # input untouched


def _slow_normalise(x, offsets, lengths):
    out = np.zeros(x.shape, dtype=np.float64)
    for off, n in zip(offsets, lengths):
        for f in range(x.shape[1]):
            col = [float(v) for v in x[off : off + n, f]]
            lo, hi = min(col), max(col)
            for r in range(n):
                out[off + r, f] = 0.0 if hi == lo else (col[r] - lo) / (hi - lo)
    return out


@pytest.mark.parametrize("block_rows", [None, 5])
def test_normalise_matches_slow_reference(monkeypatch, block_rows):
    if block_rows is not None:  # force many blocks, incl. queries longer than a block
        monkeypatch.setattr(ranking_dataset, "_NORMALISE_BLOCK_ROWS", block_rows)
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 12, size=40)
    offsets = np.cumsum(lengths) - lengths
    x = (rng.normal(size=(lengths.sum(), 6)) * 100).astype(np.float32)
    x[:, 2] = 4.0  # constant everywhere
    x[offsets[3] : offsets[3] + lengths[3], 1] = -7  # constant within one query
    out = normalise_per_query(x, offsets, lengths)
    np.testing.assert_allclose(out, _slow_normalise(x, offsets, lengths), rtol=0, atol=1e-6)
    assert out.min() >= 0 and out.max() <= 1
    np.testing.assert_array_equal(out[:, 2], 0)
    np.testing.assert_array_equal(out[offsets[3] : offsets[3] + lengths[3], 1], 0)
    multi = lengths > 1
    # every non-constant feature of every multi-doc query reaches exactly 0 and 1
    q_max = np.maximum.reduceat(out, offsets, axis=0)
    assert np.all(q_max[multi][:, [0, 3, 4, 5]] == 1.0)


def test_normalise_rejects_unpacked_queries():
    with pytest.raises(ValueError):
        normalise_per_query(np.zeros((4, 2)), np.array([0, 3]), np.array([2, 2]))


# ---------------------------------------------------------------------------
# Parser: malformed input
# ---------------------------------------------------------------------------

GOOD = "1 qid:1 1:0.5 2:0.25\n"

MALFORMED = {
    "missing_qid": (GOOD + "0 1:0.3 2:0.1\n", 2, "qid"),
    "missing_qid_label_only": (GOOD + "# c\n\n0\n", 4, "qid"),
    "non_numeric_value": (GOOD + GOOD + "1 qid:1 1:abc\n", 3, "non-numeric"),
    "non_numeric_label": (GOOD + "x qid:1 1:0.5\n", 2, "label"),
    "negative_label": ("-1 qid:1 1:0.5\n", 1, "negative label"),
    "fractional_label": ("1.5 qid:1 1:0.5\n", 1, "integer"),
    "malformed_token_two_colons": (GOOD + "1 qid:1 1:0.5:3\n", 2, "malformed"),
    "malformed_token_no_colon": (GOOD + "1 qid:1 1:0.5 7\n", 2, "malformed"),
    "malformed_token_empty_value": (GOOD + "1 qid:1 3:\n", 2, "malformed"),
    "malformed_token_bad_id": (GOOD + "1 qid:1 a:0.3\n", 2, "malformed"),
    "value_two_numbers": (GOOD + "1 qid:1 1:1.2.3\n", 2, "non-numeric"),
    "feature_id_zero": (GOOD + GOOD + "0 qid:1 0:0.3\n", 3, "feature id 0"),
    "feature_id_negative": (GOOD + "0 qid:1 -2:0.3\n", 2, "feature id -2"),
    "duplicate_feature_id": (GOOD + "0 qid:1 2:0.3 2:0.4\n", 2, "duplicate"),
    "non_finite_value": (GOOD + "0 qid:1 1:nan\n", 2, "non-numeric"),
    "overflow_value": (GOOD + "0 qid:1 1:1e300\n", 2, "float32"),
    "empty_qid": (GOOD + "0 qid: 1:0.3\n", 2, "qid"),
}


def _check_error(excinfo, path, line):
    msg = str(excinfo.value)
    assert msg.startswith(f"{path}:{line}: "), msg
    assert "\n" not in msg


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_line_raises_with_path_and_line(tmp_path, case):
    text, line, fragment = MALFORMED[case]
    path = _write(tmp_path, text)
    cache = tmp_path / "cache"
    with pytest.raises(LetorFormatError) as excinfo:
        read_letor(path, cache_dir=cache)
    _check_error(excinfo, path, line)
    assert fragment in str(excinfo.value)
    assert _files_in(cache) == []  # nothing cached, no temporary file left behind


def test_feature_id_above_n_features(tmp_path):
    path = _write(tmp_path, GOOD + "0 qid:1 1:0.1 4:0.3\n")
    with pytest.raises(LetorFormatError) as excinfo:
        read_letor(path, n_features=3, cache_dir=tmp_path / "cache")
    _check_error(excinfo, path, 2)
    assert "4" in str(excinfo.value) and "n_features=3" in str(excinfo.value)
    assert _files_in(tmp_path / "cache") == []
    # Without n_features the same file is fine and 4 features wide.
    assert read_letor(path, cache_dir=tmp_path / "cache").n_features == 4


def test_absurd_feature_id_without_n_features(tmp_path):
    path = _write(tmp_path, GOOD + f"0 qid:1 {data.MAX_FEATURE_ID + 1}:0.3\n")
    with pytest.raises(LetorFormatError) as excinfo:
        read_letor(path, use_cache=False)
    _check_error(excinfo, path, 2)


def test_non_contiguous_query_is_rejected(tmp_path):
    text = (
        "# header\n"
        "1 qid:A 1:1\n"  # line 2: block of A begins
        "0 qid:A 1:2\n"
        "2 qid:B 1:3\n"
        "\n"
        "0 qid:A 1:4\n"
    )  # line 6: A reappears
    path = _write(tmp_path, text)
    with pytest.raises(LetorFormatError) as excinfo:
        read_letor(path, cache_dir=tmp_path / "cache")
    _check_error(excinfo, path, 6)
    msg = str(excinfo.value)
    assert "'A'" in msg and "line 2" in msg and "contiguous" in msg
    assert _files_in(tmp_path / "cache") == []


def test_first_error_in_file_order_is_reported(tmp_path):
    # A feature error on line 2 comes before a header error on line 3.
    path = _write(tmp_path, GOOD + "1 qid:1 1:zz\n" + "1 1:0.5\n")
    with pytest.raises(LetorFormatError) as excinfo:
        read_letor(path, use_cache=False)
    _check_error(excinfo, path, 2)


def test_error_line_number_across_read_blocks(tmp_path, monkeypatch):
    monkeypatch.setattr(letor, "_READ_BLOCK_BYTES", 64)
    lines = [f"{i % 3} qid:{i // 10} 1:{i} 2:0.5" for i in range(300)]
    lines[236] = "1 qid:23 1:0.5 0:2"
    path = _write(tmp_path, "\n".join(lines) + "\n")
    with pytest.raises(LetorFormatError) as excinfo:
        read_letor(path, use_cache=False)
    _check_error(excinfo, path, 237)


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n   \n"])
def test_empty_file_raises_dataset_error(tmp_path, text):
    path = _write(tmp_path, text)
    with pytest.raises(DatasetError) as excinfo:
        read_letor(path, cache_dir=tmp_path / "cache")
    assert str(path) in str(excinfo.value)
    assert "no documents" in str(excinfo.value)
    assert _files_in(tmp_path / "cache") == []


def test_missing_file_raises_dataset_error(tmp_path):
    with pytest.raises(DatasetError, match="nope.txt"):
        read_letor(tmp_path / "nope.txt", use_cache=False)


# ---------------------------------------------------------------------------
# Cache
# ---------------------------------------------------------------------------


def _assert_same(a, b):
    np.testing.assert_array_equal(a.features, b.features)
    np.testing.assert_array_equal(a.labels, b.labels)
    np.testing.assert_array_equal(a.query_offsets, b.query_offsets)
    np.testing.assert_array_equal(a.query_lengths, b.query_lengths)
    np.testing.assert_array_equal(a.query_ids, b.query_ids)
    for name in ("features", "labels", "query_offsets", "query_lengths"):
        assert getattr(a, name).dtype == getattr(b, name).dtype


def _no_parse(*args, **kwargs):
    raise AssertionError("the file was parsed although it is cached")


def test_second_read_hits_cache(tmp_path, monkeypatch):
    path = _write(tmp_path, SMALL)
    cache = tmp_path / "cache"
    first = read_letor(path, cache_dir=cache)
    files = _files_in(cache)
    assert len(files) == 1 and files[0].endswith(".npz")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest in files[0]
    with np.load(cache / files[0], allow_pickle=False) as z:
        np.testing.assert_array_equal(z["features"], first.features)
        assert z["query_ids"].dtype.kind == "U"
    monkeypatch.setattr(letor, "parse_file", _no_parse)
    second = read_letor(path, cache_dir=cache)
    _assert_same(first, second)
    assert second.name == first.name


def test_cache_key_depends_on_content_and_settings(tmp_path):
    path = _write(tmp_path, SMALL)
    cache = tmp_path / "cache"
    a = read_letor(path, cache_dir=cache)
    read_letor(path, normalise=False, cache_dir=cache)
    read_letor(path, n_features=4, cache_dir=cache)
    assert len(_files_in(cache)) == 3
    path.write_text(SMALL.replace("4 qid:3", "3 qid:3"))
    b = read_letor(path, cache_dir=cache)
    assert len(_files_in(cache)) == 4
    assert a.labels[-1] == 4 and b.labels[-1] == 3


def test_use_cache_false_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("FOLTR_JAX_CACHE", str(tmp_path / "env_cache"))
    read_letor(_write(tmp_path, SMALL), use_cache=False)
    assert _files_in(tmp_path / "env_cache") == []


def test_default_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("FOLTR_JAX_CACHE", str(tmp_path / "env_cache"))
    assert data.default_cache_dir() == tmp_path / "env_cache"
    read_letor(_write(tmp_path, SMALL))  # cache_dir=None -> the default
    assert len(_files_in(tmp_path / "env_cache")) == 1
    monkeypatch.delenv("FOLTR_JAX_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data.default_cache_dir() == tmp_path / "home" / ".cache" / "foltr_jax"


def test_unwritable_cache_dir_warns_and_continues(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    path = _write(tmp_path, SMALL)
    with pytest.warns(RuntimeWarning, match="not writable"):
        ds = read_letor(path, cache_dir=blocker / "cache")
    _assert_same(ds, read_letor(path, use_cache=False))


def test_a_linked_cache_folder_or_entry_is_never_followed(tmp_path):
    """A symbolic link planted at the cache folder's name: one warning, the data read
    without the cache, nothing read from or written into the link's target.  One planted
    at an entry's name: never read, replaced by a real entry."""
    path = _write(tmp_path, SMALL)
    target = tmp_path / "theirs"
    target.mkdir()
    (target / "precious").write_text("the user's")
    os.symlink(target, tmp_path / "cache")
    with pytest.warns(RuntimeWarning, match="cache folder .*cache is a symbolic link") as caught:
        ds = read_letor(path, cache_dir=tmp_path / "cache")
    assert len(caught) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once per folder: a fold reads several files
        again = read_letor(path, cache_dir=tmp_path / "cache")
    _assert_same(ds, again)
    _assert_same(ds, read_letor(path, use_cache=False))
    assert _files_in(target) == ["precious"]

    cache = tmp_path / "real_cache"
    read_letor(path, cache_dir=cache)
    (entry,) = _files_in(cache)
    os.replace(cache / entry, target / entry)  # a sound entry, reached through a link
    os.symlink(target / entry, cache / entry)
    with pytest.warns(RuntimeWarning, match="symbolic link, which is never followed"):
        _assert_same(ds, read_letor(path, cache_dir=cache))
    assert not (cache / entry).is_symlink()  # replaced by the cache's own entry


def test_failed_cache_write_leaves_no_file(tmp_path, monkeypatch):
    path = _write(tmp_path, SMALL)
    cache = tmp_path / "cache"

    def broken_savez(fh, **arrays):
        fh.write(b"PK\x03\x04 partial")
        raise OSError("disk full")

    monkeypatch.setattr(data.np, "savez", broken_savez)
    with pytest.warns(RuntimeWarning, match="disk full"):
        ds = read_letor(path, cache_dir=cache)
    assert ds.n_docs == 5
    assert _files_in(cache) == []

    def interrupted_savez(fh, **arrays):
        fh.write(b"PK\x03\x04 partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(data.np, "savez", interrupted_savez)
    with pytest.raises(KeyboardInterrupt):
        read_letor(path, cache_dir=cache)
    assert _files_in(cache) == []


def test_corrupt_cache_file_is_replaced(tmp_path):
    path = _write(tmp_path, SMALL)
    cache = tmp_path / "cache"
    good = read_letor(path, cache_dir=cache)
    (entry,) = _files_in(cache)
    (cache / entry).write_bytes(b"garbage")
    with pytest.warns(RuntimeWarning, match="unusable cache"):
        again = read_letor(path, cache_dir=cache)
    _assert_same(good, again)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _assert_same(good, read_letor(path, cache_dir=cache))  # repaired


# ---------------------------------------------------------------------------
# load_fold
# ---------------------------------------------------------------------------


def test_load_fold(tmp_path):
    fold = tmp_path / "Fold1"
    fold.mkdir()
    _write(fold, SMALL, "train.txt")
    _write(fold, "1 qid:5 1:1 2:2\n0 qid:5 1:3\n", "test.txt")
    splits = load_fold(fold, cache_dir=tmp_path / "cache", normalise=False)
    assert sorted(splits) == ["test", "train"]
    assert splits["train"].n_queries == 3 and splits["test"].n_queries == 1
    # both splits share the widest feature space
    assert splits["test"].n_features == splits["train"].n_features == 3
    np.testing.assert_array_equal(splits["test"].features, [[1, 2, 0], [3, 0, 0]])
    assert splits["train"].name == "Fold1/train"

    _write(fold, "2 qid:9 3:1\n", "vali.txt")
    splits = load_fold(fold, cache_dir=tmp_path / "cache", n_features=4)
    assert sorted(splits) == ["test", "train", "vali"]
    assert all(ds.n_features == 4 for ds in splits.values())


def test_load_fold_missing_files(tmp_path):
    fold = tmp_path / "fold"
    fold.mkdir()
    _write(fold, SMALL, "train.txt")
    with pytest.raises(DatasetError, match="test.txt"):
        load_fold(fold, use_cache=False)
    (fold / "train.txt").rename(fold / "test.txt")
    with pytest.raises(DatasetError, match="train.txt"):
        load_fold(fold, use_cache=False)
    with pytest.raises(DatasetError):
        load_fold(tmp_path / "no_such_fold", use_cache=False)


# ---------------------------------------------------------------------------
# MSLR sample
# ---------------------------------------------------------------------------


def _reference_parse(path, n_features):
    feats, labels, qids = [], [], []
    for line in pathlib.Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].split()
        if not line:
            continue
        row = np.zeros(n_features)
        for tok in line[2:]:
            i, v = tok.split(":")
            row[int(i) - 1] = float(v)
        feats.append(row)
        labels.append(int(line[0]))
        qids.append(line[1][4:])
    return np.array(feats, dtype=np.float32), np.array(labels), qids


@needs_sample
def test_mslr_sample(tmp_path):
    path = SAMPLE_DIR / "train.txt"
    ds = read_letor(path, cache_dir=tmp_path / "cache")
    assert ds.n_queries == 43
    assert ds.n_features == 136
    assert ds.labels.min() >= 0 and ds.labels.max() <= 4
    assert ds.features.min() >= 0.0 and ds.features.max() <= 1.0
    assert ds.query_lengths.sum() == ds.n_docs and ds.query_lengths.min() >= 1

    raw = read_letor(path, normalise=False, cache_dir=tmp_path / "cache")
    feats, labels, qids = _reference_parse(path, 136)
    np.testing.assert_array_equal(raw.features, feats)
    np.testing.assert_array_equal(raw.labels, labels)
    assert list(raw.query_ids) == list(dict.fromkeys(qids))
    np.testing.assert_allclose(
        ds.features, normalise_per_query(feats, raw.query_offsets, raw.query_lengths)
    )


@needs_sample
def test_mslr_sample_fold(tmp_path):
    splits = load_fold(SAMPLE_DIR, cache_dir=tmp_path / "cache")
    assert {"train", "test"} <= set(splits)
    assert splits["test"].n_queries == 43 and splits["test"].n_features == 136


# ---------------------------------------------------------------------------
# RankingDataset
# ---------------------------------------------------------------------------


def _toy_dataset():
    feats = np.arange(12, dtype=np.float32).reshape(6, 2)
    return RankingDataset(
        features=feats,
        labels=np.array([0, 1, 2, 0, 1, 3]),
        query_offsets=np.array([0, 1, 4]),
        query_lengths=np.array([1, 3, 2]),
        query_ids=np.array(["a", "b", "c"]),
        name="toy",
    )


def test_subset_repacks():
    ds = _toy_dataset()
    sub = ds.subset([2, 0])
    np.testing.assert_array_equal(sub.features, ds.features[[4, 5, 0]])
    np.testing.assert_array_equal(sub.labels, [1, 3, 0])
    np.testing.assert_array_equal(sub.query_offsets, [0, 2])
    np.testing.assert_array_equal(sub.query_lengths, [2, 1])
    assert list(sub.query_ids) == ["c", "a"]
    assert sub.name == "toy" and sub.query_offsets.dtype == np.int32

    masked = ds.subset(np.array([False, True, True]))
    np.testing.assert_array_equal(masked.features, ds.features[1:])
    assert list(masked.query_ids) == ["b", "c"]
    assert ds.subset([-1]).query_ids[0] == "c"

    empty = ds.subset([])
    assert (empty.n_queries, empty.n_docs, empty.n_features) == (0, 0, 2)
    assert empty.max_query_length == 0
    with pytest.raises(IndexError):
        ds.subset([3])


def test_dataset_validation_and_properties():
    ds = _toy_dataset()
    assert (ds.n_docs, ds.n_queries, ds.n_features) == (6, 3, 2)
    assert ds.max_query_length == 3 and ds.max_label == 3
    assert ds.labels.dtype == np.int32 and ds.query_offsets.dtype == np.int32
    assert "n_queries=3" in repr(ds)
    with pytest.raises(ValueError):  # lengths do not sum to n_docs
        RankingDataset(
            ds.features, ds.labels, np.array([0, 1]), np.array([1, 3]), np.array(["a", "b"])
        )
    with pytest.raises(ValueError):  # offsets not packed
        RankingDataset(
            ds.features, ds.labels, np.array([0, 2, 4]), np.array([1, 3, 2]), ds.query_ids
        )
    with pytest.raises(ValueError):  # negative label
        RankingDataset(ds.features, -ds.labels, ds.query_offsets, ds.query_lengths, ds.query_ids)


# ---------------------------------------------------------------------------
# Synthetic data
# ---------------------------------------------------------------------------


def _ndcg_at_10(scores, ds):
    values = []
    for off, n in zip(ds.query_offsets, ds.query_lengths):
        labels = ds.labels[off : off + n].astype(np.float64)
        gains = 2.0**labels - 1
        ideal = np.sort(gains)[::-1][:10]
        disc = 1.0 / np.log2(np.arange(2, 12))
        idcg = (ideal * disc[: ideal.size]).sum()
        if idcg == 0:
            continue
        order = np.argsort(-scores[off : off + n], kind="stable")[:10]
        values.append((gains[order] * disc[: order.size]).sum() / idcg)
    return float(np.mean(values))


def test_synthetic_deterministic_and_shapes():
    a = synthetic_dataset(7, n_queries=50, n_features=10, mean_docs_per_query=20)
    b = synthetic_dataset(7, n_queries=50, n_features=10, mean_docs_per_query=20)
    c = synthetic_dataset(8, n_queries=50, n_features=10, mean_docs_per_query=20)
    _assert_same(a, b)
    assert not np.array_equal(a.query_lengths, c.query_lengths)
    assert a.n_queries == 50 and a.n_features == 10 and a.name == "synthetic"
    assert a.features.dtype == np.float32 and a.labels.dtype == np.int32
    assert a.features.min() >= 0 and a.features.max() <= 1
    assert a.query_lengths.min() >= 2
    assert len(set(a.query_ids)) == 50


def test_synthetic_label_and_length_distribution():
    ds = synthetic_dataset(0)
    assert ds.n_queries == 200 and ds.n_features == 32
    assert ds.labels.min() == 0 and ds.labels.max() == 4
    frac = np.bincount(ds.labels, minlength=5) / ds.n_docs
    np.testing.assert_allclose(frac, [0.52, 0.32, 0.13, 0.02, 0.01], atol=0.005)  # MSLR-WEB10K
    lengths = ds.query_lengths
    assert lengths.min() >= 2 and lengths.std() > 10  # long-tailed spread
    assert lengths.max() > 3 * np.median(lengths)
    assert 30 < lengths.mean() < 50  # mean ~40
    has_relevant = np.maximum.reduceat(ds.labels, ds.query_offsets) > 0
    assert has_relevant.mean() > 0.9

    three = synthetic_dataset(1, n_grades=3)
    frac3 = np.bincount(three.labels, minlength=3) / three.n_docs
    assert three.labels.max() == 2
    np.testing.assert_allclose(frac3, [0.74, 0.20, 0.06], atol=0.005)  # MQ2007
    # Held-out queries reuse the train thresholds: close to, not exactly, the shares
    # (100 queries with their own offsets and weights: 0.06 apart for seed 0, up to 0.10
    # over seeds 0-5).
    _, test = synthetic_train_test(0)
    frac_test = np.bincount(test.labels, minlength=5) / test.n_docs
    np.testing.assert_allclose(frac_test, [0.52, 0.32, 0.13, 0.02, 0.01], atol=0.07)
    # Query-level offsets: the share of relevant documents varies a lot between queries.
    share = np.add.reduceat(ds.labels > 0, ds.query_offsets) / ds.query_lengths
    assert share.std() > 0.2 and (share == 0).any() and (share > 0.8).any()

    capped = synthetic_dataset(0, max_docs_per_query=25)
    assert capped.max_query_length == 25


def test_synthetic_hidden_weights_are_learnable():
    rng = np.random.default_rng(0)
    w = rng.normal(size=16)
    ds = synthetic_dataset(3, n_features=16, hidden_weights=w)
    x = ds.features.astype(np.float64)
    hidden = _ndcg_at_10(x @ w, ds)
    random_ = np.mean([_ndcg_at_10(rng.random(ds.n_docs), ds) for _ in range(5)])
    inverted = _ndcg_at_10(-(x @ w), ds)
    assert hidden > random_ + 0.2, (hidden, random_)
    assert inverted < random_ - 0.05, (inverted, random_)
    with pytest.raises(ValueError):
        synthetic_dataset(0, n_features=16, hidden_weights=np.ones(3))


def _least_squares_fit(ds, features):
    """Least-squares fit of the grades (a stand-in for the best model of its class)."""
    x = np.hstack([features, np.ones((ds.n_docs, 1))])
    w, *_ = np.linalg.lstsq(x, ds.labels.astype(np.float64), rcond=None)
    return w


def test_synthetic_default_needs_more_than_one_gradient_step():
    """The default data is built so that the mean-difference direction between relevant
    and other documents (what one FPDGD round from zero mostly follows) ranks clearly
    worse than the best linear fit, which ranks clearly worse than a quadratic one
    (room for the neural ranker)."""
    train, test = synthetic_train_test(0)
    x, xt = train.features.astype(np.float64), test.features.astype(np.float64)
    relevant = train.labels > 0
    centroid = x[relevant].mean(0) - x[~relevant].mean(0)
    linear = _least_squares_fit(train, x)
    quad = _least_squares_fit(train, np.hstack([x, x**2]))
    rng = np.random.default_rng(0)
    random_ = np.mean([_ndcg_at_10(rng.random(test.n_docs), test) for _ in range(5)])
    at_centroid = _ndcg_at_10(xt @ centroid, test)
    at_linear = _ndcg_at_10(xt @ linear[:-1], test)
    at_quad = _ndcg_at_10(np.hstack([xt, xt**2]) @ quad[:-1], test)
    # The default data's linear signal lies mostly in low-variance directions (a gap of
    # 0.12 between the centroid and the linear fit) and the interactions are centred;
    # the quadratic fit (squares only, no products) gains 0.04 over the linear one.
    assert random_ + 0.15 < at_centroid < at_linear - 0.1 < at_quad - 0.12, (
        random_,
        at_centroid,
        at_linear,
        at_quad,
    )
    # Features come in correlated groups (many views of a few factors, as in LETOR).
    corr = np.corrcoef(x.T)
    off_diagonal = np.abs(corr[~np.eye(corr.shape[0], dtype=bool)])
    assert np.sort(off_diagonal)[-20:].min() > 0.5


def test_synthetic_train_test_share_hidden_function():
    train, test = synthetic_train_test(5, n_train_queries=150, n_test_queries=80, n_features=12)
    train2, test2 = synthetic_train_test(5, n_train_queries=150, n_test_queries=80, n_features=12)
    _assert_same(train, train2)
    _assert_same(test, test2)
    assert (train.n_queries, test.n_queries) == (150, 80)
    assert not set(train.query_ids) & set(test.query_ids)
    assert test.labels.max() <= 4
    # A linear model fitted on train generalises to test -> same relevance function.
    x = np.hstack([train.features, np.ones((train.n_docs, 1))])
    w, *_ = np.linalg.lstsq(x, train.labels.astype(np.float64), rcond=None)
    fitted = _ndcg_at_10(test.features @ w[:-1], test)
    rng = np.random.default_rng(1)
    random_ = np.mean([_ndcg_at_10(rng.random(test.n_docs), test) for _ in range(5)])
    assert fitted > random_ + 0.2, (fitted, random_)
