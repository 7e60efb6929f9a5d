"""foltr_jax.data.folds: the original split and seeded re-partitions of a train/test pair."""

import os

import numpy as np
import pytest

from foltr_jax.data import folds, read_letor
from tests.sample_data import SAMPLE_DIR, needs_sample


def _text(qids, first=0, end=b"\n") -> bytes:
    """A LETOR text: two documents per query, features that name their line."""
    out = []
    for i, q in enumerate(qids):
        for d in range(2):
            line = f"{(i + d) % 3} qid:{q} 1:{first + i}.{d} 2:0.5 # doc {q}-{d}"
            out.append(line.encode() + end)
    return b"".join(out)


def _split(text: bytes) -> dict:
    return {q: lines for q, lines in folds.queries(text)}


def test_queries_keep_lines_byte_for_byte():
    text = b"# a comment\n\n" + _text([7, 3], end=b"\r\n") + b"1 qid:9 1:0.1"
    found = folds.queries(text)
    assert [q for q, _ in found] == [b"7", b"3", b"9"]
    assert found[0][1] == [
        b"0 qid:7 1:0.0 2:0.5 # doc 7-0\r\n",
        b"1 qid:7 1:0.1 2:0.5 # doc 7-1\r\n",
    ]
    assert found[2][1] == [b"1 qid:9 1:0.1\n"]  # a last line gets its line end


@pytest.mark.parametrize(
    "text, message",
    [(b"1 qid:1 1:0\n1 qid:2 1:0\n1 qid:1 1:0\n", "not contiguous"),
     (b"1 1:0 qid:1\n", "no 'qid:'")],
)  # fmt: skip
def test_queries_refuse_what_the_reader_refuses(text, message):
    with pytest.raises(ValueError, match=message):
        folds.queries(text, "f.txt")


def test_folds_are_whole_disjoint_and_deterministic():
    train, test = _text(range(10)), _text(range(10, 20), first=100)
    made = folds.fold_texts(train, test, 5, seed=0)
    assert made == folds.fold_texts(train, test, 5, seed=0)  # the same seed: the same folds
    assert made[0] == (train, test)  # fold 1: the files as given
    source = {**_split(train), **_split(test)}
    splits = set()
    for fold_train, fold_test in made:
        a, b = _split(fold_train), _split(fold_test)
        assert len(a) == len(b) == 10  # as many queries a side as the original files
        assert set(a) | set(b) == set(source) and not set(a) & set(b)  # each once, one side
        for q, lines in {**a, **b}.items():
            assert lines == source[q]  # whole queries, byte for byte
        splits.add(frozenset(a))
    assert len(splits) == 5  # no fold repeats another (or the original)
    other = folds.fold_texts(train, test, 5, seed=1)
    assert other[0] == made[0] and other[1:] != made[1:]
    # fold k does not depend on how many folds are asked for
    assert folds.fold_texts(train, test, 3, seed=0) == made[:3]


def test_fold_keeps_the_original_order_of_queries():
    train, test = _text(range(6)), _text(range(6, 12))
    order = [q for q, _ in folds.queries(train + test)]
    for fold_train, fold_test in folds.fold_texts(train, test, 4, seed=3)[1:]:
        for side in (fold_train, fold_test):
            found = [q for q, _ in folds.queries(side)]
            assert found == sorted(found, key=order.index)


def test_partitions_refuse_too_few_splits_and_shared_queries():
    with pytest.raises(ValueError, match="distinct splits"):
        folds.partitions(1, 1, 3, seed=0)  # two queries: two splits only
    assert len(folds.partitions(1, 1, 2, seed=0)) == 2
    with pytest.raises(ValueError, match="in both"):
        folds.fold_texts(_text([1, 2]), _text([2, 3]), 2, seed=0)


