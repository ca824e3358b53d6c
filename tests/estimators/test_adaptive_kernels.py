"""The adaptive driver's numba kernels against straightforward numpy references."""

from __future__ import annotations

import numpy as np
import pytest

from loo_adapt.estimators.adaptive import _stack_columns
from loo_adapt.estimators.adaptive_candidates import (
    _TAYLOR_MAX,
    _loglik_rowsum_and_column,
    _loglik_steps,
    _logsig_at,
)

NO_EXPANSION = (np.empty(0), np.empty((0, 0)))


def _reference(mu, dmu, h, sign, i):
    """sum_j log l_j and log l_i at mu + h dmu, with numpy's logaddexp."""
    ll = -np.logaddexp(0.0, -sign * (mu + h * dmu))
    return ll.sum(axis=1), ll[:, i]


@pytest.mark.parametrize("scale", [0.5, 8.0, 40.0, 800.0])
def test_loglik_steps_matches_numpy(scale):
    rng = np.random.default_rng(3)
    n_draws, n_obs, i = 300, 37, 5
    mu = scale * rng.standard_normal((n_draws, n_obs))
    factor, row = rng.standard_normal(n_draws), rng.standard_normal(n_obs)
    factor[7] = 0.0  # a draw that does not move
    dmu = np.outer(factor, row)
    sign = np.where(rng.random(n_obs) < 0.5, -1.0, 1.0)
    # steps on both sides of the expansion's cut and the default rho grid's range
    hs = np.array([3.0, 1.0, 0.2, _TAYLOR_MAX, 3e-3, 1e-3, 1e-5, 1e-8, 0.0, -0.05])
    expansion = _logsig_at(mu, sign)
    # the same direction as a full (S, n) array and as a per-draw scale times one row,
    # with and without the expansion for small steps
    for total, column in (_loglik_steps(mu, np.ones(n_draws), dmu, hs, sign, i, *expansion),
                          _loglik_steps(mu, factor, row[None, :], hs, sign, i, *expansion),
                          _loglik_steps(mu, factor, row[None, :], hs, sign, i,
                                        *NO_EXPANSION)):
        assert total.shape == column.shape == (hs.size, n_draws)
        for k, h in enumerate(hs):
            ref_total, ref_col = _reference(mu, dmu, h, sign, i)
            # remainder of the expansion < 4e-16 per term; rounding of n_obs terms
            np.testing.assert_allclose(total[k], ref_total, rtol=1e-14, atol=1e-13 * n_obs)
            np.testing.assert_allclose(column[k], ref_col, rtol=1e-13, atol=1e-15)


def test_loglik_steps_long_rows_and_extremes():
    """More than one product chunk (n > 512) and linear predictors far in both tails
    (log l_j down to -700 and up to -1e-300)."""
    rng = np.random.default_rng(5)
    n_draws, n_obs = 7, 1300
    mu = rng.choice([-700.0, -40.0, -1.0, 0.0, 1.0, 40.0, 700.0], (n_draws, n_obs))
    mu += rng.standard_normal((n_draws, n_obs))
    dmu = rng.standard_normal((n_draws, n_obs))
    sign = np.where(rng.random(n_obs) < 0.5, -1.0, 1.0)
    hs = np.array([0.0, 1e-9, 0.5])
    for expansion in (NO_EXPANSION, _logsig_at(mu, sign)):
        total, column = _loglik_steps(mu, np.ones(n_draws), dmu, hs, sign, 11, *expansion)
        for k, h in enumerate(hs):
            ref_total, ref_col = _reference(mu, dmu, h, sign, 11)
            np.testing.assert_allclose(total[k], ref_total, rtol=1e-14)
            np.testing.assert_allclose(column[k], ref_col, rtol=1e-14)


def test_loglik_rowsum_and_column_matches_numpy():
    rng = np.random.default_rng(4)
    mu = 5.0 * rng.standard_normal((200, 11))
    sign = np.where(rng.random(11) < 0.5, -1.0, 1.0)
    total, column = _loglik_rowsum_and_column(mu, sign, 2)
    ref_total, ref_col = _reference(mu, 0.0 * mu, 0.0, sign, 2)
    np.testing.assert_allclose(total, ref_total, rtol=1e-14, atol=1e-13)
    np.testing.assert_array_equal(column, ref_col)


