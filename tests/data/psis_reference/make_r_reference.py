"""Write R loo's own PSIS-LOO values for the cases of make_reference.py.

Needs ``Rscript`` with the loo package (loo 2.5.1 here: Debian's ``r-cran-loo``).  Each
case's log-likelihood (chains, draws, n) is written as raw float64 in C order and read by R
into its iterations x chains x n layout; R then runs, with the case's scalar r_eff,

* ``psis(-ll, r_eff = r)`` on the draws x n matrix: ``pareto_k_values`` -> ``khat``;
* ``loo(ll, r_eff = r)`` on the array: ``pointwise[, "elpd_loo"]`` -> ``elpd_loo`` and
  ``pareto_k_values`` -> ``khat_loo``;

and prints every value with 17 significant digits.

    python tests/data/psis_reference/make_r_reference.py

writes ``r_loo/<case>.csv`` and prints the largest difference from the arviz 0.x values in
``<case>.csv`` (make_reference.py); the tests read R's.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from rscript import load_module, run_r  # noqa: E402

OUT = HERE / "r_loo"

R_BODY = r"""
r_eff <- rep(as.numeric(args[5]), dims[3])   # one value per observation, as loo wants
m <- matrix(arr, nrow = dims[1] * dims[2])   # draws x n (iterations fastest, as loo does)
ps <- suppressWarnings(psis(-m, r_eff = r_eff, cores = 1))
res <- suppressWarnings(loo(arr, r_eff = r_eff, cores = 1))
f <- function(v) sprintf("%.17g", v)
writeLines(c(header, "khat,elpd_loo,khat_loo",
             paste(f(pareto_k_values(ps)), f(res$pointwise[, "elpd_loo"]),
                   f(pareto_k_values(res)), sep = ",")), out)
"""


def main() -> None:
    OUT.mkdir(exist_ok=True)
    cases = load_module(HERE / "make_reference.py", "psis_make_reference").cases()
    for name, (ll, reff) in cases.items():
        run_r(R_BODY, ll, repr(reff), out=OUT / f"{name}.csv")
        r = pd.read_csv(OUT / f"{name}.csv", comment="#")
        az = pd.read_csv(HERE / f"{name}.csv")
        diff = {c: float(np.max(np.abs(r[c] - az[c]))) for c in r.columns}
        print(f"{name:18s} {ll.shape}  max |R - arviz 0.x|: "
              + ", ".join(f"{c} {d:.1e}" for c, d in diff.items()))


if __name__ == "__main__":
    main()
