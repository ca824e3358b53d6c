"""Transforms: exact log|det J| vs slogdet of finite-difference Jacobians, step-size rule,
identity at h = 0, first-order option, MM2 vs arviz-stats' moment matching."""

import zlib

import numpy as np
import pytest

from loo_adapt.draws import Draws
from loo_adapt.models import (
    LogisticRegression,
    Normal,
    RegularizedHorseshoe,
    ReLUNet,
    StudentT,
)
from loo_adapt.transforms import (
    DEFAULT_RHO,
    TRANSFORMS,
    CallableModel,
    callable_model_from_sigmoid,
    hutchinson_trace,
    posterior_terms,
    prepare_first_order,
)


def fd_jacobian(fn, x, eps=1e-4):
    """Dense Jacobian dT_a/dx_b of fn at x by Richardson-extrapolated central differences."""
    P = x.size

    def central(e):
        f = fn(np.vstack([x + e * np.eye(P), x - e * np.eye(P)]))
        return ((f[:P] - f[P:]) / (2 * e)).T

    return (4 * central(eps / 2) - central(eps)) / 3


def _problem(kind, rng, S=6, spread=0.05):
    """A model and S tightly clustered draws (so that pi(theta|D) varies moderately)."""
    n, D = 14, 3
    X = rng.normal(size=(n, D))
    y = rng.integers(0, 2, size=n)
    if kind.startswith("relu"):
        H = int(kind[4:])
        m = ReLUNet(X, y, hidden=H, prior_sd=1.5)
        centre = rng.normal(size=m.dim)
        return m, centre + spread * rng.normal(size=(S, m.dim)), None
    if kind == "normal":
        m = LogisticRegression(X, y, prior=Normal(1.5))
    elif kind == "studentt":
        m = LogisticRegression(
            X, y, intercept="a", prior=StudentT(3.0, 1.0), intercept_prior=Normal(5.0)
        )
    elif kind == "horseshoe":
        m = LogisticRegression(
            X,
            y,
            intercept="b0",
            intercept_prior=Normal(5.0),
            prior=RegularizedHorseshoe(tau="tau", lam="lam", c="c"),
        )
        d = Draws(
            {
                "b0": rng.normal(size=(1, S, 1)) * spread + 0.2,
                "beta": rng.normal(size=(1, S, D)) * spread + rng.normal(size=D) * 0.5,
                "tau": np.abs(rng.normal(size=(1, S))) + 0.3,
                "lam": np.abs(rng.standard_cauchy(size=(1, S, D))) + 0.1,
                "c": np.full((1, S), 2.0),
            }
        )
        theta, hyper = m.theta_from_draws(d)
        return m, theta, hyper
    else:
        raise ValueError(kind)
    centre = rng.normal(size=m.dim) * 0.5
    return m, centre + spread * rng.normal(size=(S, m.dim)), None


PROBLEMS = ["normal", "studentt", "horseshoe", "relu3", "relu5"]


@pytest.mark.parametrize("problem", PROBLEMS)
@pytest.mark.parametrize("kind", ["kl", "var", "ll"])
def test_exact_logdet_matches_dense_fd_jacobian(problem, kind):
    rng = np.random.default_rng(zlib.crc32(f"{problem}-{kind}".encode()))
    m, theta, hyper = _problem(problem, rng)
    S, P = theta.shape
    rho = 2.0 if problem.startswith("relu") else 1.0
    hess_part = 0.0
    for i in (0, 5):
        step = TRANSFORMS[kind](m, theta, hyper, i)
        h = step.h_for_rho(rho)
        phi, logdet = step.apply(h)
        # apply() and the reference map are the same T
        np.testing.assert_allclose(phi, step.map(theta, h, hyper), rtol=1e-13, atol=1e-13)
        if problem.startswith("relu"):
            hess_part = max(hess_part, np.max(np.abs(m.hess_logdet(theta, i, h * step.phi))))
        for s in range(S):
            hy = None if hyper is None else np.repeat(hyper[s : s + 1], 2 * P, axis=0)
            J = fd_jacobian(lambda pts, hy=hy, st=step, h=h: st.map(pts, h, hy), theta[s])
            sign, ref = np.linalg.slogdet(J)
            assert sign != 0
            assert abs(logdet[s] - ref) <= 1e-8 * abs(ref) + 1e-11, (s, logdet[s], ref)
        assert np.max(np.abs(logdet)) > 1e-3  # the comparison is not between zeros
    if problem.startswith("relu"):
        assert hess_part > 1e-3  # the Hessian factor det(I + a H_i) really contributes


