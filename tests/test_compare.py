"""loo_adapt.compare against R loo's loo_compare (stored outputs of its own tests, inputs
rebuilt with R's random numbers), arviz's compare on both lines, and hand-computed ranges."""

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from r_reference import RRandom
from scipy import stats
from scipy.special import logsumexp

import loo_adapt
from loo_adapt.compare import compare, format_compare, is_verified, plausible_range
from loo_adapt.evaluation.arviz import arviz_major
from loo_adapt.result import PointwiseLoo

pytestmark = pytest.mark.arviz1  # runs under arviz 1.x too (CI: -m arviz1)

R_LOO = Path(__file__).parent / "data" / "r_loo"
REF = json.loads((R_LOO / "reference.json").read_text())


def example_ll():
    """R loo's example_loglik_array(): (draws 500, chains 2, observations 32)."""
    return np.load(R_LOO / "example_loglik_array.npz")["ll"]


def r_test_arrays():
    """LLarr, LLarr2, LLarr3 of R loo's tests/testthat/test_compare.R (set.seed(123))."""
    ll = example_ll()
    r = RRandom(123)
    flat = ll.ravel(order="F")
    ll2 = r.rnorm(flat.size, flat, 0.5).reshape(ll.shape, order="F")
    ll3 = r.rnorm(flat.size, flat, 1.0).reshape(ll.shape, order="F")
    return ll, ll2, ll3


def r_waic(ll) -> PointwiseLoo:
    """R loo's waic() pointwise values (chains stacked, var with n - 1) as a PointwiseLoo
    with no k-hat (the inputs of R's loo_compare; the totals are checked against R)."""
    m = np.concatenate([ll[:, c, :] for c in range(ll.shape[1])])
    lpd = logsumexp(m, axis=0) - np.log(m.shape[0])
    p = m.var(axis=0, ddof=1)
    n = lpd.size
    return PointwiseLoo(lpd - p, p, lpd, np.full(n, np.nan), np.full(n, np.nan), 0.7,
                        m.shape[0], np.ones(n))


def _check_r_frame(cmp, ref, names):
    assert cmp.index.tolist() == names
    np.testing.assert_allclose(cmp["elpd_loo"], ref["elpd_waic"], rtol=0, atol=1e-11)
    np.testing.assert_allclose(cmp["se_elpd_loo"], ref["se_elpd_waic"], rtol=0, atol=1e-11)
    np.testing.assert_allclose(cmp["p_loo"], ref["p_waic"], rtol=0, atol=1e-11)
    np.testing.assert_allclose(cmp["elpd_diff"], ref["elpd_diff"], rtol=0, atol=1e-11)
    np.testing.assert_allclose(cmp["se_diff"], ref["se_diff"], rtol=1e-10, atol=1e-14)
    ref_p = np.array([np.nan if v is None else v for v in ref["p_worse"]])
    np.testing.assert_array_equal(cmp["p_worse"].to_numpy(), ref_p)
    assert cmp["diag_diff"].tolist() == ref["diag_diff"]
    assert cmp["diag_elpd"].tolist() == ref["diag_elpd"]


def test_matches_r_loo_compare_two_and_three_models():
    ll, ll2, ll3 = r_test_arrays()
    w1, w2, w3 = r_waic(ll), r_waic(ll2), r_waic(ll3)
    cmp = compare({"model1": w1, "model2": w2}, weights=())
    _check_r_frame(cmp, REF["loo_compare_waic_w1_w2"], ["model1", "model2"])
    # R: elpd_diff -4.056958669579656, se_diff 0.08755920552273368
    assert cmp.loc["model2", "elpd_diff"] == pytest.approx(-4.056958669579656, abs=1e-11)
    assert format_compare(cmp, unverified=False).splitlines()[:3] == REF["print_w1_w2"]
    # R orders by elpd: given in reverse the best still comes first
    assert compare({"A": w2, "B": w1}, weights=()).index.tolist() == ["B", "A"]

    cmp3 = compare({"model1": w1, "model2": w2, "model3": w3}, weights=())
    _check_r_frame(cmp3, REF["loo_compare_waic_w1_w2_w3"], ["model1", "model2", "model3"])
    assert format_compare(cmp3, unverified=False).splitlines()[:4] == REF["print_w1_w2_w3"]

    same = compare({"model1": w1, "model2": w1}, weights=())
    _check_r_frame(same, REF["loo_compare_waic_w1_w1"], ["model1", "model2"])


