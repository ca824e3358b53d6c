"""VaLLA: a sparse variational GP with the network output as its mean (Ortega et al.).

Prior GP: mean g(x) = f(x, theta^), kernel k = sigma0^2 J J^T (closed-form NTK).  With M
inducing inputs Z and q(u) = N(., S) on u = f(Z) (the mean is anchored to g, so only S is
free), the posterior covariance is

    K*(x, x') = k(x, x') - k(x, Z) (A^{-1} + K_Z)^{-1} k(Z, x'),   S^{-1} = K_Z^{-1} + A,

(Eq. 17 of the paper) and the ELBO (Eq. 14-15) is

    sum_i E_{N(g_i, v_i)} log p(y_i | f) - KL(N(0, S) || N(0, K_Z)),
    v_i = k_ii - q_ii + c_i^T S c_i,   c_i = K_Z^{-1} k(Z, x_i),   q_ii = k(x_i, Z) c_i.

The Bernoulli expectation is computed by Gauss-Hermite; S = L L^T is optimised with
scipy L-BFGS (analytic gradient of the quadrature, log-diagonal for positivity).
Inducing inputs come from k-means (``scipy.cluster.vq.kmeans2``, seeded) and are held
fixed (the paper also moves them; see the module report).  For a Gaussian likelihood the
optimum is Eq. 18, A = K_Z^{-1} K_ZX K_XZ K_Z^{-1} / sigma^2 (`gaussian_optimum`), and with
Z = X it is exactly LLA.

Leave-one-out: at the ELBO optimum S^{-1} = K_Z^{-1} + sum_i lam~_i c_i c_i^T with
lam~_i = -2 dE_i/dv_i = E_q[p(1-p)], i.e. a site of precision lam~_i acting through u.
Removing it by Sherman-Morrison gives, with w_i = c_i^T S c_i and r~_i = E_q[y_i - p]:
v_-i = (v_i - w_i) + w_i / (1 - lam~_i w_i), mu_-i = g_i - r~_i w_i / (1 - lam~_i w_i).
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import linalg
from scipy.cluster.vq import kmeans2
from scipy.optimize import minimize
from scipy.special import expit, log_expit

from .lla import _gh, _LLABase, cavity_loo, gh_points

__all__ = ["VaLLA", "kmeans_inducing"]


def kmeans_inducing(X, M, seed=0, max_points=None):
    """M inducing inputs by k-means (k-means++ start, seeded); duplicates and empty
    clusters are replaced by distinct training inputs so K_Z stays non-singular.
    ``max_points`` (default 20 M) caps the rows k-means sees (a seeded subsample): scipy's
    k-means is not BLAS-backed and the centres only initialise the inducing inputs."""
    X = np.asarray(X, dtype=float)
    n = X.shape[0]
    M = int(M)
    if M < 1:
        raise ValueError(f"M must be positive, got {M}")
    if M >= n:
        return X.copy()
    rng = np.random.default_rng(seed)
    cap = 20 * M if max_points is None else int(max_points)
    Xk = X[np.sort(rng.choice(n, size=cap, replace=False))] if n > cap else X
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "one of the clusters is empty": handled below
        Z, labels = kmeans2(Xk, M, minit="++", seed=rng)
    counts = np.bincount(labels, minlength=M)
    _, first = np.unique(np.round(Z, 12), axis=0, return_index=True)
    dup = np.ones(M, bool)
    dup[first] = False
    bad = np.flatnonzero((counts == 0) | dup)
    if bad.size:
        Z[bad] = X[rng.choice(n, size=bad.size, replace=False)]
    return Z


def _tril_pack(L, M):
    t = L[np.tril_indices(M)].copy()
    d = np.cumsum(np.arange(1, M + 1)) - 1  # positions of the diagonal in the packing
    t[d] = np.log(t[d])
    return t, d


class VaLLA(_LLABase):
    """Sparse variational LLA with fixed k-means inducing inputs.

    M : inducing points (ignored when Z is given).  n_points : Gauss-Hermite nodes of the
    ELBO (default: `gh_points` of the largest prior variance, at most 256).
    S_init : "laplace" starts L-BFGS at the Laplace-site fixed point (lam = Lambda
    at g), "prior" at S = K_Z.  jitter : relative jitter added to K_Z only if its Cholesky
    fails.
    """

    def __init__(self, model, X, y, sigma0, *, M=128, Z=None, seed=0, n_points=None,
                 maxiter=2000, gtol=1e-9, S_init="laplace", optimize=True, **kw):
        super().__init__(model, X, y, sigma0, **kw)
        self.Z = kmeans_inducing(self.X, M, seed) if Z is None else np.asarray(Z, float)
        self.M = self.Z.shape[0]
        # one fixed rule for the whole optimisation keeps the objective smooth; sized for
        # the largest prior variance (an upper bound of every posterior variance)
        self.n_points = (int(gh_points(np.max(self.prior_var(self.X)), n_max=256))
                         if n_points is None else int(n_points))
        s2 = self.sigma0**2
        Kz = s2 * model.ntk(self.Z)
        self._Kz_chol = self._chol_psd(Kz, "K_Z")
        self.Kz = Kz
        self.Kxz = s2 * model.ntk(self.X, self.Z)
        self.C = linalg.cho_solve((self._Kz_chol, True), self.Kxz.T).T  # c_i rows
        self.base = np.maximum(self.prior_var(self.X) - np.einsum("ij,ij->i", self.C,
                                                                  self.Kxz), 0.0)
        if S_init == "prior":
            L0 = self._Kz_chol
        elif S_init == "laplace":
            L0 = linalg.cholesky(self._S_from_sites(self.lam), lower=True)
        else:
            raise ValueError(f"S_init must be 'laplace' or 'prior', got {S_init!r}")
        self.L = L0
        self.opt_result = None
        if optimize:
            self.fit(maxiter=maxiter, gtol=gtol)

    # -- algebra -------------------------------------------------------------------------
    @staticmethod
    def _chol_psd(K, name):
        try:
            return linalg.cholesky(K, lower=True)
        except linalg.LinAlgError:
            jitter = 1e-10 * np.mean(np.diag(K))
            for _ in range(8):
                try:
                    L = linalg.cholesky(K + jitter * np.eye(len(K)), lower=True)
                    warnings.warn(f"{name} is singular to working precision; added jitter "
                                  f"{jitter:.2e} to its diagonal", RuntimeWarning, stacklevel=3)
                    return L
                except linalg.LinAlgError:
                    jitter *= 10
            raise

    def _S_from_sites(self, lam):
        """S = (K_Z^{-1} + C^T diag(lam) C)^{-1} = K_Z (K_Z + K_ZX lam K_XZ)^{-1} K_Z."""
        inner = self.Kz + (self.Kxz * lam[:, None]).T @ self.Kxz
        S = self.Kz @ linalg.solve(inner, self.Kz, assume_a="pos")
        return 0.5 * (S + S.T)

    @property
    def S(self):
        return self.L @ self.L.T

    @property
    def A(self):
        """A = S^{-1} - K_Z^{-1} (Eq. 17 parameterisation)."""
        eye = np.eye(self.M)
        Sinv = linalg.cho_solve((self.L, True), eye)
        return Sinv - linalg.cho_solve((self._Kz_chol, True), eye)

    @classmethod
    def gaussian_optimum(cls, model, X, y, sigma0, noise_sd, Z):
        """VaLLA with a Gaussian likelihood at the Eq. 18 optimum
        A = K_Z^{-1} K_ZX K_XZ K_Z^{-1} / sigma^2 (no optimisation)."""
        v = cls(model, X, y, sigma0, Z=Z, likelihood="gaussian", noise_sd=noise_sd,
                optimize=False, S_init="laplace")
        return v  # Laplace sites of a Gaussian likelihood are exactly 1 / sigma^2

    # -- ELBO ----------------------------------------------------------------------------
    def _explained(self, L):
        V = self.C @ L
        return np.einsum("ij,ij->i", V, V)

    def _expectations(self, v):
        """E_i = E log p(y_i|f), dE_i/dv_i (exact derivative of the quadrature) and
        E[r_i] under N(g_i, v_i)."""
        g, y = self.f_hat, self.y
        if self.likelihood == "gaussian":
            s2 = self.noise_sd**2
            E = self.loglik - 0.5 * v / s2
            return E, np.full(v.shape, -0.5 / s2), self.r
        t, logw = _gh(self.n_points)
        w = np.exp(logw)
        sv = np.sqrt(np.maximum(v, 1e-300))
        F = g[:, None] + sv[:, None] * t
        s = (2 * y - 1)[:, None]
        E = log_expit(s * F) @ w
        dF = y[:, None] - expit(F)  # d/df log p
        dE = (dF * t) @ w / (2 * sv)
        return E, dE, dF @ w

    def elbo(self, L=None):
        L = self.L if L is None else L
        w = self._explained(L)
        E, _, _ = self._expectations(self.base + w)
        return float(np.sum(E) - self._kl(L))

    def _kl(self, L):
        Q = linalg.solve_triangular(self._Kz_chol, L, lower=True)
        logdet_kz = 2 * np.sum(np.log(np.diag(self._Kz_chol)))
        logdet_s = 2 * np.sum(np.log(np.abs(np.diag(L))))
        return 0.5 * (np.sum(Q * Q) - self.M + logdet_kz - logdet_s)

    def fit(self, maxiter=2000, gtol=1e-9):
        M = self.M
        rows, cols = np.tril_indices(M)
        x0, dpos = _tril_pack(self.L, M)
        eye = np.eye(M)
        Kzinv = linalg.cho_solve((self._Kz_chol, True), eye)

        def unpack(x):
            L = np.zeros((M, M))
            L[rows, cols] = x
            L[np.diag_indices(M)] = np.exp(x[dpos])
            return L

        def fun(x):
            L = unpack(x)
            V = self.C @ L
            E, dE, _ = self._expectations(self.base + np.einsum("ij,ij->i", V, V))
            value = np.sum(E) - self._kl(L)
            Linv_t = linalg.solve_triangular(L, eye, lower=True).T
            grad = 2 * ((self.C * dE[:, None]).T @ V) - Kzinv @ L + Linv_t
            gx = grad[rows, cols]
            gx[dpos] *= np.exp(x[dpos])
            return -value, -gx

        res = minimize(fun, x0, jac=True, method="L-BFGS-B",
                       options={"maxiter": maxiter, "maxfun": 2 * maxiter, "gtol": gtol,
                                "ftol": 1e-15, "maxcor": 30})
        self.L = unpack(res.x)
        self.opt_result = res
        self._train_var = None
        return self

    # -- prediction ------------------------------------------------------------------------
    def _compute_train_var(self):
        return self.base + self._explained(self.L)

    def _var(self, Xs):
        s2 = self.sigma0**2
        kzs = s2 * self.model.ntk(self.Z, Xs)
        Cs = linalg.cho_solve((self._Kz_chol, True), kzs)
        V = self.L.T @ Cs
        var = self.prior_var(Xs) - np.einsum("ij,ij->j", Cs, kzs) + np.einsum("ij,ij->j", V, V)
        return np.maximum(var, 0.0)

    def site_terms(self):
        """(lam~, r~): the effective site precision -2 dE/dv and E_q[d log p / df]."""
        _, dE, rbar = self._expectations(self.train_var())
        return -2.0 * dE, rbar

    def loo(self, **kw):
        lam_t, r_t = self.site_terms()
        return cavity_loo(self.f_hat, self.train_var(), self.y, lam=lam_t, r=r_t,
                          prior_var=self.prior_var(self.X), likelihood=self.likelihood,
                          noise_sd=self.noise_sd, explained=self._explained(self.L), **kw)

    def _evidence_fn(self):
        raise NotImplementedError(
            "VaLLA's anchored-mean ELBO drives sigma0 to 0 (Section 3.3 of the paper); tune "
            "sigma0 with the LLA evidence instead")
