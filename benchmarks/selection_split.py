"""Do the full mixture's chains share a miss, or does sorting rows by their own draws make
the lean?

The default sorts the full mixture's rows by its own MixIS estimates: rows above the MCSE
bar go to a focused fit, rows with a large Kish ESS to the easy-row focus, the rest keep
the full mixture's estimates.  On the wide horseshoes the rows it found easy erred
optimistic together and the rows above the bar pessimistic
(`benchmarks/results/shared_offset.txt`).  Two things give that pattern:

- the chains share a miss (they over-stay some leave-one-out components): independent chains
  of the same fit would err the same way on the same rows;
- selection: a row whose draws missed its leave-one-out tail errs optimistic and looks easy
  (small MCSE, large Kish ESS); one whose draws caught it errs pessimistic and looks hard.
  Independent draws of the same fit, scored on the rows so sorted, would not lean.

This splits each cached full mixture fit into two halves of its chains (A: the first half,
B: the rest), sorts the rows by one half's MixIS with the default's rules (MCSE above 0.1:
"hard"; else Kish ESS above `EASY_FOCUS_KISH` scaled to the half's draws: "easy"; else
"kept"), and scores each group's summed error against the brute-force truth with the same
half's estimates and with the other half's.  Selection shows as a lean in the first and
none in the second; a shared miss as the same lean in both.

    LOO_ADAPT_COLON_CSV=.../colon.csv python benchmarks/selection_split.py NAME [NAME ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from truth_suite import default_sort, load_benchmark, mixis_alone, mixture_fit  # noqa: E402

from loo_adapt.estimators.focused_easy import EASY_FOCUS_KISH  # noqa: E402
from loo_adapt.io.arrays import read_dict  # noqa: E402

GROUPS = ("hard", "kept", "easy")


def half_mixis(draws, log_lik, chains, idx):
    """MixIS of the posterior ``draws`` with the mixture draws of ``chains`` only: (elpd,
    MCSE, Kish ESS) at the truth's rows ``idx``."""
    r = mixis_alone(draws, read_dict({"log_lik": log_lik[chains]}, method="mcmc"))
    return r.elpd_i[idx], r.mcse_elpd_i[idx], r.diagnostic[idx]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("benchmarks", nargs="+")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    args = ap.parse_args(argv)
    for name in args.benchmarks:
        sums = {(g, how): [] for g in GROUPS for how in ("same", "other")}
        bench = load_benchmark(name)
        truth = np.asarray(bench.truth)
        idx, t, tmc = truth[:, 0].astype(int), truth[:, 1], truth[:, 2]
        for seed in args.seeds:
            mix = mixture_fit(bench, seed)[0]
            ll = mix.log_lik()
            half = ll.shape[0] // 2
            parts = {"A": list(range(half)), "B": list(range(half, ll.shape[0]))}
            est = {k: half_mixis(bench.draws, ll, ch, idx) for k, ch in parts.items()}
            for sel, other in (("A", "B"), ("B", "A")):
                e, m, kish = est[sel]
                cut = EASY_FOCUS_KISH * len(parts[sel]) / ll.shape[0]
                groups = default_sort(m, kish, cut)
                cells = []
                for g in GROUPS:
                    k = groups[g]
                    mo = est[other][1]
                    same, oth = np.sum(e[k] - t[k]), np.sum(est[other][0][k] - t[k])
                    mc = float(np.sqrt(np.sum(mo[k] ** 2 + tmc[k] ** 2)))
                    sums[(g, "same")].append(same)
                    sums[(g, "other")].append(oth)
                    cells.append(f"{g} {int(k.sum()):3d} rows {same:+.2f} / {oth:+.2f} "
                                 f"(MC {mc:.2f})")
                print(f"{name} seed {seed}, sorted by {sel}, scored by {sel} / by {other}: "
                      + "; ".join(cells))
        print(f"{name}: mean summed error over the seeds and halves, scored by the sorting "
              "half / by the other half:")
        for g in GROUPS:
            same, oth = np.asarray(sums[(g, "same")]), np.asarray(sums[(g, "other")])
            print(f"  {g}: {same.mean():+.2f} (positive in {int(np.sum(same > 0))} of "
                  f"{same.size}) / {oth.mean():+.2f} (positive in {int(np.sum(oth > 0))} of "
                  f"{oth.size})")


if __name__ == "__main__":
    main()
