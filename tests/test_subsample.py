"""loo_subsample against independent computations: the full PSIS-LOO of the whole matrix, the
survey-sampling equations of Magnusson et al. (2019, 2020) written out here (difference and
Hansen-Hurwitz estimators; sigma^2 = Q_hat - (T_hat^2 - V_hat) / N), and the spread of the
estimate over repeated subsamples."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logsumexp

from loo_adapt.core.ess import relative_eff
from loo_adapt.core.psis_loo import loo_pointwise
from loo_adapt.models import LogisticRegression, Normal
from loo_adapt.subsample import loo_subsample

N, CHAINS, DRAWS = 300, 4, 250


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(42)
    X = rng.normal(size=(N, 2))
    design = np.column_stack([np.ones(N), X])
    y = (rng.random(N) < 1 / (1 + np.exp(-design @ np.array([-0.5, 1.0, -0.8])))).astype(float)
    beta = np.zeros(3)
    for _ in range(25):  # Newton-Raphson for the MLE; its inverse Hessian is the spread
        p = 1 / (1 + np.exp(-design @ beta))
        hess = design.T @ (design * (p * (1 - p))[:, None])
        beta = beta + np.linalg.solve(hess, design.T @ (y - p))
    chol = np.linalg.cholesky(np.linalg.inv(hess))
    z = rng.normal(size=(CHAINS, DRAWS, 3))
    for t in range(1, DRAWS):  # AR(1) chains, so that r_eff is not 1
        z[:, t] = 0.5 * z[:, t - 1] + np.sqrt(0.75) * z[:, t]
    theta = (beta + z @ chol.T).reshape(CHAINS * DRAWS, 3)

    def fn(th, idx):
        mu = th @ design[idx].T
        return y[idx] * mu - np.logaddexp(0.0, mu)

    model = LogisticRegression(X, y, coef="beta", intercept="alpha", prior=Normal(2.5),
                               intercept_prior=Normal(5.0))
    ll = fn(theta, np.arange(N))
    ref = loo_pointwise(ll.reshape(CHAINS, DRAWS, N))
    mu_hat = design @ theta.mean(axis=0)
    plpd = y * mu_hat - np.logaddexp(0.0, mu_hat)
    return dict(theta=theta, fn=fn, model=model, ll=ll, ref=ref, plpd=plpd)


def _run(problem, **kw):
    kw.setdefault("chains", CHAINS)
    return loo_subsample(problem["fn"], problem["theta"], n_obs=N, **kw)


def test_all_observations_give_the_full_psis_loo(problem):
    ref = problem["ref"].estimates()
    for obs, est in ((None, "diff_srs"), (N, "diff_srs"), (N, "srs")):
        ss = _run(problem, observations=obs, estimator=est)
        for key in ("elpd_loo", "se_elpd_loo", "p_loo", "se_p_loo"):
            assert ss.estimates[key] == pytest.approx(ref[key], abs=1e-9), key
        assert ss.subsampling_se_elpd_loo == 0.0 and ss.estimates["subsampling_se_p_loo"] == 0.0
        assert ss.estimates["looic"] == pytest.approx(-2 * ref["elpd_loo"], abs=1e-9)


def test_difference_estimator_equals_the_paper_equations(problem):
    ss = _run(problem, observations=60, seed=3)
    ref, a = problem["ref"], problem["plpd"]
    idx = ss.idx
    assert len(np.unique(idx)) == 60 and np.all(ss.m_i == 1)
    np.testing.assert_allclose(ss.elpd_loo_approx, a, atol=1e-12)
    # pointwise PSIS on the subsample is the full PSIS at those observations (chain r_eff)
    np.testing.assert_allclose(ss.pointwise.elpd_i, ref.elpd_i[idx], atol=1e-12)
    np.testing.assert_allclose(ss.pointwise.pareto_k, ref.pareto_k[idx], atol=1e-12)
    np.testing.assert_allclose(ss.pointwise.r_eff,
                               relative_eff(problem["ll"].reshape(CHAINS, DRAWS, N)[..., idx],
                                            log=True), atol=1e-12)
    y, m = ref.elpd_i[idx], len(idx)
    e = y - a[idx]
    t_hat = a.sum() + N / m * e.sum()                                  # difference estimator
    v_hat = N**2 * (1 - m / N) * np.sum((e - e.mean()) ** 2) / (m - 1) / m   # its variance
    q_hat = np.sum(a**2) + N / m * np.sum(y**2 - a[idx] ** 2)          # same for sum y_i^2
    sigma2 = q_hat - (t_hat**2 - v_hat) / N                             # N * pop. variance
    assert ss.elpd_loo == pytest.approx(t_hat, abs=1e-9)
    assert ss.subsampling_se_elpd_loo == pytest.approx(np.sqrt(v_hat), abs=1e-9)
    assert ss.se_elpd_loo == pytest.approx(np.sqrt(sigma2), abs=1e-9)
    p = ref.p_loo_i[idx]
    assert ss.estimates["p_loo"] == pytest.approx(N * p.mean(), abs=1e-9)
    assert ss.estimates["se_p_loo"] == pytest.approx(np.sqrt(N * p.var(ddof=1)), abs=1e-9)
    assert ss.estimates["subsampling_se_p_loo"] == pytest.approx(
        np.sqrt(N**2 * (1 - m / N) * p.var(ddof=1) / m), abs=1e-9)
    # the model family gives the same numbers as the callable
    ss_model = loo_subsample(problem["model"], problem["theta"], observations=60, seed=3,
                             chains=CHAINS)
    np.testing.assert_array_equal(ss_model.idx, idx)
    for key, value in ss.estimates.items():
        assert ss_model.estimates[key] == pytest.approx(value, abs=1e-9), key


def test_model_reads_theta_and_chains_from_the_fit(problem):
    from loo_adapt.io.readers import read_dict

    theta = problem["theta"].reshape(CHAINS, DRAWS, 3)
    fit = read_dict({"alpha": theta[..., 0], "beta": theta[..., 1:]}, method="mcmc")
    ss = loo_subsample(problem["model"], fit, observations=30, seed=9)
    ref = _run(problem, observations=30, seed=9)
    np.testing.assert_array_equal(ss.idx, ref.idx)
    np.testing.assert_allclose(ss.pointwise.r_eff, ref.pointwise.r_eff, atol=1e-12)
    assert ss.elpd_loo == pytest.approx(ref.elpd_loo, abs=1e-9)


def test_srs_estimator(problem):
    ss = _run(problem, observations=50, estimator="srs", seed=4)
    y = problem["ref"].elpd_i[ss.idx]
    assert ss.elpd_loo == pytest.approx(N * y.mean(), abs=1e-9)
    assert ss.se_elpd_loo == pytest.approx(np.sqrt(N * y.var(ddof=1)), abs=1e-9)
    assert ss.subsampling_se_elpd_loo == pytest.approx(
        np.sqrt(N**2 * (1 - 50 / N) * y.var(ddof=1) / 50), abs=1e-9)


def test_hansen_hurwitz_with_pps_draws(problem):
    ref, a = problem["ref"], problem["plpd"]
    prob = np.abs(a) / np.abs(a).sum()
    draws = np.random.default_rng(5).choice(N, size=80, replace=True, p=prob)
    assert len(np.unique(draws)) < 80  # some observations drawn twice
    ss = _run(problem, observations=draws, estimator="hh_pps")
    assert ss.n_subsample == 80
    r = ref.elpd_i[draws] / prob[draws]  # one term per draw, repeats included
    t_hat = r.mean()
    v_hat = np.sum((r - t_hat) ** 2) / (80 * 79)
    q_hat = np.mean(ref.elpd_i[draws] ** 2 / prob[draws])
    assert ss.elpd_loo == pytest.approx(t_hat, abs=1e-9)
    assert ss.subsampling_se_elpd_loo == pytest.approx(np.sqrt(v_hat), abs=1e-9)
    assert ss.se_elpd_loo == pytest.approx(np.sqrt(q_hat - (t_hat**2 - v_hat) / N), abs=1e-9)
    grown = ss.update(120)
    assert grown.n_subsample == 120 and np.all(np.isin(ss.idx, grown.idx))


def test_lpd_approximation_with_thinned_draws(problem):
    ll = problem["ll"]
    ss = _run(problem, observations=40, approximation="lpd", approximation_draws=100, seed=6)
    rows = np.arange(1, 101) * ll.shape[0] // 100 - 1  # R: (1:k) * S %/% k, 1-based
    np.testing.assert_allclose(ss.elpd_loo_approx,
                               logsumexp(ll[rows], axis=0) - np.log(100), atol=1e-12)
    full = loo_subsample(problem["model"], problem["theta"], observations=40,
                         approximation="lpd", seed=6)
    np.testing.assert_allclose(full.elpd_loo_approx, problem["ref"].lpd_i, atol=1e-10)


def test_update_evaluates_only_new_observations(problem):
    calls = []

    def counting(th, idx):
        if th.shape[0] > 1:
            calls.append(np.asarray(idx).copy())
        return problem["fn"](th, idx)

    ss = loo_subsample(counting, problem["theta"], n_obs=N, observations=50, seed=7,
                       chains=CHAINS)
    assert sum(len(c) for c in calls) == 50
    calls.clear()
    grown = ss.update(90)
    assert sum(len(c) for c in calls) == 40 and ss.n_subsample == 50
    assert len(grown.idx) == 90 and np.all(np.isin(ss.idx, grown.idx))
    fresh = _run(problem, observations=grown.idx)
    for key, value in fresh.estimates.items():
        assert grown.estimates[key] == pytest.approx(value, abs=1e-9), key
    subset = grown.update(grown.idx[::3])
    np.testing.assert_array_equal(np.sort(subset.idx), np.sort(grown.idx[::3]))


@pytest.mark.parametrize("estimator", ["diff_srs", "hh_pps"])
def test_subsampling_se_matches_the_spread_over_subsamples(problem, estimator):
    truth = problem["ref"].elpd_i.sum()
    rng = np.random.default_rng(8)
    runs = [_run(problem, observations=40, estimator=estimator, seed=rng) for _ in range(200)]
    est = np.array([r.elpd_loo for r in runs])
    se = np.array([r.subsampling_se_elpd_loo for r in runs])
    spread = est.std(ddof=1)
    assert abs(est.mean() - truth) < 3 * spread / np.sqrt(len(est))  # unbiased
    assert 0.8 < np.sqrt(np.mean(se**2)) / spread < 1.25              # SE is calibrated


def test_bad_input_names_the_fix(problem):
    with pytest.raises(ValueError, match="n_obs="):
        loo_subsample(problem["fn"], problem["theta"])
    with pytest.raises(ValueError, match="approximation must be"):
        _run(problem, approximation="waic")
    with pytest.raises(ValueError, match="larger than the number of observations"):
        _run(problem, observations=N + 1)
    with pytest.raises(ValueError, match="repeated indices"):
        _run(problem, observations=np.array([1, 1, 2]))
    with pytest.raises(ValueError, match="must exceed"):
        _run(problem, observations=20, seed=0).update(10)
    with pytest.raises(TypeError, match="point="):
        loo_subsample(problem["fn"], object(), n_obs=N, observations=10)
