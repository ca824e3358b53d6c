"""Which tool evaluates a user's program's log density: stanli's interpreter, else BridgeStan's
compiled model (`loo_adapt.stan.log_density.bridgestan_model`).

The Stan User's Guide's QR regression calls ``qr_thin_Q``, which stanli's interpreter lacks.
Such a program used to be refused by ``loo(fit, program=...)`` as "not loading with its data"
(a ``ProgramMismatchError``), which blamed a correct program. Where BridgeStan can compile it,
it is now used; where it cannot, the error says which tool lacks what.

The end-to-end tests need CmdStan (to sample the program) and a BridgeStan source tree whose
version is the installed ``bridgestan`` package's (``BRIDGESTAN``); elsewhere they are skipped
with that reason. Their oracles: the closed-form leave-one-out predictive of the flat-prior
model (``loo()``), and quadrature over sigma with priors on the QR scale (refits by term).
"""

import os
import pathlib
import sys
import warnings

import numpy as np
import pytest
from scipy import stats

import loo_adapt
from loo_adapt.stan import backends
from loo_adapt.stan.identity import ProgramMismatchError
from loo_adapt.stan.log_density import UnsupportedProgramError, bridgestan_model
from loo_adapt.stan.program import StanProgram

pytest.importorskip("stanli")

QR = pathlib.Path(__file__).resolve().parent / "compiled_programs" / "qr_regression.stan"


def _data(seed=3, n=40, k=3):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, k))
    y = x @ np.array([1.0, -0.5, 0.3])[:k] + rng.normal(size=n)
    x[0], y[0] = [3.0, -2.5, 2.0][:k], 6.0  # a high-leverage outlier
    return {"N": n, "K": k, "x": x.tolist(), "y": y.tolist()}


def _fake_fit(data, rng):
    """Draws of the right shapes (the check stops before it reads their values)."""
    import arviz as az

    n, k = data["N"], data["K"]
    post = {"alpha": rng.normal(size=(2, 50)), "theta": rng.normal(size=(2, 50, k)),
            "sigma": rng.uniform(0.5, 2.0, size=(2, 50))}
    return az.from_dict(posterior=post, log_likelihood={"log_lik": -rng.uniform(
        0.5, 3.0, size=(2, 50, n))})


def test_a_program_stanli_cannot_run_is_not_called_the_fits_mismatch(tmp_path, monkeypatch):
    """No BridgeStan sources (BRIDGESTAN names an empty folder): the error says stanli lacks
    qr_thin_Q and BridgeStan could not compile it, and is no ProgramMismatchError."""
    monkeypatch.setenv("BRIDGESTAN", str(tmp_path / "no_bridgestan"))
    monkeypatch.setenv("LOO_ADAPT_CACHE", str(tmp_path / "cache"))
    data = _data()
    with pytest.raises(UnsupportedProgramError) as info:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loo_adapt.loo(_fake_fit(data, np.random.default_rng(0)),
                          program=StanProgram(QR, data, backend="stanli"))
    assert not isinstance(info.value, ProgramMismatchError)
    text = str(info.value)
    assert "qr_thin_Q" in text and "BridgeStan could not compile it" in text
    assert "BRIDGESTAN" in text


