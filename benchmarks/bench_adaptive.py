"""Wall time and peak memory of the full adaptive LOO on the cached ovarian fit.

S = 4000 draws (4 chains x 1000) of the regularized-horseshoe logistic regression of
benchmarks/ovarian_table1.py (54 observations, 1537-dimensional regression block), all
five transforms x 11 step sizes for every observation above the k-hat threshold, against
plain PSIS-LOO on the same draws in the same run.  Target: under 5 s on 2 cores (issue 11);
CPU time is printed too, since wall time on a shared machine depends on the other load.

    python benchmarks/bench_adaptive.py [--selection split] [--repeat 1] [--profile 15]

Peak memory: tracemalloc (Python and numpy allocations; measured in a separate, slower
pass so it does not distort the timing) and the process's maxrss.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import resource
import sys
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

ALL = ("kl", "var", "ll", "mm1", "mm2")


def maxrss_mb() -> float:
    # ru_maxrss is in kilobytes on Linux (bytes on macOS)
    scale = 1.0 / 1024 if sys.platform != "darwin" else 1.0 / 1024**2
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--selection", default="split")
    parser.add_argument("--transforms", nargs="+", default=list(ALL), choices=ALL)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=1, help="timed repetitions (best kept)")
    parser.add_argument("--profile", type=int, default=15, help="cProfile rows (0: none)")
    parser.add_argument("--no-tracemalloc", action="store_true")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")

    import numba
    from bench_adaptive_hs import compile_psis_kernels, print_stages
    from ovarian_table1 import load_fit, ovarian_data

    from loo_adapt.estimators.adaptive import adapt_loo
    from loo_adapt.estimators.psis import psis_of_draws
    from loo_adapt.models import model_for

    draws, _ = load_fit()
    model = model_for("logistic_rhs", ovarian_data())
    rss_loaded = maxrss_mb()
    print(f"draws: {draws.n_samples} x {model.dim} block, n = {model.n_obs}; "
          f"numba threads {numba.get_num_threads()}; maxrss after loading {rss_loaded:.0f} MB")

    def run_psis():
        return psis_of_draws(draws)

    def run_adapt(base):
        return adapt_loo(draws, model, base=base, transforms=tuple(args.transforms),
                         selection=args.selection,
                         seed=args.seed, keep_candidates=False)

    # warm-up: numba compilation / caches are not part of the steady-state cost
    print(f"PSIS kernels compiled or loaded in {compile_psis_kernels(draws.n_samples):.1f} s")
    base = run_psis()
    adapt_loo(draws, model, base=base, transforms=tuple(args.transforms), rho=[1.0],
              khat_threshold=float(np.sort(base.pareto_k)[-2]), selection=args.selection,
              seed=args.seed, keep_candidates=False)  # adapts the top observation only

    t_psis, t_adapt, cpu_adapt = np.inf, np.inf, np.inf
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        base = run_psis()
        t_psis = min(t_psis, time.perf_counter() - t0)
        t0, c0 = time.perf_counter(), time.process_time()
        res = run_adapt(base)
        t_adapt = min(t_adapt, time.perf_counter() - t0)
        cpu_adapt = min(cpu_adapt, time.process_time() - c0)
    n_high = int(np.sum(base.pareto_k > base.good_k))
    print(f"observations above k-hat {base.good_k:.2f}: {n_high}; after "
          f"({args.selection}): {int(np.sum(res.unreliable))} still above")
    print(f"PSIS-LOO:      {t_psis:8.2f} s")
    print(f"adaptive LOO:  {t_adapt:8.2f} s  ({t_adapt / t_psis:.0f} x PSIS; "
          f"{t_adapt / max(n_high, 1):.2f} s per adapted observation; target < 5 s)")
    print(f"adaptive CPU:  {cpu_adapt:8.2f} s  (load average now {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} cores)")
    print(f"maxrss (process peak so far): {maxrss_mb():.0f} MB")

    if not args.no_tracemalloc:
        tracemalloc.start()
        run_psis()
        _, peak_psis = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        run_adapt(base)
        _, peak_adapt = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        size = draws.n_samples * model.dim * 8 / 2**20
        print(f"tracemalloc peak: PSIS {peak_psis / 2**20:.0f} MB, adaptive "
              f"{peak_adapt / 2**20:.0f} MB (one S x P float64 block = {size:.0f} MB)")

    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        run_adapt(base)
        prof.disable()
        print_stages(prof)
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(args.profile)
        print("\ncProfile (sorted by own time):")
        print("\n".join(out.getvalue().splitlines()[4:]))


if __name__ == "__main__":
    main()
