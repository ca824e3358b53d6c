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
    "legend_outside",
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
    """The given Axes, or one on a new figure whose layout makes room for outside legends."""
    if ax is None:
        _, ax = plt.subplots(figsize=figsize, layout="constrained")
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
#: Estimators whose rows have no k-hat of their own (their check is an MCSE / a refit).
NO_KHAT = ("mixis", "refit")
#: At most this many value labels in a k-hat plot (the highest k-hat first).
MAX_LABELS = 12


def legend_outside(ax, *, where: str = "right", fontsize: float = 8, extra=(), **kws):
    """A legend outside the axes (right of it or below it), so it hides no data.

    Parameters
    ----------
    ax : matplotlib Axes.
    where : "right" or "below".
    fontsize : legend type size.
    extra : more legend handles (artists not drawn in the axes, e.g. a note).
    **kws : passed to ``ax.legend``.

    Returns
    -------
    matplotlib Legend or None (nothing labelled)

    Examples
    --------
    >>> ax = plt.subplots()[1]
    >>> _ = ax.plot([0, 1], label="a")
    >>> bool(legend_outside(ax).get_bbox_to_anchor().x0 > ax.bbox.x1)
    True
    """
    handles, labels = ax.get_legend_handles_labels()
    handles = list(handles) + list(extra)
    labels = list(labels) + [h.get_label() for h in extra]
    if not handles:
        return None
    if where == "below":  # below the tick labels and the x label, whatever the axes' size
        from matplotlib.transforms import offset_copy

        below = offset_copy(ax.transAxes, fig=ax.figure, y=-38, units="points")
        kws = {"loc": "upper center", "bbox_to_anchor": (0.5, 0.0), "bbox_transform": below,
               "ncol": 1, **kws}
    else:
        kws = {"loc": "upper left", "bbox_to_anchor": (1.02, 1.0), **kws}
    return ax.legend(handles, labels, fontsize=fontsize, borderaxespad=0.0, frameon=False,
                     **kws)


def _wrap(text: str, width: int = 44) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(str(text), width)) or str(text)


