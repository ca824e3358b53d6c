"""Is MixIS's pointwise MCSE calibrated, and does the Pareto k-hat of its weights say when not?

For each benchmark and seed of the truth suite (mixture fits cached by `truth_suite.mixture_fit`)
this prints, by bins of the k-hat of each row's MixIS weights, the rms and max of

    z_i = (elpd_i - truth_i) / sqrt(mcse_elpd_i^2 + truth_mc_i^2)

(rms z near 1: calibrated) and the RMSE, plus the total's error against the correlation-aware
total MCSE.  It decides whether a k-hat rule for MixIS rows is needed; rules are chosen on the
choose half only.  ``--psis`` prints the same for plain PSIS on the rows with k-hat < 0.5 (the
rows MixIS is pooled with), and each chain's PSIS sum over those rows against truth: errors
every chain shares are what PSIS's MCSE cannot see.

    python benchmarks/mixis_calibration.py [--half choose|report|all] [--seeds 1 2 3] [--psis]
                                           [--mcse chains|delta]

``--mcse`` chooses MixIS's pointwise MCSE (`mixis_loo`'s ``mcse``: the delta method, the
default, or "chains", inflated by the chains' disagreement); with "chains" both rms z are
printed per benchmark and seed, with the inflation factor.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth_suite import benchmark_names, load_benchmark, mixture_fit  # noqa: E402

from loo_adapt.core.psis import pareto_khat  # noqa: E402
from loo_adapt.estimators.mixis import mixis_loo  # noqa: E402

BINS = ((-np.inf, 0.3), (0.3, 0.5), (0.5, 0.7), (0.7, np.inf))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", default="choose", choices=("choose", "report", "all"))
    parser.add_argument("--benchmarks", nargs="*")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--psis", action="store_true")
    parser.add_argument("--mcse", default="delta", choices=("delta", "chains"))
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    names = benchmark_names(args.half, args.benchmarks)
    if args.psis:
        return psis_rows(names)
    pooled = {b: [] for b in BINS}
    for name in names:
        bench = load_benchmark(name)
        t = bench.truth
        for seed in args.seeds:
            mix, _ = mixture_fit(bench, seed)
            est = mixis_loo(mix.log_lik().reshape(mix.n_chains, -1, t.shape[0]),
                            mcse=args.mcse)
            k = pareto_khat(est.log_weights.copy())
            err = est.elpd_i - t[:, 1]
            z = err / np.sqrt(est.mcse_elpd_i**2 + t[:, 2] ** 2)
            tot_mc = np.sqrt(est.mcse_total**2 + np.sum(t[:, 2] ** 2))
            z_delta = err / np.sqrt(est.mcse_delta_i**2 + t[:, 2] ** 2)
            print(f"{name} seed {seed}: S = {est.n_samples}, total error {err.sum():+.2f}, "
                  f"combined MC {tot_mc:.2f} (z {err.sum() / tot_mc:+.1f}); rms z "
                  f"{np.sqrt(np.mean(z**2)):.2f} (delta method alone "
                  f"{np.sqrt(np.mean(z_delta**2)):.2f}, chain inflation "
                  f"{est.mcse_inflation:.2f}); verified (MCSE <= 0.1): "
                  f"{int(np.sum(est.mcse_elpd_i <= 0.1))} of {t.shape[0]}")
            for lo, hi in BINS:
                m = (k >= lo) & (k < hi)
                if m.any():
                    pooled[(lo, hi)].append(z[m])
                    print(f"   k-hat in [{lo:4.1f}, {hi:4.1f}): {m.sum():4d} rows, rms z "
                          f"{np.sqrt(np.mean(z[m] ** 2)):.2f}, max |z| {np.abs(z[m]).max():.1f}, "
                          f"RMSE {np.sqrt(np.mean(err[m] ** 2)):.4f}")
    print("\nall rows:")
    for (lo, hi), zs in pooled.items():
        if zs:
            z = np.concatenate(zs)
            print(f"   k-hat in [{lo:4.1f}, {hi:4.1f}): {z.size:5d} rows, rms z "
                  f"{np.sqrt(np.mean(z**2)):.2f}, |z| > 3: {np.mean(np.abs(z) > 3):.1%}")


def psis_rows(names):
    from loo_adapt.core import psis_loo

    for name in names:
        bench = load_benchmark(name)
        t = bench.truth
        d = bench.draws
        ll = d.log_lik().reshape(d.n_chains, -1, t.shape[0])
        res = psis_loo.loo_pointwise(ll, warn=False)
        good = res.pareto_k < 0.5
        if not good.any():
            print(f"{name}: S = {d.n_samples} ({d.n_chains} chains), no row with k-hat < 0.5")
            continue
        err = res.elpd_i - t[:, 1]
        z = err / np.sqrt(res.mcse_elpd_i**2 + t[:, 2] ** 2)
        per_chain = [psis_loo.loo_pointwise(ll[c][None], r_eff=1.0, warn=False).elpd_i[good].sum()
                     - t[good, 1].sum() for c in range(d.n_chains)]
        print(f"{name}: S = {d.n_samples} ({d.n_chains} chains), {good.sum()} rows with k-hat "
              f"< 0.5: rms z {np.sqrt(np.mean(z[good] ** 2)):.2f}, mean z "
              f"{np.mean(z[good]):+.2f}; their sum {err[good].sum():+.3f} (pointwise MCSEs in "
              f"quadrature {np.sqrt(np.sum(res.mcse_elpd_i[good] ** 2)):.3f}); each chain's "
              f"sum {np.round(per_chain, 2).tolist()}")


if __name__ == "__main__":
    main()
