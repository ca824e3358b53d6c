"""Sorting for the compiled kernels (array core): a stable radix argsort of float64 values
(the PSIS tail, the R-hat check's columns) and insertion sorts for short runs."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, error_model="numpy")
def _insertion_sort(v, lo, hi):
    """Sort ``v[lo:hi]`` ascending in place (for short runs)."""
    for i in range(lo + 1, hi):
        x = v[i]
        j = i - 1
        while j >= lo and v[j] > x:
            v[j + 1] = v[j]
            j -= 1
        v[j + 1] = x


@njit(cache=True, error_model="numpy")
def _insertion_sort_pairs(v, idx, lo, hi):
    """Sort ``v[lo:hi]`` ascending in place with ``idx`` alongside, stably (for short or
    nearly sorted runs)."""
    for i in range(lo + 1, hi):
        x = v[i]
        d = idx[i]
        j = i - 1
        while j >= lo and v[j] > x:
            v[j + 1] = v[j]
            idx[j + 1] = idx[j]
            j -= 1
        v[j + 1] = x
        idx[j + 1] = d


@njit(cache=True, error_model="numpy")
def _sorted_order(vals, sv):
    """Stable argsort of float64 ``vals`` without NaN (C-contiguous), with ``sv`` receiving
    the values in that order.  An LSD radix sort of the high 32 bits of the values'
    order-preserving 64-bit keys (4 counting passes, a pass skipped when every key has the
    same byte there), then an insertion sort by the whole key of each run sharing those
    bits (values within ~1e-6 relative of each other, or tied: a handful at most, already
    in draw order); the sorted keys give the sorted values back without a gather."""
    n = vals.size
    u = vals.view(np.uint64)
    top = np.uint64(1) << np.uint64(63)
    keys = np.empty(n, np.uint64)
    for i in range(n):
        k = u[i]
        keys[i] = ~k if k & top else k | top
    idx = np.arange(n)
    tk = np.empty_like(keys)
    ti = np.empty_like(idx)
    count = np.empty(257, np.int64)
    for p in range(4, 8):
        sh = np.uint64(8 * p)
        count[:] = 0
        for i in range(n):
            count[np.int64((keys[i] >> sh) & np.uint64(255)) + 1] += 1
        if count.max() == n:  # every key has the same byte here: nothing moves
            continue
        for b in range(256):
            count[b + 1] += count[b]
        for i in range(n):
            b = np.int64((keys[i] >> sh) & np.uint64(255))
            pos = count[b]
            tk[pos] = keys[i]
            ti[pos] = idx[i]
            count[b] = pos + 1
        keys, tk = tk, keys
        idx, ti = ti, idx
    hi32 = np.uint64(32)
    i = 0
    while i < n:  # runs sharing the high 32 bits: insertion sort by the whole key
        j = i + 1
        while j < n and (keys[j] >> hi32) == (keys[i] >> hi32):
            j += 1
        if j > i + 1:  # most runs are one key
            _insertion_sort_pairs(keys, idx, i, j)
        i = j
    su = sv.view(np.uint64)
    for q in range(n):  # the inverse of the key map
        k = keys[q]
        su[q] = k ^ top if k & top else ~k
    return idx


#: largest bucket `_sort_pairs_bucketed` accepts (its insertion sort costs ~size^2 / 4)
_BUCKET_MAX = 48


@njit(cache=True, error_model="numpy")
def _sort_pairs_bucketed(vals, idx, n, lo, hi, sv, sidx, count):
    """Sort the pairs ``(vals[:n], idx[:n])`` by value, stably, into ``sv[:n]`` / ``sidx[:n]``;
    ``lo`` <= every value <= ``hi``, both finite, ``count`` scratch of at least n + 1.  One
    bucket per pair over [lo, hi] (a monotone map, so buckets keep the values' order), a
    stable scatter and an insertion sort that moves values only within their bucket.
    Returns False, leaving the output undefined, when the values are too unevenly spread
    (a bucket of more than `_BUCKET_MAX`) or the range is empty: the caller sorts otherwise."""
    if not (hi > lo and hi - lo < np.inf):
        return False
    scale = n / (hi - lo)
    top = n - 1
    count[:n + 1] = 0
    for i in range(n):
        b = min(np.int64((vals[i] - lo) * scale), top)
        count[b + 1] += 1
    big = 0
    for b in range(n):
        big = max(big, count[b + 1])
        count[b + 1] += count[b]
    if big > _BUCKET_MAX:
        return False
    for i in range(n):
        b = min(np.int64((vals[i] - lo) * scale), top)
        pos = count[b]
        sv[pos] = vals[i]
        sidx[pos] = idx[i]
        count[b] = pos + 1
    _insertion_sort_pairs(sv, sidx, 0, n)
    return True
