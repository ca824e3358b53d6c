"""loo_score (CRPS / SCRPS) against R loo's stored loo_crps / loo_scrps (inputs rebuilt with
R's generator), arviz-stats' loo_score, and the closed forms of a normal predictive."""

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from r_reference import RRandom
from scipy.stats import norm

import loo_adapt
from loo_adapt.io.readers import read_dict
from loo_adapt.score import crps_rows, loo_score, weighted_abs_diff

pytestmark = pytest.mark.arviz1  # runs under arviz 1.x too (CI: -m arviz1)

REF = json.loads((Path(__file__).parent / "data" / "r_loo" / "reference.json").read_text())


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def r_crps_inputs():
    """y, x1, x2, ll of R loo's tests/testthat/test_crps.R (set.seed(123456789)) and the
    permutation of ``with_seed(1, ...)``'s ``sample(1:S)``."""
    n, s = 10, 100
    r = RRandom(123456789)
    y = r.rnorm(n)
    x1 = r.rnorm(n * s).reshape(n, s).T  # matrix(..., nrow = S): column-major
    x2 = r.rnorm(n * s).reshape(n, s).T
    ll = (r.rnorm(n * s) * 0.1 - 1.0).reshape(n, s).T
    return y, x1, x2, ll, RRandom(1).sample(s)


def normal_crps(y, mu, sigma):
    """Closed form (Gneiting and Raftery 2007), as a score to maximise: -CRPS."""
    z = (y - mu) / sigma
    return -sigma * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z) - 1 / np.sqrt(np.pi))


def normal_scrps(y, mu, sigma):
    z = (y - mu) / sigma
    exy = sigma * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z))
    exx = 2 * sigma / np.sqrt(np.pi)
    return -exy / exx - 0.5 * np.log(exx)


def test_matches_r_loo_crps_and_scrps():
    y, x1, x2, ll, perm = r_crps_inputs()
    res = _quiet(loo_adapt.loo, ll[None], reff=1.0)  # R: psis(-log_lik, r_eff = 1)
    for kind in ("crps", "scrps"):
        ref = REF["crps_scores"]["loo_" + kind]
        got = loo_score(res, y, x1, kind=kind, y_rep2=x2, log_lik=ll, permutation=perm)
        np.testing.assert_allclose(got.pointwise, ref["pointwise"], rtol=0, atol=1e-13)
        assert got.mean == pytest.approx(ref["estimate"], abs=1e-14)
        assert got.se == pytest.approx(ref["se"], abs=1e-14)
        # R's crps()/scrps() (no LOO): equal weights, the same pairs
        plain = REF["crps_scores"][kind]["pointwise"]
        np.testing.assert_allclose(
            crps_rows(y, x1, np.zeros_like(x1), kind=kind, y_rep2=x2[perm]), plain,
            rtol=0, atol=1e-13)
        # the exact E|X - X'| differs from R's one-permutation estimate by its Monte Carlo
        # error only (S = 100 pairs)
        exact = loo_score(res, y, x1, kind=kind)
        np.testing.assert_allclose(exact.pointwise, ref["pointwise"], atol=0.15)
        np.testing.assert_array_equal(exact.pointwise <= 0, np.array(ref["pointwise"]) <= 0)


def test_r_crps_fun_identities():
    """R loo's own unit checks of .crps_fun, through the one-draw-pair form."""
    def fun(exx, exy, kind):  # x = [0], x2 = [exx], y = exy: E|X-X'| = exx, E|X-y| = exy
        return crps_rows([exy], [[0.0]], [[0.0]], kind=kind, y_rep2=[[exx]])[0]

    assert fun(2.0, 1.0, "crps") == 0.0
    assert fun(1.0, 2.0, "crps") == -1.5
    assert fun(np.pi, np.pi**2, "crps") == pytest.approx(0.5 * np.pi - np.pi**2, abs=1e-14)
    assert fun(1.0, 0.0, "scrps") == 0.0
    assert fun(1.0, 2.0, "scrps") == -2.0
    assert fun(np.pi, np.pi**2, "scrps") == pytest.approx(-np.pi - 0.5 * np.log(np.pi),
                                                          abs=1e-14)


def test_weighted_abs_diff_equals_the_double_sum():
    rng = np.random.default_rng(1)
    x = rng.normal(size=300)
    x[:20] = x[20:40]  # ties
    lw = rng.normal(size=300)
    w = np.exp(lw) / np.exp(lw).sum()
    brute = float(np.sum(w[:, None] * w[None, :] * np.abs(x[:, None] - x[None, :])))
    assert weighted_abs_diff(x, lw) == pytest.approx(brute, rel=1e-12)


def test_normal_predictive_closed_forms_through_row_draws():
    """Rows given their own weighted draws (importance sampling from N(0, 2^2) to N(mu, s^2)
    on a deterministic quantile grid) recover the closed-form CRPS and SCRPS."""
    mu, sd, y = np.array([0.3, -1.0, 0.0]), np.array([1.0, 0.5, 2.0]), np.array([0.0, 0.4, 3.0])
    s = 20000
    grid = 2.0 * norm.ppf((np.arange(s) + 0.5) / s)
    own = {i: (grid, norm.logpdf(grid, mu[i], sd[i]) - norm.logpdf(grid, 0, 2))
           for i in range(3)}
    ll = np.random.default_rng(0).normal(-1.0, 0.05, size=(1, 400, 3))
    res = _quiet(loo_adapt.loo, ll)
    yrep = np.zeros((1, 400, 3))
    crps = loo_score(res, y, yrep, row_draws=own)
    np.testing.assert_allclose(crps.pointwise, normal_crps(y, mu, sd), atol=5e-5)
    scrps = loo_score(res, y, yrep, kind="scrps", row_draws=own)
    np.testing.assert_allclose(scrps.pointwise, normal_scrps(y, mu, sd), atol=5e-5)
    assert crps.mean == pytest.approx(np.mean(normal_crps(y, mu, sd)), abs=5e-5)


