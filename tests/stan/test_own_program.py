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


def test_recommended_call_on_a_users_own_program():
    data = _data()
    program = StanProgram(PROGRAM, data, backend="stanli")
    fit = program.fit(chains=4, warmup=500, draws=500, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        psis = loo_adapt.loo(fit, estimator="psis").loo_adapt
        res = loo_adapt.loo(fit, program=program, seed=4, progress=False,
                            refit_kwargs={"max_refits": 40, "n_jobs": 1})
    pw = res.loo_adapt
    assert pw.checked_for_bias.all(), pw.reason[~pw.checked_for_bias]
    assert set(pw.method) <= {"mixis", "mixis+psis", "refit"}
    # LOO predictive on every row: P(y_i = 1 | y_-i) and exp(elpd_i) = P(observed y_i)
    y = np.asarray(data["y"])
    assert np.isfinite(pw.loo_prob).all()
    p_obs = np.where(y == 1, pw.loo_prob, 1 - pw.loo_prob)
    rows = pw.method != "refit"
    np.testing.assert_allclose(np.log(p_obs[rows]), pw.elpd_i[rows], atol=1e-8)
    pit = loo_pit(res, y, "y_rep", draws=fit, seed=1)
    assert np.isfinite(pit.pit).all() and ((pit.pit >= 0) & (pit.pit <= 1)).all()
    # PSIS is easy here: the totals agree within their Monte Carlo error
    se = np.hypot(pw.estimates()["mcse_elpd_loo"], psis.estimates()["mcse_elpd_loo"])
    assert abs(pw.estimates()["elpd_loo"] - psis.estimates()["elpd_loo"]) < 3 * se
