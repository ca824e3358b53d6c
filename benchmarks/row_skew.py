"""Is the row-level optimistic lean a shared offset or the skew of importance-sampling errors?

On the wide horseshoes the default's verified rows with |z| > 2 are nearly all optimistic
(`benchmarks/results/truth_report_shared_offset.txt`: 91 against 4), while the totals are
within their MC errors.  Two things give that pattern:

- a shared offset: every row of a fit errs the same way, and the summed error follows the
  mean z;
- skew: a row whose draws missed its leave-one-out tail errs optimistic *and* gets a small
  MCSE from those same draws (a large positive z), while a row whose draws caught its tail
  errs pessimistic with a large MCSE (a small negative z).  The mean z then leans positive
  while the summed error need not.

Per fit group (as `benchmarks/error_by_fit.py` groups the rows; its ``--dump`` file), this
prints the summed error and the mean z of the half of the rows with the smaller MCSEs and of
the half with the larger ones, and the rank correlation of each row's error with its MCSE.
Skew shows as a positive mean z in the small-MCSE half with a summed error near zero or
negative in the large-MCSE half, and a negative correlation.

    LOO_ADAPT_COLON_CSV=.../colon.csv python benchmarks/error_by_fit.py NAME --seeds 1 2 3 \\
        --dump benchmarks/cache/NAME-default-rows.npz
    python benchmarks/row_skew.py NAME [NAME ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy import stats

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from truth_suite import calibration_z, load_benchmark  # noqa: E402


def halves(err, mcse, truth_mc):
    """(small-MCSE half, large-MCSE half) of a group, each as (rows, summed error, mean z,
    rows with z > 2, rows with z < -2), split at the median MCSE; z against the MCSE and the
    truth's MC error in quadrature."""
    z = calibration_z(err, mcse, 0.0, truth_mc)
    order = np.argsort(mcse, kind="stable")
    low, high = order[: order.size // 2], order[order.size // 2:]
    return tuple((k.size, float(np.sum(err[k])), float(np.mean(z[k])) if k.size else np.nan,
                  int(np.sum(z[k] > 2)), int(np.sum(z[k] < -2))) for k in (low, high))


def across_seeds(name, dump, seeds, t, tmc, small=0.02) -> str:
    """The rows with an MCSE of at most ``small`` in every seed (independent fits of the
    same rows): their errors' correlation between seeds, their between-seed sd against their
    MCSEs, and their mean error, which a skew of each fit's own would leave near zero and a
    bias every fit shares would not."""
    err = np.array([dump[f"elpd_{s}"] - t for s in seeds])
    mcse = np.array([dump[f"mcse_{s}"] for s in seeds])
    k = np.all(np.isfinite(err), axis=0) & (np.nanmax(mcse, axis=0) <= small)
    if k.sum() < 3:
        return f"{name}: fewer than 3 rows at MCSE <= {small} in every seed"
    e = err[:, k]
    corr = [np.corrcoef(e[a], e[b])[0, 1] for a in range(len(seeds))
            for b in range(a + 1, len(seeds))]
    return (f"{name}: {int(k.sum())} rows at MCSE <= {small} in every seed: error "
            f"correlation between seeds {min(corr):+.2f} to {max(corr):+.2f}; median "
            f"between-seed sd {np.median(e.std(axis=0, ddof=1)):.4f} against median MCSE "
            f"{np.median(mcse[:, k]):.4f} (truth MC {np.median(tmc[k]):.4f}); mean error "
            f"{e.mean():+.4f} a row")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("benchmarks", nargs="+")
    args = ap.parse_args(argv)
    tot = {"low": np.zeros(4), "high": np.zeros(4), "far": np.zeros(2)}
    for name in args.benchmarks:
        bench = load_benchmark(name)
        truth = np.asarray(bench.truth)
        t, tmc = truth[:, 1], truth[:, 2]
        dump = np.load(HERE / "cache" / f"{name}-default-rows.npz", allow_pickle=True)
        seeds = sorted(int(k.split("_")[1]) for k in dump.files if k.startswith("elpd_"))
        if len(seeds) > 1:
            print(across_seeds(name, dump, seeds, t, tmc))
        for seed in seeds:
            e, m, g = dump[f"elpd_{seed}"], dump[f"mcse_{seed}"], dump[f"group_{seed}"]
            z_all = calibration_z(e, m, t, tmc)
            far = (np.abs(z_all) > 3) & (np.abs(e - t) > 0.1)
            far_up, far_down = int(np.sum(far & (z_all > 0))), int(np.sum(far & (z_all < 0)))
            tot["far"] += (far_up, far_down)
            print(f"{name} seed {seed}: rows off by more than 3 combined MCSEs and 0.1 nats: "
                  f"{far_up} optimistic, {far_down} pessimistic")
            for lab in sorted(set(g)):
                k = (g == lab) & np.isfinite(e) & np.isfinite(m)
                if k.sum() < 6:
                    continue
                err = e[k] - t[k]
                rho = stats.spearmanr(err, m[k]).statistic
                lo, hi = halves(err, m[k], tmc[k])
                for key, h in (("low", lo), ("high", hi)):
                    tot[key] += (h[1], h[2] * h[0], h[3], h[4])
                print(f"  {lab:20s} {int(k.sum()):3d} rows, summed error {np.sum(err):+.2f}; "
                      f"smaller MCSEs (<= {np.median(m[k]):.3f}): summed {lo[1]:+.2f}, mean z "
                      f"{lo[2]:+.2f}, z > 2 / < -2: {lo[3]} / {lo[4]}; larger: summed "
                      f"{hi[1]:+.2f}, mean z {hi[2]:+.2f}, {hi[3]} / {hi[4]}; "
                      f"rank corr(error, MCSE) {rho:+.2f}")
    print(f"all runs: rows off by more than 3 combined MCSEs and 0.1 nats: "
          f"{int(tot['far'][0])} optimistic, {int(tot['far'][1])} pessimistic")
    for key, label in (("low", "smaller-MCSE halves"), ("high", "larger-MCSE halves")):
        s, zsum, up, down = tot[key]
        print(f"all groups, {label}: summed error {s:+.2f}, z > 2 / z < -2: "
              f"{int(up)} / {int(down)}")


if __name__ == "__main__":
    main()
