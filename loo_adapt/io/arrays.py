"""Plain arrays and dicts of arrays -> `Draws`, and the dtype checks every reader applies.

A value that cannot be a real number is refused with the fix: a masked array with masked
entries, unsigned integers (``np.uint8(-1)`` is 255), booleans, complex numbers, and object
arrays that do not convert to float.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from loo_adapt.draws import APPROXIMATE_METHODS, METHODS, Draws, check_log_lik

from .columns import DENSITY_COLUMNS, densities_from_stats, normalize_method

__all__ = ["as_float_array", "read_dict", "read_array"]


def as_float_array(value, what: str, *, stats: bool = False) -> np.ndarray:
    """``value`` as a float64 array, refusing dtypes that silently change numbers.

    Parameters
    ----------
    value : array-like (numpy, masked, xarray / dask-backed data, lists)
    what : how to name it in an error
    stats : bool
        Algorithm output (``diverging``, ``tree_depth``): booleans and unsigned integers
        are counts / flags there and are accepted.

    Returns
    -------
    ndarray of float64

    Examples
    --------
    >>> as_float_array([1, 2], "x")
    array([1., 2.])
    >>> as_float_array(np.array([255], dtype=np.uint8), "x")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: x has unsigned integer dtype uint8: negative values wrap around (-1 -> 255)...
    """
    if isinstance(value, np.ma.MaskedArray):
        n_masked = int(np.ma.count_masked(value))
        if n_masked:
            raise ValueError(
                f"{what} is a masked array with {n_masked} masked value(s): loo_adapt does not "
                "drop draws or observations silently; remove them (or fill with "
                "np.ma.filled) and pass a plain array"
            )
        value = np.ma.getdata(value)
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        value = np.asarray(value)
        dtype = value.dtype
    kind = np.dtype(dtype).kind
    if stats and kind in "ub":
        return np.asarray(value, dtype=np.float64)
    if kind == "u":
        raise ValueError(
            f"{what} has unsigned integer dtype {dtype}: negative values wrap around "
            "(-1 -> 255); pass float64 values (np.asarray(x, dtype=float) before any cast "
            "to unsigned)"
        )
    if kind == "b":
        raise ValueError(f"{what} has boolean dtype: pass real numbers (float64)")
    if kind == "c":
        raise ValueError(
            f"{what} has complex dtype {dtype}: pass real numbers (take .real if the "
            "imaginary parts are 0)"
        )
    if kind in "OSUV":
        try:
            return np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                f"{what} has {np.dtype(dtype)} dtype with entries that are not numbers: "
                "pass a float64 array"
            ) from None
    return np.asarray(value, dtype=np.float64)


def resolve_densities(method: str, stats: Mapping[str, np.ndarray], source: str, log_p=None,
                      log_q=None, *, stat_name=str, required: bool = False):
    """(log_p, log_q) of approximate draws: given arrays, sample_stats names, or Stan's columns.

    ``log_p`` / ``log_q`` may be arrays or keys of ``stats`` (looked up as given, then as
    ``stat_name(key)``); what is not given is taken from Stan's density columns of
    ``method`` when ``stats`` holds them. With ``required`` their absence is an error
    (``densities_from_stats`` names the missing columns); otherwise they stay None and the
    draws are refused only when used as an importance-sampling proposal.
    """

    def one(value, what):
        if value is None:
            return None
        if isinstance(value, str):
            key = value if value in stats else stat_name(value)
            if key not in stats:
                raise KeyError(f"{what}={value!r} is not in sample_stats ({sorted(stats)})")
            return stats[key]
        return as_float_array(value, what)

    p_arr, q_arr = one(log_p, "log_p"), one(log_q, "log_q")
    if method in APPROXIMATE_METHODS and (p_arr is None or q_arr is None):
        if required or all(n in stats for n in DENSITY_COLUMNS[method]):
            auto_p, auto_q = densities_from_stats(stats, method, source)
            p_arr = auto_p if p_arr is None else p_arr
            q_arr = auto_q if q_arr is None else q_arr
    return p_arr, q_arr


def read_dict(
    data: Mapping[str, np.ndarray],
    method: str | None = None,
    *,
    var_names=None,
    log_p=None,
    log_q=None,
    sample_stats: Mapping[str, np.ndarray] | None = None,
    source: str = "dict of arrays",
) -> Draws:
    """Read a dict of (chains, draws, *shape) arrays.

    Parameters
    ----------
    data : mapping of name -> array (chains, draws, ...)
        Keys ending in ``__`` (Stan's algorithm columns such as ``lp__``, ``log_p__``) go to
        sample_stats.
    method : str
        Required: the draws' origin (``"mcmc"``, ``"advi"``, ``"laplace"``,
        ``"pathfinder"``, ...), which decides whether they are reweighted by p/q.
    var_names : str or list of str, optional
        Keep only these variables.
    log_p, log_q : str (a sample_stats key) or array (chains, draws), optional
        For an approximate method; by default looked up as for Stan CSV.
    sample_stats : mapping, optional
    source : description of the draws

    Returns
    -------
    Draws

    Examples
    --------
    >>> read_dict({"log_lik": np.zeros((2, 5, 3))}, method="mcmc").shape
    (2, 5)
    """
    if method is None:
        raise ValueError(
            f"method= is required for a dict of arrays: one of {METHODS} (the draws' origin "
            "decides whether they are reweighted)"
        )
    found = normalize_method(method)
    stats = {k: as_float_array(v, f"sample_stats {k!r}", stats=True)
             for k, v in (sample_stats or {}).items()}
    wanted = None if var_names is None else (
        {var_names} if isinstance(var_names, str) else set(var_names))
    variables = {}
    for k, v in data.items():
        key = str(k)
        if key.endswith("__"):
            stats[key] = as_float_array(v, f"{key!r}", stats=True)
        elif wanted is None or key in wanted:
            variables[key] = as_float_array(v, f"variable {key!r}")
    if wanted is not None and wanted - set(variables):
        raise KeyError(f"variable(s) {sorted(wanted - set(variables))} not in the dict "
                       f"(keys: {sorted(map(str, data))})")
    p_arr, q_arr = resolve_densities(found, stats, source, log_p, log_q)
    return Draws(variables=variables, method=found, log_p=p_arr, log_q=q_arr,
                 sample_stats=stats, source=source)


def as_log_lik(array, what: str) -> np.ndarray:
    """(chains, draws, n) float array from (chains, draws, n) or (S, n) input."""
    arr = as_float_array(array, what)
    if arr.ndim == 2:
        arr = arr[None]
    if arr.ndim != 3:
        raise ValueError(
            f"{what} must be (chains, draws, n) or (S, n), got shape {np.shape(array)}"
        )
    return arr


def read_array(log_lik, method: str | None = None, *, log_p=None, log_q=None) -> Draws:
    """A pointwise log-likelihood array -> `Draws` holding it as ``log_lik``.

    Parameters
    ----------
    log_lik : array of shape (chains, draws, n), or (S, n) (one chain of S draws)
    method : str, optional
        The draws' origin, ``"mcmc"`` by default; an approximate method needs log_p, log_q.
    log_p, log_q : arrays of shape (chains, draws) or (S,), optional

    Returns
    -------
    Draws

    Examples
    --------
    >>> read_array(np.zeros((100, 4))).shape
    (1, 100)
    """
    arr = as_log_lik(log_lik, "the log-likelihood array")
    check_log_lik(arr, "the log-likelihood array")
    found = normalize_method(method) or "mcmc"
    p_arr = None if log_p is None else as_float_array(log_p, "log_p").reshape(arr.shape[:2])
    q_arr = None if log_q is None else as_float_array(log_q, "log_q").reshape(arr.shape[:2])
    draws = Draws(
        variables={"log_lik": arr},
        method=found,
        log_p=p_arr,
        log_q=q_arr,
        source="numpy log-likelihood array",
        log_lik_names=("log_lik",),
    )
    draws._checked.add("log_lik")  # checked above: Draws.log_lik need not read it again
    return draws
