"""Every estimator against brute-force LOO truth on the whole truth suite, over several seeds.

Benchmarks: the three CmdStan fixture models and the benchmarks of `benchmarks/truth/`
(`truth_suite.py` loads them; each truth is one refit per observation with >= 8,000 draws,
its Monte Carlo error recorded).  Every row is a `loo()` call, i.e. the same stages the
package and the CLI run:

    psis                      loo(fit, estimator="psis")
    adaptive, uncertified     loo(fit, model=m, estimator="adaptive", certify=False)  (old default)
    paper's rule              ... transforms=ALL_TRANSFORMS, selection="min_khat", certify=False
    default, no program       loo(fit, model=m)            (PSIS + certified adaptive IS)
    mixis, not pooled         loo(fit, estimator="mixis", mixis_draws=<mixture fit>,
                                  mixis_pool_khat=None)        (MixIS alone on every row)
    mixis                     loo(fit, estimator="mixis", mixis_draws=<mixture fit>)
                              (pooled with PSIS where PSIS's k-hat < 1/2)
    default, with program     loo(fit, model=m, program=p) (MixIS for every row, where
                              almost no row has PSIS k-hat < 1/2 a focused fit over the
                              rows it found easy, a mixture fit focused on the rows above
                              the MCSE bar, refits)
    with program, no focus    ... mixis_focus=False (MixIS, then refits: the refit path)
    with program, 3 spot      ... mixis_spot_checks=3 (three refits of verified MixIS rows
      checks                  calibrate its MCSE, `loo_adapt.estimators.spot_check`)
    with program, chains      ... mixis_mcse="chains" (MixIS's MCSE inflated by its
      MCSE                    chains' disagreement, `loo_adapt.estimators.mixis.chain_inflation`)
    with program, delta       ... mixis_mcse="delta" (MixIS's delta-method MCSE without the
      MCSE                    default's skew widening, `loo_adapt.core.skew`)
    with program, easy rows   ... mixis_focus_easy=True (a focused fit, 4 x 4000 draws, over
      focused                 the rows MixIS verified with a Kish ESS > 400, whatever the
                              posterior, `loo_adapt.estimators.focused_easy.FocusedEasyMixIS`)
    with program, easy rows   ... mixis_focus_easy=False (the default before the easy-row
      never focused           focus)

Printed per benchmark and seed: pointwise RMSE to truth (all rows, rows with PSIS k-hat
above the threshold), max |error_i|, the total's error and the combined Monte Carlo error of
estimator and truth (MC), rows left unverified, seconds, and the fraction of the cost of
refitting every observation (one refit timed, times n), the rms of z = error / (MCSE and
truth's MC error combined) over the rows the result calls verified and how many have
|z| > 3, and the cost in posterior fits (``fits``: seconds over the wall time of one posterior fit
of the program with the posterior draws' chains and draws, timed in the same run as the
median of 3 runs, ``--unit-reps``); the runs with a program also print each stage's seconds
in posterior fits (mixture fit, MixIS, focused fit, refits).  The mixture fit's draws are
cached, but its seconds are measured in this run too: the cached fit is made again with its
seed (its draws checked equal to the cached ones), and a fit of either kind under 5 s is
timed as the median of 3 runs (``--cached-fit-seconds`` takes the seconds the cache
recorded, on whatever ran when it was made).  Then, per estimator, over the chosen half:
whether the issue's targets hold (total error within 2 MC and RMSE <= MixIS's + 0.005 with a
program; never worse than PSIS without one), and the sign of the totals' errors: z = total
error / MC, its rms over runs and its mean per benchmark over the seeds, with a binomial
test of those signs over benchmarks (the seeds of one benchmark share its posterior fit and
truth, so they are not independent tests of a common sign).

    python benchmarks/truth.py [--half choose|report|all] [--seeds 1 2 3] [--benchmarks ...]
                               [--partial] [--estimators LABEL ...] [--worst K]

``--worst K`` prints, under each estimator's line, the K verified rows with the largest |z|
(row, z, error, MCSE, the truth's MC error, plain-PSIS k-hat, the stage that verified it and
the method) and the signs of the verified rows with |z| > 2 with a two-sided binomial
p-value against equal signs; the closing summary adds those signs over every benchmark and
seed.  That p-value takes the rows as independent, which rows estimated from one sample of
draws are not (on logistic_n300 320 rows carry 13-14 independent ones): a small p flags a
shared sign to test, and `mixis_calibration.py --null` tests it with the rows' correlation.
Per estimator the summary also gives, per benchmark, the median cost over the seeds and the
rms z of the verified rows of all its seeds together.

``--partial`` evaluates a benchmark whose brute-force refits are not all done on the folds
that are (the estimators still see every observation; errors, totals and the combined MC
error are over the finished folds only, the estimator's MC error of that sub-total taken as
its pointwise MCSEs in quadrature).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth_suite import (  # noqa: E402
    CACHE,
    benchmark_names,
    calibration_z,
    fit_mixture_of,
    load_benchmark,
    mixture_fit,
    suite_module,
    total_mc,
)

from loo_adapt.api import ALL_TRANSFORMS, loo  # noqa: E402


def _mc_total(res, truth, idx):
    """Combined Monte Carlo SE of the total over rows ``idx``: the estimator's and the
    truth's (all rows: the estimator's own total MCSE, which knows MixIS's correlations)."""
    if idx.size == res.n_obs:
        mcse = res.estimates()["mcse_elpd_loo"]
    else:
        mcse = float(np.sqrt(np.nansum(res.mcse_elpd_i[idx] ** 2)))
    return total_mc(mcse, truth[:, 2])


