"""The `loo` verb's paths not covered elsewhere: approximate posteriors, y without a model,
method="mixis", fallbacks, and input errors."""

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy.special import expit, logsumexp

import loo_adapt
from loo_adapt.evaluation.arviz import arviz_major
from loo_adapt.io.readers import read_csv, read_dict

DATA = Path(__file__).parent / "data" / "cmdstan"


def res_summary(draws):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return loo_adapt.loo(draws).summary()


def _data(name):
    return json.loads((DATA / f"{name}.data.json").read_text())


@pytest.mark.skipif(arviz_major() >= 1, reason="reference is arviz 0.x's psislw")
def test_advi_draws_use_p_over_q_ratios():
    import arviz as az

    draws = read_csv(DATA / "logistic_normal" / "variational")
    assert draws.method == "advi" and draws.n_samples == 1000
    res = loo_adapt.loo(draws).loo_adapt
    ll = draws.log_lik().reshape(draws.n_samples, -1)
    corr = (draws.log_p - draws.log_q).reshape(-1)
    lw, k = az.psislw((corr[:, None] - ll).T, reff=1.0)  # arviz: draws on the last axis
    lw = lw.T - logsumexp(lw.T, axis=0)
    np.testing.assert_allclose(res.elpd_i, logsumexp(ll + lw, axis=0), atol=1e-8)
    np.testing.assert_allclose(res.pareto_k, k, atol=1e-6)
    # lpd is the p/q-weighted (smoothed) estimate of log E_p[l_i], not the plain q mean
    lw_p, _ = az.psislw(corr, reff=1.0)
    lw_p = lw_p - logsumexp(lw_p)
    np.testing.assert_allclose(res.lpd_i, logsumexp(ll + lw_p[:, None], axis=0), atol=1e-8)
    # the result and its summary say where the draws come from and how good q is
    _, k_pq = az.psislw(corr, reff=1.0)
    assert res.draws_method == "advi"
    assert res.pareto_k_pq == pytest.approx(float(k_pq), abs=1e-6)
    assert f"Pareto k-hat of p/q: {float(k_pq):.2f}" in res_summary(draws)


def test_poor_approximation_warns():
    draws = read_csv(DATA / "relu1" / "laplace")  # degenerate Laplace fit (|W1| ~ 1e19)
    with pytest.warns(UserWarning, match="poor proposal"):
        loo_adapt.loo(draws)


def test_loo_probability_from_y_without_a_model():
    data = _data("logistic_normal")
    draws = read_csv(DATA / "logistic_normal" / "sample")
    y = np.asarray(data["y"])
    res = loo_adapt.loo(draws, y=y).loo_adapt
    X = np.asarray(data["X"])
    eta = draws.flat("alpha")[:, None] + draws.flat("beta") @ X.T
    ll = draws.log_lik().reshape(draws.n_samples, -1)
    lw, _ = loo_adapt.core.psis(-ll, r_eff=res.r_eff)
    # P(y_i = 1 | y_-i) by the same PSIS weights, from the parameters directly
    np.testing.assert_allclose(res.loo_prob, np.sum(np.exp(lw) * expit(eta), axis=0),
                               atol=2e-5)  # CSV log_lik has 6 significant digits
    with pytest.raises(ValueError, match="binary"):
        loo_adapt.loo(draws, y=np.full(54, 2))


def _mixture_draws(n=12, chains=4, draws=300, seed=0):
    rng = np.random.default_rng(seed)
    ll = -np.abs(rng.normal(size=(chains, draws, n)))
    return read_dict({"log_lik": ll}, method="mcmc"), ll


def test_estimator_mixis_through_loo_against_closed_form():
    """Conjugate normal mean: posterior and mixture draws exact, LOO in closed form."""
    from scipy import stats

    y = np.array([-0.4, 0.3, 1.1, -1.2, 0.5, 0.0, 0.8, -0.6, 4.5])
    prior_sd = 3.0

    def post(v):
        prec = 1.0 / prior_sd**2 + len(v)
        return v.sum() / prec, 1.0 / prec

    truth = np.array([stats.norm.logpdf(y[i], post(np.delete(y, i))[0],
                                        np.sqrt(1.0 + post(np.delete(y, i))[1]))
                      for i in range(len(y))])
    rng = np.random.default_rng(5)
    m, v = post(y)
    mu_post = rng.normal(m, np.sqrt(v), size=(4, 1000))
    w = np.exp(-truth - logsumexp(-truth))
    comp = rng.choice(len(y), size=4000, p=w)
    mv = np.array([post(np.delete(y, i)) for i in range(len(y))])
    mu_mix = rng.normal(mv[comp, 0], np.sqrt(mv[comp, 1])).reshape(4, 1000)

    def ll(mu):
        return stats.norm.logpdf(y, mu[..., None], 1.0)

    for pool in (None, 0.5):
        res = loo_adapt.loo(read_dict({"log_lik": ll(mu_post)}, method="mcmc"),
                            estimator="mixis", mixis_pool_khat=pool,
                            mixis_draws=read_dict({"log_lik": ll(mu_mix)}, method="mcmc"),
                            ).loo_adapt
        # pooled with PSIS exactly where PSIS's k-hat is below 1/2
        k = loo_adapt.loo(read_dict({"log_lik": ll(mu_post)}, method="mcmc")).loo_adapt.pareto_k
        expect = np.where(k < 0.5, "mixis+psis", "mixis") if pool else np.full(len(y), "mixis")
        np.testing.assert_array_equal(res.method.astype(str), expect)
        assert res.reliable.all() and set(res.verified_by) == {"mixis_mcse"}
        np.testing.assert_array_less(np.abs(res.elpd_i - truth), 4 * res.mcse_elpd_i + 1e-3)
    assert (k < 0.5).any()
    # posterior draws passed as mixture draws are refused
    with pytest.raises(ValueError, match="mixture posterior"):
        loo_adapt.loo(read_dict({"log_lik": ll(mu_post)}, method="mcmc"), estimator="mixis",
                      mixis_draws=read_dict({"log_lik": ll(mu_post[:, ::-1])}, method="mcmc"))
    # a mixture fit of 20 draws is not enough to call anything reliable
    with pytest.warns(UserWarning, match=rf"{len(y)} of {len(y)} observations have no verified "
                      rf"estimate \({len(y)} x too few mixture draws\)"):
        few = loo_adapt.loo(read_dict({"log_lik": ll(mu_post)}, method="mcmc"),
                            estimator="mixis",
                            mixis_draws=read_dict({"log_lik": ll(mu_mix[:, :5])}, method="mcmc"))
    assert not few.loo_adapt.reliable.any()
    assert all("MixIS draws" in r for r in few.loo_adapt.reason)


def test_fallback_errors():
    posterior, _ = _mixture_draws()
    with pytest.raises(ValueError, match="unknown fallback"):
        loo_adapt.loo(posterior, fallback="magic")
    with pytest.raises(ValueError, match="program"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loo_adapt.loo(posterior, fallback="refit",
                          khat_threshold=1e-9)  # every k-hat above: refits needed
    with pytest.raises(ValueError, match="method"):
        loo_adapt.loo(posterior, method="exact")
    with pytest.raises(ValueError, match="model"):
        loo_adapt.loo(posterior, adapt=True)
