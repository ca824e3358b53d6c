"""Refits settle a PSIS / MixIS disagreement (`loo_adapt.estimators.arbiter`) and calibrate
MixIS's MCSE (`loo_adapt.estimators.spot_check`), against closed-form LOO.  Two independent
normal means with flat priors: y_i ~ N(mu_A, 1) for 20 rows, y_i ~ N(mu_B, 1) for 5 rows, one
of them an outlier; mu_g | y_-i ~ N(m_-i, 1/(n_g - 1)) and p(y_i | y_-i) = N(y_i | m_-i,
1 + 1/(n_g - 1)).  The mixture posterior is sampled exactly (a mixture of the leave-one-out
posteriors with weights 1 / p(y_i | y_-i)), and the refits are exact draws of the
leave-one-out posteriors (a refit_fn), independent of both."""

import warnings

import numpy as np
import pytest
from scipy.stats import norm

import loo_adapt
from loo_adapt.io.readers import read_dict

N_A, N_B = 20, 5
N = N_A + N_B
GROUP = np.repeat([0, 1], [N_A, N_B])


def _problem(seed=4):
    rng = np.random.default_rng(seed)
    y = np.concatenate([rng.normal(size=N_A), rng.normal(2.0, 1.0, size=N_B)])
    y[N_A] = 6.0  # the outlier: its term dominates sum_j 1 / l_j
    m_loo = np.array([np.delete(y[GROUP == GROUP[i]], np.flatnonzero(
        np.flatnonzero(GROUP == GROUP[i]) == i)).mean() for i in range(N)])
    n_g = np.where(GROUP == 0, N_A, N_B)
    truth = norm.logpdf(y, m_loo, np.sqrt(1.0 + 1.0 / (n_g - 1)))
    return rng, y, m_loo, truth


def _ll(y, mu_a, mu_b):
    mu = np.where(GROUP == 0, mu_a[..., None], mu_b[..., None])
    return norm.logpdf(y, mu)


def _posterior(rng, y, narrow=1.0):
    """Posterior draws; ``narrow`` < 1 shrinks mu_A's spread (four chains that agree and all
    under-explore, which R-hat cannot see)."""
    mu_a = y[:N_A].mean() + narrow * rng.normal(size=(4, 1000)) / np.sqrt(N_A)
    mu_b = y[N_A:].mean() + rng.normal(size=(4, 1000)) / np.sqrt(N_B)
    return _ll(y, mu_a, mu_b)


def _mixture(rng, y, m_loo, truth, narrow=1.0):
    """Exact mixture draws (``narrow`` < 1 shrinks every mu_A draw towards its centre)."""
    comp = rng.choice(N, size=4000, p=np.exp(-truth - np.logaddexp.reduce(-truth)))
    post_a = y[:N_A].mean() + rng.normal(size=4000) / np.sqrt(N_A)
    post_b = y[N_A:].mean() + rng.normal(size=4000) / np.sqrt(N_B)
    loo_mu = rng.normal(m_loo[comp], np.sqrt(1.0 / (np.where(GROUP == 0, N_A, N_B)[comp] - 1)))
    in_a = GROUP[comp] == 0
    mu_a = np.where(in_a, loo_mu, post_a)
    centre = np.where(in_a, m_loo[comp], y[:N_A].mean())
    mu_a = centre + narrow * (mu_a - centre)
    mu_b = np.where(in_a, post_b, loo_mu)
    return _ll(y, mu_a.reshape(4, -1), mu_b.reshape(4, -1))


def _refit_fn(y, m_loo, seed=5):
    rng = np.random.default_rng(seed)

    def refit(i):
        n_g = N_A if GROUP[i] == 0 else N_B
        mu = rng.normal(m_loo[i], np.sqrt(1.0 / (n_g - 1)), size=(4, 1000))
        return norm.logpdf(y[i], mu)

    return refit


