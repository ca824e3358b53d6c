"""Every figure the package draws is readable: no two texts overlap, nothing leaves the canvas.

Text boxes come from matplotlib's renderer (``fig.canvas.get_renderer()``,
``artist.get_window_extent``) after a full draw; the legend's box counts as one text (its
entries are inside it) and so does each axis's tick labels one by one.  The inputs are the
hard cases seen in reports: n = 200 with many rows above the threshold, every row from MixIS
(no k-hat), a long fit name, two fits with identical curves, and the Laplace-bridge comparison
with four methods.
"""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.legend import Legend  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from loo_adapt import plots  # noqa: E402
from loo_adapt.laplace.compare import KHAT_BINS, Comparison, plot_comparison  # noqa: E402
from loo_adapt.result import PointwiseLoo  # noqa: E402

LONG = "loo-adapt demo: ovarian, regularized horseshoe logistic regression"


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _result(n=200, kind="adapted", seed=0):
    rng = np.random.default_rng(seed)
    khat = rng.uniform(0.2, 1.1, n)
    y = rng.integers(0, 2, n)
    p = np.clip(0.5 + 0.35 * (2 * y - 1) * rng.uniform(0, 1, n), 0.01, 0.99)
    if kind == "mixis":
        method = np.full(n, "mixis", dtype=object)
        after = np.full(n, np.nan)
    else:
        method = np.where(khat > 0.7, rng.choice(["kl", "var", "mixis", "refit", "psis"], n),
                          "psis").astype(object)
        after = np.where(method == "psis", khat,
                         np.where(np.isin(method, ["mixis", "refit"]), np.nan,
                                  rng.uniform(0.3, 0.9, n)))
    cands = [{"i": int(i), "transform": t, "rho": r, "khat": float(rng.uniform(0.2, 1.2))}
             for i in np.flatnonzero(khat > 0.7)[:12] for t in ("kl", "var", "ll", "mm1")
             for r in (0.01, 0.1, 1.0)]
    return PointwiseLoo(elpd_i=-rng.uniform(0.1, 2, n), p_loo_i=np.full(n, 0.1),
                        lpd_i=np.full(n, -0.5), mcse_elpd_i=np.full(n, 0.01), pareto_k=khat,
                        good_k=0.7, n_samples=4000, r_eff=1.0, pareto_k_after=after,
                        method=method, loo_prob=p, y=y, candidates=cands)


def _comparison(n=80, seed=1):
    rng = np.random.default_rng(seed)
    ref = rng.normal(0, 2, n)
    khat = rng.uniform(0.1, 1.0, n)
    pointwise = {("mcmc", None): {"loo_logit": ref}}
    table = []
    for j, m in enumerate(("map", "lla", "ella", "valla")):
        pointwise[(m, 0)] = {"loo_logit": ref * (1 + 0.2 * j) + rng.normal(0, 0.3, n)}
        table.append({"method": m, "mode": 0, "elpd_loo": -30.0 - 3 * j})
    table.append({"method": "mcmc", "mode": None, "elpd_loo": -29.0})
    assert len(KHAT_BINS) == 3
    return Comparison(table=table, pointwise=pointwise, khat=khat)


def _texts(fig):
    """Window extents of every visible, non-empty text; a legend is one box."""
    renderer = fig.canvas.get_renderer()
    legends = list(fig.findobj(Legend))
    skip = {id(t) for lg in legends for t in lg.findobj(Text)}
    drawn_ticks = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            tol = 1e-9 * max(1.0, abs(hi - lo))
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                labels = (tick.label1, tick.label2)
                skip.update(id(t) for t in labels)  # matplotlib keeps ticks it does not draw
                if lo - tol <= tick.get_loc() <= hi + tol:
                    drawn_ticks += [t for t in labels if t.get_visible()]
    boxes = []
    texts = [t for t in fig.findobj(Text) if id(t) not in skip] + drawn_ticks
    for t in texts:
        if t.get_visible() and t.get_text().strip():
            boxes.append((t.get_text(), t.get_window_extent(renderer)))
    boxes += [(f"legend {k}", lg.get_window_extent(renderer)) for k, lg in enumerate(legends)]
    return boxes


def _check(fig):
    if not hasattr(fig.canvas, "get_renderer"):  # a bare Figure, as save_report makes
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(fig)
    fig.canvas.draw()
    canvas = fig.bbox
    boxes = _texts(fig)
    assert boxes
    for name, box in boxes:
        assert (box.x0 >= canvas.x0 - 0.5 and box.x1 <= canvas.x1 + 0.5
                and box.y0 >= canvas.y0 - 0.5 and box.y1 <= canvas.y1 + 0.5), \
            f"{name!r} lies outside the canvas: {box} vs {canvas}"
    for a in range(len(boxes)):
        for b in range(a + 1, len(boxes)):
            (na, ba), (nb, bb) = boxes[a], boxes[b]
            assert not ba.overlaps(bb), f"{na!r} overlaps {nb!r}"
    # legends hide no data: each legend lies outside every axes' data area
    for lg in fig.findobj(Legend):
        for ax in fig.axes:
            assert not lg.get_window_extent().overlaps(ax.get_window_extent()), \
                "a legend lies over the data"


