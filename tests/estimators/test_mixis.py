"""Mixture-IS LOO (loo_adapt.estimators.mixis) against closed forms, arviz-stats and
brute-force truth."""

import json
import pathlib
import time

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from loo_adapt.core.ess_split import ess_mean
from loo_adapt.core.mixis import bernoulli_log_p1, mixis_log_weights, mixis_loo, mixis_loo_prob
from loo_adapt.core.skew import skew_inflation

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "fullspace"


# ---- conjugate normal mean, known variance: everything in closed form ------------------------
SIGMA, PRIOR_SD = 1.0, 3.0
Y = np.array([-0.4, 0.3, 1.1, -1.2, 0.5, 0.0, 0.8, -0.6, 4.5])  # the last is an outlier


def _posterior(y):
    prec = 1.0 / PRIOR_SD**2 + len(y) / SIGMA**2
    return (y.sum() / SIGMA**2) / prec, 1.0 / prec


def _loo_truth(y):
    """log p(y_i | y_-i) = log N(y_i | m_-i, sigma^2 + v_-i)."""
    out = np.empty(len(y))
    for i in range(len(y)):
        m, v = _posterior(np.delete(y, i))
        out[i] = stats.norm.logpdf(y[i], m, np.sqrt(SIGMA**2 + v))
    return out


def _exact_mixture_draws(y, S, rng):
    """Exact draws of q(mu) ~ p(mu|y) sum_i 1/l_i(mu).

    p(mu|y) / l_i(mu) = p(mu|y_-i) / p(y_i|y_-i), so q is the mixture of the leave-one-out
    posteriors N(m_-i, v_-i) with weights proportional to 1 / p(y_i | y_-i)."""
    logw = -_loo_truth(y)
    w = np.exp(logw - logsumexp(logw))
    comp = rng.choice(len(y), size=S, p=w)
    mv = np.array([_posterior(np.delete(y, i)) for i in range(len(y))])
    return rng.normal(mv[comp, 0], np.sqrt(mv[comp, 1]))


def _log_lik(mu, y):
    return stats.norm.logpdf(y[None, :], mu[:, None], SIGMA)


