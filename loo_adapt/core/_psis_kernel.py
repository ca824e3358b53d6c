"""The numba PSIS kernel behind `loo_adapt.core.psis`: one pass per observation over its
draws, the tail found by selection (array core; see `loo_adapt.core.psis` for the algorithm,
its R ``loo`` provenance and the outputs).  ``psis._run`` calls `_psis_parallel` /
`_psis_serial`; `loo_adapt.core._psis_numpy` is its numpy twin.

Implementation.  One numba kernel (``_psis_block``) handles a block of 32 observations at a
time: the block is transposed through 64-draw tiles into a buffer, and each observation's
tail is found by selection (a threshold from a strided sample of ~256 draws, a filter pass,
a branch-free quickselect of the cutoff among the candidates, a sort of the M + 1 largest
only), so there is no full sort and no copy of the S x n input; the GPD fit (``core.gpd``)
and the smoothing write the tail in place in the buffer, whose maximum then follows from
the tail alone; the normaliser (one vectorised ``exp`` per draw) and, for LOO, elpd_i,
lpd_i and the MCSE follow, with the vectorised ``exp`` / ``expm1`` / ``log`` / ``log1p`` of
``core._vmath``.  The S x n log weights are written only when asked (``loo_pointwise(...,
weights=False)`` skips them): observation-major, (n, S) in memory and returned as its
transpose (S, n), so that the block buffer is the weights' own rows (smoothed and
normalised in place; no copy back).  From 64
observations up, the blocks run in parallel (``prange`` over a few chunks of blocks per
thread, each with its own scratch space).  A fresh environment would compile this kernel
on the first call (seconds); up to ``core._compiled.NUMPY_MAX_CELLS`` draws x observations
it runs the same algorithm in numpy instead (``core._psis_numpy``, same numbers to ~1e-14,
in column chunks) unless the kernel is already compiled or in numba's cache, or the numpy
runs of this process add up to more than that (``core._compiled.use_numba``).
For MCMC draws with r_eff to be computed (``psis_loo.loo_pointwise_checked``), each column's
relative efficiency, tail length and rank R-hat come from the same buffer first (`_checks`,
the numbers of ``core.ess``'s kernel), so ``loo`` reads the draws once.
``benchmarks/bench_psis.py`` measures it against arviz and a memory floor
(``benchmarks/results/bench_psis.txt``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from loo_adapt.core._prefetch import prefetch
from loo_adapt.core._sort import _insertion_sort, _sort_pairs_bucketed, _sorted_order
from loo_adapt.core._status import (  # the kernels' shared status codes
    _ALL_NEG_INF,
    _BAD,
    _CONSTANT_TAIL,
    _DBL_EPS,
    _FIT_FAILED,
    _OK,
    _SHORT_TAIL,
)
from loo_adapt.core._vmath import exp_clamped, exp_shifted, index_float
from loo_adapt.core._vmath import expm1 as _expm1
from loo_adapt.core._vmath import log as _log
from loo_adapt.core._vmath import log1p as _log1p
from loo_adapt.core._vmath import vsum as _sum
from loo_adapt.core.ess import _column_ess, _rhat_scratch
from loo_adapt.core.gpd import gpdfit_sorted

_TINY = 2.2250738585072014e-308  # smallest normal float64


# --------------------------------------------------------------------------------------------
# PSIS kernel: one pass per observation over its draws, tail found by selection
# --------------------------------------------------------------------------------------------
#
# Per column (observation) of the (S, n) input, inside a block of columns copied (transposed)
# into a buffer small enough for the cache:
#   1. max and input checks (one pass);
#   2. a threshold t from a strided sample of ~256 draws, chosen so that comfortably more
#      than M + 1 draws lie at or above it; the draws >= t are the candidates (one pass);
#   3. quickselect among the candidates gives the (M + 1)-th largest value c; the draws
#      >= c are sorted by (value, draw), which is R's stable order, ties included;
#   4. GPD fit of the M tail values, smoothed and truncated tail written in place in the
#      block buffer (the maximum of the result from the tail and the draws next to it);
#   5. normalisation, and (LOO mode) elpd_i, lpd_i and the MCSE's relative variance, with
#      the vectorised exp of ``_vmath`` (for plain LOO only the smoothed tail needs an exp
#      for elpd_i: elsewhere log_lik + log weight is -lse); the weights, if asked for, are
#      normalised while the block is transposed back.
# Nothing of size S x n is allocated unless the caller asks for the weights.


@njit(cache=True, error_model="numpy")
def _kth_largest(v, n, k, tmp):
    """Value of the k-th largest of ``v[:n]`` (1 <= k <= n); ``v[:n]`` and ``tmp[:n]`` are
    scratch.  Quickselect with a branch-free three-way partition from one buffer into the
    other (values above the pivot to the front, below it to the back, each store made
    unconditionally and kept by a conditional increment), so that the comparisons cost no
    mispredicted branches (~3x faster than a Hoare partition on random values)."""
    src = v
    dst = tmp
    lo = 0
    hi = n
    while hi - lo > 16:
        a = src[lo]
        b = src[(lo + hi) >> 1]
        c = src[hi - 1]
        if a > b:
            a, b = b, a
        if b > c:
            b = c
        pivot = b if b > a else a  # median of three
        n_gt = 0
        n_lt = 0
        # before each element n_gt + n_lt < hi - lo, so the tentative store to the front
        # never hits a kept slot at the back, and the back store lands on the front one
        # only with the same value
        for i in range(lo, hi):
            x = src[i]
            dst[lo + n_gt] = x
            n_gt += 1 if x > pivot else 0
            dst[hi - 1 - n_lt] = x
            n_lt += 1 if x < pivot else 0
        n_seg = hi - lo
        if k <= n_gt:
            hi = lo + n_gt
        elif k <= n_seg - n_lt:
            return pivot
        else:
            k -= n_seg - n_lt
            lo = hi - n_lt
        src, dst = dst, src
    _insertion_sort(src, lo, hi)  # the short rest
    return src[hi - k]


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def _log_sum_exp(v, shift, e):
    """``shift + log(sum(exp(v - shift)))``, ``e`` receives ``exp(v - shift)``."""
    n = v.shape[0]
    for s in range(n):
        e[s] = exp_clamped(v[s] - shift)
    return shift + math.log(_sum(e, n))


@njit(cache=True, error_model="numpy", fastmath={"nsz", "reassoc"})
def _mcse_sums(e1, e2, ca, cb):
    """(sum_s (e2_s ca - e1_s cb)^2, sum_s e1_s^2) in one pass, the two sums reassociated
    so that LLVM vectorises them (as `_vmath.vsum`; neither order is R's)."""
    var = 0.0
    sq = 0.0
    for s in range(e1.shape[0]):
        d = e2[s] * ca - e1[s] * cb
        var += d * d
        sq += e1[s] * e1[s]
    return var, sq


@njit(cache=True, error_model="numpy", fastmath={"nnan", "nsz", "reassoc"})
def _max(v):
    """Maximum of ``v`` (no NaN: callers check first), vectorised; -inf for all -inf."""
    mx = -math.inf
    for s in range(v.shape[0]):
        mx = max(mx, v[s])
    return mx


@njit(cache=True, error_model="numpy")
def _psis_column(lr, mx, tail_len, work, vals, idx, sv, sidx, cnt):
    """Smooth one observation's log ratios ``lr`` (contiguous, checked finite or -inf, their
    maximum ``mx`` finite) in place into unnormalised log weights; returns (khat, status, max of the
    result, t), the smoothed draws being ``idx[t:t + tail_len]``, their raw values
    ``sv[:tail_len]``, when status is _OK.

    Port of R loo ``do_psis_i`` + ``posterior::ps_tail(are_log_weights=TRUE)``.  ``lr``
    keeps the raw log ratios where no smoothing is possible.
    """
    s_draws = lr.shape[0]
    if tail_len < 5:
        return math.inf, _SHORT_TAIL, mx, 0
    n_top = tail_len + 1  # the tail and the cutoff below it
    # threshold from a strided sample: its r-th largest leaves ~2x n_top draws above it
    stride = s_draws // 256 if s_draws >= 512 else 1
    n_sample = (s_draws + stride - 1) // stride
    for i in range(n_sample):
        work[i] = lr[i * stride] - mx
    r = 2 * ((n_sample * n_top + s_draws - 1) // s_draws) + 4
    t = -math.inf if r >= n_sample else _kth_largest(work, n_sample, r, vals)
    n_cand = 0
    for s in range(s_draws):  # R sorts the shifted values; the shift can create ties
        xs = lr[s] - mx
        idx[n_cand] = s
        n_cand += 1 if xs >= t else 0
    if n_cand < n_top:  # the sample was unlucky: every draw is a candidate
        for s in range(s_draws):
            idx[s] = s
        n_cand = s_draws
    for i in range(n_cand):
        work[i] = lr[idx[i]] - mx
    c = _kth_largest(work, n_cand, n_top, vals)
    n_sel = 0
    for i in range(n_cand):  # branch-free: write every candidate, advance past those kept
        s = idx[i]
        xs = lr[s] - mx
        vals[n_sel] = xs
        idx[n_sel] = s  # n_sel <= i: overwrites only candidates already read
        n_sel += 1 if xs >= c else 0
    # sort the selected (value, draw) pairs stably (the draws were selected in ascending
    # order): by buckets over [c, 0] where the values spread evenly enough, else a radix
    # argsort followed by ascending draws within runs of equal values (-0.0 and 0.0)
    if not _sort_pairs_bucketed(vals, idx, n_sel, c, 0.0, sv, sidx, cnt):
        order = _sorted_order(vals[:n_sel], sv)
        for q in range(n_sel):
            sidx[q] = idx[order[q]]
        i = 0
        while i < n_sel:
            j = i + 1
            while j < n_sel and sv[j] == sv[i]:
                j += 1
            if j > i + 1:
                _insertion_sort(sidx, i, j)
            i = j
    for q in range(n_sel):
        vals[q] = sv[q]
        idx[q] = sidx[q]
    base = n_sel - n_top  # vals[base] is the cutoff, vals[base + 1:] the tail, ascending
    tail_lo = vals[base + 1]
    tail_hi = vals[n_sel - 1]
    if abs(tail_hi - tail_lo) < _DBL_EPS:
        return math.inf, _CONSTANT_TAIL, mx, 0
    cutoff = vals[base]
    if cutoff == tail_lo:
        cutoff = cutoff - _DBL_EPS
    exp_cutoff = math.exp(cutoff)
    tail = work[:tail_len]
    for j in range(tail_len):  # vectorised; exp_clamped is 0 below -708, libm is not
        tail[j] = exp_clamped(vals[base + 1 + j]) - exp_cutoff
    j = 0
    while j < tail_len and vals[base + 1 + j] < -708.0:  # ascending: those come first
        tail[j] = math.exp(vals[base + 1 + j]) - exp_cutoff
        j += 1
    k, sigma = gpdfit_sorted(tail, True, 30)
    if not (math.isfinite(k) and math.isfinite(sigma) and sigma > 0.0):
        return math.inf, _FIT_FAILED, mx, 0
    # the largest draw outside the tail: draws below the cutoff have smaller shifted
    # values, hence smaller raw values, so it is among the selected ones
    m2 = -math.inf
    for i in range(base + 1):
        m2 = max(m2, lr[idx[i]])
    _smooth_tail(tail, k, sigma, exp_cutoff, tail_hi)
    for j in range(tail_len):
        v = tail[j] + mx
        s = idx[base + 1 + j]
        sv[j] = lr[s]  # the raw value, for the caller
        lr[s] = v
        m2 = max(m2, v)
    return k, _OK, m2, base + 1


@njit(cache=True, error_model="numpy")
def _smooth_tail(tail, k, sigma, exp_cutoff, tail_hi):
    """``tail[j] = min(log(exp_cutoff + GPD quantile at (j + 0.5) / M), tail_hi)``, M the
    length of ``tail``: vectorised ``log1p`` / ``expm1`` / ``log`` of ``_vmath`` where their
    domains hold (they do unless k or the quantiles are extreme), else libm's."""
    tail_len = tail.shape[0]
    # |k log1p(-p)| <= |k| log(2 M): inside expm1's range
    fast = abs(k) * math.log(2.0 * tail_len) < 700.0
    if fast:
        for j in range(tail_len):
            lp = _log1p(-(index_float(j) + 0.5) / tail_len)
            if k == 0.0:
                tail[j] = exp_cutoff - sigma * lp
            else:
                tail[j] = exp_cutoff + sigma * _expm1(-k * lp) / k
        n_out = 0
        for j in range(tail_len):  # quantiles inside the fast log's domain
            q = tail[j]
            n_out += 0 if (q >= _TINY and q < 1e300) else 1
        fast = n_out == 0
    if fast:
        for j in range(tail_len):
            v = _log(tail[j])
            tail[j] = tail_hi if v > tail_hi else v  # truncate at the largest raw weight
        return
    for j in range(tail_len):
        p = (j + 0.5) / tail_len
        if k == 0.0:
            q = exp_cutoff - sigma * math.log1p(-p)
        else:
            q = exp_cutoff + sigma * math.expm1(-k * math.log1p(-p)) / k
        v = math.log(q)
        tail[j] = tail_hi if v > tail_hi else v


@njit(cache=True, error_model="numpy")
def _lpd_of_ratios(lr, mn, e):
    """log mean exp(-lr) of log ratios ``lr`` = -log_lik (finite, smallest ``mn``; ``e``
    scratch), the same numbers as log mean exp(log_lik) shifted by its maximum."""
    n = lr.shape[0]
    for s in range(n):
        e[s] = 0.0 - lr[s]
    exp_shifted(e, 0.0 - mn)  # (0 - lr) - max log_lik = mn - lr, exactly
    return -mn + math.log(_sum(e, n)) - math.log(n)


@njit(cache=True, error_model="numpy")
def _column_status(n_bad, n_ninf, n, loo):
    """Status of a column of ``n`` input values, ``n_bad`` of them NaN or +inf, ``n_ninf``
    -inf: _BAD (NaN or +inf; any non-finite value for a log-likelihood), _ALL_NEG_INF (log
    ratios -inf for every draw), else _OK."""
    if n_bad > 0 or (loo and n_ninf > 0):
        return _BAD
    if n_ninf == n:
        return _ALL_NEG_INF
    return _OK


@njit(cache=True, error_model="numpy")
def _psis_blocks(a, corr, lpd_off, loo, tail_len, r_eff, normalize, write, block, b0, b1, out_t,
                 out_k, status, out_elpd, out_lpd, out_mcse, out_neff, chk):
    """Blocks b0:b1 of ``block`` columns of the (chains, draws, n) input ``a``: log ratios,
    or (``loo``) log-likelihoods with log ratios ``corr - a``.  Each block is copied
    transposed into a buffer, so that each observation's draws are contiguous while ``a``
    is read row-wise: into its rows of ``out_t`` (n, S), the log weights observation-major,
    when ``write``, else into scratch; the scratch space is allocated once for all the
    blocks (one thread's share)."""
    s_draws = a.shape[0] * a.shape[1]
    n_obs = a.shape[2]
    zero_corr = True
    for s in range(corr.shape[0]):
        zero_corr = zero_corr and corr[s] == 0.0
    # the log-likelihood is kept beside the log ratios only when they are not its negative
    keep_ll = loo and not (zero_corr and lpd_off.shape[0] == 0)
    buf = np.empty((0 if write else block, s_draws))
    ll = np.empty((block if keep_ll else 0, s_draws))
    work = np.empty(s_draws)
    vals = np.empty(s_draws)
    idx = np.empty(s_draws, dtype=np.int64)
    sv = np.empty(s_draws)
    sidx = np.empty(s_draws, dtype=np.int64)
    cnt = np.empty(s_draws + 1, dtype=np.int64)
    e1 = np.empty(s_draws)
    e2 = np.empty(s_draws)
    v = np.empty(s_draws)
    lse_col = np.empty(block)
    stats = np.empty((4, block))
    fused = chk[0].shape[0] > 0  # r_eff and the R-hat check in the same pass (`_checks`)
    cscr = (np.empty(s_draws if fused else 0), _rhat_scratch(a.shape[0], a.shape[1], fused))
    for b in range(b0, b1):
        j0 = b * block
        j1 = min(j0 + block, n_obs)
        # with the weights asked for, the block is smoothed in place in their rows
        rows = out_t[j0:j1] if write else buf
        _psis_block(a, corr, lpd_off, loo, j0, j1, tail_len, r_eff, normalize, write, rows,
                    out_k, status, out_elpd, out_lpd,
                    out_mcse, out_neff, zero_corr, ll, work, vals, idx, sv, sidx, cnt, e1,
                    e2, v, lse_col, stats, chk, cscr)


@njit(cache=True, error_model="numpy")
def _transpose_tile(a, corr, loo, keep_ll, ch, t0, s0, s1, j0, width, buf, ll, lo, hi, n_bad,
                    n_ninf):
    """Draws s0:s1 (chain ``ch`` from draw ``t0``) of columns j0:j0 + width of the (chains,
    draws, n) input into rows of ``buf`` (and ``ll``), updating each column's extremes and
    counts of NaN / +inf and -inf.  Draw by draw, the block's columns inside: the input row
    is read contiguously and the running extremes of different columns do not wait on each
    other (column by column, one running min / max waits ~4 cycles per draw: 0.076 against
    0.030 s for 4000 x 10000, measured).  Where the observations are contiguous (an
    observation-minor input: rows ``n x 8`` bytes apart, which defeats the hardware
    prefetchers), each row asks for the same columns of the row one tile ahead
    (`_prefetch`); a draw-minor input (cmdstanpy's) is read along its lines anyway."""
    n_per = a.shape[1]
    ahead = a.strides[2] == 8  # 8 observations per 64-byte line
    for s in range(s0, s1):
        t = t0 + s - s0
        if ahead and t + _TILE < n_per:
            for q in range(0, width, 8):  # one per 64-byte line, and the last one's
                prefetch(a, ch, t + _TILE, j0 + q)
            prefetch(a, ch, t + _TILE, j0 + width - 1)
        row = a[ch, t, j0:j0 + width]
        if keep_ll:
            c = corr[s]
            for j in range(width):
                ll[j, s] = row[j]
                buf[j, s] = c - row[j]
        elif loo:  # log ratios -log_lik (0 - x, as above); log_lik is -buf
            for j in range(width):
                buf[j, s] = 0.0 - row[j]
        else:
            for j in range(width):
                buf[j, s] = row[j]
        for j in range(width):
            x = row[j]
            lo[j] = min(lo[j], x)
            hi[j] = max(hi[j], x)
            n_bad[j] += 0.0 if x < math.inf else 1.0  # NaN and +inf
            n_ninf[j] += 1.0 if x == -math.inf else 0.0


@njit(cache=True, error_model="numpy")
def _checks(lr, lo, hi, n_chains, n_per, j, r_eff, tail_len, chk, cscr):
    """Column j's relative efficiency, tail length, rank R-hat and stuck-chain flag from its
    log ratios ``lr`` = 0 - log_lik (finite, chains stacked; the log-likelihood between
    ``lo`` and ``hi``), the numbers of `core.ess._ess_direct_block` (its row x + 0.0 is
    rebuilt exactly as (0 - lr) + 0.0): ``r_eff[j]``, ``tail_len[j]`` (R loo's
    ``n_pareto``), ``chk`` = (R-hat, stuck, long, Blom scores, screen ratio, FFT scale,
    largest direct lag) filled at j; a column whose Geyer sequence needs longer lags is
    marked ``long`` (the caller redoes it through the FFT).  Returns sum_s exp(log_lik_s -
    hi), the exp that r_eff is computed from (NaN for a constant column), which is
    `_lpd_of_ratios`'s sum, value for value."""
    rhat, stuck, long, table, ratio, scale, max_lag = chk
    row, (sbuf, scratch) = cscr
    n = lr.shape[0]
    for s in range(n):
        row[s] = (0.0 - lr[s]) + 0.0
    ess, lng, total = _column_ess(row, n_chains, n_per, lo, hi, True, scale, max_lag, True,
                                  table, ratio, sbuf, scratch, rhat, stuck, j)
    long[j] = lng
    if lng:
        ess = float(n)  # a placeholder: the caller recomputes this column
    r = ess / n
    r_eff[j] = r
    tail_len[j] = math.ceil(min(0.2 * n, 3.0 * math.sqrt(n / r)))
    return total


@njit(cache=True, error_model="numpy")
def _psis_block(a, corr, lpd_off, loo, j0, j1, tail_len, r_eff, normalize, write, buf, out_k,
                status, out_elpd, out_lpd, out_mcse, out_neff, zero_corr, ll, work, vals, idx, sv,
                sidx, cnt, e1, e2, v, lse_col, stats, chk, cscr):
    """Columns j0:j1 (see ``_psis_blocks``; ``buf`` (j1 - j0, S) receives their log ratios
    and leaves with their log weights, normalised when ``normalize`` and they are the
    caller's (``write``); ``zero_corr``: ``corr`` is 0 for every draw; the rest are scratch
    arrays).  The transposition also takes each input column's smallest and largest value
    and counts its NaN / +inf and -inf (``stats``), so that the checks and the maximum the
    smoothing shifts by cost no pass of their own; with the checks, lpd_i comes from the
    exp that r_eff is computed from."""
    n_chains, n_per = a.shape[0], a.shape[1]
    s_draws = n_chains * n_per
    width = j1 - j0
    keep_ll = ll.shape[0] > 0
    lo, hi, n_bad, n_ninf = stats[0], stats[1], stats[2], stats[3]
    for j in range(width):
        lo[j] = math.inf
        hi[j] = -math.inf
        n_bad[j] = 0.0
        n_ninf[j] = 0.0
    # tiles of _TILE draws of a chain: a tile's rows of the block stay in cache while they
    # are transposed, instead of one cache/TLB miss per row per column
    for ch in range(n_chains):
        for t0 in range(0, n_per, _TILE):
            s0 = ch * n_per + t0
            _transpose_tile(a, corr, loo, keep_ll, ch, t0, s0, s0 + min(_TILE, n_per - t0),
                            j0, width, buf, ll, lo, hi, n_bad, n_ninf)
    for j in range(width):
        lse_col[j] = 0.0
    for j in range(width):
        st = _column_status(n_bad[j], n_ninf[j], s_draws, loo)
        if st != _OK:
            status[j0 + j] = st
            out_k[j0 + j] = math.nan
            if loo:
                out_neff[j0 + j] = math.nan
            continue
        out = buf[j]  # smoothed in place
        e_sum = math.nan  # sum_s exp(log_lik_s - max), when the checks computed it
        if chk[0].shape[0] > 0:  # r_eff (hence the tail length) and R-hat from this buffer
            e_sum = _checks(out, lo[j] + 0.0, hi[j] + 0.0, n_chains, n_per, j0 + j, r_eff,
                            tail_len, chk, cscr)
        # the largest log ratio: from the input's extremes, exactly (0 - x is monotone)
        if keep_ll:
            mx = _max(out)
        elif loo:
            mx = 0.0 - lo[j]
        else:
            mx = hi[j]
        if loo and not keep_ll:  # log mean exp(log_lik) = log mean exp(-out), before smoothing
            if e_sum == e_sum:  # the same exp and sum as `_lpd_of_ratios`'s
                out_lpd[j0 + j] = -(0.0 - hi[j]) + math.log(e_sum) - math.log(s_draws)
            else:
                out_lpd[j0 + j] = _lpd_of_ratios(out, 0.0 - hi[j], e2)
        k, st, m2, t0 = _psis_column(out, mx, tail_len[j0 + j], work, vals, idx, sv, sidx,
                                     cnt)
        out_k[j0 + j] = k
        status[j0 + j] = st
        if not (normalize or loo):
            continue
        lse = _log_sum_exp(out, m2, e1)  # e1 = exp(out - m2)
        lse_col[j] = lse if normalize else 0.0
        if loo:
            lc = ll[j] if keep_ll else out  # out: a placeholder, not read below
            if zero_corr:
                # v = log_lik + normalised log weight is -lse wherever the weight is the raw
                # ratio exp(-log_lik): only the smoothed tail needs an exp
                n_sm = tail_len[j0 + j] if st == _OK else 0
                vmax = -lse
                for i in range(n_sm):
                    s = idx[t0 + i]
                    # log_lik: kept, or minus the raw log ratio (sv, from _psis_column)
                    lls = lc[s] if keep_ll else -sv[i]
                    vt = lls + (out[s] - lse)
                    work[i] = vt
                    vmax = max(vmax, vt)
                for i in range(n_sm):
                    work[i] = exp_clamped(work[i] - vmax)
                e_body = math.exp(-lse - vmax)
                for s in range(s_draws):
                    e2[s] = e_body
                for i in range(n_sm):
                    e2[idx[t0 + i]] = work[i]
                elpd = vmax + math.log(_sum(e2, s_draws))  # e2 = exp(v - vmax)
            else:
                for s in range(s_draws):
                    v[s] = lc[s] + (out[s] - lse)  # log_lik + normalised log weight
                vmax = _max(v)
                elpd = _log_sum_exp(v, vmax, e2)  # e2 = exp(v - vmax)
            out_elpd[j0 + j] = elpd
            # Var / E^2 = sum_s (w_s p_s / E - w_s)^2 (module docstring)
            ca = math.exp(vmax - elpd)
            cb = math.exp(m2 - lse)
            # and R loo's psis_n_eff, r_eff / sum_s w_s^2, from the same exp: w_s = e1_s cb
            var, sq = _mcse_sums(e1, e2, ca, cb)
            out_mcse[j0 + j] = math.sqrt(math.log1p(var) / r_eff[j0 + j])
            out_neff[j0 + j] = r_eff[j0 + j] / (sq * cb * cb)
            if not keep_ll:  # lpd: before the smoothing, above
                continue
            if lpd_off.shape[0] > 0:  # log sum_s exp(ll_s + off_s)
                for s in range(s_draws):
                    v[s] = lc[s] + lpd_off[s]
                out_lpd[j0 + j] = _log_sum_exp(v, _max(v), e2)
            else:  # log mean exp(ll)
                out_lpd[j0 + j] = _log_sum_exp(lc, _max(lc), e2) - math.log(s_draws)
    if write and normalize:  # in place: the rows are the caller's weights
        for j in range(width):
            lse = lse_col[j]
            row = buf[j]
            for s in range(s_draws):
                row[s] -= lse


@njit(parallel=True, cache=True, error_model="numpy")
def _psis_parallel(a, corr, lpd_off, loo, tail_len, r_eff, normalize, write, block, n_chunks,
                   out_t, out_k, status, out_elpd, out_lpd, out_mcse, out_neff, chk):
    n_blocks = (a.shape[2] + block - 1) // block
    for c in prange(n_chunks):  # a few chunks of whole blocks per thread
        _psis_blocks(a, corr, lpd_off, loo, tail_len, r_eff, normalize, write, block,
                     c * n_blocks // n_chunks, (c + 1) * n_blocks // n_chunks, out_t, out_k,
                     status, out_elpd, out_lpd, out_mcse, out_neff, chk)


@njit(cache=True, error_model="numpy")
def _psis_serial(a, corr, lpd_off, loo, tail_len, r_eff, normalize, write, block, n_chunks,
                 out_t, out_k, status, out_elpd, out_lpd, out_mcse, out_neff, chk):
    n_blocks = (a.shape[2] + block - 1) // block
    _psis_blocks(a, corr, lpd_off, loo, tail_len, r_eff, normalize, write, block, 0, n_blocks,
                 out_t, out_k, status, out_elpd, out_lpd, out_mcse, out_neff, chk)


#: Observations per transposed block: each row of the input is read 256 contiguous bytes
#: at a time (fewer cache misses per column than 8 or 16; 64+ gains nothing, measured).
_BLOCK = 32

#: Draws per transposition tile (64 rows x 256 bytes: in L1 while transposed; halves the
#: transposition time at S = 16000 against row-by-row, measured).
_TILE = 64

#: Below this many observations the thread-pool start-up costs more than it saves
#: (measured ~25 ms per call on a loaded 2-core machine versus ~1 ms serial for 5 columns).
_PARALLEL_MIN_COLS = 64

#: Work items per numba thread (whole blocks, scratch allocated once per item), taken by
#: the threads one at a time: a few, so that a thread on a loaded core does not hold up
#: the others for long.
_CHUNKS_PER_THREAD = 4
