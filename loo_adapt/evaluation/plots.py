"""Diagnostic and classification plots (matplotlib).  Every function returns the Axes.

* :func:`plot_khat` - Pareto k-hat per observation before (black) and after adaptation
  (coloured by the estimator), threshold line, minimum per observation labelled.
* :func:`plot_khat_candidates` - the paper's Fig. 2 / S.2: every tried transform and step size.
* :func:`plot_roc`, :func:`plot_pr` - several fits on one axis (the paper's Fig. 3).
* :func:`plot_khat_hist`, :func:`plot_calibration`.

Colours per transform follow the paper's Fig. S.2 (KL green, Variance blue, LL orange,
MM1 red); the remaining estimators get the next tableau colours.
"""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np

from loo_adapt.evaluation import metrics
from loo_adapt.result import ESTIMATORS, PointwiseLoo

__all__ = [
    "TRANSFORM_COLORS",
    "TRANSFORM_LABELS",
    "VALUE_FMT",
    "transform_color",
    "plot_khat",
    "plot_khat_candidates",
    "plot_khat_hist",
    "plot_roc",
    "plot_pr",
    "plot_calibration",
]

TRANSFORM_COLORS = {
    "psis": "black",
    "kl": "tab:green",
    "var": "tab:blue",
    "ll": "tab:orange",
    "mm1": "tab:red",
    "mm2": "tab:purple",
    "mm": "tab:brown",
    "mixis": "tab:pink",
    "refit": "tab:gray",
}
TRANSFORM_LABELS = {
    "psis": "PSIS",
    "kl": "KL descent",
    "var": "Variance descent",
    "ll": "LL descent",
    "mm1": "MM1",
    "mm2": "MM2",
    "mm": "moment matching",
    "mixis": "MixIS",
    "refit": "refit",
}
_EXTRA_COLORS = ("tab:olive", "tab:cyan", "gold", "navy", "teal", "maroon")

#: Format of the numbers (AUROC, AP, ECE, k-hat minima) written into legends and labels.
VALUE_FMT = "{:.3f}"
KHAT_FMT = "{:.2f}"


def transform_color(name: str) -> str:
    """Colour of an estimator / transform name (stable for names outside ``ESTIMATORS``)."""
    if name in TRANSFORM_COLORS:
        return TRANSFORM_COLORS[name]
    # A deterministic colour for unknown names: same name, same colour, in every figure.
    return _EXTRA_COLORS[sum(map(ord, str(name))) % len(_EXTRA_COLORS)]


def _label(name: str) -> str:
    return TRANSFORM_LABELS.get(name, str(name))


def _ordered(names) -> list[str]:
    names = list(dict.fromkeys(str(n) for n in names))
    known = [n for n in ESTIMATORS if n in names]
    return known + sorted(n for n in names if n not in ESTIMATORS)


def _get_ax(ax, figsize=(7.0, 4.0)):
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def _threshold_for(n_samples) -> float:
    return float(min(1.0 - 1.0 / np.log10(n_samples), 0.7))


# --------------------------------------------------------------------------- k-hat inputs
def _as_pointwise(obj) -> PointwiseLoo | None:
    if isinstance(obj, PointwiseLoo):
        return obj
    inner = getattr(obj, "loo_adapt", None)
    if isinstance(inner, PointwiseLoo):
        return inner
    return None


def _khat_input(obj):
    """(khat, after, method, threshold) from a PointwiseLoo, arviz ELPDData or an array.

    arviz 0.23's ELPDData is a pandas Series holding 'pareto_k' (a DataArray) and 'good_k';
    arviz 1.x's is a dataclass with the same two attributes.  Both are read by duck typing.
    """
    res = _as_pointwise(obj)
    if res is not None:
        return (np.asarray(res.khat, float), np.asarray(res.khat_after, float),
                np.asarray(res.method, dtype=object), float(res.khat_threshold))
    threshold = None
    index = getattr(obj, "index", None)
    is_series = index is not None and not callable(index)  # pandas, not list.index
    if (is_series and "pareto_k" in index) or (not is_series and hasattr(obj, "pareto_k")):
        pk = obj["pareto_k"] if is_series else obj.pareto_k
        if pk is None:
            raise TypeError("the ELPDData has no pointwise pareto_k; compute it with "
                            "pointwise=True")
        good_k = obj["good_k"] if is_series and "good_k" in index else (
            None if is_series else getattr(obj, "good_k", None))
        n_samples = obj["n_samples"] if is_series and "n_samples" in index else (
            None if is_series else getattr(obj, "n_samples", None))
        if good_k is None and n_samples:
            good_k = _threshold_for(n_samples)
        threshold = None if good_k is None else float(good_k)
        obj = getattr(pk, "values", pk)
    try:
        khat = np.asarray(obj, dtype=float)
    except (TypeError, ValueError) as err:
        raise TypeError(
            "expected a PointwiseLoo, an arviz ELPDData with pareto_k, an object with a "
            f"'loo_adapt' attribute, or an array of k-hat; got {type(obj).__name__}"
        ) from err
    if khat.ndim == 0 or khat.size == 0:
        raise ValueError("k-hat must be a non-empty array")
    return khat.ravel(), None, None, threshold


