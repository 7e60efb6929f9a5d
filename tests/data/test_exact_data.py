"""Data read exactly: query ids as the bytes in the file, labels integer grades in range or
refused (files and the API alike), intent files as strict as LETOR files, long lines read in
one pass."""

import io

import numpy as np
import pytest

from foltr_jax import data
from foltr_jax.data import DatasetError, LetorFormatError, RankingDataset, letor, noniid


def test_query_ids_that_differ_only_in_non_utf8_bytes_are_two_queries(tmp_path):
    path = tmp_path / "latin1.txt"
    # 0xE9 and 0xE8 are é and è in Latin-1, and not UTF-8: replaced, both became U+FFFD
    path.write_bytes(b"0 qid:caf\xe9 1:1\n1 qid:caf\xe9 1:2\n2 qid:caf\xe8 1:3\n")
    for parse in (letor.parse_file, letor.parse_file_by_lines):
        _, labels, _, lengths, qids = parse(path, None)
        assert lengths.tolist() == [2, 1] and labels.tolist() == [0, 1, 2]
        assert len(set(qids.tolist())) == 2
    # a query whose bytes come back after another's is still refused as not contiguous
    path.write_bytes(b"0 qid:\xe9 1:1\n1 qid:\xe8 1:2\n2 qid:\xe9 1:3\n")
    with pytest.raises(LetorFormatError, match=r":3: query '\\udce9' reappears here"):
        data.read_letor(path, use_cache=False)


def test_a_line_longer_than_many_reads_comes_back_whole(monkeypatch):
    """The part of a line a read leaves over is kept in pieces and joined once (one pass
    over the line, however many reads it spans)."""
    monkeypatch.setattr(letor, "_READ_BLOCK_BYTES", 7)
    text = b"0 qid:1 1:0.5 #" + b"x" * 1000 + b"\n1 qid:1 1:1\n\n2 qid:2 1:2"
    blocks = list(letor._iter_byte_blocks(io.BytesIO(text)))
    assert b"".join(blocks) == text
    assert all(b.endswith(b"\n") for b in blocks[:-1]) and blocks[-1].endswith(b"2 qid:2 1:2")
    assert blocks[0] == text[: text.index(b"\n") + 1]  # the long line, whole, in one block


def _dataset(labels):
    n = len(labels)
    return RankingDataset(
        features=np.zeros((n, 2), np.float32),
        labels=labels,
        query_offsets=[0],
        query_lengths=[n],
        query_ids=["q"],
    )


@pytest.mark.parametrize(
    "labels, problem",
    [
        ([0.0, 0.5, 1.0], r"labels must be integer grades, got np.float64\(0.5\) at \[1\]"),
        (
            np.array([1.9, 2.99]),
            "labels must be integer grades, got np.float64\\(1.9\\) at \\[0\\]",
        ),
        ([0.0, float("nan")], "labels must be integer grades, got np.float64\\(nan\\)"),
        (np.array([0, 2**32], np.int64), f"labels must be at most 31 .* got {2**32}"),
        (np.array([0, 2**63], np.uint64), "labels must be at most 31"),
        ([0, -1], "labels must be >= 0, got -1"),
        (np.array([0, -(2**32) + 1], np.int64), "labels must be >= 0"),  # int32: 1
        (["1", "2"], "labels must be integer grades, got dtype <U1"),
    ],
)
def test_the_api_refuses_labels_that_are_not_integer_grades(labels, problem):
    with pytest.raises(ValueError, match=problem):
        _dataset(labels)


def test_the_api_takes_integral_labels_of_any_numeric_type():
    for labels in ([0, 1, 2], np.array([0.0, 1.0, 2.0]), np.array([0, 1, 2], np.uint8)):
        assert _dataset(labels).labels.tolist() == [int(v) for v in labels]


