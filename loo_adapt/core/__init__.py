"""Array core: numpy in, numpy out (PSIS, generalized Pareto fit, ESS, input checks).

Nothing here imports arviz, xarray, matplotlib, readers or Stan backends.
"""

import importlib as _importlib

_SUBMODULES = ("psis", "psis_loo", "gpd", "ess", "chunked")


def __getattr__(name):
    """Submodules on first use (``loo_adapt.core.psis`` without importing it first); nothing is
    compiled or imported at ``import loo_adapt.core``."""
    if name in _SUBMODULES:
        return _importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_SUBMODULES))
