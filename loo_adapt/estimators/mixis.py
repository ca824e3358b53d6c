"""Mixture importance sampling LOO (Silva & Zanella 2023), array core.

The draws come from the *mixture posterior*

    q(theta)  proportional to  p(theta | D) * sum_j 1 / l_j(theta),

obtained by adding ``target += log_sum_exp(-log_lik)`` to the Stan model block. Because
p(theta | D_-i) is proportional to p(theta | D) / l_i(theta), the importance ratio of the
leave-i-out posterior against q is, up to a constant shared by all draws,

    w_i(theta) = (1 / l_i(theta)) / sum_j (1 / l_j(theta))
               = exp(-ll_i - lse),         lse = log sum_j exp(-ll_j)   (so w_i <= 1).

The self-normalised estimate of the LOO predictive density is then

    p(y_i | y_-i) = sum_s w_is l_is / sum_s w_is = sum_s exp(-lse_s) / sum_s exp(-ll_is - lse_s),

i.e. ``elpd_loo_i = logsumexp_s(-lse_s) - logsumexp_s(-ll_is - lse_s)`` (the form of R loo's
mixis vignette), with no exponentials outside a log-sum-exp.

The ratios are bounded by one, so a Pareto k-hat of them says little. The diagnostics here
are the Kish effective sample size of the normalised weights of each observation and a
Monte Carlo standard error from the delta method for the ratio of two means, whose
effective sample size is computed from the chains (split-chain autocorrelation, as
Stan's ESS of a mean), widened by default for the skew of each row's error
(`loo_adapt.core.skew`).

Everything takes and returns numpy arrays; draws may be given as (S, n) or as
(chains, draws, n) when the chain structure should enter the MCSE.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from loo_adapt.core._names import add_deprecated_aliases
from loo_adapt.core.bernoulli import bernoulli_log_p1
from loo_adapt.core.checks import as_log_lik_array
from loo_adapt.core.ess_split import ess_mean
from loo_adapt.core.fmt import comparison
from loo_adapt.core.lse import logsumexp
from loo_adapt.core.skew import influence_ess, skew_inflation, snis_influence

__all__ = [
    "CHECK_MAX_KHAT",
    "DISAGREE",
    "DrawsCheck",
    "MixISResult",
    "SumMCSE",
    "mixis_loo",
    "chain_inflation",
    "mixis_log_weights",
    "mixis_loo_prob",
    "mixture_draws_check",
    "enough_draws",
    "MAX_DIVERGENT_SHARE",
    "divergent_count",
    "bernoulli_log_p1",
]


@add_deprecated_aliases
@dataclass
class MixISResult:
    """Pointwise mixture-IS LOO estimates (all arrays of length n).

    elpd_i : log LOO predictive density of each observation.
    lpd_i : log full-posterior mean likelihood, itself estimated from the mixture draws by
        self-normalised IS (the mixture draws are not posterior draws).
    p_loo_i : lpd_i - elpd_i.
    mcse_elpd_i : Monte Carlo standard error of elpd_i: the delta method's times
        ``mcse_inflation`` (`mixis_loo`'s ``mcse``).
    ess : Kish effective sample size of the normalised weights of each observation.
    ess_mcse : effective sample size (with the chains' autocorrelation) behind mcse_elpd_loo.
    log_weights : (S, n) log weights, normalised per observation (logsumexp over draws = 0).
    n_samples : number of mixture draws S.
    mcse_total : Monte Carlo SE of the sum of elpd_i (`mcse_of_sum` with unit weights).
    influence : (chains, draws, n) delta-method influence values of each elpd_i (their
        draw-to-draw correlation across observations is what `mcse_of_sum` accounts for).
    elpd_chain_i : (chains, n) elpd_i of each chain alone.
    mcse_delta_i : the delta-method MCSE before any inflation (``mcse_elpd_i`` is it
        times ``mcse_inflation``).
    mcse_inflation : the factor (>= 1) the delta-method MCSE is multiplied by: per row with
        ``mcse="skew"`` (`skew_inflation`), one for all rows with ``mcse="chains"``
        (`chain_inflation`; 1 with one chain), 1 with ``mcse="delta"``.
    """

    elpd_i: np.ndarray
    lpd_i: np.ndarray
    p_loo_i: np.ndarray
    mcse_elpd_i: np.ndarray
    ess: np.ndarray
    ess_mcse: np.ndarray
    log_weights: np.ndarray
    n_samples: int
    mcse_total: float = float("nan")
    influence: np.ndarray | None = None
    elpd_chain_i: np.ndarray | None = None
    mcse_delta_i: np.ndarray | None = None
    mcse_inflation: float | np.ndarray = 1.0

    def mcse_of_sum(self, weights) -> float:
        """Monte Carlo SE of ``sum_i weights_i * elpd_i``.

        The pointwise errors share the draws and are strongly correlated (a chain that
        over-weights a mode shifts every observation), so the SE comes from the influence
        values of the weighted sum (with their autocorrelation), not from adding pointwise
        MCSEs in quadrature; with four or more chains the spread of the per-chain weighted
        sums is a second, mode-sensitive estimate and the larger of the two is returned.

        Parameters
        ----------
        weights : (n,) weights of the observations (0 leaves one out of the sum).

        Returns
        -------
        float
        """
        c = np.asarray(weights, dtype=np.float64).reshape(-1)
        if self.influence is None or c.size != self.influence.shape[-1]:
            raise ValueError(f"mcse_of_sum needs {len(self.elpd_i)} weights and the "
                             "influence values of mixis_loo")
        return _influence_sum_mcse(self.influence, self.elpd_chain_i, c)

    def sum_mcse(self, rows, weight=None) -> SumMCSE:
        """The `SumMCSE` of the estimates of ``rows`` (columns of this fit), each entering
        the sum times ``weight`` (default 1)."""
        rows = np.asarray(rows, dtype=np.int64)
        w = np.ones(rows.size) if weight is None else np.asarray(weight, dtype=float)
        chain = None if self.elpd_chain_i is None else self.elpd_chain_i[:, rows].copy()
        return SumMCSE(self.influence[..., rows].copy(), chain, w.copy())


def _influence_sum_mcse(influence, elpd_chain, c) -> float:
    """Monte Carlo SE of ``sum_i c_i elpd_i`` from the per-draw influence values (chains,
    draws, k) of estimates that share one fit (`MixISResult.mcse_of_sum`)."""
    chains, draws, _ = influence.shape
    if not np.any(c):
        return 0.0
    z = influence @ c  # (chains, draws)
    var = float(z.var(ddof=1))
    if var <= 0:
        return 0.0
    ess = float(ess_mean(z[..., None])[0]) if draws >= 4 else float(chains * draws)
    mcse = float(np.sqrt(var / ess))
    if chains >= 4 and elpd_chain is not None:
        per_chain = elpd_chain @ c
        mcse = max(mcse, float(np.std(per_chain, ddof=1) / np.sqrt(chains)))
    return mcse


@dataclass(frozen=True)
class SumMCSE:
    """The Monte Carlo SE of a sum of one fit's estimates over the rows still held from it
    (picklable: arrays only).

    The rows of one mixture fit share its draws, so their errors are correlated and the
    total's MCSE comes from the influence values of the sum (`MixISResult.mcse_of_sum`).
    A later stage may replace some of them (a focused fit, refits): ``held`` says which rows
    the result still holds from this fit, and only they enter.  Rows pooled with PSIS add
    PSIS's share (`loo_adapt.core.pool.is_mcse_of_sum`, at least the pointwise MCSEs in
    quadrature); ``extra_var``, the unexplained part of a PSIS / MixIS disagreement, is added
    while any row is held.

    Attributes
    ----------
    influence : (chains, draws, k) delta-method influence values of the k rows.
    elpd_chain : (chains, k) each chain's estimates, or None.
    weight : (k,) d (reported elpd_i) / d (MixIS elpd_i): 1, or the pooled row's share.
    psis_pos, psis_log_weights, psis_weight, psis_mcse, psis_chains : the rows pooled with
        PSIS (positions among the k), their PSIS log weights (S, p), d (reported) / d (PSIS),
        PSIS's pointwise MCSEs and the posterior's chains.
    extra_var : variance added for an unexplained disagreement.
    """

    influence: np.ndarray
    elpd_chain: np.ndarray | None
    weight: np.ndarray
    psis_pos: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    psis_log_weights: np.ndarray | None = None
    psis_weight: np.ndarray | None = None
    psis_mcse: np.ndarray | None = None
    psis_chains: int = 1
    extra_var: float = 0.0

    def __call__(self, held) -> float:
        from loo_adapt.core.pool import is_mcse_of_sum

        held = np.asarray(held, dtype=bool).reshape(-1)
        if not held.any():
            return 0.0
        var = _influence_sum_mcse(self.influence, self.elpd_chain, self.weight * held) ** 2
        if self.psis_pos.size:
            g = self.psis_weight * held[self.psis_pos]
            if np.any(g):
                shared = is_mcse_of_sum(self.psis_log_weights, g, chains=self.psis_chains)
                quad = float(np.sqrt(np.sum((g * self.psis_mcse) ** 2)))
                var += max(shared, quad) ** 2
        return float(np.sqrt(var + self.extra_var))


def _as_draws(log_lik, name="log_lik"):
    """Return (chains, draws, n) float64 view of an (S, n) or (chains, draws, n) array."""
    arr = np.asarray(log_lik)
    if arr.ndim == 2:
        arr = arr[None, :, :]
    elif arr.ndim != 3:
        raise ValueError(f"{name} must have shape (S, n) or (chains, draws, n), got {arr.shape}")
    if arr.shape[0] * arr.shape[1] < 2 or arr.shape[2] < 1:
        raise ValueError(f"{name} needs at least 2 draws and 1 observation, got {arr.shape}")
    return as_log_lik_array(arr, name)


def mixis_log_weights(log_lik):
    """Unnormalised MixIS log ratios ``-ll_si - logsumexp_j(-ll_sj)`` and ``-lse_s``.

    Parameters
    ----------
    log_lik : (S, n) or (chains, draws, n) pointwise log-likelihood at mixture draws.

    Returns
    -------
    log_ratio : same shape as ``log_lik``; each entry <= 0.
    neg_lse : shape without the last axis; ``-log sum_j exp(-ll_sj)``, the log ratio of the
        full posterior against the mixture (up to a constant).
    """
    arr = np.asarray(log_lik, dtype=np.float64)
    if np.isneginf(arr).all(axis=-1).any():
        raise ValueError("a draw has log_lik = -inf for every observation")
    lse = logsumexp(-arr, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        log_ratio = -arr - lse
    # a draw with l_i = 0 gives -ll_i = +inf = lse: its ratio is exactly 1 (log 0)
    log_ratio = np.where(np.isposinf(-arr), 0.0, log_ratio)
    return log_ratio, -lse[..., 0]


#: pointwise MCSE of `mixis_loo`: "skew" (the delta method widened by each row's skewness,
#: `skew_inflation`; the default, chosen on the truth suite's choose half), "delta" (the
#: delta method alone) or "chains" (inflated by what the chains' disagreement shows,
#: `chain_inflation`)
MCSE_METHODS = ("skew", "delta", "chains")


def mixis_loo(log_lik, mcse: str = "skew"):
    """Mixture-IS LOO for every observation from one fit of the mixture posterior.

    Parameters
    ----------
    log_lik : (S, n) or (chains, draws, n) pointwise log-likelihood evaluated at draws of
        the mixture posterior q(theta) proportional to p(theta | D) sum_j 1/l_j(theta). Pass
        the chain axis to make the MCSE account for autocorrelation.
    mcse : "skew" (default) the delta method with the chains' multi-chain ESS, widened by
        each row's skewness (`skew_inflation`); "delta" the delta method alone; "chains"
        the delta method times `chain_inflation`, which the chains' disagreement sets.

    Returns
    -------
    MixISResult
    """
    if mcse not in MCSE_METHODS:
        raise ValueError(f"mcse must be one of {MCSE_METHODS}, got {mcse!r}")
    arr = _as_draws(log_lik)
    chains, draws, n = arr.shape
    S = chains * draws
    log_ratio, neg_lse = mixis_log_weights(arr)  # (c, d, n), (c, d)
    flat_lr = log_ratio.reshape(S, n)
    flat_neg_lse = neg_lse.reshape(S)
    flat_ll = arr.reshape(S, n)

    log_num = logsumexp(flat_neg_lse)  # log sum_s w_s l_is for every i (w_is l_is = e^-lse)
    log_den = logsumexp(flat_lr, axis=0)  # log sum_s w_is
    elpd = log_num - log_den

    # lpd_i = log E_post[l_i]: the posterior is the mixture reweighted by exp(-lse)
    lpd = logsumexp(flat_neg_lse[:, None] + flat_ll, axis=0) - log_num
    log_w = flat_lr - log_den  # normalised per observation

    # delta method for log(mean a) - log(mean b_i): influence a_s/abar - b_is/bbar_i
    # (both ratios computed in log space; each is <= S)
    a_rel = np.exp(flat_neg_lse - log_num + np.log(S))  # a_s / abar
    b_rel = np.exp(log_w + np.log(S))  # b_is / bbar_i = S w_is
    ess_kish = S * S / np.einsum("si,si->i", b_rel, b_rel)  # 1 / sum_s w_is^2
    z = a_rel[:, None] - b_rel
    var_z = z.var(axis=0, ddof=1)
    ess_z = influence_ess(z, chains)
    mcse_d = np.sqrt(var_z / ess_z)
    elpd_chain = (logsumexp(neg_lse, axis=1)[:, None] - logsumexp(log_ratio, axis=1)
                  if chains >= 4 else None)
    if mcse == "skew":
        inflation = skew_inflation(z, ess_z)
    else:
        inflation = chain_inflation(arr, elpd) if mcse == "chains" else 1.0
    out = MixISResult(elpd_i=elpd, lpd_i=lpd, p_loo_i=lpd - elpd, mcse_elpd_i=mcse_d * inflation,
                      ess=ess_kish, ess_mcse=ess_z, log_weights=log_w, n_samples=S,
                      influence=z.reshape(chains, draws, n), elpd_chain_i=elpd_chain,
                      mcse_delta_i=mcse_d, mcse_inflation=inflation)
    out.mcse_total = out.mcse_of_sum(np.ones(n))
    return out


def chain_inflation(log_lik, elpd_i) -> float:
    """How much too small the delta-method MCSE is, from the chains' disagreement.

    With few effective draws in an observation's own leave-one-out region (a mixture over
    many observations, autocorrelated chains) the self-normalised ratio's error and its
    delta-method MCSE are anti-correlated: a sample that missed the rare large weights is
    both off and sure of itself, so |error| / MCSE is heavy-tailed even where the MCSE's
    mean square is right.  Each chain alone is such a sample: with ``z_ci`` its estimate's
    difference from the all-chain estimate over its own delta-method MCSE,
    ``F_c^2 = C / (C - 1) mean_{c,i} z_ci^2`` (pooled over the observations, which the
    chains share) is about 1 when the delta method holds.  The excess shrinks with the
    sample, so the full sample's factor is ``sqrt(1 + (F_c^2 - 1) / C)``, never below 1.
    On a synthetic benchmark with a known answer (one parameter per observation, 100
    observations, lazy chains with repeat probability 0, 0.5, 0.8, the full mixture and one
    focused on 8 observations) the inflated MCSE has rms z 0.91-1.18 against 1.17-2.05 for
    the delta method on the full mixture (0.93-1.02 on the focused one;
    ``tests/estimators/test_focused.py``).  On the truth suite's choose half it is not
    better (``benchmarks/mixis_calibration.py``, seeds 1-3: rhs_logistic rms z 0.78, 0.91,
    0.58 against the delta method's 0.91, 1.03, 0.90; logistic_n300 1.34, 1.14, 1.25
    against 1.40, 1.14, 1.25; t_outliers 1.08-1.09 both), so it is not the default.

    Parameters
    ----------
    log_lik : (chains, draws, n) log-likelihood at the mixture draws.
    elpd_i : (n,) the all-chain estimates.

    Returns
    -------
    float
        The factor (1.0 with fewer than two chains or eight draws per chain).
    """
    arr = np.asarray(log_lik, dtype=np.float64)
    chains, draws, _ = arr.shape
    if chains < 2 or draws < 8:
        return 1.0
    z = []
    for c in range(chains):
        rc = mixis_loo(arr[c:c + 1], mcse="delta")
        with np.errstate(divide="ignore", invalid="ignore"):
            zc = (rc.elpd_i - elpd_i) / rc.mcse_delta_i
        z.append(zc[np.isfinite(zc)])
    z = np.concatenate(z)
    if z.size == 0:
        return 1.0
    f2 = chains / (chains - 1) * float(np.mean(z**2))
    return float(np.sqrt(max(1.0, 1.0 + (f2 - 1.0) / chains)))


def mixis_loo_prob(log_lik, log_p1):
    """LOO predictive probability E_{-i}[P(y_i = 1 | theta)] from mixture draws.

    Parameters
    ----------
    log_lik : (S, n) or (chains, draws, n) log-likelihood at the mixture draws.
    log_p1 : same shape, log P(y_i = 1 | theta_s) (see ``bernoulli_log_p1``).

    Returns
    -------
    (n,) array of probabilities.
    """
    arr = _as_draws(log_lik)
    lp1 = np.asarray(log_p1, dtype=np.float64)
    if lp1.ndim == 2:
        lp1 = lp1[None]
    if lp1.shape != arr.shape:
        raise ValueError(f"log_p1 has shape {np.shape(log_p1)}, log_lik has {np.shape(log_lik)}")
    if np.isnan(lp1).any() or (lp1 > 0).any():
        raise ValueError("log_p1 must be log-probabilities (<= 0, no NaN)")
    n = arr.shape[2]
    log_ratio, _ = mixis_log_weights(arr)
    lr = log_ratio.reshape(-1, n)
    out = logsumexp(lr + lp1.reshape(-1, n), axis=0) - logsumexp(lr, axis=0)
    return np.exp(np.minimum(out, 0.0))


#: a mixture fit (the full one or a focused one) with more than this share of its draws
#: divergent verifies no row: the package reruns such a fit once at a higher adapt_delta
#: (`loo_adapt.stan.mixis_program.fit_mixture`), as it reruns a refit with divergences.  The
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


def too_divergent(draws, what: str) -> str:
    """Why no row of a fit is verified when more than `MAX_DIVERGENT_SHARE` of its draws
    are divergent ("" when they are not)."""
    k, n = divergent_count(draws)
    if n == 0 or k <= MAX_DIVERGENT_SHARE * n:
        return ""
    first = (getattr(draws, "config", None) or {}).get("rerun_after_divergent")
    if first:
        what = (f"{what} (rerun at adapt_delta {draws.config.get('adapt_delta'):g}: "
                f"{first} before)")
    return (f"{what} had {k} divergent transitions in {n} draws (more than "
            f"{MAX_DIVERGENT_SHARE:.0%}): its draws miss part of the mixture posterior "
            "(reparameterise the program, or raise adapt_delta in StanProgram(..., "
            "fit_kwargs={'adapt_delta': ...}))")


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
    first = (getattr(draws, "config", None) or {}).get("rerun_after_divergent")
    if first:
        delta = draws.config.get("adapt_delta")
        what = f"{what} (rerun at adapt_delta {delta:g}: {first} before)"
    return (f"{what} had {k} divergent transition{'s' if k > 1 else ''} in {n} draws: its "
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
        f"{what} draws too few: ({est.n_samples} draws, ESS {s:.0f}, Kish ESS {k:.0f}; "
        f"need {MIN_DRAWS}, {MIN_ESS:.0f} and {MIN_ESS:.0f})")
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
    """

    ok: bool | None
    message: str
    z: float
    khat: float


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
            f"draws themselves ({found}))"), value, khat)
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
#: Two estimates are pooled only when they agree within this many combined Monte Carlo SEs,
#: row by row and summed over the rows to pool.
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
    z = snis_influence(base.log_weights[:, cols], ctx.log_lik[:, cols])
    se[pool] *= skew_inflation(z, influence_ess(z, ctx.draws.n_chains))
    return se


