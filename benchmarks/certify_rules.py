"""Choose the certification rule of adapted estimates on the "choose" half of the truth suite.

For every benchmark of the chosen half, seed and transform set, adaptive IS is run once with
every check's statistic recorded (`loo_adapt.estimators.certify.check_values`); each rule
(a set of checks and a tolerance z in Monte Carlo SEs) then gives "PSIS, with the adapted
estimate where the rule passes", judged only by its error to brute-force truth:

    rule  | RMSE all | RMSE high-k | |total error| | worse than PSIS (RMSE or |total|) | accepted

The rule shipped as the default (`certify.DEFAULT_CHECKS`, `certify.DEFAULT_Z`) is the one with
the lowest error that is never worse than PSIS here; `benchmarks/truth.py --half report`
then reports it on the other half.

    python benchmarks/certify_rules.py [--half choose|report|all] [--seeds 1 2 3]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth_suite import benchmark_names, load_benchmark  # noqa: E402

from loo_adapt.estimators import adaptive as A  # noqa: E402
from loo_adapt.estimators import certify as C  # noqa: E402
from loo_adapt.estimators.psis import psis_of_draws  # noqa: E402

TRANSFORM_SETS = {"ll": ("ll",), "all": ("kl", "var", "ll", "mm1", "mm2")}


def rule_passes(values, checks, z, z_side, exact):
    for name in checks:
        v, k, _ = values[name]
        if name == "normaliser":
            if (exact and v > z) or not k <= values["_threshold"]:
                return False
        elif name == "psis_side":
            if not v <= z_side:
                return False
        elif not v <= z:
            return False
    return True


RULES = {"khat only": ((), 2.0, 2.0)}
for z in (1.0, 2.0, 3.0):
    RULES[f"jensen z={z:g}"] = (("jensen",), z, z)
    RULES[f"jensen+halves z={z:g}"] = (("jensen", "halves"), z, z)
    RULES[f"jensen+halves+normaliser z={z:g}"] = (("jensen", "halves", "normaliser"), z, z)
    RULES[f"jensen+halves+normaliser+reverse z={z:g}"] = (
        ("jensen", "halves", "normaliser", "reverse"), z, z)
    RULES[f"all five z={z:g}"] = (C.CHECKS, z, z)
    RULES[f"all five z={z:g}, psis_side z=0"] = (C.CHECKS, z, 0.0)
RULES["psis_side z=0"] = (("psis_side",), 2.0, 0.0)


def collect(bench, transforms, seed):
    """Adaptive IS once; every adapted row with its estimate and check statistics."""
    base = psis_of_draws(bench.draws, reff=1.0)
    rows = np.flatnonzero(base.pareto_k > base.good_k)
    recs = []
    orig = C.certify_candidate

    def spy(cand, log_full, cols, halves, r_eff, **kw):
        keys = ("lpd_i", "elpd", "mcse", "elpd_psis", "mcse_psis", "threshold",
                "exact_normaliser")
        v = C.check_values(cand, log_full, cols, halves, r_eff, **{k: kw[k] for k in keys})
        v["_threshold"] = kw["threshold"]
        recs.append((kw["elpd"], v))
        return True, ""

    C.certify_candidate = spy
    try:
        est = A.adaptive_estimate(bench.draws, bench.model, rows, base=base,
                                  transforms=transforms, seed=seed, certify=True,
                                  keep_candidates=False)
    finally:
        C.certify_candidate = orig
    adapted = [j for j, m in enumerate(est.method) if m != "psis"]
    return base, rows, [(int(rows[j]), e, v) for j, (e, v) in zip(adapted, recs)]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--half", default="choose", choices=("choose", "report", "all"))
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--benchmarks", nargs="*")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    names = benchmark_names(args.half, args.benchmarks)
    table = {(r, t): [] for r, t in itertools.product(RULES, TRANSFORM_SETS)}
    for name in names:
        bench = load_benchmark(name)
        truth = bench.truth[:, 1]
        exact = not bench.draws.is_approximate
        for tname, transforms in TRANSFORM_SETS.items():
            for seed in args.seeds:
                base, high, recs = collect(bench, transforms, seed)
                err_psis = base.elpd_i - truth
                for rule, (checks, z, z_side) in RULES.items():
                    elpd = base.elpd_i.copy()
                    n_acc = 0
                    for i, e, v in recs:
                        if rule_passes(v, checks, z, z_side, exact):
                            elpd[i] = e
                            n_acc += 1
                    err = elpd - truth
                    table[(rule, tname)].append(dict(
                        bench=name, seed=seed, rmse=np.sqrt(np.mean(err**2)),
                        rmse_psis=np.sqrt(np.mean(err_psis**2)),
                        rmse_high=np.sqrt(np.mean(err[high] ** 2)) if high.size else 0.0,
                        total=abs(err.sum()), total_psis=abs(err_psis.sum()), accepted=n_acc,
                        candidates=len(recs)))
        print(f"done {name}", flush=True)
    print(f"\nRules on the {args.half!r} half ({', '.join(names)}), seeds {args.seeds}")
    print(f"{'rule':44s} {'T':3s} {'RMSE':>7s} {'RMSE hi':>7s} {'|tot|':>6s} "
          f"{'worse':>5s} {'acc/cand':>9s}")
    for (rule, tname), recs in table.items():
        rm = np.mean([r["rmse"] for r in recs])
        rh = np.mean([r["rmse_high"] for r in recs])
        tot = np.mean([r["total"] for r in recs])
        worse = sum((r["rmse"] > r["rmse_psis"] + 1e-12) or (r["total"] > r["total_psis"] + 1e-12)
                    for r in recs)
        acc = sum(r["accepted"] for r in recs)
        cand = sum(r["candidates"] for r in recs)
        print(f"{rule:44s} {tname:3s} {rm:7.4f} {rh:7.4f} {tot:6.2f} {worse:5d} "
              f"{acc:4d}/{cand:<4d}")
    psis = table[("khat only", "ll")]
    print(f"{'PSIS':44s} {'':3s} {np.mean([r['rmse_psis'] for r in psis]):7.4f} {'':7s} "
          f"{np.mean([r['total_psis'] for r in psis]):6.2f}")


if __name__ == "__main__":
    main()
