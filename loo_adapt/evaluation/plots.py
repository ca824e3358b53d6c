"""Diagnostic and classification plots (matplotlib).  Every function returns the Axes.

* :func:`plot_khat` - Pareto k-hat per observation, each row drawn by the estimator that
  produced it (PSIS, adapted: before -> after, MixIS / refit: no k-hat), threshold line,
  the k-hat in use labelled where it matters.
* :func:`plot_khat_candidates` - the paper's Fig. 2 / S.2: every tried transform and step size.
* :func:`plot_khat_hist` - PSIS's k-hat, and the k-hat in use when rows were adapted.
* :func:`plot_roc`, :func:`plot_pr`, :func:`plot_calibration`, :func:`plot_loo_pit` - from
  `plots_classification` (the paper's Fig. 3, reliability diagram, LOO-PIT).

Legends sit outside the data (`plot_layout.legend_outside`) and move inside the axes when
the caller's figure has no room for them (`plot_layout.legend_in_figure`); every figure has a
title.

Thresholds come from the number of draws S (min(1 - 1/log10 S, 0.7), as arviz and R loo);
value labels are placed so that they do not overlap (crowded ones are left out).

Colours per transform follow the paper's Fig. S.2 (KL green, Variance blue, LL orange,
MM1 red); the remaining estimators get the next tableau colours.
"""

from __future__ import annotations

import numpy as np

from loo_adapt.evaluation.plot_layout import (  # noqa: F401 (re-exported helpers)
    VALUE_FMT,
    _as_pointwise,
    _get_ax,
    _place_labels,
    _renderer,
    _thin_ticklabels,
    _wrap,
    legend_in_figure,
    legend_outside,
)
from loo_adapt.evaluation.plots_classification import (
    plot_calibration,
    plot_loo_pit,
    plot_pr,
    plot_roc,
)
from loo_adapt.evaluation.summary import NO_KHAT  # rows without a k-hat of their own
from loo_adapt.result import ESTIMATORS

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

#: Format of the k-hat values written into legends and labels (VALUE_FMT: AUROC, AP, ECE).
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


# --------------------------------------------------------------------------- k-hat inputs
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
#: At most this many value labels in a k-hat plot (the highest k-hat first).
MAX_LABELS = 12


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
    legend : a legend right of the axes where the figure has room for it (a figure made
        here, or any with constrained layout); else, as on an ``ax`` of a figure without a
        layout engine that would cut it off, inside the axes, framed, where it hides the
        fewest points (`plot_layout.legend_in_figure`).  Either way it is inside the figure,
        so a plain ``fig.savefig(path)`` keeps it.
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
        legend_in_figure(ax, legend_outside(ax))
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
        legend_in_figure(ax, legend_outside(ax))
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
    legend_in_figure(ax, legend_outside(ax, extra=extra))
    return ax
