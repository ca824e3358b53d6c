"""loo_expectations / loo_pit against closed forms, R loo's E_loo formulas and arviz."""

import warnings

import numpy as np
import pytest
from scipy.stats import kstest, norm

import loo_adapt
from loo_adapt.core.mixis import mixis_loo
from loo_adapt.core.psis_loo import loo_pointwise
from loo_adapt.estimators.psis import initial_result
from loo_adapt.evaluation.arviz import arviz_major, to_elpd_data
from loo_adapt.expectations import e_loo_khat, e_loo_rows, loo_expectations, loo_pit, pit_rows
from loo_adapt.io.readers import read_dict
from loo_adapt.result import PointwiseLoo

pytestmark = pytest.mark.arviz1  # runs under arviz 1.x too (CI: -m arviz1)


def _normal_model(seed=0, n=40, draws=4000):
    """y_i ~ N(mu, 1), flat prior: exact posterior draws; exact LOO predictive
    y_i | y_-i ~ N(mean(y_-i), 1 + 1/(n-1))."""
    rng = np.random.default_rng(seed)
    y = rng.normal(size=n)
    mu = y.mean() + rng.normal(size=(1, draws)) / np.sqrt(n)
    ll = norm.logpdf(y, loc=mu[..., None])
    yrep = mu[..., None] + rng.normal(size=(1, draws, n))
    return y, ll, yrep


def _loo(ll):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return loo_adapt.loo(ll)


def test_r_loo_weighted_quantile_and_equal_weight_cases():
    x = np.array([[3.0], [1.0], [4.0], [2.0]])
    w = np.log(np.array([[0.3], [0.1], [0.4], [0.2]]))
    q, _ = e_loo_rows(x, w, "quantile", probs=[0.05, 0.5, 0.95])
    # R loo .wquant_i by hand: sorted x 1..4, cumulative weights .1 .3 .6 1
    np.testing.assert_allclose(q[0], [1.0, 2.0 + 0.2 / 0.3, 3.0 + 0.35 / 0.4], rtol=1e-12)
    rng = np.random.default_rng(0)
    z = rng.normal(size=(500, 3))
    flat = np.zeros((500, 3))
    q, _ = e_loo_rows(z, flat, "quantile", probs=[0.1, 0.5, 0.9])
    np.testing.assert_allclose(q, np.quantile(z, [0.1, 0.5, 0.9], axis=0).T, rtol=1e-12)
    v, _ = e_loo_rows(z, flat, "var")
    np.testing.assert_allclose(v, np.var(z, axis=0, ddof=1), rtol=1e-12)
    s, _ = e_loo_rows(z, flat, "sd")
    np.testing.assert_allclose(s, np.std(z, axis=0, ddof=1), rtol=1e-12)


def test_importance_weighted_moments_recover_the_target():
    # proposal N(0, 1), target N(0.5, 0.8^2): weights are the density ratio
    rng = np.random.default_rng(1)
    x = rng.normal(size=(40000, 1))
    lw = norm.logpdf(x, 0.5, 0.8) - norm.logpdf(x)
    m, k = e_loo_rows(x, lw, "mean")
    assert m[0] == pytest.approx(0.5, abs=0.02) and k[0] < 0.5
    s, _ = e_loo_rows(x, lw, "sd")
    assert s[0] == pytest.approx(0.8, abs=0.02)
    q, _ = e_loo_rows(x, lw, "quantile", probs=[0.1, 0.9])
    np.testing.assert_allclose(q[0], norm.ppf([0.1, 0.9], 0.5, 0.8), atol=0.03)


def test_khat_of_pareto_ratios_is_their_shape():
    rng = np.random.default_rng(2)
    u = rng.uniform(size=8000)
    for k in (0.3, 0.8):
        r = (u ** (-k) - 1.0) / k  # generalised Pareto with shape k
        khat = e_loo_khat(np.zeros(8000), np.log(r), kind="quantile")
        assert khat == pytest.approx(k, abs=0.12)
    # h r with h = x: its tails are heavier than r's when x grows with r
    r = (u ** (-0.3) - 1.0) / 0.3
    assert e_loo_khat(r**2, np.log(r), "mean") > e_loo_khat(r**2, np.log(r), "quantile") + 0.2


