"""Stan CSV data rows parsed in compiled code, correctly rounded, straight into float64 rows.

`parse_rows` reads the comma-separated data lines of a byte buffer into the columns asked
for and skips the others without converting them.  A number is read as a decimal mantissa
(up to 19 significant digits) and a power of ten, then converted exactly as a correctly
rounded ``strtod`` (and Python's ``float``) would:

* Clinger's fast path: a mantissa below 2**53 and a power of ten within 10**+-22 are both
  exact doubles, so one IEEE multiplication or division rounds correctly;
* otherwise the Eisel-Lemire algorithm (Lemire, "Number parsing at a gigabyte per second",
  2021), a 64 x 128-bit product with a table of truncated 128-bit powers of ten, which
  either rounds correctly or says it cannot tell.

A token neither path settles (more than 19 significant digits, an exponent past the table,
an undecidable halfway case, or text that is not a number) is handed back by position, and
the caller converts it with Python's ``float`` or reports it.  ``nan``, ``inf`` and
``infinity`` (any case, signed) are read here, as Stan writes them.

Lines starting with ``#`` (CmdStan's adaptation and timing comments) and blank lines are
skipped; ``\\r\\n`` line ends and spaces around a value are accepted.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["PAD", "PARSE_OK", "PARSE_OUT_FULL", "PARSE_TOKENS_FULL", "PARSE_FIELDS",
           "parse_rows", "powers_of_ten"]

#: `parse_rows` status: every complete line read (the rest waits for more bytes)
PARSE_OK = 0
#: the output rows are full
PARSE_OUT_FULL = 1
#: the list of tokens for the caller is full
PARSE_TOKENS_FULL = 2
#: a line with a different number of fields (its start is returned)
PARSE_FIELDS = 3

#: bytes `parse_rows` needs in its buffer past ``end``
PAD = 16

_MIN_EXP10 = -348
_MAX_EXP10 = 347


def powers_of_ten() -> tuple[np.ndarray, np.ndarray]:
    """High and low 64-bit words of 10**e, e in [-348, 347], as 128-bit mantissas in
    [2**127, 2**128) rounded down (the table of Eisel-Lemire), from Python integers."""
    hi = np.empty(_MAX_EXP10 - _MIN_EXP10 + 1, dtype=np.uint64)
    lo = np.empty_like(hi)
    for k, e in enumerate(range(_MIN_EXP10, _MAX_EXP10 + 1)):
        if e >= 0:
            p = 10**e
            b = p.bit_length()
            m = p << (128 - b) if b <= 128 else p >> (b - 128)
        else:
            d = 10**-e
            m = (1 << (127 + d.bit_length())) // d
        assert (1 << 127) <= m < (1 << 128)
        hi[k] = m >> 64
        lo[k] = m & ((1 << 64) - 1)
    return hi, lo


_HI, _LO = powers_of_ten()
_EXACT = np.array([10.0**k for k in range(23)])  # exact doubles

_U32 = np.uint64(0xFFFFFFFF)
#: below this a mantissa takes another digit without overflow (10**18 * 10 + 9 < 2**64)
_MAN_LIMIT = np.uint64(10**18)
#: Clinger's fast path: a mantissa below 2**53 is an exact double
_FAST_MAN = np.uint64(1 << 53)
#: below this a mantissa takes 8 more digits at once and stays below 10**18 + 10**8
_SWAR_LIMIT = np.uint64(10**10)
_HIGH_NIBBLES = np.uint64(0xF0F0F0F0F0F0F0F0)
_SIXES = np.uint64(0x0606060606060606)
_THREES = np.uint64(0x3333333333333333)
_ZEROS = np.uint64(0x3030303030303030)
_BYTE_PAIRS = np.uint64(0x000000FF000000FF)
_MUL1 = np.uint64(100 + (1000000 << 32))
_MUL2 = np.uint64(1 + (10000 << 32))
_E8 = np.uint64(10**8)
_ONE = np.uint64(1)


@njit(cache=True, inline="always")
def _mul64(a, b):
    """(hi, lo) words of the 128-bit product of two uint64."""
    a_lo = a & _U32
    a_hi = a >> np.uint64(32)
    b_lo = b & _U32
    b_hi = b >> np.uint64(32)
    ll = a_lo * b_lo
    lh = a_lo * b_hi
    hl = a_hi * b_lo
    hh = a_hi * b_hi
    mid = (ll >> np.uint64(32)) + (lh & _U32) + (hl & _U32)
    lo = (ll & _U32) | (mid << np.uint64(32))
    hi = hh + (lh >> np.uint64(32)) + (hl >> np.uint64(32)) + (mid >> np.uint64(32))
    return hi, lo


@njit(cache=True, inline="always")
def _clz64(x):
    n = 0
    if x == np.uint64(0):
        return 64
    while x < np.uint64(0x8000000000000000):
        x = x << _ONE
        n += 1
    return n


@njit(cache=True)
def _eisel_lemire(man, exp10, neg, hi_tab, lo_tab):
    """(value, True) for man * 10**exp10 correctly rounded, or (0.0, False) when this
    algorithm cannot decide (the caller then converts the text another way).  man > 0."""
    if exp10 < _MIN_EXP10 or exp10 > _MAX_EXP10:
        return 0.0, False
    clz = _clz64(man)
    man = man << np.uint64(clz)
    ret_exp2 = ((217706 * exp10) >> 16) + 64 + 1023 - clz  # int64, arithmetic shift
    k = exp10 - _MIN_EXP10
    x_hi, x_lo = _mul64(man, hi_tab[k])
    if (x_hi & np.uint64(0x1FF)) == np.uint64(0x1FF) and (x_lo + man) < man:
        y_hi, y_lo = _mul64(man, lo_tab[k])
        merged_hi = x_hi
        merged_lo = x_lo + y_hi
        if merged_lo < x_lo:
            merged_hi += _ONE
        if ((merged_hi & np.uint64(0x1FF)) == np.uint64(0x1FF)
                and merged_lo + _ONE == np.uint64(0) and (y_lo + man) < man):
            return 0.0, False
        x_hi = merged_hi
        x_lo = merged_lo
    msb = x_hi >> np.uint64(63)
    mant = x_hi >> (msb + np.uint64(9))
    ret_exp2 -= 1 ^ np.int64(msb)
    if x_lo == np.uint64(0) and (x_hi & np.uint64(0x1FF)) == np.uint64(0) and \
            (mant & np.uint64(3)) == _ONE:
        return 0.0, False
    mant += mant & _ONE
    mant = mant >> _ONE
    if (mant >> np.uint64(53)) > np.uint64(0):
        mant = mant >> _ONE
        ret_exp2 += 1
    if ret_exp2 <= 0 or ret_exp2 >= 0x7FF:  # subnormal, overflow: not decided here
        return 0.0, False
    # mant holds the implicit bit (2**52 <= mant < 2**53): scaling it by a power of two
    # is exact for a normal result
    value = math.ldexp(np.float64(mant), ret_exp2 - 1075)
    return (-value if neg else value), True


@njit(cache=True, inline="always")
def _load8(buf, i):
    """The 8 bytes at i as a little-endian uint64 (an unsigned index: no wraparound test,
    so the byte loads combine into one)."""
    j = np.uint64(i)
    w = np.uint64(0)
    for k in range(8):
        w |= np.uint64(buf[j + np.uint64(k)]) << np.uint64(8 * k)
    return w


@njit(cache=True, inline="always")
def _eight_digits(w):
    """Whether all 8 bytes of w are ASCII digits (SWAR test, as in fast_float)."""
    return ((w & _HIGH_NIBBLES) | (((w + _SIXES) & _HIGH_NIBBLES) >> np.uint64(4))) == _THREES


@njit(cache=True, inline="always")
def _parse8(w):
    """The value of 8 ASCII digits held in w, first digit in the lowest byte (SWAR)."""
    w = w - _ZEROS
    w = (w * np.uint64(10)) + (w >> np.uint64(8))
    return (((w & _BYTE_PAIRS) * _MUL1)
            + (((w >> np.uint64(16)) & _BYTE_PAIRS) * _MUL2)) >> np.uint64(32)


@njit(cache=True, inline="always")
def _lower(c):
    return c | 32 if 65 <= c <= 90 else c


@njit(cache=True)
def _word(buf, i, end, text):
    """Length of ``text`` (lower-case ASCII codes) matched case-insensitively at i, or 0."""
    n = text.shape[0]
    if i + n > end:
        return 0
    for j in range(n):
        if _lower(buf[i + j]) != text[j]:
            return 0
    return n


_NAN = np.frombuffer(b"nan", dtype=np.uint8).copy()
_INF = np.frombuffer(b"inf", dtype=np.uint8).copy()
_INFINITY = np.frombuffer(b"infinity", dtype=np.uint8).copy()


@njit(cache=True)
def _special(buf, i, end):
    """(value, ok) of a token that holds no digit: [+-]nan, [+-]inf, [+-]infinity, with
    spaces around; ok False for anything else."""
    while i < end and buf[i] == 32:
        i += 1
    neg = False
    if i < end and (buf[i] == 45 or buf[i] == 43):
        neg = buf[i] == 45
        i += 1
    value = np.inf
    n = _word(buf, i, end, _INFINITY)
    if n == 0:
        n = _word(buf, i, end, _INF)
    if n == 0:
        n = _word(buf, i, end, _NAN)
        value = np.nan
    if n == 0:
        return 0.0, False
    i += n
    while i < end and buf[i] == 32:
        i += 1
    if i < end and buf[i] != 13:
        return 0.0, False
    return (-value if neg else value), True


@njit(cache=True)
def _settle(buf, out, row, pend_m, pend_i, n_pend, tokens, n_tok, hi_tab, lo_tab):
    """The values of one line that Clinger's path left: Eisel-Lemire for the mantissas,
    nan/inf words, and tokens for the caller for the rest.  Returns the token count."""
    for k in range(n_pend):
        c = pend_i[k, 0]
        s = pend_i[k, 3]
        e = pend_i[k, 4]
        ok = False
        if pend_i[k, 2] >= 0:  # a mantissa and exponent were read
            value, ok = _eisel_lemire(pend_m[k], pend_i[k, 1], pend_i[k, 2] == 1, hi_tab,
                                      lo_tab)
        else:
            value, ok = _special(buf, s, e)
        if ok:
            out[row, c] = value
        else:
            tokens[n_tok, 0] = row
            tokens[n_tok, 1] = c
            tokens[n_tok, 2] = s
            tokens[n_tok, 3] = e
            n_tok += 1
    return n_tok


@njit(cache=True, nogil=True)
def _parse_rows_impl(buf, start, end, final, colmap, out, row0, tokens, pend_m, pend_i,
                     hi_tab, lo_tab, exact):
    ncol = colmap.shape[0]
    n_out = out.shape[0]
    pos = start
    row = row0
    n_tok = 0
    lines = 0
    while pos < end:
        i = pos
        while buf[i] == 32:
            i += 1
        if i == end or buf[i] == 35 or buf[i] == 10 or buf[i] == 13:  # '#' or blank
            while buf[i] != 10:
                i += 1
            if i == end and not final:
                return pos, row, n_tok, lines, PARSE_OK
            lines += 1
            pos = min(i + 1, end)
            continue
        if row >= n_out:
            return pos, row, n_tok, lines, PARSE_OUT_FULL
        if n_tok > tokens.shape[0] - ncol:
            return pos, row, n_tok, lines, PARSE_TOKENS_FULL
        i = pos
        f = 0
        n_pend = 0
        complete = True  # False: the field count is wrong
        while True:
            c = colmap[f] if f < ncol else -1
            if c >= 0:
                s = i
                while buf[i] == 32:
                    i += 1
                neg = False
                if buf[i] == 45 or buf[i] == 43:  # - +
                    neg = buf[i] == 45
                    i += 1
                man = np.uint64(0)
                exp10 = 0
                digits = 0
                dropped = False  # a nonzero digit past the 19th significant one
                # integer and fraction digits: two loops rather than one inlined helper,
                # which halved the parse rate (the helper's tuple and flag did not fold away)
                while man < _SWAR_LIMIT:  # 8 digits at a time while they fit
                    w = _load8(buf, i)
                    if not _eight_digits(w):
                        break
                    man = man * _E8 + _parse8(w)
                    digits += 8
                    i += 8
                while 48 <= buf[i] <= 57:
                    if man < _MAN_LIMIT:
                        man = man * np.uint64(10) + np.uint64(buf[i] - 48)
                    else:
                        exp10 += 1
                        dropped |= buf[i] != 48
                    digits += 1
                    i += 1
                if buf[i] == 46:  # .
                    i += 1
                    while man < _SWAR_LIMIT:
                        w = _load8(buf, i)
                        if not _eight_digits(w):
                            break
                        man = man * _E8 + _parse8(w)
                        exp10 -= 8
                        digits += 8
                        i += 8
                    while 48 <= buf[i] <= 57:
                        if man < _MAN_LIMIT:
                            man = man * np.uint64(10) + np.uint64(buf[i] - 48)
                            exp10 -= 1
                        else:
                            dropped |= buf[i] != 48
                        digits += 1
                        i += 1
                if digits > 0 and (buf[i] == 101 or buf[i] == 69):  # e E
                    i += 1
                    eneg = False
                    if buf[i] == 45 or buf[i] == 43:
                        eneg = buf[i] == 45
                        i += 1
                    e = 0
                    edigits = 0
                    while 48 <= buf[i] <= 57:
                        if e < 100000:
                            e = e * 10 + (buf[i] - 48)
                        edigits += 1
                        i += 1
                    if edigits == 0:
                        dropped = True  # not a number: left to the caller
                    exp10 += -e if eneg else e
                while buf[i] == 32:
                    i += 1
                ended = buf[i] == 44 or buf[i] == 10 or buf[i] == 13
                if digits > 0 and ended and not dropped and man < _FAST_MAN and \
                        -22 <= exp10 <= 22:
                    value = np.float64(man)
                    if exp10 >= 0:
                        value *= exact[exp10]
                    else:
                        value /= exact[-exp10]
                    out[row, c] = -value if neg else value
                elif digits > 0 and ended and not dropped and man == np.uint64(0):
                    out[row, c] = -0.0 if neg else 0.0
                else:
                    while buf[i] != 44 and buf[i] != 10:
                        i += 1
                    pend_m[n_pend] = man
                    pend_i[n_pend, 0] = c
                    pend_i[n_pend, 1] = exp10
                    pend_i[n_pend, 2] = -1 if (digits == 0 or not ended or dropped) else \
                        (1 if neg else 0)
                    pend_i[n_pend, 3] = s
                    pend_i[n_pend, 4] = i
                    n_pend += 1
            else:
                while buf[i] != 44 and buf[i] != 10:
                    i += 1
            f += 1
            if i < end and buf[i] == 13:
                i += 1
                if i < end and buf[i] != 10:
                    complete = False
                    break
            if i >= end:
                if not final:
                    return pos, row, n_tok, lines, PARSE_OK
                break
            if buf[i] == 10:
                break
            i += 1  # the comma
        if not complete or f != ncol:
            return pos, row, n_tok, lines, PARSE_FIELDS
        if n_pend:
            n_tok = _settle(buf, out, row, pend_m, pend_i, n_pend, tokens, n_tok, hi_tab,
                            lo_tab)
        row += 1
        lines += 1
        pos = min(i + 1, end)
    return pos, row, n_tok, lines, PARSE_OK


def parse_rows(buf, start, end, final, colmap, out, row0, tokens, scratch=None):
    """Parse the data lines of ``buf[start:end]`` into ``out``.

    Parameters
    ----------
    buf : uint8 array of at least ``end + PAD`` bytes: ``buf[end]`` is overwritten (a
        newline that stops every scan) and up to 8 bytes past it may be read
    start, end : the bytes to read; ``start`` is a line start
    final : bool, True when ``end`` is the end of the file (a last line without a newline
        is then complete)
    colmap : int64 array, one entry per field of a line: the output column, or -1 to skip
    out : float64 array (rows, columns), written from row ``row0`` on
    row0 : int
    tokens : int64 array (capacity, 4), rows (out row, out column, start, end) of the
        tokens left for the caller to convert; its capacity must exceed len(colmap)
    scratch : `line_scratch` (len(colmap)), reused across calls; made here when None

    Returns
    -------
    pos : where reading stopped (a line start)
    row : the next output row
    n_tokens : tokens written
    lines : lines consumed (data, comments and blank lines)
    status : PARSE_OK, PARSE_OUT_FULL, PARSE_TOKENS_FULL or PARSE_FIELDS (the line at
        ``pos`` has another number of fields than ``colmap``)
    """
    if tokens.shape[0] <= colmap.shape[0]:
        raise ValueError("tokens must hold more rows than a line has fields")
    if buf.shape[0] < end + PAD:
        raise ValueError(f"buf needs {PAD} bytes past end (a newline is written at end, and "
                         "8 bytes are read at a time)")
    buf[end] = 10  # a sentinel: every scan stops at a newline, none tests the end
    pend_m, pend_i = scratch if scratch is not None else line_scratch(colmap.shape[0])
    return _parse_rows_impl(buf, start, end, final, colmap, out, row0, tokens, pend_m,
                            pend_i, _HI, _LO, _EXACT)


def line_scratch(n_fields: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-line scratch of `parse_rows` for lines of ``n_fields`` fields."""
    return np.empty(n_fields, dtype=np.uint64), np.empty((n_fields, 5), dtype=np.int64)
