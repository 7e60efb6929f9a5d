"""Vectorised parse of one block of LETOR lines: the fast path of :mod:`foltr_jax.data.letor`.

:func:`parse_block` reads a block of whole lines (bytes) with a fixed number of numpy
passes, whatever its number of lines and tokens, and returns its documents, or ``None``
when it is not *sure* that the line-by-line parser of :mod:`foltr_jax.data.letor` would
accept the block and read the same arrays.  The caller then parses that block with the
line-by-line parser, which accepts it or names the first bad line: this module never
raises a format error itself, so the errors (and their ``file:line``) are the
line-by-line parser's by construction.  One concern (the vectorised block parse and
the conditions under which it vouches for a block), kept whole.

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
stored as float32 as the line-by-line parser stores it.  Most values have at most 8
characters: every value is first read from the one window that ends it, and only the
longer ones again as 16-character fields; a block without '-' or '+' looks for no sign.
Values outside that range (exponents, more than 16 characters) are read by ``float()``
one by one (a file made of such values reads at about the line-by-line parser's speed).

Ids: in most LETOR files every line holds ids 1, 2, 3, ... in order.  Each id text is
then compared, as one word, with the decimal its place on the line says, which is
cheaper than reading it; a block whose ids are not so is read as above.  When every
line of a block also holds the same number of ids, the values are the feature matrix
as they stand, without a scatter.

Every per-token step writes into arrays kept from one block to the next (one set per
thread, :func:`release_scratch` frees them): megabyte-sized temporaries allocated
afresh for every step cost more in page faults than the arithmetic itself.
"""

from __future__ import annotations

import re
import threading
from typing import NamedTuple

import numpy as np

__all__ = ["BlockDocs", "parse_block", "release_scratch"]

_U64 = np.uint64
_ZEROS = _U64(0x3030_3030_3030_3030)  # eight '0'
_SEVEN_F = _U64(0x7F7F_7F7F_7F7F_7F7F)
_QID_PREFIX = _U64(int.from_bytes(b"qid:", "little"))
_LOW32 = _U64(0xFFFF_FFFF)

# Lines whose ids are 1, 2, 3, ... (most LETOR files): the text of each id, up to
# _DENSE_IDS - 1, right-aligned in a word as the window ending at its ':' holds it (id 0
# is the 'qid' of the qid token), its bytes and its length.
_DENSE_IDS = 1024
_DENSE_WORDS = [b"qid"] + [str(i).encode() for i in range(1, _DENSE_IDS)]
_DENSE_TEXT = np.array([int.from_bytes(t.rjust(8, b"\0"), "little") for t in _DENSE_WORDS], _U64)
_DENSE_LENGTH = np.array([len(t) for t in _DENSE_WORDS], np.intp)

# Margin of separator bytes around a block, so that every window load stays inside.
_PAD = 16

_ALL_INT = (1 << 64) - 1
# _TOP[j]: the top j bytes of a word (the last j characters of an 8-byte window).
_TOP = np.array([_ALL_INT ^ ((1 << (8 * (8 - j))) - 1) for j in range(9)], _U64)
_DENSE_MASK = _TOP.take(_DENSE_LENGTH)
# _LOW[j]: the low j bytes of a word (the first j characters of a window).
_LOW = np.array([(1 << (8 * j)) - 1 for j in range(9)], _U64)


def _dot_to_zero_and_pad(x, dot, keep, t) -> None:
    """In place: a word's '.' becomes '0' (0x2E ^ 0x1E = 0x30) and its bytes outside the text
    (``keep`` 0) become '0' in front of it; ``dot``: the '.' flags (bit 7 of a byte), ``t``
    scratch."""
    np.right_shift(dot, _U64(7), out=t)
    t *= _U64(0x1E)
    x ^= t
    np.invert(keep, out=t)
    t &= _ZEROS
    x |= t


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
# For a dot at byte k of one 8-character word (k = 8: no dot), as _masks_by_dot for a
# 16-character field: the bytes before and after it, the '0' that fills byte 0, 10^f.
_BEFORE8 = np.array([(1 << (8 * k)) - 1 if k < 8 else 0 for k in range(9)], _U64)
_AFTER8 = np.array(
    [_ALL_INT ^ ((1 << (8 * (k + 1))) - 1) if k < 8 else _ALL_INT for k in range(9)], _U64
)
_FILL8 = np.array([0x30 if k < 8 else 0 for k in range(9)], _U64)
_DIVISOR8 = np.array([10.0 ** (7 - k if k < 8 else 0) for k in range(9)], np.float64)