def test_loo_expectations_equal_exact_loo_predictive_moments():
    y, ll, yrep = _normal_model(seed=3)
    res = _loo(ll)
    n = y.size
    exact_mean = np.array([np.delete(y, i).mean() for i in range(n)])
    out = loo_expectations(res, yrep, kind="mean")
    np.testing.assert_allclose(out.value, exact_mean, atol=0.06)
    assert np.all(out.pareto_k < 0.7) and np.all(out.method == "psis")
    sd = loo_expectations(res, yrep, kind="sd").value
    np.testing.assert_allclose(sd, np.sqrt(1 + 1 / (n - 1)), atol=0.06)
    q = loo_expectations(res, yrep, kind="quantile", probs=[0.25, 0.75]).value
    exact_q = exact_mean[:, None] + np.sqrt(1 + 1 / (n - 1)) * norm.ppf([0.25, 0.75])
    np.testing.assert_allclose(q, exact_q, atol=0.08)


def test_rows_of_other_estimators_use_their_own_draws_or_are_nan():
    y, ll, yrep = _normal_model(seed=4, n=5, draws=1000)
    base = loo_pointwise(ll, r_eff=1.0)
    r0 = initial_result(base)
    fields = ("elpd_i", "p_loo_i", "lpd_i", "mcse_elpd_i", "pareto_k", "good_k",
              "n_samples", "r_eff")
    res = PointwiseLoo(**{f: getattr(r0, f) for f in fields},
                       method=np.array(["psis", "mixis", "psis", "psis", "refit"], dtype=object))
    elpd = to_elpd_data(res, log_weights=base.log_weights)
    out = loo_expectations(elpd, yrep)
    assert np.isnan(out.value[[1, 4]]).all() and np.isfinite(out.value[[0, 2, 3]]).all()
    assert out.reason[1].startswith("mixis: no weights on the posterior draws")
    assert "row_draws" in out.reason[4] and out.reason[0] == ""
    own = np.random.default_rng(5).normal(2.0, 1.0, 3000)
    out = loo_expectations(elpd, yrep, row_draws={1: (own, np.zeros(3000))})
    assert out.value[1] == pytest.approx(own.mean(), rel=1e-12)  # equal weights: the mean
    assert out.method[1] == "mixis" and out.reason[1] == ""
    pit = loo_pit(elpd, y, yrep, row_draws={1: (own, np.zeros(3000))})
    assert pit.pit[1] == pytest.approx(np.mean(own < y[1]), abs=1e-12)
    assert np.isnan(pit.pit[4]) and "refit" in pit.reason[4]


def test_loo_pit_uniform_for_calibrated_models():
    y, ll, yrep = _normal_model(seed=6, n=300, draws=2000)
    pit = loo_pit(_loo(ll), y, yrep)
    assert kstest(pit.pit, "uniform").pvalue > 0.01
    # discrete outcomes: randomised PIT is uniform too (Bernoulli model, Beta posterior)
    rng = np.random.default_rng(7)
    n = 400
    yb = (rng.uniform(size=n) < 0.3).astype(float)
    p = rng.beta(1 + yb.sum(), 1 + n - yb.sum(), size=(1, 2000))
    llb = np.where(yb == 1, np.log(p[..., None]), np.log1p(-p[..., None]))
    yrep_b = (rng.uniform(size=(1, 2000, n)) < p[..., None]).astype(float)
    pit_b = loo_pit(_loo(llb), yb, yrep_b, seed=0).pit
    assert kstest(pit_b, "uniform").pvalue > 0.01
    # without randomisation every y = 0 row would sit at P(y_rep < 0) = 0
    assert np.all((pit_b >= 0) & (pit_b <= 1)) and np.unique(pit_b[yb == 0]).size > 10


@pytest.mark.skipif(arviz_major() != 0, reason="arviz 0.x's loo_pit on arrays")
def test_pit_rows_equal_arviz_0x_loo_pit_on_arrays():
    import arviz as az

    y, ll, yrep = _normal_model(seed=8, n=20, draws=1000)
    lw = loo_pointwise(ll, r_eff=1.0).log_weights
    theirs = az.loo_pit(y=y, y_hat=yrep[0].T, log_weights=lw.T)
    np.testing.assert_allclose(pit_rows(y, yrep[0], lw), theirs, atol=1e-12)


