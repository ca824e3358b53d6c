"""The full mixture with its components weighted, against the unweighted one: does giving
each row's leave-one-out posterior a share of the draws that does not fall with its elpd
remove the optimistic lean of the rows the mixture samples least?

The mixture q(theta) proportional to p(theta | D) sum_j c_j / l_j(theta) gives row j's
component a mass of c_j exp(-elpd_j).  With c_j = 1 (the package's mixture) the rows whose
leave-one-out posterior is near the posterior (elpd_j near 0) get the smallest shares;
c_j = exp(a * elpd_j), from each row's PSIS elpd, evens the shares out (a = 1: about equal).
MixIS with weights is MixIS of the log-likelihood minus log c_j, plus log c_j (the weights
(1 / l_i) / sum_j c_j / l_j are unchanged by it), so the package's `mixis_loo` estimates both.

Each fit: the benchmark's flagged program with its model line reading
``log_sum_exp(mixis_log_c - log_lik_local)``, warm-started like the package's, the same seed;
nothing in the package changes (``--warmup``: the warm-started fit's warm-up, the package's
100 by default).  Printed per benchmark, seed and weighting: seconds, rows at
MCSE <= 0.1, and per Kish-ESS group (<= 100, 100-400, > 400) the rows' mean and rms z against
the brute-force truth and their summed error.

    LOO_ADAPT_COLON_CSV=.../colon.csv python benchmarks/weighted_mixture.py
        [--benchmarks rhs_wide_099 logistic_normal] [--seeds 1 2 3] [--powers 0 0.5 1]
        [--warmup 100 500]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth_suite import calibration_z, load_benchmark  # noqa: E402

from loo_adapt.core.mixis import mixis_loo  # noqa: E402
from loo_adapt.core.psis_loo import loo_pointwise  # noqa: E402
from loo_adapt.stan.mixture_fit import fit_mixture  # noqa: E402

_OLD = "if (mixis_n_rows == 0) target += log_sum_exp(-log_lik_local);"
_NEW = "if (mixis_n_rows == 0) target += log_sum_exp(mixis_log_c - log_lik_local);"


def weighted_program(program, folder: Path, log_c: np.ndarray):
    """The program's flagged variant with the weighted mixture line and ``log_c`` as data."""
    flagged = program.with_mixis()
    text = flagged.stan_file.read_text()
    if _OLD not in text:
        raise SystemExit("the flagged program has no mixture line this script knows")
    decl = "array[mixis_n_rows] int<lower=1> mixis_rows;"
    text = text.replace(decl, decl + "\n  int<lower=0> mixis_n_c;\n"
                        "  vector[mixis_n_c] mixis_log_c;")
    text = text.replace(_OLD, _NEW)
    path = folder / f"{program.name}_weighted.stan"
    path.write_text(text)
    data = dict(flagged.data)
    data.update(mixis_n_c=int(log_c.size), mixis_log_c=[float(v) for v in log_c])
    return type(flagged)(path, data, backend=flagged.backend, fit_kwargs=flagged.fit_kwargs,
                         obs_dim_vars=flagged.obs_dim_vars, log_lik=flagged.log_lik_name,
                         n_obs_var=flagged.n_obs_var)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", nargs="+", default=["rhs_wide_099"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--powers", type=float, nargs="+", default=[0.0, 0.5, 1.0],
                        help="a in c_j = exp(a * PSIS elpd_j); 0: the package's mixture")
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--warmup", type=int, nargs="+", default=[None],
                        help="warm-up iterations of the warm-started fit (default: the "
                             "package's 100); several: one fit per value")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="weighted_mixture_"))
    for name in args.benchmarks:
        bench = load_benchmark(name)
        truth = np.asarray(bench.truth)
        idx = truth[:, 0].astype(int)
        ll_post = np.asarray(bench.draws.log_lik())
        psis = loo_pointwise(ll_post.reshape(-1, ll_post.shape[-1]), r_eff=1.0)
        elpd_psis = np.asarray(psis.elpd_i, dtype=float)
        print(f"== {name}: n = {elpd_psis.size}; PSIS elpd_i from {elpd_psis.min():.2f} to "
              f"{elpd_psis.max():.2f}", flush=True)
        for seed in args.seeds:
            for a, warm in [(a, w) for w in args.warmup for a in args.powers]:
                log_c = a * elpd_psis
                log_c -= log_c.max()
                prog = weighted_program(bench.program, folder, log_c)
                t0 = time.perf_counter()
                mix = fit_mixture(prog, bench.draws if bench.draws.method == "mcmc" else None,
                                  seed=seed, draws=args.draws, warmup=warm)
                sec = time.perf_counter() - t0
                ll = np.asarray(mix.log_lik())
                est = mixis_loo(ll - log_c)
                elpd = est.elpd_i + log_c
                mcse = est.mcse_elpd_i
                z = calibration_z(elpd[idx], mcse[idx], truth[:, 1], truth[:, 2])
                err = elpd[idx] - truth[:, 1]
                kish = est.ess[idx]
                ok = mcse[idx] <= 0.1
                parts = []
                for lo, hi in ((0, 100), (100, 400), (400, np.inf)):
                    g = ok & (kish > lo) & (kish <= hi)
                    if g.any():
                        parts.append(f"Kish {lo}-{hi:g}: {g.sum()} rows, mean z "
                                     f"{z[g].mean():+.2f}, rms z {np.sqrt(np.mean(z[g] ** 2)):.2f},"
                                     f" sum {err[g].sum():+.2f}")
                wu = "" if warm is None else f", warm-up {warm}"
                print(f"seed {seed}, a = {a:g}{wu}: {sec:.1f} s, {ok.sum()} of {ok.size} rows at "
                      f"MCSE <= 0.1 (rms z {np.sqrt(np.mean(z[ok] ** 2)):.2f}, mean z "
                      f"{z[ok].mean():+.2f}); " + "; ".join(parts), flush=True)


if __name__ == "__main__":
    main()
