"""Out-of-core PSIS-LOO: log-likelihoods that live in dask arrays.

Recognised inputs (`is_lazy`): a dask array (S, n) or (chains, draws, n); an
``xarray.DataArray`` / ``Dataset`` backed by dask (``xr.open_dataset(path, chunks={})``,
``xr.open_zarr``); an arviz ``InferenceData`` or ``xarray.DataTree`` whose log-likelihood is
backed by dask (``az.from_netcdf(path, group_kwargs={"log_likelihood": {"chunks": {}}})``,
``az.from_zarr``, ``xr.open_datatree(path, chunks={})``).

`psis_loo_lazy` rechunks the log-likelihood so that each chunk holds whole columns (all draws
of some observations), maps `loo_adapt.core.chunked.loo_block` over the chunks with
``dask.array.blockwise`` and computes on whatever dask scheduler is active (threads by default,
processes, or a ``dask.distributed.Client``).  Memory per task is O(S x chunk); only the
pointwise results (6 numbers per observation) come back.

Nothing here imports dask (or xarray) until a lazy object is actually evaluated, so
``import loo_adapt.io.lazy`` and `is_lazy` are free for in-memory inputs.
"""

from __future__ import annotations

import numpy as np

from loo_adapt.core.chunked import FIELDS, check_r_eff, from_blocks, loo_block
from loo_adapt.io.arviz import _groups, _is_datatree, _is_inference_data

__all__ = ["DEFAULT_CHUNK_BYTES", "from_function", "is_lazy", "lazy_log_lik", "psis_loo_lazy"]

#: Target size of one (S, chunk) block of log-likelihood when chunks are chosen here.  The
#: PSIS kernel holds about ten arrays of that size at once, per worker thread.
DEFAULT_CHUNK_BYTES = 16 * 2**20


def _module(obj) -> str:
    return type(obj).__module__ or ""


def _is_dask_array(obj) -> bool:
    return _module(obj).startswith("dask.array") and type(obj).__name__ == "Array"


def _is_xarray(obj, name: str) -> bool:
    return _module(obj).startswith("xarray") and type(obj).__name__ == name


def _dask_backed(da) -> bool:
    # xarray's .chunks is None unless the values are a chunked (dask) array; unlike .data it
    # never loads a lazily indexed netCDF variable into memory
    return getattr(da, "chunks", None) is not None


def is_lazy(obj) -> bool:
    """True when ``obj`` holds its log-likelihood in a dask array (see the module docstring).

    Parameters
    ----------
    obj : anything `loo_adapt.loo` accepts

    Returns
    -------
    bool; False for numpy arrays, in-memory xarray objects and every other input.  Never
    imports dask.

    Examples
    --------
    >>> import numpy as np
    >>> is_lazy(np.zeros((10, 3)))
    False
    """
    if _is_dask_array(obj):
        return True
    if _is_xarray(obj, "DataArray"):
        return _dask_backed(obj)
    if _is_xarray(obj, "Dataset"):
        return any(_dask_backed(v) for v in obj.data_vars.values())
    if _is_inference_data(obj) or _is_datatree(obj):
        groups = _groups(obj)
        for group in ("log_likelihood", "posterior"):
            if group in groups and any(_dask_backed(v) for v in groups[group].data_vars.values()):
                return True
    return False


def _pick(ds, var_name: str, where: str):
    if var_name in ds.data_vars:
        return ds[var_name]
    names = list(ds.data_vars)
    if len(names) == 1:
        return ds[names[0]]
    raise KeyError(f"no variable {var_name!r} in {where} (variables: {names}); pass var_name=")


def _from_dataarray(da):
    dims = list(da.dims)
    if "chain" not in dims or "draw" not in dims:
        raise ValueError(
            f"the log-likelihood DataArray has dims {tuple(dims)}; it needs 'chain' and 'draw' "
            "dims (rename the sample dims, or pass the dask array itself)"
        )
    rest = [d for d in dims if d not in ("chain", "draw")]
    if not rest:
        raise ValueError("the log-likelihood DataArray has no observation dimension")
    return da.transpose("chain", "draw", *rest).data


def lazy_log_lik(obj, var_name: str = "log_lik"):
    """The pointwise log-likelihood of a lazy input as a float64 dask array.

    Parameters
    ----------
    obj : dask array, dask-backed xarray DataArray / Dataset, InferenceData or DataTree
    var_name : variable of a Dataset / the ``log_likelihood`` (else ``posterior``) group; a
        group or Dataset with a single variable uses it whatever its name.

    Returns
    -------
    dask array (S, n) or (chains, draws, n): observation dims beyond the first are flattened
    (C order); no values are computed.

    Examples
    --------
    >>> import dask.array as da
    >>> lazy_log_lik(da.zeros((2, 50, 4, 3))).shape
    (2, 50, 12)
    """
    import dask.array as da

    if _is_dask_array(obj):
        arr = obj
        if arr.ndim < 2:
            raise ValueError(
                f"a dask log-likelihood must be (S, n) or (chains, draws, n), got {arr.shape}"
            )
    elif _is_xarray(obj, "DataArray"):
        arr = _from_dataarray(obj)
    elif _is_xarray(obj, "Dataset"):
        arr = _from_dataarray(_pick(obj, var_name, "the Dataset"))
    elif _is_inference_data(obj) or _is_datatree(obj):
        groups = _groups(obj)
        if "log_likelihood" in groups:
            arr = _from_dataarray(_pick(groups["log_likelihood"], var_name, "log_likelihood"))
        elif "posterior" in groups and var_name in groups["posterior"].data_vars:
            arr = _from_dataarray(groups["posterior"][var_name])
        else:
            raise KeyError(
                f"no 'log_likelihood' group and no posterior variable {var_name!r} "
                f"(groups: {sorted(groups)})"
            )
    else:
        raise TypeError(f"not a lazy (dask-backed) log-likelihood: {type(obj).__name__}")
    arr = da.asarray(arr).astype(np.float64)
    if arr.ndim > 3:
        # (chains, draws, obs...): keep the first observation axis chunked, make the others
        # whole, then flatten them
        arr = arr.rechunk({ax: -1 for ax in range(3, arr.ndim)})
        arr = arr.reshape(arr.shape[:2] + (int(np.prod(arr.shape[2:])),))
    return arr


