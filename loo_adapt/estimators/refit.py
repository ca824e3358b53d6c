"""Exact refits as an estimator: the last stage for rows no importance sampler can fix.

The refit machinery (worker pool, budgets, progress) is `loo_adapt.stan.refit.refit_loo`;
this wraps its result in an `Estimate` (rows not refitted within the budget stay
unverified, with the reason).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from loo_adapt.estimators.base import Estimate

__all__ = ["Refit"]


@dataclass(frozen=True)
class Refit:
    """Refit the model without each asked row (most severe first: highest k-hat, then the
    largest MixIS MCSE).

    Parameters
    ----------
    options : passed to `loo_adapt.stan.refit.refit_loo` (max_refits, max_seconds, n_jobs,
        refit_fn, chains, draws, progress, ...).
    """

    options: dict = field(default_factory=dict)
    name: str = "refit"

    def __call__(self, ctx, rows) -> Estimate:
        from loo_adapt.stan.refit import refit_loo

        rows = np.asarray(rows, dtype=np.int64)
        kwargs = dict(self.options)
        kwargs.setdefault("seed", 0 if ctx.seed is None else int(ctx.seed))
        program = ctx.stan_program
        if "refit_fn" not in kwargs:
            program = ctx.need_program("refit")
        if ctx.y is not None:
            kwargs.setdefault("y", ctx.y)
        severity = np.nan_to_num(ctx.base.khat[rows], nan=np.inf)
        order = rows[np.argsort(-severity, kind="stable")]
        res = refit_loo(order, program, **kwargs)
        pos = {int(i): j for j, i in enumerate(res.indices)}
        take = np.array([pos[int(i)] for i in rows])
        done = np.asarray(res.refitted, dtype=bool)[take]
        prob = np.asarray(res.loo_prob, dtype=float)[take]
        if ctx.y is not None:
            # outcomes known here but not to a user's refit_fn
            p_obs = np.exp(np.asarray(res.elpd_loo, dtype=float)[take])
            y = np.asarray(ctx.y)[rows]
            prob = np.where(np.isnan(prob), np.where(y == 1, p_obs, 1.0 - p_obs), prob)
        reason = np.where(done, "", "refit budget: not refitted within "
                                    "(max_refits / max_seconds)").astype(object)
        return Estimate.make(
            "refit", rows, np.asarray(res.elpd_loo, dtype=float)[take],
            np.asarray(res.mcse_elpd_loo, dtype=float)[take], done,
            diagnostic=np.asarray(res.ess, dtype=float)[take], loo_prob=prob,
            verified_by=np.where(done, "refit", ""), reason=reason,
        )
