"""MixIS's per-row errors over many replicate runs: a bias, or a skew its MCSE cannot see?

One sample of mixture draws gives each row one error and one MCSE, so a shared sign over
rows cannot tell a biased estimator from a skewed one.  Here one long mixture fit per
benchmark (``--draws`` per chain, cached by `truth_suite.mixture_fit`) is cut into
consecutive windows of ``--window`` draws per chain, each a replicate of the default
fit's length, and every row is estimated in every window against the brute-force truth.
Per benchmark and window length it prints

* ``rms z`` / ``mean z``: `truth_suite.calibration_z` of the delta-method MCSE
  (``mcse="delta"``) over windows and rows (what `truth.py` reads from one run), and
  ``skew`` the rms z of the default, skew-widened MCSE (`loo_adapt.core.skew`);
* ``total error``: the windows' mean summed error over the rows, with its standard error
  (against the long fit's: a part that falls with the window is the estimator's
  small-sample bias, a part that does not is the sampler's or the truth's);
* ``sd / MCSE``: median over rows of the windows' spread of the estimate over the rms of
  their stated MCSEs (1: the MCSE is right in mean square);
* ``bias / MCSE``: mean over rows of the windows' mean error over that rms MCSE, with its
  standard error (0: no bias);
* ``corr(error, MCSE)``: median over rows of the correlation across windows between a
  window's error and its stated MCSE (negative: windows that err optimistic state a
  smaller MCSE, the mark of a region of the leave-one-out posterior some windows miss);
* ``z > 2 / z < -2``: the share of (window, row) pairs beyond 2 in each direction;
* with ``--floors``, the rms z with the MCSE floored at each value.

The long fit itself, with its own MCSE, is the first line.

    python benchmarks/mixis_replicates.py --benchmarks logistic_normal_long relu5
        [--seed 1] [--draws 25000] [--window 500 1000 2000 4000] [--floors 0.002 0.005]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth_suite import (  # noqa: E402
    benchmark_names,
    calibration_z,
    load_benchmark,
    mixture_fit,
)

from loo_adapt.core.mixis import mixis_loo  # noqa: E402


def replicate_stats(log_lik, truth, window: int, floors=()) -> dict:
    """The statistics of the module docstring for windows of ``window`` draws per chain of
    ``log_lik`` (chains, draws, n) against ``truth`` (n, 3): truth and its MC error in
    columns 1 and 2."""
    n_win = log_lik.shape[1] // window
    if n_win < 2:
        raise ValueError(f"{log_lik.shape[1]} draws per chain make fewer than two windows "
                         f"of {window}")
    est, se = np.empty((n_win, truth.shape[0])), np.empty((n_win, truth.shape[0]))
    se_skew = np.empty_like(se)
    for w in range(n_win):
        r = mixis_loo(log_lik[:, w * window:(w + 1) * window], mcse="skew")
        est[w], se[w], se_skew[w] = r.elpd_i, r.mcse_delta_i, r.mcse_elpd_i
    err = est - truth[:, 1]
    z = calibration_z(est, se, truth[:, 1], truth[:, 2])
    rms_se = np.sqrt(np.mean(se**2, axis=0))
    ratio = err.mean(axis=0) / rms_se
    varied = (np.std(err, axis=0) > 0) & (np.std(se, axis=0) > 0)
    corr = [np.corrcoef(err[:, i], se[:, i])[0, 1] for i in np.flatnonzero(varied)]
    return {
        "windows": n_win, "total": float(err.sum(axis=1).mean()),
        "total_se": float(err.sum(axis=1).std(ddof=1) / np.sqrt(n_win)),
        "rms_z": float(np.sqrt(np.mean(z**2))), "mean_z": float(z.mean()),
        "rms_z_skew": float(np.sqrt(np.mean(
            calibration_z(est, se_skew, truth[:, 1], truth[:, 2]) ** 2))),
        "sd_over_mcse": float(np.median(est.std(axis=0, ddof=1) / rms_se)),
        "bias_over_mcse": float(ratio.mean()),
        "bias_se": float(ratio.std(ddof=1) / np.sqrt(n_win * ratio.size)),
        "corr": float(np.median(corr)) if corr else float("nan"),
        "above": float(np.mean(z > 2)), "below": float(np.mean(z < -2)),
        "floors": {f: float(np.sqrt(np.mean(calibration_z(
            est, np.maximum(se, f), truth[:, 1], truth[:, 2]) ** 2))) for f in floors},
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", nargs="+", required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--draws", type=int, default=25000)
    parser.add_argument("--window", type=int, nargs="+", default=[500, 1000, 2000, 4000])
    parser.add_argument("--floors", type=float, nargs="*", default=[])
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    for name in benchmark_names("all", args.benchmarks):
        bench = load_benchmark(name)
        t = bench.truth
        mix, secs = mixture_fit(bench, args.seed, draws=args.draws)
        ll = mix.log_lik().reshape(mix.n_chains, -1, t.shape[0])
        full = mixis_loo(ll, mcse="delta")
        zf = calibration_z(full.elpd_i, full.mcse_elpd_i, t[:, 1], t[:, 2])
        print(f"{name}: one fit of {mix.n_chains} x {ll.shape[1]} ({secs:.0f} s): rms z "
              f"{np.sqrt(np.mean(zf**2)):.2f}, mean z {zf.mean():+.2f}, total error "
              f"{np.sum(full.elpd_i - t[:, 1]):+.3f} (MCSE {full.mcse_total:.3f})", flush=True)
        for window in args.window:
            s = replicate_stats(ll, t, window, args.floors)
            floors = "".join(f", floor {f:g}: {v:.2f}" for f, v in s["floors"].items())
            print(f"   {s['windows']:3d} windows of {mix.n_chains} x {window}: total error "
                  f"{s['total']:+.3f} (se {s['total_se']:.3f}), rms z "
                  f"{s['rms_z']:.2f} (skew {s['rms_z_skew']:.2f}), mean z "
                  f"{s['mean_z']:+.2f}, sd / MCSE "
                  f"{s['sd_over_mcse']:.2f}, bias / MCSE {s['bias_over_mcse']:+.3f} "
                  f"(se {s['bias_se']:.3f}), corr(error, MCSE) {s['corr']:+.2f}, z > 2 "
                  f"{s['above']:.1%}, z < -2 {s['below']:.1%}{floors}", flush=True)


if __name__ == "__main__":
    main()