def _agree(ctx, est, rows, pool, psis_se):
    """Which candidate rows may be pooled, the variance the total's MCSE must add, and the
    rows whose disagreement is far beyond Monte Carlo error.

    Pooled only where both estimates agree within ``POOL_AGREE_Z`` combined MCSEs, row by
    row and summed over the candidates: PSIS's MCSE counts the posterior draws' error only
    as the chains show it, and errors every chain shares (a posterior fit whose chains all
    weigh the modes wrongly) move every row the same way and show in the sum first.  When
    the sums disagree nothing is pooled: the rows keep MixIS's estimates, and since one of
    the two independent samples carries an error its MCSE does not show (which one cannot
    be told), the unexplained part of the disagreement, ``D^2 - sd^2``, is added to the
    variance of the total; a note in the summary says so.  Beyond ``FAR_Z`` combined MCSEs
    (a row's, or the sum's: then every candidate row) the disagreement is not noise: those
    rows are returned as not verified, with the reason (and, for the sum, a warning).

    ``psis_se`` is PSIS's pointwise MCSE of ``rows`` (`_psis_mcse`).

    Returns
    -------
    (mask of rows to pool, extra variance of the total, mask of rows not verified,
    their reasons, a note for the summary when the sums disagree)
    """
    far = np.zeros_like(pool)
    why = np.full(pool.size, "", dtype=object)
    j = np.flatnonzero(pool)
    if j.size == 0:
        return pool, 0.0, far, why, ""
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
        if abs(z_sum) > FAR_Z:
            import warnings

            warnings.warn(f"{note}; beyond {FAR_Z:g} MCSEs no row of them is verified: check "
                          "that the program, its data and both fits are right", UserWarning,
                          stacklevel=4)
        return np.zeros_like(pool), extra, far, why, note
    ok = np.abs(d) <= POOL_AGREE_Z * sd
    out = np.zeros_like(pool)
    out[j[ok]] = True
    return out, 0.0, far, why, ""


