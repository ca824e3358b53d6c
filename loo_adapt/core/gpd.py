"""Generalized Pareto fit of a PSIS tail (Zhang & Stephens 2009, as R ``loo::gpdfit``).

Array core: numpy in, numpy out.  ``gpdfit`` is the public, checked entry point;
``gpdfit_sorted`` is the numba kernel that ``loo_adapt.core.psis`` calls once per
observation.  The profile likelihood of the ``m = 30 + floor(sqrt(n))`` grid points needs
``m n`` values of ``log1p`` (8 000 for a tail of 190 draws), so the loop runs over the tail
outside and over the grid inside, with the branch-free ``log1p`` of ``_vmath``: AVX2 code
instead of 8 000 libm calls.  Grid points whose ``1 + a x`` leaves that function's domain
(only in degenerate tails) are recomputed with ``math.log1p``, so the result is R's.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from loo_adapt.core._vmath import exp_clamped as _fast_exp
from loo_adapt.core._vmath import fma, vsum
from loo_adapt.core._vmath import log as _fast_log
from loo_adapt.core._vmath import log1p as _fast_log1p

__all__ = ["gpdfit", "gpdfit_sorted"]

_TINY = 2.2250738585072014e-308  # the fast log1p needs _TINY <= 1 + t < _HUGE
_HUGE = 1e300


@njit(inline="always", error_model="numpy")
def _sum_log1p(c, x, terms):
    """``sum_s log1p(c x_s)``, with the terms computed first by a loop that LLVM vectorises
    (a reduction alone stays scalar, one ``log1p`` after the other), then summed by
    `_vmath.vsum`."""
    n = x.shape[0]
    for s in range(n):
        terms[s] = _fast_log1p(c * x[s])
    return vsum(terms, n)


@njit(cache=True, error_model="numpy")
def _small_grid_logs(a, sel, x, acc):
    """``acc[j] = sum_s log1p(a_j x_s)`` for the grid points ``j`` in ``sel`` (where that sum
    is small), to a few ulp of the sum itself: each factor 1 + a_j x_s is split exactly into
    hi + lo (Fast2Sum, |a_j x_s| < 1), their product is carried in double-double (the error
    of each product from a fused multiply-add), and each chunk's log is log(hi) + lo / hi.
    A plain product's rounding costs ~1e-16 of absolute error per factor, which is not
    small against a sum near zero; summing 8 000 separate log1p's cost 3 ns each (this is
    about 6x faster).  Grid inside (one AVX2 lane per point), as `gpdfit_sorted`'s product."""
    k = sel.shape[0]
    k_pad = (k + 3) // 4 * 4  # the padding lanes have a = 0: factors 1, logs 0
    b = np.zeros(k_pad)
    for q in range(k):
        b[q] = a[sel[q]]
    n = x.shape[0]
    x_max = x[n - 1]
    big = 0.0  # largest |log(1 + b_q x_s)|, reached at x_max
    for q in range(k):
        big = max(big, abs(math.log1p(b[q] * x_max)))
    k_chunk = n if big == 0.0 else max(1, min(n, int(650.0 / big)))
    ph = np.empty(k_pad)
    pl = np.empty(k_pad)
    out = np.zeros(k_pad)
    for c0 in range(0, n, k_chunk):
        ph[:] = 1.0
        pl[:] = 0.0
        for s in range(c0, min(c0 + k_chunk, n)):
            xs = x[s]
            for q in range(k_pad):
                t = b[q] * xs
                hi = 1.0 + t
                lo = (1.0 - hi) + t  # exact: |t| < 1
                p = ph[q] * hi
                e = fma(ph[q], hi, -p)  # ph hi - p, exactly
                pl[q] = fma(pl[q], hi, fma(ph[q], lo, e))
                ph[q] = p
        for q in range(k):
            out[q] += math.log(ph[q]) + pl[q] / ph[q]
    for q in range(k):
        acc[sel[q]] = out[q]


