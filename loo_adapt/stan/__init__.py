"""Stan at the edge: bundled programs, fitting backends (CmdStan > stanli > PyStan), the
log density in the unconstrained space, refits.

The public names of `backends` (``fit``, ``fit_method``, ``stan_data``, ``stan_model_path``,
``select_backend``, ...), `program.StanProgram` and `refit.refit_loo` are reachable here,
loaded on first use.
"""

from importlib import import_module

_MODULES = ("backends", "program", "refit", "log_density")
_NAMES = {"StanProgram": "program", "refit_loo": "refit", "StanLogDensity": "log_density"}


def __getattr__(name):
    if name in _MODULES:
        return import_module(f"{__name__}.{name}")
    module = _NAMES.get(name, "backends")
    mod = import_module(f"{__name__}.{module}")
    if name.startswith("_") or not hasattr(mod, name):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(mod, name)
