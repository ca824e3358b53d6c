"""Exact LOO by refitting: the fallback for observations no importance sampler can fix.

``refit_loo(indices, program)`` refits the model without each listed observation (the
caller orders them by severity, most severe first), in worker processes, and returns the
held-out elpd of each with its Monte Carlo error.  Alternatively ``refit_fn`` supplies the
held-out log-likelihood draws itself, as a callable ``refit_fn(i)`` or an arviz
``SamplingWrapper``-like object (``sel_observations``, ``sample``, ``get_inference_data``,
``log_likelihood__i``).

Cost control.  The first refit runs alone and is timed; the estimated cost of the rest,
``first * remaining / n_jobs``, is logged (logger ``loo_adapt.stan.refit``, INFO) and written above
the progress bar *before* the rest starts.  With ``max_refits`` / ``max_seconds`` only the
leading observations that fit in the budget are refitted; the rest are reported in
``RefitResult.not_refitted`` (and a warning says so).  The time limit is also enforced while
running: pending refits are cancelled once ``max_seconds`` has passed.

Workers are started with ``forkserver`` (``spawn`` where unavailable), never plain ``fork``:
the parent may already run sampler or numba threads, and a forked copy of a thread pool can
deadlock.  So the program / ``refit_fn`` must be picklable (a module-level function, not a
lambda); if it is not, the refits run serially in this process with a warning.

Monte Carlo error.  ``elpd_i = log mean_s exp(ll_s)``; by the delta method its standard
error is ``sd(exp(ll)) / (mean(exp(ll)) sqrt(ESS))``, computed as ``sd(r) / sqrt(ESS)`` with
``r_s = exp(ll_s - elpd_i)`` (no overflow), and ESS of ``exp(ll)`` over the refit's chains
(R loo's estimator, :func:`loo_adapt.core.ess.relative_eff`).
"""

from __future__ import annotations

import inspect
import logging
import math
import multiprocessing
import os
import pickle
import time
import warnings
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field

import numpy as np
from scipy.special import logsumexp

from loo_adapt.core.ess import relative_eff
from loo_adapt.result import PointwiseLoo

__all__ = ["RefitResult", "refit_loo", "heldout_elpd"]

logger = logging.getLogger("loo_adapt.stan.refit")

_WRAPPER_METHODS = ("sel_observations", "sample", "get_inference_data", "log_likelihood__i")


# --------------------------------------------------------------------------------------------
# array core: one observation's held-out draws -> elpd, MCSE, ESS
# --------------------------------------------------------------------------------------------
def _as_chains(log_lik, i=None) -> np.ndarray:
    """Held-out log-likelihood draws as (chains, draws); (S,) is one chain."""
    what = "held-out log-likelihood" + ("" if i is None else f" of observation {i}")
    arr = np.asarray(getattr(log_lik, "values", log_lik))
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"{what} must be numeric, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    while arr.ndim > 2 and arr.shape[-1] == 1:
        arr = arr[..., 0]
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise ValueError(f"{what} must have shape (S,) or (chains, draws), got {arr.shape}")
    if arr.shape[1] < 4:
        raise ValueError(f"{what} needs at least 4 draws per chain, got shape {arr.shape}")
    if np.isnan(arr).any():
        raise ValueError(f"{what} contains NaN")
    if np.isposinf(arr).any():
        raise ValueError(f"{what} contains +inf")
    return arr


def heldout_elpd(log_lik) -> tuple[float, float, float]:
    """(elpd_i, mcse, ess) from held-out log-likelihood draws (S,) or (chains, draws).

    elpd_i = log mean exp(ll); mcse by the delta method with the ESS of exp(ll) across the
    chains (R loo's ``relative_eff``), ess that ESS.
    """
    ll = _as_chains(log_lik)
    S = ll.size
    elpd = float(logsumexp(ll) - math.log(S))
    if elpd == -np.inf:
        raise ValueError("every held-out log-likelihood draw is -inf: p(y_i | y_-i) = 0")
    ess = float(relative_eff(ll[:, :, None], log=True)[0] * S)
    r = np.exp(ll - elpd)  # likelihood relative to its mean, <= S
    mcse = float(np.sqrt(np.var(r, ddof=1) / ess))
    return elpd, mcse, ess