def _check_len(name, arr, n):
    if arr is not None and len(arr) != n:
        raise ValueError(f"{name} has length {len(arr)}, expected {n} (one per observation)")


# --------------------------------------------------------------------------- plot_khat
def plot_khat(result_or_khat, *, after=None, method=None, threshold=None, ax=None,
              label_min: bool = True, legend: bool = True, markersize: float = 18.0,
              **scatter_kws):
    """Pareto k-hat per observation, before (black) and after adaptation (by estimator).

    Parameters
    ----------
    result_or_khat : PointwiseLoo, arviz ELPDData (0.23 Series or 1.x dataclass) with
        pointwise ``pareto_k``, an object whose ``loo_adapt`` attribute is a PointwiseLoo,
        or a 1-D array of k-hat (before adaptation).
    after, method : k-hat after adaptation and estimator name per observation; taken from
        a PointwiseLoo when not given.
    threshold : horizontal line; defaults to the result's threshold (arviz ``good_k``),
        else 0.7.
    label_min : write the smallest k-hat reached next to every observation that was above
        the threshold or was adapted.

    Observations finished by refits or MixIS have no k-hat after adaptation: they are shown
    as hollow rings of their colour around the black dot.
    """
    khat, after0, method0, thr0 = _khat_input(result_or_khat)
    n = khat.size
    after = after0 if after is None else np.asarray(after, dtype=float).ravel()
    method = method0 if method is None else np.asarray(method, dtype=object).ravel()
    _check_len("after", after, n)
    _check_len("method", method, n)
    if after is not None and method is None:
        method = np.where(np.isfinite(after) & (after != khat), "adapted", "psis").astype(object)
    if method is not None and after is None:
        after = np.full(n, np.nan)
    thr = threshold if threshold is not None else (thr0 if thr0 is not None else 0.7)

    ax = _get_ax(ax)
    x = np.arange(n)
    ax.scatter(x, khat, s=markersize, c="black", label="PSIS (before)", zorder=2,
               **scatter_kws)
    final = khat.copy()
    if method is not None:
        for name in _ordered(m for m in method if m != "psis"):
            sel = method == name
            finite = sel & np.isfinite(after)
            color = transform_color(name)
            if finite.any():
                ax.scatter(x[finite], after[finite], s=markersize, color=color, zorder=3,
                           label=f"{_label(name)} (n={int(sel.sum())})", **scatter_kws)
            missing = sel & ~np.isfinite(after)
            if missing.any():
                ax.scatter(x[missing], khat[missing], s=markersize * 4, facecolors="none",
                           edgecolors=color, zorder=3,
                           label=f"{_label(name)} (n={int(missing.sum())}, no k-hat)")
        adapted = (method != "psis") & np.isfinite(after)
        final[adapted] = np.minimum(khat[adapted], after[adapted])
        if adapted.any():
            # Thin connectors make the before -> after pairs readable when n is large.
            ax.vlines(x[adapted], khat[adapted], after[adapted], colors="0.7", lw=0.8,
                      zorder=1)
        show = (khat > thr) | (method != "psis")
    else:
        show = khat > thr
    ax.axhline(thr, ls="--", color="gray", lw=1, label=f"threshold {KHAT_FMT.format(thr)}")
    if label_min:
        for i in np.flatnonzero(show & np.isfinite(final)):
            ax.annotate(KHAT_FMT.format(final[i]), (x[i], final[i]), xytext=(4, -10),
                        textcoords="offset points", fontsize=7)
    ax.set_xlabel("observation")
    ax.set_ylabel(r"Pareto $\hat{k}$")
    if legend:
        ax.legend(fontsize=8, loc="best")
    return ax


