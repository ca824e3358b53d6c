"""Diagnostic and classification plots (matplotlib).  Every function returns the Axes.

* :func:`plot_khat` - Pareto k-hat per observation before (black) and after adaptation
  (coloured by the estimator), threshold line, minimum per observation labelled.
* :func:`plot_khat_candidates` - the paper's Fig. 2 / S.2: every tried transform and step size.
* :func:`plot_roc`, :func:`plot_pr` - several fits on one axis (the paper's Fig. 3).
* :func:`plot_khat_hist`, :func:`plot_calibration` (bin counts, binomial bands).
* :func:`plot_loo_pit` - ECDF of LOO-PIT values minus the uniform CDF, with a band.

Thresholds come from the number of draws S (min(1 - 1/log10 S, 0.7), as arviz and R loo);
value labels are placed so that they do not overlap (crowded ones are left out).

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
    "plot_loo_pit",
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
    "mixis+psis": "hotpink",
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
    "mixis+psis": "MixIS pooled with PSIS",
    "refit": "refit",
}
_EXTRA_COLORS = ("tab:olive", "tab:cyan", "gold", "navy", "teal", "maroon")

#: Format of the numbers (AUROC, AP, ECE, k-hat minima) written into legends and labels.
VALUE_FMT = "{:.3f}"
KHAT_FMT = "{:.2f}"


def transform_color(name: str) -> str:
    """Colour of an estimator / transform name (stable for names outside ``ESTIMATORS``).

    Parameters
    ----------
    name : an estimator or transform name, e.g. "psis", "kl", "mixis".

    Returns
    -------
    str
        A matplotlib colour.

    Examples
    --------
    >>> transform_color("kl") == transform_color("kl")
    True
    """
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


def _resolve_threshold(threshold, from_result, n_samples) -> float:
    """Explicit threshold, else the result's, else from the number of draws S, else 0.7
    (R loo's cap, reached at S >= 2154)."""
    if threshold is not None:
        return float(threshold)
    if from_result is not None:
        return float(from_result)
    if n_samples is not None:
        return _threshold_for(n_samples)
    return 0.7


#: offsets (points) tried in turn for a value label; a label that fits none is left out
_OFFSETS = ((4, -10), (4, 3), (-22, -10), (-22, 3), (4, 12), (4, -19), (-22, 12), (-22, -19))


def _renderer(fig):
    """Draw the figure and return its renderer (a canvas-less Figure gets an Agg canvas)."""
    if not hasattr(fig.canvas, "get_renderer"):
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def _place_labels(ax, xs, ys, texts, *, colors=None, fontsize=7, offsets=_OFFSETS,
                  priority=None) -> int:
    """Annotate points with texts that overlap neither each other nor the tick labels.

    Labels are placed in order of ``priority`` (largest first) at the first offset whose
    bounding box is free and inside the axes; the rest are left out.  Returns how many were
    left out.
    """
    n = len(texts)
    if n == 0:
        return 0
    renderer = _renderer(ax.figure)
    axbox = ax.get_window_extent(renderer)
    taken = [t.get_window_extent(renderer) for t in ax.texts]
    order = range(n) if priority is None else np.argsort(-np.asarray(priority), kind="stable")
    skipped = 0
    for j in order:
        color = None if colors is None else colors[j]
        placed = False
        for off in offsets:
            ann = ax.annotate(texts[j], (xs[j], ys[j]), xytext=off, textcoords="offset points",
                              fontsize=fontsize, color=color)
            box = ann.get_window_extent(renderer)
            inside = (box.x0 >= axbox.x0 and box.x1 <= axbox.x1 and box.y0 >= axbox.y0
                      and box.y1 <= axbox.y1)
            if inside and not any(box.overlaps(b) for b in taken):
                taken.append(box)
                placed = True
                break
            ann.remove()
        skipped += not placed
    return skipped


def _thin_ticklabels(ax, labels, rotation=90):
    """Set x tick labels, keeping every k-th one so that none overlap."""
    ticks = np.arange(len(labels))
    ax.set_xticks(ticks)
    ax.set_xticklabels(labels, rotation=rotation)
    renderer = _renderer(ax.figure)
    step = 1
    while step < len(labels):
        boxes = [t.get_window_extent(renderer) for t in ax.get_xticklabels()[::step]]
        if not any(a.overlaps(b) for a, b in zip(boxes[:-1], boxes[1:])):
            break
        step += 1
    if step > 1:
        ax.set_xticks(ticks[::step])
        ax.set_xticklabels(list(labels)[::step], rotation=rotation)


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
        return (np.asarray(res.pareto_k, float), np.asarray(res.pareto_k_after, float),
                np.asarray(res.method, dtype=object), float(res.good_k))
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
              n_samples=None, **scatter_kws):
    """Pareto k-hat per observation, before (black) and after adaptation (by estimator).

    Parameters
    ----------
    result_or_khat : PointwiseLoo, arviz ELPDData (0.23 Series or 1.x dataclass) with
        pointwise ``pareto_k``, an object whose ``loo_adapt`` attribute is a PointwiseLoo,
        or a 1-D array of k-hat (before adaptation).
    after, method : k-hat after adaptation and estimator name per observation; taken from
        a PointwiseLoo when not given.
    threshold : horizontal line; defaults to the result's threshold (arviz ``good_k``),
        else min(1 - 1/log10 S, 0.7) from ``n_samples``, else 0.7.
    label_min : write the smallest k-hat reached next to every observation that was above
        the threshold or was adapted (highest first; labels that would overlap are left out).
    n_samples : number of posterior draws S, for the threshold of a bare k-hat array.

    Returns
    -------
    matplotlib Axes

    Examples
    --------
    >>> ax = plot_khat(np.array([0.1, 0.8, 0.3]), n_samples=1000)
    >>> round(ax.lines[0].get_ydata()[0], 2)
    0.67

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
    thr = _resolve_threshold(threshold, thr0, n_samples)

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
    ax.set_xlabel("observation")
    ax.set_ylabel(r"Pareto $\hat{k}$")
    if label_min:
        idx = np.flatnonzero(show & np.isfinite(final))
        _place_labels(ax, x[idx], final[idx], [KHAT_FMT.format(v) for v in final[idx]],
                      priority=khat[idx])
    if legend:
        ax.legend(fontsize=8, loc="best")
    return ax


# --------------------------------------------------------------------------- Fig. 2
def plot_khat_candidates(candidates, khat=None, *, threshold=None, ax=None,
                         use_holdout: bool = False, label_min: bool = True,
                         size_range=(12.0, 70.0), legend: bool = True, n_samples=None):
    """The paper's Fig. 2 / S.2: k-hat of every tried (observation, transform, step size).

    Parameters
    ----------
    candidates : list of dicts with keys i, transform, rho, khat (and khat_holdout), as in
        ``PointwiseLoo.candidates``; or a PointwiseLoo (its candidates and k-hat are used).
    khat : k-hat before adaptation, indexed by observation (array of length n or a
        PointwiseLoo); drawn as large black dots.
    use_holdout : plot ``khat_holdout`` instead of ``khat``.
    threshold : horizontal line; default the result's threshold, else from ``n_samples``
        (min(1 - 1/log10 S, 0.7)), else 0.7.
    n_samples : number of posterior draws S.

    Returns
    -------
    matplotlib Axes

    Each observation with candidates gets one x position (tick label = observation index);
    transforms are dodged horizontally and coloured as in the paper; the step size rho sets
    the marker area (log scale).  The minimum per (observation, transform) is labelled.

    Examples
    --------
    >>> cands = [{"i": 4, "transform": "kl", "rho": 0.25, "khat": 0.55},
    ...          {"i": 4, "transform": "mm1", "rho": 1.0, "khat": 0.4}]
    >>> ax = plot_khat_candidates(cands, np.r_[np.zeros(4), 0.9], threshold=0.7)
    >>> [t.get_text() for t in ax.get_xticklabels()]
    ['4']
    """
    res = _as_pointwise(candidates)
    if res is not None:
        candidates = res.candidates
        if khat is None:
            khat = res.pareto_k
        if threshold is None:
            threshold = res.good_k
    if khat is not None and _as_pointwise(khat) is not None:
        kres = _as_pointwise(khat)
        if threshold is None:
            threshold = kres.good_k
        khat = kres.pareto_k
    if res is not None and n_samples is None:
        n_samples = res.n_samples
    thr = _resolve_threshold(threshold, None, n_samples)
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
    lab_x, lab_y, lab_t, lab_c = [], [], [], []
    for t, name in enumerate(transforms):
        sel = (names == name) & np.isfinite(kc)
        if not sel.any():
            continue
        ax.scatter(pos[sel] + dodge[t], kc[sel], s=sizes[sel], color=transform_color(name),
                   alpha=0.8, zorder=2, label=_label(name))
        for i in np.unique(obs_i[sel]):
            s = sel & (obs_i == i)
            j = np.flatnonzero(s)[np.argmin(kc[s])]
            lab_x.append(pos[j] + dodge[t])
            lab_y.append(kc[j])
            lab_t.append(KHAT_FMT.format(kc[j]))
            lab_c.append(transform_color(name))
    ax.axhline(thr, ls="--", color="gray", lw=1, label=f"threshold {KHAT_FMT.format(thr)}")
    ax.set_xlim(-0.6, obs.size - 0.4)
    ax.set_xlabel("observation")
    ax.set_ylabel(r"Pareto $\hat{k}$ (held-out draws)" if use_holdout else r"Pareto $\hat{k}$")
    _thin_ticklabels(ax, [str(i) for i in obs], rotation=90 if obs.size > 15 else 0)
    if label_min:
        _place_labels(ax, lab_x, lab_y, lab_t, colors=lab_c,
                      priority=-np.asarray(lab_y, dtype=float))
    if legend:
        ax.legend(fontsize=8, loc="best")
    return ax


# --------------------------------------------------------------------------- histogram
def plot_khat_hist(khat, threshold=None, *, after=None, bins=20, ax=None, n_samples=None):
    """Histogram of k-hat (before adaptation, grey) and, when known, after (blue outline).

    Parameters
    ----------
    khat : the same inputs as :func:`plot_khat`; both histograms share bin edges.
    threshold : vertical line; default the result's, else from ``n_samples``
        (min(1 - 1/log10 S, 0.7), as :func:`plot_khat`), else 0.7.
    after : k-hat after adaptation (taken from a PointwiseLoo when not given).
    n_samples : number of posterior draws S.

    Returns
    -------
    matplotlib Axes

    Examples
    --------
    >>> ax = plot_khat_hist(np.array([0.1, 0.8, 0.3]), n_samples=1000)
    >>> round(ax.lines[0].get_xdata()[0], 2)
    0.67
    """
    before, after0, method, thr0 = _khat_input(khat)
    after = after0 if after is None else np.asarray(after, dtype=float).ravel()
    _check_len("after", after, before.size)
    if method is not None and not np.any(method != "psis"):
        after = None  # nothing adapted: the "after" histogram would duplicate "before"
    thr = _resolve_threshold(threshold, thr0, n_samples)
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

    Parameters
    ----------
    y : (n,) 0/1 outcomes.
    probs : dict label -> LOO probabilities (array or PointwiseLoo), or one array.
    ax : matplotlib Axes to draw on (a new figure when None).
    diagonal : draw the chance line; legend : draw the legend.

    Returns
    -------
    matplotlib Axes

    Examples
    --------
    >>> ax = plot_roc(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8]))
    >>> ax.lines[0].get_xdata().tolist(), ax.lines[0].get_ydata().tolist()
    ([0.0, 0.0, 0.5, 0.5, 1.0], [0.0, 0.5, 0.5, 1.0, 1.0])
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

    Parameters
    ----------
    y, probs, ax, legend : as in `plot_roc`.
    prevalence : draw the prevalence line.

    Returns
    -------
    matplotlib Axes

    Examples
    --------
    >>> ax = plot_pr(np.array([0, 0, 1, 1]), {"psis": np.array([0.1, 0.4, 0.35, 0.8])})
    >>> ax.get_legend().get_texts()[0].get_text()
    'psis (AP = 0.833)'
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
                     diagonal: bool = True, legend: bool = True, band: float | None = 0.95,
                     counts: bool = True):
    """Reliability diagram: observed frequency vs mean predicted probability per bin.

    Parameters
    ----------
    y : binary outcomes (or None when ``probs`` holds PointwiseLoo results with ``y``).
    probs : dict label -> LOO probabilities (array or PointwiseLoo), or one array.
    n_bins, strategy : bins as ``sklearn.calibration.calibration_curve``.
    band : central probability of the binomial band drawn at every bin: where the observed
        frequency of a perfectly calibrated model with that bin's count and mean predicted
        probability falls (vertical bars in the fit's colour); None for none.
    counts : write the number of observations next to every bin's marker (left out where
        labels would overlap).

    Returns
    -------
    matplotlib Axes
        The expected calibration error of each fit is in the legend.

    Examples
    --------
    >>> y = np.array([0, 1, 1, 0, 1, 0, 1, 1])
    >>> p = np.array([0.2, 0.7, 0.8, 0.3, 0.6, 0.4, 0.9, 0.7])
    >>> ax = plot_calibration(y, p, n_bins=2)
    >>> sorted(t.get_text() for t in ax.texts)
    ['n=3', 'n=5']
    """
    from scipy.stats import binom

    y, items = _prob_items(y, probs)
    ax = _get_ax(ax, figsize=(5.0, 5.0))
    lab_x, lab_y, lab_t, lab_c = [], [], [], []
    for label, p in items:
        prob_true, prob_pred, n_bin = metrics.calibration_curve(y, p, n_bins, strategy,
                                                                return_counts=True)
        ece = metrics.expected_calibration_error(y, p, n_bins, strategy)
        (line,) = ax.plot(prob_pred, prob_true, marker="o", ms=4, lw=1.2,
                          label=f"{label} (ECE = {VALUE_FMT.format(ece)})")
        color = line.get_color()
        if band is not None:
            a = (1.0 - float(band)) / 2.0
            lo = binom.ppf(a, n_bin, prob_pred) / n_bin
            hi = binom.ppf(1.0 - a, n_bin, prob_pred) / n_bin
            ax.vlines(prob_pred, lo, hi, colors=color, lw=4, alpha=0.25, zorder=1)
        lab_x += list(prob_pred)
        lab_y += list(prob_true)
        lab_t += [f"n={int(c)}" for c in n_bin]
        lab_c += [color] * len(n_bin)
    if diagonal:
        ax.plot([0, 1], [0, 1], ls=":", color="gray", lw=1, label="_perfect")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_xlabel("mean predicted probability")
    ax.set_ylabel("observed frequency")
    if band is not None:
        ax.set_title(f"bars: {band:.0%} binomial band of a calibrated model", fontsize=8)
    if counts:
        _place_labels(ax, lab_x, lab_y, lab_t, colors=lab_c, fontsize=6,
                      priority=[int(t[2:]) for t in lab_t])
    if legend:
        ax.legend(loc="upper left", fontsize=8)
    return ax


# --------------------------------------------------------------------------- LOO-PIT
def plot_loo_pit(pit, *, ax=None, band: float = 0.95, color="tab:blue", label=None):
    """ECDF of LOO-PIT values minus the uniform CDF, with a pointwise binomial band.

    For a calibrated model the LOO-PIT values are uniform on [0, 1] (continuous outcomes;
    randomised PIT for discrete ones), so n ECDF(u) ~ Binomial(n, u) at every u: the grey
    band holds that central probability ``band``.  An S shape below zero then above means
    an over-dispersed predictive, the reverse under-dispersion; a hump a shifted one.

    Parameters
    ----------
    pit : `loo_adapt.expectations.LooPit` or an array of PIT values (NaN rows are left out
        and counted in the title).
    band : central probability of the band.

    Returns
    -------
    matplotlib Axes

    Examples
    --------
    >>> ax = plot_loo_pit(np.linspace(0.05, 0.95, 19))
    >>> ax.get_xlabel()
    'LOO-PIT'
    """
    from scipy.stats import binom

    values = np.asarray(getattr(pit, "pit", pit), dtype=float).ravel()
    finite = np.isfinite(values)
    if not finite.any():
        raise ValueError("no finite LOO-PIT values to plot")
    if np.any((values[finite] < 0) | (values[finite] > 1)):
        raise ValueError("LOO-PIT values must lie in [0, 1]")
    u = np.sort(values[finite])
    n = u.size
    grid = np.linspace(0.0, 1.0, 201)
    ecdf = np.searchsorted(u, grid, side="right") / n
    a = (1.0 - float(band)) / 2.0
    ax = _get_ax(ax, figsize=(5.0, 4.0))
    ax.fill_between(grid, binom.ppf(a, n, grid) / n - grid, binom.ppf(1 - a, n, grid) / n - grid,
                    color="0.85", step="post", label=f"{band:.0%} band (uniform)")
    ax.step(grid, ecdf - grid, where="post", color=color, lw=1.5,
            label=label or f"LOO-PIT ECDF - uniform (n={n})")
    ax.axhline(0.0, color="gray", lw=0.8, ls=":")
    ax.set_xlim(0, 1)
    ax.set_xlabel("LOO-PIT")
    ax.set_ylabel("ECDF difference")
    missing = int((~finite).sum())
    if missing:
        ax.set_title(f"{missing} observations without weights on the posterior draws left out",
                     fontsize=8)
    ax.legend(fontsize=8, loc="best")
    return ax
