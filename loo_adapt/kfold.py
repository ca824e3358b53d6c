"""K-fold cross-validation on the refit machinery: ``kfold(program, K=10)``.

Each fold is one refit of the model without the fold's rows (``StanProgram.data_without``
with a set of rows), run on the same executors as exact LOO refits
(:mod:`loo_adapt.stan.pool`: a local process pool by default, any
``concurrent.futures.Executor`` or a ``dask.distributed.Client``), with the same per-fit
timeout, checkpoint / resume, convergence check and workers x chains <= cores scheduling.

Per held-out observation the log predictive density is ``log mean_s p(y_i | theta_s)`` over
the fold refit's draws (with its Monte Carlo error as for exact refits);
``p_kfold = lpd - elpd_kfold`` with ``lpd`` from the full-data posterior (an extra fit when
``log_lik`` is not given).  The result is the installed arviz's ``ELPDData`` (built by
:func:`loo_adapt.evaluation.arviz.to_elpd_data`), so ``az.compare`` accepts it; the folds
and per-fold status are in its ``.kfold`` attribute.

Folds as R loo makes them: ``"random"`` (``kfold_split_random``), ``"stratified"`` by a
binary / discrete outcome (``kfold_split_stratified``), ``"grouped"`` keeping every group in
one fold (``kfold_split_grouped``), or an explicit array of fold labels.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from loo_adapt.core._callable import make_module_callable
from loo_adapt.draws import Draws
from loo_adapt.stan import pool as _pool
from loo_adapt.stan.heldout import (
    _as_chains,
    _Job,
    _n_divergent,
    convergence_check,
    heldout_elpd,
    tail_check,
)
from loo_adapt.stan.refit import (
    _check_int,
    _check_seconds,
    _check_thresholds,
    _fn_fingerprint,
    _program_fingerprint,
    _progress_bar,
    _schedule,
)

__all__ = ["kfold", "kfold_split"]

logger = logging.getLogger("loo_adapt.kfold")


def kfold_split(n: int, K: int = 10, *, folds="random", y=None, groups=None,
                seed: int = 0) -> np.ndarray:
    """Fold of each observation, 0..K-1.

    Parameters
    ----------
    n : number of observations.
    K : number of folds (2 <= K <= n; for "grouped", at most the number of groups).
    folds : "random" (a random permutation dealt into K folds of near-equal size),
        "stratified" (observations ordered by ``y``, randomly within each value, then dealt
        round robin, so every fold has each outcome in near-equal numbers), "grouped"
        (whole groups dealt into folds) or an array of n fold labels (any K distinct values).
    y : outcomes for "stratified".
    groups : group label per observation for "grouped".
    seed : random seed.

    Returns
    -------
    (n,) int array.

    Examples
    --------
    >>> f = kfold_split(10, 5, seed=1)
    >>> np.bincount(f).tolist()
    [2, 2, 2, 2, 2]
    >>> kfold_split(4, 2, folds="stratified", y=[0, 0, 1, 1], seed=0)[[0, 1]].tolist() in (
    ...     [0, 1], [1, 0])
    True
    """
    n = _check_int("n", n, 1, allow_none=False)
    if not isinstance(folds, str):
        labels = np.asarray(folds)
        if labels.shape != (n,):
            raise ValueError(f"folds must have one label per observation ({n}), got shape "
                             f"{labels.shape}")
        _, out = np.unique(labels, return_inverse=True)
        if out.max() + 1 < 2:
            raise ValueError("folds must contain at least 2 distinct labels")
        return out.astype(np.int64)
    K = _check_int("K", K, 2, allow_none=False)
    rng = np.random.default_rng(seed)
    if folds == "random":
        if K > n:
            raise ValueError(f"K = {K} folds need at least K observations, got {n}")
        out = np.empty(n, dtype=np.int64)
        out[rng.permutation(n)] = np.arange(n) % K
        return out
    if folds == "stratified":
        if y is None:
            raise ValueError("folds='stratified' needs the outcome: pass y= (or a program "
                             "whose data has a binary y)")
        y = np.asarray(y)
        if y.shape != (n,):
            raise ValueError(f"y must have shape ({n},), got {y.shape}")
        if K > n:
            raise ValueError(f"K = {K} folds need at least K observations, got {n}")
        order = np.lexsort((rng.permutation(n), y))  # by y, randomly within each value
        out = np.empty(n, dtype=np.int64)
        out[order] = np.arange(n) % K
        return out
    if folds == "grouped":
        if groups is None:
            raise ValueError("folds='grouped' needs groups= (a group label per observation)")
        groups = np.asarray(groups)
        if groups.shape != (n,):
            raise ValueError(f"groups must have shape ({n},), got {groups.shape}")
        uniq, g = np.unique(groups, return_inverse=True)
        if K > uniq.size:
            raise ValueError(f"K = {K} folds need at least K groups, got {uniq.size}")
        fold_of_group = np.empty(uniq.size, dtype=np.int64)
        fold_of_group[rng.permutation(uniq.size)] = np.arange(uniq.size) % K
        return fold_of_group[g]
    raise ValueError(
        f"folds must be 'random', 'stratified', 'grouped' or an array of labels, got {folds!r}"
    )


# --------------------------------------------------------------------------------------------
# jobs
# --------------------------------------------------------------------------------------------
def _heldout_rows(ll, m: int) -> np.ndarray:
    """A fold's held-out log-lik as (m, chains, draws) from (S, m) or (chains, draws, m)."""
    arr = np.asarray(getattr(ll, "values", ll), dtype=np.float64)
    if arr.ndim == 1 and m == 1:
        arr = arr[:, None]
    if arr.ndim not in (2, 3) or arr.shape[-1] != m:
        raise ValueError(
            f"refit_fn must return the held-out log-likelihood of the fold's {m} rows as "
            f"(S, {m}) or (chains, draws, {m}), got shape {arr.shape}"
        )
    if arr.ndim == 2:
        arr = arr[None]
    return np.stack([_as_chains(arr[..., j]) for j in range(m)])