# --------------------------------------------------------------------------- Fig. 2
def plot_khat_candidates(candidates, khat=None, *, threshold=None, ax=None,
                         use_holdout: bool = False, label_min: bool = True,
                         size_range=(12.0, 70.0), legend: bool = True):
    """The paper's Fig. 2 / S.2: k-hat of every tried (observation, transform, step size).

    Parameters
    ----------
    candidates : list of dicts with keys i, transform, rho, khat (and khat_holdout), as in
        ``PointwiseLoo.candidates``; or a PointwiseLoo (its candidates and k-hat are used).
    khat : k-hat before adaptation, indexed by observation (array of length n or a
        PointwiseLoo); drawn as large black dots.
    use_holdout : plot ``khat_holdout`` instead of ``khat``.

    Each observation with candidates gets one x position (tick label = observation index);
    transforms are dodged horizontally and coloured as in the paper; the step size rho sets
    the marker area (log scale).  The minimum per (observation, transform) is labelled.
    """
    res = _as_pointwise(candidates)
    if res is not None:
        candidates = res.candidates
        if khat is None:
            khat = res.khat
        if threshold is None:
            threshold = res.khat_threshold
    if khat is not None and _as_pointwise(khat) is not None:
        kres = _as_pointwise(khat)
        if threshold is None:
            threshold = kres.khat_threshold
        khat = kres.khat
    thr = 0.7 if threshold is None else float(threshold)
    if not candidates:
        raise ValueError("no candidates to plot (PointwiseLoo.candidates is empty)")
    key = "khat_holdout" if use_holdout else "khat"
    for c in candidates:
        missing = {"i", "transform", key} - set(c)
        if missing:
            raise ValueError(f"candidate {c!r} lacks keys {sorted(missing)}")
    obs_i = np.array([int(c["i"]) for c in candidates])
    names = np.array([str(c["transform"]) for c in candidates], dtype=object)
    kc = np.array([np.nan if c[key] is None else float(c[key]) for c in candidates])
    rho = np.array([float(c.get("rho", np.nan) or np.nan) for c in candidates])

    obs = np.unique(obs_i)
    pos_of = {i: k for k, i in enumerate(obs)}
    pos = np.array([pos_of[i] for i in obs_i], dtype=float)
    transforms = _ordered(names)
    dodge = (np.linspace(-0.25, 0.25, len(transforms)) if len(transforms) > 1
             else np.zeros(1))

    good = np.isfinite(rho) & (rho > 0)
    sizes = np.full(rho.size, np.mean(size_range))
    if good.any():
        lr = np.log(rho[good])
        span = lr.max() - lr.min()
        frac = (lr - lr.min()) / span if span > 0 else np.full(lr.size, 0.5)
        sizes[good] = size_range[0] + frac * (size_range[1] - size_range[0])

    ax = _get_ax(ax)
    if khat is not None:
        k0 = np.asarray(khat, dtype=float).ravel()
        if obs.max() >= k0.size:
            raise ValueError(f"candidate observation {obs.max()} is out of range for "
                             f"{k0.size} k-hat values")
        ax.scatter(np.arange(obs.size), k0[obs], s=90, c="black", zorder=3,
                   label="original")
    for t, name in enumerate(transforms):
        sel = (names == name) & np.isfinite(kc)
        if not sel.any():
            continue
        ax.scatter(pos[sel] + dodge[t], kc[sel], s=sizes[sel], color=transform_color(name),
                   alpha=0.8, zorder=2, label=_label(name))
        if label_min:
            for i in np.unique(obs_i[sel]):
                s = sel & (obs_i == i)
                j = np.flatnonzero(s)[np.argmin(kc[s])]
                ax.annotate(KHAT_FMT.format(kc[j]), (pos[j] + dodge[t], kc[j]),
                            xytext=(3, -9), textcoords="offset points", fontsize=7,
                            color=transform_color(name))
    ax.axhline(thr, ls="--", color="gray", lw=1, label=f"threshold {KHAT_FMT.format(thr)}")
    ax.set_xticks(np.arange(obs.size))
    ax.set_xticklabels([str(i) for i in obs], rotation=90 if obs.size > 15 else 0)
    ax.set_xlim(-0.6, obs.size - 0.4)
    ax.set_xlabel("observation")
    ax.set_ylabel(r"Pareto $\hat{k}$ (held-out draws)" if use_holdout else r"Pareto $\hat{k}$")
    if legend:
        ax.legend(fontsize=8, loc="best")
    return ax


