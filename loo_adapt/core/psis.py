"""Pareto-smoothed importance sampling (PSIS) and PSIS-LOO, ported from R ``loo`` >= 2.7.

Array core: numpy in, numpy out.  The algorithm is that of Vehtari, Simpson, Gelman, Yao
and Gabry (2024, JMLR 25(72)) as implemented by R ``loo`` (``psis.R``, ``importance_sampling.R``,
``gpdfit.R``, ``loo.R``) together with ``posterior::ps_tail`` which ``loo`` calls since 2.5:

* tail length ``M = ceil(min(0.2 S, 3 sqrt(S / r_eff)))`` per observation;
* the log ratios are shifted by their maximum, the ``M`` largest are the tail, the cutoff is
  the largest value below the tail (lowered by one machine epsilon when it ties with the
  smallest tail value), the generalized Pareto distribution is fitted to
  ``exp(tail) - exp(cutoff)`` with Zhang & Stephens (2009) plus the weakly informative prior
  on k, the tail is replaced by ``log(cutoff + GPD quantiles at (j - 0.5) / M)`` and truncated
  at the largest raw weight;
* khat is ``Inf`` when the tail has fewer than 5 draws, when the tail is constant or when the
  fit fails (R ``loo`` turns its ``NA`` into ``Inf``); in those cases the raw log ratios are
  returned unsmoothed, as R does.

Pareto k categories (R ``loo`` >= 2.6, ``pareto_k_table``), with
``threshold = pareto_k_threshold(S) = min(1 - 1 / log10(S), 0.7)``:
"good" ``k <= threshold``; "bad" ``threshold < k <= 1``; "very bad" ``k > 1``.

Where R ``loo`` and arviz 0.23 differ (both are otherwise the same algorithm, so the
pointwise values agree to rounding):

* standard error of the totals: R uses ``sqrt(n * var(x, ddof=1))``, arviz ``ddof=0``, so
  ``se_R = se_arviz * sqrt(n / (n - 1))`` (``PointwiseLoo.estimates`` follows R);
* arviz drops grid weights below ``10 * eps`` inside the GPD fit (R keeps them; the effect
  is at the 1e-15 level) and takes the tail as the values strictly above the cutoff (R takes
  exactly ``M`` sorted positions; identical unless there are ties at the cutoff);
* tied log ratios (CmdStan CSVs have 6 significant digits): R sorts stably, as here, arviz
  with numpy's unstable quicksort, so tied draws may swap smoothed weights; tied ratios have
  equal likelihoods, so elpd_loo and khat are unchanged;
* when the GPD fit breaks down (e.g. one draw dominating by e^1000) R returns khat = Inf and
  unsmoothed weights, as here; arviz can return NaN;
* arviz's default ``reff`` is one number for all observations, the mean over *parameters* of
  ``ess(posterior, method="mean") / S``; R (and this module) use the ESS of
  ``exp(log_lik[:, :, i])`` per observation (``ess.relative_eff``).

Implementation: the numba kernel of `loo_adapt.core._psis_kernel` (its docstring), with
the numpy twin `loo_adapt.core._psis_numpy` for cold starts.

``mcse_elpd_i`` follows R ``loo`` >= 2.7 (PR stan-dev/loo#246): the sampling distribution
of ``E[p(y_i | y_-i)]`` is approximated by a log-normal with the PSIS mean and variance, so
``mcse_i = sqrt(log1p(Var / E^2) / r_eff_i)``.  The variance is computed relative to the
LOO predictive density (``Var / E^2 = sum_s w_s^2 (p_s / E - 1)^2``), which cannot overflow.
``mcse_method="quadrature"`` reproduces the older R approach (``var(log z)`` over 1000 Blom
normal quantiles ``z`` with that mean and sd, negative ``z`` dropped); the two agree to
~0.1% when the relative variance is small.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numba
import numpy as np
from numba import njit
from scipy.special import logsumexp

from loo_adapt.core._callable import make_module_callable
from loo_adapt.core._compiled import use_numba
from loo_adapt.core._names import add_deprecated_aliases
from loo_adapt.core._psis_kernel import (  # noqa: F401  (the tests reach them here)
    _BLOCK,
    _CHUNKS_PER_THREAD,
    _PARALLEL_MIN_COLS,
    _kth_largest,
    _psis_parallel,
    _psis_serial,
    _smooth_tail,
)
from loo_adapt.core._status import (  # the kernels' shared status codes
    _ALL_NEG_INF,
    _BAD,
    _CONSTANT_TAIL,
    _FIT_FAILED,
    _SHORT_TAIL,
)
from loo_adapt.core.gpd import gpdfit

__all__ = [
    "MIN_DRAWS",
    "PsisLoo",
    "e_loo",
    "gpdfit",
    "loo_pointwise",
    "loo_totals",
    "mcse_elpd",
    "pareto_k_category",
    "pareto_k_threshold",
    "psis_n_eff",
    "psis_tail_length",
    "psislw",
    "pareto_khat",
]

#: Below this many draws a warning says the Pareto k diagnostic is unreliable.  With S < 25
#: the tail (at most 0.2 S draws) is shorter than 5 and khat is Inf for every observation.
MIN_DRAWS = 100

# the numba kernel (one pass per observation, tail found by selection): `_psis_kernel`


def psis_tail_length(n_draws: int, r_eff) -> np.ndarray:
    """R loo ``n_pareto``: ``ceil(min(0.2 S, 3 sqrt(S / r_eff)))``.

    Parameters
    ----------
    n_draws : int
        S, the number of draws.
    r_eff : float or array
        Relative efficiency per observation.

    Returns
    -------
    int64 array shaped like ``r_eff``: the tail length M.

    Examples
    --------
    >>> int(psis_tail_length(4000, 1.0))
    190
    """
    r_eff = np.asarray(r_eff, dtype=float)
    return np.ceil(np.minimum(0.2 * n_draws, 3.0 * np.sqrt(n_draws / r_eff))).astype(np.int64)


def pareto_k_threshold(n_draws: int) -> float:
    """Sample-size dependent khat threshold ``min(1 - 1 / log10(S), 0.7)`` (R loo >= 2.6).

    Parameters
    ----------
    n_draws : int
        S, at least 2.

    Returns
    -------
    float

    Examples
    --------
    >>> pareto_k_threshold(100)
    0.5
    """
    if n_draws < 2:
        raise ValueError(f"need at least 2 draws for a khat threshold, got {n_draws}")
    return float(min(1.0 - 1.0 / math.log10(n_draws), 0.7))


def pareto_k_category(khat, n_draws: int) -> np.ndarray:
    """R loo's categories: "good" (k <= threshold), "bad" (threshold, 1], "very bad" (> 1).

    Parameters
    ----------
    khat : float or array
    n_draws : int
        S, which sets the threshold (``pareto_k_threshold``).

    Returns
    -------
    object array of "good" / "bad" / "very bad", shaped like ``khat``.

    Examples
    --------
    >>> list(pareto_k_category([0.3, 0.8, 1.2], 4000))
    ['good', 'bad', 'very bad']
    """
    khat = np.asarray(khat, dtype=float)
    thr = pareto_k_threshold(n_draws)
    out = np.full(khat.shape, "good", dtype=object)
    out[khat > thr] = "bad"
    out[khat > 1] = "very bad"
    return out


def _prepare_r_eff(r_eff, n_obs: int) -> np.ndarray:
    """A user's ``r_eff`` as a float array (n_obs,); anything but finite numbers > 0 (NaN, inf,
    booleans, text, a wrong length) is refused naming the observations (R loo replaces NA by
    1: here a NaN is an error, never a silent 1)."""
    if r_eff is None:
        return np.ones(n_obs)
    r = np.asarray(r_eff)
    if r.dtype.kind not in "iuf" or r.size == 0:
        raise TypeError(f"r_eff must be a number or an array of numbers, got {r_eff!r:.60}")
    r = r.astype(float)
    if r.ndim == 0:
        r = np.full(n_obs, float(r))
    elif r.shape != (n_obs,):
        raise ValueError(
            f"r_eff must be a scalar or have one value per observation ({n_obs}), "
            f"got shape {r.shape}"
        )
    else:
        r = r.copy()
    bad = ~(np.isfinite(r) & (r > 0))
    if bad.any():
        at = np.flatnonzero(bad)
        raise ValueError(
            f"r_eff must be finite and > 0 for every observation; got {float(r[at[0]])!r} at "
            f"observation(s) {_columns(at)} (pass reff=None to compute it from the chains)")
    return r


#: columns a warning lists before "... (N more)"
_WARN_COLUMNS = 100


def _columns(idx, limit=10) -> str:
    idx = list(idx)
    txt = ", ".join(str(i) for i in idx[:limit])
    if len(idx) > limit:
        txt += f", ... ({len(idx) - limit} more)"
    return txt


def _engine(n_draws: int, n_obs: int, record: bool = True) -> str:
    """"numba" (the kernels above) or "numpy" (``_psis_numpy``, the cold-start path);
    ``record``: as in `use_numba`."""
    kernel = _psis_parallel if n_obs >= _PARALLEL_MIN_COLS else _psis_serial
    return "numba" if use_numba(kernel, n_draws * n_obs, record) else "numpy"


def _run(a, corr, loo, r_eff, normalize, write, lpd_off=None, engine=None):
    """Run the kernel over the columns of ``a``: (S, n), or (chains, draws, n) with draws
    stacked chain-major, any strides (so that a strided view of a fit's array is read in
    place); see ``_psis_block``.  ``engine`` "numba" / "numpy" / None (``_engine`` decides).

    Returns (log_weights (S, n) or None, khat, status, elpd, lpd, mcse_lognormal, n_eff);
    the last four are empty unless ``loo`` (n_eff: R loo's ``psis_n_eff`` of the weights)."""
    a3 = a if a.ndim == 3 else a[None]
    n_draws, n_obs = a3.shape[0] * a3.shape[1], a3.shape[2]
    tail_len = psis_tail_length(n_draws, r_eff)
    corr = np.empty(0) if corr is None else corr
    lpd_off = np.empty(0) if lpd_off is None else lpd_off
    r_eff = np.asarray(r_eff, dtype=np.float64)
    if (engine or _engine(n_draws, n_obs)) == "numpy":
        from loo_adapt.core._psis_numpy import psis_numpy

        a2 = a3.reshape(n_draws, n_obs)  # a copy only for a strided 3-D view (small here)
        return psis_numpy(a2, corr, lpd_off, loo, tail_len, r_eff, normalize, write)
    out_lw = np.empty((n_draws, n_obs) if write else (0, 0))
    khat = np.empty(n_obs)
    status = np.empty(n_obs, dtype=np.int64)
    m = n_obs if loo else 0
    elpd, lpd, mcse, n_eff = np.empty(m), np.empty(m), np.empty(m), np.empty(m)
    _kernel(a3, corr, lpd_off, loo, tail_len, r_eff, normalize, write, out_lw, khat, status,
            elpd, lpd, mcse, n_eff, _NO_CHECKS)
    return (out_lw if write else None), khat, status, elpd, lpd, mcse, n_eff


#: the kernel's ``chk`` argument when it runs no checks (the types of a real one)
_NO_CHECKS = (np.empty(0), np.empty(0, np.bool_), np.empty(0, np.bool_), np.empty(0), 0.0, 0.0, 0)


def _kernel(a3, corr, lpd_off, loo, tail_len, r_eff, normalize, write, out_lw, khat, status,
            elpd, lpd, mcse, n_eff, chk):
    """Call the compiled kernel on the (chains, draws, n) ``a3`` (parallel from
    `_PARALLEL_MIN_COLS` columns), threads taking chunks of blocks one by one."""
    n_obs = a3.shape[2]
    kernel = _psis_parallel if n_obs >= _PARALLEL_MIN_COLS else _psis_serial
    n_blocks = -(-n_obs // _BLOCK)
    n_chunks = min(n_blocks, _CHUNKS_PER_THREAD * numba.get_num_threads())
    previous = numba.set_parallel_chunksize(1)  # threads take the chunks one by one
    try:
        kernel(a3, corr, lpd_off, bool(loo), tail_len, r_eff, bool(normalize), bool(write),
               _BLOCK, n_chunks, out_lw.reshape(a3.shape if write else (0, 0, 0)), khat,
               status, elpd, lpd, mcse, n_eff, chk)
    finally:
        numba.set_parallel_chunksize(previous)


def _run_checked(a3, write, max_rhat):
    """`_run` of plain LOO on a (chains, draws, n) log-likelihood (>= 2 chains of >= 4
    draws) with r_eff computed from the chains and the R-hat check, all in the kernel's one
    pass (`_psis_kernel._checks`); None when the numpy engine would run (the caller then
    makes the separate calls).  Returns `_run`'s tuple + (r_eff, rhat, stuck)."""
    from loo_adapt.core._rhat_kernel import _score_table, screen_ratio
    from loo_adapt.core.ess import MAX_DIRECT_LAG, _ess_columns, fft_next_good_size

    n_chains, n_per, n_obs = a3.shape
    n_draws = n_chains * n_per
    if _engine(n_draws, n_obs, False) == "numpy":  # not counted: the fallback asks again
        return None
    h = n_per // 2
    chk = (np.empty(n_obs), np.zeros(n_obs, np.bool_), np.zeros(n_obs, np.bool_),
           _score_table(2 * n_chains * h), float(screen_ratio(h, max_rhat)),
           fft_next_good_size(n_per) / n_per**2, int(min(MAX_DIRECT_LAG, n_per)))
    r_eff = np.ones(n_obs)
    tail_len = np.empty(n_obs, np.int64)
    out_lw = np.empty((n_draws, n_obs) if write else (0, 0))
    khat, status = np.empty(n_obs), np.empty(n_obs, dtype=np.int64)
    elpd, lpd, mcse, n_eff = (np.empty(n_obs) for _ in range(4))
    with np.errstate(invalid="ignore", divide="ignore"):
        _kernel(a3, np.zeros(n_draws), np.empty(0), True, tail_len, r_eff, True, write, out_lw,
                khat, status, elpd, lpd, mcse, n_eff, chk)
    rhat, stuck, long = chk[0], chk[1], chk[2]
    cols = np.flatnonzero(long & (status != _BAD))
    if cols.size:  # Geyer's sequence past the direct lags: the FFT, then PSIS again
        sub = np.ascontiguousarray(a3[:, :, cols])
        r_eff[cols] = _ess_columns(sub, shift=sub.max(axis=(0, 1), keepdims=True),
                                   engine="numpy") / n_draws
        again = _run(sub, np.zeros(n_draws), True, r_eff[cols], True, write)
        for full, part in zip((out_lw.T if write else None, khat, status, elpd, lpd, mcse,
                               n_eff), again):
            if full is not None:
                full[cols] = part.T if part.ndim == 2 else part
    bad = status == _BAD
    rhat[bad] = np.nan
    stuck[bad] = False
    return (out_lw if write else None), khat, status, elpd, lpd, mcse, n_eff, r_eff, rhat, stuck


def _warn_status(status, stacklevel):
    """One warning naming every column whose k-hat was set to inf, with the cause of each
    (a warning per cause could be read as the whole list)."""
    causes = []
    for code, msg in (
        (_SHORT_TAIL, "not enough tail draws (< 5)"),
        (_CONSTANT_TAIL, "all tail values the same"),
        (_FIT_FAILED, "the fit failed"),
    ):
        cols = np.flatnonzero(status == code)
        if cols.size:
            causes.append((cols, msg))
    if not causes:
        return
    every = np.sort(np.concatenate([c for c, _ in causes]))
    detail = "; ".join(f"{msg} in {_columns(cols, _WARN_COLUMNS)}" for cols, msg in causes)
    warnings.warn(
        f"the generalized Pareto distribution could not be fitted in {every.size} column(s) "
        f"{_columns(every, _WARN_COLUMNS)} ({detail}); khat set to inf and the weights left "
        "unsmoothed",
        stacklevel=stacklevel + 1,
    )


def _as_matrix(x, what):
    """float64 (S, n) view of ``x`` without copying when it already is one (any strides)."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise ValueError(f"{what} must have shape (S,) or (S, n), got {a.shape}")
    if not (a.flags.c_contiguous or a.flags.f_contiguous):
        a = np.ascontiguousarray(a)
    return a


def psislw(log_ratios, r_eff=1.0, normalize: bool = True):
    """Pareto-smoothed log importance weights and Pareto khat, per observation.

    Parameters
    ----------
    log_ratios : array (S,) or (S, n)
        Log importance ratios, draws x observations.  For PSIS-LOO these are ``-log_lik``.
        ``-inf`` is allowed (zero weight, as R loo since stan-dev/loo#395); NaN and ``+inf``
        are errors, as is a column that is ``-inf`` for every draw.
    r_eff : float or array (n,)
        Relative MCMC efficiency of ``exp(-log_ratios)``; sets the tail length.
    normalize : bool
        True: log weights normalised so that ``logsumexp`` over draws is 0 (arviz).
        False: R loo's unnormalised smoothed log weights (``psis()$log_weights``).

    Returns
    -------
    log_weights : array like ``log_ratios``
    khat : float (1-D input) or array (n,)

    Examples
    --------
    >>> lr = np.random.default_rng(0).standard_t(3, size=(4000, 2))
    >>> lw, k = psislw(lr)
    >>> lw.shape, k.shape
    ((4000, 2), (2,))
    """
    out_lw, khat = _psis_checked(log_ratios, r_eff, normalize, True)
    if np.ndim(log_ratios) == 1:
        return out_lw[:, 0], float(khat[0])
    return out_lw, khat


def pareto_khat(log_ratios, r_eff=1.0):
    """The Pareto k-hat of `psislw` alone: the same kernel, checks and warnings, with no
    smoothed weights written (no S x n output, no exp per draw).

    Parameters
    ----------
    log_ratios : array (S,) or (S, n), as for `psislw`.
    r_eff : float or array (n,), as for `psislw`.

    Returns
    -------
    khat : float (1-D input) or array (n,), equal to ``psislw(log_ratios, r_eff)[1]``.

    Examples
    --------
    >>> lr = np.random.default_rng(0).standard_t(3, size=(4000, 2))
    >>> bool(np.all(pareto_khat(lr) == psislw(lr)[1]))
    True
    """
    _, khat = _psis_checked(log_ratios, r_eff, False, False)
    return float(khat[0]) if np.ndim(log_ratios) == 1 else khat


def _psis_checked(log_ratios, r_eff, normalize, write):
    """`psislw`'s input checks, the kernel, its errors and warnings (stacklevel: the caller
    of `psislw` / `pareto_khat`).  Returns (log weights (S, n) or None, khat (n,))."""
    lr = _as_matrix(log_ratios, "log_ratios")
    n_draws, n_obs = lr.shape
    if n_draws < 2:
        raise ValueError(f"log_ratios must have at least 2 draws, got {n_draws}")
    if n_draws < MIN_DRAWS:
        warnings.warn(
            f"only {n_draws} draws: the Pareto k diagnostic is unreliable below {MIN_DRAWS}",
            stacklevel=3,
        )
    r = _prepare_r_eff(r_eff, n_obs)
    out_lw, khat, status, *_ = _run(lr, None, False, r, normalize, write)
    bad = np.flatnonzero(status == _BAD)
    if bad.size:
        raise ValueError(
            "log_ratios contain NaN or +inf in column(s) " + _columns(bad)
            + " (draws x observations); only finite values and -inf are allowed"
        )
    all_neg_inf = np.flatnonzero(status == _ALL_NEG_INF)
    if all_neg_inf.size:
        raise ValueError(
            "log_ratios are -inf for every draw in column(s) " + _columns(all_neg_inf)
        )
    _warn_status(status, 3)
    return out_lw, khat


def psis_n_eff(log_weights, r_eff=1.0) -> np.ndarray:
    """PSIS effective sample size ``r_eff / sum(w^2)`` of normalised weights (R psis_n_eff).

    Parameters
    ----------
    log_weights : array (S,) or (S, n)
        Log weights, normalised here.
    r_eff : float or array (n,)

    Returns
    -------
    float array (n,) (0-d for 1-D input).

    Examples
    --------
    >>> round(float(psis_n_eff(np.zeros(1000))), 6)
    1000.0
    """
    lw = np.asarray(log_weights, dtype=float)
    if lw.ndim == 1 or lw.size <= (1 << 20):  # small: numpy, no compilation
        lw = lw - logsumexp(lw, axis=0, keepdims=True)
        return np.asarray(r_eff, dtype=float) / np.exp(logsumexp(2.0 * lw, axis=0))
    # (sum w)^2 / sum w^2 of each column in two passes over the rows (no S x n temporary)
    return np.asarray(r_eff, dtype=float) * _n_eff_columns(np.ascontiguousarray(lw))


@njit(cache=True)
def _n_eff_columns(lw):  # pragma: no cover - compiled
    """(sum_s w_s)^2 / sum_s w_s^2 per column of log weights (S, n), stable in log space."""
    S, n = lw.shape
    mx = np.full(n, -np.inf)
    for s in range(S):
        for j in range(n):
            if lw[s, j] > mx[j]:
                mx[j] = lw[s, j]
    s1 = np.zeros(n)
    s2 = np.zeros(n)
    for s in range(S):
        for j in range(n):
            e = math.exp(lw[s, j] - mx[j])
            s1[j] += e
            s2[j] += e * e
    out = np.empty(n)
    for j in range(n):
        out[j] = s1[j] * s1[j] / s2[j] if s2[j] > 0 else np.nan
    return out


# --------------------------------------------------------------------------------------------
# expectations and LOO
# --------------------------------------------------------------------------------------------


def e_loo(values, log_weights, log: bool = False):
    """PSIS-weighted expectation per column: ``sum_s w_s values_s`` with normalised weights.

    ``values`` (S,) or (S, n) broadcastable against ``log_weights``.  With ``log=True`` the
    values are log values and the result is ``log E[exp(values)] = logsumexp(values + lw)``
    (e.g. log LOO predictive probabilities from log probabilities), which stays finite where
    the plain-scale sum would under- or overflow.  The weights are normalised here, so R's
    unnormalised ``psislw(..., normalize=False)`` output can be passed directly.
    """
    lw = np.asarray(log_weights, dtype=float)
    v = np.asarray(values, dtype=float)
    if np.isnan(lw).any():
        raise ValueError("log_weights contain NaN")
    if np.isnan(v).any():
        raise ValueError("values contain NaN")
    if v.ndim == 1 and lw.ndim == 2:
        v = v[:, None]  # one value per draw, shared by all observations
    try:
        v, lw = np.broadcast_arrays(v, lw)
    except ValueError as err:
        raise ValueError(
            f"values shape {v.shape} does not match log_weights shape {lw.shape}"
        ) from err
    lw = lw - logsumexp(lw, axis=0, keepdims=True)
    if log:
        if (v == np.inf).any():
            raise ValueError("log values contain +inf")
        return logsumexp(v + lw, axis=0)
    if (~np.isfinite(v)).any():
        raise ValueError("values contain non-finite entries; use log=True for log values")
    return np.sum(np.exp(lw) * v, axis=0)


def mcse_elpd(log_lik, log_weights, elpd_loo, r_eff, method: str = "lognormal",
              n_samples: int = 1000) -> np.ndarray:
    """Monte Carlo SE of each ``elpd_loo_i`` (R loo ``mcse_elpd``).

    ``log_lik`` and normalised ``log_weights`` are (S, n).  ``method="lognormal"`` is R loo
    >= 2.7; ``"quadrature"`` is the earlier Blom-quantile version with ``n_samples`` points.
    """
    ll = np.asarray(log_lik, dtype=float)
    lw = np.asarray(log_weights, dtype=float)
    elpd = np.asarray(elpd_loo, dtype=float)
    r = np.broadcast_to(np.asarray(r_eff, dtype=float), elpd.shape)
    # Var[p] / E[p]^2 = sum_s w_s^2 (p_s / E - 1)^2, both terms in [0, 1] as w_s p_s <= E
    a = np.exp(lw + ll - elpd)
    b = np.exp(lw)
    var_rel = np.sum((a - b) ** 2, axis=0)
    if method == "lognormal":
        var_log = np.log1p(var_rel)
    elif method == "quadrature":
        j = np.arange(1, n_samples + 1)
        from scipy.stats import norm

        zq = norm.ppf((j - 0.375) / (n_samples + 0.25))
        z = 1.0 + np.sqrt(var_rel)[None, :] * zq[:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            logz = np.where(z > 0, np.log(np.where(z > 0, z, 1.0)), np.nan)
        var_log = np.nanvar(logz, axis=0, ddof=1)
    else:
        raise ValueError(f"method must be 'lognormal' or 'quadrature', got {method!r}")
    return np.sqrt(var_log / r)


@add_deprecated_aliases
@dataclass
class PsisLoo:
    """Pointwise PSIS-LOO (arrays of length n unless noted).

    ``log_weights`` is (S, n), normalised over draws (None when the caller did not ask for
    the weights); ``good_k`` (the k-hat threshold) and ``n_samples`` are scalars;
    ``pareto_k_pq`` is the Pareto k-hat of p/q for draws of an approximation q (NaN for
    posterior draws); ``n_eff`` is R loo's ``psis_n_eff`` of each observation's weights,
    ``r_eff / sum(w^2)``, from the kernel's pass (None where a path does not compute it).
    Names as `loo_adapt.core._names` (``_i`` per observation).
    """

    elpd_i: np.ndarray
    p_loo_i: np.ndarray
    lpd_i: np.ndarray
    mcse_elpd_i: np.ndarray
    pareto_k: np.ndarray
    log_weights: np.ndarray | None
    r_eff: np.ndarray
    good_k: float
    n_samples: int
    pareto_k_pq: float = float("nan")
    n_eff: np.ndarray | None = None

    def estimates(self) -> dict[str, float]:
        """Totals and SEs as R loo (SE with the n - 1 variance); `loo_totals`."""
        return loo_totals(self.elpd_i, self.p_loo_i, self.mcse_elpd_i)


def loo_totals(elpd_i, p_loo_i, mcse_elpd_i, mcse_total: float | None = None) -> dict:
    """Totals with standard errors as R loo computes them (SE with the n - 1 variance).

    Parameters
    ----------
    elpd_i, p_loo_i, mcse_elpd_i : (n,) pointwise values.
    mcse_total : the MCSE of the total when the estimator knows it (correlated errors); the
        larger of it and the quadrature sum of ``mcse_elpd_i`` is reported.

    Returns
    -------
    dict
        elpd_loo, se_elpd_loo, p_loo, se_p_loo, looic, se_looic, mcse_elpd_loo.
    """
    n = len(elpd_i)
    out = {}
    for name, values in (("elpd_loo", elpd_i), ("p_loo", p_loo_i)):
        out[name] = float(np.sum(values))
        out[f"se_{name}"] = float(np.sqrt(n * np.var(values, ddof=1))) if n > 1 else np.nan
    out["looic"] = -2.0 * out["elpd_loo"]
    out["se_looic"] = 2.0 * out["se_elpd_loo"]
    out["mcse_elpd_loo"] = float(np.sqrt(np.nansum(np.asarray(mcse_elpd_i) ** 2)))
    if mcse_total is not None and np.isfinite(mcse_total):
        out["mcse_elpd_loo"] = max(out["mcse_elpd_loo"], float(mcse_total))
    return out


def loo_pointwise(log_lik, r_eff=None, mcse_method: str = "lognormal",
                  weights: bool = True, *, warn: bool = True) -> PsisLoo:
    """PSIS-LOO per observation from a pointwise log-likelihood.

    One fused pass per observation (smoothing, elpd_i, lpd_i, p_loo_i, MCSE_i); the S x n
    log weights are written only with ``weights=True``.

    Parameters
    ----------
    log_lik : array (chains, draws, n) or (S, n)
        Chains are stacked chain-major, as arviz stacks (chain, draw).
    r_eff : None, float or array (n,)
        None: ``relative_eff`` of ``exp(log_lik)`` from the chain structure for 3-D input,
        1 for 2-D input (draws treated as independent).
    mcse_method : "lognormal" (R loo >= 2.7) or "quadrature" (see ``mcse_elpd``).
    weights : bool
        Keep the (S, n) normalised log weights in ``PsisLoo.log_weights`` (else None;
        ``"quadrature"`` needs them and computes them regardless).
    warn : bool
        Warn about failed Pareto fits and too few draws (False: the caller reports them,
        e.g. once for all chunks in `loo_adapt.core.chunked`; ``khat`` is inf either way).

    Returns
    -------
    PsisLoo

    Examples
    --------
    >>> ll = np.random.default_rng(1).normal(-1.0, 0.3, size=(4, 500, 20))
    >>> res = loo_pointwise(ll, weights=False)
    >>> res.elpd_i.shape, res.log_weights is None
    ((20,), True)
    """
    ll = np.asarray(log_lik, dtype=np.float64)
    if ll.ndim == 3:
        n_obs = ll.shape[2]
        # a strided (chains, draws, n) view (a column slice of a fit's array) is read in
        # place by the kernel: no (S, n) copy
        ll2 = ll.reshape(-1, n_obs) if ll.flags.c_contiguous else ll
    elif ll.ndim == 2:
        ll2 = _as_matrix(ll, "log_lik")
        n_obs = ll.shape[1]
    else:
        raise ValueError(
            f"log_lik must have shape (chains, draws, n) or (S, n), got {ll.shape}"
        )
    if r_eff is None:
        if ll.ndim == 3:
            from loo_adapt.core.ess import relative_eff

            try:
                r = relative_eff(ll, log=True)
            except ValueError:
                _raise_non_finite_log_lik(ll2.reshape(-1, n_obs))
                raise
        else:
            r = np.ones(n_obs)
    else:
        r = _prepare_r_eff(r_eff, n_obs)
    return _psis_loo(ll2, np.zeros(ll2.size // n_obs), None, r, mcse_method, weights,
                     warn=warn)


def _raise_non_finite_log_lik(ll2, cols=None):
    """The error for NaN / infinite log-likelihood values (only the given columns are read)."""
    cols = np.arange(ll2.shape[1]) if cols is None else np.asarray(cols)
    sub = ll2[:, cols]
    nan_cols = cols[np.isnan(sub).any(axis=0)]
    if nan_cols.size:
        raise ValueError(f"log_lik contains NaN in observation(s) {_columns(nan_cols)}")
    inf_cols = cols[np.isinf(sub).any(axis=0)]
    if inf_cols.size:
        # R loo: "-Inf log-likelihood values are not allowed." (lpd and p_loo are undefined)
        raise ValueError(
            f"log_lik contains infinite values in observation(s) {_columns(inf_cols)}; "
            "-inf/+inf log-likelihood values are not allowed"
        )


def _psis_loo(ll, corr, lpd_off, r_eff, mcse_method, weights, *, warn=True) -> PsisLoo:
    """PSIS-LOO of (S, n) log-likelihoods, or a (chains, draws, n) view of them, with log
    ratios ``corr[:, None] - ll``; lpd is ``logsumexp(ll + lpd_off)`` per observation, or
    ``log mean exp(ll)`` for None."""
    _check_mcse_method(mcse_method)
    write = weights or mcse_method == "quadrature"
    out = _run(ll, corr, True, r_eff, True, write, lpd_off)
    return _loo_result(ll, r_eff, mcse_method, weights, warn, out)


def _check_mcse_method(mcse_method):
    if mcse_method not in ("lognormal", "quadrature"):
        raise ValueError(f"method must be 'lognormal' or 'quadrature', got {mcse_method!r}")


def _loo_result(ll, r_eff, mcse_method, weights, warn, out, stacklevel=4) -> PsisLoo:
    """`PsisLoo` from the kernel's outputs ``out`` (`_run`'s tuple) on ``ll``: errors for
    non-finite values, warnings (``stacklevel`` from here: the public function's caller)."""
    n_samples = ll.size // ll.shape[-1]
    if warn and n_samples < MIN_DRAWS:
        warnings.warn(
            f"only {n_samples} draws: the Pareto k diagnostic is unreliable below "
            f"{MIN_DRAWS}",
            stacklevel=stacklevel,
        )
    lw, khat, status, elpd, lpd, mcse, n_eff = out
    bad = np.flatnonzero(status == _BAD)
    if bad.size:
        _raise_non_finite_log_lik(ll.reshape(n_samples, -1), bad)
    if warn:
        _warn_status(status, stacklevel)
    if mcse_method == "quadrature":
        mcse = mcse_elpd(ll.reshape(n_samples, -1), lw, elpd, r_eff, method=mcse_method)
    return PsisLoo(
        elpd_i=elpd,
        p_loo_i=lpd - elpd,
        lpd_i=lpd,
        mcse_elpd_i=mcse,
        pareto_k=khat,
        log_weights=lw if weights else None,
        r_eff=r_eff,
        good_k=pareto_k_threshold(n_samples),
        n_samples=int(n_samples),
        n_eff=n_eff,
    )


def loo_pointwise_checked(log_lik, max_rhat: float, weights: bool = True, *,
                          warn: bool = True) -> tuple[PsisLoo, np.ndarray, np.ndarray]:
    """PSIS-LOO per observation of MCMC draws with r_eff from the chains, and the columns
    whose chains disagree, from one read of the draws.

    The numbers of ``loo_pointwise(log_lik, r_eff=r_eff)`` after
    ``r_eff, bad, rhat = core.convergence.relative_eff_and_disagreement(log_lik, max_rhat)``
    (what ``loo`` needs from an MCMC log-likelihood), but the compiled kernel computes each
    column's relative efficiency, tail length and rank R-hat from the buffer it smooths, so
    the draws are transposed once instead of twice.  Without the compiled kernel (a cold
    start on a small input) it makes those two calls.

    Parameters
    ----------
    log_lik : array (chains, draws, n), at least 2 chains of 4 draws, any strides.
    max_rhat : R-hat threshold of the check.
    weights : keep the (S, n) normalised log weights (as in ``loo_pointwise``).
    warn : as in ``loo_pointwise``.

    Returns
    -------
    (PsisLoo, bad, rhat) : ``bad`` the columns whose R-hat exceeds ``max_rhat`` or in which a
        chain is stuck, ``rhat`` exact for those, NaN where a bound showed it at most
        ``max_rhat`` (`core.convergence.relative_eff_and_disagreement`).

    Examples
    --------
    >>> ll = np.random.default_rng(1).normal(-1.0, 0.3, size=(4, 500, 20))
    >>> res, bad, rhat = loo_pointwise_checked(ll, 1.01, weights=False)
    >>> res.elpd_i.shape, bool(bad.any())
    ((20,), False)
    """
    ll = np.asarray(log_lik, dtype=np.float64)
    if ll.ndim != 3 or ll.shape[0] < 2 or ll.shape[1] < 4:
        raise ValueError(f"log_lik must be (chains, draws, n) with at least 2 chains of 4 "
                         f"draws, got shape {ll.shape}")
    fused = _run_checked(ll, weights, float(max_rhat))
    if fused is None:
        from loo_adapt.core.convergence import relative_eff_and_disagreement

        try:
            r, bad, rhat = relative_eff_and_disagreement(ll, max_rhat)
        except ValueError:
            _raise_non_finite_log_lik(ll.reshape(-1, ll.shape[2]))
            raise
        return loo_pointwise(ll, r_eff=r, weights=weights, warn=warn), bad, rhat
    *out, r_eff, rhat, stuck = fused
    res = _loo_result(ll, r_eff, "lognormal", weights, warn, tuple(out), stacklevel=3)
    with np.errstate(invalid="ignore"):
        bad = (rhat > max_rhat) | stuck
    return res, bad, rhat


def loo_pointwise_approximate(log_lik, log_p_minus_log_q, r_eff=1.0,
                              mcse_method: str = "lognormal",
                              weights: bool = True) -> PsisLoo:
    """PSIS-LOO from draws of an approximation q (ADVI, Laplace, Pathfinder).

    The LOO ratios are p(theta|D) / (q(theta) l_i(theta)) (Eq. 13-15 of the adaptive-IS
    paper; R loo's ``loo_approximate_posterior``).  ``lpd`` is the self-normalised,
    Pareto-smoothed p/q estimate of log E_p[l_i]; R loo takes the plain mean over the q
    draws there, which estimates E_q[l_i] instead and biases p_loo.

    Parameters
    ----------
    log_lik : array (S, n)
    log_p_minus_log_q : array (S,)
        ``log p(theta_s | y) - log q(theta_s)`` up to a constant, finite.
    r_eff : float or array (n,)
    mcse_method, weights : as in ``loo_pointwise``.

    Returns
    -------
    PsisLoo

    Examples
    --------
    >>> rng = np.random.default_rng(2)
    >>> res = loo_pointwise_approximate(rng.normal(-1, 0.2, (1000, 5)),
    ...                                 rng.normal(0, 0.1, 1000))
    >>> res.pareto_k.shape
    (5,)
    """
    ll = np.asarray(log_lik, dtype=np.float64)
    if ll.ndim != 2:
        raise ValueError(f"log_lik must be (S, n), got {ll.shape}")
    ll = _as_matrix(ll, "log_lik")
    corr = np.asarray(log_p_minus_log_q, dtype=np.float64).reshape(-1)
    if corr.shape[0] != ll.shape[0]:
        raise ValueError(f"log_p - log_q has {corr.shape[0]} draws, log_lik has {ll.shape[0]}")
    if not np.all(np.isfinite(corr)):
        raise ValueError("log_p - log_q must be finite for every draw")
    r = _prepare_r_eff(r_eff, ll.shape[1])
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="only .* draws")  # said once, below
        lw_post, k_post = psislw(corr, r_eff=1.0, normalize=True)
    if k_post > pareto_k_threshold(ll.shape[0]):
        warnings.warn(
            f"the approximation is a poor proposal for the posterior itself (Pareto k-hat of "
            f"p/q is {k_post:.2f}); LOO estimates from these draws are unreliable",
            UserWarning,
            stacklevel=2,
        )
    # lpd = logsumexp(ll + lw_post) per observation, inside the kernel
    res = _psis_loo(ll, corr, lw_post, r, mcse_method, weights)
    res.pareto_k_pq = float(k_post)
    return res


# ``loo_adapt.core.psis(log_ratios, r_eff)`` works like R loo's ``psis()`` while
# ``loo_adapt.core.psis.psislw`` and the rest of this module stay reachable
make_module_callable(__name__, psislw)
