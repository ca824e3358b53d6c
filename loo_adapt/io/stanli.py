"""stanli fits (the embedded NUTS sampler) -> `Draws`."""

from __future__ import annotations

import numpy as np

from loo_adapt.draws import Draws

from .columns import MCMC_STATS, assemble, select_columns

__all__ = ["read_stanli", "is_stanli_fit"]


def is_stanli_fit(obj) -> bool:
    """True for a ``stanli.Fit`` (checked without importing stanli)."""
    t = type(obj)
    return t.__name__ == "Fit" and t.__module__.split(".")[0] == "stanli"


def read_stanli(fit, *, var_names=None) -> Draws:
    """Read a ``stanli.Fit`` (NUTS): every draw it holds, so sample with save_warmup=False.

    Parameters
    ----------
    fit : stanli.Fit
    var_names : str or list of str, optional; None keeps every variable

    Returns
    -------
    Draws

    Examples
    --------
    >>> read_stanli(model.sample(chains=2, seed=1)).method  # doctest: +SKIP
    'mcmc'
    """
    values = np.asarray(fit.draws(), dtype=float)
    names = list(fit.names)
    try:
        from stanli import SAMPLER_COLUMNS as stat_names
    except ImportError:  # pragma: no cover - older stanli
        stat_names = MCMC_STATS
    stats = np.asarray(fit.sampler_stats, dtype=float)
    if stats.shape[:2] != values.shape[:2] or stats.shape[2] != len(stat_names):
        raise ValueError(
            f"stanli sampler_stats of shape {stats.shape} do not match draws {values.shape}"
        )
    cols = select_columns(names, var_names)
    draws = assemble(values, names, "mcmc", f"stanli.Fit (seed {getattr(fit, 'seed', '?')})",
                     cols=cols)
    draws.sample_stats.update({n: stats[:, :, i] for i, n in enumerate(stat_names)})
    return draws
