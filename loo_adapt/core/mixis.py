"""Mixture importance sampling LOO (Silva & Zanella 2023): the array core.

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

The log of a ratio of means is biased at finite S: to second order its expectation exceeds
the truth by ``(V_D,i - V_N) / 2``, V the squared relative Monte Carlo error of each mean
(`second_order_bias`), an optimistic lean that grows where a row's leave-one-out draws are
few.  ``mixis_loo(..., bias="delta")`` subtracts it (the estimators do); the default
``bias=None`` is the plain estimator of R loo's vignette.

Everything takes and returns numpy arrays; draws may be given as (S, n) or as
(chains, draws, n) when the chain structure should enter the MCSE.  The estimator stage that
runs it on a fit (pooling with PSIS, the checks of the draws, verification) is
`loo_adapt.estimators.mixis`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from loo_adapt.core._names import add_deprecated_aliases
from loo_adapt.core.bernoulli import bernoulli_log_p1, moved_loo_prob
from loo_adapt.core.checks import as_log_lik_array
from loo_adapt.core.ess_split import ess_mean
from loo_adapt.core.lse import logsumexp
from loo_adapt.core.skew import influence_ess, skew_inflation

__all__ = [
    "MCSE_METHODS",
    "MixISResult",
    "SumMCSE",
    "mixis_loo",
    "second_order_bias",
    "BIAS_METHODS",
    "chain_inflation",
    "mixis_log_weights",
    "mixis_loo_prob",
    "mixis_bernoulli",
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
    bias_i : the second-order bias subtracted from each elpd_i (`second_order_bias`;
        ``mixis_loo(..., bias="delta")``), or None where the plain estimate is kept.
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
    bias_i: np.ndarray | None = None

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
        every = rows.size == self.influence.shape[-1] and np.array_equal(
            rows, np.arange(rows.size))
        influence = self.influence if every else self.influence[..., rows]  # no copy of all
        chain = None if self.elpd_chain_i is None else self.elpd_chain_i[:, rows]
        return SumMCSE(influence, chain, w.copy())


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
#: bias correction of `mixis_loo`: None (the plain estimator, as R loo's vignette) or
#: "delta" (its second-order bias subtracted, `second_order_bias`)
BIAS_METHODS = (None, "delta")


def second_order_bias(result) -> np.ndarray:
    """The second-order bias of MixIS's ``elpd_i = log mean(a) - log mean(b_i)``.

    For the log of a mean, ``E[log xbar] - log mu = -Var(xbar) / (2 mu^2)`` to second order,
    so ``E[elpd_i^] - elpd_i = (V_D,i - V_N) / 2`` with ``V_N`` the squared relative Monte
    Carlo error of ``mean(a)`` (a_s = 1 / sum_j 1/l_sj) and ``V_D,i`` that of ``mean(b_i)``
    (b_si = a_s / l_si), each from the variance of the draws' relative values over their
    multi-chain effective sample size (`loo_adapt.core.skew.influence_ess`).  ``V_D,i`` is the
    larger where the row's leave-one-out draws are few: the plain estimate leans optimistic
    by at least this much (i.i.d. draws of an exact mixture, 20 rows, two outliers, 4 chains
    x 50 draws, 400 replicates: summed error +0.277 (se 0.031) plain, +0.202 (0.036) with it
    subtracted, ``benchmarks/results/mixis_bias_delta.txt``; an earlier hook with the
    split-chain ESS, ``mixis_bias_correction.txt``: +0.200 -> +0.115).

    Parameters
    ----------
    result : `MixISResult` of the plain estimate: its ``log_weights`` give b_si / mean(b_i)
        and its ``influence`` (a_s / mean(a) - b_si / mean(b_i)) then a_s / mean(a), with no
        second pass over the log-likelihood.

    Returns
    -------
    (n,) array: the bias of each elpd_i (subtract it to correct).
    """
    chains, draws, n = result.influence.shape
    s = chains * draws
    b = np.exp(result.log_weights) * s  # b_si / mean(b_i), (S, n)
    a = (result.influence.reshape(s, n)[:, 0] + b[:, 0]).reshape(s, 1)  # a_s / mean(a)
    # influence_ess: Stan's ESS of a mean, S for chains too short to tell or a constant column
    v_n = a.var(ddof=1) / influence_ess(a, chains)[0]
    v_d = b.var(axis=0, ddof=1) / influence_ess(b, chains)
    return 0.5 * (v_d - v_n)


def mixis_loo(log_lik, mcse: str = "skew", bias: str | None = None):
    """Mixture-IS LOO for every observation from one fit of the mixture posterior.

    Parameters
    ----------
    log_lik : (S, n) or (chains, draws, n) pointwise log-likelihood evaluated at draws of
        the mixture posterior q(theta) proportional to p(theta | D) sum_j 1/l_j(theta). Pass
        the chain axis to make the MCSE account for autocorrelation.
    mcse : "skew" (default) the delta method with the chains' multi-chain ESS, widened by
        each row's skewness (`skew_inflation`); "delta" the delta method alone; "chains"
        the delta method times `chain_inflation`, which the chains' disagreement sets.
    bias : None (default) the plain estimator; "delta" subtracts each row's second-order
        bias (`second_order_bias`; what was subtracted is ``bias_i``), at most to an elpd_i
        of 0 where the likelihood is at most one at every draw (a probability: its LOO
        density is too).  The MCSE is unchanged.

    Returns
    -------
    MixISResult
    """
    if mcse not in MCSE_METHODS:
        raise ValueError(f"mcse must be one of {MCSE_METHODS}, got {mcse!r}")
    if bias not in BIAS_METHODS:
        raise ValueError(f"bias must be one of {BIAS_METHODS}, got {bias!r}")
    arr = _as_draws(log_lik)
    out = _mixis_loo(arr, mcse)
    if bias == "delta":
        elpd = out.elpd_i - second_order_bias(out)
        # a likelihood at most one at every draw (a probability) has a LOO density at most one
        at_most_one = arr.max(axis=(0, 1)) <= 0.0
        elpd = np.where(at_most_one, np.minimum(elpd, 0.0), elpd)
        out.bias_i = out.elpd_i - elpd
        out.elpd_i = elpd
        out.p_loo_i = out.lpd_i - out.elpd_i
    return out


def _mixis_loo(arr, mcse):
    """`mixis_loo`'s plain estimate of (chains, draws, n) draws."""
    chains, draws, n = arr.shape
    S = chains * draws
    fused = _mixis_compiled(arr, mcse)
    if fused is not None:
        return fused
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


