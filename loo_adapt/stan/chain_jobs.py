"""A Stan fit as separate single-chain jobs (`StanProgram.fit` with an executor, a
checkpoint, a timeout or ``n_jobs``): the job a worker runs, the chains' draws as arrays for
the checkpoint and back, and the finished chains stacked into one `Draws`."""

from __future__ import annotations

import numpy as np

from loo_adapt.draws import Draws
from loo_adapt.stan import backends as _stan

__all__ = ["fit_chains"]


class _ChainJob:
    """One chain of a fit, run in a worker (module level, so that it pickles)."""

    def __init__(self, stan_file, data, mixis, opts):
        self.stan_file, self.data, self.mixis, self.opts = stan_file, data, mixis, opts

    @staticmethod
    def run(job, seed: int) -> Draws:
        return _stan.fit(job.stan_file, job.data, mixis=job.mixis, seed=seed, **job.opts)


def _draws_to_arrays(draws: Draws) -> tuple[dict, dict]:
    arrays = {f"v__{k}": v for k, v in draws.variables.items()}
    arrays.update({f"s__{k}": np.asarray(v) for k, v in draws.sample_stats.items()})
    for name in ("log_p", "log_q"):
        if getattr(draws, name) is not None:
            arrays[name] = getattr(draws, name)
    return arrays, {"method": draws.method, "source": draws.source}


def _draws_from_arrays(arrays: dict, meta: dict) -> Draws:
    return Draws(
        variables={k[3:]: v for k, v in arrays.items() if k.startswith("v__")},
        sample_stats={k[3:]: v for k, v in arrays.items() if k.startswith("s__")},
        log_p=arrays.get("log_p"), log_q=arrays.get("log_q"), method=meta["method"],
        source=meta["source"],
    )


def _combine_chains(parts: list[Draws]) -> Draws:
    """Single-chain (or few-chain) fits stacked along the chain axis."""
    first = parts[0]

    def cat(values):
        return None if values[0] is None else np.concatenate(values, axis=0)

    stats = {k: np.concatenate([np.asarray(p.sample_stats[k]) for p in parts], axis=0)
             for k in first.sample_stats if all(k in p.sample_stats for p in parts)}
    source = first.source
    if len(parts) > 1:
        source = f"{source} (+{len(parts) - 1} more chain(s) run as separate jobs)"
    return Draws(
        variables={k: np.concatenate([p.variables[k] for p in parts], axis=0)
                   for k in first.variables},
        method=first.method, log_p=cat([p.log_p for p in parts]),
        log_q=cat([p.log_q for p in parts]), sample_stats=stats, source=source,
    )


def fit_chains(program, mixis, seed, executor, checkpoint, timeout, n_jobs, kw) -> Draws:
    """`StanProgram.fit` with ``executor``, ``checkpoint``, ``timeout`` or ``n_jobs``: the chains
    as single-chain jobs on the executor of `loo_adapt.stan.pool` (chain c with seed ``seed +
    c``), each finished chain saved to ``checkpoint``, a chain that fails or runs past
    ``timeout`` left out with a warning (an error if none is left), the rest combined."""
    import warnings

    from loo_adapt.stan import pool as _pool
    from loo_adapt.stan.refit import _check_int, _check_seconds, _program_fingerprint

    _pool.check_not_bootstrapping("StanProgram.fit")
    kw = dict(kw)
    chains = _check_int("chains", kw.pop("chains", 4), 1, allow_none=False)
    kw.pop("parallel_chains", None)
    timeout = _check_seconds("timeout", timeout)
    n_jobs = _check_int("n_jobs", n_jobs, 1)
    ck = None
    if checkpoint is not None:
        ck = _pool.Checkpoint(checkpoint, "chains", _pool.fingerprint(
            _program_fingerprint(program), bool(mixis), seed, chains,
            {k: v for k, v in program._fit_options(kw).items() if k != "backend"}))
    done: dict[int, Draws] = {}
    if ck is not None:
        for key, (arrays, meta) in ck.load().items():
            if key.startswith("chain_"):
                done[int(key[6:])] = _draws_from_arrays(arrays, meta)
    todo = [c for c in range(chains) if c not in done]
    failed: dict[int, str] = {}

    def on_result(key, kind, value):
        c = key
        if kind == "ok":
            done[c] = value
            if ck is not None:
                arrays, meta = _draws_to_arrays(value)
                ck.save(f"chain_{c}", arrays, meta)
        else:
            failed[c] = value

    if todo:
        prepared = program.compiled()
        opts = {**prepared._fit_options(kw), "chains": 1, "parallel_chains": 1}
        job = _ChainJob(prepared.stan_file, prepared.data, bool(mixis), opts)
        workers, _ = (None, None) if executor is not None else _pool.plan_workers(
            len(todo), 1, n_jobs)
        pool, _ = _pool.make_pool(executor, workers or 1, job, timeout=timeout)
        try:
            _pool.run_tasks([(c, _ChainJob.run, (job, seed + c)) for c in todo], pool,
                            on_result=on_result, timeout=timeout)
        finally:
            pool.close(kill=True)
    if not done:
        raise RuntimeError(
            "every chain of the fit failed: " + "; ".join(
                f"chain {c}: {why}" for c, why in sorted(failed.items())))
    if failed:
        warnings.warn(
            f"{len(failed)} of {chains} chains failed and are left out of the "
            f"{'mixture (MixIS)' if mixis else 'posterior'} fit: " + "; ".join(
                f"chain {c}: {why}" for c, why in sorted(failed.items())),
            UserWarning, stacklevel=3)
    return _combine_chains([done[c] for c in sorted(done)])
