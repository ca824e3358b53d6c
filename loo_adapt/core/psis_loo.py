"""PSIS-LOO per observation (array core): elpd_i, lpd_i, p_loo_i, the Monte Carlo SE of each
elpd_i and Pareto k-hat from a pointwise log-likelihood, ported from R ``loo`` >= 2.7 (``loo.R``,
``importance_sampling.R``), on the PSIS kernel of `loo_adapt.core.psis`.

``mcse_elpd_i`` follows R ``loo`` >= 2.7 (PR stan-dev/loo#246): the sampling distribution
of ``E[p(y_i | y_-i)]`` is approximated by a log-normal with the PSIS mean and variance, so
``mcse_i = sqrt(log1p(Var / E^2) / r_eff_i)``.  The variance is computed relative to the
LOO predictive density (``Var / E^2 = sum_s w_s^2 (p_s / E - 1)^2``), which cannot overflow.
``mcse_method="quadrature"`` reproduces the older R approach (``var(log z)`` over 1000 Blom
normal quantiles ``z`` with that mean and sd, negative ``z`` dropped); the two agree to
~0.1% when the relative variance is small.

The standard error of the totals follows R, ``sqrt(n * var(x, ddof=1))`` (arviz uses
``ddof=0``: ``se_R = se_arviz * sqrt(n / (n - 1))``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from loo_adapt.core import psis as _psis
from loo_adapt.core._names import add_deprecated_aliases
from loo_adapt.core._status import _BAD
from loo_adapt.core.psis import (
    MIN_DRAWS,
    _as_matrix,
    _columns,
    _prepare_r_eff,
    _warn_status,
    pareto_k_threshold,
    psislw,
)

__all__ = [
    "PsisLoo",
    "loo_pointwise",
    "loo_pointwise_approximate",
    "loo_pointwise_checked",
    "loo_totals",
    "mcse_elpd",
]


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
    out = _psis._run(ll, corr, True, r_eff, True, write, lpd_off)
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
    fused = _psis._run_checked(ll, weights, float(max_rhat))
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
