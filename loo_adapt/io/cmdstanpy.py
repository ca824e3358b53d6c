"""cmdstanpy fit objects (MCMC, VB, Laplace, Pathfinder, MLE) -> `Draws`.

Only cmdstanpy's public API is used: the object's arrays (which cmdstanpy has parsed from
its CSV files, dropping warm-up and the ADVI mean row) and its CmdStan settings
(``metadata.cmdstan_config``: Laplace ``jacobian``, Pathfinder ``num_paths``).
"""

from __future__ import annotations

import numpy as np

from loo_adapt.draws import Draws

from .columns import assemble, check_method, select_columns

__all__ = ["read_cmdstanpy", "is_cmdstanpy_fit"]

_CLASSES = {
    "CmdStanMCMC": "mcmc",
    "CmdStanVB": "advi",
    "CmdStanLaplace": "laplace",
    "CmdStanPathfinder": "pathfinder",
    "CmdStanMLE": "other",
}


def _classes() -> dict[str, type]:
    import cmdstanpy

    return {n: getattr(cmdstanpy, n) for n in _CLASSES if hasattr(cmdstanpy, n)}


def is_cmdstanpy_fit(obj) -> bool:
    """True for the fit objects of cmdstanpy (checked without importing it otherwise)."""
    if not type(obj).__module__.startswith("cmdstanpy"):
        return False
    return isinstance(obj, tuple(_classes().values()))


def _csv_files(fit) -> list[str]:
    """The fit's CSV files where cmdstanpy says them (``runset`` of MCMC and VB fits),
    looked up without probing: on Laplace and Pathfinder results an unknown attribute is
    taken as a Stan variable name and warns."""
    import inspect

    runset = inspect.getattr_static(fit, "runset", None)
    files = inspect.getattr_static(runset, "csv_files", None) if runset is not None else None
    if isinstance(files, property):
        files = runset.csv_files
    return [str(f) for f in (files or [])] if isinstance(files, (list, tuple)) else []


def _object_values(fit, cls: str) -> np.ndarray:
    if cls == "CmdStanMCMC":
        return np.asarray(fit.draws(concat_chains=False), float).transpose(1, 0, 2)
    if cls == "CmdStanVB":
        return np.asarray(fit.variational_sample, float)[None]
    if cls == "CmdStanMLE":
        return np.asarray(fit.optimized_params_np, float)[None, None]
    return np.asarray(fit.draws(), float)[None]


def read_cmdstanpy(fit, method: str | None = None, *, var_names=None) -> Draws:
    """Read a cmdstanpy fit (MCMC, VB, Laplace, Pathfinder, MLE).

    Parameters
    ----------
    fit : cmdstanpy.CmdStanMCMC / CmdStanVB / CmdStanLaplace / CmdStanPathfinder / CmdStanMLE
    method : str, optional
        Checked against the fit's class (a mismatch raises ValueError).
    var_names : str or list of str, optional
        Read only these variables (plus the algorithm columns); None reads everything.

    Returns
    -------
    Draws
        Warm-up and the ADVI mean row dropped; ``config`` from the fit's CmdStan settings.

    Examples
    --------
    >>> fit = cmdstanpy.from_csv("fit/output_*.csv")       # doctest: +SKIP
    >>> read_cmdstanpy(fit, var_names="log_lik").method    # doctest: +SKIP
    'mcmc'
    """
    classes = _classes()
    cls = next((n for n, c in classes.items() if isinstance(fit, c)), None)
    if cls is None:
        raise TypeError(f"unsupported cmdstanpy object {type(fit).__name__}")
    found = _CLASSES[cls]
    check_method(method, found, f"a {cls}")
    files = _csv_files(fit)
    names = list(fit.column_names)
    values = _object_values(fit, cls)
    if values.size == 0 or values.shape[-1] != len(names):
        raise ValueError(_no_draws(cls, files))
    cols = select_columns(names, var_names)
    config = dict(getattr(getattr(fit, "metadata", None), "cmdstan_config", {}) or {})
    source = f"cmdstanpy {cls}: " + (", ".join(files) or (
        "CSV files not exposed by cmdstanpy (fit.save_csvfiles(dir) keeps them)"))
    if found == "other":
        source += " (optimize: the mode as a single draw)"
    # read-only views of cmdstanpy's array (which the fit keeps) where a variable's columns
    # are a run, as a vector log_lik's are: no copy; a C-contiguous copy otherwise
    return assemble(values, names, found, source, config, cols=cols, views=True)


def _no_draws(cls: str, files) -> str:
    return (
        f"the cmdstanpy {cls} holds no draws (did the run fail inside CmdStan? its console "
        f"output says why; files: {', '.join(files) or 'none'}); rerun it before LOO"
    )