def _whole_columns(arr, obs_chunk):
    """Rechunk so that every chunk holds all draws of its observations."""
    draw_axes = tuple(range(arr.ndim - 1))
    whole = all(len(arr.chunks[ax]) == 1 for ax in draw_axes)
    if whole and obs_chunk is None:
        return arr
    if obs_chunk is None:
        n_draws = int(np.prod(arr.shape[:-1]))
        obs_chunk = max(1, DEFAULT_CHUNK_BYTES // (8 * n_draws))
    if int(obs_chunk) < 1:
        raise ValueError(f"obs_chunk must be a positive number of observations, got {obs_chunk}")
    return arr.rechunk({**{ax: -1 for ax in draw_axes}, arr.ndim - 1: int(obs_chunk)})


def _block(ll, idx, r=None):
    return loo_block(ll, int(idx[0]) if idx.size else 0, r)


def psis_loo_lazy(obj, *, var_name: str = "log_lik", r_eff=None, obs_chunk: int | None = None):
    """PSIS-LOO of a lazy (dask) log-likelihood, chunk by chunk of observations.

    Parameters
    ----------
    obj : see `is_lazy`
    var_name : name of the log-likelihood variable (xarray / arviz inputs).
    r_eff : None, float or array (n,)
        None: from the chain structure of ``exp(log_lik)`` per observation for
        (chains, draws, n) input with several chains (R loo's ``relative_eff``, computed per
        chunk); 1 for (S, n) input or a single chain, as `loo_adapt.loo` does in memory.
    obs_chunk : observations per chunk; default: keep the input's column chunks when every
        chunk already holds all draws, else about ``DEFAULT_CHUNK_BYTES`` of log-likelihood
        per chunk.

    Returns
    -------
    `loo_adapt.core.psis_loo.PsisLoo` with pointwise arrays of length n and ``log_weights=None``;
    the values equal `loo_adapt.core.psis_loo.loo_pointwise` of the computed array.

    Examples
    --------
    >>> import dask.array as da
    >>> ll = -da.random.default_rng(0).exponential(1.0, (4, 250, 1000), chunks=(4, 250, 200))
    >>> res = psis_loo_lazy(ll)
    >>> res.elpd_loo.shape, res.log_weights is None
    ((1000,), True)
    """
    import dask.array as da

    arr = _whole_columns(lazy_log_lik(obj, var_name), obs_chunk)
    n_obs = arr.shape[-1]
    n_samples = int(np.prod(arr.shape[:-1]))
    obs_chunks = arr.chunks[-1]
    draw_index = "cd" if arr.ndim == 3 else "s"
    args = [arr, draw_index + "j", da.arange(n_obs, chunks=(obs_chunks,)), "j"]
    if r_eff is None and arr.ndim == 3 and arr.shape[0] == 1:
        r_eff = 1.0
    r = check_r_eff(r_eff, n_obs)
    if r is not None:
        args += [da.from_array(r, chunks=(obs_chunks,)), "j"]
    fields = da.blockwise(
        _block, "kj", *args,
        new_axes={"k": len(FIELDS)}, concatenate=True, dtype=np.float64,
        meta=np.empty((0, 0), dtype=np.float64),
    )
    return from_blocks(fields.compute(), n_samples)


def from_function(log_lik_fn, draws, n_obs: int, n_samples: int, *, obs_chunk=None,
                  chains: int = 1):
    """A lazy (S, n) log-likelihood evaluated by ``log_lik_fn(draws, idx)`` chunk by chunk.

    Parameters
    ----------
    log_lik_fn : callable ``(draws, indices) -> (S, len(indices))`` (as for
        `loo_adapt.subsample.loo_subsample`).
    draws : whatever ``log_lik_fn`` takes (sent once to every task).
    n_obs, n_samples : n and S.
    obs_chunk : observations per chunk (default about ``DEFAULT_CHUNK_BYTES`` per chunk).
    chains : >1 returns (chains, S / chains, n), chain-major, for chain-wise r_eff.

    Returns
    -------
    dask array; nothing is evaluated until it is computed (e.g. by `psis_loo_lazy`).

    Examples
    --------
    >>> import numpy as np
    >>> ll = from_function(lambda d, i: np.zeros((d, len(i))), 100, n_obs=7, n_samples=100)
    >>> ll.shape
    (100, 7)
    """
    import dask.array as da

    if obs_chunk is None:
        obs_chunk = max(1, DEFAULT_CHUNK_BYTES // (8 * int(n_samples)))
    if n_samples % chains:
        raise ValueError(f"{n_samples} draws do not split into {chains} equal chains")
    idx = da.arange(int(n_obs), chunks=int(obs_chunk))

    def block(i):
        out = np.asarray(log_lik_fn(draws, i), dtype=np.float64)
        if out.shape != (n_samples, len(i)):
            raise ValueError(
                f"log_lik_fn returned shape {out.shape}, expected ({n_samples}, {len(i)})"
            )
        return out

    arr = idx.map_blocks(block, new_axis=0, chunks=((int(n_samples),), idx.chunks[0]),
                         dtype=np.float64, meta=np.empty((0, 0)))
    if chains > 1:
        arr = arr.reshape(chains, n_samples // chains, int(n_obs))
    return arr
