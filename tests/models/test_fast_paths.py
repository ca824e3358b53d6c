"""Products that avoid (S, P) temporaries against the plain numpy formulas they replace."""

from __future__ import annotations

import numpy as np
import pytest

from loo_adapt.models import LogisticRegression, Normal, RegularizedHorseshoe
from loo_adapt.transforms import MomentMatchStep, posterior_terms
from loo_adapt.transforms.mm import weighted_moments


def _model(hierarchical, rng, n=9, d=6):
    X = rng.standard_normal((n, d))
    y = (rng.random(n) < 0.5).astype(int)
    prior = RegularizedHorseshoe(tau="tau", lambda_tilde="lt") if hierarchical else Normal(2.0)
    return LogisticRegression(X, y, intercept="a", intercept_prior=Normal(5.0), prior=prior)


def test_weighted_moments_match_numpy():
    rng = np.random.default_rng(0)
    theta = rng.standard_normal((500, 300)) * rng.uniform(0.1, 5.0, 300) + 3.0
    lw = rng.standard_normal((500, 4)) * 2.0
    lw[7, 1] = -np.inf
    w, mean_w, v_w = weighted_moments(theta, lw)
    for k in range(4):
        ref_w = np.exp(lw[:, k]) / np.exp(lw[:, k]).sum()
        np.testing.assert_allclose(w[:, k], ref_w, rtol=1e-13)
        ref_m = ref_w @ theta
        np.testing.assert_allclose(mean_w[k], ref_m, rtol=1e-13)
        np.testing.assert_allclose(v_w[k], ref_w @ (theta - ref_m) ** 2, rtol=1e-12)


def test_cached_weighted_moments_give_the_same_step():
    rng = np.random.default_rng(1)
    theta = rng.standard_normal((400, 5))
    lw = rng.standard_normal((400, 3))
    terms = posterior_terms(_model(False, rng, d=4), theta, None)
    terms.cache_weighted_moments(theta, [2, 5, 8], lw)
    for k, i in enumerate([2, 5, 8]):
        hit = terms.weighted_moments(theta, i, lw[:, k])
        for kind in ("mm1", "mm2"):
            fresh = MomentMatchStep(kind, theta, lw[:, k])
            cached = MomentMatchStep(kind, theta, lw[:, k], weighted=hit)
            for got, want in zip(cached.apply(0.7), fresh.apply(0.7)):
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    # other log weights, other draws: no stale hit
    assert terms.weighted_moments(theta, 2, lw[:, 1]) is None
    assert terms.weighted_moments(theta.copy(), 2, lw[:, 0]) is None
    assert terms.weighted_moments(theta, 3, lw[:, 0]) is None


@pytest.mark.parametrize("hierarchical", [False, True])
def test_affine_direction_products_match_the_dense_direction(hierarchical):
    rng = np.random.default_rng(2)
    model = _model(hierarchical, rng)
    S = 300
    theta = rng.standard_normal((S, model.dim))
    hyper = np.exp(rng.standard_normal((S, model.n_coef))) if hierarchical else None
    step = MomentMatchStep("mm2", theta, rng.standard_normal(S))
    a, c = step.direction_affine()
    direction = step.direction()
    np.testing.assert_allclose(theta * a + c, direction, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(model.linear_predictor_affine(theta, a, c),
                               model.linear_predictor(direction), rtol=1e-12, atol=1e-13)
    b, q = model.log_prior_change_affine(theta, a, c, hyper)
    for h in (0.3, 1.0):
        exact = model.log_prior(theta + h * direction, hyper) - model.log_prior(theta, hyper)
        np.testing.assert_allclose(h * b + h * h * q, exact, rtol=1e-11, atol=1e-11)
    ref_b, ref_q = model.log_prior_change_along(theta, direction, hyper)
    np.testing.assert_allclose(b, ref_b, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(q, ref_q, rtol=1e-12, atol=1e-13)


def test_log1p_abs_matches_its_definition():
    from loo_adapt.transforms.gradient_flow import log1p_abs

    x = np.array([-1e-300, -1e-12, 3e-17, 0.3, -0.7, 5.0, 1e200, -1.0, -1.5, -1e10, np.nan])
    with np.errstate(divide="ignore"):
        ref = np.log(np.abs(np.float64(1.0) + x))
    small = np.abs(x) < 1e-3
    ref[small] = x[small] - x[small] ** 2 / 2  # log1p to two terms: exact here to 1 ulp
    np.testing.assert_allclose(log1p_abs(x), ref, rtol=1e-15)
