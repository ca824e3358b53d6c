"""Linearised Laplace (LLA) for a network at a mode, in weight and in function space.

Linearising f(x, theta) at the MAP theta^ with prior N(0, sigma0^2 I) gives a GP posterior
with mean f(x, theta^) and covariance

    weight space:    J(x) Sigma J(x')^T,   Sigma^{-1} = J^T Lambda J + I / sigma0^2  (GGN)
    function space:  k(x,x') - k(x,X) (Lambda^{-1} + k(X,X))^{-1} k(X,x'),
                     k = sigma0^2 J J^T (the scaled NTK, closed form for the ReLU net),

with Lambda_i = -d^2 log p(y_i|f)/df^2 at f^_i (p_i (1 - p_i) for Bernoulli-logit).  The
function-space form works through B = I + W k(X,X) W, W = Lambda^{1/2}, so a zero Lambda_i
(logits beyond the float range of p(1-p)) needs no special case.

The leave-one-out predictive comes from removing observation i's Gaussian site
(the second-order Taylor expansion of log p(y_i|f) at f^_i) from the marginal q(f_i):

    v_-i = v_i / (1 - Lambda_i v_i),   mu_-i = f^_i - v_-i r_i,   r_i = d log p(y_i|f)/df,

which in weight space is exactly the rank-one downdate Sigma_-i^{-1} = Sigma^{-1} -
Lambda_i J_i^T J_i of the GGN with the gradient of the removed term added back
(mean theta^ - Sigma_-i J_i^T r_i).  For a Gaussian likelihood and f^ the exact posterior
mean this is the exact GP leave-one-out predictive.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import linalg
from scipy.optimize import minimize_scalar
from scipy.special import log_expit, roots_hermitenorm

__all__ = [
    "likelihood_terms",
    "predictive_prob",
    "log_predictive",
    "cavity_loo",
    "LooPredictive",
    "FunctionSpaceLLA",
    "WeightSpaceLLA",
]

LIKELIHOODS = ("bernoulli", "gaussian")
PREDICTIVE_METHODS = ("gh", "probit", "mc")


def _check_likelihood(likelihood, noise_sd):
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")
    if likelihood == "gaussian":
        if noise_sd is None or not np.isfinite(noise_sd) or noise_sd <= 0:
            raise ValueError("a Gaussian likelihood needs a positive finite noise_sd")
    return likelihood


def _check_y(y, n, likelihood):
    y = np.asarray(y, dtype=float)
    if y.shape != (n,):
        raise ValueError(f"y must have shape ({n},), got {y.shape}")
    if likelihood == "bernoulli" and not np.all((y == 0) | (y == 1)):
        raise ValueError("a Bernoulli likelihood needs binary (0/1) y")
    if not np.all(np.isfinite(y)):
        raise ValueError("y contains non-finite values")
    return y


def _check_sigma0(sigma0):
    sigma0 = float(sigma0)
    if not np.isfinite(sigma0) or sigma0 <= 0:
        raise ValueError(f"sigma0 must be a positive finite number, got {sigma0}")
    return sigma0


def likelihood_terms(f, y, likelihood="bernoulli", noise_sd=None):
    """log p(y_i|f_i), r_i = d/df log p, Lambda_i = -d^2/df^2 log p, all at f."""
    f = np.asarray(f, dtype=float)
    if likelihood == "bernoulli":
        s = 2.0 * y - 1.0
        loglik = log_expit(s * f)
        # p(1-p) from log-space so large |f| gives a tiny positive number or 0, not nan
        lam = np.exp(log_expit(f) + log_expit(-f))
        r = y - np.exp(log_expit(f))
        return loglik, r, lam
    _check_likelihood(likelihood, noise_sd)
    var = noise_sd**2
    loglik = -0.5 * np.log(2 * np.pi * var) - 0.5 * (y - f) ** 2 / var
    return loglik, (y - f) / var, np.full(f.shape, 1.0 / var)


@lru_cache(maxsize=32)
def _gh(n_points):
    """Probabilists' Gauss-Hermite nodes and log weights for E over N(0, 1)."""
    t, w = roots_hermitenorm(int(n_points))
    keep = w > 0  # far nodes of large rules underflow; they carry no weight
    t, w = t[keep], w[keep]
    t.setflags(write=False)
    logw = np.log(w / np.sqrt(2 * np.pi))
    logw.setflags(write=False)
    return t, logw


def _check_mv(mean, var):
    mean = np.asarray(mean, dtype=float)
    var = np.asarray(var, dtype=float)
    if mean.shape != var.shape:
        raise ValueError(f"mean {mean.shape} and var {var.shape} differ in shape")
    if np.any(var < 0) or not np.all(np.isfinite(var)) or not np.all(np.isfinite(mean)):
        raise ValueError("predictive variances must be finite and >= 0, means finite")
    return mean, var