def _third_opinion(ctx, ll, failed: str):
    """When the package's own mixture fit fails `mixture_draws_check` against the posterior
    draws, a second fit of the same mixture (another seed, `Context.mixture_again_fn`)
    tells which of the two is off: (draws, log_lik (chains, draws, n), note) to go on with,
    or None (skip MixIS, as before).

    The check compares two fits, so its failure says one of them is off, not which.  If
    the second mixture fit passes the check, the first was off: the second is used.  If it
    fails too but its MixIS estimates agree with the first's row by row
    (`loo_adapt.estimators.arbiter.agree` over the rows both have enough draws for), two
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
    if second.ok is True:
        return again, ll2, (f"The package's first mixture fit failed its check against the "
                            f"posterior draws ({failed}); a second fit with another seed "
                            "passes it and is used")
    post = ctx.log_lik
    if any(x.size == post.size and np.array_equal(x.reshape(post.shape), post)
           for x in (ll, ll2)):
        return None  # posterior draws passed off as a mixture fit: nothing to weigh
    first_est, second_est = mixis_loo(ll, mcse="delta"), mixis_loo(ll2, mcse="delta")
    both = enough_draws(first_est)[0] & enough_draws(second_est)[0]
    if both.sum() < 2:
        return None
    ok, z, z_sum = agree(first_est.elpd_i[both], first_est.mcse_elpd_i[both],
                         second_est.elpd_i[both], second_est.mcse_elpd_i[both])
    if not ok:
        return None
    return ctx.mixture, ll, (
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

    Rows whose plain-PSIS k-hat is below ``pool_khat`` (default 1/2) are pooled with PSIS:
    the posterior fit and the mixture fit are independent samples, so their
    inverse-variance average (`loo_adapt.core.pool`) has a smaller Monte Carlo error than
    either; such rows are recorded as ``"mixis+psis"``.  Rows are pooled only where the
    two estimates agree within their Monte Carlo error, row by row and summed (`_agree`):
    PSIS's MCSE does not see errors every chain of the posterior fit shares, so a
    disagreement of the sums means MixIS alone, with the unexplained disagreement added to
    the total's MCSE (and a warning).  Rows whose posterior chains disagree (R-hat of their
    log-likelihood above 1.01, `Context.chains_disagree`) are never pooled: MixIS alone
    verifies them on draws independent of the posterior fit.  ``pool_khat=None`` keeps
    MixIS alone on every row.
    ``mcse`` is that of `mixis_loo` ("skew", the default: the delta method widened by each
    row's skewness; "delta"; "chains": the delta method inflated by the chains'
    disagreement).

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
    name: str = "mixis"

    def __call__(self, ctx, rows):
        from loo_adapt.core.bernoulli import loo_prob_from_log_lik
        from loo_adapt.core.pool import pool_log_estimates
        from loo_adapt.estimators.base import Estimate, RowDraws

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
                third = _third_opinion(ctx, ll, check.message)
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
        est = mixis_loo(ll, mcse=self.mcse)
        prob = p1 = None
        if ctx.y is not None:
            log_p1 = bernoulli_log_p1(ll, ctx.y)
            prob = mixis_loo_prob(ll, log_p1)[rows]
            p1 = np.exp(log_p1.reshape(-1, n))
            p1.setflags(write=False)
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
        notes = tuple(t for t in (untold, div) if t)
        if self.pool_khat is not None:
            base = ctx.base
            k = base.pareto_k[rows]
            pool = (enough & (k < self.pool_khat) & np.isfinite(base.elpd_i[rows])
                    & np.isfinite(base.mcse_elpd_i[rows]) & ~_chains_disagree(ctx, rows))
            psis_se = _psis_mcse(ctx, rows, pool, self.mcse)
            agree, extra_var, far, far_why, note = _agree(ctx, est, rows, pool, psis_se)
            notes += (note,) if note else ()
            pool &= agree
            j = np.flatnonzero(pool)
            r = rows[j]
            if r.size:
                e, se, w, g_psis, g_mix = pool_log_estimates(
                    base.elpd_i[r], psis_se[j], elpd[j], mcse[j])
                post_p1 = None
                if prob is not None:
                    prob_psis = loo_prob_from_log_lik(ctx.log_lik[:, r],
                                                      base.log_weights[:, r], ctx.y[r])
                    prob[j] = w * prob_psis + (1.0 - w) * prob[j]
                    post_p1 = np.exp(bernoulli_log_p1(ctx.log_lik[:, r], ctx.y[r]))
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
        wild = too_divergent(mix_draws, "the mixture fit")
        if wild:
            ok[:] = False
            reason = np.array([wild if not r else f"{r}; {wild}" for r in reason],
                              dtype=object)
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
            sum_mcse=((np.arange(rows.size), block),), row_draws=records, notes=notes,
        )

    def _skip(self, ctx, rows, why, given: bool = False):
        """The rows as the result so far holds them, none verified by MixIS: the package's
        own mixture fit failed `mixture_draws_check` (``why``), or (``given``) the check
        could not tell whether the user's mixture draws are what they should be.  Rows the
        earlier rules verified (PSIS's k-hat) stay so; the others' reasons gain
        `OWN_FIT_FAILED` (`GIVEN_UNCHECKED`) with the check's numbers, and a note says what
        happened.  Without a result (an estimator called on its own) the rows come back
        with no estimate, like the focused stage's skipped rows."""
        from loo_adapt.estimators.base import Estimate
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
