"""Shared machinery of the gradient-flow transforms (KL, Var, LL) with exact Jacobians.

All three are ``T(theta) = theta + h phi(theta) grad mu_i(theta)`` with a scalar field
``phi`` (Eq. 18, 29-30 and the LL descent of Elvira et al.):

* KL  (Eq. 21/23/29): ``phi = (-1)^{y_i} pi(theta|D) exp(mu_i (1 - 2 y_i))``
* Var (Eq. 22/24/30): ``phi = (-1)^{y_i} pi(theta|D) exp(2 mu_i (1 - 2 y_i))``
* LL:                 ``phi = sigmoid(mu_i) - y_i``  (``T = theta - h grad log l_i``)

so ``J = I + h phi H_i + h grad mu_i (grad phi)^T`` and, by the matrix determinant lemma,
``det J = det(I + h phi H_i) * (1 + h (grad phi)^T (I + h phi H_i)^{-1} grad mu_i)``
(Eq. 32-36; S.2.1.2 for the ReLU net).  ``grad phi = phi_g grad log pi + phi_m grad mu_i``
with per-draw scalars (KL/Var: ``phi_g = phi``, ``phi_m = m (1 - 2 y_i) phi``; LL:
``phi_g = 0``, ``phi_m = sigmoid'(mu_i)``).

``pi(theta|D)`` and the ``exp(m mu_i (1 - 2 y_i))`` factor are evaluated in log space
relative to the maximum of ``log|phi|`` over the draws (``log_norm``); that constant,
like the unknown normaliser Z of the posterior, is absorbed into ``h`` (Eq. 23-25), so
nothing overflows.  Consequently ``h`` here is the step of the *normalised* field; use
:meth:`GradientFlowStep.h_for_rho` (Eq. 26) rather than choosing ``h`` by hand.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy.special import expit

#: Default step-size grid rho = 4^-r, r = 0..10 (Sec. 5).
DEFAULT_RHO = tuple(4.0**-r for r in range(11))


@dataclass
class PosteriorTerms:
    """Quantities shared by every observation's transform: compute once per theta.

    mu : (S, n) linear predictors; log_post : (S,) unnormalised log posterior of the
    block; grad_log_post : (S, P) its gradient; row_products : observation i ->
    ``grad_log_post @ grad mu_i`` (S,) for models whose grad mu_i is a fixed row, filled
    for many observations at once by `cache_row_products`.
    """

    mu: np.ndarray
    log_post: np.ndarray
    grad_log_post: np.ndarray
    row_products: dict = field(default_factory=dict)
    _moments: dict = field(default_factory=dict, repr=False)
    _weighted: dict = field(default_factory=dict, repr=False)

    def moments(self, theta) -> tuple[np.ndarray, np.ndarray]:
        """(mean, variance without Bessel factor) of ``theta`` over draws, computed once.

        Every observation's moment-matching step needs the same unweighted moments of the
        draws these terms were computed at; ``theta`` must be those draws.

        Examples
        --------
        >>> import numpy as np
        >>> t = PosteriorTerms(np.zeros((2, 1)), np.zeros(2), np.zeros((2, 2)))
        >>> t.moments(np.array([[0.0, 1.0], [2.0, 1.0]]))
        (array([1., 1.]), array([1., 0.]))
        """
        if self._moments.get("theta") is not theta:  # identity: the very same array
            self._moments.update(theta=theta, value=(theta.mean(axis=0), theta.var(axis=0)))
        return self._moments["value"]

    def cache_weighted_moments(self, theta, rows, log_weights) -> None:
        """Compute the moment-matching weights and weighted moments of many observations
        at once (`loo_adapt.transforms.mm.weighted_moments`: one matrix product and one
        pass over ``theta``) for `weighted_moments` to return.

        Parameters
        ----------
        theta : (S, P) the draws these terms were computed at.
        rows : (R,) observation indices.
        log_weights : (S, R) their log importance weights.

        Examples
        --------
        >>> import numpy as np
        >>> t = PosteriorTerms(np.zeros((2, 1)), np.zeros(2), np.zeros((2, 1)))
        >>> theta, lw = np.array([[0.0], [2.0]]), np.log([[1.0], [3.0]])
        >>> t.cache_weighted_moments(theta, [4], lw)
        >>> t.weighted_moments(theta, 4, lw[:, 0])[1]
        array([1.5])
        """
        from .mm import weighted_moments

        lw = np.asarray(log_weights, dtype=float)
        w, mean_w, v_w = weighted_moments(theta, lw)
        self._weighted.update(theta=theta)
        for k, i in enumerate(rows):
            self._weighted[int(i)] = (lw[:, k].copy(), (w[:, k], mean_w[k], v_w[k]))

    def weighted_moments(self, theta, i, log_weights):
        """Observation i's cached (w, mean_w, v_w) if they were computed for these very
        draws and equal log weights, else None (see `cache_weighted_moments`)."""
        hit = self._weighted.get(int(i)) if self._weighted.get("theta") is theta else None
        if hit is None or not np.array_equal(hit[0], log_weights):
            return None
        return hit[1]

    def cache_row_products(self, rows, grad_rows) -> None:
        """Store ``grad_log_post @ grad_rows[k]`` for observation ``rows[k]`` (one product).

        Parameters
        ----------
        rows : (R,) observation indices.
        grad_rows : (R, P) the fixed gradient row of mu_i of each (e.g. design rows).

        Examples
        --------
        >>> import numpy as np
        >>> t = PosteriorTerms(np.zeros((2, 1)), np.zeros(2), np.ones((2, 3)))
        >>> t.cache_row_products([0], np.array([[1.0, 2.0, 3.0]]))
        >>> t.row_products[0]
        array([6., 6.])
        """
        prod = self.grad_log_post @ np.asarray(grad_rows, dtype=float).T
        for k, i in enumerate(rows):
            self.row_products[int(i)] = prod[:, k]


def posterior_terms(model, theta: np.ndarray, hyper) -> PosteriorTerms:
    """mu, log posterior and its gradient at every draw (O(S n P), do it once)."""
    theta = np.asarray(theta, dtype=float)
    mu = model.linear_predictor(theta)
    return PosteriorTerms(
        mu=mu,
        log_post=model.log_posterior(theta, hyper, mu=mu),
        grad_log_post=model.grad_log_posterior(theta, hyper, mu=mu),
    )


def log1p_abs(x: np.ndarray) -> np.ndarray:
    """log|1 + x|, accurate for tiny x (log1p) and defined for x < -1."""
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log1p(x)  # exact to rounding for every x > -1
        flipped = ~(x > -1.0)
        if flipped.any():
            out = np.where(flipped, np.log(np.abs(1.0 + x)), out)
        return out


def posterior_sd(theta: np.ndarray) -> np.ndarray:
    """Marginal posterior sd of each block component (ddof = 1), as Eq. 26 needs."""
    theta = np.asarray(theta, dtype=float)
    if theta.shape[0] < 2:
        raise ValueError("need at least 2 draws to estimate posterior standard deviations")
    return theta.std(axis=0, ddof=1)


def _check_sd(post_sd, theta) -> np.ndarray:
    if post_sd is None:
        return posterior_sd(theta)
    sd = np.asarray(post_sd, dtype=float)
    if sd.shape != (theta.shape[1],):
        raise ValueError(f"post_sd must have shape ({theta.shape[1]},), got {sd.shape}")
    if not np.all(np.isfinite(sd)) or np.any(sd < 0):
        raise ValueError("post_sd must be finite and non-negative")
    return sd


KINDS = ("kl", "var", "ll")


def scalar_field(
    kind: str,
    model,
    theta,
    hyper,
    i: int,
    mu_i,
    log_post,
    grad_log_post,
    log_norm: float | None = None,
):
    """The field of ``kind`` at the draws: (phi, phi_g, phi_m, log_norm).

    With ``log_norm=None`` it is set to max over draws of ``log|phi|`` (KL/Var), else the
    given constant is used (to evaluate the same T at other points, e.g. in tests).
    """
    y = model.y[i]
    sign = 1.0 - 2.0 * y  # = (-1)^y for y in {0, 1}
    if kind == "ll":
        p = expit(mu_i)
        phi = p - y
        return phi, np.zeros_like(phi), p * (1.0 - p), 0.0
    if kind not in ("kl", "var"):
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    m = 1.0 if kind == "kl" else 2.0
    log_abs = log_post + m * sign * mu_i
    if log_norm is None:
        finite = log_abs[np.isfinite(log_abs)]
        if finite.size == 0:
            raise ValueError("log posterior is not finite at any draw")
        log_norm = float(finite.max())
    phi = sign * np.exp(log_abs - log_norm)
    return phi, phi, m * sign * phi, log_norm


class GradientFlowStep:
    """A gradient-flow transform for one observation, prepared once and applied per h.

    Attributes: ``name``, ``i``, ``phi`` (S,), ``grad_mu`` (S, P), ``post_sd`` (P,),
    ``log_norm`` (the constant absorbed into h), ``rate`` = max_{s,alpha}
    |phi_s grad mu_i(theta_s)_alpha| / sd_alpha.
    """

    def __init__(self, kind, model, theta, hyper, i, post_sd=None, terms=None):
        theta = np.asarray(theta, dtype=float)
        self.name = kind
        self.model = model
        self.theta = theta
        self.hyper = hyper
        self.i = i = model._check_i(i)
        if terms is None:
            terms = posterior_terms(model, theta, hyper)
        self.terms = terms
        self.post_sd = _check_sd(post_sd, theta)
        self.mu_i = terms.mu[:, i]
        self.phi, self.phi_g, self.phi_m, self.log_norm = scalar_field(
            kind, model, theta, hyper, i, self.mu_i, terms.log_post, terms.grad_log_post
        )
        # For a model whose grad mu_i is the same row at every draw (logistic regression)
        # keep that row: the step is then phi_s * row, and every O(S P) product below is a
        # matrix-vector product instead of an elementwise pass over an (S, P) copy.
        row_fn = getattr(model, "grad_linear_predictor_row", None)
        self.row = row_fn(i) if row_fn is not None else None
        if self.row is not None:
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(self.row == 0.0, 0.0, np.abs(self.row) / self.post_sd)
            self.rate = float(np.max(np.abs(self.phi)) * ratio.max())
        else:
            self._grad_mu = model.grad_linear_predictor(theta, i)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(self._grad_mu == 0.0, 0.0, np.abs(self._grad_mu) / self.post_sd)
            self.rate = float(np.max(np.abs(self.phi) * ratio.max(axis=1)))
        if model.hessian_is_zero:
            # h-independent pieces of the rank-one term, computed once.
            if self.row is not None:
                cached = terms.row_products.get(i) if hasattr(terms, "row_products") else None
                self._q_g = terms.grad_log_post @ self.row if cached is None else cached
                self._q_m = float(self.row @ self.row)
            else:
                self._q_g = np.einsum("sp,sp->s", terms.grad_log_post, self._grad_mu)
                self._q_m = np.einsum("sp,sp->s", self._grad_mu, self._grad_mu)

    @property
    def grad_mu(self) -> np.ndarray:
        """grad mu_i at every draw, (S, P)."""
        if self.row is not None:
            return np.broadcast_to(self.row, self.theta.shape)
        return self._grad_mu

    def direction_factors(self):
        """(scale (S,), row (P,)) with D = scale[:, None] * row, or None."""
        return None if self.row is None else (self.phi, self.row)

    # ------------------------------------------------------------------ step size
    def h_for_rho(self, rho: float) -> float:
        """Eq. 26: the h that moves every component at most rho posterior sds."""
        rho = float(rho)
        if not np.isfinite(rho) or rho < 0:
            raise ValueError(f"rho must be finite and >= 0, got {rho}")
        if not np.isfinite(self.rate):
            warnings.warn(
                f"{self.name} step for observation {self.i}: a component with zero posterior sd "
                "would move; using h = 0",
                RuntimeWarning,
                stacklevel=2,
            )
            return 0.0
        if self.rate == 0.0:
            return 0.0
        return rho / self.rate

    step_for_rho = h_for_rho

    # ------------------------------------------------------------------ apply
    def direction(self) -> np.ndarray:
        """D with T(theta) = theta + h D: the step is affine in h."""
        return self.grad_mu * self.phi[:, None]

    def log_abs_det(self, h: float) -> np.ndarray:
        """log|det J| (S,) for step h, without forming the transformed draws."""
        h = float(h)
        if h == 0.0:
            return np.zeros(self.theta.shape[0])
        a = h * self.phi
        m = self.model
        if m.hessian_is_zero:
            logdet_a = 0.0
            q_g, q_m = self._q_g, self._q_m
        else:
            logdet_a = m.hess_logdet(self.theta, self.i, a)
            q_g = (
                m.hess_inv_quad(self.theta, self.i, a, self.terms.grad_log_post, self.grad_mu)
                if np.any(self.phi_g != 0)
                else 0.0
            )
            q_m = m.hess_inv_quad(self.theta, self.i, a, self.grad_mu, self.grad_mu)
        x = h * (self.phi_g * q_g + self.phi_m * q_m)
        return logdet_a + log1p_abs(x)

    def apply(self, h: float) -> tuple[np.ndarray, np.ndarray]:
        """(phi (S, P), log|det J| (S,)) for step h; h = 0 gives (theta, 0) exactly."""
        h = float(h)
        phi_out = self.grad_mu * (h * self.phi)[:, None]
        phi_out += self.theta
        return phi_out, self.log_abs_det(h)

    def apply_rho(self, rho: float):
        return self.apply(self.h_for_rho(rho))

    # ------------------------------------------------------------------ reference map
    def map(self, points: np.ndarray, h: float, hyper=None) -> np.ndarray:
        """T evaluated at arbitrary points (S', P) with this step's constants frozen.

        The same function whose Jacobian ``apply`` reports; used to check it by finite
        differences.  ``hyper`` must match ``points`` (rows) for hierarchical priors.
        """
        points = np.asarray(points, dtype=float)
        terms = posterior_terms(self.model, points, hyper)
        phi, _, _, _ = scalar_field(
            self.name,
            self.model,
            points,
            hyper,
            self.i,
            terms.mu[:, self.i],
            terms.log_post,
            terms.grad_log_post,
            log_norm=self.log_norm,
        )
        return points + float(h) * phi[:, None] * self.model.grad_linear_predictor(points, self.i)


