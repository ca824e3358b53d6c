"""Model families: values vs direct formulas / scipy, gradients vs finite differences."""

import numpy as np
import pytest
from scipy import stats
from scipy.special import log_expit

from loo_adapt.draws import Draws
from loo_adapt.models import (
    Flat,
    LogisticRegression,
    Normal,
    RegularizedHorseshoe,
    ReLUNet,
    StudentT,
    bernoulli_logit_loglik,
)


def fd_grad(f, theta, eps=1e-5):
    """Central finite-difference gradient of f: (S, P) -> (S,), per draw."""
    S, P = theta.shape
    g = np.empty((S, P))
    for a in range(P):
        e = np.zeros(P)
        e[a] = eps
        g[:, a] = (f(theta + e) - f(theta - e)) / (2 * eps)
    return g


@pytest.fixture
def data():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(15, 4))
    y = rng.integers(0, 2, size=15)
    return rng, X, y


def _horseshoe_draws(rng, S, D):
    tau = np.abs(rng.normal(size=(1, S))) * 0.5 + 0.1
    lam = np.abs(rng.standard_cauchy(size=(1, S, D))) + 0.05
    c = np.abs(rng.normal(size=(1, S))) + 0.5
    lt = np.sqrt(c[..., None] ** 2 * lam**2 / (c[..., None] ** 2 + tau[..., None] ** 2 * lam**2))
    beta = rng.normal(size=(1, S, D)) * 0.5
    b0 = rng.normal(size=(1, S, 1))
    return Draws({"beta": beta, "beta0": b0, "tau": tau, "lambda": lam, "c": c, "lambda_tilde": lt})


def logistic_models(X, y):
    return [
        LogisticRegression(X, y, prior=Normal(1.5)),
        LogisticRegression(
            X, y, intercept="alpha", prior=StudentT(3.0, 2.0), intercept_prior=Normal(5.0)
        ),
        LogisticRegression(
            X,
            y,
            intercept="beta0",
            prior=RegularizedHorseshoe(tau="tau", lam="lambda", c="c"),
            intercept_prior=StudentT(4.0, 2.5),
        ),
    ]


def _theta_hyper(model, rng, S=6):
    if isinstance(model, ReLUNet):
        return rng.normal(size=(S, model.dim)), None
    if model.hierarchical:
        d = _horseshoe_draws(rng, S, model.n_coef)
        return model.theta_from_draws(d)
    return rng.normal(size=(S, model.dim)), None


def all_models(X, y):
    return logistic_models(X, y) + [ReLUNet(X, y, hidden=3, prior_sd=1.3), ReLUNet(X, y, hidden=5)]


def test_log_lik_matches_scipy_including_huge_logits():
    mu = np.array([[-800.0, -30.0, -1.0, 0.0, 2.5, 40.0, 800.0]])
    for yv in (0, 1):
        y = np.full(mu.shape[1], yv)
        ref = yv * log_expit(mu) + (1 - yv) * log_expit(-mu)
        got = bernoulli_logit_loglik(mu, y)
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, ref, rtol=1e-14, atol=0)
    # y = 1, mu = -800 has log-lik exactly -800 to double precision
    assert bernoulli_logit_loglik(np.array([-800.0]), np.array([1]))[0] == -800.0


def test_logistic_values_direct(data):
    rng, X, y = data
    m = LogisticRegression(X, y, intercept="alpha", prior=Normal(2.0), intercept_prior=Normal(5.0))
    theta = rng.normal(size=(5, m.dim)) * 100  # logits of several hundred
    mu_ref = theta[:, :1] + theta[:, 1:] @ X.T
    np.testing.assert_allclose(m.linear_predictor(theta), mu_ref, rtol=1e-13)
    ll = m.log_lik(theta)
    ref = y * log_expit(mu_ref) + (1 - y) * log_expit(-mu_ref)
    assert np.all(np.isfinite(ll))
    np.testing.assert_allclose(ll, ref, rtol=1e-12)
    np.testing.assert_allclose(m.log_lik_i(theta, 4), ref[:, 4], rtol=1e-12)
    lp = stats.norm.logpdf(theta[:, 0], 0, 5).ravel() + stats.norm.logpdf(theta[:, 1:], 0, 2).sum(1)
    np.testing.assert_allclose(m.log_prior(theta, None), lp, rtol=1e-12)
    np.testing.assert_allclose(m.log_posterior(theta, None), lp + ref.sum(1), rtol=1e-12)