def plot_khat(result_or_khat, *, after=None, method=None, threshold=None, ax=None,
              label_min: bool = True, legend: bool = True, markersize: float = 18.0,
              n_samples=None, title: bool = True, **scatter_kws):
    """Pareto k-hat per observation, each row drawn by the estimator that produced it.

    Parameters
    ----------
    result_or_khat : PointwiseLoo, arviz ELPDData (0.23 Series or 1.x dataclass) with
        pointwise ``pareto_k``, an object whose ``loo_adapt`` attribute is a PointwiseLoo,
        or a 1-D array of k-hat (before adaptation).
    after, method : k-hat after adaptation and estimator name per observation; taken from
        a PointwiseLoo when not given.
    threshold : horizontal line; defaults to the result's threshold (arviz ``good_k``),
        else min(1 - 1/log10 S, 0.7) from ``n_samples``, else 0.7.
    label_min : write the k-hat in use next to the rows that matter: those still above the
        threshold and the adapted ones (highest first, at most `MAX_LABELS`; labels that
        would overlap are left out).  Rows estimated by MixIS or refits are not labelled:
        their PSIS k-hat is not what their estimate rests on.
    legend : a legend right of the axes.
    n_samples : number of posterior draws S, for the threshold of a bare k-hat array.
    title : a title saying what is drawn ("before and after adaptation" only when a row was
        adapted).

    Returns
    -------
    matplotlib Axes

    Examples
    --------
    >>> ax = plot_khat(np.array([0.1, 0.8, 0.3]), n_samples=1000)
    >>> round(ax.lines[0].get_ydata()[0], 2)
    0.67

    Rows estimated by PSIS are black dots.  An adapted row is a grey dot at its PSIS k-hat
    joined to a dot coloured by its transform at the k-hat after adaptation.  Rows estimated
    by MixIS or refits have no k-hat: they are drawn as crosses in their estimator's colour
    at the PSIS k-hat that sent them there, labelled as such.
    """
    khat, after0, method0, thr0 = _khat_input(result_or_khat)
    n = khat.size
    after = after0 if after is None else np.asarray(after, dtype=float).ravel()
    method = method0 if method is None else np.asarray(method, dtype=object).ravel()
    _check_len("after", after, n)
    _check_len("method", method, n)
    if after is not None and method is None:
        method = np.where(np.isfinite(after) & (after != khat), "adapted", "psis").astype(object)
    if method is None:
        method = np.full(n, "psis", dtype=object)
    if after is None:
        after = np.where(method == "psis", khat, np.nan)
    method = method.astype(str)
    thr = _resolve_threshold(threshold, thr0, n_samples)

    ax = _get_ax(ax)
    x = np.arange(n)
    no_khat = np.isin(method, NO_KHAT) | ((method != "psis") & ~np.isfinite(after))
    adapted = (method != "psis") & ~no_khat
    psis = method == "psis"
    if psis.any():
        ax.scatter(x[psis], khat[psis], s=markersize, c="black", zorder=2,
                   label=f"PSIS (n={int(psis.sum())})", **scatter_kws)
    if adapted.any():
        ax.scatter(x[adapted], khat[adapted], s=markersize, c="0.65", zorder=2,
                   label="PSIS before adaptation", **scatter_kws)
        ax.vlines(x[adapted], khat[adapted], after[adapted], colors="0.7", lw=0.8, zorder=1)
    for name in _ordered(method[adapted]):
        sel = adapted & (method == name)
        ax.scatter(x[sel], after[sel], s=markersize, color=transform_color(name), zorder=3,
                   label=f"{_label(name)}, after (n={int(sel.sum())})", **scatter_kws)
    for name in _ordered(method[no_khat]):
        sel = no_khat & (method == name)
        ax.scatter(x[sel], khat[sel], s=markersize * 1.6, marker="x",
                   color=transform_color(name), zorder=3, linewidths=1.2,
                   label=_wrap(f"{_label(name)} (n={int(sel.sum())}): no k-hat; "
                               "PSIS k-hat shown", 30))
    ax.axhline(thr, ls="--", color="gray", lw=1, label=f"threshold {KHAT_FMT.format(thr)}")
    ax.set_xlabel("observation")
    ax.set_ylabel(r"Pareto $\hat{k}$")
    if title:
        if adapted.any():
            text = r"Pareto $\hat{k}$ before and after adaptation"
        elif no_khat.any():
            names = ", ".join(_label(m) for m in _ordered(method[no_khat]))
            text = rf"Pareto $\hat{{k}}$ of PSIS (rows from {names} have no $\hat{{k}}$)"
        else:
            text = r"Pareto $\hat{k}$ of PSIS"
        ax.set_title(text, fontsize=10)
    if legend:
        legend_outside(ax)
    if label_min:
        used = np.where(adapted, after, np.where(no_khat, np.nan, khat))
        idx = np.flatnonzero(((used > thr) | adapted) & np.isfinite(used))
        idx = idx[np.argsort(-khat[idx], kind="stable")][:MAX_LABELS]
        _place_labels(ax, x[idx], used[idx], [KHAT_FMT.format(v) for v in used[idx]],
                      priority=khat[idx])
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
    the marker area (log scale).  The smallest k-hat per observation is labelled, in the
    colour of the transform that reached it.

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
    # one label per observation: the smallest k-hat any transform reached, in its colour
    for i in np.unique(obs_i):
        s = (obs_i == i) & np.isfinite(kc) & np.isin(names, transforms)
        if not s.any():
            continue
        j = np.flatnonzero(s)[np.argmin(kc[s])]
        lab_x.append(pos[j] + dodge[transforms.index(names[j])])
        lab_y.append(kc[j])
        lab_t.append(KHAT_FMT.format(kc[j]))
        lab_c.append(transform_color(names[j]))
    ax.axhline(thr, ls="--", color="gray", lw=1, label=f"threshold {KHAT_FMT.format(thr)}")
    ax.set_title(r"Pareto $\hat{k}$ of every tried transform and step size"
                 + (" (held-out draws)" if use_holdout else ""), fontsize=10)
    ax.set_xlim(-0.6, obs.size - 0.4)
    ax.set_xlabel("observation")
    ax.set_ylabel(r"Pareto $\hat{k}$ (held-out draws)" if use_holdout else r"Pareto $\hat{k}$")
    _thin_ticklabels(ax, [str(i) for i in obs], rotation=90 if obs.size > 15 else 0)
    if legend:
        legend_outside(ax)
    if label_min:
        _place_labels(ax, lab_x, lab_y, lab_t, colors=lab_c,
                      priority=-np.asarray(lab_y, dtype=float))
    return ax


