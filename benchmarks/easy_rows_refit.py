"""Where a Stan fit's easy rows disagree with the brute-force truth: PSIS or the truth?

For the ``--rows`` observations with the lowest plain-PSIS k-hat of a truth-suite benchmark
(the rows where importance sampling from the posterior should be easiest), print PSIS's
elpd_i and MCSE, the truth's elpd_i and MC error, and the elpd_i of a fresh refit of that
row (another seed, the truth's settings).  A fresh refit that agrees with the truth while
PSIS does not, at k-hat below 1/2, says that the posterior draws miss part of that row's
leave-one-out posterior (a region the full-data fit does not visit): an error no weight
diagnostic and no MCSE computed from those draws can show.

``--backend cmdstan`` makes the refits (and the ``--posterior-fits`` fits) with CmdStan
rather than the truth's own sampler (stanli), so a sampler-specific error shows as a
disagreement between the two.  ``--posterior-fits K`` adds K fresh full-data fits with that
backend and reports PSIS from each on the rows with k-hat below 0.5 / 0.7 against the
truth.  ``--where`` prints, for each refit row, how far the refit's draws of log p(y_i | theta)
reach below what the posterior draws ever show, and the parameters whose refit mean is
furthest from the PSIS-reweighted posterior mean (in posterior standard deviations).

``--pick mixis`` refits instead the rows where MixIS, averaged over the benchmark's cached full
mixture fits (`truth_suite.mixture_fit`, seeds 1-3), is furthest above the truth in combined
MC errors, and prints that mean beside the refit: a refit that agrees with the truth and not
with MixIS says the mixture fits, not the truth, carry the error.  ``--adapt-delta``,
``--warmup`` and ``--seed-base`` (seed ``seed-base + i``) make the refits more careful than
the truth's.

    python benchmarks/easy_rows_refit.py --benchmark rhs_microarray [--rows 3]
        [--backend cmdstan] [--posterior-fits 2] [--where]
    python benchmarks/easy_rows_refit.py --benchmark rhs_wide_099 --pick mixis --rows 5
        --adapt-delta 0.999 --draws 4000 --warmup 2000 --seed-base 7000
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth_suite import calibration_z, load_benchmark, mixture_fit  # noqa: E402

import loo_adapt  # noqa: E402
from loo_adapt.core.mixis import mixis_loo  # noqa: E402
from loo_adapt.core.psis import psislw  # noqa: E402
from loo_adapt.stan.heldout import heldout_elpd  # noqa: E402
from loo_adapt.stan.program import StanProgram  # noqa: E402


def _flat(draws, name):
    a = np.asarray(draws[name])
    return a.reshape(a.shape[0] * a.shape[1], -1)


def _psis_against_truth(label, draws, truth):
    res = loo_adapt.loo(draws, estimator="psis", progress=False).loo_adapt
    idx = truth[:, 0].astype(int)
    err = res.elpd_i[idx] - truth[:, 1]
    z = calibration_z(res.elpd_i[idx], res.mcse_elpd_i[idx], truth[:, 1], truth[:, 2])
    k = res.pareto_k[idx]
    for cut in (0.5, 0.7):
        m = k < cut
        if m.any():
            print(f"{label}: k-hat < {cut}: {m.sum()} rows, mean z {z[m].mean():+.2f}, rms z "
                  f"{np.sqrt(np.mean(z[m] ** 2)):.2f}, summed error {err[m].sum():+.3f}",
                  flush=True)


#: seeds of the cached full mixture fits ``--pick mixis`` averages MixIS over
MIXIS_SEEDS = (1, 2, 3)


def _mixis_mean(bench, n, seeds=MIXIS_SEEDS):
    """MixIS's elpd_i averaged over the cached full mixture fits, and its MC error (n,)."""
    est, var = np.zeros(n), np.zeros(n)
    for seed in seeds:
        r = mixis_loo(mixture_fit(bench, seed)[0].log_lik())
        est += r.elpd_i / len(seeds)
        var += r.mcse_elpd_i ** 2 / len(seeds) ** 2
    return est, np.sqrt(var)


