"""The oracle of `tests/stan/test_corpus_outlier.py`: log p(y_0 | y_-0) of the corpus program
``mvn_rows`` (multivariate normal rows, an LKJ Cholesky factor) on the test's data, whose row
0 is a far outlier (PSIS k-hat above 1), by thermodynamic integration.

The same model with a weight t on row 0's term (the test's ``WEIGHTED`` program) is fitted
on a grid t = u^4, u = 0, 1/K, ..., 1 (denser where the integrand moves fast, near t = 0);
log p(y_0 | y_-0) = int_0^1 E_t[log p(y_0 | theta)] dt, by Simpson's rule in u
(dt = 4 u^3 du), with the trapezoid rule in t beside it as a check of the grid, and the
Monte Carlo SE from each fit's ESS of the mean (Stan's, split chains).

    python benchmarks/mvn_outlier_ti.py [--grid 28] [--draws 4000] [--seed 7]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy.integrate import simpson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "stan"))
from test_corpus_outlier import WEIGHTED, outlier_data  # noqa: E402

from loo_adapt.core.ess_split import ess_mean  # noqa: E402


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", type=int, default=28)
    ap.add_argument("--draws", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    import stanli

    data = outlier_data()
    import tempfile

    path = Path(tempfile.mkdtemp()) / "mvn_rows_weighted.stan"
    path.write_text(WEIGHTED)
    u = np.arange(args.grid + 1) / args.grid
    t = u**4
    mean, se = [], []
    for tk in t:
        w = np.ones(data["N"])
        w[0] = tk
        model = stanli.Model(stan_file=str(path), seed=args.seed,
                             data={**{k: np.asarray(v).tolist() for k, v in data.items()},
                                   "w": w.tolist()})
        fit = model.sample(chains=4, warmup=1000, samples=args.draws, seed=args.seed,
                           refresh=0)
        ll = np.asarray(fit["ll0"], dtype=float).reshape(4, args.draws)
        mean.append(ll.mean())
        se.append(ll.std(ddof=1) / np.sqrt(ess_mean(ll)))
        print(f"t {tk:.6f}  E_t[log p(y_0 | theta)] {mean[-1]:9.4f} +- {se[-1]:.4f}",
              flush=True)
    mean, se = np.array(mean), np.array(se)
    g = 4 * u**3
    value = simpson(mean * g, x=u)
    # Simpson's weights, from its value on unit vectors (a linear rule)
    weights = np.array([simpson(np.eye(len(u))[k] * g, x=u) for k in range(len(u))])
    mc = float(np.sqrt(np.sum((weights * se) ** 2)))
    trap = np.trapezoid(mean, t)
    print(f"log p(y_0 | y_-0) = {value:.4f} +- {mc:.4f} (Simpson in u); trapezoid in t "
          f"{trap:.4f}")


if __name__ == "__main__":
    main()
