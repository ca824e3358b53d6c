"""loo_expectations / loo_pit against closed forms, R loo's E_loo formulas and arviz."""

import warnings

import numpy as np
import pytest
from scipy.stats import kstest, norm

import loo_adapt
from loo_adapt.core.psis import loo_pointwise
from loo_adapt.evaluation.arviz import arviz_major, to_elpd_data
from loo_adapt.expectations import e_loo_khat, e_loo_rows, loo_expectations, loo_pit, pit_rows
from loo_adapt.result import PointwiseLoo

pytestmark = pytest.mark.arviz1  # runs under arviz 1.x too (CI: -m arviz1)


def _normal_model(seed=0, n=40, draws=4000):
    """y_i ~ N(mu, 1), flat prior: exact posterior draws; exact LOO predictive
    y_i | y_-i ~ N(mean(y_-i), 1 + 1/(n-1))."""
    rng = np.random.default_rng(seed)
    y = rng.normal(size=n)
    mu = y.mean() + rng.normal(size=(1, draws)) / np.sqrt(n)
    ll = norm.logpdf(y, loc=mu[..., None])
    yrep = mu[..., None] + rng.normal(size=(1, draws, n))
    return y, ll, yrep


def _loo(ll):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return loo_adapt.loo(ll)


def test_r_loo_weighted_quantile_and_equal_weight_cases():
    x = np.array([[3.0], [1.0], [4.0], [2.0]])
    w = np.log(np.array([[0.3], [0.1], [0.4], [0.2]]))
    q, _ = e_loo_rows(x, w, "quantile", probs=[0.05, 0.5, 0.95])
    # R loo .wquant_i by hand: sorted x 1..4, cumulative weights .1 .3 .6 1
    np.testing.assert_allclose(q[0], [1.0, 2.0 + 0.2 / 0.3, 3.0 + 0.35 / 0.4], rtol=1e-12)
    rng = np.random.default_rng(0)
    z = rng.normal(size=(500, 3))
    flat = np.zeros((500, 3))
    q, _ = e_loo_rows(z, flat, "quantile", probs=[0.1, 0.5, 0.9])
    np.testing.assert_allclose(q, np.quantile(z, [0.1, 0.5, 0.9], axis=0).T, rtol=1e-12)
    v, _ = e_loo_rows(z, flat, "var")
    np.testing.assert_allclose(v, np.var(z, axis=0, ddof=1), rtol=1e-12)
    s, _ = e_loo_rows(z, flat, "sd")
    np.testing.assert_allclose(s, np.std(z, axis=0, ddof=1), rtol=1e-12)


def test_importance_weighted_moments_recover_the_target():
    # proposal N(0, 1), target N(0.5, 0.8^2): weights are the density ratio
    rng = np.random.default_rng(1)
    x = rng.normal(size=(40000, 1))
    lw = norm.logpdf(x, 0.5, 0.8) - norm.logpdf(x)
    m, k = e_loo_rows(x, lw, "mean")
    assert m[0] == pytest.approx(0.5, abs=0.02) and k[0] < 0.5
    s, _ = e_loo_rows(x, lw, "sd")
    assert s[0] == pytest.approx(0.8, abs=0.02)
    q, _ = e_loo_rows(x, lw, "quantile", probs=[0.1, 0.9])
    np.testing.assert_allclose(q[0], norm.ppf([0.1, 0.9], 0.5, 0.8), atol=0.03)


def test_khat_of_pareto_ratios_is_their_shape():
    rng = np.random.default_rng(2)
    u = rng.uniform(size=8000)
    for k in (0.3, 0.8):
        r = (u ** (-k) - 1.0) / k  # generalised Pareto with shape k
        khat = e_loo_khat(np.zeros(8000), np.log(r), kind="quantile")
        assert khat == pytest.approx(k, abs=0.12)
    # h r with h = x: its tails are heavier than r's when x grows with r
    r = (u ** (-0.3) - 1.0) / 0.3
    assert e_loo_khat(r**2, np.log(r), "mean") > e_loo_khat(r**2, np.log(r), "quantile") + 0.2


