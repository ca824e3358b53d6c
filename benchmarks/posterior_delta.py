"""Does a stricter NUTS setting move a benchmark's posterior predictive on the rows PSIS can
score?

Fits the benchmark's program on the full data at adapt_delta 0.99 (1000 warm-up) and at
0.999 (2000 warm-up), two seeds each, and compares PSIS's elpd over the rows whose k-hat is
below 0.7 in all four fits: against the brute-force truth, and the stricter fits against the
others.  A shift there would be a lean every fit of the program shares (the mixture fits
start from the posterior fit's step size and metric), which no importance sampling removes.

    LOO_ADAPT_COLON_CSV=.../colon.csv python benchmarks/posterior_delta.py rhs_microarray
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from truth_suite import load_benchmark  # noqa: E402

import loo_adapt  # noqa: E402
from loo_adapt.estimators.mixture_checks import divergent_count  # noqa: E402

SETTINGS = ((0.99, 1000), (0.999, 2000))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("benchmark")
    ap.add_argument("--seeds", type=int, nargs="+", default=[11, 12])
    args = ap.parse_args(argv)
    bench = load_benchmark(args.benchmark)
    truth = np.asarray(bench.truth)
    idx, t, tmc = truth[:, 0].astype(int), truth[:, 1], truth[:, 2]
    res = {}
    for delta, warmup in SETTINGS:
        for seed in args.seeds:
            t0 = time.perf_counter()
            draws = bench.program.fit(seed=seed, adapt_delta=delta, warmup=warmup)
            sec = time.perf_counter() - t0
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = loo_adapt.loo(draws, estimator="psis", progress=False).loo_adapt
            res[(delta, seed)] = (r.elpd_i[idx], r.mcse_elpd_i[idx], r.pareto_k[idx])
            print(f"adapt_delta {delta}, warm-up {warmup}, seed {seed}: {sec:.0f} s, "
                  f"{divergent_count(draws)[0]} divergent transitions", flush=True)
    good = np.all([k < 0.7 for _, _, k in res.values()], axis=0)
    print(f"{int(good.sum())} rows with a PSIS k-hat below 0.7 in every fit")
    if not good.any():
        return
    for (delta, seed), (e, m, _) in res.items():
        err = e[good] - t[good]
        mc = float(np.sqrt(np.sum(m[good] ** 2 + tmc[good] ** 2)))
        print(f"  adapt_delta {delta} seed {seed}: summed error against the truth "
              f"{err.sum():+.3f} (MC {mc:.3f}), {err.mean():+.4f} a row")
    mean, var = {}, {}
    for delta, _ in SETTINGS:
        runs = [res[(delta, s)] for s in args.seeds]
        mean[delta] = np.mean([e[good] for e, _, _ in runs], axis=0)
        var[delta] = np.sum([m[good] ** 2 for _, m, _ in runs], axis=0) / len(runs) ** 2
    (lo, _), (hi, _) = SETTINGS
    diff = mean[hi] - mean[lo]
    print(f"{hi} - {lo} over those rows: {diff.sum():+.3f} "
          f"(MC {np.sqrt(np.sum(var[hi] + var[lo])):.3f}), {diff.mean():+.4f} a row")


if __name__ == "__main__":
    main()
