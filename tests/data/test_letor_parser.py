"""The vectorised LETOR reader (foltr_jax.data.letor_blocks) reads what the line-by-line reader
reads: the same arrays bit for bit, and on bad input the same error naming the same
file:line.  letor.parse_file_by_lines (the parser before the vectorised one) is the oracle."""

import gzip

import numpy as np
import pytest

from foltr_jax.data import letor, letor_blocks
from foltr_jax.data.letor import DatasetError, LetorFormatError
from tests.sample_data import SAMPLE_DIR, needs_sample


def _assert_identical(new, old):
    """The five arrays of parse_file equal bit for bit (float32 by their bits: -0.0 too)."""
    assert len(new) == len(old) == 5
    for a, b in zip(new, old):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
        if a.dtype == np.float32:
            np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
        else:
            np.testing.assert_array_equal(a, b)


def _outcome(parse, path, n_features):
    """The arrays, or (error type, message) when parsing fails."""
    try:
        return parse(path, n_features)
    except (LetorFormatError, DatasetError) as error:
        return type(error), str(error)


def _assert_same_outcome(path, n_features=None, threads=(1, 2)):
    old = _outcome(letor.parse_file_by_lines, path, n_features)
    for t in threads:
        new = _outcome(lambda p, nf, t=t: letor.parse_file(p, nf, threads=t), path, n_features)
        if isinstance(old, tuple) and isinstance(old[0], type):
            assert new == old
        else:
            assert not (isinstance(new, tuple) and isinstance(new[0], type)), new
            _assert_identical(new, old)
    return old


# ---------------------------------------------------------------------------
# The real excerpt
# ---------------------------------------------------------------------------


@needs_sample
@pytest.mark.parametrize("split", ["train", "test"])
@pytest.mark.parametrize("n_features", [None, 136, 140])
def test_sample_reads_identically(split, n_features):
    _assert_same_outcome(SAMPLE_DIR / f"{split}.txt", n_features)


@needs_sample
def test_sample_blocks_are_read_by_the_vectorised_reader():
    # Otherwise the test above would only compare the line-by-line reader with itself.
    with open(SAMPLE_DIR / "train.txt", "rb") as fh:
        blocks = list(letor._iter_byte_blocks(fh))
    assert len(blocks) >= 2
    for block in blocks:
        docs = letor_blocks.parse_block(block, letor.MAX_FEATURE_ID, letor.MAX_LABEL)
        assert docs is not None
        assert docs.features.shape[1] == 136


@needs_sample
def test_sample_small_blocks_and_gzip(tmp_path, monkeypatch):
    monkeypatch.setattr(letor, "_READ_BLOCK_BYTES", 4099)  # blocks end mid-query
    _assert_same_outcome(SAMPLE_DIR / "test.txt")
    packed = tmp_path / "test.txt.gz"
    packed.write_bytes(gzip.compress((SAMPLE_DIR / "test.txt").read_bytes()))
    _assert_identical(
        letor.parse_file(packed, None), letor.parse_file_by_lines(SAMPLE_DIR / "test.txt", None)
    )


# ---------------------------------------------------------------------------
# Generated files: every number form the syntax allows
# ---------------------------------------------------------------------------

_VALUE_FORMS = [
    lambda r: str(int(r.integers(0, 1000))),
    lambda r: f"{r.normal() * 10:.6f}",
    lambda r: f"{r.random():.{int(r.integers(1, 15))}f}",
    lambda r: repr(float(r.normal() * 10 ** int(r.integers(-8, 9)))),  # exponents, 17 digits
    lambda r: f"{r.normal():+.3f}",
    lambda r: "." + str(int(r.integers(0, 10**6))),
    lambda r: str(int(r.integers(0, 100))) + ".",
    lambda r: "-0",
    lambda r: "-0.0",
    lambda r: "0" * int(r.integers(1, 6)) + str(int(r.integers(0, 99))),
    lambda r: f"{r.integers(0, 10**15)}.{r.integers(0, 10)}",  # 16 characters and more
    lambda r: f"{r.integers(0, 10)}e{r.integers(-40, 38)}",
    lambda r: f"{r.normal():.3E}",
    lambda r: "9007199254740993",  # 2^53 + 1: rounds, read by float()
    lambda r: "0.1000000000000000055511151231257827",
    lambda r: "3.4028234e38",
]