def gh_points(var, n_min=32, n_max=4096):
    """Gauss-Hermite nodes that resolve sigmoid(m + sqrt(v) t) for variance v.

    The logistic has poles at +-i pi, a distance pi / sqrt(v) from the real t axis; the
    quadrature error decays like exp(-2 pi d / h) in the node spacing h ~ pi / sqrt(N), so
    N ~ 25 v keeps it below ~1e-13.  Rounded up to a power of two (few distinct rules).
    """
    need = np.maximum(n_min, 25.0 * np.asarray(var, dtype=float) + n_min)
    return np.minimum(n_max, 2 ** np.ceil(np.log2(need))).astype(int)


def _log_expect(sm, sd, t, logw):
    a = log_expit(sm[:, None] + sd[:, None] * t) + logw
    amax = a.max(-1, keepdims=True)
    return (amax + np.log(np.exp(a - amax).sum(-1, keepdims=True)))[:, 0]


def log_predictive(mean, var, sign=1.0, *, method="gh", n_points=None, n_mc=4096, seed=0):
    """log E[sigmoid(sign * f)] for f ~ N(mean, var), elementwise, in log space.

    method: "gh" Gauss-Hermite (default; ``n_points=None`` picks per observation enough
    nodes for ~1e-12 accuracy, see `gh_points`), "probit" (MacKay's
    sigmoid(m / sqrt(1 + pi v / 8))), "mc" Monte Carlo with a seeded generator.
    """
    mean, var = _check_mv(mean, var)
    shape = mean.shape
    sm = (np.asarray(sign, dtype=float) * mean).reshape(-1)
    var = np.broadcast_to(var, shape).reshape(-1)
    sd = np.sqrt(var)
    if method == "probit":
        return log_expit(sm / np.sqrt(1.0 + np.pi * var / 8.0)).reshape(shape)
    out = np.empty(sm.shape)
    if method == "gh":
        npts = gh_points(var) if n_points is None else np.full(sm.shape, int(n_points))
        for N in np.unique(npts):
            sel = npts == N
            t, logw = _gh(int(N))
            out[sel] = _log_expect(sm[sel], sd[sel], t, logw)
    elif method == "mc":
        t = np.random.default_rng(seed).standard_normal(n_mc)
        logw = np.full(n_mc, -np.log(n_mc))
        for start in range(0, sm.size, 512):  # chunks bound the memory at 512 x n_mc
            sl = slice(start, start + 512)
            out[sl] = _log_expect(sm[sl], sd[sl], t, logw)
    else:
        raise ValueError(f"method must be one of {PREDICTIVE_METHODS}, got {method!r}")
    return out.reshape(shape)


def predictive_prob(mean, var, **kw):
    """P(y = 1) = E[sigmoid(f)] for f ~ N(mean, var); see `log_predictive` for methods."""
    return np.minimum(np.exp(log_predictive(mean, var, 1.0, **kw)), 1.0)


@dataclass
class LooPredictive:
    """Cavity leave-one-out predictive of each training observation.

    mean, var : cavity moments of f_i given y_-i.
    elpd_loo : log p(y_i | y_-i).
    loo_prob : P(y_i = 1 | y_-i) (NaN for a Gaussian likelihood).
    loo_logit : logit of loo_prob (the LOO predictive on the logit scale).
    guarded : observations where 1 - Lambda_i v_i <= 0 forced the prior-variance fallback.
    """

    mean: np.ndarray
    var: np.ndarray
    elpd_loo: np.ndarray
    loo_prob: np.ndarray
    loo_logit: np.ndarray
    guarded: np.ndarray

    @property
    def elpd(self) -> float:
        return float(np.sum(self.elpd_loo))


