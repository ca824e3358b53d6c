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

MCMC draws without ``lp__`` (an InferenceData built by hand, plain arrays) are checked by
their score instead: at draws of a posterior the gradient of its log density (unconstrained
scale, with the Jacobian) averages to zero, so at ~400 draws spread over the chains each
parameter's mean gradient must lie within a Bonferroni bound (family-wise 1e-6) of zero in
Monte Carlo SEs (multi-chain ESS of the mean).  A different prior or model moves that mean
by many SEs; so do chains that have not converged.  Approximate draws without ``log_p__``
cannot be checked this way (they are not posterior draws): a warning says so.

Last, ``log_lik`` must be each observation's term in the model block, since the refits leave
out the observation's data while MixIS divides by its ``log_lik``: at those draws, for a few
observations i, log p(theta | data) - log p(theta | data without i) - log_lik[i] must not
vary across draws by more than `TERM_SLACK` nats (a ``log_lik`` with another scale or a
missing term varies by far more; a constant offset is allowed).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from loo_adapt.result import observation_label
from loo_adapt.stan.leave_out import (
    TERM_SLACK,
    grouped_entry,
    outcome_entry,
    reason_by_term,
    reason_grouped,
    term_residual,
)
from loo_adapt.stan.log_density import UnsupportedProgramError

__all__ = ["ProgramMismatchError", "IdentityCheck", "check_program_matches"]

#: relative rounding of a value printed with six significant digits (Stan CSV), doubled
_PRINTED = 1e-5
#: draws of the score check (spread over every chain) and its family-wise false-alarm rate
_SCORE_DRAWS = 400
_SCORE_ALPHA = 1e-6
#: observations whose log_lik is compared with their term in the model block (how much that
#: difference may vary across draws: `loo_adapt.stan.leave_out.TERM_SLACK`)
_TERM_ROWS = 3


class ProgramMismatchError(ValueError):
    """The Stan program (or its data) is not the one that produced the draws."""


def _random_data_hint(program) -> str:
    """What to say when the program draws random numbers in transformed data: each load of
    it (the fit's, this check's, every refit's) draws other values, so no other run of it
    is the fit's model ("" when it does not)."""
    import re

    from loo_adapt.stan import stan_source as _src

    try:
        masked = _src.mask(program.stan_file.read_text(encoding="utf-8"))
        blocks = _src.blocks(masked)
    except Exception:  # noqa: BLE001 - no hint without a readable program
        return ""
    if "transformed data" not in blocks:
        return ""
    _, start, end = blocks["transformed data"]
    found = re.search(r"\b(\w+_rng)\s*\(", masked[start:end])
    if found is None:
        return ""
    return (f"; the program draws random numbers in transformed data ({found.group(1)}), so "
            "each run of it draws other values and no later run (this check, a mixture fit, a "
            "refit) is the fit's model: pass those values as data instead")


