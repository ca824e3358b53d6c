"""Bayesian logistic regression: mu_i = alpha + x_i . beta (Hessian of mu_i is zero)."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .base import SigmoidModel, flat_draw_variable
from .priors import Flat, Normal, RegularizedHorseshoe, StudentT

_SIMPLE_PRIORS = (Normal, StudentT, Flat)


@njit(parallel=True, cache=True, fastmath={"reassoc", "contract", "nsz"})
def _gaussian_change_affine(theta, centred, prec, a, c):
    """(B, C), each (S, R), of `LogisticRegression.log_prior_change_affine` for R directions
    d = theta_s * a[r] + c[r], formed one component at a time (no (S, P) temporary; each
    draw's theta, centred and prec rows are read once for all R); ``prec`` is (S, P) or
    (1, P).  Only sums and products here, so the reassociated (vectorised) sums change
    nothing but rounding."""
    n_draws, dim = theta.shape
    n_dir = a.shape[0]
    row_step = 1 if prec.shape[0] > 1 else 0
    b = np.empty((n_draws, n_dir))
    q = np.empty((n_draws, n_dir))
    for s in prange(n_draws):
        pr = prec[s * row_step]
        for r in range(n_dir):
            bs = 0.0
            qs = 0.0
            for p in range(dim):
                d = theta[s, p] * a[r, p] + c[r, p]
                bs += centred[s, p] * d
                qs += (pr[p] * d) * d
            b[s, r] = -bs
            q[s, r] = -0.5 * qs
    return b, q


class LogisticRegression(SigmoidModel):
    """Logistic regression with the block ``theta = [intercept (if any), beta_1..beta_D]``.

    Parameters
    ----------
    X : (n, D) design matrix (without the intercept column), y : (n,) 0/1 outcomes.
    coef : Stan name of the coefficient vector (shape (D,)).
    intercept : Stan name of the intercept (scalar or ``array[1] real``), or None.
    prior : ``Normal(sd)``, ``StudentT(df, scale)``, ``Flat()`` or
        ``RegularizedHorseshoe(...)`` on the coefficients. For the horseshoe the
        per-draw scales ``tau * lambda_tilde`` are the ``hyper`` of each draw.
    intercept_prior : prior on the intercept (``Normal``, ``StudentT`` or ``Flat``);
        required when ``intercept`` is given, so that the prior ratio is never dropped.
    """

    hessian_is_zero = True

    def __init__(
        self,
        X,
        y,
        coef: str = "beta",
        intercept: str | None = None,
        prior=None,
        intercept_prior=None,
    ):
        super().__init__(X, y)
        if prior is None:
            raise ValueError(
                "LogisticRegression needs prior= (Normal(sd), StudentT(df, scale), Flat() or "
                "RegularizedHorseshoe(...)): the exact weights use the prior ratio"
            )
        if not isinstance(prior, (*_SIMPLE_PRIORS, RegularizedHorseshoe)):
            raise TypeError(f"unsupported coefficient prior {prior!r}")
        if intercept is not None:
            if intercept_prior is None:
                raise ValueError(
                    f"intercept={intercept!r} needs intercept_prior= (e.g. Normal(5.0), or Flat() "
                    "if the Stan program puts no prior on it)"
                )
            if not isinstance(intercept_prior, _SIMPLE_PRIORS):
                raise TypeError(f"unsupported intercept prior {intercept_prior!r}")
        elif intercept_prior is not None:
            raise ValueError("intercept_prior given but intercept=None")
        self.coef = coef
        self.intercept = intercept
        self.prior = prior
        self.intercept_prior = intercept_prior
        self.has_intercept = intercept is not None
        self.n_coef = self.X.shape[1]
        # The design of the block: a column of ones for the intercept first.
        if self.has_intercept:
            self.design = np.hstack([np.ones((self.n_obs, 1)), self.X])
        else:
            self.design = self.X.copy()
        self._k0 = 1 if self.has_intercept else 0

    @property
    def hierarchical(self) -> bool:
        return isinstance(self.prior, RegularizedHorseshoe)

    @property
    def dim(self) -> int:
        return self.n_coef + self._k0

    @property
    def param_names(self) -> list[str]:
        names = [self.intercept] if self.has_intercept else []
        return names + [f"{self.coef}[{j + 1}]" for j in range(self.n_coef)]

    # ----------------------------------------------------------------- mu
    def linear_predictor(self, theta):
        theta = self._check_theta(theta)
        return theta @ self.design.T

    def linear_predictor_affine(self, theta, a, c):
        """Linear predictors of the direction D = theta * a + c (a, c per component,
        (P,) each) without forming D: ``theta @ (design * a).T + design @ c``, (S, n).
        With a, c of shape (R, P), the R directions in one matrix product: (S, R, n).

        Examples
        --------
        >>> import numpy as np
        >>> from loo_adapt.models import LogisticRegression, Normal
        >>> m = LogisticRegression(np.eye(2), [0, 1], prior=Normal(1.0))
        >>> m.linear_predictor_affine(np.ones((1, 2)), np.array([2.0, 0.0]), np.ones(2))
        array([[3., 1.]])
        """
        theta = self._check_theta(theta)
        a, c = np.asarray(a, dtype=float), np.asarray(c, dtype=float)
        if a.ndim == 1:
            return theta @ (self.design * a).T + self.design @ c
        rows = (self.design[None, :, :] * a[:, None, :]).reshape(-1, self.dim)
        out = theta @ rows.T + (c @ self.design.T).reshape(-1)
        return out.reshape(theta.shape[0], a.shape[0], self.n_obs)

    def linear_predictor_i(self, theta, i):
        theta = self._check_theta(theta)
        return theta @ self.design[self._check_i(i)]

    def grad_linear_predictor(self, theta, i):
        theta = self._check_theta(theta)
        row = self.design[self._check_i(i)]
        return np.broadcast_to(row, theta.shape).copy()

    def grad_linear_predictor_row(self, i):
        """grad mu_i, identical at every draw: the design row of observation i, (P,)."""
        return self.design[self._check_i(i)]

    def _grad_loglik_sum(self, theta, resid):
        return resid @ self.design

    # ----------------------------------------------------------------- prior
    def _check_hyper(self, theta, hyper):
        if self.hierarchical:
            if hyper is None:
                raise ValueError(
                    "the horseshoe prior needs hyper = per-draw coefficient scales (S, D); "
                    "get it from theta_from_draws"
                )
            hyper = np.asarray(hyper, dtype=float)
            if hyper.shape != (theta.shape[0], self.n_coef):
                raise ValueError(
                    f"hyper must have shape {(theta.shape[0], self.n_coef)}, got {hyper.shape}"
                )
            return hyper
        if hyper is not None:
            raise ValueError("this prior has no hyperparameters; pass hyper=None")
        return None

    def gaussian_prior(self, theta, hyper):
        """(prec, centred) of a Gaussian (or flat) prior on the block, or None.

        prec is (P,) or, with the horseshoe's per-draw scales, (S, P); centred is
        prec * (theta - loc), (S, P). Computed once, it makes every prior change along a
        step direction a product instead of a new pass over (S, P) temporaries.
        """
        theta = self._check_theta(theta)
        scales = self._check_hyper(theta, hyper)
        priors = [self.intercept_prior] if self.has_intercept else []
        if scales is None:
            priors = priors + [self.prior] * self.n_coef
        if any(not isinstance(p, (Normal, Flat)) for p in priors):
            return None
        prec = np.array([0.0 if isinstance(p, Flat) else 1.0 / p.sd**2 for p in priors])
        loc = np.array([0.0 if isinstance(p, Flat) else p.loc for p in priors])
        if scales is not None:
            prec = np.concatenate(
                [np.broadcast_to(prec, (theta.shape[0], prec.size)), 1.0 / scales**2], axis=1
            )
            loc = np.concatenate([loc, np.zeros(self.n_coef)])
        return prec, prec * (theta - loc)

    def prior_row_products(self, gaussian, rows):
        """(centred @ rows.T, prec @ (rows * rows).T) for many fixed rows at once.

        ``gaussian`` is `gaussian_prior`'s output and ``rows`` (R, P); the second product is
        (S, R) with the horseshoe's per-draw scales, else (R,).  Column k is what
        `log_prior_change_along` needs for factors (scale, rows[k]) (``products=``).

        Examples
        --------
        >>> import numpy as np
        >>> from loo_adapt.models import LogisticRegression, Normal
        >>> m = LogisticRegression(np.eye(2), [0, 1], prior=Normal(1.0))
        >>> g = m.gaussian_prior(np.ones((3, 2)), None)
        >>> [p.shape for p in m.prior_row_products(g, np.eye(2))]
        [(3, 2), (2,)]
        """
        prec, centred = gaussian
        rows = np.asarray(rows, dtype=float)
        return centred @ rows.T, prec @ (rows * rows).T

    def log_prior_change_along(self, theta, direction, hyper, gaussian=None, products=None):
        """(B, C) with log prior(theta + h D) - log prior(theta) = h B + h^2 C, or None.

        Exact for Gaussian (and flat) priors, including the horseshoe's conditional
        Gaussian with each draw's scales; None for Student-t priors. ``direction`` is an
        (S, P) array or factors (scale (S,), row (P,)) meaning D = scale[:, None] * row;
        ``gaussian`` is `gaussian_prior`'s output, to reuse across directions; ``products``
        is the row's column of `prior_row_products` (factors only), computed for many rows
        at once.
        """
        if gaussian is None:
            gaussian = self.gaussian_prior(theta, hyper)
        if gaussian is None:
            return None
        prec, centred = gaussian
        if isinstance(direction, tuple):
            scale, row = direction
            if products is None:
                products = self.prior_row_products(gaussian, row[None, :])
                products = (products[0][:, 0], products[1][..., 0])
            b = -scale * products[0]
            c = -0.5 * scale**2 * (products[1] if prec.ndim == 2 else float(products[1]))
            return b, c
        d = np.asarray(direction, dtype=float)
        b = -np.einsum("sp,sp->s", centred, d)
        c = -0.5 * (np.einsum("sp,sp->s", prec * d, d) if prec.ndim == 2 else (d * d) @ prec)
        return b, c

    def log_prior_change_affine(self, theta, a, c, hyper, gaussian=None):
        """`log_prior_change_along` for the direction D = theta * a + c (a, c (P,) each),
        without an (S, P) temporary; None for Student-t priors.  With a, c of shape (R, P)
        the R directions at once: B and C are then (S, R).

        Examples
        --------
        >>> import numpy as np
        >>> from loo_adapt.models import LogisticRegression, Normal
        >>> m = LogisticRegression(np.eye(2), [0, 1], prior=Normal(1.0))
        >>> m.log_prior_change_affine(np.ones((1, 2)), np.zeros(2), np.ones(2), None)
        (array([-2.]), array([-1.]))
        """
        if gaussian is None:
            gaussian = self.gaussian_prior(theta, hyper)
        if gaussian is None:
            return None
        prec, centred = gaussian
        theta = np.ascontiguousarray(self._check_theta(theta))
        a, c = np.asarray(a, dtype=float), np.asarray(c, dtype=float)
        b, q = _gaussian_change_affine(theta, np.ascontiguousarray(centred),
                                       np.atleast_2d(prec), np.atleast_2d(a), np.atleast_2d(c))
        return (b[:, 0], q[:, 0]) if a.ndim == 1 else (b, q)

    def log_prior(self, theta, hyper):
        theta = self._check_theta(theta)
        scales = self._check_hyper(theta, hyper)
        beta = theta[:, self._k0 :]
        if scales is not None:
            z = beta / scales
            lp = np.sum(-0.5 * z * z - np.log(scales), axis=1) - 0.5 * self.n_coef * np.log(
                2.0 * np.pi
            )
        else:
            lp = self.prior.logpdf(beta).sum(axis=1)
        if self.has_intercept:
            lp = lp + self.intercept_prior.logpdf(theta[:, 0])
        return lp

    def grad_log_prior(self, theta, hyper):
        theta = self._check_theta(theta)
        scales = self._check_hyper(theta, hyper)
        out = np.empty_like(theta)
        beta = theta[:, self._k0 :]
        if scales is not None:
            out[:, self._k0 :] = -beta / (scales * scales)
        else:
            out[:, self._k0 :] = self.prior.grad(beta)
        if self.has_intercept:
            out[:, 0] = self.intercept_prior.grad(theta[:, 0])
        return out

    # ----------------------------------------------------------------- edge
    def theta_from_draws(self, draws):
        beta = flat_draw_variable(draws, self.coef)
        beta = beta.reshape(beta.shape[0], -1)
        if beta.shape[1] != self.n_coef:
            raise ValueError(
                f"{self.coef!r} has {beta.shape[1]} components per draw, "
                f"X has {self.n_coef} columns"
            )
        parts = []
        if self.has_intercept:
            a = flat_draw_variable(draws, self.intercept)
            a = a.reshape(a.shape[0], -1)
            if a.shape[1] != 1:
                raise ValueError(
                    f"intercept {self.intercept!r} must be a scalar or array[1], got "
                    f"{a.shape[1]} components"
                )
            parts.append(a)
        parts.append(beta)
        theta = np.ascontiguousarray(np.hstack(parts))
        hyper = self.prior.scales_from_draws(draws, self.n_coef) if self.hierarchical else None
        return theta, hyper

    def __repr__(self):
        return (
            f"LogisticRegression(n={self.n_obs}, D={self.n_coef}, intercept={self.intercept!r}, "
            f"prior={self.prior!r})"
        )