def test_relu_with_inactive_units_and_large_hessian_term():
    rng = np.random.default_rng(7)
    m, theta, _ = _problem("relu3", rng, S=8, spread=0.3)
    i = 1
    z = m._z_i(theta, i)
    assert np.any(z < -0.05) and np.any(z > 0.05)
    keep = np.min(np.abs(z), axis=1) > 1e-2  # FD must not straddle a ReLU kink
    step = TRANSFORMS["ll"](m, theta, None, i)
    h = step.h_for_rho(8.0)
    _, logdet = step.apply(h)
    for s in np.flatnonzero(keep):
        J = fd_jacobian(lambda pts: step.map(pts, h), theta[s], eps=1e-5)
        ref = np.linalg.slogdet(J)[1]
        assert abs(logdet[s] - ref) <= 1e-8 * abs(ref) + 1e-11


@pytest.mark.parametrize("problem", ["studentt", "relu3"])
def test_mm2_logdet_and_mm1(problem):
    rng = np.random.default_rng(11)
    m, theta, hyper = _problem(problem, rng, S=40, spread=0.3)
    lw = -m.log_lik_i(theta, 3)
    for kind in ("mm1", "mm2"):
        step = TRANSFORMS[kind](m, theta, hyper, 3, log_weights=lw)
        phi, logdet = step.apply(step.step_for_rho(0.7))
        np.testing.assert_allclose(phi, step.map(theta, 0.7), rtol=1e-13, atol=1e-14)
        for s in (0, 7):
            J = fd_jacobian(lambda pts, st=step: st.map(pts, 0.7), theta[s])
            ref = np.linalg.slogdet(J)[1]
            assert abs(logdet[s] - ref) <= 1e-8 * abs(ref) + 1e-10
        if kind == "mm2":
            assert abs(logdet[0]) > 1e-3