def test_weights_are_bounded_and_match_definition():
    rng = np.random.default_rng(0)
    ll = rng.normal(-1.0, 2.0, size=(50, 7))
    lr, neg_lse = mixis_log_weights(ll)
    assert np.all(lr <= 1e-15)
    direct = np.log((1 / np.exp(ll)) / np.sum(1 / np.exp(ll), axis=1, keepdims=True))
    np.testing.assert_allclose(lr, direct, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(neg_lse, -np.log(np.sum(np.exp(-ll), axis=1)), rtol=1e-12)


def test_conjugate_normal_against_closed_form():
    rng = np.random.default_rng(1)
    S = 4000
    mu = _exact_mixture_draws(Y, S, rng)
    res = mixis_loo(_log_lik(mu, Y))
    truth = _loo_truth(Y)
    z = (res.elpd_i - truth) / res.mcse_elpd_i
    assert np.all(np.abs(z) < 4.0), z
    # lpd_i = log N(y_i | m, sigma^2 + v) under the full posterior, estimated from q by SNIS
    m, v = _posterior(Y)
    lpd_truth = stats.norm.logpdf(Y, m, np.sqrt(SIGMA**2 + v))
    # (SNIS from q: the outlier term, whose posterior region q visits least, is noisiest)
    np.testing.assert_allclose(res.lpd_i, lpd_truth, atol=0.1)
    np.testing.assert_allclose(res.lpd_i[:-1], lpd_truth[:-1], atol=0.03)
    assert np.all(res.p_loo_i > 0)
    assert np.all((res.ess > 1) & (res.ess <= S))


@pytest.mark.parametrize("engine", ["numpy", "numba"])
def test_both_engines_against_closed_form(monkeypatch, engine):
    """The numba kernel and its numpy twin (`loo_adapt.core._mixis_kernel`; a cold start
    runs numpy), each on exact mixture draws in 4 chains: elpd_i within 4 MCSEs of the
    closed-form LOO, lpd_i within 0.1 of the full posterior's."""
    from loo_adapt.core import _compiled

    monkeypatch.setattr(_compiled, "use_numba", lambda kernel, cells, record=True:
                        engine == "numba")
    mu = _exact_mixture_draws(Y, 4000, np.random.default_rng(11))
    res = mixis_loo(_log_lik(mu, Y).reshape(4, 1000, -1))
    z = (res.elpd_i - _loo_truth(Y)) / res.mcse_elpd_i
    assert np.all(np.abs(z) < 4.0), z
    m, v = _posterior(Y)
    np.testing.assert_allclose(res.lpd_i, stats.norm.logpdf(Y, m, np.sqrt(SIGMA**2 + v)),
                               atol=0.1)


def test_mcse_matches_replication_spread():
    """The delta-method MCSE must match the actual spread of elpd_loo_i over independent
    replications (exact i.i.d. mixture draws, so r_eff = 1)."""
    rng = np.random.default_rng(2)
    S, R = 1000, 300
    est, se = np.empty((R, len(Y))), np.empty((R, len(Y)))
    for r in range(R):
        res = mixis_loo(_log_lik(_exact_mixture_draws(Y, S, rng), Y), mcse="delta")
        est[r], se[r] = res.elpd_i, res.mcse_elpd_i
    spread = est.std(axis=0, ddof=1)
    # the delta method estimates the variance: compare the root mean square of the MCSE (a
    # sample variance of heavy-ish tailed influence values is right-skewed, so its square
    # root's mean sits ~15% below the truth for the observations the outlier's
    # component dominates). The sd of a sample sd over 300 replications is ~4%; allow 15%.
    ratio = np.sqrt(np.mean(se**2, axis=0)) / spread
    assert np.all(np.abs(ratio - 1) < 0.15), ratio
    # the total's MCSE (influence values of the sum, as the pointwise errors are
    # correlated through the shared draws) predicts the spread of the total
    total_spread = est.sum(axis=1).std(ddof=1)
    total_se = np.sqrt(np.mean([mixis_loo(_log_lik(_exact_mixture_draws(Y, S, rng), Y))
                                .mcse_total ** 2 for _ in range(100)]))
    assert abs(total_se / total_spread - 1) < 0.2, (total_se, total_spread)
    # and the estimator is unbiased to within its Monte Carlo error
    bias = est.mean(axis=0) - _loo_truth(Y)
    assert np.all(np.abs(bias) < 4 * spread / np.sqrt(R) + 1.0 / S), bias


def test_skew_mcse_over_replicates():
    """Exact i.i.d. mixture draws, closed-form truth: the outlier's component takes most
    draws, so the other rows' weights have rare large values.  The delta method's MCSE is
    right in mean square (above) but a replicate that missed the rare values is off and
    sure of itself: |error| / MCSE is 1.46 in rms.  The default skew widening brings it
    to 1.22, and never states an MCSE below the delta method's."""
    rng = np.random.default_rng(2)
    truth = _loo_truth(Y)
    z_delta, z_skew = [], []
    for _ in range(300):
        ll = _log_lik(_exact_mixture_draws(Y, 1000, rng), Y)
        delta, skew = mixis_loo(ll, mcse="delta"), mixis_loo(ll)
        np.testing.assert_array_equal(skew.elpd_i, delta.elpd_i)
        np.testing.assert_array_equal(skew.mcse_delta_i, delta.mcse_elpd_i)
        assert np.all(skew.mcse_elpd_i >= delta.mcse_elpd_i)
        z_delta.append((delta.elpd_i - truth) / delta.mcse_elpd_i)
        z_skew.append((skew.elpd_i - truth) / skew.mcse_elpd_i)
    rms_delta = float(np.sqrt(np.mean(np.square(z_delta))))
    rms_skew = float(np.sqrt(np.mean(np.square(z_skew))))
    assert rms_delta > 1.35, rms_delta
    assert 0.9 <= rms_skew <= rms_delta - 0.15, (rms_skew, rms_delta)


def test_skew_inflation_against_scipy():
    """The factor is 1 + |skewness| / (2 sqrt(ESS)) with scipy's (biased) sample skewness;
    1 for a constant row, near 1 for a symmetric one."""
    rng = np.random.default_rng(6)
    z = np.column_stack([rng.exponential(size=4000), rng.standard_normal(4000),
                         np.zeros(4000), -rng.lognormal(0.0, 1.5, size=4000)])
    ess = np.array([4000.0, 2500.0, 4000.0, 900.0])
    want = 1.0 + np.abs(stats.skew(z, axis=0)) / (2.0 * np.sqrt(ess))
    want[2] = 1.0
    np.testing.assert_allclose(skew_inflation(z, ess), want, rtol=1e-12)
    assert skew_inflation(z, ess)[1] < 1.002
    assert skew_inflation(z, ess)[3] > 1.1


@pytest.mark.arviz1
def test_matches_arviz_stats_loo_mixture():
    arr = pytest.importorskip("arviz_stats.base.array", reason="arviz-stats comes with arviz 1.x")
    rng = np.random.default_rng(3)
    ll = _log_lik(_exact_mixture_draws(Y, 2000, rng), Y).reshape(2, 1000, len(Y))
    # arviz-stats 0.8's public array wrapper mis-handles the axes; its kernel is called directly
    elpd_az, _, _ = arr.array_stats._mixture(ll, obs_axes=(2,), sample_axes=(0, 1))
    res = mixis_loo(ll)
    np.testing.assert_allclose(res.elpd_i, elpd_az, rtol=0, atol=1e-10)


def test_ess_mean_matches_arviz():
    az = pytest.importorskip("arviz")
    rng = np.random.default_rng(4)
    for chains, draws in ((4, 500), (1, 301), (3, 9)):
        e = rng.normal(size=(chains, draws + 20))
        x = np.zeros_like(e)
        for t in range(1, e.shape[1]):
            x[:, t] = 0.7 * x[:, t - 1] + e[:, t]
        x = x[:, 20:]
        assert ess_mean(x) == pytest.approx(float(az.ess(x, method="mean")), rel=1e-10)


def test_chain_structure_enters_mcse():
    """Each of 1000 independent draws repeated 4 times in a row (4 chains x 1000): the MCSE
    must be that of the 1000 distinct draws, about twice the naive sqrt(var / 4000)."""
    rng = np.random.default_rng(5)
    ll = _log_lik(_exact_mixture_draws(Y, 1000, rng), Y)
    rep = np.repeat(ll, 4, axis=0).reshape(4, 1000, len(Y))
    se_rep = mixis_loo(rep).mcse_elpd_i
    se_orig = mixis_loo(ll).mcse_elpd_i
    np.testing.assert_allclose(se_rep / se_orig, 1.0, atol=0.2)
    assert np.all(mixis_loo(rep).ess_mcse < 1300)


def test_loo_prob_logistic_against_quadrature():
    """One-parameter logistic model: P(y_i = 1 | y_-i) by quadrature over the LOO
    posterior vs MixIS from exact mixture draws (drawn by inverse CDF on a fine grid)."""
    x = np.array([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0])
    y = np.array([0, 0, 1, 0, 1, 1, 1, 0])
    grid = np.linspace(-12, 12, 40001)
    eta = grid[:, None] * x[None, :]
    ll_grid = -np.logaddexp(0.0, -np.where(y == 1, 1, -1) * eta)
    log_prior = stats.norm.logpdf(grid, 0, 2.5)
    log_post = log_prior + ll_grid.sum(axis=1)
    p1 = 1.0 / (1.0 + np.exp(-eta))
    truth_prob = np.empty(len(y))
    truth_elpd = np.empty(len(y))
    for i in range(len(y)):
        lw = log_post - ll_grid[:, i]
        w = np.exp(lw - lw.max())
        truth_prob[i] = np.sum(w * p1[:, i]) / w.sum()
        truth_elpd[i] = np.log(np.sum(w * np.exp(ll_grid[:, i])) / w.sum())
    log_q = log_post + logsumexp(-ll_grid, axis=1)
    cdf = np.cumsum(np.exp(log_q - log_q.max()))
    cdf /= cdf[-1]
    rng = np.random.default_rng(6)
    beta = np.interp(rng.uniform(size=8000), cdf, grid)
    ll = -np.logaddexp(0.0, -np.where(y == 1, 1, -1) * beta[:, None] * x[None, :])
    res = mixis_loo(ll)
    prob = mixis_loo_prob(ll, bernoulli_log_p1(ll, y))
    np.testing.assert_allclose(res.elpd_i, truth_elpd, atol=4 * res.mcse_elpd_i.max())
    np.testing.assert_allclose(prob, truth_prob, atol=0.02)
    # with the weights mixis_loo already has (no second pass over the draws)
    given = mixis_loo_prob(ll, bernoulli_log_p1(ll, y), log_weights=res.log_weights)
    np.testing.assert_allclose(given, truth_prob, atol=0.02)
    with pytest.raises(ValueError, match="log_weights has shape"):
        mixis_loo_prob(ll, bernoulli_log_p1(ll, y), log_weights=res.log_weights[:, :-1])


def test_bernoulli_log_p1_extremes():
    ll = np.array([[-1e-300, -800.0, -0.5]])
    lp1 = bernoulli_log_p1(ll, np.array([0, 0, 1]))
    assert np.all(np.isfinite(lp1[:, 1:]))
    assert lp1[0, 1] == pytest.approx(-np.exp(-800.0), abs=1e-300)
    assert lp1[0, 2] == -0.5
    # (chains, draws, n) input: y == 0 columns only are transformed
    ll3 = np.log(np.random.default_rng(1).uniform(0.05, 0.95, size=(2, 3, 4)))
    lp3 = bernoulli_log_p1(ll3, np.array([1, 0, 0, 1]))
    np.testing.assert_array_equal(lp3[..., [0, 3]], ll3[..., [0, 3]])
    np.testing.assert_allclose(np.exp(lp3[..., [1, 2]]), 1 - np.exp(ll3[..., [1, 2]]),
                               rtol=1e-12)


def test_overflow_guarded():
    """Log-likelihoods near -700 and beyond must not overflow."""
    ll = np.full((100, 3), -0.1)
    ll[:, 0] = np.linspace(-1000.0, -600.0, 100)
    res = mixis_loo(ll)
    assert np.all(np.isfinite(res.elpd_i)) and np.all(np.isfinite(res.mcse_elpd_i))
    # observation 0 dominates every draw's weight; its LOO density is the harmonic-type mean
    expected = logsumexp(-logsumexp(-ll, axis=1)) - logsumexp(-ll[:, 0] - logsumexp(-ll, axis=1))
    assert res.elpd_i[0] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("bad, err", [
    (np.full((10, 2), np.nan), ValueError),
    (np.zeros((10,)), ValueError),
    (np.array([["a", "b"]] * 3), TypeError),
])
def test_bad_input(bad, err):
    with pytest.raises(err):
        mixis_loo(bad)


def test_loo_prob_shape_mismatch():
    with pytest.raises(ValueError, match="log_p1"):
        mixis_loo_prob(np.zeros((10, 2)) - 1.0, np.zeros((10, 3)) - 1.0)


# ---- brute-force truth for the fixture models ------------------------------------------------
FIXTURES = {"logistic_normal": 0.8, "rhs_logistic": 0.95, "relu1": 0.95}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FIXTURES))
def test_fixture_mixis_vs_truth(name):
    stanli = pytest.importorskip("stanli")
    data = json.loads((DATA / f"{name}.data.json").read_text())
    data["mixis"] = 1
    truth = np.loadtxt(DATA / f"{name}.csv", delimiter=",", skiprows=1)
    t0 = time.perf_counter()
    fit = stanli.Model(stan_file=str(DATA / f"{name}_mixis.stan"), data=data).sample(
        chains=4, samples=1000, seed=1, delta=FIXTURES[name], refresh=0
    )
    ll = np.asarray(fit.draws("log_lik"), dtype=float)  # (chains, draws, n)
    elapsed = time.perf_counter() - t0
    res = mixis_loo(ll)
    prob = mixis_loo_prob(ll, bernoulli_log_p1(ll, np.asarray(data["y"])))
    rmse = np.sqrt(np.mean((res.elpd_i - truth[:, 1]) ** 2))
    rmse_prob = np.sqrt(np.mean((prob - truth[:, 3]) ** 2))
    total_err = res.elpd_i.sum() - truth[:, 1].sum()
    print(f"{name}: MixIS RMSE {rmse:.4f}, total error {total_err:+.3f}, "
          f"prob RMSE {rmse_prob:.4f}, min ESS {res.ess.min():.0f}, fit {elapsed:.1f}s")
    # truth README: CmdStan MixIS with 1000 draws gave RMSE 0.04-0.08; with 4000 draws the
    # Monte Carlo error halves
    assert rmse < 0.08
    assert abs(total_err) < 1.0
    assert rmse_prob < 0.02
    # the reported MCSE is of the right size: the errors are mostly within 3 combined SEs
    z = (res.elpd_i - truth[:, 1]) / np.hypot(res.mcse_elpd_i, truth[:, 2])
    assert np.mean(np.abs(z) < 3) > 0.85


