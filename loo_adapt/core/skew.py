"""Widening a self-normalised importance sampling MCSE for the skew of its error.

A self-normalised ratio whose weights have rare large values has a skewed error, and its
delta-method MCSE moves with it: a sample that missed the rare values is both off
(optimistic) and sure of itself, so over replicate samples |error| / MCSE is larger than 1
in rms although the MCSE's mean square is right.  `skew_inflation` widens each estimate's
MCSE by the first Edgeworth term of a studentised mean; `snis_influence` gives the
per-draw influence values of a self-normalised IS estimate of log E[l] it reads and
`influence_ess` their effective sample sizes.  Numpy in, numpy out.
"""

from __future__ import annotations

import numpy as np

from loo_adapt.core.ess_split import ess_mean
from loo_adapt.core.lse import logsumexp

__all__ = ["influence_ess", "skew_from_moments", "skew_inflation", "snis_influence",
           "snis_influence_moments"]


def skew_inflation(influence, ess) -> np.ndarray:
    """Each row's widening of its delta-method MCSE for the skew of its error.

    A self-normalised ratio whose weights have rare large values has a skewed error, and
    its delta-method MCSE moves with it: a sample that missed the rare values is both off
    (optimistic) and sure of itself, so over replicate samples |error| / MCSE is larger
    than 1 in rms although the MCSE's mean square is right (one mixture fit of 4 x 25,000
    draws cut into 25 replicates of 4 x 1000: the estimates' spread over the MCSE 0.98-1.05
    on every benchmark, yet rms z 1.35 on rhs_logistic and 1.45 on logistic_normal, with the
    error and the MCSE correlated -0.75 to -0.85; ``benchmarks/mixis_replicates.py``).  The
    first Edgeworth term of a studentised mean puts its one-sided 1-sigma point at
    ``1 + gamma / (2 sqrt(n))`` for skewness ``gamma`` of n independent terms; so each
    row's MCSE is multiplied by

        ``1 + |gamma_i| / (2 sqrt(ESS_i))``

    with ``gamma_i`` the sample skewness of the row's per-draw influence values and
    ``ESS_i`` their effective sample size.  Rows whose influence is near symmetric keep
    their MCSE.  On the truth suite's choose half (cached 4 x 1000 fits, seeds 1-3, and
    the replicates above) the factor's coefficient 1/2 is the only one of 0.5, 0.75, 1
    that keeps every benchmark's rms z within [0.8, 1.25] (rhs_logistic 0.82 over the
    seeds, 1.20 over the replicates; logistic_n300 1.22, before 1.27;
    ``benchmarks/results/mixis_replicates.txt``).

    Parameters
    ----------
    influence : (S, n) per-draw influence values of the n estimates (mean zero).
    ess : (n,) their effective sample sizes.

    Returns
    -------
    (n,) factors, each >= 1 (1 where a row's influence is constant).
    """
    z = np.asarray(influence, dtype=np.float64)
    z = z - z.mean(axis=0)
    z2 = z * z  # products, not z**3: numpy's float power is ten times slower
    m2 = np.mean(z2, axis=0)
    z2 *= z
    m3 = np.mean(z2, axis=0)
    return skew_from_moments(m2, m3, ess)


def skew_from_moments(m2, m3, ess) -> np.ndarray:
    """`skew_inflation` from each row's second and third central moments (ddof 0) of its
    influence values, as the compiled kernels give them (`loo_adapt.core._mixis_kernel`)."""
    m2 = np.asarray(m2, dtype=np.float64)
    flat = ~(m2 > 0)
    gamma = np.where(flat, 0.0, np.asarray(m3, dtype=np.float64) / np.where(flat, 1.0, m2) ** 1.5)
    return 1.0 + np.abs(gamma) / (2.0 * np.sqrt(np.asarray(ess, dtype=np.float64)))


