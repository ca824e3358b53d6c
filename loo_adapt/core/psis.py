"""Pareto-smoothed importance sampling (PSIS), ported from R ``loo`` >= 2.7; PSIS-LOO per
observation on top of it is `loo_adapt.core.psis_loo`.

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
"""

from __future__ import annotations

import math
import warnings

import numba
import numpy as np
from numba import njit
from scipy.special import logsumexp

from loo_adapt.core._callable import make_module_callable
from loo_adapt.core._compiled import use_numba
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
    "e_loo",
    "gpdfit",
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
    out_lw, khat, status, elpd, lpd, mcse, n_eff = _outputs(n_draws, n_obs, loo, write)
    _kernel(a3, corr, lpd_off, loo, tail_len, r_eff, normalize, write, out_lw, khat, status,
            elpd, lpd, mcse, n_eff, _NO_CHECKS)
    return (out_lw if write else None), khat, status, elpd, lpd, mcse, n_eff


def _outputs(n_draws, n_obs, loo, write):
    """The kernel's output arrays: log weights ((S, n) when ``write``, laid out
    observation-major: the transpose of a C-contiguous (n, S)), khat, status, and
    (``loo``) elpd, lpd, MCSE, n_eff."""
    m = n_obs if loo else 0
    # the weights observation-major: the kernel smooths each block in their rows (`_kernel`)
    return (np.empty((n_obs, n_draws) if write else (0, 0)).T, np.empty(n_obs),
            np.empty(n_obs, dtype=np.int64), np.empty(m), np.empty(m), np.empty(m),
            np.empty(m))


#: the kernel's ``chk`` argument when it runs no checks (the types of a real one)
_NO_CHECKS = (np.empty(0), np.empty(0, np.bool_), np.empty(0, np.bool_), np.empty(0), 0.0, 0.0, 0)
#: the kernel's weights argument when it writes none
_NO_ROWS = np.empty((0, 0))


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
               _BLOCK, n_chunks, _rows_of(out_lw) if write else _NO_ROWS, khat,
               status, elpd, lpd, mcse, n_eff, chk)
    finally:
        numba.set_parallel_chunksize(previous)


def _rows_of(out_lw):
    """The (n, S) C-contiguous array whose transpose is the (S, n) ``out_lw`` of `_outputs`,
    which the kernel writes in place (a copy would leave ``out_lw`` unwritten)."""
    rows = out_lw.T
    if not rows.flags.c_contiguous:
        raise ValueError("the kernel's weights must be observation-major (see _outputs)")
    return rows


def _run_checked(a3, write, max_rhat):
    """`_run` of plain LOO on a (chains, draws, n) log-likelihood (>= 2 chains of >= 4
    draws) with r_eff computed from the chains and the R-hat check, all in the kernel's one
    pass (`_psis_kernel._checks`); None when the numpy engine would run (the caller then
    makes the separate calls).  Returns `_run`'s tuple + (r_eff, rhat, stuck)."""
    from loo_adapt.core.ess import _direct_params, _long_columns_ess

    n_chains, n_per, n_obs = a3.shape
    n_draws = n_chains * n_per
    if _engine(n_draws, n_obs, False) == "numpy":  # not counted: the fallback asks again
        return None
    scale, max_lag, ratio, table = _direct_params(n_chains, n_per, max_rhat)
    chk = (np.empty(n_obs), np.zeros(n_obs, np.bool_), np.zeros(n_obs, np.bool_), table, ratio,
           scale, max_lag)
    r_eff = np.ones(n_obs)
    tail_len = np.empty(n_obs, np.int64)
    out_lw, khat, status, elpd, lpd, mcse, n_eff = _outputs(n_draws, n_obs, True, write)
    with np.errstate(invalid="ignore", divide="ignore"):
        _kernel(a3, np.zeros(n_draws), np.empty(0), True, tail_len, r_eff, True, write, out_lw,
                khat, status, elpd, lpd, mcse, n_eff, chk)
    rhat, stuck, long = chk[0], chk[1], chk[2]
    cols = np.flatnonzero(long & (status != _BAD))
    if cols.size:  # Geyer's sequence past the direct lags: the FFT, then PSIS again
        r_eff[cols] = _long_columns_ess(a3, cols, True) / n_draws
        again = _run(a3[:, :, cols], np.zeros(n_draws), True, r_eff[cols], True, write)
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


# ``loo_adapt.core.psis(log_ratios, r_eff)`` works like R loo's ``psis()`` while
# ``loo_adapt.core.psis.psislw`` and the rest of this module stay reachable
make_module_callable(__name__, psislw)