def test_without_bridgestan_the_error_says_to_install_it(monkeypatch):
    """stanli hands out its models through the bridgestan package: without it nothing can
    evaluate the program, and loo() says which extra to install (not a mismatch)."""
    monkeypatch.setitem(sys.modules, "bridgestan", None)  # import bridgestan -> ImportError
    data = _data()
    with pytest.raises(UnsupportedProgramError, match=r"without BridgeStan.*stanli extra"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loo_adapt.loo(_fake_fit(data, np.random.default_rng(0)),
                          program=StanProgram(QR, data, backend="stanli"))


def test_stanli_errors_that_are_not_a_missing_feature_pass_through(tmp_path):
    """Data that does not fit the program is stanli's own error, not a fallback to a
    compiler (the identity check reports it as the data not being the program's)."""
    program = pathlib.Path(__file__).resolve().parent / "programs" / "loop_yrep.stan"
    with pytest.raises(RuntimeError) as info:
        bridgestan_model(program, {"N": 3})
    assert not isinstance(info.value, UnsupportedProgramError)


def _bridgestan_source() -> str | None:
    path = os.environ.get("BRIDGESTAN", "")
    return path if path and (pathlib.Path(path) / "Makefile").is_file() else None


@pytest.mark.skipif(not (backends.cmdstan_available() and _bridgestan_source()),
                    reason="needs CmdStan (to sample the QR program) and a BridgeStan source "
                           "tree of the installed bridgestan's version in BRIDGESTAN; not "
                           "installable on CI")
def test_qr_program_through_bridgestan_against_closed_form_loo(tmp_path, monkeypatch):
    """A CmdStan fit of the QR program and the program: loo() runs (BridgeStan evaluates
    the log density) and matches the closed-form leave-one-out predictive.

    With flat priors on (alpha, theta) and on sigma, the posterior predictive of y_i given
    the other rows is Student-t with nu = (N - 1) - (K + 1) - 1 degrees of freedom,
    location x_i' b_{-i}, scale^2 = S_{-i} / nu * (1 + x_i' (X_{-i}' X_{-i})^{-1} x_i)
    (least squares b_{-i}, residual sum of squares S_{-i}; QR is a linear
    reparameterisation, under which the flat prior stays flat)."""
    import shutil

    import cmdstanpy

    monkeypatch.setenv("LOO_ADAPT_CACHE", str(tmp_path / "cache"))
    data = _data()
    stan_file = tmp_path / QR.name
    shutil.copy(QR, stan_file)
    fit = cmdstanpy.CmdStanModel(stan_file=str(stan_file)).sample(
        data=data, seed=1, show_progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = loo_adapt.loo(fit, program=StanProgram(QR, data), seed=1).loo_adapt
    x, y = np.asarray(data["x"]), np.asarray(data["y"])
    n = y.size
    X = np.c_[np.ones(n), x]
    nu = (n - 1) - X.shape[1] - 1
    truth = np.empty(n)
    for i in range(n):
        keep = np.arange(n) != i
        b, *_ = np.linalg.lstsq(X[keep], y[keep], rcond=None)
        s = np.sum((y[keep] - X[keep] @ b) ** 2)
        h = X[i] @ np.linalg.solve(X[keep].T @ X[keep], X[i])
        truth[i] = stats.t.logpdf(y[i], nu, loc=X[i] @ b, scale=np.sqrt(s / nu * (1 + h)))
    z = (res.elpd_i - truth) / res.mcse_elpd_i
    assert np.all(np.isfinite(z)) and np.sqrt(np.mean(z**2)) < 1.5
    assert np.max(np.abs(z)) < 4.5
    assert abs(res.elpd_i.sum() - truth.sum()) < 4 * res.estimates()["mcse_elpd_loo"]
    assert np.asarray(res.reliable).all()


@pytest.mark.skipif(not (backends.cmdstan_available() and _bridgestan_source()),
                    reason="needs CmdStan (to refit the QR program) and a BridgeStan source "
                           "tree of the installed bridgestan's version in BRIDGESTAN; not "
                           "installable on CI")
def test_qr_program_with_priors_refits_by_term_with_bridgestan(tmp_path, monkeypatch):
    """With proper priors on the QR scale (theta ~ N(0, I)), dropping a row's data changes
    R and so the prior on the regression coefficients: the leave-one-out posterior is the
    full-data target without the row's log_lik term, which `refit_loo` fits through the
    flagged program on CmdStan. Oracle: beta = R^-1 theta ~ N(0, (R'R)^-1) with R from all
    rows, alpha ~ N(0, 10^2), so y | sigma is Gaussian and p(y_i | y_-i) is a ratio of
    marginal likelihoods integrated over sigma ~ Exponential(1) on a grid."""
    from scipy.special import logsumexp

    from loo_adapt.stan.refit import refit_loo

    monkeypatch.setenv("LOO_ADAPT_CACHE", str(tmp_path / "cache"))
    code = QR.read_text().replace(
        "  y ~ normal(Q_ast * theta + alpha, sigma);",
        "  theta ~ normal(0, 1);\n  alpha ~ normal(0, 10);\n  sigma ~ exponential(1);\n"
        "  y ~ normal(Q_ast * theta + alpha, sigma);")
    stan_file = tmp_path / "qr_priors.stan"
    stan_file.write_text(code)
    rng = np.random.default_rng(5)
    n, k = 30, 3
    x = rng.normal(size=(n, k))
    y = x @ np.array([1.0, -0.5, 0.3]) + rng.normal(size=n)
    x[0], y[0] = [3.0, -2.5, 2.0], 9.0
    data = {"N": n, "K": k, "x": x.tolist(), "y": y.tolist()}
    program = StanProgram(stan_file, data)
    assert program.leaves_out_by_term() and "changes the other observations" in (
        program.by_term_reason or "")

    r = np.linalg.qr(x, mode="r") / np.sqrt(n - 1)
    prior_cov = np.linalg.inv(r.T @ r)  # sign-free: (R'R)^-1
    grid = np.linspace(0.05, 6.0, 1200)

    def log_evidence(rows):
        xs = x[rows]
        cov = xs @ prior_cov @ xs.T + 100.0 * np.ones((rows.size, rows.size))
        lv = [stats.multivariate_normal(np.zeros(rows.size), cov + s**2 * np.eye(rows.size))
              .logpdf(y[rows]) for s in grid]
        return logsumexp(np.asarray(lv) + stats.expon.logpdf(grid)) + np.log(grid[1] - grid[0])

    every = log_evidence(np.arange(n))
    truth = np.array([every - log_evidence(np.delete(np.arange(n), i)) for i in (0, 1)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = refit_loo([0, 1], program=program, seed=7, progress=False, n_jobs=1)
    assert res.reliable.all()
    z = (res.elpd_i - truth) / res.mcse_elpd_i
    assert np.all(np.abs(z) < 4), (res.elpd_i, truth, res.mcse_elpd_i)