def test_matches_r_loo_compare_of_loo_example():
    """R: loo(LL), loo(LL + 1), loo(LL + 2) printed with simplify = FALSE."""
    ll = example_ll().transpose(1, 0, 2)  # (chains, draws, n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = {f"model{j + 1}": loo_adapt.loo(ll + j, reff=1.0) for j in range(3)}
    cmp = compare(res, weights=())
    lines = REF["print_loo_LL_plus_0_1_2_simplify_false"]
    rows = [ln.split() for ln in lines[1:4]]
    assert cmp.index.tolist() == [r[0] for r in rows]
    for row, (_, got) in zip(rows, cmp.iterrows()):
        # model elpd_diff se_diff p_worse [diag_diff] elpd_loo se_elpd_loo
        assert f"{got['elpd_diff'] + 0.0:.1f}" == row[1]
        assert f"{got['se_diff']:.1f}" == row[2]
        assert f"{got['elpd_loo']:.1f}" == row[-2]
        assert f"{got['se_elpd_loo']:.1f}" == row[-1]
        p_r = row[3]
        assert (np.isnan(got["p_worse"]) if p_r == "NA" else f"{got['p_worse']:.2f}" == p_r)
        assert got["diag_diff"] == ("N < 100" if "N" in row else "")
    tail = [ln.split() for ln in lines[5:8]]
    for row, (_, got) in zip(tail, cmp.iterrows()):
        assert f"{got['p_loo']:.1f}" == row[0]


def _arviz_inputs(n, seed):
    """Three normal-model log-likelihoods: a good, a slightly worse, a much worse model."""
    rng = np.random.default_rng(seed)
    y = rng.normal(size=n)
    out = {}
    for name, (shift, scale) in {"good": (0.0, 1.0), "close": (0.05, 1.0),
                                 "far": (0.6, 1.5)}.items():
        mu = rng.normal(shift, 0.1, size=(2, 250, 1))
        out[name] = stats.norm.logpdf(y, mu, scale)
    return out


