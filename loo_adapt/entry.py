"""The entry of the pipeline, in one place: what the estimators need, built and checked before
any of them runs.

`build_context` reads the draws, resolves the Stan program (given, or the bundled program of
a model family), checks once that it is the fit's (`loo_adapt.stan.identity`: the log
density against ``lp__`` and ``log_lik`` at a spread of draws) and hands the estimators a
`loo_adapt.estimators.base.Context` with the mixture sampler and the model-prior check as
functions: estimators import no readers and no Stan backends.
"""

from __future__ import annotations

import warnings

import numpy as np

from loo_adapt.draws import Draws
from loo_adapt.estimators.base import Context
from loo_adapt.estimators.mixis import MixIS
from loo_adapt.estimators.moment_match import MomentMatch
from loo_adapt.estimators.refit import Refit

__all__ = ["as_draws", "build_context", "focused_sampler", "stages_need_program"]


def as_draws(data, method=None, var_names=None) -> Draws:
    """Any supported input as `Draws` (``method`` names the draws' origin)."""
    from loo_adapt.io.readers import normalize_method, read_draws

    method = normalize_method(method)
    if isinstance(data, Draws):
        if method is not None and method != data.method:
            raise ValueError(f"method={method!r} contradicts the draws' origin "
                             f"{data.method!r}; leave method= out for Draws objects")
        return data
    return read_draws(data, method=method, var_names=var_names)


def stages_need_program(stages, *, has_mixis_draws: bool) -> bool:
    """Whether any stage will use a Stan program (mixture fit, moment matching, refits)."""
    for stage in stages:
        est = stage.estimator
        if isinstance(est, MomentMatch):
            return True
        if isinstance(est, MixIS) and not has_mixis_draws:
            return True
        if isinstance(est, Refit) and "refit_fn" not in est.options:
            return True
    return False


def _resolve_program(program, model, needed: bool):
    if program is not None or model is None or not needed:
        return program
    from loo_adapt.stan.program import StanProgram

    try:
        return StanProgram.from_model(model)
    except ValueError:
        return None


def _mixture_fn(program, mixis_draws, draws: Draws, seed: int | None, progress: bool):
    """() -> mixture draws: the given ones, or a fit of the (identity-checked) program,
    warm-started from the posterior draws when they are MCMC draws of it."""
    from loo_adapt.io.readers import read_draws

    if mixis_draws is not None:
        return lambda: read_draws(mixis_draws)
    if program is None:
        return None
    seed = 1 if seed is None else int(seed)

    def fit():
        from loo_adapt.progress import stage_progress

        with stage_progress("MixIS: fitting the mixture posterior", enabled=progress):
            return _fit_mixture(program, draws, seed)

    return fit


#: seed offset of the second full mixture fit (`Context.mixture_again_fn`)
AGAIN_SEED_OFFSET = 104729


def _mixture_again_fn(program, mixis_draws, draws: Draws, seed: int | None, progress: bool):
    """() -> a second fit of the full mixture with another seed (the package's own fits
    only: None with the user's mixis_draws or without a program)."""
    if mixis_draws is not None or program is None:
        return None
    seed = (1 if seed is None else int(seed)) + AGAIN_SEED_OFFSET

    def fit():
        from loo_adapt.progress import stage_progress

        with stage_progress("MixIS: a second fit of the mixture posterior", enabled=progress):
            return _fit_mixture(program, draws, seed)

    return fit


def _fit_mixture(program, draws: Draws, seed: int) -> Draws:
    from loo_adapt.io.readers import read_draws
    from loo_adapt.stan.mixis_program import MixisProgramError

    flagged = program.with_mixis()  # a program that cannot be flagged fails here, once
    if draws.method == "mcmc":
        try:
            return flagged.fit_mixture(draws, seed=seed)
        except MixisProgramError:
            raise
        except Exception as err:  # noqa: BLE001 - the warm start failed: a cold fit
            warnings.warn(f"the warm-started mixture fit failed ({type(err).__name__}: "
                          f"{err}); fitting the mixture from scratch", UserWarning,
                          stacklevel=5)
    return read_draws(flagged.fit(mixis=True, seed=seed))


def focused_sampler(program, draws: Draws, seed: int | None, progress: bool):
    """(rows, chains=, draws=, max_treedepth=) -> (draws of the mixture of those rows' LOO
    posteriors, "") or (None, why not): a second, warm-started fit of the program's mixis flag with
    ``mixis_rows`` (`loo_adapt.estimators.focused`)."""
    if program is None:
        return None
    from loo_adapt.estimators.focused import FOCUS_SEED_OFFSET

    seed = (1 if seed is None else int(seed)) + FOCUS_SEED_OFFSET

    def fit(rows, *, chains=None, draws=None, max_treedepth=None):
        from loo_adapt.progress import stage_progress
        from loo_adapt.stan.mixis_program import MixisProgramError, declares_mixis_rows

        try:
            flagged = program if program.declares_mixis else program.with_mixis()
        except MixisProgramError as err:
            return None, f"the program cannot take the mixis flag ({err})"
        if not declares_mixis_rows(flagged.stan_file.read_text()):
            return None, (f"{flagged.stan_file.name} declares only the mixis flag, not "
                          "mixis_n_rows / mixis_rows, so its mixture cannot be focused on "
                          "these rows")
        kw = {k: v for k, v in (("chains", chains), ("draws", draws),
                                ("max_treedepth", max_treedepth)) if v is not None}
        try:
            k = len(rows)
            with stage_progress(f"MixIS: a mixture fit focused on {k} row{'' if k == 1 else 's'}",
                                enabled=progress):
                return flagged.fit_mixture(posterior, rows=rows, seed=seed, **kw), ""
        except Exception as err:  # noqa: BLE001 - any failed fit: the rows go on to refits
            return None, f"the focused mixture fit failed ({type(err).__name__}: {err})"

    posterior = draws if draws.method == "mcmc" else None
    return fit


