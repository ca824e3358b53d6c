"""PSIS and PSIS-LOO in plain numpy, vectorised over observations: the cold-start path.

Same algorithm, same outputs as the numba kernel of ``loo_adapt.core.psis`` (``_run``), to
rounding (~1e-14; ``tests/core/test_psis_kernel.py``).  It exists because compiling the numba
kernel takes seconds in a fresh environment, longer than this path needs for a few million
log-likelihood values; ``psis._run`` picks it for such problems unless the kernel is
already compiled.  It runs over chunks of columns, so its temporaries stay within ~1x the
input.

Columns are processed in groups with the same tail length M (one group for a scalar
r_eff): the M + 1 largest values of each column by ``np.argpartition``, put in R's stable
order (by value, ties by draw), the generalized Pareto fit for the whole group at once.
"""

from __future__ import annotations

import numpy as np

from loo_adapt.core._status import (
    _ALL_NEG_INF,
    _BAD,
    _CONSTANT_TAIL,
    _DBL_EPS,
    _FIT_FAILED,
    _OK,
    _SHORT_TAIL,
)
from loo_adapt.core.lse import logsumexp

#: Columns per GPD batch: bounds the (columns, grid, M) temporary to ~64 MB.
_GPD_BATCH_CELLS = 8_000_000

#: The columns are processed in this many chunks: a chunk's temporaries (~10 arrays of its
#: size) then stay within ~1x the input (``benchmarks/bench_psis.py`` measures the peak).
_CHUNKS = 12


