"""Stan's / arviz's effective sample size of a mean with split chains, and the bulk ESS and
rank-normalised R-hat of one quantity (arviz ``ess(method="mean")``, ``ess(method="bulk")``,
``rhat(method="rank")``).  Numpy in, numpy out.

`ess_mean` is the ESS behind every MixIS / pooled / refit MCSE: each chain split in halves
(the middle draw of an odd length dropped), the biased autocovariance, Geyer's initial
positive and monotone sequence.  Many columns at once run the direct-lag kernel of
`loo_adapt.core.ess` (each lag a sum over the draws, computed only while Geyer's sequence
reads it; the FFT only for a column that needs more than `loo_adapt.core.ess.MAX_DIRECT_LAG`
lags), with the plain autocovariance instead of R loo's padding quirk: the same numbers as
the FFT path to rounding, about 20 times faster on 4 x 1000 draws of 320 columns.  The FFT
path stays the cold start's (`loo_adapt.core._compiled.use_numba`) and that of short chains.
"""

from __future__ import annotations

import numpy as np

from loo_adapt.core._compiled import use_numba
from loo_adapt.core.ess import _OK, MAX_DIRECT_LAG, _direct_pass, _ess_direct

__all__ = ["ess_bulk", "ess_mean", "rhat_rank"]


def _autocov_split(x):
    """Autocovariance along the last axis (biased, as Stan), by FFT."""
    n = x.shape[-1]
    m = 1 << (2 * n - 1).bit_length()
    xc = x - x.mean(axis=-1, keepdims=True)
    f = np.fft.rfft(xc, n=m, axis=-1)
    acov = np.fft.irfft(f * np.conjugate(f), n=m, axis=-1)[..., :n]
    return acov / n


def _geyer_tau(rho, total):
    """Integrated autocorrelation time from autocorrelations ``rho`` (Stan's estimator).

    Geyer's initial positive sequence (pairs rho_{2t} + rho_{2t+1} summed while positive),
    made monotone, with the truncation of Stan's ``ess`` (one trailing even lag is kept).
    """
    n = len(rho)
    r = np.zeros(n)
    r[0] = 1.0
    even, odd = 1.0, rho[1]
    r[1] = odd
    t = 1
    while t < n - 3 and even + odd > 0.0:
        even, odd = rho[t + 1], rho[t + 2]
        if even + odd >= 0:
            r[t + 1], r[t + 2] = even, odd
        t += 2
    max_t = t - 2
    if even > 0:
        r[max_t + 1] = even
    t = 1
    while t <= max_t - 2:
        if r[t + 1] + r[t + 2] > r[t - 1] + r[t]:
            r[t + 1] = r[t + 2] = (r[t - 1] + r[t]) / 2.0
        t += 2
    tau = -1.0 + 2.0 * r[: max_t + 1].sum() + r[max_t + 1 : max_t + 2].sum()
    return max(tau, 1.0 / np.log10(total))


def _direct(sp: np.ndarray):
    """(ESS, done) of each column of split chains ``sp`` (2 chains, half, k) by the direct
    kernel (None when the numpy path should run: the kernel is not compiled and the call is
    too small to pay for compiling it, or the halves are too short for the kernel's lag
    loop to stop where Stan's does).  ``done`` is False where a column is not finite or
    needs more than `MAX_DIRECT_LAG` lags (the FFT path takes it)."""
    m, n, k = sp.shape
    if n <= MAX_DIRECT_LAG + 6 or not use_numba(_ess_direct, m * n * k):
        return None
    # scale 1 / n: the biased autocovariance, sum_t y_t y_t+lag / n (Stan, arviz)
    out, status, _, _ = _direct_pass(sp, False, 1.0 / n, MAX_DIRECT_LAG)
    return out, status == _OK


