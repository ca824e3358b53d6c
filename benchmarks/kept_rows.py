"""What the rows the full mixture keeps carry, and would a focus over them help?

The default sorts the full mixture's rows by its own MixIS: MCSE above the 0.1 bar, "hard"
(re-estimated by the focused fit); else Kish ESS above `EASY_FOCUS_KISH`, "easy" (re-estimated
by the easy-row focus); else "kept" (the full mixture's estimate stands).  Per seed, a fresh
full mixture fit (4 x 1000, warm-started as the default's) and the summed error against the
brute-force truth of each group and of all rows: selection shows as groups that lean while
all rows do not.

``--bootstrap B``: per fit, a block bootstrap of its draws (B replicates, blocks of 50
draws within each chain) sorted by the same rules estimates each row's selection bias as
its mean bootstrap shift where the replicate keeps it less its mean shift over all
replicates; the kept rows' sum corrected by it is printed beside the plain one.  A
bootstrap resamples the draws a fit has, so it can see selection only as far as the draws
show it.

``--focus-kept``: then, per seed, one fit focused on the hard and kept rows of the cached
seed-1 full mixture together (4 x 1000), scored on each: do the kept rows lose their lean
in a fresh focus, at what calibration, and how many rows of either miss its bar?
``--focus-kept alone``: a fit focused on the kept rows alone.  ``--draws N`` sets the
focused fit's draws per chain (1000), ``--draws auto`` to what
`loo_adapt.estimators.focused.focus_draws` predicts from the cached full mixture (its
`FOCUS_CUT` left out).  Each focused fit's cost is
printed as its leapfrog steps (its 100 warm-up iterations counted at its sampling rate)
over the posterior fit's (`loo_adapt.estimators.focused_easy.posterior_leapfrog`).

    LOO_ADAPT_COLON_CSV=.../colon.csv python benchmarks/kept_rows.py NAME
        [--seeds 1 2 3 4 5 6 7 8] [--bootstrap B] [--focus-kept [alone]] [--draws N|auto]
        [--focus-only]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth_suite import (  # noqa: E402
    MCSE_BAR,
    calibration_z,
    default_sort,
    mixture_fit,
    with_full_truth,
)

from loo_adapt.core.mixis import mixis_loo  # noqa: E402
from loo_adapt.estimators.focused import focus_draws  # noqa: E402
from loo_adapt.estimators.focused_easy import posterior_leapfrog  # noqa: E402

GROUPS = ("easy", "kept", "hard")
MIXTURE_WARMUP = 100  # `loo_adapt.stan.mixture_fit.fit_mixture`'s warm-started default


def mixture_steps(fit) -> float:
    """Leapfrog steps of a warm-started mixture fit, warm-up counted at the sampling rate."""
    leap = np.asarray(fit.sample_stats["n_leapfrog__"], dtype=float)
    return float(np.sum(leap.mean(axis=1) * (leap.shape[1] + MIXTURE_WARMUP)))


def sort_rows(est) -> dict:
    """{group: mask} of a MixIS result by the default's rules, easy first."""
    groups = default_sort(est.mcse_elpd_i, est.ess)
    return {g: groups[g] for g in GROUPS}


def mean_se(a) -> str:
    a = np.asarray(a, dtype=float)
    return f"{a.mean():+.3f} (se {a.std(ddof=1) / np.sqrt(a.size):.3f})"


def selection_bias(log_lik, est, replicates: int, block: int = 50, seed: int = 0):
    """Per row, the block bootstrap's estimate of the bias of being kept (see the module
    docstring): mean shift of the replicates that keep the row less the mean shift of all."""
    rng = np.random.default_rng(seed)
    chains, draws, n = log_lik.shape
    blocks = draws // block
    kept_sum, kept_count, shift = np.zeros(n), np.zeros(n), np.zeros(n)
    for _ in range(replicates):
        start = rng.integers(0, blocks, size=(chains, blocks))[:, :, None] * block
        take = (start + np.arange(block)).reshape(chains, -1)
        rep = mixis_loo(np.take_along_axis(log_lik, take[:, :, None], axis=1))
        d = rep.elpd_i - est.elpd_i
        kept = sort_rows(rep)["kept"]
        shift += d
        kept_sum += np.where(kept, d, 0.0)
        kept_count += kept
    return np.where(kept_count > 0, kept_sum / np.maximum(kept_count, 1), 0.0) - shift / replicates


