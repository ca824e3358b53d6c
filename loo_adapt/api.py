"""The public `loo` verb: read -> PSIS -> fold over estimator stages -> the installed arviz's
ELPDData.  Which stages run is data (`plan_stages`); every estimator is in `estimators/`."""

from __future__ import annotations

import warnings

import numpy as np

from loo_adapt.advice import next_step, refit_outcomes
from loo_adapt.core.mixis import MCSE_METHODS
from loo_adapt.entry import build_context
from loo_adapt.estimators.adaptive import SELECTIONS, AdaptiveIS
from loo_adapt.estimators.arbiter import RefitArbiter
from loo_adapt.estimators.base import Context, Stage, run_stages
from loo_adapt.estimators.focused import FocusedMixIS
from loo_adapt.estimators.focused_easy import EASY_FOCUS_SHARE, FocusedEasyMixIS
from loo_adapt.estimators.mixis import POOL_KHAT, MixIS
from loo_adapt.estimators.moment_match import MomentMatch
from loo_adapt.estimators.psis import initial_result
from loo_adapt.estimators.refit import Refit
from loo_adapt.estimators.spot_check import SpotCheck
from loo_adapt.result import observation_label

__all__ = ["loo", "plan_stages", "ESTIMATORS", "FALLBACKS", "DEFAULT_TRANSFORMS",
           "ALL_TRANSFORMS"]

#: Transforms tried by default: log-likelihood descent alone is the one measured closest to
#: brute-force truth on the fixture models (benchmarks/truth.py); KL/Var barely move and
#: MM1/MM2 lower k-hat while moving the estimate away from truth.
DEFAULT_TRANSFORMS = ("ll",)
ALL_TRANSFORMS = ("kl", "var", "ll", "mm1", "mm2")
#: estimator choices of `loo(estimator=...)`
ESTIMATORS = ("auto", "psis", "adaptive", "mixis")
#: estimators that can follow, in the order given, for rows still not shown reliable
FALLBACKS = ("adaptive", "mm", "mixis", "refit")


