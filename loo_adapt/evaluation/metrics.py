"""Classification metrics of LOO predictive probabilities (array core: numpy in, numpy out).

Every function takes the observed binary outcomes ``y`` (0/1) and the LOO predictive
probabilities ``p`` = P(y_i = 1 | y_-i) and returns plain floats / numpy arrays.

Conventions
-----------
* AUROC is Eq. 8 of the paper (the Mann-Whitney form of the area under the ROC curve) with
  ties between a positive and a negative counted as one half, as scikit-learn does.  Eq. 8 as
  printed counts only strict inequalities; with continuous LOO probabilities ties have
  probability zero, and the half rule keeps ``auroc(1 - y, p) == 1 - auroc(y, p)`` exact.
* ROC and precision-recall curves, average precision, the calibration curve, the Brier score
  and the log score follow scikit-learn's definitions exactly (average precision is the
  step-wise sum ``sum_k (R_k - R_{k-1}) P_k``, not the trapezoid rule).
* Weighted versions (``sample_weight``) are the ones the Bayesian bootstrap needs; a
  weight multiplies the observation's contribution everywhere (sklearn semantics).
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.special import expit, ndtri
from scipy.stats import rankdata

__all__ = [
    "looic",
    "auroc",
    "roc_curve",
    "precision_recall_curve",
    "average_precision",
    "brier_score",
    "log_score",
    "calibration_curve",
    "expected_calibration_error",
    "delong_se",
    "bayesian_bootstrap",
    "mc_error_of_probabilities",
    "classification_report",
]

# Bootstrap replicates are processed in chunks so that a (chunk, n) weight matrix stays
# around 32 MB whatever n is.
_CHUNK_ELEMENTS = 4_000_000


# --------------------------------------------------------------------------- validation
def _as_1d_float(x, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.bool_)
    ):
        raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}")
    if np.iscomplexobj(arr):
        raise TypeError(f"{name} must be real, got a complex array")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    return arr.astype(np.float64)


def _check_y(y, *, both_classes: bool = True) -> np.ndarray:
    y = _as_1d_float(y, "y")
    if y.size == 0:
        raise ValueError("y is empty")
    if not np.all(np.isfinite(y)):
        raise ValueError("y contains NaN or infinite values")
    bad = (y != 0.0) & (y != 1.0)
    if np.any(bad):
        raise ValueError(
            f"y must contain only 0 and 1; found {np.unique(y[bad])[:5]} "
            f"({int(bad.sum())} invalid entries)"
        )
    if both_classes:
        n_pos = int(y.sum())
        if n_pos == 0 or n_pos == y.size:
            raise ValueError(
                f"y must contain both classes; got {n_pos} positives out of {y.size}"
            )
    return y


def _check_p(p, n: int, name: str = "p") -> np.ndarray:
    p = _as_1d_float(p, name)
    if p.size != n:
        raise ValueError(f"{name} has length {p.size} but y has length {n}")
    if not np.all(np.isfinite(p)):
        raise ValueError(f"{name} contains {int((~np.isfinite(p)).sum())} NaN/inf values")
    if np.any((p < 0.0) | (p > 1.0)):
        raise ValueError(
            f"{name} must lie in [0, 1]; range is [{p.min():.6g}, {p.max():.6g}]"
        )
    return p


def _check_weight(sample_weight, y: np.ndarray) -> np.ndarray | None:
    if sample_weight is None:
        return None
    w = _as_1d_float(sample_weight, "sample_weight")
    if w.size != y.size:
        raise ValueError(f"sample_weight has length {w.size} but y has length {y.size}")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("sample_weight must be finite and non-negative")
    if np.sum(w * y) <= 0 or np.sum(w * (1 - y)) <= 0:
        raise ValueError("sample_weight must give positive total weight to both classes")
    return w


def _check(y, p, sample_weight=None):
    y = _check_y(y)
    p = _check_p(p, y.size)
    return y, p, _check_weight(sample_weight, y)


# --------------------------------------------------------------------------- LOO-IC
def looic(elpd_i) -> tuple[float, float]:
    """LOO information criterion -2 * sum(elpd_i) and its standard error.

    The SE is 2 * sqrt(n * var(elpd_i)) with the n - 1 variance, as R ``loo`` and
    ``PointwiseLoo.estimates`` compute it (arviz uses the n variance).

    Parameters
    ----------
    elpd_i : (n,) pointwise elpd_loo, n >= 2, finite.

    Returns
    -------
    (looic, se) : tuple of float

    Examples
    --------
    >>> looic([-1.0, -2.0, -0.5])
    (7.0, 2.6457513110645903)
    """
    e = _as_1d_float(elpd_i, "elpd_i")
    if e.size < 2:
        raise ValueError(f"need at least 2 pointwise values for an SE, got {e.size}")
    if not np.all(np.isfinite(e)):
        raise ValueError(f"elpd_i contains {int((~np.isfinite(e)).sum())} non-finite values")
    return float(-2.0 * e.sum()), float(2.0 * np.sqrt(e.size * np.var(e, ddof=1)))


# --------------------------------------------------------------------------- AUROC
def _auroc_weighted_batch(y: np.ndarray, p: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Weighted Mann-Whitney AUROC for each row of the weight matrix W (B, n)."""
    order = np.argsort(p, kind="stable")
    ps, ys, Ws = p[order], y[order], W[:, order]
    starts = np.r_[0, np.flatnonzero(np.diff(ps)) + 1]
    # Tie groups: a positive beats every negative in lower groups, and half of its own group.
    w0 = np.add.reduceat(Ws * (1.0 - ys), starts, axis=1)
    w1 = np.add.reduceat(Ws * ys, starts, axis=1)
    below0 = np.cumsum(w0, axis=1) - w0
    num = np.sum(w1 * (below0 + 0.5 * w0), axis=1)
    return num / (w0.sum(axis=1) * w1.sum(axis=1))