def test_priors_match_scipy(data):
    rng, X, y = data
    x = rng.normal(size=(4, 7)) * 3
    np.testing.assert_allclose(
        StudentT(3.5, 2.0, loc=0.3).logpdf(x),
        stats.t.logpdf(x, 3.5, loc=0.3, scale=2.0),
        rtol=1e-12,
    )
    np.testing.assert_allclose(
        Normal(0.7, loc=-1).logpdf(x), stats.norm.logpdf(x, -1, 0.7), rtol=1e-12
    )
    np.testing.assert_allclose(Flat().logpdf(x), 0.0)


def test_horseshoe_scales_and_prior(data):
    rng, X, y = data
    d = _horseshoe_draws(rng, 5, X.shape[1])
    m_raw = LogisticRegression(
        X,
        y,
        intercept="beta0",
        intercept_prior=Normal(5.0),
        prior=RegularizedHorseshoe(tau="tau", lam="lambda", c="c"),
    )
    m_lt = LogisticRegression(
        X,
        y,
        intercept="beta0",
        intercept_prior=Normal(5.0),
        prior=RegularizedHorseshoe(tau="tau", lambda_tilde="lambda_tilde"),
    )
    th1, hy1 = m_raw.theta_from_draws(d)
    th2, hy2 = m_lt.theta_from_draws(d)
    np.testing.assert_array_equal(th1, th2)
    np.testing.assert_allclose(hy1, hy2, rtol=1e-13)
    tau = d.flat("tau")
    np.testing.assert_allclose(hy2, tau[:, None] * d.flat("lambda_tilde"), rtol=1e-14)
    np.testing.assert_array_equal(th1[:, 0], d.flat("beta0")[:, 0])
    lp = stats.norm.logpdf(th1[:, 1:], 0, hy1).sum(1) + stats.norm.logpdf(th1[:, 0], 0, 5)
    np.testing.assert_allclose(m_raw.log_prior(th1, hy1), lp, rtol=1e-12)
    with pytest.raises(ValueError, match="hyper"):
        m_raw.log_prior(th1, None)


def test_intercept_scalar_or_array1(data):
    rng, X, y = data
    S = 4
    beta = rng.normal(size=(2, S, X.shape[1]))
    a = rng.normal(size=(2, S))
    m = LogisticRegression(X, y, intercept="alpha", prior=Normal(1.0), intercept_prior=Normal(5.0))
    t_scalar, _ = m.theta_from_draws(Draws({"alpha": a, "beta": beta}))
    t_arr, _ = m.theta_from_draws(Draws({"alpha": a[..., None], "beta": beta}))
    np.testing.assert_array_equal(t_scalar, t_arr)
    np.testing.assert_array_equal(t_scalar[:, 0], a.reshape(-1))
    np.testing.assert_array_equal(t_scalar[:, 1:], beta.reshape(-1, X.shape[1]))


def test_relu_values_direct(data):
    rng, X, y = data
    m = ReLUNet(X, y, prior_sd=1.3)
    S, D, H = 3, X.shape[1], 3
    W1 = rng.normal(size=(1, S, D, H))
    b1, w2, b2 = rng.normal(size=(1, S, H)), rng.normal(size=(1, S, H)), rng.normal(size=(1, S))
    theta, hyper = m.theta_from_draws(Draws({"W1": W1, "b1": b1, "w2": w2, "b2": b2}))
    assert hyper is None and m.dim == D * H + 2 * H + 1 and theta.shape == (S, m.dim)
    mu = np.empty((S, X.shape[0]))
    for s in range(S):
        for j in range(X.shape[0]):
            hid = [
                max(0.0, sum(X[j, d] * W1[0, s, d, k] for d in range(D)) + b1[0, s, k])
                for k in range(H)
            ]
            mu[s, j] = sum(w2[0, s, k] * hid[k] for k in range(H)) + b2[0, s]
    np.testing.assert_allclose(m.linear_predictor(theta), mu, rtol=1e-12)
    np.testing.assert_allclose(m.linear_predictor_i(theta, 7), mu[:, 7], rtol=1e-12)
    np.testing.assert_allclose(
        m.log_prior(theta), stats.norm.logpdf(theta, 0, 1.3).sum(1), rtol=1e-12
    )
    big = theta * 300  # logits of thousands must stay finite
    assert np.all(np.isfinite(m.log_lik(big)))


