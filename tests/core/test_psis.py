"""PSIS-LOO engine against independent references: R loo's PSIS as implemented by arviz 0.x
(stored in tests/data/psis_reference, so those checks also run under arviz 1.x; the live
comparisons with arviz 0.x run where it is installed), scipy's generalized Pareto, a
plain-numpy Zhang & Stephens fit, AR(1) theory, brute-force Monte Carlo and the CmdStan
fixture README."""

from __future__ import annotations

import importlib.util
import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.special import logsumexp

from loo_adapt.core.ess import ess_rfun, relative_eff
from loo_adapt.core.psis import (
    e_loo,
    gpdfit,
    pareto_k_category,
    pareto_k_threshold,
    psis_n_eff,
    psis_tail_length,
    psislw,
)
from loo_adapt.core.psis_loo import loo_pointwise, mcse_elpd
from loo_adapt.estimators.psis import initial_result

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "psis_reference"
sys.path.insert(0, str(REFERENCE))
from make_reference import cases as reference_cases  # noqa: E402
from make_reference import fixture_log_lik, heavy_tailed_ll  # noqa: E402


def _arviz0():
    """arviz 0.x (R loo's PSIS), or None where it is not installed (e.g. arviz 1.x)."""
    if importlib.util.find_spec("arviz") is None:
        return None
    import arviz

    return arviz if int(arviz.__version__.split(".")[0]) < 1 else None


az = _arviz0()
needs_arviz0 = pytest.mark.skipif(
    az is None, reason="live reference is arviz 0.x's psislw/loo (arviz 1.x fits the tail "
    "differently); the stored arviz 0.x values in tests/data/psis_reference run everywhere"
)

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "cmdstan" / "logistic_normal" / "sample"
_heavy_tailed_ll = heavy_tailed_ll


@pytest.fixture(scope="module")
def cmdstan_ll() -> np.ndarray:
    """(chains, draws, n) = (4, 250, 54) log_lik of the logistic_normal fixture."""
    return fixture_log_lik()


def arviz_unsplit_ess(x):
    from arviz.stats.diagnostics import _ess

    return _ess(x)


_CASES = reference_cases()


