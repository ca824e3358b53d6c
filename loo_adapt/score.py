"""LOO CRPS and SCRPS with the draws and weights of whichever estimator produced a row.

R loo's ``loo_crps`` / ``loo_scrps`` and arviz's ``loo_score``.  Both scores are
maximised (larger is better), as in R loo and arviz:

    CRPS_i  = 0.5 E|X - X'| - E|X - y_i|
    SCRPS_i = -E|X - y_i| / E|X - X'| - 0.5 log E|X - X'|

with X, X' independent draws of the LOO predictive of y_i.  E|X - y_i| is the row's weighted
mean of |y_rep - y_i| (R's ``E_loo``).  E|X - X'| is, by default, the exact weighted
double sum sum_s sum_t w_s w_t |x_s - x_t| over the row's own draws (in O(S log S) by
sorting: arviz-stats' probability-weighted-moment form); with ``y_rep2`` (a second,
independent set of predictive draws) it is R loo's Monte Carlo estimate instead: the pairs
(x_s, x2_pi(s)) for one random permutation pi, weighted by PSIS of the joint log ratios
``-log_lik - log_lik[pi]`` (with ``log_lik``; else the product of the row's two weights).

Rows are handled as in `loo_adapt.expectations` (the same per-row draws and weights, from
``result.loo_adapt.row_draws``): PSIS rows use ``y_rep`` under the posterior PSIS weights;
MixIS (and pooled MixIS + PSIS) rows the named variable of the mixture fit; for a binary y
every estimator's Bernoulli predictive P(y_i = 1) = sum_s w_s P(y_i = 1 | theta_s)
(closed form: E|X - y| = 1 - p or p, E|X - X'| = 2 p (1 - p)); other rows have no score
and a ``reason``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from loo_adapt.expectations import _is_binary, _obs_matrix, _prepare, e_loo_rows

__all__ = ["LooScore", "loo_score", "crps_rows", "weighted_abs_diff"]

KINDS = ("crps", "scrps")


@dataclass(frozen=True)
class LooScore:
    """CRPS or SCRPS of LOO predictions (larger is better).

    Attributes
    ----------
    mean : mean of ``pointwise`` over the rows that have a score (R's ``Estimate``).
    se : its standard error, sd(pointwise) / sqrt(n) with the n - 1 variance (R's ``SE``;
        arviz's uses the n variance: ``se * sqrt((n - 1) / n)``).
    pointwise : (n,) score per observation; NaN where ``reason`` says why.
    pareto_k : (n,) function-specific k-hat of E|X - y_i| on the row's weights.
    method : (n,) estimator whose draws and weights were used.
    reason : (n,) why a row has no score ("" where it has one).
    kind : "crps" or "scrps".
    """

    mean: float
    se: float
    pointwise: np.ndarray
    pareto_k: np.ndarray
    method: np.ndarray
    reason: np.ndarray
    kind: str


def weighted_abs_diff(x, log_weights) -> float:
    """E|X - X'| for X, X' independent with the weighted draws (x, w): the exact double sum
    sum_s sum_t w_s w_t |x_s - x_t|.

    Parameters
    ----------
    x : (S,) draws.
    log_weights : (S,) log weights (normalised here).

    Returns
    -------
    float

    Examples
    --------
    >>> round(weighted_abs_diff(np.array([0.0, 1.0]), np.log([0.5, 0.5])), 12)
    0.5
    """
    x = np.asarray(x, dtype=float).ravel()
    lw = np.asarray(log_weights, dtype=float).ravel()
    w = np.exp(lw - logsumexp(lw))
    order = np.argsort(x, kind="mergesort")
    xs, ws = x[order], w[order]
    below = np.cumsum(ws) - ws  # weight strictly before each sorted draw
    # sum_{s,t} w_s w_t |x_s - x_t| = 2 sum_s w_s x_s (2 F(x_s-) + w_s - 1)
    return float(max(2.0 * np.sum(ws * xs * (2.0 * below + ws - 1.0)), 0.0))


def _score(exy, exx, kind):
    if kind == "crps":
        return 0.5 * exx - exy
    with np.errstate(divide="ignore", invalid="ignore"):
        return -exy / exx - 0.5 * np.log(exx)


def crps_rows(y, y_rep, log_weights, *, kind: str = "crps", y_rep2=None,
              pair_log_weights=None):
    """CRPS or SCRPS per row from per-row draws and weights (the array layer).

    Parameters
    ----------
    y : (n,) observations.
    y_rep : (S, n) predictive draws, or a list of n 1-D arrays (each row its own draws).
    log_weights : same layout: log weights of the draws (normalised here).
    kind : "crps" or "scrps".
    y_rep2 : optional second draws, same layout, paired draw by draw with ``y_rep``: then
        E|X - X'| is the weighted mean of |y_rep - y_rep2| (R loo's estimate).
    pair_log_weights : log weights of the pairs (default ``log_weights``).

    Returns
    -------
    ndarray
        (n,) scores; NaN where the weights are NaN.

    Examples
    --------
    >>> x = np.array([[0.0], [1.0]])
    >>> crps_rows([0.0], x, np.log([[0.5], [0.5]])).round(12).tolist()
    [-0.25]
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    y = np.asarray(y, dtype=float).ravel()
    cols_x = _cols(y_rep)
    cols_w = _cols(log_weights)
    cols_x2 = None if y_rep2 is None else _cols(y_rep2)
    cols_pw = cols_w if pair_log_weights is None else _cols(pair_log_weights)
    if not len(cols_x) == len(cols_w) == y.size:
        raise ValueError(f"y has {y.size} observations, y_rep {len(cols_x)}, "
                         f"log_weights {len(cols_w)}")
    out = np.full(y.size, np.nan)
    for i in range(y.size):
        x, lw = cols_x[i], cols_w[i]
        if np.isnan(lw).all():
            continue
        if x.shape != lw.shape:
            raise ValueError(f"row {i}: y_rep {x.shape} and log_weights {lw.shape} differ")
        w = np.exp(lw - logsumexp(lw))
        exy = float(np.sum(w * np.abs(x - y[i])))
        if cols_x2 is None:
            exx = weighted_abs_diff(x, lw)
        else:
            pw = cols_pw[i]
            wp = np.exp(pw - logsumexp(pw))
            exx = float(np.sum(wp * np.abs(x - cols_x2[i])))
        out[i] = _score(exy, exx, kind)
    return out


def _cols(a):
    if isinstance(a, (list, tuple)):
        return [np.asarray(c, dtype=float).ravel() for c in a]
    a = np.asarray(a, dtype=float)
    if a.ndim != 2:
        raise ValueError(f"expected (draws, observations) or a list of rows, got {a.shape}")
    return [a[:, i] for i in range(a.shape[1])]


def loo_score(result, y, y_rep, *, kind: str = "crps", log_weights=None, row_draws=None,
              draws=None, y_rep2=None, log_lik=None, permutation=None, seed=None,
              r_eff=1.0) -> LooScore:
    """LOO CRPS or SCRPS with the draws and weights of each row's estimator.

    Parameters
    ----------
    result : a `loo_adapt.loo` result (its ``log_weights`` and ``.loo_adapt``), a
        `PointwiseLoo` with ``log_weights``, or None with ``log_weights``.
    y : (n,) or obs-shaped observations.
    y_rep : posterior predictive draws (chains, draws, *obs) or (S, n) on the posterior draws,
        or the name of a variable of ``draws`` (and of the mixture fit, for MixIS rows).
    kind : "crps" or "scrps".
    log_weights : overrides the result's log weights.
    row_draws : {i: (y_rep_i, log_weights_i)} for rows with their own draws.
    draws : the posterior draws when ``y_rep`` is a variable name.
    y_rep2 : R loo's estimator of E|X - X'| for the rows on the posterior draws: a second,
        independent set of predictive draws like ``y_rep`` (array), paired with ``y_rep``
        through ``permutation`` (default: a random one from ``seed``, as R's
        ``sample(1:S)``).  Other rows use the exact double sum.
    log_lik : (chains, draws, *obs) or (S, n) pointwise log-likelihood; with ``y_rep2`` the
        pairs are weighted by PSIS of ``-log_lik - log_lik[permutation]`` (R loo); without
        it by the product of the row's PSIS weights.
    permutation : (S,) 0-based permutation of the draws for ``y_rep2``.
    seed : seed of the permutation when it is not given.
    r_eff : relative efficiency for the joint PSIS (R loo's default 1).

    Returns
    -------
    LooScore

    Warns
    -----
    UserWarning
        When some rows have no score (their reason is in ``reason``); ``mean`` and ``se``
        are then over the others.

    Examples
    --------
    >>> import loo_adapt
    >>> rng = np.random.default_rng(0)
    >>> ll = rng.normal(-1.0, 0.1, size=(2, 500, 3))
    >>> s = loo_score(loo_adapt.loo(ll), np.zeros(3), rng.normal(size=(2, 500, 3)))
    >>> bool(np.all(s.pointwise < 0)), s.kind
    (True, 'crps')
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    y = np.asarray(y, dtype=float).ravel()
    if not np.all(np.isfinite(y)):
        raise ValueError("y must be finite")
    rows = _prepare(result, log_weights, y_rep, row_draws, draws=draws, binary=_is_binary(y))
    n = len(rows.values)
    if n != y.size:
        raise ValueError(f"y has {y.size} observations, y_rep {n}")
    values, lws = list(rows.values), list(rows.log_weights)
    for i, v in enumerate(values):
        if not np.isnan(lws[i]).all() and not np.all(np.isfinite(v)):
            raise ValueError(f"row {i}: y_rep has NaN or infinite draws")
    score = np.full(n, np.nan)
    exy_cols = [np.abs(v - yy) for v, yy in zip(values, y)]
    # function-specific k-hat of E|X - y| on each row's own weights (R's E_loo diagnostic)
    lr = [w if r is None else r for r, w in zip(rows.log_ratios, rows.log_weights)]
    _, khat = e_loo_rows(exy_cols, lws, "mean", log_ratios=lr, r_eff=rows.r_eff,
                         split=rows.split)
    pairs = None
    if y_rep2 is not None:
        pairs = _pairs(y_rep2, rows, log_lik, permutation, seed, r_eff)
    for i in range(n):
        if i in rows.bernoulli:
            p = rows.bernoulli[i][1]
            exy = 1.0 - p if y[i] == 1.0 else p
            score[i] = _score(exy, 2.0 * p * (1.0 - p), kind)
            continue
        if np.isnan(lws[i]).all():
            continue
        if pairs is not None and rows.log_ratios[i] is None:  # a row on the posterior draws
            x2, pw = pairs
            score[i] = crps_rows(y[i:i + 1], [values[i]], [lws[i]], kind=kind,
                                 y_rep2=[x2[:, i]], pair_log_weights=[pw[:, i]])[0]
        else:
            score[i] = crps_rows(y[i:i + 1], [values[i]], [lws[i]], kind=kind)[0]
    ok = np.isfinite(score)
    if not ok.all():
        missing = np.flatnonzero(~ok)
        why = "; ".join(dict.fromkeys(str(rows.reason[i]) for i in missing if rows.reason[i]))
        warnings.warn(f"{missing.size} of {n} observations have no {kind.upper()} and are "
                      f"left out of the mean: {why or 'non-finite score'}", UserWarning,
                      stacklevel=2)
    m = int(ok.sum())
    mean = float(np.mean(score[ok])) if m else np.nan
    se = float(np.std(score[ok], ddof=1) / np.sqrt(m)) if m > 1 else np.nan
    return LooScore(mean=mean, se=se, pointwise=score, pareto_k=khat, method=rows.method,
                    reason=rows.reason, kind=kind)


def _pairs(y_rep2, rows, log_lik, permutation, seed, r_eff):
    """(x2[perm], pair log weights) on the posterior draws, (S, n) each."""
    s = rows.n_draws
    x2 = _obs_matrix(y_rep2, s)
    perm = (np.random.default_rng(seed).permutation(s) if permutation is None
            else np.asarray(permutation, dtype=np.int64))
    if perm.shape != (s,) or not np.array_equal(np.sort(perm), np.arange(s)):
        raise ValueError(f"permutation must be a permutation of the {s} draws (0-based)")
    if log_lik is not None:
        from loo_adapt.core.psis import psislw

        ll = _obs_matrix(log_lik, s)
        pw, _ = psislw(-ll - ll[perm], r_eff=r_eff)
    else:
        lw = np.full((s, x2.shape[1]), np.nan)
        for i, (r, w) in enumerate(zip(rows.log_ratios, rows.log_weights)):
            if r is None and w.size == s:
                lw[:, i] = w
        pw = lw + lw[perm]
    return x2[perm], pw
