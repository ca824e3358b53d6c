"""Refits as the arbiter of a PSIS / MixIS disagreement.

MixIS compares its estimates with PSIS's where PSIS can be trusted (k-hat < 1/2); a
disagreement far beyond both Monte Carlo errors (`loo_adapt.estimators.mixis.FAR_Z`) says
that one of the two fits carries an error its MCSE does not show, and MixIS leaves the rows
it concerns unverified: which fit is wrong cannot be told from the two alone.  Short
posterior chains that all under-explore in the same way are a common cause (on the relu1
CmdStan fixture, 4 x 250 draws, PSIS's sum over its 23 easy rows is +0.77 off the
brute-force truth, whose pointwise MCSEs add to 0.08; a 4 x 4000 fit of the same program
is +0.02 off).

The refits that follow are exact and independent of both fits, so they settle it: when at
least ``min_refits`` of the disputed rows were refitted, MixIS agrees with every one of them
(each within ``max_z`` combined MCSEs, and their sum too) and PSIS does not, the posterior
fit is the one in error, and the rows lost to the disagreement whose MixIS MCSE meets the
bar get their MixIS estimate back as verified (a note says so).  When both agree with the
refits, the refits cannot tell: the rows stay unverified.  When MixIS disagrees with a refit,
the mixture fit is the suspect one: no MixIS row stays verified (the rows MixIS verified by
its MCSE lose it, with the reason) and a note says so.  Nothing is re-verified without
refits: with fewer than ``min_refits`` the lost rows keep their reasons.  The stage sees
every row and returns only those it changes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from loo_adapt.estimators.base import Estimate

__all__ = ["RefitArbiter"]


def _agreement(elpd, mcse, res, judges):
    """z of ``elpd`` against the refits' estimates of the rows ``judges`` (combined MCSEs),
    and the z of their sum."""
    d = elpd - res.elpd_i[judges]
    sd = np.hypot(mcse, res.mcse_elpd_i[judges])
    z = np.divide(d, sd, out=np.full_like(d, np.inf), where=sd > 0)
    sd_sum = float(np.sqrt(np.sum(sd**2)))
    return z, (float(d.sum() / sd_sum) if sd_sum > 0 else np.inf)


def _last(history, name):
    for rec in reversed(history):
        if rec["estimator"] == name:
            return rec
    return None


@dataclass(frozen=True)
class RefitArbiter:
    """Rows MixIS lost to a PSIS / MixIS disagreement, settled by the refits (see the module).

    Parameters
    ----------
    max_mcse : a restored row's MixIS MCSE must be at most this (MixIS's own bar).
    min_refits : refitted rows with a MixIS estimate needed before anything is restored.
    max_z : MixIS must agree with each refit, and with their sum, within this many combined
        MCSEs.
    """

    max_mcse: float = 0.1
    min_refits: int = 3
    max_z: float = 3.0
    name: str = "refit_arbiter"

    def __call__(self, ctx, rows) -> Estimate:
        from loo_adapt.estimators.mixis import DISAGREE

        rows = np.asarray(rows, dtype=np.int64)
        res = ctx.result
        mix = None if res is None else _last(res.history, "mixis")
        refit = None if res is None else _last(res.history, "refit")
        if mix is None or refit is None:
            return self._rows(res, rows[:0])
        mix_elpd = np.full(res.n_obs, np.nan)
        mix_mcse = np.full(res.n_obs, np.nan)
        mix_reason = np.full(res.n_obs, "", dtype=object)
        at = np.asarray(mix["rows"])
        mix_elpd[at] = mix["elpd_i"]
        mix_mcse[at] = mix["mcse_elpd_i"]
        mix_reason[at] = mix["reason"]
        disputed = np.array([str(r).startswith(DISAGREE) for r in mix_reason], dtype=bool)
        lost = disputed & ~res.reliable
        if not lost.any():
            return self._rows(res, rows[:0])
        # the judges: disputed rows the refits settled (PSIS and MixIS both stand there)
        ok_refit = np.asarray(refit["reliable"]) & np.asarray(refit["accepted"])
        judges = np.asarray(refit["rows"])[ok_refit]
        judges = judges[disputed[judges] & np.isfinite(mix_mcse[judges])]
        if judges.size < self.min_refits:
            why = (f"refit arbiter: {judges.size} refit(s) of the disputed rows to judge the "
                   f"PSIS / MixIS disagreement, {self.min_refits} needed")
            return self._rows(res, np.flatnonzero(lost), reason=why)
        base = ctx.base
        z_mix, sum_mix = _agreement(mix_elpd[judges], mix_mcse[judges], res, judges)
        z_psis, sum_psis = _agreement(base.elpd_i[judges], base.mcse_elpd_i[judges], res, judges)
        mix_ok = np.max(np.abs(z_mix)) <= self.max_z and abs(sum_mix) <= self.max_z
        psis_ok = np.max(np.abs(z_psis)) <= self.max_z and abs(sum_psis) <= self.max_z
        worst = float(np.max(np.abs(z_mix)))
        said = (f"on {judges.size} refitted rows MixIS differs from the refits by up to "
                f"{worst:.1f} combined MCSEs (sum {sum_mix:+.1f}), PSIS by up to "
                f"{float(np.max(np.abs(z_psis))):.1f} (sum {sum_psis:+.1f})")
        if not mix_ok:
            # the mixture fit is off: no MixIS row stays verified
            method = np.asarray(res.method).astype(str)
            demote = np.flatnonzero(res.reliable & np.isin(method, ("mixis", "mixis+psis")))
            why = f"refit arbiter: MixIS disagrees with the refits ({said})"
            note = (f"The refits settle the PSIS / MixIS disagreement against the mixture fit: "
                    f"{said}; no MixIS row is verified")
            return self._rows(res, np.union1d(demote, np.flatnonzero(lost)), reason=why,
                              notes=(note,))
        if psis_ok:
            why = f"refit arbiter: the refits do not tell which fit is off ({said})"
            return self._rows(res, np.flatnonzero(lost), reason=why)
        good = lost & (mix_mcse <= self.max_mcse)
        back = np.flatnonzero(good)
        note = (f"The refits settle the PSIS / MixIS disagreement for the mixture fit: {said}, "
                f"so the posterior fit is the one off; {back.size} row(s) MixIS had left "
                "unverified keep its estimate, verified by its MCSE")
        est = self._rows(res, back, notes=(note,))
        return Estimate.make(
            self.name, back, mix_elpd[back], mix_mcse[back], True, method="mixis",
            verified_by="mixis_mcse", reason="", notes=(note,),
            loo_prob=est.loo_prob, diagnostic=est.diagnostic, pareto_k=est.pareto_k,
            row_draws=est.row_draws)

    def _rows(self, res, rows, reason=None, notes=()):
        """``rows`` as they stand in ``res``, unverified with ``reason`` (their values, LOO
        probabilities, ESS and draws records kept: the refits left them alone)."""
        rows = np.asarray(rows, dtype=np.int64)
        if res is None:
            return Estimate.make(self.name, rows, np.nan, np.nan, False, notes=notes)
        prob = None if res.loo_prob is None else res.loo_prob[rows]
        records = (tuple(res.row_draws[i] for i in rows) if res.row_draws is not None
                   else None)
        old = np.asarray(res.reason, dtype=object)[rows]
        why = np.array([f"{o}; {reason}" if o else reason for o in old], dtype=object)
        return Estimate.make(
            self.name, rows, res.elpd_i[rows], res.mcse_elpd_i[rows], False,
            method=np.asarray(res.method, dtype=object)[rows], verified_by="", reason=why,
            loo_prob=prob, diagnostic=res.diagnostic[rows], pareto_k=res.pareto_k_after[rows],
            rho=None if res.rho is None else res.rho[rows], row_draws=records, notes=notes)