def snis_influence(log_weights, log_lik, normalized: bool = False) -> np.ndarray:
    """Per-draw influence values of ``elpd_i = log(sum_s w_is l_is / sum_s w_is)``.

    Parameters
    ----------
    log_weights : (S, n) log importance weights (any normalisation per column).
    log_lik : (S, n) log-likelihood at the same draws.
    normalized : the weights of each column already sum to one (PSIS's), so their
        normalisation is not computed again.

    Returns
    -------
    (S, n) ``w_s l_s / mean(w l) - w_s / mean(w)`` per column (mean zero), whose variance
    over the effective sample size is the delta-method variance of ``elpd_i``.
    """
    lw = np.asarray(log_weights, dtype=np.float64)
    S = lw.shape[0]
    a = lw + np.asarray(log_lik, dtype=np.float64)
    # in place: each (S, n) temporary costs about as much as an exp over it
    a -= logsumexp(a, axis=0)
    a += np.log(S)
    np.exp(a, out=a)
    b = lw + np.log(S) if normalized else lw - logsumexp(lw, axis=0) + np.log(S)
    np.exp(b, out=b)
    a -= b
    return a


def snis_influence_moments(log_weights, log_lik, cols, chains: int,
                           normalized: bool = False):
    """`snis_influence` of the columns ``cols`` of (S, n) arrays and their `skew_inflation`,
    without copying the columns out first: the numba kernel
    (`loo_adapt.core._mixis_kernel._snis_pass`) where `loo_adapt.core._compiled.use_numba`
    says so and the weights are normalised, numpy otherwise (the same numbers to rounding).

    Parameters
    ----------
    log_weights, log_lik : (S, n) arrays, draws in chain order.
    cols : (m,) column indices.
    chains : number of chains the S draws come from.
    normalized : the weights of each column sum to one (PSIS's).

    Returns
    -------
    (influence (S, m), inflation (m,))
    """
    from loo_adapt.core import _compiled
    from loo_adapt.core._mixis_kernel import _OK, _snis_pass

    cols = np.asarray(cols, dtype=np.int64)
    lw = np.asarray(log_weights, dtype=np.float64)
    ll = np.asarray(log_lik, dtype=np.float64)
    S = lw.shape[0]
    if normalized and cols.size and _compiled.use_numba(_snis_pass, S * cols.size):
        z = np.empty((S, cols.size))
        stats = np.empty((6, cols.size))
        src, at = (lw, ll), cols
        if not (lw.flags.c_contiguous and ll.flags.c_contiguous):
            # a strided input (a cmdstanpy fit's draws, PSIS's observation-major weights):
            # copy only the asked columns, once, row-major (``take`` writes a C-contiguous
            # array: the layout the kernel is compiled for)
            src = (lw.take(cols, axis=1), ll.take(cols, axis=1))
            at = np.arange(cols.size, dtype=np.int64)
        if _snis_pass(*src, at, z, stats) == _OK:
            ess = influence_ess(z, chains, var=stats[3])
            return z, skew_from_moments(stats[4], stats[5], ess)
    z = snis_influence(lw[:, cols], ll[:, cols], normalized=normalized)
    return z, skew_inflation(z, influence_ess(z, chains))


def influence_ess(influence, chains: int, var=None) -> np.ndarray:
    """Effective sample size of each column of per-draw influence values (the ESS behind a
    delta-method MCSE, and `skew_inflation`'s).

    Parameters
    ----------
    influence : (S, n) values, draws in chain order.
    chains : number of chains the S draws come from.
    var : (n,) the columns' variances when the caller has them (only whether each is
        positive is read); None: computed here.

    Returns
    -------
    (n,) Stan's ESS of a mean (`loo_adapt.core.ess_split.ess_mean`, split chains) where the chains
    are long enough to tell (at least 4 draws each, and 8 with one chain); S elsewhere and
    for a constant column.
    """
    z = np.asarray(influence, dtype=np.float64)
    S, n = z.shape
    draws = S // max(int(chains), 1)
    if S % max(int(chains), 1) or draws < 4 or (chains <= 1 and draws < 8):
        return np.full(n, float(S))
    ess = ess_mean(z.reshape(chains, draws, n))
    if var is None:
        var = z.var(axis=0, ddof=1)
    return np.where(np.asarray(var) > 0, ess, float(S))
