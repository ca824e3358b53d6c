"""The numba kernels behind `loo_adapt.core.mixis.mixis_loo` and
`loo_adapt.core.skew.snis_influence_moments` (array core): each reads its (draws,
observations) input row by row, three times, with per-observation accumulators that LLVM
vectorises (the branch-free ``exp`` / ``log`` of ``core._vmath``), where the numpy twins
make about fifteen passes over (S, n) temporaries.  Same numbers as the numpy twins to
rounding (sums reassociated: ~1e-13 relative;
``tests/core/test_mixis_kernel.py``); `loo_adapt.core._compiled.use_numba` picks the engine.

Status codes: 0 done; 1 an input value is not finite (the numpy twin handles -inf, and
raises for what it refuses), nothing usable written.  `_mixis_pass` takes input checked by
`loo_adapt.core.checks.as_log_lik_array` (no NaN, no +inf).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from loo_adapt.core._vmath import exp_clamped
from loo_adapt.core._vmath import log as _log
from loo_adapt.core._vmath import vsum as _sum

_OK = 0
_NOT_FINITE = 1


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def _mixis_pass(ll, chains, log_w, z, stats, chain_den, chain_num):
    """Mixture-IS LOO of every column of ``ll`` (S, n), draws in chain order.

    Writes ``log_w`` (S, n) the log weights normalised per column, ``z`` (S, n) the
    delta-method influence ``a_s / abar - S w_is``, and per column in ``stats`` (6, n):
    elpd_i, lpd_i, Kish ESS, the influence's variance (ddof 1), its second and third central
    moments (ddof 0); ``chain_den`` (chains, n) gets each chain's
    ``log sum_s w_is`` and ``chain_num`` (chains,) each chain's ``log sum_s exp(-lse_s)``.
    Returns a status code."""
    S, n = ll.shape
    draws = S // chains
    e = np.empty(n)
    neg_lse = np.empty(S)  # -log sum_j 1 / l_sj
    colmax_r = np.full(n, -np.inf)
    colmax_p = np.full(n, -np.inf)
    cmax_r = np.full((chains, n), -np.inf)
    cmax_num = np.full(chains, -np.inf)
    # pass 1: each draw's log sum_j 1 / l_sj, the log ratios, their column maxima
    for s in range(S):
        row = ll[s]
        mx = -math.inf
        for j in range(n):
            mx = max(mx, -row[j])
        # the caller's input holds no NaN or +inf (`core.checks.as_log_lik_array`); a -inf
        # (a likelihood of 0) makes the maximum +inf: the numpy twin's case
        if not (mx < math.inf):
            return _NOT_FINITE
        for j in range(n):
            e[j] = exp_clamped(-row[j] - mx)
        lse = mx + math.log(_sum(e, n))
        neg_lse[s] = -lse
        c = s // draws
        cmax_num[c] = max(cmax_num[c], -lse)
        out = log_w[s]
        cm = cmax_r[c]
        for j in range(n):
            r = -row[j] - lse
            out[j] = r
            colmax_r[j] = max(colmax_r[j], r)
            cm[j] = max(cm[j], r)
            colmax_p[j] = max(colmax_p[j], row[j] - lse)
    num_mx = -math.inf
    for s in range(S):
        num_mx = max(num_mx, neg_lse[s])
    # pass 2: log normalisers (all draws and per chain), lpd's sums
    den = np.zeros(n)
    pl = np.zeros(n)
    cden = np.zeros((chains, n))
    cnum = np.zeros(chains)
    tot = 0.0
    for s in range(S):
        row = ll[s]
        lr = log_w[s]
        c = s // draws
        cm = cmax_r[c]
        cd = cden[c]
        a = neg_lse[s]
        tot += math.exp(a - num_mx)
        cnum[c] += math.exp(a - cmax_num[c])
        for j in range(n):
            den[j] += exp_clamped(lr[j] - colmax_r[j])
            cd[j] += exp_clamped(lr[j] - cm[j])
            pl[j] += exp_clamped(a + row[j] - colmax_p[j])
    log_num = num_mx + math.log(tot)
    log_den = np.empty(n)
    for j in range(n):
        log_den[j] = colmax_r[j] + _log(den[j])
        stats[0, j] = log_num - log_den[j]
        stats[1, j] = colmax_p[j] + _log(pl[j]) - log_num
    for c in range(chains):
        for j in range(n):
            chain_den[c, j] = cmax_r[c, j] + _log(cden[c, j])
        chain_num[c] = cmax_num[c] + math.log(cnum[c])
    # pass 3: normalised log weights, influence values and their moments
    log_s = math.log(S)
    sb2 = np.zeros(n)
    s1 = np.zeros(n)
    for s in range(S):
        a_rel = math.exp(neg_lse[s] - log_num + log_s)
        lw = log_w[s]
        zr = z[s]
        for j in range(n):
            w = lw[j] - log_den[j]
            lw[j] = w
            b = exp_clamped(w + log_s)
            d = a_rel - b
            zr[j] = d
            sb2[j] += b * b
            s1[j] += d
    _central_moments(z, s1, stats)
    for j in range(n):
        stats[2, j] = S * float(S) / sb2[j]
    return _OK


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def _central_moments(z, s1, stats):
    """Rows 3-5 of ``stats``: each column's variance (ddof 1) and second and third central
    moments (ddof 0) of ``z`` (S, m), whose column sums are ``s1``; centred in a second
    pass, as numpy's ``var`` is."""
    S, m = z.shape
    mean = s1 / S
    s2 = np.zeros(m)
    s3 = np.zeros(m)
    for s in range(S):
        zr = z[s]
        for k in range(m):
            d = zr[k] - mean[k]
            d2 = d * d
            s2[k] += d2
            s3[k] += d2 * d
    for k in range(m):
        stats[3, k] = s2[k] / (S - 1)
        stats[4, k] = s2[k] / S
        stats[5, k] = s3[k] / S


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def _snis_pass(log_weights, log_lik, cols, z, stats):
    """Influence values of ``log(sum_s w_s l_s)`` for the columns ``cols`` of normalised log
    weights ``log_weights`` and ``log_lik`` (both (S, n)): ``z`` (S, len(cols)) gets ``S w_s
    l_s / sum(w l) - S w_s``, ``stats`` (6, len(cols)) rows 3-5 their variance (ddof 1) and
    second and third central moments (ddof 0).  The columns are gathered once, so the
    passes after the first run over contiguous rows.  Returns a status code."""
    S = log_weights.shape[0]
    m = cols.shape[0]
    mx = np.full(m, -np.inf)
    lw_c = np.empty((S, m))
    for s in range(S):
        lw = log_weights[s]
        ll = log_lik[s]
        zr = z[s]
        wr = lw_c[s]
        for k in range(m):
            j = cols[k]
            a = lw[j] + ll[j]
            if not (a < math.inf) or a != a:
                return _NOT_FINITE
            zr[k] = a
            wr[k] = lw[j]
            mx[k] = max(mx[k], a)
    tot = np.zeros(m)
    for s in range(S):
        zr = z[s]
        for k in range(m):
            tot[k] += exp_clamped(zr[k] - mx[k])
    shift = np.empty(m)
    log_s = math.log(S)
    for k in range(m):
        if not (mx[k] > -math.inf):
            return _NOT_FINITE
        shift[k] = log_s - mx[k] - _log(tot[k])
    s1 = np.zeros(m)
    for s in range(S):
        zr = z[s]
        wr = lw_c[s]
        for k in range(m):
            d = exp_clamped(zr[k] + shift[k]) - exp_clamped(wr[k] + log_s)
            zr[k] = d
            s1[k] += d
    _central_moments(z, s1, stats)
    return _OK


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def _weighted_prob(log_weights, log_p1, out):
    """``out[j] = min(1, sum_s exp(log_weights[s, j] + log_p1[s, j]))`` for normalised
    ``log_weights`` (S, n) and log-probabilities ``log_p1`` (S, n); status 1 (nothing usable
    written) where a ``log_p1`` or a weight is NaN or above 0 (log scale)."""
    S, n = log_weights.shape
    for j in range(n):
        out[j] = 0.0
    for s in range(S):
        lw = log_weights[s]
        lp = log_p1[s]
        for j in range(n):
            p = lp[j]
            x = lw[j] + p
            # a log_p1 above 0 or NaN is refused by the numpy code; a weight above 1 or
            # NaN (weights not normalised) is its case too (`exp_clamped` reads NaN as 0)
            if not (p <= 0.0 and x <= 0.0):
                return _NOT_FINITE
            out[j] += exp_clamped(x)
    for j in range(n):
        if not (out[j] < math.inf):
            return _NOT_FINITE
        out[j] = min(out[j], 1.0)
    return _OK


@njit(cache=True, error_model="numpy")
def _bernoulli_log_p1(ll, y, out):
    """``out`` (S, n) = log P(y = 1 | theta) from the Bernoulli log-likelihood ``ll`` (S, n)
    of the observed ``y`` (n,): ``ll`` where y = 1, ``log(-expm1(ll))`` where y = 0 (-inf
    where ll is 0).  Status 1 (nothing usable written) where an ``ll`` is above 0 or NaN."""
    S, n = ll.shape
    for s in range(S):
        row = ll[s]
        o = out[s]
        for j in range(n):
            v = row[j]
            if not (v <= 0.0):
                return _NOT_FINITE
            if y[j] == 1:
                o[j] = v
            elif v == 0.0:
                o[j] = -math.inf
            else:
                o[j] = math.log(-math.expm1(v))
    return _OK
