"""A focused fit (over the easy rows, or with ``--rows hard`` over the rows the full mixture
leaves above the 0.1 MCSE bar) with its NUTS tree depth capped at the posterior's, against
uncapped: seconds, leapfrog steps and step size per chain, divergent transitions, and the
easy rows' calibration against the brute-force truth.

Each chain of a warm-started mixture fit adapts its step size in 100 warm-up iterations; a
chain whose step comes out small doubles its trajectory once or twice more than the
posterior's fastest chain did, and the cost of a NUTS draw goes in powers of two
(`loo_adapt.estimators.focused.posterior_tree_depth`).  Per benchmark and seed: the cached
full mixture fit (`truth_suite.mixture_fit`) gives the easy rows (Kish ESS > 400), then one
focused fit over them with the program's tree depth and one capped at the posterior's, the
same seed, starts, metric and draws; z = error / (MCSE and the truth's MC error combined).

    python benchmarks/focused_tree_depth.py [--benchmarks rhs_wide_099] [--seeds 1 2 3]
                                            [--draws 4000] [--rows easy|hard]

``--rows hard`` takes the rows of `FocusedMixIS` (full-mixture MCSE above 0.1; draws 1000
unless given) and also prints how many of them the fit brings to the bar.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth_suite import calibration_z, load_benchmark, mixture_fit  # noqa: E402

from loo_adapt.core.mixis import mixis_loo  # noqa: E402
from loo_adapt.estimators.focused import posterior_tree_depth  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", nargs="*", default=["rhs_wide_099"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--draws", type=int, default=None,
                        help="draws per chain (4000 easy, 1000 hard)")
    parser.add_argument("--rows", choices=("easy", "hard"), default="easy")
    args = parser.parse_args(argv)
    draws = args.draws or (4000 if args.rows == "easy" else 1000)
    warnings.simplefilter("ignore")
    for name in args.benchmarks:
        bench = load_benchmark(name)
        truth = bench.truth
        pos = {int(i): k for k, i in enumerate(truth[:, 0].astype(int))}
        cap = posterior_tree_depth(bench.draws)
        print(f"== {name}: posterior tree depth (fastest chain) {cap}; program "
              f"max_treedepth {bench.program.fit_kwargs.get('max_treedepth', 10)}", flush=True)
        for seed in args.seeds:
            mix, _ = mixture_fit(bench, seed)
            full = mixis_loo(mix.log_lik())
            pick = full.ess > 400 if args.rows == "easy" else full.mcse_elpd_i > 0.1
            picked = [int(i) for i in np.flatnonzero(pick) if int(i) in pos]
            t = truth[[pos[i] for i in picked]]
            for depth in (None, cap):
                kw = {} if depth is None else {"max_treedepth": depth}
                t0 = time.perf_counter()
                fit = bench.program.fit_mixture(bench.draws, seed=100 + seed, rows=picked,
                                                draws=draws, **kw)
                sec = time.perf_counter() - t0
                ss = fit.sample_stats
                leap = np.asarray(ss["n_leapfrog__"]).mean(axis=1)
                step = np.asarray(ss["stepsize__"]).mean(axis=1)
                est = mixis_loo(np.asarray(fit.log_lik())[..., picked])
                z = calibration_z(est.elpd_i, est.mcse_elpd_i, t[:, 1], t[:, 2])
                bar = (f"; {int(np.sum(est.mcse_elpd_i <= 0.1))} at MCSE <= 0.1"
                       if args.rows == "hard" else "")
                print(f"seed {seed}, {len(picked)} {args.rows} rows, tree depth "
                      f"{'program' if depth is None else f'capped at {depth}'}: {sec:.1f} s; "
                      f"leapfrog steps per chain {np.round(leap).astype(int).tolist()}, step "
                      f"{np.round(step, 4).tolist()}; divergent "
                      f"{int(np.sum(ss['divergent__']))}; {args.rows} rows rms z "
                      f"{np.sqrt(np.mean(z ** 2)):.2f}, mean z {z.mean():+.2f}, median MCSE "
                      f"{np.median(est.mcse_elpd_i):.4f}{bar}", flush=True)


if __name__ == "__main__":
    main()
