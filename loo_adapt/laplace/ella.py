"""ELLA: linearised Laplace with Nystrom features of the NTK (Deng, Zhou & Zhu, 2022).

With M points X~ sampled from the training inputs and the top-K eigenpairs (lambda_k, u_k)
of k(X~, X~) = sigma0^2 J~ J~^T, the features

    phi(x) = k(x, X~) u_k / sqrt(lambda_k),   k = 1..K        (Eq. 15-16 of the paper)

satisfy phi(x) phi(x')^T ~= k(x, x'), and the LLA posterior becomes the K-dimensional
Bayesian linear model

    cov(x, x') = phi(x) G^{-1} phi(x')^T,   G = sum_i Lambda_i phi_i^T phi_i + I_K  (Eq. 6).

(The paper's kernel is J J^T and carries sigma0^2 outside; here sigma0^2 sits in k, so the
prior on the feature weights is N(0, I_K).)  The closed-form NTK of the ReLU net replaces
the forward-mode JVPs.  With M = n and K = rank k(X, X), phi phi^T reproduces k(X, X)
exactly and ELLA equals LLA at the training inputs.
"""

from __future__ import annotations

import time

import numpy as np
from scipy import linalg

from loo_adapt.laplace.lla import _LLABase

__all__ = ["ELLA", "ella_sweep", "PAPER_M", "PAPER_K"]

#: Paper defaults (Section 5.4): M = 2000 sampled points, K = 20 eigenpairs.
PAPER_M = 2000
PAPER_K = 20


class ELLA(_LLABase):
    """Nystrom-feature LLA.

    M : number of training inputs sampled (without replacement, seeded) for the Nystrom
        approximation; capped at n.  K : eigenpairs kept (capped at M and at the numerical
        rank: eigenvalues below ``eig_rtol`` x the largest are dropped).
    """

    def __init__(self, model, X, y, sigma0, *, M=PAPER_M, K=PAPER_K, seed=0, eig_rtol=1e-12,
                 **kw):
        super().__init__(model, X, y, sigma0, **kw)
        M, K = int(M), int(K)
        if M < 1 or K < 1:
            raise ValueError(f"M and K must be positive, got M={M}, K={K}")
        n = self.n
        M = min(M, n)
        rng = np.random.default_rng(seed)
        self.idx = np.sort(rng.choice(n, size=M, replace=False)) if M < n else np.arange(n)
        self.Xm = self.X[self.idx]
        Kmm = self.sigma0**2 * model.ntk(self.Xm)
        evals, evecs = linalg.eigh(Kmm)
        order = np.argsort(evals)[::-1]
        evals, evecs = evals[order], evecs[:, order]
        keep = evals > eig_rtol * max(evals[0], np.finfo(float).tiny)
        K = min(K, int(np.sum(keep)))
        self.M, self.K = M, K
        self.eigvals = evals[:K]
        self._proj = evecs[:, :K] / np.sqrt(evals[:K])
        self.Phi = self.features(self.X)
        G = (self.Phi * self.lam[:, None]).T @ self.Phi
        G[np.diag_indices_from(G)] += 1.0
        self.G = G
        self._L = linalg.cholesky(G, lower=True)

    def features(self, Xs) -> np.ndarray:
        """phi(Xs), shape (len(Xs), K)."""
        return (self.sigma0**2 * self.model.ntk(Xs, self.Xm)) @ self._proj

    def _quad(self, Phi):
        V = linalg.solve_triangular(self._L, Phi.T, lower=True, check_finite=False)
        return np.einsum("ij,ij->j", V, V)

    def _compute_train_var(self):
        return self._quad(self.Phi)

    def _var(self, Xs):
        return self._quad(self.features(Xs))

    def cov(self, Xs):
        V = linalg.solve_triangular(self._L, self.features(Xs).T, lower=True)
        return V.T @ V

    def _evidence_fn(self):
        loglik, tt = self._theta_term()
        eig = np.clip(linalg.eigvalsh((self.Phi * self.lam[:, None]).T @ self.Phi), 0, None)

        def fn(s0):  # features scale with sigma0^2 / sigma0 = sigma0 (phi ~ sigma0 J v)
            scale = (s0 / self.sigma0) ** 2
            return loglik - 0.5 * tt / s0**2 - 0.5 * np.sum(np.log1p(scale * eig))
        return fn


def ella_sweep(model, X, y, sigma0, Ms=(64, 256, 1024, PAPER_M), Ks=(8, 16, PAPER_K, 32, 64),
               *, reference_var=None, seed=0, **kw):
    """ELLA over a grid of (M, K) with K <= M: elpd of the cavity LOO, time, and (when the
    exact LLA training variances are given) the mean relative variance error
    mean |v_ELLA - v_LLA| / v_LLA.  Returns a list of dicts, one per setting."""
    rows = []
    for M in Ms:
        for K in Ks:
            if K > M:
                continue
            t0 = time.perf_counter()
            ella = ELLA(model, X, y, sigma0, M=M, K=K, seed=seed, **kw)
            loo = ella.loo()
            row = {"M": ella.M, "K": ella.K, "elpd_loo": loo.elpd,
                   "seconds": time.perf_counter() - t0}
            if reference_var is not None:
                ref = np.asarray(reference_var, dtype=float)
                row["rel_var_error"] = float(np.mean(np.abs(ella.train_var() - ref)
                                                     / np.maximum(ref, 1e-300)))
            rows.append(row)
    return rows