FIGURES = {
    "khat adapted n=200": lambda: plots.plot_khat(_result()),
    "khat every row MixIS": lambda: plots.plot_khat(_result(54, "mixis")),
    "khat bare array": lambda: plots.plot_khat(np.random.default_rng(2).uniform(0, 1.2, 300),
                                               n_samples=1000),
    "khat candidates": lambda: plots.plot_khat_candidates(_result(60)),
    "khat hist adapted": lambda: plots.plot_khat_hist(_result()),
    "khat hist every row MixIS": lambda: plots.plot_khat_hist(_result(54, "mixis")),
    "roc identical curves": lambda: plots.plot_roc(None, {LONG: _result(), "PSIS": _result(),
                                                          "other": _result(seed=3)}),
    "pr": lambda: plots.plot_pr(None, {LONG: _result(), "other": _result(seed=3)}),
    "calibration": lambda: plots.plot_calibration(None, {LONG: _result(),
                                                         "other": _result(seed=3)}),
    "loo pit": lambda: plots.plot_loo_pit(np.r_[np.random.default_rng(4).uniform(0, 1, 99),
                                                np.nan]),
}


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_plot_functions_are_readable(name):
    ax = FIGURES[name]()
    assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
    _check(ax.figure)


def test_laplace_comparison_is_readable():
    fig = plot_comparison(_comparison())
    legend_texts = [t.get_text() for lg in fig.findobj(Legend) for t in lg.get_texts()]
    assert legend_texts[:4] == ["MAP (plug-in)", "LLA", "ELLA", "VaLLA"]
    assert not any("None" in t or "[" in t for t in legend_texts)
    assert all(ax.get_title() for ax in fig.axes)
    _check(fig)


def test_identical_curves_are_drawn_once_under_both_names():
    res = _result()
    ax = plots.plot_roc(None, {"PSIS": res, "adapted": res})
    curves = [ln for ln in ax.lines if ln.get_linestyle() == "-"]
    assert len(curves) == 1
    assert "PSIS and adapted: identical curves" in ax.get_legend().get_texts()[0].get_text()


def test_report_figures_are_readable(tmp_path):
    """The figures save_report writes (Figure objects with the report's sizes)."""
    from matplotlib.figure import Figure

    res = _result()
    for func, size, args in ((plots.plot_khat, (9, 4), (res,)),
                             (plots.plot_khat_hist, (7, 4), (res,)),
                             (plots.plot_roc, (5, 6), (res.y, {LONG: res.loo_prob})),
                             (plots.plot_pr, (5, 6), (res.y, {LONG: res.loo_prob})),
                             (plots.plot_calibration, (5, 6), (res.y, {LONG: res.loo_prob}))):
        fig = Figure(figsize=size, layout="constrained")
        func(*args, ax=fig.add_subplot())
        _check(fig)


@pytest.mark.arviz1  # runs under arviz 1.x too (CI: -m arviz1)
@pytest.mark.parametrize("kind", ["adapted", "mixis"])
def test_plot_khat_legend_stays_in_a_callers_figure_without_room(kind, tmp_path):
    """plot_khat(res, ax=ax) on plt.subplots() (no layout engine, the axes filling the
    figure): the legend is inside the figure, so a plain savefig keeps it, and no value
    label lies under it.  A figure with room (constrained layout) keeps it right of the
    axes, off the data."""
    res = _result(200 if kind == "adapted" else 54, kind)
    fig, ax = plt.subplots()
    assert fig.get_layout_engine() is None
    plots.plot_khat(res, ax=ax)
    fig.savefig(tmp_path / "khat.png")  # no bbox_inches="tight"
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend()
    box, page = legend.get_window_extent(renderer), fig.bbox
    assert (box.x0 >= page.x0 and box.x1 <= page.x1 and box.y0 >= page.y0
            and box.y1 <= page.y1), f"legend {box} leaves the figure {page}"
    assert [t.get_text() for t in legend.get_texts()][-1] == "threshold 0.70"
    for t in ax.texts:  # the k-hat value labels
        assert not t.get_window_extent(renderer).overlaps(box), t.get_text()

    fig2, ax2 = plt.subplots(figsize=(9, 4), layout="constrained")
    plots.plot_khat(res, ax=ax2)
    _check(fig2)  # inside the canvas, and outside the axes


@pytest.mark.parametrize("which", ["khat_hist", "roc", "pr", "calibration", "loo_pit"])
def test_every_outside_legend_stays_in_a_callers_figure_without_room(which, tmp_path):
    """As plot_khat: on plt.subplots() (no room right of or below the axes) each figure's
    legend is moved inside, so a plain savefig keeps it whole."""
    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, 80)
    probs = np.clip(0.5 * y + 0.25 + 0.2 * rng.normal(size=80), 0.01, 0.99)
    fig, ax = plt.subplots()
    draw = {
        "khat_hist": lambda: plots.plot_khat_hist(rng.uniform(0.0, 1.2, 80), 0.7, ax=ax),
        "roc": lambda: plots.plot_roc(y, {"a": probs, "b": 1.0 - probs}, ax=ax),
        "pr": lambda: plots.plot_pr(y, {"a": probs, "b": 1.0 - probs}, ax=ax),
        "calibration": lambda: plots.plot_calibration(y, {"a": probs}, ax=ax),
        "loo_pit": lambda: plots.plot_loo_pit(rng.uniform(size=80), ax=ax),
    }[which]
    draw()
    fig.savefig(tmp_path / f"{which}.png")
    fig.canvas.draw()
    legend = ax.get_legend()
    assert legend is not None
    box, page = legend.get_window_extent(fig.canvas.get_renderer()), fig.bbox
    assert (box.x0 >= page.x0 - 0.5 and box.x1 <= page.x1 + 0.5 and box.y0 >= page.y0 - 0.5
            and box.y1 <= page.y1 + 0.5), f"{which}: legend {box} leaves the figure {page}"