def _gpdfit_rows(x):
    """Zhang & Stephens fit (R loo gpdfit, weakly informative prior) of each row of
    ``x`` (g, n), rows ascending: (k, sigma) arrays, k inf where the fit fails."""
    g, n = x.shape
    m = 30 + int(np.floor(np.sqrt(n)))
    xstar = x[:, int(np.floor(n / 4.0 + 0.5)) - 1]
    j = np.arange(1, m + 1)
    with np.errstate(all="ignore"):
        theta = 1.0 / x[:, -1:] + (1.0 - np.sqrt(m / (j - 0.5)))[None, :] / 3.0 / xstar[:, None]
        a = -theta
        kk = np.empty((g, m))
        step = max(1, _GPD_BATCH_CELLS // (m * n))
        for i0 in range(0, g, step):
            sl = slice(i0, i0 + step)
            kk[sl] = np.sum(np.log1p(a[sl, :, None] * x[sl, None, :]), axis=2) / n
        l_theta = n * (np.log(a / kk) - kk - 1.0)
        lmax = l_theta.max(axis=1)
        finite = np.isfinite(lmax)
        w = np.exp(l_theta - lmax[:, None])  # R's exp(l - logSumExp(l)), as core.gpd
        theta_hat = np.sum(theta * w, axis=1) / np.sum(w, axis=1)
        if not finite.all():  # R's own form where the profile likelihood is not finite
            lt = l_theta[~finite]
            w = 1.0 / np.sum(np.exp(lt[:, :, None] - lt[:, None, :]), axis=1)
            theta_hat[~finite] = np.sum(theta[~finite] * w, axis=1)
        k = np.sum(np.log1p(-theta_hat[:, None] * x), axis=1) / n
        sigma = -k / theta_hat
        k = (k * n + 10.0 * 0.5) / (n + 10.0)
    k[np.isnan(k)] = np.inf
    return k, sigma


def _smooth_group(x, out, mx, tail_len, khat, status):
    """Smooth the columns of x (g, S) = shifted log ratios (rows), writing ``out`` (g, S)
    in place (it holds the raw log ratios); khat and status (g,) are filled."""
    g, s_draws = x.shape
    n_top = tail_len + 1
    if tail_len < 5:
        khat[:] = np.inf
        status[:] = _SHORT_TAIL
        return
    # the (M + 1)-th largest value c per row, then every draw >= c in (value, draw) order
    part = np.partition(x, s_draws - n_top, axis=1)
    c = part[:, s_draws - n_top]
    n_ge = np.sum(x >= c[:, None], axis=1)
    top = np.empty((g, n_top), dtype=np.int64)
    simple = n_ge == n_top
    if simple.any():
        idx = np.argpartition(x[simple], s_draws - n_top, axis=1)[:, s_draws - n_top:]
        idx.sort(axis=1)  # draw order, then a stable sort by value: R's order
        vals = np.take_along_axis(x[simple], idx, axis=1)
        top[simple] = np.take_along_axis(idx, np.argsort(vals, axis=1, kind="stable"), axis=1)
    for r in np.flatnonzero(~simple):  # ties at the cutoff: stable sort of the whole row
        top[r] = np.argsort(x[r], kind="stable")[s_draws - n_top:]
    v = np.take_along_axis(x, top, axis=1)  # ascending; v[:, 0] is the cutoff
    tail_lo = v[:, 1]
    tail_hi = v[:, -1]
    const = np.abs(tail_hi - tail_lo) < _DBL_EPS
    cutoff = v[:, 0].copy()
    cutoff[cutoff == tail_lo] -= _DBL_EPS
    exp_cutoff = np.exp(cutoff)
    tail = np.exp(v[:, 1:]) - exp_cutoff[:, None]
    fit = ~const
    k = np.full(g, np.inf)
    sigma = np.full(g, np.nan)
    if fit.any():
        k[fit], sigma[fit] = _gpdfit_rows(tail[fit])
    with np.errstate(invalid="ignore"):
        ok = fit & np.isfinite(k) & np.isfinite(sigma) & (sigma > 0)
    status[:] = np.where(const, _CONSTANT_TAIL, np.where(ok, _OK, _FIT_FAILED))
    khat[:] = np.where(ok, k, np.inf)
    if not ok.any():
        return
    p = (np.arange(tail_len) + 0.5) / tail_len
    ko, so, eo = k[ok][:, None], sigma[ok][:, None], exp_cutoff[ok][:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(ko == 0.0, eo - so * np.log1p(-p),
                     eo + so * np.expm1(-ko * np.log1p(-p)) / ko)
    smoothed = np.minimum(np.log(q), tail_hi[ok][:, None]) + mx[ok][:, None]
    rows = out[ok]
    np.put_along_axis(rows, top[ok][:, 1:], smoothed, axis=1)
    out[ok] = rows


def psis_numpy(a, corr, lpd_off, loo, tail_len, r_eff, normalize, write):
    """The numpy twin of ``psis._run``'s kernel call; same arguments and outputs:
    (log_weights or None, khat, status, elpd, lpd, mcse_lognormal, n_eff).

    Runs over chunks of at most ``1 / _CHUNKS`` of the columns (each column's numbers do not
    depend on the others), so the temporaries stay within ~1x the input's size; the
    weights, when asked for, are another 1x.
    """
    n_draws, n_obs = a.shape
    width = max(1, -(-n_obs // _CHUNKS))
    if width >= n_obs:
        lw, *rest = _psis_chunk(a, corr, lpd_off, loo, tail_len, r_eff, normalize, write)
        return (np.ascontiguousarray(lw) if write else None), *rest
    m = n_obs if loo else 0
    out_lw = np.empty((n_draws, n_obs)) if write else None
    khat, status = np.empty(n_obs), np.empty(n_obs, dtype=np.int64)
    elpd, lpd, mcse, n_eff = np.empty(m), np.empty(m), np.empty(m), np.empty(m)
    for j0 in range(0, n_obs, width):
        cols = slice(j0, min(j0 + width, n_obs))
        lw, khat[cols], status[cols], e, p, s, ne = _psis_chunk(
            a[:, cols], corr, lpd_off, loo, tail_len[cols], r_eff[cols], normalize, write)
        if write:
            out_lw[:, cols] = lw
        if loo:
            elpd[cols], lpd[cols], mcse[cols], n_eff[cols] = e, p, s, ne
    return out_lw, khat, status, elpd, lpd, mcse, n_eff


def _psis_chunk(a, corr, lpd_off, loo, tail_len, r_eff, normalize, write):
    """``psis_numpy`` on the columns of ``a`` at once (temporaries ~10x its size); the log
    weights are returned as a transposed (S, n) view."""
    n_draws, n_obs = a.shape
    at = np.asarray(a).T  # (n, S) view
    with np.errstate(invalid="ignore"):
        if loo:
            bad = ~np.all(np.isfinite(at), axis=1)
            lr = corr[None, :] - at
        else:
            bad = ~np.all(at < np.inf, axis=1)
            lr = np.array(at, dtype=np.float64)
    status = np.full(n_obs, _OK, dtype=np.int64)
    status[bad] = _BAD
    if not loo:
        status[~bad & np.all(lr == -np.inf, axis=1)] = _ALL_NEG_INF
    khat = np.full(n_obs, np.nan)
    good = status == _OK
    lr[~good] = 0.0  # placeholder values: these columns report an error
    out = lr.copy()
    mx = lr.max(axis=1)
    with np.errstate(invalid="ignore"):
        x = lr - mx[:, None]
    for m_len in np.unique(tail_len[good]):
        rows = np.flatnonzero(good & (tail_len == m_len))
        sub_out = out[rows]
        st = np.empty(rows.size, dtype=np.int64)
        kh = np.empty(rows.size)
        _smooth_group(x[rows], sub_out, mx[rows], int(m_len), kh, st)
        out[rows] = sub_out
        status[rows] = st
        khat[rows] = kh
    m = n_obs if loo else 0
    elpd, lpd, mcse, n_eff = np.empty(m), np.empty(m), np.empty(m), np.empty(m)
    if normalize or loo:
        lse = logsumexp(out, axis=1)
        lw = out - lse[:, None]
        if loo:
            ll = np.where(good[:, None], at, 0.0)
            v = ll + lw
            elpd = logsumexp(v, axis=1)
            d = np.exp(v - elpd[:, None]) - np.exp(lw)
            mcse = np.sqrt(np.log1p(np.sum(d * d, axis=1)) / r_eff)
            n_eff = r_eff / np.sum(np.exp(2.0 * lw), axis=1)  # R loo's psis_n_eff
            if lpd_off.shape[0] > 0:
                lpd = logsumexp(ll + lpd_off[None, :], axis=1)
            else:
                lpd = logsumexp(ll, axis=1) - np.log(n_draws)
            for arr in (elpd, lpd, mcse, n_eff):
                arr[~good] = np.nan
        if normalize:
            out = lw
    lw_out = out.T if write else None
    return lw_out, khat, status, elpd, lpd, mcse, n_eff
