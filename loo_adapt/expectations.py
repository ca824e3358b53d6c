"""LOO expectations and LOO-PIT with the final weights of whichever estimator produced a row.

R loo's ``E_loo`` / ``loo_pit`` and arviz's ``loo_expectations`` / ``loo_pit``, array layer
first:

* `e_loo_rows(values, log_weights, kind, probs)` and `pit_rows(y, y_rep, log_weights)` take
  per-row draws and weights (each row may have its own draws: adaptive IS weighs
  transformed draws, MixIS mixture draws), with `e_loo_khat` (R loo's function-specific
  Pareto k-hat) per row;
* `loo_expectations(result, values, ...)` and `loo_pit(result, y, y_rep, ...)` take a
  `loo_adapt.loo` result: PSIS rows use its ``log_weights`` on the posterior draws; rows of
  other estimators use the `RowDraws` their estimator recorded (``result.loo_adapt.row_draws``:
  MixIS's mixture draws, when a variable is named, and for binary outcomes every
  estimator's P(y_i = 1 | theta) at its own draws), or the draws and weights given in
  ``row_draws`` (``{i: (values_i, log_weights_i)}``); otherwise they are NaN and
  ``reason`` names the fix.

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

from loo_adapt.advice import PROGRAM_CALL
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
               r_eff=1.0, split=None):
    """LOO expectations of draws ``values`` under per-row normalised weights (R ``E_loo``).

    Parameters
    ----------
    values : (S, n) draws, or a list of n 1-D arrays (each row its own draws).
    log_weights : same layout: log importance weights (normalised or not).
    kind : "mean", "var", "sd" or "quantile".
    probs : quantile levels for ``kind="quantile"``.
    log_ratios : raw log ratios for the k-hat (default: ``log_weights``, as arviz does).
    r_eff : scalar or (n,) relative efficiency (tail length of the k-hat).
    split : None, or (n,) ints: a row with ``split[i] = m > 0`` pools two independent
        samples (its first m draws and the rest; `loo_adapt.core.pool`), and its k-hat is
        the larger of the two samples' k-hats (the pooled estimate is as reliable as its
        worse part; one k-hat of the concatenation would fit a tail made of two samples).

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
    split = np.zeros(n, dtype=np.int64) if split is None else np.broadcast_to(
        np.asarray(split, dtype=np.int64), (n,))
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
        m = int(split[i])
        if 0 < m < x.size:
            khat[i] = max(e_loo_khat(x[:m], lr[:m], kind, r_eff[i]),
                          e_loo_khat(x[m:], lr[m:], kind, r_eff[i]))
        else:
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


#: what each kind of row needs when it gets no value (the fix is named in ``reason``)
_FIX = {
    "transformed": ("{m}: its weights are on transformed draws, where y_rep was not drawn: "
                    "rerun " + PROGRAM_CALL.replace("{", "{{").replace("}", "}}")
                    + " (MixIS keeps the mixture fit's y_rep) or pass "
                    "row_draws={{{i}: (values_i, log_weights_i)}}"),
    "mixture": ("{m}: its weights are on the mixture draws: pass the name of a variable in "
                "both the posterior and the mixture draws (e.g. y_rep='y_rep', draws=fit) or "
                "row_draws={{{i}: (values_i, log_weights_i)}}"),
    "pooled": ("{m}: its weights are on the posterior and the mixture draws: pass the name "
               "of a variable in both (e.g. y_rep='y_rep', draws=fit) or "
               "row_draws={{{i}: (values_i, log_weights_i)}}"),
    "refit": ("{m}: only the held-out log-likelihood of the refit is kept: pass "
              "row_draws={{{i}: (values_i, log_weights_i)}}"),
    None: ("{m}: no weights on the posterior draws (its draws are its own); pass "
           "row_draws={{{i}: (values_i, log_weights_i)}}"),
}


@dataclass
class _Rows:
    """Per-row draws and weights of a result (see `_prepare`)."""

    values: list
    log_weights: list
    log_ratios: list
    r_eff: np.ndarray
    method: np.ndarray
    reason: np.ndarray
    bernoulli: dict  # row -> (p1, P(y_i = 1 | y_-i) by `_row_prob`): its Bernoulli predictive
    n_draws: int  # S of the posterior draws
    split: np.ndarray  # pooled rows: the number of leading posterior draws, else 0


