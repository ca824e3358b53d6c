"""Metrics are checked against scikit-learn / arviz / direct O(n^2) formulas on the same inputs."""

import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.special import expit, logit
from sklearn import metrics as skm
from sklearn.calibration import calibration_curve as sk_calibration_curve

from loo_adapt import metrics as M


def sk_log_loss(y, p, **kw):
    # sklearn 1.9 renamed y_pred -> y_proba; older versions only know the positional form.
    try:
        return skm.log_loss(y, y_proba=p, **kw)
    except TypeError:
        return skm.log_loss(y, p, **kw)


def make_data(n, seed, ties=False):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    y = (rng.uniform(size=n) < expit(1.2 * x)).astype(int)
    p = expit(1.2 * x + rng.normal(scale=0.8, size=n))
    if ties:
        p = np.round(p, 1)  # heavy ties, including across classes
    return y, p


CASES = [(200, 0, False), (150, 1, True), (57, 2, True), (1000, 3, False)]


@pytest.fixture(params=CASES, ids=lambda c: f"n{c[0]}-ties{c[2]}")
def data(request):
    return make_data(*request.param)


# --------------------------------------------------------------------------- sklearn cross-checks
def test_auroc_matches_sklearn(data):
    y, p = data
    assert M.auroc(y, p) == pytest.approx(skm.roc_auc_score(y, p), abs=1e-14)


def test_auroc_matches_direct_eq8_double_sum(data):
    y, p = data
    pos, neg = p[y == 1], p[y == 0]
    direct = (np.sum(neg[:, None] < pos[None, :]) + 0.5 * np.sum(neg[:, None] == pos[None, :]))
    assert M.auroc(y, p) == pytest.approx(direct / (pos.size * neg.size), abs=1e-14)


def test_weighted_auroc_matches_sklearn(data):
    y, p = data
    w = np.random.default_rng(5).exponential(size=y.size)
    w[::7] = 0.0  # zero weights are dropped by sklearn; they must not matter here either
    assert M.auroc(y, p, sample_weight=w) == pytest.approx(
        skm.roc_auc_score(y, p, sample_weight=w), abs=1e-12)


@pytest.mark.parametrize("drop", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_roc_curve_matches_sklearn(data, drop, weighted):
    y, p = data
    w = np.random.default_rng(6).exponential(size=y.size) if weighted else None
    ours = M.roc_curve(y, p, sample_weight=w, drop_intermediate=drop)
    ref = skm.roc_curve(y, p, sample_weight=w, drop_intermediate=drop)
    for a, b in zip(ours, ref):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=0)
    # the trapezoid area of the ROC curve is the Mann-Whitney AUROC (ties as diagonals)
    assert np.trapezoid(ours[1], ours[0]) == pytest.approx(
        M.auroc(y, p, sample_weight=w), abs=1e-12)


@pytest.mark.parametrize("drop", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_pr_curve_matches_sklearn(data, drop, weighted):
    y, p = data
    w = np.random.default_rng(7).exponential(size=y.size) if weighted else None
    ours = M.precision_recall_curve(y, p, sample_weight=w, drop_intermediate=drop)
    ref = skm.precision_recall_curve(y, p, sample_weight=w, drop_intermediate=drop)
    for a, b in zip(ours, ref):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=0)


@pytest.mark.parametrize("weighted", [False, True])
def test_average_precision_matches_sklearn(data, weighted):
    y, p = data
    w = np.random.default_rng(8).exponential(size=y.size) if weighted else None
    ref = skm.average_precision_score(y, p, sample_weight=w)
    assert M.average_precision(y, p, sample_weight=w) == pytest.approx(ref, abs=1e-13)
    # the batch kernel used by the bootstrap must agree with the sklearn definition
    ww = np.ones(y.size) if w is None else w
    batch = M._ap_weighted_batch(y.astype(float), p, np.vstack([ww, 2 * ww]))
    np.testing.assert_allclose(batch, ref, atol=1e-13)


