"""Readers (every input format -> `Draws`) and the Stan CSV writer.

One module per source: `columns` (Stan column names -> arrays), `csv` (Stan CSV reader and
writer), `cmdstanpy`, `arviz` (InferenceData / DataTree / xarray / netCDF / zarr), `stanli`,
`arrays` (numpy arrays and dicts); `read_draws` picks the reader.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from loo_adapt.draws import Draws, _truthy

from .arrays import as_float_array, as_log_lik, read_array, read_dict
from .arviz import is_arviz_like, is_arviz_path, read_arviz_file, read_inference_data, read_xarray
from .cmdstanpy import is_cmdstanpy_fit, read_cmdstanpy
from .columns import normalize_method, read_columns
from .csv import read_csv, write_stan_csv
from .stanli import is_stanli_fit, read_stanli

__all__ = [
    "read_draws",
    "read_csv",
    "write_stan_csv",
    "read_cmdstanpy",
    "read_inference_data",
    "read_xarray",
    "read_arviz_file",
    "read_stanli",
    "read_dict",
    "read_array",
    "read_columns",
    "normalize_method",
]

ACCEPTED = (
    "loo_adapt.Draws; cmdstanpy CmdStanMCMC / CmdStanVB / CmdStanLaplace / CmdStanPathfinder / "
    "CmdStanMLE; a Stan CSV path, directory, glob or list of paths (str or pathlib.Path); "
    "a netCDF (.nc) or zarr path; arviz.InferenceData, xarray.DataTree / Dataset / DataArray; "
    "stanli.Fit; a fit with to_draws() (loo_adapt.laplace.VIFA); dict of (chains, draws, ...) "
    "arrays (with method=); numpy array of pointwise "
    "log-likelihood, (chains, draws, n) or (S, n)"
)


def _is_path_list(obj) -> bool:
    return (
        isinstance(obj, (list, tuple))
        and len(obj) > 0
        and all(isinstance(p, (str, os.PathLike)) for p in obj)
    )


def _attach_log_lik(draws: Draws, value) -> Draws:
    """Attach an array (chains, draws, n) / (S, n) as the variable ``log_lik``."""
    if "log_lik" in draws.variables:
        raise ValueError(
            "the draws already hold a variable 'log_lik'; pass var_name= to choose a "
            "log-likelihood variable instead of attaching an array"
        )
    arr = as_log_lik(value, "log_lik")
    if arr.shape[:2] != draws.shape:
        if arr.shape[0] == 1 and arr.shape[1] == draws.n_samples:
            arr = arr.reshape(draws.shape + arr.shape[2:])
        else:
            raise ValueError(
                f"log_lik has shape {np.shape(value)}; the draws are (chains, draws) = "
                f"{draws.shape}"
            )
    return replace(draws, variables={**draws.variables, "log_lik": arr},
                   log_lik_names=("log_lik",))


def _add_log_jacobian(draws: Draws, log_jacobian) -> Draws:
    if draws.method != "laplace" or _truthy(draws.config.get("jacobian", True)):
        raise ValueError(
            "log_jacobian= is only for Laplace draws made with jacobian=false (these are "
            f"{draws.method!r} draws, jacobian={draws.config.get('jacobian', 'true')}); their "
            "log_p already includes the Jacobian"
        )
    lj = as_float_array(log_jacobian, "log_jacobian")
    if lj.size != draws.n_samples or not np.isfinite(lj).all():
        raise ValueError(
            f"log_jacobian must hold one finite value per draw ({draws.n_samples}), got "
            f"shape {lj.shape}"
        )
    return replace(draws, log_p=draws.log_p + lj.reshape(draws.shape),
                   config={**draws.config, "jacobian": "true",
                           "log_jacobian": "added by read_draws"})


_MISSING = object()


def read_draws(
    obj,
    *,
    method: str | None = None,
    var_name=None,
    var_names=None,
    log_jacobian=None,
    log_lik=_MISSING,
    **kw,
) -> Draws:
    """Turn any supported fit into a `Draws`.

    Parameters
    ----------
    obj : object
        A `Draws` (returned as is); cmdstanpy fit; Stan CSV path(s) / directory / glob;
        netCDF or zarr path; InferenceData / DataTree / xarray Dataset / DataArray;
        stanli.Fit; an object with ``to_draws()`` (`loo_adapt.laplace.VIFA`); dict of
        (chains, draws, ...) arrays; array of pointwise log-likelihood.
    method : str, optional
        The draws' origin in cmdstanpy's sense: ``"mcmc"``, ``"advi"`` (CmdStan
        ``variational``), ``"laplace"``, ``"pathfinder"``, ``"other"`` (optimisation).
        Detected from CSV headers, fit classes and ArviZ sample_stats; give it where it
        cannot be (dicts, arrays, InferenceData without the approximation's stats). A
        stated method the source contradicts raises ValueError.
    var_name : str or array, optional
        As in arviz: the pointwise log-likelihood variable (not renamed; needed only when
        the source holds several). An array (chains, draws, n) / (S, n) is attached as
        ``log_lik``.
    var_names : str or list of str, optional
        Read only these variables (plus ``var_name`` and the algorithm columns that hold
        log_p / log_q / lp__): much faster on wide CSV files. None reads everything; to
        adapt, include the variables the model family needs.
    log_jacobian : array (chains, draws) or (S,), optional
        For Laplace draws made with ``jacobian=false``: the per-draw log-determinant of
        the Jacobian of the unconstrained -> constrained transform, added to ``log_p`` so
        that log_p - log_q is a valid importance ratio (refused otherwise).
    log_lik : deprecated
        The old name of ``var_name``.
    **kw
        Passed to the specific reader (``log_p=``, ``log_q=`` for InferenceData / dict /
        array; ``sample_stats=``, ``source=`` for dict).

    Returns
    -------
    Draws

    Examples
    --------
    >>> d = read_draws({"y": np.zeros((2, 50, 3)), "mu": np.zeros((2, 50))},
    ...                method="mcmc", var_name="y")
    >>> d.log_lik_name(), d.log_lik().shape
    ('y', (2, 50, 3))
    """
    if log_lik is not _MISSING:
        if isinstance(log_lik, str):
            warnings.warn("read_draws(log_lik=...) is deprecated: use var_name=",
                          DeprecationWarning, stacklevel=2)
        if var_name is not None:
            raise TypeError("pass var_name= only (log_lik= is its deprecated name)")
        var_name = log_lik
    name = var_name if isinstance(var_name, str) else None
    if var_names is not None:
        var_names = [var_names] if isinstance(var_names, str) else list(var_names)
        if name is not None and name not in var_names:
            var_names.append(name)
    if isinstance(obj, Draws):
        if kw:
            raise TypeError(f"unexpected options for a Draws: {sorted(kw)}")
        expected = normalize_method(method)
        if expected is not None and expected != obj.method:
            raise ValueError(f"method={method!r} requested but the Draws are {obj.method!r}")
        draws = obj
    elif is_cmdstanpy_fit(obj):
        draws = read_cmdstanpy(obj, method=method, var_names=var_names, **kw)
    elif is_arviz_path(obj):
        draws = read_arviz_file(obj, method=method, var_names=var_names, **kw)
    elif isinstance(obj, (str, os.PathLike)) or _is_path_list(obj):
        draws = read_csv(obj, method=method, var_names=var_names, **kw)
    elif is_arviz_like(obj):
        reader = read_xarray if type(obj).__name__ in ("Dataset", "DataArray") else (
            read_inference_data)
        draws = reader(obj, method=method, var_names=var_names, **kw)
    elif is_stanli_fit(obj):
        expected = normalize_method(method)
        if expected not in (None, "mcmc"):
            raise ValueError(f"a stanli.Fit holds NUTS draws, not {method!r}")
        draws = read_stanli(obj, var_names=var_names, **kw)
    elif callable(getattr(obj, "to_draws", None)):  # a fit that makes its own (VIFA)
        if kw:
            raise TypeError(f"unexpected options for a {type(obj).__name__}: {sorted(kw)}")
        draws = obj.to_draws()
        expected = normalize_method(method)
        if expected is not None and expected != draws.method:
            raise ValueError(f"method={method!r} requested but the fit holds "
                             f"{draws.method!r} draws")
    elif isinstance(obj, Mapping):
        draws = read_dict(obj, method=method, var_names=var_names, **kw)
    elif isinstance(obj, np.ndarray) or hasattr(obj, "__array__"):
        draws = read_array(obj, method=method, **kw)
    else:
        raise TypeError(f"cannot read draws from a {type(obj).__name__}; accepted: {ACCEPTED}")
    if var_name is not None and name is None:
        draws = _attach_log_lik(draws, var_name)
    elif name is not None:
        name = draws.log_lik_name(name)  # KeyError listing the variables when absent
        if draws.log_lik_names != (name,):
            draws = replace(draws, log_lik_names=(name,))
    if log_jacobian is not None:
        draws = _add_log_jacobian(draws, log_jacobian)
    return draws