def estimators(bench, seed, mixture, refit_budget):
    """label -> callable returning (PointwiseLoo, extra seconds)."""
    d, m = bench.draws, bench.model
    y = bench.data.get("y")
    return {
        "psis": lambda: (loo(d, estimator="psis", y=y).loo_adapt, 0.0),
        "adaptive LL, uncertified": lambda: (loo(
            d, model=m, estimator="adaptive", certify=False, seed=seed).loo_adapt, 0.0),
        "paper's rule (all, min k)": lambda: (loo(
            d, model=m, estimator="adaptive", transforms=ALL_TRANSFORMS, selection="min_khat",
            certify=False, seed=seed).loo_adapt, 0.0),
        "default, no program": lambda: (loo(d, model=m, seed=seed).loo_adapt, 0.0),
        "mixis, not pooled": lambda: (loo(d, estimator="mixis", mixis_draws=mixture[0], y=y,
                                          seed=seed, mixis_pool_khat=None).loo_adapt,
                                      mixture[1]),
        "mixis": lambda: (loo(d, estimator="mixis", mixis_draws=mixture[0], y=y,
                              seed=seed).loo_adapt, mixture[1]),
        "default, with program": lambda: _with_program(bench, seed, mixture, refit_budget),
        "with program, no focus": lambda: _with_program(bench, seed, mixture, refit_budget,
                                                        focus=False),
        "with program, 3 spot checks": lambda: _with_program(bench, seed, mixture,
                                                             refit_budget, spot_checks=3),
        "with program, chains MCSE": lambda: _with_program(bench, seed, mixture,
                                                           refit_budget, mcse="chains"),
        "with program, delta MCSE": lambda: _with_program(bench, seed, mixture,
                                                          refit_budget, mcse="delta"),
        "with program, easy rows focused": lambda: _with_program(bench, seed, mixture,
                                                                 refit_budget, easy=True),
        "with program, easy rows never focused": lambda: _with_program(
            bench, seed, mixture, refit_budget, easy=False),
    }