def test_mixis_rows_use_the_mixture_draws():
    """y_i ~ N(mu, 1), flat prior: exact posterior and mixture draws; the LOO predictive is
    N(m_-i, 1 + 1/(n-1)), whose CRPS is closed form."""
    rng = np.random.default_rng(11)
    n, s = 16, 4000
    y = rng.normal(size=n)
    m_loo = np.array([np.delete(y, i).mean() for i in range(n)])
    s_loo = np.sqrt(1.0 + 1.0 / (n - 1))
    log_c = -norm.logpdf(y, m_loo, s_loo)
    comp = rng.choice(n, size=s, p=np.exp(log_c - np.logaddexp.reduce(log_c)))
    mu_mix = rng.normal(m_loo[comp], np.sqrt(1.0 / (n - 1)))
    mu_post = y.mean() + rng.normal(size=s) / np.sqrt(n)

    def fit(mu):
        return read_dict({"log_lik": norm.logpdf(y, mu[:, None])[None],
                          "y_rep": (mu[:, None] + rng.normal(size=(s, n)))[None]},
                         method="mcmc")

    posterior, mixture = fit(mu_post), fit(mu_mix)
    res = _quiet(loo_adapt.loo, posterior, estimator="mixis", mixis_draws=mixture,
                 mixis_pool_khat=None)
    got = loo_score(res, y, "y_rep", draws=posterior)
    assert set(got.method) == {"mixis"} and np.all(got.reason == "")
    np.testing.assert_allclose(got.pointwise, normal_crps(y, m_loo, s_loo), atol=0.03)
    # posterior y_rep only: the MixIS rows say what to pass, and the mean warns
    with pytest.warns(UserWarning, match="have no CRPS"):
        out = loo_score(res, y, posterior["y_rep"])
    assert np.isnan(out.pointwise).all() and "y_rep='y_rep'" in out.reason[0]


def test_binary_outcome_bernoulli_closed_form():
    rng = np.random.default_rng(5)
    p = rng.uniform(0.1, 0.9, size=6)
    y = (rng.uniform(size=6) < 0.5).astype(float)
    ll = rng.normal(-0.7, 0.05, size=(1, 1000, 6))
    res = _quiet(loo_adapt.loo, ll)
    yrep = (rng.uniform(size=(1, 1000, 6)) < p).astype(float)
    lw = _lw(res)
    w = np.exp(lw - np.logaddexp.reduce(lw, axis=0))
    q = np.sum(w * yrep[0], axis=0)  # LOO P(y_rep = 1) under the PSIS weights
    got = loo_score(res, y, yrep).pointwise
    np.testing.assert_allclose(got, q * (1 - q) - np.where(y == 1, 1 - q, q), atol=1e-12)


def _lw(res):
    from loo_adapt.evaluation.arviz import log_weights_matrix

    return log_weights_matrix(res.log_weights)


def test_against_arviz_stats_loo_score():
    """arviz 1.x's loo_score with our log weights: the same exact form, so equal to
    rounding; its SE uses the n variance."""
    az = pytest.importorskip("arviz_stats", reason="arviz-stats (arviz 1.x) only")
    from arviz_base import from_dict

    rng = np.random.default_rng(2)
    n = 25
    y = rng.normal(size=n)
    mu = y.mean() + rng.normal(size=(2, 500)) / np.sqrt(n)
    ll = norm.logpdf(y, mu[..., None])
    yrep = mu[..., None] + rng.normal(size=(2, 500, n))
    dt = from_dict({"posterior": {"mu": mu}, "log_likelihood": {"y": ll},
                    "posterior_predictive": {"y": yrep}, "observed_data": {"y": y}})
    res = _quiet(loo_adapt.loo, dt)
    for kind in ("crps", "scrps"):
        ours = loo_score(res, y, yrep, kind=kind)
        theirs = _quiet(az.loo_score, dt, kind=kind, pointwise=True,
                        log_weights=res.log_weights, pareto_k=res.pareto_k)
        np.testing.assert_allclose(ours.pointwise, np.ravel(theirs.pointwise), rtol=1e-11,
                                   atol=1e-13)
        assert ours.mean == pytest.approx(theirs.mean, rel=1e-12)
        assert ours.se * np.sqrt((n - 1) / n) == pytest.approx(theirs.se, rel=1e-10)


def test_bad_input():
    y, x1, x2, ll, perm = r_crps_inputs()
    res = _quiet(loo_adapt.loo, ll[None], reff=1.0)
    with pytest.raises(ValueError, match="kind must be one of"):
        loo_score(res, y, x1, kind="energy")
    with pytest.raises(ValueError, match="y has 9 observations"):
        loo_score(res, y[:9], x1)
    with pytest.raises(ValueError, match="permutation"):
        loo_score(res, y, x1, y_rep2=x2, permutation=np.zeros(100, dtype=int))
    bad = x1.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        loo_score(res, y, bad)
