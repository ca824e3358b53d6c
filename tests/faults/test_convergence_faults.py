"""Issue 22.5: chains that disagree on the log-likelihood (a chain stuck at one draw, a
chain elsewhere) are named in a warning and none of their rows is "verified" by PSIS k-hat
alone; the generalized Pareto warning names every column whose k-hat is infinite.

Independent expectations: arviz's rank-normalised R-hat of the same columns decides which
rows disagree; a refit_fn with a known held-out density verifies rows independently.
"""

import warnings

import arviz as az
import numpy as np
import pytest

import loo_adapt
from loo_adapt.io.readers import read_dict


def healthy(n=20, seed=0):
    return -np.abs(np.random.default_rng(seed).normal(1.0, 0.3, size=(4, 500, n)))


def test_chain_stuck_at_one_draw_is_never_reliable():
    """A chain stuck at one draw gave "reliable" rows (up to z = 5.5) with no warning."""
    ll = healthy()
    ll[2] = ll[2, 0]  # chain 2 repeats its first draw: every column stuck
    with pytest.warns(UserWarning, match=r"chains disagree on the log-likelihood of 20 obs"):
        res = loo_adapt.loo(ll)
    pw = res.loo_adapt
    assert not pw.reliable.any()
    assert all("chains disagree" in r for r in pw.reason)
    assert (pw.verified_by == "").all()


def test_rows_named_are_those_arviz_finds_disagreeing():
    ll = healthy(seed=1)
    ll[0, :, [3, 11]] -= 0.5  # chain 0 elsewhere on two observations
    want = [j for j in range(ll.shape[2]) if az.rhat(ll[:, :, j], method="rank") > 1.01]
    assert 3 in want and 11 in want
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = loo_adapt.loo(ll)
    text = " ".join(str(w.message) for w in caught if "chains disagree" in str(w.message))
    pw = res.loo_adapt
    assert np.flatnonzero(~pw.reliable).tolist() == want
    for j in want:
        assert f"{j} (log_lik[{j + 1}])" in text
        assert "R-hat" in pw.reason[j]


def test_a_refit_still_verifies_a_row_whose_chains_disagree():
    """A refit does not use the posterior draws: its rows are reliable; the rest are not."""
    ll = healthy()
    ll[2] = ll[2, 0]
    with pytest.warns(UserWarning) as caught:
        res = loo_adapt.loo(ll, fallback=("refit",), refit_kwargs={
            "refit_fn": lambda i: np.full((2, 100), -1.0), "n_jobs": 1, "progress": False,
            "max_refits": 3})
    pw = res.loo_adapt
    assert pw.reliable.sum() == 3 and (pw.verified_by[pw.reliable] == "refit").all()
    assert np.all(pw.elpd_i[pw.reliable] == -1.0)
    # the warning says which of the flagged rows the refits cover and names the others
    text = next(str(w.message) for w in caught if "chains disagree" in str(w.message))
    assert "3 of them are verified independently of the posterior draws" in text
    left = np.flatnonzero(~pw.reliable)
    assert left.size == 17
    tail = text.split("have no verified estimate")[0].split("; ")[-1]
    assert all(f"{j} (log_lik[{j + 1}])" in tail for j in left)
    assert not any(f"{j} (log_lik[{j + 1}])" in tail for j in np.flatnonzero(pw.reliable))


def test_rows_mixis_verifies_are_not_called_unverified_in_the_warning():
    """With every flagged row verified on draws of its own (a refit of each), the warning
    still names them (the posterior's chains did not mix) but no longer says they are
    unverified."""
    ll = healthy(n=6)
    ll[2] = ll[2, 0]
    with pytest.warns(UserWarning) as caught:
        res = loo_adapt.loo(ll, fallback=("refit",), refit_kwargs={
            "refit_fn": lambda i: np.full((2, 100), -1.0), "n_jobs": 1, "progress": False})
    assert res.loo_adapt.reliable.all()
    text = next(str(w.message) for w in caught if "chains disagree" in str(w.message))
    assert "of 6 observation(s)" in text
    assert "each is verified independently of the posterior draws" in text
    assert "no verified estimate" not in text and "no PSIS or adapted" not in text


def test_healthy_chains_give_no_convergence_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = loo_adapt.loo(healthy(seed=2))
    assert not any("chains disagree" in str(w.message) for w in caught)
    assert res.loo_adapt.reliable.all()


