"""Do the rows the full mixture verifies with a small Kish ESS err less with a longer
mixture fit?  MixIS alone (no focused fits, no refits) from the full mixture fit at 4 x
1000 draws (the default) and at 4 x 4000 (same seed), on the rows the 1000-draw fit holds
with 100 <= Kish ESS <= 400 and MCSE <= 0.1 (the "middle" rows of `error_by_fit.py
--rows mixture`), scored against brute-force truth.

    LOO_ADAPT_COLON_CSV=.../colon.csv python benchmarks/middle_rows_draws.py rhs_wide_099
        [--seeds 1 2 3]

Mixture fits are cached under `benchmarks/cache/` (`truth_suite.mixture_fit`).  Per seed
and draw count: the middle rows' summed error, mean z (a shift), rms z (a spread) and mean
MCSE, and the summed error of all rows.  A shift in nats that falls like the MCSE (mean z
unchanged) is a skewed sampling distribution; one that falls faster, an O(1 / draws) bias.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth_suite import calibration_z, load_benchmark, mixture_fit  # noqa: E402

from loo_adapt import loo  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmark")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    args = parser.parse_args(argv)
    bench = load_benchmark(args.benchmark)
    truth = np.asarray(bench.truth)
    idx = truth[:, 0].astype(int)
    for seed in args.seeds:
        out = {}
        for draws in (None, 4000):
            mix, _ = mixture_fit(bench, seed, draws)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out[draws or 1000] = loo(bench.draws, program=bench.program, mixis_draws=mix,
                                         estimator="mixis", mixis_focus=False,
                                         mixis_focus_easy=False, seed=seed,
                                         progress=False).loo_adapt
        first = out[1000]
        kish = np.asarray(first.diagnostic, dtype=float)[idx]
        mid = (kish >= 100) & (kish <= 400) & (first.mcse_elpd_i[idx] <= 0.1)
        for draws, res in out.items():
            err = res.elpd_i[idx] - truth[:, 1]
            mcse = res.mcse_elpd_i[idx]
            z = calibration_z(res.elpd_i[idx], mcse, truth[:, 1], truth[:, 2])
            print(f"{args.benchmark} seed {seed}, mixture 4 x {draws}: {mid.sum()} middle rows "
                  f"(by the 4 x 1000 fit): error {err[mid].sum():+.2f}, mean z "
                  f"{z[mid].mean():+.2f}, rms z {np.sqrt(np.mean(z[mid] ** 2)):.2f}, mean MCSE "
                  f"{mcse[mid].mean():.3f}; all rows: error {err.sum():+.2f}", flush=True)


if __name__ == "__main__":
    main()
