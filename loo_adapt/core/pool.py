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

Before two such estimates stand for each other (pooled, or one verifying the other: refits
judging MixIS, two mixture fits against the posterior draws), `agree` asks whether they
differ by more than their Monte Carlo errors: a chi-square of the rows' z's and the z of
their summed difference.
"""

from __future__ import annotations

import numpy as np

__all__ = ["pool_log_estimates", "is_mcse_of_sum", "agreement", "agree", "agree_z"]


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


def is_mcse_of_sum(log_weights, weights, chains: int = 1) -> float:
    """Monte Carlo SE of ``sum_i weights_i * elpd_i`` for self-normalised importance sampling
    estimates that share one sample (PSIS on the posterior draws), ``elpd_i = -log mean_s
    r_is`` with ``r_is`` the (smoothed) ratios 1 / l_i.

    The rows' errors are correlated (every row reweighs the same draws), so the SE comes from
    the per-draw influence values of the weighted sum, ``-sum_i weights_i (S w_is - 1)``
    (``w`` the normalised weights), with Stan's ESS of a mean over the chains; the pointwise
    MCSEs in quadrature would treat the rows as independent.

    Parameters
    ----------
    log_weights : (S, m) normalised log weights of the rows in the sum (draws chain-major).
    weights : (m,) weights of the rows.
    chains : number of chains the S draws come from (S divisible by it).

    Returns
    -------
    float

    Examples
    --------
    >>> lw = np.log(np.full((100, 3), 0.01))  # equal weights: no Monte Carlo error
    >>> is_mcse_of_sum(lw, np.ones(3))
    0.0
    """
    from loo_adapt.core.ess_split import ess_mean

    lw = np.asarray(log_weights, dtype=np.float64)
    c = np.asarray(weights, dtype=np.float64).reshape(-1)
    if lw.ndim != 2 or lw.shape[1] != c.size:
        raise ValueError(f"log_weights {lw.shape} must be (S, {c.size})")
    S = lw.shape[0]
    if chains < 1 or S % chains:
        raise ValueError(f"{S} draws do not split into {chains} chains")
    psi = -((S * np.exp(lw) - 1.0) @ c)
    var = float(psi.var(ddof=1))
    if not np.isfinite(var) or var <= 0:
        return 0.0
    draws = S // chains
    ess = float(ess_mean(psi.reshape(chains, draws, 1))[0]) if draws >= 4 else float(S)
    return float(np.sqrt(var / ess))


def agreement(elpd, mcse, ref_elpd, ref_mcse):
    """z of each of ``elpd`` against the independent estimates ``ref_elpd`` of the same rows
    (difference over the combined MCSE), and the z of the summed difference."""
    d = elpd - ref_elpd
    sd = np.hypot(mcse, ref_mcse)
    z = np.divide(d, sd, out=np.full_like(d, np.inf), where=sd > 0)
    sd_sum = float(np.sqrt(np.sum(sd**2)))
    return z, (float(d.sum() / sd_sum) if sd_sum > 0 else np.inf)


def agree(elpd, mcse, ref_elpd, ref_mcse, *, max_z: float = 3.0, alpha: float = 0.001
          ) -> tuple[bool, np.ndarray, float]:
    """Do two independent sets of estimates of the same rows agree (`agree_z` of their
    `agreement`)?

    Returns
    -------
    (agree, z, z_sum)

    Examples
    --------
    >>> agree([-1.0, -2.0], [0.01, 0.01], [-1.005, -2.01], [0.01, 0.01])[0]
    True
    """
    z, z_sum = agreement(np.asarray(elpd, dtype=float), np.asarray(mcse, dtype=float),
                         np.asarray(ref_elpd, dtype=float), np.asarray(ref_mcse, dtype=float))
    return agree_z(z, z_sum, max_z=max_z, alpha=alpha), z, z_sum


def agree_z(z, z_sum, *, max_z: float = 3.0, alpha: float = 0.001) -> bool:
    """The agreement rule on the z's of `agreement`: the sum of their squares within the
    chi-square ``1 - alpha`` quantile of its degrees of freedom, and the z of the summed
    difference within ``max_z``."""
    from scipy.stats import chi2

    z = np.asarray(z, dtype=float)
    return (bool(np.all(np.isfinite(z))) and float(np.sum(z**2)) <= chi2.ppf(1.0 - alpha, z.size)
            and abs(z_sum) <= max_z)