@dataclass(frozen=True)
class IdentityCheck:
    """What `check_program_matches` compared (it raises on a mismatch).

    Attributes
    ----------
    n_draws : number of draws compared (spread over every chain).
    density : "lp__", "log_p__", "score" (MCMC draws without ``lp__``: the mean gradient
        checked instead) or "" (approximate draws without ``log_p__``: not checked).
    max_density_residual : largest |(log density - lp__) - median| over the draws (NaN
        unless ``density`` is "lp__" or "log_p__").
    max_log_lik_error : largest |log_lik(program) - log_lik(fit)|.
    max_score_z : with ``density="score"``, the largest |mean gradient| in Monte Carlo SEs
        over the parameters, and ``score_bound`` the bound it had to stay within.
    log_lik_terms : observations whose ``log_lik`` was compared with their term in the
        model block, and ``max_term_residual`` the largest variation found (nats) among those
        whose data can be dropped.
    by_term_reason : None where refits drop an observation's data; else why they take its
        ``log_lik`` term out of the full-data target instead (dropping the row changes the
        other rows' terms, or the data cannot drop it, while its outcome enters only through
        ``log_lik``: `loo_adapt.stan.leave_out`).
    """

    n_draws: int
    density: str
    max_density_residual: float
    max_log_lik_error: float
    max_score_z: float = float("nan")
    score_bound: float = float("nan")
    log_lik_terms: tuple = ()
    max_term_residual: float = float("nan")
    by_term_reason: str | None = None


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
        in another shape, the log density (so the prior, the data or the model; by its
        score where the draws carry no ``lp__``), ``log_lik`` at an observation, or a
        ``log_lik`` that is not the observation's term in the model block.
    """
    name = draws.log_lik_name(var_name)
    ll_fit = draws.log_lik(var_name).reshape(draws.n_samples, -1)
    n_fit = ll_fit.shape[1]
    n_prog = program.n_obs
    if n_prog != n_fit:
        raise ProgramMismatchError(
            f"the program's data has {program.n_obs_var} = {n_prog} observations but the "
            f"fit's {name!r} has "
            f"{n_fit}: the data is not the fit's")
    try:
        density = program.log_density()
    except ImportError as err:  # a missing tool, not a fault of the program
        raise UnsupportedProgramError(
            f"the program cannot be checked against the fit without BridgeStan ({err}); "
            "install the stanli extra: pip install 'loo-adapt[stanli]'") from err
    except UnsupportedProgramError:
        raise  # no tool here runs it: says nothing about the program against the fit
    except Exception as err:  # noqa: BLE001 - a program that does not load with its data
        if any(w in str(err) for w in ("Syntax error", "Semantic error")):  # stanc's words
            raise ProgramMismatchError(
                f"the program {program.stan_file.name} does not compile: {err}") from err
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
                f"model differs from the fit's{_random_data_hint(program)}")
    score_z = bound = float("nan")
    if lp_fit is None and not draws.is_approximate:
        which = "score"
        score_z, bound = _score_check(density, draws)
    elif lp_fit is None:
        warnings.warn(
            "the approximate draws carry no log density (log_p__), so the program's prior and "
            "model could not be checked against the fit: only its log_lik was", stacklevel=3)
    # the full data's log density as the reduced data's is computed (with the Jacobian)
    lp_full = lp_prog if jacobian else density.log_density(U)
    terms, term_resid, by_term = _log_lik_terms(program, density, U, lp_full, ll_prog, name)
    return IdentityCheck(n_draws=int(rows.size), density=which,
                         max_density_residual=resid_max,
                         max_log_lik_error=float(err.max()) if err.size else 0.0,
                         max_score_z=score_z, score_bound=bound, log_lik_terms=terms,
                         max_term_residual=term_resid, by_term_reason=by_term)


def _score_check(density, draws) -> tuple[float, float]:
    """(largest |mean gradient| in MCSEs, its bound) at `_SCORE_DRAWS` draws spread over the
    chains; raises `ProgramMismatchError` beyond the bound (see the module)."""
    from scipy.stats import norm

    from loo_adapt.core.ess_split import ess_mean

    rows = _spread_rows(draws.n_chains, draws.n_draws, _SCORE_DRAWS)
    per_chain = rows.size // draws.n_chains
    U = density.unconstrain(draws, rows)
    lp, grad = density.log_density_gradient(U)
    if not (np.all(np.isfinite(lp)) and np.all(np.isfinite(grad))):
        raise ProgramMismatchError(
            "the program's log density or its gradient is not finite at draws of the fit: its "
            "prior, constraints or model are not the fit's")
    n_par = grad.shape[1]
    bound = float(norm.isf(_SCORE_ALPHA / (2.0 * max(n_par, 1))))
    if n_par == 0 or per_chain < 4:
        return float("nan"), bound
    g = grad.reshape(draws.n_chains, per_chain, n_par)
    mean = g.mean(axis=(0, 1))
    sd = g.reshape(-1, n_par).std(axis=0, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ess = np.nan_to_num(np.atleast_1d(ess_mean(g)), nan=1.0)
        se = sd / np.sqrt(np.maximum(ess, 1.0))
        z = np.where(se > 0, np.abs(mean) / np.where(se > 0, se, 1.0),
                     np.where(mean == 0, 0.0, np.inf))
    j = int(np.argmax(z))
    if z[j] > bound:
        names = (list(density.model.param_unc_names())
                 if hasattr(density.model, "param_unc_names") else [])
        label = names[j] if j < len(names) else f"unconstrained parameter {j}"
        raise ProgramMismatchError(
            f"the draws carry no lp__ to compare with the program's log density, so its "
            f"gradient was checked instead: at posterior draws it averages to zero, but for "
            f"{label} its mean is {z[j]:.3g} Monte Carlo SEs from zero (at most {bound:.2g} "
            f"for {n_par} parameters): the prior, the data or the model differs from the "
            "fit's, or the chains have not converged")
    return float(z[j]), bound


def _log_lik_terms(program, density, U, lp_full, ll_prog, name) -> tuple[tuple, float]:
    """(observations checked, largest variation) of log p(theta | data) - log p(theta | data
    without i) - log_lik[i] across the draws ``U`` (``lp_full``: the first term there), for
    `_TERM_ROWS` observations spread over the data; raises `ProgramMismatchError` beyond
    `TERM_SLACK` (see the module)."""
    n = ll_prog.shape[1]
    if n < 2:
        return (), float("nan"), None
    obs = np.unique(np.linspace(0, n - 1, min(_TERM_ROWS, n)).round().astype(int))
    checked, worst, by_term = [], 0.0, None
    for i in obs.tolist():
        try:
            reduced = program.log_density_without(i)
        except Exception as err:  # noqa: BLE001 - the data cannot drop one observation
            entry = grouped_entry(program, U, lp_full)
            if entry is not None:  # log_lik per group: its rows are checked instead
                reason = reason_grouped(entry, err)
                program.leave_out_by_term(reason)
                return (), float("nan"), reason
            warnings.warn(
                f"the program's data could not be built without observation "
                f"{observation_label([i], name)} ({type(err).__name__}: {err}), so its log_lik "
                "was not compared with the model block, and refits of it will fail the same "
                "way (StanProgram(..., obs_dim_vars=...) names the per-observation data)",
                stacklevel=4)
            break
        if reduced.n_params != density.n_params:  # parameters per observation: not comparable
            warnings.warn(
                f"the program has parameters per observation (without observation "
                f"{observation_label([i], name)} it has {reduced.n_params} unconstrained "
                f"parameters, not {density.n_params}), so its log_lik could not be compared "
                "with the model block: MixIS and the refits (which take log_lik[i] out of the "
                "target) rest on log_lik[i] being observation i's likelihood term; make sure "
                "it is", stacklevel=4)
            break
        spread = term_residual(lp_full, reduced.log_density(U), ll_prog[:, i])
        if spread is None:
            continue
        checked.append(i)
        if spread <= TERM_SLACK:
            worst = max(worst, spread)
            continue
        entry = outcome_entry(program, U, lp_full, ll_prog[:, i], i)
        if entry is None:
            raise ProgramMismatchError(
                f"the program's log_lik at observation {observation_label([i], name)} is not "
                f"that observation's term in its model block: at draws of the fit, log p(theta "
                f"| data) - log p(theta | data without it) - log_lik varies by {spread:.3g} "
                "nats across draws (a constant is allowed), and no per-observation data entry "
                "the program models as a variate (y ~ ..., normal_lpdf(y[n] | ...)), changed in "
                "that row alone, moves the target exactly as log_lik does. MixIS divides "
                "by log_lik while refits leave the observation out, so they would estimate "
                "different things: make log_lik the model's likelihood term of each "
                "observation (a likelihood, or transformed data computed from the outcomes, "
                "that couples observations cannot be left out one by one)")
        # e.g. predictors centred on their means: the row's outcome is log_lik's alone
        by_term = by_term or reason_by_term(i, entry, spread)
    if checked and len(checked) == obs.size:  # every row compared: how refits leave one out
        program.leave_out_by_term(by_term)
    return tuple(checked), (worst if checked else float("nan")), by_term
