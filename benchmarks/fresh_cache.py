"""A fresh numba cache for one benchmark run.

numba checks a cached compiled function against its own source file only: after an edit
to a function it calls from another file (say `core.ess._column_ess`, which the PSIS
kernel in `core._psis_kernel` calls), the caller's cached machine code still holds the old
callee.  A timing taken on such a cache measures code that is no longer in the tree (the
4 x 1000 x 10000 one-core ``loo`` took 0.67 s on a cache left by an edit that skipped the
R-hat check, 0.92 s freshly compiled).  The speed benchmarks therefore compile into a new
temporary folder, shared by the worker processes they start, unless ``NUMBA_CACHE_DIR`` is
already set, and warm up on `past_numpy_cells` of their input: below
``core._compiled.NUMPY_MAX_CELLS`` an uncompiled kernel's numpy twin runs instead, so a
smaller warm-up leaves the compilation to the measured call.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

import numpy as np


def fresh_numba_cache() -> str:
    """Point ``NUMBA_CACHE_DIR`` (this process and the ones it starts) at a new temporary
    folder, removed at exit, unless it is set already; returns the folder.  Call before
    numba is imported."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return os.environ["NUMBA_CACHE_DIR"]
    if "numba" in sys.modules:
        raise RuntimeError("fresh_numba_cache() must run before numba is imported")
    folder = tempfile.mkdtemp(prefix="loo_adapt_numba_")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    os.environ["NUMBA_CACHE_DIR"] = folder
    return folder


def past_numpy_cells(a) -> np.ndarray:
    """A copy of the first columns of ``a`` (..., n): as many as make the draws x columns
    exceed ``NUMPY_MAX_CELLS`` (all of them if fewer), so that loo_adapt runs, and compiles,
    its numba kernels on it rather than their numpy twins."""
    from loo_adapt.core._compiled import NUMPY_MAX_CELLS

    draws = int(np.prod(a.shape[:-1]))
    return np.array(a[..., :min(a.shape[-1], NUMPY_MAX_CELLS // draws + 1)])
