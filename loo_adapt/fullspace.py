"""LOO adaptation in the full unconstrained parameter space of any Stan model.

Given a Stan program and its data (through a ``bridgestan.StanModel``, e.g. from
``stanli.bridgestan_model``), every parameter -- hyperparameters included -- lives in the
unconstrained space R^P where the log density ``log p(u | D)`` (with the change-of-variables
Jacobian, i.e. the density of the unconstrained parameters) and its gradient are available,
and ``param_constrain(..., include_gq=True)`` recomputes the pointwise log-likelihood.

On that space this module provides

* ``moment_match_loo``: iterative moment matching (Paananen et al. 2021, R loo's
  ``loo_moment_match``): shift, shift+scale, shift+covariance affine maps of the draws, each
  accepted only when the Pareto k-hat of observation i improves, then the split step (half
  the draws transformed, weights from the two-component mixture proposal).
* ``gradient_flow_loo``: the single-step KL / variance / log-likelihood descent transforms of
  the adaptive-IS LOO paper (Eq. 21-24) with the first-order Jacobian
  ``log|J| ~= log|1 + h div Q_i|`` (Eq. 27) and the step size rule of Eq. 26.

Per-observation gradients.  A Stan program exposes only the gradient of the *whole* log
density.  ``grad log l_i`` is obtained by central finite differences of the log_lik vector
that ``param_constrain`` returns: one pair of evaluations per parameter gives the gradient
*and* the diagonal second differences (hence the Laplacian needed by ``div Q``) for all n
observations at once.  Cost: (2P + 1) ``param_constrain`` calls per draw, paid once for the
draws, independently of n; a second model with observation i removed would cost a model
per observation and still no Laplacian.  Step ``eps_a = 1e-4 * sd_a`` (about eps^(1/4) in
units of the posterior scale) balances the O(eps^2) truncation against the O(1e-16/eps^2)
rounding of the second difference (errors ~1e-8 relative).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy.special import logsumexp

from loo_adapt.psis import mcse_elpd, pareto_k_threshold, psislw

__all__ = [
    "StanLogDensity",
    "MomentMatchResult",
    "moment_match_loo",
    "GradientFlowResult",
    "gradient_flow_loo",
    "gradient_flow_step",
    "flow_field",
]


# --------------------------------------------------------------------------------------------
# the model on the unconstrained scale
# --------------------------------------------------------------------------------------------
class StanLogDensity:
    """Log density, gradient and pointwise log-likelihood of a Stan model, unconstrained scale.

    Parameters
    ----------
    model : a ``bridgestan.StanModel`` or any object with ``param_unc_num``, ``param_names``,
        ``param_unconstrain``, ``param_constrain``, ``log_density``, ``log_density_gradient``
        (and ``new_rng`` when generated quantities draw random numbers).
    log_lik : name of the generated quantity holding the pointwise log-likelihood.
    seed : seed of the RNG passed to ``param_constrain`` (generated quantities with ``_rng``
        calls need one; log_lik itself must not depend on it).
    """

    def __init__(self, model, log_lik: str = "log_lik", seed: int = 0):
        for attr in ("param_unc_num", "param_names", "param_unconstrain", "param_constrain",
                     "log_density", "log_density_gradient"):
            if not hasattr(model, attr):
                raise TypeError(f"model has no {attr!r}: expected a bridgestan.StanModel")
        self.model = model
        self.n_params = int(model.param_unc_num())
        self.log_lik_name = log_lik
        self._rng = model.new_rng(seed) if hasattr(model, "new_rng") else None
        names = list(model.param_names(include_tp=False, include_gq=False))
        self._block = _group_names(names)
        all_names = list(model.param_names(include_tp=True, include_gq=True))
        self._ll_index, self.log_lik_shape = _log_lik_positions(all_names, log_lik)
        self.n_obs = len(self._ll_index)
        self._n_out = len(all_names)

    @classmethod
    def from_stan(cls, stan_file, data, *, log_lik: str = "log_lik", seed: int = 0, **kw):
        """Build through ``stanli.bridgestan_model`` (offline, no C++ toolchain needed)."""
        import stanli

        return cls(stanli.bridgestan_model(stan_file=str(stan_file), data=data, **kw),
                   log_lik=log_lik, seed=seed)

    # ---- constrained <-> unconstrained ------------------------------------------------------
    def constrained_matrix(self, draws) -> np.ndarray:
        """(S, K) constrained parameters in BridgeStan's order from a ``Draws`` container.

        ``Draws`` keeps Stan shapes; BridgeStan flattens each variable column-major (Stan's
        order: first index fastest), so the trailing axes are reversed before flattening.
        """
        cols = []
        S = draws.n_samples
        for name, size, shape in self._block:
            if name not in draws:
                raise KeyError(
                    f"parameter {name!r} of the Stan program is not in the draws "
                    f"(available: {sorted(draws.variables)})"
                )
            v = draws.flat(name)
            if int(np.prod(v.shape[1:], dtype=int)) != size:
                raise ValueError(
                    f"parameter {name!r} has {int(np.prod(v.shape[1:]))} values per draw in "
                    f"the draws but {size} in the Stan program (shape {shape})"
                )
            if v.ndim > 2:
                v = np.transpose(v, (0,) + tuple(range(v.ndim - 1, 0, -1)))
            cols.append(v.reshape(S, size))
        return np.concatenate(cols, axis=1) if cols else np.empty((S, 0))

    def unconstrain(self, draws) -> np.ndarray:
        """Draws (``loo_adapt.draws.Draws``) -> unconstrained matrix (S, P), chains stacked."""
        theta = self.constrained_matrix(draws)
        out = np.empty((theta.shape[0], self.n_params))
        for s in range(theta.shape[0]):
            out[s] = self.model.param_unconstrain(np.ascontiguousarray(theta[s]))
        return out

    # ---- densities ---------------------------------------------------------------------------
    def _check(self, U) -> np.ndarray:
        U = np.asarray(U, dtype=np.float64)
        if U.ndim == 1:
            U = U[None, :]
        if U.ndim != 2 or U.shape[1] != self.n_params:
            raise ValueError(f"expected unconstrained draws (S, {self.n_params}), got {U.shape}")
        return np.ascontiguousarray(U)

    def log_density(self, U) -> np.ndarray:
        """log p(u | D) + const, with the Jacobian (density of u), per row; -inf where Stan
        rejects the point (overflow, domain errors)."""
        U = self._check(U)
        out = np.empty(U.shape[0])
        for s in range(U.shape[0]):
            try:
                out[s] = self.model.log_density(U[s], propto=True, jacobian=True)
            except RuntimeError:
                out[s] = -np.inf
        out[np.isnan(out)] = -np.inf
        return out

    def log_density_gradient(self, U):
        """(log density (S,), gradient (S, P)); rows where Stan rejects get -inf and NaN."""
        U = self._check(U)
        lp = np.empty(U.shape[0])
        grad = np.empty_like(U)
        for s in range(U.shape[0]):
            try:
                lp[s], grad[s] = self.model.log_density_gradient(U[s], propto=True,
                                                                 jacobian=True)
            except RuntimeError:
                lp[s], grad[s] = -np.inf, np.nan
        return lp, grad

    def log_lik(self, U, idx=None) -> np.ndarray:
        """Pointwise log-likelihood (S, n) at unconstrained rows ``U`` (or (S,) for an int
        ``idx``), recomputed by the generated quantities. NaN where Stan rejects the point."""
        U = self._check(U)
        sel = self._ll_index if idx is None else self._ll_index[idx]
        out = np.empty((U.shape[0],) + np.shape(sel))
        buf = np.empty(self._n_out)
        for s in range(U.shape[0]):
            try:
                self.model.param_constrain(U[s], include_tp=True, include_gq=True, out=buf,
                                           rng=self._rng)
                out[s] = buf[sel]
            except RuntimeError:
                out[s] = np.nan
        return out

    def log_lik_derivatives(self, U, scale=None, rel_step: float = 1e-4):
        """log_lik (S, n), its gradient (S, n, P) and Laplacian (S, n) by central differences.

        ``scale`` (P,) is the per-coordinate step unit (default: the std of ``U`` over rows);
        the step is ``rel_step * scale``. Cost: 2P + 1 ``param_constrain`` calls per row.
        """
        U = self._check(U)
        S, P = U.shape
        if scale is None:
            scale = U.std(axis=0) if S > 1 else np.ones(P)
        scale = np.where(np.asarray(scale, dtype=float) > 0, scale, 1.0)
        steps = rel_step * scale
        ll0 = self.log_lik(U)
        grad = np.empty((S, self.n_obs, P))
        lap = np.zeros((S, self.n_obs))
        for a in range(P):
            Up = U.copy()
            Up[:, a] += steps[a]
            Um = U.copy()
            Um[:, a] -= steps[a]
            fp = self.log_lik(Up)
            fm = self.log_lik(Um)
            grad[:, :, a] = (fp - fm) / (2.0 * steps[a])
            lap += (fp - 2.0 * ll0 + fm) / steps[a] ** 2
        return ll0, grad, lap


def _group_names(names):
    """BridgeStan flat names (``beta.1``, ``W1.2.3``) -> [(variable, size, shape)] in order."""
    groups: list[list] = []
    for nm in names:
        base, *idx = nm.split(".")
        if groups and groups[-1][0] == base:
            groups[-1][1] += 1
            groups[-1][2] = [max(a, int(b)) for a, b in zip(groups[-1][2], idx)]
        else:
            groups.append([base, 1, [int(b) for b in idx]])
    return [(g[0], g[1], tuple(g[2])) for g in groups]


def _log_lik_positions(all_names, var):
    """Positions of ``var`` entries in param_constrain's output, in C order of its shape (the
    order in which ``Draws.log_lik`` flattens a matrix-valued log_lik)."""
    pat = re.compile(rf"^{re.escape(var)}(\.\d+)*$")
    pos = [k for k, nm in enumerate(all_names) if pat.match(nm)]
    if not pos:
        raise KeyError(
            f"the Stan program has no generated quantity {var!r}; add "
            "`generated quantities { vector[N] log_lik; ... }` or pass log_lik="
        )
    idx = np.array([[int(b) for b in all_names[k].split(".")[1:]] for k in pos], dtype=int)
    if idx.shape[1] == 0:
        return np.array(pos), ()
    shape = tuple(idx.max(axis=0))
    order = np.ravel_multi_index(tuple((idx - 1).T), shape)
    out = np.empty(len(pos), dtype=int)
    out[order] = pos
    return out, shape


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
@dataclass
class MomentMatchResult:
    """Moment-matching LOO for the observations in ``indices`` (arrays of length n; rows not
    attempted keep their PSIS values).

    elpd_loo, p_loo, lpd, mcse_elpd_loo : pointwise estimates (lpd from the original draws).
    khat_before : plain PSIS k-hat.
    khat : k-hat after the last accepted affine step (what R loo and arviz-stats report).
    khat_split : PSIS k-hat of the split-step weights themselves (NaN when no split).
    steps : per observation the accepted steps in order ("shift", "scale", "cov").
    improved : whether any step was accepted (else the PSIS values are kept).
    indices : observations attempted.
    """

    elpd_loo: np.ndarray
    p_loo: np.ndarray
    lpd: np.ndarray
    mcse_elpd_loo: np.ndarray
    khat_before: np.ndarray
    khat: np.ndarray
    khat_split: np.ndarray
    improved: np.ndarray
    r_eff: np.ndarray
    khat_threshold: float
    indices: np.ndarray
    steps: list = field(default_factory=list)
    log_weights: dict = field(default_factory=dict)


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
                     orig_log_prob=None, psis_fn=None):
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
        ``loo_adapt.psis.psislw`` (R loo's PSIS) everywhere, e.g. to reproduce another
        program's PSIS exactly.

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
    weights = {}

    for i in idx:
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
    return MomentMatchResult(
        elpd_loo=elpd, p_loo=lpd - elpd, lpd=lpd, mcse_elpd_loo=mcse, khat_before=np.asarray(k0),
        khat=khat, khat_split=khat_split, improved=improved, r_eff=r, khat_threshold=thr,
        indices=idx, steps=[tuple(s) for s in steps], log_weights=weights,
    )


# --------------------------------------------------------------------------------------------
# gradient-flow transforms (adaptive-IS LOO paper, Eq. 21-27) in the unconstrained space
# --------------------------------------------------------------------------------------------
GRADIENT_FLOWS = ("kl", "var", "ll")


def flow_field(kind, lp, grad_lp, ll_i, grad_ll_i, lap_ll_i, log_norm=None):
    """Vector field Q_i (S, P) of a gradient flow, its divergence (S,) and the log
    normalisation of the posterior factor (the max over draws unless ``log_norm`` is given;
    fixing it makes Q a fixed function of u, e.g. to differentiate it)."""
    lp = np.asarray(lp, dtype=float)
    ll_i = np.asarray(ll_i, dtype=float)
    lap_ll_i = np.asarray(lap_ll_i, dtype=float)
    g_ll = np.asarray(grad_ll_i, dtype=float)
    sq = np.einsum("sp,sp->s", g_ll, g_ll)
    if kind == "ll":
        return -g_ll, -lap_ll_i, 0.0
    if kind == "kl":
        # Q = -a grad ll, a = pi / l_i; div Q = -a [(grad lp - grad ll).grad ll + lap ll]
        log_a = lp - ll_i
        M = np.max(log_a) if log_norm is None else log_norm
        a = np.exp(log_a - M)
        return (-a[:, None] * g_ll,
                -a * (np.einsum("sp,sp->s", grad_lp, g_ll) - sq + lap_ll_i), M)
    if kind == "var":
        if np.any(ll_i > 0):
            raise ValueError("the variance transform needs a Bernoulli likelihood (log l <= 0)")
        # g = e - 1 with e = 1/l_i; Q = pi g grad g = -A grad ll with A = pi e g;
        # div Q = pi[(g grad lp + grad g).grad g + g lap g], lap g = e (|grad ll|^2 - lap ll)
        with np.errstate(divide="ignore"):
            log_g = np.log(np.expm1(-ll_i))
        log_A = lp - ll_i + log_g
        if log_norm is None:
            fin = np.isfinite(log_A)
            M = np.max(log_A[fin]) if fin.any() else 0.0
        else:
            M = log_norm
        A = np.exp(log_A - M)
        B = np.exp(lp - 2.0 * ll_i - M)  # pi e^2
        div = -A * np.einsum("sp,sp->s", grad_lp, g_ll) + B * sq + A * (sq - lap_ll_i)
        return -A[:, None] * g_ll, div, M
    raise ValueError(f"kind must be one of {GRADIENT_FLOWS}, got {kind!r}")


def gradient_flow_step(kind, U, lp, grad_lp, ll_i, grad_ll_i, lap_ll_i, rho, sd=None):
    """One forward-Euler step phi = u + h Q_i(u) and its first-order log|det J| (Eq. 27).

    Parameters
    ----------
    kind : "kl" (Q = pi grad(1/l_i), Eq. 21/23), "var" (Q = pi g grad g with
        g = 1/l_i - 1, which is Eq. 22/24 for a Bernoulli likelihood, where
        [(1-p)/p]^(2y-1) = 1/l_i - 1), or "ll" (Q = -grad log l_i).
    U : (S, P) unconstrained draws; lp, grad_lp : log posterior density (S,) and gradient
        (S, P); ll_i, grad_ll_i, lap_ll_i : log l_i (S,), its gradient (S, P) and Laplacian (S,).
    rho : step-size parameter: h = rho * min_{s,a} |sd_a / Q_sa| (Eq. 26), so no component
        moves more than rho posterior standard deviations.
    sd : (P,) posterior standard deviations (default: of U).

    The posterior density factor pi of KL/Var is exp(log factor - its max over draws): the
    constant goes into h, which Eq. 26 rescales anyway.

    Returns
    -------
    phi (S, P), log_jac (S,) = log|1 + h div Q|, h (float)
    """
    U = np.asarray(U, dtype=float)
    sd = U.std(axis=0, ddof=1) if sd is None else np.asarray(sd, dtype=float)
    Q, div, _ = flow_field(kind, lp, grad_lp, ll_i, grad_ll_i, lap_ll_i)
    absq = np.abs(Q)
    qmax = np.max(absq / sd, axis=None) if absq.size else 0.0
    h = float(rho / qmax) if qmax > 0 else 0.0
    phi = U + h * Q
    with np.errstate(divide="ignore"):
        log_jac = np.log(np.abs(1.0 + h * div))
    return phi, log_jac, h


@dataclass
class GradientFlowResult:
    """Gradient-flow LOO candidates in the full unconstrained space.

    candidates : list of dicts (i, transform, rho, khat, elpd_loo) for every tried step.
    elpd_loo, khat : per observation, the estimate chosen by ``selection`` (as in
        `loo_adapt.adaptive.adapt_loo`: "split" chooses on one half of the draws and
        estimates on the other, so ``khat`` is a held-out k-hat; "min_khat_fallback" is
        the paper's rule, optimistic because its k-hat is computed on the draws that chose
        it); ``transform`` and ``rho`` record the choice, "psis" where none is kept.
    """

    elpd_loo: np.ndarray
    khat: np.ndarray
    khat_before: np.ndarray
    transform: np.ndarray
    rho: np.ndarray
    khat_threshold: float
    candidates: list = field(default_factory=list)


def gradient_flow_loo(model, upars, log_lik=None, *, indices=None, transforms=("kl", "ll"),
                      rho=None, r_eff=1.0, khat_threshold=None, rel_step=1e-4,
                      selection="split", seed=None):
    """KL / Var / LL gradient-flow adaptive IS LOO for any Stan model (``StanLogDensity``).

    ``grad log l_i`` and its Laplacian come from central differences of the log_lik vector
    (``StanLogDensity.log_lik_derivatives``): (2P + 1) ``param_constrain`` calls per draw,
    once for all observations. Each candidate (i, transform, rho) then costs S
    ``log_density`` and S ``param_constrain`` calls. ``"var"`` is only valid for Bernoulli
    likelihoods (see ``gradient_flow_step``).
    """
    U = model._check(upars)
    S, P = U.shape
    rho = 4.0 ** -np.arange(11) if rho is None else np.atleast_1d(np.asarray(rho, dtype=float))
    for t in transforms:
        if t not in GRADIENT_FLOWS:
            raise ValueError(f"unknown transform {t!r}; choose from {GRADIENT_FLOWS}")
    sd = U.std(axis=0, ddof=1)
    ll0, grad_ll, lap_ll = model.log_lik_derivatives(U, scale=sd, rel_step=rel_step)
    ll = ll0 if log_lik is None else np.asarray(log_lik, dtype=float)
    n = ll.shape[1]
    r = np.broadcast_to(np.asarray(r_eff, dtype=float), (n,)).copy()
    thr = pareto_k_threshold(S) if khat_threshold is None else float(khat_threshold)
    lw0, k0 = psislw(-ll, r_eff=r)
    elpd = logsumexp(ll + lw0, axis=0)
    khat = np.array(k0, dtype=float)
    idx = np.flatnonzero(k0 > thr) if indices is None else np.atleast_1d(indices).astype(int)
    lp, grad_lp = model.log_density_gradient(U)
    # the candidate choice is the adaptive driver's, so both spaces select the same way
    from loo_adapt.adaptive import SELECTIONS, select_candidate
    from loo_adapt.result import PointwiseLoo

    if selection not in SELECTIONS:
        raise ValueError(f"selection must be one of {SELECTIONS}, got {selection!r}")
    lpd = logsumexp(ll, axis=0) - np.log(S)
    result = PointwiseLoo(elpd_loo=elpd.copy(), p_loo=lpd - elpd, lpd=lpd,
                          mcse_elpd_loo=np.full(n, np.nan), khat=khat.copy(),
                          khat_threshold=thr, n_samples=S, r_eff=r)
    perm = np.random.default_rng(seed).permutation(S)
    halves = (np.sort(perm[: S // 2]), np.sort(perm[S // 2:]))
    nan = np.full(S, np.nan)
    for i in idx:
        names, rhos = ["psis"], [np.nan]
        lrs, lls = [-ll[:, i]], [ll[:, i]]
        for t in transforms:
            for rh in rho:
                phi, log_jac, h = gradient_flow_step(t, U, lp, grad_lp, ll0[:, i],
                                                     grad_ll[:, i, :], lap_ll[:, i], rh, sd)
                ll_phi = model.log_lik(phi, i)
                lr = log_jac + model.log_density(phi) - lp - ll_phi
                if not np.all(np.isfinite(lr)) or np.isnan(ll_phi).any():
                    continue  # Stan rejected a transformed draw: not a valid candidate
                names.append(t)
                rhos.append(float(rh))
                lrs.append(lr)
                lls.append(ll_phi)
        cand = (np.column_stack(lrs), np.column_stack(lls), np.column_stack([nan] * len(lrs)))
        select_candidate(result, i, names, np.array(rhos), cand, selection, halves,
                         float(r[i]), thr, True)
    elpd, khat = result.elpd_loo, result.khat_after
    transform = np.asarray(result.method, dtype=object)
    rho_out = result.rho
    candidates = result.candidates
    return GradientFlowResult(elpd_loo=elpd, khat=khat, khat_before=np.asarray(k0),
                              transform=transform, rho=rho_out, khat_threshold=thr,
                              candidates=candidates)