def _prior_check_fn(model):
    """(ctx) -> "" when the family's hierarchical prior matches the fit, else why it could
    not be checked; raises on a mismatch (`loo_adapt.stan.identity`)."""
    if model is None:
        return None

    def check(ctx) -> str:
        draws = ctx.draws
        lp = (draws.sample_stats or {}).get("lp__")
        _, hyper = model.theta_from_draws(draws)
        if hyper is None or draws.is_approximate:
            return ""  # checked in adaptive_estimate (or not applicable)
        if lp is None:
            return "the draws carry no lp__ to check the model's hierarchical prior against"
        from loo_adapt.stan.program import StanProgram

        try:  # the family's own priors, as a program (a user's program would check nothing)
            program = StanProgram.from_model(model)
        except ValueError:
            return ("the model's hierarchical prior could not be checked against the fit (no "
                    "bundled program encodes it)")
        try:
            density = program.log_density()
            lp_model = density.log_density(density.unconstrain(draws))
        except Exception as err:  # noqa: BLE001 - the draws lack the program's parameters
            return (f"the model's hierarchical prior could not be checked "
                    f"({type(err).__name__})")
        diff = np.asarray(lp, dtype=float).reshape(-1) - lp_model
        spread = float(np.max(np.abs(diff - np.median(diff))))
        if not spread <= 0.05:
            raise ValueError(
                f"the model's prior does not match the fit's: the log density of {program!r} "
                f"differs from the draws' lp__ by a non-constant amount (up to {spread:.3g}); "
                "give the model the priors (and hyperpriors) of the Stan program that produced "
                "the draws"
            )
        return ""

    return check


def build_context(data, *, stages, method=None, var_name=None, reff=None, model=None,
                  program=None, mixis_draws=None, khat_threshold=None, seed=None,
                  progress=True) -> Context:
    """Read the draws, resolve and identity-check the Stan program, and hand the estimators
    what they need.

    Parameters
    ----------
    data : anything `loo_adapt.io.read_draws` reads, or `Draws`.
    stages : the stages `loo` will run (`loo_adapt.api.plan_stages`): they decide whether
        a program is needed.
    method, var_name, reff, model, program, mixis_draws, khat_threshold, seed : as `loo`.
    progress : progress bars for the long stages.

    Returns
    -------
    Context

    Raises
    ------
    loo_adapt.stan.identity.ProgramMismatchError
        The program (or its data) is not the one that produced the draws.
    """
    only_log_lik = model is None and program is None and var_name is not None
    draws = as_draws(data, method=method, var_names=[var_name] if only_log_lik else None)
    if draws.n_samples < 2:
        what = (" (CmdStan optimize output is the posterior mode, one point)"
                if "optimize" in str(getattr(draws, "source", "") or "") else "")
        raise ValueError(
            f"the draws hold {draws.n_samples} draw{what}: leave-one-out needs draws of the "
            "posterior (sample) or of an approximation to it (variational, laplace, "
            "pathfinder)")
    needed = stages_need_program(stages, has_mixis_draws=mixis_draws is not None)
    program = _resolve_program(program, model, needed)
    if program is not None:
        from loo_adapt.stan.identity import check_program_matches

        if mixis_draws is None and any(isinstance(st.estimator, MixIS) for st in stages):
            # a program that cannot be flagged says so first, with the lines to add (its
            # log_lik may well be why: one drawn with _rng cannot match the fit's either)
            program.with_mixis()
        check_program_matches(program, draws, var_name=var_name,
                              seed=0 if seed is None else int(seed))
    runner = None
    if any(isinstance(st.estimator, Refit) for st in stages):
        from loo_adapt.stan.refit import refit_loo as runner
    return Context(draws=draws, var_name=var_name, r_eff=reff, model=model, program=program,
                   mixture_fn=_mixture_fn(program, mixis_draws, draws, seed, progress),
                   own_mixture=mixis_draws is None and program is not None,
                   refit_runner=runner,
                   focused_mixture_fn=focused_sampler(program, draws, seed, progress),
                   mixture_again_fn=_mixture_again_fn(program, mixis_draws, draws, seed,
                                                      progress),
                   prior_check_fn=_prior_check_fn(model), khat_threshold=khat_threshold,
                   seed=None if seed is None else int(seed), progress=bool(progress))
