"""Cost of the convergence check `loo()` runs on every call, as a ratio to plain PSIS.

Run from the repository root:
    python benchmarks/bench_convergence.py [--draws 4000] [--obs 20000] [--repeat 3]

Both are timed in the same process on the same (chains, draws, n) log-likelihood, after a
warm-up call of each on a slice (so neither pays numba's compilation):

* ``psis``: `loo_adapt.core.psis.loo_pointwise` (what `loo()` computes for every row);
* ``check``: `loo_adapt.core.convergence.disagreeing_columns` (rank-normalised split R-hat,
  bulk and folded, plus the stuck-chain test: one sort per column);
* ``arviz``: ``arviz.rhat(method="rank")`` on the first 200 columns one at a time (arviz's
  own per-column loop), scaled to n, for reference.

Prints the medians and ``check / psis``.  Issue 22 asks for a check that is "cheap": fused
or vectorised, no per-column Python loop.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=4000)
    ap.add_argument("--obs", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from loo_adapt.core import convergence, psis

    rng = np.random.default_rng(0)
    ll = -np.abs(rng.normal(1.0, 0.3, size=(4, args.draws // 4, args.obs)))
    psis.loo_pointwise(ll[:, :, :500])
    convergence.disagreeing_columns(ll[:, :, :500])
    t_psis, t_check = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        psis.loo_pointwise(ll)
        t_psis.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        convergence.disagreeing_columns(ll)
        t_check.append(time.perf_counter() - t0)
    p, c = statistics.median(t_psis), statistics.median(t_check)
    print(f"log_lik {ll.shape}: psis {p:.2f} s, convergence check {c:.2f} s, "
          f"check / psis = {c / p:.2f}")
    try:
        import arviz as az
    except ImportError:
        return
    m = min(200, args.obs)
    t0 = time.perf_counter()
    for j in range(m):
        az.rhat(ll[:, :, j], method="rank")
    per_col = (time.perf_counter() - t0) / m
    print(f"arviz rhat(method='rank') column by column: {per_col * args.obs:.2f} s for "
          f"{args.obs} columns (extrapolated from {m}), check / arviz = "
          f"{c / (per_col * args.obs):.3f}")


if __name__ == "__main__":
    main()