# --------------------------------------------------------------------------- histogram
def plot_khat_hist(khat, threshold=None, *, after=None, bins=20, ax=None):
    """Histogram of k-hat (before adaptation, grey) and, when known, after (blue outline).

    ``khat`` accepts the same inputs as :func:`plot_khat`; both histograms share bin edges.
    """
    before, after0, method, thr0 = _khat_input(khat)
    after = after0 if after is None else np.asarray(after, dtype=float).ravel()
    _check_len("after", after, before.size)
    if method is not None and not np.any(method != "psis"):
        after = None  # nothing adapted: the "after" histogram would duplicate "before"
    thr = threshold if threshold is not None else (thr0 if thr0 is not None else 0.7)
    vals = before[np.isfinite(before)]
    if after is not None:
        vals = np.r_[vals, after[np.isfinite(after)]]
    edges = np.histogram_bin_edges(np.r_[vals, thr], bins=bins)
    ax = _get_ax(ax)
    ax.hist(before[np.isfinite(before)], bins=edges, color="0.6", label="before adaptation")
    if after is not None:
        ax.hist(after[np.isfinite(after)], bins=edges, histtype="step", lw=1.5,
                color="tab:blue", label="after adaptation")
    ax.axvline(thr, ls="--", color="black", lw=1, label=f"threshold {KHAT_FMT.format(thr)}")
    ax.set_xlabel(r"Pareto $\hat{k}$")
    ax.set_ylabel("number of observations")
    ax.legend(fontsize=8)
    return ax


# --------------------------------------------------------------------------- classification
def _prob_items(y, probs):
    """(y, [(label, p), ...]) from a dict of arrays / PointwiseLoo or a single array."""
    if isinstance(probs, Mapping):
        items = list(probs.items())
    else:
        items = [("model", probs)]
    if not items:
        raise ValueError("probs is empty")
    out = []
    for label, p in items:
        res = _as_pointwise(p)
        if res is not None:
            if y is None:
                y = res.y
            p = res.loo_prob
        out.append((str(label), np.asarray(p, dtype=float)))
    if y is None:
        raise ValueError("y is required (no PointwiseLoo with y was given)")
    return np.asarray(y), out


def plot_roc(y, probs, *, ax=None, diagonal: bool = True, legend: bool = True):
    """ROC curves of several fits on one axis, AUROC (Eq. 8) in the legend.

    ``probs``: dict label -> LOO probabilities (array or PointwiseLoo), or one array.
    """
    y, items = _prob_items(y, probs)
    ax = _get_ax(ax, figsize=(5.0, 5.0))
    for label, p in items:
        fpr, tpr, _ = metrics.roc_curve(y, p)
        auc = metrics.auroc(y, p)
        ax.plot(fpr, tpr, lw=1.5, label=f"{label} (AUROC = {VALUE_FMT.format(auc)})")
    if diagonal:
        ax.plot([0, 1], [0, 1], ls=":", color="gray", lw=1, label="_chance")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.01)
    ax.set_aspect("equal")
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    if legend:
        ax.legend(loc="lower right", fontsize=8)
    return ax


def plot_pr(y, probs, *, ax=None, prevalence: bool = True, legend: bool = True):
    """Precision-recall curves (step-wise) of several fits, average precision in the legend.

    The dotted horizontal line is the prevalence, the precision of a random ranking.
    """
    y, items = _prob_items(y, probs)
    ax = _get_ax(ax, figsize=(5.0, 5.0))
    for label, p in items:
        precision, recall, _ = metrics.precision_recall_curve(y, p)
        ap = metrics.average_precision(y, p)
        ax.plot(recall, precision, drawstyle="steps-post", lw=1.5,
                label=f"{label} (AP = {VALUE_FMT.format(ap)})")
    if prevalence:
        ax.axhline(float(np.mean(y)), ls=":", color="gray", lw=1, label="_prevalence")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.01)
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    if legend:
        ax.legend(loc="lower left", fontsize=8)
    return ax


def plot_calibration(y, probs, n_bins: int = 10, *, strategy: str = "uniform", ax=None,
                     diagonal: bool = True, legend: bool = True):
    """Reliability diagram: observed frequency vs mean predicted probability per bin,
    expected calibration error in the legend."""
    y, items = _prob_items(y, probs)
    ax = _get_ax(ax, figsize=(5.0, 5.0))
    for label, p in items:
        prob_true, prob_pred = metrics.calibration_curve(y, p, n_bins, strategy)
        ece = metrics.expected_calibration_error(y, p, n_bins, strategy)
        ax.plot(prob_pred, prob_true, marker="o", ms=4, lw=1.2,
                label=f"{label} (ECE = {VALUE_FMT.format(ece)})")
    if diagonal:
        ax.plot([0, 1], [0, 1], ls=":", color="gray", lw=1, label="_perfect")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_xlabel("mean predicted probability")
    ax.set_ylabel("observed frequency")
    if legend:
        ax.legend(loc="upper left", fontsize=8)
    return ax
