"""Do the focused mixture fits forget where their chains start?

The default warm-starts each mixture fit at posterior draws picked at random (uniformly).  A
focused fit's target, p(theta | D) sum_{i in R} 1 / l_i(theta) over the rows R above the
bar, sits away from the posterior, so a start drawn from (an approximation to) the target
itself would be the textbook choice: resample the posterior draws in proportion to
sum_{i in R} 1 / l_i(theta_s), the target-to-posterior density ratio.  If 100 warm-up
iterations and 1000 draws per chain were enough for the chains to forget their starts, the
rows' estimates would not depend on the choice.  Per seed, one focused fit (4 x 1000) over
the rows above the bar in the cached seed-1 full mixture fit, with the starts

* ``posterior``: uniform over the posterior draws (the default);
* ``sir``: resampled with replacement in proportion to the density ratio;
* ``psis``: resampled without replacement in proportion to its Pareto-smoothed version;

and the summed error of MixIS on those rows against the brute-force truth (all rows, and
the rows whose MCSE passes the 0.1 bar).  ``--full``: the full mixture fit over every row
instead (the ratio summed over every row).

    LOO_ADAPT_COLON_CSV=.../colon.csv python benchmarks/mixture_starts.py NAME
        [--seeds 1 2 3 4 5 6] [--starts posterior sir psis] [--full]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth_suite import MCSE_BAR, default_sort, mixture_fit, with_full_truth  # noqa: E402

import loo_adapt.stan.mixture_fit as mf  # noqa: E402
from loo_adapt.core.lse import logsumexp  # noqa: E402
from loo_adapt.core.mixis import mixis_loo  # noqa: E402
from loo_adapt.core.psis import psislw  # noqa: E402

STARTS = ("posterior", "sir", "psis")
PLAIN = mf.warm_start  # the package's own, patched over (and back) by `main`


def resampled_start(start: str, rows):
    """A `warm_start` whose chains start at posterior draws resampled toward the focused
    mixture over ``rows`` (``start`` "sir" or "psis"; "posterior": the package's own)."""
    def warm_start(program, posterior, *, chains, seed=1):
        opts = PLAIN(program, posterior, chains=chains, seed=seed)
        if start == "posterior":
            return opts
        U = program.log_density().unconstrain(posterior)
        lw = logsumexp(-posterior.log_lik().reshape(U.shape[0], -1)[:, rows], axis=1)
        if start == "psis":
            lw = np.asarray(psislw(lw[:, None])[0])[:, 0]
        w = np.exp(lw - lw.max())
        pick = np.random.default_rng(seed).choice(U.shape[0], size=chains,
                                                  replace=start == "sir", p=w / w.sum())
        flat = {name: posterior.flat(name) for name, _, _ in program.log_density()._block}
        return {**opts, "inits": U[pick], "inits_constrained": [
            {name: v[s].tolist() if np.ndim(v[s]) else float(v[s]) for name, v in flat.items()}
            for s in pick]}

    return warm_start


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("benchmark")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6])
    ap.add_argument("--starts", nargs="+", choices=STARTS, default=list(STARTS))
    ap.add_argument("--full", action="store_true", help="the full mixture, every row")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    bench, t = with_full_truth(args.benchmark)
    if args.full:
        rows = np.arange(t.shape[0])
        print(f"{args.benchmark}: full mixture fits, all {rows.size} rows", flush=True)
    else:
        full = mixis_loo(mixture_fit(bench, 1)[0].log_lik())
        rows = np.flatnonzero(default_sort(full.mcse_elpd_i, full.ess)["hard"])
        print(f"{args.benchmark}: {rows.size} rows above the bar in the cached seed-1 full "
              "mixture fit", flush=True)
    res = {}
    try:
        for seed in args.seeds:
            for start in args.starts:
                mf.warm_start = resampled_start(start, rows)
                fit = bench.program.fit_mixture(bench.draws, rows=None if args.full else rows,
                                                seed=200 + seed)
                r = mixis_loo(fit.log_lik()[..., rows])
                e = r.elpd_i - t[rows, 1]
                ok = r.mcse_elpd_i <= MCSE_BAR
                res.setdefault(start, []).append((e.sum(), e[ok].sum()))
                print(f"seed {seed} {start}: all {e.sum():+.2f} (MCSE "
                      f"{np.sqrt(np.sum(r.mcse_elpd_i ** 2)):.2f}); {int(ok.sum())} rows "
                      f"passing {e[ok].sum():+.2f}, failing {e[~ok].sum():+.2f}", flush=True)
    finally:
        mf.warm_start = PLAIN
    for start, v in res.items():
        a = np.asarray(v)
        se = a[:, 0].std(ddof=1) / np.sqrt(len(a)) if len(a) > 1 else float("nan")
        print(f"{args.benchmark} {start}: all rows {a[:, 0].mean():+.3f} (se {se:.3f}); "
              f"passing rows {a[:, 1].mean():+.3f}", flush=True)


if __name__ == "__main__":
    main()