def test_average_precision_is_stepwise_not_trapezoid():
    y = np.array([0, 1, 0, 1, 1, 0, 0, 1])
    p = np.array([0.1, 0.8, 0.35, 0.4, 0.9, 0.7, 0.2, 0.3])
    prec, rec, _ = skm.precision_recall_curve(y, p)
    trapezoid = -np.trapezoid(prec, rec)
    ap = M.average_precision(y, p)
    assert ap == pytest.approx(skm.average_precision_score(y, p), abs=1e-15)
    assert abs(ap - trapezoid) > 1e-3


def test_batch_auroc_matches_sklearn_weighted(data):
    y, p = data
    W = np.random.default_rng(9).dirichlet(np.ones(y.size), size=4)
    got = M._auroc_weighted_batch(y.astype(float), p, W)
    ref = [skm.roc_auc_score(y, p, sample_weight=w) for w in W]
    np.testing.assert_allclose(got, ref, atol=1e-12)


@pytest.mark.parametrize("weighted", [False, True])
def test_brier_and_log_score_match_sklearn(data, weighted):
    y, p = data
    p = np.clip(p, 1e-3, 1 - 1e-3)  # sklearn always clips at eps; stay away from it
    w = np.random.default_rng(10).exponential(size=y.size) if weighted else None
    assert M.brier_score(y, p, sample_weight=w) == pytest.approx(
        skm.brier_score_loss(y, p, sample_weight=w), abs=1e-14)
    assert M.log_score(y, p, sample_weight=w) == pytest.approx(
        -sk_log_loss(y, p, sample_weight=w), rel=1e-13)
    assert M.log_score(y, logit=logit(p), sample_weight=w) == pytest.approx(
        -sk_log_loss(y, p, sample_weight=w), rel=1e-10)


