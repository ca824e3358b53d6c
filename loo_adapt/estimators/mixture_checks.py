"""Is a mixture fit good enough to verify rows from?  The checks MixIS and the focused fits
run on their draws before any row is called verified.

* `mixture_draws_check`: reweighted to the posterior, the draws must give back the posterior
  draws' mean of log sum_j 1 / l_j (pass / fail / cannot tell, the last where the check's
  own weights are too heavy-tailed for its z to be a test);
* `enough_draws`: 200 draws, and 100 effective ones both by the influence values'
  autocorrelation and by Kish's ESS of the row's own weights, behind every MCSE;
* the divergence rule: a fit with more than `MAX_DIVERGENT_SHARE` of its draws divergent
  verifies no row (`too_divergent`), fewer are named in a note (`divergence_note`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from loo_adapt.core.ess_split import ess_mean
from loo_adapt.core.lse import logsumexp

__all__ = [
    "CHECK_MAX_KHAT",
    "DrawsCheck",
    "MAX_DIVERGENT_SHARE",
    "MIN_DRAWS",
    "MIN_ESS",
    "divergence_note",
    "divergent_count",
    "enough_draws",
    "mixture_draws_check",
    "too_divergent",
    "unverify_divergent",
]


#: a mixture fit (the full one or a focused one) with more than this share of its draws
#: divergent verifies no row: the package reruns such a fit once at a higher adapt_delta
#: (`loo_adapt.stan.mixture_fit.fit_mixture`), as it reruns a refit with divergences.  The
#: truth suite's own fits stay far below (at most 7 of 4000 draws, 0.2 %; their estimates
#: match the brute-force truth), a funnel the sampler cannot follow (a centred hierarchical
#: program, leave one group out: 4 % and 6 %, and 1 % in its own posterior fit) far above
MAX_DIVERGENT_SHARE = 0.01


def divergent_count(draws) -> tuple[int, int]:
    """(divergent transitions, draws) of a fit; (0, draws) where it records none."""
    stats = getattr(draws, "sample_stats", None) or {}
    div = stats.get("divergent__")
    if div is None:
        return 0, int(getattr(draws, "n_samples", 0))
    div = np.asarray(div, dtype=float)
    return int(np.count_nonzero(div > 0)), int(div.size)


def _named(draws, what: str) -> str:
    """``what`` names the fit, with its rerun at a higher adapt_delta when it was rerun."""
    first = (getattr(draws, "config", None) or {}).get("rerun_after_divergent")
    if not first:
        return what
    return f"{what} (rerun at adapt_delta {draws.config.get('adapt_delta'):g}: {first} before)"


def too_divergent(draws, what: str) -> str:
    """Why no row of a fit is verified when more than `MAX_DIVERGENT_SHARE` of its draws
    are divergent ("" when they are not)."""
    k, n = divergent_count(draws)
    if n == 0 or k <= MAX_DIVERGENT_SHARE * n:
        return ""
    return (f"{_named(draws, what)} had {k} divergent transitions in {n} draws (more than "
            f"{MAX_DIVERGENT_SHARE:.0%}): its draws miss part of the mixture posterior "
            "(reparameterise the program, or raise adapt_delta in StanProgram(..., "
            "fit_kwargs={'adapt_delta': ...}))")


def unverify_divergent(draws, what: str, ok, reason) -> tuple[np.ndarray, np.ndarray, str]:
    """``(ok, reason, why)`` of a fit's rows: every row unverified, `too_divergent`'s reason
    added to each, where the fit is too divergent; as given (and ``why`` "") otherwise."""
    why = too_divergent(draws, what)
    if not why:
        return ok, reason, why
    from loo_adapt.result import add_reason

    return (np.zeros_like(ok), np.array([add_reason(r, why) for r in reason], dtype=object),
            why)


def divergence_note(draws, what: str) -> str:
    """A note when mixture draws carry divergent transitions ("" when they carry none or
    no ``divergent__``).

    A divergent transition marks a region the sampler could not follow (a horseshoe's
    funnel): the draws may miss part of the mixture posterior, and no MCSE computed from
    them can show it.  The truth suite's own mixture fits have a few (at most 12 of 16,000
    draws, `benchmarks/results/truth_report_issue21.txt`) with estimates that match the
    brute-force truth, so the rows stay verified by their MCSE; the note says how many, and
    how to rule them out (a higher ``adapt_delta``, which every fit of the program takes
    from ``StanProgram(..., fit_kwargs=...)``).
    """
    k, n = divergent_count(draws)
    if k == 0:
        return ""
    return (f"{_named(draws, what)} had {k} divergent transition{'s' if k > 1 else ''} in "
            f"{n} draws: its "
            "draws may miss part of the mixture posterior, which no MCSE shows; a higher "
            "adapt_delta rules that out (StanProgram(..., fit_kwargs={'adapt_delta': ...}))")


#: fewest mixture draws, and fewest effective draws per observation, behind a reported MCSE
MIN_DRAWS = 200
MIN_ESS = 100.0


def enough_draws(est, rows=None, what: str = "MixIS") -> tuple[np.ndarray, np.ndarray]:
    """Which rows of a `MixISResult` have draws enough behind their MCSE, and for the others
    why not: at least `MIN_DRAWS` draws, and at least `MIN_ESS` effective draws both by the
    chains' autocorrelation of the influence values (``ess_mcse``) and by Kish's ESS of
    the row's own weights (``ess``).

    Kish's ESS sees what the influence's autocorrelation cannot: a row whose component the
    mixture left almost no draws (an outlier's leave-one-out posterior holding the
    mixture) has its weight on a handful of draws while its influence values, near zero
    elsewhere, look independent; the MCSE from them is then tiny and wrong.  On the truth
    suite every row MixIS verified has a Kish ESS of 127 or more (12 benchmarks x 3 seeds),
    so the bar changes none of them.

    Returns
    -------
    (mask, reasons) : bool array and strings ("" where there are draws enough), over
        ``rows`` (all rows when None).
    """
    rows = np.arange(len(est.elpd_i)) if rows is None else np.asarray(rows, dtype=np.int64)
    ess_mcse = np.asarray(est.ess_mcse, dtype=float)[rows]
    kish = np.asarray(est.ess, dtype=float)[rows]
    mask = (est.n_samples >= MIN_DRAWS) & (ess_mcse >= MIN_ESS) & (kish >= MIN_ESS)
    why = np.array(["" if ok else (
        f"{what} draws too few: ({est.n_samples} draws, ESS {s:.0f}, Kish ESS {k:.0f}, "
        f"where {MIN_DRAWS}, {MIN_ESS:.0f} and {MIN_ESS:.0f} are needed)")
        for ok, s, k in zip(mask, ess_mcse, kish)], dtype=object)
    return mask, why


#: the check's z is a test only where its importance weights have a finite variance: above
#: this Pareto k-hat of them (1/2, where the variance of the raw weights becomes infinite) the
#: sample variance behind its Monte Carlo SE is itself unreliable and the check cannot tell
CHECK_MAX_KHAT = 0.5


class DrawsCheck(NamedTuple):
    """What `mixture_draws_check` found.

    ok : True (they look like draws of the mixture posterior), False (they do not) or
        None (the check cannot tell: its weights are too heavy-tailed for its z to be a test).
    message : what the check found, with its numbers ("" when ``ok`` is True).
    z : the difference of the two means in Monte Carlo SEs.
    khat : Pareto k-hat of the check's importance weights (mixture draws to the posterior).
    identical : the draws given as mixture draws are the posterior draws themselves.
    """

    ok: bool | None
    message: str
    z: float
    khat: float
    identical: bool = False


def _mean_se(values, chains: int) -> float:
    """Monte Carlo SE of the mean of ``values`` (S,), stacked chain by chain: their sd over
    the square root of Stan's split-chain ESS of a mean (at most S: no credit for
    antithetic chains), so that autocorrelated MCMC draws are not counted as independent."""
    values = np.asarray(values, dtype=float)
    sd = float(values.std(ddof=1))
    size = values.size
    chains = max(1, int(chains))
    if sd == 0.0 or size % chains or size // chains < 8:
        return sd / np.sqrt(size)
    ess = float(ess_mean(values.reshape(chains, -1)))
    return sd / np.sqrt(min(max(ess, 1.0), float(size)))


def mixture_draws_check(log_lik_posterior, log_lik_mixture, z: float = 4.0, *,
                        chains_posterior: int = 1, chains_mixture: int = 1) -> DrawsCheck:
    """Are these really draws of the mixture posterior?

    The mixture q is proportional to p(theta | D) exp(lse(theta)), lse = log sum_j 1/l_j, so
    reweighting draws of q by exp(-lse) must give back the posterior: the self-normalised
    mean of lse over the mixture draws must equal its plain mean over the posterior draws.
    Posterior draws passed as mixture draws under-estimate it (measured on the three fixture
    models: z between -5 and -9, against |z| < 0.4 for real mixture fits; identical draws
    are refused outright); a mixture fit of other data or another model misses it either way.

    The z is a test only where the weights exp(-lse) have a finite variance.  Where one
    observation's leave-one-out posterior holds the mixture (an outlier: a count of 25 in a
    Poisson regression), the posterior sits in the mixture's tail and the weights are heavy
    tailed: exact draws of that mixture then gave |z| of 4.2-5.5 in 3 of 8 fits (Pareto k-hat
    of the weights 0.80-1.03).  So the check first fits the weights' Pareto k-hat and, above
    `CHECK_MAX_KHAT`, says it cannot tell (``ok`` None) instead of failing; on the truth
    suite's mixture fits, and on its posterior draws passed off as mixture draws, the k-hat
    is below 0 (bounded likelihoods), so the check decides there as before.

    Parameters
    ----------
    log_lik_posterior : (S, n) pointwise log-likelihood at posterior (MCMC) draws.
    log_lik_mixture : (S', n) the same at the draws passed as mixture draws.
    z : refuse when the two means differ by more than ``z`` Monte Carlo SEs.
    chains_posterior, chains_mixture : the chains the draws are stacked from (chain-major):
        each side's Monte Carlo SE counts the effective draws of its chains (Stan's
        split-chain ESS), not the draws.  Counted as independent, the short autocorrelated
        chains of the relu1 fixture (4 x 250) made a correct focused mixture fit fail at
        +5.0 SEs.

    Returns
    -------
    DrawsCheck
        ``(ok, message, z, khat)``; what to do about a failure is the caller's (the user's
        own draws and the package's own fit differ).
    """
    import warnings

    from loo_adapt.core.psis import pareto_khat

    post = np.asarray(log_lik_posterior, dtype=float)
    mix = np.asarray(log_lik_mixture, dtype=float)
    lse_p = logsumexp(-post, axis=-1).ravel()
    lse_q = logsumexp(-mix, axis=-1).ravel()
    m_post = float(lse_p.mean())
    se_post = _mean_se(lse_p, chains_posterior)
    log_w = -lse_q - logsumexp(-lse_q)
    w = np.exp(log_w)
    m_mix = float(np.sum(w * lse_q))
    # self-normalised IS: the influence S w_s (f_s - m) averages to the estimate's error
    se_mix = _mean_se(lse_q.size * w * (lse_q - m_mix), chains_mixture)
    value = (m_mix - m_post) / max(float(np.hypot(se_post, se_mix)), 1e-12)
    khat = np.nan  # too few draws for a tail fit: the z decides (MixIS finds them too few)
    if log_w.size >= MIN_DRAWS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            khat = float(np.ravel(pareto_khat(log_w[:, None]))[0])
    found = (f"reweighted to the posterior they give E[log sum_j 1/l_j] = {m_mix:.3f}, the "
             f"posterior draws {m_post:.3f} ({value:+.1f} Monte Carlo SEs")
    if post.shape == mix.shape and np.array_equal(post, mix):
        return DrawsCheck(False, (
            "these do not look like draws of the mixture posterior: they are the posterior "
            f"draws themselves ({found}))"), value, khat, identical=True)
    if khat > CHECK_MAX_KHAT or (np.isnan(khat) and log_w.size >= MIN_DRAWS):
        return DrawsCheck(None, (
            f"the mixture draws check cannot tell: {found}, but the weights that reweight them "
            f"have Pareto k-hat {khat:.2f} > {CHECK_MAX_KHAT:g}, so that SE is not reliable "
            "(one observation's leave-one-out posterior holds the mixture, far from the "
            "posterior)"), value, khat)
    if abs(value) > z:
        return DrawsCheck(False, (
            f"these do not look like draws of the mixture posterior: {found}, more than "
            f"{z:g})"), value, khat)
    return DrawsCheck(True, "", value, khat)
