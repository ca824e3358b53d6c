"""`loo_adapt.loo` returns the installed arviz's ELPDData, and arviz's own tools accept it.

Runs under arviz 0.23 (Python 3.11) and, in CI, under arviz >= 1.0 (Python 3.12: `-m arviz1`).
Every arviz function is given our result and arviz's own result on the same draws, and the
two answers are compared.  Fixtures use one chain, where arviz's r_eff is 1 as ours.
"""

import copy
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from scipy.stats import norm

import loo_adapt
from loo_adapt.core.psis_loo import loo_pointwise
from loo_adapt.estimators.psis import initial_result
from loo_adapt.evaluation.arviz import (
    arviz_major,
    khat_from_elpd_data,
    log_weights_matrix,
    pointwise_from_elpd_data,
    to_elpd_data,
)
from loo_adapt.result import PointwiseLoo

pytestmark = [pytest.mark.arviz1, pytest.mark.filterwarnings("ignore::UserWarning")]

az = pytest.importorskip("arviz")
DATA = Path(__file__).resolve().parents[1] / "data" / "cmdstan"
V0 = arviz_major() == 0
# arviz 0.x implements R loo's PSIS; arviz-stats 1.x fits the Pareto tail differently
# (its k-hat differs from R loo's by up to ~0.08 on these fixtures), so there the numbers
# are compared loosely and equality is asserted against our R-loo-validated core instead.
EXACT = V0


def _simulated_log_lik(seed=0, chains=4, draws=250, n=30):
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=(chains, draws, 1))
    y = rng.normal(size=n)
    y[:2] += 6.0  # two outliers give high k-hat
    return -0.5 * (y - mu) ** 2 - 0.5 * np.log(2 * np.pi)


def _normal_model(seed=0, shape=(30,), draws=1000, shift=0.0, outlier=0.0):
    """y_i ~ N(mu, 1), flat prior: the posterior of mu is N(mean(y), 1/n) (exact draws)."""
    rng = np.random.default_rng(seed)
    y = rng.normal(size=shape)
    y.flat[0] += outlier
    mu = y.mean() + shift + rng.normal(size=(1, draws)) / np.sqrt(y.size)
    mu_b = mu.reshape((1, draws) + (1,) * len(shape))
    ll = norm.logpdf(y, loc=mu_b)
    yrep = mu_b + rng.normal(size=(1, draws) + shape)
    return y, mu, ll, yrep


def _container(y, mu, ll, yrep, dims=None, coords=None):
    groups = dict(posterior={"mu": mu}, log_likelihood={"y": ll}, observed_data={"y": y},
                  posterior_predictive={"y": yrep})
    if V0:
        return az.from_dict(**groups, dims=dims, coords=coords)
    from arviz_base import from_dict

    return from_dict(groups, dims=dims, coords=coords)


def _arviz_loo(data, reff=None):
    return az.loo(data, pointwise=True, reff=reff)


def _arviz_loo_ll(log_lik, reff):
    if V0:
        idata = az.from_dict(log_likelihood={"y": log_lik}, posterior={"m": log_lik[..., 0]})
        return az.loo(idata, pointwise=True, reff=reff)
    from arviz_base import from_dict

    dt = from_dict({"posterior": {"m": log_lik[..., 0]}, "log_likelihood": {"y": log_lik}})
    return az.loo(dt, pointwise=True, reff=reff)


def _elpd_i(elpd):
    return elpd["loo_i"] if V0 else elpd.elpd_i


def _elpd_total(elpd):
    return float(elpd["elpd_loo"]) if V0 else float(elpd.elpd)


def _se(elpd):
    return float(elpd["se"]) if V0 else float(elpd.se)


