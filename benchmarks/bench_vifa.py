"""Speed and memory of VIFA on the ovarian ReLU net (all 1536 predictors, D in the thousands).

In one run: the MAP by L-BFGS (`loo_adapt.laplace.find_map`, the start of LLA / ELLA /
VaLLA), plain Adam training of the same net for as many steps as VIFA took (the paper's
comparison: VI against ordinary training), and VIFA from that MAP for each K.  Printed: wall
seconds (timed without tracing), the ratios VIFA / MAP and VIFA / Adam per step, and the peak
traced memory of each (tracemalloc, numpy allocations included; VIFA's from a 200-step run,
the peak does not grow with steps) against D K doubles and against one D x D matrix.

    python benchmarks/bench_vifa.py [--H 3 --K 5 20 --seed 0]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from loo_adapt.datasets import load_ovarian  # noqa: E402
from loo_adapt.laplace import VIFA, ReLUPoint, find_map  # noqa: E402
from loo_adapt.laplace.vifa import FamilyTarget, _Adam  # noqa: E402
from loo_adapt.models import ReLUNet  # noqa: E402


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def peak_memory(fn):
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def adam_training(target, theta0, steps, lr=1e-2):
    """Ordinary training: Adam on the log posterior from theta0 (full batch)."""
    m, a = target.prior_gaussian
    adam = _Adam([theta0.shape])
    theta = theta0.copy()
    for _ in range(steps):
        _, g = target.log_lik_grad(theta[None])
        (d,) = adam.step([g[0] - a * (theta - m)], [lr])
        theta += d
    return theta


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--H", type=int, default=3)
    ap.add_argument("--K", type=int, nargs="+", default=[5, 20])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prior-sd", type=float, default=1.0)
    args = ap.parse_args(argv)
    print(f"# python benchmarks/bench_vifa.py {' '.join(argv or sys.argv[1:])}")
    X, y = load_ovarian(standardize=True)
    n, p = X.shape
    H = args.H
    model = ReLUNet(X, y, prior_sd=args.prior_sd, hidden=H)
    D = model.dim
    print(f"ovarian: n = {n}, {p} predictors, H = {H}: D = {D} weights; cores "
          f"{os.cpu_count()}, load {os.getloadavg()[0]:.1f}")
    rng = np.random.default_rng(args.seed)
    start = ReLUPoint(rng.standard_normal((p, H)) / np.sqrt(p), np.zeros(H),
                      rng.standard_normal(H) / np.sqrt(H), 0.0)
    (net, lp, opt), t_map = timed(lambda: find_map(start, X, y, args.prior_sd))
    m_map = peak_memory(lambda: find_map(start, X, y, args.prior_sd, maxiter=20))
    print(f"{'MAP (L-BFGS)':<26s}{t_map:8.2f} s  peak {m_map / 2**20:8.1f} MiB  "
          f"({opt.nit} iterations, log posterior {lp:.2f})")
    target = FamilyTarget(model)
    dense = D * D * 8 / 2**20
    for K in args.K:
        fit, t_v = timed(lambda K=K: VIFA(model, K=K, init=net.theta, seed=args.seed,
                                          progress=False))
        m_v = peak_memory(lambda K=K: VIFA(model, K=K, init=net.theta, seed=args.seed,
                                           max_iter=200, decay_iter=0, progress=False))
        steps = fit.n_iter
        _, t_adam = timed(lambda s=steps: adam_training(target, net.theta, s))
        m_adam = peak_memory(lambda: adam_training(target, net.theta, 200))
        print(f"{'Adam training, ' + str(steps) + ' steps':<26s}{t_adam:8.2f} s  peak "
              f"{m_adam / 2**20:8.1f} MiB")
        print(f"{'VIFA K = ' + str(K):<26s}{t_v:8.2f} s  peak {m_v / 2**20:8.1f} MiB  "
              f"({steps} steps of {fit.n_mc} draws, converged {fit.converged})")
        print(f"    ratio VIFA / MAP = {t_v / t_map:.2f}; VIFA / Adam training (same steps) "
              f"= {t_v / t_adam:.2f} (per draw: {t_v / t_adam / fit.n_mc:.2f}); peak memory "
              f"{m_v / (D * K * 8):.0f} x D K doubles ({D * K * 8 / 2**20:.2f} MiB), "
              f"{m_v / 2**20 / dense:.3f} x one D x D matrix ({dense:.0f} MiB)")


if __name__ == "__main__":
    main()
