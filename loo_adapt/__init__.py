"""loo_adapt: leave-one-out cross-validation for Stan models when plain PSIS-LOO gives up.

Public verbs (in the style of R loo and ArviZ):

- `loo(data, ...)`: PSIS-LOO, with adaptive importance sampling for high k-hat observations
  when a `model=` is given; returns the installed arviz's `ELPDData`.
- `psis(log_ratios, r_eff)`: Pareto-smoothed log weights and k-hat (the `loo_adapt.psis`
  module is itself callable, so `loo_adapt.psis(...)` and `loo_adapt.psis.psislw` both work).
- `read_draws(obj)` / `read_csv(paths)`: draws from cmdstanpy, Stan CSV, ArviZ, stanli, arrays.
- `metrics`, `plots`, `models` sub-modules; `save_report(result, dir)`.

The array core (psis, models, transforms, adaptive, metrics) imports none of the edges
(readers, arviz, plots, cli); submodules load lazily so `import loo_adapt` stays cheap.
"""

from importlib import import_module

__version__ = "0.1.0"

_LAZY = {
    "loo": ("loo_adapt.api", "loo"),
    "read_draws": ("loo_adapt.readers", "read_draws"),
    "read_csv": ("loo_adapt.readers", "read_csv"),
    "Draws": ("loo_adapt.draws", "Draws"),
    "PointwiseLoo": ("loo_adapt.result", "PointwiseLoo"),
    "save_report": ("loo_adapt.report", "save_report"),
    "plot_khat": ("loo_adapt.plots", "plot_khat"),
    "StanProgram": ("loo_adapt.program", "StanProgram"),
    "refit_loo": ("loo_adapt.refit", "refit_loo"),
    "load_ovarian": ("loo_adapt.datasets", "load_ovarian"),
}

__all__ = sorted(_LAZY) + ["psis", "__version__"]


def __getattr__(name):
    if name == "psis":
        return import_module("loo_adapt.psis")
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'loo_adapt' has no attribute {name!r}")
