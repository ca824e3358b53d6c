"""LOO expectations and LOO-PIT with the final weights of whichever estimator produced a row.

R loo's ``E_loo`` / ``loo_pit`` and arviz's ``loo_expectations`` / ``loo_pit``, array layer
first:

* `e_loo_rows(values, log_weights, kind, probs)` and `pit_rows(y, y_rep, log_weights)` take
  per-row draws and weights (each row may have its own draws: adaptive IS weighs
  transformed draws, MixIS mixture draws), with `e_loo_khat` (R loo's function-specific
  Pareto k-hat) per row;
* `loo_expectations(result, values, ...)` and `loo_pit(result, y, y_rep, ...)` take a
  `loo_adapt.loo` result: PSIS rows use its ``log_weights`` on the posterior draws; rows of
  other estimators use the draws and weights given in ``row_draws`` (``{i: (values_i,
  log_weights_i)}``), else they are NaN and ``reason`` says why.

Formulas (R loo 2.8 ``E_loo``): mean sum w x; variance sum w (x - m)^2 / (1 - sum w^2)
(the same as arviz's ESS correction); sd its root; quantiles by R's ``.wquant_i`` (linear
interpolation of the weighted ECDF; arviz-stats uses a Harrell-Davis-type weighted
quantile instead, so quantiles differ from arviz's by O(1/S)).  k-hat: the right-tail
k-hat of the importance ratios r, and for mean/var/sd also the two-tailed k-hat of h r
(h = x, x^2), the larger one, each on ``ceil(min(0.2 S, 3 sqrt(S / r_eff)))`` tail draws.
LOO-PIT: sum w [y_rep < y] + u sum w [y_rep = y] with u ~ U(0, 1) (randomised for discrete
outcomes, as arviz 1.x and R loo), which for continuous outcomes is arviz 0.x's
sum w [y_rep <= y].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from loo_adapt.core.psis import gpdfit, psis_tail_length

__all__ = ["LooExpectation", "LooPit", "e_loo_khat", "e_loo_rows", "pit_rows",
           "loo_expectations", "loo_pit", "KINDS"]

KINDS = ("mean", "var", "sd", "quantile")


@dataclass(frozen=True)
class LooExpectation:
    """LOO expectations per observation.

    Attributes
    ----------
    value : (n,) for mean/var/sd, (n, len(probs)) for quantiles; NaN where no weights.
    pareto_k : (n,) function-specific Pareto k-hat (R loo's ``E_loo`` diagnostic).
    method : (n,) estimator whose weights were used.
    reason : (n,) why a row is NaN ("" where it has a value).
    kind, probs : what was computed.
    """

    value: np.ndarray
    pareto_k: np.ndarray
    method: np.ndarray
    reason: np.ndarray
    kind: str
    probs: np.ndarray | None = None


@dataclass(frozen=True)
class LooPit:
    """LOO-PIT values per observation (``pit``), their k-hat, estimator and NaN reasons."""

    pit: np.ndarray
    pareto_k: np.ndarray
    method: np.ndarray
    reason: np.ndarray


# --------------------------------------------------------------------------- array layer
def _tail_khat(x: np.ndarray, tail_len: int) -> float:
    """posterior::pareto_khat(x, tail="right", ndraws_tail=tail_len)."""
    x = np.sort(np.asarray(x, dtype=float))
    s = x.size
    tail_len = int(min(tail_len, s - 1))
    if tail_len < 5:
        return np.nan
    tail = x[s - tail_len:]
    if tail[0] == tail[-1]:
        return np.nan
    return gpdfit(tail - x[s - tail_len - 1], sort_x=False)[0]


def e_loo_khat(values, log_ratios, kind: str = "mean", r_eff: float = 1.0) -> float:
    """R loo's function-specific Pareto k-hat of one LOO expectation.

    Parameters
    ----------
    values : (S,) draws of the quantity (posterior predictive draws).
    log_ratios : (S,) log importance ratios (raw, or the smoothed log weights as arviz uses
        when they are given).
    kind : "mean", "var", "sd" or "quantile".
    r_eff : relative efficiency (sets the tail length).

    Returns
    -------
    float
        max(k-hat of r (right tail), k-hat of h r (both tails)), h = x for the mean and x^2
        for var/sd; k-hat of r alone for quantiles and for constant, binary or non-finite h.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> k = e_loo_khat(rng.normal(size=4000), rng.normal(size=4000))
    >>> bool(k < 0.5)
    True
    """
    x = np.asarray(values, dtype=float).ravel()
    lr = np.asarray(log_ratios, dtype=float).ravel()
    if x.shape != lr.shape:
        raise ValueError(f"values have shape {x.shape}, log_ratios {lr.shape}")
    tail_len = int(psis_tail_length(x.size, r_eff))
    r = np.exp(lr - np.max(lr))
    k_r = _tail_khat(r, tail_len)
    if kind == "quantile":
        return k_r
    h = x if kind == "mean" else x**2
    if not np.all(np.isfinite(h)) or np.unique(h).size <= 2:
        return k_r
    hr = h * r
    k_hr = max(_tail_khat(hr, tail_len), _tail_khat(-hr, tail_len))
    ks = [k for k in (k_r, k_hr) if np.isfinite(k)]
    return max(ks) if ks else np.nan


def _weighted_quantile(x, w, probs):
    """R loo's ``.wquant_i``: linear interpolation of the weighted ECDF."""
    if np.all(w == w[0]):
        return np.quantile(x, probs)
    order = np.argsort(x, kind="stable")
    x, w = x[order], w[order]
    ww = np.cumsum(w)
    ww = ww / ww[-1]
    out = np.empty(len(probs))
    for j, p in enumerate(probs):
        wi = int(np.flatnonzero(ww >= p)[0]) if np.any(ww >= p) else x.size - 1
        if wi == 0:
            out[j] = x[0]
        else:
            w1, x1 = ww[wi - 1], x[wi - 1]
            out[j] = x1 + (x[wi] - x1) * (p - w1) / (ww[wi] - w1)
    return out


def _check_kind(kind, probs):
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if kind == "quantile":
        if probs is None:
            raise ValueError("kind='quantile' needs probs=, e.g. probs=[0.05, 0.5, 0.95]")
        probs = np.atleast_1d(np.asarray(probs, dtype=float))
        if np.any((probs < 0) | (probs > 1)):
            raise ValueError(f"probs must lie in [0, 1], got {probs}")
        return probs
    return None


def _one_row(x, lw, kind, probs):
    w = np.exp(lw - logsumexp(lw))
    if kind == "quantile":
        return _weighted_quantile(x, w, probs)
    mean = float(np.sum(w * x))
    if kind == "mean":
        return mean
    var = float(np.sum(w * (x - mean) ** 2) / (1.0 - np.sum(w**2)))
    return var if kind == "var" else float(np.sqrt(var))


def e_loo_rows(values, log_weights, kind: str = "mean", probs=None, *, log_ratios=None,
               r_eff=1.0):
    """LOO expectations of draws ``values`` under per-row normalised weights (R ``E_loo``).

    Parameters
    ----------
    values : (S, n) draws, or a list of n 1-D arrays (each row its own draws).
    log_weights : same layout: log importance weights (normalised or not).
    kind : "mean", "var", "sd" or "quantile".
    probs : quantile levels for ``kind="quantile"``.
    log_ratios : raw log ratios for the k-hat (default: ``log_weights``, as arviz does).
    r_eff : scalar or (n,) relative efficiency (tail length of the k-hat).

    Returns
    -------
    value, pareto_k : (n,) or (n, len(probs)), and (n,).

    Examples
    --------
    >>> x = np.array([[1.0], [2.0], [3.0], [4.0]])
    >>> v, k = e_loo_rows(x, np.log([[0.1], [0.2], [0.3], [0.4]]))
    >>> round(float(v[0]), 12)
    3.0
    """
    probs = _check_kind(kind, probs)
    cols_x = _columns(values, "values")
    cols_w = _columns(log_weights, "log_weights")
    cols_r = cols_w if log_ratios is None else _columns(log_ratios, "log_ratios")
    n = len(cols_x)
    if len(cols_w) != n or len(cols_r) != n:
        raise ValueError("values, log_weights and log_ratios must have the same observations")
    r_eff = np.broadcast_to(np.asarray(r_eff, dtype=float), (n,))
    out = np.full((n, len(probs)) if probs is not None else n, np.nan)
    khat = np.full(n, np.nan)
    for i in range(n):
        x, lw, lr = cols_x[i], cols_w[i], cols_r[i]
        if x.shape != lw.shape or lr.shape != lw.shape:
            raise ValueError(f"row {i}: values {x.shape} and log_weights {lw.shape} differ")
        if not np.all(np.isfinite(lw)) and not np.all(np.isnan(lw)):
            raise ValueError(f"row {i}: log_weights contain NaN/inf mixed with finite values")
        if np.isnan(lw).all():
            continue
        out[i] = _one_row(x, lw, kind, probs)
        khat[i] = e_loo_khat(x, lr, kind, r_eff[i])
    return out, khat


def _columns(a, name):
    if isinstance(a, (list, tuple)):
        return [np.asarray(c, dtype=float).ravel() for c in a]
    a = np.asarray(a, dtype=float)
    if a.ndim != 2:
        raise ValueError(f"{name} must be (draws, observations) or a list of 1-D rows, "
                         f"got shape {a.shape}")
    return [a[:, i] for i in range(a.shape[1])]


def pit_rows(y, y_rep, log_weights, *, seed=None):
    """LOO-PIT per row: sum w [y_rep < y] + u sum w [y_rep = y], u ~ U(0, 1).

    Parameters
    ----------
    y : (n,) observations.
    y_rep : (S, n) posterior predictive draws, or a list of n 1-D arrays.
    log_weights : same layout as ``y_rep``.
    seed : seed of the uniform draws that break ties (discrete outcomes).

    Returns
    -------
    ndarray
        (n,) PIT values in [0, 1]; NaN where the weights are NaN.

    Examples
    --------
    >>> float(pit_rows([2.5], np.array([[1.0], [2.0], [3.0], [4.0]]), np.zeros((4, 1)))[0])
    0.5
    """
    y = np.asarray(y, dtype=float).ravel()
    cols_y = _columns(y_rep, "y_rep")
    cols_w = _columns(log_weights, "log_weights")
    if not len(cols_y) == len(cols_w) == y.size:
        raise ValueError(f"y has {y.size} observations, y_rep {len(cols_y)}, "
                         f"log_weights {len(cols_w)}")
    u = np.random.default_rng(seed).uniform(size=y.size)
    out = np.full(y.size, np.nan)
    for i in range(y.size):
        lw = cols_w[i]
        if np.isnan(lw).all():
            continue
        if cols_y[i].shape != lw.shape:
            raise ValueError(f"row {i}: y_rep {cols_y[i].shape} and log_weights {lw.shape}")
        w = np.exp(lw - logsumexp(lw))
        below = float(np.sum(w[cols_y[i] < y[i]]))
        tie = float(np.sum(w[cols_y[i] == y[i]]))
        out[i] = min(1.0, below + u[i] * tie)
    return out


# --------------------------------------------------------------------------- result layer
def _obs_matrix(values, s):
    """(S, n) from (chains, draws, *obs) / (S, *obs) / (S, n) values."""
    v = np.asarray(values, dtype=float)
    if v.ndim >= 2 and v.shape[0] == s:
        return v.reshape(s, -1)
    if v.ndim >= 3 and v.shape[0] * v.shape[1] == s:
        return v.reshape(s, -1)
    raise ValueError(f"values have shape {v.shape}; expected (chains, draws, *obs) or "
                     f"({s}, n) matching the {s} posterior draws")


def _prepare(result, log_weights, values, row_draws):
    """Per-row draws and log weights from a loo_adapt result (or given log weights).

    Returns (values per row, log weights per row, method, reason, r_eff, rows given in
    ``row_draws``, number of posterior draws S); rows of estimators without weights on the
    posterior draws and not in ``row_draws`` keep NaN weights and get a reason.
    """
    from loo_adapt.evaluation.arviz import log_weights_matrix, pointwise_from_elpd_data
    from loo_adapt.result import PointwiseLoo

    if log_weights is None:
        log_weights = getattr(result, "log_weights", None)
    if log_weights is None:
        raise ValueError("no log weights: pass log_weights= (S, n), or a loo_adapt.loo "
                         "result computed with pointwise=True")
    lw = log_weights_matrix(log_weights)
    x = _obs_matrix(values, lw.shape[0])
    n = lw.shape[1]
    if x.shape[1] != n:
        raise ValueError(f"log_weights have {n} observations, the draws {x.shape[1]}")
    res = result if isinstance(result, PointwiseLoo) else pointwise_from_elpd_data(result)
    method = (np.full(n, "psis", dtype=object) if res is None
              else np.asarray(res.method, dtype=object).copy())
    reason = np.full(n, "", dtype=object)
    row_draws = dict(row_draws or {})
    cols_x = [x[:, i] for i in range(n)]
    cols_w = [lw[:, i] for i in range(n)]
    for i in range(n):
        if i in row_draws:
            cols_x[i] = np.asarray(row_draws[i][0], dtype=float).ravel()
            cols_w[i] = np.asarray(row_draws[i][1], dtype=float).ravel()
        elif np.isnan(lw[:, i]).all():
            reason[i] = (f"{method[i]}: no weights on the posterior draws (its draws are "
                         "its own); pass row_draws={i: (values_i, log_weights_i)}")
    r_eff = 1.0 if res is None else res.r_eff
    return cols_x, cols_w, method, reason, r_eff, set(row_draws), lw.shape[0]


def loo_expectations(result, values, *, kind: str = "mean", probs=None, log_weights=None,
                     row_draws=None, log_ratios=None):
    """LOO expectations E[h(y_rep_i) | y_-i] with the weights of each row's estimator.

    Parameters
    ----------
    result : a `loo_adapt.loo` result (its ``log_weights`` and ``.loo_adapt``), a
        `PointwiseLoo` (then give ``log_weights``), or None with ``log_weights``.
    values : posterior predictive draws (chains, draws, *obs) or (S, n), on the posterior
        draws the result's weights refer to.
    kind : "mean", "var", "sd" or "quantile".
    probs : quantile levels (``kind="quantile"``).
    log_weights : (S, n) or arviz-layout log weights overriding the result's.
    row_draws : {i: (values_i, log_weights_i)} for rows produced by estimators with their
        own draws (adapted, MixIS); these rows use them instead.
    log_ratios : raw (S, n) log ratios for the k-hat (R loo); default the weights.

    Returns
    -------
    LooExpectation
        Values, function-specific k-hat, estimator and NaN reason per row.

    Examples
    --------
    >>> import loo_adapt
    >>> ll = np.random.default_rng(0).normal(-1.0, 0.1, size=(2, 500, 3))
    >>> res = loo_adapt.loo(ll)
    >>> out = loo_expectations(res, np.ones((2, 500, 3)))
    >>> np.round(out.value, 6).tolist()
    [1.0, 1.0, 1.0]
    """
    probs = _check_kind(kind, probs)
    cols_x, cols_w, method, reason, r_eff, given, s = _prepare(result, log_weights, values,
                                                               row_draws)
    cols_r = list(cols_w)
    if log_ratios is not None:
        lr = _obs_matrix(log_ratios, s)
        cols_r = [cols_w[i] if i in given else lr[:, i] for i in range(len(cols_w))]
    value, khat = e_loo_rows(cols_x, cols_w, kind, probs, log_ratios=cols_r, r_eff=r_eff)
    return LooExpectation(value=value, pareto_k=khat, method=method, reason=reason,
                          kind=kind, probs=probs)


def loo_pit(result, y, y_rep, *, log_weights=None, row_draws=None, seed=None):
    """LOO probability integral transform with the weights of each row's estimator.

    Parameters
    ----------
    result : a `loo_adapt.loo` result, a `PointwiseLoo` (give ``log_weights``), or None.
    y : (n,) or obs-shaped observations.
    y_rep : posterior predictive draws (chains, draws, *obs) or (S, n).
    log_weights : overrides the result's log weights.
    row_draws : {i: (y_rep_i, log_weights_i)} for rows with their own draws.
    seed : seed of the tie-breaking uniforms (discrete y).

    Returns
    -------
    LooPit
        PIT values, k-hat of the weights (for the mean of the indicator), estimator and NaN
        reason per row.

    Examples
    --------
    >>> import loo_adapt
    >>> rng = np.random.default_rng(1)
    >>> ll = rng.normal(-1.0, 0.1, size=(2, 500, 3))
    >>> out = loo_pit(loo_adapt.loo(ll), np.zeros(3), rng.normal(size=(2, 500, 3)))
    >>> bool(np.all((out.pit > 0.3) & (out.pit < 0.7)))
    True
    """
    y = np.asarray(y, dtype=float).ravel()
    cols_y, cols_w, method, reason, r_eff, _, _ = _prepare(result, log_weights, y_rep,
                                                           row_draws)
    if len(cols_y) != y.size:
        raise ValueError(f"y has {y.size} observations, y_rep {len(cols_y)}")
    pit = pit_rows(y, cols_y, cols_w, seed=seed)
    ind = [(c <= yy).astype(float) for c, yy in zip(cols_y, y)]
    _, khat = e_loo_rows(ind, cols_w, "mean", r_eff=r_eff)
    return LooPit(pit=pit, pareto_k=khat, method=method, reason=reason)
