"""Would a second opinion on each focused row's MCSE, from the full mixture's independent draws,
make the verified rows' MCSEs hold?

A focused fit's MixIS MCSE of a row comes from the same draws as its estimate: a fit that
missed the row's leave-one-out tail errs optimistic *and* reports a small MCSE (on
rhs_microarray the same easy row's MCSE spans 0.001-0.07 over three seeds, and its large z
comes in the seed where it is smallest). The full mixture's draws are independent of the
focused fit and cover every row's component: reweighted to the focused mixture
(`loo_adapt.estimators.focused.reweighted_influence`, what `focus_draws` sizes a focused fit
from) they give each row's per-draw variance of its MixIS influence there, so an MCSE at the
focused fit's draws and its chains' median efficiency per draw. This script runs the default
with a program (`benchmarks/truth.py`'s "default, with program", cached mixture fits) and,
per focused fit whose rows the result holds, scores the verified rows' z with their own MCSE
and with the larger of it and that prediction: the rms z, the rows beyond 3, and how many
rows the wider MCSE would put above the 0.1 bar (each a row for the next fit or a refit);
and, over the seeds, the rms z where the prediction replaces the own MCSE only when it is
above k times it (`RATIOS`), and where the MCSE is the root of the two variances' mean.
Nothing in the package changes.

    LOO_ADAPT_COLON_CSV=.../colon.csv python benchmarks/second_opinion_mcse.py NAME ...
        [--seeds 1 2 3]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import truth as truth_run  # noqa: E402
from truth_suite import (  # noqa: E402
    MCSE_BAR,
    calibration_z,
    focused_rows,
    load_benchmark,
    mixture_fit,
)

from loo_adapt.core.mixis import mixis_loo  # noqa: E402
from loo_adapt.estimators.focused import reweighted_influence  # noqa: E402

#: the prediction used only where it is above this many times the fit's own MCSE (a rule
#: that leaves a fit's MCSEs alone where the two agree within their noise)
RATIOS = (1.5, 2.0, 3.0)


def fit_targets(res):
    """{fit: (its draws, the rows it was focused on)} for each focused fit some row of
    ``res`` is held from: a fit over the rows above the bar by its stage entry's rows, the
    easy-row fit by the first rows its entry returned (a block of the kept rows, moved, may
    follow them)."""
    out = {}
    for rec in res.row_draws or ():
        d = getattr(rec, "draws", None)
        k = None if d is None else focused_rows(d)
        if k is None or id(d) in out:
            continue
        held = [i for i in range(res.n_obs) if getattr(res.row_draws[i], "draws", None) is d]
        for h in res.history:
            rows = np.asarray(h["rows"], dtype=np.int64)
            if h["estimator"] == "mixis_focused" and rows.size == k:
                out[id(d)] = (d, rows)
                break
            if (h["estimator"] == "mixis_focused_easy" and rows.size >= k
                    and np.isin(held, rows[:k]).all()):
                out[id(d)] = (d, rows[:k])
                break
    return out.values()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("benchmarks", nargs="+")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    args = ap.parse_args(argv)
    for name in args.benchmarks:
        bench = load_benchmark(name)
        t = np.asarray(bench.truth)
        idx = t[:, 0].astype(int)
        scored = set(idx)
        z_all = {"own": [], "second": [], "pooled": [], **{k: [] for k in RATIOS}}
        n_used = dict.fromkeys(RATIOS, 0)
        for seed in args.seeds:
            mix = mixture_fit(bench, seed)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res, _ = truth_run._with_program(bench, seed, mix, 5)
            full_ll = mix[0].log_lik()
            if full_ll.shape[-1] != res.n_obs:
                print(f"{name} seed {seed}: the mixture's columns are not the LOO's; skipped")
                continue
            for d, target in fit_targets(res):
                ll = d.log_lik()[..., target]
                est = mixis_loo(ll)
                s = ll.shape[0] * ll.shape[1]
                eff = min(float(np.median(est.ess_mcse)) / s, 1.0)
                there = reweighted_influence(full_ll, target)
                if there is None:  # too few reweighted draws to say
                    continue
                pred = np.sqrt(there[0] / (eff * s))
                rows = np.array([i for j, i in enumerate(target)
                                 if getattr(res.row_draws[i], "draws", None) is d
                                 and res.reliable[i] and i in scored])
                if rows.size == 0:
                    continue
                where = {r: j for j, r in enumerate(target)}
                p = pred[[where[r] for r in rows]]
                own = res.mcse_elpd_i[rows]
                wide = np.maximum(own, p)
                ti = np.searchsorted(idx, rows)
                z0 = calibration_z(res.elpd_i[rows], own, t[ti, 1], t[ti, 2])
                z1 = calibration_z(res.elpd_i[rows], wide, t[ti, 1], t[ti, 2])
                z_all["own"].extend(z0)
                z_all["second"].extend(z1)
                pooled = np.sqrt(0.5 * (own ** 2 + p ** 2))
                z_all["pooled"].extend(calibration_z(res.elpd_i[rows], pooled, t[ti, 1], t[ti, 2]))
                for k in RATIOS:
                    z_all[k].extend(calibration_z(res.elpd_i[rows], np.where(p > k * own, p, own),
                                                  t[ti, 1], t[ti, 2]))
                    n_used[k] += int(np.sum(p > k * own))
                print(f"{name} seed {seed}, focus {target.size} ({rows.size} verified rows "
                      f"held): rms z {np.sqrt(np.mean(z0 ** 2)):.2f} -> "
                      f"{np.sqrt(np.mean(z1 ** 2)):.2f}; |z| > 3: {np.sum(abs(z0) > 3)} -> "
                      f"{np.sum(abs(z1) > 3)}; rows widened {np.sum(p > own)}, then above the "
                      f"bar {np.sum(wide > MCSE_BAR)}; median MCSE {np.median(own):.4f} -> "
                      f"{np.median(wide):.4f}", flush=True)
        if z_all["own"]:
            print(f"{name}, the focused fits' verified rows over the seeds: rms z " + " -> ".join(
                f"{np.sqrt(np.mean(np.square(z_all[k]))):.2f}" for k in ("own", "second"))
                + f" ({len(z_all['own'])} rows); the two variances averaged: rms z "
                f"{np.sqrt(np.mean(np.square(z_all['pooled']))):.2f}; the prediction only where "
                "it is above k times the own MCSE: " + ", ".join(
                    f"k = {k:g}: rms z {np.sqrt(np.mean(np.square(z_all[k]))):.2f} "
                    f"({n_used[k]} rows)" for k in RATIOS), flush=True)


if __name__ == "__main__":
    main()
