"""A warm-started mixture fit's wall time with every chain sampled at once (the default of
`loo_adapt.stan.mixture_fit.fit_mixture`) against at most one chain a core
(cmdstanpy's and stanli's default), in one run, and whether the draws are the same.

Per benchmark and seed: the full mixture fit of `truth_suite.fit_mixture_of` (warm-started
from the benchmark's posterior draws, as ``loo()`` makes it), alternately with
``parallel_chains`` = min(chains, cores) and = chains, ``--reps`` times each; printed: the
seconds of each run, the ratio of the medians, and whether both give the same log_lik draws.

    python benchmarks/mixture_chains_at_once.py [--benchmarks rhs_wide rhs_logistic ...]
                                                [--seeds 1] [--reps 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth_suite import load_benchmark  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", nargs="*",
                        default=["rhs_wide", "rhs_logistic", "logistic_n300", "relu5",
                                 "t_outliers", "rhs_microarray_next"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    cores = os.cpu_count() or 1
    print(f"# {cores} cores; load average {os.getloadavg()[0]:.1f}")
    for name in args.benchmarks:
        bench = load_benchmark(name)
        prog = bench.program if bench.program.declares_mixis else bench.program.with_mixis()
        chains = 4
        for seed in args.seeds:
            secs = {"one a core": [], "all at once": []}
            draws = {}
            for _ in range(args.reps):
                for label, par in (("one a core", min(chains, cores)), ("all at once", chains)):
                    prog.log_density()._last_unconstrained = None  # each run pays the start
                    t0 = time.perf_counter()
                    fit = prog.fit_mixture(bench.draws, seed=seed, chains=chains,
                                           parallel_chains=par)
                    secs[label].append(time.perf_counter() - t0)
                    draws[label] = fit.log_lik()
            same = np.array_equal(draws["one a core"], draws["all at once"])
            med = {k: float(np.median(v)) for k, v in secs.items()}
            print(f"{name} seed {seed}: " + "; ".join(
                f"{k} " + " / ".join(f"{s:.2f}" for s in v) + " s" for k, v in secs.items())
                + f"; median ratio (all at once / one a core) "
                f"{med['all at once'] / med['one a core']:.2f}; same draws: {same}",
                flush=True)


if __name__ == "__main__":
    main()
