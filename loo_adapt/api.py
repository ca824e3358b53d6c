"""The public `loo` verb: any draws in, the installed arviz's ELPDData out."""

from __future__ import annotations

import warnings

import numpy as np

from loo_adapt.core import psis as _psis
from loo_adapt.evaluation.arviz import to_elpd_data
from loo_adapt.io.lazy import is_lazy, psis_loo_lazy

from .draws import Draws


def _as_draws(data) -> Draws:
    if isinstance(data, Draws):
        return data
    from loo_adapt.io.readers import read_draws

    return read_draws(data)


def psis_loo(draws: Draws, *, var_name: str = "log_lik", reff=None):
    """Plain PSIS-LOO on draws; approximate posteriors are corrected by log p - log q."""
    log_lik = draws.log_lik(var_name)
    if draws.is_approximate:
        return _psis.loo_pointwise_approximate(
            log_lik.reshape(draws.n_samples, -1), draws.log_ratio_offset(),
            r_eff=1.0 if reff is None else reff,
        )
    if draws.n_chains == 1 and reff is None:
        reff = 1.0
    return _psis.loo_pointwise(log_lik, r_eff=reff)


#: Transforms tried by default: log-likelihood descent alone is the one measured closest to
#: brute-force truth on all three fixture models (benchmarks/truth.py); KL/Var barely move
#: and MM1/MM2 lower k-hat while moving the estimate away from truth.
DEFAULT_TRANSFORMS = ("ll",)
ALL_TRANSFORMS = ("kl", "var", "ll", "mm1", "mm2")
FALLBACKS = ("mm", "mixis", "refit")


