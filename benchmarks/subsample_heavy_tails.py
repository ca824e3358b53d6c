"""Subsampled LOO on heavy-tailed data: is each estimate within its subsampling SE of the
full PSIS-LOO?

A linear regression y = 1 + 2 x + noise, n = 50,000, with t(4) noise or normal noise; the
posterior of (a, b, log sigma) taken as independent normal draws (4 chains x 500, r_eff 1),
the model's normal likelihood.  The full PSIS-LOO (`loo_adapt.loo`) is the reference; then
``loo_subsample`` with m = 500 observations, the point-estimate approximation ("plpd"), on
six seeds, for the default difference estimator under simple random sampling ("diff_srs",
R loo's default) and for sampling proportional to the approximation ("hh_pps").  Printed:
z = (estimate - full) / subsampling SE per seed.

    python benchmarks/subsample_heavy_tails.py [--seeds 0 1 2 3 4 5] [--m 500]
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

import loo_adapt
from loo_adapt import loo_subsample


def problem(noise: str, n: int = 50_000, draws: int = 2000, seed: int = 5):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    eps = rng.standard_t(4, size=n) if noise == "t4" else rng.normal(scale=1.41, size=n)
    y = 1.0 + 2.0 * x + eps
    theta = np.column_stack([rng.normal(1.0, 0.006, draws), rng.normal(2.0, 0.006, draws),
                             rng.normal(np.log(1.41), 0.003, draws)])

    def log_lik(t, idx):
        a, b, log_s = t[:, 0:1], t[:, 1:2], t[:, 2:3]
        r = (y[idx][None] - a - b * x[idx][None]) / np.exp(log_s)
        return -0.5 * r**2 - log_s - 0.5 * np.log(2 * np.pi)

    return log_lik, theta, n


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    parser.add_argument("--m", type=int, default=500)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    for noise in ("t4", "normal"):
        log_lik, theta, n = problem(noise)
        full = loo_adapt.loo(log_lik(theta, np.arange(n)).reshape(4, -1, n), reff=1.0,
                             pointwise=False).loo_adapt.estimates()["elpd_loo"]
        print(f"== {noise} noise, n = {n}, m = {args.m}: full PSIS-LOO elpd {full:.2f}")
        for est in ("diff_srs", "hh_pps"):
            z = []
            for seed in args.seeds:
                ss = loo_subsample(log_lik, theta, n_obs=n, observations=args.m, chains=4,
                                   r_eff=1.0, seed=seed, estimator=est)
                z.append((ss.elpd_loo - full) / ss.subsampling_se_elpd_loo)
            print(f"{est:9s} z per seed " + " ".join(f"{v:+.2f}" for v in z)
                  + f"; max |z| {np.max(np.abs(z)):.2f}", flush=True)


if __name__ == "__main__":
    main()
