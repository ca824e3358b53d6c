"""Exact LOO by refitting: the fallback for observations no importance sampler can fix.

``refit_loo(indices, program)`` refits the model without each listed observation (the
caller orders them by severity, most severe first) and returns, per observation, the
held-out elpd with its Monte Carlo error, whether the refit is verified (``reliable``) and,
if not, why (``reason``).  Alternatively ``refit_fn`` supplies the held-out log-likelihood
draws itself, as a callable ``refit_fn(i)`` or an arviz ``SamplingWrapper``-like object
(``sel_observations``, ``sample``, ``get_inference_data``, ``log_likelihood__i``).

Where the refits run (:mod:`loo_adapt.stan.pool`): ``executor=None`` is a local pool of worker
processes; any ``concurrent.futures.Executor`` or a ``dask.distributed.Client`` may be given.
By default workers x chains <= cores (each CmdStan / stanli refit runs its chains in parallel,
so on 2 cores a 4-chain refit gets both cores and refits run one at a time).  The program is
compiled once, before any worker starts.

Cost control.  The first refit runs alone and is timed inside its worker (it does not compile:
that happened before), and the estimated cost of the rest, ``first * ceil(remaining /
workers)``, is logged (logger ``loo_adapt.stan.refit``, INFO) and written above the progress
bar before the rest starts.  With ``max_refits`` / ``max_seconds`` only the leading
observations that fit in the budget are refitted; the rest are reported in
``RefitResult.not_refitted``.  The time limit is also enforced while running: pending refits
are not started once ``max_seconds`` has passed.

Faults lose nothing.  A refit that raises, returns NaN, runs past ``timeout`` seconds (its
worker is terminated) or whose worker dies (retried once) makes that row unverified with the
reason; the others go on.  With ``checkpoint=DIR`` each finished refit is written to DIR as it
completes (one file per row, written then renamed), and a rerun with the same DIR skips them.
SIGINT and SIGTERM stop every worker and re-raise; what finished is in the checkpoint.

Convergence.  Every refit is checked: divergent transitions (from the sampler's
diagnostics, when the refit is a fit of ``program``), rank-normalised split R-hat and bulk ESS
of the held-out log-likelihood draws.  A refit that fails the check is run once more with
twice the warm-up and draws (``program`` refits; after divergent transitions also with
``adapt_delta = RETRY_ADAPT_DELTA``, recorded in ``RefitResult.rerun``) and, if it fails
again (or cannot be rerun longer: ``refit_fn``), is reported unverified with the reason,
never "reliable".

One refit (the worker's job, the held-out elpd with its Monte Carlo error, the convergence
check) lives in `loo_adapt.stan.heldout`; the result, `RefitResult`, in
`loo_adapt.stan.refit_result`.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from time import monotonic as time_mono

import numpy as np

from loo_adapt.stan import pool as _pool
from loo_adapt.stan.heldout import (
    _check_refit_fn,
    _Job,
    _run,
    convergence_check,
    heldout_elpd,
    tail_check,
)
from loo_adapt.stan.refit_result import TIME_BUDGET, RefitResult

__all__ = ["RefitResult", "refit_loo", "heldout_elpd", "convergence_check"]

logger = logging.getLogger("loo_adapt.stan.refit")

#: seed offset of the longer rerun of a refit that did not converge
RETRY_SEED_OFFSET = 1_000_003
#: target acceptance of the rerun of a refit that had divergent transitions (smaller steps:
#: a horseshoe's funnel is where a few divergences come from)
RETRY_ADAPT_DELTA = 0.99


def _progress_bar(total: int, enabled: bool, desc: str = "LOO refits"):
    from loo_adapt.progress import progress_bar

    return progress_bar(total, desc, enabled=enabled, unit="fit", delay=0.0)


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


def _check_seconds(name, value):
    if value is None:
        return None
    if (isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating))
            or not np.isfinite(value) or value <= 0):
        raise ValueError(f"{name} must be a positive, finite number of seconds, got {value!r}")
    return float(value)


def _check_thresholds(max_rhat, min_ess) -> None:
    """The convergence check's thresholds: finite numbers (NaN or inf would pass everything)."""
    def finite(v):
        return (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
                and bool(np.isfinite(v)))

    if not (finite(max_rhat) and max_rhat > 1):
        raise ValueError(f"max_rhat must be a finite number above 1 (e.g. 1.01), got "
                         f"{max_rhat!r}")
    if min_ess is not None and not (finite(min_ess) and min_ess > 0):
        raise ValueError(f"min_ess must be a positive, finite number, got {min_ess!r}")