def test_against_arviz_compare_this_line():
    """elpd_diff, se_diff (R's n - 1 variance: arviz's dse * sqrt(n / (n - 1))), order and
    weights against the installed arviz's compare, on arviz's own results and ours."""
    import arviz as az

    n = 120
    lls = _arviz_inputs(n, seed=7)
    kw = {"round_to": "none"} if arviz_major() >= 1 else {}
    sign = -1.0 if arviz_major() >= 1 else 1.0  # 1.x: model minus best; 0.x: best minus model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if arviz_major() >= 1:
            from arviz_base import from_dict

            plain = {k: az.loo(from_dict({"posterior": {"mu": v[..., 0]},
                                          "log_likelihood": {"y": v}}), pointwise=True)
                     for k, v in lls.items()}
        else:
            plain = {k: az.loo(az.from_dict(posterior={"mu": v[..., 0]},
                                            log_likelihood={"y": v}), pointwise=True)
                     for k, v in lls.items()}
        ours = {k: loo_adapt.loo(v) for k, v in lls.items()}
    for models in (plain, ours):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = az.compare(models, method="stacking", **kw)
            ref_bma = az.compare(models, method="pseudo-BMA", **kw)
        cmp = compare(models)
        assert cmp.index.tolist() == ref.index.tolist() == ["good", "close", "far"]
        np.testing.assert_allclose(cmp["elpd_diff"], -sign * ref["elpd_diff"].to_numpy(),
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(cmp["se_diff"],
                                   ref["dse"].to_numpy() * np.sqrt(n / (n - 1)),
                                   rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(cmp["weight_stacking"], ref["weight"], atol=1e-12)
        np.testing.assert_allclose(cmp["weight_pseudo_bma"], ref_bma.loc[cmp.index, "weight"],
                                   atol=1e-12)
        # R loo 2.10's normal approximation
        d, s = cmp["elpd_diff"].to_numpy()[1:], cmp["se_diff"].to_numpy()[1:]
        np.testing.assert_allclose(cmp["p_worse"].to_numpy()[1:], stats.norm.cdf(0, d, s),
                                   rtol=1e-12)
        assert np.isnan(cmp["p_worse"].iloc[0])
    assert cmp.loc["close", "diag_diff"] == "|elpd_diff| < 4"
    assert cmp.loc["far", "diag_diff"] == ""
    if arviz_major() >= 1:
        assert cmp["diag_diff"].tolist() == ref["diag_diff"].tolist()


def test_p_worse_and_diagnostics_against_arviz_stats():
    """arviz-stats 1.x computes p_worse with its dse (n variance): with that dse ours agrees;
    diag_diff strings equal, diag_elpd counts equal."""
    pytest.importorskip("arviz_stats", reason="arviz 1.x only")
    import arviz as az
    from arviz_base import from_dict

    n = 120
    lls = _arviz_inputs(n, seed=11)
    lls["far"] = lls["far"].copy()
    rng = np.random.default_rng(3)
    lls["far"][..., :3] += rng.standard_t(1.2, size=(2, 250, 3)) * 4.0  # high k-hat rows
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = {k: az.loo(from_dict({"posterior": {"mu": v[..., 0]},
                                      "log_likelihood": {"y": v}}), pointwise=True)
                 for k, v in lls.items()}
        ref = az.compare(plain, round_to="none")
    cmp = compare(plain)
    rescale = np.sqrt((n - 1) / n)
    p_arviz = stats.norm.cdf(0, cmp["elpd_diff"].to_numpy()[1:],
                             cmp["se_diff"].to_numpy()[1:] * rescale + 1e-12)
    np.testing.assert_allclose(ref["p_worse"].to_numpy()[1:], p_arviz, rtol=1e-9)
    assert cmp["diag_diff"].tolist() == ref["diag_diff"].tolist()
    count = [int(s.split()[0]) if s else 0 for s in cmp["diag_elpd"]]
    count_ref = [int(s.split()[0]) if s else 0 for s in ref["diag_elpd"]]
    assert count == count_ref and max(count) > 0


def _pw(elpd, verified_by, khat, mcse, p_loo, lpd, method=None):
    n = len(elpd)
    elpd = np.asarray(elpd, float)
    res = PointwiseLoo(elpd, np.asarray(p_loo, float), np.asarray(lpd, float),
                       np.asarray(mcse, float), np.asarray(khat, float), 0.7, 1000, np.ones(n),
                       method=None if method is None else np.array(method, dtype=object),
                       reliable=np.array([v != "" for v in verified_by]),
                       verified_by=np.array(verified_by, dtype=object))
    return res


def test_unverified_rows_ranges_and_flip_by_hand():
    best = _pw([-1.0, -1.0, -1.0], ["refit"] * 3, [np.nan] * 3, [0.0] * 3, [0.1] * 3,
               [-0.9] * 3, method=["refit"] * 3)
    # row 0: PSIS, k-hat 0.9 (not reliable): range [-1.5 - 2 * 0.4, max(lpd, -1.5 + 0.2)]
    # row 1: PSIS accepted on k-hat alone: -1.2 +- 2 * 0.05;  row 2: certified
    worse = _pw([-1.5, -1.2, -1.0], ["", "khat", "certified"], [0.9, 0.3, 0.2],
                [0.1, 0.05, 0.01], [0.4, 0.1, 0.1], [-1.1, -1.1, -0.9])
    cmp = compare({"worse": worse, "best": best}, weights=())
    row = cmp.loc["worse"]
    assert cmp.index.tolist() == ["best", "worse"]
    assert row["n_unverified"] == 2
    assert row["elpd_diff_unverified"] == pytest.approx(-0.7, abs=1e-12)
    # low: -0.7 + (-2.3 + 1.5) - 2 * 0.05 = -1.6; high: -0.7 + (-1.1 + 1.5) + 0.1 = -0.2
    assert row["diff_low"] == pytest.approx(-1.6, abs=1e-12)
    assert row["diff_high"] == pytest.approx(-0.2, abs=1e-12)
    assert not row["may_flip"]
    assert "StanProgram" in row["verify"]
    assert cmp.loc["best", "n_unverified"] == 0 and cmp.loc["best", "verify"] == ""

    flip = _pw([-1.5, -1.2, -1.0], ["", "khat", "certified"], [0.9, 0.3, 0.2],
               [0.1, 0.05, 0.01], [0.4, 0.1, 0.1], [-0.8, -1.1, -0.9])
    row = compare({"flip": flip, "best": best}, weights=()).loc["flip"]
    assert row["diff_high"] == pytest.approx(0.1, abs=1e-12)  # (-0.8 + 1) - 0.1
    assert row["may_flip"]
    assert is_verified(worse).tolist() == [False, False, True]
    # k-fold rows: reliable refits whatever their label
    kf = _pw([-1.0, -1.0], ["khat", ""], [np.nan] * 2, [0.1] * 2, [0.1] * 2, [-0.9] * 2,
             method=["refit"] * 2)
    assert is_verified(kf).tolist() == [True, False]

    # MixIS rows whose MCSE was too large: the advice is a refit
    mix = _pw([-1.5, -1.2, -1.0], ["", "", ""], [np.nan] * 3, [0.3] * 3, [0.1] * 3,
              [-0.9] * 3, method=["mixis"] * 3)
    row = compare({"mix": mix, "best": best}, weights=()).loc["mix"]
    assert "refit_kwargs={'max_refits': 3}" in row["verify"]  # advice.next_step's call
    # three rows with MCSE 0.3 each, independent: -0.7 + 2 sqrt(3 * 0.09)
    assert row["diff_high"] == pytest.approx(-0.7 + 2 * np.sqrt(0.27), abs=1e-12)
    assert row["diff_low"] == pytest.approx(-0.7 - 2 * np.sqrt(0.27), abs=1e-12)
    assert row["may_flip"]


def test_plausible_range_high_k_without_lpd():
    low, high = plausible_range([-2.0], [np.nan], [1.1], 0.7, p_loo_i=[0.5], lpd_i=None,
                                high_k_factor=3.0)
    assert (low[0], high[0]) == (pytest.approx(-3.5), pytest.approx(-0.5))
    low, high = plausible_range([-2.0], None, [1.1], 0.7)  # nothing known: one nat
    assert (low[0], high[0]) == (pytest.approx(-4.0), pytest.approx(0.0))


def test_print_and_errors():
    ll = example_ll().transpose(1, 0, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a, b = loo_adapt.loo(ll, reff=1.0), loo_adapt.loo(ll - 0.05, reff=1.0)
    cmp = loo_adapt.compare({"a": a, "b": b})
    text = repr(cmp)
    assert text.splitlines()[0] == " model elpd_diff se_diff p_worse diag_diff diag_elpd"
    assert "Diagnostic flags present." in text
    assert "Rows without a verified estimate" in text and "verify with:" in text
    assert "weight_stacking" in format_compare(cmp, simplify=False)
    assert type(cmp.iloc[:1]).__name__ == "DataFrame"
    with pytest.raises(ValueError, match="at least two models"):
        compare({"a": a})
    nan = r_waic(example_ll())
    nan.elpd_i[3] = np.nan
    with pytest.raises(ValueError, match=r"'n' has non-finite pointwise elpd at observations 3"):
        compare({"a": a, "n": nan}, weights=())
    # a PointwiseLoo gets arviz's weights too (through its ELPDData)
    w = compare({"a": a.loo_adapt, "b": b.loo_adapt})
    np.testing.assert_allclose(w["weight_stacking"], cmp["weight_stacking"], atol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        short = loo_adapt.loo(ll[..., :-1], reff=1.0)
    with pytest.raises(ValueError, match=r"inconsistent observation counts: 'a' \(32\), "
                                         r"'short' \(31\)"):
        compare({"a": a, "short": short}, weights=())


@pytest.mark.parametrize("weights", [("stacking", "pseudo-BMA"), ()])
def test_result_without_pointwise_values_is_refused_up_front(weights):
    """pointwise=False: the same clear ValueError on both arviz lines, whatever weights is
    (not arviz 0.x's "Encountered error in ELPD computation of compare."), although
    ``.loo_adapt`` keeps the arrays."""
    ll = example_ll().transpose(1, 0, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = loo_adapt.loo(ll, reff=1.0)
        e = loo_adapt.loo(ll - 0.05, reff=1.0, pointwise=False)
    assert e.loo_adapt is not None  # the arrays are there; still refused, as arviz does
    import arviz as az

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if arviz_major() >= 1:
            from arviz_base import from_dict

            plain = az.loo(from_dict({"posterior": {"mu": ll[..., 0]},
                                      "log_likelihood": {"y": ll}}), pointwise=False)
        else:
            plain = az.loo(az.from_dict(posterior={"mu": ll[..., 0]},
                                        log_likelihood={"y": ll}), pointwise=False)
    for models in ({"a": a, "e": e}, {"e": e, "a": a}, {"a": a, "e": plain}):
        with pytest.raises(ValueError, match=r"model 'e' has no pointwise values \(it was "
                                             r"computed with pointwise=False\); recompute it "
                                             r"with pointwise=True") as info:
            compare(models, weights=weights)
        assert info.value.__cause__ is None  # raised by compare itself, not chained


def test_order_statistic_warning_as_r():
    """R's test: 25 waic results of LLarr + rnorm(1, 0, 0.1) warn, 4 do not."""
    ll = example_ll()
    r = RRandom(123)
    many = {f"m{j}": r_waic(ll + r.rnorm(1, 0.0, 0.1)[0]) for j in range(25)}
    with pytest.warns(UserWarning, match="potentially due to chance"):
        compare(many, weights=())
    few = {f"m{j}": r_waic(ll + r.rnorm(1, 0.0, 0.1)[0]) for j in range(4)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compare(few, weights=())