def _prepare(result, log_weights, values, row_draws, *, draws=None, binary=False):
    """Per-row draws and log weights of a loo_adapt result (or given log weights).

    ``values`` is an array on the posterior draws or the name of a variable (read from
    ``draws`` for the posterior rows and from the mixture fit for MixIS rows).  Rows in
    ``row_draws`` use those; plain PSIS rows the posterior weights; other rows their
    estimator's `RowDraws`: the named variable of the mixture draws, else, for a binary
    outcome (``binary``), the Bernoulli predictive of its ``p1`` and weights
    (listed in ``bernoulli``); rows with none get NaN weights and a reason naming the fix.
    """
    from loo_adapt.evaluation.arviz import log_weights_matrix, pointwise_from_elpd_data
    from loo_adapt.result import PointwiseLoo

    if log_weights is None:
        log_weights = getattr(result, "log_weights", None)
    if log_weights is None:
        raise ValueError("no log weights: pass log_weights= (S, n), or a loo_adapt.loo "
                         "result computed with pointwise=True")
    lw = log_weights_matrix(log_weights)
    s, n = lw.shape
    name = values if isinstance(values, str) else None
    if name is None:
        x = _obs_matrix(values, s)
    elif draws is not None:
        from loo_adapt.io import read_draws

        x = _obs_matrix(read_draws(draws)[name], s)
    else:
        x = None  # posterior rows need draws= to read the variable
    if x is not None and x.shape[1] != n:
        raise ValueError(f"log_weights have {n} observations, the draws {x.shape[1]}")
    res = result if isinstance(result, PointwiseLoo) else pointwise_from_elpd_data(result)
    method = (np.full(n, "psis", dtype=object) if res is None
              else np.asarray(res.method, dtype=object).copy())
    records = [None] * n if res is None else list(res.row_draws)
    r_eff = np.broadcast_to(np.asarray(1.0 if res is None else res.r_eff, dtype=float),
                            (n,)).copy()
    reason = np.full(n, "", dtype=object)
    row_draws = dict(row_draws or {})
    nan = np.full(1, np.nan)
    out = _Rows([nan] * n, [nan] * n, [nan] * n, r_eff, method, reason, {}, s,
                np.zeros(n, dtype=np.int64))
    for i in range(n):
        rec = records[i]
        if i in row_draws:
            x_i = np.asarray(row_draws[i][0], dtype=float).ravel()
            lw_i = np.asarray(row_draws[i][1], dtype=float).ravel()
            out.values[i], out.log_weights[i], out.log_ratios[i] = x_i, lw_i, lw_i
        elif not np.isnan(lw[:, i]).all():
            if x is None:
                reason[i] = (f"{method[i]}: y_rep={name!r} names a variable: pass draws= "
                             "(the posterior draws) to read it")
                continue
            out.values[i], out.log_weights[i], out.log_ratios[i] = x[:, i], lw[:, i], None
        elif (rec is not None and name is not None and rec.draws is not None
              and name in rec.draws.variables and (rec.posterior is None or x is not None)):
            own = rec.draws.flat(name).reshape(rec.log_weights.size, -1)[:, rec.column]
            if rec.posterior is not None:  # pooled: the posterior draws, then the mixture's
                own = np.concatenate([x[:, i], own])
            out.values[i] = own
            out.log_weights[i] = out.log_ratios[i] = rec.all_weights()[0]
        elif rec is not None and rec.p1 is not None and binary:
            lw_i, p1_i = rec.all_weights()
            out.bernoulli[i] = (p1_i, _row_prob(res, i, lw_i, p1_i))
            out.log_weights[i] = out.log_ratios[i] = lw_i
            out.values[i] = np.asarray(p1_i, dtype=float)
        else:
            reason[i] = _FIX[None if rec is None else rec.source].format(m=method[i], i=i)
        if i not in row_draws and rec is not None and rec.posterior is not None:
            out.split[i] = rec.posterior.log_weights.size
        if (i not in row_draws and rec is not None
                and rec.source in ("mixture", "refit", "pooled")):
            r_eff[i] = 1.0  # tail length of the k-hat: the record's draws, not the posterior's
    return out


def _is_binary(a) -> bool:
    a = np.asarray(a, dtype=float)
    return bool(a.size and np.isin(a, (0.0, 1.0)).all())