# --------------------------------------------------------------------------- numbers
def test_loo_returns_installed_arviz_elpddata_matching_arviz():
    ll = _simulated_log_lik()
    ours = loo_adapt.loo(ll, reff=1.0)
    theirs = _arviz_loo_ll(ll, reff=1.0)
    ELPDData = type(theirs)
    assert isinstance(ours, ELPDData)
    core = loo_pointwise(ll, r_eff=1.0)
    np.testing.assert_array_equal(np.ravel(_elpd_i(ours)), core.elpd_i)
    np.testing.assert_allclose(np.ravel(_elpd_i(ours)), np.ravel(_elpd_i(theirs)),
                               atol=1e-8 if EXACT else 0.2)
    np.testing.assert_allclose(
        khat_from_elpd_data(ours), khat_from_elpd_data(theirs), atol=1e-6 if EXACT else 0.3
    )
    assert _elpd_total(ours) == pytest.approx(_elpd_total(theirs), abs=1e-8 if EXACT else 1.0)
    n = ll.shape[-1]
    # R loo's SE uses the n-1 variance; arviz 0.x the n variance.
    assert _se(ours) / _se(theirs) == pytest.approx(np.sqrt(n / (n - 1)),
                                                    rel=1e-10 if EXACT else 0.05)


def test_pointwise_arrays_kept_and_equal_to_core():
    ll = _simulated_log_lik(seed=5)
    res = loo_adapt.loo(ll)
    core = loo_pointwise(ll)
    np.testing.assert_array_equal(res.loo_adapt.elpd_i, core.elpd_i)
    np.testing.assert_array_equal(res.loo_adapt.mcse_elpd_i, core.mcse_elpd_i)
    np.testing.assert_array_equal(khat_from_elpd_data(res), core.pareto_k)


def test_cmdstan_csv_through_loo_matches_arviz_on_same_log_lik():
    pytest.importorskip("cmdstanpy")
    files = sorted((DATA / "logistic_normal" / "sample").glob("*.csv"))
    res = loo_adapt.loo([str(f) for f in files], reff=1.0)
    draws = loo_adapt.read_csv([str(f) for f in files])
    theirs = _arviz_loo_ll(draws.log_lik(), reff=1.0)
    np.testing.assert_allclose(np.ravel(_elpd_i(res)), np.ravel(_elpd_i(theirs)),
                               atol=1e-8 if EXACT else 0.01)
    assert int(np.sum(res.loo_adapt.pareto_k > 0.7)) == 29  # as the fixture README states


# --------------------------------------------------------------------------- layout
def test_two_dimensional_observations_keep_dims_and_coords_as_arviz():
    shape = (6, 9)
    y, mu, ll, yrep = _normal_model(seed=1, shape=shape)
    dims = {"y": ["row", "col"]}
    coords = {"row": list("abcdef"), "col": np.arange(9) * 10}
    data = _container(y, mu, ll, yrep, dims=dims, coords=coords)
    ours = loo_adapt.loo(data)
    theirs = _arviz_loo(data)
    for name in ("pareto_k",):
        a, b = ours[name], theirs[name]
        assert a.dims == b.dims == ("row", "col")
        for d in a.dims:
            np.testing.assert_array_equal(a.coords[d].values, b.coords[d].values)
    oi, ti = _elpd_i(ours), _elpd_i(theirs)
    assert oi.dims == ti.dims and oi.shape == shape
    np.testing.assert_allclose(oi.values, ti.values, atol=1e-8 if EXACT else 0.01)
    # element (row "c", col 40) is the same observation in both
    assert float(oi.sel(row="c", col=40)) == pytest.approx(float(ti.sel(row="c", col=40)),
                                                          abs=1e-8 if EXACT else 0.01)
    if V0:
        assert ours.log_weights.dims == ("row", "col", "__sample__")
    else:
        assert ours.log_weights.dims == theirs.log_weights.dims
        assert ours.log_weights.shape == theirs.log_weights.shape
        np.testing.assert_allclose(ours.log_weights.values, theirs.log_weights.values,
                                   atol=0.05)


