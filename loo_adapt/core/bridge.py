"""Bridge sampling of one observation's leave-one-out predictive density from two samples.

p(y_i | y_-i) is the ratio of the normalising constants of the full posterior
(q1 = p(theta) p(y | theta)) and of the leave-one-out posterior (q2 = q1 / l_i, with
l_i = p(y_i | theta)).  A refit samples q2 and estimates it by the plain mean of l_i, which
fails when l_i is heavy-tailed over the refit's draws (a far outlier: l_i is large only
where the leave-one-out posterior rarely goes).  The posterior fit samples q1, which is
exactly where l_i is large.  Meng and Wong's (1996) optimal bridge uses both:

    r = E_q2[ l / (s1 l + s2 r) ] / E_q1[ 1 / (s1 l + s2 r) ],

iterated to its fixed point from the refit's plain mean (s1, s2: the two samples' shares of
their combined effective size).  Both functions are bounded (by 1 / s1 and 1 / (s2 r)), so
their means have finite variance whatever the tail of l_i: the relative error is
Fruhwirth-Schnatter's (2004), Var / ESS of each normalised function, summed.  Array core:
numpy in, numpy out.
"""

from __future__ import annotations

import math

import numpy as np

from loo_adapt.core.ess_split import ess_mean
from loo_adapt.core.lse import logsumexp

__all__ = ["bridge_elpd", "TAIL_KHAT", "HEAVY_TAIL"]

#: Pareto k-hat of the held-out likelihood over a refit's draws above which the refit's
#: plain mean is not trusted (`loo_adapt.stan.heldout.tail_check`) and the refit estimator
#: bridges it with the posterior draws (`loo_adapt.estimators.refit`)
TAIL_KHAT = 1.0
#: how the reason of a refit failing that check begins
HEAVY_TAIL = "heavy-tailed held-out likelihood"


def _chains(x, what):
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or a.shape[1] < 4:
        raise ValueError(f"{what} must have shape (S,) or (chains, draws) with at least 4 "
                         f"draws a chain, got {np.shape(x)}")
    if np.isnan(a).any() or np.isposinf(a).any():
        raise ValueError(f"{what} contain NaN or +inf")
    return a


def bridge_elpd(ll_posterior, ll_loo, *, tol: float = 1e-10, max_iter: int = 1000
                ) -> tuple[float, float]:
    """log p(y_i | y_-i) and its Monte Carlo error by bridge sampling between the posterior
    draws and the leave-one-out (refit) draws of the same observation's log-likelihood.

    Parameters
    ----------
    ll_posterior : (chains, draws) or (S,) log p(y_i | theta) at draws of the full-data
        posterior.
    ll_loo : (chains, draws) or (S,) log p(y_i | theta) at draws of the leave-one-out
        posterior (a refit without observation i).
    tol, max_iter : convergence of the fixed-point iteration on log r.

    Returns
    -------
    (elpd_i, mcse) : the estimate of log p(y_i | y_-i) and its standard error (delta method:
        the relative error of r).

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> loo = rng.normal(0.0, 1.0, size=(4, 1000))   # theta | y_-i ~ N(0, 1), l = N(1 | theta, 1)
    >>> post = rng.normal(0.5, np.sqrt(0.5), size=(4, 1000))   # theta | y ~ N(1/2, 1/2)
    >>> ll = lambda t: -0.5 * np.log(2 * np.pi) - 0.5 * (1.0 - t) ** 2
    >>> elpd, se = bridge_elpd(ll(post), ll(loo))
    >>> exact = -0.5 * np.log(2 * np.pi * 2) - 0.25   # N(1 | 0, 2)
    >>> bool(abs(elpd - exact) < 4 * se)
    True
    """
    a = _chains(ll_posterior, "the posterior draws' log-likelihood")
    b = _chains(ll_loo, "the leave-one-out draws' log-likelihood")
    if np.all(a == -np.inf) or np.all(b == -np.inf):
        raise ValueError("every log-likelihood draw of one sample is -inf")
    n1 = float(ess_mean(np.exp(a - a.max())))
    n2 = float(ess_mean(np.exp(b - b.max())))
    n1 = min(max(n1, 1.0), a.size) if np.isfinite(n1) else float(a.size)
    n2 = min(max(n2, 1.0), b.size) if np.isfinite(n2) else float(b.size)
    log_s1, log_s2 = math.log(n1 / (n1 + n2)), math.log(n2 / (n1 + n2))
    fa, fb = a.ravel(), b.ravel()
    lr = float(logsumexp(fb) - math.log(fb.size))  # the refit's plain mean
    for _ in range(max_iter):
        den_b = np.logaddexp(log_s1 + fb, log_s2 + lr)
        den_a = np.logaddexp(log_s1 + fa, log_s2 + lr)
        num = float(logsumexp(fb - den_b) - math.log(fb.size))
        den = float(logsumexp(-den_a) - math.log(fa.size))
        new = num - den
        done = abs(new - lr) < tol
        lr = new
        if done:
            break
    den_b = np.logaddexp(log_s1 + fb, log_s2 + lr)
    den_a = np.logaddexp(log_s1 + fa, log_s2 + lr)
    f2 = np.exp(fb - den_b - (logsumexp(fb - den_b) - math.log(fb.size))).reshape(b.shape)
    f1 = np.exp(-den_a - (logsumexp(-den_a) - math.log(fa.size))).reshape(a.shape)
    e2 = min(max(float(ess_mean(f2)), 1.0), b.size)
    e1 = min(max(float(ess_mean(f1)), 1.0), a.size)
    re2 = float(np.var(f2, ddof=1)) / e2 + float(np.var(f1, ddof=1)) / e1
    return lr, math.sqrt(re2)