def _where(post, fit, program, j, log_lik):
    """How the refit's leave-one-out posterior differs from the PSIS-reweighted posterior."""
    lw, k = psislw(-log_lik[:, j])
    w = np.exp(lw - lw.max())
    w /= w.sum()
    lp_post = log_lik[:, j]
    lp_refit = np.asarray(program.heldout_log_lik(fit, j)).reshape(-1)
    q = np.quantile(lp_post, [0.001, 0.01, 0.05])
    print(f"    log p(y_i | theta) quantiles 0.1 / 1 / 5 %: posterior {np.round(q, 2)}, refit "
          f"{np.round(np.quantile(lp_refit, [0.001, 0.01, 0.05]), 2)}; refit draws below the "
          f"posterior's 0.1 % quantile: {np.mean(lp_refit < q[0]):.3f} (PSIS k-hat "
          f"{float(k):.2f})")
    rows = []
    for name in post.variables:
        if name == "log_lik" or name not in fit.variables:
            continue
        P, R = _flat(post, name), _flat(fit, name)
        if P.shape[1] != R.shape[1]:
            continue
        mean = w @ P
        dz = (R.mean(axis=0) - mean) / (P.std(axis=0) + 1e-300)
        sd_ratio = R.std(axis=0) / np.sqrt(np.maximum(w @ (P - mean) ** 2, 1e-300))
        for c in np.argsort(-np.abs(dz))[:3]:
            rows.append((abs(dz[c]), f"{name}[{c}]: refit mean - PSIS mean {dz[c]:+.2f} "
                                     f"posterior sd; sd refit / PSIS {sd_ratio[c]:.1f}"))
    for _, text in sorted(rows, reverse=True)[:5]:
        print("     ", text)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", required=True)
    parser.add_argument("--rows", type=int, default=3)
    parser.add_argument("--backend", default=None,
                        help="refit (and fit) with this backend instead of the benchmark's")
    parser.add_argument("--posterior-fits", type=int, default=0)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--where", action="store_true")
    parser.add_argument("--pick", choices=("khat", "mixis"), default="khat",
                        help="rows of lowest PSIS k-hat, or where MixIS is furthest above truth")
    parser.add_argument("--adapt-delta", type=float, default=None,
                        help="the refits' adapt_delta (default: the benchmark's)")
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--seed-base", type=int, default=999)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    bench = load_benchmark(args.benchmark)
    program = bench.program
    if args.backend:
        program = StanProgram(program.stan_file, program.data, backend=args.backend,
                              fit_kwargs=dict(program.fit_kwargs))
    label = args.backend or "the benchmark's backend"
    if args.posterior_fits:
        _psis_against_truth("cached posterior", bench.draws, bench.truth)
        for s in range(args.posterior_fits):
            t0 = time.perf_counter()
            fit = program.fit(seed=11 + s)
            _psis_against_truth(f"{label} posterior fit, seed {11 + s} "
                                f"({time.perf_counter() - t0:.0f} s)", fit, bench.truth)
    truth = {int(i): (e, s) for i, e, s, _ in bench.truth}
    res = loo_adapt.loo(bench.draws, estimator="psis", progress=False).loo_adapt
    log_lik = np.asarray(bench.draws.log_lik()).reshape(-1, res.elpd_i.size)
    k = res.pareto_k
    order = np.argsort(k)
    if args.pick == "mixis":
        mix, mix_se = _mixis_mean(bench, res.elpd_i.size)
        idx = bench.truth[:, 0].astype(int)
        z = calibration_z(mix[idx], mix_se[idx], bench.truth[:, 1], bench.truth[:, 2])
        order = idx[np.argsort(-z)]
    for j in [int(i) for i in order if int(i) in truth][: args.rows]:
        fit = program.refit_without(j, seed=args.seed_base + j, chains=4, draws=args.draws,
                                    warmup=args.warmup, adapt_delta=args.adapt_delta)
        e, se, _ = heldout_elpd(program.heldout_log_lik(fit, j).reshape(fit.shape))
        t, ts = truth[j]
        z = calibration_z(res.elpd_i[j], res.mcse_elpd_i[j], t, ts)
        print(f"{args.benchmark} row {j}: k-hat {k[j]:.2f}; PSIS {res.elpd_i[j]:.4f} (MCSE "
              f"{res.mcse_elpd_i[j]:.4f}, z {z:+.1f}); truth {t:.4f} ({ts:.4f}); fresh refit "
              f"({label}) {e:.4f} ({se:.4f}), refit - truth z {calibration_z(e, se, t, ts):+.1f}",
              flush=True)
        if args.pick == "mixis":
            stats = fit.sample_stats or {}
            div = int(np.sum(stats["divergent__"])) if "divergent__" in stats else -1
            print(f"    MixIS, mean of {len(MIXIS_SEEDS)} full mixture fits: {mix[j]:.4f} "
                  f"({mix_se[j]:.4f}), z "
                  f"{calibration_z(mix[j], mix_se[j], t, ts):+.1f} against the truth, "
                  f"{calibration_z(mix[j], mix_se[j], e, se):+.1f} against the fresh refit "
                  f"({div} divergent transitions in it)", flush=True)
        if args.where:
            _where(bench.draws, fit, program, j, log_lik)


if __name__ == "__main__":
    main()
