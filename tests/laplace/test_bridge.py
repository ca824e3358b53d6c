"""Exact identities of the Laplace / ELLA / VaLLA bridge (issue 5, section 3).

References are computed here independently: dense P x P inverses and slogdet, complex-step
Hessians, scikit-learn's logistic regression, exact refits of Bayesian linear regression,
scipy quadrature, and the CmdStan lp__ of the relu1 fixture.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest
from relu1_fixture import read_relu1
from scipy import integrate
from scipy.special import expit

from loo_adapt.laplace import (
    ELLA,
    FunctionSpaceLLA,
    LinearModel,
    ReLUPoint,
    VaLLA,
    WeightSpaceLLA,
    cavity_loo,
    compare,
    find_map,
    find_modes,
    kmeans_inducing,
    log_posterior,
    log_predictive,
    predictive_prob,
)
from loo_adapt.laplace.lla import likelihood_terms

FIXTURE = str(Path(__file__).resolve().parents[1] / "data" / "cmdstan")


def _quad_logistic_normal(m, v, h=expit):
    """E h(f), f ~ N(m, v), by adaptive quadrature (scipy), the independent reference."""
    if v == 0:
        return float(h(m))
    sd = np.sqrt(v)
    return integrate.quad(lambda t: h(m + sd * t) * np.exp(-0.5 * t * t) / np.sqrt(2 * np.pi),
                          -40, 40, epsabs=0.0, epsrel=1e-13, limit=1000)[0]


def rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return np.max(np.abs(a - b) / (1e-300 + np.maximum(np.abs(a), np.abs(b)).max()))


@pytest.fixture(scope="module")
def toy():
    """A ReLU net with no training input within 0.05 of a kink (so finite differences are
    valid) and P = 12*8 + 17 = 113 > n = 30 (so the NTK Gram is full rank)."""
    rng = np.random.default_rng(3)
    n, D, H = 30, 12, 8
    X = rng.standard_normal((n, D))
    y = (X[:, 0] - X[:, 1] + 0.7 * rng.standard_normal(n) > 0).astype(float)
    for _ in range(200):
        net = ReLUPoint(0.5 * rng.standard_normal((D, H)), rng.standard_normal(H),
                      rng.standard_normal(H), 0.3)
        z, _, _ = net.hidden(X)
        if np.min(np.abs(z)) > 0.05:
            break
    Xs = rng.standard_normal((7, D))
    return net, X, y, Xs


def test_ntk_and_jacobian(toy):
    net, X, y, Xs = toy
    J, Js = net.jacobian(X), net.jacobian(Xs)
    assert rel(net.ntk(X, Xs), J @ Js.T) < 1e-12
    assert rel(net.ntk_diag(Xs), np.sum(Js**2, 1)) < 1e-12
    # Jacobian against central differences of the forward pass
    theta, h = net.theta, 1e-6
    fd = np.empty_like(J)
    for j in range(theta.size):
        e = np.zeros_like(theta)
        e[j] = h
        fd[:, j] = (net.with_vector(theta + e).forward(X)
                    - net.with_vector(theta - e).forward(X)) / (2 * h)
    assert np.max(np.abs(fd - J)) < 1e-7
    # J^T r without J, and the log-posterior gradient against central differences
    r = np.linspace(-1, 1, X.shape[0])
    assert rel(net.vjp(X, r), J.T @ r) < 1e-12
    lp, g = log_posterior(net, X, y, 1.3, grad=True)
    gfd = np.array([(log_posterior(net.with_vector(theta + h * e), X, y, 1.3)
                     - log_posterior(net.with_vector(theta - h * e), X, y, 1.3)) / (2 * h)
                    for e in np.eye(theta.size)])
    assert np.max(np.abs(gfd - g)) < 1e-6


def test_weight_space_equals_function_space(toy):
    net, X, y, Xs = toy
    fs, ws = FunctionSpaceLLA(net, X, y, 0.8), WeightSpaceLLA(net, X, y, 0.8)
    assert rel(fs.train_var(), ws.train_var()) < 1e-9
    m1, v1 = fs.predict_f(Xs)
    m2, v2 = ws.predict_f(Xs)
    assert rel(m1, m2) < 1e-12 and rel(v1, v2) < 1e-9
    assert rel(fs.cov(Xs), ws.cov(Xs)) < 1e-9
    # weight-space posterior covariance against a dense inverse of the GGN precision
    J, lam = net.jacobian(X), fs.lam
    Sigma = np.linalg.inv(J.T @ (lam[:, None] * J) + np.eye(net.P) / 0.8**2)
    assert rel(ws.cov(Xs), net.jacobian(Xs) @ Sigma @ net.jacobian(Xs).T) < 1e-9
    for method in ("gh", "probit", "mc"):
        assert rel(fs.predictive_prob(Xs, method=method),
                   ws.predictive_prob(Xs, method=method)) < 1e-9
    # evidence: P x P and n x n determinants, and the dense Laplace formula
    assert abs(fs.log_evidence() - ws.log_evidence()) < 1e-9 * abs(ws.log_evidence())
    theta, s0 = net.theta, 0.8
    prec = J.T @ (lam[:, None] * J) + np.eye(net.P) / s0**2
    loglik = np.sum(likelihood_terms(net.forward(X), y)[0])
    logprior = -0.5 * theta @ theta / s0**2 - 0.5 * net.P * np.log(2 * np.pi * s0**2)
    dense = loglik + logprior + 0.5 * net.P * np.log(2 * np.pi) - 0.5 * np.linalg.slogdet(prec)[1]
    assert abs(ws.log_evidence() - dense) < 1e-9 * abs(dense)
    assert abs(fs.log_evidence(1.7) - ws.log_evidence(1.7)) < 1e-9 * abs(ws.log_evidence(1.7))


def test_evidence_optimum(toy):
    net, X, y, _ = toy
    fs = FunctionSpaceLLA(net, X, y, 1.0)
    s_opt = fs.optimize_prior()
    grid = np.exp(np.linspace(np.log(s_opt) - 1, np.log(s_opt) + 1, 401))
    values = [fs.log_evidence(s) for s in grid]
    assert fs.log_evidence(s_opt) >= max(values) - 1e-9
    h = 1e-4 * s_opt  # stationary point: central difference of the evidence vanishes
    d = (fs.log_evidence(s_opt + h) - fs.log_evidence(s_opt - h)) / (2 * h)
    assert abs(d) < 1e-5
    assert abs(WeightSpaceLLA(net, X, y, 1.0).optimize_prior() - s_opt) < 1e-6 * s_opt


def test_cavity_equals_rank_one_ggn_downdate(toy):
    net, X, y, _ = toy
    s0 = 1.1
    fs = FunctionSpaceLLA(net, X, y, s0)
    loo = fs.loo()
    J, f = net.jacobian(X), net.forward(X)
    _, r, lam = likelihood_terms(f, y)
    prec = J.T @ (lam[:, None] * J) + np.eye(net.P) / s0**2
    for i in range(X.shape[0]):
        Sig_i = np.linalg.inv(prec - lam[i] * np.outer(J[i], J[i]))
        v_i = J[i] @ Sig_i @ J[i]
        mu_i = f[i] - J[i] @ Sig_i @ J[i] * r[i]  # mean theta^ - Sigma_-i J_i^T r_i
        assert abs(loo.var[i] - v_i) < 1e-9 * v_i
        assert abs(loo.mean[i] - mu_i) < 1e-9 * (1 + abs(mu_i))
        # LOO predictive probability against adaptive quadrature of sigmoid x normal
        p1 = _quad_logistic_normal(mu_i, v_i)
        assert abs(loo.loo_prob[i] - p1) < 1e-9
        p_obs = _quad_logistic_normal(mu_i, v_i, lambda t, s=2 * y[i] - 1: expit(s * t))
        assert abs(loo.elpd_loo[i] - np.log(p_obs)) < 1e-8 * abs(np.log(p_obs))


def test_gaussian_cavity_equals_exact_refit():
    """Bayesian linear regression: LLA is exact and the cavity LOO equals refitting."""
    rng = np.random.default_rng(5)
    n, D, s0, noise = 25, 4, 1.5, 0.4
    X = rng.standard_normal((n, D))
    y = X @ rng.standard_normal(D) + 0.3 + noise * rng.standard_normal(n)
    Xt = np.hstack([X, np.ones((n, 1))])

    def posterior(keep):
        prec = Xt[keep].T @ Xt[keep] / noise**2 + np.eye(D + 1) / s0**2
        cov = np.linalg.inv(prec)
        return cov @ Xt[keep].T @ y[keep] / noise**2, cov

    mean, _ = posterior(np.ones(n, bool))
    lla = FunctionSpaceLLA(LinearModel.from_vector(mean), X, y, s0,
                           likelihood="gaussian", noise_sd=noise)
    loo = lla.loo()
    for i in range(n):
        keep = np.arange(n) != i
        m_i, c_i = posterior(keep)
        mu, var = Xt[i] @ m_i, Xt[i] @ c_i @ Xt[i]
        assert abs(loo.mean[i] - mu) < 1e-10 * (1 + abs(mu))
        assert abs(loo.var[i] - var) < 1e-10 * var
        dens = -0.5 * np.log(2 * np.pi * (var + noise**2)) - 0.5 * (y[i] - mu) ** 2 / (
            var + noise**2)
        assert abs(loo.elpd_loo[i] - dens) < 1e-10 * abs(dens)


def _lr_grad_complex(theta, Xt, y, s0):
    """An independent, complex-safe gradient of the logistic-regression log posterior."""
    f = Xt @ theta
    return Xt.T @ (y - 1.0 / (1.0 + np.exp(-f))) - theta / s0**2


def test_logistic_regression_lla_is_laplace():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(7)
    n, D, s0 = 80, 5, 0.9
    X = rng.standard_normal((n, D))
    y = (X @ rng.standard_normal(D) + 0.5 + rng.logistic(size=n) > 0).astype(float)
    model, _, _ = find_map(LinearModel(np.zeros(D), 0.0), X, y, s0, gtol=1e-12)
    Xt = np.hstack([X, np.ones((n, 1))])
    # MAP against scikit-learn (all coefficients penalised: C = sigma0^2)
    sk = LogisticRegression(C=s0**2, fit_intercept=False, tol=1e-12, max_iter=10000)
    sk.fit(Xt, y)
    assert np.max(np.abs(sk.coef_[0] - model.theta)) < 1e-6
    # Hessian of the negative log posterior by complex step: exact to rounding
    theta, h = model.theta, 1e-30
    Hs = np.array([-np.imag(_lr_grad_complex(theta + 1j * h * e, Xt, y, s0)) / h
                   for e in np.eye(D + 1)])
    ws = WeightSpaceLLA(model, X, y, s0)
    assert rel(ws.precision, Hs) < 1e-12  # GGN = Hessian
    Xs = rng.standard_normal((6, D))
    Xst = np.hstack([Xs, np.ones((6, 1))])
    laplace_var = np.einsum("ij,jk,ik->i", Xst, np.linalg.inv(Hs), Xst)
    fs = FunctionSpaceLLA(model, X, y, s0)
    assert rel(fs.predict_f(Xs)[1], laplace_var) < 1e-9  # LLA = Laplace
    assert rel(ws.predict_f(Xs)[1], laplace_var) < 1e-9


def test_ella_full_rank_equals_lla(toy):
    net, X, y, Xs = toy
    n = X.shape[0]
    fs = FunctionSpaceLLA(net, X, y, 0.9)
    ella = ELLA(net, X, y, 0.9, M=n, K=n)
    assert ella.K == n
    assert rel(ella.features(X) @ ella.features(X).T, 0.81 * net.ntk(X)) < 1e-9
    assert rel(ella.train_var(), fs.train_var()) < 1e-8
    loo_e, loo_f = ella.loo(), fs.loo()
    assert rel(loo_e.loo_prob, loo_f.loo_prob) < 1e-8
    assert abs(loo_e.elpd - loo_f.elpd) < 1e-8 * abs(loo_f.elpd)
    assert abs(ella.log_evidence() - fs.log_evidence()) < 1e-8 * abs(fs.log_evidence())
    # fewer eigenpairs: features reproduce only the top-K part, variance never larger
    small = ELLA(net, X, y, 0.9, M=20, K=5, seed=1)
    assert small.K == 5 and small.M == 20
    assert np.all(small.train_var() <= small.prior_var(X) + 1e-12)


def test_ella_sweep(toy):
    from loo_adapt.laplace import ella_sweep

    net, X, y, _ = toy
    n = X.shape[0]
    ref = FunctionSpaceLLA(net, X, y, 0.9)
    rows = ella_sweep(net, X, y, 0.9, Ms=(10, n), Ks=(5, 20, n), reference_var=ref.train_var())
    assert [(r["M"], r["K"]) for r in rows] == [(10, 5), (n, 5), (n, 20), (n, n)]
    assert rows[-1]["rel_var_error"] < 1e-8
    assert abs(rows[-1]["elpd_loo"] - ref.loo().elpd) < 1e-8 * abs(ref.loo().elpd)
    # more eigenpairs of the same sample: the Nystrom kernel grows, so does the error shrink
    assert rows[1]["rel_var_error"] > rows[2]["rel_var_error"] > rows[3]["rel_var_error"]


def test_valla_gaussian_eq18_equals_lla(toy):
    net, X, y_bin, Xs = toy
    s0, noise = 0.7, 0.5
    y = net.forward(X) + noise * np.random.default_rng(0).standard_normal(X.shape[0])
    lla = FunctionSpaceLLA(net, X, y, s0, likelihood="gaussian", noise_sd=noise)

    def eq18_var(Z, Xq):  # Eq. 17 with Eq. 18's A, written out densely
        Kz = s0**2 * net.ntk(Z)
        Kxz = s0**2 * net.ntk(X, Z)
        Kzi = np.linalg.inv(Kz)
        A = Kzi @ Kxz.T @ Kxz @ Kzi / noise**2
        kqz = s0**2 * net.ntk(Xq, Z)
        return s0**2 * net.ntk_diag(Xq) - np.einsum(
            "ij,jk,ik->i", kqz, np.linalg.inv(np.linalg.inv(A) + Kz), kqz)

    # Z = X at the Eq. 18 optimum is LLA with the Gaussian likelihood
    oracle = VaLLA.gaussian_optimum(net, X, y, s0, noise, Z=X)
    assert rel(eq18_var(X, Xs), lla.predict_f(Xs)[1]) < 1e-8
    assert rel(oracle.predict_f(Xs)[1], lla.predict_f(Xs)[1]) < 1e-8
    assert rel(oracle.train_var(), lla.train_var()) < 1e-8
    assert rel(oracle.loo().mean, lla.loo().mean) < 1e-8
    assert rel(oracle.loo().elpd_loo, lla.loo().elpd_loo) < 1e-8
    # the L-BFGS ELBO optimum, from the prior, with M < n k-means inducing points is Eq. 18
    Z = kmeans_inducing(X, 8, seed=2)
    fit = VaLLA(net, X, y, s0, Z=Z, likelihood="gaussian", noise_sd=noise, S_init="prior",
                gtol=1e-12, maxiter=5000)
    assert rel(fit.predict_f(Xs)[1], eq18_var(Z, Xs)) < 1e-6
    assert rel(fit.train_var(), eq18_var(Z, X)) < 1e-6


def test_valla_bernoulli_stationarity(toy):
    net, X, y, Xs = toy
    v = VaLLA(net, X, y, 1.0, M=10, seed=1, gtol=1e-11, maxiter=5000)
    start = VaLLA(net, X, y, 1.0, M=10, seed=1, optimize=False)
    assert v.elbo() >= start.elbo() - 1e-10
    # stationary point of the ELBO: A = C^T diag(E_q[p(1-p)]) C (quadrature by scipy)
    g, var = v.f_hat, v.train_var()
    lam = np.array([_quad_logistic_normal(gi, vi, lambda f: expit(f) * expit(-f))
                    for gi, vi in zip(g, var)])
    A_fixed = (v.C * lam[:, None]).T @ v.C
    assert rel(v.A, A_fixed) < 1e-5
    loo = v.loo()
    assert np.all(np.isfinite(loo.elpd_loo)) and np.all(loo.var >= var - 1e-12)


def test_sigma0_to_zero_gives_map(toy):
    net, X, y, Xs = toy
    f = net.forward(Xs)
    for cls in (FunctionSpaceLLA, WeightSpaceLLA):
        lla = cls(net, X, y, 1e-9)
        assert np.max(np.abs(lla.predictive_prob(Xs) - expit(f))) < 1e-12
        loo = lla.loo()
        assert np.max(np.abs(loo.elpd_loo - likelihood_terms(net.forward(X), y)[0])) < 1e-12
    ella = ELLA(net, X, y, 1e-9, M=10, K=5)
    assert np.max(np.abs(ella.predictive_prob(Xs) - expit(f))) < 1e-12


def test_predictive_methods_and_overflow():
    mean = np.array([-3.0, 0.0, 0.4, 2.5, 800.0, -800.0])
    var = np.array([0.5, 2.0, 0.0, 9.0, 4.0, 4.0])
    ref = np.array([_quad_logistic_normal(m, v) for m, v in zip(mean, var)])
    assert np.max(np.abs(predictive_prob(mean, var) - ref)) < 1e-11
    assert np.max(np.abs(predictive_prob(mean, var, n_points=8) - ref)) > 1e-6  # too few
    mc = predictive_prob(mean, var, method="mc", n_mc=20000, seed=1)
    assert np.max(np.abs(mc - ref)) < 0.02
    assert np.array_equal(mc, predictive_prob(mean, var, method="mc", n_mc=20000, seed=1))
    assert np.max(np.abs(predictive_prob(mean, var, method="probit") - ref)) < 0.02
    lp = log_predictive(mean, var, -1.0)  # log P(y = 0): finite even at logit 800
    assert np.all(np.isfinite(lp)) and lp[4] < -700
    ll, r, lam = likelihood_terms(np.array([-900.0, 900.0]), np.array([1.0, 1.0]))
    assert np.all(np.isfinite(ll)) and np.all(np.isfinite(r)) and np.all(lam >= 0)
    with pytest.raises(ValueError):
        predictive_prob(mean, var, method="laplace")
    with pytest.raises(ValueError):
        predictive_prob(mean, -var - 1)


def test_cavity_guard_warns():
    f, v = np.array([0.5, 1.0]), np.array([1.0, 2.0])
    with pytest.warns(RuntimeWarning, match="1 - Lambda_i v_i <= 0"):
        loo = cavity_loo(f, v, np.array([1.0, 0.0]), lam=np.array([0.2, 0.6]),
                         r=np.array([0.3, -0.7]), prior_var=np.array([3.0, 5.0]))
    assert loo.guarded.tolist() == [False, True]
    assert loo.var[1] == 5.0 and np.all(np.isfinite(loo.elpd_loo))
    assert abs(loo.var[0] - 1.0 / 0.8) < 1e-15


def test_bad_input(toy):
    net, X, y, _ = toy
    with pytest.raises(ValueError, match="binary"):
        FunctionSpaceLLA(net, X, y + 0.5, 1.0)
    with pytest.raises(ValueError, match="sigma0"):
        FunctionSpaceLLA(net, X, y, -1.0)
    with pytest.raises(ValueError, match="columns"):
        net.forward(X[:, :3])
    with pytest.raises(ValueError, match="noise_sd"):
        FunctionSpaceLLA(net, X, y, 1.0, likelihood="gaussian")
    with pytest.raises(ValueError, match="max_params"):
        WeightSpaceLLA(net, X, y, 1.0, max_params=10)
    with pytest.raises(ValueError, match="W1, b1, w2, b2"):
        find_modes({"W1": np.zeros((1, 2, 12, 8))}, X, y, 1.0)


def test_mode_dedup_under_permutation():
    rng = np.random.default_rng(11)
    n, D, H = 30, 3, 4
    X = rng.standard_normal((n, D))
    y = (X[:, 0] + 0.5 * rng.standard_normal(n) > 0).astype(float)
    net = ReLUPoint(rng.standard_normal((D, H)), rng.standard_normal(H), rng.standard_normal(H),
                  0.1)
    perm = np.array([2, 0, 3, 1])
    W1 = np.stack([net.W1, net.W1[:, perm]])[:, None]
    b1 = np.stack([net.b1, net.b1[perm]])[:, None]
    w2 = np.stack([net.w2, net.w2[perm]])[:, None]
    b2 = np.full((2, 1), net.b2)
    modes = find_modes({"W1": W1, "b1": b1, "w2": w2, "b2": b2}, X, y, 1.0)
    assert len(modes) == 1 and sorted(modes[0].chains) == [0, 1]
    assert modes[0].log_post >= log_posterior(net, X, y, 1.0)
    single, lp_single, _ = find_map(net, X, y, 1.0)
    assert abs(modes[0].log_post - lp_single) < 1e-12
    # a genuinely different start that ends elsewhere is a second mode
    other = ReLUPoint(-net.W1, net.b1, -net.w2, -0.1)
    modes2 = find_modes({k: np.concatenate([v, v2]) for (k, v), v2 in zip(
        {"W1": W1, "b1": b1, "w2": w2, "b2": b2}.items(),
        [other.W1[None, None], other.b1[None, None], other.w2[None, None], np.full((1, 1), -.1)])},
        X, y, 1.0)
    lp_other = find_map(other, X, y, 1.0)[1]
    assert len(modes2) == (1 if abs(lp_other - lp_single) < 1e-6 else 2)


@pytest.mark.skipif(not os.path.isdir(FIXTURE), reason="CmdStan fixtures not available")
def test_relu1_fixture_modes():
    data, draws, lp_stan = read_relu1()
    X, y, sd = np.array(data["X"]), np.array(data["y"]), data["prior_sd"]
    C, S = lp_stan.shape
    ours = np.array([[log_posterior(ReLUPoint(*(draws[k][c, s] for k in ("W1", "b1", "w2", "b2"))),
                                    X, y, sd) for s in range(S)] for c in range(C)])
    # same log posterior as Stan's lp__ up to a constant (CSV has 6 significant digits)
    diff = ours - lp_stan
    assert np.max(np.abs(diff - np.median(diff))) < 1e-3
    modes = find_modes(draws, X, y, sd)
    assert 1 <= len(modes) <= C
    assert sorted(c for m in modes for c in m.chains) == list(range(C))
    for m in modes:
        assert m.log_post > ours.max()
        assert abs(m.log_post - log_posterior(m.net, X, y, sd)) < 1e-10
    lla = FunctionSpaceLLA(modes[0].net, X, y, sd)
    loo = lla.loo()
    assert np.all(np.isfinite(loo.elpd_loo)) and loo.elpd < 0


def test_compare_against_arrays(toy):
    net, X, y, _ = toy
    rng = np.random.default_rng(0)
    n = X.shape[0]
    p_mcmc = expit(0.8 * net.forward(X) + 0.3 * rng.standard_normal(n))
    elpd = np.log(np.where(y == 1, p_mcmc, 1 - p_mcmc))
    khat = np.linspace(0.1, 0.9, n)
    res = compare(None, X, y, nets=[net], mcmc=(elpd, None, khat), prior_sd=1.0,
                  ella_kw={"M": 20, "K": 10}, valla_kw={"M": 8})
    rows = {r["method"]: r for r in res.table}
    assert set(rows) == {"mcmc", "map", "lla", "ella", "valla"}
    from sklearn.metrics import average_precision_score, brier_score_loss, roc_auc_score

    assert abs(rows["mcmc"]["auroc"] - roc_auc_score(y, p_mcmc)) < 1e-12
    assert abs(rows["mcmc"]["brier"] - brier_score_loss(y, p_mcmc)) < 1e-12
    lla_loo = FunctionSpaceLLA(net, X, y, 1.0).loo()
    assert abs(rows["lla"]["elpd_loo"] - lla_loo.elpd) < 1e-12
    assert abs(rows["lla"]["average_precision"]
               - average_precision_score(y, lla_loo.loo_prob)) < 1e-12
    assert abs(rows["mcmc"]["elpd_loo"] - elpd.sum()) < 1e-12
    text = str(res)  # the table, one line per method, not the pointwise arrays
    assert len(text.splitlines()) == 2 + len(res.table) and repr(res) == text
    assert f"{rows['lla']['elpd_loo']:.4g}" in text
    strata = [s for s in res.strata if s["method"] == "lla"]
    assert [s["n"] for s in strata] == [int(np.sum(khat <= 0.5)),
                                       int(np.sum((khat > 0.5) & (khat <= 0.7))),
                                       int(np.sum(khat > 0.7))]
    sel = khat > 0.7
    dl = lla_loo.loo_logit - np.log(p_mcmc / (1 - p_mcmc))
    assert abs(strata[2]["mean_abs_dlogit"] - np.mean(np.abs(dl[sel]))) < 1e-12
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import matplotlib

        matplotlib.use("Agg")
        from loo_adapt.laplace import plot_comparison

        fig = plot_comparison(res)
    assert len(fig.axes) == 2


def test_kmeans_inducing_distinct():
    rng = np.random.default_rng(0)
    X = np.repeat(rng.standard_normal((5, 3)), 4, axis=0)  # 5 distinct points, 20 rows
    Z = kmeans_inducing(X, 5, seed=0)
    assert Z.shape == (5, 3) and len(np.unique(np.round(Z, 10), axis=0)) == 5
    assert np.array_equal(kmeans_inducing(X[:4], 10), X[:4])
    assert np.array_equal(kmeans_inducing(X, 5, seed=3), kmeans_inducing(X, 5, seed=3))
    with pytest.raises(ValueError):
        kmeans_inducing(X, 0)
