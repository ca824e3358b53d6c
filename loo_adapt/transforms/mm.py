"""Moment matching with a step factor rho (S.37-S.41; Paananen et al. 2021, MM1/MM2).

With self-normalised importance weights ``w`` of observation i (the PSIS weights):

* MM1: ``T(theta) = theta + rho (mean_w - mean)``                       (shift, log|J| = 0)
* MM2: ``T(theta) = theta + rho (s * (theta - mean) + mean_w - theta)`` with
  ``s = sqrt(v_w / v)``, a diagonal affine map: ``log|J| = sum_a log|1 + rho (s_a - 1)|``.

Weighted variance: S.41 centres ``v_w`` on the *unweighted* mean, which adds
``(mean_w - mean)^2`` to the variance and inflates the scale exactly when the shift is
large.  Paananen et al. (and loo / arviz-stats ``shift_and_scale``) use the weighted
variance around the weighted mean, ``v_w = sum w (theta - mean_w)^2``; we use that,
with ``v`` the plain variance around the plain mean (both without Bessel factors:
loo applies S/(S-1) to both, which cancels in the ratio).  As in those references,
components whose variance is ~0 are not scaled (s = 1).  The means, variances and
weights are treated as constants of the map (they are, given the draws).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange
from scipy.special import logsumexp

_TINY_VAR = 1e-300
#: components per block of `_weighted_sq_dev` (the rows' accumulators of a block stay in cache)
_P_BLOCK = 128


@njit(parallel=True, cache=True)
def _weighted_sq_dev(theta, w, centre):
    """``out[r, p] = sum_s w[s, r] (theta[s, p] - centre[r, p])^2`` without an (S, P)
    temporary: components in blocks across threads, theta read once for all R columns."""
    n_draws, dim = theta.shape
    n_cols = w.shape[1]
    out = np.zeros((n_cols, dim))
    for b in prange((dim + _P_BLOCK - 1) // _P_BLOCK):
        p0 = b * _P_BLOCK
        p1 = min(p0 + _P_BLOCK, dim)
        for s in range(n_draws):
            for r in range(n_cols):
                ws = w[s, r]
                for p in range(p0, p1):
                    d = theta[s, p] - centre[r, p]
                    out[r, p] += ws * (d * d)
    return out


def weighted_moments(theta, log_weights):
    """Self-normalised weights and the weighted moments of many observations at once.

    Parameters
    ----------
    theta : (S, P) draws.
    log_weights : (S, R) log importance weights, one column per observation.

    Returns
    -------
    w : (S, R) normalised weights; mean_w : (R, P) weighted means; v_w : (R, P) weighted
    variances around them (no Bessel factor).

    Examples
    --------
    >>> import numpy as np
    >>> w, m, v = weighted_moments(np.array([[0.0], [2.0]]), np.log([[1.0], [3.0]]))
    >>> m, v
    (array([[1.5]]), array([[0.75]]))
    """
    theta = np.ascontiguousarray(theta, dtype=float)
    lw = np.asarray(log_weights, dtype=float)
    w = np.exp(lw - logsumexp(lw, axis=0))
    mean_w = w.T @ theta
    return w, mean_w, _weighted_sq_dev(theta, np.ascontiguousarray(w), mean_w)


class MomentMatchStep:
    """MM1 or MM2 for one observation; ``apply(rho) -> (phi (S, P), log|det J| (S,))``."""

    def __init__(self, kind: str, theta, log_weights, moments=None, weighted=None):
        if kind not in ("mm1", "mm2"):
            raise ValueError(f"kind must be 'mm1' or 'mm2', got {kind!r}")
        theta = np.asarray(theta, dtype=float)
        if theta.ndim != 2:
            raise ValueError(f"theta must be (S, P), got shape {theta.shape}")
        if log_weights is None:
            raise ValueError(f"{kind} needs log_weights= (the PSIS log weights of observation i)")
        lw = np.asarray(log_weights, dtype=float)
        if lw.shape != (theta.shape[0],):
            raise ValueError(f"log_weights must have shape ({theta.shape[0]},), got {lw.shape}")
        if np.any(np.isnan(lw)) or not np.any(np.isfinite(lw)) or np.any(lw == np.inf):
            raise ValueError("log_weights must be finite (or -inf) with at least one finite value")
        # (w, mean_w, v_w) of these log weights when computed for many observations at once
        if weighted is None:
            w = np.exp(lw - logsumexp(lw))
            mean_w = w @ theta
            v_w = None
        else:
            w, mean_w, v_w = weighted
        self.name = kind
        self.theta = theta
        self.weights = w
        # the unweighted moments are the same for every observation: reuse them when given
        self.mean, v = (theta.mean(axis=0), None) if moments is None else moments
        self.mean_w = mean_w
        if kind == "mm2":
            v = theta.var(axis=0) if v is None else v
            if v_w is None:
                v_w = _weighted_sq_dev(np.ascontiguousarray(theta), w[:, None],
                                       mean_w[None, :])[0]
            ok = (v > _TINY_VAR) & (v_w > _TINY_VAR)
            self.scale = np.ones(theta.shape[1])
            self.scale[ok] = np.sqrt(v_w[ok] / v[ok])
        else:
            self.scale = np.ones(theta.shape[1])

    def step_for_rho(self, rho: float) -> float:
        """MM steps are parameterised by rho itself."""
        rho = float(rho)
        if not np.isfinite(rho) or rho < 0:
            raise ValueError(f"rho must be finite and >= 0, got {rho}")
        return rho

    def direction(self) -> np.ndarray:
        """D with T(theta) = theta + rho D: the step is affine in rho."""
        if self.name == "mm1":
            return np.broadcast_to(self.mean_w - self.mean, self.theta.shape)
        return (self.scale - 1.0) * self.theta + (self.mean_w - self.scale * self.mean)

    def direction_affine(self):
        """(a, c) with D = theta * a + c per component (a = 0 for MM1): the direction
        without an (S, P) array."""
        a = np.zeros(self.theta.shape[1]) if self.name == "mm1" else self.scale - 1.0
        return a, self.mean_w - self.scale * self.mean

    def direction_factors(self):
        """MM1 moves every draw by the same vector: (ones, shift); MM2: None."""
        if self.name == "mm1":
            return np.ones(self.theta.shape[0]), self.mean_w - self.mean
        return None

    def log_abs_det(self, rho: float) -> np.ndarray:
        S = self.theta.shape[0]
        if self.name == "mm1":
            return np.zeros(S)
        diag = 1.0 + float(rho) * (self.scale - 1.0)
        return np.full(S, np.sum(np.log(np.abs(diag))))

    def apply(self, rho: float):
        rho = float(rho)
        if self.name == "mm1":
            return self.theta + rho * (self.mean_w - self.mean), self.log_abs_det(rho)
        diag = 1.0 + rho * (self.scale - 1.0)
        offset = rho * (self.mean_w - self.scale * self.mean)
        phi = self.theta * diag
        phi += offset
        return phi, self.log_abs_det(rho)

    def apply_rho(self, rho: float):
        return self.apply(self.step_for_rho(rho))

    def map(self, points, rho):
        """T at arbitrary points with the moments frozen (for finite-difference checks)."""
        points = np.asarray(points, dtype=float)
        rho = float(rho)
        return points + rho * (self.scale * (points - self.mean) + self.mean_w - points)


def _moments(theta, terms):
    return terms.moments(theta) if hasattr(terms, "moments") and theta is not None else None


def _weighted(theta, terms, i, log_weights):
    """Observation i's (w, mean_w, v_w) cached by `PosteriorTerms.cache_weighted_moments`
    for the same draws and log weights, else None."""
    lookup = getattr(terms, "weighted_moments", None)
    return None if lookup is None or theta is None else lookup(theta, i, log_weights)


def prepare_mm1(model=None, theta=None, hyper=None, i=None, *, log_weights=None, terms=None,
                **_ignored):
    """Prepare MM1 (shift) from the draws and observation i's log weights (``terms``, when
    given, caches the draws' unweighted moments across observations)."""
    return MomentMatchStep("mm1", theta, log_weights, moments=_moments(theta, terms),
                           weighted=_weighted(theta, terms, i, log_weights))


def prepare_mm2(model=None, theta=None, hyper=None, i=None, *, log_weights=None, terms=None,
                **_ignored):
    """Prepare MM2 (shift and marginal scale) from the draws and i's log weights (``terms``,
    when given, caches the draws' unweighted moments across observations)."""
    return MomentMatchStep("mm2", theta, log_weights, moments=_moments(theta, terms),
                           weighted=_weighted(theta, terms, i, log_weights))
