"""Where the default's total error sits: the summed error of its rows, grouped by the fit
each row's estimate is held from (the full mixture, the easy-row focus, each focus on the
rows above the bar).  A shared sign within one group points at the stage that carries it.

    LOO_ADAPT_COLON_CSV=.../colon.csv python benchmarks/error_by_fit.py rhs_wide
        [--truth-from rhs_wide_099] [--seeds 1 2 3] [--easy-budget 1e9] [--easy-kish 200]
        [--rows mixture] [--dump rows.npz] [--no-shift]

``--rows G`` also prints the rows of each group whose name starts with G, by the Kish ESS
of the fit they are held from (the PointwiseLoo diagnostic), with each group's mean z
(error over its combined MC error: a shift) and rms z (a spread); scored against the
``--truth-from`` truth (its own MC errors) when one is given.

The runs are `benchmarks/truth.py`'s "default, with program" (cached mixture fits, refits
checkpointed); ``--truth-from`` also scores against a remake's truth of the same data.
``--dump PATH`` writes each seed's per-row estimates (``elpd_<seed>``, ``mcse_<seed>``,
``group_<seed>``, and ``i``, the truth's row indices) to an ``.npz``, for scoring against
another truth later (`benchmarks/truth_stability.py --estimates`).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import truth as truth_run  # noqa: E402
from truth_suite import calibration_z, fit_group, load_benchmark, mixture_fit  # noqa: E402

from loo_adapt.estimators import focused_easy  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmark")
    parser.add_argument("--truth-from", default=None)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--easy-budget", type=float, default=None,
                        help="the easy-row focus's leapfrog budget in posterior fits "
                             "(focused_easy.EASY_FOCUS_BUDGET; a large value: 4 x 4000 draws)")
    parser.add_argument("--easy-kish", type=float, default=None,
                        help="the easy-row focus's Kish ESS floor (focused_easy.EASY_FOCUS_KISH)")
    parser.add_argument("--rows", default=None,
                        help="print the rows of the groups whose name starts with this")
    parser.add_argument("--dump", default=None, help="write the per-row estimates to this .npz")
    parser.add_argument("--no-shift", action="store_true",
                        help="leave the full mixture's kept rows where it put them "
                             "(FocusedEasyMixIS.shift_kept_rows off)")
    args = parser.parse_args(argv)
    if args.easy_budget is not None:
        focused_easy.EASY_FOCUS_BUDGET = args.easy_budget
    if args.easy_kish is not None:
        focused_easy.EASY_FOCUS_KISH = args.easy_kish
    if args.no_shift:
        focused_easy.FocusedEasyMixIS.shift_kept_rows = lambda self, ctx, est: None
    bench = load_benchmark(args.benchmark)
    truth = np.asarray(bench.truth)
    idx = truth[:, 0].astype(int)
    alt = alt_full = None
    if args.truth_from:
        alt_full = np.asarray(truth_run._other_truth(args.benchmark, args.truth_from, truth))
        alt = alt_full[:, 1]
    dump = {"i": idx}
    for seed in args.seeds:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res, _ = truth_run._with_program(bench, seed, mixture_fit(bench, seed), 5)
        err = res.elpd_i[idx] - truth[:, 1]
        groups = np.array([fit_group(res.row_draws[i], res.method[i]) for i in idx])
        dump.update({f"elpd_{seed}": res.elpd_i[idx], f"mcse_{seed}": res.mcse_elpd_i[idx],
                     f"group_{seed}": groups})
        parts = []
        for g in sorted(set(groups)):
            k = groups == g
            mc = float(np.sqrt(np.sum(res.mcse_elpd_i[idx][k] ** 2 + truth[k, 2] ** 2)))
            against = "" if alt is None else f", {res.elpd_i[idx][k].sum() - alt[k].sum():+.2f}"
            parts.append(f"{g}: {k.sum()} rows, {err[k].sum():+.2f} (MC {mc:.2f}{against})")
        total = f"{err.sum():+.2f}" + ("" if alt is None
                                      else f" ({res.elpd_i[idx].sum() - alt.sum():+.2f})")
        scored = truth if alt_full is None else alt_full
        z = calibration_z(res.elpd_i[idx], res.mcse_elpd_i[idx], scored[:, 1], scored[:, 2])
        print(f"{args.benchmark} seed {seed}: total error {total} (MC "
              f"{truth_run._mc_total(res, scored, idx):.2f}); rms z "
              f"{np.sqrt(np.mean(z ** 2)):.2f}, |z| > 2: {np.sum(z > 2)} optimistic, "
              f"{np.sum(z < -2)} pessimistic; {sum(res.stage_seconds.values()):.0f} s; "
              + "; ".join(parts), flush=True)
        if args.rows:
            _print_rows(res, idx, res.elpd_i[idx] - scored[:, 1], scored, groups, args.rows)
    if args.dump:
        np.savez(args.dump, **dump)
    print("(MC: the group's pointwise MCSEs and truth MC errors in quadrature, which leaves out "
          "the correlation of rows that share a fit"
          + ("" if alt is None else f"; the second figure: against the truth of "
             f"{args.truth_from}") + ")")


def _print_rows(res, idx, err, truth, groups, prefix):
    """The rows of the groups named ``prefix...``, by Kish ESS, and each group's mean and
    rms z."""
    kish = (np.full(idx.size, np.nan) if res.diagnostic is None
            else np.asarray(res.diagnostic, dtype=float)[idx])
    mcse = res.mcse_elpd_i[idx]
    z = calibration_z(res.elpd_i[idx], mcse, truth[:, 1], truth[:, 2])
    for g in sorted(g for g in set(groups) if g.startswith(prefix)):
        k = np.flatnonzero(groups == g)
        print(f"  {g}: mean z {z[k].mean():+.2f}, rms z {np.sqrt(np.mean(z[k] ** 2)):.2f}, "
              f"{np.sum(np.abs(z[k]) > 3)} rows |z| > 3")
        for j in k[np.argsort(kish[k])]:
            print(f"    row {idx[j]:4d}  Kish {kish[j]:7.1f}  error {err[j]:+.3f}  MCSE "
                  f"{mcse[j]:.3f}  truth MC {truth[j, 2]:.3f}  z {z[j]:+.2f}  PSIS k-hat "
                  f"{res.pareto_k[idx[j]]:.2f}")


if __name__ == "__main__":
    main()
