"""StanProgram: data without one observation, fits, held-out log-likelihood of refits."""

import json
import pathlib
import pickle

import numpy as np
import pytest
from scipy import stats

from loo_adapt.stan import backends as stan
from loo_adapt.stan.program import StanProgram

pytest.importorskip("stanli")

HERE = pathlib.Path(__file__).resolve().parents[1]
DATA_JSON = HERE / "data" / "cmdstan" / "logistic_normal.data.json"
BUNDLED = HERE.parent / "stan_models" / "logistic_normal.stan"

# A Gaussian linear regression whose coefficient count D equals N by construction of the test
# data: a leading dimension of N no longer identifies the per-observation entries.
LINREG = """
data {
  int<lower=1> N;
  int<lower=1> D;
  matrix[N, D] X;
  vector[N] y;
  vector[D] m;
}
parameters {
  vector[D] beta;
  real<lower=0> sigma;
}
model {
  beta ~ normal(m, 1);
  sigma ~ exponential(1);
  y ~ normal(X * beta, sigma);
}
generated quantities {
  vector[N] log_lik;
  for (n in 1:N) log_lik[n] = normal_lpdf(y[n] | X[n] * beta, sigma);
}
"""


@pytest.fixture(scope="module")
def logistic_data():
    data = json.loads(DATA_JSON.read_text())
    data["mixis"] = 0
    return data


@pytest.fixture(scope="module")
def linreg(tmp_path_factory):
    path = tmp_path_factory.mktemp("prog") / "linreg.stan"
    path.write_text(LINREG)
    rng = np.random.default_rng(4)
    n = d = 6
    X = rng.normal(size=(n, d))
    beta = rng.normal(size=d)
    y = X @ beta + 0.5 * rng.normal(size=n)
    data = {"N": n, "D": d, "X": X, "y": y, "m": np.zeros(d)}
    return path, data


def test_data_without_matches_bundled_drop_observation(logistic_data):
    prog = StanProgram("logistic_normal", logistic_data, backend="stanli")
    assert prog.observation_vars() == {"X": 0, "y": 0}
    for i in (0, 17, 53):
        ours = prog.data_without(i)
        ref = stan.drop_observation(logistic_data, i)
        assert ours["N"] == ref["N"] == 53
        np.testing.assert_array_equal(ours["X"], ref["X"])
        np.testing.assert_array_equal(ours["y"], ref["y"])
        # the row that is gone is row i of the original
        X = np.asarray(logistic_data["X"])
        keep = np.delete(np.arange(54), i)
        np.testing.assert_array_equal(ours["X"], X[keep])
        for key in ("D", "prior_sd", "scale_icept", "mixis"):
            assert ours[key] == logistic_data[key]
    assert prog.data["N"] == 54  # the program's own data is untouched
    with pytest.raises(IndexError, match="out of range"):
        prog.data_without(54)
    with pytest.raises(TypeError, match="integer"):
        prog.data_without(1.0)


def test_data_without_ambiguous_size_needs_obs_dim_vars(linreg):
    path, data = linreg
    prog = StanProgram(path, data, backend="stanli")
    with pytest.raises(ValueError, match=r"\['D'\] equals N = 6.*obs_dim_vars"):
        prog.data_without(2)
    prog = StanProgram(path, data, backend="stanli", obs_dim_vars=["X", "y"])
    out = prog.data_without(2)
    assert out["N"] == 5 and out["D"] == 6
    np.testing.assert_array_equal(out["X"], np.delete(data["X"], 2, axis=0))
    np.testing.assert_array_equal(out["y"], np.delete(data["y"], 2))
    np.testing.assert_array_equal(out["m"], data["m"])  # indexed by D, kept whole
    # a per-observation axis other than the first
    data_t = {**data, "Xt": data["X"].T}
    prog_t = StanProgram(path, data_t, backend="stanli",
                         obs_dim_vars={"X": 0, "y": 0, "Xt": 1})
    np.testing.assert_array_equal(prog_t.data_without(4)["Xt"],
                                  np.delete(data["X"], 4, axis=0).T)
    with pytest.raises(ValueError, match="not in the data"):
        StanProgram(path, data, backend="stanli", obs_dim_vars=["X", "z"])
    with pytest.raises(ValueError, match="axis 0 is not of length N"):
        StanProgram(path, {**data, "m": np.zeros(7), "D": 7}, backend="stanli",
                    obs_dim_vars=["m"])