def _pair(tmp_path, n: int):
    """A train.txt of queries 0..n-1 and a test.txt of n..2n-1 in tmp_path/data; the folder,
    and the cache folder beside it."""
    source = tmp_path / "data"
    source.mkdir()
    (source / "train.txt").write_bytes(_text(range(n)))
    (source / "test.txt").write_bytes(_text(range(n, 2 * n)))
    return source, tmp_path / "cache"


def test_write_folds_caches_checks_and_rewrites(tmp_path):
    source, cache = _pair(tmp_path, 8)
    paths = folds.write_folds(source / "train.txt", source / "test.txt", 5, 0, cache)
    assert paths[0] == (source / "train.txt", source / "test.txt")
    expected = folds.fold_texts(_text(range(8)), _text(range(8, 16)), 5, 0)
    folder = folds.folds_folder(source / "train.txt", source / "test.txt", 0, cache)
    for k, ((train, test), texts) in enumerate(zip(paths, expected), 1):
        assert (train.read_bytes(), test.read_bytes()) == texts
        if k > 1:
            assert train.parent == folder / f"data_fold{k}"
    assert "seed0" in folder.name and folder.name.endswith(f"-v{folds.FOLDS_FORMAT}")
    assert not [p for p in cache.rglob("*.tmp")]  # no temporary file left
    # a fold file there is used only as it should be: a damaged one is written again
    damaged = paths[2][1]
    damaged.write_bytes(damaged.read_bytes()[:-7])
    kept = paths[3][0]
    before = os.stat(kept).st_mtime_ns, os.stat(kept).st_ino
    assert folds.write_folds(source / "train.txt", source / "test.txt", 5, 0, cache) == paths
    assert damaged.read_bytes() == expected[2][1]
    assert (os.stat(kept).st_mtime_ns, os.stat(kept).st_ino) == before  # not rewritten
    # other source bytes: another folder
    (source / "test.txt").write_bytes(_text(range(8, 16), first=5))
    assert folds.folds_folder(source / "train.txt", source / "test.txt", 0, cache) != folder


def test_write_folds_never_follows_a_link(tmp_path):
    source, cache = _pair(tmp_path, 4)
    folder = folds.folds_folder(source / "train.txt", source / "test.txt", 0, cache)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    folder.parent.mkdir(parents=True)
    folder.symlink_to(elsewhere)
    with pytest.raises(OSError, match="symbolic link"):
        folds.write_folds(source / "train.txt", source / "test.txt", 2, 0, cache)
    assert not list(elsewhere.iterdir())


@needs_sample
def test_excerpt_folds_read_as_43_and_43_queries(tmp_path):
    paths = folds.write_folds(SAMPLE_DIR / "train.txt", SAMPLE_DIR / "test.txt", 5, 0,
                              tmp_path / "cache")  # fmt: skip
    assert paths[0] == (SAMPLE_DIR / "train.txt", SAMPLE_DIR / "test.txt")
    original = set()
    for name in ("train.txt", "test.txt"):
        original |= set(read_letor(SAMPLE_DIR / name, cache_dir=tmp_path / "c").query_ids)
    assert len(original) == 86
    trains = []
    for train, test in paths:
        a = read_letor(train, cache_dir=tmp_path / "c")
        b = read_letor(test, cache_dir=tmp_path / "c")
        assert a.n_queries == b.n_queries == 43
        assert set(a.query_ids) | set(b.query_ids) == original
        assert not set(a.query_ids) & set(b.query_ids)
        trains.append(frozenset(a.query_ids))
    assert len(set(trains)) == 5
    lines = set(SAMPLE_DIR.joinpath("train.txt").read_bytes().splitlines(keepends=True))
    lines |= set(SAMPLE_DIR.joinpath("test.txt").read_bytes().splitlines(keepends=True))
    for train, test in paths[1:]:
        for path in (train, test):
            assert set(path.read_bytes().splitlines(keepends=True)) <= lines
    assert np.all([train.parent.name.startswith("mslr_sample_fold") for train, _ in paths[1:]])
