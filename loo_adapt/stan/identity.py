"""Is this Stan program (with its data) the one that produced these draws?  Checked once, at
the entry of `loo()`, before any estimator uses the program (mixture fit, refits, moment
matching); an edge module (it evaluates the program through BridgeStan).

At a spread sample of the fit's draws (every chain), two things must hold:

* the program's log density (unconstrained scale, with the Jacobian) minus the fit's ``lp__``
  (``log_p__`` for approximate draws) is constant: a different prior, different data or a
  different model changes it by an amount that varies from draw to draw;
* the program's generated ``log_lik`` at those draws equals the fit's.

Both within the precision of the draws: a Stan CSV prints six significant digits, so each
comparison allows the change that a perturbation of the unconstrained parameters larger
than that rounding produces (measured at the draw itself, so no gradient is needed), plus
the printed precision of ``lp__`` / ``log_lik``.  Draws at full precision pass the same
test with room to spare; a wrong program fails it by orders of magnitude.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from loo_adapt.result import observation_label

__all__ = ["ProgramMismatchError", "IdentityCheck", "check_program_matches"]

#: relative rounding of a value printed with six significant digits (Stan CSV), doubled
_PRINTED = 1e-5


class ProgramMismatchError(ValueError):
    """The Stan program (or its data) is not the one that produced the draws."""


@dataclass(frozen=True)
class IdentityCheck:
    """What `check_program_matches` compared (it raises on a mismatch).

    Attributes
    ----------
    n_draws : number of draws compared (spread over every chain).
    density : "lp__", "log_p__" or "" (the draws carry no log density to compare).
    max_density_residual : largest |(log density - lp__) - median| over the draws.
    max_log_lik_error : largest |log_lik(program) - log_lik(fit)|.
    """

    n_draws: int
    density: str
    max_density_residual: float
    max_log_lik_error: float


def _spread_rows(n_chains: int, n_draws: int, n_check: int) -> np.ndarray:
    """Stacked (chain-major) indices of about ``n_check`` draws, evenly spread in every chain."""
    per_chain = max(2, -(-n_check // n_chains))
    per_chain = min(per_chain, n_draws)
    within = np.unique(np.linspace(0, n_draws - 1, per_chain).round().astype(int))
    return (np.arange(n_chains)[:, None] * n_draws + within[None, :]).reshape(-1)


def _fit_density(draws) -> tuple[np.ndarray | None, str]:
    if draws.is_approximate:
        lp = draws.log_p
        return (None, "") if lp is None else (np.asarray(lp, float).reshape(-1), "log_p__")
    lp = (draws.sample_stats or {}).get("lp__")
    return (None, "") if lp is None else (np.asarray(lp, float).reshape(-1), "lp__")


def check_program_matches(program, draws, *, var_name: str | None = None, n_check: int = 24,
                          seed: int = 0) -> IdentityCheck:
    """Check that ``program`` (a `loo_adapt.StanProgram`) produced ``draws``.

    Parameters
    ----------
    program : `loo_adapt.stan.program.StanProgram` (program text and data).
    draws : `loo_adapt.draws.Draws` of the fit (MCMC or an approximation).
    var_name : the pointwise log-likelihood variable of the draws.
    n_check : about how many draws to compare (spread over every chain).
    seed : seeds the perturbations that measure the draws' precision.

    Returns
    -------
    IdentityCheck

    Raises
    ------
    ProgramMismatchError
        Naming what differs: the number of observations, a parameter the fit lacks or holds
        in another shape, the log density (so the prior, the data or the model), or
        ``log_lik`` at an observation.
    """
    name = draws.log_lik_name(var_name)
    ll_fit = draws.log_lik(var_name).reshape(draws.n_samples, -1)
    n_fit = ll_fit.shape[1]
    n_prog = program.n_obs
    if n_prog != n_fit:
        raise ProgramMismatchError(
            f"the program's data has N = {n_prog} observations but the fit's {name!r} has "
            f"{n_fit}: the data is not the fit's")
    try:
        density = program.log_density()
    except ImportError as err:
        raise ProgramMismatchError(
            f"the program cannot be checked against the fit without BridgeStan ({err}); "
            "install the stanli extra: pip install 'loo-adapt[stanli]'") from err
    except Exception as err:  # noqa: BLE001 - a program that does not load with its data
        raise ProgramMismatchError(
            f"the program does not load with its data ({type(err).__name__}: {err})") from err
    if density.n_obs != n_fit:
        raise ProgramMismatchError(
            f"the program's {density.log_lik_name!r} has {density.n_obs} entries but the "
            f"fit's {name!r} has {n_fit}")
    rows = _spread_rows(draws.n_chains, draws.n_draws, n_check)
    try:
        U = density.unconstrain(draws, rows)
    except KeyError as err:
        raise ProgramMismatchError(str(err.args[0])) from err
    except ValueError as err:
        raise ProgramMismatchError(f"{err}: the data's sizes differ from the fit's") from err
    except RuntimeError as err:
        raise ProgramMismatchError(
            f"a draw of the fit violates the program's constraints ({err}): the "
            "program's parameters are not the fit's") from err
    rng = np.random.default_rng(seed)
    step = _PRINTED * np.maximum(np.abs(U), 1.0)
    jacobian = not (draws.method == "laplace" and draws.config.get("jacobian") is False)

    def lp_at(V):
        if jacobian:
            return density.log_density(V)
        return np.array([density.model.log_density(np.ascontiguousarray(v), propto=True,
                                                   jacobian=False) for v in V])

    lp_prog = lp_at(U)
    ll_prog = density.log_lik(U)
    # how much the draws' printed precision can move each quantity at each draw
    lp_slack = np.zeros(rows.size)
    ll_slack = np.zeros(ll_prog.shape)
    for _ in range(3):
        V = U + step * rng.choice((-1.0, 1.0), size=U.shape)
        with np.errstate(invalid="ignore"):
            lp_slack = np.maximum(lp_slack, np.abs(lp_at(V) - lp_prog))
            ll_slack = np.maximum(ll_slack, np.abs(density.log_lik(V) - ll_prog))
    if not np.all(np.isfinite(ll_prog)):
        s, i = np.argwhere(~np.isfinite(ll_prog))[0]
        raise ProgramMismatchError(
            f"the program's log_lik is not finite at observation "
            f"{observation_label([i], name)} for a draw of the fit: the data is not the fit's")
    ll_ref = ll_fit[rows]
    err = np.abs(ll_prog - ll_ref)
    # a perturbation that leaves the program's support measures nothing: no slack there
    tol = 3.0 * np.nan_to_num(ll_slack, nan=0.0, posinf=0.0) + _PRINTED * np.abs(ll_ref) + 1e-8
    bad = err > tol
    if bad.any():
        cols = np.flatnonzero(bad.any(axis=0))
        s = int(np.argmax(bad[:, cols[0]]))
        raise ProgramMismatchError(
            f"the program's log_lik differs from the fit's at {cols.size} of {n_fit} "
            f"observations ({observation_label(cols[:10], name)}"
            f"{', ...' if cols.size > 10 else ''}); e.g. observation {int(cols[0])}: "
            f"{ll_prog[s, cols[0]]:.6g} (program) vs {ll_ref[s, cols[0]]:.6g} (fit): the data "
            "(outcomes or predictors) or the likelihood is not the fit's")
    lp_fit, which = _fit_density(draws)
    resid_max = float("nan")
    if lp_fit is not None:
        lp_ref = lp_fit[rows]
        ok = np.isfinite(lp_ref)
        if not np.all(np.isfinite(lp_prog[ok])):
            raise ProgramMismatchError(
                "the program's log density is -inf at draws of the fit: its prior or "
                "constraints are not the fit's")
        diff = lp_ref[ok] - lp_prog[ok]
        resid = np.abs(diff - np.median(diff))
        tol = (3.0 * np.nan_to_num(lp_slack[ok], nan=0.0, posinf=0.0)
               + _PRINTED * np.abs(lp_ref[ok]) + 1e-8)
        tol = tol + np.median(tol)  # the median carries an error too
        resid_max = float(resid.max()) if resid.size else 0.0
        if np.any(resid > tol):
            j = int(np.argmax(resid - tol))
            raise ProgramMismatchError(
                f"the program's log density does not match the fit's {which}: their "
                f"difference varies across draws by up to {resid_max:.3g} (allowed "
                f"{float(tol[j]):.2g} for the draws' precision), so the prior, the data or the "
                "model differs from the fit's")
    return IdentityCheck(n_draws=int(rows.size), density=which,
                         max_density_residual=resid_max,
                         max_log_lik_error=float(err.max()) if err.size else 0.0)
