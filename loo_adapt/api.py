"""The public `loo` verb: any draws in, the installed arviz's ELPDData out."""

from __future__ import annotations

import warnings

import numpy as np

from . import psis as _psis
from .arviz_compat import to_elpd_data
from .draws import Draws


def _as_draws(data) -> Draws:
    if isinstance(data, Draws):
        return data
    from .readers import read_draws

    return read_draws(data)


def _approximate_log_ratio_correction(draws: Draws) -> np.ndarray:
    """log p(theta|D) - log q(theta) per draw, for draws from an approximation (Eq. 13-15)."""
    if draws.log_p is None or draws.log_q is None:
        raise ValueError(
            f"draws from method {draws.method!r} need log_p and log_q per draw to be used "
            "as an importance-sampling proposal; read them from the Stan CSV "
            "(log_p__/log_g__, log_p__/log_q__, lp__/lp_approx__)"
        )
    return (draws.log_p - draws.log_q).reshape(-1)


def psis_loo(draws: Draws, *, var_name: str = "log_lik", reff=None):
    """Plain PSIS-LOO on draws; approximate posteriors are corrected by log p - log q."""
    log_lik = draws.log_lik(var_name)
    if draws.is_approximate:
        correction = _approximate_log_ratio_correction(draws)
        return _psis.loo_pointwise_approximate(
            log_lik.reshape(draws.n_samples, -1), correction, r_eff=1.0 if reff is None else reff
        )
    if draws.n_chains == 1 and reff is None:
        reff = 1.0
    return _psis.loo_pointwise(log_lik, r_eff=reff)


def loo(
    data,
    *,
    var_name: str = "log_lik",
    reff=None,
    pointwise: bool = True,
    scale: str = "log",
    model=None,
    adapt: bool | None = None,
    transforms=("kl", "var", "ll", "mm1", "mm2"),
    rho=None,
    khat_threshold: float | None = None,
    selection: str = "split",
    seed=None,
):
    """Leave-one-out cross-validation with PSIS and, where k-hat is too high, adaptive IS.

    Parameters
    ----------
    data : Draws, cmdstanpy fit, Stan CSV path(s), InferenceData / DataTree, stanli Fit,
        dict of arrays, or an array of pointwise log-likelihood (chains, draws, n) / (S, n).
    var_name : name of the pointwise log-likelihood variable.
    reff : relative efficiency; None computes it from the chain structure (R loo's
        relative_eff of exp(log_lik)); arviz instead averages the ESS of the parameters.
    pointwise : keep pointwise values in the ELPDData.
    scale : "log" (elpd), "negative_log" or "deviance" (looic = -2 elpd).
    model : a model family (`loo_adapt.models`), needed for adaptation.
    adapt : transform the draws of observations above the k-hat threshold; defaults to
        True when a model is given.
    transforms, rho, khat_threshold, selection, seed : see `loo_adapt.adaptive.adapt_loo`.

    Returns
    -------
    The installed arviz's ELPDData (subclass) with ``.loo_adapt`` (a `PointwiseLoo`) and
    ``.summary()``.
    """
    draws = _as_draws(data)
    if adapt is None:
        adapt = model is not None
    if adapt and model is None:
        raise ValueError("adapt=True needs model= (e.g. loo_adapt.models.LogisticRegression)")
    base = psis_loo(draws, var_name=var_name, reff=reff)
    if adapt:
        from .adaptive import adapt_loo

        result = adapt_loo(
            draws,
            model,
            base=base,
            transforms=transforms,
            rho=rho,
            khat_threshold=khat_threshold,
            selection=selection,
            seed=seed,
        )
    else:
        result = base.to_result()
        if khat_threshold is not None:
            result.khat_threshold = float(khat_threshold)
    if np.any(result.unreliable):
        bad = int(np.sum(result.unreliable))
        warnings.warn(
            f"{bad} of {result.n_obs} observations have Pareto k-hat above "
            f"{result.khat_threshold:.2f}: their elpd_loo estimates are unreliable"
            + ("" if adapt else "; pass model= to adapt them, or refit them"),
            UserWarning,
            stacklevel=2,
        )
    return to_elpd_data(result, scale=scale, pointwise=pointwise)

