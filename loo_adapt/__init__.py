"""loo_adapt: leave-one-out cross-validation for Stan models when plain PSIS-LOO gives up.

Public verbs (in the style of R loo and ArviZ):

- `loo(data, ...)`: PSIS-LOO, with adaptive importance sampling, mixture importance
  sampling and exact refits where PSIS cannot be trusted; returns the installed arviz's
  `ELPDData`.
- `loo_subsample(log_lik_fn, draws, ...)`: PSIS-LOO for large n from a log-likelihood
  function on a subsample of observations (R loo's `loo_subsample`).
- `psis(log_ratios, r_eff)`: Pareto-smoothed log weights and k-hat (the
  `loo_adapt.core.psis` module is itself callable: `loo_adapt.psis(...)` works).
- `read_draws(obj)` / `read_csv(paths)`: draws from cmdstanpy, Stan CSV, ArviZ, stanli, arrays.
- `loo_pit(result, y, y_rep)`, `loo_expectations(result, values, kind=...)`: LOO-PIT and
  LOO expectations (R loo's ``E_loo``) with the weights of each row's estimator.
- `compare({name: result, ...})`: R loo's ``loo_compare`` / arviz's ``compare`` (elpd_diff,
  se_diff, p_worse, diagnostics, arviz's weights) and the part of each difference resting on
  rows nothing verified; `loo_score(result, y, y_rep)`: CRPS / SCRPS (R loo's ``loo_crps``,
  arviz's ``loo_score``) with each row's own draws and weights.
- `save_report(result, dir)`, `plot_khat(result)`.
- `pareto_k_table(result)`, `pareto_k_ids(result)`, `mcse_loo(result)`: R loo's diagnostics,
  for every row whatever estimator produced it.

Sub-packages, each loaded on first use: `core` (numpy in, numpy out), `estimators`,
`transforms`, `models`, `stan`, `io`, `evaluation` (`metrics`, `plots`, `report`, `arviz`),
`laplace`; `metrics`, `plots`, `report` and `readers` are also reachable directly.
The array core imports none of the edges (readers, arviz, plots, cli), and nothing is
compiled at import, so `import loo_adapt` stays cheap.
"""

from importlib import import_module

__version__ = "0.1.0"

#: public name -> (module, attribute)
_LAZY = {
    "loo": ("loo_adapt.api", "loo"),
    "loo_subsample": ("loo_adapt.subsample", "loo_subsample"),
    "read_draws": ("loo_adapt.io.readers", "read_draws"),
    "read_csv": ("loo_adapt.io.readers", "read_csv"),
    "Draws": ("loo_adapt.draws", "Draws"),
    "PointwiseLoo": ("loo_adapt.result", "PointwiseLoo"),
    "save_report": ("loo_adapt.evaluation.report", "save_report"),
    "plot_khat": ("loo_adapt.evaluation.plots", "plot_khat"),
    "loo_pit": ("loo_adapt.expectations", "loo_pit"),
    "loo_expectations": ("loo_adapt.expectations", "loo_expectations"),
    "StanProgram": ("loo_adapt.stan.program", "StanProgram"),
    "refit_loo": ("loo_adapt.stan.refit", "refit_loo"),
    "kfold": ("loo_adapt.kfold", "kfold"),
    "compare": ("loo_adapt.compare", "compare"),
    "loo_score": ("loo_adapt.score", "loo_score"),
    "load_ovarian": ("loo_adapt.datasets", "load_ovarian"),
    "pareto_k_table": ("loo_adapt.evaluation.diagnostics", "pareto_k_table"),
    "pareto_k_ids": ("loo_adapt.evaluation.diagnostics", "pareto_k_ids"),
    "mcse_loo": ("loo_adapt.evaluation.diagnostics", "mcse_loo"),
}

#: public sub-module name -> module path
_SUBMODULES = {
    "psis": "loo_adapt.core.psis",
    "core": "loo_adapt.core",
    "estimators": "loo_adapt.estimators",
    "transforms": "loo_adapt.transforms",
    "models": "loo_adapt.models",
    "stan": "loo_adapt.stan",
    "io": "loo_adapt.io",
    "readers": "loo_adapt.io.readers",
    "evaluation": "loo_adapt.evaluation",
    "metrics": "loo_adapt.evaluation.metrics",
    "plots": "loo_adapt.evaluation.plots",
    "report": "loo_adapt.evaluation.report",
    "laplace": "loo_adapt.laplace",
    "datasets": "loo_adapt.datasets",
}

__all__ = sorted(_LAZY) + sorted(_SUBMODULES) + ["__version__"]


def __getattr__(name):
    if name in _SUBMODULES:
        value = import_module(_SUBMODULES[name])
    elif name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(import_module(module), attr)
    else:
        raise AttributeError(f"module 'loo_adapt' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
