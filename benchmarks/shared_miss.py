"""Do the full mixture's chains share the error of the rows MixIS verifies?  Per seed, MixIS
on all chains and on each chain alone, against brute-force truth: for the verified rows
(MCSE <= 0.1), the summed error, the share of rows with z > 2 where every chain alone errs
optimistic, and each row's error over its between-chain standard error (the chains' spread
of their own estimates / sqrt(chains)).  Chains whose errors were independent would give
that ratio an rms near sqrt(3) = 1.73 (a t with 3 degrees of freedom at 4 chains) and
about 0.65 of the z > 2 rows with every chain optimistic (selection alone; both by
simulation of iid normal chains: 0.655 and 1.71); an rms well
above it says the chains agree with one another more than with the truth: they miss the
same part of the target, which no multi-chain ESS or between-chain MCSE can see.

    LOO_ADAPT_COLON_CSV=.../colon.csv python benchmarks/shared_miss.py NAME [--truth-from OTHER]

MixIS alone on the cached full mixture fit (`truth_suite.mixture_fit`), as
`mixis_second_order_bias.py`.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth_suite import mixture_fit, mixture_study  # noqa: E402

from loo_adapt.core.mixis import mixis_loo  # noqa: E402


def main(argv=None):
    args, bench, truth = mixture_study(__doc__, argv)
    idx, t = truth[:, 0].astype(int), truth[:, 1]
    for seed in args.seeds:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mix, _ = mixture_fit(bench, seed)
        ll = mix.log_lik()
        chains = ll.shape[0]
        full = mixis_loo(ll)
        err = full.elpd_i[idx] - t
        ok = full.mcse_elpd_i[idx] <= 0.1
        z = err / full.mcse_elpd_i[idx]
        per = np.array([mixis_loo(ll[c:c + 1]).elpd_i[idx] for c in range(chains)]) - t
        high = ok & (z > 2)
        every = float(np.mean(np.all(per[:, high] > 0, axis=0))) if high.any() else np.nan
        ratio = err[ok] / (per[:, ok].std(axis=0, ddof=1) / np.sqrt(chains))
        print(f"{args.benchmark} seed {seed}: verified {int(ok.sum())}, summed error "
              f"{err[ok].sum():+.2f}, mean z {np.mean(z[ok]):+.2f}; rows with z > 2: "
              f"{int(high.sum())}, every chain optimistic in {every:.2f} of them; error / "
              f"between-chain SE: mean {np.mean(ratio):+.2f}, rms "
              f"{np.sqrt(np.mean(ratio ** 2)):.2f}")


if __name__ == "__main__":
    main()
