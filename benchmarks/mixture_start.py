"""Does the mixture fit's warm start carry a bias into MixIS?  Warm against cold mixture fits.

For a truth-suite benchmark (``--partial``: the finished folds of an unfinished truth), MixIS
from the suite's cached warm-started mixture fits (``truth_suite.mixture_fit``: started at
posterior draws with the posterior's metric, 100 warm-up iterations) and from cold fits
(``program.fit(mixis=True)``: Stan's random inits, 1000 warm-up iterations, the same 4 x 1000
draws), three seeds each, against the brute-force truth: per seed the mean and rms z of the
verified-or-not MixIS rows (error over the combined MC error), and for the mean of the three
seeds the same (MCSE of the mean: the seeds' MCSEs / sqrt(3)).  Three independent fits that
share a positive mean z share a bias, which their own MCSEs cannot show; the seeds' spread
over their MCSEs says whether those MCSEs hold between fits.

    python benchmarks/mixture_start.py --benchmark rhs_wide_099 --partial [--long]
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth_suite import CACHE, calibration_z, load_benchmark, mixture_fit  # noqa: E402

from loo_adapt.core.mixis import mixis_loo  # noqa: E402


def cold_fit(bench, seed, draws=1000, warmup=1000):
    tag = "" if (draws, warmup) == (1000, 1000) else f"-{draws}x{warmup}"
    cache = CACHE / f"{bench.name}-mixture-cold{tag}-seed{seed}.pkl"
    if cache.is_file():
        return pickle.loads(cache.read_bytes())
    t0 = time.perf_counter()
    mix = bench.program.fit(mixis=True, seed=seed, chains=4, draws=draws, warmup=warmup)
    out = (mix, time.perf_counter() - t0)
    CACHE.mkdir(exist_ok=True)
    cache.write_bytes(pickle.dumps(out))
    return out


def report(label, fits, truth):
    idx = truth[:, 0].astype(int)
    est = [mixis_loo(mix.log_lik()) for mix, _ in fits]
    e = np.array([r.elpd_i for r in est])
    se = np.array([r.mcse_elpd_i for r in est])
    for (mix, sec), ei, si in zip(fits, e, se):
        z = calibration_z(ei[idx], si[idx], truth[:, 1], truth[:, 2])
        div = int(np.sum(mix.sample_stats.get("divergent__", 0)))
        print(f"  {label} fit ({sec:5.0f} s, {div} divergent): mean z {z.mean():+.2f}, rms z "
              f"{np.sqrt(np.mean(z ** 2)):.2f}, summed error {(ei[idx] - truth[:, 1]).sum():+.3f}")
    m = e.mean(axis=0)
    se_m = np.sqrt((se ** 2).mean(axis=0) / len(fits))
    z = calibration_z(m[idx], se_m[idx], truth[:, 1], truth[:, 2])
    spread = e.std(axis=0, ddof=1) / np.sqrt((se ** 2).mean(axis=0))
    print(f"  {label}, mean of {len(fits)} fits: mean z {z.mean():+.2f}, rms z "
          f"{np.sqrt(np.mean(z ** 2)):.2f}, summed error {(m[idx] - truth[:, 1]).sum():+.3f}; "
          f"spread between fits / MCSE over all {e.shape[1]} rows: median "
          f"{np.median(spread):.2f}, rms {np.sqrt(np.mean(spread ** 2)):.2f}")
    return m


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", required=True)
    parser.add_argument("--partial", action="store_true")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--long", action="store_true",
                        help="also cold fits of 4 x 4000 draws after 2000 warm-up: a bias "
                             "that shrinks with length is the sampler's")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    bench = load_benchmark(args.benchmark, partial=args.partial)
    print(f"{args.benchmark}: {bench.truth.shape[0]} folds of truth")
    warm = report("warm", [mixture_fit(bench, s) for s in args.seeds], bench.truth)
    cold = report("cold", [cold_fit(bench, s) for s in args.seeds], bench.truth)
    if args.long:
        report("cold 4 x 4000", [cold_fit(bench, s, 4000, 2000) for s in args.seeds],
               bench.truth)
    d = cold - warm
    print(f"  cold - warm (means of the fits), all rows: mean {d.mean():+.4f}, "
          f"summed {d.sum():+.3f}")


if __name__ == "__main__":
    main()