_FLOAT_RE = re.compile(rb"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_FLOAT32_OVERFLOW = 2.0**128 - 2.0**103  # beyond: infinity in float32 (letor.py)

# Bytes allowed outside comments (printable ASCII and the separators).
_ALLOWED = bytes(range(0x21, 0x7F)) + b" \t\r\n"


class BlockDocs(NamedTuple):
    """The documents of one block, as :func:`parse_block` read them."""

    labels: np.ndarray  # int32 [docs]
    features: np.ndarray  # float32 [docs, largest feature id in the block] (maybe a view)
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


def _load(w: np.ndarray, idx: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out[i] = w[idx[i]]``: the windows at ``idx`` (which are in range).  Indexing
    reads the overlapping windows where they are; ``take`` would first copy all of them
    into a contiguous array, eight times the block."""
    out[...] = w[idx]
    return out


class _Scratch(threading.local):
    """Arrays reused from block to block (one set per thread).

    A block's temporaries are megabytes each; allocated afresh, they go back to the
    system when freed and fault their pages in again at the next block, which costs
    more than the arithmetic.  So every per-token step writes into arrays kept here.
    """

    def __init__(self) -> None:
        self.arrays: dict = {}

    def get(self, name: str, size: int, dtype=_U64) -> np.ndarray:
        """An uninitialised ``[size]`` array of ``dtype``, the same memory each call."""
        arr = self.arrays.get(name)
        if arr is None or arr.size < size or arr.dtype != dtype:
            arr = np.empty(size + size // 4 + 64, dtype)
            self.arrays[name] = arr
        return arr[:size]


_SCRATCH = _Scratch()


def release_scratch() -> None:
    """Frees the calling thread's reused arrays (tens of MB after a large block)."""
    _SCRATCH.arrays.clear()


def _eq_flags(x: np.ndarray, byte: int, out: np.ndarray, t: np.ndarray) -> np.ndarray:
    """0x80 in each byte of x equal to ``byte``, 0 elsewhere (exact, no false hits)."""
    np.bitwise_xor(x, _U64(byte * 0x0101_0101_0101_0101), out=out)
    np.bitwise_and(out, _SEVEN_F, out=t)
    t += _SEVEN_F
    t |= out
    t |= _SEVEN_F
    return np.invert(t, out=out)


def _all_digits(x: np.ndarray, t: np.ndarray, u: np.ndarray, out: np.ndarray) -> np.ndarray:
    """True where all 8 bytes of x are ASCII digits (bytes below 0x80)."""
    np.add(x, _U64(0x0606_0606_0606_0606), out=t)
    t &= _U64(0xF0F0_F0F0_F0F0_F0F0)
    t >>= _U64(4)
    np.bitwise_and(x, _U64(0xF0F0_F0F0_F0F0_F0F0), out=u)
    t |= u
    return np.equal(t, _U64(0x3333_3333_3333_3333), out=out)


def _swar8(x: np.ndarray, t: np.ndarray) -> np.ndarray:
    """x (8 ASCII digits, the first in the lowest byte) replaced by their number."""
    x -= _ZEROS
    for shift, scale, mask in _SWAR_STEPS:
        np.right_shift(x, shift, out=t)
        x *= scale
        x += t
        x &= mask
    return x


def _short_uint(w: np.ndarray, end: np.ndarray, length: np.ndarray, ws: _Scratch, tag: str):
    """(value, ok) of the 1-8 digit integers ending before ``end`` (exclusive)."""
    size = end.size
    t, u = ws.get("t", size), ws.get("u", size)
    idx = ws.get("idx", size, np.intp)
    np.minimum(length, 8, out=idx)  # below 0: clipped by take
    keep = _TOP.take(idx, mode="clip", out=ws.get("keep", size))
    np.subtract(end, 8, out=idx)
    x = _load(w, idx, ws.get(tag, size))
    x &= keep
    np.invert(keep, out=t)
    t &= _ZEROS
    x |= t
    ok = _all_digits(x, t, u, ws.get(tag + "_ok", size, bool))
    ok &= length >= 1
    ok &= length <= 8
    return _swar8(x, t), ok


def _values16(w, vend: np.ndarray, n: np.ndarray, ws: _Scratch):
    """(float64 magnitudes, ok) of the unsigned value texts of ``n`` characters that end
    before ``vend``, read as 16-character fields; ok is False where the text is not
    ``digits[.digits]`` of at most 16 characters with M <= 2**53.  ``n`` is changed."""
    size = vend.size
    t, u = ws.get("t", size), ws.get("u", size)
    b1 = ws.get("l_b1", size, bool)
    idx = ws.get("l_idx", size, np.intp)
    np.minimum(n, 16, out=idx)
    keep_lo = _KEEP_LO.take(idx, mode="clip", out=ws.get("l_keep_lo", size))
    keep_hi = _KEEP_HI.take(idx, mode="clip", out=ws.get("l_keep_hi", size))
    np.subtract(vend, 16, out=idx)
    lo = _load(w, idx, ws.get("l_lo", size))
    idx += 8
    hi = _load(w, idx, ws.get("l_hi", size))
    lo &= keep_lo
    hi &= keep_hi
    # a byte outside the text is 0 now, never '.'
    dot_lo = _eq_flags(lo, 0x2E, ws.get("l_dot_lo", size), t)
    dot_hi = _eq_flags(hi, 0x2E, ws.get("l_dot_hi", size), t)
    n_dots = np.bitwise_count(dot_lo, out=ws.get("l_n_dots", size, np.uint8))
    n_dots += np.bitwise_count(dot_hi, out=ws.get("l_n_dots_hi", size, np.uint8))
    _dot_to_zero_and_pad(lo, dot_lo, keep_lo, t)
    _dot_to_zero_and_pad(hi, dot_hi, keep_hi, t)
    ok = _all_digits(lo, t, u, ws.get("l_ok", size, bool))
    ok &= _all_digits(hi, t, u, b1)
    ok &= np.less_equal(n, 16, out=b1)
    ok &= np.less_equal(n_dots, 1, out=b1)
    n -= n_dots
    ok &= np.greater_equal(n, 1, out=b1)
    # Character index g of the dot (16: none): the flag of byte k is bit 8k + 7, so
    # flag - 1 has 8k + 7 bits set (64 when there is no flag).
    np.subtract(dot_lo, _U64(1), out=t)
    k_lo = np.bitwise_count(t, out=ws.get("l_k_lo", size, np.uint8))
    k_lo >>= np.uint8(3)
    np.subtract(dot_hi, _U64(1), out=t)
    k_hi = np.bitwise_count(t, out=ws.get("l_k_hi", size, np.uint8))
    k_hi >>= np.uint8(3)
    np.right_shift(k_lo, np.uint8(3), out=n_dots)
    k_hi *= n_dots
    k_hi += k_lo
    g = idx
    g[...] = k_hi
    # The characters before the dot move one place on (towards hi), over the dot:
    # m_lo = before_lo << 8 | after_lo | '0',  m_hi = before_hi << 8 | before_lo >> 56 | after_hi
    before_lo = _BEFORE_LO.take(g, mode="clip", out=dot_lo)
    before_lo &= lo
    before_hi = _BEFORE_HI.take(g, mode="clip", out=dot_hi)
    before_hi &= hi
    lo &= _AFTER_LO.take(g, mode="clip", out=t)
    lo |= _FILL.take(g, mode="clip", out=t)
    lo |= np.left_shift(before_lo, _U64(8), out=t)
    hi &= _AFTER_HI.take(g, mode="clip", out=t)
    hi |= np.right_shift(before_lo, _U64(56), out=t)
    hi |= np.left_shift(before_hi, _U64(8), out=t)
    mantissa = _swar8(lo, t)
    mantissa *= _U64(100_000_000)
    mantissa += _swar8(hi, t)
    ok &= np.less_equal(mantissa, _MAX_EXACT, out=b1)
    values = ws.get("l_values", size, np.float64)
    values[...] = mantissa
    values /= _DIVISOR.take(g, mode="clip", out=ws.get("l_divisor", size, np.float64))
    return values, ok


def _values(a, w, vstart: np.ndarray, vend: np.ndarray, ws: _Scratch, signs: bool):
    """(float64 values, ok) of the value texts a[vstart:vend]; ok is False where the
    text is not ``[-+]digits[.digits]`` of at most 16 characters with M <= 2**53.
    ``signs``: whether a text may begin with '-' or '+' (else none is looked for).

    Every text's last 8 characters are read as one word (all of it for the texts of at
    most 8 characters, most of them); the longer ones again as 16 (``_values16``)."""
    size = vstart.size
    t, u = ws.get("t", size), ws.get("u", size)
    b1 = ws.get("b1", size, bool)
    idx = ws.get("idx", size, np.intp)
    n = np.subtract(vend, vstart, out=ws.get("n", size, np.intp))
    neg = None
    if signs:
        first = a.take(vstart, mode="clip", out=ws.get("first", size, np.uint8))
        neg = np.equal(first, 45, out=ws.get("neg", size, bool))
        np.equal(first, 43, out=b1)
        b1 |= neg
        n -= b1
    np.minimum(n, 8, out=idx)
    keep = _TOP.take(idx, mode="clip", out=ws.get("keep", size))
    np.subtract(vend, 8, out=idx)
    x = _load(w, idx, ws.get("x", size))
    x &= keep  # a byte outside the text is 0 now, never '.'
    dot = _eq_flags(x, 0x2E, ws.get("dot", size), t)
    n_dots = np.bitwise_count(dot, out=ws.get("n_dots", size, np.uint8))
    _dot_to_zero_and_pad(x, dot, keep, t)
    ok = _all_digits(x, t, u, ws.get("ok", size, bool))
    ok &= np.less_equal(n_dots, 1, out=b1)
    ok &= np.greater(n, n_dots, out=b1)  # a digit besides the dot
    # Byte k of the dot (8: none): its flag is bit 8k + 7, so flag - 1 has 8k + 7 bits
    # set (64 when there is no flag).  The characters before it move one place on.
    np.subtract(dot, _U64(1), out=t)
    k = np.bitwise_count(t, out=ws.get("k", size, np.uint8))
    k >>= np.uint8(3)
    before = _BEFORE8.take(k, mode="clip", out=dot)
    before &= x
    x &= _AFTER8.take(k, mode="clip", out=t)
    x |= _FILL8.take(k, mode="clip", out=t)
    x |= np.left_shift(before, _U64(8), out=t)
    mantissa = _swar8(x, t)  # at most 99,999,999: exact
    values = ws.get("values", size, np.float64)
    values[...] = mantissa
    values /= _DIVISOR8.take(k, mode="clip", out=ws.get("divisor", size, np.float64))
    longer = np.flatnonzero(np.greater(n, 8, out=b1))
    if longer.size:
        values[longer], ok[longer] = _values16(w, vend[longer], n[longer], ws)
    if neg is not None:
        np.negative(values, out=values, where=neg)
    return values, ok


def _dense_ids(w, colons, lengths, qid_h, holders_per_doc, ws: _Scratch):
    """The holders' ids (0 for the qid tokens) when every line's ids are 1, 2, 3, ... in
    order, each written as its plain decimal, else None: then each id text is the one its
    place on the line says (compared as one word), which is cheaper than reading it."""
    if holders_per_doc.max() > _DENSE_IDS:
        return None
    size = colons.size
    ids = ws.get("dense_ids", size, np.intp)
    np.subtract(np.arange(size), np.repeat(qid_h, holders_per_doc), out=ids)
    t = ws.get("t", size)
    b = ws.get("dense_ok", size, bool)
    if not np.equal(lengths, _DENSE_LENGTH.take(ids, mode="clip"), out=b).all():
        return None
    idx = np.subtract(colons, 8, out=ws.get("idx", size, np.intp))
    x = _load(w, idx, ws.get("dense_x", size))
    x &= _DENSE_MASK.take(ids, mode="clip", out=t)
    if not np.equal(x, _DENSE_TEXT.take(ids, mode="clip", out=t), out=b).all():
        return None
    return ids


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
    ws = _SCRATCH
    n = len(block)
    a = ws.get("a", n + 2 * _PAD, np.uint8)
    a[:_PAD] = a[_PAD + n :] = 32
    body = a[_PAD : _PAD + n]
    body[:] = np.frombuffer(block, np.uint8)
    is_byte = ws.get("is_byte", a.size, bool)
    newlines = np.flatnonzero(np.equal(body, 10, out=is_byte[:n]))
    newlines += _PAD
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

    # Tokens: maximal runs of bytes above ' ' (the block begins and ends with spaces).
    word = np.greater(a, 32, out=is_byte)
    edges = np.flatnonzero(np.not_equal(word[1:], word[:-1], out=ws.get("edge", a.size - 1, bool)))
    edges += 1
    n_tokens = edges.size // 2
    tok_start = ws.get("tok_start", n_tokens, np.intp)
    tok_end = ws.get("tok_end", n_tokens, np.intp)
    np.copyto(tok_start, edges[0::2])
    np.copyto(tok_end, edges[1::2])
    del edges
    line_starts = np.empty_like(line_ends)
    line_starts[0] = _PAD
    line_starts[1:] = line_ends[:-1] + 1
    first_tok = np.searchsorted(tok_start, line_starts)
    n_tok = np.searchsorted(tok_start, line_ends) - first_tok
    if np.any(n_tok == 1):
        return None  # a label without 'qid:': the line-by-line parser names it
    doc_lines = np.flatnonzero(n_tok)
    label_tok = first_tok[doc_lines]
    n_docs = doc_lines.size
    if n_docs == 0:
        return BlockDocs(
            np.zeros(0, np.int32), np.zeros((0, 0), np.float32), doc_lines, [], int(n_lines)
        )

    label_end = tok_end[label_tok]
    labels, ok = _short_uint(w, label_end, label_end - tok_start[label_tok], ws, "labels")
    if not ok.all() or labels.max() > max_label:
        return None
    labels = labels.astype(np.int32)

    # Every token but the labels ("holders") holds exactly one ':': the k-th ':' is
    # inside the k-th holder, and there are as many of each.  The ':' of 'qid:' is
    # then its fourth byte.
    colons = np.flatnonzero(np.equal(a, 58, out=is_byte))
    holder = ws.get("holder", n_tokens, bool)
    holder[:] = True
    holder[label_tok] = False
    n_holders = n_tokens - n_docs
    if colons.size != n_holders:
        return None
    hs = np.compress(holder, tok_start, out=ws.get("hs", n_holders, np.intp))
    he = np.compress(holder, tok_end, out=ws.get("he", n_holders, np.intp))
    size = n_holders
    b = ws.get("b_check", size, bool)
    tmp = ws.get("tmp", size, np.intp)
    if not np.greater(colons, hs, out=b).all():
        return None
    np.subtract(he, 1, out=tmp)
    if not np.less(colons, tmp, out=b).all():
        return None
    # The qid token of document d is holder label_tok[d] + 1 - (d + 1): d + 1 labels
    # come before it.
    qid_h = label_tok - np.arange(n_docs)
    qs, qe = hs[qid_h], he[qid_h]
    q_len = qe - qs - 4
    if not (np.all((w[qs] & _LOW32) == _QID_PREFIX) and np.all(q_len >= 1) and np.all(q_len <= 16)):
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
    np.subtract(colons, hs, out=tmp)
    holders_per_doc = np.diff(qid_h, append=n_holders)
    ids = _dense_ids(w, colons, tmp, qid_h, holders_per_doc, ws)
    ok = None
    if ids is None:
        ids, ok = _short_uint(w, colons, tmp, ws, "ids")
    colons += 1  # where the values begin
    values, ok_values = _values(a, w, colons, he, ws, b"-" in block or b"+" in block)
    values[qid_h] = 0.0
    ok_values[qid_h] = True
    if ok is not None:
        ids[qid_h] = 0
        ok[qid_h] = True
        if not ok.all():
            return None
        # Ids rise along a line: the only falls are onto the qid tokens' 0.
        if (
            np.count_nonzero(np.equal(ids, 0, out=b)) != n_docs
            or np.count_nonzero(np.less_equal(ids[1:], ids[:-1], out=b[1:])) != n_docs - 1
        ):
            return None
    width = int(ids.max())
    if width > max_id:
        return None
    if not ok_values.all():
        for k in np.flatnonzero(~ok_values).tolist():
            text = a[colons[k] : he[k]].tobytes()
            if not _FLOAT_RE.fullmatch(text):
                return None
            value = float(text)
            if not abs(value) < _FLOAT32_OVERFLOW:  # also false for nan
                return None
            values[k] = value

    if ok is None and holders_per_doc.min() == width + 1:
        # Every line holds every id 1..width in order: the values are the matrix.
        features = values.astype(np.float32).reshape(n_docs, width + 1)
        return BlockDocs(labels, features[:, 1:], doc_lines, starts, int(n_lines))
    # Scatter: holder k goes to row rows[k] (the count of qid tokens up to it, less 1),
    # column ids[k] of a matrix one column wider (column 0 takes the qid tokens).
    flat = tmp
    flat[:] = 0
    flat[qid_h[1:]] = width + 1
    np.cumsum(flat, out=flat)
    np.add(flat, ids, out=flat, casting="unsafe")  # ids <= max_id: exact
    features = np.zeros((n_docs, width + 1), np.float32)
    features.reshape(-1)[flat] = values
    return BlockDocs(labels, features[:, 1:], doc_lines, starts, int(n_lines))