class _FoldJob(_Job):
    """A refit job without a set of rows (the refit settings are those of `_Job`)."""

    def __call__(self, rows, seed: int) -> dict:
        t0 = time.perf_counter()
        rows = [int(r) for r in rows]
        try:
            if self.refit_fn is not None:
                ll, n_div = _heldout_rows(self.refit_fn(rows, seed=seed), len(rows)), -1
            else:
                fit = self.program.refit_without(
                    rows, seed=seed, chains=self.chains, draws=self.draws,
                    warmup=self.warmup, parallel_chains=self.parallel_chains)
                ll = np.stack([self.program.heldout_log_lik(fit, r).reshape(fit.shape)
                               for r in rows])
                ll, n_div = _heldout_rows(np.moveaxis(ll, 0, -1), len(rows)), _n_divergent(fit)
        except Exception as err:
            err.add_note(f"(while refitting without the fold of rows {rows[:10]}, seed {seed})")
            raise
        return {"log_lik": ll, "seconds": time.perf_counter() - t0, "n_divergent": n_div}


@dataclass
class _FullJob:
    program: object = None
    chains: int = 4
    draws: int = 1000
    warmup: int = 1000
    parallel_chains: int | None = None

    def __call__(self, seed: int) -> dict:
        t0 = time.perf_counter()
        opts = {} if self.parallel_chains is None else {"parallel_chains": self.parallel_chains}
        fit = self.program.fit(seed=seed, chains=self.chains, draws=self.draws,
                               warmup=self.warmup, **opts)
        ll = fit.log_lik(self.program.log_lik_name).reshape(fit.n_samples, -1)
        return {"log_lik": ll, "seconds": time.perf_counter() - t0}


def _call(job, *args):
    return job(*args)


def _lpd(log_lik, n: int) -> np.ndarray:
    """lpd_i = log mean_s p(y_i | theta_s) of the full-data posterior."""
    if hasattr(log_lik, "log_lik") and hasattr(log_lik, "n_samples"):  # a Draws
        log_lik = log_lik.log_lik()
    arr = np.asarray(log_lik, dtype=np.float64)
    arr = arr.reshape(-1, arr.shape[-1])
    if arr.shape[1] != n or arr.shape[0] < 2 or not np.all(np.isfinite(arr) | (arr == -np.inf)):
        raise ValueError(
            f"log_lik must be the full-data posterior's log-likelihood draws (S, {n}) or "
            f"(chains, draws, {n}) without NaN/+inf, got shape {np.shape(log_lik)}"
        )
    return logsumexp(arr, axis=0) - math.log(arr.shape[0])


