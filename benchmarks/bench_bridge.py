"""Scale benchmark of the Laplace bridge (issue 5, section 4).

Synthetic n = 5000, p = 1000, H = 50 (P = 50 101 weights): MAP polish, closed-form NTK,
function-space LLA variances at every training input, cavity LOO, ELLA (K = 32) and VaLLA
(M = 128), each with wall time and peak traced memory (tracemalloc, numpy allocations
included), plus the process peak RSS.  Target: function-space LLA + LOO under 60 s and 4 GB
on 2 cores.

    python benchmarks/bench_bridge.py [--n 5000 --p 1000 --H 50 --seed 0]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
import tracemalloc

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from loo_adapt.laplace import ELLA, FunctionSpaceLLA, ReLUPoint, VaLLA, find_map  # noqa: E402


def stage(name, fn, results):
    tracemalloc.start()
    t0 = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    results.append((name, seconds, peak / 2**30))
    print(f"{name:<34s} {seconds:8.2f} s   peak {peak / 2**30:6.3f} GiB", flush=True)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--p", type=int, default=1000)
    ap.add_argument("--H", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sigma0", type=float, default=1.0, help="prior sd (Stan relu1: 1)")
    ap.add_argument("--map-iter", type=int, default=200)
    ap.add_argument("--ella-M", type=int, default=2000)
    ap.add_argument("--ella-K", type=int, default=32)
    ap.add_argument("--valla-M", type=int, default=128)
    args = ap.parse_args(argv)
    n, p, H = args.n, args.p, args.H
    rng = np.random.default_rng(args.seed)
    X = rng.standard_normal((n, p))
    teacher = ReLUPoint(rng.standard_normal((p, H)) / np.sqrt(p), 0.1 * rng.standard_normal(H),
                      2.0 * rng.standard_normal(H) / np.sqrt(H), 0.0)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-teacher.forward(X)))).astype(float)
    start = ReLUPoint(rng.standard_normal((p, H)) / np.sqrt(p), np.zeros(H),
                    rng.standard_normal(H) / np.sqrt(H), 0.0)
    sigma0 = args.sigma0
    print(f"n = {n}, p = {p}, H = {H}, P = {p * H + 2 * H + 1}, cores = {os.cpu_count()}, "
          f"load = {os.getloadavg()[0]:.1f}")
    res = []
    net, lp, opt = stage(f"MAP polish (L-BFGS <= {args.map_iter} it)",
                         lambda: find_map(start, X, y, sigma0, maxiter=args.map_iter), res)
    print(f"    log posterior {lp:.2f}, {opt.nit} iterations")
    stage("NTK Gram n x n", lambda: net.ntk(X), res)
    t0 = time.perf_counter()
    lla = stage("function-space LLA (Cholesky)", lambda: FunctionSpaceLLA(net, X, y, sigma0),
                res)
    var = stage("LLA variances, all training pts", lla.train_var, res)
    loo = stage("cavity LOO (Gauss-Hermite)", lla.loo, res)
    total = time.perf_counter() - t0
    print(f"    elpd_loo {loo.elpd:.2f}, mean var {var.mean():.3g}, "
          f"guarded {int(loo.guarded.sum())}")
    ella = stage(f"ELLA (M={args.ella_M}, K={args.ella_K}) + LOO",
                 lambda: ELLA(net, X, y, sigma0, M=args.ella_M, K=args.ella_K), res)
    eloo = ella.loo()
    print(f"    elpd_loo {eloo.elpd:.2f}, mean |dvar|/var vs LLA "
          f"{np.mean(np.abs(ella.train_var() - var) / var):.3g}")
    valla = stage(f"VaLLA (M={args.valla_M}) fit + LOO",
                  lambda: (lambda v: (v, v.loo()))(VaLLA(net, X, y, sigma0, M=args.valla_M)),
                  res)
    print(f"    elpd_loo {valla[1].elpd:.2f}, L-BFGS {valla[0].opt_result.nit} iterations")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"function-space LLA + LOO total: {total:.2f} s (target < 60 s); "
          f"process peak RSS {rss:.2f} GiB (target < 4 GB)")
    return res


if __name__ == "__main__":
    main()
