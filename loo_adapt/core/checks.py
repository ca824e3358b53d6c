"""Input checks of the array core: numeric log-likelihood draws as float64, refused with a
one-line error naming the array when they are not numeric, NaN or +inf.

Shape rules stay with the caller (an (S, n) matrix for MixIS, one observation's held-out
draws for a refit); what every log-likelihood array must satisfy is checked here once.
"""

from __future__ import annotations

import numpy as np

__all__ = ["as_log_lik_array"]


def as_log_lik_array(value, what: str = "log_lik", *, copy: bool = False) -> np.ndarray:
    """Log-likelihood draws as a float64 array, refusing non-numeric, NaN and +inf values.

    ``-inf`` (a zero likelihood at a draw) is allowed: it is a valid value, and the
    estimators that cannot take it refuse it themselves.

    Parameters
    ----------
    value : array_like (or an object with ``.values``, e.g. an xarray DataArray) of any shape.
    what : how to name the array in the error.
    copy : always return a new array (otherwise a float64 input is returned as is).

    Returns
    -------
    ndarray of float64, the shape of ``value``.

    Raises
    ------
    TypeError
        The dtype is not an integer or float type.
    ValueError
        The array contains NaN or +inf.

    Examples
    --------
    >>> as_log_lik_array([[-1, -2], [-0.5, -np.inf]])
    array([[-1. , -2. ],
           [-0.5, -inf]])
    >>> as_log_lik_array([-1.0, np.nan], "held-out log-likelihood")
    Traceback (most recent call last):
    ...
    ValueError: held-out log-likelihood contains NaN
    """
    arr = np.asarray(getattr(value, "values", value))
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"{what} must be a numeric array, got dtype {arr.dtype}")
    arr = arr.astype(np.float64, copy=copy)
    if np.isnan(arr).any():
        raise ValueError(f"{what} contains NaN")
    if np.isposinf(arr).any():
        raise ValueError(f"{what} contains +inf (a likelihood cannot be infinite)")
    return arr
