"""Mixture importance sampling (Silva & Zanella 2023) as an estimator stage: `MixIS` runs the
array core (`loo_adapt.core.mixis`) on the mixture fit, after the checks of its draws
(`loo_adapt.estimators.mixture_checks`), pools its rows with PSIS where both can be trusted
and agree, and verifies a row where its MCSE is small enough.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from loo_adapt.core.bernoulli import bernoulli_log_p1
from loo_adapt.core.fmt import comparison
from loo_adapt.core.mixis import mixis_bernoulli, mixis_loo
from loo_adapt.core.skew import snis_influence_moments
from loo_adapt.estimators.mixture_checks import (
    divergence_note,
    enough_draws,
    mixture_draws_check,
    unverify_divergent,
)

__all__ = [
    "DISAGREE",
    "FAR_Z",
    "GIVEN_DRAWS_ADVICE",
    "GIVEN_UNCHECKED",
    "MixIS",
    "OWN_FIT_FAILED",
    "POOL_AGREE_Z",
    "POOL_KHAT",
    "POOL_MIN_DRAWS",
]


#: what to do about mixture draws the user gave (``mixis_draws=``) that fail
#: `mixture_draws_check` (advice that works whatever program the fit had)
GIVEN_DRAWS_ADVICE = (
    "pass draws of the same program, fitted to the same data with its mixis flag set to 1 "
    "(program.with_mixis().fit(mixis=True) draws them) and with converged chains, or leave "
    "out mixis_draws= and pass program= so that loo() fits the mixture itself")
#: how the reason of a row begins when the package's own mixture fit failed
#: `mixture_draws_check` (the stage verifies no row from it)
OWN_FIT_FAILED = "MixIS skipped: the package's mixture fit failed its check"
#: how the reason of a row begins when `mixture_draws_check` could not tell whether the
#: user's own mixture draws (``mixis_draws=``) are draws of the mixture posterior
GIVEN_UNCHECKED = "MixIS skipped: the mixture draws given could not be checked"


#: PSIS rows whose k-hat is below this are pooled with MixIS: below 1/2 the raw ratios have
#: finite variance, so PSIS's MCSE (and the inverse-variance weight) can be trusted.
POOL_KHAT = 0.5
#: ... and only where the posterior fit has at least this many draws.  On the choose half,
#: the rows pooled from the one posterior fit of 1000 draws (rhs_logistic, 4 x 250) erred
#: by more than their pooled MCSE (rms z of the pooled rows 0.72 / 1.48 / 1.79 over seeds
#: 1-3; of all rows 0.82 / 1.14 / 1.22 pooled, 0.79 / 0.90 / 0.76 not), even rows whose
#: k-hat was below 0.2: PSIS's MCSE misses the error every chain of a short fit shares.
#: From the fits of 4000 draws (relu5, logistic_n300, t_outliers) the pooled rows were
#: calibrated (0.92-1.24) and pooling cut the RMSE by up to 17%
#: (`benchmarks/results/pool_khat.txt`).  The cut lies between the two, at 2000.  Below it
#: the agreement test still runs (a disagreement far beyond Monte Carlo error still
#: unverifies the rows); the rows keep MixIS's estimates.
POOL_MIN_DRAWS = 2000
#: Two estimates are pooled only when their sums over the rows to pool agree within this
#: many combined Monte Carlo SEs.  Row by row, every candidate is pooled unless the two
#: disagree beyond `FAR_Z` (which unverifies the row): keeping MixIS alone on the rows that
#: disagree by 2-4 combined MCSEs, as before, kept the rows where MixIS had erred most (the
#: more precise PSIS is the nearer there), and on the choose half pooling them cut the
#: RMSE by 8-24% on logistic_n300 (rms z 1.20 -> 0.96) and by up to 13% on relu5
#: (`benchmarks/results/row_pooling.txt`).
POOL_AGREE_Z = 2.0
#: A disagreement beyond this many combined MCSEs (where PSIS's MCSE can be trusted, k-hat
#: below `POOL_KHAT`) is evidence of a wrong input (another program, data or fit), not
#: noise: the rows it concerns lose their verification (chance: 6e-5 a row).
FAR_Z = 4.0
#: how the reason of a row unverified by a PSIS / MixIS disagreement begins
DISAGREE = "PSIS and MixIS disagree"


def _chains_disagree(ctx, rows) -> np.ndarray:
    """Rows whose posterior chains disagree (`Context.chains_disagree`): their PSIS estimate
    rests on those draws, so MixIS on its own mixture draws is kept alone there (pooled,
    the row could not be verified independently of the posterior draws)."""
    flagged = getattr(ctx, "chains_disagree", None)
    out = np.zeros(rows.size, dtype=bool)
    if flagged is not None and flagged[0].size:
        out = np.isin(rows, flagged[0])
    return out


def _psis_sum_se(ctx, cols, weights) -> float:
    """MCSE of a weighted sum of PSIS rows: the larger of the correlation-aware SE (the
    rows share the posterior draws) and the pointwise MCSEs in quadrature."""
    from loo_adapt.core.pool import is_mcse_of_sum

    base = ctx.base
    shared = is_mcse_of_sum(base.log_weights[:, cols], weights, chains=ctx.draws.n_chains)
    quad = float(np.sqrt(np.sum((weights * base.mcse_elpd_i[cols]) ** 2)))
    return max(shared, quad)


def _psis_mcse(ctx, rows, pool, method) -> np.ndarray:
    """PSIS's pointwise MCSE of ``rows`` as pooling reads it: with ``method="skew"`` the
    candidate rows' (``pool``) widened for the skew of their PSIS weights' influence, as
    MixIS's own (`loo_adapt.core.skew.skew_inflation`): a pooled row whose PSIS MCSE is the
    smaller takes most of its error bar from it."""
    base = ctx.base
    se = base.mcse_elpd_i[rows].astype(np.float64, copy=True)
    cols = rows[pool]
    if method != "skew" or cols.size == 0:
        return se
    # PSIS's log weights are normalised per column (`core.psis_loo`)
    _, inflation = snis_influence_moments(base.log_weights, ctx.log_lik, cols,
                                          ctx.draws.n_chains, normalized=True)
    se[pool] *= inflation
    return se


def _agree(ctx, est, rows, pool, psis_se):
    """Which candidate rows may be pooled, the variance the total's MCSE must add, and the
    rows whose disagreement is far beyond Monte Carlo error.

    Pooled only where the sums over the candidates agree within ``POOL_AGREE_Z`` combined
    MCSEs, and row by row where a row's two estimates do not disagree beyond ``FAR_Z`` (a
    row kept out at 2 MCSEs would be one where MixIS erred most, by selection): PSIS's
    MCSE counts the posterior draws' error only
    as the chains show it, and errors every chain shares (a posterior fit whose chains all
    weigh the modes wrongly) move every row the same way and show in the sum first.  When
    the sums disagree nothing is pooled: the rows keep MixIS's estimates, and since one of
    the two independent samples carries an error its MCSE does not show (which one cannot
    be told), the unexplained part of the disagreement, ``D^2 - sd^2``, is added to the
    variance of the total; a note in the summary says so.  Beyond ``FAR_Z`` combined MCSEs
    (a row's, or the sum's: then every candidate row) the disagreement is not noise: those
    rows are returned as not verified, with the reason (and, for the sum, a note that `loo`
    also warns with while a row holds MixIS's estimate).

    ``psis_se`` is PSIS's pointwise MCSE of ``rows`` (`_psis_mcse`).

    Returns
    -------
    (mask of rows to pool, extra variance of the total, mask of rows not verified,
    their reasons, a note for the summary when the sums disagree, whether `loo` also warns
    with it: the sums disagree beyond ``FAR_Z``)
    """
    far = np.zeros_like(pool)
    why = np.full(pool.size, "", dtype=object)
    j = np.flatnonzero(pool)
    if j.size == 0:
        return pool, 0.0, far, why, "", False
    base = ctx.base
    r = rows[j]
    d = base.elpd_i[r] - est.elpd_i[r]
    c = np.zeros(len(est.elpd_i))
    c[r] = 1.0
    sd_sum = float(np.hypot(_psis_sum_se(ctx, r, np.ones(r.size)), est.mcse_of_sum(c)))
    diff = float(d.sum())
    z_sum = diff / sd_sum if sd_sum > 0 else 0.0
    sd = np.hypot(psis_se[j], est.mcse_elpd_i[r])
    z = np.divide(d, sd, out=np.zeros_like(d), where=sd > 0)
    row_far = np.abs(z) > FAR_Z
    far[j[row_far]] = True
    why[j[row_far]] = [f"{DISAGREE} by {dd:+.3g} ({zz:+.1f} combined MCSEs, more "
                       f"than {FAR_Z:g}): the program, its data or the fit is suspect"
                       for dd, zz in zip(d[row_far], z[row_far])]
    if abs(z_sum) > FAR_Z:
        rest = j[~row_far]
        far[rest] = True
        why[rest] = (f"{DISAGREE} in sum over the {r.size} rows where PSIS's "
                     f"k-hat < {POOL_KHAT:g} by {diff:+.3g} ({z_sum:+.1f} combined MCSEs, more "
                     f"than {FAR_Z:g}): the program, its data or the fit is suspect")
    if abs(z_sum) > POOL_AGREE_Z:
        extra = diff**2 - sd_sum**2
        note = (f"PSIS on the posterior draws and MixIS on the mixture draws disagree over the "
                f"{r.size} observations where PSIS's k-hat is below the pooling threshold: "
                f"sums differ by {diff:+.2f} ({z_sum:+.1f} combined MCSEs). One of the two fits "
                "carries an error its MCSE does not show (short or stuck chains, modes weighted "
                "differently): MixIS alone is used for every row, and the MCSE of elpd_loo "
                f"includes the unexplained part of the difference ({np.sqrt(extra):.2f})")
        loud = abs(z_sum) > FAR_Z  # `loo` warns with it if a row still holds MixIS's estimate
        if loud:
            note += (f"; beyond {FAR_Z:g} MCSEs no row of them is verified by these two "
                     "fits (a later fit focused on those rows, independent of both, may "
                     "verify them): check that the program, its data and both fits are right")
        return np.zeros_like(pool), extra, far, why, note, loud
    out = np.zeros_like(pool)
    out[j[~row_far]] = True  # within FAR_Z: see POOL_AGREE_Z
    return out, 0.0, far, why, "", False


def _third_opinion(ctx, mix_draws, ll, first):
    """When the package's own mixture fit fails `mixture_draws_check` against the posterior
    draws, a second fit of the same mixture (another seed, `Context.mixture_again_fn`)
    tells which of the two is off: (draws, log_lik (chains, draws, n), note) to go on with,
    or None (skip MixIS, as before).  ``first`` is the first fit's `DrawsCheck`.

    The check compares two fits, so its failure says one of them is off, not which.  If
    the second mixture fit passes the check, the first was off: the second is used.  If it
    fails too but its MixIS estimates agree with the first's row by row
    (`loo_adapt.core.pool.agree` over the rows both have enough draws for), two
    independent mixture fits agree against the posterior draws (short posterior chains that
    all under-explore alike): the first is used, and each row is verified by its MCSE.
    Otherwise (they disagree, or the second fit fails) nothing is decided."""
    from loo_adapt.core.pool import agree

    again_fn = getattr(ctx, "mixture_again_fn", None)
    if again_fn is None:
        return None
    try:
        again = again_fn()
    except Exception:  # noqa: BLE001 - no third opinion: the first fit's failure stands
        return None
    n = ctx.log_lik.shape[1]
    ll2 = again.log_lik(ctx.var_name)
    if ll2.reshape(again.n_samples, -1).shape[1] != n:
        return None
    ll2 = ll2.reshape(again.n_chains, -1, n)
    if ll2.shape == ll.shape and np.array_equal(ll2, ll):
        return None  # the same draws again: no second opinion
    second = mixture_draws_check(ctx.log_lik, ll2.reshape(-1, n),
                                 chains_posterior=ctx.draws.n_chains, chains_mixture=ll2.shape[0])
    failed = first.message
    if second.ok is True:
        return again, ll2, (f"The package's first mixture fit failed its check against the "
                            f"posterior draws ({failed}); a second fit with another seed "
                            "passes it and is used")
    if first.identical or second.identical:
        return None  # posterior draws passed off as a mixture fit: nothing to weigh
    first_est, second_est = mixis_loo(ll, mcse="delta"), mixis_loo(ll2, mcse="delta")
    both = enough_draws(first_est)[0] & enough_draws(second_est)[0]
    if both.sum() < 2:
        return None
    ok, z, z_sum = agree(first_est.elpd_i[both], first_est.mcse_elpd_i[both],
                         second_est.elpd_i[both], second_est.mcse_elpd_i[both])
    if not ok:
        return None
    return mix_draws, ll, (
        f"The package's mixture fit failed its check against the posterior draws ({failed}), "
        f"and so did a second fit with another seed, but the two agree with each other on "
        f"{int(both.sum())} rows (up to {float(np.max(np.abs(z))):.1f} combined MCSEs, sum "
        f"{z_sum:+.1f}): the posterior draws are the odd one out (short chains that all "
        "under-explore alike), so the first fit is used, each row verified by its MCSE")


@dataclass(frozen=True)
class MixIS:
    """Mixture importance sampling (Silva & Zanella 2023) as an estimator.

    Reliable where the pointwise MCSE is at most ``max_mcse`` and backed by at least
    ``MIN_DRAWS`` draws and ``MIN_ESS`` effective draws; the draws are checked to come from
    the mixture posterior (`mixture_draws_check`).

    Rows whose plain-PSIS k-hat is below ``pool_khat`` (default 1/2) are pooled with PSIS
    where the posterior fit has at least `POOL_MIN_DRAWS` draws (a note says when it has
    fewer): the posterior fit and the mixture fit are independent samples, so their
    inverse-variance average (`loo_adapt.core.pool`) has a smaller Monte Carlo error than
    either; such rows are recorded as ``"mixis+psis"``.  Rows are pooled only where the
    two estimates' sums agree within their Monte Carlo error and a row's own two do not
    disagree beyond `FAR_Z` combined MCSEs (`_agree`):
    PSIS's MCSE does not see errors every chain of the posterior fit shares, so a
    disagreement of the sums means MixIS alone, with the unexplained disagreement added to
    the total's MCSE (and a warning).  Rows whose posterior chains disagree (R-hat of their
    log-likelihood above 1.01, `Context.chains_disagree`) are never pooled: MixIS alone
    verifies them on draws independent of the posterior fit.  ``pool_khat=None`` keeps
    MixIS alone on every row.
    ``mcse`` is that of `mixis_loo` ("skew", the default: the delta method widened by each
    row's skewness; "delta"; "chains": the delta method inflated by the chains'
    disagreement).  ``bias`` is its bias correction: "delta" (the default) subtracts each
    row's second-order bias (`loo_adapt.core.mixis.second_order_bias`), the optimistic lean
    of a log of a ratio of means at finite S (on the wide horseshoe rhs_wide_099, 0.15 nats
    of the total a run over the mixture fit and the focused ones; 0.02 at most on the
    truth suite's choose half); None keeps the plain estimate.

    Mixture draws that fail `mixture_draws_check` are refused (ValueError) when the user gave
    them; when they are the package's own fit of the program (`Context.own_mixture`), the
    stage verifies no row from them, as the focused stage skips a focused fit that fails it:
    every row keeps the estimate it had (PSIS's, verified only where the earlier rules verify
    it), the unverified rows' reasons and a note say why, and the later stages (focused
    fits, refits) take the rows still unverified.  Where the check cannot tell (its weights
    too heavy-tailed, an outlier's leave-one-out posterior holding the mixture), the
    package's own fit is used, with a note (the program and data were checked at the
    entry; its draws come from NUTS on that program), and the user's own draws verify no
    row, with a warning.
    """

    max_mcse: float = 0.1
    pool_khat: float | None = POOL_KHAT
    mcse: str = "skew"
    bias: str | None = "delta"
    name: str = "mixis"

    def __call__(self, ctx, rows):
        from loo_adapt.core.pool import pool_log_estimates
        from loo_adapt.estimators.estimate import Estimate, RowDraws

        mix_draws = ctx.mixture
        ll = mix_draws.log_lik(ctx.var_name)
        n = ctx.log_lik.shape[1]
        if ll.reshape(mix_draws.n_samples, -1).shape[1] != n:
            raise ValueError(
                f"the mixture fit has {ll.reshape(mix_draws.n_samples, -1).shape[1]} "
                f"observations, the LOO has {n}"
            )
        ll = ll.reshape(mix_draws.n_chains, -1, n)
        rows = np.asarray(rows, dtype=np.int64)
        own = getattr(ctx, "own_mixture", False)
        untold = ""
        if not ctx.draws.is_approximate:
            check = mixture_draws_check(ctx.log_lik, ll.reshape(-1, n),
                                        chains_posterior=ctx.draws.n_chains,
                                        chains_mixture=ll.shape[0])
            if check.ok is False and own:
                third = _third_opinion(ctx, mix_draws, ll, check)
                if third is None:
                    return self._skip(ctx, rows, check.message)
                mix_draws, ll, untold = third
            if check.ok is False and not own:
                raise ValueError(f"{check.message}: {GIVEN_DRAWS_ADVICE}")
            if check.ok is None and not own:
                import warnings

                warnings.warn(f"{check.message}; MixIS verifies no row from mixture draws it "
                              f"cannot check: {GIVEN_DRAWS_ADVICE}", UserWarning, stacklevel=4)
                return self._skip(ctx, rows, check.message, given=True)
            if check.ok is None:
                untold = (f"MixIS used the package's own mixture fit although {check.message}: "
                          "the program and its data were checked against the posterior fit "
                          "at the entry, and each row is verified by its own MCSE")
        est = mixis_loo(ll, mcse=self.mcse, bias=self.bias)
        prob = p1 = None
        if ctx.y is not None:
            prob, p1 = mixis_bernoulli(ll, ctx.y, est)
            prob = prob[rows]
        # one shared (S, n) weight matrix; each row's record holds views of its column
        lw = est.log_weights
        lw.setflags(write=False)
        records = [RowDraws("mixture", lw[:, i], None if p1 is None else p1[:, i],
                            draws=mix_draws, column=int(i)) for i in rows]
        elpd = est.elpd_i[rows].copy()
        mcse = est.mcse_elpd_i[rows].copy()
        enough, too_few = enough_draws(est, rows)
        method = np.full(rows.size, "mixis", dtype=object)
        khat = np.full(rows.size, np.nan)
        grad_mix = np.ones(n)  # d (reported elpd_i) / d (MixIS elpd_i), for the total's MCSE
        extra_var = 0.0
        pooled = np.empty(0, dtype=np.int64)  # positions among rows pooled with PSIS
        g_psis = None
        far = np.zeros(rows.size, dtype=bool)
        far_why = np.full(rows.size, "", dtype=object)
        div = divergence_note(mix_draws, "The mixture fit")
        # (text, whether `loo` warns with it): every note is about this fit's estimates,
        # and holds while a row keeps one
        notes = [(t, False) for t in (untold, div) if t]
        if self.pool_khat is not None:
            base = ctx.base
            k = base.pareto_k[rows]
            pool = (enough & (k < self.pool_khat) & np.isfinite(base.elpd_i[rows])
                    & np.isfinite(base.mcse_elpd_i[rows]) & ~_chains_disagree(ctx, rows))
            psis_se = _psis_mcse(ctx, rows, pool, self.mcse)
            agree, extra_var, far, far_why, note, loud = _agree(ctx, est, rows, pool, psis_se)
            notes += [(note, loud)] if note else []
            pool &= agree
            if pool.any() and ctx.draws.n_samples < POOL_MIN_DRAWS:
                notes.append((f"PSIS rows not pooled with MixIS: the posterior fit has "
                              f"{ctx.draws.n_samples} draws (pooling needs {POOL_MIN_DRAWS}, "
                              "below which PSIS's MCSE misses the error its chains share)",
                              False))
                pool[:] = False
            j = np.flatnonzero(pool)
            r = rows[j]
            if r.size:
                e, se, w, g_psis, g_mix = pool_log_estimates(
                    base.elpd_i[r], psis_se[j], elpd[j], mcse[j])
                post_p1 = None
                if prob is not None:
                    post_log_p1 = bernoulli_log_p1(ctx.log_lik[:, r], ctx.y[r])
                    prob[j] = w * ctx.psis_loo_prob[r] + (1.0 - w) * prob[j]
                    post_p1 = np.exp(post_log_p1, out=post_log_p1)
                    post_p1.setflags(write=False)
                post_lw = base.log_weights
                for t, (jj, i) in enumerate(zip(j, r)):
                    part = RowDraws("posterior", post_lw[:, i],
                                    None if post_p1 is None else post_p1[:, t])
                    mix = records[jj]
                    records[jj] = RowDraws("pooled", mix.log_weights, mix.p1, draws=mix_draws,
                                           column=int(i), posterior=part,
                                           posterior_share=float(w[t]))
                elpd[j], mcse[j] = e, se
                method[j] = "mixis+psis"
                khat[j] = k[j]
                grad_mix[r] = g_mix
                pooled = j
        ok = (mcse <= self.max_mcse) & enough & ~far
        reason = np.array([
            str(fw) if fw else "" if good else (
                comparison("MixIS MCSE", m, ">", self.max_mcse) if e else str(few))
            for good, m, e, few, fw in zip(ok, mcse, enough, too_few, far_why)],
            dtype=object)
        ok, reason, _ = unverify_divergent(mix_draws, "the mixture fit", ok, reason)
        every = rows.size == n
        block = est.sum_mcse(rows, grad_mix[rows])
        if pooled.size:
            block = replace(block, psis_pos=pooled, psis_log_weights=base.log_weights[:, rows[
                pooled]].copy(), psis_weight=g_psis, psis_mcse=psis_se[pooled],
                psis_chains=ctx.draws.n_chains)
        block = replace(block, extra_var=float(extra_var))
        return Estimate.make(
            "mixis", rows, elpd, mcse, ok, diagnostic=est.ess[rows], method=method,
            pareto_k=khat, loo_prob=prob, verified_by=np.where(ok, "mixis_mcse", ""),
            reason=reason, lpd_i=est.lpd_i[rows] if every else None,
            sum_mcse=((np.arange(rows.size), block),), row_draws=records,
            block_notes=tuple((0, t, w) for t, w in notes),
        )

    def _skip(self, ctx, rows, why, given: bool = False):
        """The rows as the result so far holds them, none verified by MixIS: the package's
        own mixture fit failed `mixture_draws_check` (``why``), or (``given``) the check
        could not tell whether the user's mixture draws are what they should be.  Rows the
        earlier rules verified (PSIS's k-hat) stay so; the others' reasons gain
        `OWN_FIT_FAILED` (`GIVEN_UNCHECKED`) with the check's numbers, and a note says what
        happened.  Without a result (an estimator called on its own) the rows come back
        with no estimate, like the focused stage's skipped rows."""
        from loo_adapt.estimators.estimate import Estimate
        from loo_adapt.result import add_reason

        reason = f"{GIVEN_UNCHECKED if given else OWN_FIT_FAILED} ({why})"
        what = ("the mixture draws given could not be checked" if given else
                "the package's mixture fit failed its check")
        note = (f"MixIS verified no row: {what} ({why}). "
                "Each row keeps the estimate it had (PSIS's, verified only where its own "
                "check verifies it); the rows left unverified go on to the stages that follow, "
                "if any (a focused mixture fit, refits)")
        res = ctx.result
        if res is None:
            return Estimate.make(self.name, rows, np.nan, np.nan, False, method="mixis",
                                 reason=reason, notes=(note,))
        ok = np.asarray(res.reliable, dtype=bool)[rows]
        old = np.asarray(res.reason, dtype=object)[rows]
        new = np.array(["" if good else add_reason(o, reason) for good, o in zip(ok, old)],
                       dtype=object)
        return Estimate.of_result(self.name, res, rows, reason=new, notes=(note,))
