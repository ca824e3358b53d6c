"""The issue's user (issue 20): a logistic program of their own, `log_lik` and `y_rep` filled in
one loop, fitted with stanli, then the call every message recommends,
``loo(fit, program=StanProgram("logreg.stan", data))``: every row verified (MixIS's MCSE) or
refitted, a LOO predictive on every row (P(y_i = 1 | y_-i) from the program's y, LOO-PIT
from the mixture fit's y_rep), totals within Monte Carlo error of PSIS where PSIS is easy."""

from __future__ import annotations

import pathlib
import warnings

import numpy as np
import pytest

import loo_adapt
from loo_adapt.expectations import loo_pit
from loo_adapt.stan.program import StanProgram

pytest.importorskip("stanli", reason="the embedded sampler comes with the stanli extra")

PROGRAM = pathlib.Path(__file__).resolve().parent / "programs" / "loop_yrep.stan"


def _data(n=40, d=3, seed=21):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-(0.3 + X @ np.array([1.0, -0.5, 0.2]))))
         ).astype(int)
    return {"N": n, "D": d, "X": X.tolist(), "y": y.tolist()}


def _recommended_call(program, fit_seed):
    """(fit, PSIS's pointwise result, the recommended call's result) for ``program``: a
    4 x 500 stanli fit, then plain PSIS and ``loo(fit, program=program)``; every row of the
    latter verified by MixIS's MCSE or a refit."""
    fit = program.fit(chains=4, warmup=500, draws=500, seed=fit_seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        psis = loo_adapt.loo(fit, estimator="psis").loo_adapt
        res = loo_adapt.loo(fit, program=program, seed=4, progress=False,
                            refit_kwargs={"max_refits": 40, "n_jobs": 1})
    pw = res.loo_adapt
    assert pw.checked_for_bias.all(), pw.reason[~pw.checked_for_bias]
    assert set(pw.method) <= {"mixis", "mixis+psis", "refit"}
    return fit, psis, res


def _agrees_with_psis(pw, psis):
    """PSIS is easy on these data: the totals agree within their Monte Carlo errors."""
    se = np.hypot(pw.estimates()["mcse_elpd_loo"], psis.estimates()["mcse_elpd_loo"])
    assert abs(pw.estimates()["elpd_loo"] - psis.estimates()["elpd_loo"]) < 3 * se


def test_recommended_call_on_a_users_own_program():
    data = _data()
    program = StanProgram(PROGRAM, data, backend="stanli")
    fit, psis, res = _recommended_call(program, 3)
    pw = res.loo_adapt
    # LOO predictive on every row: P(y_i = 1 | y_-i) and exp(elpd_i) = P(observed y_i)
    y = np.asarray(data["y"])
    assert np.isfinite(pw.loo_prob).all()
    p_obs = np.where(y == 1, pw.loo_prob, 1 - pw.loo_prob)
    rows = pw.method != "refit"
    np.testing.assert_allclose(np.log(p_obs[rows]), pw.elpd_i[rows], atol=1e-8)
    pit = loo_pit(res, y, "y_rep", draws=fit, seed=1)
    assert np.isfinite(pit.pit).all() and ((pit.pit >= 0) & (pit.pit <= 1)).all()
    _agrees_with_psis(pw, psis)


def test_a_program_whose_log_lik_is_a_transformed_parameter():
    """``log_lik`` declared in transformed parameters and summed by the model block (no
    generated quantity to copy): the flag goes in, every row is verified, and the total
    agrees with PSIS, which is easy here, within their Monte Carlo errors."""
    data = _data(seed=22)
    program = StanProgram(PROGRAM.with_name("transformed_loglik.stan"), data,
                          backend="stanli")
    _, psis, res = _recommended_call(program, 5)
    assert "target += log_sum_exp(-log_lik_local)" in program.with_mixis().stan_file.read_text()
    _agrees_with_psis(res.loo_adapt, psis)


# ---- a program sized by J, not N (eight schools with tau known): the count of observations
# is the data entry that sizes log_lik, and leaving group j out has a closed form
SCHOOLS = pathlib.Path(__file__).resolve().parent / "programs" / "schools_known_tau.stan"
SCHOOLS_DATA = {"J": 8, "y": [28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0],
                "sigma": [15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0], "tau": 6.0}


def _schools_loo(data, folds=None):
    """log p(y_j | y_-j): y_k ~ N(mu, sigma_k^2 + tau^2) given mu ~ N(0, 5^2), so mu | y_-j is
    normal and y_j | y_-j ~ N(m_-j, v_-j + tau^2 + sigma_j^2); with ``folds`` (a fold label
    per school), log p(y_j | y of the other folds) in the same way."""
    from scipy import stats

    y, s, tau = np.asarray(data["y"]), np.asarray(data["sigma"]), data["tau"]
    folds = np.arange(y.size) if folds is None else np.asarray(folds)
    out = np.empty(y.size)
    for j in range(y.size):
        keep = folds != folds[j]
        prec = 1 / 25 + np.sum(1 / (s[keep] ** 2 + tau**2))
        m = np.sum(y[keep] / (s[keep] ** 2 + tau**2)) / prec
        out[j] = stats.norm.logpdf(y[j], m, np.sqrt(1 / prec + tau**2 + s[j] ** 2))
    return out


def test_program_sized_by_another_name_than_n():
    program = StanProgram(SCHOOLS, SCHOOLS_DATA, backend="stanli")
    assert program.n_obs_var == "J" and program.n_obs == 8
    out = program.data_without(2)
    assert out["J"] == 7 and out["tau"] == 6.0 and "N" not in out
    np.testing.assert_array_equal(out["y"], np.delete(SCHOOLS_DATA["y"], 2))
    np.testing.assert_array_equal(out["sigma"], np.delete(SCHOOLS_DATA["sigma"], 2))
    assert "J=8" in repr(program)
    # named explicitly, and a name that is not in the data
    assert StanProgram(SCHOOLS, SCHOOLS_DATA, backend="stanli", n_obs_var="J").n_obs == 8
    with pytest.raises(ValueError, match="n_obs_var='K' is not a data entry"):
        StanProgram(SCHOOLS, SCHOOLS_DATA, backend="stanli", n_obs_var="K")
    fit = program.fit(chains=4, warmup=500, draws=1000, seed=5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = loo_adapt.loo(fit, program=program, seed=2, progress=False,
                            refit_kwargs={"max_refits": 8, "n_jobs": 1}).loo_adapt
    # theta[J] is per school: log_lik cannot be compared with the model block, and loo says so
    assert any("parameters per observation" in str(w.message)
               and "could not be compared with the model block" in str(w.message)
               for w in caught)
    truth = _schools_loo(SCHOOLS_DATA)
    assert res.checked_for_bias.all(), res.reason
    z = (res.elpd_i - truth) / res.mcse_elpd_i
    assert np.all(np.abs(z) < 4.0), z
    assert abs(res.elpd_i.sum() - truth.sum()) < 3 * res.estimates()["mcse_elpd_loo"] + 0.02


def test_refits_of_a_program_with_a_parameter_per_observation():
    """Dropping school j's data drops theta_j: the refit instead takes log_lik[j] out of the
    full-data target (the flagged program, mixis_rows = [j]); its held-out elpd matches the
    closed form within its Monte Carlo error."""
    from loo_adapt.stan.refit import refit_loo

    program = StanProgram(SCHOOLS, SCHOOLS_DATA, backend="stanli")
    assert program.leaves_out_by_term()
    logistic = StanProgram(PROGRAM, _data(), backend="stanli")
    assert not logistic.leaves_out_by_term()  # no parameter per observation: data dropped
    truth = _schools_loo(SCHOOLS_DATA)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = refit_loo([0, 6], program, draws=2000, seed=4, n_jobs=1, progress=False)
    assert res.reliable.all(), res.reason
    z = (res.elpd_i - truth[[0, 6]]) / res.mcse_elpd_i
    assert np.all(np.abs(z) < 4.0), (res.elpd_i, truth[[0, 6]], res.mcse_elpd_i)


def test_kfold_of_a_program_with_a_parameter_per_observation():
    """Dropping two schools' data drops their theta: each fold's refit takes both schools'
    log_lik terms out of the full-data target (the flagged program with mixis = 2); every
    school's held-out elpd matches the closed form of its fold within its Monte Carlo
    error."""
    program = StanProgram(SCHOOLS, SCHOOLS_DATA, backend="stanli")
    folds = np.array([0, 2, 1, 2, 1, 1, 0, 0])  # the three highest schools in one fold
    truth = _schools_loo(SCHOOLS_DATA, folds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = loo_adapt.kfold(program, folds=folds, draws=2000, seed=4, n_jobs=1,
                              progress=False).loo_adapt
    assert np.all(res.reliable), res.reason
    z = (res.elpd_i - truth) / res.mcse_elpd_i
    assert np.all(np.abs(z) < 4.0), (res.elpd_i, truth, res.mcse_elpd_i)
    # schools 0 and 6 lose 0.17 nats against leaving one school out: told apart
    loo_z = (res.elpd_i - _schools_loo(SCHOOLS_DATA)) / res.mcse_elpd_i
    assert np.all(loo_z[[0, 6]] < -4.0), loo_z


def _loo_recording_warnings(program):
    """(result, warnings) of the default ``loo(fit, program=program)`` on a 4 x 1000 stanli
    fit (seed 1), every warning recorded."""
    fit = program.fit(chains=4, warmup=1000, draws=1000, seed=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = loo_adapt.loo(fit, program=program, seed=1, progress=False,
                            refit_kwargs={"n_jobs": 1})
    return res, caught


# ---- a Poisson regression with one count far out (18 where about 2 is expected): the full
# mixture's draws all sit in that count's leave-one-out posterior, so its MixIS estimates of
# the other rows disagree with PSIS, and a focused fit over those rows replaces every one
POISSON = pathlib.Path(__file__).resolve().parents[1] / "data" / "poisson" / "poisson_yrep.stan"


def test_notes_and_warnings_about_replaced_estimates_are_dropped():
    """The full mixture's PSIS / MixIS disagreement concerns estimates that the focused fit
    then replaces on every row: no warning about it, no note in the summary (its numbers,
    an MCSE widened by the disagreement, no longer describe the result), and every row is
    verified, within its error bar of exact refits (4 x 1000 draws each)."""
    from loo_adapt.estimators.mixis import DISAGREE
    from loo_adapt.stan.heldout import heldout_elpd

    rng = np.random.default_rng(3)
    x = rng.normal(size=40)
    y = rng.poisson(np.exp(0.5 + 0.6 * x))
    y[5] = 18
    data = {"N": 40, "x": x.tolist(), "y": y.tolist()}
    program = StanProgram(POISSON, data, backend="stanli")
    res, caught = _loo_recording_warnings(program)
    pw = res.loo_adapt
    mixis = [h for h in pw.history if h["estimator"] == "mixis"][0]
    # the full mixture's rows were disputed (its warning and note were on their way) ...
    assert sum(str(r).startswith(DISAGREE) for r in mixis["reason"]) >= 30
    assert not (pw.method == "psis").any() and pw.checked_for_bias.all()
    # ... and every one of them was then re-estimated: nothing is said about them
    assert not any("disagree" in str(w.message) for w in caught)
    assert "disagree" not in res.summary()
    assert any("a focused fit over the 39 others" in n for n in pw.notes)
    truth = np.array([heldout_elpd(program.heldout_log_lik(
        program.refit_without(i, seed=100 + i), i).reshape(4, -1))[:2] for i in range(40)])
    z = (pw.elpd_i - truth[:, 0]) / np.hypot(pw.mcse_elpd_i, truth[:, 1])
    assert np.all(np.abs(z) < 4), z
    total = np.hypot(pw.estimates()["mcse_elpd_loo"], np.sqrt(np.sum(truth[:, 1] ** 2)))
    assert abs(pw.elpd_i.sum() - truth[:, 0].sum()) < 3 * total


# ---- an outlying school (y = 75) of a non-centred hierarchical model: left out, its eta is
# drawn from its prior, so its refit's held-out likelihood is heavy-tailed (the tail check
# fails it); the refit stage bridges it with the posterior draws, which sample where that
# likelihood is large
HIERARCHICAL = pathlib.Path(__file__).resolve().parent / "programs" / "hierarchical_multi_decl.stan"


def test_an_outlying_schools_refit_is_bridged_with_the_posterior_draws():
    from scipy import stats

    from loo_adapt.stan.heldout import heldout_elpd

    data = {"J": 8, "y": [28.0, 8.0, -3.0, 75.0, -1.0, 1.0, 18.0, 12.0],
            "sigma": [15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0]}
    program = StanProgram(HIERARCHICAL, data, backend="stanli")
    res, caught = _loo_recording_warnings(program)
    pw = res.loo_adapt
    assert pw.method[3] == "refit" and pw.reliable[3], pw.reason[3]
    # no warning calls the bridged refit unverified
    assert not any("unverified" in str(w.message) for w in caught)
    assert any("bridged with the posterior draws" in n and "[3]" in n for n in pw.notes)
    # the reference: the other seven schools' posterior, theta_3 integrated out
    rest = {"J": 7, "y": [v for j, v in enumerate(data["y"]) if j != 3],
            "sigma": [v for j, v in enumerate(data["sigma"]) if j != 3]}
    other = StanProgram(HIERARCHICAL, rest, backend="stanli").fit(
        chains=4, warmup=1000, draws=10000, seed=2)
    mu, tau = other.flat("mu"), other.flat("tau")
    ll = stats.norm.logpdf(75.0, mu, np.sqrt(tau**2 + 11.0**2)).reshape(4, -1)
    ref, ref_se, _ = heldout_elpd(ll)
    assert abs(pw.elpd_i[3] - ref) < 4 * np.hypot(pw.mcse_elpd_i[3], ref_se), (
        pw.elpd_i[3], pw.mcse_elpd_i[3], ref, ref_se)
