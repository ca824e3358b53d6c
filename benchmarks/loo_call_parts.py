"""Where the one-core time of `loo()`'s fused pass goes: the pass with its rank R-hat check
and / or its r_eff lag sums replaced by stubs, each variant compiled into its own fresh
numba cache in its own process, on the input of `bench_loo_call` (4 x 1000 x 10000).

    python benchmarks/loo_call_parts.py [--reps 8] [--rounds 2] [--keep DIR]

Prints, per variant and round, the best of ``--reps`` calls of
`loo_adapt.core.psis_loo.loo_pointwise_checked` (weights not written), then the medians
over rounds and the differences: what the R-hat check and the lag sums cost inside the
pass.  The stubs change the numbers (no R-hat, a fixed r_eff of 0.2, about this input's),
so only the times mean something; on a noisy machine take several rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_loo_call import ONE_CORE, simulate  # noqa: E402

VARIANTS = ("full", "no R-hat", "no lag sums", "neither")


def _worker(variant: str, path: str, reps: int) -> float:
    import time
    import warnings

    from numba import njit

    import loo_adapt.core.ess as ess

    if variant in ("no R-hat", "neither"):
        @njit
        def _no_rhat(row, n_chains, n_draws, h, lo, hi, table, ratio, sbuf, scratch, rhat,
                     stuck, j):
            rhat[j] = np.nan

        ess._rhat_of_row = _no_rhat  # before the kernels compile: they call the stub
    if variant in ("no lag sums", "neither"):
        @njit
        def _no_lags(y, n_chains, n_draws, scale, max_lag):
            return 0.2 * y.shape[0], False

        ess._ess_direct_col = _no_lags
    from loo_adapt.core.psis_loo import loo_pointwise_checked

    warnings.simplefilter("ignore")
    ll = np.load(path)
    loo_pointwise_checked(ll, 1.01, weights=False)
    best = np.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        loo_pointwise_checked(ll, 1.01, weights=False)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--keep", help="the bench_loo_call input folder to use / keep")
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(_worker(args.worker[0], args.worker[1], int(args.worker[2]))))
        return
    folder = Path(args.keep or tempfile.mkdtemp(prefix="loo_call_parts_"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "log_lik.npy"
    if not path.exists():
        np.save(path, simulate(4, 1000, 10000)[0])
    times = {v: [] for v in VARIANTS}
    for r in range(args.rounds):
        for v in VARIANTS:
            with tempfile.TemporaryDirectory(prefix="numba_") as cache:
                env = {**os.environ, **ONE_CORE, "NUMBA_CACHE_DIR": cache}
                out = subprocess.run([sys.executable, __file__, "--worker", v, str(path),
                                      str(args.reps)], env=env, capture_output=True,
                                     text=True, check=True)
            times[v].append(float(out.stdout.strip().splitlines()[-1]))
            print(f"round {r + 1}: {v:<12} {times[v][-1]:.3f} s", flush=True)
    med = {v: float(np.median(t)) for v, t in times.items()}
    print("medians: " + ", ".join(f"{v} {t:.3f} s" for v, t in med.items()))
    print(f"R-hat check {med['full'] - med['no R-hat']:.3f} s, lag sums "
          f"{med['full'] - med['no lag sums']:.3f} s, both "
          f"{med['full'] - med['neither']:.3f} s of {med['full']:.3f} s")


if __name__ == "__main__":
    main()