# --------------------------------------------------------------------------------------------
# the verb
# --------------------------------------------------------------------------------------------
def kfold(
    program=None,
    K: int = 10,
    *,
    folds="random",
    groups=None,
    y=None,
    seed: int = 0,
    refit_fn=None,
    n_obs: int | None = None,
    log_lik=None,
    chains: int = 4,
    draws: int = 1000,
    warmup: int = 1000,
    executor=None,
    n_jobs: int | None = None,
    checkpoint=None,
    timeout: float | None = None,
    check_convergence: bool = True,
    max_rhat: float = 1.01,
    min_ess: float | None = None,
    progress: bool = True,
    scale: str = "log",
    key: str | None = None,
):
    """K-fold cross-validation: elpd_kfold as an arviz ``ELPDData`` (``az.compare`` takes it).

    Parameters
    ----------
    program : a :class:`loo_adapt.stan.program.StanProgram`; fold k is a NUTS fit of its data
        without the fold's rows (seed ``seed + k``), and the held-out log-likelihood is
        recomputed at the fit's draws.
    K : number of folds.
    folds : "random", "stratified" (by ``y``, default the program's binary y), "grouped"
        (by ``groups``) or an array of n fold labels; see :func:`kfold_split`.
    groups : group label per observation for ``folds="grouped"``.
    y : outcomes for stratification (default: the program's binary ``y``).
    seed : seed of the fold split and base seed of the fits.
    refit_fn : instead of ``program``: ``refit_fn(rows, seed=...)`` returning the held-out
        log-likelihood draws of those rows, (S, len(rows)) or (chains, draws, len(rows));
        a module-level function so that it runs in worker processes.
    n_obs : number of observations (``refit_fn`` without ``program``).
    log_lik : the full-data posterior's log-likelihood draws (S, n), (chains, draws, n) or a
        ``Draws``, for ``lpd`` and ``p_kfold``; default: one more fit of ``program``
        (required with ``refit_fn``).  ``Draws`` holding the fit's parameters too are first
        checked to come from ``program`` (`loo_adapt.stan.identity`).
    chains, draws, warmup : NUTS settings of each fit (``program`` only).
    executor : None (a local process pool), a ``concurrent.futures.Executor`` or a
        ``dask.distributed.Client``.
    n_jobs : local worker processes (None: workers x chains <= cores).
    checkpoint : directory where each finished fold is saved; a rerun with it skips them
        (the run is identified by content, as in `loo_adapt.stan.refit.refit_loo`).
    timeout : hard limit per fit in seconds (the local pool terminates the worker).
    check_convergence, max_rhat, min_ess : per-fold check (divergences, R-hat, bulk ESS of
        each held-out row); a fold that fails it makes its rows unverified (ELPDData warning).
    progress : show a progress bar.
    key : names the run in the checkpoint instead of hashing ``refit_fn``.
    scale : "log", "negative_log" or "deviance", as arviz.

    Returns
    -------
    ELPDData
        With ``elpd_loo`` the K-fold elpd (arviz reads it under the LOO names), pointwise
        ``loo_i``, and ``.kfold`` a dict: folds, fold_status, fold_reason, seconds. The
        `PointwiseLoo` is in ``.loo_adapt`` (``reliable`` False for unverified folds).

    Raises
    ------
    RuntimeError
        When a fold failed (error, timeout, dead worker twice): the finished folds are kept
        in ``checkpoint`` (a rerun with it does only the missing folds).

    Examples
    --------
    >>> import numpy as np
    >>> def refit_fn(rows, seed):  # a model whose held-out density is exactly 0.3
    ...     return np.full((400, len(rows)), np.log(0.3))
    >>> res = kfold(refit_fn=refit_fn, n_obs=6, K=3, log_lik=np.full((400, 6), np.log(0.5)),
    ...             n_jobs=1, progress=False)
    >>> est = res.loo_adapt.estimates()  # the same keys on arviz 0.x and 1.x
    >>> round(est["elpd_loo"], 4), round(est["p_loo"], 4)
    (-7.2238, 3.065)
    """
    from loo_adapt.evaluation.arviz import to_elpd_data
    from loo_adapt.result import PointwiseLoo
    from loo_adapt.stan.program import StanProgram

    _pool.check_not_bootstrapping("kfold")
    if program is None and refit_fn is None:
        raise ValueError("give program= (a StanProgram) or refit_fn=")
    if program is not None and not isinstance(program, StanProgram):
        raise TypeError(f"program must be a StanProgram, got {type(program).__name__}")
    if refit_fn is not None and not callable(refit_fn):
        raise TypeError("refit_fn must be a callable refit_fn(rows, seed=...)")
    if refit_fn is not None and log_lik is None:
        raise ValueError("with refit_fn, pass log_lik= (the full-data posterior's "
                         "log-likelihood draws) for lpd and p_kfold")
    if program is not None:
        n = program.n_obs
    elif n_obs is not None:
        n = _check_int("n_obs", n_obs, 2, allow_none=False)
    else:
        raise ValueError("with refit_fn and no program, pass n_obs=")
    if y is None and program is not None:
        y = program.y
    if program is not None and isinstance(log_lik, Draws) and len(log_lik.variables) > 1:
        # the full-data fit given with its parameters: the folds must refit its program
        from loo_adapt.stan.identity import check_program_matches

        check_program_matches(program, log_lik)
    for name, v in (("chains", chains), ("draws", draws)):
        _check_int(name, v, 1, allow_none=False)
    _check_int("warmup", warmup, 0, allow_none=False)
    _check_int("seed", seed, 0, allow_none=False)
    n_jobs = _check_int("n_jobs", n_jobs, 1)
    timeout = _check_seconds("timeout", timeout)
    _check_thresholds(max_rhat, min_ess)
    fold_of = kfold_split(n, K, folds=folds, y=y, groups=groups, seed=seed)
    n_folds = int(fold_of.max()) + 1
    rows_of = [np.flatnonzero(fold_of == k) for k in range(n_folds)]
    use_program = refit_fn is None
    if use_program and n_folds < n and program.leaves_out_by_term():
        # a fold's refit takes its rows' log_lik terms out of the full-data target instead
        # of dropping their data: checked here, before any refit, that the program can
        program.without_terms(max(rows_of, key=len))

    ck = None
    if checkpoint is not None:
        ck = _pool.Checkpoint(checkpoint, "kfold", _pool.fingerprint(
            _program_fingerprint(program if use_program else None),
            _fn_fingerprint(refit_fn, key),
            fold_of, chains, draws, warmup, seed, log_lik is None))

    elpd = np.full(n, np.nan)
    mcse = np.full(n, np.nan)
    ess = np.full(n, np.nan)
    reliable = np.zeros(n, dtype=bool)
    fold_status = np.full(n_folds, "pending", dtype=object)
    fold_reason = np.full(n_folds, "", dtype=object)
    seconds = np.full(n_folds, np.nan)
    n_draws = np.zeros(n_folds, dtype=np.int64)
    full = {}

    def store_fold(k, out, save=True):
        rows = rows_of[k]
        ll = np.asarray(out["log_lik"])
        reasons = []
        for j, r in enumerate(rows):
            elpd[r], mcse[r], ess[r] = heldout_elpd(ll[j])
            reason, _, _ = convergence_check(ll[j], out["n_divergent"] if j == 0 else -1,
                                             max_rhat=max_rhat, min_ess=min_ess)
            reason = "; ".join(x for x in (reason, tail_check(ll[j], ess[r])[0]) if x)
            if reason:
                reasons.append(f"row {int(r)}: {reason}")
        reason = "; ".join(reasons[:3]) if check_convergence else ""
        reliable[rows] = not reason
        fold_status[k] = "unconverged" if reason else "ok"
        fold_reason[k] = reason
        seconds[k] = out["seconds"]
        n_draws[k] = ll[0].size
        if save and ck is not None:
            ck.save(f"fold_{k}", {"log_lik": ll},
                    {"seconds": out["seconds"], "n_divergent": out["n_divergent"]})

    def store_full(out, save=True):
        full["lpd"] = _lpd(out["log_lik"], n)
        if save and ck is not None:
            ck.save("full", {"log_lik": out["log_lik"]}, {"seconds": out["seconds"]})

    if ck is not None:
        for key, (arrays, meta) in ck.load().items():
            if key == "full":
                store_full({"log_lik": arrays["log_lik"], **meta}, save=False)
            elif key.startswith("fold_"):
                store_fold(int(key[5:]), {"log_lik": arrays["log_lik"], **meta}, save=False)
    if log_lik is not None:
        full["lpd"] = _lpd(log_lik, n)

    todo = [k for k in range(n_folds) if fold_status[k] == "pending"]
    need_full = "lpd" not in full
    workers, parallel = _schedule(len(todo) + need_full, chains if use_program else 1, n_jobs,
                                 executor)
    job_program = program.compiled() if use_program and (todo or need_full) else program
    job = _FoldJob(program=job_program if use_program else None, refit_fn=refit_fn,
                   chains=chains, draws=draws, warmup=warmup, parallel_chains=parallel)
    tasks = [(("fold", k, 0), _call, (job, rows_of[k].tolist(), seed + k)) for k in todo]
    if need_full:
        full_job = _FullJob(job_program, chains, draws, warmup, parallel)
        tasks.insert(0, (("full", -1, 0), _call, (full_job, seed + n_folds)))
    bar = _progress_bar(len(tasks), progress and bool(tasks), "K-fold fits")

    def on_result(key, kind, value):
        what, k, attempt = key
        if kind == "died" and attempt == 0:
            logger.warning("kfold: a worker died during %s; retrying",
                           "the full-data fit" if what == "full" else f"fold {k}")
            return [((what, k, 1), *next(t[1:] for t in tasks if t[0][:2] == (what, k)))]
        if kind == "ok":
            try:
                store_full(value) if what == "full" else store_fold(k, value)
            except ValueError as err:
                kind, value = "error", str(err)
        if kind != "ok":
            if what == "full":
                full["error"] = value
            else:
                fold_status[k], fold_reason[k] = kind, value
        if bar is not None:
            bar.update(1)
        return None

    pool = None
    try:
        if tasks:
            pool, _ = _pool.make_pool(executor, workers or 1, job, timeout=timeout)
            _pool.run_tasks(tasks, pool, on_result=on_result, timeout=timeout)
    finally:
        if pool is not None:
            pool.close(kill=True)
        if bar is not None:
            bar.close()
    failed = [k for k in range(n_folds) if fold_status[k] not in ("ok", "unconverged")]
    if failed or "error" in full:
        lines = [f"fold {k} (rows {rows_of[k][:8].tolist()}): {fold_reason[k]}" for k in failed]
        if "error" in full:
            lines.insert(0, f"full-data fit: {full['error']}")
        keep = (f"the finished folds are saved in {checkpoint}; rerun with the same checkpoint "
                "to fit only the missing ones" if ck is not None else
                "pass checkpoint=DIR to keep finished folds across reruns")
        raise RuntimeError("K-fold incomplete: " + "; ".join(lines) + f". {keep}")

    lpd = full["lpd"]
    binary = y is not None and np.all((np.asarray(y) == 0) | (np.asarray(y) == 1))
    loo_prob = None
    if binary:
        p_obs = np.exp(elpd)
        loo_prob = np.where(np.asarray(y) == 1, p_obs, 1.0 - p_obs)
    result = PointwiseLoo(
        elpd_i=elpd, p_loo_i=lpd - elpd, lpd_i=lpd, mcse_elpd_i=mcse,
        pareto_k=np.full(n, np.nan), good_k=0.7, n_samples=int(n_draws.min()),
        r_eff=1.0, method=np.full(n, "refit", dtype=object), loo_prob=loo_prob,
        y=np.asarray(y, dtype=float) if binary else None, diagnostic=ess, reliable=reliable,
        verified_by=np.where(reliable, "refit", "").astype(object),
    )
    out = to_elpd_data(result, scale=scale, n_folds=n_folds)
    out.kfold = {"folds": fold_of, "fold_status": fold_status, "fold_reason": fold_reason,
                 "seconds": seconds}
    return out


make_module_callable(__name__, kfold)