def _loo(ll_post, ll_mix, refit_fn, max_refits=5):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = loo_adapt.loo(read_dict({"log_lik": ll_post}, method="mcmc"),
                            mixis_draws=read_dict({"log_lik": ll_mix}, method="mcmc"),
                            refit_kwargs={"refit_fn": refit_fn, "max_refits": max_refits,
                                          "n_jobs": 1, "progress": False})
    return res.loo_adapt, [str(w.message) for w in caught]


def test_refits_that_agree_with_mixis_restore_the_rows_a_biased_posterior_fit_cost():
    """The posterior fit's mu_A at 40% of its spread: PSIS's easy rows disagree with MixIS
    in sum, far beyond both MCSEs, and MixIS leaves them unverified; three exact refits of
    disputed rows agree with MixIS and not with PSIS (enough: no more judges are refitted),
    so the rest get MixIS back, verified, within its MCSE of the closed form."""
    rng, y, m_loo, truth = _problem()
    pw, _ = _loo(_posterior(rng, y, 0.4), _mixture(rng, y, m_loo, truth), _refit_fn(y, m_loo))
    lost = [h for h in pw.history if h["estimator"] == "mixis"][0]
    assert sum(str(r).startswith("PSIS and MixIS disagree") for r in lost["reason"]) >= 5
    assert pw.reliable.all()
    assert (pw.method == "refit").sum() == 3
    back = pw.method == "mixis"
    assert back.sum() == N - 3 and (pw.verified_by[back] == "mixis_mcse").all()
    z = (pw.elpd_i - truth) / pw.mcse_elpd_i
    assert np.sqrt(np.mean(z[back] ** 2)) < 2.0
    assert any("settle the PSIS / MixIS disagreement for the mixture fit" in n
               for n in pw.notes)


def test_refits_that_disagree_with_mixis_leave_the_rows_unverified():
    """Now the mixture fit is the one off (its mu_A draws at 40% of their spread) and the
    posterior fit is right: the refits disagree with MixIS, nothing is restored, no MixIS row
    stays verified (the outlier's included), a note says so."""
    rng, y, m_loo, truth = _problem()
    pw, _ = _loo(_posterior(rng, y), _mixture(rng, y, m_loo, truth, narrow=0.4),
                 _refit_fn(y, m_loo))
    lost = [h for h in pw.history if h["estimator"] == "mixis"][0]
    n_lost = sum(str(r).startswith("PSIS and MixIS disagree") for r in lost["reason"])
    assert n_lost >= 5
    assert (pw.method[pw.reliable] == "refit").all()
    assert (~pw.reliable).sum() == N - 5
    assert any("against the mixture fit" in n for n in pw.notes)


@pytest.mark.parametrize("max_refits", [0, 2])
def test_fewer_than_three_refits_restore_nothing(max_refits):
    """A budget below three refits cannot judge: the disputed rows stay unverified (the
    refits the budget allows go to the refit stage)."""
    rng, y, m_loo, truth = _problem()
    pw, _ = _loo(_posterior(rng, y, 0.4), _mixture(rng, y, m_loo, truth), _refit_fn(y, m_loo),
                 max_refits=max_refits)
    mix = [h for h in pw.history if h["estimator"] == "mixis"][0]
    lost = np.zeros(N, dtype=bool)
    lost[mix["rows"]] = [str(r).startswith("PSIS and MixIS disagree") for r in mix["reason"]]
    left = lost & (pw.method != "refit")
    assert left.sum() >= 5 and not pw.reliable[left].any()
    assert (pw.method == "refit").sum() == max_refits
    assert not any(h["estimator"] == "refit_arbiter" for h in pw.history)


def test_the_judges_count_against_the_refit_budget():
    """With a budget of 8, three judges settle the disagreement and the refit stage gets the
    five refits left (every lost row is then verified: nothing is left for it)."""
    rng, y, m_loo, truth = _problem()
    pw, _ = _loo(_posterior(rng, y, 0.4), _mixture(rng, y, m_loo, truth), _refit_fn(y, m_loo),
                 max_refits=8)
    assert (pw.method == "refit").sum() == 3 and pw.reliable.all()


