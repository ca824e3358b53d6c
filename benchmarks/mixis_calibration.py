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
                                           [--mcse delta|skew|chains] [--null]

``--mcse`` chooses MixIS's pointwise MCSE (`mixis_loo`'s ``mcse``: the delta method, this
script's default, "skew", widened by each row's skewness (the package's default), or
"chains", inflated by the chains' disagreement); each line prints its rms z and the delta
method's, with the inflation factor of "chains".

``--null`` tests calibration as the rows' shared draws make it: each row's estimate comes
from the same mixture draws, so the rows' errors are correlated and a sign count or rms over
rows that takes them as independent reads a shared fluctuation as a bias.  It prints, per
benchmark and seed and pooled over seeds and over benchmarks, the rms z, the signed count of
rows with |z| > 2 (optimistic minus pessimistic) and the mean z, each with its p-value under
`truth_suite.null_z` (the rows calibrated, correlated as their influence functions are; the
truth's errors independent), and the effective number of independent rows behind the rms.
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
    null_z,
    total_mc,
)

from loo_adapt.core.mixis import MCSE_METHODS, mixis_loo  # noqa: E402
from loo_adapt.core.psis import pareto_khat  # noqa: E402

BINS = ((-np.inf, 0.3), (0.3, 0.5), (0.5, 0.7), (0.7, np.inf))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", default="choose", choices=("choose", "report", "all"))
    parser.add_argument("--benchmarks", nargs="*")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--psis", action="store_true")
    parser.add_argument("--mcse", default="delta", choices=MCSE_METHODS)
    parser.add_argument("--null", action="store_true")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    names = benchmark_names(args.half, args.benchmarks)
    if args.psis:
        return psis_rows(names)
    if args.null:
        return null_test(names, args.seeds, args.mcse)
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
            z = calibration_z(est.elpd_i, est.mcse_elpd_i, t[:, 1], t[:, 2])
            tot_mc = total_mc(est.mcse_total, t[:, 2])
            z_delta = calibration_z(est.elpd_i, est.mcse_delta_i, t[:, 1], t[:, 2])
            print(f"{name} seed {seed}: S = {est.n_samples}, total error {err.sum():+.2f}, "
                  f"combined MC {tot_mc:.2f} (z {err.sum() / tot_mc:+.1f}); rms z "
                  f"{np.sqrt(np.mean(z**2)):.2f} (delta method alone "
                  f"{np.sqrt(np.mean(z_delta**2)):.2f}, inflation (median) "
                  f"{np.median(est.mcse_inflation):.2f}); verified (MCSE <= 0.1): "
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


def _stats(z):
    """(sum of z^2, optimistic minus pessimistic count of |z| > 2, sum of z) over the last
    axis."""
    return (np.sum(z**2, axis=-1), np.sum(z > 2, axis=-1) - np.sum(z < -2, axis=-1),
            np.sum(z, axis=-1))


def _line(label, n, obs, null):
    """One printed line: the observed statistics against their null draws."""
    q, sg, sm = obs
    nq, nsg, nsm = null
    dof = 2.0 * np.mean(nq) ** 2 / np.var(nq)  # chi-square matched to the null's sum of z^2
    p_rms = np.mean(nq >= q)
    p_sign = np.mean(np.abs(nsg) >= abs(sg))
    p_mean = np.mean(np.abs(nsm) >= abs(sm))
    return (f"{label}: {n} rows ({dof:.0f} independent), rms z {np.sqrt(q / n):.2f} "
            f"(p {p_rms:.3f}; null 95% {np.sqrt(np.quantile(nq, 0.95) / n):.2f}), "
            f"|z| > 2 signs {int(sg):+d} (p {p_sign:.3f}), mean z {sm / n:+.2f} (p {p_mean:.3f})")


def null_test(names, seeds, mcse):
    """Calibration of MixIS's pointwise MCSE with the rows' correlation taken into account
    (``--null``)."""
    total_obs, total_null, total_n = np.zeros(3), 0.0, 0
    for b, name in enumerate(names):
        bench = load_benchmark(name)
        t = bench.truth
        obs_b, null_b, n_b = np.zeros(3), 0.0, 0
        for seed in seeds:
            mix, _ = mixture_fit(bench, seed)
            est = mixis_loo(mix.log_lik().reshape(mix.n_chains, -1, t.shape[0]), mcse=mcse)
            z = calibration_z(est.elpd_i, est.mcse_elpd_i, t[:, 1], t[:, 2])
            nz = null_z(est.influence, est.mcse_elpd_i, t[:, 2], seed=1000 * b + seed)
            obs, null = np.array(_stats(z)), np.array(_stats(nz))
            print(_line(f"{name} seed {seed}", z.size, obs, null), flush=True)
            obs_b, null_b, n_b = obs_b + obs, null_b + null, n_b + z.size
        if len(seeds) > 1:
            print(_line(f"{name}, seeds {seeds}", n_b, obs_b, null_b))
        total_obs, total_null, total_n = total_obs + obs_b, total_null + null_b, total_n + n_b
    if len(names) > 1:
        print(_line(f"all of {', '.join(names)}", total_n, total_obs, total_null))


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
        z = calibration_z(res.elpd_i, res.mcse_elpd_i, t[:, 1], t[:, 2])
        per_chain = [psis_loo.loo_pointwise(ll[c][None], r_eff=1.0, warn=False).elpd_i[good].sum()
                     - t[good, 1].sum() for c in range(d.n_chains)]
        print(f"{name}: S = {d.n_samples} ({d.n_chains} chains), {good.sum()} rows with k-hat "
              f"< 0.5: rms z {np.sqrt(np.mean(z[good] ** 2)):.2f}, mean z "
              f"{np.mean(z[good]):+.2f}; their sum {err[good].sum():+.3f} (pointwise MCSEs in "
              f"quadrature {np.sqrt(np.sum(res.mcse_elpd_i[good] ** 2)):.3f}); each chain's "
              f"sum {np.round(per_chain, 2).tolist()}")


if __name__ == "__main__":
    main()