def _mixis_compiled(arr, mcse):
    """`mixis_loo` computed by the numba kernel
    (`loo_adapt.core._mixis_kernel`), or None where the numpy twin runs: a cold start
    (`loo_adapt.core._compiled.use_numba`) or an input value that is not finite."""
    from loo_adapt.core._compiled import use_numba
    from loo_adapt.core._mixis_kernel import _OK, _mixis_pass

    chains, draws, n = arr.shape
    S = chains * draws
    if not use_numba(_mixis_pass, S * n):
        return None
    flat = np.ascontiguousarray(arr.reshape(S, n))
    log_w = np.empty((S, n))
    z = np.empty((S, n))
    stats = np.empty((6, n))
    chain_den = np.empty((chains, n))
    chain_num = np.empty(chains)
    if _mixis_pass(flat, chains, log_w, z, stats, chain_den, chain_num) != _OK:
        return None
    return _mixis_result(stats, chain_den, chain_num, log_w, z, arr, mcse)


def _mixis_result(stats, chain_den, chain_num, log_w, z, arr, mcse):
    """`MixISResult` from the kernel's outputs (`_mixis_compiled`)."""
    from loo_adapt.core.skew import skew_from_moments

    chains, draws, n = arr.shape
    S = chains * draws
    elpd, lpd = stats[0].copy(), stats[1].copy()
    ess_z = influence_ess(z, chains, var=stats[3])
    mcse_d = np.sqrt(stats[3] / ess_z)
    elpd_chain = chain_num[:, None] - chain_den if chains >= 4 else None
    if mcse == "skew":
        inflation = skew_from_moments(stats[4], stats[5], ess_z)
    else:
        inflation = chain_inflation(arr, elpd) if mcse == "chains" else 1.0
    out = MixISResult(elpd_i=elpd, lpd_i=lpd, p_loo_i=lpd - elpd, mcse_elpd_i=mcse_d * inflation,
                      ess=stats[2].copy(), ess_mcse=ess_z, log_weights=log_w, n_samples=S,
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


def mixis_loo_prob(log_lik, log_p1, log_weights=None):
    """LOO predictive probability E_{-i}[P(y_i = 1 | theta)] from mixture draws.

    Parameters
    ----------
    log_lik : (S, n) or (chains, draws, n) log-likelihood at the mixture draws.
    log_p1 : same shape, log P(y_i = 1 | theta_s) (see ``bernoulli_log_p1``).
    log_weights : (S, n) the MixIS log weights of these draws normalised per observation
        (`MixISResult.log_weights` of ``mixis_loo(log_lik)``), or None to compute them.

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
    n = arr.shape[2]
    if log_weights is not None and np.shape(log_weights) == (arr.shape[0] * arr.shape[1], n):
        fused = _loo_prob_compiled(log_weights, lp1.reshape(-1, n))
        if fused is not None:
            return fused
    if np.isnan(lp1).any() or (lp1 > 0).any():
        raise ValueError("log_p1 must be log-probabilities (<= 0, no NaN)")
    if log_weights is not None:
        lw = np.asarray(log_weights, dtype=np.float64)
        if lw.shape != (arr.shape[0] * arr.shape[1], n):
            raise ValueError(f"log_weights has shape {lw.shape}, expected "
                             f"{(arr.shape[0] * arr.shape[1], n)}")
        out = logsumexp(lw + lp1.reshape(-1, n), axis=0)
        return np.exp(np.minimum(out, 0.0))
    log_ratio, _ = mixis_log_weights(arr)
    lr = log_ratio.reshape(-1, n)
    out = logsumexp(lr + lp1.reshape(-1, n), axis=0) - logsumexp(lr, axis=0)
    return np.exp(np.minimum(out, 0.0))


def mixis_bernoulli(log_lik, y, result):
    """A binary outcome's parts from mixture draws: P(y_i = 1 | y_-i) of every column, moved
    with its elpd_i where ``result`` subtracted a bias (``bias_i``; the observed outcome's
    probability times exp(-bias_i), `loo_adapt.core.bernoulli.moved_loo_prob`), and the
    read-only (S, n) P(y_i = 1 | theta_s) of the draws.

    Parameters
    ----------
    log_lik : (S, n) or (chains, draws, n) log-likelihood at the mixture draws.
    y : (n,) the 0 / 1 outcomes of those columns.
    result : `MixISResult` of ``mixis_loo(log_lik, ...)``.

    Returns
    -------
    (prob (n,), p1 (S, n))
    """
    log_p1 = bernoulli_log_p1(log_lik, y)
    prob = mixis_loo_prob(log_lik, log_p1, log_weights=result.log_weights)
    if result.bias_i is not None:  # the observed outcome's probability as its elpd_i
        prob = moved_loo_prob(prob, y, slice(None), result.bias_i)
    p1 = np.exp(log_p1.reshape(-1, prob.size))
    p1.setflags(write=False)
    return prob, p1


def _loo_prob_compiled(log_weights, log_p1):
    """`mixis_loo_prob` from given normalised weights by the numba kernel, or None where
    the numpy code runs (a cold start; a log_p1 it must refuse, or a non-finite sum)."""
    from loo_adapt.core._compiled import use_numba
    from loo_adapt.core._mixis_kernel import _OK, _weighted_prob

    lw = np.asarray(log_weights, dtype=np.float64)
    if lw.ndim != 2 or not use_numba(_weighted_prob, lw.size):
        return None
    out = np.empty(lw.shape[1])
    if _weighted_prob(np.ascontiguousarray(lw), np.ascontiguousarray(log_p1), out) != _OK:
        return None
    return out