def test_bad_input_messages():
    y, ll, yrep = _normal_model(seed=9, n=4, draws=200)
    res = _loo(ll)
    with pytest.raises(ValueError, match="kind must be one of"):
        loo_expectations(res, yrep, kind="median")
    with pytest.raises(ValueError, match="needs probs="):
        loo_expectations(res, yrep, kind="quantile")
    with pytest.raises(ValueError, match="matching the 200 posterior draws"):
        loo_expectations(res, yrep[:, :100])
    with pytest.raises(ValueError, match="no log weights"):
        loo_expectations(res.loo_adapt, yrep)
    with pytest.raises(ValueError, match="y has 3 observations"):
        loo_pit(res, y[:3], yrep)


# ------------------------------------------- rows of every estimator: their own draws and weights
def _quiet_loo(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return loo_adapt.loo(*args, **kwargs)


def test_mixis_rows_pit_equals_closed_form_loo_predictive():
    """y_i ~ N(mu, 1), flat prior: exact posterior and exact mixture draws (the mixture
    p(mu | y) sum_j 1/l_j(mu) is the mixture of the LOO posteriors N(m_-j, 1/(n-1)) with
    weights proportional to 1/p(y_j | y_-j)); the LOO predictive is N(m_-i, 1 + 1/(n-1))."""
    rng = np.random.default_rng(11)
    n, S = 20, 8000
    y = rng.normal(size=n)
    m_loo = np.array([np.delete(y, i).mean() for i in range(n)])
    s_loo = np.sqrt(1.0 + 1.0 / (n - 1))
    log_c = -norm.logpdf(y, m_loo, s_loo)
    comp = rng.choice(n, size=S, p=np.exp(log_c - np.logaddexp.reduce(log_c)))
    mu_mix = rng.normal(m_loo[comp], np.sqrt(1.0 / (n - 1)))
    mu_post = y.mean() + rng.normal(size=S) / np.sqrt(n)

    def fit(mu):
        return read_dict({"log_lik": norm.logpdf(y, mu[:, None])[None],
                          "y_rep": (mu[:, None] + rng.normal(size=(S, n)))[None]},
                         method="mcmc")

    posterior, mixture = fit(mu_post), fit(mu_mix)
    # MixIS alone, and pooled with PSIS (the rows with PSIS k-hat < 1/2: both samples)
    for pool, kinds in ((None, {"mixis"}), (0.5, {"mixis+psis"})):
        res = _quiet_loo(posterior, estimator="mixis", mixis_draws=mixture,
                         mixis_pool_khat=pool)
        assert set(res.loo_adapt.method) == kinds
        pit = loo_pit(res, y, "y_rep", draws=posterior)
        assert set(pit.method) == kinds and np.all(pit.reason == "")
        np.testing.assert_allclose(pit.pit, norm.cdf((y - m_loo) / s_loo), atol=0.03)
        mean = loo_expectations(res, "y_rep", draws=posterior)
        np.testing.assert_allclose(mean.value, m_loo, atol=0.06)
        sd = loo_expectations(res, "y_rep", kind="sd", draws=posterior).value
        np.testing.assert_allclose(sd, s_loo, atol=0.06)
        assert np.all(mean.pareto_k < 0.7)
        # posterior draws of y_rep alone: MixIS rows say what to pass
        out = loo_pit(res, y, posterior["y_rep"])
        assert np.isnan(out.pit).all() and "y_rep='y_rep'" in out.reason[0]
    # a pooled row's weights: PSIS on the posterior draws, MixIS on the mixture draws; the
    # reported elpd_i is theirs with MixIS's part taken down by its second-order bias
    rec = res.loo_adapt.row_draws[0]
    lw, _ = rec.all_weights()
    assert rec.source == "pooled" and lw.size == 2 * S and 0 < rec.posterior_share < 1
    part_post = np.sum(np.exp(lw[:S]) * norm.pdf(y[0], mu_post))
    part_mix = np.sum(np.exp(lw[S:]) * norm.pdf(y[0], mu_mix))
    bias = mixis_loo(norm.logpdf(y, mu_mix[:, None])[None], bias="delta").bias_i[0]
    assert np.log(part_post + part_mix * np.exp(-bias)) == pytest.approx(
        res.loo_adapt.elpd_i[0], abs=1e-10)


def _beta_bernoulli(seed=12, n=30, S=4000):
    """y_i ~ Bernoulli(p), p ~ Beta(1, 1): exact posterior, mixture and LOO-posterior draws;
    P(y_i = 1 | y_-i) = (1 + k_-i) / (n + 1), k_-i the ones among the others."""
    rng = np.random.default_rng(seed)
    y = (rng.uniform(size=n) < 0.35).astype(float)
    k_loo = y.sum() - y
    p_loo = (1.0 + k_loo) / (n + 1.0)
    log_c = -np.log(np.where(y == 1, p_loo, 1.0 - p_loo))
    comp = rng.choice(n, size=S, p=np.exp(log_c - np.logaddexp.reduce(log_c)))
    p_mix = rng.beta(1.0 + k_loo[comp], 1.0 + (n - 1) - k_loo[comp])
    p_post = rng.beta(1.0 + y.sum(), 1.0 + n - y.sum(), size=S)

    def ll(p):
        return np.where(y == 1, np.log(p[:, None]), np.log1p(-p[:, None]))[None]

    def refit_fn(i, seed):
        p = np.random.default_rng(seed).beta(1.0 + k_loo[i], 1.0 + (n - 1) - k_loo[i], S)
        return ll(p)[0][:, i].reshape(4, -1)

    y_rep = (rng.uniform(size=(1, S, n)) < p_post[None, :, None]).astype(float)
    return y, p_loo, ll(p_post), ll(p_mix), refit_fn, y_rep


def test_binary_rows_of_mixis_and_refits_get_the_bernoulli_predictive():
    y, p_loo, ll_post, ll_mix, refit_fn, y_rep = _beta_bernoulli()
    mix = _quiet_loo(read_dict({"log_lik": ll_post}, method="mcmc"), y=y, estimator="mixis",
                     mixis_draws=read_dict({"log_lik": ll_mix}, method="mcmc"))
    # a k-hat threshold of 1e-9 sends (almost) every row to the refits
    refit = _quiet_loo(read_dict({"log_lik": ll_post}, method="mcmc"), y=y, khat_threshold=1e-9,
                       fallback=("refit",),
                       refit_kwargs={"refit_fn": refit_fn, "n_jobs": 1, "progress": False})
    u = np.random.default_rng(3).uniform(size=y.size)  # pit_rows' tie-breaking uniforms
    assert (refit.loo_adapt.method == "refit").sum() >= y.size // 2
    for res, name in ((mix, "mixis"), (refit, "refit")):
        pw = res.loo_adapt
        r = pw.method == name
        mean = loo_expectations(res, y_rep)
        assert np.all(mean.reason == "")
        np.testing.assert_allclose(mean.value, pw.loo_prob, rtol=1e-10)  # the row's loo_prob
        np.testing.assert_allclose(mean.value, p_loo, atol=0.012)  # closed form
        var = loo_expectations(res, y_rep, kind="var").value
        np.testing.assert_allclose(var[r], (p_loo * (1 - p_loo))[r], atol=0.012)
        q = loo_expectations(res, y_rep, kind="quantile", probs=[0.5, 0.9]).value
        np.testing.assert_array_equal(q[r], np.column_stack([p_loo > 0.5, p_loo > 0.1])[r])
        pit = loo_pit(res, y, y_rep, seed=3).pit
        exact = np.where(y == 1, 1.0 - p_loo + u * p_loo, u * (1.0 - p_loo))
        np.testing.assert_allclose(pit, exact, atol=0.012)


def test_adapted_rows_binary_expectations_match_brute_force_truth():
    """Adaptive IS on the logistic fixture: its rows weigh transformed draws, so y_rep at the
    posterior draws cannot be used; their P(y_i = 1 | theta) can."""
    import json
    from pathlib import Path

    from scipy.special import expit

    from loo_adapt.io.readers import read_csv
    from loo_adapt.models import model_for

    data_dir = Path(__file__).resolve().parents[1] / "data" / "cmdstan"
    data = json.loads((data_dir / "logistic_normal.data.json").read_text())
    draws = read_csv(sorted((data_dir / "logistic_normal" / "sample").glob("*.csv")))
    truth = np.loadtxt(data_dir / "truth" / "logistic_normal.csv", delimiter=",",
                       skiprows=1)[:, 3]
    model = model_for("logistic_normal", data)
    res = _quiet_loo(draws, model=model, seed=1)
    pw = res.loo_adapt
    adapted = pw.method != "psis"
    assert adapted.sum() >= 5
    theta, _ = model.theta_from_draws(draws)
    p_post = expit(model.linear_predictor(theta))
    y_rep = (np.random.default_rng(4).uniform(size=p_post.shape) < p_post).astype(float)
    out = loo_expectations(res, y_rep)
    assert np.all(out.reason == "") and np.all(np.isfinite(out.pareto_k[adapted]))
    np.testing.assert_allclose(out.value[adapted], pw.loo_prob[adapted], rtol=1e-10)
    # the records are the weights behind elpd_i: P(observed y_i) = exp(elpd_i)
    y = np.asarray(data["y"], dtype=float)
    for i in np.flatnonzero(adapted):
        rec = pw.row_draws[i]
        p_obs = rec.p1 if y[i] == 1 else 1.0 - rec.p1
        assert rec.source == "transformed"
        assert np.log(np.sum(np.exp(rec.log_weights) * p_obs)) == pytest.approx(pw.elpd_i[i],
                                                                               abs=1e-9)
    # the brute-force truth: within 4 Monte Carlo SEs of the weighted mean (plus the truth's)
    for i in np.flatnonzero(adapted):
        rec = pw.row_draws[i]
        w = np.exp(rec.log_weights)
        se = np.sqrt(np.sum(w**2 * (rec.p1 - out.value[i]) ** 2))
        assert abs(out.value[i] - truth[i]) < 4 * se + 0.005, (i, out.value[i], truth[i], se)
    # a continuous function of the outcome: adapted rows name the fix
    cont = loo_expectations(res, y_rep + 0.5 * np.random.default_rng(5).normal(size=y_rep.shape))
    assert np.isnan(cont.value[adapted]).all() and np.isfinite(cont.value[~adapted]).all()
    assert all("program=loo_adapt.StanProgram" in r and "row_draws=" in r
               for r in cont.reason[adapted])


def test_a_later_stage_replaces_the_row_record():
    from loo_adapt.estimators.estimate import Estimate, RowDraws

    y, p_loo, ll_post, ll_mix, refit_fn, y_rep = _beta_bernoulli(n=8)
    pw = _quiet_loo(read_dict({"log_lik": ll_post}, method="mcmc"), y=y, estimator="mixis",
                    mixis_draws=read_dict({"log_lik": ll_mix}, method="mcmc")).loo_adapt
    lw = pw.row_draws[0].log_weights
    # MixIS shares one weight matrix: each record is a read-only view, not a copy
    assert lw.base is not None and all(r.log_weights.base is lw.base for r in pw.row_draws)
    assert not lw.flags.writeable
    pooled = [r for r in pw.row_draws if r.source == "pooled"]  # PSIS k-hat < 1/2 rows
    assert pooled and all(r.posterior.log_weights.base is pooled[0].posterior.log_weights.base
                          for r in pooled)
    new = RowDraws("refit", np.full(4, -np.log(4.0)), np.array([1.0, 0.0, 1.0, 1.0]))
    est = Estimate.make("refit", [2, 5], [-0.5, -0.7], [0.0, 0.0], [True, False],
                        row_draws=[new, new])
    merged = pw.merge(est, accept=[True, False])
    assert merged.row_draws[2] is new and merged.row_draws[5] is pw.row_draws[5]
    assert pw.row_draws[2].source in ("mixture", "pooled")  # the merge wrote a new result
    # an estimate that keeps no draws leaves none behind (no stale MixIS weights)
    bare = Estimate.make("psis", [3], [-0.6], [0.0], [True])
    assert pw.merge(bare).row_draws[3] is None
    res = to_elpd_data(merged, log_weights=np.full((ll_post.shape[1], 8), np.nan))
    ev = loo_expectations(res, y_rep[0])
    assert ev.value[2] == pytest.approx(0.75, abs=1e-12)  # the refit's p1, equal weights
    with pytest.raises(ValueError, match="RowDraws.source"):
        RowDraws("psis", np.zeros(3))
    # through loo(): MixIS for every row, then refits of the rows it does not certify
    both = _quiet_loo(read_dict({"log_lik": ll_post}, method="mcmc"), y=y,
                      fallback=("mixis", "refit"), khat_threshold=1e-9, mixis_max_mcse=1e-9,
                      mixis_draws=read_dict({"log_lik": ll_mix}, method="mcmc"),
                      refit_kwargs={"refit_fn": refit_fn, "n_jobs": 1,
                                    "progress": False}).loo_adapt
    refitted = np.flatnonzero(both.method == "refit")
    assert refitted.size and all([h["estimator"] for h in both.row_history(i)]
                                 == ["mixis", "refit"] for i in refitted)
    assert {both.row_draws[i].source for i in refitted} == {"refit"}