@njit(cache=True, error_model="numpy")
def gpdfit_sorted(x, wip, min_grid_pts):
    """Zhang & Stephens (2009) fit of a zero-location GPD to ascending ``x`` (R loo gpdfit).

    Parameters
    ----------
    x : float64 array (n,), ascending, non-negative
    wip : bool, shrink k towards 0.5 as ``(k n + 5) / (n + 10)``
    min_grid_pts : int, grid size is ``min_grid_pts + floor(sqrt(n))``

    Returns
    -------
    (k, sigma) : k is ``inf`` when the fit fails (R's NA).
    """
    n = x.shape[0]
    prior = 3.0
    m = min_grid_pts + int(math.floor(math.sqrt(n)))
    xstar = x[int(math.floor(n / 4.0 + 0.5)) - 1]  # first quartile (R 1-based index)
    x_max = x[n - 1]
    m_pad = (m + 3) // 4 * 4  # whole AVX2 vectors; the padding lanes have a = 0, log1p(0) = 0
    theta = np.empty(m)
    terms = np.empty(n)
    sel = np.empty(m, dtype=np.int64)
    a = np.zeros(m_pad)
    acc = np.zeros(m_pad)
    n_slow = 0
    for j in range(m):
        theta[j] = 1.0 / x_max + (1.0 - math.sqrt(m / (j + 1 - 0.5))) / prior / xstar
        a[j] = -theta[j]
        # 1 + a x is monotone in x >= 0, so its extremes are 1 and 1 + a x_max
        u_max = 1.0 + a[j] * x_max
        if not (u_max >= _TINY and u_max < _HUGE):
            n_slow += 1
    # sum_s log1p(a_j x_s) for every grid point j, grid inside (one AVX2 lane per point)
    big = 0.0  # largest |log(1 + a_j x_s)|, reached at x_max
    for j in range(m):
        big = max(big, abs(math.log(1.0 + a[j] * x_max))) if n_slow == 0 else big
    if n_slow == 0 and big < 650.0:
        # as logs of products of up to K factors 1 + a_j x_s (each rounded, so each adds at
        # most 2^-53 to the log: the mean kk_j is within 2.3e-16 of R's), then one log per
        # chunk (vectorised: products stay within exp(+-650), inside the fast log's domain)
        k_chunk = n if big == 0.0 else max(1, min(n, int(650.0 / big)))
        prod = np.empty(m_pad)
        for c0 in range(0, n, k_chunk):
            prod[:] = 1.0
            for s in range(c0, min(c0 + k_chunk, n)):
                xs = x[s]
                for j in range(m_pad):
                    prod[j] *= 1.0 + a[j] * xs
            for j in range(m_pad):
                acc[j] += _fast_log(prod[j])
        # where |kk_j| < 0.05 that absolute error is not small relative to kk_j (l_j uses
        # log(kk_j)): those grid points take the product again with its rounding errors
        # carried (`_small_grid_logs`)
        n_small = 0
        for j in range(m):
            if abs(acc[j]) < 0.05 * n:
                sel[n_small] = j
                n_small += 1
        if n_small > 0:
            _small_grid_logs(a, sel[:n_small], x, acc)
    else:
        for s in range(n):
            xs = x[s]
            for j in range(m_pad):
                acc[j] += _fast_log1p(a[j] * xs)
    if n_slow > 0:
        for j in range(m):
            u_max = 1.0 + a[j] * x_max
            if not (u_max >= _TINY and u_max < _HUGE):
                v = 0.0
                for s in range(n):
                    v += math.log1p(a[j] * x[s])
                acc[j] = v
    l_theta = np.empty(m)
    ratio = np.empty(m)
    n_out = 0
    for j in range(m):  # a_j / kk_j inside the fast log's domain (it is unless degenerate)
        r = a[j] / (acc[j] / n)
        ratio[j] = r
        n_out += 0 if (r >= _TINY and r < _HUGE) else 1
    for j in range(m):
        kk = acc[j] / n
        lg = _fast_log(ratio[j]) if n_out == 0 else math.log(ratio[j])
        l_theta[j] = n * (lg - kk - 1.0)
    # R: w_j = 1 / sum_i exp(l_i - l_j) = exp(l_j - max l) / sum_i exp(l_i - max l), O(m)
    # instead of O(m^2) (terms below exp(-708) are 0 here, denormal in R: invisible next to
    # the largest, 1); R's own form is kept for non-finite profile likelihoods, where the
    # two can differ
    lmax = -math.inf
    has_nan = False
    for j in range(m):
        if l_theta[j] > lmax:
            lmax = l_theta[j]
        has_nan = has_nan or l_theta[j] != l_theta[j]
    theta_hat = 0.0
    if has_nan:  # R: logSumExp is NaN, so is every weight (the fast exp would give 0)
        theta_hat = math.nan
    elif math.isfinite(lmax):
        w = ratio  # reused: exp(l_j - max l)
        for j in range(m):
            w[j] = _fast_exp(l_theta[j] - lmax)
        s_w = 0.0
        for j in range(m):
            s_w += w[j]
            theta_hat += theta[j] * w[j]
        theta_hat /= s_w
    else:
        for j in range(m):
            s_w = 0.0
            for i in range(m):
                s_w += math.exp(l_theta[i] - l_theta[j])
            theta_hat += theta[j] / s_w
    k = 0.0
    u_max = 1.0 - theta_hat * x_max
    if u_max >= _TINY and u_max < _HUGE:
        k = _sum_log1p(-theta_hat, x, terms)
    else:
        for s in range(n):
            k += math.log1p(-theta_hat * x[s])
    k = k / n
    sigma = -k / theta_hat
    if wip:
        # weakly informative Gaussian prior centred on 0.5, worth 10 observations
        k = (k * n + 10.0 * 0.5) / (n + 10.0)
    if math.isnan(k):
        k = math.inf
    return k, sigma