def auroc(y, p, *, sample_weight=None) -> float:
    """LOO-AUROC, Eq. 8 of the paper: P(p_pos > p_neg) + 0.5 P(p_pos == p_neg).

    Unweighted: the Mann-Whitney statistic from midranks, O(n log n).  With
    ``sample_weight`` every pair (i, j) counts w_i * w_j (scikit-learn's weighted AUC).

    Parameters
    ----------
    y, p : outcomes (0/1, both classes) and LOO probabilities P(y_i = 1 | y_-i), 1-D.
    sample_weight : (n,) non-negative weights, optional.

    Returns
    -------
    float

    Examples
    --------
    >>> auroc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])  # 3 of the 4 (pos, neg) pairs ordered
    0.75
    """
    y, p, w = _check(y, p, sample_weight)
    if w is None:
        n1 = y.sum()
        n0 = y.size - n1
        r = rankdata(p, method="average")
        return float((r[y == 1].sum() - n1 * (n1 + 1) / 2.0) / (n1 * n0))
    return float(_auroc_weighted_batch(y, p, w[None, :])[0])


# --------------------------------------------------------------------------- curves
def _clf_curve(y, p, w):
    """Cumulative (fps, tps, thresholds) at each distinct score, scores descending."""
    if w is not None:
        keep = w != 0
        y, p, w = y[keep], p[keep], w[keep]
    else:
        w = np.ones_like(y)
    order = np.argsort(p, kind="stable")[::-1]
    p, y, w = p[order], y[order], w[order]
    idx = np.r_[np.flatnonzero(np.diff(p)), p.size - 1]
    tps = np.cumsum(y * w)[idx]
    fps = np.cumsum((1.0 - y) * w)[idx]
    return fps, tps, p[idx]


def roc_curve(y, p, *, sample_weight=None, drop_intermediate=True):
    """ROC curve (fpr, tpr, thresholds) exactly as ``sklearn.metrics.roc_curve``.

    thresholds are decreasing and start with +inf (the point (0, 0)); collinear points are
    dropped when ``drop_intermediate`` (they do not change the curve or its area).

    Parameters
    ----------
    y, p : outcomes and LOO probabilities (as in `auroc`).
    sample_weight : optional weights.
    drop_intermediate : drop collinear points.

    Returns
    -------
    fpr, tpr, thresholds : ndarray

    Examples
    --------
    >>> fpr, tpr, thr = roc_curve([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    >>> fpr, tpr
    (array([0. , 0. , 0.5, 0.5, 1. ]), array([0. , 0.5, 0.5, 1. , 1. ]))
    """
    y, p, w = _check(y, p, sample_weight)
    fps, tps, thr = _clf_curve(y, p, w)
    if drop_intermediate and fps.size > 2:
        keep = np.r_[True, np.logical_or(np.diff(fps, 2), np.diff(tps, 2)), True]
        fps, tps, thr = fps[keep], tps[keep], thr[keep]
    fps = np.r_[0.0, fps]
    tps = np.r_[0.0, tps]
    thr = np.r_[np.inf, thr]
    return fps / fps[-1], tps / tps[-1], thr


