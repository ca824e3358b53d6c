"""Classification figures of LOO probabilities (the paper's Fig. 3) and LOO-PIT.

* :func:`plot_roc`, :func:`plot_pr` - several fits on one axis; fits whose curves coincide
  are drawn once under all their names.
* :func:`plot_calibration` - reliability diagram with bin counts and binomial bands.
* :func:`plot_loo_pit` - ECDF of LOO-PIT values minus the uniform CDF, with a band.

Legends go below the axes (`plot_layout.legend_outside`); every figure has a title.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from loo_adapt.evaluation import metrics
from loo_adapt.evaluation.plot_layout import (
    VALUE_FMT,
    _as_pointwise,
    _get_ax,
    _place_labels,
    _wrap,
    legend_in_figure,
    legend_outside,
)

__all__ = ["plot_roc", "plot_pr", "plot_calibration", "plot_loo_pit"]


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
        legend_in_figure(ax, legend_outside(ax, where="below"))
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
        legend_in_figure(ax, legend_outside(ax, where="below"))
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
        legend_in_figure(ax, legend_outside(ax, where="below", extra=extra))
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
    legend_in_figure(ax, legend_outside(ax, where="below"))
    return ax
