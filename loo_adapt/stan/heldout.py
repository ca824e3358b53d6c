"""One refit's held-out draws: the job a worker runs to get them (a ``program`` refit without
observation i, a ``refit_fn(i)`` or an arviz ``SamplingWrapper``-like object) and what they
give: elpd_i with its Monte Carlo error and ESS (`heldout_elpd`), and the convergence check
(`convergence_check`).  `loo_adapt.stan.refit` (LOO) and `loo_adapt.kfold` (K-fold) schedule
these jobs.

Monte Carlo error.  ``elpd_i = log mean_s exp(ll_s)``; by the delta method its standard
error is ``sd(exp(ll)) / (mean(exp(ll)) sqrt(ESS))``, computed as ``sd(r) / sqrt(ESS)`` with
``r_s = exp(ll_s - elpd_i)`` (no overflow), and ESS of ``exp(ll)`` over the refit's chains
(R loo's estimator, :func:`loo_adapt.core.ess.relative_eff`), widened for the skew of ``r``
(:func:`loo_adapt.core.skew.skew_inflation`).

The tail of the held-out likelihood (`tail_check`).  That mean is a plain Monte Carlo mean
of ``exp(ll)``; where ``exp(ll)`` has a heavy right tail over the refit's draws, the mean
(and the MCSE the delta method gives it) is unreliable however well the refit converged.
The check is PSIS's Pareto k-hat of ``exp(ll)`` (R loo's tail length with the refit's
relative ESS); above `TAIL_KHAT` = 1, where the fitted tail has no mean, the refit fails.
A parameter of observation i's own (a varying effect of its group, a latent value), drawn
from its prior when i is left out, is the common cause: the fix is to integrate it out of
``log_lik``; a far outlier is the other (a count of 60 where about 3 is expected in a
negative-binomial regression reads 1.7-2.3, and there the estimates happened to sit within
their MCSEs: the check is conservative for it; `refit_loo` leaves the row unverified with
its estimate, and `loo()`'s refit stage bridges it with the posterior draws,
`loo_adapt.estimators.refit`).
Why 1 and not PSIS's 0.7 (`benchmarks/results/own_parameter_refit.txt`): the
refits of a Poisson count of 18 where about 2 is expected read k-hat 0.59-0.96 over ten
seeds, yet their estimates sit within their MCSEs of a 100,000-draw refit (rms z 1.15):
such a refit is as good as refits get for that row.  The outlying school of a hierarchical
model reads 2.7-3.1 and misses by up to 5 of its MCSEs.
"""

from __future__ import annotations

import inspect
import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from loo_adapt.core.bridge import HEAVY_TAIL, TAIL_KHAT
from loo_adapt.core.checks import as_log_lik_array
from loo_adapt.core.ess import relative_eff
from loo_adapt.core.ess_split import ess_bulk, rhat_rank
from loo_adapt.core.fmt import comparison
from loo_adapt.core.psis import MIN_DRAWS, pareto_khat
from loo_adapt.core.skew import skew_inflation

__all__ = ["heldout_elpd", "convergence_check", "tail_check", "TAIL_KHAT"]

_WRAPPER_METHODS = ("sel_observations", "sample", "get_inference_data", "log_likelihood__i")


# --------------------------------------------------------------------------------------------
# array core: one observation's held-out draws -> elpd, MCSE, ESS
# --------------------------------------------------------------------------------------------
def _as_chains(log_lik, i=None) -> np.ndarray:
    """Held-out log-likelihood draws as (chains, draws); (S,) is one chain."""
    what = "held-out log-likelihood" + ("" if i is None else f" of observation {i}")
    arr = as_log_lik_array(log_lik, what, copy=True)
    while arr.ndim > 2 and arr.shape[-1] == 1:
        arr = arr[..., 0]
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise ValueError(f"{what} must have shape (S,) or (chains, draws), got {arr.shape}")
    if arr.shape[1] < 4:
        raise ValueError(f"{what} needs at least 4 draws per chain, got shape {arr.shape}")
    return arr