def loo(
    data,
    *,
    var_name: str = "log_lik",
    reff=None,
    pointwise: bool = True,
    scale: str = "log",
    model=None,
    adapt: bool | None = None,
    transforms=DEFAULT_TRANSFORMS,
    rho=None,
    khat_threshold: float | None = None,
    selection: str = "split",
    seed=None,
    method: str = "psis",
    program=None,
    fallback=(),
    mixis_draws=None,
    mixis_max_mcse: float = 0.1,
    refit_kwargs: dict | None = None,
    y=None,
):
    """Leave-one-out cross-validation with PSIS, adaptive IS, and fallbacks you can trust.

    Parameters
    ----------
    data : Draws, cmdstanpy fit, Stan CSV path(s), InferenceData / DataTree, stanli Fit,
        dict of arrays, or an array of pointwise log-likelihood (chains, draws, n) / (S, n).
        A dask array or dask-backed xarray / arviz object is evaluated out of core, chunk by
        chunk of observations (`loo_adapt.io.lazy`; plain PSIS only).
    var_name : name of the pointwise log-likelihood variable.
    reff : relative efficiency; None computes it from the chain structure (R loo's
        relative_eff of exp(log_lik)); arviz instead averages the ESS of the parameters.
    pointwise : keep pointwise values in the ELPDData.
    scale : "log" (elpd), "negative_log" or "deviance" (looic = -2 elpd).
    model : a model family (`loo_adapt.models`), needed for adaptation.
    adapt : transform the draws of observations above the k-hat threshold; defaults to
        True when a model is given.
    transforms, rho, selection, seed : see `loo_adapt.estimators.adaptive.adapt_loo`. The default
        ``transforms=("ll",)`` and ``selection="split"`` are the settings measured closest
        to brute-force truth; pass ``ALL_TRANSFORMS`` and ``selection="min_khat"`` for the
        paper's rule.
    khat_threshold : default min(1 - 1/log10 S, 0.7).
    method : "psis" (PSIS, adapted where a model is given) or "mixis": mixture importance
        sampling (Silva & Zanella 2023) for every observation from one extra fit of the
        mixture posterior (``mixis_draws``, or fitted from ``program``); measured closest
        to brute-force truth on the fixture models, PSIS k-hat of ``data`` is kept as the
        "before" diagnostic.
    program : `loo_adapt.stan.program.StanProgram` (Stan program + data), needed by the
        fallbacks unless ``mixis_draws`` / ``refit_kwargs["refit_fn"]`` are given.
    fallback : estimators applied, in order, to observations whose estimate is still not
        shown reliable: "mm" (moment matching in the model's full unconstrained space),
        "mixis" (mixture importance sampling from one extra fit; accepted where its MCSE is
        at most ``mixis_max_mcse``), "refit" (exact refits).
    mixis_draws : draws of the mixture posterior (else fitted from ``program``).
    refit_kwargs : passed to `loo_adapt.stan.refit.refit_loo` (max_refits, max_seconds, n_jobs,
        refit_fn, chains, draws, progress, ...).
    y : observed binary outcomes, to report LOO predictive probabilities without a model.

    Returns
    -------
    The installed arviz's ELPDData (subclass) with ``.loo_adapt`` (a `PointwiseLoo` saying
    per observation which estimator produced it) and ``.summary()``.
    """
    lazy = is_lazy(data)
    draws = None if lazy else _as_draws(data)
    if lazy and (model is not None or adapt or method != "psis" or fallback or y is not None):
        raise ValueError("a lazy (dask) log-likelihood gets plain PSIS-LOO only: drop model=, "
                         "adapt=, method=, fallback= and y=, or pass the computed array")
    if adapt is None:
        adapt = model is not None
    if adapt and model is None:
        raise ValueError("adapt=True needs model= (e.g. loo_adapt.models.LogisticRegression)")
    fallback = (fallback,) if isinstance(fallback, str) else tuple(fallback or ())
    unknown = [f for f in fallback if f not in FALLBACKS]
    if unknown:
        raise ValueError(f"unknown fallback {unknown}; choose from {FALLBACKS}")
    if method not in ("psis", "mixis"):
        raise ValueError(f"method must be 'psis' or 'mixis', got {method!r}")
    if lazy:
        base = psis_loo_lazy(data, var_name=var_name, r_eff=reff)
    else:
        base = psis_loo(draws, var_name=var_name, reff=reff)
    if y is None and model is not None:
        y = model.y
    if method == "mixis":
        result = base.to_result()
        if khat_threshold is not None:
            result.khat_threshold = float(khat_threshold)
        if y is not None:
            result.y = _check_y(y, result.n_obs)
        result.reliable[:] = False
        _apply_mixis(result, program, mixis_draws, var_name, mixis_max_mcse, seed,
                     replace_all=True)
    elif adapt:
        from loo_adapt.estimators.adaptive import adapt_loo

        result = adapt_loo(
            draws,
            model,
            base=base,
            transforms=transforms,
            rho=rho,
            khat_threshold=khat_threshold,
            selection=selection,
            seed=seed,
            var_name=var_name,
        )
    else:
        result = base.to_result()
        if khat_threshold is not None:
            result.khat_threshold = float(khat_threshold)
            result.reliable = result.khat_after <= result.khat_threshold
        if y is not None:
            result.y = _check_y(y, result.n_obs)
            ll = draws.log_lik(var_name).reshape(draws.n_samples, -1)
            result.loo_prob = _loo_prob_from_log_lik(ll, base.log_weights, result.y)
    for name in fallback:
        if not np.any(result.unreliable):
            break
        if name == "mm":
            _apply_moment_matching(result, draws, program, base, var_name)
        elif name == "mixis":
            _apply_mixis(result, program, mixis_draws, var_name, mixis_max_mcse, seed)
        else:
            _apply_refit(result, program, refit_kwargs or {}, seed)
    result.p_loo = result.lpd - result.elpd_loo
    if np.any(result.unreliable):
        bad = int(np.sum(result.unreliable))
        hint = "" if fallback else (
            "; adapt them (model=) or use fallback=('mixis', 'refit') with program="
        )
        warnings.warn(
            f"{bad} of {result.n_obs} observations have Pareto k-hat above "
            f"{result.khat_threshold:.2f}: their elpd_loo estimates are unreliable{hint}",
            UserWarning,
            stacklevel=2,
        )
    log_weights = base.log_weights if not np.any(result.adapted) else None
    return to_elpd_data(result, scale=scale, pointwise=pointwise, log_weights=log_weights)


