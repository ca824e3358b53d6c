"""Which rows to pool: MixIS with PSIS pooled below each k-hat threshold, against the truth.

MixIS pools a row with plain PSIS on the posterior draws where PSIS's k-hat is below
``pool_khat`` (`loo_adapt.estimators.mixis.POOL_KHAT`).  Per benchmark and seed, for each
threshold (``none``: no row pooled) this prints the rms z of the verified rows
(`truth_suite.calibration_z`), that of the pooled rows alone, the RMSE, the total's error
in units of its combined MC error, and how many rows were pooled; then, per half and
threshold, the largest rms z over its runs.  The MixIS stage alone on the cached mixture
fits (`truth_suite.mixture_fit`): on the benchmarks where most rows have a k-hat below 1/2
this is what the default gives those rows (no focused fit takes them).

    LOO_ADAPT_COLON_CSV=.../colon.csv python benchmarks/pool_khat.py [--half all]
        [--seeds 1 2 3] [--khat none 0.3 0.5]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth_suite import (  # noqa: E402
    SPLIT,
    benchmark_names,
    calibration_z,
    load_benchmark,
    mixture_fit,
    total_mc,
)


def run(bench, mixture, seed, pool_khat):
    from loo_adapt import loo

    res = loo(bench.draws, estimator="mixis", mixis_draws=mixture, y=bench.data.get("y"),
              seed=seed, mixis_pool_khat=pool_khat).loo_adapt
    truth = bench.truth
    idx = truth[:, 0].astype(np.int64)
    err = res.elpd_i[idx] - truth[:, 1]
    ver = np.asarray(res.reliable)[idx] & np.isfinite(res.mcse_elpd_i[idx])
    z = calibration_z(res.elpd_i[idx], res.mcse_elpd_i[idx], truth[:, 1], truth[:, 2])
    pooled = np.asarray(res.method, dtype=object)[idx] == "mixis+psis"
    mc = total_mc(res.estimates()["mcse_elpd_loo"], truth[:, 2])
    return dict(rms_z=float(np.sqrt(np.mean(z[ver] ** 2))),
                rms_z_pooled=(float(np.sqrt(np.mean(z[ver & pooled] ** 2)))
                              if (ver & pooled).any() else np.nan),
                rmse=float(np.sqrt(np.mean(err ** 2))), total=float(err.sum() / mc),
                pooled=int(pooled.sum()), verified=int(ver.sum()), n=int(idx.size))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--half", default="all", choices=("choose", "report", "all"))
    ap.add_argument("--benchmarks", nargs="*")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--khat", nargs="+", default=["none", "0.3", "0.5"])
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    levels = [None if k == "none" else float(k) for k in args.khat]
    worst: dict = {}
    for name in benchmark_names(args.half, args.benchmarks):
        bench = load_benchmark(name)
        half = next((h for h, names in SPLIT.items() if name in names), "neither")
        for seed in args.seeds:
            mixture = mixture_fit(bench, seed)[0]
            print(f"== {name} ({half}), seed {seed}")
            for k in levels:
                r = run(bench, mixture, seed, k)
                key = (half, "none" if k is None else k)
                worst[key] = max(worst.get(key, 0.0), r["rms_z"])
                print(f"  pool_khat {'none' if k is None else k!s:>5s}: rms z {r['rms_z']:.2f} "
                      f"(pooled rows {r['rms_z_pooled']:.2f}), RMSE {r['rmse']:.4f}, total "
                      f"{r['total']:+.2f} MC, pooled {r['pooled']}, verified "
                      f"{r['verified']}/{r['n']}", flush=True)
    print("\n== largest rms z over the runs of each half")
    for (half, k), v in sorted(worst.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        print(f"  {half:7s} pool_khat {k!s:>5s}: {v:.2f}")


if __name__ == "__main__":
    main()
