"""``logsumexp`` over an axis in plain numpy (array core).

The same numbers as ``scipy.special.logsumexp`` for real input without ``b`` (shift by the
finite maximum; a slice that is all -inf gives -inf, one holding +inf gives +inf, NaN
propagates), without scipy's array-API dispatch, which costs more than the arithmetic on
the (draws, observations) arrays the estimators reduce many times per call.
"""

from __future__ import annotations

import numpy as np

__all__ = ["logsumexp"]


def logsumexp(a, axis=None, keepdims: bool = False):
    """``log(sum(exp(a), axis))``, computed without overflow.

    Parameters
    ----------
    a : array_like of real numbers.
    axis : int, tuple of ints or None (all axes).
    keepdims : keep the reduced axes with length one.

    Returns
    -------
    ndarray (a float for ``axis=None`` without ``keepdims``).

    Examples
    --------
    >>> float(logsumexp([1000.0, 1000.0]))  # doctest: +ELLIPSIS
    1000.693147...
    >>> logsumexp([[-np.inf, -np.inf], [0.0, 0.0]], axis=1).tolist()  # doctest: +ELLIPSIS
    [-inf, 0.693147...]
    """
    a = np.asarray(a, dtype=np.float64)
    mx = np.max(a, axis=axis, keepdims=True)
    shift = np.where(np.isfinite(mx), mx, 0.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        e = np.subtract(a, shift)
        if isinstance(e, np.ndarray) and e.ndim:
            np.exp(e, out=e)  # in place: a second (S, n) temporary costs more than the exp
        else:
            e = np.exp(e)
        out = np.log(np.sum(e, axis=axis, keepdims=True)) + shift
    if not keepdims:
        out = np.squeeze(out, axis=axis) if axis is not None else out.reshape(())
    return out[()] if out.ndim == 0 else out