def test_snis_influence_is_the_jackknife_derivative():
    """Leaving draw s out of log(sum w l / sum w) moves it by -influence_s / (S - 1) to
    first order: the influence values against brute-force leave-one-draw-out estimates."""
    from loo_adapt.core.skew import snis_influence

    rng = np.random.default_rng(8)
    S = 400
    lw = rng.normal(0.0, 1.0, size=(S, 3))
    ll = rng.normal(-1.0, 0.5, size=(S, 3))
    infl = snis_influence(lw, ll)
    np.testing.assert_allclose(infl.mean(axis=0), 0.0, atol=1e-12)
    full = logsumexp(lw + ll, axis=0) - logsumexp(lw, axis=0)
    for s in (0, 17, 399):
        keep = np.arange(S) != s
        loo = logsumexp(lw[keep] + ll[keep], axis=0) - logsumexp(lw[keep], axis=0)
        np.testing.assert_allclose((full - loo) * (S - 1), infl[s], rtol=0.05, atol=2e-3)


def test_divergent_mixture_draws_get_a_note_and_clean_ones_none():
    """Divergent transitions in the mixture draws are named in the result's notes (count and
    remedy); draws without any, or without the column, add no note."""
    import warnings

    from loo_adapt import loo
    from loo_adapt.io.arrays import read_dict

    rng = np.random.default_rng(8)
    post = _log_lik(rng.normal(*_posterior(Y)[:1], np.sqrt(_posterior(Y)[1]), 4000), Y)
    mix = _log_lik(_exact_mixture_draws(Y, 4000, rng), Y)
    div = np.zeros((4, 1000))
    div[1, [5, 700]] = 1.0
    notes = {}
    for label, extra in (("two", {"divergent__": div}), ("none", {"divergent__": 0 * div}),
                         ("absent", None)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = loo(read_dict({"log_lik": post.reshape(4, 1000, -1)}, method="mcmc"),
                      estimator="mixis", mixis_draws=read_dict(
                          {"log_lik": mix.reshape(4, 1000, -1)}, method="mcmc",
                          sample_stats=extra)).loo_adapt
        notes[label] = [n for n in res.notes if "divergent" in n]
    assert len(notes["two"]) == 1
    assert "2 divergent transitions in 4000 draws" in notes["two"][0]
    assert "adapt_delta" in notes["two"][0]
    assert notes["none"] == notes["absent"] == []


def test_mixture_draws_with_many_divergences_verify_no_row():
    """Exact mixture draws marked 2 % divergent (above MAX_DIVERGENT_SHARE): MixIS keeps its
    estimates (right here: the draws are exact) but verifies no row, each saying why; at
    0.5 % the rows are verified by their MCSE, with the note."""
    import warnings

    from loo_adapt import loo
    from loo_adapt.estimators.mixture_checks import MAX_DIVERGENT_SHARE
    from loo_adapt.io.arrays import read_dict

    assert MAX_DIVERGENT_SHARE == 0.01
    rng = np.random.default_rng(9)
    post = _log_lik(rng.normal(*_posterior(Y)[:1], np.sqrt(_posterior(Y)[1]), 4000), Y)
    mix = _log_lik(_exact_mixture_draws(Y, 4000, rng), Y)
    out = {}
    for k in (80, 20):
        div = np.zeros(4000)
        div[rng.choice(4000, size=k, replace=False)] = 1.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out[k] = loo(read_dict({"log_lik": post.reshape(4, 1000, -1)}, method="mcmc"),
                         estimator="mixis", mixis_pool_khat=None, mixis_draws=read_dict(
                             {"log_lik": mix.reshape(4, 1000, -1)}, method="mcmc",
                             sample_stats={"divergent__": div.reshape(4, 1000)})).loo_adapt
    truth = _loo_truth(Y)
    for res in out.values():
        assert set(res.method) == {"mixis"}
        assert np.all(np.abs(res.elpd_i - truth) < 4 * res.mcse_elpd_i)
    assert not out[80].reliable.any()
    assert all("80 divergent transitions in 4000 draws (more than 1%)" in r
               for r in out[80].reason)
    assert out[20].reliable.sum() == out[20].n_obs - np.sum(out[20].mcse_elpd_i > 0.1)
    assert any("20 divergent transitions" in n for n in out[20].notes)


def test_total_mcse_counts_only_the_rows_still_held_from_a_fit():
    """The total's MCSE after a later stage replaced some MixIS rows: the correlated MCSE of
    the sum over the rows still held from the mixture fit, plus the replacements' own.  Its
    mean over 150 replicates (exact i.i.d. mixture draws; the outlier and two more rows
    replaced by their exact values, MCSE 0) matches the spread of the total; the full
    mixture's MCSE over every row, which the result had kept, is about twice that spread."""
    import warnings

    from loo_adapt.estimators.base import Context, Stage, run_stages
    from loo_adapt.estimators.estimate import Estimate
    from loo_adapt.estimators.mixis import MixIS
    from loo_adapt.estimators.psis import initial_result
    from loo_adapt.io.arrays import read_dict

    rng = np.random.default_rng(12)
    truth = _loo_truth(Y)
    m, v = _posterior(Y)
    replaced = np.array([len(Y) - 1])

    class Exact:  # a stage that knows the answer for a few rows
        name = "refit"

        def __call__(self, ctx, rows):
            return Estimate.make("refit", replaced, truth[replaced], 0.0, True,
                                 verified_by="refit")

    totals, reported, full = [], [], []
    for _ in range(150):
        post = read_dict({"log_lik": _log_lik(rng.normal(m, np.sqrt(v), 1000), Y).reshape(
            4, 250, -1)}, method="mcmc")
        mix = read_dict({"log_lik": _log_lik(_exact_mixture_draws(Y, 1000, rng), Y).reshape(
            4, 250, -1)}, method="mcmc")
        ctx = Context(draws=post, mixture_fn=lambda mix=mix: mix, own_mixture=True, seed=1,
                      progress=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = run_stages(ctx, initial_result(ctx.base, khat_threshold=ctx.threshold),
                             [Stage(MixIS(pool_khat=None), rows="all", accept="all"),
                              Stage(Exact(), rows="all", accept="all")])
        assert set(res.method[replaced]) == {"refit"}
        lean = res.without_mcse_blocks()  # what loo() returns: the blocks' total kept
        assert lean.mcse_blocks == [] and res.mcse_blocks
        assert lean.estimates() == res.estimates()
        totals.append(res.elpd_i.sum())
        reported.append(res.estimates()["mcse_elpd_loo"])
        full.append(mixis_loo(mix.log_lik().reshape(4, 250, -1), mcse="delta").mcse_total)
    spread = float(np.std(totals, ddof=1))
    assert 0.8 < np.mean(reported) / spread < 1.25, (np.mean(reported), spread)
    assert np.mean(full) / spread < 0.85
