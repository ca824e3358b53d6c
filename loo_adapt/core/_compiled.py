"""Whether a numba kernel can run without compiling first (the cold-start decision)."""

from __future__ import annotations

import os

__all__ = ["NUMPY_MAX_CELLS", "compiled", "use_numba"]

#: Up to this many draws x observations, a process whose kernel is neither compiled nor in
#: numba's cache runs the numpy version instead (PSIS, ESS): numpy needs less time for them
#: than numba needs to compile (benchmarks/bench_cold.py).  The budget is per process and
#: per kernel: once the numpy runs of a kernel add up to more, compiling it pays (many small
#: calls, as adaptive IS makes, then get the numba kernel too).
NUMPY_MAX_CELLS = 8_000_000

#: kernel name -> draws x observations its numpy twin has run in this process
_numpy_cells: dict[str, int] = {}


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


def use_numba(dispatcher, cells: int, record: bool = True) -> bool:
    """Whether a call of ``cells`` draws x observations should run the numba ``dispatcher``
    (True) or its numpy twin (False).

    numba when it costs no compilation (`compiled`), when the call is larger than
    `NUMPY_MAX_CELLS`, or when this call plus the numpy runs of the same kernel earlier in
    this process exceed it (the compilation then pays for itself).  Both engines give the
    same numbers, so the choice only changes speed.

    Parameters
    ----------
    dispatcher : a numba dispatcher (``@njit`` function).
    cells : size of this call (draws x observations).
    record : count a numpy answer's cells against the budget (False: only ask, for a
        caller whose fallback asks again for the same work).

    Returns
    -------
    bool

    Examples
    --------
    >>> from numba import njit
    >>> f = njit(lambda x: x)
    >>> use_numba(f, NUMPY_MAX_CELLS + 1)
    True
    """
    if cells > NUMPY_MAX_CELLS or compiled(dispatcher):
        return True
    key = getattr(dispatcher, "__qualname__", None) or repr(dispatcher)
    total = _numpy_cells.get(key, 0) + int(cells)
    if total > NUMPY_MAX_CELLS:
        return True
    if record:
        _numpy_cells[key] = total
    return False
