"""Vectorised parse of one block of LETOR lines: the fast path of :mod:`foltr_jax.letor`.

:func:`parse_block` reads a block of whole lines (bytes) with a fixed number of numpy
passes, whatever its number of lines and tokens, and returns its documents, or ``None``
when it is not *sure* that the line-by-line parser of :mod:`foltr_jax.letor` would
accept the block and read the same arrays.  The caller then parses that block with the
line-by-line parser, which accepts it or names the first bad line: this module never
raises a format error itself, so the errors (and their ``file:line``) are the
line-by-line parser's by construction.

What it accepts (everything else is handed back, never guessed):

* bytes: printable ASCII, ``' '``, ``'\\t'``, ``'\\r'``, ``'\\n'``; anything after ``#``
  on a line is a comment and may hold any byte;
* a line: blank, or ``<label> qid:<id> <fid>:<value> ...`` with the label at most 8
  ASCII digits and at most ``max_label``, the query id 1-16 characters without ``:``,
  every feature id 1-8 digits in ``1..max_id`` and strictly increasing along the line
  (unsorted ids are legal but left to the line-by-line parser), every value matching
  the line-by-line parser's number syntax and in float32 range.

How numbers are read.  The bytes are viewed through overlapping little-endian 8-byte
windows (``W[p]`` = bytes ``p..p+7``), so one gather fetches up to 8 characters of a
token.  A token's digits are right-aligned in a 16-character field, the bytes before
the token replaced by ``'0'``, the decimal point removed by moving the characters in
front of it one place on, and the 16 digits turned into an integer ``M`` by the usual
SWAR steps (pairs, quads, octets).  A value ``M / 10**f`` with ``M <= 2**53`` and
``f <= 15`` is then one correctly rounded float64 division, the same double that
``float()`` (and ``np.fromstring``) read from the text (Clinger's fast path); it is
stored as float32 as the line-by-line parser stores it.  Values outside that range
(exponents, more than 16 characters) are read by ``float()`` one by one.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

__all__ = ["BlockDocs", "parse_block"]

_U64 = np.uint64
_ALL = _U64(0xFFFF_FFFF_FFFF_FFFF)
_ZEROS = _U64(0x3030_3030_3030_3030)  # eight '0'
_SEVEN_F = _U64(0x7F7F_7F7F_7F7F_7F7F)
_QID_PREFIX = _U64(int.from_bytes(b"qid:", "little"))
_LOW32 = _U64(0xFFFF_FFFF)

# Margin of separator bytes around a block, so that every window load stays inside.
_PAD = 16

_ALL_INT = (1 << 64) - 1
# _TOP[j]: the top j bytes of a word (the last j characters of an 8-byte window).
_TOP = np.array([_ALL_INT ^ ((1 << (8 * (8 - j))) - 1) for j in range(9)], _U64)
# _LOW[j]: the low j bytes of a word (the first j characters of a window).
_LOW = np.array([(1 << (8 * j)) - 1 for j in range(9)], _U64)


def _masks_by_dot() -> tuple[np.ndarray, ...]:
    """For a dot at character g of a 16-character field (g = 16: no dot), the bytes
    before it and after it in each half, the '0' that fills character 0 once the
    characters before the dot move one place on, and f, the digits after the dot."""
    before_lo, before_hi, after_lo, after_hi, fill, frac = ([] for _ in range(6))
    for g in range(17):
        before = (1 << (8 * g)) - 1 if g < 16 else 0
        after = ((1 << 128) - 1) ^ ((1 << (8 * (g + 1))) - 1) if g < 16 else (1 << 128) - 1
        before_lo.append(before & _ALL_INT)
        before_hi.append(before >> 64)
        after_lo.append(after & _ALL_INT)
        after_hi.append(after >> 64)
        fill.append(0x30 if g < 16 else 0)
        frac.append(15 - g if g < 16 else 0)
    u = [np.array(m, _U64) for m in (before_lo, before_hi, after_lo, after_hi, fill)]
    return (*u, np.array(frac, np.intp))


_BEFORE_LO, _BEFORE_HI, _AFTER_LO, _AFTER_HI, _FILL, _FRAC = _masks_by_dot()
# 10^f for the f digits after a dot at g (exact in float64).
_DIVISOR = np.array([10.0 ** int(f) for f in _FRAC], np.float64)
# For a text of n <= 16 characters right-aligned in a 16-character field: its bytes in
# the field's first and second halves.
_KEEP_LO = np.array([_TOP[max(j - 8, 0)] for j in range(17)], _U64)
_KEEP_HI = np.array([_TOP[min(j, 8)] for j in range(17)], _U64)
_MAX_EXACT = _U64(2**53)

_FLOAT_RE = re.compile(rb"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_FLOAT32_MAX = float(np.finfo(np.float32).max)

# Bytes allowed outside comments (printable ASCII and the separators).
_ALLOWED = bytes(range(0x21, 0x7F)) + b" \t\r\n"


class BlockDocs(NamedTuple):
    """The documents of one block, as :func:`parse_block` read them."""

    labels: np.ndarray  # int32 [docs]
    features: np.ndarray  # float32 [docs, largest feature id in the block]
    doc_lines: np.ndarray  # int64 [docs]: line of each document, 0-based in the block
    starts: list  # (document index in the block, query id): the first document, and
    # every document whose query id differs from the one before
    n_lines: int  # lines in the block, blank and comment lines included


_SWAR_STEPS = (
    (_U64(8), _U64(10), _U64(0x00FF_00FF_00FF_00FF)),  # pairs of digits
    (_U64(16), _U64(100), _U64(0x0000_FFFF_0000_FFFF)),  # quads
    (_U64(32), _U64(10000), _LOW32),  # octets
)


def _windows(a: np.ndarray) -> np.ndarray:
    """W[p] = the 8 bytes a[p:p+8] as one little-endian uint64 (unaligned, overlapping)."""
    return np.ndarray(shape=(a.size - 7,), dtype="<u8", buffer=a, offset=0, strides=(1,))


def _eq_flags(x: np.ndarray, byte: int) -> np.ndarray:
    """0x80 in each byte of x equal to ``byte``, 0 elsewhere (exact, no false hits)."""
    v = x ^ _U64(byte * 0x0101_0101_0101_0101)
    t = (v & _SEVEN_F) + _SEVEN_F
    return ~(t | v | _SEVEN_F)


def _all_digits(x: np.ndarray) -> np.ndarray:
    """True where all 8 bytes of x are ASCII digits (bytes below 0x80)."""
    hi = x & _U64(0xF0F0_F0F0_F0F0_F0F0)
    carried = ((x + _U64(0x0606_0606_0606_0606)) & _U64(0xF0F0_F0F0_F0F0_F0F0)) >> _U64(4)
    return (hi | carried) == _U64(0x3333_3333_3333_3333)


def _swar8(x: np.ndarray) -> np.ndarray:
    """The number written by 8 ASCII digits, the first in the lowest byte."""
    x = x - _ZEROS
    for shift, scale, mask in _SWAR_STEPS:
        t = x >> shift
        x *= scale
        x += t
        x &= mask
    return x


def _short_uint(w: np.ndarray, end: np.ndarray, length: np.ndarray):
    """(value, ok) of the 1-8 digit integers ending before ``end`` (exclusive)."""
    keep = _TOP.take(np.clip(length, 0, 8))
    x = w[end - 8] & keep
    x |= _ZEROS & ~keep
    return _swar8(x), _all_digits(x) & (length >= 1) & (length <= 8)


def _values(a: np.ndarray, w: np.ndarray, vstart: np.ndarray, vend: np.ndarray):
    """(float64 values, ok) of the value texts a[vstart:vend]; ok is False where the
    text is not ``[-+]digits[.digits]`` of at most 16 characters with M <= 2**53."""
    first = a[vstart]
    neg = first == 45
    n = vend - vstart - (neg | (first == 43))
    n16 = np.clip(n, 0, 16)
    keep_lo, keep_hi = _KEEP_LO.take(n16), _KEEP_HI.take(n16)
    lo = w[vend - 16] & keep_lo
    hi = w[vend - 8] & keep_hi
    dot_lo = _eq_flags(lo, 0x2E)  # a byte outside the text is 0, never '.'
    dot_hi = _eq_flags(hi, 0x2E)
    n_dots = np.bitwise_count(dot_lo) + np.bitwise_count(dot_hi)
    # '.' -> '0' (0x2E ^ 0x1E = 0x30), and '0' in front of the text.
    lo ^= (dot_lo >> _U64(7)) * _U64(0x1E)
    lo |= _ZEROS & ~keep_lo
    hi ^= (dot_hi >> _U64(7)) * _U64(0x1E)
    hi |= _ZEROS & ~keep_hi
    ok = _all_digits(lo) & _all_digits(hi) & (n <= 16) & (n_dots <= 1) & (n - n_dots >= 1)
    # Character index g of the dot (16: none): the flag of byte k is bit 8k + 7, so
    # flag - 1 has 8k + 7 bits set (64 when there is no flag).
    k_lo = np.bitwise_count(dot_lo - _U64(1)) >> np.uint8(3)
    k_hi = np.bitwise_count(dot_hi - _U64(1)) >> np.uint8(3)
    g = (k_lo + (k_lo >> np.uint8(3)) * k_hi).astype(np.intp)
    before_lo = lo & _BEFORE_LO.take(g)
    m_lo = (before_lo << _U64(8)) | (lo & _AFTER_LO.take(g)) | _FILL.take(g)
    m_hi = (hi & _BEFORE_HI.take(g)) << _U64(8) | (before_lo >> _U64(56)) | (hi & _AFTER_HI.take(g))
    mantissa = _swar8(m_lo) * _U64(100_000_000) + _swar8(m_hi)
    ok &= mantissa <= _MAX_EXACT
    values = mantissa.astype(np.float64)
    values /= _DIVISOR.take(g)
    np.negative(values, out=values, where=neg)
    return values, ok


def _blank_comments(a: np.ndarray, base: int, n: int, line_ends: np.ndarray) -> None:
    """Overwrites with spaces every byte from a line's first '#' to its end."""
    hashes = np.flatnonzero(a[base : base + n] == 35) + base
    if not hashes.size:
        return
    line = np.searchsorted(line_ends, hashes)
    first = np.ones(hashes.size, bool)
    first[1:] = line[1:] != line[:-1]
    delta = np.zeros(a.size, np.int32)
    delta[hashes[first]] = 1  # a line's first '#' and its end are distinct bytes
    delta[line_ends[line[first]]] = -1
    a[np.cumsum(delta) > 0] = 32


