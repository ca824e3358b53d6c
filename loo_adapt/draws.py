"""The `Draws` container: what every reader returns and every estimator consumes.

Draws are stored per variable as arrays of shape ``(chains, draws, *stan_shape)``.
Approximate posteriors (ADVI, Laplace, Pathfinder) carry, per draw, the unnormalised
log posterior density ``log_p`` and the log density of the approximation ``log_q``,
because their importance ratios need both (Eq. 13-15 of the adaptive-IS LOO paper).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

METHODS = ("mcmc", "advi", "laplace", "pathfinder", "other")
APPROXIMATE_METHODS = ("advi", "laplace", "pathfinder")


@dataclass
class Draws:
    """Named posterior draws with their chain structure.

    Attributes
    ----------
    variables : dict of name -> array of shape (chains, draws, *stan_shape)
    method : one of ``METHODS``
    log_p, log_q : (chains, draws) arrays or None
        Unnormalised log posterior and approximation log density per draw; required
        for approximate methods when they are used as an importance-sampling proposal.
    sample_stats : dict of name -> (chains, draws) arrays (``lp__``, ``divergent__``, ...)
    source : free text saying where the draws came from (file names, fit type)
    """

    variables: dict[str, np.ndarray]
    method: str = "mcmc"
    log_p: np.ndarray | None = None
    log_q: np.ndarray | None = None
    sample_stats: dict[str, np.ndarray] = field(default_factory=dict)
    source: str = ""

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if not self.variables:
            raise ValueError("Draws needs at least one variable")
        shapes = {k: np.shape(v)[:2] for k, v in self.variables.items()}
        for name, value in self.variables.items():
            if np.ndim(value) < 2:
                raise ValueError(
                    f"variable {name!r} has shape {np.shape(value)}; expected (chains, draws, ...)"
                )
        if len(set(shapes.values())) != 1:
            raise ValueError(f"variables disagree on (chains, draws): {shapes}")
        self.variables = {k: np.asarray(v, dtype=float) for k, v in self.variables.items()}
        for attr in ("log_p", "log_q"):
            value = getattr(self, attr)
            if value is not None:
                value = np.asarray(value, dtype=float)
                if value.shape != self.shape:
                    raise ValueError(f"{attr} has shape {value.shape}, draws are {self.shape}")
                setattr(self, attr, value)

    @property
    def shape(self) -> tuple[int, int]:
        """(chains, draws)."""
        return next(iter(self.variables.values())).shape[:2]

    @property
    def n_chains(self) -> int:
        return self.shape[0]

    @property
    def n_draws(self) -> int:
        """Draws per chain."""
        return self.shape[1]

    @property
    def n_samples(self) -> int:
        """Total draws, chains x draws."""
        return self.shape[0] * self.shape[1]

    @property
    def is_approximate(self) -> bool:
        return self.method in APPROXIMATE_METHODS

    def log_ratio_offset(self) -> np.ndarray:
        """Per draw, log p(theta|D) - log q(theta): zero for MCMC, the correction that makes
        draws of an approximation q an importance-sampling proposal (Eq. 13-15)."""
        if not self.is_approximate:
            return np.zeros(self.n_samples)
        if self.log_p is None or self.log_q is None:
            raise ValueError(
                f"draws from method {self.method!r} need log_p and log_q per draw to be used "
                "as an importance-sampling proposal; read them from the Stan CSV "
                "(log_p__/log_g__, log_p__/log_q__, lp__/lp_approx__)"
            )
        return (self.log_p - self.log_q).reshape(-1)

    def __contains__(self, name: str) -> bool:
        return name in self.variables

    def __getitem__(self, name: str) -> np.ndarray:
        try:
            return self.variables[name]
        except KeyError:
            raise KeyError(
                f"no variable {name!r} in the draws; available: {sorted(self.variables)}"
            ) from None

    def flat(self, name: str) -> np.ndarray:
        """Variable with chains concatenated: shape (chains * draws, *stan_shape)."""
        value = self[name]
        return value.reshape((-1,) + value.shape[2:])

    def log_lik(self, var_name: str = "log_lik") -> np.ndarray:
        """Pointwise log-likelihood as (chains, draws, n), with a clear error when absent."""
        if var_name not in self.variables:
            raise KeyError(
                f"no pointwise log-likelihood {var_name!r} in the draws "
                f"(available: {sorted(self.variables)}). Add "
                "`generated quantities { vector[N] log_lik; ... }` to the Stan program "
                "or pass var_name=."
            )
        value = self.variables[var_name]
        if value.ndim != 3:
            value = value.reshape(value.shape[:2] + (-1,))
        return value

    def __repr__(self) -> str:
        names = ", ".join(f"{k}{list(v.shape[2:])}" for k, v in list(self.variables.items())[:8])
        more = "" if len(self.variables) <= 8 else f", ... (+{len(self.variables) - 8})"
        return (
            f"Draws(method={self.method!r}, chains={self.n_chains}, draws={self.n_draws}, "
            f"variables=[{names}{more}])"
        )