def precision_recall_curve(y, p, *, sample_weight=None, drop_intermediate=False):
    """Precision-recall curve exactly as ``sklearn.metrics.precision_recall_curve``.

    Returns (precision, recall, thresholds): recall decreasing to a final 0 with precision
    1 appended there; thresholds increasing, one fewer than the points.

    Parameters
    ----------
    y, p : binary outcomes and probabilities of y = 1.
    sample_weight : optional per-observation weights.
    drop_intermediate : drop thresholds where precision and recall do not change the curve.

    Returns
    -------
    precision, recall, thresholds : ndarray

    Examples
    --------
    >>> precision, recall, _ = precision_recall_curve([0, 1, 1], [0.2, 0.3, 0.9])
    >>> recall  # thresholds 0.2, 0.3, 0.9, then the appended end point
    array([1. , 1. , 0.5, 0. ])
    """
    y, p, w = _check(y, p, sample_weight)
    fps, tps, thr = _clf_curve(y, p, w)
    if drop_intermediate and fps.size > 2:
        keep = np.r_[True, np.logical_or(np.diff(tps[:-1]), np.diff(tps[1:])), True]
        fps, tps, thr = fps[keep], tps[keep], thr[keep]
    ps = tps + fps
    precision = np.divide(tps, ps, out=np.zeros_like(tps), where=ps != 0)
    recall = tps / tps[-1]
    return np.r_[precision[::-1], 1.0], np.r_[recall[::-1], 0.0], thr[::-1]


