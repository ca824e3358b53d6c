"""The model-family protocol used by the transforms (array core).

A model family acts on ``theta`` of shape (S, P), the *transformed block* of each draw
(flat regression / network parameters), together with per-draw hyperparameters
``hyper`` (e.g. (S, D) prior scales for a hierarchical prior, or None).  All families
here are sigmoidal: ``y_i ~ Bernoulli(sigmoid(mu_i(theta)))``.

Besides values and gradients, a family exposes the Hessian of ``mu_i`` as a structured
operator through three kernels taking a per-draw scalar ``a`` (S,):

* ``hess_logdet(theta, i, a)``: ``log|det(I + a_s H_i(theta_s))|`` per draw,
* ``hess_inv_quad(theta, i, a, left, right)``: ``left_s^T (I + a_s H_i)^{-1} right_s``,
* ``hess_solve(theta, i, a, v)``: ``(I + a_s H_i)^{-1} v_s``,

which, with the matrix determinant lemma, give exact Jacobian determinants of the
gradient-flow transforms in O(P) per draw.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Protocol, runtime_checkable

import numpy as np
from scipy.special import expit


def log_sigmoid(x: np.ndarray) -> np.ndarray:
    """log(sigmoid(x)) without overflow for any finite x."""
    return -np.logaddexp(0.0, -np.asarray(x, dtype=float))


def bernoulli_logit_loglik(mu: np.ndarray, y: np.ndarray) -> np.ndarray:
    """log p(y | logit = mu) = -log(1 + exp(-(2y - 1) mu)), finite for logits of any size."""
    sign = 2.0 * np.asarray(y, dtype=float) - 1.0
    return -np.logaddexp(0.0, -sign * mu)


def check_binary_y(y) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be one-dimensional, got shape {y.shape}")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("y must contain only 0 and 1 (Bernoulli outcomes)")
    return y.astype(float)


def check_X(X, n: int | None = None) -> np.ndarray:
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-d (n, D) array, got shape {X.shape}")
    if n is not None and X.shape[0] != n:
        raise ValueError(f"X has {X.shape[0]} rows but y has {n} observations")
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains non-finite values")
    return X


@runtime_checkable
class SigmoidModelProtocol(Protocol):
    """What the transforms and the adaptive driver need from a model family."""

    n_obs: int
    dim: int
    y: np.ndarray
    hessian_is_zero: bool

    def linear_predictor(self, theta: np.ndarray) -> np.ndarray: ...  # (S, n)

    def linear_predictor_i(self, theta: np.ndarray, i: int) -> np.ndarray: ...  # (S,)

    def grad_linear_predictor(self, theta: np.ndarray, i: int) -> np.ndarray: ...  # (S, P)

    def log_lik(self, theta: np.ndarray) -> np.ndarray: ...  # (S, n)

    def log_lik_i(self, theta: np.ndarray, i: int) -> np.ndarray: ...  # (S,)

    def log_prior(self, theta: np.ndarray, hyper) -> np.ndarray: ...  # (S,)

    def grad_log_prior(self, theta: np.ndarray, hyper) -> np.ndarray: ...  # (S, P)

    def log_posterior(self, theta: np.ndarray, hyper) -> np.ndarray: ...  # (S,)

    def grad_log_posterior(self, theta: np.ndarray, hyper) -> np.ndarray: ...  # (S, P)

    def hess_logdet(self, theta: np.ndarray, i: int, a: np.ndarray) -> np.ndarray: ...

    def hess_inv_quad(self, theta, i: int, a, left, right) -> np.ndarray: ...

    def hess_solve(self, theta: np.ndarray, i: int, a, v: np.ndarray) -> np.ndarray: ...

    def hess_trace(self, theta: np.ndarray, i: int) -> np.ndarray: ...

    def theta_from_draws(self, draws) -> tuple[np.ndarray, object]: ...


class SigmoidModel(ABC):
    """Shared machinery of the Bernoulli-logit families; subclasses supply mu and priors."""

    #: True when mu_i is linear in theta (then the Hessian kernels are trivial).
    hessian_is_zero: bool = False

    def __init__(self, X, y):
        self.y = check_binary_y(y)
        self.X = check_X(X, self.y.shape[0])

    # ----------------------------------------------------------------- sizes
    @property
    def n_obs(self) -> int:
        return int(self.y.shape[0])

    @property
    @abstractmethod
    def dim(self) -> int:
        """P, the length of the transformed block."""

    @property
    @abstractmethod
    def param_names(self) -> list[str]:
        """Stan-style labels of the P block components (e.g. ``beta[3]``)."""

    # ----------------------------------------------------------------- checks
    def _check_theta(self, theta) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        if theta.ndim != 2 or theta.shape[1] != self.dim:
            raise ValueError(f"theta must have shape (S, {self.dim}), got {theta.shape}")
        return theta

    def _check_i(self, i) -> int:
        i = int(i)
        if not 0 <= i < self.n_obs:
            raise ValueError(f"observation index {i} out of range 0..{self.n_obs - 1}")
        return i

    # ----------------------------------------------------------------- model-specific
    @abstractmethod
    def linear_predictor(self, theta: np.ndarray) -> np.ndarray:
        """mu(theta), shape (S, n)."""

    @abstractmethod
    def linear_predictor_i(self, theta: np.ndarray, i: int) -> np.ndarray:
        """mu_i(theta), shape (S,)."""

    @abstractmethod
    def grad_linear_predictor(self, theta: np.ndarray, i: int) -> np.ndarray:
        """Gradient of mu_i with respect to the block, shape (S, P)."""

    @abstractmethod
    def _grad_loglik_sum(self, theta: np.ndarray, resid: np.ndarray) -> np.ndarray:
        """sum_j resid[:, j] * grad mu_j(theta), shape (S, P)."""

    @abstractmethod
    def log_prior(self, theta: np.ndarray, hyper) -> np.ndarray:
        """Log prior density of the block (conditional on hyper), shape (S,)."""

    @abstractmethod
    def grad_log_prior(self, theta: np.ndarray, hyper) -> np.ndarray:
        """Gradient of the log prior, shape (S, P)."""

    @abstractmethod
    def theta_from_draws(self, draws) -> tuple[np.ndarray, object]:
        """(theta (S, P), hyper) from a :class:`loo_adapt.draws.Draws`."""

    # ----------------------------------------------------------------- likelihood
    def log_lik(self, theta: np.ndarray) -> np.ndarray:
        """Pointwise Bernoulli-logit log-likelihood, shape (S, n)."""
        return bernoulli_logit_loglik(self.linear_predictor(theta), self.y[None, :])

    def log_lik_i(self, theta: np.ndarray, i: int) -> np.ndarray:
        i = self._check_i(i)
        return bernoulli_logit_loglik(self.linear_predictor_i(theta, i), self.y[i])

    def log_posterior(self, theta: np.ndarray, hyper, mu: np.ndarray | None = None) -> np.ndarray:
        """Unnormalised log posterior of the block (prior given hyper + all log-likelihoods)."""
        theta = self._check_theta(theta)
        if mu is None:
            mu = self.linear_predictor(theta)
        ll = bernoulli_logit_loglik(mu, self.y[None, :]).sum(axis=1)
        return self.log_prior(theta, hyper) + ll

    def grad_log_posterior(self, theta: np.ndarray, hyper, mu: np.ndarray | None = None):
        """grad log prior + sum_j (y_j - sigmoid(mu_j)) grad mu_j, shape (S, P)."""
        theta = self._check_theta(theta)
        if mu is None:
            mu = self.linear_predictor(theta)
        resid = self.y[None, :] - expit(mu)
        return self.grad_log_prior(theta, hyper) + self._grad_loglik_sum(theta, resid)

    # ----------------------------------------------------------------- Hessian of mu_i
    def hess_logdet(self, theta: np.ndarray, i: int, a: np.ndarray) -> np.ndarray:
        """log|det(I + a_s H_i)| per draw; zero for models linear in theta."""
        return np.zeros(np.shape(theta)[0])

    def hess_inv_quad(self, theta, i: int, a, left: np.ndarray, right: np.ndarray):
        """left_s^T (I + a_s H_i)^{-1} right_s per draw."""
        return np.einsum("sp,sp->s", left, right)

    def hess_solve(self, theta: np.ndarray, i: int, a, v: np.ndarray) -> np.ndarray:
        """(I + a_s H_i)^{-1} v_s per draw, shape (S, P)."""
        return np.array(v, dtype=float, copy=True)

    def hess_trace(self, theta: np.ndarray, i: int) -> np.ndarray:
        """Trace of H_i per draw (zero for logistic regression and one-layer ReLU nets)."""
        return np.zeros(np.shape(theta)[0])


def flat_draw_variable(draws, name: str) -> np.ndarray:
    """A Stan variable as (S, ...) with chains concatenated and a clear error if absent."""
    if name not in draws:
        raise KeyError(f"no variable {name!r} in the draws; available: {sorted(draws.variables)}")
    return np.asarray(draws.flat(name), dtype=float)
