"""Calibration of the default with a program, row by row, split by the stage whose estimate
each verified row ends with (MixIS, the easy-row focus, the focus on rows above the bar,
refits), against the brute-force truth; with ``--no-depth-cap`` the easy-row focused fit
keeps the program's NUTS tree depth (`loo_adapt.estimators.focused.posterior_tree_depth`,
as `focused_easy` imports it).

    python benchmarks/stage_calibration.py --benchmark rhs_wide_099 --seed 2 [--no-depth-cap]

The call is `truth.py`'s "default, with program" (`truth._with_program`: the cached
mixture fit, the seed, 5 refits at most, its refit checkpoints).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth import _with_program  # noqa: E402
from truth_suite import calibration_z, load_benchmark, mixture_fit  # noqa: E402

import loo_adapt.estimators.focused as focused  # noqa: E402
import loo_adapt.estimators.focused_easy as focused_easy  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", default="rhs_wide_099")
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--no-depth-cap", dest="cap", action="store_false")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    if not args.cap:
        focused.posterior_tree_depth = lambda draws: None
        focused_easy.posterior_tree_depth = focused.posterior_tree_depth
    bench = load_benchmark(args.benchmark)
    res, _ = _with_program(bench, args.seed, mixture_fit(bench, args.seed), refit_budget=5)
    truth = bench.truth
    idx = truth[:, 0].astype(int)
    stage = np.full(res.n_obs, "", dtype=object)
    for rec in res.history:  # the last stage whose estimate of a row was merged holds it
        rows = np.asarray(rec["rows"], dtype=int)
        stage[rows[np.asarray(rec["accepted"], dtype=bool)]] = rec["estimator"]
    z = calibration_z(res.elpd_i[idx], res.mcse_elpd_i[idx], truth[:, 1], truth[:, 2])
    ver = np.asarray(res.reliable, dtype=bool)[idx]
    print(f"{args.benchmark} seed {args.seed}, easy-row tree depth "
          f"{'capped' if args.cap else 'of the program'}: {ver.sum()} verified rows, rms z "
          f"{np.sqrt(np.mean(z[ver] ** 2)):.2f}", flush=True)
    for name in sorted(set(stage[idx])):
        m = (stage[idx] == name) & ver
        if m.any():
            worst = np.argsort(-np.abs(z[m]))[:3]
            print(f"    {name}: {m.sum()} rows, rms z {np.sqrt(np.mean(z[m] ** 2)):.2f}, mean z "
                  f"{z[m].mean():+.2f}, |z| > 3: {int(np.sum(np.abs(z[m]) > 3))}; largest "
                  + ", ".join(f"row {idx[m][j]} z {z[m][j]:+.2f}" for j in worst), flush=True)


if __name__ == "__main__":
    main()
