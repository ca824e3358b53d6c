"""MixIS against one focused mixture fit, row by row, on a truth-suite benchmark.

For one benchmark and seed (mixture fit cached by `truth_suite.mixture_fit`) this takes the
rows MixIS leaves above its MCSE bar and ``--sample`` rows it verifies (drawn at random), fits
the mixture focused on each group (`StanProgram.fit_mixture(rows=...)`, warm-started from the
posterior, seed + 7919 as the focused stage of `loo()`), and prints for both estimators the
RMSE against the brute-force truth, the summed error, rms and max of
z = error / sqrt(MCSE^2 + truth MC^2), the median MCSE and how many rows pass the bar, and the
focused fit's seconds.

    python benchmarks/focused_check.py --benchmark rhs_wide [--seed 1] [--sample 20]
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
from loo_adapt.estimators.focused import FOCUS_SEED_OFFSET  # noqa: E402


def _line(label, e, mcse, t_mc, bar):
    z = calibration_z(e, mcse, 0.0, t_mc)  # e: errors already
    return (f"   {label:8s} RMSE {np.sqrt(np.mean(e**2)):.4f}, sum err {e.sum():+.3f}, rms z "
            f"{np.sqrt(np.mean(z**2)):.2f}, max |z| {np.abs(z).max():.1f}, MCSE median "
            f"{np.median(mcse):.3f}, <= {bar}: {int(np.sum(mcse <= bar))} of {e.size}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sample", type=int, default=20)
    parser.add_argument("--max-mcse", type=float, default=0.1)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    bench = load_benchmark(args.benchmark)
    t = bench.truth
    n = t.shape[0]
    mix, sec = mixture_fit(bench, args.seed)
    est = mixis_loo(mix.log_lik().reshape(mix.n_chains, -1, n))
    miss = np.flatnonzero(est.mcse_elpd_i > args.max_mcse)
    ok = np.flatnonzero(est.mcse_elpd_i <= args.max_mcse)
    rng = np.random.default_rng(args.seed)
    sample = np.sort(rng.choice(ok, min(args.sample, ok.size), replace=False))
    print(f"{args.benchmark} seed {args.seed}: n = {n}, mixture fit {sec:.0f} s; MixIS leaves "
          f"{miss.size} rows above {args.max_mcse}")
    for label, rows in (("unverified", miss), ("verified sample", sample)):
        if rows.size == 0:
            continue
        t0 = time.perf_counter()
        foc = bench.program.fit_mixture(bench.draws, seed=args.seed + FOCUS_SEED_OFFSET,
                                        rows=rows)
        fsec = time.perf_counter() - t0
        f = mixis_loo(foc.log_lik().reshape(foc.n_chains, -1, n)[..., rows])
        div = int(np.sum(foc.sample_stats.get("divergent__", 0)))
        print(f"{label} ({rows.size} rows): focused fit {fsec:.0f} s, {div} divergences")
        print(_line("MixIS", est.elpd_i[rows] - t[rows, 1], est.mcse_elpd_i[rows], t[rows, 2],
                    args.max_mcse))
        print(_line("focused", f.elpd_i - t[rows, 1], f.mcse_elpd_i, t[rows, 2],
                    args.max_mcse))


if __name__ == "__main__":
    main()