def cavity_loo(f, v, y, *, lam, r, prior_var=None, likelihood="bernoulli", noise_sd=None,
               method="gh", n_points=None, n_mc=4096, seed=0, explained=None):
    """Leave-one-out predictive by removing each observation's Gaussian site.

    f, v : posterior mean and variance of f_i; lam, r : site precision and gradient.
    prior_var : prior variance k(x_i, x_i); used as the cavity variance where
        1 - lam_i v_i <= 0 (impossible in exact arithmetic for LLA/ELLA, possible for a
        variational posterior), with a warning naming those observations.
    explained : for a sparse posterior, the part w_i <= v_i of v_i that flows through the
        inducing variables (the site acts only there):
        v_-i = (v_i - w_i) + w_i / (1 - lam_i w_i), mu_-i = f_i - r_i w_i / (1 - lam_i w_i).
    """
    f, v = _check_mv(f, v)
    lam = np.asarray(lam, dtype=float)
    r = np.asarray(r, dtype=float)
    w = v if explained is None else np.asarray(explained, dtype=float)
    denom = 1.0 - lam * w
    guarded = ~(denom > 0)
    safe = np.where(guarded, 1.0, denom)
    shrink = w / safe  # the downdated variance of the explained part
    var = (v - w) + shrink
    mean = f - shrink * r
    if np.any(guarded):
        idx = np.flatnonzero(guarded)
        if prior_var is None:
            raise ValueError(f"1 - Lambda_i v_i <= 0 for observations {idx[:20].tolist()} "
                             "and no prior variance to fall back on")
        warnings.warn(
            f"cavity LOO: 1 - Lambda_i v_i <= 0 for {idx.size} observation(s) "
            f"{idx[:20].tolist()}; the site cannot be removed, so their cavity variance is "
            "set to the prior variance k(x_i, x_i) and the mean correction uses it",
            RuntimeWarning, stacklevel=2)
        pv = np.broadcast_to(np.asarray(prior_var, dtype=float), f.shape)
        var = np.where(guarded, pv, var)
        mean = np.where(guarded, f - pv * r, mean)
    if likelihood == "gaussian":
        total = var + noise_sd**2
        elpd = -0.5 * np.log(2 * np.pi * total) - 0.5 * (y - mean) ** 2 / total
        nan = np.full(f.shape, np.nan)
        return LooPredictive(mean, var, elpd, nan, nan, guarded)
    kw = dict(method=method, n_points=n_points, n_mc=n_mc, seed=seed)
    lp1 = log_predictive(mean, var, 1.0, **kw)
    lp0 = log_predictive(mean, var, -1.0, **kw)
    elpd = np.where(y == 1, lp1, lp0)
    # rounding in the quadrature sum can put exp(lp1) a few ulps above 1
    return LooPredictive(mean, var, elpd, np.minimum(np.exp(lp1), 1.0), lp1 - lp0, guarded)


class _LLABase:
    """Shared set-up: mode, likelihood terms, predictive and LOO on top of `_var`."""

    def __init__(self, model, X, y, sigma0, *, likelihood="bernoulli", noise_sd=None):
        self.model = model
        self.X = np.asarray(X, dtype=float)
        self.likelihood = _check_likelihood(likelihood, noise_sd)
        self.noise_sd = noise_sd
        self.sigma0 = _check_sigma0(sigma0)
        self.f_hat = model.forward(self.X)
        self.y = _check_y(y, self.f_hat.size, likelihood)
        self.loglik, self.r, self.lam = likelihood_terms(self.f_hat, self.y, likelihood,
                                                         noise_sd)
        self._train_var = None

    @property
    def n(self) -> int:
        return self.f_hat.size

    def prior_var(self, Xs):
        return self.sigma0**2 * self.model.ntk_diag(Xs)

    def train_var(self) -> np.ndarray:
        """Posterior variance of f at every training input."""
        if self._train_var is None:
            self._train_var = self._compute_train_var()
        return self._train_var

    def predict_f(self, Xs):
        """Predictive mean (the network output) and variance of f at Xs."""
        return self.model.forward(Xs), self._var(Xs)

    def predictive_prob(self, Xs, **kw):
        mean, var = self.predict_f(Xs)
        return predictive_prob(mean, var, **kw)

    def loo(self, **kw) -> LooPredictive:
        """Cavity leave-one-out predictive of every training observation."""
        return cavity_loo(self.f_hat, self.train_var(), self.y, lam=self.lam, r=self.r,
                          prior_var=self.prior_var(self.X), likelihood=self.likelihood,
                          noise_sd=self.noise_sd, **kw)

    def log_evidence(self, sigma0=None) -> float:
        """Laplace log marginal likelihood of the linearised model at theta^:
        log p(y|theta^) - |theta^|^2 / (2 sigma0^2) - 1/2 log|I + sigma0^2 J^T Lambda J|."""
        s0 = self.sigma0 if sigma0 is None else _check_sigma0(sigma0)
        return self._evidence_fn()(s0)

    def optimize_prior(self, bounds=(1e-3, 1e3)):
        """sigma0 maximising the Laplace evidence (Lambda and theta^ held at the mode)."""
        fn = self._evidence_fn()
        lo, hi = np.log(bounds[0]), np.log(bounds[1])
        res = minimize_scalar(lambda t: -fn(np.exp(t)), bounds=(lo, hi), method="bounded",
                              options={"xatol": 1e-10})
        s0 = float(np.exp(res.x))
        if min(abs(res.x - lo), abs(res.x - hi)) < 1e-6:
            warnings.warn(f"evidence optimum sigma0 = {s0:.3g} is at the search bound "
                          f"{bounds}", RuntimeWarning, stacklevel=2)
        return s0

    def _theta_term(self):
        return float(np.sum(self.loglik)), float(np.sum(self.model.theta**2))