def test_arrays_get_arviz_default_dims_and_chain_draw_weights():
    ll = np.random.default_rng(3).normal(-1.0, 0.2, size=(2, 300, 4, 5))
    ours = loo_adapt.loo({"log_lik": ll}, method="mcmc", reff=1.0)
    theirs = _arviz_loo_ll(ll, reff=1.0)  # from_dict names its variable "y"
    assert _elpd_i(ours).dims == ("log_lik_dim_0", "log_lik_dim_1")
    assert _elpd_i(theirs).dims == ("y_dim_0", "y_dim_1")
    lw = ours.log_weights
    if not V0:
        assert lw.dims == ("log_lik_dim_0", "log_lik_dim_1", "chain", "draw")
        assert lw.shape == (4, 5, 2, 300)
    # normalised weights of draw (chain 1, draw 7) of observation (2, 3)
    core = loo_pointwise(ll.reshape(2, 300, 20), r_eff=1.0).log_weights
    np.testing.assert_array_equal(log_weights_matrix(lw), core)


def test_rows_without_posterior_weights_are_nan_with_reason():
    n = 5
    base = loo_pointwise(np.random.default_rng(0).normal(-1, 0.3, (1, 400, n)), r_eff=1.0)
    res = initial_result(base)
    res = PointwiseLoo(**{**{f: getattr(res, f) for f in ("elpd_i", "p_loo_i", "lpd_i",
                                                          "mcse_elpd_i", "pareto_k",
                                                          "good_k", "n_samples",
                                                          "r_eff")},
                          "method": np.array(["psis", "mixis", "psis", "refit", "ll"],
                                             dtype=object),
                          "pareto_k_after": np.array([0.1, np.nan, 0.2, np.nan, 0.3])})
    out = to_elpd_data(res, log_weights=base.log_weights)
    lw = log_weights_matrix(out.log_weights)
    assert np.isnan(lw[:, [1, 3, 4]]).all() and np.isfinite(lw[:, [0, 2]]).all()
    note = out.log_weights.attrs["nan_rows"]
    assert "1 ll" in note and "1 mixis" in note and "1 refit" in note
    k = khat_from_elpd_data(out)
    assert np.isnan(k[[1, 3]]).all() and k[4] == pytest.approx(0.3)
    text = str(out)
    # every row counted once: the rows without a k-hat in bins of their own, no NaN
    assert "nan" not in text.lower()
    counts = {m[1]: int(m[2]) for m in re.finditer(
        r"^\s*(\(-Inf, [\d.]+\]|\([\d.]+, 1\]|\(1, Inf\)|no k-hat)\s+\((?:good|bad|very bad|"
        r"MixIS|refit)\)\s+(\d+)", text, flags=re.M)} | {
        m[1]: int(m[2]) for m in re.finditer(r"no k-hat\s+\((MixIS|refit)\)\s+(\d+)", text)}
    good = f"(-Inf, {res.good_k:.2f}]"
    assert counts[good] == 3 and counts["MixIS"] == 1 and counts["refit"] == 1
    assert counts[f"({res.good_k:.2f}, 1]"] == 0 and counts["(1, Inf)"] == 0


