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

``mcse_elpd_loo`` follows R ``loo`` >= 2.7 (PR stan-dev/loo#246): the sampling distribution
of ``E[p(y_i | y_-i)]`` is approximated by a log-normal with the PSIS mean and variance, so
``mcse_i = sqrt(log1p(Var / E^2) / r_eff_i)``.  The variance is computed relative to the
LOO predictive density (``Var / E^2 = sum_s w_s^2 (p_s / E - 1)^2``), which cannot overflow.
``mcse_method="quadrature"`` reproduces the older R approach (``var(log z)`` over 1000 Blom
normal quantiles ``z`` with that mean and sd, negative ``z`` dropped); the two agree to
~0.1% when the relative variance is small.
"""

from __future__ import annotations

import math
import sys
import types
import warnings
from dataclasses import dataclass

import numpy as np
from numba import njit, prange
from scipy.special import logsumexp
from scipy.stats import norm

__all__ = [
    "MIN_DRAWS",
    "PsisLoo",
    "e_loo",
    "gpdfit",
    "loo_pointwise",
    "mcse_elpd",
    "pareto_k_category",
    "pareto_k_threshold",
    "psis_n_eff",
    "psis_tail_length",
    "psislw",
]

#: Below this many draws a warning says the Pareto k diagnostic is unreliable.  With S < 25
#: the tail (at most 0.2 S draws) is shorter than 5 and khat is Inf for every observation.
MIN_DRAWS = 100

# Status codes returned per column by the numba kernel.
_OK, _SHORT_TAIL, _CONSTANT_TAIL, _FIT_FAILED = 0, 1, 2, 3

_DBL_EPS = np.finfo(float).eps


# --------------------------------------------------------------------------------------------
# generalized Pareto fit
# --------------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy")
def _gpdfit_sorted(x, wip, min_grid_pts):
    """Zhang & Stephens (2009) fit of a zero-location GPD to ascending ``x`` (R loo gpdfit)."""
    n = x.shape[0]
    prior = 3.0
    m = min_grid_pts + int(math.floor(math.sqrt(n)))
    xstar = x[int(math.floor(n / 4.0 + 0.5)) - 1]  # first quartile (R 1-based index)
    theta = np.empty(m)
    l_theta = np.empty(m)
    for j in range(m):
        theta[j] = 1.0 / x[n - 1] + (1.0 - math.sqrt(m / (j + 1 - 0.5))) / prior / xstar
        a = -theta[j]
        acc = 0.0
        for s in range(n):
            acc += math.log1p(a * x[s])
        kk = acc / n
        l_theta[j] = n * (math.log(a / kk) - kk - 1.0)
    # R: w_j = 1 / sum_i exp(l_i - l_j) = exp(l_j - logsumexp(l)), O(m) instead of O(m^2);
    # R's own form is kept for non-finite profile likelihoods, where the two can differ
    lmax = -math.inf
    for j in range(m):
        if l_theta[j] > lmax:
            lmax = l_theta[j]
    theta_hat = 0.0
    if math.isfinite(lmax):
        acc = 0.0
        for j in range(m):
            acc += math.exp(l_theta[j] - lmax)
        lse = lmax + math.log(acc)
        for j in range(m):
            theta_hat += theta[j] * math.exp(l_theta[j] - lse)
    else:
        for j in range(m):
            acc = 0.0
            for i in range(m):
                acc += math.exp(l_theta[i] - l_theta[j])
            theta_hat += theta[j] / acc
    acc = 0.0
    for s in range(n):
        acc += math.log1p(-theta_hat * x[s])
    k = acc / n
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
    ``min_grid_pts + floor(sqrt(len(x)))`` points, as R ``loo::gpdfit``; with ``wip=True`` k is
    shrunk towards 0.5 as ``(k n + 5) / (n + 10)``.  Here k is the negative of Zhang & Stephens'
    k, so k > 0 is a heavy tail.  ``k`` is ``inf`` when the fit fails.
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
    if sort_x:
        x = np.sort(x)
    else:
        x = np.ascontiguousarray(x)
    if x[-1] <= 0:
        raise ValueError("gpdfit: all values are zero")
    if int(min_grid_pts) < 1:
        raise ValueError("min_grid_pts must be a positive integer")
    k, sigma = _gpdfit_sorted(x, bool(wip), int(min_grid_pts))
    return float(k), float(sigma)


# --------------------------------------------------------------------------------------------
# PSIS kernel
# --------------------------------------------------------------------------------------------


@njit(cache=True, error_model="numpy")
def _psis_row(lr, tail_len, normalize, out):
    """Smooth one observation's log ratios ``lr`` (contiguous) into ``out``; (khat, status).

    Port of R loo ``do_psis_i`` + ``posterior::ps_tail(are_log_weights=TRUE)``.  ``out`` gets
    the smoothed log weights (the raw log ratios where no smoothing is possible), normalised
    to logsumexp 0 when ``normalize``.  Only the ``tail_len + 1`` largest values are sorted:
    a partition finds the cutoff, and a stable sort of the values >= cutoff (collected in draw
    order) orders them exactly as R's stable full sort would, ties included.
    """
    s_draws = lr.shape[0]
    mx = -math.inf
    for s in range(s_draws):
        if lr[s] > mx:
            mx = lr[s]
    for s in range(s_draws):
        out[s] = lr[s]
    khat = math.inf
    status = _SHORT_TAIL
    if tail_len >= 5:
        x = lr - mx  # R sorts the shifted values; the shift can create ties, so sort these
        first = s_draws - tail_len
        c = np.partition(x, first - 1)[first - 1]
        n_cand = 0
        for s in range(s_draws):
            if x[s] >= c:
                n_cand += 1
        cand = np.empty(n_cand, dtype=np.int64)
        n_cand = 0
        for s in range(s_draws):
            if x[s] >= c:
                cand[n_cand] = s
                n_cand += 1
        order = cand[np.argsort(x[cand], kind="mergesort")][n_cand - tail_len - 1:]
        # order[0] is the cutoff draw, order[1:] the tail in ascending order
        tail_lo = x[order[1]]
        tail_hi = x[order[tail_len]]
        if abs(tail_hi - tail_lo) < _DBL_EPS:
            status = _CONSTANT_TAIL
        else:
            cutoff = x[order[0]]
            if cutoff == tail_lo:
                cutoff = cutoff - _DBL_EPS
            exp_cutoff = math.exp(cutoff)
            tail = np.empty(tail_len)
            for j in range(tail_len):
                tail[j] = math.exp(x[order[j + 1]]) - exp_cutoff
            k, sigma = _gpdfit_sorted(tail, True, 30)
            if not (math.isfinite(k) and math.isfinite(sigma) and sigma > 0.0):
                status = _FIT_FAILED
            else:
                khat = k
                status = _OK
                for j in range(tail_len):
                    p = (j + 0.5) / tail_len
                    if k == 0.0:
                        q = exp_cutoff - sigma * math.log1p(-p)
                    else:
                        q = exp_cutoff + sigma * math.expm1(-k * math.log1p(-p)) / k
                    v = math.log(q)
                    if v > tail_hi:  # truncate at the largest raw weight
                        v = tail_hi
                    out[order[j + 1]] = v + mx
    if normalize:
        m2 = -math.inf
        for s in range(s_draws):
            if out[s] > m2:
                m2 = out[s]
        acc = 0.0
        for s in range(s_draws):
            acc += math.exp(out[s] - m2)
        lse = m2 + math.log(acc)
        for s in range(s_draws):
            out[s] -= lse
    return khat, status


@njit(cache=True, error_model="numpy")
def _psis_block(log_ratios, j0, j1, tail_len, normalize, out_lw, out_k, status):
    """Columns j0:j1 of (S, n) C-ordered arrays, through a transposed block buffer so that
    each observation's draws are contiguous while main memory is read and written row-wise."""
    s_draws = log_ratios.shape[0]
    width = j1 - j0
    buf = np.empty((width, s_draws))
    res = np.empty((width, s_draws))
    for s in range(s_draws):
        for j in range(width):
            buf[j, s] = log_ratios[s, j0 + j]
    for j in range(width):
        out_k[j0 + j], status[j0 + j] = _psis_row(buf[j], tail_len[j0 + j], normalize, res[j])
    for s in range(s_draws):
        for j in range(width):
            out_lw[s, j0 + j] = res[j, s]


@njit(parallel=True, cache=True, error_model="numpy")
def _psis_columns(log_ratios, tail_len, normalize, block, out_lw, out_k, status):
    n_obs = log_ratios.shape[1]
    n_blocks = (n_obs + block - 1) // block
    for b in prange(n_blocks):
        j0 = b * block
        _psis_block(log_ratios, j0, min(j0 + block, n_obs), tail_len, normalize,
                    out_lw, out_k, status)


@njit(cache=True, error_model="numpy")
def _psis_columns_serial(log_ratios, tail_len, normalize, block, out_lw, out_k, status):
    n_obs = log_ratios.shape[1]
    for j0 in range(0, n_obs, block):
        _psis_block(log_ratios, j0, min(j0 + block, n_obs), tail_len, normalize,
                    out_lw, out_k, status)


#: Observations per transposed block (32 x S doubles stay in cache for S of a few thousand).
_BLOCK = 32

#: Below this many observations the thread-pool start-up costs more than it saves
#: (measured ~25 ms per call on a loaded 2-core machine versus ~1 ms serial for 5 columns).
_PARALLEL_MIN_COLS = 64


def psis_tail_length(n_draws: int, r_eff) -> np.ndarray:
    """R loo ``n_pareto``: ``ceil(min(0.2 S, 3 sqrt(S / r_eff)))``."""
    r_eff = np.asarray(r_eff, dtype=float)
    return np.ceil(np.minimum(0.2 * n_draws, 3.0 * np.sqrt(n_draws / r_eff))).astype(np.int64)


def pareto_k_threshold(n_draws: int) -> float:
    """Sample-size dependent khat threshold ``min(1 - 1 / log10(S), 0.7)`` (R loo >= 2.6)."""
    if n_draws < 2:
        raise ValueError(f"need at least 2 draws for a khat threshold, got {n_draws}")
    return float(min(1.0 - 1.0 / math.log10(n_draws), 0.7))


def pareto_k_category(khat, n_draws: int) -> np.ndarray:
    """R loo's categories: "good" (k <= threshold), "bad" (threshold, 1], "very bad" (> 1)."""
    khat = np.asarray(khat, dtype=float)
    thr = pareto_k_threshold(n_draws)
    out = np.full(khat.shape, "good", dtype=object)
    out[khat > thr] = "bad"
    out[khat > 1] = "very bad"
    return out


def _prepare_r_eff(r_eff, n_obs: int) -> np.ndarray:
    if r_eff is None:
        return np.ones(n_obs)
    r = np.asarray(r_eff, dtype=float)
    if r.ndim == 0:
        r = np.full(n_obs, float(r))
    elif r.shape != (n_obs,):
        raise ValueError(
            f"r_eff must be a scalar or have one value per observation ({n_obs}), "
            f"got shape {r.shape}"
        )
    else:
        r = r.copy()
    if np.any(np.isnan(r)):
        # R loo (prepare_psis_r_eff) replaces NAs by 1 with a message
        warnings.warn("r_eff contains NaN; replacing those values with 1", stacklevel=3)
        r[np.isnan(r)] = 1.0
    if np.any(~np.isfinite(r)) or np.any(r <= 0):
        raise ValueError("r_eff values must be finite and > 0")
    return r


def _columns(idx, limit=10) -> str:
    idx = list(idx)
    txt = ", ".join(str(i) for i in idx[:limit])
    if len(idx) > limit:
        txt += f", ... ({len(idx) - limit} more)"
    return txt


def psislw(log_ratios, r_eff=1.0, normalize: bool = True, *, warn: bool = True):
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
    warn : bool
        False: no warnings (too few draws, GPD fit impossible: khat is then inf), for callers
        that report them once for many blocks of columns (``loo_adapt.core.chunked``).

    Returns
    -------
    log_weights : array like ``log_ratios``
    khat : float (1-D input) or array (n,)
    """
    lr = np.asarray(log_ratios, dtype=np.float64)
    one_d = lr.ndim == 1
    if one_d:
        lr = lr[:, None]
    if lr.ndim != 2:
        raise ValueError(f"log_ratios must have shape (S,) or (S, n), got {lr.shape}")
    n_draws, n_obs = lr.shape
    if n_draws < 2:
        raise ValueError(f"log_ratios must have at least 2 draws, got {n_draws}")
    finite = bool(np.isfinite(lr).all())
    bad = None if finite else np.isnan(lr) | (lr == np.inf)
    if bad is not None and bad.any():
        cols = np.flatnonzero(bad.any(axis=0))
        raise ValueError(
            "log_ratios contain NaN or +inf in column(s) " + _columns(cols)
            + " (draws x observations); only finite values and -inf are allowed"
        )
    all_neg_inf = np.zeros(n_obs, dtype=bool) if finite else np.all(lr == -np.inf, axis=0)
    if all_neg_inf.any():
        raise ValueError(
            "log_ratios are -inf for every draw in column(s) "
            + _columns(np.flatnonzero(all_neg_inf))
        )
    if warn and n_draws < MIN_DRAWS:
        warnings.warn(
            f"only {n_draws} draws: the Pareto k diagnostic is unreliable below {MIN_DRAWS}",
            stacklevel=2,
        )
    r = _prepare_r_eff(r_eff, n_obs)
    tail_len = psis_tail_length(n_draws, r)

    lr = np.ascontiguousarray(lr)
    out_lw = np.empty((n_draws, n_obs))
    khat = np.empty(n_obs)
    status = np.empty(n_obs, dtype=np.int64)
    kernel = _psis_columns if n_obs >= _PARALLEL_MIN_COLS else _psis_columns_serial
    kernel(lr, tail_len, bool(normalize), _BLOCK, out_lw, khat, status)

    for code, msg in (
        (_SHORT_TAIL, "not enough tail draws (< 5) to fit the generalized Pareto distribution"),
        (_CONSTANT_TAIL, "can't fit the generalized Pareto distribution because all tail "
                         "values are the same"),
        (_FIT_FAILED, "the generalized Pareto fit failed"),
    ):
        cols = np.flatnonzero(status == code)
        if warn and cols.size:
            warnings.warn(
                f"{msg} in column(s) {_columns(cols)}; khat set to inf and the weights left "
                "unsmoothed",
                stacklevel=2,
            )
    if one_d:
        return out_lw[:, 0], float(khat[0])
    return out_lw, khat


def psis_n_eff(log_weights, r_eff=1.0) -> np.ndarray:
    """PSIS effective sample size ``r_eff / sum(w^2)`` of normalised weights (R psis_n_eff)."""
    lw = np.asarray(log_weights, dtype=float)
    lw = lw - logsumexp(lw, axis=0, keepdims=True)
    return np.asarray(r_eff, dtype=float) / np.exp(logsumexp(2.0 * lw, axis=0))


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
        zq = norm.ppf((j - 0.375) / (n_samples + 0.25))
        z = 1.0 + np.sqrt(var_rel)[None, :] * zq[:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            logz = np.where(z > 0, np.log(np.where(z > 0, z, 1.0)), np.nan)
        var_log = np.nanvar(logz, axis=0, ddof=1)
    else:
        raise ValueError(f"method must be 'lognormal' or 'quadrature', got {method!r}")
    return np.sqrt(var_log / r)


@dataclass
class PsisLoo:
    """Pointwise PSIS-LOO (arrays of length n unless noted).

    ``log_weights`` is (S, n), normalised over draws; ``khat_threshold`` and ``n_samples``
    are scalars.
    """

    elpd_loo: np.ndarray
    p_loo: np.ndarray
    lpd: np.ndarray
    mcse_elpd_loo: np.ndarray
    khat: np.ndarray
    log_weights: np.ndarray
    r_eff: np.ndarray
    khat_threshold: float
    n_samples: int

    def to_result(self):
        """The shared array-level result ``loo_adapt.result.PointwiseLoo``."""
        from loo_adapt.result import PointwiseLoo

        return PointwiseLoo(
            elpd_loo=self.elpd_loo.copy(),
            p_loo=self.p_loo.copy(),
            lpd=self.lpd.copy(),
            mcse_elpd_loo=self.mcse_elpd_loo.copy(),
            khat=self.khat.copy(),
            khat_threshold=float(self.khat_threshold),
            n_samples=int(self.n_samples),
            r_eff=self.r_eff.copy(),
        )

    def estimates(self) -> dict[str, float]:
        """Totals and SEs as R loo (SE with the n - 1 variance)."""
        return self.to_result().estimates()


def loo_pointwise(log_lik, r_eff=None, mcse_method: str = "lognormal", *,
                  warn: bool = True) -> PsisLoo:
    """PSIS-LOO per observation from a pointwise log-likelihood.

    Parameters
    ----------
    log_lik : array (chains, draws, n) or (S, n)
        Chains are stacked chain-major, as arviz stacks (chain, draw).
    r_eff : None, float or array (n,)
        None: ``relative_eff`` of ``exp(log_lik)`` from the chain structure for 3-D input,
        1 for 2-D input (draws treated as independent).
    warn : bool
        False: leave the PSIS warnings to the caller (see `psislw`).
    """
    from loo_adapt.core.ess import relative_eff

    ll = np.asarray(log_lik, dtype=np.float64)
    if ll.ndim == 3:
        n_chains, n_draws, n_obs = ll.shape
        ll2 = ll.reshape(n_chains * n_draws, n_obs)
    elif ll.ndim == 2:
        ll2 = ll
        n_obs = ll.shape[1]
    else:
        raise ValueError(
            f"log_lik must have shape (chains, draws, n) or (S, n), got {ll.shape}"
        )
    if np.isnan(ll2).any():
        cols = np.flatnonzero(np.isnan(ll2).any(axis=0))
        raise ValueError(f"log_lik contains NaN in observation(s) {_columns(cols)}")
    if np.isinf(ll2).any():
        cols = np.flatnonzero(np.isinf(ll2).any(axis=0))
        # R loo: "-Inf log-likelihood values are not allowed." (lpd and p_loo are undefined)
        raise ValueError(
            f"log_lik contains infinite values in observation(s) {_columns(cols)}; "
            "-inf/+inf log-likelihood values are not allowed"
        )
    s_total = ll2.shape[0]
    if r_eff is None:
        if ll.ndim == 3:
            r = relative_eff(ll, log=True)
        else:
            r = np.ones(n_obs)
    else:
        r = _prepare_r_eff(r_eff, n_obs)
    lpd = logsumexp(ll2, axis=0) - math.log(s_total)
    return _psis_loo(ll2, -ll2, lpd, r, mcse_method, warn=warn)


def _psis_loo(ll, log_ratios, lpd, r_eff, mcse_method, warn: bool = True) -> PsisLoo:
    """Smooth the LOO log ratios of (S, n) draws and collect the pointwise results."""
    lw, khat = psislw(log_ratios, r_eff=r_eff, normalize=True, warn=warn)
    elpd = logsumexp(ll + lw, axis=0)
    return PsisLoo(
        elpd_loo=elpd,
        p_loo=lpd - elpd,
        lpd=lpd,
        mcse_elpd_loo=mcse_elpd(ll, lw, elpd, r_eff, method=mcse_method),
        khat=np.asarray(khat, dtype=float),
        log_weights=lw,
        r_eff=r_eff,
        khat_threshold=pareto_k_threshold(ll.shape[0]),
        n_samples=int(ll.shape[0]),
    )


def loo_pointwise_approximate(log_lik, log_p_minus_log_q, r_eff=1.0,
                              mcse_method: str = "lognormal") -> PsisLoo:
    """PSIS-LOO from draws of an approximation q (ADVI, Laplace, Pathfinder).

    The LOO ratios are p(theta|D) / (q(theta) l_i(theta)) (Eq. 13-15 of the adaptive-IS
    paper; R loo's ``loo_approximate_posterior``).  ``lpd`` is the self-normalised,
    Pareto-smoothed p/q estimate of log E_p[l_i]; R loo takes the plain mean over the q
    draws there, which estimates E_q[l_i] instead and biases p_loo.
    """
    ll = np.asarray(log_lik, dtype=np.float64)
    if ll.ndim != 2:
        raise ValueError(f"log_lik must be (S, n), got {ll.shape}")
    corr = np.asarray(log_p_minus_log_q, dtype=np.float64).reshape(-1)
    if corr.shape[0] != ll.shape[0]:
        raise ValueError(f"log_p - log_q has {corr.shape[0]} draws, log_lik has {ll.shape[0]}")
    if not np.all(np.isfinite(corr)):
        raise ValueError("log_p - log_q must be finite for every draw")
    if not np.all(np.isfinite(ll)):
        raise ValueError("log_lik contains NaN or infinite values")
    r = _prepare_r_eff(r_eff, ll.shape[1])
    lw_post, k_post = psislw(corr, r_eff=1.0, normalize=True)
    if k_post > pareto_k_threshold(ll.shape[0]):
        warnings.warn(
            f"the approximation is a poor proposal for the posterior itself (Pareto k-hat of "
            f"p/q is {k_post:.2f}); LOO estimates from these draws are unreliable",
            UserWarning,
            stacklevel=2,
        )
    lpd = logsumexp(ll + lw_post[:, None], axis=0)
    return _psis_loo(ll, corr[:, None] - ll, lpd, r, mcse_method)


class _CallablePsisModule(types.ModuleType):
    """Lets ``loo_adapt.core.psis(log_ratios, r_eff)`` work like R loo's ``psis()`` while
    ``loo_adapt.core.psis.psislw`` and the rest of this module stay reachable."""

    def __call__(self, log_ratios, r_eff=1.0, normalize: bool = True):
        return psislw(log_ratios, r_eff=r_eff, normalize=normalize)


sys.modules[__name__].__class__ = _CallablePsisModule
