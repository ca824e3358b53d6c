"""Running R loo on arrays, for the scripts that write R's own reference values
(``ess_reference/make_r_reference.py``, ``psis_reference/make_r_reference.py``).

Needs ``Rscript`` with the loo package (Debian's ``r-cran-loo`` gives loo 2.5.1)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

#: what every script starts with: the raw array as R's iterations x chains x n ``arr``,
#: loo loaded, and ``header``, the comment line naming loo's and R's versions
R_READ = r"""
args <- commandArgs(trailingOnly = TRUE)
dims <- as.integer(args[2:4])             # chains, draws, n (C order)
x <- readBin(args[1], "double", n = prod(dims))
dim(x) <- rev(dims)                        # R reads C order as (n, draws, chains)
arr <- aperm(x, c(2, 3, 1))                # iterations x chains x n, as loo wants
suppressMessages(library(loo))
header <- paste0("# loo ", as.character(packageVersion("loo")), ", ", R.version.string)
out <- args[length(args)]
"""


def load_module(path: Path, name: str):
    """The module at ``path`` under its own ``name`` (two folders have a make_reference.py)."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def run_r(body: str, values: np.ndarray, *args, out: Path) -> None:
    """Run `R_READ` + ``body`` on ``values`` (chains, draws, n), written as raw float64 in
    C order: ``Rscript SCRIPT RAW chains draws n ARGS... OUT`` (``args[5]`` on is ARGS;
    ``out`` names OUT)."""
    with tempfile.TemporaryDirectory() as tmp:
        raw, script = Path(tmp) / "values.f64", Path(tmp) / "script.R"
        np.ascontiguousarray(values, dtype="<f8").tofile(raw)
        script.write_text(R_READ + body)
        subprocess.run(["Rscript", str(script), str(raw), *map(str, values.shape),
                        *map(str, args), str(out)], check=True)