def test_fit_mixis_needs_the_flag(linreg, logistic_data):
    path, data = linreg
    prog = StanProgram(path, data, backend="stanli", obs_dim_vars=["X", "y"])
    assert not prog.declares_mixis
    with pytest.raises(ValueError, match=r"with_mixis\(\).*int<lower=0, upper=2> mixis;.*"
                       r"log_sum_exp\(-log_lik_local\[mixis_rows\]\)"):
        prog.fit(mixis=True)
    bundled = StanProgram(BUNDLED, logistic_data, backend="stanli")
    assert bundled.declares_mixis and bundled.name == "logistic_normal"
    post = bundled.fit(seed=3, chains=2, draws=300, warmup=300)
    mix = bundled.fit(mixis=True, seed=3, chains=2, draws=300, warmup=300)
    assert "mixis" in mix.source and "mixis" not in post.source
    # the mixture proposal is wider than the posterior: it puts mass where some l_i is small,
    # so the smallest pointwise likelihood reaches lower under it
    assert np.quantile(mix.log_lik().min(axis=2), 0.5) < np.quantile(
        post.log_lik().min(axis=2), 0.5)


def test_heldout_generic_equals_bundled_numpy(logistic_data):
    prog = StanProgram("logistic_normal", logistic_data, backend="stanli")
    for i, seed in ((3, 11), (40, 12)):
        refit = prog.refit_without(i, seed=seed, chains=2, draws=250, warmup=300)
        assert refit.shape == (2, 250) and refit["log_lik"].shape == (2, 250, 53)
        generic = prog.heldout_log_lik(refit, i, method="generic")
        numpy_ll = prog.heldout_log_lik(refit, i, method="numpy")
        X = np.asarray(logistic_data["X"])
        ref = stan.heldout_log_lik("logistic_normal", refit, X[i], logistic_data["y"][i])
        assert generic.shape == (500,)
        np.testing.assert_allclose(generic, ref, rtol=1e-12, atol=1e-13)
        np.testing.assert_array_equal(numpy_ll, ref)
        # the full-data model reproduces the refit's own log_lik, shifted past the gap at i
        full = prog.log_density().log_lik(prog.log_density().unconstrain(refit))
        np.testing.assert_allclose(full[:, i + 1], refit["log_lik"][..., i].reshape(-1),
                                   rtol=1e-12)


def test_heldout_generic_user_program_against_scipy(linreg):
    path, data = linreg
    prog = StanProgram(path, data, backend="stanli", obs_dim_vars=["X", "y"])
    i = 2
    refit = prog.refit_without(i, seed=5, chains=2, draws=200, warmup=300)
    assert refit["beta"].shape == (2, 200, 6)
    ll = prog.heldout_log_lik(refit, i)  # auto -> generic for a user program
    mu = refit.flat("beta") @ data["X"][i]
    ref = stats.norm.logpdf(data["y"][i], loc=mu, scale=refit.flat("sigma"))
    np.testing.assert_allclose(ll, ref, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="bundled"):
        prog.heldout_log_lik(refit, i, method="numpy")


def test_program_pickles_without_its_bridgestan_model(logistic_data):
    prog = StanProgram("logistic_normal", logistic_data, backend="stanli")
    ld = prog.log_density()
    assert prog.log_density() is ld  # cached
    clone = pickle.loads(pickle.dumps(prog))
    assert clone._log_density is None
    U = np.zeros((1, ld.n_params))
    np.testing.assert_allclose(clone.log_density().log_lik(U), ld.log_lik(U), rtol=0)
    # at alpha = beta = 0 every observation has likelihood 1/2
    np.testing.assert_allclose(ld.log_lik(U), np.log(0.5), rtol=1e-14)


def test_bad_arguments(logistic_data):
    with pytest.raises(ValueError, match="backend"):
        StanProgram("logistic_normal", logistic_data, backend="nope")
    with pytest.raises(ValueError, match="fit_kwargs must not set"):
        StanProgram("logistic_normal", logistic_data, fit_kwargs={"seed": 3})
    with pytest.raises(ValueError, match="lacks"):
        StanProgram("logistic_normal", {"N": 3})
    prog = StanProgram("logistic_normal", logistic_data, backend="stanli")
    with pytest.raises(TypeError, match="Draws"):
        prog.heldout_log_lik(np.zeros((4, 10)), 0)