# --------------------------------------------------------------------------------------------
# result
# --------------------------------------------------------------------------------------------
@dataclass
class RefitResult:
    """Exact LOO refits. Arrays are aligned to ``indices`` (NaN where not refitted).

    indices : observations asked for, in the caller's order (most severe first).
    elpd_loo, mcse_elpd_loo : held-out log predictive density and its Monte Carlo error.
    ess : effective sample size of exp(held-out log-lik) across the refit's chains.
    loo_prob : P(y_i = 1 | y_-i) for a binary outcome, else NaN.
    seconds : wall time of each refit.
    seeds : seed of each refit (-1 where not refitted or not applicable).
    refitted : bool mask; ``not_refitted`` lists the indices left out by the limits.
    estimated_seconds_total : estimated wall time of refitting every index asked for
        (first refit + first * remaining / n_jobs), known before the rest started.
    estimated_seconds_planned : the same for the refits actually scheduled.
    n_samples : number of held-out draws per refit (0 where not refitted).
    log_lik : the held-out log-likelihood draws (chains, draws) per index, None if not refitted.
    """

    indices: np.ndarray
    elpd_loo: np.ndarray
    mcse_elpd_loo: np.ndarray
    ess: np.ndarray
    loo_prob: np.ndarray
    seconds: np.ndarray
    seeds: np.ndarray
    refitted: np.ndarray
    not_refitted: np.ndarray
    estimated_seconds_total: float
    estimated_seconds_planned: float
    n_samples: np.ndarray
    log_lik: list = field(default_factory=list, repr=False)

    @property
    def n_refitted(self) -> int:
        return int(np.sum(self.refitted))

    def apply_to(self, result: PointwiseLoo) -> PointwiseLoo:
        """Write the refitted observations into ``result`` (in place) and return it.

        Per refitted i: elpd_loo, p_loo = lpd - elpd_loo, mcse, method "refit", khat_after
        NaN, rho NaN, diagnostic = ESS, reliable True, and loo_prob when known. ``khat``
        (plain PSIS) stays.
        """
        if not isinstance(result, PointwiseLoo):
            raise TypeError(f"expected a PointwiseLoo, got {type(result).__name__}")
        idx = self.indices[self.refitted]
        if idx.size and (idx.min() < 0 or idx.max() >= result.n_obs):
            raise IndexError(
                f"refitted indices {idx.tolist()} do not fit a result with {result.n_obs} "
                "observations"
            )
        sel = self.refitted
        # a fixed-width string array would truncate "refit"; object keeps any name
        result.method = np.asarray(result.method, dtype=object).copy()
        for name in ("elpd_loo", "p_loo", "mcse_elpd_loo", "khat_after", "rho", "loo_prob",
                     "diagnostic"):
            setattr(result, name, np.array(getattr(result, name), dtype=np.float64))
        result.elpd_loo[idx] = self.elpd_loo[sel]
        result.p_loo[idx] = result.lpd[idx] - self.elpd_loo[sel]
        result.mcse_elpd_loo[idx] = self.mcse_elpd_loo[sel]
        result.khat_after[idx] = np.nan
        result.rho[idx] = np.nan
        result.method[idx] = "refit"
        result.diagnostic[idx] = self.ess[sel]
        result.reliable = np.array(result.reliable, dtype=bool)
        result.reliable[idx] = True  # exact, up to its reported Monte Carlo error
        prob = self.loo_prob[sel].copy()
        if result.y is not None:
            # outcomes known to the result but not to the refits (a refit_fn without y)
            y = np.asarray(result.y)[idx]
            p_obs = np.exp(self.elpd_loo[sel])
            prob = np.where(np.isnan(prob), np.where(y == 1, p_obs, 1.0 - p_obs), prob)
        known = ~np.isnan(prob)
        result.loo_prob[idx[known]] = prob[known]
        return result


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


@dataclass
class _Job:
    program: object = None
    refit_fn: object = None
    chains: int = 4
    draws: int = 1000
    warmup: int = 1000

    def __call__(self, i: int, seed: int):
        t0 = time.perf_counter()
        try:
            ll = self._heldout(i, seed)
        except Exception as err:
            err.add_note(f"(while refitting without observation {i}, seed {seed})")
            raise
        return ll, time.perf_counter() - t0

    def _heldout(self, i: int, seed: int) -> np.ndarray:
        if self.refit_fn is None:
            fit = self.program.refit_without(i, seed=seed, chains=self.chains, draws=self.draws,
                                             warmup=self.warmup)
            ll = self.program.heldout_log_lik(fit, i).reshape(fit.shape)
        elif _is_wrapper(self.refit_fn):
            w = self.refit_fn
            new_obs, excluded = w.sel_observations(i)
            idata = w.get_inference_data(w.sample(new_obs))
            ll = w.log_likelihood__i(excluded, idata)
        elif _accepts_seed(self.refit_fn):
            ll = self.refit_fn(i, seed=seed)
        else:
            ll = self.refit_fn(i)
        return _as_chains(ll, i)