def parse_block(block: bytes, max_id: int, max_label: int) -> BlockDocs | None:
    """The documents of ``block`` (whole lines; the last may lack its newline), or None
    when the line-by-line parser must read it (see the module docstring).

    ``max_id`` is the largest feature id allowed and ``max_label`` the largest label.
    The block is read on its own (no state, so blocks can be read in parallel):
    ``starts`` begins with the block's first document, whose query may continue the
    previous block's.
    """
    n = len(block)
    a = np.full(n + 2 * _PAD, 32, np.uint8)
    body = a[_PAD : _PAD + n]
    body[:] = np.frombuffer(block, np.uint8)
    newlines = np.flatnonzero(body == 10) + _PAD
    n_lines = newlines.size + (n > 0 and block[-1] != 10)
    line_ends = np.append(newlines, _PAD + n) if n_lines > newlines.size else newlines
    if b"#" in block:
        _blank_comments(a, _PAD, n, line_ends)
        if body.tobytes().translate(None, _ALLOWED):
            return None
    elif block.translate(None, _ALLOWED):
        return None
    a[line_ends] = 32  # newlines end tokens like any separator
    w = _windows(a)

    word = a > 32
    edges = np.flatnonzero(word[1:] != word[:-1]) + 1
    tok_start, tok_end = edges[0::2].copy(), edges[1::2].copy()
    line_starts = np.empty_like(line_ends)
    line_starts[0] = _PAD
    line_starts[1:] = line_ends[:-1] + 1
    first_tok = np.searchsorted(tok_start, line_starts)
    n_tok = np.searchsorted(tok_start, line_ends) - first_tok
    is_doc = n_tok > 0
    if np.any(n_tok == 1):
        return None  # a label without 'qid:': the line-by-line parser names it
    doc_lines = np.flatnonzero(is_doc)
    label_tok = first_tok[doc_lines]
    qid_tok = label_tok + 1
    n_feat = n_tok[doc_lines] - 2
    n_docs = doc_lines.size
    if n_docs == 0:
        return BlockDocs(
            np.zeros(0, np.int32), np.zeros((0, 0), np.float32), doc_lines, [], int(n_lines)
        )

    labels, ok = _short_uint(w, tok_end[label_tok], tok_end[label_tok] - tok_start[label_tok])
    if not ok.all() or labels.max() > max_label:
        return None

    # Every token but the labels holds exactly one ':' (the k-th ':' inside the k-th
    # such token, and as many of them as tokens); that of 'qid:' is its fourth byte.
    colons = np.flatnonzero(a == 58)
    holder = np.ones(tok_start.size, bool)
    holder[label_tok] = False
    holders = np.flatnonzero(holder)
    if colons.size != holders.size:
        return None
    hs, he = tok_start[holders], tok_end[holders]
    if not (np.all(colons > hs) and np.all(colons < he - 1)):
        return None
    # The qid token of document d is holder qid_tok[d] - (d + 1): d + 1 labels before it.
    qid_h = qid_tok - np.arange(1, n_docs + 1)
    qs, qe = hs[qid_h], he[qid_h]
    q_len = qe - qs - 4
    if not (
        np.all((w[qs] & _LOW32) == _QID_PREFIX) and np.all(q_len >= 1) and np.all(q_len <= 16)
    ):
        return None
    q_lo = w[qs + 4] & _LOW.take(np.minimum(q_len, 8))
    q_hi = w[qs + 12] & _LOW.take(np.maximum(q_len - 8, 0))
    changed = np.ones(n_docs, bool)
    changed[1:] = (q_lo[1:] != q_lo[:-1]) | (q_hi[1:] != q_hi[:-1]) | (q_len[1:] != q_len[:-1])
    starts = [
        (d, a[qs[d] + 4 : qe[d]].tobytes().decode("ascii"))
        for d in np.flatnonzero(changed).tolist()
    ]

    # Ids and values of every holder.  A qid token stands in as feature 0 (a column
    # dropped at the end) of value 0, so that nothing needs to be taken out.
    ids, ok = _short_uint(w, colons, colons - hs)
    values, ok_values = _values(a, w, colons + 1, he)
    ids[qid_h] = 0
    values[qid_h] = 0.0
    ok[qid_h] = ok_values[qid_h] = True
    if not ok.all():
        return None
    rows = np.repeat(np.arange(n_docs), n_feat + 1)
    if (
        np.count_nonzero(ids == 0) != n_docs
        or ids.max() > max_id
        or np.any((rows[1:] == rows[:-1]) & (ids[1:] <= ids[:-1]))
    ):
        return None
    if not ok_values.all():
        for k in np.flatnonzero(~ok_values).tolist():
            text = a[colons[k] + 1 : he[k]].tobytes()
            if not _FLOAT_RE.fullmatch(text):
                return None
            value = float(text)
            if not abs(value) <= _FLOAT32_MAX:  # also false for nan
                return None
            values[k] = value

    width = int(ids.max())
    features = np.zeros((n_docs, width + 1), np.float32)
    features.reshape(-1)[rows * (width + 1) + ids.astype(np.intp)] = values
    features = np.ascontiguousarray(features[:, 1:]) if width else features[:, :0].copy()
    return BlockDocs(labels.astype(np.int32), features, doc_lines, starts, int(n_lines))