def ess_mean(x):
    """Effective sample size of the mean (Stan / arviz ``method="mean"``, split chains).

    Parameters
    ----------
    x : (chains, draws) or (chains, draws, k) array; ESS per trailing column.

    Returns
    -------
    float or (k,) array. Geyer's initial positive and monotone sequence estimator on
    split chains, without rank normalisation; a constant column (range below float
    resolution) has ESS ``chains * draws`` of the split chains.

    Examples
    --------
    >>> iid = np.random.default_rng(0).normal(size=(4, 500))
    >>> bool(1500 < ess_mean(iid) < 2500)
    True
    """
    x = np.asarray(x, dtype=np.float64)
    squeeze = x.ndim == 2
    if squeeze:
        x = x[:, :, None]
    if x.ndim != 3:
        raise ValueError(f"x must be (chains, draws) or (chains, draws, k), got {x.shape}")
    chains, draws, _ = x.shape
    half = draws // 2
    if half < 2:
        raise ValueError("ess_mean needs at least 4 draws per chain")
    # split each chain in two halves, dropping the middle draw when draws is odd
    sp = np.concatenate([x[:, :half], x[:, draws - half:]], axis=0)
    fast = _direct(sp)
    if fast is None:
        out = _ess_mean_fft(sp)
    else:
        out, done = fast
        size = sp.shape[0] * sp.shape[1]
        const = np.ptp(sp.reshape(-1, sp.shape[2]), axis=0) < np.finfo(float).resolution
        out[const] = size
        # the kernel's Geyer loop is R loo's, which reads the pairs as Stan's does but
        # sums differently where the very first pair is negative (lag-1 autocorrelation
        # <= -1): there it gives size / 2 and Stan's floor size * log10(size); the FFT path
        # takes any column at size / 2
        odd = np.abs(out - size / 2) <= 1e-9 * size
        rest = np.flatnonzero((~done | odd) & ~const)
        if rest.size:
            out[rest] = _ess_mean_fft(np.ascontiguousarray(sp[:, :, rest]))
    return float(out[0]) if squeeze else out


def _ess_mean_fft(sp: np.ndarray) -> np.ndarray:
    """`ess_mean` of split chains ``sp`` (2 chains, half, k) through the FFT (every
    autocovariance lag)."""
    x = np.moveaxis(sp, -1, 0)  # (k, m, n)
    m, n = x.shape[1], x.shape[2]
    acov = _autocov_split(x)
    chain_mean = x.mean(axis=2)
    chain_var = acov[:, :, 0] * n / (n - 1.0)
    mean_var = chain_var.mean(axis=1)
    var_plus = mean_var * (n - 1.0) / n
    if m > 1:
        var_plus = var_plus + chain_mean.var(axis=1, ddof=1)
    out = np.empty(x.shape[0])
    for k in range(x.shape[0]):
        if np.ptp(x[k]) < np.finfo(float).resolution or var_plus[k] <= 0:
            # a constant quantity has no Monte Carlo error: its ESS is the number of draws
            out[k] = m * n
            continue
        rho = 1.0 - (mean_var[k] - acov[k].mean(axis=0)) / var_plus[k]
        out[k] = m * n / _geyer_tau(rho, m * n)
    return out


# ---- convergence of a scalar quantity: rank-normalised split R-hat and bulk ESS ------------
def _rank_normal(x: np.ndarray) -> np.ndarray:
    from scipy import stats  # here, not at import: the PSIS path never needs it

    ranks = stats.rankdata(x, method="average").reshape(x.shape)
    return stats.norm.ppf((ranks - 0.375) / (x.size + 0.25))


def _split_rhat(x: np.ndarray) -> float:
    half = x.shape[1] // 2
    split = np.concatenate([x[:, :half], x[:, x.shape[1] - half:]], axis=0)
    n = split.shape[1]
    within = np.mean(np.var(split, axis=1, ddof=1))
    between = n * np.var(np.mean(split, axis=1), ddof=1)
    return float(np.sqrt(((n - 1) / n * within + between / n) / within))


def rhat_rank(x) -> float:
    """Rank-normalised split R-hat (max of bulk and folded), as arviz ``rhat(method="rank")``.

    Parameters
    ----------
    x : (chains, draws) array.

    Returns
    -------
    float

    Examples
    --------
    >>> x = np.random.default_rng(0).normal(size=(4, 500))
    >>> bool(rhat_rank(x) < 1.01)
    True
    """
    x = np.asarray(x, dtype=np.float64)
    bulk = _split_rhat(_rank_normal(x))
    tail = _split_rhat(_rank_normal(np.abs(x - np.median(x))))
    return max(bulk, tail)


def ess_bulk(x) -> float:
    """Bulk effective sample size (rank-normalised split chains), as arviz ``ess(method="bulk")``.

    Parameters
    ----------
    x : (chains, draws) array of one scalar quantity.

    Returns
    -------
    float
        The bulk ESS; about ``chains * draws`` for independent draws, less for
        autocorrelated chains.

    Examples
    --------
    >>> iid = np.random.default_rng(0).normal(size=(4, 500))
    >>> bool(1500 < ess_bulk(iid) < 2500)
    True
    """
    x = np.asarray(x, dtype=np.float64)
    return float(ess_mean(_rank_normal(x)))