def _program_fingerprint(program) -> dict:
    from loo_adapt.stan.backends import _jsonable

    if program is None:
        return {}
    return {"stan": program.stan_file.read_text(), "data": _jsonable(program.data),
            "fit_kwargs": _jsonable(dict(getattr(program, "fit_kwargs", {}) or {})),
            "obs_dim_vars": repr(getattr(program, "obs_dim_vars", None)),
            "log_lik": repr(getattr(program, "log_lik_name", None))}


def _fn_fingerprint(fn, key=None) -> str | None:
    """What identifies a ``refit_fn`` in a checkpoint: its content (code, closure values,
    globals; :func:`loo_adapt.stan.fingerprint.function_fingerprint`) or the caller's
    ``key``, never its name alone."""
    from loo_adapt.stan.fingerprint import function_fingerprint

    if fn is None:
        return None if key is None else function_fingerprint(None, key)
    return function_fingerprint(fn, key)


def _schedule(n_tasks: int, chains_per_task: int, n_jobs, executor):
    """(pool workers, parallel chains per task or None) for ``n_tasks`` fits.

    Local pool: workers x chains <= cores (:func:`loo_adapt.stan.pool.plan_workers`); with an
    executor its own width, and each fit keeps its backend's default chain parallelism.
    """
    if executor is not None:
        return None, None
    return _pool.plan_workers(n_tasks, chains_per_task, n_jobs)


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
    executor=None,
    checkpoint=None,
    timeout: float | None = None,
    check_convergence: bool = True,
    max_rhat: float = 1.01,
    min_ess: float | None = None,
    retry_unconverged: bool = True,
    key: str | None = None,
    warn: bool = True,
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
    seed : base seed; refit i uses ``seed + i`` (its longer rerun ``seed + i + 1000003``).
    n_jobs : local worker processes; None chooses workers x chains <= cores. 1 without a
        ``timeout`` runs the refits in this process.
    max_refits : refit at most this many observations.
    max_seconds : wall-time budget; from the first refit's time, only as many refits as are
        expected to fit are scheduled, pending ones are not started once it runs out, and a
        refit still running then is stopped (a hard limit: the refits run in worker
        processes even with ``n_jobs=1``).
    progress : show a tqdm progress bar (the time estimate is also logged at INFO level).
    y : binary outcomes (n,) for ``loo_prob`` when ``program`` does not give them.
    executor : None (a local process pool), a ``concurrent.futures.Executor`` or a
        ``dask.distributed.Client``.
    checkpoint : directory; each finished refit is saved there as it completes, and refits
        already saved there (by an interrupted run with the same settings) are not redone.
        The run is identified by content: the program's text, data and options, these
        settings and, for ``refit_fn``, its code, closure values and the globals it reads
        (:mod:`loo_adapt.stan.fingerprint`); a folder of another run is refused.
    key : names the run in the checkpoint instead of hashing ``refit_fn`` (needed when it
        holds a value whose content cannot be hashed, e.g. a pandas frame or a model object:
        the error says so); change it whenever the function or its data change.
    warn : one warning at the end listing the refits that are not verified, with the
        reasons (``loo()``'s refit stage gives it itself, after bridging the refits that
        failed only the tail check).
    timeout : hard limit per refit in seconds; a refit past it is stopped (its worker
        process terminated, with the local pool) and its row reported unverified.
    check_convergence : check divergences, R-hat and bulk ESS of each refit.
    max_rhat, min_ess : thresholds of that check (``min_ess`` default: 100 per chain).
    retry_unconverged : rerun a ``program`` refit that fails the check once with twice the
        warm-up and draws before reporting it unverified.

    Returns
    -------
    RefitResult
        Per row of ``indices``: elpd_loo, mcse_elpd_loo, reliable, reason, loo_prob, ...

    Examples
    --------
    >>> import numpy as np
    >>> def refit_fn(i, seed):  # held-out log-lik draws of a known predictive
    ...     return np.log(np.random.default_rng(seed).uniform(0.2, 0.4, size=(4, 250)))
    >>> res = refit_loo([3, 1], refit_fn=refit_fn, n_jobs=1, progress=False)
    >>> res.reliable.tolist(), [round(float(e), 1) for e in res.elpd_i]
    ([True, True], [-1.2, -1.2])
    """
    _pool.check_not_bootstrapping("refit_loo")
    if program is None and refit_fn is None:
        raise ValueError("give program= (a StanProgram) or refit_fn=")
    if program is not None and not (hasattr(program, "refit_without")
                                    and hasattr(program, "n_obs")):
        raise TypeError(f"program must be a StanProgram, got {type(program).__name__}")
    _check_refit_fn(refit_fn)
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
    n_jobs = _check_int("n_jobs", n_jobs, 1)
    max_refits = _check_int("max_refits", max_refits, 0)
    max_seconds = _check_seconds("max_seconds", max_seconds)
    timeout = _check_seconds("timeout", timeout)
    _check_thresholds(max_rhat, min_ess)

    k = idx.size
    res = RefitResult.empty(idx)
    planned = k if max_refits is None else min(k, max_refits)
    use_program = refit_fn is None
    ck = None
    if checkpoint is not None:
        ck = _pool.Checkpoint(checkpoint, "refit", _pool.fingerprint(
            _program_fingerprint(program if use_program else None),
            _fn_fingerprint(refit_fn, key), chains, draws, warmup, seed, check_convergence,
            max_rhat, min_ess, retry_unconverged))
    start = time.perf_counter()
    pos_of = {int(i): p for p, i in enumerate(idx)}

    def store(pos, out, seed_used, attempts, reason="", save=True, rerun=""):
        i = int(idx[pos])
        ll = out["log_lik"]
        elpd, mcse, ess = heldout_elpd(ll)
        conv_reason, rhat, essb = convergence_check(
            ll, out["n_divergent"], max_rhat=max_rhat, min_ess=min_ess)
        tail_reason, khat = tail_check(ll, ess)
        if check_convergence and not reason:
            reason = "; ".join(r for r in (conv_reason, tail_reason) if r)
        res.elpd_i[pos], res.mcse_elpd_i[pos], res.ess[pos] = elpd, mcse, ess
        res.rhat[pos], res.ess_bulk[pos] = rhat, essb
        res.pareto_k[pos] = khat
        res.n_divergent[pos] = out["n_divergent"]
        res.seconds[pos] = out["seconds"]
        res.refitted[pos] = True
        res.n_samples[pos] = ll.size
        res.log_lik[pos] = ll
        res.seeds[pos] = seed_used
        res.reliable[pos] = not reason
        res.reason[pos] = reason
        res.status[pos] = "unconverged" if reason else "ok"
        res.rerun[pos] = rerun
        if y is not None:
            p = math.exp(elpd)
            res.loo_prob[pos] = p if y[i] == 1 else 1.0 - p
        if save and ck is not None:
            ck.save(f"obs_{i}", {"log_lik": ll},
                    {"i": i, "seconds": out["seconds"], "n_divergent": out["n_divergent"],
                     "seed": seed_used, "attempts": attempts, "reason": reason,
                     "rerun": rerun})

    # resume: rows a previous run finished
    if ck is not None:
        for key, (arrays, meta) in ck.load().items():
            i = int(meta.get("i", -1))
            if key.startswith("obs_") and i in pos_of:
                store(pos_of[i], {"log_lik": arrays["log_lik"], "seconds": meta["seconds"],
                                  "n_divergent": meta["n_divergent"]},
                      meta["seed"], meta["attempts"], meta["reason"], save=False,
                      rerun=meta.get("rerun", ""))
        if res.refitted.any():
            logger.info("refit_loo: %d refit(s) resumed from %s", res.n_refitted, checkpoint)

    todo = [p for p in range(planned) if not res.refitted[p]]
    chains_per_task = chains if use_program else 1
    workers, parallel = _schedule(len(todo), chains_per_task, n_jobs, executor)
    job_program = program
    if use_program and todo:
        job_program = program.compiled()  # compile once, before any worker starts
    job = _Job(program=job_program if use_program else None, refit_fn=refit_fn,
               chains=chains, draws=draws, warmup=warmup, parallel_chains=parallel)

    def task(pos, attempt=0, scale=1, delta=None):
        i = int(idx[pos])
        s = seed + i + RETRY_SEED_OFFSET * (scale > 1)
        return (pos, attempt, scale, s, delta), _run, (job, i, s, scale, delta)

    def on_result(key, kind, value):
        pos, attempt, scale, s, delta = key
        i = int(idx[pos])
        if kind == "ok":
            try:
                reason, _, _ = convergence_check(value["log_lik"], value["n_divergent"],
                                                 max_rhat=max_rhat, min_ess=min_ess)
                if (reason and check_convergence and retry_unconverged and use_program
                        and scale == 1):
                    delta = _retry_delta(program, value["n_divergent"])
                    logger.info("refit_loo: observation %d %s; refitting with %d warm-up and "
                                "%d draws%s", i, reason, 2 * warmup, 2 * draws,
                                "" if delta is None else f", adapt_delta {delta:g}")
                    return [task(pos, attempt + 1, 2, delta)]
                rerun = "" if scale == 1 else (
                    f"rerun with {2 * warmup} warm-up and {2 * draws} draws"
                    + ("" if delta is None else f" at adapt_delta {delta:g} (after divergent "
                       "transitions)"))
                store(pos, value, s, attempt + 1, rerun=rerun)
            except ValueError as err:  # NaN / +inf / all -inf held-out draws
                fail(pos, "error", f"{err} (observation {i}, seed {s})")
        elif kind == "died" and attempt == 0:
            logger.warning("refit_loo: the worker refitting observation %d died; retrying", i)
            return [task(pos, attempt + 1, scale, delta)]
        else:
            fail(pos, kind, value)
        if bar is not None:
            bar.update(1)
        return None

    def fail(pos, kind, reason):
        res.status[pos] = kind
        res.reason[pos] = reason
        res.reliable[pos] = False
        res.seeds[pos] = seed + int(idx[pos])

    def out_of_time():
        return max_seconds is not None and time.perf_counter() - start >= max_seconds

    bar = _progress_bar(len(todo), progress) if todo else None
    pool = None
    try:
        if todo:
            pool, _ = _pool.make_pool(executor, workers or 1, job, timeout=timeout,
                                      hard=timeout is not None or max_seconds is not None)
            deadline = None if max_seconds is None else time_mono() + max_seconds - (
                time.perf_counter() - start)
            limits = dict(deadline=deadline,
                          deadline_reason=f"{TIME_BUDGET} max_seconds={max_seconds} ran out")
            width = pool.capacity if workers is None else min(workers, pool.capacity)
            res.workers, res.parallel_chains = width, parallel or 0
            rest_all = k - 1 - int(res.refitted.sum())
            done_seconds = res.seconds[res.refitted]
            if done_seconds.size:
                first = float(np.median(done_seconds))  # measured by the interrupted run
                head = 0.0
            else:
                first_pos = todo.pop(0)
                _pool.run_tasks([task(first_pos)], pool, on_result=on_result, timeout=timeout,
                                **limits)
                first = res.seconds[first_pos] if res.refitted[first_pos] else np.nan
                head = first
                if np.isfinite(first):
                    res.startup_seconds = time.perf_counter() - start - first
                if not res.refitted[first_pos]:
                    rest_all += 1
            rest = len(todo)
            res.estimated_seconds_total = head + _pool.estimate_seconds(first, rest_all, width)
            if max_seconds is not None and rest > 0 and np.isfinite(first):
                budget = max_seconds - (time.perf_counter() - start)
                waves = 0 if budget < first else int(budget // first)
                fits = waves * width
                if fits < rest:
                    for p in todo[fits:]:
                        res.reason[p] = f"not refitted: max_seconds={max_seconds:g}"
                    todo = todo[:fits]
                    rest = fits
            res.estimated_seconds_planned = head + _pool.estimate_seconds(first, rest, width)
            if bar is not None:
                bar.total = len(todo) + (0 if done_seconds.size else 1)
                bar.refresh()
            if np.isfinite(first):
                took = (f"the refits resumed from the checkpoint took {first:.2f} s (median)"
                        if done_seconds.size else f"the first refit took {first:.2f} s")
                msg = (f"refit_loo: {took}; estimated "
                       f"{_pool.estimate_seconds(first, rest, width):.1f} s for the remaining "
                       f"{rest} refit(s) on {width} worker(s)")
                if rest < rest_all:
                    msg += (f"; refitting all {k} would take about "
                            f"{res.estimated_seconds_total:.1f} s, the limit leaves "
                            f"{rest_all - rest} observation(s) out")
                _announce(msg, bar)
            if todo:
                left = _pool.run_tasks([task(p) for p in todo], pool, on_result=on_result,
                                       timeout=timeout, stop=out_of_time, **limits)
                for pos, *_ in left:
                    res.reason[pos] = f"not refitted: max_seconds={max_seconds:g}"
    except KeyboardInterrupt:
        saved = f"; the {res.n_refitted} finished are saved in {checkpoint}" if ck else ""
        logger.warning("refit_loo interrupted after %d of %d refits%s", res.n_refitted, k, saved)
        raise
    finally:
        if pool is not None:
            pool.close(kill=True)
        if bar is not None:
            bar.close()
    skipped = (res.status == "skipped")
    for p in np.flatnonzero(skipped):
        if not res.reason[p]:
            res.reason[p] = f"not refitted: max_refits={max_refits}"
    res.not_refitted = idx[skipped]
    if res.not_refitted.size:
        shown = res.not_refitted[:20].tolist()
        more = "" if res.not_refitted.size <= 20 else f" (+{res.not_refitted.size - 20} more)"
        warnings.warn(
            f"{res.not_refitted.size} of {k} observations were not refitted because of the "
            f"limit (max_refits={max_refits}, max_seconds={max_seconds}): {shown}{more}",
            UserWarning,
            stacklevel=2,
        )
    res.wall_seconds = time.perf_counter() - start
    if warn:
        res.warn_unverified("refit", stacklevel=3)
    return res


def _retry_delta(program, n_divergent: int):
    """adapt_delta of the rerun of a refit with ``n_divergent`` divergent transitions (None:
    no divergences, keep the program's)."""
    if n_divergent <= 0:
        return None
    current = (getattr(program, "fit_kwargs", None) or {}).get("adapt_delta") or 0.8
    return max(float(current), RETRY_ADAPT_DELTA)