def _run(job: _Job, i: int, seed: int):
    return job(i, seed)


def _mp_context():
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def _progress_bar(total: int, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="LOO refits", unit="refit")


def _announce(message: str, bar) -> None:
    logger.info(message)
    if bar is not None:
        bar.write(message)


# --------------------------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------------------------
def _check_indices(indices, n_obs):
    idx = np.asarray(indices)
    if idx.ndim == 0:
        idx = idx[None]
    if idx.ndim != 1:
        raise ValueError(f"indices must be 1-D, got shape {idx.shape}")
    if idx.size and idx.dtype.kind not in "iu":
        raise TypeError(f"indices must be integers, got dtype {idx.dtype}")
    idx = idx.astype(np.int64)
    if len(np.unique(idx)) != idx.size:
        raise ValueError("indices contain duplicates")
    if idx.size and idx.min() < 0:
        raise IndexError(f"negative observation index {int(idx.min())}")
    if n_obs is not None and idx.size and idx.max() >= n_obs:
        raise IndexError(f"observation index {int(idx.max())} out of range for N = {n_obs}")
    return idx


def _check_int(name, value, low, allow_none=True):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def refit_loo(
    indices,
    program=None,
    *,
    refit_fn=None,
    chains: int = 4,
    draws: int = 1000,
    warmup: int = 1000,
    seed: int = 0,
    n_jobs: int | None = None,
    max_refits: int | None = None,
    max_seconds: float | None = None,
    progress: bool = True,
    y=None,
) -> RefitResult:
    """Exact LOO by refitting without each observation in ``indices``.

    Parameters
    ----------
    indices : observations to refit, most severe first (the limits keep a prefix).
    program : a :class:`loo_adapt.stan.program.StanProgram`; refit i runs NUTS on its data without
        i (seed ``seed + i``) and recomputes log p(y_i | theta) at the draws.
    refit_fn : used instead of ``program`` for the refits (``program``, if also given, then
        only supplies N and y): ``refit_fn(i)`` (or ``refit_fn(i, seed=...)``) returning
        the held-out log-likelihood draws of i, (S,) or (chains, draws); or an arviz
        SamplingWrapper-like object.
    chains, draws, warmup : NUTS settings of each refit (``program`` only).
    n_jobs : worker processes (default ``os.cpu_count()``); 1 runs in this process.
    max_refits : refit at most this many observations.
    max_seconds : wall-time budget; from the first refit's time, only as many refits as are
        expected to fit are scheduled, and pending ones are cancelled when it runs out.
    progress : show a tqdm progress bar (the time estimate is also logged at INFO level).
    y : binary outcomes (n,) for ``loo_prob`` when ``program`` does not give them.

    Returns
    -------
    RefitResult
    """
    from loo_adapt.stan.program import StanProgram

    if program is None and refit_fn is None:
        raise ValueError("give program= (a StanProgram) or refit_fn=")
    if program is not None and not isinstance(program, StanProgram):
        raise TypeError(f"program must be a StanProgram, got {type(program).__name__}")
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
    n_obs = program.n_obs if program is not None else None
    if y is None and program is not None:
        y = program.y
    if y is not None:
        y = np.asarray(y)
        if y.ndim != 1 or not np.all((y == 0) | (y == 1)):
            raise ValueError("y must be a 1-D array of 0/1 outcomes")
        if n_obs is not None and len(y) != n_obs:
            raise ValueError(f"y has length {len(y)}, the data has N = {n_obs}")
    idx = _check_indices(indices, n_obs if n_obs is not None else (None if y is None else len(y)))
    for name, v in (("chains", chains), ("draws", draws)):
        _check_int(name, v, 1, allow_none=False)
    _check_int("warmup", warmup, 0, allow_none=False)
    _check_int("seed", seed, 0, allow_none=False)
    n_jobs = _check_int("n_jobs", n_jobs, 1) or (os.cpu_count() or 1)
    max_refits = _check_int("max_refits", max_refits, 0)
    if max_seconds is not None:
        if isinstance(max_seconds, bool) or not np.isfinite(max_seconds) or max_seconds <= 0:
            raise ValueError(f"max_seconds must be positive and finite, got {max_seconds!r}")
        max_seconds = float(max_seconds)

    k = idx.size
    res = RefitResult(
        indices=idx, elpd_loo=np.full(k, np.nan), mcse_elpd_loo=np.full(k, np.nan),
        ess=np.full(k, np.nan), loo_prob=np.full(k, np.nan), seconds=np.full(k, np.nan),
        seeds=np.full(k, -1, dtype=np.int64), refitted=np.zeros(k, dtype=bool),
        not_refitted=np.empty(0, dtype=np.int64), estimated_seconds_total=0.0,
        estimated_seconds_planned=0.0, n_samples=np.zeros(k, dtype=np.int64),
        log_lik=[None] * k,
    )
    planned = k if max_refits is None else min(k, max_refits)
    job = _Job(program=program if refit_fn is None else None, refit_fn=refit_fn,
               chains=chains, draws=draws, warmup=warmup)
    start = time.perf_counter()

    def store(pos, ll, seconds):
        i = int(idx[pos])
        elpd, mcse, ess = heldout_elpd(ll)
        res.elpd_loo[pos], res.mcse_elpd_loo[pos], res.ess[pos] = elpd, mcse, ess
        res.seconds[pos] = seconds
        res.refitted[pos] = True
        res.n_samples[pos] = ll.size
        res.log_lik[pos] = ll
        res.seeds[pos] = seed + i
        if y is not None:
            p = math.exp(elpd)
            res.loo_prob[pos] = p if y[i] == 1 else 1.0 - p

    if n_jobs > 1 and planned > 2:
        try:
            pickle.dumps(job)
        except Exception as err:  # lambdas, closures, open handles
            warnings.warn(
                f"the refit job cannot be sent to worker processes ({err}); running the refits "
                "serially. Define refit_fn at module level to run them in parallel.",
                UserWarning,
                stacklevel=2,
            )
            n_jobs = 1
    bar = _progress_bar(planned, progress) if planned else None
    try:
        if planned:
            ll, first = job(int(idx[0]), seed + int(idx[0]))
            store(0, ll, first)
            if bar is not None:
                bar.update(1)
            rest_all = k - 1
            workers_all = max(1, min(n_jobs, rest_all))
            res.estimated_seconds_total = first + first * rest_all / workers_all
            rest = planned - 1
            if max_seconds is not None and rest > 0:
                budget = max_seconds - (time.perf_counter() - start)
                w = max(1, min(n_jobs, rest))
                fits = 0 if budget < first else int(budget * w / first)
                rest = min(rest, fits)
                planned = rest + 1
            workers = max(1, min(n_jobs, rest))
            res.estimated_seconds_planned = first + first * rest / workers
            if bar is not None:
                bar.total = planned
                bar.refresh()
            msg = (
                f"refit_loo: the first refit (observation {int(idx[0])}) took {first:.2f} s; "
                f"estimated {first * rest / workers:.1f} s for the remaining {rest} refit(s) "
                f"on {workers} worker(s)"
            )
            if planned < k:
                msg += (
                    f"; refitting all {k} would take about {res.estimated_seconds_total:.1f} s, "
                    f"the limit leaves {k - planned} observation(s) out"
                )
            _announce(msg, bar)
            if rest:
                _run_rest(job, idx, seed, range(1, planned), workers, max_seconds, start,
                          store, bar)
    finally:
        if bar is not None:
            bar.close()
    res.not_refitted = idx[~res.refitted]
    if res.not_refitted.size:
        shown = res.not_refitted[:20].tolist()
        more = "" if res.not_refitted.size <= 20 else f" (+{res.not_refitted.size - 20} more)"
        warnings.warn(
            f"{res.not_refitted.size} of {k} observations were not refitted because of the "
            f"limit (max_refits={max_refits}, max_seconds={max_seconds}): {shown}{more}",
            UserWarning,
            stacklevel=2,
        )
    return res


def _run_rest(job, idx, seed, positions, workers, max_seconds, start, store, bar):
    positions = list(positions)

    def out_of_time():
        return max_seconds is not None and time.perf_counter() - start >= max_seconds

    if workers == 1:
        for pos in positions:
            if out_of_time():
                break
            i = int(idx[pos])
            ll, seconds = job(i, seed + i)
            store(pos, ll, seconds)
            if bar is not None:
                bar.update(1)
        return
    with ProcessPoolExecutor(max_workers=workers, mp_context=_mp_context()) as pool:
        futures = {pool.submit(_run, job, int(idx[pos]), seed + int(idx[pos])): pos
                   for pos in positions}
        pending = set(futures)
        try:
            _collect(futures, pending, store, bar, out_of_time)
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise


def _collect(futures, pending, store, bar, out_of_time):
    while pending:
        done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
        for fut in done:
            if fut.cancelled():
                continue
            ll, seconds = fut.result()
            store(futures[fut], ll, seconds)
            if bar is not None:
                bar.update(1)
        if out_of_time():
            # refits already running finish; queued ones are dropped
            for fut in pending:
                fut.cancel()
            pending = {f for f in pending if not f.cancelled()}