@pytest.mark.parametrize("engine", ["numba", "numpy"])
@pytest.mark.parametrize("name", sorted(_CASES))
def test_matches_stored_r_loo_reference(name, engine, monkeypatch):
    """k-hat and elpd_i equal R loo 2.5.1's own output (``r_loo/<case>.csv``, written by
    Rscript through make_r_reference.py) to 1e-10, from both engines (the numba kernel and
    the numpy cold-start path); arviz 0.x's values (``<case>.csv``) equal R's to 4e-12."""
    from loo_adapt.core import psis

    monkeypatch.setattr(psis, "_engine", lambda *_: engine)
    ll, reff = _CASES[name]
    ref = pd.read_csv(REFERENCE / "r_loo" / f"{name}.csv", comment="#")
    ll2 = ll.reshape(ll.shape[0] * ll.shape[1], -1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, k = psislw(-ll2, r_eff=reff)
        res = loo_pointwise(ll, r_eff=reff, weights=False)
    np.testing.assert_allclose(k, ref["khat"], rtol=0, atol=1e-10)
    np.testing.assert_allclose(res.pareto_k, ref["khat_loo"], rtol=0, atol=1e-10)
    np.testing.assert_allclose(res.elpd_i, ref["elpd_loo"], rtol=0, atol=1e-10)
    if name.startswith("heavy"):
        assert np.sum(res.pareto_k > 0.7) >= 3  # the cases exercise the smoothing


def _assert_weights_match(lw, lw_ref, log_ratios, atol=1e-8):
    """Elementwise, except that draws with tied log ratios may swap smoothed values: R sorts
    stably (as we do), numpy's default argsort in arviz does not.  Tied ratios have equal
    likelihoods, so every PSIS expectation is unchanged by such a swap."""
    lw, lw_ref, lr = (np.atleast_2d(a.T).T for a in (lw, lw_ref, log_ratios))
    for i in range(lr.shape[1]):
        order = np.lexsort((lw[:, i], lr[:, i]))
        order_ref = np.lexsort((lw_ref[:, i], lr[:, i]))
        np.testing.assert_allclose(lw[order, i], lw_ref[order_ref, i], rtol=0, atol=atol)
        _, inv, cnt = np.unique(lr[:, i], return_inverse=True, return_counts=True)
        untied = cnt[inv] == 1
        np.testing.assert_allclose(lw[untied, i], lw_ref[untied, i], rtol=0, atol=atol)


def _arviz_psislw(log_ratios_sn, reff):  # only called by tests marked needs_arviz0
    lw, k = az.psislw(np.ascontiguousarray(log_ratios_sn.T), reff=reff)
    return np.asarray(lw).T, np.asarray(k)


# ------------------------------------------------------------------------------------------
# PSIS against arviz
# ------------------------------------------------------------------------------------------


@needs_arviz0
def test_psislw_matches_arviz_on_cmdstan_draws(cmdstan_ll):
    ll = cmdstan_ll.reshape(-1, cmdstan_ll.shape[2])
    for reff in (1.0, 0.6):
        lw, k = psislw(-ll, r_eff=reff)
        lw_ref, k_ref = _arviz_psislw(-ll, reff)
        np.testing.assert_allclose(k, k_ref, rtol=0, atol=1e-6)
        _assert_weights_match(lw, lw_ref, -ll)


@needs_arviz0
def test_psislw_matches_arviz_heavy_tails():
    ll = _heavy_tailed_ll()
    lw, k = psislw(-ll, r_eff=1.0)
    lw_ref, k_ref = _arviz_psislw(-ll, 1.0)
    assert k.max() > 0.7, "the simulation must produce heavy tails"
    assert np.sum(k > 1) >= 1
    np.testing.assert_allclose(k, k_ref, rtol=0, atol=1e-6)
    np.testing.assert_allclose(lw, lw_ref, rtol=0, atol=1e-8)


@needs_arviz0
def test_per_observation_r_eff_matches_arviz_column_by_column(cmdstan_ll):
    ll = cmdstan_ll.reshape(-1, cmdstan_ll.shape[2])
    r = np.linspace(0.3, 1.2, ll.shape[1])
    lw, k = psislw(-ll, r_eff=r)
    for i in range(0, ll.shape[1], 7):
        lw_i, k_i = _arviz_psislw(-ll[:, [i]], float(r[i]))
        assert abs(k[i] - k_i[0]) < 1e-6
        _assert_weights_match(lw[:, i], lw_i[:, 0], -ll[:, i])
    # a constant array of r_eff is the scalar
    lw_s, k_s = psislw(-ll, r_eff=0.7)
    lw_a, k_a = psislw(-ll, r_eff=np.full(ll.shape[1], 0.7))
    np.testing.assert_array_equal(k_s, k_a)
    np.testing.assert_array_equal(lw_s, lw_a)


@needs_arviz0
def test_loo_matches_arviz_loo(cmdstan_ll):
    res = loo_pointwise(cmdstan_ll)  # r_eff from the chains
    r = res.r_eff
    assert r.shape == (54,) and np.all((r > 0.1) & (r < 3))
    ll = cmdstan_ll.reshape(-1, 54)
    for reff in (1.0, float(np.mean(r))):
        ours = loo_pointwise(ll, r_eff=reff)
        idata = az.from_dict(
            posterior={"alpha": np.zeros(cmdstan_ll.shape[:2])},
            log_likelihood={"y": cmdstan_ll},
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = az.loo(idata, pointwise=True, reff=reff)
        np.testing.assert_allclose(ours.elpd_i, ref.loo_i.values, rtol=0, atol=1e-8)
        np.testing.assert_allclose(ours.pareto_k, ref.pareto_k.values, rtol=0, atol=1e-6)
        est = ours.estimates()
        assert est["elpd_loo"] == pytest.approx(ref.elpd_loo, abs=1e-8)
        assert est["p_loo"] == pytest.approx(ref.p_loo, abs=1e-8)
        # R loo's SE uses var(ddof=1); arviz uses ddof=0
        n = 54
        assert est["se_elpd_loo"] == pytest.approx(ref.se * math.sqrt(n / (n - 1)), rel=1e-10)
        assert est["looic"] == pytest.approx(-2 * ref.elpd_loo, abs=1e-8)
    # lpd: log mean exp of the log-likelihood, directly
    lpd = np.log(np.mean(np.exp(ll), axis=0))
    np.testing.assert_allclose(res.lpd_i, lpd, rtol=1e-12)
    np.testing.assert_allclose(res.p_loo_i, res.lpd_i - res.elpd_i, rtol=0, atol=1e-14)


def test_fixture_readme_numbers(cmdstan_ll):
    """README of the fixture: plain PSIS, r_eff = 1, total -18.33 and 29 of 54 with k > 0.7."""
    res = loo_pointwise(cmdstan_ll.reshape(-1, 54), r_eff=1.0)
    assert round(float(res.elpd_i.sum()), 2) == -18.33
    assert int(np.sum(res.pareto_k > 0.7)) == 29
    truth = pd.read_csv(FIXTURE.parents[1] / "truth" / "logistic_normal.csv")
    rmse = np.sqrt(np.mean((res.elpd_i - truth["elpd_loo"].to_numpy()) ** 2))
    assert rmse == pytest.approx(0.074, abs=0.0015)


@needs_arviz0
def test_loo_heavy_tails_matches_arviz():
    ll = _heavy_tailed_ll(seed=5).reshape(4, 500, -1)
    ours = loo_pointwise(ll, r_eff=1.0)
    idata = az.from_dict(posterior={"a": np.zeros((4, 500))}, log_likelihood={"y": ll})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = az.loo(idata, pointwise=True, reff=1.0)
    assert ours.pareto_k.max() > 0.7
    np.testing.assert_allclose(ours.elpd_i, ref.loo_i.values, rtol=0, atol=1e-8)
    np.testing.assert_allclose(ours.pareto_k, ref.pareto_k.values, rtol=0, atol=1e-6)


def test_unnormalised_weights_are_r_loo_weights():
    """R loo keeps the body of the raw log ratios; normalising gives arviz's weights."""
    ll = _heavy_tailed_ll(seed=7, n_draws=1000, n_obs=5)
    lr = -ll
    ulw, k = psislw(lr, r_eff=1.0, normalize=False)
    lw, _ = psislw(lr, r_eff=1.0, normalize=True)
    np.testing.assert_allclose(lw, ulw - logsumexp(ulw, axis=0), rtol=0, atol=1e-12)
    m = int(psis_tail_length(1000, 1.0))
    assert m == math.ceil(min(200, 3 * math.sqrt(1000)))
    for i in range(5):
        order = np.argsort(lr[:, i])
        body, tail = order[:-m], order[-m:]
        np.testing.assert_array_equal(ulw[body, i], lr[body, i])
        # smoothed tail: never above the largest raw ratio, sorted like the GPD quantiles
        assert np.all(ulw[tail, i] <= lr[:, i].max() + 1e-12)
        assert np.all(np.diff(ulw[tail, i]) >= -1e-12)


def test_one_d_input_is_a_column():
    ll = _heavy_tailed_ll(seed=11, n_draws=800, n_obs=3)
    lw2, k2 = psislw(-ll, r_eff=0.9)
    lw1, k1 = psislw(-ll[:, 1], r_eff=0.9)
    assert isinstance(k1, float)
    assert k1 == k2[1]
    np.testing.assert_array_equal(lw1, lw2[:, 1])


# ------------------------------------------------------------------------------------------
# generalized Pareto fit
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k_true,sigma_true", [(0.3, 2.0), (0.8, 0.5), (-0.2, 1.0)])
def test_gpdfit_recovers_parameters(k_true, sigma_true):
    x = stats.genpareto.rvs(c=k_true, scale=sigma_true, size=20000,
                            random_state=np.random.default_rng(42))
    k, sigma = gpdfit(x, wip=False)
    # asymptotic sd of the MLE of k is about (1 + k) / sqrt(n) = 0.01
    assert abs(k - k_true) < 0.05
    assert abs(sigma / sigma_true - 1) < 0.06
    k_w, _ = gpdfit(x)  # the prior is worth 10 observations out of 20000
    assert abs(k_w - (k * 20000 + 5) / 20010) < 1e-12


def _zhang_stephens_numpy(x, wip, min_grid_pts=30):
    """Zhang & Stephens (2009), Section 4, written from the paper in their parametrization
    (their k has the opposite sign), in plain numpy."""
    x = np.sort(np.asarray(x, dtype=float))
    n = x.size
    m = min_grid_pts + int(np.sqrt(n))
    q1 = x[int(n / 4 + 0.5) - 1]
    j = np.arange(1, m + 1)
    theta = 1 / x[-1] + (1 - np.sqrt(m / (j - 0.5))) / (3 * q1)
    k_zs = -np.array([np.mean(np.log1p(-t * x)) for t in theta])
    prof = n * (np.log(theta / k_zs) + k_zs - 1)  # profile log-likelihood
    w = np.exp(prof - logsumexp(prof))  # posterior weights of the grid points
    theta_hat = np.sum(w * theta)
    k_hat_zs = -np.mean(np.log1p(-theta_hat * x))
    sigma = k_hat_zs / theta_hat
    k = -k_hat_zs
    if wip:
        k = (n * k + 10 * 0.5) / (n + 10)
    return k, sigma


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gpdfit_small_sample_matches_direct_zhang_stephens(seed):
    rng = np.random.default_rng(seed)
    x = stats.genpareto.rvs(c=0.6, scale=1.5, size=23, random_state=rng)
    for wip in (True, False):
        k, sigma = gpdfit(x, wip=wip)
        k_ref, sigma_ref = _zhang_stephens_numpy(x, wip)
        assert k == pytest.approx(k_ref, rel=1e-10, abs=1e-12)
        assert sigma == pytest.approx(sigma_ref, rel=1e-10)
    # sort_x=False on sorted input is the same fit
    assert gpdfit(np.sort(x), sort_x=False) == gpdfit(x)


def test_gpdfit_rejects_bad_input():
    with pytest.raises(ValueError, match="non-finite"):
        gpdfit(np.array([1.0, np.nan, 2.0]))
    with pytest.raises(ValueError, match="non-negative"):
        gpdfit(np.array([1.0, -1.0, 2.0]))
    with pytest.raises(ValueError, match="at least 2"):
        gpdfit(np.array([1.0]))


def test_pareto_k_threshold_and_categories():
    assert pareto_k_threshold(100) == pytest.approx(0.5)
    assert pareto_k_threshold(1000) == pytest.approx(1 - 1 / 3)
    assert pareto_k_threshold(10**6) == 0.7  # 1 - 1/6 > 0.7
    cats = pareto_k_category([0.2, 0.6, 0.7, 0.9, 1.0, 1.5, np.inf], 10**6)
    assert list(cats) == ["good", "good", "good", "bad", "bad", "very bad", "very bad"]
    assert list(pareto_k_category([0.55], 100)) == ["bad"]


# ------------------------------------------------------------------------------------------
# relative efficiency
# ------------------------------------------------------------------------------------------


def _ar1(rng, phi, n_chains, n_draws, n_cols=1):
    x = np.empty((n_chains, n_draws, n_cols))
    x[:, 0] = rng.normal(size=(n_chains, n_cols))
    eps = rng.normal(size=(n_chains, n_draws, n_cols)) * math.sqrt(1 - phi**2)
    for t in range(1, n_draws):
        x[:, t] = phi * x[:, t - 1] + eps[:, t]
    return x


@needs_arviz0
def test_ess_rfun_matches_arviz_unsplit_ess():
    """arviz's internal _ess (no chain split, no rank normalisation) is R loo's ess_rfun."""
    rng = np.random.default_rng(0)
    for phi, n_chains in ((0.0, 1), (0.6, 4), (-0.3, 2), (0.95, 4)):
        x = _ar1(rng, phi, n_chains, 250)[:, :, 0]  # 250 = 2 * 5^3: no FFT padding quirk
        assert ess_rfun(x.T) == pytest.approx(arviz_unsplit_ess(x), rel=1e-10)


@needs_arviz0
def test_ess_rfun_fft_padding_quirk(monkeypatch):
    """For a chain length that is not 2-3-5-smooth, R's autocovariance is inflated by M / N
    (M the padded length).  Reference: arviz's Geyer code fed with that autocovariance,
    computed directly as a lagged sum (no FFT)."""
    import arviz.stats.diagnostics as azd

    def r_autocov(ary, axis=-1):
        n = ary.shape[-1]
        m = 256  # next 2-3-5-smooth size >= 251
        yc = ary - ary.mean(axis=-1, keepdims=True)
        lagged = np.stack(
            [np.sum(yc[..., : n - k] * yc[..., k:], axis=-1) for k in range(n)], axis=-1
        )
        return lagged * m / n**2

    rng = np.random.default_rng(8)
    x = _ar1(rng, 0.5, 4, 251)[:, :, 0]
    x[1] += 0.3  # chain means differ, so the quirk matters
    ours = ess_rfun(x.T)
    monkeypatch.setattr(azd, "_autocov", r_autocov)
    assert ours == pytest.approx(azd._ess(x), rel=1e-10)
    monkeypatch.undo()
    assert abs(ours / azd._ess(x) - 1) > 1e-4  # and it is not arviz's own number


@needs_arviz0
def test_relative_eff_matches_arviz_and_ar1_theory():
    rng = np.random.default_rng(1)
    phi = 0.5
    x = _ar1(rng, phi, 4, 5000, n_cols=3)
    r = relative_eff(np.exp(x))
    for i in range(3):
        assert r[i] == pytest.approx(arviz_unsplit_ess(np.exp(x[:, :, i])) / 20000, rel=1e-10)
    # the ESS of exp(AR(1)) differs from (1 - phi) / (1 + phi) = 1/3; use the AR(1) itself
    r_lin = relative_eff(x)
    np.testing.assert_allclose(r_lin, (1 - phi) / (1 + phi), rtol=0.12)


def test_relative_eff_log_flag_and_chain_id():
    rng = np.random.default_rng(2)
    ll = -np.abs(_ar1(rng, 0.4, 3, 200, n_cols=4))
    r_exp = relative_eff(np.exp(ll))
    np.testing.assert_allclose(relative_eff(ll, log=True), r_exp, rtol=1e-10)
    # exp(ll - 900) underflows to 0 in R's recipe; the log path is scale invariant
    np.testing.assert_allclose(relative_eff(ll - 900.0, log=True), r_exp, rtol=1e-10)
    flat = np.exp(ll).reshape(600, 4)
    chain_id = np.repeat([1, 2, 3], 200)
    np.testing.assert_allclose(relative_eff(flat, chain_id=chain_id), r_exp, rtol=1e-12)
    with pytest.raises(ValueError, match="chain_id"):
        relative_eff(flat)
    with pytest.raises(ValueError, match="same number"):
        relative_eff(flat, chain_id=np.repeat([1, 2, 3], [100, 200, 300]))


# ------------------------------------------------------------------------------------------
# Monte Carlo standard error
# ------------------------------------------------------------------------------------------


def _normal_model_ll(theta, y):
    return stats.norm.logpdf(y[None, :], loc=theta[:, None], scale=1.0)


def test_mcse_predicts_spread_of_elpd_brute_force():
    """Repeat PSIS-LOO on many independent posterior samples of a conjugate normal model; the
    MCSE of each elpd_loo_i must predict the spread over repetitions (independent draws and
    AR(1) chains, where r_eff matters)."""
    rng = np.random.default_rng(123)
    y = np.array([0.1, -0.8, 1.5, 2.7, -3.2])
    n = 20  # 15 more unit-variance observations centre the posterior
    prior_var, post_var = 10.0, 1.0 / (1.0 / 10.0 + n)
    y_all = np.concatenate([y, rng.normal(size=n - y.size)])
    post_mean = post_var * y_all.sum()
    del prior_var
    reps = 200
    for phi in (0.0, 0.7):
        elpds, mcses = [], []
        for _ in range(reps):
            z = _ar1(rng, phi, 4, 250)[:, :, 0]
            theta = post_mean + math.sqrt(post_var) * z
            ll = _normal_model_ll(theta.reshape(-1), y).reshape(4, 250, -1)
            res = loo_pointwise(ll)  # r_eff from the chains
            elpds.append(res.elpd_i)
            mcses.append(res.mcse_elpd_i)
        spread = np.std(np.array(elpds), axis=0, ddof=1)
        predicted = np.sqrt(np.mean(np.array(mcses) ** 2, axis=0))
        ratio = predicted / spread
        assert np.all((ratio > 0.7) & (ratio < 1.4)), (phi, ratio)


def test_mcse_lognormal_and_quadrature_agree():
    ll = _heavy_tailed_ll(seed=13, n_draws=2000, n_obs=12)
    lw, _ = psislw(-ll)
    elpd = logsumexp(ll + lw, axis=0)
    a = mcse_elpd(ll, lw, elpd, 1.0, method="lognormal")
    b = mcse_elpd(ll, lw, elpd, 1.0, method="quadrature", n_samples=1000)
    # direct plain-scale formula: Var = sum w^2 (p - E)^2, sd_log ~ sqrt(log1p(Var / E^2))
    w, p, e = np.exp(lw), np.exp(ll), np.exp(elpd)
    direct = np.sqrt(np.log1p(np.sum(w**2 * (p - e) ** 2, axis=0) / e**2))
    np.testing.assert_allclose(a, direct, rtol=1e-10)
    small = a < 0.1  # the two approximations differ (10-30%) only for very uncertain elpd
    assert small.sum() >= 4
    np.testing.assert_allclose(b[small], a[small], rtol=0.01)
    np.testing.assert_allclose(mcse_elpd(ll, lw, elpd, 0.25), 2 * a, rtol=1e-12)


# ------------------------------------------------------------------------------------------
# expectations and edge cases
# ------------------------------------------------------------------------------------------


@needs_arviz0
def test_e_loo_against_arviz_weights(cmdstan_ll):
    ll = cmdstan_ll.reshape(-1, 54)
    lw_ref, _ = _arviz_psislw(-ll, 1.0)
    p = np.exp(ll)
    lw, _ = psislw(-ll, normalize=False)  # unnormalised input is normalised inside
    np.testing.assert_allclose(e_loo(p, lw), np.sum(np.exp(lw_ref) * p, axis=0), rtol=1e-9)
    res = loo_pointwise(ll, r_eff=1.0)
    np.testing.assert_allclose(e_loo(ll, lw, log=True), res.elpd_i, rtol=0, atol=1e-10)
    # one value per draw is shared by all observations (a plain matrix product as reference;
    # our own weights, because arviz may order tied draws differently)
    theta = np.arange(ll.shape[0], dtype=float)
    lw_n, _ = psislw(-ll)
    np.testing.assert_allclose(e_loo(theta, lw), np.exp(lw_n).T @ theta, rtol=1e-12)
    # log space survives values whose exp underflows
    np.testing.assert_allclose(e_loo(ll - 800.0, lw, log=True), res.elpd_i - 800.0,
                               rtol=1e-12)


def test_constant_column_and_short_tail():
    rng = np.random.default_rng(4)
    ll = rng.normal(-1.0, 0.3, size=(400, 3))
    ll[:, 1] = -0.5
    with pytest.warns(UserWarning, match="all tail values the same in 1"):
        res = loo_pointwise(ll)
    assert np.isinf(res.pareto_k[1]) and np.all(np.isfinite(res.pareto_k[[0, 2]]))
    assert res.elpd_i[1] == pytest.approx(-0.5, abs=1e-12)
    assert res.p_loo_i[1] == pytest.approx(0.0, abs=1e-12)
    assert res.mcse_elpd_i[1] == pytest.approx(0.0, abs=1e-12)
    # constant likelihood: r_eff 1 (the MC error is zero whatever the autocorrelation)
    assert relative_eff(ll.reshape(4, 100, 3), log=True)[1] == 1.0
    # 20 draws: tail of 4 < 5, khat Inf and the weights are the raw normalised ratios
    lr = rng.normal(size=(20, 2))
    with pytest.warns(UserWarning) as record:
        lw, k = psislw(lr)
    messages = " | ".join(str(w.message) for w in record)
    assert "not enough tail draws" in messages and "only 20 draws" in messages
    assert np.all(np.isinf(k))
    np.testing.assert_allclose(lw, lr - logsumexp(lr, axis=0), rtol=0, atol=1e-14)


def test_non_finite_inputs():
    rng = np.random.default_rng(6)
    lr = rng.normal(size=(500, 4))
    bad = lr.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match=r"column\(s\) 2"):
        psislw(bad)
    bad = lr.copy()
    bad[7, 1] = np.inf
    with pytest.raises(ValueError, match=r"column\(s\) 1"):
        psislw(bad)
    # -inf log ratio (R loo >= 2.10): that draw has zero weight, the rest is PSIS as usual
    ninf = lr.copy()
    ninf[10, 3] = -np.inf
    lw, k = psislw(ninf)
    assert lw[10, 3] == -np.inf and np.isfinite(k[3])
    lw_ref, k_ref = psislw(np.delete(ninf[:, 3], 10))
    keep = np.arange(500) != 10
    # tail length changes with S (3 sqrt(S)), so compare the body and k loosely
    assert abs(k[3] - k_ref) < 0.1
    assert np.isclose(logsumexp(lw[keep, 3]), 0.0)
    all_ninf = lr.copy()
    all_ninf[:, 0] = -np.inf
    with pytest.raises(ValueError, match="every draw"):
        psislw(all_ninf)
    # R loo: -Inf log-likelihood values are not allowed
    ll = -np.abs(lr)
    ll[5, 3] = -np.inf
    with pytest.raises(ValueError, match="not allowed"):
        loo_pointwise(ll)
    with pytest.raises(ValueError, match="r_eff"):
        psislw(lr, r_eff=np.ones(3))
    with pytest.raises(ValueError, match="shape"):
        loo_pointwise(np.zeros((2, 3, 4, 5)))
    with pytest.warns(UserWarning, match="unreliable"):
        psislw(rng.normal(size=(60, 2)))


@needs_arviz0
def test_to_result_and_psis_n_eff(cmdstan_ll):
    res = loo_pointwise(cmdstan_ll)
    out = initial_result(res)
    np.testing.assert_array_equal(out.elpd_i, res.elpd_i)
    np.testing.assert_array_equal(out.pareto_k_after, res.pareto_k)
    assert out.n_samples == 1000
    assert out.good_k == pytest.approx(1 - 1 / 3)
    assert set(out.method) == {"psis"}
    # PSIS ESS 1 / sum(w^2) from arviz's weights, scaled by r_eff
    lw_ref, _ = _arviz_psislw(-cmdstan_ll.reshape(-1, 54), 1.0)
    n_eff = psis_n_eff(res.log_weights, 1.0)
    lw1, _ = psislw(-cmdstan_ll.reshape(-1, 54), r_eff=1.0)
    np.testing.assert_allclose(psis_n_eff(lw1), 1 / np.sum(np.exp(lw_ref) ** 2, axis=0),
                               rtol=1e-9)
    assert np.all(n_eff <= 1000 + 1e-9)


@needs_arviz0
@pytest.mark.parametrize("engine", ["numba", "numpy"])
def test_kernel_n_eff_equals_r_loo_psis_n_eff_of_arviz_weights(cmdstan_ll, engine):
    """The PSIS kernel's own n_eff (from its normaliser pass, no S x n weights needed) is R
    loo's psis_n_eff, r_eff / sum(w^2), of arviz's smoothed weights with the same r_eff."""
    from loo_adapt.core import psis as psis_mod

    ll = cmdstan_ll.reshape(-1, 54)
    r = np.random.default_rng(3).uniform(0.3, 1.2, 54)
    *_, n_eff = psis_mod._run(np.ascontiguousarray(ll), np.zeros(ll.shape[0]), True, r, True,
                              False, engine=engine)
    ref = [r[i] / np.sum(np.exp(_arviz_psislw(-ll[:, [i]], float(r[i]))[0]) ** 2)
           for i in range(54)]  # arviz 0.23 takes one reff per call
    np.testing.assert_allclose(n_eff, ref, rtol=1e-9)
    res = loo_pointwise(cmdstan_ll, r_eff=r, weights=False)  # no weights, still the ESS
    assert res.log_weights is None
    np.testing.assert_allclose(initial_result(res).diagnostic, n_eff, rtol=1e-12)


def test_psis_n_eff_large_input_equals_the_formula():
    """Above a million cells psis_n_eff runs a two-pass kernel (no S x n temporary): the same
    r_eff / sum(w^2) of normalised weights as R loo's psis_n_eff, with unnormalised input."""
    from scipy.special import logsumexp

    from loo_adapt.core.psis import psis_n_eff

    rng = np.random.default_rng(8)
    lw = 3.0 * rng.standard_t(3, size=(1100, 1000)) + 50.0  # heavy tails, not normalised
    r = rng.uniform(0.3, 1.0, size=1000)
    norm = lw - logsumexp(lw, axis=0, keepdims=True)
    np.testing.assert_allclose(psis_n_eff(lw, r), r / np.sum(np.exp(2 * norm), axis=0),
                               rtol=1e-12)