def _with_program(bench, seed, mixture, refit_budget, focus=True, spot_checks=0,
                  mcse=None, easy="auto"):
    """The default with a program; its refits are checkpointed under `benchmarks/cache/`
    (one directory per benchmark, seed and path), so a rerun resumes them: the seconds of the
    resumed refits, as they were measured when made, are added (one after another).
    ``mcse``: MixIS's pointwise MCSE (None: the package's default)."""
    easy_tag = {True: "easy-", False: "noeasy-"}.get(easy, "")  # "auto": the default's
    # a row's refit does not depend on the MCSE method that sent it there: the default and
    # "delta" share their checkpoints (each checked against its fingerprint when resumed)
    ck = CACHE / (f"{bench.name}-refits-{'' if focus else 'nofocus-'}"
                  f"{f'spot{spot_checks}-' if spot_checks else ''}"
                  f"{'' if mcse in (None, 'delta') else f'{mcse}-'}{easy_tag}seed{seed}")
    cached = {}  # row -> seconds of a refit made by an earlier run
    if ck.is_dir():
        for f in ck.glob("*.npz"):
            if not f.name.startswith(".tmp-"):
                with np.load(f, allow_pickle=False) as z:
                    meta = json.loads(str(z["__meta__"]))
                    cached[int(meta.get("i", -1))] = float(meta.get("seconds", 0.0))
    kw = {} if mcse is None else {"mixis_mcse": mcse}
    res = loo(bench.draws, model=bench.model, program=bench.program, mixis_draws=mixture[0],
              seed=seed, mixis_focus=focus, mixis_spot_checks=spot_checks,
              mixis_focus_easy=easy, **kw,
              refit_kwargs={"progress": False, "max_refits": refit_budget,
                            "checkpoint": str(ck)}).loo_adapt
    # only the cached refits this run's refit stage used count (an earlier run with other
    # settings may have refitted other rows)
    refitted = {int(i) for rec in res.history if rec["estimator"] == "refit"
                for i in rec["rows"]}
    before = sum(s for i, s in cached.items() if i in refitted)
    stages = {"mixture fit": mixture[1]}
    for rec in res.history:
        stages[rec["estimator"]] = stages.get(rec["estimator"], 0.0) + rec.get("seconds", 0.0)
    stages["refit"] = stages.get("refit", 0.0) + before
    res.stage_seconds = stages
    return res, mixture[1] + before


def _per_benchmark(recs, bench) -> str:
    """One benchmark over its seeds: the median cost in posterior fits and the rms z of
    every verified row of every seed together (the calibration the issue asks of it)."""
    rs = [r for r in recs if r["bench"] == bench]
    n = sum(r["n_ver"] for r in rs)
    rms = np.sqrt(sum(r["sum_z2"] for r in rs) / n) if n else float("nan")
    return (f"{bench} median fits {np.median([r['fits'] for r in rs]):.2f}, rms z "
            f"{rms:.2f} ({n} verified rows)")


def _signs(n_pos: int, n_neg: int) -> str:
    """Verified rows with z > 2 and z < -2, and the two-sided binomial p-value of that split
    against equal chances, the rows taken as independent (see the module)."""
    from scipy.stats import binomtest

    n = n_pos + n_neg
    p = binomtest(n_pos, n, 0.5).pvalue if n else 1.0
    return (f"|z| > 2: {n_pos} optimistic (z > 2), {n_neg} pessimistic; binomial p (rows as "
            f"independent) = {p:.2g}")


def _total_signs(recs) -> str:
    """The totals' errors in units of their combined MC error (z = total error / MC): their
    rms over runs, and their sign per benchmark (the mean z over its seeds: the seeds share
    the posterior fit, its pooled PSIS rows and the truth, so they are not independent) with
    a two-sided binomial p-value against equal chances over benchmarks."""
    from scipy.stats import binomtest

    z = np.array([r["total"] / r["mc"] for r in recs])
    by = {}
    for r, zi in zip(recs, z):
        by.setdefault(r["bench"], []).append(zi)
    means = {b: float(np.mean(v)) for b, v in by.items()}
    n_pos = sum(m > 0 for m in means.values())
    n_neg = sum(m < 0 for m in means.values())
    p = binomtest(n_pos, n_pos + n_neg, 0.5).pvalue if n_pos + n_neg else 1.0
    return (f"total error / MC: rms {np.sqrt(np.mean(z**2)):.2f} over {z.size} runs; mean per "
            f"benchmark " + ", ".join(f"{b} {m:+.2f}" for b, m in means.items())
            + f"; {n_pos} positive, {n_neg} negative, binomial p (benchmarks) = {p:.2g}")