def test_gpd_warning_names_every_infinite_khat_column():
    """Four columns with infinite k-hat (two causes): one warning names all four."""
    ll = healthy(30)
    rng = np.random.default_rng(3)
    for j in (3, 12):  # one extreme draw: the generalized Pareto fit fails
        ll[:, :, j] = 0.0
        ll[0, 0, j] = -800.0
    for j in (20, 27):  # the tail is one repeated value
        ll[:, :, j] = rng.normal(size=(4, 500)) * 1e-300
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = loo_adapt.loo(ll, reff=1.0)
    inf_cols = np.flatnonzero(np.isinf(res.loo_adapt.pareto_k)).tolist()
    assert inf_cols == [3, 12, 20, 27]
    gpd = [str(w.message) for w in caught if "generalized Pareto" in str(w.message)]
    assert len(gpd) == 1 and "3, 12, 20, 27" in gpd[0]


def test_mixis_alone_verifies_rows_whose_posterior_chains_disagree():
    """y_i ~ N(mu, 1), flat prior (closed-form LOO).  The posterior fit has a chain off by
    0.3 in mu: most rows' chains disagree (arviz R-hat > 1.01) and PSIS would look fine
    (k-hat < 1/2).  Pooling MixIS with those PSIS rows would rest them on the suspect draws
    (and leave them unverified); MixIS alone on its own, healthy mixture draws verifies them,
    within its MCSE of the closed form."""
    from scipy.stats import norm

    rng = np.random.default_rng(4)
    n = 20
    y = rng.normal(size=n)
    m_loo = np.array([np.delete(y, i).mean() for i in range(n)])
    truth = norm.logpdf(y, m_loo, np.sqrt(1.0 + 1.0 / (n - 1)))
    mu = y.mean() + rng.normal(size=(4, 1000)) / np.sqrt(n)
    mu[0] += 0.3
    ll_post = norm.logpdf(y, mu[..., None])
    flagged = [j for j in range(n) if az.rhat(ll_post[:, :, j], method="rank") > 1.01]
    assert len(flagged) >= n // 2
    mix_p = np.exp(-truth - np.logaddexp.reduce(-truth))
    comp = rng.choice(n, size=4000, p=mix_p)
    mu_mix = rng.normal(m_loo[comp], np.sqrt(1.0 / (n - 1))).reshape(4, -1)
    ll_mix = norm.logpdf(y, mu_mix[..., None])
    with pytest.warns(UserWarning, match="chains disagree"):
        res = loo_adapt.loo(read_dict({"log_lik": ll_post}, method="mcmc"),
                            estimator="mixis",
                            mixis_draws=read_dict({"log_lik": ll_mix}, method="mcmc"))
    pw = res.loo_adapt
    assert (pw.method[flagged] == "mixis").all() and pw.reliable.all()
    assert (pw.verified_by == "mixis_mcse").all()
    z = (pw.elpd_i - truth) / pw.mcse_elpd_i
    assert np.sqrt(np.mean(z**2)) < 2.0


def test_divergent_transitions_in_the_posterior_fit_are_warned_and_noted():
    """Stan's divergent transitions (``divergent__``) in the fit loo() is given: one warning
    with their count and a note in the result; the estimates are PSIS's as without them
    (arviz's loo of the same log-likelihood), and a fit without divergences says nothing."""
    ll = healthy(seed=3)
    div = np.zeros((4, 500))
    div[1, [10, 20, 30]] = 1
    div[3, 7] = 1
    draws = read_dict({"log_lik": ll}, "mcmc", sample_stats={"divergent__": div})
    with pytest.warns(UserWarning, match=r"4 divergent transitions in 2000 draws") as caught:
        res = loo_adapt.loo(draws)
    assert sum("divergent transition" in str(w.message) for w in caught) == 1
    assert any("4 divergent transitions" in n for n in res.loo_adapt.notes)
    assert "4 divergent transitions" in str(res.summary())
    idata = az.from_dict(posterior={"mu": np.zeros((4, 500))}, log_likelihood={"log_lik": ll})
    want = az.loo(idata, pointwise=True)
    np.testing.assert_allclose(res.loo_adapt.elpd_i, want.loo_i.values, rtol=0, atol=1e-3)

    quiet = read_dict({"log_lik": ll}, "mcmc", sample_stats={"divergent__": np.zeros((4, 500))})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res0 = loo_adapt.loo(quiet)
    assert not any("divergent" in n for n in res0.loo_adapt.notes)
