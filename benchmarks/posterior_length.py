"""Does the posterior fit's length move PSIS on the easy rows, against brute-force truth?

For a truth-suite benchmark, PSIS on the rows with k-hat below ``--khat`` from its cached
posterior draws, then from fresh stanli fits of 4 x 1000 (1000 warm-up), 4 x 4000 (1000) and
4 x 4000 (4000): mean and rms z against the truth (combined MC errors) and the summed error.
Short chains that all under-explore show as a shared positive error that shrinks with
length; an error that stays is the truth's, or a region no fit visits
(`benchmarks/easy_rows_refit.py` tells these apart).

    python benchmarks/posterior_length.py --benchmark relu1 [--khat 0.5]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth_suite import calibration_z, load_benchmark  # noqa: E402

import loo_adapt  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", required=True)
    parser.add_argument("--khat", type=float, default=0.5)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    bench = load_benchmark(args.benchmark)
    t = bench.truth
    idx = t[:, 0].astype(int)

    def report(label, draws):
        pw = loo_adapt.loo(draws, estimator="psis", progress=False).loo_adapt
        err = pw.elpd_i[idx] - t[:, 1]
        z = calibration_z(pw.elpd_i[idx], pw.mcse_elpd_i[idx], t[:, 1], t[:, 2])
        easy = pw.pareto_k[idx] < args.khat
        print(f"{args.benchmark} {label:30s} k-hat < {args.khat}: {easy.sum():3d} rows, mean z "
              f"{z[easy].mean():+.2f}, rms z {np.sqrt(np.mean(z[easy] ** 2)):.2f}, summed "
              f"error {err[easy].sum():+.3f}; all rows {err.sum():+.2f}", flush=True)

    report("cached posterior draws", bench.draws)
    for warmup, draws, seed in ((1000, 1000, 11), (1000, 4000, 12), (4000, 4000, 13)):
        t0 = time.perf_counter()
        fit = bench.program.fit(seed=seed, chains=4, draws=draws, warmup=warmup)
        report(f"4 x {draws}, {warmup} warm-up ({time.perf_counter() - t0:.0f} s)", fit)


if __name__ == "__main__":
    main()