# --------------------------------------------------------------------------- objects
def test_repr_pickle_copy():
    y, mu, ll, yrep = _normal_model(seed=2, shape=(6, 9))
    ours = loo_adapt.loo(_container(y, mu, ll, yrep))
    theirs = _arviz_loo(_container(y, mu, ll, yrep))
    text = repr(ours)
    assert text.startswith("Computed from 1000 by 54 log-likelihood matrix.") and len(text) < 1000
    # R loo's layout, one decimal; on arviz 0.x (the same PSIS as ours) the numbers are
    # arviz's, with the SE of R loo (n - 1 variance)
    est = ours.loo_adapt.estimates()
    elpd, se = est["elpd_loo"], est["se_elpd_loo"]
    if V0:
        elpd, se = float(theirs["elpd_loo"]), float(theirs["se"]) * np.sqrt(54 / 53)
    assert re.search(rf"^elpd_loo\s+{elpd:.1f}\s+{se:.1f}$", text, flags=re.M)
    assert "nan" not in text.lower() and str(ours) == text
    back = pickle.loads(pickle.dumps(ours))
    assert type(back) is type(ours)
    assert isinstance(pointwise_from_elpd_data(back), PointwiseLoo)
    np.testing.assert_array_equal(back.loo_adapt.elpd_i, ours.loo_adapt.elpd_i)
    assert back.summary() == ours.summary()
    for dup in (ours.copy(), copy.deepcopy(ours), copy.copy(ours)):
        assert type(dup) is type(ours)
        assert dup.summary() == ours.summary()
        np.testing.assert_array_equal(log_weights_matrix(dup.log_weights),
                                      log_weights_matrix(ours.log_weights))


def test_scale_deviance_and_summary():
    ll = _simulated_log_lik(seed=3)
    log = loo_adapt.loo(ll, reff=1.0)
    est = log.loo_adapt.estimates()
    assert est["looic"] == pytest.approx(-2 * est["elpd_loo"])
    summary = log.summary()
    assert f"{est['elpd_loo']:.1f}" in summary and "Pareto k" in summary
    if V0:
        dev = loo_adapt.loo(ll, reff=1.0, scale="deviance")
        assert _elpd_total(dev) == pytest.approx(-2 * _elpd_total(log), rel=1e-12)
        theirs = _arviz_loo_ll(ll, reff=1.0)
        old = az.rcParams["stats.ic_scale"]
        try:
            az.rcParams["stats.ic_scale"] = "deviance"
            assert loo_adapt.loo(ll, reff=1.0)["scale"] == "deviance"
        finally:
            az.rcParams["stats.ic_scale"] = old
        assert theirs["scale"] == "log"
    else:
        for scale in ("deviance", "negative_log"):
            with pytest.raises(ValueError, match="arviz 1.x reports elpd on the log scale"):
                loo_adapt.loo(ll, reff=1.0, scale=scale)
        # arviz 1.x's loo ignores rcParams["stats.ic_scale"]; so do we there
        old = az.rcParams["stats.ic_scale"]
        try:
            az.rcParams["stats.ic_scale"] = "deviance"
            assert loo_adapt.loo(ll, reff=1.0).scale == "log"
            assert _arviz_loo_ll(ll, reff=1.0).scale == "log"
        finally:
            az.rcParams["stats.ic_scale"] = old


# --------------------------------------------------------------------------- compare
SCALES = ("log", "negative_log", "deviance") if V0 else ("log",)
METHODS = ("stacking", "BB-pseudo-BMA", "pseudo-BMA")


@pytest.mark.parametrize("scale", SCALES)
def test_compare_all_methods_every_scale_like_arviz(scale):
    models = {name: _normal_model(seed=4, shift=shift) for name, shift in
              (("good", 0.0), ("shifted", 0.6), ("far", 1.5))}
    ours, theirs = {}, {}
    for name, (y, mu, ll, yrep) in models.items():
        data = _container(y, mu, ll, yrep)
        ours[name] = loo_adapt.loo(data, scale=scale)
        theirs[name] = az.loo(data, pointwise=True, scale=scale) if V0 else _arviz_loo(data)
    for method in METHODS:
        kw = dict(method=method, seed=0) if V0 else dict(method=method)
        a = az.compare(ours, **kw)
        b = az.compare(theirs, **kw)
        assert list(a.index) == list(b.index) == ["good", "shifted", "far"]
        np.testing.assert_allclose(a["weight"].astype(float), b["weight"].astype(float),
                                   atol=1e-6 if EXACT else 0.02)
        diff = "elpd_diff"
        np.testing.assert_allclose(a[diff].astype(float), b[diff].astype(float),
                                   rtol=1e-8 if EXACT else 0.02)
    import matplotlib

    matplotlib.use("Agg")
    assert az.plot_compare(a) is not None
    if V0:
        assert az.plot_elpd(ours) is not None
    assert az.plot_khat(ours["good"]) is not None


