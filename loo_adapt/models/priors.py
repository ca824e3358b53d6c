"""Prior specifications for the regression block of the model families.

Each prior evaluates its log density and gradient elementwise on arrays; the model
sums over components.  Hierarchical priors (the regularized horseshoe) are handled
conditionally: the transforms move the regression block only, with the
hyperparameters of each draw held fixed, so the exact prior ratio is the conditional
Gaussian ``N(beta_j | 0, (tau * lambda_tilde_j)^2)`` of that draw.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

_LOG_2PI = float(np.log(2.0 * np.pi))


def _positive(name: str, value) -> float:
    value = float(value)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return value


@dataclass(frozen=True)
class Normal:
    """Independent ``normal(loc, sd)`` prior on every component it covers."""

    sd: float
    loc: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "sd", _positive("Normal.sd", self.sd))
        object.__setattr__(self, "loc", float(self.loc))

    def logpdf(self, x: np.ndarray) -> np.ndarray:
        z = (x - self.loc) / self.sd
        return -0.5 * z * z - np.log(self.sd) - 0.5 * _LOG_2PI

    def grad(self, x: np.ndarray) -> np.ndarray:
        return -(x - self.loc) / (self.sd * self.sd)


@dataclass(frozen=True)
class StudentT:
    """Independent ``student_t(df, loc, scale)`` prior."""

    df: float
    scale: float
    loc: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "df", _positive("StudentT.df", self.df))
        object.__setattr__(self, "scale", _positive("StudentT.scale", self.scale))
        object.__setattr__(self, "loc", float(self.loc))

    def logpdf(self, x: np.ndarray) -> np.ndarray:
        nu, s = self.df, self.scale
        z = (x - self.loc) / s
        const = gammaln(0.5 * (nu + 1)) - gammaln(0.5 * nu) - 0.5 * np.log(nu * np.pi) - np.log(s)
        return const - 0.5 * (nu + 1) * np.log1p(z * z / nu)

    def grad(self, x: np.ndarray) -> np.ndarray:
        nu, s = self.df, self.scale
        d = x - self.loc
        return -(nu + 1) * d / (nu * s * s + d * d)


@dataclass(frozen=True)
class Flat:
    """Improper flat prior (Stan's default when a parameter has no sampling statement)."""

    def logpdf(self, x: np.ndarray) -> np.ndarray:
        return np.zeros_like(x, dtype=float)

    def grad(self, x: np.ndarray) -> np.ndarray:
        return np.zeros_like(x, dtype=float)


@dataclass(frozen=True)
class RegularizedHorseshoe:
    """Regularized horseshoe (Piironen & Vehtari 2017) read from the draws.

    Name the Stan variables holding either ``tau`` and ``lambda_tilde`` (the
    regularized local scales), or ``tau``, ``lam`` (raw local scales) and ``c``
    (slab scale); then ``lambda_tilde_j^2 = c^2 lam_j^2 / (c^2 + tau^2 lam_j^2)``.
    Conditionally on a draw's hyperparameters, ``beta_j ~ N(0, (tau lambda_tilde_j)^2)``.

    The hyperpriors (optional; all five make the prior complete, so that the bundled
    ``logistic_rhs`` program encodes it and mixture IS can be fitted without writing Stan):
    ``tau ~ student_t+(nu_global, 0, scale_global)``, ``lam_j ~ student_t+(nu_local, 0, 1)``,
    ``c = slab_scale * sqrt(caux)`` with ``caux ~ inv_gamma(slab_df / 2, slab_df / 2)``
    (Piironen & Vehtari 2017).  The adaptive estimators do not use them (they condition on
    each draw's hyperparameters).
    """

    tau: str = "tau"
    lambda_tilde: str | None = None
    lam: str | None = None
    c: str | None = None
    scale_global: float | None = None
    nu_global: float | None = None
    nu_local: float | None = None
    slab_scale: float | None = None
    slab_df: float | None = None

    def __post_init__(self):
        for key in ("scale_global", "nu_global", "nu_local", "slab_scale", "slab_df"):
            value = getattr(self, key)
            if value is not None:
                object.__setattr__(self, key, _positive(f"RegularizedHorseshoe.{key}", value))
        direct = self.lambda_tilde is not None
        raw = self.lam is not None or self.c is not None
        if direct == raw:
            raise ValueError(
                "RegularizedHorseshoe needs either lambda_tilde=<name> or both lam=<name> and "
                "c=<name> (Stan variable names), not both and not neither"
            )
        if raw and (self.lam is None or self.c is None):
            raise ValueError("RegularizedHorseshoe(lam=..., c=...) needs both lam and c")

    def scales_from_draws(self, draws, n_coef: int) -> np.ndarray:
        """Per-draw prior sd of each coefficient, shape (S, n_coef)."""
        tau = np.asarray(draws.flat(self.tau), dtype=float).reshape(-1)
        if self.lambda_tilde is not None:
            lt = np.asarray(draws.flat(self.lambda_tilde), dtype=float)
        else:
            lam = np.asarray(draws.flat(self.lam), dtype=float)
            c = np.asarray(draws.flat(self.c), dtype=float).reshape(-1, 1)
            # c lam / sqrt(c^2 + tau^2 lam^2) written with hypot so huge lam cannot overflow.
            lt = c * lam / np.hypot(c, tau[:, None] * lam)
        lt = lt.reshape(lt.shape[0], -1)
        if lt.shape[1] != n_coef:
            raise ValueError(
                f"horseshoe local scales have {lt.shape[1]} components, the model has "
                f"{n_coef} coefficients"
            )
        scales = tau[:, None] * lt
        if not np.all(np.isfinite(scales)) or np.any(scales <= 0):
            raise ValueError(
                "horseshoe prior scales tau * lambda_tilde must be positive and finite"
            )
        return scales