def full_groups(bench, t, seeds, replicates: int = 0):
    sums = {g: [] for g in GROUPS + ("all",)}
    corrected = []
    for seed in seeds:
        ll = bench.program.fit_mixture(bench.draws, seed=200 + seed).log_lik()
        est = mixis_loo(ll)
        e = est.elpd_i - t[:, 1]
        groups = sort_rows(est)
        for g, m in groups.items():
            sums[g].append(e[m].sum())
        sums["all"].append(e.sum())
        boot = ""
        if replicates:
            k = groups["kept"]
            corrected.append(np.sum(e[k] - selection_bias(ll, est, replicates)[k]))
            boot = f"; kept corrected by the bootstrap {corrected[-1]:+.2f}"
        print(f"seed {seed}: all {e.sum():+.2f}; " + "; ".join(
            f"{g} {int(m.sum())} rows {e[m].sum():+.2f}" for g, m in groups.items()) + boot,
            flush=True)
    if corrected:
        sums["kept corrected by the bootstrap"] = corrected
    print(f"{bench.name} full mixture, mean over {len(seeds)} seeds: " + "; ".join(
        f"{g} {mean_se(v)}" for g, v in sums.items()), flush=True)


def focus_kept(bench, t, seeds, alone: bool = False, draws="1000"):
    full_ll = mixture_fit(bench, 1)[0].log_lik()
    full = mixis_loo(full_ll)
    groups = sort_rows(full)
    rows = np.flatnonzero(groups["kept"] | (False if alone else groups["hard"]))
    hard = groups["hard"][rows]
    if draws == "auto":  # the package's prediction, without its FOCUS_CUT
        draws = focus_draws(full_ll, rows, full.ess_mcse, 10**9, MCSE_BAR)
    draws = int(draws)
    print(f"{bench.name}: one fit focused on the {int(hard.sum())} hard and "
          f"{int((~hard).sum())} kept rows of the cached seed-1 full mixture, "
          f"4 x {draws}", flush=True)
    out = {g: ([], [], []) for g in (("kept",) if alone else ("hard", "kept"))}
    unit = posterior_leapfrog(bench.draws)
    costs = []
    for seed in seeds:
        fit = bench.program.fit_mixture(bench.draws, rows=rows, seed=200 + seed,
                                        draws=draws)
        est = mixis_loo(fit.log_lik()[..., rows])
        e = est.elpd_i - t[rows, 1]
        z = calibration_z(est.elpd_i, est.mcse_elpd_i, t[rows, 1], t[rows, 2])
        miss = ~(est.mcse_elpd_i <= MCSE_BAR)
        cells = []
        costs.append(mixture_steps(fit) / unit)
        for g, m in (("hard", hard), ("kept", ~hard))[int(alone):]:
            out[g][0].append(e[m].sum())
            out[g][1].append(np.mean(z[m] ** 2))
            out[g][2].append(int(miss[m].sum()))
            cells.append(f"{g} {e[m].sum():+.2f} (rms z {np.sqrt(np.mean(z[m] ** 2)):.2f}, "
                         f"{int(miss[m].sum())} above the bar)")
        print(f"seed {seed}: " + "; ".join(cells) + f"; {costs[-1]:.2f} posterior fits of "
              "leapfrog steps", flush=True)
    what = ("kept rows alone" if alone else "hard + kept rows") + f", 4 x {draws}"
    print(f"{bench.name} focus on {what}, mean over {len(seeds)} seeds: " + "; ".join(
        f"{g} {mean_se(v[0])}, rms z {np.sqrt(np.mean(v[1])):.2f}, "
        f"{np.mean(v[2]):.1f} above the bar" for g, v in out.items())
        + f"; {np.median(costs):.2f} posterior fits of leapfrog steps (median)", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("benchmark")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6, 7, 8])
    ap.add_argument("--bootstrap", type=int, default=0, metavar="B")
    ap.add_argument("--focus-kept", nargs="?", const="with-hard", choices=("with-hard", "alone"))
    ap.add_argument("--draws", default="1000",
                    help="the focused fit's draws per chain, or 'auto': focus_draws's "
                         "prediction from the cached full mixture (no FOCUS_CUT)")
    ap.add_argument("--focus-only", action="store_true",
                    help="with --focus-kept: skip the fresh full-mixture fits")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    bench, t = with_full_truth(args.benchmark)
    if not (args.focus_kept and args.focus_only):
        full_groups(bench, t, args.seeds, args.bootstrap)
    if args.focus_kept:
        focus_kept(bench, t, args.seeds[:6], alone=args.focus_kept == "alone",
                   draws=args.draws)


if __name__ == "__main__":
    main()
