"""Binary outcomes: P(y_i = 1 | theta) from the Bernoulli log-likelihood of the observed y,
and the LOO probability P(y_i = 1 | y_-i) from importance weights (array functions)."""

from __future__ import annotations

import numpy as np

__all__ = ["bernoulli_log_p1", "loo_prob_from_log_lik", "moved_loo_prob"]


def bernoulli_log_p1(log_lik, y):
    """log P(y = 1 | theta) from the Bernoulli log-likelihood of the observed y.

    For y = 1 it is log_lik itself; for y = 0 it is log(1 - exp(log_lik)), computed as
    log(-expm1(log_lik)) which stays finite for log_lik near 0 down to the float limit.
    """
    ll = np.asarray(log_lik, dtype=np.float64)
    yv = np.asarray(y)
    if yv.shape != ll.shape[-1:]:
        raise ValueError(f"y has shape {yv.shape}, expected ({ll.shape[-1]},)")
    if not np.isin(yv, (0, 1)).all():
        raise ValueError("y must be binary (0/1)")
    fused = _log_p1_compiled(ll, yv)
    if fused is not None:
        return fused
    if (ll > 0).any():
        raise ValueError("a Bernoulli log-likelihood must be <= 0")
    out = ll.copy()
    zero = np.flatnonzero(yv == 0)  # only these columns need log(1 - p): the others are p
    if zero.size:
        with np.errstate(divide="ignore"):
            out[..., zero] = np.log(-np.expm1(ll[..., zero]))
    return out


def _log_p1_compiled(ll, y):
    """`bernoulli_log_p1` by the numba kernel (`loo_adapt.core._mixis_kernel`), or None where
    the numpy code runs: a cold start (`loo_adapt.core._compiled.use_numba`), or a value it
    must refuse (it raises)."""
    from loo_adapt.core._compiled import use_numba
    from loo_adapt.core._mixis_kernel import _OK, _bernoulli_log_p1

    if ll.ndim < 1 or ll.size == 0 or not use_numba(_bernoulli_log_p1, ll.size):
        return None
    flat = np.ascontiguousarray(ll.reshape(-1, ll.shape[-1]))
    out = np.empty_like(flat)
    if _bernoulli_log_p1(flat, np.ascontiguousarray(y, dtype=np.int64), out) != _OK:
        return None
    return out.reshape(ll.shape)


def loo_prob_from_log_lik(log_lik, log_weights, y, log_p1=None) -> np.ndarray:
    """P(y_i = 1 | y_-i) from the weights (normalised per observation): the Bernoulli
    likelihood of the observed y_i gives P(y_i = 1) at each draw (``log_p1``, when the
    caller has it: `bernoulli_log_p1` of ``log_lik`` and ``y``)."""
    if log_p1 is None:
        log_p1 = bernoulli_log_p1(log_lik, y)
    return np.sum(np.exp(log_weights + log_p1), axis=0)


def moved_loo_prob(loo_prob, y, rows, step):
    """P(y_i = 1 | y_-i) of ``rows`` after their elpd_i moved by ``-step``: the observed
    outcome's probability times exp(-step); as they were where the outcome is not a known
    0 / 1 (their probabilities are NaN there anyway, or the observed one is unknown).

    Examples
    --------
    >>> p = moved_loo_prob([0.8, 0.3, 0.5], [1, 0, 1], [0, 1], [0.1, 0.1])
    >>> np.round(p, 4).tolist()  # 0.8 exp(-0.1), 1 - 0.7 exp(-0.1)
    [0.7239, 0.3666]
    """
    if loo_prob is None:
        return None
    p1 = np.asarray(loo_prob, dtype=float)[rows]
    if y is None:
        return p1
    yr = np.asarray(y, dtype=float)[rows]
    shrink = np.exp(-np.asarray(step, dtype=float))
    out = np.where(yr == 1, p1 * shrink, p1)
    return np.where(yr == 0, 1.0 - (1.0 - p1) * shrink, out)