def gpdfit(x, wip: bool = True, min_grid_pts: int = 30, sort_x: bool = True):
    """Estimate (k, sigma) of a generalized Pareto distribution with location 0.

    Zhang & Stephens (2009) empirical Bayes estimate on a grid of
    ``min_grid_pts + floor(sqrt(len(x)))`` points, as R ``loo::gpdfit``.  Here k is the
    negative of Zhang & Stephens' k, so k > 0 is a heavy tail.

    Parameters
    ----------
    x : array_like (n,)
        Non-negative, finite sample, n >= 2, not all zero.
    wip : bool
        Shrink k towards 0.5 with the weakly informative prior, ``(k n + 5) / (n + 10)``.
    min_grid_pts : int
        Minimum number of grid points.
    sort_x : bool
        Sort ``x`` first; pass False only for a sample that is already ascending.

    Returns
    -------
    k : float
        Shape; ``inf`` when the fit fails.
    sigma : float
        Scale.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import stats
    >>> x = stats.genpareto.rvs(c=0.5, size=5000, random_state=1)
    >>> k, sigma = gpdfit(x, wip=False)
    >>> round(k, 1), round(sigma, 1)
    (0.5, 1.0)
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"gpdfit needs a 1-D sample, got shape {x.shape}")
    if x.size < 2:
        raise ValueError(f"gpdfit needs at least 2 values, got {x.size}")
    if not np.all(np.isfinite(x)):
        raise ValueError("gpdfit: the sample contains non-finite values")
    if np.any(x < 0):
        raise ValueError("gpdfit: the GPD has location 0, so the sample must be non-negative")
    x = np.sort(x) if sort_x else np.ascontiguousarray(x)
    if x[-1] <= 0:
        raise ValueError("gpdfit: all values are zero")
    if int(min_grid_pts) < 1:
        raise ValueError("min_grid_pts must be a positive integer")
    k, sigma = gpdfit_sorted(x, bool(wip), int(min_grid_pts))
    return float(k), float(sigma)