def test_log_score_overflow_safe_logits():
    y = np.array([1, 0, 1, 0])
    z = np.array([800.0, -800.0, -750.0, 720.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        val = M.log_score(y, logit=z)
    # exact: log sigmoid(800) ~ 0, log sigmoid(-750) = -750 (to double precision)
    assert np.isfinite(val)
    assert val == pytest.approx((0.0 + 0.0 - 750.0 - 720.0) / 4, rel=1e-15)


def test_log_score_clips_only_with_warning():
    y = np.array([1, 0, 1, 0])
    p = np.array([0.0, 0.2, 0.9, 1.0])  # two impossible outcomes under p
    with pytest.warns(RuntimeWarning, match="2 observation"):
        val = M.log_score(y, p)
    eps = np.finfo(float).eps
    expected = np.mean([np.log(eps), np.log(0.8), np.log(0.9), np.log(eps)])
    assert val == pytest.approx(expected, rel=1e-14)
    assert val == pytest.approx(-sk_log_loss(y, p), rel=1e-12)  # sklearn clips to eps too
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        M.log_score(np.array([1, 0]), np.array([1.0, 0.0]))  # exact certainty, right class


def ref_bin_counts(p, n_bins, strategy):
    """Non-empty bin counts by explicit interval tests on sklearn's edges (value on an
    interior edge belongs to the lower bin, as with sklearn's searchsorted)."""
    if strategy == "uniform":
        edges = np.linspace(0.0, 1.0, n_bins + 1)
    else:
        edges = np.percentile(p, np.linspace(0, 100, n_bins + 1))
    counts = []
    for k in range(n_bins):
        inside = np.ones(p.size, bool)
        if k > 0:
            inside &= p > edges[k]
        if k < n_bins - 1:
            inside &= p <= edges[k + 1]
        counts.append(inside.sum())
    counts = np.array(counts)
    return counts[counts > 0]


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("n_bins", [5, 10])
def test_calibration_curve_and_ece_match_sklearn(data, strategy, n_bins):
    y, p = data
    pt, pp, counts = M.calibration_curve(y, p, n_bins, strategy, return_counts=True)
    rt, rp = sk_calibration_curve(y, p, n_bins=n_bins, strategy=strategy)
    np.testing.assert_allclose(pt, rt, rtol=1e-13)
    np.testing.assert_allclose(pp, rp, rtol=1e-13)
    ref_counts = ref_bin_counts(p, n_bins, strategy)
    np.testing.assert_array_equal(counts, ref_counts)
    ece_ref = np.sum(ref_counts * np.abs(rt - rp)) / y.size
    assert M.expected_calibration_error(y, p, n_bins, strategy) == pytest.approx(ece_ref, 1e-13)


def test_ece_zero_for_perfectly_calibrated_bins():
    p = np.repeat([0.05, 0.25, 0.55, 0.85], 20)
    y = np.concatenate([np.r_[np.ones(k), np.zeros(20 - k)] for k in (1, 5, 11, 17)])
    assert M.expected_calibration_error(y, p) == pytest.approx(0.0, abs=1e-15)


def test_looic_against_arviz_and_formula():
    import arviz as az

    if int(az.__version__.split(".")[0]) >= 1:
        pytest.skip(reason="arviz 0.x API")
    rng = np.random.default_rng(3)
    ll = rng.normal(-1.0, 0.4, size=(2, 300, 25))
    idata = az.from_dict(posterior={"mu": rng.normal(size=(2, 300))}, log_likelihood={"y": ll})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = az.loo(idata, pointwise=True, scale="deviance")
    elpd_i = ref.loo_i.values / -2.0
    n = elpd_i.size
    val, se = M.looic(elpd_i)
    assert val == pytest.approx(ref["elpd_loo"], rel=1e-12)
    # arviz uses the n variance, R loo (and we) the n - 1 variance
    assert se == pytest.approx(ref["se"] * np.sqrt(n / (n - 1)), rel=1e-12)


# --------------------------------------------------------------------------- DeLong
def delong_direct(y, p):
    """Structural components by explicit O(n^2) pair comparisons (DeLong 1988)."""
    x, z = p[y == 1], p[y == 0]
    psi = (x[:, None] > z[None, :]) + 0.5 * (x[:, None] == z[None, :])
    v10, v01 = psi.mean(axis=1), psi.mean(axis=0)
    m, n = x.size, z.size
    s10 = np.sum((v10 - psi.mean()) ** 2) / (m - 1)
    s01 = np.sum((v01 - psi.mean()) ** 2) / (n - 1)
    return np.sqrt(s10 / m + s01 / n)


def test_delong_matches_direct_structural_components(data):
    y, p = data
    assert M.delong_se(y, p) == pytest.approx(delong_direct(y, p), rel=1e-12)


def test_delong_close_to_bootstrap_sd():
    y, p = make_data(400, 11)
    rng = np.random.default_rng(0)
    reps = []
    for _ in range(400):
        idx = rng.integers(0, y.size, y.size)
        if 0 < y[idx].sum() < y.size:
            reps.append(skm.roc_auc_score(y[idx], p[idx]))
    assert M.delong_se(y, p) == pytest.approx(np.std(reps, ddof=1), rel=0.15)


# --------------------------------------------------------------------------- Bayesian bootstrap
def test_bayesian_bootstrap_interval_and_shrinkage():
    widths = []
    for n in (100, 1600):
        y, p = make_data(n, 20)
        auc = skm.roc_auc_score(y, p)
        mean, (lo, hi) = M.bayesian_bootstrap(y, p, "auroc", n=1000, seed=1)
        assert lo < auc < hi
        assert abs(mean - auc) < 0.25 * (hi - lo)
        ap = skm.average_precision_score(y, p)
        _, (alo, ahi) = M.bayesian_bootstrap(y, p, "average_precision", n=1000, seed=1)
        assert alo < ap < ahi
        widths.append(hi - lo)
        # the Bayesian-bootstrap sd is the DeLong SE to first order
        assert (hi - lo) / (2 * 1.96) == pytest.approx(M.delong_se(y, p), rel=0.2)
    assert widths[1] < 0.4 * widths[0]  # ~ 1/sqrt(16) = 0.25


def test_bayesian_bootstrap_reproducible_and_callable():
    y, p = make_data(120, 4)
    a = M.bayesian_bootstrap(y, p, "auroc", n=300, seed=42)
    assert a == M.bayesian_bootstrap(y, p, "auroc", n=300, seed=42)

    def sk_auc(yy, pp, w):
        return skm.roc_auc_score(yy, pp, sample_weight=w)

    b = M.bayesian_bootstrap(y, p, sk_auc, n=300, seed=42)
    assert b[0] == pytest.approx(a[0], abs=1e-12)
    np.testing.assert_allclose(b[1], a[1], atol=1e-12)


# --------------------------------------------------------------------------- MC error of p
def test_mc_error_zero_when_probabilities_exact():
    y, p = make_data(100, 5)
    out = M.mc_error_of_probabilities(y, p, np.zeros(y.size), n_sim=20, seed=0)
    assert out["mcse"] == 0.0
    assert out["value"] == pytest.approx(skm.roc_auc_score(y, p), abs=1e-14)


def test_mc_error_predicts_spread_of_noisy_estimates():
    """Independent check: estimate p with genuine Monte Carlo noise many times and compare
    the observed spread of AUROC with the propagated MCSE from one realisation."""
    rng = np.random.default_rng(12)
    n, S = 300, 200
    y, q = make_data(n, 13)
    # p_i is a Monte Carlo mean of S logit-normal draws around the true probability q_i
    spread = []
    for _ in range(200):
        draws = expit(logit(q)[:, None] + rng.normal(scale=1.0, size=(n, S)))
        spread.append(skm.roc_auc_score(y, draws.mean(axis=1)))
    draws = expit(logit(q)[:, None] + rng.normal(scale=1.0, size=(n, S)))
    p_hat, p_mcse = draws.mean(axis=1), draws.std(axis=1, ddof=1) / np.sqrt(S)
    out = M.mc_error_of_probabilities(y, p_hat, p_mcse, n_sim=300, seed=1)
    assert out["mcse"] == pytest.approx(np.std(spread, ddof=1), rel=0.3)
    # via elpd MCSE (delta method) the answer is the same
    p_obs = np.where(y == 1, p_hat, 1 - p_hat)
    out2 = M.mc_error_of_probabilities(y, p_hat, mcse_elpd=p_mcse / p_obs, n_sim=300, seed=1)
    assert out2["mcse"] == pytest.approx(out["mcse"], rel=1e-12)


def test_mc_error_rejects_nan_mcse():
    y, p = make_data(50, 6)
    s = np.full(50, 0.01)
    s[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        M.mc_error_of_probabilities(y, p, s)


# --------------------------------------------------------------------------- report
def test_classification_report_numbers():
    y, p = make_data(250, 30)
    rep = M.classification_report(y, p, n_boot=300, seed=0, p_mcse=np.full(y.size, 0.005))
    assert rep["auroc"] == pytest.approx(skm.roc_auc_score(y, p), abs=1e-14)
    assert rep["auroc_se"] == pytest.approx(delong_direct(y, p), rel=1e-12)
    assert rep["average_precision"] == pytest.approx(skm.average_precision_score(y, p), 1e-13)
    assert rep["brier"] == pytest.approx(skm.brier_score_loss(y, p), abs=1e-14)
    assert rep["log_score"] == pytest.approx(-sk_log_loss(y, p), rel=1e-12)
    rt, rp = sk_calibration_curve(y, p, n_bins=10)
    ece_ref = np.sum(ref_bin_counts(p, 10, "uniform") * np.abs(rt - rp)) / y.size
    assert rep["ece"] == pytest.approx(ece_ref, rel=1e-13)
    lo, hi = rep["auroc_bb_interval"]
    assert lo < rep["auroc"] < hi
    lo, hi = rep["ap_bb_interval"]
    assert lo < rep["average_precision"] < hi
    assert rep["n"] == 250 and rep["n_pos"] == int(y.sum())
    assert 0 < rep["auroc_mcse"] < rep["auroc_se"]
    assert rep == M.classification_report(y, p, n_boot=300, seed=0,
                                          p_mcse=np.full(y.size, 0.005))


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "y, p, exc, match",
    [
        ([0, 1, 2], [0.1, 0.2, 0.3], ValueError, "only 0 and 1"),
        ([1, 1, 1], [0.1, 0.2, 0.3], ValueError, "both classes"),
        ([0, 1, 1], [0.1, 0.2], ValueError, "length"),
        ([0, 1, 1], [0.1, np.nan, 0.3], ValueError, "NaN"),
        ([0, 1, 1], [0.1, 1.2, 0.3], ValueError, r"\[0, 1\]"),
        ([0, 1, 1], [-0.1, 0.2, 0.3], ValueError, r"\[0, 1\]"),
        ([[0, 1]], [[0.1, 0.2]], ValueError, "1-D"),
        (["a", "b"], [0.1, 0.2], TypeError, "numeric"),
        ([0, np.nan, 1], [0.1, 0.2, 0.3], ValueError, "NaN"),
    ],
)
def test_invalid_inputs_raise(y, p, exc, match):
    for fn in (M.auroc, M.roc_curve, M.precision_recall_curve, M.average_precision,
               M.brier_score, M.log_score, M.calibration_curve, M.delong_se):
        with pytest.raises(exc, match=match):
            fn(y, p)


def test_other_invalid_arguments():
    y, p = make_data(40, 1)
    with pytest.raises(ValueError, match="strategy"):
        M.calibration_curve(y, p, strategy="kmeans")
    with pytest.raises(ValueError, match="stat"):
        M.bayesian_bootstrap(y, p, "f1")
    with pytest.raises(ValueError, match="sample_weight"):
        M.auroc(y, p, sample_weight=-np.ones(y.size))
    with pytest.raises(TypeError, match="exactly one"):
        M.log_score(y, p, logit=logit(p))
    with pytest.raises(ValueError, match="at least 2"):
        M.delong_se([0, 1, 1], [0.1, 0.5, 0.7])
    with pytest.raises(ValueError, match="non-finite"):
        M.looic([1.0, np.inf])


# --------------------------------------------------------------------------- properties
probs = st.lists(st.integers(0, 20), min_size=2, max_size=60)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_auroc_label_flip_symmetry(data):
    k = data.draw(probs)
    n = len(k)
    y = np.array(data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))
    y[:2] = [0, 1]  # both classes always present (no assume: keeps hypothesis efficient)
    p = np.array(k) / 20.0  # coarse grid: many ties, which must count one half both ways
    a = M.auroc(y, p)
    assert M.auroc(1 - y, p) == pytest.approx(1.0 - a, abs=1e-12)
    assert M.auroc(y, 1.0 - p) == pytest.approx(1.0 - a, abs=1e-12)
    assert a == pytest.approx(skm.roc_auc_score(y, p), abs=1e-12)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), power=st.floats(0.2, 5.0), shift=st.floats(-3.0, 3.0))