# --------------------------------------------------------------------------- loo_pit etc.
def test_arviz_loo_pit_accepts_our_weights():
    y, mu, ll, yrep = _normal_model(seed=5, shape=(40,))
    data = _container(y, mu, ll, yrep)
    ours = loo_adapt.loo(data)
    mine = loo_adapt.loo_pit(ours, y, yrep).pit
    if V0:
        theirs = az.loo_pit(data, y="y")
        given = az.loo_pit(data, y="y", log_weights=ours.log_weights)
        np.testing.assert_allclose(given, theirs, atol=1e-10)
        import matplotlib

        matplotlib.use("Agg")
        assert az.plot_loo_pit(data, y="y", log_weights=ours.log_weights) is not None
    else:
        own = _arviz_loo(data)
        theirs = az.loo_pit(data, log_weights=xr.Dataset({"y": own.log_weights}),
                            pareto_k=xr.Dataset({"y": own.pareto_k}))["y"].values
        given = az.loo_pit(data, log_weights=xr.Dataset({"y": ours.log_weights}),
                           pareto_k=xr.Dataset({"y": ours.pareto_k}))["y"].values
        np.testing.assert_allclose(given, mine, atol=1e-12)
        np.testing.assert_allclose(given, theirs, atol=0.01)
    np.testing.assert_allclose(mine, np.ravel(theirs), atol=1e-10 if EXACT else 0.01)


@pytest.mark.skipif(V0, reason="arviz 0.x has no loo_expectations / loo_score")
@pytest.mark.parametrize("kind", ["mean", "var", "sd"])
def test_arviz_loo_expectations_and_score_accept_our_result(kind):
    y, mu, ll, yrep = _normal_model(seed=6, shape=(6, 9), outlier=3.0)
    data = _container(y, mu, ll, yrep, dims={"y": ["row", "col"]})
    ours = loo_adapt.loo(data)
    own = _arviz_loo(data)
    e_ours, k_ours = az.loo_expectations(data, kind=kind, log_weights=ours.log_weights,
                                         pareto_k=ours.pareto_k)
    e_own, _ = az.loo_expectations(data, kind=kind, log_weights=own.log_weights,
                                   pareto_k=own.pareto_k)
    mine = loo_adapt.loo_expectations(ours, yrep, kind=kind)
    assert e_ours.dims == ("row", "col")
    np.testing.assert_allclose(e_ours.values.ravel(), mine.value, rtol=1e-12)
    np.testing.assert_allclose(e_ours.values, e_own.values, rtol=0.01)
    # arviz-stats fits the Pareto tails differently from R loo / posterior (module doc)
    np.testing.assert_allclose(k_ours.values.ravel(), mine.pareto_k, atol=0.15)
    s_ours = az.loo_score(data, log_weights=ours.log_weights, pareto_k=ours.pareto_k)
    s_own = az.loo_score(data, log_weights=own.log_weights, pareto_k=own.pareto_k)
    assert s_ours.mean == pytest.approx(s_own.mean, rel=1e-3)


class _NormalRefits:
    """SamplingWrapper of the y ~ N(mu, 1) model: exact posterior draws without y_i."""

    def __init__(self, y):
        self.y = y

    def sel_observations(self, idx):
        i = int(next(iter(idx.values())) if isinstance(idx, dict) else np.ravel(idx)[0])
        return np.delete(self.y, i), (i, self.y[i])

    def sample(self, obs):
        rng = np.random.default_rng(obs.size + int(1e6 * abs(obs.sum())) % 1000)
        return obs.mean() + rng.normal(size=(1, 4000)) / np.sqrt(obs.size)

    def get_inference_data(self, fit):
        return fit

    def log_likelihood__i(self, excluded, mu):
        return xr.DataArray(norm.logpdf(excluded[1], loc=mu), dims=["chain", "draw"])


