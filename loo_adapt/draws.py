"""The `Draws` container: what every reader returns and every estimator consumes.

Draws are stored per variable as arrays of shape ``(chains, draws, *stan_shape)``.
Approximate posteriors (ADVI, Laplace, Pathfinder) carry, per draw, the unnormalised
log posterior density ``log_p`` and the log density of the approximation ``log_q``,
because their importance ratios need both (Eq. 13-15 of the adaptive-IS LOO paper).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

METHODS = ("mcmc", "advi", "laplace", "pathfinder", "vifa", "other")
APPROXIMATE_METHODS = ("advi", "laplace", "pathfinder", "vifa")


@dataclass
class Draws:
    """Named posterior draws with their chain structure.

    Parameters
    ----------
    variables : dict of name -> array of shape (chains, draws, *stan_shape)
    method : one of ``METHODS``
        The draws' origin in cmdstanpy's sense: ``"mcmc"`` (NUTS), ``"advi"`` (CmdStan
        ``variational``), ``"laplace"``, ``"pathfinder"``, ``"vifa"`` (factor-analysis VI,
        `loo_adapt.laplace.vifa`), ``"other"`` (optimisation).
        Approximate methods are reweighted by p/q when used for LOO.
    log_p, log_q : (chains, draws) arrays or None
        Unnormalised log posterior and approximation log density per draw; required
        for approximate methods when they are used as an importance-sampling proposal.
    sample_stats : dict of name -> (chains, draws) arrays (``lp__``, ``divergent__``, ...)
    source : free text saying where the draws came from (file names, fit type)
    log_lik_names : tuple of str
        Variables known to be pointwise log-likelihoods (an ArviZ ``log_likelihood`` group);
        empty when the source does not say (Stan CSV), where ``log_lik`` is the convention.
    config : dict
        Settings of the run that decide how the draws may be used, as CmdStan writes them:
        ``jacobian`` (Laplace: whether ``log_p`` includes the change-of-variables term),
        ``num_paths`` and ``psis_resample`` (Pathfinder), ``algorithm`` (ADVI).

    Examples
    --------
    >>> import numpy as np
    >>> d = Draws({"log_lik": np.zeros((2, 10, 3))}, method="mcmc")
    >>> d.shape, d.log_lik().shape
    ((2, 10), (2, 10, 3))
    """

    variables: dict[str, np.ndarray]
    method: str = "mcmc"
    log_p: np.ndarray | None = None
    log_q: np.ndarray | None = None
    sample_stats: dict[str, np.ndarray] = field(default_factory=dict)
    source: str = ""
    log_lik_names: tuple[str, ...] = ()
    config: dict = field(default_factory=dict)

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
        self.log_lik_names = tuple(self.log_lik_names)
        missing = [n for n in self.log_lik_names if n not in self.variables]
        if missing:
            raise ValueError(f"log_lik_names {missing} are not variables of the draws")
        self._checked: set[str] = set()

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
        draws of an approximation q an importance-sampling proposal (Eq. 13-15).

        Refused (ValueError naming the fix) where the stored densities are not a valid
        importance ratio: Laplace draws written with ``jacobian=false`` (``log_p__`` lacks
        the log-Jacobian of the constraining transform, while q is a normal density on the
        unconstrained space) and multi-path Pathfinder (each draw's ``lp_approx__`` is the
        density of the single path that produced it, not of the pooled / resampled draws).

        Examples
        --------
        >>> import numpy as np
        >>> d = Draws({"log_lik": np.zeros((1, 3, 2))}, method="laplace",
        ...           log_p=np.array([[-1.0, -2.0, -3.0]]), log_q=np.zeros((1, 3)))
        >>> d.log_ratio_offset()
        array([-1., -2., -3.])
        """
        if not self.is_approximate:
            return np.zeros(self.n_samples)
        if self.log_p is None or self.log_q is None:
            raise ValueError(
                f"draws from method {self.method!r} need log_p and log_q per draw to be used "
                "as an importance-sampling proposal; read them from the Stan CSV "
                "(log_p__/log_g__, log_p__/log_q__, lp__/lp_approx__)"
            )
        if self.method == "laplace" and not _truthy(self.config.get("jacobian", True)):
            raise ValueError(
                "these Laplace draws were made with jacobian=false: log_p__ is the density "
                "without the log-Jacobian of the constraining transform, so log_p__ - log_q__ "
                "is not an importance ratio for the posterior. Rerun laplace with "
                "jacobian=True (the default), or read the draws with read_draws(..., "
                "log_jacobian=<per-draw log|det J|>) to add the missing term"
            )
        num_paths = int(float(self.config.get("num_paths", 1)))
        if self.method == "pathfinder" and num_paths > 1:
            how = ("PSIS-resampled from" if _truthy(self.config.get("psis_resample", True))
                   else "pooled from")
            raise ValueError(
                f"these Pathfinder draws were {how} {num_paths} paths: lp_approx__ is the "
                "density of the single path that produced each draw, so lp__ - lp_approx__ "
                "is not an importance ratio for them. Run pathfinder with num_paths=1 "
                "(psis_resample=False) for LOO"
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

    def log_lik_name(self, var_name: str | None = None) -> str:
        """The variable that holds the pointwise log-likelihood, as arviz chooses it.

        ``var_name`` if given; otherwise the only variable of an ArviZ ``log_likelihood``
        group, else ``log_lik``. Several log-likelihood variables and no ``var_name`` is an
        error that lists them. ``var_name="log_lik"`` (the old default) also finds a single
        log-likelihood variable of another name.

        Examples
        --------
        >>> import numpy as np
        >>> Draws({"y": np.zeros((1, 4, 2))}, log_lik_names=("y",)).log_lik_name()
        'y'
        """
        names = self.log_lik_names
        if var_name is None or (var_name == "log_lik" and var_name not in self.variables):
            if len(names) == 1:
                return names[0]
            if len(names) > 1:
                raise ValueError(
                    f"the draws hold several log-likelihood variables: pass var_name= one of "
                    f"{list(names)}"
                )
            var_name = "log_lik"
        if var_name not in self.variables:
            hint = (f"pass var_name= one of {list(names)}" if names else
                    "add `generated quantities { vector[N] log_lik; ... }` to the Stan "
                    "program, or pass var_name= naming the pointwise log-likelihood")
            raise KeyError(
                f"no pointwise log-likelihood {var_name!r} in the draws "
                f"(variables: {sorted(self.variables)}): {hint}"
            )
        return var_name

    def log_lik(self, var_name: str | None = None) -> np.ndarray:
        """Pointwise log-likelihood as (chains, draws, n), checked once per variable.

        Parameters
        ----------
        var_name : str, optional
            The log-likelihood variable (see `log_lik_name`); an observation array of any
            shape is flattened in C order to n columns.

        Returns
        -------
        ndarray of shape (chains, draws, n)

        Raises ValueError for no observations or non-finite values (NaN, +-inf: a failed
        generated-quantities evaluation, or a density that is not a log-likelihood).

        Examples
        --------
        >>> import numpy as np
        >>> Draws({"log_lik": np.zeros((1, 4, 2, 3))}).log_lik().shape
        (1, 4, 6)
        """
        name = self.log_lik_name(var_name)
        value = self.variables[name]
        if value.ndim != 3:
            value = value.reshape(value.shape[:2] + (-1,))
        if name not in self._checked:
            check_log_lik(value, f"log-likelihood {name!r} ({self.source or 'draws'})")
            self._checked.add(name)
        return value

    def __repr__(self) -> str:
        names = ", ".join(f"{k}{list(v.shape[2:])}" for k, v in list(self.variables.items())[:8])
        more = "" if len(self.variables) <= 8 else f", ... (+{len(self.variables) - 8})"
        return (
            f"Draws(method={self.method!r}, chains={self.n_chains}, draws={self.n_draws}, "
            f"variables=[{names}{more}])"
        )


def _truthy(value) -> bool:
    """CmdStan booleans: true/false, 1/0 (also Python bools)."""
    return str(value).strip().lower() in ("1", "true", "1.0")


#: largest log_lik accepted: a density of exp(1e8) is no observation's, and beyond it the
#: ratios exp(-log_lik) lose the normalising constant in float64 (a value of 1e300 made PSIS
#: report elpd_i = +0.36 where -1.24 was right).  Very negative values are legitimate (a
#: degenerate fit): in log space they give the right, flagged, estimate.
MAX_LOG_LIK = 1e8


def check_log_lik(value: np.ndarray, what: str) -> None:
    """Refuse a (chains, draws, n) log-likelihood with no observations, non-finite values or
    values too large to be one observation's log-likelihood.

    Parameters
    ----------
    value : ndarray of shape (chains, draws, n)
    what : how to name the array in the error

    Examples
    --------
    >>> check_log_lik(np.zeros((1, 3, 2)), "log_lik")
    """
    if value.shape[-1] == 0:
        raise ValueError(
            f"{what} has 0 observations (shape {value.shape}); nothing to cross-validate"
        )
    if value.shape[0] * value.shape[1] == 0:
        raise ValueError(f"{what} has no draws (shape {value.shape})")
    # two reductions and no temporary: max / min propagate NaN, so both finite and the
    # maximum in range means every value is (the detailed scan below runs only on failure)
    hi, lo = float(np.max(value)), float(np.min(value))
    if np.isfinite(hi) and np.isfinite(lo) and hi <= MAX_LOG_LIK:
        return
    finite = np.isfinite(value)
    if not finite.all():
        bad = np.argwhere(~finite)
        c, d, i = (int(k) for k in bad[0])
        kinds = {
            "NaN": int(np.isnan(value).sum()),
            "+inf": int(np.isposinf(value).sum()),
            "-inf": int(np.isneginf(value).sum()),
        }
        counts = ", ".join(f"{n} {k}" for k, n in kinds.items() if n)
        raise ValueError(
            f"{what} has non-finite values ({counts}; first at chain {c}, draw {d}, "
            f"observation {i} (0-based; Stan index {i + 1})): a log-likelihood must be finite "
            "for every draw; fix the generated quantities or drop those draws"
        )
    big = value > MAX_LOG_LIK
    if big.any():
        c, d, i = (int(k) for k in np.argwhere(big)[0])
        raise ValueError(
            f"{what} has values above {MAX_LOG_LIK:g} (e.g. "
            f"{value[c, d, i]:.3g} at chain {c}, draw {d}, observation {i} (0-based; Stan "
            f"index {i + 1})): not the log-likelihood of one observation, and LOO's "
            "importance ratios exp(-log_lik) lose all precision there; fix the generated "
            "quantities"
        )
