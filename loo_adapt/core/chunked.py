"""PSIS-LOO one block of observations at a time (array core: numpy in, numpy out).

PSIS-LOO is columnwise: each observation's smoothing, k-hat, relative efficiency and Monte
Carlo error depend on its own column of draws only.  So the (S, n) log-likelihood can be
processed in blocks of whole columns, (S, m) or (chains, draws, m), each reduced to the
``FIELDS`` of its m observations, and the blocks concatenated; nothing of size S x n is ever
held.  `loo_block` is the per-block kernel that ``loo_adapt.io.lazy`` maps over the blocks of
a dask array (on any dask scheduler); `from_blocks` turns the concatenated fields back into a
`loo_adapt.core.psis_loo.PsisLoo` (with ``log_weights=None``) and issues, once, the warnings that
the blocks leave out.

The kernel is `loo_adapt.core.psis_loo.loo_pointwise` on the block, so the pointwise values are
those of the in-memory computation.
"""

from __future__ import annotations

import warnings

import numpy as np

from loo_adapt.core.psis import (
    _WARN_COLUMNS,
    MIN_DRAWS,
    _columns,
    _prepare_r_eff,
    pareto_k_threshold,
)
from loo_adapt.core.psis_loo import PsisLoo, loo_pointwise

__all__ = ["FIELDS", "check_r_eff", "from_blocks", "loo_block"]

#: Rows of a block result, in order.
FIELDS = ("elpd_i", "p_loo_i", "lpd_i", "mcse_elpd_i", "pareto_k", "r_eff", "n_eff")


def check_r_eff(r_eff, n_obs: int):
    """None, or ``r_eff`` as a validated float array of length ``n_obs`` (scalar broadcast).

    Parameters
    ----------
    r_eff : None, float or array (n_obs,)
    n_obs : int

    Returns
    -------
    None or numpy array (n_obs,)

    Examples
    --------
    >>> check_r_eff(0.5, 3)
    array([0.5, 0.5, 0.5])
    """
    return None if r_eff is None else _prepare_r_eff(r_eff, n_obs)


def loo_block(log_lik, first: int | None = None, r_eff=None) -> np.ndarray:
    """PSIS-LOO of one block of whole observation columns, as a (len(FIELDS), m) array.

    Parameters
    ----------
    log_lik : array (S, m) or (chains, draws, m)
        All draws of m observations.  With chains, r_eff comes from the chain structure
        (as `loo_adapt.core.psis_loo.loo_pointwise`); without, r_eff is 1 unless given.
    first : int, optional
        Index of the block's first observation in the whole data set; used only to name
        observations in error messages (None: messages count columns of the block).
    r_eff : None or array (m,)
        Relative efficiencies of these observations (already validated, see `check_r_eff`).

    Returns
    -------
    array (len(FIELDS), m): elpd_i, p_loo_i, lpd_i, mcse_elpd_i, pareto_k, r_eff per observation.
    No warnings are issued (`from_blocks` reports them once for all blocks).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> loo_block(rng.normal(-1.0, 0.1, (200, 3))).shape
    (6, 3)
    """
    ll = np.asarray(log_lik, dtype=np.float64)
    try:
        res = loo_pointwise(ll, r_eff=r_eff, weights=False, warn=False)
    except ValueError as err:
        if first is None:
            raise
        m = ll.shape[-1]
        raise ValueError(
            f"observations {first}..{first + m - 1} (indices in the message count from "
            f"{first}): {err}"
        ) from err
    return np.stack([np.asarray(getattr(res, f), dtype=float) for f in FIELDS])


def from_blocks(fields, n_samples: int) -> PsisLoo:
    """The `PsisLoo` of concatenated `loo_block` outputs, warning as `psislw` would.

    Parameters
    ----------
    fields : array (len(FIELDS), n)
        Block results concatenated along observations.
    n_samples : int
        Number of draws S of every block.

    Returns
    -------
    PsisLoo with ``log_weights=None`` (the S x n weights are never formed).

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> ll = rng.normal(-1.0, 0.1, (200, 5))
    >>> res = from_blocks(np.hstack([loo_block(ll[:, :2]), loo_block(ll[:, 2:], 2)]), 200)
    >>> res.elpd_loo.shape, res.log_weights is None
    ((5,), True)
    """
    f = np.asarray(fields, dtype=float)
    if f.ndim != 2 or f.shape[0] != len(FIELDS):
        raise ValueError(f"fields must have shape ({len(FIELDS)}, n), got {f.shape}")
    if n_samples < MIN_DRAWS:
        warnings.warn(
            f"only {n_samples} draws: the Pareto k diagnostic is unreliable below {MIN_DRAWS}",
            stacklevel=2,
        )
    values = dict(zip(FIELDS, f))
    failed = np.flatnonzero(np.isinf(values["pareto_k"]))
    if failed.size:
        warnings.warn(
            "the generalized Pareto distribution could not be fitted (fewer than 5 tail draws, "
            f"a constant tail or a failed fit) in {failed.size} column(s) "
            f"{_columns(failed, _WARN_COLUMNS)}; khat set to inf "
            "and the weights left unsmoothed",
            stacklevel=2,
        )
    return PsisLoo(
        **{k: v.copy() for k, v in values.items()},
        log_weights=None,
        good_k=pareto_k_threshold(n_samples),
        n_samples=int(n_samples),
    )
