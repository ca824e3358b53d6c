"""Which MixIS rows carry the miscalibration, and would an ESS cap from lp__ fix it?

For each benchmark and seed of the truth suite (mixture fits cached by
`truth_suite.mixture_fit`; ``--partial`` uses the finished folds of an unfinished truth), over
the rows with truth:

    z_i = (elpd_i - truth_i) / sqrt(mcse_elpd_i^2 + truth_mc_i^2)

- by bins of the row's Kish ESS of its MixIS weights: rms and mean z (rows whose leave-one-out
  posterior is close to the posterior have a large Kish ESS);
- with MixIS's delta-method MCSE as it is, and with each row's ESS (the multi-chain ESS behind
  that MCSE) capped at the bulk ESS of the mixture fit's ``lp__``, the log density every
  direction of the fit moves (a row's own functional can look well mixed while a slow
  direction, a horseshoe's global scale, has not been explored).

- with ``--by-khat``, also by the Pareto k-hat of each row's own MixIS log weights crossed
  with Kish ESS (a heavy right tail of the weights would bias log(mean) upwards in the
  typical run, which a variance-based MCSE misses: the rows it flags should carry the error).

No rule is taken from this: it shows where the error sits; a rule would be chosen on the
choose half (rms z in [0.8, 1.25] on each benchmark) and reported on the report half.

    python benchmarks/mixis_ess_cap.py [--half choose|report|all] [--benchmarks ...] [--partial]
                                       [--by-khat]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth_suite import benchmark_names, calibration_z, load_benchmark, mixture_fit  # noqa: E402

from loo_adapt.core.convergence import ess_bulk_columns  # noqa: E402
from loo_adapt.core.mixis import mixis_loo  # noqa: E402
from loo_adapt.core.psis import pareto_khat  # noqa: E402

KISH_BINS = ((0, 100), (100, 400), (400, np.inf))
KHAT_BINS = ((-np.inf, 0.3), (0.3, 0.5), (0.5, 0.7), (0.7, np.inf))


def _rms(z):
    return float(np.sqrt(np.mean(z ** 2))) if z.size else float("nan")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", default="all", choices=("choose", "report", "all"))
    parser.add_argument("--benchmarks", nargs="*")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--partial", action="store_true")
    parser.add_argument("--by-khat", action="store_true")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    names = args.benchmarks or benchmark_names(args.half, None)
    for name in names:
        bench = load_benchmark(name, partial=args.partial)
        truth = bench.truth
        idx = truth[:, 0].astype(int)
        zs, kish, khats = [], [], []
        for seed in args.seeds:
            mix = mixture_fit(bench, seed)[0]
            res = mixis_loo(mix.log_lik())
            ess_lp = float(ess_bulk_columns(np.asarray(mix.sample_stats["lp__"]))[0])
            capped = res.mcse_elpd_i * np.sqrt(res.ess_mcse / np.minimum(res.ess_mcse, ess_lp))
            z = calibration_z(res.elpd_i[idx], res.mcse_elpd_i[idx], truth[:, 1], truth[:, 2])
            zc = calibration_z(res.elpd_i[idx], capped[idx], truth[:, 1], truth[:, 2])
            zs.append(z)
            kish.append(res.ess[idx])
            if args.by_khat:
                khats.append(pareto_khat(res.log_weights)[idx])
            print(f"{name} seed {seed}: {idx.size} rows; ESS(lp__) {ess_lp:.0f}, median row ESS "
                  f"{np.median(res.ess_mcse):.0f}; rms z {_rms(z):.2f} (mean {z.mean():+.2f}), "
                  f"ESS capped at ESS(lp__): rms z {_rms(zc):.2f} (mean {zc.mean():+.2f})")
        z, k = np.concatenate(zs), np.concatenate(kish)
        bins = []
        for lo, hi in KISH_BINS:
            m = (k > lo) & (k <= hi)
            if m.any():
                bins.append(f"Kish ESS ({lo}, {hi}]: {m.sum()} rows, rms z {_rms(z[m]):.2f}, "
                            f"mean z {z[m].mean():+.2f}")
        print(f"  {name}, all seeds, by Kish ESS: " + "; ".join(bins))
        if args.by_khat:
            kh = np.concatenate(khats)
            for lo, hi in KHAT_BINS:
                cells = []
                for klo, khi in KISH_BINS:
                    m = (kh >= lo) & (kh < hi) & (k > klo) & (k <= khi)
                    if m.any():
                        cells.append(f"Kish ({klo}, {khi}]: {m.sum()} rows, rms z "
                                     f"{_rms(z[m]):.2f}, mean z {z[m].mean():+.2f}")
                if cells:
                    print(f"    row k-hat of the MixIS weights [{lo}, {hi}): " + "; ".join(cells))


if __name__ == "__main__":
    main()