@pytest.mark.parametrize("k", range(5))
def test_gradients_vs_finite_differences(data, k):
    rng, X, y = data
    m = all_models(X, y)[k]
    theta, hyper = _theta_hyper(m, rng)
    for i in (0, 9):
        g = m.grad_linear_predictor(theta, i)
        ref = fd_grad(lambda t, i=i: m.linear_predictor_i(t, i), theta)
        np.testing.assert_allclose(g, ref, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(
        m.grad_log_prior(theta, hyper),
        fd_grad(lambda t: m.log_prior(t, hyper), theta),
        rtol=1e-7,
        atol=1e-7,
    )
    np.testing.assert_allclose(
        m.grad_log_posterior(theta, hyper),
        fd_grad(lambda t: m.log_posterior(t, hyper), theta),
        rtol=1e-7,
        atol=1e-6,
    )


@pytest.mark.parametrize("H", [3, 5])
def test_relu_hessian_kernels_vs_dense_fd_hessian(data, H):
    rng, X, y = data
    m = ReLUNet(X, y, hidden=H)
    S, P = 8, m.dim
    theta = rng.normal(size=(S, P))
    a = rng.normal(size=S) * 0.4
    left, right = rng.normal(size=(S, P)), rng.normal(size=(S, P))
    i = 2
    z = m._z_i(theta, i)
    assert np.any(z < 0) and np.any(z > 0)  # active and inactive units are both exercised
    logdet, quad = m.hess_logdet(theta, i, a), m.hess_inv_quad(theta, i, a, left, right)
    sol = m.hess_solve(theta, i, a, right)
    eps = 1e-6
    for s in range(S):
        # Hessian of mu_i by central differences of its gradient (independent of hess_dense)
        Hs = np.empty((P, P))
        for b in range(P):
            e = np.zeros((1, P))
            e[0, b] = eps
            Hs[:, b] = (
                m.grad_linear_predictor(theta[s : s + 1] + e, i)[0]
                - m.grad_linear_predictor(theta[s : s + 1] - e, i)[0]
            ) / (2 * eps)
        A = np.eye(P) + a[s] * Hs
        np.testing.assert_allclose(Hs, m.hess_dense(theta[s], i), atol=1e-8)
        assert abs(logdet[s] - np.linalg.slogdet(A)[1]) <= 1e-8 * max(1.0, abs(logdet[s]))
        ref = np.linalg.solve(A, right[s])
        np.testing.assert_allclose(sol[s], ref, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(quad[s], left[s] @ ref, rtol=1e-8, atol=1e-10)
        assert np.trace(Hs) == pytest.approx(m.hess_trace(theta, i)[s], abs=1e-8)


def test_bad_input_raises(data):
    rng, X, y = data
    with pytest.raises(ValueError, match="0 and 1"):
        LogisticRegression(X, y + 2, prior=Normal(1.0))
    with pytest.raises(ValueError, match="prior"):
        LogisticRegression(X, y)
    with pytest.raises(ValueError, match="intercept_prior"):
        LogisticRegression(X, y, intercept="a", prior=Normal(1.0))
    with pytest.raises(ValueError, match="positive"):
        Normal(-1.0)
    with pytest.raises(ValueError, match="lambda_tilde"):
        RegularizedHorseshoe(tau="tau")
    m = LogisticRegression(X, y, prior=Normal(1.0))
    with pytest.raises(ValueError, match="shape"):
        m.linear_predictor(np.zeros((3, m.dim + 1)))
    with pytest.raises(ValueError, match="out of range"):
        m.log_lik_i(np.zeros((3, m.dim)), 99)
    with pytest.raises(KeyError, match="beta"):
        m.theta_from_draws(Draws({"b": np.zeros((1, 3, X.shape[1]))}))
    with pytest.raises(ValueError, match="rows"):
        LogisticRegression(X[:-1], y, prior=Normal(1.0))
