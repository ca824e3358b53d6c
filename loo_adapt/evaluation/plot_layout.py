"""Layout helpers shared by the figures: new axes with room for outside legends, legends
outside the data, value labels that overlap nothing, tick labels thinned until none overlap.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from loo_adapt.result import PointwiseLoo

__all__ = ["legend_outside", "legend_in_figure", "VALUE_FMT"]

#: Format of the numbers (AUROC, AP, ECE) written into legends and labels.
VALUE_FMT = "{:.3f}"


def _get_ax(ax, figsize=(7.0, 4.0)):
    """The given Axes, or one on a new figure whose layout makes room for outside legends."""
    if ax is None:
        _, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax

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
    if ax.get_legend() is not None:  # a legend inside the axes (`legend_in_figure`)
        taken.append(ax.get_legend().get_window_extent(renderer))
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

def _as_pointwise(obj) -> PointwiseLoo | None:
    if isinstance(obj, PointwiseLoo):
        return obj
    inner = getattr(obj, "loo_adapt", None)
    if isinstance(inner, PointwiseLoo):
        return inner
    return None

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


def legend_in_figure(ax, legend, *, fontsize: float = 8):
    """Keep an outside legend (`legend_outside`) inside the figure: if, once the figure is
    drawn (its layout engine, e.g. constrained layout, making room first), it still reaches
    past the figure's edge, as right of an Axes the caller made on a figure without room,
    it moves inside the axes, framed, where it hides the fewest points (``loc="best"``).

    Parameters
    ----------
    ax : matplotlib Axes the legend belongs to.
    legend : the Legend `legend_outside` returned, or None (nothing done).
    fontsize : type size of a legend moved inside.

    Returns
    -------
    matplotlib Legend or None
        The legend now on ``ax``.

    Examples
    --------
    >>> fig, ax = plt.subplots()  # no layout engine: no room right of the axes
    >>> _ = ax.plot([0, 1], label="a")
    >>> leg = legend_in_figure(ax, legend_outside(ax))
    >>> bool(fig.bbox.contains(*leg.get_window_extent().p1))
    True
    """
    if legend is None:
        return None
    fig = ax.figure
    renderer = _renderer(fig)
    box, page = legend.get_window_extent(renderer), fig.bbox
    tol = 0.5  # pixels
    if (box.x0 >= page.x0 - tol and box.x1 <= page.x1 + tol and box.y0 >= page.y0 - tol
            and box.y1 <= page.y1 + tol):
        return legend
    handles, labels = legend.legend_handles, [t.get_text() for t in legend.get_texts()]
    legend.remove()
    return ax.legend(handles, labels, loc="best", fontsize=fontsize, frameon=True,
                     framealpha=0.85)


def _wrap(text: str, width: int = 44) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(str(text), width)) or str(text)
