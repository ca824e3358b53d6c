"""Plain PSIS as an estimator: the first stage of every `loo()` and the base weights of the rest.

Posterior (MCMC) draws use the ratios 1 / l_i; draws of an approximation q (ADVI, Laplace,
Pathfinder) use p / (q l_i) (R loo's ``loo_approximate_posterior``), through
`loo_adapt.core.psis`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from loo_adapt.core import psis as _psis
from loo_adapt.core.bernoulli import loo_prob_from_log_lik
from loo_adapt.core.fmt import comparison
from loo_adapt.estimators.base import Context, psis_of_draws
from loo_adapt.estimators.estimate import Estimate
from loo_adapt.result import PointwiseLoo

__all__ = ["PSIS", "psis_of_draws", "initial_result", "loo_prob_from_log_lik"]


def initial_result(base, *, khat_threshold=None, y=None, loo_prob=None,
                   draws=None) -> PointwiseLoo:
    """The result every fold starts from: plain PSIS for every row, reliable where its
    k-hat is at most the threshold."""
    threshold = float(base.good_k if khat_threshold is None else khat_threshold)
    origin = "mcmc" if draws is None else str(draws.method)
    # ESS of the PSIS weights per row (R loo's psis_n_eff), the Min. ESS of the k table:
    # from the kernel's pass when it gave it, else from the weights
    ess = _n_eff(base)
    return PointwiseLoo(
        elpd_i=base.elpd_i.copy(), p_loo_i=base.p_loo_i.copy(), lpd_i=base.lpd_i.copy(),
        mcse_elpd_i=base.mcse_elpd_i.copy(), pareto_k=base.pareto_k.copy(),
        good_k=threshold, n_samples=int(base.n_samples), r_eff=base.r_eff.copy(),
        reliable=base.pareto_k <= threshold,
        y=None if y is None else np.asarray(y, dtype=float).copy(),
        loo_prob=None if loo_prob is None else np.asarray(loo_prob, dtype=float).copy(),
        draws_method=origin, pareto_k_pq=float(base.pareto_k_pq), diagnostic=ess,
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
            prob = ctx.psis_loo_prob[rows]
        reason = np.array([
            "" if good else comparison("k-hat", kk, ">", ctx.threshold)
            for good, kk in zip(ok, k)], dtype=object)
        return Estimate.make(
            "psis", rows, base.elpd_loo[rows], base.mcse_elpd_loo[rows], ok,
            pareto_k=k, loo_prob=prob, verified_by=np.where(ok, "khat", ""), reason=reason,
            diagnostic=_n_eff(base, rows),
        )


def _n_eff(base, rows=None):
    """R loo's psis_n_eff of ``base``'s rows (all when None): the kernel's, else from the
    log weights, else None."""
    rows = slice(None) if rows is None else rows
    if getattr(base, "n_eff", None) is not None:
        return np.asarray(base.n_eff)[rows].copy()
    if getattr(base, "log_weights", None) is None:
        return None
    r_eff = np.broadcast_to(base.r_eff, base.pareto_k.shape)[rows]
    return _psis.psis_n_eff(base.log_weights[:, rows], r_eff)
