"""The factor-analysis Gaussian q(theta) = N(c, F F^T + Psi) of VIFA, in O(D K) memory.

With Psi = diag(psi), A = Psi^{-1} F (D x K) and M = I_K + F^T A = L L^T (one K x K
Cholesky), the matrix determinant lemma and the Woodbury identity give

    log|S| = sum_d log psi_d + log|M|,
    S^{-1} r = r / psi - A M^{-1} A^T r,    r^T S^{-1} r = sum_d r_d^2 / psi_d - |L^{-1} A^T r|^2,
    S^{-1} F = A M^{-1},                    diag(S^{-1}) = 1 / psi - rowsum((A L^{-T})^2),

so the log density of n draws costs O(n D K) and no D x D matrix is ever formed.  Draws are
reparameterised as theta = c + F h + psi^{1/2} * z with h ~ N(0, I_K), z ~ N(0, I_D).
"""

from __future__ import annotations

import numpy as np

__all__ = ["FactorGaussian"]

_LOG_2PI = float(np.log(2.0 * np.pi))


class FactorGaussian:
    """N(c, F F^T + diag(exp(log_psi))).

    Parameters
    ----------
    c : (D,) mean; F : (D, K) factor loadings; log_psi : (D,) log of the diagonal noise
        variances.

    Examples
    --------
    >>> q = FactorGaussian(np.zeros(2), np.array([[1.0], [1.0]]), np.zeros(2))
    >>> q.covariance()
    array([[2., 1.],
           [1., 2.]])
    """

    def __init__(self, c, F, log_psi):
        c = np.asarray(c, dtype=float).reshape(-1)
        F = np.asarray(F, dtype=float)
        log_psi = np.asarray(log_psi, dtype=float).reshape(-1)
        D = c.size
        if F.ndim != 2 or F.shape[0] != D:
            raise ValueError(f"F must have shape ({D}, K), got {F.shape}")
        if log_psi.shape != (D,):
            raise ValueError(f"log_psi must have shape ({D},), got {log_psi.shape}")
        for name, v in (("c", c), ("F", F), ("log_psi", log_psi)):
            if not np.all(np.isfinite(v)):
                raise ValueError(f"{name} contains non-finite values")
        self.c, self.F, self.log_psi = c, F, log_psi
        self.psi = np.exp(log_psi)
        if np.any(self.psi <= 0) or not np.all(np.isfinite(self.psi)):
            raise ValueError("exp(log_psi) under- or overflows: the diagonal variances must "
                             "be positive and finite")
        self.A = F / self.psi[:, None]
        M = F.T @ self.A
        M[np.diag_indices_from(M)] += 1.0
        # K x K factor and inverse once (numpy's LAPACK: microseconds at this size);
        # every D-sized product below is then a plain matmul
        self._L = np.linalg.cholesky(M)
        self._Linv = np.linalg.inv(self._L)
        self._G = self.A @ (self._Linv.T @ self._Linv)  # A M^{-1} = S^{-1} F

    @property
    def dim(self) -> int:
        return self.c.size

    @property
    def rank(self) -> int:
        return self.F.shape[1]

    def logdet(self) -> float:
        """log|F F^T + Psi| by the matrix determinant lemma."""
        return float(np.sum(self.log_psi) + 2.0 * np.sum(np.log(np.diag(self._L))))

    def entropy(self) -> float:
        """Differential entropy 1/2 log|S| + D/2 (1 + log 2 pi)."""
        return 0.5 * self.logdet() + 0.5 * self.dim * (1.0 + _LOG_2PI)

    def _whiten(self, R):
        """L^{-1} A^T r for the rows r of R, shape (K, n)."""
        return self._Linv @ (R @ self.A).T

    def log_density(self, theta) -> np.ndarray:
        """log N(theta; c, F F^T + Psi) of each row of ``theta`` (n, D), exactly.

        Examples
        --------
        >>> q = FactorGaussian(np.zeros(1), np.ones((1, 1)), np.zeros(1))   # N(0, 2)
        >>> bool(np.isclose(q.log_density(np.zeros(1)), -0.5 * np.log(2 * np.pi * 2), rtol=1e-14))
        True
        """
        theta = np.asarray(theta, dtype=float)
        one = theta.ndim == 1
        theta = np.atleast_2d(theta)
        if theta.shape[1] != self.dim:
            raise ValueError(f"theta must have {self.dim} columns, got shape {theta.shape}")
        R = theta - self.c
        V = self._whiten(R)
        quad = np.einsum("nd,nd->n", R * R, 1.0 / self.psi[None, :]) - np.einsum(
            "kn,kn->n", V, V)
        out = -0.5 * (quad + self.logdet() + self.dim * _LOG_2PI)
        return out[0] if one else out

    def sample(self, n, rng):
        """n reparameterised draws: (theta (n, D), h (n, K), z (n, D))."""
        h = rng.standard_normal((int(n), self.rank))
        z = rng.standard_normal((int(n), self.dim))
        return self.transform(h, z), h, z

    def transform(self, h, z):
        """theta = c + F h + psi^{1/2} z for rows of h (n, K) and z (n, D)."""
        return self.c + h @ self.F.T + z * np.sqrt(self.psi)

    def variance(self) -> np.ndarray:
        """diag(S) = rowsum(F^2) + psi."""
        return np.einsum("dk,dk->d", self.F, self.F) + self.psi

    def covariance(self) -> np.ndarray:
        """The dense D x D covariance (small problems and tests only)."""
        return self.F @ self.F.T + np.diag(self.psi)

    def inv_diag(self) -> np.ndarray:
        """diag(S^{-1}) by Woodbury."""
        return 1.0 / self.psi - np.einsum("dk,dk->d", self._G, self.A)

    def inv_F(self) -> np.ndarray:
        """S^{-1} F = A M^{-1}, (D, K)."""
        return self._G.copy()

    def entropy_grads(self):
        """Gradients of the entropy with respect to F and log_psi:
        dH/dF = S^{-1} F, dH/dlog_psi = psi * diag(S^{-1}) / 2."""
        return self.inv_F(), 0.5 * self.psi * self.inv_diag()
