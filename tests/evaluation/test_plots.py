"""Plots render to PNG and carry the right content (points, lines, labels, numbers)."""

import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.image as mpimg  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import LineCollection, PathCollection  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from scipy.special import expit  # noqa: E402
from sklearn import metrics as skm  # noqa: E402
from sklearn.calibration import calibration_curve as sk_calibration_curve  # noqa: E402

from loo_adapt import plots  # noqa: E402
from loo_adapt.estimators.psis import initial_result
from loo_adapt.result import PointwiseLoo  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def save_and_check(ax, path):
    ax.figure.savefig(path, dpi=60)
    assert path.exists() and path.stat().st_size > 3000
    with open(path, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    img = mpimg.imread(path)
    assert img.shape[0] > 100 and img[..., :3].std() > 0.05  # not a blank canvas


def scatters(ax):
    return [c for c in ax.collections if isinstance(c, PathCollection)]


def legend_texts(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


N = 40
HIGH = {3: ("kl", 0.45), 11: ("var", 0.62), 25: ("refit", np.nan), 33: ("psis", None)}


def make_result(with_candidates=True):
    rng = np.random.default_rng(0)
    khat = rng.uniform(-0.1, 0.6, N)
    khat[[3, 11, 25, 33]] = [0.91, 1.13, 0.84, 0.77]
    after = khat.copy()
    method = np.full(N, "psis", dtype=object)
    for i, (m, k) in HIGH.items():
        method[i] = m
        if k is not None:
            after[i] = k
    candidates = []
    if with_candidates:
        for i in (3, 11, 25, 33):
            for t in ("kl", "var", "ll", "mm1"):
                for rho in (0.01, 0.1, 1.0):
                    candidates.append({
                        "i": i, "transform": t, "rho": rho,
                        "khat": float(rng.uniform(0.2, 1.2)),
                        "khat_holdout": float(rng.uniform(0.2, 1.2)),
                        "elpd_loo": -1.0, "loo_prob": 0.5,
                    })
        candidates[5]["khat"] = float("nan")  # a failed candidate is not drawn
    y = rng.integers(0, 2, N)
    return PointwiseLoo(
        elpd_i=rng.normal(-0.5, 0.2, N), p_loo_i=np.full(N, 0.1), lpd_i=np.full(N, -0.4),
        mcse_elpd_i=np.full(N, 0.01), pareto_k=khat, good_k=0.7, n_samples=4000,
        r_eff=1.0, pareto_k_after=after, method=method, loo_prob=rng.uniform(0.05, 0.95, N),
        y=y, candidates=candidates,
    )


# --------------------------------------------------------------------------- plot_khat
def test_plot_khat_pointwise_loo(tmp_path):
    res = make_result()
    ax = plots.plot_khat(res)
    save_and_check(ax, tmp_path / "khat.png")
    sc = scatters(ax)
    psis = res.method == "psis"
    # PSIS rows: black dots at their k-hat
    np.testing.assert_array_equal(sc[0].get_offsets()[:, 1], res.pareto_k[psis])
    np.testing.assert_array_equal(sc[0].get_facecolors()[0], to_rgba("black"))
    # adapted rows: grey at the PSIS k-hat, then a dot coloured as in Fig. S.2 after
    np.testing.assert_array_equal(sc[1].get_offsets(), [[3, 0.91], [11, 1.13]])
    by_color = {tuple(np.round(c.get_facecolors()[0], 6)) if len(c.get_facecolors()) else
                tuple(np.round(c.get_edgecolors()[0], 6)): c for c in sc[2:]}
    kl = by_color[tuple(np.round(to_rgba("tab:green"), 6))]
    var = by_color[tuple(np.round(to_rgba("tab:blue"), 6))]
    refit = by_color[tuple(np.round(to_rgba("tab:gray"), 6))]
    np.testing.assert_array_equal(kl.get_offsets(), [[3, 0.45]])
    np.testing.assert_array_equal(var.get_offsets(), [[11, 0.62]])
    # a refit has no k-hat: a cross at the PSIS k-hat that sent it there
    np.testing.assert_array_equal(refit.get_offsets(), [[25, 0.84]])
    assert sum(len(c.get_offsets()) for c in sc) == N + 2
    # before -> after connectors for the two observations with a k-hat after adaptation
    (conn,) = [c for c in ax.collections if isinstance(c, LineCollection)]
    segs = sorted(tuple(map(tuple, s)) for s in conn.get_segments())
    assert segs == [((3, 0.91), (3, 0.45)), ((11, 1.13), (11, 0.62))]
    # threshold line
    hl = [ln for ln in ax.lines if np.allclose(ln.get_ydata(), 0.7)]
    assert len(hl) == 1
    # the k-hat in use of the rows that matter: adapted, or still above the threshold;
    # not the refit's (its estimate does not rest on a k-hat)
    texts = sorted((t.xy[0], t.get_text()) for t in ax.texts)
    assert texts == [(3, "0.45"), (11, "0.62"), (33, "0.77")]
    assert ax.get_xlabel() == "observation"
    assert "hat{k}" in ax.get_ylabel() and "before and after adaptation" in ax.get_title()
    leg = legend_texts(ax)
    assert "KL descent, after (n=1)" in leg and "Variance descent, after (n=1)" in leg
    assert "threshold 0.70" in leg and any(t.startswith("refit (n=1): no k-hat") for t in leg)


def test_plot_khat_mixis_rows_are_not_called_adapted():
    res = make_result()
    method = np.full(N, "mixis", dtype=object)
    ax = plots.plot_khat(res.pareto_k, after=np.full(N, np.nan), method=method)
    assert "adaptation" not in ax.get_title() and "MixIS" in ax.get_title()
    assert not ax.texts  # no k-hat in use to label
    (sc,) = scatters(ax)
    np.testing.assert_array_equal(sc.get_offsets()[:, 1], res.pareto_k)
    mixis = PointwiseLoo(**{**res.__dict__, "method": method,
                            "pareto_k_after": np.full(N, np.nan), "reliable": None,
                            "verified_by": None, "reason": None})
    ax = plots.plot_khat_hist(mixis)
    assert not [p for p in ax.patches if type(p).__name__ == "Polygon"]  # no empty "after"
    assert any(t.startswith(f"{N} rows from MixIS") for t in legend_texts(ax))


def test_plot_khat_array_and_loo_adapt_attribute(tmp_path):
    res = make_result()
    ax = plots.plot_khat(res.pareto_k, threshold=0.5)
    save_and_check(ax, tmp_path / "arr.png")
    assert len(scatters(ax)) == 1
    assert len(scatters(ax)[0].get_offsets()) == N
    above = np.sort(res.pareto_k[res.pareto_k > 0.5])[::-1][:plots.MAX_LABELS]
    assert sorted(t.get_text() for t in ax.texts) == sorted(f"{k:.2f}" for k in above)
    assert [ln.get_ydata()[0] for ln in ax.lines] == [0.5]

    class Holder:
        loo_adapt = res

    ax2 = plots.plot_khat(Holder())
    assert len(scatters(ax2)) == 5
    assert len(ax2.texts) == 3

    # after/method given explicitly to an array behave like the PointwiseLoo fields
    ax3 = plots.plot_khat(res.pareto_k, after=res.pareto_k_after, method=res.method)
    assert sorted(t.get_text() for t in ax3.texts) == ["0.45", "0.62", "0.77"]


def heavy_tailed_draws(seed=1):
    """(posterior mu, log-likelihood) with three outliers that give large k-hat."""
    rng = np.random.default_rng(seed)
    n_obs, chains, draws = 12, 2, 250
    mu = rng.normal(size=(chains, draws))
    x = np.r_[np.zeros(n_obs - 3), [6.0, 8.0, 9.0]]
    ll = -0.5 * (x[None, None, :] - mu[..., None] * rng.gamma(0.5, 2.0, (chains, draws, 1))) ** 2
    return mu, ll


def test_plot_khat_on_arviz_023_elpddata(tmp_path):
    import arviz as az

    if int(az.__version__.split(".")[0]) >= 1:
        pytest.skip(reason="arviz 0.x API (ELPDData as a pandas Series)")
    mu, ll = heavy_tailed_draws()
    idata = az.from_dict(posterior={"mu": mu}, log_likelihood={"y": ll})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loo = az.loo(idata, pointwise=True)
    ax = plots.plot_khat(loo)
    save_and_check(ax, tmp_path / "az.png")
    pk = loo.pareto_k.values
    sc = scatters(ax)
    assert len(sc) == 1
    np.testing.assert_allclose(sc[0].get_offsets()[:, 1], pk)
    assert ax.lines[0].get_ydata()[0] == pytest.approx(loo.good_k)
    expected = sorted(f"{k:.2f}" for k in pk if k > loo.good_k)
    assert len(expected) >= 1
    assert sorted(t.get_text() for t in ax.texts) == expected
    # a bare DataArray of k-hat, which arviz.plot_khat accepts too
    ax2 = plots.plot_khat(loo.pareto_k)
    np.testing.assert_allclose(scatters(ax2)[0].get_offsets()[:, 1], pk)


def test_plot_khat_duck_typed_arviz1_dataclass():
    """arviz 1.x ELPDData: a dataclass whose pareto_k is an xarray DataArray."""
    from dataclasses import dataclass

    import xarray as xr

    @dataclass
    class ELPDLike:
        pareto_k: xr.DataArray
        good_k: float
        n_samples: int

    k = np.array([0.1, 0.9, 0.3, 0.75])
    ax = plots.plot_khat(ELPDLike(xr.DataArray(k, dims=["obs"]), 0.68, 1000))
    np.testing.assert_array_equal(scatters(ax)[0].get_offsets()[:, 1], k)
    assert ax.lines[0].get_ydata()[0] == 0.68
    assert sorted(t.get_text() for t in ax.texts) == ["0.75", "0.90"]


@pytest.mark.arviz1
def test_plot_khat_real_arviz1_elpddata():
    azs = pytest.importorskip("arviz_stats")
    azb = pytest.importorskip("arviz_base")
    if int(azs.__version__.split(".")[0]) < 1:
        pytest.skip(reason="needs arviz-stats >= 1")
    mu, ll = heavy_tailed_draws()
    dt = azb.from_dict({"posterior": {"mu": mu}, "log_likelihood": {"y": ll}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loo = azs.loo(dt, pointwise=True)
    ax = plots.plot_khat(loo)
    np.testing.assert_allclose(scatters(ax)[0].get_offsets()[:, 1],
                               np.asarray(loo.pareto_k).ravel())
    assert ax.lines[0].get_ydata()[0] == pytest.approx(loo.good_k)


def test_plot_khat_bad_input():
    with pytest.raises(TypeError, match="PointwiseLoo"):
        plots.plot_khat({"a": 1})
    with pytest.raises(ValueError, match="length"):
        plots.plot_khat(np.zeros(5), after=np.zeros(4))


# --------------------------------------------------------------------------- Fig. 2
def test_plot_khat_candidates(tmp_path):
    res = make_result()
    ax = plots.plot_khat_candidates(res)
    save_and_check(ax, tmp_path / "cand.png")
    sc = scatters(ax)
    assert len(sc[0].get_offsets()) == 4  # originals of the 4 observations with candidates
    np.testing.assert_array_equal(sc[0].get_offsets()[:, 1], res.pareto_k[[3, 11, 25, 33]])
    cand = res.candidates
    colours = {"kl": "tab:green", "var": "tab:blue", "ll": "tab:orange", "mm1": "tab:red"}
    for coll, t in zip(sc[1:], ["kl", "var", "ll", "mm1"]):
        finite = [c for c in cand if c["transform"] == t and np.isfinite(c["khat"])]
        assert len(coll.get_offsets()) == len(finite)
        np.testing.assert_allclose(coll.get_facecolors()[0][:3], to_rgba(colours[t])[:3])
        np.testing.assert_allclose(np.sort(coll.get_offsets()[:, 1]),
                                   np.sort([c["khat"] for c in finite]))
        sizes = coll.get_sizes()
        assert sizes.max() > sizes.min()  # rho shown as marker size
    assert sum(len(c.get_offsets()) for c in sc[1:]) == len(cand) - 1
    # the smallest k-hat per observation labelled
    expected = []
    for i in (3, 11, 25, 33):
        ks = [c["khat"] for c in cand if c["i"] == i and np.isfinite(c["khat"])]
        expected.append(f"{min(ks):.2f}")
    assert sorted(t.get_text() for t in ax.texts) == sorted(expected)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["3", "11", "25", "33"]
    assert [ln.get_ydata()[0] for ln in ax.lines] == [0.7]
    assert set(legend_texts(ax)) >= {"original", "KL descent", "Variance descent",
                                     "LL descent", "MM1"}


def test_plot_khat_candidates_list_and_holdout():
    res = make_result()
    ax = plots.plot_khat_candidates(res.candidates, res.pareto_k, threshold=0.6, use_holdout=True)
    sc = scatters(ax)
    assert sum(len(c.get_offsets()) for c in sc[1:]) == len(res.candidates)
    assert "held-out" in ax.get_ylabel()
    assert [ln.get_ydata()[0] for ln in ax.lines] == [0.6]
    ax2 = plots.plot_khat_candidates(res.candidates)  # no originals known
    assert len(scatters(ax2)) == 4
    with pytest.raises(ValueError, match="no candidates"):
        plots.plot_khat_candidates(make_result(with_candidates=False))
    with pytest.raises(ValueError, match="lacks keys"):
        plots.plot_khat_candidates([{"i": 1}])


# --------------------------------------------------------------------------- ROC / PR
def fits(n=150, seed=3):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    y = (rng.uniform(size=n) < expit(1.5 * x)).astype(int)
    return y, {
        "MCMC": expit(1.5 * x + rng.normal(scale=0.5, size=n)),
        "ADVI": np.round(expit(1.0 * x + rng.normal(scale=1.0, size=n)), 1),  # ties
    }


def test_plot_roc(tmp_path):
    y, probs = fits()
    ax = plots.plot_roc(y, probs)
    save_and_check(ax, tmp_path / "roc.png")
    assert len(ax.lines) == 3  # two fits + chance diagonal
    for line, p in zip(ax.lines, probs.values()):
        fpr, tpr, _ = skm.roc_curve(y, p)
        np.testing.assert_allclose(line.get_xdata(), fpr)
        np.testing.assert_allclose(line.get_ydata(), tpr)
    assert legend_texts(ax) == [
        f"{k} (AUROC = {skm.roc_auc_score(y, p):.3f})" for k, p in probs.items()] + [
        "chance (random ranking)"]
    np.testing.assert_array_equal(ax.lines[2].get_xydata(), [[0, 0], [1, 1]])
    assert ax.get_xlabel() == "false positive rate"
    assert ax.get_ylabel() == "true positive rate"


def test_plot_roc_from_pointwise_results():
    res = make_result()
    ax = plots.plot_roc(None, {"adaptive": res})
    assert legend_texts(ax) == [
        f"adaptive (AUROC = {skm.roc_auc_score(res.y, res.loo_prob):.3f})",
        "chance (random ranking)"]
    with pytest.raises(ValueError, match="y is required"):
        plots.plot_roc(None, {"a": res.loo_prob})


def test_plot_pr(tmp_path):
    y, probs = fits()
    ax = plots.plot_pr(y, probs)
    save_and_check(ax, tmp_path / "pr.png")
    assert len(ax.lines) == 3  # two fits + prevalence
    for line, p in zip(ax.lines, probs.values()):
        precision, recall, _ = skm.precision_recall_curve(y, p)
        np.testing.assert_allclose(line.get_xdata(), recall)
        np.testing.assert_allclose(line.get_ydata(), precision)
        assert line.get_drawstyle() == "steps-post"
    assert legend_texts(ax) == [
        f"{k} (AP = {skm.average_precision_score(y, p):.3f})" for k, p in probs.items()] + [
        f"prevalence {y.mean():.3f} (random ranking)"]
    assert ax.lines[2].get_ydata()[0] == pytest.approx(y.mean())
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("recall", "precision")


# --------------------------------------------------------------------------- hist / calibration
def test_plot_khat_hist(tmp_path):
    res = make_result()
    ax = plots.plot_khat_hist(res, bins=10)
    save_and_check(ax, tmp_path / "hist.png")
    bars = [p for p in ax.patches if type(p).__name__ == "Rectangle"]
    assert len(bars) == 10
    assert sum(b.get_height() for b in bars) == N
    edges = np.histogram_bin_edges(
        np.r_[res.pareto_k, res.pareto_k_after[np.isfinite(res.pareto_k_after)], 0.7], bins=10)
    np.testing.assert_array_equal([b.get_height() for b in bars],
                                  np.histogram(res.pareto_k, edges)[0])
    assert any(type(p).__name__ == "Polygon" for p in ax.patches)  # the "after" outline
    vl = [ln for ln in ax.lines if np.allclose(ln.get_xdata(), 0.7)]
    assert len(vl) == 1
    assert "hat{k}" in ax.get_xlabel() and ax.get_ylabel() == "number of observations"
    ax2 = plots.plot_khat_hist(res.pareto_k, threshold=0.5, bins=5)
    assert len(ax2.patches) == 5


def test_plot_calibration(tmp_path):
    y, probs = fits(400)
    ax = plots.plot_calibration(y, probs, n_bins=7)
    save_and_check(ax, tmp_path / "cal.png")
    assert len(ax.lines) == 3
    labels = []
    for line, (k, p) in zip(ax.lines, probs.items()):
        pt, pp = sk_calibration_curve(y, p, n_bins=7)
        np.testing.assert_allclose(line.get_xdata(), pp)
        np.testing.assert_allclose(line.get_ydata(), pt)
        counts = np.histogram(p, np.linspace(0, 1, 8))[0]  # no p on interior edges here
        ece = np.sum(counts[counts > 0] * np.abs(pt - pp)) / y.size
        labels.append(f"{k} (ECE = {ece:.3f})")
    assert legend_texts(ax) == labels + ["perfect calibration",
                                         "95% binomial band of a calibrated model"]
    assert ax.get_xlabel() == "mean predicted probability"


# --------------------------------------------------------------------------- thresholds
def test_thresholds_come_from_the_number_of_draws():
    res = make_result()
    thr_1000 = 1.0 - 1.0 / 3.0  # min(1 - 1/log10(1000), 0.7)
    ax = plots.plot_khat_hist(res.pareto_k, n_samples=1000)
    assert [ln.get_xdata()[0] for ln in ax.lines] == pytest.approx([thr_1000])
    assert "threshold 0.67" in legend_texts(ax)
    ax = plots.plot_khat_candidates(res.candidates, res.pareto_k, n_samples=1000)
    assert [ln.get_ydata()[0] for ln in ax.lines] == pytest.approx([thr_1000])
    ax = plots.plot_khat(res.pareto_k, n_samples=1000)
    assert [ln.get_ydata()[0] for ln in ax.lines] == pytest.approx([thr_1000])
    # a result computed from S = 1000 draws carries its threshold into every k-hat plot
    rng = np.random.default_rng(0)
    from loo_adapt.core.psis_loo import loo_pointwise

    r1000 = initial_result(loo_pointwise(rng.normal(-1, 0.5, (1, 1000, 30)), r_eff=1.0))
    r1000.candidates = [{"i": 0, "transform": "ll", "rho": 0.1, "khat": 0.5}]
    for func, get in ((plots.plot_khat, "get_ydata"), (plots.plot_khat_hist, "get_xdata"),
                      (plots.plot_khat_candidates, "get_ydata")):
        ax = func(r1000)
        assert getattr(ax.lines[-1], get)()[0] == pytest.approx(thr_1000)
        plt.close("all")


# --------------------------------------------------------------------------- overlaps
def _boxes(ax, texts):
    ax.figure.canvas.draw()
    renderer = ax.figure.canvas.get_renderer()
    return [t.get_window_extent(renderer) for t in texts if t.get_visible() and t.get_text()]


def _no_overlap(boxes):
    for a in range(len(boxes)):
        for b in range(a + 1, len(boxes)):
            assert not boxes[a].overlaps(boxes[b]), (a, b)


def _crowded_result(n=200, seed=0):
    rng = np.random.default_rng(seed)
    khat = rng.uniform(0.5, 1.1, n)  # most of the 200 above the threshold
    method = np.where(khat > 0.7, "ll", "psis").astype(object)
    after = np.where(method == "ll", khat - 0.3, khat)
    cands = [{"i": int(i), "transform": t, "rho": r, "khat": float(rng.uniform(0.2, 1.0))}
             for i in np.flatnonzero(khat > 0.7) for t in ("kl", "ll") for r in (0.1, 1.0)]
    return PointwiseLoo(
        elpd_i=np.full(n, -1.0), p_loo_i=np.full(n, 0.1), lpd_i=np.full(n, -0.9),
        mcse_elpd_i=np.full(n, 0.01), pareto_k=khat, good_k=0.67, n_samples=1000,
        r_eff=1.0, pareto_k_after=after, method=method, candidates=cands)


def test_labels_do_not_overlap_at_n_200(tmp_path):
    res = _crowded_result()
    ax = plots.plot_khat(res)
    boxes = _boxes(ax, ax.texts)
    assert len(boxes) > 10  # labels are still drawn where there is room
    _no_overlap(boxes)
    save_and_check(ax, tmp_path / "khat200.png")
    plt.close("all")
    ax = plots.plot_khat_candidates(res)
    _no_overlap(_boxes(ax, ax.texts))
    ticks = _boxes(ax, ax.get_xticklabels())
    assert len(ticks) >= 10
    _no_overlap(ticks)
    # every shown tick label names the observation at its position
    obs = np.unique([c["i"] for c in res.candidates])
    for tick, label in zip(ax.get_xticks(), ax.get_xticklabels()):
        assert label.get_text() == str(obs[int(tick)])


# --------------------------------------------------------------------------- calibration
def test_calibration_shows_bin_counts_and_binomial_bands():
    from scipy.stats import binom

    rng = np.random.default_rng(3)
    p = rng.uniform(size=300)
    y = (rng.uniform(size=300) < p).astype(int)
    ax = plots.plot_calibration(y, {"m": p}, n_bins=5)
    counts = np.histogram(p, np.linspace(0, 1, 6))[0]
    assert sorted(t.get_text() for t in ax.texts) == sorted(f"n={c}" for c in counts)
    (bands,) = [c for c in ax.collections if isinstance(c, LineCollection)]
    segs = bands.get_segments()
    _, pp = sk_calibration_curve(y, p, n_bins=5)
    for seg, c, x in zip(segs, counts, pp):
        lo, hi = binom.interval(0.95, c, x)
        np.testing.assert_allclose(seg[:, 0], [x, x])
        np.testing.assert_allclose(seg[:, 1], [lo / c, hi / c])
    _no_overlap(_boxes(ax, ax.texts))


# --------------------------------------------------------------------------- LOO-PIT
def test_plot_loo_pit(tmp_path):
    from loo_adapt.expectations import LooPit

    u = np.random.default_rng(4).uniform(size=150)
    pit = LooPit(pit=np.r_[u, np.nan], pareto_k=np.zeros(151),
                 method=np.array(["psis"] * 150 + ["mixis"], dtype=object),
                 reason=np.array([""] * 151, dtype=object))
    ax = plots.plot_loo_pit(pit)
    save_and_check(ax, tmp_path / "pit.png")
    line = ax.lines[0]
    grid = line.get_xdata()
    np.testing.assert_allclose(line.get_ydata(), [np.mean(u <= g) - g for g in grid],
                               atol=1e-12)
    assert "1 observations without weights" in ax.get_title()
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        plots.plot_loo_pit(np.array([0.2, 1.5]))
