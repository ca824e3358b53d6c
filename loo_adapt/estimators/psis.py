"""Plain PSIS as an estimator: the first stage of every `loo()` and the base weights of the rest.

Posterior (MCMC) draws use the ratios 1 / l_i; draws of an approximation q (ADVI, Laplace,
Pathfinder) use p / (q l_i) (R loo's ``loo_approximate_posterior``), through
`loo_adapt.core.psis`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from loo_adapt.core import psis as _psis
from loo_adapt.estimators.base import Context, Estimate
from loo_adapt.result import PointwiseLoo

__all__ = ["PSIS", "psis_of_draws", "initial_result", "loo_prob_from_log_lik"]


def psis_of_draws(draws, *, var_name: str | None = None, reff=None, weights: bool = True):
    """Plain PSIS-LOO of `Draws` (`loo_adapt.core.psis.PsisLoo`).

    Parameters
    ----------
    draws : `loo_adapt.draws.Draws`.
    var_name : the pointwise log-likelihood variable.
    reff : relative efficiency; None computes it from the chains (R loo's ``relative_eff``
        of exp(log_lik)); 1 for a single chain and for approximate draws.
    weights : write the (S, n) log weights (False: ``log_weights`` is None).

    Returns
    -------
    PsisLoo
    """
    log_lik = draws.log_lik(var_name)
    if draws.is_approximate:
        return _psis.loo_pointwise_approximate(
            log_lik.reshape(draws.n_samples, -1), draws.log_ratio_offset(),
            r_eff=1.0 if reff is None else reff, weights=weights,
        )
    if draws.n_chains == 1 and reff is None:
        reff = 1.0
    return _psis.loo_pointwise(log_lik, r_eff=reff, weights=weights)


def loo_prob_from_log_lik(log_lik, log_weights, y) -> np.ndarray:
    """P(y_i = 1 | y_-i) from the weights: the Bernoulli likelihood of the observed y_i
    gives P(y_i = 1) at each draw."""
    from loo_adapt.estimators.mixis import bernoulli_log_p1

    return np.sum(np.exp(log_weights + bernoulli_log_p1(log_lik, y)), axis=0)


def initial_result(base, *, khat_threshold=None, y=None, loo_prob=None,
                   draws=None) -> PointwiseLoo:
    """The result every fold starts from: plain PSIS for every row, reliable where its
    k-hat is at most the threshold."""
    threshold = float(base.good_k if khat_threshold is None else khat_threshold)
    origin = "mcmc" if draws is None else str(draws.method)
    return PointwiseLoo(
        elpd_i=base.elpd_i.copy(), p_loo_i=base.p_loo_i.copy(), lpd_i=base.lpd_i.copy(),
        mcse_elpd_i=base.mcse_elpd_i.copy(), pareto_k=base.pareto_k.copy(),
        good_k=threshold, n_samples=int(base.n_samples), r_eff=base.r_eff.copy(),
        reliable=base.pareto_k <= threshold,
        y=None if y is None else np.asarray(y, dtype=float).copy(),
        loo_prob=None if loo_prob is None else np.asarray(loo_prob, dtype=float).copy(),
        draws_method=origin, pareto_k_pq=float(base.pareto_k_pq),
    )


@dataclass(frozen=True)
class PSIS:
    """Plain PSIS for the asked rows (reliable where k-hat <= threshold)."""

    name: str = "psis"

    def __call__(self, ctx: Context, rows) -> Estimate:
        base = ctx.base
        rows = np.asarray(rows, dtype=np.int64)
        k = base.khat[rows]
        ok = k <= ctx.threshold
        prob = None
        if ctx.y is not None:
            prob = loo_prob_from_log_lik(ctx.log_lik[:, rows], base.log_weights[:, rows],
                                         ctx.y[rows])
        reason = np.array([
            "" if good else f"k-hat {kk:.2f} > {ctx.threshold:.2f}"
            for good, kk in zip(ok, k)], dtype=object)
        return Estimate.make(
            "psis", rows, base.elpd_loo[rows], base.mcse_elpd_loo[rows], ok,
            pareto_k=k, loo_prob=prob, verified_by=np.where(ok, "khat", ""), reason=reason,
        )