def _check_y(y, n) -> np.ndarray:
    y = np.asarray(y)
    if y.shape != (n,):
        raise ValueError(f"y has shape {y.shape}, expected ({n},)")
    if not np.isin(y, (0, 1)).all():
        raise ValueError("y must be binary (0/1) to compute LOO predictive probabilities")
    return y.astype(float)


def _loo_prob_from_log_lik(ll, log_weights, y) -> np.ndarray:
    """P(y_i = 1 | y_-i): the Bernoulli likelihood of the observed y_i gives P(y_i = 1)."""
    from loo_adapt.estimators.mixis import bernoulli_log_p1

    return np.sum(np.exp(log_weights + bernoulli_log_p1(ll, y)), axis=0)


def _need_program(program, what):
    if program is None:
        raise ValueError(
            f"fallback {what!r} needs program=loo_adapt.stan.program.StanProgram(stan_file, data)"
        )
    return program


def _apply_moment_matching(result, draws, program, base, var_name):
    from loo_adapt.estimators.moment_match import moment_match_loo

    density = _need_program(program, "mm").log_density()
    upars = density.unconstrain(draws)
    ll = draws.log_lik(var_name).reshape(draws.n_samples, -1)
    todo = np.flatnonzero(result.unreliable)
    mm = moment_match_loo(
        upars, ll, density.log_density, lambda u, i: density.log_lik(u, idx=[i])[:, 0],
        r_eff=base.r_eff, khat_threshold=result.khat_threshold, indices=todo,
    )
    for i in todo:
        k = mm.khat_split[i] if np.isfinite(mm.khat_split[i]) else mm.khat[i]
        if mm.improved[i] and k <= result.khat_threshold:
            result.elpd_loo[i] = mm.elpd_loo[i]
            result.mcse_elpd_loo[i] = mm.mcse_elpd_loo[i]
            result.khat_after[i] = k
            result.method[i] = "mm"
            result.rho[i] = np.nan
            result.reliable[i] = True


def _apply_mixis(result, program, mixis_draws, var_name, max_mcse, seed, replace_all=False):
    from loo_adapt.estimators.mixis import bernoulli_log_p1, mixis_loo, mixis_loo_prob

    if mixis_draws is None:
        mixis_draws = _need_program(program, "mixis").fit(
            mixis=True, seed=1 if seed is None else int(seed)
        )
    mix = _as_draws(mixis_draws)
    ll = mix.log_lik(var_name)
    if ll.shape[-1] != result.n_obs:
        raise ValueError(
            f"the mixture fit has {ll.shape[-1]} observations, the LOO has {result.n_obs}"
        )
    est = mixis_loo(ll)
    prob = None
    if result.y is not None:
        prob = mixis_loo_prob(ll, bernoulli_log_p1(ll, result.y))
    todo = np.arange(result.n_obs) if replace_all else np.flatnonzero(result.unreliable)
    for i in todo:
        ok = est.mcse_elpd_loo[i] <= max_mcse
        if ok or replace_all:
            result.elpd_loo[i] = est.elpd_loo[i]
            result.mcse_elpd_loo[i] = est.mcse_elpd_loo[i]
            result.khat_after[i] = np.nan
            result.diagnostic[i] = est.ess[i]
            result.method[i] = "mixis"
            result.rho[i] = np.nan
            result.reliable[i] = ok
            if prob is not None:
                result.loo_prob[i] = prob[i]
    if replace_all:
        # p_loo is defined against the posterior: take lpd from the mixture too (SNIS)
        result.lpd = est.lpd.copy()
        result.mcse_total = est.mcse_total


def _apply_refit(result, program, refit_kwargs, seed):
    from loo_adapt.stan.refit import refit_loo

    todo = np.flatnonzero(result.unreliable)
    order = todo[np.argsort(-np.nan_to_num(result.khat_after[todo], nan=np.inf))]
    kwargs = dict(refit_kwargs)
    kwargs.setdefault("seed", 0 if seed is None else int(seed))
    if "refit_fn" not in kwargs:
        _need_program(program, "refit")
    refit = refit_loo(order, program, **kwargs)
    refit.apply_to(result)
