"""Effective sample sizes: R loo's r_eff and the direct-lag kernel both flavours run.

* ``relative_eff`` / ``ess_rfun``: R ``loo``'s ESS for ``r_eff`` (unsplit chains, below).
* Stan's / arviz's ESS of a mean with split chains (``method="mean"``, for Monte Carlo
  standard errors), bulk ESS and rank R-hat of one quantity: `loo_adapt.core.ess_split`,
  which runs this module's direct kernel with the plain biased autocovariance.

The R loo flavour:

Array core: numpy in, numpy out.  ``ess_rfun`` is R loo's ``ess_rfun`` (the RStan estimator:
chains are *not* split and the draws are *not* rank-normalised, unlike arviz's default
``ess(method="bulk")``; it equals arviz's internal unsplit ``_ess``, i.e. arviz
``method="mean"`` without the chain splitting).  Geyer's initial positive sequence, then
the initial monotone sequence, then the "improved" estimate
``tau = -1 + 2 sum_{t < max_t} rho_t + rho_{max_t}``, floored at ``1 / log10(S)``.

The autocovariance is ``posterior::autocovariance``: FFT with zero padding to twice the next
2-3-5-smooth length ``M >= N``, scaled by ``1 / (2 N^2)`` of R's unnormalised inverse FFT,
i.e. ``(M / N) * (1/N) sum_t y_t y_{t+k}``.  When N is 2-3-5-smooth (250, 500, 1000, ...)
this is the usual biased autocovariance; otherwise it is inflated by M / N, a quirk of R that
is reproduced here (it changes ESS only with several chains, through ``var(chain means)``).

Engines (same numbers to rounding; `loo_adapt.core._compiled.use_numba` picks one): the numba
kernel ``_ess_direct`` computes each autocovariance as a lagged sum only when Geyer's loop
reads it -- for chains that mix, a few lags -- block by block of columns (one pass over the
input for the checks and ``exp``, a (32, S) buffer per task, nothing of size S x n); a
column whose sequence runs past `MAX_DIRECT_LAG` lags is finished by the FFT path.  The
numpy twin (cold start) is the FFT path for every column.  Reference values:
``tests/data/ess_reference`` (a transcription of R loo's code, R not being installed here).

The ESS is invariant to multiplying a column by a positive constant, so
``relative_eff(log_lik, log=True)`` uses ``exp(log_lik - max)`` per observation: the same
number as ``relative_eff(exp(log_lik))`` but without underflow to 0 for very negative
log-likelihoods (where R would return a meaningless value).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import njit, prange

from loo_adapt.core._compiled import use_numba
from loo_adapt.core._rhat_kernel import (
    _rhat_column,
    _score_table,
    _screen_scratch,
    screen_ratio,
)
from loo_adapt.core._vmath import exp_shifted, vsum

__all__ = ["ess_rfun", "fft_next_good_size", "relative_eff"]

_BLOCK = 256  # observations per FFT block, bounds the memory of the padded transform


def fft_next_good_size(n: int) -> int:
    """Smallest 2-3-5-smooth integer >= n (R loo / posterior ``fft_next_good_size``)."""
    if n <= 2:
        return 2
    while True:
        m = n
        for f in (2, 3, 5):
            while m % f == 0:
                m //= f
        if m <= 1:
            return n
        n += 1


def _autocov(y: np.ndarray) -> np.ndarray:
    """posterior::autocovariance along axis 1 of (chains, draws, cols)."""
    n = y.shape[1]
    m = fft_next_good_size(n)
    yc = y - y.mean(axis=1, keepdims=True)
    f = np.fft.rfft(yc, n=2 * m, axis=1)
    # numpy's irfft divides by 2M; R's inverse fft does not and R then divides by 2 N^2
    ac = np.fft.irfft(f * np.conj(f), n=2 * m, axis=1)[:, :n, :]
    return ac * (m / n**2)


@njit(parallel=True, cache=True, error_model="numpy")
def _geyer_ess(acov, chain_mean, out):
    """R loo ess_rfun from autocovariances (chains, draws, cols) and chain means (chains, cols)."""
    for c in prange(acov.shape[2]):
        out[c] = _geyer_ess_col(acov, chain_mean, c)


@njit(cache=True, error_model="numpy")
def _geyer_ess_serial(acov, chain_mean, out):
    for c in range(acov.shape[2]):
        out[c] = _geyer_ess_col(acov, chain_mean, c)


@njit(cache=True)
def _ess_of_rho(rho, max_t, rho_even, ess):  # pragma: no cover - compiled
    """ESS from the autocorrelations ``rho`` up to Geyer's truncation lag ``max_t``: the
    initial monotone sequence, then ``ess / tau`` with R's floor ``tau >= 1 / log10(ess)``
    (shared by the FFT and the direct-lag paths)."""
    if rho_even > 0.0:
        rho[max_t] = rho_even
    t = 0
    while t <= max_t - 4:
        t += 2
        if rho[t] + rho[t + 1] > rho[t - 2] + rho[t - 1]:
            rho[t] = (rho[t - 2] + rho[t - 1]) / 2.0
            rho[t + 1] = rho[t]
    # R: sum(rho_hat_t[1:max_t]); with max_t = 0 R's 1:0 still picks rho_hat_t[1]
    acc = 0.0
    for i in range(max(max_t, 1)):
        acc += rho[i]
    tau = -1.0 + 2.0 * acc + rho[max_t]
    # R: max(tau, 1 / log10(ess)), which keeps a NaN tau
    floor_tau = 1.0 / math.log10(ess)
    if tau < floor_tau:
        tau = floor_tau
    return ess / tau


@njit(cache=True, error_model="numpy")
def _geyer_ess_col(acov, chain_mean, c):
    n_chains, n_samples, _ = acov.shape
    mean_acov = np.empty(n_samples)
    for t in range(n_samples):
        acc = 0.0
        for ch in range(n_chains):
            acc += acov[ch, t, c]
        mean_acov[t] = acc / n_chains
    mean_var = mean_acov[0] * n_samples / (n_samples - 1.0)
    var_plus = mean_var * (n_samples - 1.0) / n_samples
    if n_chains > 1:
        mu = 0.0
        for ch in range(n_chains):
            mu += chain_mean[ch, c]
        mu /= n_chains
        v = 0.0
        for ch in range(n_chains):
            v += (chain_mean[ch, c] - mu) ** 2
        var_plus += v / (n_chains - 1.0)
    rho = np.zeros(n_samples)
    # R indices are 1-based; t below is R's t, rho[t] is R's rho_hat_t[t + 1]
    t = 0
    rho_even = 1.0
    rho[0] = rho_even
    rho_odd = 1.0 - (mean_var - mean_acov[1]) / var_plus
    rho[1] = rho_odd
    while (t < n_samples - 5 and not math.isnan(rho_even + rho_odd)
           and rho_even + rho_odd > 0.0):
        t += 2
        rho_even = 1.0 - (mean_var - mean_acov[t]) / var_plus
        rho_odd = 1.0 - (mean_var - mean_acov[t + 1]) / var_plus
        if rho_even + rho_odd >= 0.0:
            rho[t] = rho_even
            rho[t + 1] = rho_odd
    return _ess_of_rho(rho, t, rho_even, n_chains * n_samples)


def _geyer_ess_numpy(acov, chain_mean):
    """``_geyer_ess`` in numpy, vectorised over columns (no compilation: the cold path)."""
    n_chains, n_samples, n_cols = acov.shape
    cols = np.arange(n_cols)
    mean_acov = acov.sum(axis=0) / n_chains
    mean_var = mean_acov[0] * n_samples / (n_samples - 1.0)
    var_plus = mean_var * (n_samples - 1.0) / n_samples
    if n_chains > 1:
        mu = chain_mean.sum(axis=0) / n_chains
        var_plus = var_plus + ((chain_mean - mu) ** 2).sum(axis=0) / (n_chains - 1.0)
    rho = np.zeros((n_samples, n_cols))
    rho[0] = 1.0
    rho_even = np.ones(n_cols)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho_odd = 1.0 - (mean_var - mean_acov[1]) / var_plus
        rho[1] = rho_odd
        t = np.zeros(n_cols, dtype=np.int64)
        active = (t < n_samples - 5) & (rho_even + rho_odd > 0.0)  # False for NaN
        while active.any():
            c = cols[active]
            t[c] += 2
            re = 1.0 - (mean_var[c] - mean_acov[t[c], c]) / var_plus[c]
            ro = 1.0 - (mean_var[c] - mean_acov[t[c] + 1, c]) / var_plus[c]
            rho_even[c] = re
            rho_odd[c] = ro
            keep = re + ro >= 0.0
            rho[t[c][keep], c[keep]] = re[keep]
            rho[t[c][keep] + 1, c[keep]] = ro[keep]
            active[c] = (t[c] < n_samples - 5) & (re + ro > 0.0)
        max_t = t
        pos = rho_even > 0.0
        rho[max_t[pos], cols[pos]] = rho_even[pos]
        for tt in range(2, int(max_t.max()) - 1, 2):
            c = cols[tt <= max_t - 2]
            upd = rho[tt, c] + rho[tt + 1, c] > rho[tt - 2, c] + rho[tt - 1, c]
            c = c[upd]
            rho[tt, c] = (rho[tt - 2, c] + rho[tt - 1, c]) / 2.0
            rho[tt + 1, c] = rho[tt, c]
        ess = n_chains * n_samples
        csum = np.cumsum(rho, axis=0)
        acc = csum[np.maximum(max_t, 1) - 1, cols]
        tau = -1.0 + 2.0 * acc + rho[max_t, cols]
        floor_tau = 1.0 / math.log10(ess)
        tau = np.where(tau < floor_tau, floor_tau, tau)
        return ess / tau


# ---- the direct kernel: autocovariances only up to the lags Geyer's sequence reads ------
#: lags computed directly per column before a column is handed to the FFT path; a direct lag
#: costs S multiply-adds, an FFT of the whole column about as much as 60-100 of them
MAX_DIRECT_LAG = 64
_COLS = 32  # columns per task of the direct kernel (a (32, S) float64 buffer per thread)
_TILE_ROWS = 64  # draws per transposition tile (64 rows x 32 columns: 16 KiB, in L1)

# status codes of the direct kernel
_OK, _NAN, _POSINF, _ALL_NEGINF, _NONFINITE, _LONG = 0, 1, 2, 3, 4, 5


@njit(cache=True, error_model="numpy", fastmath={"reassoc", "contract"})
def _lag_sums(y, n_chains, n_draws, lag):
    """(sum y[t] y[t + lag], sum y[t] y[t + lag + 1]) over chains and t for one column ``y``
    (S,), chains stacked chain-major, each centred.  Reassociation lets LLVM vectorise the
    sums (a different but equally accurate summation order)."""
    a = 0.0
    b = 0.0
    m = n_draws - lag - 1
    for ch in range(n_chains):
        base = ch * n_draws
        # slices, so that the loop indices are provably non-negative (no wraparound test
        # per element) and the loop vectorises
        u = y[base:base + n_draws]
        v0 = u[lag:]
        v1 = u[lag + 1:]
        pa = 0.0
        pb = 0.0
        for t in range(m):
            pa += u[t] * v0[t]
            pb += u[t] * v1[t]
        if m >= 0:
            pa += u[m] * v0[m]
        a += pa
        b += pb
    return a, b


@njit(cache=True, error_model="numpy")
def _ess_direct_col(y, n_chains, n_draws, scale, max_lag):
    """R loo ``ess_rfun`` of one column ``y`` (S,) (chains stacked, not yet centred), with
    each autocovariance computed as a lagged sum when Geyer's loop first reads it.

    Returns (ess, long): ``long`` is True when the loop needs lags beyond ``max_lag`` (the
    caller then takes the FFT path for this column).  ``scale`` is R's M / N^2 (the FFT
    padding quirk), so ``mean_acov[k] = scale * lag_sum(k) / chains``."""
    chain_mean = np.empty(n_chains)
    for ch in range(n_chains):
        u = y[ch * n_draws:(ch + 1) * n_draws]
        m = vsum(u, n_draws) / n_draws  # vectorised: an in-order sum cost ~5 us here
        chain_mean[ch] = m
        for t in range(n_draws):
            u[t] -= m
    f = scale / n_chains
    s0, s1 = _lag_sums(y, n_chains, n_draws, 0)
    mean_var = f * s0 * n_draws / (n_draws - 1.0)
    var_plus = mean_var * (n_draws - 1.0) / n_draws
    if n_chains > 1:
        mu = 0.0
        for ch in range(n_chains):
            mu += chain_mean[ch]
        mu /= n_chains
        v = 0.0
        for ch in range(n_chains):
            v += (chain_mean[ch] - mu) ** 2
        var_plus += v / (n_chains - 1.0)
    rho = np.zeros(max_lag + 2)
    t = 0
    rho_even = 1.0
    rho[0] = rho_even
    rho_odd = 1.0 - (mean_var - f * s1) / var_plus
    rho[1] = rho_odd
    while (t < n_draws - 5 and not math.isnan(rho_even + rho_odd)
           and rho_even + rho_odd > 0.0):
        t += 2
        if t + 1 > max_lag:
            return np.nan, True
        se, so = _lag_sums(y, n_chains, n_draws, t)
        rho_even = 1.0 - (mean_var - f * se) / var_plus
        rho_odd = 1.0 - (mean_var - f * so) / var_plus
        if rho_even + rho_odd >= 0.0:
            rho[t] = rho_even
            rho[t + 1] = rho_odd
    return _ess_of_rho(rho, t, rho_even, n_chains * n_draws), False


@njit(cache=True, error_model="numpy")
def _rhat_of_row(row, n_chains, n_draws, h, lo, hi, table, ratio, sbuf, scratch, rhat, stuck,
                 j):  # pragma: no cover - compiled
    """rhat[j], stuck[j] of one chain-major column ``row`` (see `_ess_direct_block`)."""
    n_fixed = 0
    for ch in range(n_chains):
        first = row[ch * n_draws]
        n_moved = 0  # a count of comparisons vectorises; a running min / max does not
        for t in range(ch * n_draws, (ch + 1) * n_draws):
            n_moved += row[t] != first
        n_fixed += 1 if n_moved == 0 else 0
    stuck[j] = 0 < n_fixed < n_chains
    split = row
    if n_draws % 2 == 1:  # split chains drop each chain's middle draw
        for ch in range(n_chains):
            for t in range(h):
                sbuf[2 * ch * h + t] = row[ch * n_draws + t]
                sbuf[(2 * ch + 1) * h + t] = row[ch * n_draws + n_draws - h + t]
        split = sbuf
    # a column with -inf draws is not screened (the screen's levels assume finite values)
    r = ratio if lo > -np.inf else -1.0
    rhat[j] = _rhat_column(split, lo, hi, n_chains, h, table, r, scratch)


@njit(cache=True, error_model="numpy")
def _column_ess(row, n_chains, n_draws, lo, hi, log, scale, max_lag, check, table, ratio, sbuf,
                scratch, rhat, stuck, j):  # pragma: no cover - compiled
    """(ESS, long, sum) of one finite chain-major column ``row`` (values between ``lo`` and
    ``hi``; ``log``: of exp(row - hi), computed in place), after its rank R-hat and stuck
    flag into ``rhat[j]``, ``stuck[j]`` when ``check``.  A constant column has ESS = its
    size (no MCMC error; R: 0 / 0); ``long``: Geyer's sequence needs lags beyond
    ``max_lag`` (the caller takes the FFT for it); ``sum``: ``vsum`` of exp(row - hi) when
    ``log`` and the column is not constant, else NaN (the PSIS kernel's lpd from the same
    exp).  Shared by `_ess_direct_block` and the PSIS kernel's one pass
    (`core._psis_kernel._checks`)."""
    if check:
        _rhat_of_row(row, n_chains, n_draws, n_draws // 2, lo, hi, table, ratio, sbuf, scratch,
                     rhat, stuck, j)
    s = row.shape[0]
    if hi == lo:
        return float(s), False, np.nan
    total = np.nan
    if log:
        exp_shifted(row, hi)
        total = vsum(row, s)
    ess, long = _ess_direct_col(row, n_chains, n_draws, scale, max_lag)
    return ess, long, total


@njit(cache=True)
def _rhat_scratch(n_chains, n_draws, check):  # pragma: no cover - compiled
    """`_column_ess`'s R-hat scratch for chains of ``n_draws`` (one set per thread's share
    of columns; empty without ``check``): the split draws of odd-length chains, and the
    screen's arrays."""
    n_split = 2 * n_chains * (n_draws // 2) if check else 0
    return (np.empty(n_split if n_draws % 2 == 1 else 0),
            _screen_scratch(n_split, 2 * n_chains))


def _direct_params(n_chains: int, n_draws: int, rhat_at: float | None):
    """(FFT scale, largest direct lag, screen ratio, Blom scores) of the direct ESS kernel
    for chains of ``n_draws`` (ratio -1 and no scores without an R-hat threshold)."""
    h = n_draws // 2
    check = rhat_at is not None
    return (fft_next_good_size(n_draws) / n_draws**2, int(min(MAX_DIRECT_LAG, n_draws)),
            float(screen_ratio(h, rhat_at)) if check else -1.0,
            _score_table(2 * n_chains * h) if check else np.empty(0))


def _long_columns_ess(a: np.ndarray, cols: np.ndarray, log: bool) -> np.ndarray:
    """ESS of the columns ``cols`` of ``a`` (chains, draws, n) through the FFT (those whose
    Geyer sequence the direct kernel cannot finish), of exp(x - max) for log values."""
    sub = np.ascontiguousarray(a[:, :, cols])
    shift = sub.max(axis=(0, 1), keepdims=True) if log else None
    return _ess_columns(sub, shift=shift, engine="numpy")


@njit(cache=True, error_model="numpy")
def _ess_direct_block(x, log, scale, max_lag, j0, j1, out, status, ratio, table, rhat, stuck):
    """Columns j0..j1 of x (chains, draws, n): checks, exp(x - max) for log values, and the
    ESS, through one (j1 - j0, S) buffer.  x is read in tiles of `_TILE_ROWS` draws whose
    rows stay in cache while they are transposed into the buffer (no copy of x).  With a
    non-empty ``rhat``, each column's rank R-hat and stuck-chain flag too, from the same
    buffer before the exp (`core._rhat_kernel._rhat_column`: ``ratio`` > 0 screens, NaN
    where the screen shows R-hat at most its threshold; ``table``: the Blom scores)."""
    n_chains, n_draws, _ = x.shape
    s = n_chains * n_draws
    w = j1 - j0
    buf = np.empty((w, s))
    for ch in range(n_chains):
        for t0 in range(0, n_draws, _TILE_ROWS):
            t1 = min(t0 + _TILE_ROWS, n_draws)
            r0 = ch * n_draws
            for k in range(w):
                dst = buf[k, r0:r0 + n_draws]
                src = x[ch, :, j0 + k]
                for t in range(t0, t1):
                    dst[t] = src[t] + 0.0  # -0.0 -> 0.0 (the R-hat screen's buckets)
    check = rhat.shape[0] > 0
    sbuf, scratch = _rhat_scratch(n_chains, n_draws, check)
    for k in range(w):
        j = j0 + k
        row = buf[k]
        hi = -np.inf
        lo = np.inf
        nan = False
        for r in range(s):
            v = row[r]
            hi = max(hi, v)
            lo = min(lo, v)
            nan = nan or v != v
        code = _OK
        if nan:
            code = _NAN
        elif log:
            if hi == np.inf:
                code = _POSINF
            elif hi == -np.inf:
                code = _ALL_NEGINF
        elif hi == np.inf or lo == -np.inf:
            code = _NONFINITE
        status[j] = code
        if code != _OK:
            out[j] = np.nan
            if check:
                rhat[j] = np.nan
                stuck[j] = False
            continue
        ess, long, _ = _column_ess(row, n_chains, n_draws, lo, hi, log, scale, max_lag, check,
                                table, ratio, sbuf, scratch, rhat, stuck, j)
        out[j] = ess
        if long:
            status[j] = _LONG


@njit(parallel=True, cache=True, error_model="numpy")
def _ess_direct(x, log, scale, max_lag, block, out, status, ratio, table, rhat, stuck):
    """`_ess_direct_block` over blocks of ``block`` columns, in parallel."""
    n = x.shape[2]
    n_blocks = (n + block - 1) // block
    for b in prange(n_blocks):
        j0 = b * block
        _ess_direct_block(x, log, scale, max_lag, j0, min(n, j0 + block), out, status, ratio,
                          table, rhat, stuck)


def _direct_pass(a: np.ndarray, log: bool, scale: float, max_lag: int, ratio: float = -1.0,
                table: np.ndarray | None = None, check: bool = False):
    """(ESS, status, rank R-hat, stuck chain) of every column of ``a`` (chains, draws, n) by
    `_ess_direct`, in blocks of columns spread over numba's threads.  ``scale`` multiplies
    each lag sum into an autocovariance (R loo's FFT quirk ``M / N^2``, or ``1 / N`` for the
    plain one); ``status`` holds the kernel's codes (`_OK`, `_LONG`, the bad-value ones);
    R-hat and the stuck flags only with ``check`` (empty otherwise)."""
    n_cols = a.shape[2]
    out = np.empty(n_cols)
    status = np.empty(n_cols, dtype=np.int64)
    block = max(1, min(_COLS, -(-n_cols // max(1, numba.get_num_threads()))))
    rhat = np.empty(n_cols if check else 0)
    stuck = np.zeros(n_cols if check else 0, dtype=np.bool_)
    with np.errstate(invalid="ignore", divide="ignore"):
        _ess_direct(a, bool(log), scale, max_lag, block, out, status, float(ratio),
                    np.empty(0) if table is None else table, rhat, stuck)
    return out, status, rhat, stuck


def _ess_fast(a: np.ndarray, log: bool, rhat_at: float | None = None):
    """ESS per column of ``a`` (chains, draws, n) by the direct kernel (None when the numpy
    path should run: the kernel is not compiled and the call is too small to pay for it).
    Columns whose Geyer sequence needs lags beyond `MAX_DIRECT_LAG` go through the FFT.
    With ``rhat_at`` (an R-hat threshold; at least 2 chains of 4 draws), returns (ESS, rank
    R-hat, stuck chain) from the same pass, R-hat NaN where a screen shows it at most
    ``rhat_at`` (`loo_adapt.core.convergence.relative_eff_and_disagreement`)."""
    n_chains, n_draws, n_cols = a.shape
    if not use_numba(_ess_direct, n_chains * n_draws * n_cols):
        return None
    check = rhat_at is not None
    scale, max_lag, ratio, table = _direct_params(n_chains, n_draws, rhat_at)
    out, status, rhat, stuck = _direct_pass(a, log, scale, max_lag, ratio, table, check)
    for code, msg in ((_NAN, "x contains NaN"), (_POSINF, "log values contain +inf"),
                      (_ALL_NEGINF, "a column of log values is -inf for every draw"),
                      (_NONFINITE, "x contains non-finite values (pass log values with "
                                   "log=True)")):
        if np.any(status == code):
            raise ValueError(msg)
    long = np.flatnonzero(status == _LONG)
    if long.size:
        out[long] = _long_columns_ess(a, long, log)
    return (out, rhat, stuck) if check else out


def _ess_columns(x: np.ndarray, shift=None, engine=None) -> np.ndarray:
    """ESS of each column of x (chains, draws, cols); with ``shift`` (1, 1, cols), of
    ``exp(x - shift)``, exponentiated block by block (no copy of the whole array)."""
    n_chains, n_draws, n_cols = x.shape
    if n_draws < 4:
        raise ValueError(f"ESS needs at least 4 draws per chain, got {n_draws}")
    out = np.empty(n_cols)
    kernel = _geyer_ess if min(n_cols, _BLOCK) >= 64 else _geyer_ess_serial
    use_numpy = (engine == "numpy" if engine is not None
                 else not use_numba(kernel, n_chains * n_draws * n_cols))
    for start in range(0, n_cols, _BLOCK):
        blk = x[:, :, start:start + _BLOCK]
        # R's estimator is 0/0 for a constant column; arviz returns S, and so do we,
        # because a constant likelihood gives constant importance ratios (no MCMC error)
        const = np.ptp(blk.reshape(n_chains * n_draws, -1), axis=0) == 0
        if shift is not None:
            blk = np.exp(blk - shift[:, :, start:start + _BLOCK])
        acov = np.ascontiguousarray(_autocov(blk))
        cmean = np.ascontiguousarray(blk.mean(axis=1))
        res = np.empty(blk.shape[2])
        if use_numpy:
            res = _geyer_ess_numpy(acov, cmean)
        else:
            kernel = _geyer_ess if blk.shape[2] >= 64 else _geyer_ess_serial
            kernel(acov, cmean, res)
        res[const] = n_chains * n_draws
        out[start:start + _BLOCK] = res
    return out


def ess_rfun(sims) -> float:
    """R loo's ``ess_rfun``: ESS of one quantity, ``sims`` shaped (draws,) or (draws, chains)."""
    s = np.asarray(sims, dtype=np.float64)
    if s.ndim == 1:
        s = s[:, None]
    if s.ndim != 2:
        raise ValueError(f"sims must have shape (draws,) or (draws, chains), got {s.shape}")
    if not np.all(np.isfinite(s)):
        raise ValueError("sims contain non-finite values")
    return float(_ess_columns(s.T[:, :, None])[0])


def relative_eff(x, chain_id=None, log: bool = False) -> np.ndarray:
    """Relative efficiency ``ESS / S`` per observation (R loo ``relative_eff``).

    Parameters
    ----------
    x : array (chains, draws, n), or (S, n) / (S,) together with ``chain_id``
        Likelihood values ``exp(log_lik)`` (or, with ``log=True``, ``log_lik``).  For generic
        PSIS use pass ``exp(-log_ratios)``.  Note the chain-first axis order (arviz), unlike
        R's (iterations, chains, n).
    chain_id : array (S,), optional
        Chain index of each row of a 2-D ``x`` (values 1..C or 0..C-1, equal chain lengths).
    log : bool
        Treat ``x`` as log values; each column is exponentiated after subtracting its maximum,
        which leaves the ESS unchanged (it is scale invariant) and cannot underflow.
    """
    a = np.asarray(x, dtype=np.float64)
    if a.ndim in (1, 2):
        if chain_id is None:
            raise ValueError(
                "relative_eff needs chain_id for 2-D (S, n) input, or a (chains, draws, n) array"
            )
        if a.ndim == 1:
            a = a[:, None]
        cid = np.asarray(chain_id)
        if cid.shape != (a.shape[0],):
            raise ValueError(f"chain_id must have length {a.shape[0]}, got shape {cid.shape}")
        chains = np.unique(cid)
        counts = np.array([np.sum(cid == c) for c in chains])
        if np.any(counts != counts[0]):
            raise ValueError("not all chains have the same number of draws")
        a = np.stack([a[cid == c] for c in chains], axis=0)
    elif a.ndim != 3:
        raise ValueError(f"x must have shape (chains, draws, n), got {a.shape}")
    elif chain_id is not None:
        raise ValueError("chain_id is only used with 2-D input")
    if a.shape[1] < 4:
        raise ValueError(f"ESS needs at least 4 draws per chain, got {a.shape[1]}")
    fast = _ess_fast(a, log)
    if fast is not None:
        return fast / (a.shape[0] * a.shape[1])
    if np.isnan(a).any():
        raise ValueError("x contains NaN")
    if log:
        if (a == np.inf).any():
            raise ValueError("log values contain +inf")
        mx = a.max(axis=(0, 1), keepdims=True)
        if np.isneginf(mx).any():
            raise ValueError("a column of log values is -inf for every draw")
        return _ess_columns(a, shift=mx) / (a.shape[0] * a.shape[1])
    if not np.all(np.isfinite(a)):
        raise ValueError("x contains non-finite values (pass log values with log=True)")
    return _ess_columns(a) / (a.shape[0] * a.shape[1])