def test_mm_matches_paananen_shift_and_scale():
    """Reference: loo / arviz-stats ``shift_and_scale`` written out in their own form
    (E_w[theta^2] - mean_w^2 with S/(S-1), over the ddof=1 variance)."""
    rng = np.random.default_rng(5)
    m, theta, _ = _problem("normal", rng, S=200, spread=0.4)
    lw = -m.log_lik_i(theta, 2)
    w = np.exp(lw - np.logaddexp.reduce(lw))
    S = theta.shape[0]
    mean_w = np.sum(w[:, None] * theta, axis=0)
    mii = (np.sum(w[:, None] * theta**2, axis=0) - mean_w**2) * S / (S - 1)
    scaling = np.sqrt(mii / np.var(theta, axis=0, ddof=1))
    ref2 = (theta - theta.mean(0)) * scaling + mean_w
    ref1 = theta - theta.mean(0) + mean_w
    phi2, _ = TRANSFORMS["mm2"](m, theta, None, 2, log_weights=lw).apply(1.0)
    phi1, _ = TRANSFORMS["mm1"](m, theta, None, 2, log_weights=lw).apply(1.0)
    np.testing.assert_allclose(phi2, ref2, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(phi1, ref1, rtol=1e-10, atol=1e-12)
    assert np.max(np.abs(scaling - 1)) > 0.005  # the scaling is not trivial here


@pytest.mark.parametrize("kind", list(TRANSFORMS))
def test_zero_step_is_identity_and_step_rule(kind):
    rng = np.random.default_rng(2)
    m, theta, hyper = _problem("relu3", rng, S=30, spread=0.3)
    lw = -m.log_lik_i(theta, 4)
    step = TRANSFORMS[kind](m, theta, hyper, 4, log_weights=lw)
    phi, logdet = step.apply(0.0)
    assert np.array_equal(phi, theta) and np.array_equal(logdet, np.zeros(30))
    if kind.startswith("mm"):
        return
    sd = theta.std(axis=0, ddof=1)
    for rho in (1.0, 1 / 16, 4.0**-10):
        phi, _ = step.apply_rho(rho)
        assert np.max(np.abs(phi - theta) / sd) == pytest.approx(rho, rel=1e-10)


@pytest.mark.parametrize("kind", list(TRANSFORMS))
def test_finite_over_rho_grid_small_problem(kind):
    rng = np.random.default_rng(20)
    n, P = 20, 4
    X = rng.normal(size=(n, P))
    y = rng.integers(0, 2, size=n)
    m = LogisticRegression(X, y, prior=Normal(2.0))
    theta = rng.normal(size=(500, P)) * 0.6 + rng.normal(size=P)
    terms = posterior_terms(m, theta, None)
    for i in range(n):
        lw = -terms.mu[:, i] * 0 - m.log_lik_i(theta, i)
        step = TRANSFORMS[kind](m, theta, None, i, terms=terms, log_weights=lw)
        for rho in DEFAULT_RHO:
            phi, logdet = step.apply(step.step_for_rho(rho))
            assert np.all(np.isfinite(phi)) and np.all(np.isfinite(logdet)), (i, rho)
    assert len(DEFAULT_RHO) == 11 and DEFAULT_RHO[-1] == 4.0**-10


def test_extreme_logits_do_not_overflow():
    rng = np.random.default_rng(9)
    X = rng.normal(size=(10, 3)) * 300  # logits of +-1000
    y = rng.integers(0, 2, size=10)
    m = LogisticRegression(X, y, prior=Normal(1.0))
    theta = rng.normal(size=(50, 3))
    for kind in ("kl", "var", "ll"):
        step = TRANSFORMS[kind](m, theta, None, 0)
        phi, logdet = step.apply_rho(0.25)
        assert np.all(np.isfinite(phi)) and np.all(np.isfinite(logdet))
        assert np.max(np.abs(phi - theta) / theta.std(0, ddof=1)) == pytest.approx(0.25)


def test_first_order_exact_for_logistic_and_second_order_error_for_relu():
    rng = np.random.default_rng(4)
    m, theta, hyper = _problem("studentt", rng)
    for kind in ("kl", "var", "ll"):
        ex = TRANSFORMS[kind](m, theta, hyper, 2)
        fo = prepare_first_order(kind, m, theta, hyper, 2)
        for rho in (1.0, 0.01):
            p1, l1 = ex.apply_rho(rho)
            p2, l2 = fo.apply_rho(rho)
            np.testing.assert_allclose(p2, p1, rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(l2, l1, rtol=1e-10, atol=1e-15)  # rank one: exact
    m, theta, hyper = _problem("relu3", rng, spread=0.2)
    # an observation where every draw has an active unit, so H_i != 0
    i = int(np.argmax([np.min(np.sum(m._z_i(theta, j) > 0, axis=1)) for j in range(m.n_obs)]))
    assert np.all(np.any(m._z_i(theta, i) > 0, axis=1))
    ex = TRANSFORMS["kl"](m, theta, None, i)
    fo = prepare_first_order("kl", m, theta, None, i)
    err = [np.max(np.abs(ex.apply_rho(r)[1] - fo.apply_rho(r)[1])) for r in (0.4, 0.1)]
    assert err[0] > 0
    assert 10 < err[0] / err[1] < 22  # O(h^2): quartering h divides the error by ~16


def test_first_order_callable_hutchinson():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(12, 3))
    X[0] = [1.3, 0.0, 0.0]  # Hessian of log l_0 is diagonal: Hutchinson is then exact
    y = rng.integers(0, 2, size=12)
    m = LogisticRegression(X, y, prior=Normal(1.0))
    theta = rng.normal(size=(15, 3)) * 0.3
    cm = callable_model_from_sigmoid(m)
    for kind in ("kl", "var", "ll"):
        ref = prepare_first_order(kind, m, theta, None, 0)
        got = prepare_first_order(kind, cm, theta, None, 0, n_probes=3, seed=1)
        for rho in (1.0, 1e-3):
            p1, l1 = ref.apply_rho(rho)
            p2, l2 = got.apply_rho(rho)
            np.testing.assert_allclose(p2, p1, rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(l2, l1, rtol=1e-6, atol=1e-12)

    # a BridgeStan-like object exposing log_density_gradient is accepted
    class Fake:
        def log_density_gradient(self, q):
            return cm.log_density_gradient(q)

    got = prepare_first_order(
        "kl", CallableModel(Fake(), cm.log_lik_i_gradient, 3), theta, None, 0, n_probes=2, seed=0
    )
    assert np.all(np.isfinite(got.apply_rho(0.5)[1]))


def test_hutchinson_unbiased_within_its_standard_error():
    rng = np.random.default_rng(0)
    B = rng.normal(size=(6, 6))
    A = B + B.T
    K = 4000
    est = hutchinson_trace(lambda z: A @ z, 6, K, np.random.default_rng(1))
    off = A - np.diag(np.diag(A))
    se = np.sqrt(2 * np.sum(off**2) / K)
    assert abs(est - np.trace(A)) < 4 * se


def test_registry_uniform_signature_and_errors():
    rng = np.random.default_rng(1)
    m, theta, hyper = _problem("normal", rng, S=20)
    assert set(TRANSFORMS) == {"kl", "var", "ll", "mm1", "mm2"}
    with pytest.raises(ValueError, match="log_weights"):
        TRANSFORMS["mm2"](m, theta, hyper, 0)
    step = TRANSFORMS["kl"](m, theta, hyper, 0)
    with pytest.raises(ValueError, match="rho"):
        step.h_for_rho(-1.0)
    with pytest.raises(ValueError, match="post_sd"):
        TRANSFORMS["ll"](m, theta, hyper, 0, post_sd=np.ones(2))
