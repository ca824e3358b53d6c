"""First-order Jacobian approximation (Eq. 27): log|det J| ~= log|1 + h div Q_i|.

An explicit option for any model.  Two kinds of model are accepted:

* a :class:`~loo_adapt.models.base.SigmoidModel` family: ``Q = phi grad mu_i`` and
  ``div Q = phi tr(H_i) + grad phi . grad mu_i`` is computed exactly (the trace of the
  Hessian of mu_i is zero for logistic regression and one-layer ReLU nets);
* a :class:`CallableModel`: the log posterior and ``log l_i`` given as callables on one
  point (e.g. a BridgeStan model's ``log_density_gradient``).  With
  ``ell = log l_i`` and ``L = log pi(theta|D)``, for a binary outcome
  ``Q = psi grad ell`` where

  - KL:  ``psi = -exp(L - ell)``               (``Q = pi grad(1/l)``, Eq. 21)
  - Var: ``psi = -exp(L - 2 ell) (1 - e^ell)`` (``Q = pi r grad r``, ``r = (1 - l)/l``, Eq. 22)
  - LL:  ``psi = -1``

  and ``div Q = psi lap(ell) + grad psi . grad ell``.  The Laplacian is estimated by
  Hutchinson's estimator with Rademacher probes ``z`` and central finite-difference
  Hessian-vector products ``z . (grad ell(q + eps z) - grad ell(q - eps z)) / (2 eps)``
  (seeded).  Error of the trace per draw: Monte Carlo variance
  ``2 sum_{a != b} H_ab^2 / K`` for K probes (exactly zero when the Hessian of ell is
  diagonal), plus finite-difference error O(eps^2 |d^3 ell|) + O(1e-16 |grad ell| / eps).

Independent of how ``div Q`` is obtained, Eq. 27 itself has error O(h^2): it drops the
second- and higher-order invariants of ``grad Q`` (for logistic regression it is exact,
since ``grad Q`` has rank one and ``det(I + h grad Q) = 1 + h tr(grad Q)``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .gradient_flow import (
    _check_sd,
    log1p_abs,
    posterior_terms,
    scalar_field,
)


class CallableModel:
    """A model given as callables on one point ``q`` (1-d array of length ``dim``).

    log_density_gradient : ``q -> (log pi(q|D) + const, grad)``, e.g. BridgeStan's
        ``model.log_density_gradient`` (an object with that method is accepted too).
    log_lik_i_gradient : ``(q, i) -> (log l_i(q), grad)``.
    dim : length of q.
    """

    def __init__(self, log_density_gradient, log_lik_i_gradient: Callable, dim: int):
        if hasattr(log_density_gradient, "log_density_gradient"):
            log_density_gradient = log_density_gradient.log_density_gradient
        if not callable(log_density_gradient) or not callable(log_lik_i_gradient):
            raise TypeError("log_density_gradient and log_lik_i_gradient must be callable")
        self.log_density_gradient = log_density_gradient
        self.log_lik_i_gradient = log_lik_i_gradient
        self.dim = int(dim)

    def _eval(self, fn, q, *args):
        val, grad = fn(np.ascontiguousarray(q, dtype=float), *args)
        grad = np.asarray(grad, dtype=float)
        if grad.shape != (self.dim,):
            raise ValueError(
                f"gradient callable returned shape {grad.shape}, expected ({self.dim},)"
            )
        return float(val), grad


def hutchinson_trace(
    hvp: Callable[[np.ndarray], np.ndarray], dim: int, n_probes: int, rng: np.random.Generator
) -> float:
    """Hutchinson estimate of tr(H) from Hessian-vector products with Rademacher probes."""
    acc = 0.0
    for _ in range(n_probes):
        z = rng.choice(np.array([-1.0, 1.0]), size=dim)
        acc += float(z @ hvp(z))
    return acc / n_probes


def _psi_field(kind, L, ell):
    """log|psi| and d log|psi| / d ell (coefficient of grad ell; grad L has coefficient 1)."""
    if kind == "kl":
        return L - ell, -1.0
    if kind == "var":
        if ell >= 0.0:
            return -np.inf, 0.0
        # log(1 - e^ell) = log(-expm1(ell)); d/d ell = -1/expm1(-ell).
        return L - 2.0 * ell + np.log(-np.expm1(ell)), -2.0 - 1.0 / np.expm1(-ell)
    raise ValueError(kind)


class FirstOrderStep:
    """T = theta + h Q_i(theta) with log|det J| ~= log|1 + h div Q_i| (Eq. 27)."""

    def __init__(self, kind, theta, i, post_sd, Q, divQ, log_norm):
        self.name = f"{kind}_first_order"
        self.kind = kind
        self.theta = theta
        self.i = int(i)
        self.post_sd = post_sd
        self.Q, self.divQ, self.log_norm = Q, divQ, log_norm
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(self.Q == 0.0, 0.0, np.abs(self.Q) / self.post_sd)
        self.rate = float(ratio.max())

    @staticmethod
    def _sigmoid_field(kind, model, theta, hyper, i, terms):
        i = model._check_i(i)
        if terms is None:
            terms = posterior_terms(model, theta, hyper)
        phi, phi_g, phi_m, log_norm = scalar_field(
            kind, model, theta, hyper, i, terms.mu[:, i], terms.log_post, terms.grad_log_post
        )
        grad_mu = model.grad_linear_predictor(theta, i)
        # div(phi grad mu) = phi tr(H_i) + (phi_g grad log pi + phi_m grad mu) . grad mu
        div = phi * model.hess_trace(theta, i) + phi_m * np.einsum("sp,sp->s", grad_mu, grad_mu)
        if np.any(phi_g != 0):
            div = div + phi_g * np.einsum("sp,sp->s", terms.grad_log_post, grad_mu)
        return grad_mu * phi[:, None], div, log_norm

    @staticmethod
    def _callable_field(kind, model, theta, i, n_probes, fd_eps, seed):
        S, P = theta.shape
        if P != model.dim:
            raise ValueError(f"theta has {P} columns, the callable model has dim {model.dim}")
        if n_probes < 1:
            raise ValueError("n_probes must be >= 1")
        rng = np.random.default_rng(seed)
        grad_ell = np.empty((S, P))
        log_psi = np.zeros(S)
        dlog_coef = np.zeros(S)
        grad_L = np.empty((S, P))
        lap = np.empty(S)
        for s in range(S):
            q = theta[s]
            L, gL = model._eval(model.log_density_gradient, q)
            ell, gl = model._eval(model.log_lik_i_gradient, q, i)
            grad_L[s], grad_ell[s] = gL, gl
            if kind != "ll":
                log_psi[s], dlog_coef[s] = _psi_field(kind, L, ell)
            eps = fd_eps * max(1.0, float(np.max(np.abs(q))))

            def hvp(z, q=q, eps=eps):
                gp = model._eval(model.log_lik_i_gradient, q + eps * z, i)[1]
                gm = model._eval(model.log_lik_i_gradient, q - eps * z, i)[1]
                return (gp - gm) / (2.0 * eps)

            lap[s] = hutchinson_trace(hvp, P, n_probes, rng)
        if kind == "ll":
            psi = -np.ones(S)
            grad_psi_dot = np.zeros(S)
            log_norm = 0.0
        else:
            finite = log_psi[np.isfinite(log_psi)]
            if finite.size == 0:
                raise ValueError("the field is zero or non-finite at every draw")
            log_norm = float(finite.max())
            psi = -np.exp(log_psi - log_norm)
            # grad psi = psi (grad L + dlog_coef grad ell)
            gl_sq = np.einsum("sp,sp->s", grad_ell, grad_ell)
            grad_psi_dot = psi * (np.einsum("sp,sp->s", grad_L, grad_ell) + dlog_coef * gl_sq)
        div = psi * lap + grad_psi_dot
        return grad_ell * psi[:, None], div, log_norm

    def h_for_rho(self, rho: float) -> float:
        rho = float(rho)
        if not np.isfinite(rho) or rho < 0:
            raise ValueError(f"rho must be finite and >= 0, got {rho}")
        if self.rate == 0.0 or not np.isfinite(self.rate):
            return 0.0
        return rho / self.rate

    step_for_rho = h_for_rho

    def direction(self) -> np.ndarray:
        """D with T(theta) = theta + h D."""
        return self.Q

    def log_abs_det(self, h: float) -> np.ndarray:
        h = float(h)
        if h == 0.0:
            return np.zeros(self.theta.shape[0])
        return log1p_abs(h * self.divQ)

    def apply(self, h: float):
        h = float(h)
        phi = self.Q * h
        phi += self.theta
        return phi, self.log_abs_det(h)

    def apply_rho(self, rho: float):
        return self.apply(self.h_for_rho(rho))


def prepare_first_order(
    kind,
    model,
    theta,
    hyper,
    i,
    *,
    post_sd=None,
    terms=None,
    n_probes: int = 30,
    fd_eps: float = 1e-5,
    seed=None,
    **_ignored,
):
    """Prepare ``kind`` in ('kl', 'var', 'll') with the Eq. 27 Jacobian approximation."""
    if kind not in ("kl", "var", "ll"):
        raise ValueError(f"kind must be 'kl', 'var' or 'll', got {kind!r}")
    theta = np.asarray(theta, dtype=float)
    i = int(i)
    post_sd = _check_sd(post_sd, theta)
    if isinstance(model, CallableModel):
        field = FirstOrderStep._callable_field(kind, model, theta, i, n_probes, fd_eps, seed)
    else:
        field = FirstOrderStep._sigmoid_field(kind, model, theta, hyper, i, terms)
    return FirstOrderStep(kind, theta, i, post_sd, *field)


def callable_model_from_sigmoid(model, hyper_row=None) -> CallableModel:
    """Wrap a model family as a :class:`CallableModel` (one draw's hyper held fixed)."""
    hyper2 = None if hyper_row is None else np.asarray(hyper_row, dtype=float).reshape(1, -1)

    def log_density_gradient(q):
        q2 = q.reshape(1, -1)
        return model.log_posterior(q2, hyper2)[0], model.grad_log_posterior(q2, hyper2)[0]

    def log_lik_i_gradient(q, i):
        q2 = q.reshape(1, -1)
        mu = model.linear_predictor_i(q2, i)[0]
        from scipy.special import expit

        return model.log_lik_i(q2, i)[0], (model.y[i] - expit(mu)) * model.grad_linear_predictor(
            q2, i
        )[0]

    return CallableModel(log_density_gradient, log_lik_i_gradient, model.dim)
