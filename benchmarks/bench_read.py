"""Reading speed: `read_draws(..., var_names="log_lik")` against
``cmdstanpy.from_csv(files).stan_variable("log_lik")`` on the same files, in the same run.

Cases: the fixture CSVs (tests/data/cmdstan, 4 x 250 draws, up to 153 columns), and a wide
file set written with `loo_adapt.io.write_stan_csv` (default 4 chains x 1000 draws x 2000
parameter columns + 200 log-likelihood columns). Also timed: reading every column, and
`read_draws(fit)` on the cmdstanpy fit object (its arrays are already parsed). Each time is
the best of --repeat runs; ratios < 1 mean we are faster.

    python benchmarks/bench_read.py [--chains 4 --draws 1000 --params 2000 --n 200 --repeat 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from loo_adapt.draws import Draws
from loo_adapt.io import read_draws, write_stan_csv

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "data" / "cmdstan"


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def compare(label: str, files: list[str], repeat: int) -> None:
    import cmdstanpy

    ref = cmdstanpy.from_csv(files).stan_variable("log_lik")
    ours = read_draws(files, var_names="log_lik").log_lik()
    assert np.array_equal(ref.reshape(-1, ref.shape[-1]), ours.reshape(-1, ours.shape[-1]))
    t_ref = best(lambda: cmdstanpy.from_csv(files).stan_variable("log_lik"), repeat)
    t_ll = best(lambda: read_draws(files, var_names="log_lik").log_lik(), repeat)
    t_all = best(lambda: read_draws(files).log_lik(), repeat)
    fit = cmdstanpy.from_csv(files)
    t_fit = best(lambda: read_draws(fit, var_names="log_lik").log_lik(), repeat)
    t_var = best(lambda: fit.stan_variable("log_lik"), repeat)
    print(f"{label}: cmdstanpy from_csv + stan_variable {t_ref:.3f} s")
    print(f"  read_draws(csv, var_names='log_lik')  {t_ll:.3f} s  ratio {t_ll / t_ref:.2f}")
    print(f"  read_draws(csv) (every column)        {t_all:.3f} s  ratio {t_all / t_ref:.2f}")
    print(f"  read_draws(fit, var_names='log_lik')  {t_fit:.4f} s  "
          f"(fit.stan_variable on the parsed fit {t_var:.4f} s)")


def wide_files(out: Path, chains: int, draws: int, params: int, n: int) -> list[str]:
    rng = np.random.default_rng(0)
    d = Draws(
        {"theta": rng.normal(size=(chains, draws, params)),
         "log_lik": -rng.exponential(size=(chains, draws, n))},
        method="mcmc",
        sample_stats={"lp__": rng.normal(size=(chains, draws))},
    )
    return [str(p) for p in write_stan_csv(d, out, "wide", model="wide", config={"warmup": 1000})]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--params", type=int, default=2000)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    for model in ("logistic_normal", "rhs_logistic", "relu1"):
        files = sorted(str(p) for p in (FIXTURES / model / "sample").glob("*.csv"))
        compare(f"fixture {model} (4 x 250)", files, args.repeat)
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        files = wide_files(Path(tmp), args.chains, args.draws, args.params, args.n)
        print(f"(wrote {args.chains} x {args.draws} x {args.params + args.n + 1} columns "
              f"in {time.perf_counter() - t:.1f} s)")
        compare(f"wide {args.chains} x {args.draws} x {args.params} + {args.n} log_lik",
                files, args.repeat)


if __name__ == "__main__":
    main()