def plan_stages(*, estimator="auto", model=None, program=None, mixis_draws=None,
                fallback=(), transforms=DEFAULT_TRANSFORMS, rho=None, selection="split",
                certify=True, jacobian="exact", mixis_max_mcse=0.1, refit_kwargs=None,
                adapt=None, mixis_pool_khat=POOL_KHAT, mixis_focus=True,
                mixis_mcse="skew", mixis_spot_checks=0,
                mixis_focus_easy="auto") -> list[Stage]:
    """The stages `loo` folds over, after plain PSIS.

    ``estimator="auto"`` follows what `benchmarks/truth.py` measures closest to brute-force
    truth: with a Stan program or mixture draws, mixture IS for every observation (with a
    program and ``mixis_focus_easy`` a focused fit over the rows it found easy,
    `loo_adapt.estimators.focused_easy.FocusedEasyMixIS`: "auto" where almost no row has a
    plain-PSIS k-hat below 1/2, True always, False never), then
    (with a program, ``mixis_focus``) one mixture fit focused on the rows whose MCSE is too
    large (`loo_adapt.estimators.focused`), a few refits that arbitrate a PSIS / MixIS
    disagreement (`loo_adapt.estimators.arbiter`), ``mixis_spot_checks`` refits that
    calibrate MixIS's MCSE (`loo_adapt.estimators.spot_check`, off by default), and
    (budgeted) refits where the MCSE is still too large; without
    them, PSIS plus adaptive IS
    accepted only where certified (`loo_adapt.estimators.certify`).  Explicit ``fallback``
    estimators run after the primary estimator, in order, on rows still not shown reliable.
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    fallback = (fallback,) if isinstance(fallback, str) else tuple(fallback or ())
    unknown = [f for f in fallback if f not in FALLBACKS]
    if unknown:
        raise ValueError(f"unknown fallback {unknown}; choose from {FALLBACKS}")
    if selection not in SELECTIONS:
        raise ValueError(f"selection must be one of {SELECTIONS}, got {selection!r}")
    if mixis_mcse not in MCSE_METHODS:
        raise ValueError(f"mixis_mcse must be one of {MCSE_METHODS}, got {mixis_mcse!r}")
    if not (isinstance(mixis_focus_easy, (bool, np.bool_)) or mixis_focus_easy == "auto"):
        raise ValueError(f"mixis_focus_easy must be 'auto', True or False, got "
                         f"{mixis_focus_easy!r}")
    has_mixture = program is not None or mixis_draws is not None
    if estimator == "auto":
        if fallback:
            estimator = "adaptive" if model is not None and adapt is not False else "psis"
        elif has_mixture:
            estimator = "mixis"
            if program is not None or (refit_kwargs or {}).get("refit_fn") is not None:
                fallback = ("refit",)
            if program is not None and mixis_focus:
                fallback = ("focused",) + fallback
        else:
            estimator = "adaptive" if model is not None and adapt is not False else "psis"
    if adapt and model is None:
        raise ValueError("adapt=True needs model= (e.g. loo_adapt.models.LogisticRegression)")
    if estimator == "psis" and adapt:
        estimator = "adaptive"
    adaptive = AdaptiveIS(transforms=tuple(transforms), rho=None if rho is None else tuple(
        np.atleast_1d(rho)), selection=selection, jacobian=jacobian, certify=certify)
    refit_opts = dict(refit_kwargs or {})
    mixis = MixIS(max_mcse=mixis_max_mcse, pool_khat=mixis_pool_khat, mcse=mixis_mcse)
    make = {
        "adaptive": lambda: Stage(adaptive),
        "mm": lambda: Stage(MomentMatch()),
        "mixis": lambda: Stage(mixis, rows="unchecked", accept="all"),
        "refit": lambda: Stage(Refit(options=refit_opts)),
        "focused": lambda: Stage(FocusedMixIS(max_mcse=mixis_max_mcse, mcse=mixis_mcse)),
    }
    stages = []
    if estimator == "adaptive":
        if model is None:
            raise ValueError("estimator='adaptive' needs model= (a loo_adapt.models family)")
        stages.append(make["adaptive"]())
    elif estimator == "mixis":
        stages.append(Stage(mixis, rows="all", accept="all"))
        if mixis_focus_easy and program is not None:  # "auto" or True (checked above)
            share = EASY_FOCUS_SHARE if isinstance(mixis_focus_easy, str) else None
            stages.append(Stage(FocusedEasyMixIS(max_mcse=mixis_max_mcse, mcse=mixis_mcse,
                                                 max_low_khat_share=share),
                                rows="all", accept="all"))
    for name in fallback:
        if name == "adaptive" and estimator == "adaptive":
            continue
        if name == "refit" and estimator == "mixis":
            if mixis_spot_checks:
                # k refits of verified MixIS rows calibrate its MCSE (`estimators.spot_check`)
                stages.append(Stage(SpotCheck(k=int(mixis_spot_checks),
                                              max_mcse=mixis_max_mcse, options=refit_opts),
                                    rows="all", accept="all"))
            # a few refits settle a PSIS / MixIS disagreement first (`estimators.arbiter`)
            stages.append(Stage(RefitArbiter(max_mcse=mixis_max_mcse, options=refit_opts),
                                accept="all"))
        stages.append(make[name]())
    return stages


def loo(
    data,
    *,
    var_name: str | None = None,
    reff=None,
    pointwise: bool = True,
    scale: str | None = None,
    method: str | None = None,
    estimator: str = "auto",
    model=None,
    program=None,
    mixis_draws=None,
    fallback=(),
    adapt: bool | None = None,
    transforms=DEFAULT_TRANSFORMS,
    rho=None,
    selection: str = "split",
    certify: bool = True,
    jacobian: str = "exact",
    khat_threshold: float | None = None,
    seed=None,
    mixis_max_mcse: float = 0.1,
    mixis_pool_khat: float | None = POOL_KHAT,
    mixis_focus: bool = True,
    mixis_mcse: str = "skew",
    mixis_spot_checks: int = 0,
    mixis_focus_easy="auto",
    refit_kwargs: dict | None = None,
    y=None,
    r_eff=None,
    progress: bool = True,
):
    """Leave-one-out cross-validation you can trust: PSIS, then estimators that can fix it.

    Parameters
    ----------
    data : Draws, cmdstanpy fit, Stan CSV path(s), InferenceData / DataTree, stanli Fit,
        dict of arrays, or an array of pointwise log-likelihood (chains, draws, n) / (S, n).
    var_name : name of the pointwise log-likelihood variable, as in arviz (needed only when
        the draws hold several).
    reff : relative efficiency (``r_eff`` is accepted too); None computes it from the chain
        structure (R loo's relative_eff of exp(log_lik)); arviz instead averages the ESS of
        the parameters.
    pointwise : keep pointwise values in the ELPDData.
    scale : "log" (elpd), "negative_log" or "deviance" (looic = -2 elpd); None follows
        arviz's ``rcParams["stats.ic_scale"]`` when it exists, else "log".
    method : origin of the draws when it cannot be detected ("mcmc", "advi", "laplace",
        "pathfinder"); draws of an approximation are corrected by p/q importance ratios.
    estimator : "auto" (default: mixture IS + refits when ``program`` or ``mixis_draws``
        is given, else PSIS with certified adaptive IS when ``model`` is given, else PSIS),
        "psis", "adaptive" or "mixis" (mixture IS for every observation).
    model : a model family (`loo_adapt.models`), needed for adaptive IS.
    program : `loo_adapt.StanProgram` (Stan program + data): mixture fit, moment matching
        and refits.
    mixis_draws : draws of the mixture posterior (else fitted from ``program``).
    fallback : estimators applied, in order, to rows still not shown reliable: "adaptive",
        "mm" (moment matching in the program's unconstrained space), "mixis", "refit".
    adapt : False disables adaptive IS even when a model is given.
    transforms, rho, selection, jacobian : see `loo_adapt.estimators.adaptive`; the default
        ``transforms=("ll",)`` and ``selection="split"`` are the settings measured closest
        to brute-force truth; ``ALL_TRANSFORMS`` and ``selection="min_khat"`` give the
        paper's rule.
    certify : accept an adapted estimate only when the checks of
        `loo_adapt.estimators.certify` pass (k-hat alone cannot see bias).
    khat_threshold : in (0, 1]; default min(1 - 1/log10 S, 0.7).
    seed : seeds every random choice (split halves, mixture fit, refits).
    mixis_max_mcse : a MixIS row is reliable when its MCSE is at most this.
    mixis_pool_khat : MixIS rows whose plain-PSIS k-hat is below this (default 1/2, where
        PSIS's Monte Carlo error can be trusted) are pooled with PSIS by inverse variance
        (two independent samples, `loo_adapt.core.pool`; method "mixis+psis") when the
        posterior fit has at least 2000 draws (`loo_adapt.estimators.mixis.POOL_MIN_DRAWS`;
        a note says so below); None keeps MixIS alone.
    mixis_focus : with a program, rows MixIS leaves above ``mixis_max_mcse`` get one more
        mixture fit focused on their leave-one-out posteriors before any refit
        (`loo_adapt.estimators.focused`); False goes straight to the refits.
    mixis_mcse : MixIS's pointwise MCSE, which ``mixis_max_mcse`` is checked against:
        "skew" (the delta method with the multi-chain ESS, widened by each row's
        skewness, `loo_adapt.core.skew.skew_inflation`; chosen on the truth suite's
        choose half), "delta" (the delta method alone) or "chains" (inflated by the
        chains' disagreement, `loo_adapt.core.mixis.chain_inflation`).
    mixis_spot_checks : with refits (a program or a ``refit_fn``), refit this many rows
        MixIS verified, drawn at random, and multiply MixIS's MCSEs by what they show
        (`loo_adapt.estimators.spot_check`; 0, the default, skips it: it costs the refits).
    mixis_focus_easy : with a program, one more mixture fit (4 x 4000 draws, fewer where
        those would take more leapfrog steps than the posterior fit, at least 4 x 2000)
        over the rows MixIS verified with a Kish ESS above 400, whose estimates replace the
        full mixture's (`loo_adapt.estimators.focused_easy.FocusedEasyMixIS`): on wide horseshoe
        fits those rows erred optimistic together with too small MCSEs.  "auto" (default)
        fits it only where fewer than 10 % of the rows have a plain-PSIS k-hat below 1/2
        (there the full mixture's easy rows erred, elsewhere they did not; about one
        posterior fit more); True always; False never.
    refit_kwargs : passed to `loo_adapt.stan.refit.refit_loo` (max_refits, max_seconds,
        n_jobs, refit_fn, chains, draws, progress, ...).
    y : observed binary outcomes, to report LOO predictive probabilities without a model.
    progress : progress bars (notebook or terminal) for the long stages: the mixture fit,
        refits, moment matching; shown only for stages that last more than a couple of
        seconds.  False silences them.

    Raises
    ------
    loo_adapt.stan.identity.ProgramMismatchError
        ``program`` (or its data) is not the one that produced the draws: checked once,
        before anything is estimated, from the log density against ``lp__`` and ``log_lik``
        at a spread of draws.

    Returns
    -------
    ELPDData
        The installed arviz's ELPDData (a subclass) with ``.loo_adapt`` (a `PointwiseLoo`
        saying per observation which estimator produced it and what verified it) and
        ``.summary()``.

    Examples
    --------
    >>> import numpy as np, loo_adapt
    >>> ll = np.random.default_rng(0).normal(-1.0, 0.1, size=(4, 500, 20))
    >>> res = loo_adapt.loo(ll)
    >>> round(float(res.loo_adapt.estimates()["elpd_loo"]), 1)
    -20.1
    """
    from loo_adapt.io.lazy import is_lazy

    if is_lazy(data):
        return _loo_lazy(data, var_name=var_name, reff=reff, scale=scale, pointwise=pointwise,
                         khat_threshold=khat_threshold,
                         unsupported=dict(model=model, adapt=adapt, method=method,
                                          fallback=fallback, y=y, program=program,
                                          mixis_draws=mixis_draws,
                                          estimator=None if estimator in ("auto", "psis")
                                          else estimator))
    from loo_adapt.evaluation.arviz import observation_layout, to_elpd_data

    if method in ("psis", "mixis"):
        warnings.warn(f"method={method!r} names the estimator: use estimator={method!r} "
                      "(method= now names the draws' origin)", FutureWarning, stacklevel=2)
        # the old meaning: "psis" adapted whenever a model was given
        estimator = "adaptive" if method == "psis" and model is not None else method
        method = None
    if r_eff is not None:
        if reff is not None:
            raise ValueError("give reff= or r_eff=, not both")
        reff = r_eff
    if not (_is_int(mixis_spot_checks) and mixis_spot_checks >= 0):
        raise ValueError(f"mixis_spot_checks must be a non-negative integer (refits), got "
                         f"{mixis_spot_checks!r}")
    if var_name is not None and not isinstance(var_name, str):
        raise TypeError(f"var_name must be the name of one log-likelihood variable (a str), "
                        f"got {var_name!r}: call loo() once per variable")
    var_name = _program_log_lik(program, var_name)
    _check_options(khat_threshold=khat_threshold, seed=seed, transforms=transforms,
                   mixis_max_mcse=mixis_max_mcse, refit_kwargs=refit_kwargs,
                   mixis_pool_khat=mixis_pool_khat, reff=reff, rho=rho)
    scale = _resolve_scale(scale)
    stages = plan_stages(
        estimator=estimator, model=model, program=program, mixis_draws=mixis_draws,
        fallback=fallback, transforms=transforms, rho=rho, selection=selection,
        certify=certify, jacobian=jacobian, mixis_max_mcse=mixis_max_mcse,
        refit_kwargs=refit_kwargs, adapt=adapt, mixis_pool_khat=mixis_pool_khat,
        mixis_focus=bool(mixis_focus), mixis_mcse=mixis_mcse,
        mixis_spot_checks=mixis_spot_checks, mixis_focus_easy=mixis_focus_easy,
    )
    if not isinstance(progress, (bool, np.bool_)):
        raise TypeError(f"progress must be True or False, got {progress!r}")
    ctx = build_context(data, stages=stages, method=method, var_name=var_name, reff=reff,
                        model=model, program=program, mixis_draws=mixis_draws,
                        khat_threshold=khat_threshold, seed=seed, progress=progress)
    draws = ctx.draws
    if y is None and model is not None:
        y = model.y
    if y is None and ctx.program is not None:
        y = ctx.program.y
    # the (S, n) log weights are written only when something reads them: the pointwise
    # output, the LOO probabilities of y, or a stage after plain PSIS
    ctx.weights = bool(pointwise) or y is not None or bool(stages)
    base = ctx.base
    if y is not None:
        ctx.y = _check_y(y, base.elpd_i.size)
    prob = ctx.psis_loo_prob
    result = initial_result(base, khat_threshold=ctx.threshold, y=ctx.y, loo_prob=prob,
                            draws=draws)
    result = run_stages(ctx, result, stages)
    _warn_block_notes(result)
    result = result.without_mcse_blocks()
    _warn_unverified(result, ctx)
    name = draws.log_lik_name(var_name)
    layout = observation_layout(data, name, draws.n_chains, draws.n_draws,
                                draws.variables[name].shape[2:])
    return to_elpd_data(result, scale=scale, pointwise=pointwise, layout=layout,
                        log_weights=base.log_weights, approx_posterior=draws.is_approximate)


def _program_log_lik(program, var_name):
    """The log-likelihood variable: ``var_name``, else the program's (``StanProgram(...,
    log_lik="ll")``); a ``var_name`` other than the program's is refused (the program's
    ``log_lik`` is what MixIS divides by and refits recompute)."""
    name = getattr(program, "log_lik_name", None)
    if name is None or var_name == name:
        return var_name
    if var_name is None:
        return None if name == "log_lik" else name
    raise ValueError(f"var_name={var_name!r}, but the program's pointwise log-likelihood is "
                     f"{name!r}: pass StanProgram(..., log_lik={var_name!r})")


def _loo_lazy(data, *, var_name, reff, scale, pointwise, khat_threshold, unsupported):
    """Plain PSIS-LOO of a lazy (dask) log-likelihood, chunk by chunk of observations."""
    from loo_adapt.evaluation.arviz import to_elpd_data
    from loo_adapt.io.lazy import psis_loo_lazy

    given = [k for k, v in unsupported.items() if v not in (None, (), False)]
    if given:
        raise ValueError(f"a lazy (dask) log-likelihood gets plain PSIS-LOO only: drop "
                         f"{', '.join(k + '=' for k in given)} or pass the computed array")
    base = psis_loo_lazy(data, var_name=var_name or "log_lik", r_eff=reff)
    result = initial_result(base, khat_threshold=khat_threshold)
    _warn_unverified(result, Context(draws=None))
    return to_elpd_data(result, scale=_resolve_scale(scale), pointwise=pointwise,
                        log_weights=None)


def _resolve_scale(scale):
    from loo_adapt.evaluation.arviz import resolve_scale

    return resolve_scale(scale)


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_))


def _is_finite_number(value) -> bool:
    return _is_number(value) and bool(np.isfinite(float(value)))


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


#: refit_kwargs entries that are numbers: name -> (test, what the error says it must be)
_REFIT_NUMBERS = {
    "max_seconds": (lambda v: _is_finite_number(v) and v > 0, "a positive number of seconds "
                    "(finite)"),
    "timeout": (lambda v: _is_finite_number(v) and v > 0, "a positive number of seconds "
                "(finite)"),
    "max_refits": (lambda v: _is_int(v) and v >= 0, "a non-negative integer"),
    "chains": (lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "draws": (lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "warmup": (lambda v: _is_int(v) and v >= 0, "a non-negative integer"),
    "seed": (lambda v: _is_int(v) and v >= 0, "a non-negative integer"),
    "n_jobs": (lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "max_rhat": (lambda v: _is_finite_number(v) and v > 1, "a finite number above 1 "
                 "(e.g. 1.01)"),
    "min_ess": (lambda v: _is_finite_number(v) and v > 0, "a positive, finite number"),
}


def _check_reff(reff) -> None:
    """``reff`` is None, a number or a 1-D array of numbers, each finite and > 0 (its length
    is checked against the data by the PSIS core); a NaN is never read as 1."""
    if reff is None:
        return
    arr = np.asarray(reff) if not isinstance(reff, (str, bytes)) else None
    if arr is None or arr.dtype.kind not in "iuf" or arr.ndim > 1 or arr.size == 0:
        raise TypeError(f"reff must be None, a positive number or a 1-D array with one "
                        f"positive number per observation, got {reff!r:.80}")
    bad = np.flatnonzero(~(np.isfinite(arr.reshape(-1)) & (arr.reshape(-1) > 0)))
    if bad.size:
        where = "" if arr.ndim == 0 else f" at observation(s) {bad[:10].tolist()}" + (
            f" (+{bad.size - 10} more)" if bad.size > 10 else "")
        first = float(arr.reshape(-1)[bad[0]])
        raise ValueError(f"reff must be finite and > 0, got {first!r}{where}; pass reff=None "
                         "to compute it from the chains")


def _check_rho(rho) -> None:
    if rho is None:
        return
    arr = np.asarray(rho) if not isinstance(rho, (str, bytes)) else None
    if (arr is None or arr.dtype.kind not in "iuf" or arr.size == 0 or arr.ndim > 1
            or not np.all(np.isfinite(arr)) or np.any(arr <= 0)):
        raise ValueError(f"rho must be a positive finite number or a non-empty 1-D sequence of "
                         f"them (step sizes), got {rho!r:.80}")


def _check_options(*, khat_threshold, seed, transforms, mixis_max_mcse, refit_kwargs,
                   mixis_pool_khat=None, reff=None, rho=None) -> None:
    """One-line errors for options of the wrong type or range (NaN, inf, a wrong shape or
    type included), before any work is done."""
    if khat_threshold is not None and not (_is_finite_number(khat_threshold)
                                           and 0 < float(khat_threshold) <= 1):
        raise ValueError(f"khat_threshold must be a number in (0, 1] (or None for the "
                         f"default min(1 - 1/log10 S, 0.7)), got {khat_threshold!r}")
    if seed is not None and not _is_int(seed):
        raise TypeError(f"seed must be an integer or None, got {seed!r}")
    if seed is not None and seed < 0:
        raise ValueError(f"seed must be a non-negative integer or None, got {seed!r}")
    if isinstance(transforms, str):
        raise TypeError(f"transforms must be a tuple of names, e.g. transforms=({transforms!r},)"
                        f", got the string {transforms!r}")
    if not (_is_finite_number(mixis_max_mcse) and float(mixis_max_mcse) > 0):
        raise ValueError(f"mixis_max_mcse must be a positive, finite number, got "
                         f"{mixis_max_mcse!r}")
    if mixis_pool_khat is not None and not (_is_finite_number(mixis_pool_khat)
                                            and 0 < float(mixis_pool_khat) <= 0.7):
        raise ValueError(f"mixis_pool_khat must be a number in (0, 0.7] (PSIS's MCSE is not "
                         f"trustworthy above) or None, got {mixis_pool_khat!r}")
    _check_reff(reff)
    _check_rho(rho)
    if refit_kwargs is not None and not isinstance(refit_kwargs, dict):
        raise TypeError(f"refit_kwargs must be a dict, got {type(refit_kwargs).__name__}")
    for key, (ok, what) in _REFIT_NUMBERS.items():
        value = (refit_kwargs or {}).get(key)
        if value is not None and not ok(value):
            raise ValueError(f"refit_kwargs[{key!r}] must be {what}, got {value!r}")


def _check_y(y, n) -> np.ndarray:
    y = np.asarray(y)
    if y.shape != (n,):
        raise ValueError(f"y has shape {y.shape}, expected ({n},)")
    if not np.isin(y, (0, 1)).all():
        raise ValueError("y must be binary (0/1) to compute LOO predictive probabilities")
    return y.astype(float)


#: leading words of a row's reason -> what the closing warning counts it as
_REASON_KINDS = (("held-out k-hat", "Pareto k-hat above the threshold"),
                 ("k-hat", "Pareto k-hat above the threshold"),
                 ("not certified", "adapted estimate not certified"),
                 ("MixIS MCSE", "MixIS MCSE too large"),
                 ("MixIS draws", "too few mixture draws"),
                 ("moment matching", "moment matching did not help"),
                 ("refit budget", "outside the refit budget"),
                 ("not converged", "refit not converged"))


def _reason_kind(reason: str) -> str:
    for head, kind in _REASON_KINDS:
        if reason.startswith(head):
            return kind
    return reason.split(":")[0] or "not verified"


def _warn_block_notes(result) -> None:
    """Warn with the block notes that ask for it and still hold (a later stage did not
    re-estimate every row of their fit: `PointwiseLoo.live_block_notes`)."""
    for text, warn in result.live_block_notes():
        if warn:
            warnings.warn(text, UserWarning, stacklevel=3)


def _warn_unverified(result, ctx) -> None:
    bad = np.flatnonzero(result.unreliable)
    if bad.size == 0:
        return
    kinds: dict[str, int] = {}
    for why in result.reason[bad]:  # the last of the reasons joined by "; " (add_reason)
        kind = _reason_kind(str(why).split("; ")[-1].strip())
        kinds[kind] = kinds.get(kind, 0) + 1
    counts = "; ".join(f"{v} x {k}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]))
    had_program = ctx.program is not None or ctx.mixture_fn is not None
    n_failed = int(np.sum(refit_outcomes(result)[bad] == "failed"))
    hint = next_step(had_program=had_program, n_unverified=bad.size - n_failed,
                     n_failed=n_failed)
    rows = observation_label(bad, ctx.var_name or "log_lik")
    warnings.warn(
        f"{bad.size} of {result.n_obs} observations have no verified estimate ({counts}); "
        f"observations (0-based, Stan index in brackets): {rows}; {hint}",
        UserWarning, stacklevel=3,
    )
