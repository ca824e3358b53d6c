"""Exact refits as an estimator: the last stage for rows no importance sampler can fix.

The refit machinery (worker pool, budgets, progress) is `loo_adapt.stan.refit.refit_loo`,
handed over by the verb layer as ``Context.refit_runner``; this wraps its result in an
`Estimate` (rows not refitted within the budget stay unverified, with the reason).

A refit that converged but failed only the tail check (its held-out likelihood heavy-tailed
over its draws: a far outlier, an observation's own parameter drawn from its prior) is
bridged with the posterior draws of the same row (`loo_adapt.core.bridge`: they sample
where that likelihood is large) where those draws are MCMC whose chains agree on the row;
the bridge's MCSE then stands for the row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from loo_adapt.core.bridge import HEAVY_TAIL, TAIL_KHAT, bridge_elpd
from loo_adapt.estimators.estimate import Estimate

__all__ = ["Refit", "BUDGET", "FAILED"]

#: how the reason of a row the refit limits (``max_refits``, ``max_seconds``) left without a
#: refit begins: a larger budget would refit it
BUDGET = "refit budget"
#: how the reason of a row whose refit ran and failed begins (it raised, returned NaN or
#: inf, timed out or lost its worker): a larger budget would not help
FAILED = "refit failed"


@dataclass(frozen=True)
class Refit:
    """Refit the model without each asked row (most severe first: highest k-hat, then the
    largest MixIS MCSE).

    Parameters
    ----------
    options : passed to `loo_adapt.stan.refit.refit_loo` (max_refits, max_seconds, n_jobs,
        refit_fn, chains, draws, progress, ...); rows an earlier stage already refitted
        (`loo_adapt.estimators.arbiter`) count against ``max_refits``.
    """

    options: dict = field(default_factory=dict)
    name: str = "refit"

    def __call__(self, ctx, rows) -> Estimate:
        refit_loo = ctx.refit_runner
        if refit_loo is None:
            raise ValueError("refits need a refit runner in the context (loo_adapt.entry "
                             "hands over loo_adapt.stan.refit.refit_loo)")
        rows = np.asarray(rows, dtype=np.int64)
        kwargs = dict(self.options)
        done = 0 if ctx.result is None else int(np.sum(np.asarray(ctx.result.method) == "refit"))
        if kwargs.get("max_refits") is not None and done:
            # refits an earlier stage made (the arbiter's judges) count against the budget
            kwargs["max_refits"] = max(0, int(kwargs["max_refits"]) - done)
        kwargs.setdefault("seed", 0 if ctx.seed is None else int(ctx.seed))
        kwargs.setdefault("progress", ctx.progress)
        program = ctx.stan_program
        if "refit_fn" not in kwargs:
            program = ctx.need_program("refit")
        if ctx.y is not None:
            kwargs.setdefault("y", ctx.y)
        severity = np.nan_to_num(ctx.base.pareto_k[rows], nan=np.inf)
        order = rows[np.argsort(-severity, kind="stable")]
        # refit_loo's warning about unverified refits is given here, once the rows the bridge
        # verifies are out of it
        warn = kwargs.pop("warn", True)
        res = refit_loo(order, program, warn=False, **kwargs)
        notes = _bridge_heavy_tails(ctx, res)
        reason = None if "refit_fn" in kwargs else getattr(program, "by_term_reason", None)
        if reason and res.n_refitted:  # what "exact refit" means for this program
            notes = notes + (f"The refits took each observation's log_lik term out of the "
                             f"full-data target instead of dropping its data: {reason}",)
        if warn:
            res.warn_unverified("refit", stacklevel=1)
        est = res.to_estimate(y=ctx.y, notes=notes)
        done = set(est.rows.tolist())
        left = np.array([i for i in rows if int(i) not in done], dtype=np.int64)
        if left.size == 0:
            return est
        # rows without a refit: unverified, the reason saying whether the budget left them
        # out (`BUDGET`) or their refit failed (`FAILED`), which the advice tells apart
        pos = {int(i): j for j, i in enumerate(res.indices)}
        budget = np.asarray(res.left_by_budget, dtype=bool)
        why = []
        for i in left:
            j = pos[int(i)]
            w = str(res.reason[j]) or "not refitted within max_refits / max_seconds"
            why.append(f"{BUDGET if budget[j] else FAILED}: {w}")
        missing = Estimate.make("refit", left, np.nan, np.nan, False, reason=why)
        return Estimate.concat(est.estimator, [est, missing])


def _bridge_heavy_tails(ctx, res) -> tuple[str, ...]:
    """Bridge each refit of ``res`` whose only failed check is the tail check with the
    posterior draws of its row (`loo_adapt.core.bridge.bridge_elpd`), in place: elpd, MCSE,
    verified (the LOO probability is left for `RefitResult.to_estimate` to derive).  Not
    where the posterior draws are an approximation's or their chains disagree on the row (the
    bridge leans on them).  Returns the note."""
    chains = ctx.chain_log_lik  # (chains, draws, n), None for draws of an approximation
    if chains is None:
        return ()
    bad = ctx.chains_disagree
    disagree = set() if bad is None else {int(i) for i in bad[0]}
    done = []
    for pos in np.flatnonzero(np.asarray(res.refitted, dtype=bool)):
        i = int(res.indices[pos])
        if (res.reliable[pos] or not str(res.reason[pos]).startswith(HEAVY_TAIL)
                or i in disagree or res.log_lik[pos] is None):
            continue
        elpd, mcse = bridge_elpd(chains[..., i], res.log_lik[pos])
        res.elpd_i[pos], res.mcse_elpd_i[pos] = elpd, mcse
        res.reliable[pos], res.reason[pos], res.status[pos] = True, "", "ok"
        res.loo_prob[pos] = np.nan  # the refit's; `to_estimate(y)` derives it from the bridge's
        done.append(i)
    if not done:
        return ()
    return (f"{len(done)} refit(s) whose held-out likelihood was heavy-tailed over their "
            f"draws (Pareto k-hat above {TAIL_KHAT:g}) were bridged with the posterior draws "
            f"of the same row, which sample where it is large (Meng & Wong bridge sampling, "
            f"loo_adapt.core.bridge): observation(s) {sorted(done)}",)
