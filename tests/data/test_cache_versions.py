"""Caches that know their writer: a dataset cache entry records the version of the parser that
wrote it, and the version moves whenever the parser's sources do."""

import hashlib
import inspect
import json
import pathlib

import numpy as np
import pytest

from foltr_jax.data import dataset_cache, letor, ranking_dataset, read_letor

PACKAGE = pathlib.Path(letor.__file__).resolve().parent


def parser_sources_sha256() -> str:
    """SHA-256 of what decides a cache entry's arrays: the LETOR reader's two modules and the
    per-query normalisation."""
    digest = hashlib.sha256()
    for name in ("letor.py", "letor_blocks.py"):
        digest.update(name.encode() + b"\0" + (PACKAGE / name).read_bytes() + b"\0")
    digest.update(inspect.getsource(ranking_dataset.normalise_into).encode())
    return digest.hexdigest()


def test_the_parser_version_moves_with_the_parser_s_sources():
    found = parser_sources_sha256()
    assert found == dataset_cache.PARSER_SOURCES_SHA256, (
        "the parser's sources changed: give foltr_jax/data/dataset_cache.py a new "
        f"PARSER_VERSION (now {dataset_cache.PARSER_VERSION}) if what it makes of a file can "
        f"change, and set PARSER_SOURCES_SHA256 = {found!r}"
    )


LATIN_1 = "1 qid:caf\xe9 1:0.5\n0 qid:caf\xe9 1:0.1\n1 qid:caf\xe8 1:0.9\n0 qid:caf\xe8 1:0.2\n"


def test_an_entry_an_older_parser_wrote_is_parsed_again_and_rewritten(tmp_path):
    """An entry of the parser before query ids were kept as their bytes (the two Latin-1 ids
    merged into one query), sound in every other way, is not read: the file is parsed again
    (two queries) and the entry rewritten with this parser's version."""
    path = tmp_path / "latin1.txt"
    path.write_bytes(LATIN_1.encode("latin-1"))
    cache = tmp_path / "cache"
    truth = read_letor(path, use_cache=False)
    assert truth.n_queries == 2
    digest = dataset_cache.sha256_file(path)
    entry = dataset_cache.path_for(cache, digest, True, None)
    merged = ranking_dataset.RankingDataset(
        features=truth.features, labels=truth.labels, query_offsets=np.array([0], np.int32),
        query_lengths=np.array([4], np.int32), query_ids=np.array(["caf\ufffd"]), name="old",
    )  # fmt: skip
    for old in (None, dataset_cache.PARSER_VERSION - 1):
        source = dataset_cache.source(digest, True, None)
        if old is None:  # written before entries recorded a parser version
            del source["parser_version"]
        else:
            source["parser_version"] = np.int64(old)
        assert dataset_cache.write(entry, dataset_cache.arrays_of(merged, source))
        with pytest.warns(RuntimeWarning, match="older parser wrote it|another parser version"):
            found = read_letor(path, cache_dir=cache)
        assert found.n_queries == 2
        with np.load(entry, allow_pickle=False) as z:  # rewritten by this parser
            assert int(z["parser_version"]) == dataset_cache.PARSER_VERSION
            assert len(z["query_lengths"]) == 2
        assert read_letor(path, cache_dir=cache).n_queries == 2  # and read from now on


def test_results_record_the_dataset_cache_s_versions():
    from foltr_jax.engine import results_files

    assert results_files.dataset_cache() == {
        "format": dataset_cache.CACHE_FORMAT_VERSION, "parser": dataset_cache.PARSER_VERSION,
    }  # fmt: skip
    json.dumps(results_files.dataset_cache())


def test_read_letor_remembers_the_sha256_of_the_bytes_it_read(tmp_path):
    """What a binary records of its data files (their SHA-256) comes from the read itself,
    so the files are not read again, and only while a file is as it was read."""
    path = tmp_path / "one.txt"
    path.write_text("1 qid:1 1:0.5\n0 qid:1 1:0.25\n")
    assert dataset_cache.known_sha256(path) is None
    read_letor(path, cache_dir=tmp_path / "cache")  # parsed
    assert dataset_cache.known_sha256(path) == hashlib.sha256(path.read_bytes()).hexdigest()
    other = tmp_path / "other.txt"
    other.write_bytes(path.read_bytes())
    read_letor(other, cache_dir=tmp_path / "cache")  # from the cache
    assert dataset_cache.known_sha256(other) == dataset_cache.known_sha256(path)
    path.write_text("1 qid:1 1:0.5\n0 qid:1 1:0.75\n0 qid:2 1:0.1\n")  # changed since
    assert dataset_cache.known_sha256(path) is None
    read_letor(path, use_cache=False)  # nothing hashed
    assert dataset_cache.known_sha256(path) is None
