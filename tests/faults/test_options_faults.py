"""Issue 22.2: every numeric option is checked before any work: NaN, inf, a wrong shape or
type is one clear error naming the option (``reff=NaN`` silently became 1.0).

Independent expectation: the error and its wording; nothing is computed.
"""

import numpy as np
import pytest
from cli_run import run_cli as _run

import loo_adapt
from loo_adapt.core.psis import psislw
from loo_adapt.kfold import kfold
from loo_adapt.stan.refit import refit_loo
from loo_adapt.subsample import loo_subsample

NAN, INF = float("nan"), float("inf")
LL = -np.abs(np.random.default_rng(0).normal(1.0, 0.3, size=(4, 100, 10)))


def one_nan(n=10):
    r = np.full(n, 0.9)
    r[3] = np.nan
    return r


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"reff": NAN}, "reff must be finite and > 0"),
    ({"reff": one_nan()}, r"reff must be finite and > 0.*observation\(s\) \[3\]"),
    ({"r_eff": one_nan()}, "reff must be finite"),
    ({"reff": INF}, "reff must be finite"),
    ({"reff": 0.0}, "reff must be finite and > 0"),
    ({"reff": -1.0}, "reff must be finite and > 0"),
    ({"reff": np.ones(3)}, r"one value per observation \(10\)"),
    ({"reff": np.ones((10, 1))}, "reff must be None, a positive number or a 1-D"),
    ({"reff": True}, "reff must be None"),
    ({"reff": "1"}, "reff must be None"),
    ({"khat_threshold": NAN}, "khat_threshold"),
    ({"mixis_max_mcse": INF}, "mixis_max_mcse"),
    ({"mixis_pool_khat": NAN}, "mixis_pool_khat"),
    ({"rho": NAN}, "rho"),
    ({"rho": [0.5, INF]}, "rho"),
    ({"rho": "a"}, "rho"),
    ({"seed": 1.5}, "seed"),
    ({"seed": -1}, "seed"),
    ({"refit_kwargs": {"max_seconds": INF}}, "max_seconds"),
    ({"refit_kwargs": {"timeout": NAN}}, "timeout"),
    ({"refit_kwargs": {"max_rhat": NAN}}, "max_rhat"),
    ({"refit_kwargs": {"min_ess": INF}}, "min_ess"),
    ({"refit_kwargs": {"chains": 1.5}}, "chains"),
    ({"refit_kwargs": {"max_refits": NAN}}, "max_refits"),
])
def test_loo_refuses_bad_numbers(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        loo_adapt.loo(LL, **kwargs)


@pytest.mark.parametrize("r_eff", [NAN, one_nan(), np.array([0.9, -1.0] * 5), "x", [True] * 10])
def test_psis_core_refuses_bad_r_eff(r_eff):
    """R loo replaces NA by 1 with a message; here a NaN is never read as 1."""
    with pytest.raises((ValueError, TypeError), match="r_eff"):
        psislw(-LL.reshape(400, 10), r_eff=r_eff)


def _refit_fn(i):
    return np.log(np.full((2, 50), 0.25))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"max_rhat": INF}, "max_rhat"), ({"max_rhat": NAN}, "max_rhat"),
    ({"min_ess": NAN}, "min_ess"), ({"min_ess": INF}, "min_ess"),
])
def test_refit_and_kfold_thresholds(kwargs, match):
    with pytest.raises(ValueError, match=match):
        refit_loo([1], refit_fn=_refit_fn, n_jobs=1, progress=False, **kwargs)
    with pytest.raises(ValueError, match=match):
        kfold(refit_fn=lambda rows, seed: np.zeros((2, 50, len(rows))), n_obs=10, K=2,
              log_lik=LL, n_jobs=1, progress=False, **kwargs)


Y = np.random.default_rng(1).normal(size=50)
THETA = np.random.default_rng(2).normal(size=(400, 1))


def _ll(theta, idx):
    return -0.5 * (Y[idx][None, :] - theta) ** 2


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"r_eff": NAN}, "r_eff"),
    ({"r_eff": one_nan(50)}, r"r_eff.*observation\(s\) 3"),
    ({"observations": 10.5}, "observations"),
    ({"observations": NAN}, "observations"),
    ({"observations": INF}, "observations"),
    ({"approximation_draws": 0}, "approximation_draws"),
    ({"approximation_draws": NAN}, "approximation_draws"),
    ({"chains": 0}, "chains"),
    ({"chains": NAN}, "chains"),
    ({"seed": NAN}, "seed"),
])
def test_subsample_refuses_bad_numbers(kwargs, match):
    args = {"observations": 20} | kwargs
    with pytest.raises((ValueError, TypeError), match=match):
        loo_subsample(_ll, THETA, n_obs=50, **args)


@pytest.mark.parametrize(("flag", "value"), [("--prior-sd", "nan"), ("--prior-sd", "inf"),
                                             ("--prior-sd", "-1"), ("--scale-icept", "nan"),
                                             ("--seed", "-3")])
def test_cli_numeric_flags(capsys, tmp_path, flag, value):
    """A NaN / inf / negative number is a usage error (exit 2) naming the flag."""
    rc, _, err = _run(capsys, "evaluate", tmp_path / "x.csv", "--data", tmp_path / "d.json",
                      "--model", "logistic", "--out", tmp_path / "rep", flag, value)
    assert rc == 2 and flag in err and "Traceback" not in err
