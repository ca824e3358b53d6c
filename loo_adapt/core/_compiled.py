"""Whether a numba kernel can run without compiling first (the cold-start decision)."""

from __future__ import annotations

import os

__all__ = ["NUMPY_MAX_CELLS", "compiled"]

#: Up to this many draws x observations, a process whose kernel is neither compiled nor in
#: numba's cache runs the numpy version instead (PSIS, ESS): numpy needs less time for them
#: than numba needs to compile (benchmarks/bench_cold.py).
NUMPY_MAX_CELLS = 8_000_000


def compiled(dispatcher) -> bool:
    """True if calling the numba ``dispatcher`` costs no compilation: compiled in this
    process, or present in numba's on-disk cache (looked up through numba's cache object;
    False if that internal layout changes, which only costs speed, never a result)."""
    if dispatcher.signatures:
        return True
    try:
        return os.path.exists(dispatcher._cache._cache_file._index_path)
    except (AttributeError, TypeError):
        return False