def heldout_elpd(log_lik) -> tuple[float, float, float]:
    """(elpd_i, mcse, ess) from held-out log-likelihood draws (S,) or (chains, draws).

    elpd_i = log mean exp(ll); mcse by the delta method with the ESS of exp(ll) across the
    chains (R loo's ``relative_eff``), widened for the skew of exp(ll) as MixIS's is
    (`loo_adapt.core.skew.skew_inflation`: a held-out likelihood with rare large values
    gives an error that is off and sure of itself together; i.i.d. log-normal draws,
    sd 2 and 2.5 of ll, 4 x 1000: rms z 1.25 and 1.48 with the delta method alone, 1.11
    and 1.27 widened); ess that ESS.
    """
    ll = _as_chains(log_lik)
    S = ll.size
    elpd = float(logsumexp(ll) - math.log(S))
    if elpd == -np.inf:
        raise ValueError("every held-out log-likelihood draw is -inf: p(y_i | y_-i) = 0")
    ess = float(relative_eff(ll[:, :, None], log=True)[0] * S)
    r = np.exp(ll - elpd)  # likelihood relative to its mean, <= S
    mcse = float(np.sqrt(np.var(r, ddof=1) / ess))
    mcse *= float(skew_inflation((r.reshape(-1) - 1.0)[:, None], np.array([ess]))[0])
    return elpd, mcse, ess


def tail_check(log_lik, ess: float | None = None) -> tuple[str, float]:
    """Is the mean of the held-out likelihood over a refit's draws to be trusted?

    Parameters
    ----------
    log_lik : held-out log-likelihood draws, (S,) or (chains, draws).
    ess : ESS of ``exp(log_lik)`` (`heldout_elpd`'s third value); None: the draws' own.

    Returns
    -------
    (reason, khat) : reason is "" when the Pareto k-hat of ``exp(log_lik)`` is at most
        `TAIL_KHAT`, else what failed; khat is
        NaN with fewer than `loo_adapt.core.psis.MIN_DRAWS` draws or a constant likelihood
        (no tail to fit: the check passes).

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> tail_check(rng.normal(-1.0, 0.3, size=(4, 1000)))[0]
    ''
    >>> theta = rng.normal(5.0, 15.0, size=4000)  # y = 75 far out in theta's prior
    >>> tail_check(-0.5 * ((75.0 - theta) / 10.0) ** 2)[0][:32]
    'heavy-tailed held-out likelihood'
    """
    chains = _as_chains(log_lik)
    ll = chains.reshape(-1)
    S = ll.size
    finite = ll[np.isfinite(ll)]
    if S < MIN_DRAWS or finite.size == 0 or np.ptp(finite) == 0:
        return "", float("nan")
    if ess is None:
        ess = float(relative_eff(chains[:, :, None], log=True)[0] * S)
    r_eff = min(max(float(ess) / S, 1.0 / S), 1.0) if np.isfinite(ess) else 1.0
    with warnings.catch_warnings():  # the reason below says what a large k-hat means here
        warnings.simplefilter("ignore")
        k = float(pareto_khat(ll, r_eff))
    bound = TAIL_KHAT
    if not k <= bound:
        return (f"{HEAVY_TAIL}: {comparison('Pareto k-hat', k, '>', bound)} "
                "over the refit's draws, so their mean of p(y_i | theta) and its MCSE are "
                "unreliable (the observation lies where its leave-one-out posterior rarely "
                "goes: a far outlier, or a parameter of its own drawn from its prior without "
                "it, which log_lik can integrate out)"), k
    return "", k