def _ap_weighted_batch(y: np.ndarray, p: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Step-wise average precision for each row of W (B, n), same sum as sklearn."""
    order = np.argsort(p, kind="stable")[::-1]
    ps, ys, Ws = p[order], y[order], W[:, order]
    starts = np.r_[0, np.flatnonzero(np.diff(ps)) + 1]
    tps = np.cumsum(np.add.reduceat(Ws * ys, starts, axis=1), axis=1)
    fps = np.cumsum(np.add.reduceat(Ws * (1.0 - ys), starts, axis=1), axis=1)
    tot = tps + fps
    precision = np.divide(tps, tot, out=np.zeros_like(tps), where=tot != 0)
    recall = tps / tps[:, -1:]
    d_recall = np.diff(recall, axis=1, prepend=0.0)
    return np.maximum(0.0, np.sum(d_recall * precision, axis=1))


def average_precision(y, p, *, sample_weight=None) -> float:
    """Average precision sum_k (R_k - R_{k-1}) P_k over distinct thresholds (sklearn's AP).

    Parameters
    ----------
    y, p : 0/1 outcomes, predicted probabilities.
    sample_weight : optional weights (as sklearn).

    Returns
    -------
    float

    Examples
    --------
    >>> round(average_precision([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]), 4)  # (1 + 2/3) / 2
    0.8333
    """
    precision, recall, _ = precision_recall_curve(y, p, sample_weight=sample_weight)
    return float(max(0.0, -np.sum(np.diff(recall) * precision[:-1])))


# --------------------------------------------------------------------------- scores
def brier_score(y, p, *, sample_weight=None) -> float:
    """Mean squared difference between outcome and probability (lower is better).

    Parameters
    ----------
    y : (n,) 0/1 outcomes; p : (n,) probabilities of y = 1.
    sample_weight : weights of a weighted mean, optional.

    Returns
    -------
    float

    Examples
    --------
    >>> round(brier_score([0, 1], [0.2, 0.6]), 12)  # (0.04 + 0.16) / 2
    0.1
    """
    y, p, w = _check(y, p, sample_weight)
    return float(np.average((y - p) ** 2, weights=w))


def log_score(y, p=None, *, logit=None, sample_weight=None) -> float:
    """Mean log predictive probability of the observed outcomes (higher is better).

    Equals ``-sklearn.metrics.log_loss``.  Pass either probabilities ``p`` or log-odds
    ``logit``; with logits the log-probabilities are computed as -log(1 + exp(-+z)) without
    overflow for any finite z.  A probability of exactly 0 for the observed class would
    give -inf: such entries are clipped to machine epsilon with a RuntimeWarning.

    Parameters
    ----------
    y : (n,) 0/1 outcomes.
    p : (n,) probabilities of y = 1, or None when ``logit`` is given.
    logit : (n,) log-odds of y = 1, or None.
    sample_weight : optional weights of the mean.

    Returns
    -------
    float

    Examples
    --------
    >>> import math
    >>> math.isclose(log_score([1, 0], [0.5, 0.5]), math.log(0.5))
    True
    >>> math.isclose(log_score([1, 0], logit=[0.0, 0.0]), math.log(0.5))
    True
    """
    if (p is None) == (logit is None):
        raise TypeError("pass exactly one of p or logit")
    y = _check_y(y)
    w = _check_weight(sample_weight, y)
    if logit is not None:
        z = _as_1d_float(logit, "logit")
        if z.size != y.size:
            raise ValueError(f"logit has length {z.size} but y has length {y.size}")
        if np.any(np.isnan(z)):
            raise ValueError("logit contains NaN values")
        # log sigmoid(z) = -logaddexp(0, -z); the observed class uses +z or -z.
        s = np.where(y == 1.0, z, -z)
        with np.errstate(over="ignore"):
            lp = -np.logaddexp(0.0, -s)
        if np.any(np.isinf(lp)):
            raise ValueError("logit is infinite with the wrong sign for an observed outcome")
        return float(np.average(lp, weights=w))
    p = _check_p(p, y.size)
    p_obs = np.where(y == 1.0, p, 1.0 - p)
    eps = np.finfo(np.float64).eps
    n_zero = int(np.sum(p_obs < eps))
    if n_zero:
        warnings.warn(
            f"{n_zero} observation(s) have predictive probability < machine epsilon for the "
            "observed class; clipped to eps to keep the log score finite",
            RuntimeWarning,
            stacklevel=2,
        )
    # log1p(-p) keeps precision for y = 0 when p is tiny.
    lp = np.where(y == 1.0, np.log(np.maximum(p, eps)), np.log1p(-np.minimum(p, 1.0 - eps)))
    lp = np.where(p_obs < eps, np.log(eps), lp)
    return float(np.average(lp, weights=w))


# --------------------------------------------------------------------------- calibration
def calibration_curve(y, p, n_bins: int = 10, strategy: str = "uniform", *,
                      return_counts: bool = False):
    """Reliability curve (prob_true, prob_pred) as ``sklearn.calibration.calibration_curve``.

    Empty bins are dropped.  ``strategy="quantile"`` puts bin edges at quantiles of p (bins
    can coincide when p has ties, as in sklearn).  With ``return_counts`` also the number of
    observations in each returned bin.

    Parameters
    ----------
    y, p : outcomes and LOO probabilities (1-D, same length).
    n_bins : number of bins.
    strategy : "uniform" (equal-width bins) or "quantile".
    return_counts : also return the number of observations in each bin.

    Returns
    -------
    prob_true, prob_pred (, counts) : ndarray

    Examples
    --------
    >>> prob_true, prob_pred = calibration_curve([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8], n_bins=2)
    >>> prob_true.round(3), prob_pred.round(3)
    (array([0.333, 1.   ]), array([0.283, 0.8  ]))
    """
    y, p, _ = _check(y, p)
    if not isinstance(n_bins, int | np.integer) or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    if strategy == "quantile":
        bins = np.percentile(p, np.linspace(0.0, 1.0, n_bins + 1) * 100.0)
    elif strategy == "uniform":
        bins = np.linspace(0.0, 1.0, n_bins + 1)
    else:
        raise ValueError(f"strategy must be 'uniform' or 'quantile', got {strategy!r}")
    binids = np.searchsorted(bins[1:-1], p)
    bin_sums = np.bincount(binids, weights=p, minlength=n_bins)
    bin_true = np.bincount(binids, weights=y, minlength=n_bins)
    bin_total = np.bincount(binids, minlength=n_bins)
    nz = bin_total != 0
    prob_true = bin_true[nz] / bin_total[nz]
    prob_pred = bin_sums[nz] / bin_total[nz]
    if return_counts:
        return prob_true, prob_pred, bin_total[nz]
    return prob_true, prob_pred


def expected_calibration_error(y, p, n_bins: int = 10, strategy: str = "uniform") -> float:
    """ECE = sum over bins of (n_bin / n) * |mean(y) - mean(p)| on the calibration-curve bins.

    Parameters
    ----------
    y, p : observed 0/1 outcomes and their LOO probabilities.
    n_bins, strategy : the bins of `calibration_curve`.

    Returns
    -------
    float

    Examples
    --------
    >>> round(expected_calibration_error([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8], n_bins=2), 4)
    0.0875
    """
    prob_true, prob_pred, counts = calibration_curve(
        y, p, n_bins=n_bins, strategy=strategy, return_counts=True
    )
    return float(np.sum(counts * np.abs(prob_true - prob_pred)) / counts.sum())


# --------------------------------------------------------------------------- uncertainty
def delong_se(y, p) -> float:
    """DeLong et al. (1988) standard error of the AUROC, fast midrank form (Sun & Xu 2014).

    With m positives and n negatives, the structural components are
    V10_j = (Tz_j - Tx_j) / n for positive j and V01_i = 1 - (Tz_i - Ty_i) / m for negative i,
    where Tz are midranks in the pooled sample and Tx, Ty midranks within each class;
    var(AUROC) = var(V10) / m + var(V01) / n with the (k - 1) sample variances.

    Parameters
    ----------
    y, p : outcomes (at least 2 of each class) and scores.

    Returns
    -------
    float

    Examples
    --------
    >>> round(delong_se([0, 0, 0, 1, 1, 1], [0.1, 0.3, 0.6, 0.4, 0.7, 0.9]), 4)
    0.1571
    """
    y, p, _ = _check(y, p)
    pos, neg = p[y == 1], p[y == 0]
    m, n = pos.size, neg.size
    if m < 2 or n < 2:
        raise ValueError(f"DeLong SE needs at least 2 of each class, got {m} pos / {n} neg")
    tz = rankdata(np.r_[pos, neg], method="average")
    v10 = (tz[:m] - rankdata(pos, method="average")) / n
    v01 = 1.0 - (tz[m:] - rankdata(neg, method="average")) / m
    return float(np.sqrt(np.var(v10, ddof=1) / m + np.var(v01, ddof=1) / n))


_BATCH_STATS = {"auroc": _auroc_weighted_batch, "average_precision": _ap_weighted_batch}


def _resolve_stat(stat):
    if callable(stat):
        return stat
    if stat not in _BATCH_STATS:
        raise ValueError(f"stat must be one of {sorted(_BATCH_STATS)} or a callable, got {stat!r}")
    return _BATCH_STATS[stat]


def bayesian_bootstrap(y, p, stat="auroc", n: int = 2000, seed=None, *, ci: float = 0.95):
    """Bayesian bootstrap (Rubin 1981) of a ranking statistic: (mean, (lower, upper)).

    Each replicate re-weights the observations by Dirichlet(1, ..., 1) weights (normalised
    standard exponentials) and evaluates the weighted statistic; the interval is the
    equal-tailed ``ci`` interval of the replicates.  ``stat`` is "auroc",
    "average_precision" or a callable ``f(y, p, w) -> float`` (one call per replicate).

    Parameters
    ----------
    y, p : 0/1 outcomes and LOO probabilities.
    stat : "auroc", "average_precision" or a callable ``f(y, p, w)``.
    n : number of replicates (>= 2).
    seed : seed of the Dirichlet weights.
    ci : level of the interval.

    Returns
    -------
    (mean, (lower, upper)) : tuple

    Examples
    --------
    >>> mean, (lo, hi) = bayesian_bootstrap([0, 0, 0, 1, 1, 1], [0.1, 0.3, 0.6, 0.4, 0.7, 0.9],
    ...                                     n=200, seed=0)
    >>> bool(lo < mean < hi <= 1.0)
    True
    """
    y, p, _ = _check(y, p)
    if not isinstance(n, int | np.integer) or n < 2:
        raise ValueError(f"n (number of replicates) must be an integer >= 2, got {n!r}")
    if not 0.0 < ci < 1.0:
        raise ValueError(f"ci must be in (0, 1), got {ci}")
    fn = _resolve_stat(stat)
    rng = np.random.default_rng(seed)
    values = np.empty(n)
    chunk = max(1, _CHUNK_ELEMENTS // y.size)
    for start in range(0, n, chunk):
        b = min(chunk, n - start)
        W = rng.standard_exponential((b, y.size))
        W /= W.sum(axis=1, keepdims=True)
        if callable(stat):
            values[start:start + b] = [float(fn(y, p, w)) for w in W]
        else:
            values[start:start + b] = fn(y, p, W)
    alpha = (1.0 - ci) / 2.0
    lo, hi = np.quantile(values, [alpha, 1.0 - alpha])
    return float(values.mean()), (float(lo), float(hi))


def mc_error_of_probabilities(y, p, p_mcse=None, *, mcse_elpd=None, stat="auroc",
                              n_sim: int = 1000, seed=None) -> dict:
    """Monte Carlo error of AUROC / AP caused by the Monte Carlo error of the LOO probabilities.

    The LOO probabilities are importance-sampling estimates; each has a Monte Carlo standard
    error (e.g. PSIS's MCSE).  Give it directly as ``p_mcse`` or as ``mcse_elpd``, the MCSE of
    elpd_loo_i = log p(y_i | y_-i), converted by the delta method
    (sd(p_i) = p(y_i | y_-i) * mcse_elpd_i).

    Simulation: each replicate perturbs every probability independently on the logit scale,
    logit(p*_i) = logit(p_i) + z_i * mcse_i / (p_i (1 - p_i)), z_i ~ N(0, 1) (the delta-method
    logit SE, so p* stays in (0, 1)), and recomputes the statistic.  Errors of different
    observations are treated as independent although they share the posterior draws, so this
    is the size of the error, not an exact distribution.  Entries with zero MCSE (or p at
    exactly 0 or 1) are left unperturbed.

    Returns a dict: ``value`` (statistic at p), ``mcse`` (sd over replicates), ``interval``
    (2.5 and 97.5 percentiles), ``n_sim``.

    Parameters
    ----------
    y, p : outcomes and LOO probabilities.
    p_mcse : (n,) MCSE of each probability, or None when ``mcse_elpd`` is given.
    mcse_elpd : (n,) MCSE of each elpd_loo_i, or None.
    stat : "auroc", "average_precision" or a callable ``f(y, p, w)``.
    n_sim : number of simulated replicates; seed : their seed.

    Returns
    -------
    dict

    Examples
    --------
    >>> out = mc_error_of_probabilities([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8],
    ...                                 p_mcse=[0.0, 0.0, 0.0, 0.0], n_sim=10, seed=0)
    >>> out["value"], out["mcse"]  # no Monte Carlo error in p, none in the AUROC
    (0.75, 0.0)
    """
    y, p, _ = _check(y, p)
    if (p_mcse is None) == (mcse_elpd is None):
        raise TypeError("pass exactly one of p_mcse or mcse_elpd")
    if p_mcse is None:
        s = _as_1d_float(mcse_elpd, "mcse_elpd")
        if s.size != y.size:
            raise ValueError(f"mcse_elpd has length {s.size} but y has length {y.size}")
        s = s * np.where(y == 1.0, p, 1.0 - p)
        name = "mcse_elpd"
    else:
        s = _as_1d_float(p_mcse, "p_mcse")
        if s.size != y.size:
            raise ValueError(f"p_mcse has length {s.size} but y has length {y.size}")
        name = "p_mcse"
    if np.any(np.isnan(s)):
        raise ValueError(
            f"{name} has {int(np.isnan(s).sum())} NaN entries (unknown MCSE); fill them "
            "explicitly (e.g. with 0 for exact refits) before propagating"
        )
    if np.any(~np.isfinite(s)) or np.any(s < 0):
        raise ValueError(f"{name} must be finite and non-negative")
    if not isinstance(n_sim, int | np.integer) or n_sim < 2:
        raise ValueError(f"n_sim must be an integer >= 2, got {n_sim!r}")
    fn = _resolve_stat(stat)
    interior = (p > 0.0) & (p < 1.0)
    with np.errstate(divide="ignore"):
        z0 = np.log(p) - np.log1p(-p)
    sd_logit = np.zeros_like(p)
    sd_logit[interior] = s[interior] / (p[interior] * (1.0 - p[interior]))
    rng = np.random.default_rng(seed)
    ones = np.ones(y.size)

    def evaluate(pp):
        # The built-in statistics are batch functions of a weight matrix; a callable is not.
        if callable(stat):
            return float(fn(y, pp, ones))
        return float(fn(y, pp, ones[None, :])[0])

    values = np.array([
        evaluate(expit(z0 + rng.standard_normal(y.size) * sd_logit)) for _ in range(n_sim)
    ])
    value = evaluate(p)
    lo, hi = np.quantile(values, [0.025, 0.975])
    return {"value": value, "mcse": float(values.std(ddof=1)),
            "interval": (float(lo), float(hi)), "n_sim": int(n_sim)}


# --------------------------------------------------------------------------- report
def classification_report(y, p, *, n_boot: int = 2000, seed=None, ci: float = 0.95,
                          n_bins: int = 10, strategy: str = "uniform", p_mcse=None,
                          n_sim: int = 500) -> dict:
    """All metrics of LOO probabilities in one JSON-friendly dict.

    Keys: n, n_pos, prevalence, auroc, auroc_se (DeLong), auroc_delong_interval (normal,
    clipped to [0, 1]), auroc_bb_mean / auroc_bb_interval (Bayesian bootstrap),
    average_precision, ap_bb_mean / ap_bb_interval, brier, log_score, ece, ci; with
    ``p_mcse`` also auroc_mcse and ap_mcse (Monte Carlo error from the probabilities).

    Parameters
    ----------
    y, p : outcomes and LOO probabilities.
    n_boot, seed, ci : Bayesian bootstrap replicates, their seed and the interval level.
    n_bins, strategy : bins of the calibration error.
    p_mcse : optional MCSE of each probability; n_sim : its replicates.

    Returns
    -------
    dict

    Examples
    --------
    >>> rep = classification_report([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8], n_boot=50, seed=0)
    >>> rep["auroc"], rep["n_pos"]
    (0.75, 2)
    """
    y, p, _ = _check(y, p)
    if not 0.0 < ci < 1.0:
        raise ValueError(f"ci must be in (0, 1), got {ci}")
    ss = np.random.SeedSequence(seed)
    s_auc, s_ap, s_mc1, s_mc2 = ss.spawn(4)
    auc = auroc(y, p)
    if min(y.sum(), y.size - y.sum()) >= 2:
        se = delong_se(y, p)
    else:
        warnings.warn("fewer than 2 observations in a class: DeLong SE and interval are NaN",
                      RuntimeWarning, stacklevel=2)
        se = float("nan")
    zq = float(ndtri(0.5 + ci / 2.0))
    bb_auc = bayesian_bootstrap(y, p, "auroc", n=n_boot, seed=s_auc, ci=ci)
    bb_ap = bayesian_bootstrap(y, p, "average_precision", n=n_boot, seed=s_ap, ci=ci)
    out = {
        "n": int(y.size),
        "n_pos": int(y.sum()),
        "prevalence": float(y.mean()),
        "auroc": auc,
        "auroc_se": se,
        "auroc_delong_interval": (max(0.0, auc - zq * se), min(1.0, auc + zq * se)),
        "auroc_bb_mean": bb_auc[0],
        "auroc_bb_interval": bb_auc[1],
        "average_precision": average_precision(y, p),
        "ap_bb_mean": bb_ap[0],
        "ap_bb_interval": bb_ap[1],
        "brier": brier_score(y, p),
        "log_score": log_score(y, p),
        "ece": expected_calibration_error(y, p, n_bins=n_bins, strategy=strategy),
        "ci": ci,
    }
    if p_mcse is not None:
        out["auroc_mcse"] = mc_error_of_probabilities(
            y, p, p_mcse, stat="auroc", n_sim=n_sim, seed=s_mc1)["mcse"]
        out["ap_mcse"] = mc_error_of_probabilities(
            y, p, p_mcse, stat="average_precision", n_sim=n_sim, seed=s_mc2)["mcse"]
    return out