def test_loo_expectations_equal_exact_loo_predictive_moments():
    y, ll, yrep = _normal_model(seed=3)
    res = _loo(ll)
    n = y.size
    exact_mean = np.array([np.delete(y, i).mean() for i in range(n)])
    out = loo_expectations(res, yrep, kind="mean")
    np.testing.assert_allclose(out.value, exact_mean, atol=0.06)
    assert np.all(out.pareto_k < 0.7) and np.all(out.method == "psis")
    sd = loo_expectations(res, yrep, kind="sd").value
    np.testing.assert_allclose(sd, np.sqrt(1 + 1 / (n - 1)), atol=0.06)
    q = loo_expectations(res, yrep, kind="quantile", probs=[0.25, 0.75]).value
    exact_q = exact_mean[:, None] + np.sqrt(1 + 1 / (n - 1)) * norm.ppf([0.25, 0.75])
    np.testing.assert_allclose(q, exact_q, atol=0.08)


def test_rows_of_other_estimators_use_their_own_draws_or_are_nan():
    y, ll, yrep = _normal_model(seed=4, n=5, draws=1000)
    base = loo_pointwise(ll, r_eff=1.0)
    r0 = base.to_result()
    fields = ("elpd_i", "p_loo_i", "lpd_i", "mcse_elpd_i", "pareto_k", "good_k",
              "n_samples", "r_eff")
    res = PointwiseLoo(**{f: getattr(r0, f) for f in fields},
                       method=np.array(["psis", "mixis", "psis", "psis", "refit"], dtype=object))
    elpd = to_elpd_data(res, log_weights=base.log_weights)
    out = loo_expectations(elpd, yrep)
    assert np.isnan(out.value[[1, 4]]).all() and np.isfinite(out.value[[0, 2, 3]]).all()
    assert out.reason[1].startswith("mixis: no weights on the posterior draws")
    assert "row_draws" in out.reason[4] and out.reason[0] == ""
    own = np.random.default_rng(5).normal(2.0, 1.0, 3000)
    out = loo_expectations(elpd, yrep, row_draws={1: (own, np.zeros(3000))})
    assert out.value[1] == pytest.approx(own.mean(), rel=1e-12)  # equal weights: the mean
    assert out.method[1] == "mixis" and out.reason[1] == ""
    pit = loo_pit(elpd, y, yrep, row_draws={1: (own, np.zeros(3000))})
    assert pit.pit[1] == pytest.approx(np.mean(own < y[1]), abs=1e-12)
    assert np.isnan(pit.pit[4]) and "refit" in pit.reason[4]


def test_loo_pit_uniform_for_calibrated_models():
    y, ll, yrep = _normal_model(seed=6, n=300, draws=2000)
    pit = loo_pit(_loo(ll), y, yrep)
    assert kstest(pit.pit, "uniform").pvalue > 0.01
    # discrete outcomes: randomised PIT is uniform too (Bernoulli model, Beta posterior)
    rng = np.random.default_rng(7)
    n = 400
    yb = (rng.uniform(size=n) < 0.3).astype(float)
    p = rng.beta(1 + yb.sum(), 1 + n - yb.sum(), size=(1, 2000))
    llb = np.where(yb == 1, np.log(p[..., None]), np.log1p(-p[..., None]))
    yrep_b = (rng.uniform(size=(1, 2000, n)) < p[..., None]).astype(float)
    pit_b = loo_pit(_loo(llb), yb, yrep_b, seed=0).pit
    assert kstest(pit_b, "uniform").pvalue > 0.01
    # without randomisation every y = 0 row would sit at P(y_rep < 0) = 0
    assert np.all((pit_b >= 0) & (pit_b <= 1)) and np.unique(pit_b[yb == 0]).size > 10


@pytest.mark.skipif(arviz_major() != 0, reason="arviz 0.x's loo_pit on arrays")
def test_pit_rows_equal_arviz_0x_loo_pit_on_arrays():
    import arviz as az

    y, ll, yrep = _normal_model(seed=8, n=20, draws=1000)
    lw = loo_pointwise(ll, r_eff=1.0).log_weights
    theirs = az.loo_pit(y=y, y_hat=yrep[0].T, log_weights=lw.T)
    np.testing.assert_allclose(pit_rows(y, yrep[0], lw), theirs, atol=1e-12)


def test_bad_input_messages():
    y, ll, yrep = _normal_model(seed=9, n=4, draws=200)
    res = _loo(ll)
    with pytest.raises(ValueError, match="kind must be one of"):
        loo_expectations(res, yrep, kind="median")
    with pytest.raises(ValueError, match="needs probs="):
        loo_expectations(res, yrep, kind="quantile")
    with pytest.raises(ValueError, match="matching the 200 posterior draws"):
        loo_expectations(res, yrep[:, :100])
    with pytest.raises(ValueError, match="no log weights"):
        loo_expectations(res.loo_adapt, yrep)
    with pytest.raises(ValueError, match="y has 3 observations"):
        loo_pit(res, y[:3], yrep)
