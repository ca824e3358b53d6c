"""Past one machine: out-of-core PSIS-LOO on dask, and subsampled vs full LOO at large n.

Run from the repository root (needs the ``[dask]`` extra):

    python benchmarks/bench_scale.py [--draws 4000] [--obs 100000] [--check-obs 5000]
                                     [--ss-obs 100000] [--ss-m 1000] [--cluster 0]

1. ``loo(dask_array)`` of a lazily generated (chains, draws, n) log-likelihood (a normal model
   under AR(1) posterior draws of (mu, sigma), 2% outlying observations, chunked by columns):
   wall time, peak RSS of this process (``resource.getrusage``; the matrix itself would take
   S x n x 8 bytes), and the largest pointwise difference from in-memory
   `loo_adapt.core.psis_loo.loo_pointwise` on the first and last ``--check-obs`` columns, whose
   per-column time is the in-memory reference of the printed time ratio.
2. ``loo_subsample`` vs full PSIS-LOO on a simulated logistic regression with ``--ss-obs``
   observations (draws from the Gaussian approximation at the MLE, 4 AR(1) chains); the full
   PSIS-LOO evaluates the log-likelihood chunk by chunk (`loo_adapt.io.lazy.from_function`),
   the same PSIS kernel as in memory.  Prints both estimates, the difference in units of
   the subsampling SE and of the SE, and the speed ratio.
3. Refits on 1 vs 2 workers: ``refit_loo(idx, refit_fn=..., executor=client)`` on a
   ``dask.distributed`` LocalCluster of 1 and of 2 worker processes (one thread each), with
   a CPU-bound stand-in refit (a Gibbs sampler of a conjugate normal model, ~1 s each), and
   the speed-up; the held-out estimates are identical on both.

``--cluster N`` runs part 1 on a ``dask.distributed`` LocalCluster of N worker processes
(the peak RSS printed is then the driver's only); the default is dask's threaded scheduler.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import loo_adapt  # noqa: E402
from loo_adapt.core.chunked import FIELDS  # noqa: E402
from loo_adapt.core.psis_loo import loo_pointwise  # noqa: E402


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: kB


def _ar1(rng, shape, phi=0.5):
    z = rng.normal(size=shape)
    for t in range(1, shape[1]):
        z[:, t] = phi * z[:, t - 1] + np.sqrt(1 - phi**2) * z[:, t]
    return z


def lazy_normal_log_lik(n_chains, n_draws, n_obs, seed, obs_chunk):
    """Lazily generated (chains, draws, n) log-likelihood; only (S,) draws are in memory."""
    import dask.array as da

    rng = np.random.default_rng(seed)
    mu = 0.03 * _ar1(rng, (n_chains, n_draws))[..., None]
    sigma = np.exp(0.02 * _ar1(rng, (n_chains, n_draws)))[..., None]
    drng = da.random.default_rng(seed)
    y = drng.standard_normal(n_obs, chunks=obs_chunk)
    y = da.where(drng.random(n_obs, chunks=obs_chunk) < 0.02, 5.0 * y, y)
    return -0.5 * ((y - mu) / sigma) ** 2 - np.log(sigma) - 0.5 * np.log(2 * np.pi)


def part_out_of_core(args) -> None:
    import dask

    from loo_adapt.io.lazy import DEFAULT_CHUNK_BYTES, psis_loo_lazy

    n_chains = 4
    n_draws = args.draws // n_chains
    s = n_chains * n_draws
    chunk = max(1, DEFAULT_CHUNK_BYTES // (8 * s))
    ll = lazy_normal_log_lik(n_chains, n_draws, args.obs, args.seed, chunk)
    scheduler = "LocalCluster" if args.cluster else dask.config.get("scheduler", "threads")
    print(f"== 1. out-of-core PSIS-LOO: {n_chains} x {n_draws} draws x n = {args.obs} "
          f"({s * args.obs * 8 / 2**30:.1f} GiB as a dense matrix), chunks of {chunk} columns, "
          f"scheduler: {scheduler}")
    client = None
    if args.cluster:
        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=args.cluster, threads_per_worker=1,
                               dashboard_address=None)
        client = Client(cluster)
    # warm up numba (cache load / compile) outside the timing
    psis_loo_lazy(ll[..., :chunk])
    rss0 = _rss_mb()
    t0 = time.perf_counter()
    elpd = loo_adapt.loo(ll)
    t_lazy = time.perf_counter() - t0
    rss1 = _rss_mb()
    res = elpd.loo_adapt
    est = res.estimates()
    print(f"loo(dask array): {t_lazy:.1f} s, elpd_loo = {est['elpd_loo']:.2f} "
          f"(SE {est['se_elpd_loo']:.2f}), k-hat > {res.good_k:.2f}: "
          f"{int(np.sum(res.pareto_k > res.good_k))}")
    print(f"peak RSS of this process: {rss1:.0f} MB (before the call: {rss0:.0f} MB)")
    if client is not None:
        client.close()
        cluster.close()

    k = min(args.check_obs, args.obs)
    diffs, t_mem = [], 0.0
    for sl in (slice(0, k), slice(args.obs - k, args.obs)):
        x = ll[..., sl].compute()
        t0 = time.perf_counter()
        ref = loo_pointwise(x)
        t_mem += time.perf_counter() - t0
        for name in FIELDS:
            a = getattr(res, name)[sl]
            b = getattr(ref, name)
            diffs.append(float(np.max(np.abs(a - b))))
        del x
    per_col_mem = t_mem / (2 * k)
    print(f"in memory on 2 x {k} columns: max |lazy - in-memory| over {', '.join(FIELDS)} "
          f"= {max(diffs):.1e}")
    print(f"time per column: lazy {1e6 * t_lazy / args.obs:.0f} us, in memory "
          f"{1e6 * per_col_mem:.0f} us (ratio {t_lazy / args.obs / per_col_mem:.2f})")


def logistic_problem(n_obs, n_draws, seed):
    rng = np.random.default_rng(seed)
    p = 5
    X = rng.normal(size=(n_obs, p - 1))
    design = np.column_stack([np.ones(n_obs), X])
    beta_true = np.array([-0.3, 0.8, -0.5, 0.3, 0.0])
    y = (rng.random(n_obs) < 1 / (1 + np.exp(-design @ beta_true))).astype(float)
    beta = np.zeros(p)
    for _ in range(30):
        pr = 1 / (1 + np.exp(-design @ beta))
        hess = design.T @ (design * (pr * (1 - pr))[:, None])
        beta = beta + np.linalg.solve(hess, design.T @ (y - pr))
    chol = np.linalg.cholesky(np.linalg.inv(hess))
    theta = (beta + _ar1(rng, (4, n_draws // 4, p)) @ chol.T).reshape(-1, p)

    def log_lik(th, idx):
        mu = th @ design[idx].T
        return y[idx] * mu - np.logaddexp(0.0, mu)

    return log_lik, theta


def part_subsample(args) -> None:
    from loo_adapt.io.lazy import from_function, psis_loo_lazy
    from loo_adapt.subsample import loo_subsample

    n, s = args.ss_obs, args.draws
    fn, theta = logistic_problem(n, s, args.seed + 1)
    print(f"\n== 2. loo_subsample vs full PSIS-LOO: logistic regression, n = {n}, S = {s} "
          f"(4 chains), m = {args.ss_m}")
    loo_subsample(fn, theta, n_obs=n, observations=50, chains=4, seed=0)  # warm up
    t0 = time.perf_counter()
    ss = loo_subsample(fn, theta, n_obs=n, observations=args.ss_m, chains=4, seed=args.seed)
    t_ss = time.perf_counter() - t0
    t0 = time.perf_counter()
    full = psis_loo_lazy(from_function(fn, theta, n, s, chains=4)).estimates()
    t_full = time.perf_counter() - t0
    e = ss.estimates
    diff = e["elpd_loo"] - full["elpd_loo"]
    print(f"full PSIS-LOO : elpd_loo = {full['elpd_loo']:.2f} (SE {full['se_elpd_loo']:.2f}), "
          f"{t_full:.1f} s")
    print(f"loo_subsample : elpd_loo = {e['elpd_loo']:.2f} (SE {e['se_elpd_loo']:.2f}, "
          f"subsampling SE {e['subsampling_se_elpd_loo']:.2f}), {t_ss:.2f} s")
    print(f"difference {diff:+.2f} = {diff / e['subsampling_se_elpd_loo']:+.2f} subsampling SE "
          f"= {diff / e['se_elpd_loo']:+.4f} SE; speed ratio full / subsampled "
          f"{t_full / t_ss:.1f}x")


def _gibbs_refit(i, seed=0):
    """A CPU-bound stand-in for one refit: a long Gibbs run of a normal model without y_i;
    returns the held-out log-likelihood draws (4 chains x 500)."""
    rng = np.random.default_rng(seed)
    y = np.random.default_rng(7).normal(1.0, 2.0, size=200)
    rest = np.delete(y, i)
    out = np.empty((4, 500))
    for c in range(4):
        mu, tau = 0.0, 1.0
        for t in range(5500):  # 5000 warm-up, thinned by 10 below
            mu = rng.normal(rest.mean(), 1.0 / np.sqrt(tau * rest.size))
            tau = rng.gamma(1.0 + rest.size / 2, 1.0 / (1.0 + 0.5 * np.sum((rest - mu) ** 2)))
            if t >= 500 and (t - 500) % 10 == 0:
                out[c, (t - 500) // 10] = (-0.5 * np.log(2 * np.pi / tau)
                                           - 0.5 * tau * (y[i] - mu) ** 2)
    return out


def part_refits(args) -> None:
    from dask.distributed import Client, LocalCluster

    from loo_adapt.stan.refit import refit_loo

    idx = list(range(args.refits))
    print(f"\n== 3. {len(idx)} refits (refit_loo with executor=dask Client)")
    results = {}
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            client.submit(_gibbs_refit, 0).result()  # workers warm
            t0 = time.perf_counter()
            res = refit_loo(idx, refit_fn=_gibbs_refit, executor=client, progress=False,
                            seed=1)
            results[workers] = (time.perf_counter() - t0, res)
        print(f"{workers} worker(s): {results[workers][0]:.1f} s")
    same = np.array_equal(results[1][1].elpd_i, results[2][1].elpd_i)
    print(f"speed-up 2 vs 1 workers: {results[1][0] / results[2][0]:.2f}x; identical "
          f"estimates: {same}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=4000)
    parser.add_argument("--obs", type=int, default=100_000)
    parser.add_argument("--check-obs", type=int, default=5000)
    parser.add_argument("--ss-obs", type=int, default=100_000)
    parser.add_argument("--ss-m", type=int, default=1000)
    parser.add_argument("--cluster", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--parts", default="123")
    parser.add_argument("--refits", type=int, default=12)
    args = parser.parse_args()
    import warnings

    warnings.simplefilter("ignore", UserWarning)  # k-hat warnings; counts are printed
    if "1" in args.parts:
        part_out_of_core(args)
    if "2" in args.parts:
        part_subsample(args)
    if "3" in args.parts:
        part_refits(args)


if __name__ == "__main__":
    main()
