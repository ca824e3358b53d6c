"""Refits as the arbiter of a PSIS / MixIS disagreement.

MixIS compares its estimates with PSIS's where PSIS can be trusted (k-hat < 1/2); a
disagreement far beyond both Monte Carlo errors (`loo_adapt.estimators.mixis.FAR_Z`) says
that one of the two fits carries an error its MCSE does not show, and MixIS leaves the rows
it concerns unverified: which fit is wrong cannot be told from the two alone.  Short
posterior chains that all under-explore in the same way are a common cause (on the relu1
CmdStan fixture, 4 x 250 draws, PSIS's sum over its 23 easy rows is +0.77 off the
brute-force truth, whose pointwise MCSEs add to 0.08; a 4 x 4000 fit of the same program
is +0.02 off).

Exact refits are independent of both fits, so a few settle it: before the refit stage the
arbiter refits ``min_refits`` of the disputed rows, drawn at random (seeded), and, when
those cannot tell, more up to ``n_judges``.  When at least ``min_refits`` succeed, MixIS
agrees with them (their squared z's within a chi-square 0.999 quantile, their sum within
``max_z`` combined MCSEs) and PSIS does not, the posterior fit is the one in error: the
other disputed rows whose MixIS MCSE meets the bar get their MixIS estimate back as
verified, without refits (a note says so).  When PSIS agrees and MixIS does not, the
mixture fit is the suspect one: no MixIS row stays verified (the rows MixIS verified by its
MCSE lose it, with the reason) and the refit stage takes them.  When both agree with the
refits, or neither does, they cannot tell (a note says so): the rows stay for the refit
stage.  The judges' refits count against the refit budget
(`loo_adapt.estimators.refit.Refit` deducts them).  The stage sees the unverified rows and
returns only those it changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from loo_adapt.core.pool import agree_z
from loo_adapt.core.pool import agreement as _agreement
from loo_adapt.estimators.estimate import Estimate
from loo_adapt.result import add_reason

__all__ = ["RefitArbiter"]


def _last(history, name):
    for rec in reversed(history):
        if rec["estimator"] == name:
            return rec
    return None


@dataclass(frozen=True)
class RefitArbiter:
    """Rows MixIS lost to a PSIS / MixIS disagreement, settled by a few refits (see the
    module).

    Parameters
    ----------
    max_mcse : a restored row's MixIS MCSE must be at most this (MixIS's own bar).
    n_judges : at most this many disputed rows are refitted to judge the disagreement.
    min_refits : refitted first, and the successful refits needed before anything is
        decided.
    max_z, alpha : an estimator agrees with the refits when the z of its summed difference
        is within ``max_z`` and its squared z's sum to no more than the chi-square
        ``1 - alpha`` quantile; the rows are restored when MixIS agrees and PSIS does not,
        and MixIS's rows lose their verification when PSIS agrees and MixIS does not.
    options : the refit options (`loo_adapt.estimators.refit.Refit`); ``max_refits`` caps
        the judges too.
    """

    max_mcse: float = 0.1
    n_judges: int = 5
    min_refits: int = 3
    max_z: float = 3.0
    alpha: float = 0.001
    options: dict = field(default_factory=dict)
    name: str = "refit_arbiter"

    def __call__(self, ctx, rows) -> Estimate:
        from loo_adapt.estimators.mixis import DISAGREE
        from loo_adapt.estimators.refit import Refit

        rows = np.asarray(rows, dtype=np.int64)
        res = ctx.result
        mix = None if res is None else _last(res.history, "mixis")
        if mix is None:
            return Estimate.concat(self.name, [])
        mix_elpd = np.full(res.n_obs, np.nan)
        mix_mcse = np.full(res.n_obs, np.nan)
        mix_reason = np.full(res.n_obs, "", dtype=object)
        at = np.asarray(mix["rows"])
        mix_elpd[at] = mix["elpd_i"]
        mix_mcse[at] = mix["mcse_elpd_i"]
        mix_reason[at] = mix["reason"]
        disputed = np.array([str(r).startswith(DISAGREE) for r in mix_reason], dtype=bool)
        lost = np.flatnonzero(disputed & ~res.reliable & np.isfinite(mix_mcse))
        lost = np.intersect1d(lost, rows)
        budget = self.options.get("max_refits")
        k = min(self.n_judges, lost.size, self.n_judges if budget is None else int(budget))
        if lost.size == 0 or k < self.min_refits:
            return Estimate.concat(self.name, [])
        rng = np.random.default_rng(0 if ctx.seed is None else int(ctx.seed))
        queue = rng.permutation(lost)[:k]  # the judges, in the order they are refitted
        base = ctx.base
        runs = []
        # min_refits judges first; the rest only when those cannot tell which fit is off
        for batch in (queue[:self.min_refits], queue[self.min_refits:]):
            if batch.size == 0:
                break
            runs.append(Refit(options={**self.options, "max_refits": int(batch.size)})(
                ctx, np.sort(batch)))
            refit = Estimate.concat("refit", runs)
            done = np.asarray(refit.reliable, dtype=bool)
            judges = np.asarray(refit.rows)[done]
            if judges.size < self.min_refits:
                continue
            ref_elpd = np.asarray(refit.elpd_i)[done]
            ref_mcse = np.asarray(refit.mcse_elpd_i)[done]
            z_mix, sum_mix = _agreement(mix_elpd[judges], mix_mcse[judges], ref_elpd,
                                        ref_mcse)
            z_psis, sum_psis = _agreement(base.elpd_i[judges], base.mcse_elpd_i[judges],
                                          ref_elpd, ref_mcse)
            mix_ok = self._agrees(z_mix, sum_mix)
            psis_ok = self._agrees(z_psis, sum_psis)
            if mix_ok != psis_ok:
                break  # decided: one fit agrees with the refits, the other does not
        picked = np.asarray(refit.rows)
        # the judges' estimates go in as refits; a failed refit keeps MixIS's row as it was
        failed = picked[~done]
        why_failed = dict(zip(failed.tolist(), np.asarray(refit.reason)[~done]))
        parts = [refit.take(done),
                 self._rows(res, failed, reason=[str(why_failed[int(i)]) for i in failed])]
        rest = np.setdiff1d(lost, picked)
        if judges.size < self.min_refits:
            return Estimate.concat(self.name, parts)
        said = (f"on {judges.size} refitted disputed rows MixIS differs from the refits by up "
                f"to {float(np.max(np.abs(z_mix))):.1f} combined MCSEs (sum {sum_mix:+.1f}), "
                f"PSIS by up to {float(np.max(np.abs(z_psis))):.1f} (sum {sum_psis:+.1f})")
        if psis_ok and not mix_ok:
            method = np.asarray(res.method).astype(str)
            demote = np.flatnonzero(res.reliable & np.isin(method, ("mixis", "mixis+psis")))
            demote = np.setdiff1d(np.union1d(demote, rest), picked)
            note = (f"The refits settle the PSIS / MixIS disagreement against the mixture fit: "
                    f"{said}; no MixIS row is verified")
            parts.append(self._rows(res, demote, reason=f"refit arbiter: MixIS disagrees with "
                                    f"the refits ({said})", notes=(note,)))
            return Estimate.concat(self.name, parts)
        if psis_ok == mix_ok:
            note = (f"The refits do not tell which fit the PSIS / MixIS disagreement comes "
                    f"from: {said}; the rows it concerns stay unverified for the refits")
            parts.append(self._rows(res, rest, reason=f"refit arbiter: the refits do not tell "
                                    f"which fit is off ({said})", notes=(note,)))
            return Estimate.concat(self.name, parts)
        back = rest[mix_mcse[rest] <= self.max_mcse]
        note = (f"The refits settle the PSIS / MixIS disagreement for the mixture fit: {said}, "
                f"so the posterior fit is the one off; {back.size} other row(s) MixIS had left "
                "unverified keep its estimate, verified by its MCSE")
        parts.append(Estimate.of_result(
            self.name, res, back, elpd_i=mix_elpd[back], mcse_elpd_i=mix_mcse[back],
            reliable=True, method="mixis", verified_by="mixis_mcse", reason="",
            notes=(note,)))
        return Estimate.concat(self.name, parts)

    def _agrees(self, z, z_sum) -> bool:
        """Do estimates agree with the refits (`loo_adapt.core.pool.agree_z`: the sum of
        squared z within the chi-square quantile ``1 - alpha``, the z of the summed
        difference within ``max_z``)?  (A max-|z| rule decided on one row at 3.1 MCSEs on
        the relu1 fixture, where MixIS is right.)"""
        return agree_z(z, z_sum, max_z=self.max_z, alpha=self.alpha)

    def _rows(self, res, rows, reason, notes=()):
        """``rows`` as they stand in ``res``, unverified, ``reason`` added to theirs."""
        rows = np.asarray(rows, dtype=np.int64)
        old = np.asarray(res.reason, dtype=object)[rows]
        new = np.broadcast_to(np.asarray(reason, dtype=object), rows.shape)
        why = np.array([add_reason(o, r) for o, r in zip(old, new)], dtype=object)
        return Estimate.of_result(self.name, res, rows, reliable=False, verified_by="",
                                  reason=why, notes=notes)