def _spot(ll_post, ll_mix, refit_fn, k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = loo_adapt.loo(read_dict({"log_lik": ll_post}, method="mcmc"),
                            mixis_draws=read_dict({"log_lik": ll_mix}, method="mcmc"),
                            mixis_pool_khat=None, mixis_spot_checks=k, seed=2,
                            refit_kwargs={"refit_fn": refit_fn, "max_refits": k, "n_jobs": 1,
                                          "progress": False})
    return res.loo_adapt


def test_spot_checks_widen_an_mcse_the_mixture_draws_cannot_see():
    """Mixture draws whose mu_A is 70% of its spread (an error the mixture's own MCSE cannot
    see: its rows are off by several MCSEs): three spot-check refits measure it and MixIS's
    MCSEs grow until its rows' z against the closed form is near 1; without spot checks
    they stay several times too small."""
    rng, y, m_loo, truth = _problem()
    ll_post, ll_mix = _posterior(rng, y), _mixture(rng, y, m_loo, truth, narrow=0.7)
    plain = _spot(ll_post, ll_mix, _refit_fn(y, m_loo), 0)
    spot = _spot(ll_post, ll_mix, _refit_fn(y, m_loo), 3)
    mix = spot.method == "mixis"
    assert (spot.method == "refit").sum() == 3 and mix.sum() == N - 3

    def rms_z(pw):
        z = (pw.elpd_i[mix] - truth[mix]) / pw.mcse_elpd_i[mix]
        return float(np.sqrt(np.mean(z**2)))

    assert rms_z(plain) > 2.0
    assert rms_z(spot) < 0.6 * rms_z(plain)
    assert np.all(spot.mcse_elpd_i[mix] >= plain.mcse_elpd_i[mix])
    assert any(n.startswith("Spot checks") for n in spot.notes)


def test_spot_checks_leave_a_calibrated_mcse_nearly_alone():
    """Exact mixture draws: the MCSE is right, the spot checks never shrink it and widen it
    by little (a mean of three squared z's is near 1)."""
    rng, y, m_loo, truth = _problem()
    ll_post, ll_mix = _posterior(rng, y), _mixture(rng, y, m_loo, truth)
    plain = _spot(ll_post, ll_mix, _refit_fn(y, m_loo), 0)
    spot = _spot(ll_post, ll_mix, _refit_fn(y, m_loo), 3)
    mix = spot.method == "mixis"
    ratio = spot.mcse_elpd_i[mix] / plain.mcse_elpd_i[mix]
    assert np.all(ratio >= 1.0) and np.all(ratio < 2.0)
    assert spot.reliable.all()


def test_spot_checks_whose_refits_all_crash_say_so():
    """Every spot-check refit raises: nothing is calibrated, and the summary's notes say it
    (the refits' error included) instead of passing over it."""
    rng, y, m_loo, truth = _problem()

    def crash(i):
        raise RuntimeError("refit crashed")

    pw = _spot(_posterior(rng, y), _mixture(rng, y, m_loo, truth), crash, 3)
    note = [n for n in pw.notes if n.startswith("Spot checks")]
    assert len(note) == 1 and "not calibrated" in note[0] and "refit crashed" in note[0]
    assert (pw.method != "refit").all()


def test_more_judges_are_refitted_when_the_first_cannot_decide():
    """The first two judges' refits crash: one success cannot judge, so two more disputed
    rows are refitted and the three successes settle it; the crashed rows keep MixIS's
    estimate, unverified with the refit's error, for the refit stage."""
    rng, y, m_loo, truth = _problem()
    good = _refit_fn(y, m_loo)
    calls = []

    def flaky(i):
        calls.append(i)
        if len(calls) <= 2:
            raise RuntimeError("refit crashed")
        return good(i)

    pw, _ = _loo(_posterior(rng, y, 0.4), _mixture(rng, y, m_loo, truth), flaky, max_refits=5)
    arb = [h for h in pw.history if h["estimator"] == "refit_arbiter"][0]
    assert len(calls) >= 5 and (pw.method == "refit").sum() >= 3
    assert sum("refit crashed" in str(r) for r in arb["reason"]) == 2
    assert any("settle the PSIS / MixIS disagreement for the mixture fit" in n
               for n in pw.notes)