# --------------------------------------------------------------------------- histogram
def plot_khat_hist(khat, threshold=None, *, after=None, bins=20, ax=None, n_samples=None):
    """Histogram of plain PSIS's k-hat (grey) and, where rows were adapted, of the k-hat used.

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

    The "k-hat used" outline is drawn only when some row was adapted (its k-hat after
    adaptation replaces PSIS's); rows estimated by MixIS or refits have no k-hat and are
    counted in the legend instead of an empty histogram.

    Examples
    --------
    >>> ax = plot_khat_hist(np.array([0.1, 0.8, 0.3]), n_samples=1000)
    >>> round(ax.lines[0].get_xdata()[0], 2)
    0.67
    """
    before, after0, method, thr0 = _khat_input(khat)
    after = after0 if after is None else np.asarray(after, dtype=float).ravel()
    _check_len("after", after, before.size)
    used = None
    no_khat = np.zeros(before.size, dtype=bool)
    if method is not None:
        method = np.asarray(method).astype(str)
        no_khat = np.isin(method, NO_KHAT)
        if after is not None:
            no_khat |= (method != "psis") & ~np.isfinite(after)
            if np.any((method != "psis") & ~no_khat):  # something was adapted
                used = np.where(method == "psis", before, after)[~no_khat]
    elif after is not None and np.any(np.isfinite(after) & (after != before)):
        used = after[np.isfinite(after)]
    thr = _resolve_threshold(threshold, thr0, n_samples)
    vals = before[np.isfinite(before)]
    if used is not None:
        vals = np.r_[vals, used[np.isfinite(used)]]
    edges = np.histogram_bin_edges(np.r_[vals, thr], bins=bins)
    ax = _get_ax(ax, figsize=(6.0, 4.0))
    ax.hist(before[np.isfinite(before)], bins=edges, color="0.6",
            label="PSIS" if used is None else "PSIS, before adaptation")
    if used is not None:
        ax.hist(used[np.isfinite(used)], bins=edges, histtype="step", lw=1.5,
                color="tab:blue", label="k-hat used, after adaptation")
    ax.axvline(thr, ls="--", color="black", lw=1, label=f"threshold {KHAT_FMT.format(thr)}")
    extra = []
    if no_khat.any():
        from matplotlib.lines import Line2D

        names = ", ".join(_label(m) for m in _ordered(method[no_khat]))
        extra.append(Line2D([], [], ls="", label=_wrap(
            f"{int(no_khat.sum())} rows from {names}: no k-hat (PSIS's shown)", 30)))
    ax.set_xlabel(r"Pareto $\hat{k}$")
    ax.set_ylabel("number of observations")
    ax.set_title(r"Pareto $\hat{k}$ of PSIS" + (" and after adaptation" if used is not None
                                                else ""), fontsize=10)
    legend_outside(ax, extra=extra)
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


def _curves(items, curve):
    """[(labels, p, x, y)]: fits whose curves coincide are drawn once, under all their names."""
    out = []
    for label, p in items:
        x, y = curve(p)
        for group in out:
            if group[2].shape == x.shape and np.array_equal(group[2], x) and np.array_equal(
                    group[3], y):
                group[0].append(label)
                break
        else:
            out.append(([label], p, x, y))
    return out


def _curve_label(labels, value: str) -> str:
    if len(labels) == 1:
        return _wrap(f"{labels[0]} ({value})")
    return _wrap(f"{' and '.join(labels)}: identical curves ({value})")


