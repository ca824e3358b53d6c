"""Compiled pieces of the per-column R-hat check (array core): the exact rank R-hat of one
column's split draws (one stable radix sort, the folded draws merged from it), and a screen
that bounds it without sorting (see `loo_adapt.core.convergence`).  Shared by the check's
own kernel (`convergence._rhat_stuck_kernel`) and the relative-efficiency kernel that runs it
in the same pass (`core.ess`)."""

from __future__ import annotations

import numpy as np
from numba import njit
from scipy.special import ndtri

from loo_adapt.core._sort import _sorted_order
from loo_adapt.core._vmath import _bits


def _score_table(n: int) -> np.ndarray:
    """Blom scores indexed by twice the (average) rank: table[r2] for r2 = 2..2n."""
    r2 = np.arange(2 * n + 2, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return ndtri((r2 / 2.0 - 0.375) / (n + 0.25))


@njit(cache=True)
def _scores_of_sorted(sv, order, table, z):  # pragma: no cover - compiled
    """z[order[q]] = Blom score of the average rank of the q-th smallest value, ``sv`` the
    values in increasing order (contiguous: ties are runs of equal neighbours)."""
    n = sv.size
    i = 0
    while i < n:
        k = i
        while k + 1 < n and sv[k + 1] == sv[i]:
            k += 1
        score = table[i + k + 2]  # 2 x (average rank) = i + k + 2
        for q in range(i, k + 1):
            z[order[q]] = score
        i = k + 1


@njit(cache=True)
def _rhat_of(z, n_chains, n_half):  # pragma: no cover - compiled
    """Split R-hat of scores ``z`` (n_chains x n_half, chain-major); when no chain moves
    (within-chain variance 0) inf if the chains sit at different values, else NaN (arviz's
    x / 0 and 0 / 0)."""
    means = np.zeros(n_chains)
    for c in range(n_chains):
        acc = 0.0
        for t in range(n_half):
            acc += z[c * n_half + t]
        means[c] = acc / n_half
    within = 0.0
    for c in range(n_chains):
        acc = 0.0
        for t in range(n_half):
            d = z[c * n_half + t] - means[c]
            acc += d * d
        within += acc / (n_half - 1)
    within /= n_chains
    grand = means.mean()
    between = 0.0
    for c in range(n_chains):
        between += (means[c] - grand) ** 2
    between = n_half * between / (n_chains - 1)
    if not within > 0.0:  # no chain moves: chains at different values disagree
        return np.inf if between > 0.0 else np.nan
    return np.sqrt((between / within + n_half - 1) / n_half)


@njit(cache=True)
def _rhat_stuck_column(vals, table, n_chains, h):  # pragma: no cover - compiled
    """Rank R-hat (bulk and folded, split chains) of one column's split draws ``vals``
    (2 chains x h)."""
    k = 2 * n_chains
    n = k * h
    ext = np.empty(n + 2)  # sorted values between the sentinels -inf and +inf
    sv = ext[1:n + 1]
    order = _sorted_order(vals, sv)
    z = np.empty(n)
    _scores_of_sorted(sv, order, table, z)
    bulk = _rhat_of(z, k, h)
    med = sv[n // 2] if n % 2 == 1 else 0.5 * (sv[n // 2 - 1] + sv[n // 2])
    # |x - med| in increasing order: merge the draws below the median (walking down) with
    # those at or above it (walking up), between the sentinels; no second sort
    ext[0] = -np.inf
    ext[n + 1] = np.inf
    right = n // 2
    while right > 0 and sv[right - 1] >= med:
        right -= 1
    while right < n and sv[right] < med:
        right += 1
    left = right - 1
    fv = np.empty(n)
    forder = np.empty(n, dtype=np.int64)
    for q in range(n):
        dl = med - ext[left + 1]
        dr = ext[right + 1] - med
        if dl <= dr:
            fv[q] = dl
            forder[q] = order[left]
            left -= 1
        else:
            fv[q] = dr
            forder[q] = order[right]
            right += 1
    _scores_of_sorted(fv, forder, table, z)
    tail = _rhat_of(z, k, h)
    if np.isnan(bulk):
        return tail
    if np.isnan(tail):
        return bulk
    return max(bulk, tail)



# ---- a screen that shows most columns' R-hat below the threshold without sorting -------
#: buckets of the screen, coarse then fine (a column's draws are split into this many value
#: ranges).  The coarse tier shows 99-100 % of well-mixed normal columns below the
#: threshold from 4 chains of 400 draws up (256 buckets: 58 % at 4 x 400, 96 % at 4 x 1000)
#: and costs what 256 do (its per-chain histograms fit in L1; 1024 take a third more time);
#: a column it cannot show goes to the fine tier (the screen test's mixed columns pass with
#: 1024), then to the exact R-hat
_SCREEN_TIERS = (512, 1024)
_SCREEN_BUCKETS = _SCREEN_TIERS[-1]
#: most draws sharing the median's buckets that the screen sorts to find the median
_SCREEN_MEDIAN = 256
#: interleaved partial histograms per split chain (even and odd draws): consecutive draws
#: of a chain can fall in one bucket, and one counter would serialise their increments
#: (store-to-load latency)
_LANES = 2


@njit(cache=True)
def _buckets(levels, lo, hi, nb, k, h, count, lanes):  # pragma: no cover - compiled
    """Replace integer ``levels`` (non-decreasing in the values they stand for, between
    ``lo`` and ``hi``; k split chains of h draws, chain-major) by bucket indices in
    [0, nb), dividing [lo, hi] evenly; ``lanes[l, c, b]`` gets the number of draws of split
    chain c (even draws l = 0, odd l = 1) in bucket b (``lanes`` flat, `_lanes_view`),
    ``count[b]`` the bucket's size.  False when lo == hi (all levels equal)."""
    if lo == hi:
        return False
    d = np.uint64(hi - lo)
    s = np.uint64(0)
    while (d >> s) > np.uint64(nb - 1):
        s += np.uint64(1)
    n = levels.size
    for i in range(n):  # vectorised
        levels[i] = np.int64(np.uint64(levels[i] - lo) >> s)
    lv = _lanes_view(lanes, k, nb)
    lv[:] = 0
    even = lv[0]
    odd = lv[1]
    h2 = h - h % 2
    for c in range(k):
        base = c * h
        ev = even[c]
        od = odd[c]
        for t in range(base, base + h2, 2):
            ev[levels[t]] += 1
            od[levels[t + 1]] += 1
        if h2 < h:
            ev[levels[base + h - 1]] += 1
    for b in range(nb):
        count[b] = 0
    for c in range(k):
        for b in range(nb):  # vectorised
            count[b] += even[c, b] + odd[c, b]
    return True


@njit(cache=True)
def _lanes_view(lanes, k, nb):  # pragma: no cover - compiled
    """The flat histogram buffer ``lanes`` as (lanes, k split chains, nb buckets), packed:
    the coarse tier's counters stay together in L1."""
    return lanes[:_LANES * k * nb].reshape((_LANES, k, nb))


@njit(cache=True, fastmath={"reassoc", "contract"})
def _chain_bound_sums(lv, c, nb, glo, ghi):  # pragma: no cover - compiled
    """(sum_b n_cb glo[b], sum_b n_cb ghi[b]) over the buckets of split chain c, its counts
    n_cb from the two lanes of ``lv`` (`_lanes_view`); reassociated so that LLVM vectorises
    it."""
    ev = lv[0, c]
    od = lv[1, c]
    lo = 0.0
    hi = 0.0
    for b in range(nb):
        w = np.float64(ev[b] + od[b])
        lo += w * glo[b]
        hi += w * ghi[b]
    return lo, hi


@njit(cache=True)
def _below_threshold(count, lanes, nb, n, table, k, h, ratio, glo,
                     ghi):  # pragma: no cover - compiled
    """True when the split R-hat of the draws' normal scores is shown <= the threshold
    (``ratio``: the largest between / within variance it allows) from rank intervals: a draw
    in bucket b has an average rank within that bucket's ranks, so its Blom score within
    [glo[b], ghi[b]].  Chain means m_c then lie in [L_c, U_c] (from each split chain's
    bucket counts, `_buckets`' ``lanes``); ``between`` is at most h / (k - 1) sum max((L_c -
    a)^2, (U_c - a)^2) for any a, and k (h - 1) ``within`` = sum z^2 - h sum m_c^2 is at
    least sum_b count_b min z^2 - h sum max(L_c^2, U_c^2).  The sums run in a different
    order than the exact R-hat's; the comparison keeps a relative margin of 1e-9, far above
    their rounding."""
    below = 0
    sq = 0.0
    for b in range(nb):  # branch-free (empty buckets: in-range garbage, weight 0)
        c = count[b]
        lo = table[2 * min(below + 1, n)]
        hi = table[2 * max(below + c, 1)]
        glo[b] = lo
        ghi[b] = hi
        sq += c * (0.0 if lo <= 0.0 <= hi else min(lo * lo, hi * hi))
        below += c
    low = np.empty(k)
    up = np.empty(k)
    lv = _lanes_view(lanes, k, nb)
    for c in range(k):
        s_lo, s_hi = _chain_bound_sums(lv, c, nb, glo, ghi)
        low[c] = s_lo / h
        up[c] = s_hi / h
    within = sq
    for c in range(k):
        within -= h * max(low[c] ** 2, up[c] ** 2)
    within /= k * (h - 1)
    centre = 0.5 * (low.mean() + up.mean())
    between = 0.0
    for c in range(k):
        between += max((low[c] - centre) ** 2, (up[c] - centre) ** 2)
    between *= h / (k - 1)
    return within > 0.0 and between <= within * ratio * (1.0 - 1e-9)


@njit(cache=True)
def _level(v, e):  # pragma: no cover - compiled
    """The screen's level of a float64 ``v`` (no -0.0): sign(v) * (bits of |v| above
    ``e``'s), non-decreasing in v and spaced like log |v|."""
    b = _bits(v)
    m = max((b & np.int64(0x7FFFFFFFFFFFFFFF)) - e, np.int64(0))
    return m - 2 * m * ((b >> np.int64(63)) & np.int64(1))  # branch-free sign


@njit(cache=True)
def _screen_bulk(x, e, lv_lo, lv_hi, nb, k, h, table, ratio, bidx, count, glo, ghi,
                 lanes):  # pragma: no cover - compiled
    """The bulk half of `_screen_column` with ``nb`` buckets: ``bidx`` leaves with each
    draw's bucket and ``count`` with the buckets' sizes (used for the median)."""
    n = x.size
    for i in range(n):  # vectorised
        bidx[i] = _level(x[i], e)
    if not _buckets(bidx, lv_lo, lv_hi, nb, k, h, count, lanes):
        return False
    return _below_threshold(count, lanes, nb, n, table, k, h, ratio, glo, ghi)


@njit(cache=True)
def _median_buckets(count, nb, n):  # pragma: no cover - compiled
    """(first bucket, last bucket, ranks before the first, draws in them) of the buckets
    that hold the median's ranks."""
    p2 = n // 2
    p1 = p2 - 1 if n % 2 == 0 else p2
    below = 0
    b1 = -1
    b2 = -1
    start = 0
    size = 0
    for b in range(nb):
        c = count[b]
        if b1 < 0 and p1 < below + c:
            b1 = b
            start = below
        if p2 < below + c:
            b2 = b
            size = below + c - start
            break
        below += c
    return b1, b2, start, size


@njit(cache=True)
def _screen_column(x, lo, hi, k, h, table, ratio, bidx, count, glo, ghi, mid,
                   lanes):  # pragma: no cover - compiled
    """True when the rank R-hat (bulk and folded) of one split column ``x`` (k chains x h,
    no -0.0; ``lo`` <= its values <= ``hi``) is shown <= the threshold without sorting;
    False means "not shown" (the exact R-hat decides).  Each half tries the coarse tier of
    buckets first, then the fine one.  The folded draws use the exact median, found by
    sorting the few draws in the middle ranks' buckets (as many as ``_SCREEN_MEDIAN``, else
    the fine tier's, else not shown)."""
    n = x.size
    # levels: magnitudes 2^-30 below the largest share level 0 when x has both signs
    e = np.int64(0)
    if lo < 0.0 < hi:
        e = _bits(max(-lo, hi) * 2.0 ** -30)
    lv_lo = _level(lo, e)
    lv_hi = _level(hi, e)
    nb = 0
    size = _SCREEN_MEDIAN + 1
    b1 = b2 = start = 0
    for tier in _SCREEN_TIERS:
        if size <= _SCREEN_MEDIAN:
            break
        if _screen_bulk(x, e, lv_lo, lv_hi, tier, k, h, table, ratio, bidx, count, glo, ghi,
                        lanes):
            nb = tier
            b1, b2, start, size = _median_buckets(count, nb, n)
    if nb == 0 or size > _SCREEN_MEDIAN:
        return False
    p2 = n // 2
    p1 = p2 - 1 if n % 2 == 0 else p2
    width = np.uint64(b2 - b1)
    j = 0
    for i in range(n):  # branch-free: write every draw, advance past those kept
        mid[j] = x[i]
        j += np.uint64(bidx[i] - b1) <= width  # b1 <= bidx[i] <= b2
    srt = np.sort(mid[:size])
    med = srt[p2 - start] if n % 2 == 1 else 0.5 * (srt[p1 - start] + srt[p2 - start])
    # |x - med| >= 0: its bits are a level, non-decreasing in it; their extremes on the way
    f_lo = np.int64(0x7FFFFFFFFFFFFFFF)
    f_hi = np.int64(0)
    for i in range(n):
        f = _bits(abs(x[i] - med))
        bidx[i] = f
        f_lo = min(f_lo, f)
        f_hi = max(f_hi, f)
    for tier in _SCREEN_TIERS:
        if tier != _SCREEN_TIERS[0]:  # the coarse tier replaced the levels by its buckets
            for i in range(n):  # vectorised
                bidx[i] = _bits(abs(x[i] - med))
        if not _buckets(bidx, f_lo, f_hi, tier, k, h, count, lanes):
            return False
        if _below_threshold(count, lanes, tier, n, table, k, h, ratio, glo, ghi):
            return True
    return False


def screen_ratio(n_half: int, max_rhat: float) -> float:
    """The largest between / within variance ratio of split chains of ``n_half`` draws whose
    R-hat is at most ``max_rhat``: R-hat^2 = (B / W + h - 1) / h."""
    return n_half * (max_rhat ** 2 - 1.0) + 1.0


@njit(cache=True)
def _screen_scratch(n, k):  # pragma: no cover - compiled
    """Scratch arrays of `_rhat_column` for columns of ``n`` draws in ``k`` split chains
    (one set per thread's share of columns): bucket indices, bucket counts, score bounds,
    mid draws, the split chains' partial histograms (empty for ``n`` = 0: a caller that runs
    no R-hat)."""
    nb = _SCREEN_BUCKETS if n > 0 else 0
    return (np.empty(n, np.int64), np.empty(nb, np.int64), np.empty(nb), np.empty(nb),
            np.empty(n + 1), np.empty(_LANES * k * nb, np.int32))


@njit(cache=True)
def _rhat_column(x, lo, hi, n_chains, h, table, ratio, scratch):  # pragma: no cover
    """Rank R-hat of one split column ``x`` (2 n_chains x h, no -0.0, ``lo`` <= values <=
    ``hi``); with ``ratio`` > 0, NaN where the screen shows it at most the threshold.
    ``scratch``: `_screen_scratch` of the column's length."""
    bidx, count, glo, ghi, mid, lanes = scratch
    if ratio > 0.0 and _screen_column(x, lo, hi, 2 * n_chains, h, table, ratio, bidx, count,
                                      glo, ghi, mid, lanes):
        return np.nan
    return _rhat_stuck_column(x, table, n_chains, h)
