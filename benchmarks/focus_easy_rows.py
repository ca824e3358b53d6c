"""Does a focused mixture over the rows the full mixture finds easy reach what it misses?

On wide horseshoe fits (p > n) the MixIS rows with a large Kish ESS (> 400: the
leave-one-out posterior close to the posterior) err optimistic together, while fresh refits
agree with the truth (`benchmarks/easy_rows_refit.py --where`: the refit's leave-one-out
posterior has a tail, through a local scale lambda_k, that no posterior draw reaches, and
the full mixture gives each easy row's component a mass of about exp(-elpd_j) / sum, so few
draws).  Here, per benchmark and seed: the easy rows of the cached full mixture fit
(`truth_suite.mixture_fit`), then a focused mixture over those rows only
(``fit_mixture(..., rows=easy)``, warm-started from the posterior fit), and MixIS of each
against the truth: mean and rms z, summed error, and the focused fit's seconds; then the
other rows (full mixture) and every row with the easy ones taken from the focused fit.

    python benchmarks/focus_easy_rows.py [--benchmarks ...] [--half choose|report|all]
        [--seeds 1 2 3] [--kish 400] [--draws D]

With ``--trigger`` it fits nothing: per benchmark, the share of rows whose plain-PSIS k-hat
(of the posterior draws, as ``loo`` computes it) is below 1/2, whether
``mixis_focus_easy="auto"`` focuses there (`loo_adapt.estimators.focused_easy.EASY_FOCUS_SHARE`),
and per seed the full mixture's easy rows against the truth: where they err, the rule should
focus.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth_suite import benchmark_names, calibration_z, load_benchmark, mixture_fit  # noqa: E402

from loo_adapt.core.mixis import mixis_loo  # noqa: E402
from loo_adapt.estimators.base import Context  # noqa: E402
from loo_adapt.estimators.focused_easy import EASY_FOCUS_SHARE, FocusedEasyMixIS  # noqa: E402
from loo_adapt.stan.mixture_fit import fit_mixture  # noqa: E402


def z_summary(est_elpd, est_mcse, truth):
    """Mean and rms of z = error / (MCSE and the truth's MC error combined), and the summed
    error, of estimates against ``truth`` rows (columns i, elpd_loo, mc_se, ...)."""
    err = est_elpd - truth[:, 1]
    z = calibration_z(est_elpd, est_mcse, truth[:, 1], truth[:, 2])
    return (f"mean z {z.mean():+.2f}, rms z {np.sqrt(np.mean(z ** 2)):.2f}, summed error "
            f"{err.sum():+.3f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", default="all", choices=("choose", "report", "all"))
    parser.add_argument("--benchmarks", nargs="*")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--kish", type=float, default=400.0)
    parser.add_argument("--draws", type=int, default=None,
                        help="draws per chain of the focused fit (default: fit_mixture's)")
    parser.add_argument("--trigger", action="store_true",
                        help="where the default focuses (no fit): see the module")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.trigger:
        return trigger(args)
    for name in args.benchmarks or benchmark_names(args.half, None):
        bench = load_benchmark(name)
        truth = bench.truth
        pos = {int(i): k for k, i in enumerate(truth[:, 0].astype(int))}
        for seed in args.seeds:
            mix, fit_seconds = mixture_fit(bench, seed)
            full = mixis_loo(mix.log_lik())
            easy = np.array([i for i in np.flatnonzero(full.ess > args.kish) if int(i) in pos],
                            dtype=np.int64)
            if easy.size == 0:
                print(f"{name} seed {seed}: no row with Kish ESS > {args.kish:g}", flush=True)
                continue
            t = truth[[pos[int(i)] for i in easy]]
            t0 = time.perf_counter()
            try:
                more = {} if args.draws is None else {"draws": args.draws}
                focused = fit_mixture(bench.program, bench.draws if bench.draws.method ==
                                      "mcmc" else None, seed=100 + seed,
                                      rows=[int(i) for i in easy], **more)
            except ValueError as err:  # a program that cannot mix only some rows
                print(f"{name}: {str(err).splitlines()[0][:90]}...", flush=True)
                break
            seconds = time.perf_counter() - t0
            est = mixis_loo(np.asarray(focused.log_lik())[..., easy])
            print(f"{name} seed {seed}: {easy.size} rows with Kish ESS > {args.kish:g}; full "
                  f"mixture ({fit_seconds:.0f} s): "
                  f"{z_summary(full.elpd_i[easy], full.mcse_elpd_i[easy], t)}; focused mixture "
                  f"({seconds:.0f} s): {z_summary(est.elpd_i, est.mcse_elpd_i, t)}, median Kish "
                  f"ESS {np.median(est.ess):.0f}", flush=True)
            # every row with a truth: the other rows from the full mixture, the easy rows
            # from the focused one
            rows = np.array(sorted(pos), dtype=np.int64)
            elpd, mcse = full.elpd_i.copy(), full.mcse_elpd_i.copy()
            elpd[easy], mcse[easy] = est.elpd_i, est.mcse_elpd_i
            other = np.setdiff1d(rows, easy)
            if other.size:
                t_other = truth[[pos[int(i)] for i in other]]
                print(f"    other {other.size} rows (full mixture): "
                      f"{z_summary(full.elpd_i[other], full.mcse_elpd_i[other], t_other)}; all "
                      f"{rows.size} rows, easy ones focused: "
                      f"{z_summary(elpd[rows], mcse[rows], truth[[pos[int(i)] for i in rows]])}",
                      flush=True)


def trigger(args):
    """Where ``mixis_focus_easy="auto"`` focuses, and how the full mixture's easy rows fare."""
    auto = FocusedEasyMixIS(max_low_khat_share=EASY_FOCUS_SHARE)
    for name in args.benchmarks or benchmark_names(args.half, None):
        bench = load_benchmark(name)
        truth = bench.truth
        pos = {int(i): k for k, i in enumerate(truth[:, 0].astype(int))}
        ctx = Context(draws=bench.draws)
        khat = np.asarray(ctx.base.pareto_k, dtype=float)
        runs, _ = auto.needed(ctx)  # the same PSIS pass (ctx.base is cached)
        print(f"{name}: {int(np.sum(khat < 0.5))} of {khat.size} rows "
              f"({np.mean(khat < 0.5):.1%}) have PSIS k-hat < 0.5: "
              f"{'focuses' if runs else 'no focus'}", flush=True)
        for seed in args.seeds:
            mix, _ = mixture_fit(bench, seed)
            full = mixis_loo(mix.log_lik())
            easy = np.array([i for i in np.flatnonzero(full.ess > args.kish) if int(i) in pos],
                            dtype=np.int64)
            if easy.size:
                t = truth[[pos[int(i)] for i in easy]]
                print(f"    seed {seed}: {easy.size} rows with Kish ESS > {args.kish:g}, full "
                      f"mixture: {z_summary(full.elpd_i[easy], full.mcse_elpd_i[easy], t)}",
                      flush=True)


if __name__ == "__main__":
    main()
