"""What the rows the full mixture keeps carry, and would a focus over them help?

The default sorts the full mixture's rows by its own MixIS: MCSE above the 0.1 bar, "hard"
(re-estimated by the focused fit); else Kish ESS above `EASY_FOCUS_KISH`, "easy" (re-estimated
by the easy-row focus); else "kept" (the full mixture's estimate stands).  Per seed, a fresh
full mixture fit (4 x 1000, warm-started as the default's) and the summed error against the
brute-force truth of each group and of all rows: selection shows as groups that lean while
all rows do not.

``--focus-kept``: then, per seed, one fit focused on the hard and kept rows of the cached
seed-1 full mixture together (4 x 1000), scored on each: do the kept rows lose their lean
in a fresh focus, at what calibration, and how many rows of either miss its bar?

    LOO_ADAPT_COLON_CSV=.../colon.csv python benchmarks/kept_rows.py NAME
        [--seeds 1 2 3 4 5 6 7 8] [--focus-kept]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth_suite import calibration_z, mixture_fit, with_full_truth  # noqa: E402

from loo_adapt.core.mixis import mixis_loo  # noqa: E402
from loo_adapt.estimators.focused_easy import EASY_FOCUS_KISH  # noqa: E402

BAR = 0.1
GROUPS = ("easy", "kept", "hard")


def sort_rows(est) -> dict:
    """{group: mask} of a MixIS result by the default's rules."""
    ok = est.mcse_elpd_i <= BAR
    easy = ok & (est.ess > EASY_FOCUS_KISH)
    return {"easy": easy, "kept": ok & ~easy, "hard": ~ok}


def mean_se(a) -> str:
    a = np.asarray(a, dtype=float)
    return f"{a.mean():+.3f} (se {a.std(ddof=1) / np.sqrt(a.size):.3f})"


def full_groups(bench, t, seeds):
    sums = {g: [] for g in GROUPS + ("all",)}
    for seed in seeds:
        est = mixis_loo(bench.program.fit_mixture(bench.draws, seed=200 + seed).log_lik())
        e = est.elpd_i - t[:, 1]
        groups = sort_rows(est)
        for g, m in groups.items():
            sums[g].append(e[m].sum())
        sums["all"].append(e.sum())
        print(f"seed {seed}: all {e.sum():+.2f}; " + "; ".join(
            f"{g} {int(m.sum())} rows {e[m].sum():+.2f}" for g, m in groups.items()),
            flush=True)
    print(f"{bench.name} full mixture, mean over {len(seeds)} seeds: " + "; ".join(
        f"{g} {mean_se(v)}" for g, v in sums.items()), flush=True)


def focus_kept(bench, t, seeds):
    groups = sort_rows(mixis_loo(mixture_fit(bench, 1)[0].log_lik()))
    rows = np.flatnonzero(groups["hard"] | groups["kept"])
    hard = groups["hard"][rows]
    print(f"{bench.name}: one fit focused on the {int(hard.sum())} hard and "
          f"{int((~hard).sum())} kept rows of the cached seed-1 full mixture", flush=True)
    out = {g: ([], [], []) for g in ("hard", "kept")}
    for seed in seeds:
        fit = bench.program.fit_mixture(bench.draws, rows=rows, seed=200 + seed)
        est = mixis_loo(fit.log_lik()[..., rows])
        e = est.elpd_i - t[rows, 1]
        z = calibration_z(est.elpd_i, est.mcse_elpd_i, t[rows, 1], t[rows, 2])
        miss = ~(est.mcse_elpd_i <= BAR)
        cells = []
        for g, m in (("hard", hard), ("kept", ~hard)):
            out[g][0].append(e[m].sum())
            out[g][1].append(np.mean(z[m] ** 2))
            out[g][2].append(int(miss[m].sum()))
            cells.append(f"{g} {e[m].sum():+.2f} (rms z {np.sqrt(np.mean(z[m] ** 2)):.2f}, "
                         f"{int(miss[m].sum())} above the bar)")
        print(f"seed {seed}: " + "; ".join(cells), flush=True)
    print(f"{bench.name} focus on hard + kept rows, mean over {len(seeds)} seeds: " + "; ".join(
        f"{g} {mean_se(v[0])}, rms z {np.sqrt(np.mean(v[1])):.2f}, "
        f"{np.mean(v[2]):.1f} above the bar" for g, v in out.items()), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("benchmark")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6, 7, 8])
    ap.add_argument("--focus-kept", action="store_true")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    bench, t = with_full_truth(args.benchmark)
    full_groups(bench, t, args.seeds)
    if args.focus_kept:
        focus_kept(bench, t, args.seeds[:6])


if __name__ == "__main__":
    main()