def plot_roc(y, probs, *, ax=None, diagonal: bool = True, legend: bool = True,
             title: str | None = "LOO ROC curve"):
    """ROC curves of several fits on one axis, AUROC (Eq. 8) in the legend.

    Parameters
    ----------
    y : (n,) 0/1 outcomes.
    probs : dict label -> LOO probabilities (array or PointwiseLoo), or one array.
    ax : matplotlib Axes to draw on (a new figure when None).
    diagonal : draw the chance line; legend : draw the legend (below the axes).
    title : axes title (None for none).

    Returns
    -------
    matplotlib Axes
        Fits whose curves coincide (the same ranking of the observations) are drawn once,
        with one legend entry naming them all, so no line hides under another.

    Examples
    --------
    >>> ax = plot_roc(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8]))
    >>> ax.lines[0].get_xdata().tolist(), ax.lines[0].get_ydata().tolist()
    ([0.0, 0.0, 0.5, 0.5, 1.0], [0.0, 0.5, 0.5, 1.0, 1.0])
    """
    y, items = _prob_items(y, probs)
    ax = _get_ax(ax, figsize=(5.0, 6.0))
    for labels, p, fpr, tpr in _curves(items, lambda p: metrics.roc_curve(y, p)[:2]):
        auc = metrics.auroc(y, p)
        ax.plot(fpr, tpr, lw=1.5, label=_curve_label(labels, f"AUROC = {VALUE_FMT.format(auc)}"))
    if diagonal:
        ax.plot([0, 1], [0, 1], ls=":", color="gray", lw=1, label="chance (random ranking)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.01)
    ax.set_aspect("equal")
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    if title:
        ax.set_title(title, fontsize=10)
    if legend:
        legend_outside(ax, where="below")
    return ax


def plot_pr(y, probs, *, ax=None, prevalence: bool = True, legend: bool = True,
            title: str | None = "LOO precision-recall"):
    """Precision-recall curves (step-wise) of several fits, average precision in the legend.

    The dotted horizontal line is the prevalence, the precision of a random ranking.

    Parameters
    ----------
    y, probs, ax, legend, title : as in `plot_roc`.
    prevalence : draw (and label) the prevalence line.

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
    ax = _get_ax(ax, figsize=(5.0, 6.0))
    for labels, p, recall, precision in _curves(
            items, lambda p: metrics.precision_recall_curve(y, p)[1::-1]):
        ap = metrics.average_precision(y, p)
        ax.plot(recall, precision, drawstyle="steps-post", lw=1.5,
                label=_curve_label(labels, f"AP = {VALUE_FMT.format(ap)}"))
    if prevalence:
        prev = float(np.mean(y))
        ax.axhline(prev, ls=":", color="gray", lw=1,
                   label=f"prevalence {VALUE_FMT.format(prev)} (random ranking)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.01)
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    if title:
        ax.set_title(title, fontsize=10)
    if legend:
        legend_outside(ax, where="below")
    return ax


def plot_calibration(y, probs, n_bins: int = 10, *, strategy: str = "uniform", ax=None,
                     diagonal: bool = True, legend: bool = True, band: float | None = 0.95,
                     counts: bool = True,
                     title: str | None = "Calibration of the LOO probabilities"):
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
    title : axes title (None for none); legend : a legend below the axes.

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
    ax = _get_ax(ax, figsize=(5.0, 6.0))
    lab_x, lab_y, lab_t, lab_c = [], [], [], []
    for label, p in items:
        prob_true, prob_pred, n_bin = metrics.calibration_curve(y, p, n_bins, strategy,
                                                                return_counts=True)
        ece = metrics.expected_calibration_error(y, p, n_bins, strategy)
        (line,) = ax.plot(prob_pred, prob_true, marker="o", ms=4, lw=1.2,
                          label=_wrap(f"{label} (ECE = {VALUE_FMT.format(ece)})"))
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
        ax.plot([0, 1], [0, 1], ls=":", color="gray", lw=1, label="perfect calibration")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_xlabel("mean predicted probability")
    ax.set_ylabel("observed frequency")
    if title:
        ax.set_title(title, fontsize=10)
    if legend:
        from matplotlib.lines import Line2D

        extra = [] if band is None else [Line2D(
            [], [], color="gray", lw=4, alpha=0.25,
            label=f"{band:.0%} binomial band of a calibrated model")]
        legend_outside(ax, where="below", extra=extra)
    if counts:
        _place_labels(ax, lab_x, lab_y, lab_t, colors=lab_c, fontsize=6,
                      priority=[int(t[2:]) for t in lab_t])
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
    ax = _get_ax(ax, figsize=(5.0, 4.5))
    ax.fill_between(grid, binom.ppf(a, n, grid) / n - grid, binom.ppf(1 - a, n, grid) / n - grid,
                    color="0.85", step="post", label=f"{band:.0%} band (uniform)")
    ax.step(grid, ecdf - grid, where="post", color=color, lw=1.5,
            label=label or f"LOO-PIT ECDF - uniform (n={n})")
    ax.axhline(0.0, color="gray", lw=0.8, ls=":")
    ax.set_xlim(0, 1)
    ax.set_xlabel("LOO-PIT")
    ax.set_ylabel("ECDF difference")
    missing = int((~finite).sum())
    title = "LOO-PIT: ECDF minus the uniform CDF"
    if missing:
        title += f"\n({missing} observations without weights on the posterior draws left out)"
    ax.set_title(title, fontsize=9)
    legend_outside(ax, where="below")
    return ax
