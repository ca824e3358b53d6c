"""ArviZ containers -> `Draws`: InferenceData (arviz 0.x), xarray.DataTree (arviz 1.x),
xarray Dataset / DataArray, and netCDF / zarr files of them.

Approximate draws are recognised as arviz stores them: the ``method`` attribute arviz 0.x's
``from_cmdstan`` copies from the CSV header, else the sample_stats names (``log_p`` /
``log_g`` ADVI, ``log_p`` / ``log_q`` Laplace, ``lp_approx`` / ``lp`` Pathfinder, or the
same with Stan's ``__`` suffix). The ADVI mean row CmdStan writes first (log densities 0) and
``from_cmdstan`` keeps is dropped, so the draws equal those read from the CSV.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from loo_adapt.draws import Draws

from .arrays import as_float_array, resolve_densities
from .columns import DENSITY_COLUMNS, STAN_METHODS, check_method, normalize_method, pick_config

__all__ = ["read_inference_data", "read_xarray", "read_arviz_file", "is_arviz_like"]

# ArviZ's sample_stats names -> Stan's.
ARVIZ_STATS = {
    "lp": "lp__",
    "acceptance_rate": "accept_stat__",
    "step_size": "stepsize__",
    "tree_depth": "treedepth__",
    "n_steps": "n_leapfrog__",
    "diverging": "divergent__",
    "energy": "energy__",
}
ARVIZ_SUFFIXES = (".nc", ".netcdf", ".nc4", ".h5", ".zarr")


def _is_inference_data(obj) -> bool:
    t = type(obj)
    return t.__name__ == "InferenceData" and t.__module__.startswith("arviz")


def _is_datatree(obj) -> bool:
    t = type(obj)
    return t.__name__ == "DataTree" and t.__module__.startswith(("xarray", "datatree"))


def _is_xarray(obj) -> bool:
    t = type(obj)
    return t.__name__ in ("Dataset", "DataArray") and t.__module__.startswith("xarray")


def is_arviz_like(obj) -> bool:
    """InferenceData, DataTree, Dataset or DataArray (without importing arviz / xarray)."""
    return _is_inference_data(obj) or _is_datatree(obj) or _is_xarray(obj)


def is_arviz_path(obj) -> bool:
    """A netCDF / zarr path (by suffix, or a zarr directory, or HDF5 / netCDF magic bytes)."""
    if not isinstance(obj, (str, os.PathLike)):
        return False
    path = os.fspath(obj)
    if path.lower().endswith(ARVIZ_SUFFIXES):
        return True
    if os.path.isdir(path):
        return os.path.exists(os.path.join(path, ".zgroup")) or os.path.exists(
            os.path.join(path, "zarr.json"))
    if os.path.isfile(path):
        with open(path, "rb") as fh:
            head = fh.read(8)
        return head.startswith((b"\x89HDF", b"CDF\x01", b"CDF\x02"))
    return False


def _groups(obj) -> dict:
    """{group name: xarray.Dataset} for an InferenceData or a DataTree."""
    if _is_inference_data(obj):
        return {g: getattr(obj, g) for g in obj.groups()}
    return {name: child.to_dataset() for name, child in obj.children.items()}


def _dataset_arrays(ds, group: str, var_names=None) -> dict[str, np.ndarray]:
    out = {}
    for name, da in ds.data_vars.items():
        if var_names is not None and name not in var_names:
            continue
        if "chain" not in da.dims or "draw" not in da.dims:
            raise ValueError(
                f"variable {name!r} of group {group!r} has dims {da.dims}; "
                "expected ('chain', 'draw', ...)"
            )
        rest = [d for d in da.dims if d not in ("chain", "draw")]
        out[str(name)] = as_float_array(
            da.transpose("chain", "draw", *rest).data, f"{group} variable {name!r}",
            stats=group == "sample_stats",
        )
    return out


def _stat_to_stan(name: str) -> str:
    if name.endswith("__"):
        return name
    return ARVIZ_STATS.get(name, name + "__")


def _detect_method(attrs: Mapping, stats: Mapping[str, np.ndarray]) -> str:
    stan = attrs.get("method")
    if isinstance(stan, (list, tuple)):
        stan = stan[0] if stan else None
    if stan in STAN_METHODS:
        return STAN_METHODS[stan]
    for method, cols in DENSITY_COLUMNS.items():
        if method != "pathfinder" and all(c in stats for c in cols):
            return method
    if all(c in stats for c in DENSITY_COLUMNS["pathfinder"]):
        return "pathfinder"
    return "mcmc"


def read_inference_data(
    idata,
    method: str | None = None,
    *,
    var_names=None,
    log_p=None,
    log_q=None,
) -> Draws:
    """Read an ArviZ ``InferenceData`` (arviz 0.x) or ``xarray.DataTree`` (arviz 1.x).

    Parameters
    ----------
    idata : InferenceData or DataTree
        Variables come from the ``posterior`` group plus the ``log_likelihood`` group, whose
        variables keep their names and are recorded in ``Draws.log_lik_names`` (a posterior
        variable of the same name becomes ``posterior_<name>``). ``sample_stats`` names are
        mapped back to Stan's (``lp`` -> ``lp__``, ``diverging`` -> ``divergent__``, others
        get ``__`` appended).
    method : str, optional
        The draws' origin; detected from the ``method`` attribute or the sample_stats names
        (see the module docstring), ``"mcmc"`` when neither says. A stated method that the
        container contradicts raises ValueError.
    var_names : str or list of str, optional
        Read only these variables (posterior or log_likelihood); None reads all.
    log_p, log_q : str or array, optional
        Per-draw densities of an approximate method: a sample_stats name or a (chains,
        draws) array; by default looked up as for Stan CSV.

    Returns
    -------
    Draws

    Examples
    --------
    >>> idata = az.from_cmdstan(["advi.csv"], log_likelihood="log_lik")  # doctest: +SKIP
    >>> read_inference_data(idata).method                                 # doctest: +SKIP
    'advi'
    """
    groups = _groups(idata)
    wanted = None if var_names is None else (
        {var_names} if isinstance(var_names, str) else set(var_names))
    if "posterior" not in groups and "log_likelihood" not in groups:
        raise ValueError(
            f"no 'posterior' or 'log_likelihood' group (groups: {sorted(groups)}); "
            "pass the InferenceData / DataTree of a fit"
        )
    log_lik = {}
    if "log_likelihood" in groups:
        log_lik = _dataset_arrays(groups["log_likelihood"], "log_likelihood", wanted)
    variables = {}
    if "posterior" in groups:
        for name, value in _dataset_arrays(groups["posterior"], "posterior", wanted).items():
            variables[f"posterior_{name}" if name in log_lik else name] = value
    variables.update(log_lik)
    if wanted is not None:
        missing = sorted(wanted - set(variables))
        if missing:
            raise KeyError(f"variable(s) {missing} not in the posterior / log_likelihood groups")
    stats = {}
    if "sample_stats" in groups:
        stats = {
            _stat_to_stan(k): v
            for k, v in _dataset_arrays(groups["sample_stats"], "sample_stats").items()
        }
    attrs = dict(groups.get("posterior", groups.get("log_likelihood")).attrs)
    detected = _detect_method(attrs, stats)
    found = normalize_method(method) or detected
    if method is not None and detected != "mcmc" and detected != found:
        check_method(method, detected, f"the {type(idata).__name__} (sample_stats / attrs)")
    source = f"{type(idata).__module__}.{type(idata).__name__}"
    p_arr, q_arr = resolve_densities(found, stats, f"the {source} sample_stats", log_p, log_q,
                                     stat_name=_stat_to_stan, required=True)
    if found == "advi" and log_p is None and _has_mean_row(stats):
        # arviz keeps CmdStan's first ADVI row, the approximation's mean (densities 0)
        variables = {k: v[:, 1:] for k, v in variables.items()}
        stats = {k: v[:, 1:] for k, v in stats.items()}
        p_arr, q_arr = p_arr[:, 1:], q_arr[:, 1:]
    return Draws(variables=variables, method=found, log_p=p_arr, log_q=q_arr,
                 sample_stats=stats, source=source, log_lik_names=tuple(log_lik),
                 config=pick_config(attrs))


def _has_mean_row(stats: Mapping[str, np.ndarray]) -> bool:
    keys = [k for k in ("lp__", "log_p__", "log_g__") if k in stats]
    first = [stats[k][:, 0] for k in keys]
    return bool(keys) and stats[keys[0]].shape[0] == 1 and all(np.all(v == 0) for v in first)


def read_xarray(obj, method: str | None = None, *, var_names=None, log_p=None,
                log_q=None) -> Draws:
    """Read an xarray ``Dataset`` (a posterior or log_likelihood group) or ``DataArray``.

    Parameters
    ----------
    obj : xarray.Dataset or xarray.DataArray with dims ("chain", "draw", ...)
        A DataArray is taken as the pointwise log-likelihood (its name, or ``log_lik``); a
        Dataset as the posterior, all of its variables candidates for ``var_name=``.
    method, var_names, log_p, log_q : as for `read_inference_data`

    Returns
    -------
    Draws

    Examples
    --------
    >>> read_xarray(idata.log_likelihood["y"]).log_lik_name()  # doctest: +SKIP
    'y'
    """
    import xarray as xr

    if isinstance(obj, xr.DataArray):
        name = str(obj.name) if obj.name is not None else "log_lik"
        ds, group = obj.to_dataset(name=name), "log_likelihood"
    else:
        ds, group = obj, "posterior"
    tree = xr.DataTree.from_dict({group: ds})
    draws = read_inference_data(tree, method=method, var_names=var_names, log_p=log_p,
                                log_q=log_q)
    if group == "posterior":
        # every variable of a bare Dataset may be the log-likelihood
        draws.log_lik_names = tuple(draws.variables) if len(draws.variables) == 1 else ()
    draws.source = f"xarray.{type(obj).__name__}"
    return draws


def read_arviz_file(path, method: str | None = None, **kw) -> Draws:
    """Read a netCDF (``.nc``) or zarr file of an InferenceData / DataTree.

    Parameters
    ----------
    path : str or pathlib.Path
    method, kw : as for `read_inference_data`

    Returns
    -------
    Draws

    Examples
    --------
    >>> read_arviz_file("fit.nc").method  # doctest: +SKIP
    'mcmc'
    """
    import xarray as xr

    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"file not found: {path}")
    engine = "zarr" if path.lower().endswith(".zarr") or os.path.isdir(path) else None
    try:
        tree = xr.open_datatree(path, engine=engine)
    except (ImportError, ModuleNotFoundError, ValueError) as err:
        need = "zarr" if engine == "zarr" else "h5netcdf or netCDF4"
        raise ValueError(
            f"cannot open {path} as netCDF / zarr ({type(err).__name__}: "
            f"{str(err).splitlines()[0] if str(err) else ''}); install {need} "
            "(pip install ...) or pass the InferenceData itself"
        ) from None
    with tree:
        draws = read_inference_data(tree.load(), method=method, **kw)
    draws.source = f"{path} ({draws.source})"
    return draws