# --------------------------------------------------------------------------------------------
# convergence of one refit: divergences, rank-normalised R-hat, bulk ESS (Vehtari et al. 2021)
# --------------------------------------------------------------------------------------------
def convergence_check(log_lik, n_divergent: int = -1, *, max_rhat: float = 1.01,
                      min_ess: float | None = None) -> tuple[str, float, float]:
    """Is a refit converged enough to trust its held-out elpd?

    Parameters
    ----------
    log_lik : held-out log-likelihood draws, (chains, draws).
    n_divergent : divergent transitions of the refit (-1: not known).
    max_rhat : largest accepted rank-normalised R-hat of the held-out log-likelihood.
    min_ess : smallest accepted bulk ESS of it (default 100 per chain).

    Returns
    -------
    (reason, rhat, ess_bulk) : reason is "" when every check passes, else what failed.

    Examples
    --------
    >>> ll = np.random.default_rng(1).normal(size=(4, 250))
    >>> convergence_check(ll, 0)[0]
    ''
    >>> convergence_check(ll, 3)[0]
    'not converged: 3 divergent transition(s)'
    """
    ll = _as_chains(log_lik)
    if np.ptp(ll) == 0 or not np.all(np.isfinite(ll)):
        # a constant held-out likelihood is exact; -inf draws: R-hat/ESS are undefined, and
        # the checks below would be meaningless; divergences still count
        rhat, ess = np.nan, np.nan
    else:
        rhat, ess = rhat_rank(ll), ess_bulk(ll)
    min_ess = 100.0 * ll.shape[0] if min_ess is None else float(min_ess)
    reasons = []
    if n_divergent > 0:
        reasons.append(f"{n_divergent} divergent transition(s)")
    if np.isfinite(rhat) and rhat > max_rhat:
        reasons.append(f"R-hat {rhat:.3f} > {max_rhat:g}")
    if np.isfinite(ess) and ess < min_ess:
        reasons.append(f"bulk ESS {ess:.0f} < {min_ess:.0f}")
    reason = "not converged: " + ", ".join(reasons) if reasons else ""
    return reason, float(rhat), float(ess)


# --------------------------------------------------------------------------------------------
# jobs (module level so that they pickle into worker processes)
# --------------------------------------------------------------------------------------------
def _accepts_seed(fn) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "seed" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
               or p.kind == p.VAR_KEYWORD for p in params)


def _is_wrapper(obj) -> bool:
    return all(callable(getattr(obj, m, None)) for m in _WRAPPER_METHODS)


def _n_divergent(fit) -> int:
    div = getattr(fit, "sample_stats", {}).get("divergent__")
    return -1 if div is None else int(np.sum(np.asarray(div) > 0))


@dataclass
class _Job:
    program: object = None
    refit_fn: object = None
    chains: int = 4
    draws: int = 1000
    warmup: int = 1000
    parallel_chains: int | None = None

    def __call__(self, i: int, seed: int, scale: int = 1, adapt_delta=None) -> dict:
        t0 = time.perf_counter()
        try:
            ll, n_div = self._heldout(i, seed, scale, adapt_delta)
        except Exception as err:
            err.add_note(f"(while refitting without observation {i}, seed {seed})")
            raise
        return {"log_lik": ll, "seconds": time.perf_counter() - t0, "n_divergent": n_div}

    def _heldout(self, i: int, seed: int, scale: int, adapt_delta=None
                 ) -> tuple[np.ndarray, int]:
        if self.refit_fn is None:
            extra = {} if adapt_delta is None else {"adapt_delta": adapt_delta}
            fit = self.program.refit_without(
                i, seed=seed, chains=self.chains, draws=self.draws * scale,
                warmup=self.warmup * scale, parallel_chains=self.parallel_chains, **extra)
            ll = self.program.heldout_log_lik(fit, i).reshape(fit.shape)
            return _as_chains(ll, i), _n_divergent(fit)
        if _is_wrapper(self.refit_fn):
            w = self.refit_fn
            new_obs, excluded = w.sel_observations(i)
            idata = w.get_inference_data(w.sample(new_obs))
            ll = w.log_likelihood__i(excluded, idata)
        elif _accepts_seed(self.refit_fn):
            ll = self.refit_fn(i, seed=seed)
        else:
            ll = self.refit_fn(i)
        return _as_chains(ll, i), -1


def _run(job: _Job, i: int, seed: int, scale: int = 1, adapt_delta=None) -> dict:
    return job(i, seed, scale, adapt_delta)


def _check_refit_fn(refit_fn) -> None:
    if refit_fn is not None and not (callable(refit_fn) or _is_wrapper(refit_fn)):
        missing = [m for m in _WRAPPER_METHODS if not callable(getattr(refit_fn, m, None))]
        raise TypeError(
            "refit_fn must be a callable refit_fn(i) -> held-out log-likelihood draws, or a "
            f"SamplingWrapper-like object; {type(refit_fn).__name__} lacks {missing}"
        )
    if refit_fn is not None and _is_wrapper(refit_fn) and hasattr(
        refit_fn, "check_implemented_methods"
    ):
        not_impl = refit_fn.check_implemented_methods(list(_WRAPPER_METHODS))
        if not_impl:
            raise TypeError(f"the SamplingWrapper does not implement {list(not_impl)}")