def _random_file(rng, n_queries=40, n_features=30, comments=True, crlf=False):
    lines = ["# a header"] if comments else []
    for q in range(n_queries):
        qid = rng.choice([str(q), f"q{q:03d}", f"Q-{q}.x", "x" * int(rng.integers(1, 14)) + str(q)])
        for _ in range(int(rng.integers(1, 6))):
            ids = np.flatnonzero(rng.random(n_features) < 0.5) + 1
            tokens = []
            for i in ids:
                id_text = ("0" * int(rng.integers(0, 3)) + str(i)) if rng.random() < 0.1 else str(i)
                value = _VALUE_FORMS[int(rng.integers(len(_VALUE_FORMS)))](rng)
                tokens.append(f"{id_text}:{value}")
            sep = rng.choice([" ", "  ", "\t", " \t "], size=len(tokens) + 2)
            line = f"{rng.integers(0, 5)}{sep[0]}qid:{qid}" + "".join(
                s + t for s, t in zip(sep[1:], tokens)
            )
            if comments and rng.random() < 0.3:
                line += rng.choice([" # doc é 9:9", "#c", " #docid = GX0-1 inc = 1 prob = 0.02"])
            if rng.random() < 0.1:
                line += " "
            lines.append(line)
        if rng.random() < 0.1:
            lines.append(rng.choice(["", "   ", "# between queries"]))
    end = "\r\n" if crlf else "\n"
    return end.join(lines) + (end if rng.random() < 0.8 else "")


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("block_bytes", [None, 777])
def test_generated_files_read_identically(tmp_path, monkeypatch, seed, block_bytes):
    if block_bytes is not None:
        monkeypatch.setattr(letor, "_READ_BLOCK_BYTES", block_bytes)
    rng = np.random.default_rng(seed)
    path = tmp_path / "gen.txt"
    path.write_bytes(_random_file(rng, crlf=seed % 2 == 1).encode())
    old = _assert_same_outcome(path)
    assert not isinstance(old[0], type), old  # a valid file
    _assert_same_outcome(path, n_features=30)


def test_generated_blocks_are_read_by_the_vectorised_reader():
    # Comments (with UTF-8 in them), CRLF, tabs, every value form: still the fast path.
    for seed in range(3):
        text = _random_file(np.random.default_rng(seed), crlf=seed == 1).encode()
        block = text[: text.rfind(b"\n") + 1]
        assert letor_blocks.parse_block(block, letor.MAX_FEATURE_ID, letor.MAX_LABEL) is not None


def _dots_everywhere():
    """Digit strings of 1-17 characters with a dot at every place (and none): the texts on
    both sides of the 8-character word the reader reads first, and of the 16 it reads next."""
    for n in range(1, 18):
        digits = "".join(str((7 * k + n) % 10) for k in range(n))
        yield digits
        for g in range(n + 1):
            yield digits[:g] + "." + digits[g:]


@pytest.mark.parametrize("signs", [True, False])
def test_values_equal_float_of_their_text(signs):
    rng = np.random.default_rng(7)
    texts = [_VALUE_FORMS[int(rng.integers(len(_VALUE_FORMS)))](rng) for _ in range(3000)]
    texts += ["0", "-0", "+7", "1.", ".5", "-.5", "0.000000000000001", "999999999999999.9"]
    texts += list(_dots_everywhere())
    if signs:  # and the same with a sign
        texts += ["-" + t for t in _dots_everywhere()] + ["+" + t for t in _dots_everywhere()]
    else:  # a block without '-' or '+': no sign is looked for
        texts = [t for t in texts if "-" not in t and "+" not in t]
    line = "1 qid:1 " + " ".join(f"{i + 1}:{t}" for i, t in enumerate(texts)) + "\n"
    docs = letor_blocks.parse_block(line.encode(), 10**8, 31)
    assert docs is not None
    expected = np.array([float(t) for t in texts], np.float64).astype(np.float32)
    np.testing.assert_array_equal(docs.features[0].view(np.uint32), expected.view(np.uint32))


def _consecutive(n_ids, start=1, id_text=str, qid=1):
    values = ["0", "3", "0.25", "12.076928", "0.0068493151"]
    return f"{qid % 5} qid:{qid} " + " ".join(
        f"{id_text(i)}:{values[i % len(values)]}" for i in range(start, start + n_ids)
    )


