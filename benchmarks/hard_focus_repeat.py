"""Is the held-out lean of the focus on the rows above the bar a property of the posterior fit,
or chance?

On rhs_wide_099's six held-out user fits (`benchmarks/user_program.py`, seeds 21-26) the
rows held from the first focused fit over the rows above the full mixture's bar erred
+0.41 a run, where on the suite's cached posterior the same kind of fit did not lean
(`benchmarks/results/mixture_starts.txt`).  Per held-out posterior seed this runs the
default `loo` as `user_program.py` does (the same posterior fit, the same rows), takes the
rows its first focused fit was asked about and that fit's draws per chain, and fits that
focus again with other seeds: the summed error over all its rows (no row dropped, so no
selection) and over the rows within the MCSE bar, each against the brute-force truth, with
each fit's rms z.  A lean shared by the repeats belongs to the posterior fit (its warm start,
its metric); repeats that scatter around zero say the held-out runs were chance.

    LOO_ADAPT_COLON_CSV=.../colon.csv python benchmarks/hard_focus_repeat.py
        [--benchmark rhs_wide_099] [--posterior-seeds 22 24] [--seeds 1 2 3 4 5 6]
        [--warmup 300] [--draws 2000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth_suite import MCSE_BAR, calibration_z, focused_rows, suite_module  # noqa: E402
from user_program import PROGRAM  # noqa: E402

import loo_adapt  # noqa: E402
from loo_adapt.core.mixis import mixis_loo  # noqa: E402
from loo_adapt.estimators.mixture_checks import divergent_count  # noqa: E402
from loo_adapt.io import read_draws  # noqa: E402

#: a repeat's seed is this plus its number (the default's focused fits use the loo seed
#: plus `loo_adapt.estimators.focused.FOCUS_SEED_OFFSET`)
REPEAT_SEED = 5000


def first_focus(res) -> tuple[np.ndarray, int]:
    """(rows, draws per chain) of the default's first focused fit over the rows above the
    bar: the rows of the first "mixis_focused" stage entry, and the draws per chain of the
    fit focused on that many rows."""
    r = res.loo_adapt
    entry = next(h for h in r.history if h["estimator"] == "mixis_focused")
    rows = np.asarray(entry["rows"], dtype=np.int64)
    for rec in r.row_draws or ():
        d = getattr(rec, "draws", None)
        if d is not None and focused_rows(d) == rows.size:
            return rows, int(d.n_draws)
    raise SystemExit("the first focused fit's draws are not among the rows' records")


def score(ll_rows, rows, truth) -> tuple[float, float, float, int]:
    """(summed error over all rows, over the rows within the bar, rms z of those, how many)
    of MixIS on a focused fit's log-likelihood columns ``ll_rows`` (chains, draws, rows)."""
    est = mixis_loo(ll_rows)
    e = est.elpd_i - truth[rows, 1]
    ok = est.mcse_elpd_i <= MCSE_BAR
    z = calibration_z(est.elpd_i, est.mcse_elpd_i, truth[rows, 1], truth[rows, 2])
    return float(e.sum()), float(e[ok].sum()), float(np.sqrt(np.mean(z[ok] ** 2))), int(ok.sum())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benchmark", default="rhs_wide_099")
    ap.add_argument("--posterior-seeds", type=int, nargs="+", default=[22, 24])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6])
    ap.add_argument("--warmup", type=int, default=None,
                    help="the repeats' warm-up iterations (default: fit_mixture's 100, the "
                         "posterior's metric kept; 150 or more adapts the metric too)")
    ap.add_argument("--halves", action="store_true",
                    help="also score each fit's first and second halves of every chain: an "
                         "O(1/S) lean would be about twice the whole fit's in each half")
    ap.add_argument("--draws", type=int, default=None,
                    help="the repeats' draws per chain (default: the default's first focus's)")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    suite = suite_module()
    data, _, truth = suite.load(args.benchmark)
    data = {k: v for k, v in data.items() if not k.startswith("mixis")}
    truth = np.asarray(truth)
    if not np.array_equal(truth[:, 0], np.arange(truth.shape[0])):
        raise SystemExit(f"{args.benchmark}: the truth does not cover every row")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "my_horseshoe.stan"
        path.write_text(PROGRAM)
        program = loo_adapt.StanProgram(path, data, backend="stanli",
                                        fit_kwargs=suite.BENCHMARKS[args.benchmark].fit_kwargs)
        flagged = program.with_mixis()
        for pseed in args.posterior_seeds:
            fit = program.fit(seed=pseed)
            res = loo_adapt.loo(fit, program=program, seed=pseed, progress=False)
            rows, draws = first_focus(res)
            r = res.loo_adapt
            held = np.array([focused_rows(getattr(r.row_draws[i], "draws", None)) == rows.size
                             for i in rows])
            e_default = float(np.sum(r.elpd_i[rows[held]] - truth[rows[held], 1]))
            print(f"{args.benchmark} posterior seed {pseed}: the default's first focus on "
                  f"{rows.size} rows (4 x {draws}); the rows it still holds ({int(held.sum())}) "
                  f"err {e_default:+.2f}", flush=True)
            posterior = read_draws(fit)
            sums, halves = [], []
            for s in args.seeds:
                t0 = time.perf_counter()
                again = flagged.fit_mixture(posterior, rows=rows, seed=REPEAT_SEED + s,
                                            draws=args.draws or draws, warmup=args.warmup)
                secs = time.perf_counter() - t0
                ll = again.log_lik()[..., rows]
                tot, within, rms, k = score(ll, rows, truth)
                half = ""
                if args.halves:
                    h = ll.shape[1] // 2
                    first = score(ll[:, :h], rows, truth)[0]
                    second = score(ll[:, h:], rows, truth)[0]
                    halves.append((tot, first, second))
                    half = f"; halves {first:+.2f} / {second:+.2f}"
                sums.append((tot, within))
                print(f"  repeat {s}: all {rows.size} rows {tot:+.2f}; {k} within the bar "
                      f"{within:+.2f} (rms z {rms:.2f}){half}; "
                      f"{divergent_count(again)[0]} divergent; {secs:.0f} s", flush=True)
            a = np.asarray(sums)
            se = a.std(axis=0, ddof=1) / np.sqrt(len(a))
            print(f"  mean over {len(a)} repeats: all rows {a[:, 0].mean():+.2f} (se {se[0]:.2f}); "
                  f"within the bar {a[:, 1].mean():+.2f} (se {se[1]:.2f})", flush=True)
            if halves:
                h = np.asarray(halves)
                excess = h[:, 1:].mean(axis=1) - h[:, 0]
                rich = h[:, 0] - excess  # Richardson: the whole minus the halves' excess
                k = np.sqrt(len(h))
                print(f"  halves: whole {h[:, 0].mean():+.2f}, halves {h[:, 1:].mean():+.2f} "
                      f"(excess {excess.mean():+.2f}, se {excess.std(ddof=1) / k:.2f}); "
                      f"whole - excess {rich.mean():+.2f} (se {rich.std(ddof=1) / k:.2f})",
                      flush=True)


if __name__ == "__main__":
    main()
