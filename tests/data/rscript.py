"""Running R loo on arrays, for the scripts that write R's own reference values
(``ess_reference/make_r_reference.py``, ``psis_reference/make_r_reference.py``).

Needs ``Rscript`` with the loo package (Debian's ``r-cran-loo`` gives loo 2.5.1)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np


def load_module(path: Path, name: str):
    """The module at ``path`` under its own ``name`` (two folders have a make_reference.py)."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def run_r(script: Path, tmp: Path, name: str, values: np.ndarray, *args, out: Path) -> None:
    """Write ``values`` (chains, draws, n) as raw float64 in C order and run ``script`` on
    it as ``Rscript script RAW chains draws n ARGS... OUT``."""
    raw = Path(tmp) / f"{name}.f64"
    np.ascontiguousarray(values, dtype="<f8").tofile(raw)
    subprocess.run(["Rscript", str(script), str(raw), *map(str, values.shape),
                    *map(str, args), str(out)], check=True)