def _print_worst(res, psis, idx, truth, err, ver, zv, k):
    """The ``k`` verified rows of largest |z| (``zv``: z of the rows ``ver`` marks)."""
    rows = idx[ver]
    mcse = res.mcse_elpd_i[idx][ver]
    by = (np.asarray(res.verified_by, dtype=object)[idx][ver] if res.verified_by is not None
          else np.full(rows.size, "", dtype=object))
    method = (np.asarray(res.method, dtype=object)[idx][ver] if res.method is not None
              else np.full(rows.size, "", dtype=object))
    for q in np.argsort(-np.abs(zv))[:k]:
        i = rows[q]
        print(f"{'':28s}row {i:4d}  z {zv[q]:+6.2f}  error {err[ver][q]:+.4f}  "
              f"MCSE {mcse[q]:.4f}  truth MC {truth[ver, 2][q]:.4f}  "
              f"PSIS k-hat {psis.pareto_k[i]:.2f}  {by[q]} ({method[q]})")


#: fits shorter than this are timed as the median of `_SHORT_FIT_REPS` runs (a tiny model's
#: first fit in a process took 0.24 s against 0.12 s for the next, on logistic_normal)
_SHORT_FIT = 5.0
_SHORT_FIT_REPS = 3

#: runs of the posterior fit, the cost column's unit, whatever its length (``--unit-reps``):
#: on a shared VM one run of rhs_wide's fit took 42.4 s in one suite run and 37.8 s in the
#: next, with the default's stages at 116 s and 114 s, which moved its cost from 2.74 to
#: 3.03 posterior fits
UNIT_REPS = 3


def _median_seconds(fit, reps: int = 1):
    """Wall time of ``fit()``: the median of ``reps`` runs, or of `_SHORT_FIT_REPS` when the
    first took under `_SHORT_FIT` seconds; (seconds, the last run's result)."""
    times = []
    while True:
        t0 = time.perf_counter()
        out = fit()
        times.append(time.perf_counter() - t0)
        if len(times) >= max(reps, 1 if times[0] >= _SHORT_FIT else _SHORT_FIT_REPS):
            return float(np.median(times)), out


