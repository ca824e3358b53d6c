"""Moment matching LOO in the full unconstrained space of any Stan model (Paananen et al. 2021).

Iterative moment matching as R loo's ``loo_moment_match``: shift, shift+scale and
shift+covariance affine maps of the draws, each accepted only when the Pareto k-hat of
observation i improves, then the split step (half the draws transformed, weights from the
two-component mixture proposal).  The log density and pointwise log-likelihood come from
`loo_adapt.stan.log_density.StanLogDensity` (or any callables with the same signatures).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy.special import logsumexp

from loo_adapt.core._names import add_deprecated_aliases
from loo_adapt.core.fmt import comparison
from loo_adapt.core.psis import pareto_k_threshold, psislw
from loo_adapt.core.psis_loo import mcse_elpd

__all__ = ["MomentMatchResult", "moment_match_loo"]


# --------------------------------------------------------------------------------------------
# PSIS helpers
# --------------------------------------------------------------------------------------------
def _psis(log_ratio, r_eff, psis_fn=None):
    """PSIS of one vector of log ratios; NaN/+inf ratios (Stan rejected the point) get zero
    weight, as in R loo and arviz-stats."""
    lr = np.where(np.isnan(log_ratio) | (log_ratio == np.inf), -np.inf, log_ratio)
    if np.all(lr == -np.inf):
        return np.full_like(lr, -np.log(lr.size)), np.inf
    with warnings.catch_warnings():
        # as R's suppressWarnings: a failed tail fit shows up as khat = inf
        warnings.simplefilter("ignore")
        lw, k = (psislw if psis_fn is None else psis_fn)(lr, r_eff)
    lw = np.asarray(lw, dtype=float)
    return lw - logsumexp(lw), float(k)


# --------------------------------------------------------------------------------------------
# moment matching
# --------------------------------------------------------------------------------------------
@add_deprecated_aliases
@dataclass
class MomentMatchResult:
    """Moment-matching LOO for the observations in ``indices`` (arrays of length n; rows not
    attempted keep their PSIS values).

    elpd_i, p_loo_i, lpd_i, mcse_elpd_i : pointwise estimates (lpd_i from the original draws).
    pareto_k_before : plain PSIS k-hat.
    pareto_k : k-hat after the last accepted affine step (what R loo and arviz-stats report).
    pareto_k_split : PSIS k-hat of the split-step weights themselves (NaN when no split).
    steps : per observation the accepted steps in order ("shift", "scale", "cov").
    improved : whether any step was accepted (else the PSIS values are kept).
    indices : observations attempted.
    log_weights, log_lik_at : per improved observation, the final normalised log weights
        and log l_i at the draws they weigh.
    """

    elpd_i: np.ndarray
    p_loo_i: np.ndarray
    lpd_i: np.ndarray
    mcse_elpd_i: np.ndarray
    pareto_k_before: np.ndarray
    pareto_k: np.ndarray
    pareto_k_split: np.ndarray
    improved: np.ndarray
    r_eff: np.ndarray
    good_k: float
    indices: np.ndarray
    steps: list = field(default_factory=list)
    log_weights: dict = field(default_factory=dict)
    log_lik_at: dict = field(default_factory=dict)


def _weighted_moments(U, lw):
    w = np.exp(lw - logsumexp(lw))
    mean_orig = U.mean(axis=0)
    mean_w = w @ U
    return w, mean_orig, mean_w


def _shift(U, lw):
    _, mean_orig, mean_w = _weighted_moments(U, lw)
    shift = mean_w - mean_orig
    return U + shift, {"shift": shift}


def _shift_scale(U, lw):
    S = U.shape[0]
    w, mean_orig, mean_w = _weighted_moments(U, lw)
    var_w = (w @ U**2 - mean_w**2) * S / (S - 1.0)
    var_o = U.var(axis=0, ddof=1)
    scaling = np.ones(U.shape[1])
    ok = (var_o > 1e-300) & (var_w > 0)
    scaling[ok] = np.sqrt(var_w[ok] / var_o[ok])
    return (U - mean_orig) * scaling + mean_w, {"shift": mean_w - mean_orig, "scaling": scaling}


def _shift_cov(U, lw, weighted_cov):
    w, mean_orig, mean_w = _weighted_moments(U, lw)
    cov_o = np.cov(U, rowvar=False, ddof=1)
    D = U - mean_w
    cov_w = (w[:, None] * D).T @ D
    if weighted_cov == "unbiased":
        # R's cov.wt(method = "unbiased"): divide by 1 - sum w^2
        cov_w = cov_w / (1.0 - np.sum(w**2))
    try:
        chol_w = np.linalg.cholesky(np.atleast_2d(cov_w))
        chol_o = np.linalg.cholesky(np.atleast_2d(cov_o))
        # lower-triangular map L_w L_o^{-1}: covariance L_o L_o^T -> L_w L_w^T
        mapping = np.linalg.solve(chol_o.T, chol_w.T).T
    except np.linalg.LinAlgError:
        # as R: a weighted covariance that is not positive definite leaves the shape alone
        mapping = np.eye(U.shape[1])
    return (U - mean_orig) @ mapping.T + mean_w, {"shift": mean_w - mean_orig,
                                                   "mapping": mapping}


def _split_weights(U, log_prob, log_lik_i, i, total_shift, total_scaling, total_mapping, cov,
                   split_inverse="exact"):
    """Split step (R loo ``loo_moment_match_split``): T applied to the first S//2 draws, the
    proposal is the equal mixture of the posterior p and its pushforward T#p, so the log
    ratio of p(u | D_-i) to it is ``-ll_i(x) + lp(x) - logaddexp(lp(x), lp(T^-1 x) - log|J_T|)``
    for every draw x, transformed or not (T^-1 x is the untransformed original for the first
    half; the inverse map is applied to the second half)."""
    S = U.shape[0]
    half = S // 2
    mean_orig = U.mean(axis=0)
    fwd = (U - mean_orig) * total_scaling
    if cov:
        fwd = fwd @ total_mapping.T
    fwd = fwd + total_shift + mean_orig
    if split_inverse == "exact":
        inv = U - total_shift - mean_orig
    elif split_inverse == "r":
        inv = U - mean_orig
    else:  # "arviz"
        inv = U - total_shift - mean_orig
    if cov:
        inv = np.linalg.solve(total_mapping, inv.T).T
    inv = inv / total_scaling + mean_orig
    if split_inverse != "exact":
        inv = inv - total_shift
    x = U.copy()
    x[:half] = fwd[:half]
    x_inv = U.copy()
    x_inv[half:] = inv[half:]
    lp_x = log_prob(x)
    lp_inv = log_prob(x_inv)
    ll_x = log_lik_i(x, i)
    log_det = np.sum(np.log(total_scaling))
    if cov:
        sign, ld = np.linalg.slogdet(total_mapping)
        log_det += ld if sign > 0 else np.inf
    with np.errstate(invalid="ignore"):
        lr = -ll_x + lp_x - np.logaddexp(lp_x, lp_inv - log_det)
    return lr, ll_x


def moment_match_loo(upars, log_lik, log_prob, log_lik_i, *, r_eff=1.0, khat_threshold=None,
                     max_iters: int = 30, split: bool = True, cov: bool = True,
                     indices=None, weighted_cov: str = "unbiased", split_inverse: str = "exact",
                     orig_log_prob=None, psis_fn=None, on_row=None):
    """Iterative moment matching LOO (Paananen et al. 2021; R loo ``loo_moment_match``).

    Parameters
    ----------
    upars : (S, P) unconstrained posterior draws (chains stacked).
    log_lik : (S, n) pointwise log-likelihood at ``upars``.
    log_prob : callable (S', P) -> (S',), unnormalised log posterior density of the
        unconstrained parameters (Jacobian included), e.g. ``StanLogDensity.log_density``.
    log_lik_i : callable ((S', P), i) -> (S',), log-likelihood of observation i.
    r_eff : float or (n,) relative efficiencies for PSIS (kept for the split step, as
        arviz-stats does with one chain; R re-estimates it from the split halves).
    khat_threshold : default ``min(1 - 1/log10(S), 0.7)``.
    max_iters : maximum number of accepted steps per observation.
    split : do the final split step (recommended: the plain transformed weights use the
        draws that chose the transform).
    cov : allow the covariance step (only used when S >= 10 P, as R).
    indices : observations to adapt (default: k-hat above threshold).
    weighted_cov : "unbiased" (R's ``cov.wt``, divides by 1 - sum w^2) or "biased"
        (arviz-stats 0.8, ``np.cov(aweights=w, ddof=0)``).
    split_inverse : how the split step inverts the accumulated map
        T(x) = ((x - m) * s) M^T + m + shift. "exact" (default):
        T^-1(y) = ((y - m - shift) M^-T) / s + m. "r": R loo's ((y - m) M^-T) / s + m - shift,
        exact only when no scale/covariance step was accepted. "arviz": arviz-stats 0.8's
        ((y - m - shift) M^-T) / s + m - shift, which subtracts the shift twice. With an
        inexact inverse the mixture density in the split weights is evaluated at the wrong
        point and the estimate is biased; the two options exist to reproduce those programs.
    orig_log_prob : optional (S,) ``log_prob(upars)`` if already computed.
    psis_fn : optional callable (log_ratios (S,), r_eff) -> (log_weights, khat) replacing
        ``loo_adapt.core.psis.psislw`` (R loo's PSIS) everywhere, e.g. to reproduce another
        program's PSIS exactly.
    on_row : optional callable (i) called as each row starts (progress bars).

    Returns
    -------
    MomentMatchResult
    """
    U = np.asarray(upars, dtype=np.float64)
    ll = np.asarray(log_lik, dtype=np.float64)
    if U.ndim != 2 or ll.ndim != 2 or U.shape[0] != ll.shape[0]:
        raise ValueError(f"upars (S, P) and log_lik (S, n) must share S; got {U.shape}, "
                         f"{ll.shape}")
    if not np.isfinite(U).all():
        raise ValueError("upars contains non-finite values")
    if split_inverse not in ("exact", "r", "arviz"):
        raise ValueError(f"split_inverse must be 'exact', 'r' or 'arviz', got {split_inverse!r}")
    if weighted_cov not in ("unbiased", "biased"):
        raise ValueError(f"weighted_cov must be 'unbiased' or 'biased', got {weighted_cov!r}")
    if max_iters < 1:
        raise ValueError("max_iters must be >= 1")
    S, P = U.shape
    n = ll.shape[1]
    r = np.broadcast_to(np.asarray(r_eff, dtype=float), (n,)).copy()
    thr = pareto_k_threshold(S) if khat_threshold is None else float(khat_threshold)
    if psis_fn is None:
        lw0, k0 = psislw(-ll, r_eff=r)
    else:
        pairs = [_psis(-ll[:, j], r[j], psis_fn) for j in range(n)]
        lw0 = np.stack([p[0] for p in pairs], axis=1)
        k0 = np.array([p[1] for p in pairs])
    elpd = logsumexp(ll + lw0, axis=0)
    lpd = logsumexp(ll, axis=0) - np.log(S)
    mcse = mcse_elpd(ll, lw0, elpd, r)
    khat = np.array(k0, dtype=float)
    khat_split = np.full(n, np.nan)
    improved = np.zeros(n, dtype=bool)
    idx = np.flatnonzero(k0 > thr) if indices is None else np.atleast_1d(indices).astype(int)
    steps: list = [[] for _ in range(n)]
    use_cov = cov and S >= 10 * P
    lp0 = log_prob(U) if orig_log_prob is None else np.asarray(orig_log_prob, dtype=float)
    if lp0.shape != (S,):
        raise ValueError(f"log_prob must return shape ({S},), got {lp0.shape}")
    weights, at = {}, {}

    for i in idx:
        if on_row is not None:
            on_row(int(i))
        ki = k0[i]
        lwi = lw0[:, i]
        lli = ll[:, i]
        Ui = U
        t_shift = np.zeros(P)
        t_scale = np.ones(P)
        t_map = np.eye(P)
        it = 1
        while it <= max_iters and ki > thr:
            if it == max_iters:
                warnings.warn(f"observation {i}: moment matching reached max_iters="
                              f"{max_iters}; increasing it may improve accuracy", stacklevel=2)
            accepted = False
            candidates = [("shift", _shift), ("scale", _shift_scale)]
            if use_cov:
                candidates.append(("cov", lambda u, w: _shift_cov(u, w, weighted_cov)))
            for name, step in candidates:
                Unew, info = step(Ui, lwi)
                ll_new = log_lik_i(Unew, i)
                lr = -ll_new + log_prob(Unew) - lp0
                lw_new, k_new = _psis(lr, r[i], psis_fn)
                if k_new < ki:
                    Ui, lwi, lli, ki = Unew, lw_new, ll_new, k_new
                    t_shift = t_shift + info["shift"]
                    if "scaling" in info:
                        t_scale = t_scale * info["scaling"]
                    if "mapping" in info:
                        t_map = info["mapping"] @ t_map
                    steps[i].append(name)
                    accepted = True
                    break
            if not accepted:
                break
            it += 1
        if not steps[i]:
            continue
        if split:
            lr, lli = _split_weights(U, log_prob, log_lik_i, i, t_shift, t_scale, t_map,
                                     use_cov, split_inverse)
            lwi, khat_split[i] = _psis(lr, r[i], psis_fn)
        improved[i] = True
        khat[i] = ki
        lli_safe = np.where(np.isnan(lli), -np.inf, lli)
        elpd[i] = logsumexp(lli_safe + lwi)
        mcse[i] = mcse_elpd(np.where(np.isfinite(lli_safe), lli_safe, -745.0)[:, None],
                            lwi[:, None], elpd[i:i + 1], r[i:i + 1])[0]
        weights[int(i)] = lwi
        at[int(i)] = lli_safe
    return MomentMatchResult(
        elpd_i=elpd, p_loo_i=lpd - elpd, lpd_i=lpd, mcse_elpd_i=mcse,
        pareto_k_before=np.asarray(k0), pareto_k=khat, pareto_k_split=khat_split,
        improved=improved, r_eff=r, good_k=thr,
        indices=idx, steps=[tuple(s) for s in steps], log_weights=weights, log_lik_at=at,
    )


@dataclass(frozen=True)
class MomentMatch:
    """Moment matching in the program's full unconstrained space, as an estimator.

    A row is accepted when a step was accepted, its final Pareto k-hat is at most the
    threshold and it passes the certification checks that need no proposal density
    (`loo_adapt.estimators.certify`: ``jensen`` and ``psis_side``).
    """

    name: str = "mm"

    def __call__(self, ctx, rows):
        from loo_adapt.estimators.certify import DEFAULT_Z, DEFAULT_Z_SIDE
        from loo_adapt.estimators.estimate import Estimate
        density = ctx.need_program("moment matching (mm)").log_density()
        upars = density.unconstrain(ctx.draws)
        rows = np.asarray(rows, dtype=np.int64)
        base = ctx.base
        from loo_adapt.progress import progress_bar

        bar = progress_bar(rows.size, "moment matching", enabled=ctx.progress, unit="row")
        try:
            mm = moment_match_loo(
                upars, ctx.log_lik, density.log_density,
                lambda u, i: density.log_lik(u, idx=[i])[:, 0],
                r_eff=base.r_eff, khat_threshold=ctx.threshold, indices=rows,
                on_row=None if bar is None else (lambda i: bar.update(1)),
            )
        finally:
            if bar is not None:
                bar.close()
        k = np.where(np.isfinite(mm.pareto_k_split[rows]), mm.pareto_k_split[rows],
                     mm.pareto_k[rows])
        elpd, mcse = mm.elpd_i[rows], mm.mcse_elpd_i[rows]
        jensen = elpd <= base.lpd_i[rows] + DEFAULT_Z * mcse
        side = elpd <= base.elpd_i[rows] + DEFAULT_Z_SIDE * np.hypot(
            mcse, base.mcse_elpd_i[rows])
        ok = mm.improved[rows] & (k <= ctx.threshold) & jensen & side
        reason = []
        for j, i in enumerate(rows):
            if ok[j]:
                reason.append("")
            elif not mm.improved[i]:
                reason.append("moment matching: no step lowered k-hat")
            elif not k[j] <= ctx.threshold:
                reason.append(comparison("moment matching: k-hat", k[j], "above", ctx.threshold))
            else:
                reason.append("moment matching: estimate not certified (above lpd or above "
                              "PSIS beyond its Monte Carlo error)")
        records = [_row_draws(mm, int(i), ctx.y) for i in rows]
        prob = None
        if ctx.y is not None:  # P(y_i = 1 | y_-i) = sum_s w_s P(y_i = 1 | theta_s)
            prob = np.array([np.nan if r is None else float(np.sum(np.exp(r.log_weights) * r.p1))
                             for r in records])
        return Estimate.make(
            "mm", rows, elpd, mcse, ok, pareto_k=k, loo_prob=prob,
            verified_by=np.where(ok, "certified", ""), reason=np.array(reason, dtype=object),
            row_draws=records,
        )


def _row_draws(mm: MomentMatchResult, i: int, y):
    """Row i's final weights on the moment-matched draws (and P(y_i = 1) there for a binary
    y), or None where no step was accepted."""
    from loo_adapt.core.bernoulli import bernoulli_log_p1
    from loo_adapt.estimators.estimate import RowDraws

    if i not in mm.log_weights:
        return None
    p1 = None
    if y is not None:
        p1 = np.exp(bernoulli_log_p1(mm.log_lik_at[i][:, None], np.asarray(y)[[i]])[:, 0])
    return RowDraws("transformed", mm.log_weights[i], p1)