def test_auroc_ap_invariant_under_monotone_transform(data, power, shift):
    k = data.draw(probs)
    n = len(k)
    y = np.array(data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))
    y[:2] = [0, 1]  # both classes always present (no assume: keeps hypothesis efficient)
    p = np.array(k) / 20.0
    t = expit(shift + logit(np.clip(p, 0.01, 0.99)) * power)  # strictly increasing on [0,1]
    # the transform must keep the tie structure exactly (no new ties from rounding)
    assume(np.array_equal(np.unique(p, return_inverse=True)[1],
                          np.unique(t, return_inverse=True)[1]))
    assert M.auroc(y, t) == pytest.approx(M.auroc(y, p), abs=1e-12)
    assert M.average_precision(y, t) == pytest.approx(M.average_precision(y, p), abs=1e-12)
    if min(y.sum(), n - y.sum()) >= 2:
        assert M.delong_se(y, t) == pytest.approx(M.delong_se(y, p), abs=1e-12)


def test_report_warns_when_delong_undefined():
    y = np.array([0, 0, 0, 1])
    p = np.array([0.1, 0.3, 0.2, 0.8])
    with pytest.warns(RuntimeWarning, match="DeLong"):
        rep = M.classification_report(y, p, n_boot=50, seed=0)
    assert np.isnan(rep["auroc_se"]) and rep["auroc"] == 1.0
