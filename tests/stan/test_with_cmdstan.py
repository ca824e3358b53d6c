"""Runs only where CmdStan is installed (issue 15): every approximate method of a real CmdStan
run through `loo()`, against the same run's CSV files and the brute-force truth.

A maintainer with CmdStan runs it with
    python -m cmdstanpy.install_cmdstan     # once
    python -m pytest tests/stan/test_with_cmdstan.py tests/stan/test_refit.py -k cmdstan -v
Elsewhere every test here is skipped with that reason (CmdStan cannot be installed on the
CI machine: its installer needs GitHub).  Compile-once refits are tested in test_refit.py.
"""

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import loo_adapt
from loo_adapt.stan import backends

pytestmark = pytest.mark.skipif(
    not backends.cmdstan_available(),
    reason="needs CmdStan (python -m cmdstanpy.install_cmdstan); not installable on CI")

DATA = Path(__file__).resolve().parents[1] / "data" / "cmdstan"
TRUTH = np.loadtxt(DATA / "truth" / "logistic_normal.csv", delimiter=",", skiprows=1)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """Compiled in a temporary folder: beside the fixture its executable's path would be
    the fixture folder tests/data/cmdstan/logistic_normal itself."""
    import shutil

    import cmdstanpy

    stan_file = tmp_path_factory.mktemp("cmdstan") / "logistic_normal.stan"
    shutil.copy(DATA / "logistic_normal.stan", stan_file)
    return cmdstanpy.CmdStanModel(stan_file=str(stan_file))


@pytest.fixture(scope="module")
def data():
    return json.loads((DATA / "logistic_normal.data.json").read_text())


def _loo(obj, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return loo_adapt.loo(obj, **kw).loo_adapt


def _same_as_its_csvs(fit, tmp_path):
    """The fit and its CSV files (kept through cmdstanpy's public save_csvfiles) give the
    same LOO."""
    fit.save_csvfiles(str(tmp_path))
    a = _loo(fit)
    b = _loo(sorted(str(p) for p in tmp_path.glob("*.csv") if "-opt-" not in p.name))
    np.testing.assert_allclose(a.elpd_i, b.elpd_i, rtol=0, atol=1e-9)
    return a


@pytest.mark.parametrize("algorithm", ["meanfield", "fullrank"])
def test_advi(model, data, algorithm, tmp_path):
    fit = model.variational(data=data, algorithm=algorithm, seed=1, draws=4000,
                            require_converged=False)
    res = _same_as_its_csvs(fit, tmp_path)
    assert res.draws_method == "advi" and np.isfinite(res.pareto_k_pq)
    assert "p/q" in loo_adapt.loo(fit).summary()


def test_laplace_with_and_without_jacobian(model, data, tmp_path):
    mode = model.optimize(data=data, seed=1, jacobian=True)
    fit = model.laplace_sample(data=data, mode=mode, draws=4000, seed=1, jacobian=True)
    res = _same_as_its_csvs(fit, tmp_path)
    assert res.draws_method == "laplace"
    # what the package says of these draws matches their error against brute force: no row
    # is called verified (PSIS on p/q with k-hat below the threshold is not a check for
    # bias), and the rows it flags (k-hat above) carry most of the error
    err = res.elpd_i - TRUTH[:, 1]
    assert not res.checked_for_bias.any()
    flagged = ~res.reliable
    assert flagged.any() and abs(err[flagged].sum()) > abs(err[~flagged].sum())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = loo_adapt.loo(fit).summary()
    assert "Every observation has a reliable estimate" not in text
    mode0 = model.optimize(data=data, seed=1, jacobian=False)
    fit0 = model.laplace_sample(data=data, mode=mode0, draws=1000, seed=1, jacobian=False)
    with pytest.raises(ValueError, match="jacobian"):
        loo_adapt.loo(fit0)


def test_pathfinder_single_path_and_multi_path_refused(model, data, tmp_path):
    one = model.pathfinder(data=data, seed=1, num_paths=1, num_single_draws=4000,
                           psis_resample=False)
    res = _same_as_its_csvs(one, tmp_path)
    assert res.draws_method == "pathfinder"
    many = model.pathfinder(data=data, seed=1)  # CmdStan's default: 4 paths, resampled
    with pytest.raises(ValueError, match="num_paths=1"):
        loo_adapt.loo(many)


def test_trust_path_on_real_cmdstan(model, data, tmp_path):
    """The recommended call on a real CmdStan fit of a user's program: the mixture fit (the
    mixis flag written into the program) and its refits run through CmdStan, with no
    cmdstanpy deprecation warning, every row verified or refitted, within Monte Carlo error
    of the brute-force truth."""
    import logging

    fit = model.sample(data=data, chains=4, iter_sampling=1000, seed=3, show_progress=False)
    program = loo_adapt.StanProgram(model.stan_file, data, backend="cmdstan")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = loo_adapt.loo(fit, program=program, seed=1, progress=False,
                            refit_kwargs={"max_refits": 6, "n_jobs": 2})
    assert not [w for w in caught if "deprecat" in str(w.message).lower()]
    assert logging.getLogger("cmdstanpy").level in (logging.NOTSET, logging.DEBUG,
                                                     logging.INFO, logging.WARNING)
    pw = res.loo_adapt
    assert pw.checked_for_bias.sum() >= pw.n_obs - 6
    est = pw.estimates()
    err = est["elpd_loo"] - TRUTH[:, 1].sum()
    mc = np.hypot(est["mcse_elpd_loo"], np.sqrt(np.sum(TRUTH[:, 2] ** 2)))
    assert abs(err) < 3 * mc, (err, mc)
    assert np.isfinite(pw.loo_prob).all()  # binary y read from the program's data


def test_capped_tree_depth_leaves_no_convergence_warning(model, data, caplog):
    """The easy-row focus caps its fit's tree depth on purpose: cmdstanpy's "Some chains may
    have failed to converge ... iterations at max treedepth" (logged for the same fit run
    directly) must not reach the user as if the fit had failed."""
    import logging

    from loo_adapt.io.readers import read_draws

    fit = model.sample(data=data, chains=2, iter_sampling=200, seed=5, show_progress=False)
    posterior = read_draws(fit)
    program = loo_adapt.StanProgram(model.stan_file, data, backend="cmdstan").with_mixis()
    with caplog.at_level(logging.WARNING, logger="cmdstanpy"):
        model.sample(data=data, chains=2, iter_sampling=200, seed=5, max_treedepth=1,
                     show_progress=False)
    assert any("max treedepth" in r.getMessage() for r in caplog.records)  # the control
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="cmdstanpy"):
        mix = program.fit_mixture(posterior, chains=2, draws=200, seed=5, max_treedepth=1)
    assert mix.n_samples == 400
    assert not any("max treedepth" in r.getMessage() for r in caplog.records)