def _row_prob(res, i, lw_i, p1_i) -> float:
    """The row's own P(y_i = 1 | y_-i) in [0, 1]: its ``loo_prob`` (its weights' estimate,
    with what the estimator did to its elpd_i after weighting: a bias correction, a move of
    kept rows), or where the result has none the weights' sum_s w_s P(y_i = 1 | theta_s)."""
    prob = None if res is None else getattr(res, "loo_prob", None)
    if prob is None or not np.isfinite(prob[i]):
        p = float(np.sum(np.exp(lw_i) * p1_i))
    else:
        p = float(prob[i])
    return min(max(p, 0.0), 1.0)


def _bernoulli_expectation(p, kind, probs):
    """Mean, variance, sd or quantiles of Bernoulli(p) (the exact predictive of a binary
    outcome whose P(y = 1) is p)."""
    if kind == "mean":
        return p
    if kind == "var":
        return p * (1.0 - p)
    if kind == "sd":
        return float(np.sqrt(p * (1.0 - p)))
    return np.where(probs <= 1.0 - p, 0.0, 1.0)  # smallest x with F(x) >= prob


def loo_expectations(result, values, *, kind: str = "mean", probs=None, log_weights=None,
                     row_draws=None, log_ratios=None, draws=None):
    """LOO expectations E[h(y_rep_i) | y_-i] with the weights of each row's estimator.

    What each row gets (``method``):

    * plain PSIS rows: ``values`` under the posterior PSIS weights (R ``E_loo``);
    * MixIS rows: when ``values`` names a variable (``values="y_rep"``) that the posterior
      draws (``draws=``) and the mixture fit both hold, that variable under the MixIS
      weights on the mixture draws (any outcome, any ``kind``);
    * every estimator (adaptive IS, moment matching, MixIS, refits) for a binary outcome
      (``values`` all 0/1, taken to be draws of y_rep): the Bernoulli predictive with
      P(y_i = 1 | y_-i) the row's ``loo_prob``: sum_s w_s P(y_i = 1 | theta_s) from the
      estimator's own draws and final weights, moved with its elpd_i where the estimator
      moved that (MixIS's bias correction, kept rows' moves) (var p(1 - p); quantiles
      0 or 1);
    * otherwise (adaptive IS or moment matching with a continuous outcome: y_rep was not
      drawn at the transformed draws) NaN, with a ``reason`` naming the fix
      (``estimator="mixis"`` or ``row_draws=``).

    Parameters
    ----------
    result : a `loo_adapt.loo` result (its ``log_weights`` and ``.loo_adapt``), a
        `PointwiseLoo` (then give ``log_weights``), or None with ``log_weights``.
    values : posterior predictive draws (chains, draws, *obs) or (S, n), on the posterior
        draws the result's weights refer to; or the name of a variable of ``draws`` (and of
        the mixture fit).
    kind : "mean", "var", "sd" or "quantile".
    probs : quantile levels (``kind="quantile"``).
    log_weights : (S, n) or arviz-layout log weights overriding the result's.
    row_draws : {i: (values_i, log_weights_i)} for rows produced by estimators with their
        own draws; these rows use them instead.
    log_ratios : raw (S, n) log ratios for the k-hat of the PSIS rows (R loo); default the
        weights.
    draws : the posterior draws (any input of `loo_adapt.read_draws`) when ``values`` is a
        variable name.

    Returns
    -------
    LooExpectation
        Values, function-specific k-hat (on each row's own weights; for Bernoulli rows of
        P(y_i = 1 | theta)), estimator and NaN reason per row.

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
    binary = not isinstance(values, str) and _is_binary(values)
    rows = _prepare(result, log_weights, values, row_draws, draws=draws, binary=binary)
    lr = None if log_ratios is None else _obs_matrix(log_ratios, rows.n_draws)
    cols_r = [r if r is not None else w if lr is None else lr[:, i]
              for i, (r, w) in enumerate(zip(rows.log_ratios, rows.log_weights))]
    value, khat = e_loo_rows(rows.values, rows.log_weights, kind, probs, log_ratios=cols_r,
                             r_eff=rows.r_eff, split=rows.split)
    for i, (_, p) in rows.bernoulli.items():
        value[i] = _bernoulli_expectation(p, kind, probs)
    _warn_nan_rows(value, rows.reason, "loo_expectations")
    return LooExpectation(value=value, pareto_k=khat, method=rows.method, reason=rows.reason,
                          kind=kind, probs=probs)


def _warn_nan_rows(values, reason, verb: str) -> None:
    """Never a silent NaN: say how many rows got none and the fix the first one names."""
    v = np.asarray(values, dtype=float)
    bad = np.flatnonzero(np.isnan(v.reshape(v.shape[0], -1)).any(axis=1)) if v.size else []
    if len(bad) == 0:
        return
    import warnings

    from loo_adapt.result import observation_label

    first = next((str(reason[i]) for i in bad if str(reason[i])), "")
    warnings.warn(f"{verb}: {len(bad)} of {v.shape[0]} rows have no value (NaN): "
                  f"{observation_label(bad)}; {first or 'their weights are NaN'}. For a binary "
                  "outcome pass y= to loo() (or a program whose data holds y), so every "
                  "estimator keeps P(y_i = 1) at its own draws", UserWarning, stacklevel=3)


def loo_pit(result, y, y_rep, *, log_weights=None, row_draws=None, seed=None, draws=None):
    """LOO probability integral transform with the weights of each row's estimator.

    What each row gets (``method``):

    * plain PSIS rows: ``y_rep`` under the posterior PSIS weights;
    * MixIS rows: when ``y_rep`` names a variable (``y_rep="y_rep"``) that the posterior
      draws (``draws=``) and the mixture fit both hold, that variable under the MixIS
      weights on the mixture draws (any outcome);
    * every estimator (adaptive IS, moment matching, MixIS, refits) for a binary outcome
      (``y`` all 0/1): the randomised PIT of the Bernoulli predictive, (1 - p) [y = 1] +
      u P(y_rep = y) with p the row's ``loo_prob`` (sum_s w_s P(y_i = 1 | theta_s) on the
      estimator's own draws and final weights, moved with its elpd_i), and the same
      uniform u as the PSIS rows (one per row from ``seed``);
    * otherwise (adaptive IS or moment matching with a continuous outcome) NaN, with a
      ``reason`` naming the fix (``estimator="mixis"`` or ``row_draws=``).

    Parameters
    ----------
    result : a `loo_adapt.loo` result, a `PointwiseLoo` (give ``log_weights``), or None.
    y : (n,) or obs-shaped observations.
    y_rep : posterior predictive draws (chains, draws, *obs) or (S, n); or the name of a
        variable of ``draws`` (and of the mixture fit).
    log_weights : overrides the result's log weights.
    row_draws : {i: (y_rep_i, log_weights_i)} for rows with their own draws.
    seed : seed of the tie-breaking uniforms (discrete y).
    draws : the posterior draws (any input of `loo_adapt.read_draws`) when ``y_rep`` is a
        variable name.

    Returns
    -------
    LooPit
        PIT values, k-hat of each row's own weights (for the mean of the indicator; for
        Bernoulli rows of P(y_i = 1 | theta)), estimator and NaN reason per row.

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
    rows = _prepare(result, log_weights, y_rep, row_draws, draws=draws, binary=_is_binary(y))
    if len(rows.values) != y.size:
        raise ValueError(f"y has {y.size} observations, y_rep {len(rows.values)}")
    cols_y, cols_w = list(rows.values), list(rows.log_weights)
    ind = [(c <= yy).astype(float) for c, yy in zip(cols_y, y)]
    for i, (p1_i, p) in rows.bernoulli.items():
        # the Bernoulli predictive as two weighted points: the same randomisation as draws
        ind[i] = np.asarray(p1_i, dtype=float)
        with np.errstate(divide="ignore"):
            cols_y[i], cols_w[i] = np.array([0.0, 1.0]), np.log([1.0 - p, p])
    pit = pit_rows(y, cols_y, cols_w, seed=seed)
    _warn_nan_rows(pit, rows.reason, "loo_pit")
    lr = [w if r is None else r for r, w in zip(rows.log_ratios, rows.log_weights)]
    _, khat = e_loo_rows(ind, rows.log_weights, "mean", log_ratios=lr, r_eff=rows.r_eff,
                         split=rows.split)
    return LooPit(pit=pit, pareto_k=khat, method=rows.method, reason=rows.reason)
