"""Write R loo's own ``relative_eff`` values for the cases of make_reference.py.

Needs ``Rscript`` with the loo package (loo 2.5.1 here: Debian's ``r-cran-loo``; loo >= 2.8
computes r_eff through ``posterior::ess_basic`` and differs in the last digits).  Each case's
likelihood values ``exp(log_lik)`` are written as raw float64 in C order (chains, draws, n),
read by R into its iterations x chains x n layout, and passed to ``loo::relative_eff``;
R prints the values with 17 significant digits.

    python tests/data/ess_reference/make_r_reference.py

writes ``r_loo/<case>.csv`` (column ``r_eff``) and prints the largest relative difference
from the transcription's values in ``<case>.csv`` (make_reference.py), which the tests
read before R was installable here; they read R's now.
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
r <- relative_eff(arr, cores = 1)
writeLines(c(header, "r_eff", sprintf("%.17g", r)), out)
"""


def main() -> None:
    OUT.mkdir(exist_ok=True)
    cases = load_module(HERE / "make_reference.py", "ess_make_reference").cases()
    for name, ll in cases.items():
        run_r(R_BODY, np.exp(ll), out=OUT / f"{name}.csv")
        r = pd.read_csv(OUT / f"{name}.csv", comment="#")["r_eff"].to_numpy()
        tr = pd.read_csv(HERE / f"{name}.csv")["r_eff"].to_numpy()
        rel = np.max(np.abs(r - tr) / np.abs(r))
        print(f"{name:10s} {ll.shape}  max |R - transcription| / R = {rel:.1e}")


if __name__ == "__main__":
    main()