def _write_letor(path, qids=("0", "1")):
    lines = [f"{d % 2} qid:{q} 1:{d * 0.5} 2:{1 - d * 0.3}" for q in qids for d in range(3)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    "text",
    [
        "0 1_0 1\n",
        "0 1 1_0\n",
        "0 1 +3\n",
        "0 \u0661 1\n",
        "0 1 \u0663\n",
        "0 1 \uff13\n",
        "0 1 3.0\n",
        "0\u00a01 1\n",
    ],
)
def test_intent_files_take_ascii_integers_only(tmp_path, text):
    letor_path = _write_letor(tmp_path / "train.txt")
    bad = tmp_path / "intent.txt"
    bad.write_text("# judgements\n" + text, encoding="utf-8")
    with pytest.raises(LetorFormatError, match=rf"^{bad}:2: "):
        noniid.read_multi_intent(letor_path, [bad], use_cache=False)


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_an_intent_file_without_judgements_is_refused(tmp_path, text):
    letor_path = _write_letor(tmp_path / "train.txt")
    empty = tmp_path / "intent.txt"
    empty.write_text(text)
    with pytest.raises(DatasetError, match=rf"^{empty}: no judgement"):
        noniid.read_multi_intent(letor_path, [empty], use_cache=False)


def test_intent_query_ids_match_the_letor_file_s_bytes(tmp_path):
    letor_path = tmp_path / "train.txt"
    letor_path.write_bytes(b"0 qid:\xe9 1:1\n1 qid:\xe9 1:2\n0 qid:\xe8 1:3\n")
    good, other = tmp_path / "good.txt", tmp_path / "other.txt"
    good.write_bytes(b"\xe8 0 2\n\xe9 1 1\n")
    mi = noniid.read_multi_intent(letor_path, [good], use_cache=False)
    assert mi.intent_labels.tolist() == [[0, 1, 2]]
    other.write_bytes(b"\xea 0 2\n")
    with pytest.raises(LetorFormatError, match=rf"^{other}:1: unknown query id"):
        noniid.read_multi_intent(letor_path, [other], use_cache=False)


def test_the_noniid_binary_refuses_an_empty_intent_file_in_one_line(tmp_path):
    from tests import binaries

    letor_path = _write_letor(tmp_path / "train.txt")
    empty = tmp_path / "intent.txt"
    empty.write_text("")
    done = binaries.call(
        "noniid", "--type=1", f"--train_path={letor_path}", f"--intent_files={empty}",
        f"--output_dir={tmp_path / 'out'}", cache_dir=tmp_path / "cache",
    )  # fmt: skip
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert f"{empty}: no judgement" in line
    assert not (tmp_path / "out" / "results.json").exists()


def test_an_empty_split_is_refused_by_the_api_in_words(synthetic_split):
    from foltr_jax.methods.fpdgd import federation

    train, test = synthetic_split
    empty = RankingDataset(np.zeros((0, train.n_features), np.float32), [], [], [], [])
    config = federation.FpdgdConfig(n_clients=2, rounds=1)
    for pair, split in (((empty, test), "training"), ((train, empty), "test")):
        with pytest.raises(DatasetError, match=f"the {split} split has no query"):
            federation.build(config, *pair)


def test_a_file_that_changes_while_it_is_read_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "train.txt"
    path.write_text("0 qid:1 1:1\n1 qid:1 1:2\n")
    real = letor.parse_file

    def truncated_meanwhile(path_, n_features, hasher, **kwargs):
        out = real(path_, n_features, hasher, **kwargs)
        hasher.update(b"another byte")  # as if the file had changed under the reader
        return out

    monkeypatch.setattr(letor, "parse_file", truncated_meanwhile)
    with pytest.raises(DatasetError, match="changed while it was being read"):
        data.read_letor(path, cache_dir=tmp_path / "cache")


def test_the_largest_float32_as_numpy_prints_it_is_a_feature_value(tmp_path):
    path = tmp_path / "big.txt"
    path.write_text("0 qid:1 1:3.4028235e38\n1 qid:1 1:-3.4028235e38\n")
    for parse in (letor.parse_file, letor.parse_file_by_lines):
        features = parse(path, None)[0]
        assert features[:, 0].tolist() == [np.finfo(np.float32).max, -np.finfo(np.float32).max]
    path.write_text("0 qid:1 1:3.4028236e38\n")  # rounds to infinity in float32
    with pytest.raises(LetorFormatError, match="out of float32 range"):
        data.read_letor(path, use_cache=False)
