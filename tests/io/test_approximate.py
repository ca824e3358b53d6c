"""Approximate posteriors (ADVI, Laplace, Pathfinder) from every container, with the run
settings that decide whether log_p - log_q is an importance ratio (Laplace ``jacobian``,
Pathfinder ``num_paths``). Oracles: pandas reads of the CmdStan CSVs, arviz's own readers,
and the rhs_logistic log posterior recomputed with scipy."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from loo_adapt.draws import Draws
from loo_adapt.io import read_csv, read_draws, write_stan_csv

DATA = Path(__file__).resolve().parents[1] / "data" / "cmdstan"
MODELS = ("logistic_normal", "rhs_logistic", "relu1")
APPROX = {"variational": "advi", "laplace": "laplace", "pathfinder": "pathfinder"}
DENSITY = {"advi": ("log_p__", "log_g__"), "laplace": ("log_p__", "log_q__"),
           "pathfinder": ("lp__", "lp_approx__")}


def _files(model, method):
    files = sorted((DATA / model / method).glob("*.csv"))
    return [f for f in files if "-opt-" not in f.name]


def _frame(path) -> pd.DataFrame:
    df = pd.read_csv(path, comment="#", skipinitialspace=True)
    if "log_g__" in df.columns:  # CmdStan's ADVI mean row
        df = df.iloc[1:].reset_index(drop=True)
    return df


def _arviz_major() -> int:
    import arviz

    return int(arviz.__version__.split(".")[0])


def _check_against_frame(draws: Draws, df: pd.DataFrame):
    """Draws of one chain against the pandas frame: every column, log_p and log_q."""
    assert draws.shape == (1, len(df))
    for col in df.columns:
        if col.endswith("__"):
            continue
        base, *idx = col.split(".")
        value = draws[base][(0, slice(None)) + tuple(int(i) - 1 for i in idx)]
        np.testing.assert_allclose(value, df[col].to_numpy(), rtol=0, atol=1e-9, err_msg=col)
    p, q = DENSITY[draws.method]
    np.testing.assert_allclose(draws.log_p[0], df[p].to_numpy(), rtol=0, atol=1e-9)
    np.testing.assert_allclose(draws.log_q[0], df[q].to_numpy(), rtol=0, atol=1e-9)


# ------------------------------------------------------------------------------------------
# 1. approximate draws from InferenceData / DataTree equal the CSV's
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("stan_method", tuple(APPROX))
def test_arviz0_from_cmdstan_approximate_equals_csv(model, stan_method):
    az = pytest.importorskip("arviz")
    if _arviz_major() >= 1:
        pytest.skip(reason="arviz >= 1 has no from_cmdstan; see the arviz1 tests")
    files = [str(f) for f in _files(model, stan_method)]
    idata = az.from_cmdstan(files, log_likelihood="log_lik")
    draws = read_draws(idata)  # no method=: detected from the attrs / sample_stats
    assert draws.method == APPROX[stan_method]
    assert draws.log_lik_name() == "log_lik"
    _check_against_frame(draws, _frame(files[0]))
    ref = read_csv(files)
    assert draws.config == ref.config
    for name in ref.variables:
        np.testing.assert_allclose(draws[name], ref[name], rtol=0, atol=1e-9)
    if stan_method != "pathfinder":  # the fixture's pathfinder is multi-path (refused)
        np.testing.assert_allclose(draws.log_ratio_offset(), ref.log_ratio_offset(),
                                   rtol=0, atol=1e-9)
    # stating the method gives the same draws (the old path kept the ADVI mean row)
    same = read_draws(idata, method=stan_method)
    np.testing.assert_array_equal(same.log_lik(), draws.log_lik())
    with pytest.raises(ValueError, match="method='mcmc' was requested"):
        read_draws(idata, method="mcmc")


def _tree_from_csv(path, az, *, keep_mean_row: bool):
    """What a user builds with arviz 1.x from a CmdStan CSV (arviz 0.x's stat names)."""
    df = pd.read_csv(path, comment="#", skipinitialspace=True)
    if not keep_mean_row and "log_g__" in df.columns:
        df = df.iloc[1:]
    cols = lambda prefix: [c for c in df.columns if c.split(".")[0] == prefix]  # noqa: E731
    posterior = {}
    for name in dict.fromkeys(c.split(".")[0] for c in df.columns if not c.endswith("__")):
        if name == "log_lik":
            continue
        names = cols(name)
        block = df[names].to_numpy()
        if names == [name]:
            posterior[name] = block[None, :, 0]
            continue
        # Stan's columns run first index fastest: a Fortran-order reshape
        shape = np.max([[int(i) for i in n.split(".")[1:]] for n in names], axis=0)
        posterior[name] = block.reshape((1, len(df), *shape), order="F")
    stat_names = {"lp__": "lp", "log_p__": "log_p", "log_g__": "log_g", "log_q__": "log_q",
                  "lp_approx__": "lp_approx"}
    sample_stats = {stat_names[c]: df[c].to_numpy()[None] for c in df.columns if c in stat_names}
    return az.from_dict({
        "posterior": posterior,
        "log_likelihood": {"log_lik": df[cols("log_lik")].to_numpy()[None]},
        "sample_stats": sample_stats,
    })


@pytest.mark.arviz1
@pytest.mark.parametrize("model", ("logistic_normal", "relu1"))
@pytest.mark.parametrize("stan_method", ("variational", "laplace"))
def test_arviz1_datatree_approximate_equals_csv(model, stan_method, tmp_path):
    az = pytest.importorskip("arviz")
    if _arviz_major() < 1:
        pytest.skip(reason="needs arviz >= 1 (DataTree); the CI runs it under python3.12")
    (f,) = _files(model, stan_method)
    ref = read_csv(f)
    for keep in (True, False):
        tree = _tree_from_csv(f, az, keep_mean_row=keep)
        draws = read_draws(tree)
        assert draws.method == APPROX[stan_method]
        _check_against_frame(draws, _frame(f))
        np.testing.assert_allclose(draws.log_ratio_offset(), ref.log_ratio_offset(),
                                   rtol=0, atol=1e-9)
    # the same tree through a netCDF file
    path = tmp_path / "fit.nc"
    tree.to_netcdf(path)
    _check_against_frame(read_draws(path), _frame(f))


def test_datatree_approximate_without_stats_needs_densities():
    import xarray as xr

    ref = read_csv(_files("logistic_normal", "laplace"))
    post = xr.Dataset({"alpha": (("chain", "draw"), ref["alpha"])})
    ll = xr.Dataset({"log_lik": (("chain", "draw", "obs"), ref["log_lik"])})
    tree = xr.DataTree.from_dict({"posterior": post, "log_likelihood": ll})
    assert read_draws(tree).method == "mcmc"  # nothing says otherwise
    with pytest.raises(ValueError, match="lack the column"):
        read_draws(tree, method="laplace")
    d = read_draws(tree, method="laplace", log_p=ref.log_p, log_q=ref.log_q)
    np.testing.assert_array_equal(d.log_ratio_offset(), (ref.log_p - ref.log_q).ravel())


# ------------------------------------------------------------------------------------------
# 2. the draws' origin
# ------------------------------------------------------------------------------------------


def test_method_detected_or_stated():
    import cmdstanpy

    for stan_method, method in {**APPROX, "sample": "mcmc", "optimize": "other"}.items():
        files = [str(f) for f in _files("relu1", stan_method)]
        assert read_draws(files).method == method
        if stan_method != "laplace":  # the Laplace file names its mode file relative to DATA
            assert read_draws(cmdstanpy.from_csv(files)).method == method
    ll = np.random.default_rng(0).normal(size=(100, 4))
    assert read_draws(ll).method == "mcmc"
    d = read_draws(ll, method="variational")
    assert d.method == "advi"
    with pytest.raises(ValueError, match="need log_p and log_q"):
        d.log_ratio_offset()
    with pytest.raises(ValueError, match="method= is required"):
        read_draws({"log_lik": ll[None]})
    assert read_draws({"log_lik": ll[None]}, method="pathfinder").method == "pathfinder"


# ------------------------------------------------------------------------------------------
# 5. Laplace jacobian
# ------------------------------------------------------------------------------------------


def _rhs_log_posterior(draws: Draws) -> np.ndarray:
    """log p(theta, y) of rhs_logistic.stan on the constrained scale, with scipy."""
    data = json.loads((DATA / "rhs_logistic.data.json").read_text())
    X, y = np.asarray(data["X"], float), np.asarray(data["y"], float)
    beta0, z = draws.flat("beta0")[:, 0], draws.flat("z")
    tau, lam, caux = draws.flat("tau"), draws.flat("lambda"), draws.flat("caux")
    c = data["slab_scale"] * np.sqrt(caux)
    lam_t = np.sqrt(c[:, None] ** 2 * lam**2 / (c[:, None] ** 2 + tau[:, None] ** 2 * lam**2))
    beta = z * lam_t * tau[:, None]
    eta = beta @ X.T + beta0[:, None]
    half = 0.5 * data["slab_df"]
    return (
        stats.norm.logpdf(beta0, 0, data["scale_icept"])
        + stats.norm.logpdf(z).sum(axis=1)
        + stats.t.logpdf(lam, data["nu_local"]).sum(axis=1)
        + stats.t.logpdf(tau, data["nu_global"], scale=data["scale_global"])
        + stats.invgamma.logpdf(caux, half, scale=half)
        + (y * eta - np.logaddexp(0, eta)).sum(axis=1)
    )


def _rhs_log_jacobian(draws: Draws) -> np.ndarray:
    """log |det J| of x = exp(u) for the lower=0 parameters tau, lambda, caux."""
    return (np.log(draws.flat("tau")) + np.log(draws.flat("lambda")).sum(axis=1)
            + np.log(draws.flat("caux")))


def test_cmdstan_laplace_log_p_includes_the_jacobian():
    """CmdStan's jacobian=true log_p__ is log p(x(u)) + log|J(u)| up to a constant (propto):
    the oracle that decides how a jacobian=false file must be corrected."""
    draws = read_csv(_files("rhs_logistic", "laplace"))
    assert draws.config["jacobian"] == "true"
    full = _rhs_log_posterior(draws) + _rhs_log_jacobian(draws)
    diff = draws.log_p.ravel() - full
    assert np.ptp(diff) < 0.05  # a constant, up to the 6 significant digits of the CSV
    without = draws.log_p.ravel() - _rhs_log_posterior(draws)
    assert np.ptp(without) > 10  # the Jacobian is far from constant on these draws


@pytest.mark.parametrize("flag", ("false", "0"))
def test_laplace_jacobian_false_refused_or_corrected(tmp_path, flag):
    import cmdstanpy

    ref = read_csv(_files("rhs_logistic", "laplace"))
    log_jac = _rhs_log_jacobian(ref)
    # the jacobian=false run: log_p__ without the Jacobian (same draws, same proposal)
    log_p = ref.log_p - log_jac.reshape(ref.shape)
    no_jac = replace(ref, log_p=log_p, sample_stats={**ref.sample_stats, "log_p__": log_p},
                     config={"jacobian": flag})
    opt = next((DATA / "rhs_logistic" / "laplace").glob("*-opt-*.csv"))
    (path,) = write_stan_csv(no_jac, tmp_path, "nojac", model="rhs_logistic",
                             config={"mode": opt, "draws": ref.n_draws})
    assert re.search(rf"^#     jacobian = {flag}$", path.read_text(), re.M)
    np.testing.assert_array_equal(pd.read_csv(path, comment="#")["log_p__"], log_p[0])
    for source in (path, cmdstanpy.from_csv([str(path)])):
        draws = read_draws(source)
        assert draws.config["jacobian"] == "false"
        with pytest.raises(ValueError, match="jacobian=false.*jacobian=True.*log_jacobian="):
            draws.log_ratio_offset()
        fixed = read_draws(source, log_jacobian=log_jac)
        np.testing.assert_allclose(fixed.log_ratio_offset(), ref.log_ratio_offset(),
                                   rtol=0, atol=1e-9)
    # the corrected ratio against the scipy log posterior: p(x(u)) |J(u)| / q(u) up to a constant
    indep = _rhs_log_posterior(ref) + log_jac - ref.log_q.ravel()
    assert np.ptp(fixed.log_ratio_offset() - indep) < 0.05
    with pytest.raises(ValueError, match="only for Laplace draws made with jacobian=false"):
        read_draws(_files("rhs_logistic", "laplace"), log_jacobian=log_jac)


# ------------------------------------------------------------------------------------------
# 6. Pathfinder paths, failed fits
# ------------------------------------------------------------------------------------------


def test_single_path_pathfinder_kept_multi_path_refused(tmp_path):
    (f,) = _files("logistic_normal", "pathfinder")
    multi = read_csv(f)
    with pytest.raises(ValueError, match="PSIS-resampled from 4 paths.*num_paths=1.*"
                                         "psis_resample=False"):
        multi.log_ratio_offset()
    single = replace(multi, config={"num_paths": "1", "psis_resample": "false"})
    (path,) = write_stan_csv(single, tmp_path, "single", model="logistic_normal")
    draws = read_csv(path)
    assert draws.config == {"num_paths": "1", "psis_resample": "false"}
    df = pd.read_csv(f, comment="#", skipinitialspace=True)
    np.testing.assert_array_equal(draws.log_ratio_offset(),
                                  df["lp__"].to_numpy() - df["lp_approx__"].to_numpy())
    pooled = replace(multi, config={"num_paths": "4", "psis_resample": "false"})
    with pytest.raises(ValueError, match="pooled from 4 paths"):
        pooled.log_ratio_offset()


def test_cmdstanpy_fit_without_draws(monkeypatch):
    import cmdstanpy

    monkeypatch.chdir(DATA)
    files = [str(f.relative_to(DATA)) for f in _files("logistic_normal", "laplace")]
    fit = cmdstanpy.from_csv(files)
    # what cmdstanpy hands back for a Laplace run that failed inside CmdStan
    monkeypatch.setattr(fit, "draws", lambda *a, **k: np.empty((0, 0)))
    with pytest.raises(ValueError, match="CmdStanLaplace holds no draws .*fail inside CmdStan"):
        read_draws(fit)