@pytest.mark.parametrize("n_cols", [150, 7])  # blocks across threads; one block
def test_snis_columns_matches_logsumexp_and_mcse_elpd(n_cols):
    from scipy.special import logsumexp

    from loo_adapt.core.psis import psislw
    from loo_adapt.core.psis_loo import mcse_elpd
    from loo_adapt.estimators.adaptive import _snis_columns

    rng = np.random.default_rng(6)
    n_draws = 1000
    lw, _ = psislw(rng.standard_t(2.5, (n_draws, n_cols)), r_eff=0.8)
    lw[3, 4] = -np.inf  # a draw with zero weight
    ll = -np.abs(rng.standard_normal((n_draws, n_cols))) * rng.uniform(0.1, 30.0, n_cols)
    prob1 = rng.random((n_draws, n_cols))
    r_eff = rng.uniform(0.3, 1.0, n_cols)
    elpd, prob, mcse = _snis_columns(lw, ll, prob1, r_eff)
    ref = logsumexp(lw + ll, axis=0)
    np.testing.assert_allclose(elpd, ref, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(prob, np.sum(np.exp(lw) * prob1, axis=0), rtol=1e-13)
    np.testing.assert_allclose(mcse, mcse_elpd(ll, lw, ref, r_eff), rtol=1e-12)


def test_affine_directions_match_each_rows_dense_direction(monkeypatch):
    """MM2's batched linear predictors and prior changes (several product chunks) against
    each row's own dense direction."""
    import loo_adapt.estimators.adaptive_candidates as candidates
    from loo_adapt.models import LogisticRegression, Normal, RegularizedHorseshoe
    from loo_adapt.transforms import posterior_terms

    rng = np.random.default_rng(8)
    n, d, S = 12, 7, 400
    model = LogisticRegression(rng.standard_normal((n, d)), (rng.random(n) < 0.5).astype(int),
                               intercept="a", intercept_prior=Normal(5.0),
                               prior=RegularizedHorseshoe(tau="tau", lambda_tilde="lt"))
    theta = rng.standard_normal((S, model.dim))
    hyper = np.exp(rng.standard_normal((S, model.n_coef)))
    log_weights = rng.standard_normal((S, n))
    terms = posterior_terms(model, theta, hyper)
    rows = np.array([1, 4, 5, 9, 11])
    monkeypatch.setattr(candidates, "_AFFINE_COLUMNS", 2 * n)  # chunks of two rows
    out = candidates._affine_directions(
        rows, model=model, theta=theta, hyper=hyper, terms=terms, post_sd=None,
        log_weights=log_weights, gaussian=model.gaussian_prior(theta, hyper),
        transforms=("ll", "mm2"), linear=True)
    assert sorted(out) == [("mm2", int(i)) for i in rows]
    for i in rows:
        step, dmu, (b, q) = out["mm2", int(i)]
        direction = step.direction()
        np.testing.assert_allclose(dmu, direction @ model.design.T, rtol=1e-12, atol=1e-13)
        ref_b = -np.sum(model.gaussian_prior(theta, hyper)[1] * direction, axis=1)
        np.testing.assert_allclose(b, ref_b, rtol=1e-12, atol=1e-13)
        h = 0.4
        exact = model.log_prior(theta + h * direction, hyper) - model.log_prior(theta, hyper)
        np.testing.assert_allclose(h * b + h * h * q, exact, rtol=1e-11, atol=1e-11)


def test_stack_columns_is_column_stack():
    """The block's (S, C) candidate arrays: the columns in order, C-ordered, as numpy's
    column_stack builds them."""
    rng = np.random.default_rng(3)
    cols = [rng.standard_normal(37) for _ in range(5)]
    cols[2] = np.arange(37.0)[::-1]  # a non-contiguous column
    out = _stack_columns(cols)
    assert out.flags.c_contiguous
    np.testing.assert_array_equal(out, np.column_stack(cols))


@pytest.mark.parametrize("engine", ["numpy", "numba"])
def test_khat_is_psislw_khat(engine, monkeypatch):
    """The k-hat-only PSIS call (`pareto_khat`, what the adaptive halves use) against
    `psislw` (smoothing and normalising the weights)."""
    import loo_adapt.core.psis as core_psis

    monkeypatch.setattr(core_psis, "_engine", lambda *_: engine)
    rng = np.random.default_rng(4)
    lr = rng.standard_t(2.5, size=(1000, 70)) * np.linspace(0.3, 3.0, 70)
    r_eff = rng.uniform(0.5, 1.0, 70)
    _, ref = core_psis.psislw(lr, r_eff=r_eff)
    np.testing.assert_array_equal(core_psis.pareto_khat(lr, r_eff), ref)
    half = np.sort(rng.permutation(1000)[:500])
    np.testing.assert_array_equal(core_psis.pareto_khat(lr[half], 0.8),
                                  core_psis.psislw(lr[half], 0.8)[1])
    assert core_psis.pareto_khat(lr[:, 3]) == core_psis.psislw(lr[:, 3])[1]
