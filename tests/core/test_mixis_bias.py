"""MixIS's second-order bias correction (`loo_adapt.core.mixis.second_order_bias`) against
closed-form LOO over replicates of exact mixture draws."""

import numpy as np
import pytest
from normal_mean_loo import normal_mean_loo
from scipy.stats import norm

from loo_adapt.core.mixis import mixis_loo


def _two_outliers(n=20, seed=3):
    """`normal_mean_loo` with two outliers (y_0 = 6, y_1 = -4.5)."""
    return normal_mean_loo({0: 6.0, 1: -4.5}, n=n, seed=seed)


def _mixture_log_lik(y, m_loo, mix_p, rng, S, chains=4):
    n = y.size
    comp = rng.choice(n, size=S, p=mix_p)
    mu = rng.normal(m_loo[comp], np.sqrt(1.0 / (n - 1))).reshape(chains, -1)
    return norm.logpdf(y, mu[..., None])


def test_the_correction_removes_part_of_the_small_sample_lean_and_no_more():
    """At S = 200 exact mixture draws the plain estimate leans optimistic (the log of a
    ratio of means); over 400 replicates the corrected total's mean error lies between 0 and
    the plain one's: it removes part of the lean (a quarter here: the tails are heavier than
    the second-order term sees) and never overshoots the closed form, and its spread is not
    wider."""
    y, m_loo, truth, mix_p = _two_outliers()
    rng = np.random.default_rng(5)
    plain, corrected = [], []
    for _ in range(400):
        ll = _mixture_log_lik(y, m_loo, mix_p, rng, 200)
        plain.append(mixis_loo(ll).elpd_i.sum() - truth.sum())
        corrected.append(mixis_loo(ll, bias="delta").elpd_i.sum() - truth.sum())
    plain, corrected = np.array(plain), np.array(corrected)
    se = plain.std(ddof=1) / np.sqrt(plain.size)
    assert plain.mean() > 5 * se  # the lean is there
    assert corrected.mean() < plain.mean() - 0.04
    assert corrected.mean() > -2 * se  # not past the truth
    assert corrected.std() < 1.2 * plain.std()


def test_the_correction_vanishes_with_many_draws_and_the_mcse_is_kept():
    """At S = 8000 the corrected and plain estimates agree to far within their MCSE (the
    bias is O(1/S)), the MCSE is the plain one's, and ``bias_i`` records what was taken."""
    y, m_loo, truth, mix_p = _two_outliers()
    ll = _mixture_log_lik(y, m_loo, mix_p, np.random.default_rng(1), 8000)
    plain, corrected = mixis_loo(ll), mixis_loo(ll, bias="delta")
    np.testing.assert_array_equal(corrected.mcse_elpd_i, plain.mcse_elpd_i)
    np.testing.assert_allclose(plain.elpd_i - corrected.elpd_i, corrected.bias_i)
    assert np.all(np.abs(corrected.bias_i) < 0.1 * plain.mcse_elpd_i)
    assert plain.bias_i is None
    z = (corrected.elpd_i - truth) / corrected.mcse_elpd_i
    assert np.sqrt(np.mean(z**2)) < 1.5


def test_an_unknown_bias_method_is_refused():
    with pytest.raises(ValueError, match="bias must be one of"):
        mixis_loo(np.zeros((2, 10, 3)), bias="jackknife")


def test_a_probability_row_is_not_corrected_past_a_density_of_one(monkeypatch):
    """Rows whose likelihood is at most one at every draw (a 0 / 1 outcome) have a LOO
    density at most one: however large a negative second-order term (forced here to -1),
    their corrected elpd_i stays <= 0, while a density row (likelihood above one at some
    draws) takes the whole correction."""
    import loo_adapt.core.mixis as core_mixis

    rng = np.random.default_rng(2)
    ll = np.log(rng.uniform(0.2, 1.0, size=(4, 100, 3)))
    ll[..., 2] = rng.normal(0.5, 0.3, size=(4, 100))  # a density above one
    plain = mixis_loo(ll)
    monkeypatch.setattr(core_mixis, "second_order_bias", lambda *a: np.full(3, -1.0))
    out = mixis_loo(ll, bias="delta")
    assert np.all(out.elpd_i[:2] == 0.0) and np.all(plain.elpd_i[:2] > -1.0)
    assert out.elpd_i[2] == pytest.approx(plain.elpd_i[2] + 1.0)
    np.testing.assert_allclose(plain.elpd_i - out.elpd_i, out.bias_i)


def test_short_chains_and_constant_rows_get_a_finite_correction():
    """Chains too short for Stan's ESS (2 draws each) take S as the ESS, as the MCSE does;
    a row whose draws are all alike gets no correction; nothing is NaN."""
    rng = np.random.default_rng(0)
    ll = np.full((4, 100, 3), -1.0)
    ll[..., 0] = rng.normal(size=(4, 100)) - 2.0
    short = mixis_loo(ll[:, :2], bias="delta")
    assert np.isfinite(short.elpd_i).all() and np.isfinite(short.bias_i).all()
    flat = mixis_loo(np.full((4, 100, 3), -1.0), bias="delta")
    np.testing.assert_array_equal(flat.bias_i, 0.0)
    np.testing.assert_allclose(flat.elpd_i, -1.0)
