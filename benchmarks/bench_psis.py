"""Time loo_adapt.core.psis.psislw against arviz.psislw on S = 4000 draws x n = 5000 observations.

Run from the repository root:  python benchmarks/bench_psis.py [--draws 4000] [--obs 5000]

The first numba call (JIT compilation or cache load) is timed and reported separately; the
steady-state times are the best of ``--repeat`` runs.  The two results are also compared.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loo_adapt.core.psis import psislw  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--draws", type=int, default=4000)
    parser.add_argument("--obs", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import arviz as az
    import numba

    rng = np.random.default_rng(args.seed)
    # normal-model log-likelihoods under posterior draws of (mu, sigma); 2% outlying
    # observations give heavy-tailed importance ratios (khat up to > 1)
    mu = rng.normal(0.0, 0.1, size=(args.draws, 1))
    sigma = np.exp(rng.normal(0.0, 0.07, size=(args.draws, 1)))
    y = rng.normal(size=args.obs)
    y[rng.random(args.obs) < 0.02] *= 5.0
    log_lik = -0.5 * ((y - mu) / sigma) ** 2 - np.log(sigma) - 0.5 * np.log(2 * np.pi)
    log_ratios = -log_lik
    r_eff = 0.8

    small = np.ascontiguousarray(log_ratios[:, :128])
    t0 = time.perf_counter()
    psislw(small, r_eff=r_eff)
    first_call = time.perf_counter() - t0

    ours = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        lw, k = psislw(log_ratios, r_eff=r_eff)
        ours.append(time.perf_counter() - t0)

    theirs = []
    lr_t = np.ascontiguousarray(log_ratios.T)  # arviz wants draws last
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        lw_ref, k_ref = az.psislw(lr_t, reff=r_eff)
        theirs.append(time.perf_counter() - t0)

    dk = float(np.max(np.abs(k - np.asarray(k_ref))))
    t_ours, t_theirs = min(ours), min(theirs)
    print(f"S = {args.draws}, n = {args.obs}, numba threads = {numba.get_num_threads()}")
    print(f"first numba call (compile or cache load, 128 columns): {first_call:.3f} s")
    print(f"loo_adapt.psislw : {t_ours:.3f} s (best of {args.repeat}: "
          + ", ".join(f"{t:.3f}" for t in ours) + ")")
    print(f"arviz.psislw     : {t_theirs:.3f} s (best of {args.repeat}: "
          + ", ".join(f"{t:.3f}" for t in theirs) + ")")
    print(f"speed ratio arviz / loo_adapt: {t_theirs / t_ours:.1f}x")
    print(f"max |khat - khat_arviz| = {dk:.2e}; khat > 0.7 for {int(np.sum(k > 0.7))} of "
          f"{args.obs}")


if __name__ == "__main__":
    main()