class FunctionSpaceLLA(_LLABase):
    """LLA through the n x n NTK Gram matrix: any P, cost O(n^2 (D + H) + n^3)."""

    def __init__(self, model, X, y, sigma0, **kw):
        super().__init__(model, X, y, sigma0, **kw)
        K = self.sigma0**2 * model.ntk(self.X)
        self._kdiag = np.diag(K).copy()
        self._w = np.sqrt(self.lam)
        WK = K
        WK *= self._w[:, None]  # W K; K itself is no longer needed
        B = WK * self._w[None, :]
        B[np.diag_indices_from(B)] += 1.0
        self._L = linalg.cholesky(B, lower=True, overwrite_a=True, check_finite=False)
        self._WK = WK

    def _compute_train_var(self):
        V = linalg.solve_triangular(self._L, self._WK, lower=True, check_finite=False)
        var = self._kdiag - np.einsum("ij,ij->j", V, V)
        return np.maximum(var, 0.0)

    def _var(self, Xs):
        kss = self.prior_var(Xs)
        ks = self.sigma0**2 * self.model.ntk(self.X, Xs)
        V = linalg.solve_triangular(self._L, self._w[:, None] * ks, lower=True,
                                    check_finite=False)
        return np.maximum(kss - np.einsum("ij,ij->j", V, V), 0.0)

    def cov(self, Xs):
        """Full posterior covariance of f at Xs."""
        ks = self.sigma0**2 * self.model.ntk(self.X, Xs)
        V = linalg.solve_triangular(self._L, self._w[:, None] * ks, lower=True)
        return self.sigma0**2 * self.model.ntk(Xs) - V.T @ V

    def _evidence_fn(self):
        loglik, tt = self._theta_term()
        n = self.n
        K1 = self.model.ntk(self.X)
        M = (self._w[:, None] * K1) * self._w[None, :]
        if n <= 3000:
            eig = np.clip(linalg.eigvalsh(M), 0.0, None)

            def fn(s0):
                return loglik - 0.5 * tt / s0**2 - 0.5 * np.sum(np.log1p(s0**2 * eig))
            return fn

        def fn(s0):  # large n: one Cholesky per evaluation instead of an O(9 n^3) eigh
            B = s0**2 * M
            B[np.diag_indices_from(B)] += 1.0
            L = linalg.cholesky(B, lower=True, overwrite_a=True, check_finite=False)
            return loglik - 0.5 * tt / s0**2 - np.sum(np.log(np.diag(L)))
        return fn


class WeightSpaceLLA(_LLABase):
    """LLA with the dense P x P GGN posterior (P up to a few thousand)."""

    def __init__(self, model, X, y, sigma0, *, max_params=6000, **kw):
        super().__init__(model, X, y, sigma0, **kw)
        P = model.P
        if P > max_params:
            raise ValueError(f"weight-space LLA with P = {P} > max_params = {max_params}; "
                             "use FunctionSpaceLLA")
        self.J = model.jacobian(self.X)
        self.ggn = (self.J * self.lam[:, None]).T @ self.J
        prec = self.ggn + np.eye(P) / self.sigma0**2
        self._L = linalg.cholesky(prec, lower=True)

    @property
    def precision(self):
        """Sigma^{-1} = J^T Lambda J + I / sigma0^2."""
        return self.ggn + np.eye(self.model.P) / self.sigma0**2

    @property
    def covariance(self):
        Linv = linalg.solve_triangular(self._L, np.eye(self.model.P), lower=True)
        return Linv.T @ Linv

    def _quad(self, J):
        V = linalg.solve_triangular(self._L, J.T, lower=True, check_finite=False)
        return np.einsum("ij,ij->j", V, V)

    def _compute_train_var(self):
        return self._quad(self.J)

    def _var(self, Xs):
        return self._quad(self.model.jacobian(Xs))

    def cov(self, Xs):
        Js = self.model.jacobian(Xs)
        V = linalg.solve_triangular(self._L, Js.T, lower=True)
        return V.T @ V

    def _evidence_fn(self):
        loglik, tt = self._theta_term()
        eig = np.clip(linalg.eigvalsh(self.ggn), 0.0, None)

        def fn(s0):
            return loglik - 0.5 * tt / s0**2 - 0.5 * np.sum(np.log1p(s0**2 * eig))
        return fn
