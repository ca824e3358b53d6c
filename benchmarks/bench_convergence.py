"""Cost of the convergence check `loo()` runs on every call, as a ratio to plain PSIS.

Run from the repository root:
    python benchmarks/bench_convergence.py [--draws 4000] [--obs 20000] [--repeat 3]

Both are timed in the same process on the same (chains, draws, n) log-likelihood, after a
warm-up call of each on a slice (so neither pays numba's compilation):

* ``psis``: `loo_adapt.core.psis_loo.loo_pointwise` (what `loo()` computes for every row);
* ``check``: `loo_adapt.core.convergence.disagreeing_columns` (rank-normalised split R-hat,
  bulk and folded, plus the stuck-chain test: one sort per column);
* ``screened``: the same with ``all_rhat=False`` (what ``loo`` asks: a bucketing screen, the
  sort only where its bound exceeds 1.01);
* ``r_eff``: `loo_adapt.core.ess.relative_eff` (``log=True``), and ``one pass``:
  `loo_adapt.core.convergence.relative_eff_and_disagreement` (r_eff and the screened check
  from one read of the draws, what ``loo`` runs), against r_eff + screened;
* ``arviz``: ``arviz.rhat(method="rank")`` on the first 200 columns one at a time (arviz's
  own per-column loop), scaled to n, for reference.

Prints the medians and ``check / psis``, ``screened / psis`` and ``one pass / (r_eff +
screened)``.  Issue 22 asks for a check that is "cheap": fused
or vectorised, no per-column Python loop.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fresh_cache import fresh_numba_cache, past_numpy_cells  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=4000)
    ap.add_argument("--obs", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    fresh_numba_cache()  # time the kernels of this tree (`fresh_cache`)

    from loo_adapt.core import convergence, ess
    from loo_adapt.core.psis_loo import loo_pointwise

    rng = np.random.default_rng(0)
    ll = -np.abs(rng.normal(1.0, 0.3, size=(4, args.draws // 4, args.obs)))
    calls = {
        "psis": lambda: loo_pointwise(ll),
        "check": lambda: convergence.disagreeing_columns(ll),
        "screened": lambda: convergence.disagreeing_columns(ll, all_rhat=False),
        "r_eff": lambda: ess.relative_eff(ll, log=True),
        "one pass": lambda: convergence.relative_eff_and_disagreement(ll),
    }
    small = past_numpy_cells(ll)  # compiles the kernels before the clock (`fresh_cache`)
    loo_pointwise(small)
    convergence.disagreeing_columns(small)
    convergence.disagreeing_columns(small, all_rhat=False)
    convergence.relative_eff_and_disagreement(small)
    times = {k: [] for k in calls}
    for _ in range(args.repeat):
        for k, f in calls.items():
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    t = {k: statistics.median(v) for k, v in times.items()}
    p, c = t["psis"], t["check"]
    print(f"log_lik {ll.shape}: " + ", ".join(f"{k} {v:.2f} s" for k, v in t.items()))
    print(f"check / psis = {c / p:.2f}, screened / psis = {t['screened'] / p:.2f}, one pass / "
          f"(r_eff + screened) = {t['one pass'] / (t['r_eff'] + t['screened']):.2f}")
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