def _wrapper(y, data):
    base = az.SamplingWrapper
    cls = type("Wrapper", (_NormalRefits, base), {})
    w = cls.__new__(cls)
    base.__init__(w, model=None, idata_orig=data)
    _NormalRefits.__init__(w, y)
    return w


def test_arviz_reloo_accepts_our_result_and_matches_exact_loo():
    y, mu, ll, yrep = _normal_model(seed=7, shape=(12,), outlier=4.0)
    data = _container(y, mu, ll, yrep)
    ours = loo_adapt.loo(data)
    theirs = _arviz_loo(data)
    kw = dict(k_thresh=-np.inf, verbose=False) if V0 else dict(k_threshold=-np.inf)
    a = az.reloo(_wrapper(y, data), loo_orig=ours, **kw)
    b = az.reloo(_wrapper(y, data), loo_orig=theirs, **kw)
    np.testing.assert_allclose(np.ravel(_elpd_i(a)), np.ravel(_elpd_i(b)), atol=1e-12)
    # exact LOO of the model: y_i | y_-i ~ N(mean(y_-i), 1 + 1/(n-1))
    n = y.size
    exact = [norm.logpdf(y[i], np.delete(y, i).mean(), np.sqrt(1 + 1 / (n - 1)))
             for i in range(n)]
    np.testing.assert_allclose(np.ravel(_elpd_i(a)), exact, atol=0.02)
    assert "changed after loo_adapt built this ELPDData" in a.summary()
    assert "changed after" not in ours.summary()


@pytest.mark.skipif(V0, reason="arviz 0.x has no loo_moment_match")
def test_arviz_loo_moment_match_accepts_our_result():
    y, mu, ll, yrep = _normal_model(seed=7, shape=(12,), outlier=4.0)
    data = _container(y, mu, ll, yrep)
    ours = loo_adapt.loo(data)
    theirs = _arviz_loo(data)
    upars = xr.DataArray(mu[..., None], dims=["chain", "draw", "upars_dim"])

    def log_prob(u):
        m = u.isel(upars_dim=0).values
        return xr.DataArray(norm.logpdf(y[:, None, None], loc=m[None]).sum(0),
                            dims=["chain", "draw"])

    def log_lik_i(u, i):
        return xr.DataArray(norm.logpdf(y[i], loc=u.isel(upars_dim=0).values),
                            dims=["chain", "draw"])

    kw = dict(log_prob_upars_fn=log_prob, log_lik_i_upars_fn=log_lik_i, upars=upars,
              k_threshold=0.3)
    a = az.loo_moment_match(data, ours, **kw)
    b = az.loo_moment_match(data, theirs, **kw)
    assert float(ours.pareto_k[0]) > 0.3 and float(a.pareto_k[0]) < 0.3  # row 0 was matched
    np.testing.assert_allclose(a.elpd_i.values, b.elpd_i.values, atol=1e-3)
    n = y.size
    exact = norm.logpdf(y[0], np.delete(y, 0).mean(), np.sqrt(1 + 1 / (n - 1)))
    assert float(a.elpd_i[0]) == pytest.approx(exact, abs=0.1)


def test_approximate_draws_are_marked_as_arviz_marks_them():
    files = sorted((DATA / "logistic_normal" / "variational").glob("*.csv"))
    res = loo_adapt.loo([str(f) for f in files])
    assert res.loo_adapt.n_obs == 54
    if not V0:  # arviz 1.x's loo_approximate_posterior sets approx_posterior
        assert res.approx_posterior is True
        assert "Posterior approximation correction used." in repr(res)