def _posterior_seconds(bench, reps: int = UNIT_REPS):
    """Wall time of one posterior fit of the benchmark's program with its posterior draws'
    chains and draws (the unit of the cost column): the median of ``reps`` runs (at least
    `_SHORT_FIT_REPS` for a short fit)."""
    return _median_seconds(lambda: bench.program.fit(
        seed=1, chains=bench.draws.n_chains,
        draws=bench.draws.n_samples // bench.draws.n_chains), reps)[0]


def _mixture_seconds(bench, seed, mixture):
    """(seconds, note) of the benchmark's mixture fit timed in this run, as the posterior
    fit is: the cached fit (``mixture``) made again with its seed, and its draws compared
    with the cached ones (the note says when they differ).  The seconds a cached fit
    recorded were measured in the run that made it, on whatever else ran then (relu1: 4.9 s
    recorded, 2.2 s in a quiet run, with the same draws)."""
    prog = bench.program if bench.program.declares_mixis else bench.program.with_mixis()

    def fit():
        # each run pays the warm start's unconstraining of the posterior draws, as the first
        # mixture fit of a loo() call does (`StanLogDensity.unconstrain` keeps its last
        # result for the later focused fits)
        prog.log_density()._last_unconstrained = None
        return fit_mixture_of(bench, seed)

    sec, again = _median_seconds(fit)
    same = np.array_equal(again.log_lik(), mixture[0].log_lik())
    return sec, ("" if same else "; the mixture fit made again differs from the cached one")


def _other_truth(name, other, truth):
    """The truth of benchmark ``other`` for ``name``, after checking that both were made
    from the same data (the same observations, in the same order)."""
    mod = suite_module()
    if mod.load_data(name) != mod.load_data(other):
        raise SystemExit(f"--truth-from {name}={other}: the two benchmarks' data differ")
    alt = np.asarray(mod.load_truth(other))
    if not np.array_equal(alt[:, 0], truth[:, 0]):
        raise SystemExit(f"--truth-from {name}={other}: the truths cover different folds")
    print(f"({name} scored against the truth of {other}: total {alt[:, 1].sum():.2f}, "
          f"against {truth[:, 1].sum():.2f})")
    return alt


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", default="all", choices=("choose", "report", "all"))
    parser.add_argument("--benchmarks", nargs="*")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--refit-budget", type=int, default=5)
    parser.add_argument("--unit-reps", type=int, default=UNIT_REPS,
                        help="runs of the posterior fit timed for the cost column's unit "
                             "(their median)")
    parser.add_argument("--partial", action="store_true",
                        help="use the finished folds of an unfinished truth")
    parser.add_argument("--worst", type=int, default=0, metavar="K",
                        help="print the K verified rows with the largest |z| and the signs "
                             "of those with |z| > 2")
    parser.add_argument("--estimators", nargs="*", metavar="LABEL",
                        help="run only these rows (labels as printed, e.g. psis mixis "
                             "'default, with program'); psis and mixis always run (the "
                             "targets compare with them)")
    parser.add_argument("--truth-from", action="append", default=[], metavar="NAME=OTHER",
                        help="score benchmark NAME against the truth of OTHER, a remake of "
                             "the same data and model (rhs_wide=rhs_wide_099: the same LOO "
                             "quantity refitted at adapt_delta 0.99, 107 divergent "
                             "transitions against 1909); repeatable")
    parser.add_argument("--cached-fit-seconds", dest="time_fits", action="store_false",
                        help="take the mixture fit's seconds as cached (measured in the run "
                             "that made it) instead of fitting it again in this run")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    names = benchmark_names(args.half, args.benchmarks)
    other = dict(pair.split("=", 1) for pair in args.truth_from)
    summary: dict[str, list] = {}
    for name in names:
        bench = load_benchmark(name, partial=args.partial)
        truth = bench.truth
        if name in other:
            truth = _other_truth(name, other[name], truth)
        idx = truth[:, 0].astype(np.int64)
        n_all = int(bench.draws.log_lik().shape[-1])
        t0 = time.perf_counter()
        bench.program.refit_without(0, seed=1)
        t_refit_all = (time.perf_counter() - t0) * n_all
        t_post = _posterior_seconds(bench, args.unit_reps)
        for seed in args.seeds:
            mixture = mixture_fit(bench, seed)  # (draws, seconds of the fit), cached
            if args.time_fits:  # the cached draws, their fit's seconds measured in this run
                t_mix, differs = _mixture_seconds(bench, seed, mixture)
                mixture = (mixture[0], t_mix)
            else:
                differs = "; mixture fit seconds as cached"
            psis = None
            rows = ("" if idx.size == n_all else
                    f" (PARTIAL truth: errors over the {idx.size} finished folds of {n_all})")
            print(f"\n== {name} (seed {seed}): n = {n_all}, S = {bench.draws.n_samples}, "
                  f"truth total {truth[:, 1].sum():.2f}; refit-all {t_refit_all:.0f} s; "
                  f"posterior fit {t_post:.2f} s, mixture fit {mixture[1]:.2f} s{differs}"
                  f"{rows}")
            print(f"{'estimator':26s} {'RMSE':>7s} {'RMSE hi':>7s} {'max|e|':>7s} "
                  f"{'total err':>9s} {'MC':>5s} {'unver.':>6s} {'sec':>6s} {'of refit':>8s} "
                  f"{'fits':>6s} {'rms z':>6s} {'|z|>3':>5s}")
            for label, run in estimators(bench, seed, mixture, args.refit_budget).items():
                if args.estimators and label not in {*args.estimators, "psis", "mixis"}:
                    continue
                t0 = time.perf_counter()
                res, extra = run()
                sec = time.perf_counter() - t0 + extra
                if psis is None:
                    psis = res
                high = (psis.pareto_k > psis.good_k)[idx]
                err = res.elpd_i[idx] - truth[:, 1]
                # calibration of the rows the result calls verified: z against the
                # estimator's MCSE and the truth's Monte Carlo error combined
                ver = np.asarray(res.reliable)[idx] & np.isfinite(res.mcse_elpd_i[idx])
                zv = calibration_z(res.elpd_i[idx][ver], res.mcse_elpd_i[idx][ver], truth[ver, 1],
                                    truth[ver, 2])
                rec = dict(bench=name, seed=seed, rmse=float(np.sqrt(np.mean(err**2))),
                           n_pos2=int(np.sum(zv > 2)), n_neg2=int(np.sum(zv < -2)),
                           rms_z=float(np.sqrt(np.mean(zv**2))) if zv.size else np.nan,
                           sum_z2=float(np.sum(zv**2)), n_ver=int(zv.size),
                           n_z3=int(np.sum(np.abs(zv) > 3)),
                           rmse_high=float(np.sqrt(np.mean(err[high] ** 2))) if high.any()
                           else 0.0, max_err=float(np.max(np.abs(err))),
                           total=float(err.sum()), mc=_mc_total(res, truth, idx),
                           unverified=int(res.unreliable.sum()), sec=sec,
                           fits=sec / t_post)
                summary.setdefault(label, []).append(rec)
                print(f"{label:26s} {rec['rmse']:7.4f} {rec['rmse_high']:7.4f} "
                      f"{rec['max_err']:7.3f} {rec['total']:+9.2f} {rec['mc']:5.2f} "
                      f"{rec['unverified']:6d} {sec:6.1f} {sec / t_refit_all:8.1%} "
                      f"{sec / t_post:6.2f} {rec['rms_z']:6.2f} {rec['n_z3']:4d}", flush=True)
                if getattr(res, "stage_seconds", None):
                    print(f"{'':26s} stages in posterior fits: " + ", ".join(
                        f"{k} {v / t_post:.2f}" for k, v in res.stage_seconds.items()))
                if args.worst and zv.size:
                    _print_worst(res, psis, idx, truth, err, ver, zv, args.worst)
                    print(f"{'':28s}{_signs(rec['n_pos2'], rec['n_neg2'])}")
    print(f"\n== targets over {', '.join(names)}, seeds {args.seeds}")
    psis = {(r["bench"], r["seed"]): r for r in summary["psis"]}
    mixis = {(r["bench"], r["seed"]): r for r in summary["mixis"]}
    for label, recs in summary.items():
        within = sum(abs(r["total"]) <= 2 * r["mc"] for r in recs)
        worse = sum(r["rmse"] > psis[(r["bench"], r["seed"])]["rmse"] + 1e-12
                    or abs(r["total"]) > abs(psis[(r["bench"], r["seed"])]["total"]) + 1e-12
                    for r in recs)
        near_mixis = sum(r["rmse"] <= mixis[(r["bench"], r["seed"])]["rmse"] + 0.005
                         for r in recs)
        print(f"{label:26s} total within 2 MC: {within}/{len(recs)}; worse than PSIS: "
              f"{worse}/{len(recs)}; RMSE <= MixIS + 0.005: {near_mixis}/{len(recs)}; "
              f"mean seconds {np.mean([r['sec'] for r in recs]):.1f}; median posterior fits "
              f"{np.median([r['fits'] for r in recs]):.2f}")
        print(f"{'':26s} {_total_signs(recs)}")
        print(f"{'':26s} per benchmark over the seeds: " + "; ".join(
            _per_benchmark(recs, b) for b in dict.fromkeys(r["bench"] for r in recs)))
        if args.worst:
            n_pos, n_neg = sum(r["n_pos2"] for r in recs), sum(r["n_neg2"] for r in recs)
            print(f"{'':26s} {_signs(n_pos, n_neg)}")


if __name__ == "__main__":
    main()
