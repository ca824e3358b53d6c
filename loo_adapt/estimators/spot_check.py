"""Spot checks: a few exact refits of rows MixIS verified, to calibrate its MCSE.

MixIS's pointwise MCSE is computed from the mixture draws, so it cannot see what those
draws miss.  On horseshoe posteriors the leave-one-out posterior of an "easy" row can sit
partly in a region neither the posterior fit nor the mixture fit visits (rhs_microarray,
truth at adapt_delta 0.99: PSIS at k-hat 0.49 is 0.046 off both the truth and a fresh refit,
6.9 of its MCSEs; MixIS's verified rows have rms z 1.8-1.9 there, mean z +1.1); such errors
share a sign and no weight diagnostic shows them.

A refit is exact and independent of both fits.  This stage refits ``k`` rows drawn at random
(seeded) from those MixIS verified and compares: with ``z_j`` MixIS's difference from the
refit over their combined MCSE, ``lambda^2 = max(1, mean z_j^2)`` is how much too small
MixIS's MCSE looks on this problem, and every MixIS row's MCSE is multiplied by ``lambda``
(the total's too) before the MCSE bar is applied again; rows that no longer pass go on to the
refits.  The refitted rows keep their refits.  ``lambda`` from k rows is itself noisy (k = 3:
a mean of three squared z's), so it only catches MCSEs that are off by a large factor; it
never shrinks an MCSE.  Off by default (``loo(..., mixis_spot_checks=k)``): it costs k refits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from loo_adapt.estimators.estimate import Estimate

__all__ = ["SpotCheck"]

_MIXIS = ("mixis", "mixis+psis")


@dataclass(frozen=True)
class SpotCheck:
    """Calibrate MixIS's MCSE on ``k`` refits of rows it verified (see the module).

    Parameters
    ----------
    k : rows to refit.
    max_mcse : MixIS's bar, applied again to the inflated MCSEs.
    options : refit options (`loo_adapt.estimators.refit.Refit`); the k refits count
        against ``max_refits``.
    """

    k: int = 3
    max_mcse: float = 0.1
    options: dict = field(default_factory=dict)
    name: str = "spot_check"

    def __call__(self, ctx, rows) -> Estimate:
        from loo_adapt.estimators.refit import Refit

        res = ctx.result
        method = np.asarray(res.method).astype(str)
        mixis_rows = np.flatnonzero(np.isin(method, _MIXIS))
        verified = mixis_rows[res.reliable[mixis_rows]]
        budget = self.options.get("max_refits")
        k = min(self.k, verified.size, self.k if budget is None else int(budget))
        if k < 1:
            return Estimate.concat(self.name, [])
        rng = np.random.default_rng(0 if ctx.seed is None else int(ctx.seed) + 1)
        picked = np.sort(rng.choice(verified, size=k, replace=False))
        refit = Refit(options={**self.options, "max_refits": k})(ctx, picked)
        ok = np.asarray(refit.reliable, dtype=bool)
        judged = np.asarray(refit.rows)[ok]
        if judged.size == 0:
            why = "; ".join(sorted({str(r) for r in np.asarray(refit.reason)[~ok]}))
            note = (f"Spot checks: none of the {picked.size} refit(s) succeeded ({why}); "
                    "MixIS's MCSEs are not calibrated")
            return Estimate.make(self.name, np.empty(0, dtype=np.int64), np.nan, np.nan, False,
                                 notes=(note,))
        d = res.elpd_i[judged] - np.asarray(refit.elpd_i)[ok]
        sd = np.hypot(res.mcse_elpd_i[judged], np.asarray(refit.mcse_elpd_i)[ok])
        z = np.divide(d, sd, out=np.zeros_like(d), where=sd > 0)
        lam = float(np.sqrt(max(1.0, float(np.mean(z**2)))))
        rest = np.setdiff1d(mixis_rows, judged)
        mcse = res.mcse_elpd_i[rest] * lam
        good = res.reliable[rest] & (mcse <= self.max_mcse)
        note = (f"Spot checks: {judged.size} refit(s) of {picked.size} rows MixIS verified "
                f"differ from it by "
                f"z = {', '.join(f'{v:+.1f}' for v in z)}; MixIS's MCSEs are multiplied by "
                f"{lam:.2f}" + (f" ({int((res.reliable[rest] & ~good).sum())} row(s) then "
                                "miss the MCSE bar)" if lam > 1 else " (no change)"))
        old = np.asarray(res.reason, dtype=object)[rest]
        why = np.array(["" if g else (o if not r else
                        f"MixIS MCSE {m:.2f} (x {lam:.2f} from the spot checks) > "
                        f"{self.max_mcse:.2f}")
                        for g, o, r, m in zip(good, old, res.reliable[rest], mcse)],
                       dtype=object)
        widened = Estimate.of_result(
            self.name, res, rest, mcse_elpd_i=mcse, reliable=good,
            verified_by=np.where(good, np.asarray(res.verified_by)[rest], ""), reason=why,
            notes=(note,))
        total = (None if res.mcse_total is None or rest.size + judged.size != res.n_obs
                 else float(res.mcse_total) * lam)
        return Estimate.concat(self.name, [widened, refit.take(ok)], mcse_total=total)