_CONSECUTIVE = {  # lines whose ids are (or are nearly) 1, 2, 3, ...
    "same_length": [_consecutive(8, qid=q // 3) for q in range(30)],
    "ragged": [_consecutive(q % 9, qid=q // 3) for q in range(30)],
    "leading_zero": [_consecutive(8, qid=q // 3) for q in range(30)]
    + ["1 qid:99 1:0.5 02:0.25 3:1"],
    "plus_sign_id": [_consecutive(8, qid=q // 3) for q in range(30)] + ["1 qid:99 1:0.5 +2:1"],
    "gap": [_consecutive(8, qid=q // 3) for q in range(30)] + ["1 qid:99 1:0.5 3:1"],
    "ends_as_its_place": [_consecutive(8, qid=q // 3) for q in range(30)] + ["1 qid:99 1:0.5 12:1"],
    "from_two": [_consecutive(8, start=2, qid=q // 3) for q in range(30)],
    "over_1023_ids": [_consecutive(1100, qid=q) for q in range(3)],
}


@pytest.mark.parametrize("case", sorted(_CONSECUTIVE))
@pytest.mark.parametrize("n_features", [None, 5, 8, 1100])
def test_lines_of_consecutive_ids_read_identically(tmp_path, case, n_features):
    """The reader's shortcut for lines whose ids are 1, 2, 3, ... (each id text compared
    with the one its place says; with every line as long, no scatter at all) reads what
    the line-by-line reader reads, and hands back the lines it does not fit."""
    path = tmp_path / "consecutive.txt"
    path.write_text("\n".join(_CONSECUTIVE[case]) + "\n")
    _assert_same_outcome(path, n_features)


@pytest.mark.parametrize("case", ["same_length", "ragged", "from_two"])
def test_the_consecutive_ids_shortcut_is_taken(monkeypatch, case):
    # Otherwise the test above would only compare the general reading with itself.
    found = []
    dense_ids = letor_blocks._dense_ids
    monkeypatch.setattr(
        letor_blocks, "_dense_ids", lambda *args: found.append(dense_ids(*args)) or found[-1]
    )
    block = ("\n".join(_CONSECUTIVE[case]) + "\n").encode()
    assert letor_blocks.parse_block(block, letor.MAX_FEATURE_ID, letor.MAX_LABEL) is not None
    assert len(found) == 1 and (found[0] is not None) == (case != "from_two")


# ---------------------------------------------------------------------------
# Bad and unusual input: the same error at the same file:line, or the same arrays
# ---------------------------------------------------------------------------

_GOOD = [f"{i % 3} qid:{i // 4} 1:{i}.5 2:-0.25 3:{i}e-2 # doc {i}" for i in range(40)]

_CORRUPTIONS = {
    "missing_qid": "0 1:0.3 2:0.1",
    "label_only": "2",
    "label_only_comment": "2 # c",
    "label_above_max": "32 qid:5 1:0.5",
    "label_long_zeros": "000000000003 qid:5 1:0.5",
    "label_arabic_digit": "\u0663 qid:5 1:0.5",
    "label_fraction": "1.0 qid:5 1:0.5",
    "label_negative": "-1 qid:5 1:0.5",
    "label_plus": "+1 qid:5 1:0.5",
    "empty_qid": "0 qid: 1:0.3",
    "qid_with_colon": "0 qid:a:b 1:0.3",
    "qid_long": "0 qid:" + "z" * 40 + " 1:0.3",
    "qid_prefix_case": "0 QID:5 1:0.3",
    "qid_reappears": "0 qid:0 1:0.3",
    "value_missing": "0 qid:9 1:",
    "id_missing": "0 qid:9 :0.5",
    "two_colons": "0 qid:9 1:0.5:3",
    "no_colon": "0 qid:9 1:0.5 7",
    "id_zero": "0 qid:9 0:0.5",
    "id_negative": "0 qid:9 -2:0.5",
    "id_plus": "0 qid:9 +2:0.5",
    "id_huge": "0 qid:9 1000000000:0.5",
    "id_nine_digits": "0 qid:9 000000002:0.5",
    "ids_unsorted": "0 qid:9 3:0.5 1:0.25",
    "ids_duplicate": "0 qid:9 2:0.5 2:0.25",
    "value_nan": "0 qid:9 1:nan",
    "value_inf": "0 qid:9 1:inf",
    "value_overflow": "0 qid:9 1:1e39",
    "value_huge_exponent": "0 qid:9 1:1e999",
    "value_dot": "0 qid:9 1:.",
    "value_sign": "0 qid:9 1:-",
    "value_two_dots": "0 qid:9 1:1.2.3",
    "value_two_signs": "0 qid:9 1:--1",
    "value_inner_sign": "0 qid:9 1:1-2",
    "value_bad_exponent": "0 qid:9 1:1e",
    "value_hex": "0 qid:9 1:0x10",
    "value_letters": "0 qid:9 1:abc",
    "value_unicode_digit": "0 qid:9 1:\u0663",
    "nbsp_separator": "0 qid:9\u00a01:0.5",
    "line_separator": "0 qid:9 1:0.5\u20282:0.5",
    "vertical_tab": "0 qid:9\x0b1:0.5",
    "form_feed": "0\x0cqid:9 1:0.5",
    "file_separator": "0 qid:9\x1c1:0.5",
    "nul_byte": "0 qid:9 1:0.5\x00",
    "del_byte": "0 qid:9 1:0.5\x7f",
    "leading_space": "   0 qid:9 1:0.5",
    "hash_in_qid": "0 qid:9#x 1:0.5",
    "comment_only_hash": "#",
    "stray_word": "0 qid:9 1:0.5 word 2:0.5",
    "cr_only_endings": "0 qid:9 1:0.5\r0 qid:9 2:0.5",
}


@pytest.mark.parametrize("case", sorted(_CORRUPTIONS))
@pytest.mark.parametrize("where", [0, 17, 39])
def test_corrupted_line_gives_the_same_outcome(tmp_path, monkeypatch, case, where):
    monkeypatch.setattr(letor, "_READ_BLOCK_BYTES", 301)  # several blocks
    lines = list(_GOOD)
    lines[where] = _CORRUPTIONS[case]
    path = tmp_path / "bad.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _assert_same_outcome(path)
    _assert_same_outcome(path, n_features=3)


@pytest.mark.parametrize(
    "raw",
    [
        b"1 qid:1 1:0.5\n1 qid:1 1:\xff\n",  # undecodable byte in a value
        b"1 qid:1 1:0.5 # \xff\xfe comment\n0 qid:1 2:1\n",  # ... in a comment only
        b"1 qid:1 1:0.5\n\n\n",
        b"",
        b"\n# only comments\n",
        b"1 qid:1 1:0.5",  # no final newline
        b"1 qid:1\n0 qid:2\n",  # documents without features
    ],
)
def test_byte_level_oddities(tmp_path, raw):
    path = tmp_path / "odd.txt"
    path.write_bytes(raw)
    _assert_same_outcome(path)


def test_first_error_in_file_order_across_blocks(tmp_path, monkeypatch):
    # A feature error on one line, a header error a few lines on, in one block or two.
    lines = list(_GOOD)
    lines[20] = "1 qid:5 1:zz"
    lines[22] = "1 1:0.5"
    path = tmp_path / "two_errors.txt"
    path.write_text("\n".join(lines) + "\n")
    for block_bytes in (64, 301, 1 << 20):
        monkeypatch.setattr(letor, "_READ_BLOCK_BYTES", block_bytes)
        old = _assert_same_outcome(path)
        assert old[1].startswith(f"{path}:21: ")


def test_query_reappearing_in_a_later_block_names_both_lines(tmp_path, monkeypatch):
    monkeypatch.setattr(letor, "_READ_BLOCK_BYTES", 128)
    lines = [f"0 qid:{q} 1:{q}" for q in range(30) for _ in range(3)]
    lines.append("1 qid:4 1:0.5")  # query 4's block began at line 13
    path = tmp_path / "again.txt"
    path.write_text("\n".join(lines) + "\n")
    old = _assert_same_outcome(path)
    assert old[1].startswith(f"{path}:91: ") and "line 13" in old[1]


# ---------------------------------------------------------------------------
# Progress
# ---------------------------------------------------------------------------


@needs_sample
def test_progress_reports_bytes_documents_and_queries(monkeypatch):
    monkeypatch.setattr(letor, "_READ_BLOCK_BYTES", 1 << 20)
    path = SAMPLE_DIR / "train.txt"
    seen = []
    _, labels, offsets, _, _ = letor.parse_file(path, None, progress=seen.append)
    size = path.stat().st_size
    assert len(seen) >= 6  # one per block, then the last one
    assert all(p.total_bytes == size and p.path == str(path) for p in seen)
    assert [p.bytes_read for p in seen] == sorted(p.bytes_read for p in seen)
    assert [p.done for p in seen] == [False] * (len(seen) - 1) + [True]
    last = seen[-1]
    assert (last.bytes_read, last.documents, last.queries) == (size, labels.size, offsets.size)
    assert last.seconds >= 0 and last.mb_per_s > 0 and last.seconds_left == 0


def test_load_log_is_quiet_for_a_quick_load_and_then_reports_rate_and_time_left():
    import io

    from experiments.lib.cli import LoadLog

    def at(seconds, read, done=False, path="f.txt"):
        return letor.LoadProgress(
            path, read, 1000_000_000, read // 1000, read // 100000, seconds, done
        )

    out = io.StringIO()
    log = LoadLog(out, quiet_s=3.0, every_s=5.0)
    for p in (at(0.5, 10**8), at(1.0, 2 * 10**8), at(1.5, 10**9, done=True)):
        log(p)
    assert out.getvalue() == ""  # over in 1.5 s: nothing printed

    out = io.StringIO()
    log = LoadLog(out, quiet_s=3.0, every_s=5.0)
    for s in range(1, 11):
        log(at(float(s), s * 10**8, path="big.txt"))
    log(at(10.5, 10**9, done=True, path="big.txt"))
    lines = out.getvalue().splitlines()
    assert len(lines) == 3  # at 3 s and 8 s, then the end
    assert lines[0] == (
        "[loading] big.txt: 300/1000 MB, 3000 queries, 300000 documents, 100 MB/s, 30%, ~7 s left"
    )
    assert lines[-1].endswith("done in 10.5 s")
