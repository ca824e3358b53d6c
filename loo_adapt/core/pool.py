"""Pooling two independent estimates of the same LOO predictive densities.

Two estimators that use independent draws (PSIS on the posterior fit, mixture IS on the
mixture fit) estimate the same p_i = p(y_i | y_-i).  Where both are unbiased with a
trustworthy Monte Carlo error, their inverse-variance average has a smaller variance than
either.  The average is taken in density space,

    p_i = w_i p_a,i + (1 - w_i) p_b,i,      w_i = var_b,i / (var_a,i + var_b,i),

with var = (p * mcse_elpd)^2 (delta method), so it is itself a self-normalised importance
sampling estimate over the union of the two samples, the first weighted by w_i and the
second by 1 - w_i: an expectation under the pooled weights (LOO probability, LOO-PIT) is the
same average, and exp(elpd_i) stays equal to the pooled P(y_i | y_-i).  Everything is in
log space; numpy in, numpy out.
"""

from __future__ import annotations

import numpy as np

__all__ = ["pool_log_estimates"]


def pool_log_estimates(elpd_a, mcse_a, elpd_b, mcse_b):
    """Inverse-variance pooling of two independent estimates of log densities.

    Parameters
    ----------
    elpd_a, mcse_a : log densities of the first estimator and their Monte Carlo SEs
        (delta method, on the log scale).
    elpd_b, mcse_b : the same for the second estimator (independent draws).

    Returns
    -------
    elpd : pooled log densities, ``log(w p_a + (1 - w) p_b)``.
    mcse : their Monte Carlo SE, ``sqrt((g_a mcse_a)^2 + (g_b mcse_b)^2)``.
    weight_a : w, the share of the first estimate in density space (1/2 where both
        variances are 0).
    grad_a, grad_b : d elpd / d elpd_a and d elpd / d elpd_b (for the MCSE of a sum whose
        terms share draws).

    Raises
    ------
    ValueError
        An input is NaN or infinite, or an MCSE is negative.

    Examples
    --------
    >>> elpd, mcse, w, ga, gb = pool_log_estimates(np.log([0.5]), [0.02], np.log([0.5]),
    ...                                            [0.02])
    >>> float(w[0]), round(float(np.exp(elpd[0])), 12), round(float(mcse[0] / 0.02), 6)
    (0.5, 0.5, 0.707107)
    """
    ea, sa, eb, sb = (np.asarray(v, dtype=np.float64) for v in (elpd_a, mcse_a, elpd_b,
                                                                 mcse_b))
    ea, sa, eb, sb = np.broadcast_arrays(ea, sa, eb, sb)
    for name, v in (("elpd_a", ea), ("mcse_a", sa), ("elpd_b", eb), ("mcse_b", sb)):
        if not np.isfinite(v).all():
            raise ValueError(f"pool_log_estimates: {name} has NaN or infinite values")
    if (sa < 0).any() or (sb < 0).any():
        raise ValueError("pool_log_estimates: a Monte Carlo SE is negative")
    with np.errstate(divide="ignore"):
        log_va = 2.0 * (ea + np.log(sa))  # log var of p_a (delta method)
        log_vb = 2.0 * (eb + np.log(sb))
    both_zero = np.isneginf(log_va) & np.isneginf(log_vb)
    with np.errstate(invalid="ignore"):
        # w = vb / (va + vb) = 1 / (1 + exp(log_va - log_vb)), log w = -log1p(exp(...))
        d = np.where(both_zero, 0.0, log_va - log_vb)
    log_w = -np.logaddexp(0.0, d)
    log_1mw = -np.logaddexp(0.0, -d)
    elpd = np.logaddexp(log_w + ea, log_1mw + eb)
    grad_a = np.exp(log_w + ea - elpd)
    grad_b = np.exp(log_1mw + eb - elpd)
    mcse = np.hypot(grad_a * sa, grad_b * sb)
    return elpd, mcse, np.exp(log_w), grad_a, grad_b
