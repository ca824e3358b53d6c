"""Bundled Stan programs and fitting backends (loo_adapt.stan.backends).

References are independent of the module under test: log-likelihoods recomputed in plain
numpy from the drawn parameters, CmdStan 2.35's own output (tests/data/cmdstan), the raw CSV
columns read with numpy, arviz's MCSE, and bridgestan log densities.
"""

from __future__ import annotations

import glob
import json
import pathlib
import sys

import numpy as np
import pytest
from scipy.special import expit, logsumexp

from loo_adapt.draws import Draws
from loo_adapt.stan import backends as ls

stanli = pytest.importorskip("stanli")

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data" / "cmdstan"
needs_fixtures = pytest.mark.skipif(
    not (FIXTURES / "logistic_normal.data.json").is_file(),
    reason="CmdStan fixtures not copied to tests/data/cmdstan",
)


def _tiny(seed=0, n=14, d=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (rng.random(n) < expit(X @ np.array([1.5, -1.0, 0.5][:d]))).astype(int)
    return X, y


def _ref_loglik(eta, y):
    """Bernoulli-logit log-likelihood written out directly (moderate eta only)."""
    p = 1.0 / (1.0 + np.exp(-eta))
    return np.where(y == 1, np.log(p), np.log1p(-p))


def _ref_eta(name, params, X):
    """Linear predictor from the constrained parameters, per draw (S, n), independent code."""
    if name == "logistic_normal":
        return params["alpha"][:, None] + np.einsum("sd,nd->sn", params["beta"], X)
    if name == "logistic_rhs":
        eta = np.einsum("sd,nd->sn", params["beta"], X)
        if "beta0" in params:
            eta = eta + params["beta0"][:, :1]
        return eta
    S = params["W1"].shape[0]
    out = np.empty((S, X.shape[0]))
    for s in range(S):
        h = np.maximum(X @ params["W1"][s] + params["b1"][s], 0.0)
        out[s] = h @ params["w2"][s] + params["b2"][s]
    return out


def _flat(draws: Draws):
    return {k: draws.flat(k) for k in draws.variables}


# ------------------------------------------------------------------ programs and paths


def test_bundled_programs_exist_and_declare_log_lik_and_mixis():
    assert ls.list_models() == ["logistic_normal", "logistic_rhs", "relu_net"]
    for name in ls.list_models():
        path = ls.stan_model_path(name)
        assert path.is_file() and path.suffix == ".stan"
        text = path.read_text()
        assert "vector[N] log_lik;" in text
        assert "int<lower=0, upper=1> mixis;" in text
        assert "int<lower=0> mixis_n_rows;" in text
        assert "array[mixis_n_rows] int<lower=1> mixis_rows;" in text
        assert "if (mixis_n_rows == 0) target += log_sum_exp(-log_lik_local);" in text
        assert "else target += log_sum_exp(-log_lik_local[mixis_rows]);" in text
    assert ls.stan_model_path("rhs_logistic") == ls.stan_model_path("logistic_rhs")
    with pytest.raises(ValueError, match="unknown bundled model"):
        ls.stan_model_path("probit")


@needs_fixtures
def test_same_parameter_names_as_fixture_programs():
    """Bundled programs and the CmdStan fixtures expose the same parameter names and shapes."""
    X, y = _tiny()
    pairs = [("logistic_normal", "logistic_normal"), ("logistic_rhs", "rhs_logistic"),
             ("relu_net", "relu1")]
    for name, fixture in pairs:
        data = ls._jsonable(ls.stan_data(name, X, y))
        bundled = stanli.Model(str(ls.stan_model_path(name)), data=data)
        for key in ("mixis", "mixis_n_rows", "mixis_rows"):
            del data[key]
        fixture_model = stanli.Model(str(FIXTURES / f"{fixture}.stan"), data=data)
        assert bundled.constrained_names == fixture_model.constrained_names
        assert bundled.n_unconstrained == fixture_model.n_unconstrained


# ------------------------------------------------------------------ fits with stanli


@pytest.mark.parametrize(
    "name,priors",
    [("logistic_normal", {}), ("logistic_rhs", {}), ("logistic_rhs", {"has_intercept": 0}),
     ("relu_net", {"H": 2})],
)
def test_stanli_fit_log_lik_matches_numpy(name, priors):
    X, y = _tiny(seed=1)
    data = ls.stan_data(name, X, y, **priors)
    draws = ls.fit(name, data, backend="stanli", chains=2, warmup=200, draws=200, seed=5)
    assert draws.method == "mcmc" and draws.shape == (2, 200)
    assert "stanli" in draws.source
    ll = draws.log_lik()
    assert ll.shape == (2, 200, X.shape[0])
    params = _flat(draws)
    if name == "logistic_rhs":
        # the transformed parameters are the regularized horseshoe of Piironen & Vehtari
        c = data["slab_scale"] * np.sqrt(params["caux"])
        lam, tau = params["lambda"], params["tau"][:, None]
        lt = np.sqrt(c[:, None] ** 2 * lam**2 / (c[:, None] ** 2 + tau**2 * lam**2))
        np.testing.assert_allclose(params["lambda_tilde"], lt, rtol=1e-10)
        np.testing.assert_allclose(params["beta"], params["z"] * lt * tau, rtol=1e-10, atol=1e-300)
        assert ("beta0" in draws) == bool(data["has_intercept"])
    if name == "relu_net":
        assert draws["W1"].shape == (2, 200, 3, 2)
    ref = _ref_loglik(_ref_eta(name, params, X), y)
    np.testing.assert_allclose(ll.reshape(-1, X.shape[0]), ref, rtol=0, atol=1e-8)
    # the module's held-out log-likelihood reproduces the program's own log_lik
    for i in (0, 7, X.shape[0] - 1):
        np.testing.assert_allclose(
            ls.heldout_log_lik(name, draws, X[i], y[i]), ll[:, :, i].ravel(), rtol=0, atol=1e-8
        )
    np.testing.assert_allclose(
        ls.pointwise_log_lik(name, draws, X, y), ll.reshape(-1, X.shape[0]), rtol=0, atol=1e-8
    )


def test_stanli_matrix_order_matches_stan_column_major_names():
    X, y = _tiny(seed=2)
    data = ls._jsonable(ls.stan_data("relu_net", X, y, H=2))
    raw = stanli.Model(str(ls.stan_model_path("relu_net")), data=data).sample(
        chains=1, warmup=100, samples=50, refresh=0
    )
    # Stan writes matrices column-major: W1[1,1], W1[2,1], W1[3,1], W1[1,2], ...
    assert raw.names[:4] == ["W1[1,1]", "W1[2,1]", "W1[3,1]", "W1[1,2]"]
    values = raw.draws()
    draws = ls.draws_from_columns(raw.names, values)
    for i in range(3):
        for j in range(2):
            col = raw.names.index(f"W1[{i + 1},{j + 1}]")
            np.testing.assert_array_equal(draws["W1"][:, :, i, j], values[:, :, col])


@pytest.mark.parametrize("name", ["logistic_normal", "logistic_rhs", "relu_net"])
def test_mixis_flag_adds_log_sum_exp_of_minus_log_lik(name):
    """log density(mixis=1) - log density(mixis=0) = log sum_i exp(-log_lik_i) at a fixed point."""
    bridgestan = pytest.importorskip("bridgestan")  # noqa: F841
    X, y = _tiny(seed=3, n=9)
    data = ls.stan_data(name, X, y)
    path = str(ls.stan_model_path(name))
    bm0 = stanli.bridgestan_model(path, data=ls._jsonable(data))
    bm1 = stanli.bridgestan_model(path, data=ls._jsonable(dict(data, mixis=1)))
    rng = np.random.default_rng(4)
    for _ in range(3):
        q = rng.normal(scale=0.7, size=bm0.param_unc_num())
        diff = bm1.log_density(q) - bm0.log_density(q)
        names = bm0.param_names(include_tp=True)
        values = bm0.param_constrain(q, include_tp=True)
        params = _flat(ls.draws_from_columns(names, values[None, None, :]))
        ll = _ref_loglik(_ref_eta(name, params, X), y)[0]
        np.testing.assert_allclose(diff, logsumexp(-ll), rtol=1e-10)
        assert diff > 0.5  # the flag really changes the target
    # focused on rows 2 and 7 (1-based 3, 8): log sum over those rows only
    bm2 = stanli.bridgestan_model(path, data=ls._jsonable(dict(
        data, mixis=1, mixis_n_rows=2, mixis_rows=[3, 8])))
    q = rng.normal(scale=0.7, size=bm0.param_unc_num())
    params = _flat(ls.draws_from_columns(bm0.param_names(include_tp=True),
                                         bm0.param_constrain(q, include_tp=True)[None, None]))
    ll = _ref_loglik(_ref_eta(name, params, X), y)[0]
    np.testing.assert_allclose(bm2.log_density(q) - bm0.log_density(q),
                               logsumexp(-ll[[2, 7]]), rtol=1e-10)


def test_mixis_fit_sets_flag_and_rejects_programs_without_it(tmp_path):
    X, y = _tiny(seed=4)
    data = ls.stan_data("logistic_normal", X, y)
    d_post = ls.fit("logistic_normal", data, backend="stanli", chains=2, warmup=200, draws=300)
    d_mix = ls.fit("logistic_normal", data, backend="stanli", chains=2, warmup=200, draws=300,
                   mixis=True)
    assert "mixis" in d_mix.source and "mixis" not in d_post.source
    # The mixture proposal puts more mass where some observation is poorly fit, so the
    # smallest pointwise log-likelihood is lower on average than under the posterior.
    assert d_mix.log_lik().min(axis=2).mean() < d_post.log_lik().min(axis=2).mean()
    plain = tmp_path / "plain.stan"
    plain.write_text(
        "data { int N; array[N] int y; } parameters { real<lower=0, upper=1> p; }"
        " model { y ~ bernoulli(p); }"
    )
    with pytest.raises(ValueError, match="mixis"):
        ls.fit(plain, {"N": 2, "y": [0, 1]}, backend="stanli", mixis=True)
    user = ls.fit(plain, {"N": 2, "y": [0, 1]}, backend="stanli", chains=1, warmup=100,
                  draws=50)
    assert user["p"].shape == (1, 50)


@needs_fixtures
def test_logistic_normal_posterior_means_agree_with_cmdstan_fixture():
    az = pytest.importorskip("arviz")
    data = json.loads((FIXTURES / "logistic_normal.data.json").read_text())
    ours = ls.fit("logistic_normal", data, backend="stanli", chains=4, warmup=1000, draws=1000,
                  seed=21)
    files = sorted(glob.glob(str(FIXTURES / "logistic_normal" / "sample" / "*.csv")))
    assert len(files) == 4
    header, chains = None, []
    for f in files:
        with open(f) as fh:
            lines = [ln for ln in fh if not ln.startswith("#")]
        header = lines[0].strip().split(",")
        chains.append(np.loadtxt(lines[1:], delimiter=","))
    ref = np.stack(chains)  # (4, 250, columns)
    cols = ["alpha"] + [f"beta.{j}" for j in range(1, data["D"] + 1)]
    ref_vals = ref[:, :, [header.index(c) for c in cols]]
    our_vals = np.concatenate([ours["alpha"][:, :, None], ours["beta"]], axis=2)
    for k in range(len(cols)):
        m_ref, m_our = ref_vals[:, :, k].mean(), our_vals[:, :, k].mean()
        se = np.hypot(az.mcse(ref_vals[:, :, k], method="mean").item(),
                      az.mcse(our_vals[:, :, k], method="mean").item())
        assert abs(m_ref - m_our) < 4 * se, (cols[k], m_ref, m_our, se)


# ------------------------------------------------------------------ CmdStan output


def _read_csv(path):
    with open(path) as fh:
        lines = [ln for ln in fh if not ln.startswith("#")]
    return lines[0].strip().split(","), np.loadtxt(lines[1:], delimiter=",", ndmin=2)


@needs_fixtures
@pytest.mark.parametrize("fixture", ["logistic_normal", "rhs_logistic", "relu1"])
def test_draws_from_cmdstan_csv_and_heldout_log_lik_match_cmdstan(fixture):
    cmdstanpy = pytest.importorskip("cmdstanpy")
    files = sorted(glob.glob(str(FIXTURES / fixture / "sample" / "*.csv")))
    draws = ls.draws_from_cmdstanpy(cmdstanpy.from_csv(files))
    assert draws.shape == (4, 250) and draws.method == "mcmc"
    data = json.loads((FIXTURES / f"{fixture}.data.json").read_text())
    X, y = np.array(data["X"]), np.array(data["y"])
    header, first = _read_csv(files[1])
    # placement by name: chain 2, every column, against the raw CSV
    for col, name in enumerate(header):
        if name.endswith("__"):
            np.testing.assert_array_equal(draws.sample_stats[name][1], first[:, col])
            continue
        base, *idx = name.split(".")
        value = draws[base][1][(slice(None),) + tuple(int(i) - 1 for i in idx)]
        np.testing.assert_array_equal(value, first[:, col])
    # CmdStan's own log_lik against the numpy recomputation. The CSV keeps 6 significant
    # figures, and the rounding of ~30-90 parameters adds up in eta to a few 1e-5 (the
    # log-likelihood is 1-Lipschitz in eta); a misplaced element would be off by O(0.1).
    ll = draws.log_lik().reshape(-1, data["N"])
    for i in range(0, data["N"], 5):
        ours = ls.heldout_log_lik(fixture, draws, X[i], y[i])
        np.testing.assert_allclose(ours, ll[:, i], rtol=0, atol=2e-4)


@needs_fixtures
@pytest.mark.parametrize(
    "method,kind,p_col,q_col",
    [("variational", "advi", "log_p__", "log_g__"), ("laplace", "laplace", "log_p__", "log_q__"),
     ("pathfinder", "pathfinder", "lp__", "lp_approx__")],
)
def test_draws_from_cmdstan_approximations(method, kind, p_col, q_col, monkeypatch):
    cmdstanpy = pytest.importorskip("cmdstanpy")
    monkeypatch.chdir(FIXTURES)  # the Laplace CSV names its mode file relative to this
    files = [f for f in glob.glob(str(FIXTURES / "relu1" / method / "*.csv")) if "-opt-" not in f]
    draws = ls.draws_from_cmdstanpy(cmdstanpy.from_csv(files))
    header, raw = _read_csv(files[0])
    if method == "variational":
        raw = raw[1:]  # the first row is the mean of the approximation, not a draw
    assert draws.method == kind and draws.shape == (1, 1000) and raw.shape[0] == 1000
    np.testing.assert_array_equal(draws.log_p[0], raw[:, header.index(p_col)])
    np.testing.assert_array_equal(draws.log_q[0], raw[:, header.index(q_col)])
    np.testing.assert_array_equal(draws["W1"][0, :, 4, 2], raw[:, header.index("W1.5.3")])


# ------------------------------------------------------------------ backend selection


def _no_cmdstan(monkeypatch):
    import cmdstanpy

    def missing():
        raise ValueError("No CmdStan installation found")

    monkeypatch.delenv("CMDSTAN", raising=False)
    monkeypatch.setattr(cmdstanpy, "cmdstan_path", missing)


def test_auto_prefers_cmdstan_when_cmdstan_path_succeeds(monkeypatch):
    import cmdstanpy

    monkeypatch.setattr(cmdstanpy, "cmdstan_path", lambda: "/opt/cmdstan-2.35.0")
    assert ls.cmdstan_available()
    assert ls.select_backend("auto") == "cmdstan"
    assert ls.available_backends()[0] == "cmdstan"


def test_auto_uses_cmdstan_env_var(monkeypatch, tmp_path):
    monkeypatch.setenv("CMDSTAN", str(tmp_path / "absent"))
    assert not ls.cmdstan_available()
    assert ls.select_backend("auto") == "stanli"
    (tmp_path / "makefile").write_text("# a CmdStan tree\n")
    monkeypatch.setenv("CMDSTAN", str(tmp_path))
    assert ls.select_backend("auto") == "cmdstan"


def test_auto_falls_back_to_stanli_then_pystan(monkeypatch):
    _no_cmdstan(monkeypatch)
    assert ls.select_backend("auto") == "stanli"
    with pytest.raises(RuntimeError, match="'cmdstan' is not available"):
        ls.select_backend("cmdstan")
    monkeypatch.setitem(sys.modules, "stanli", None)  # import stanli now fails
    monkeypatch.setitem(sys.modules, "stan", None)
    with pytest.raises(RuntimeError, match="no Stan backend available"):
        ls.select_backend("auto")
    with pytest.raises(RuntimeError, match="'pystan' is not available"):
        ls.select_backend("pystan")
    with pytest.raises(ValueError, match="backend must be"):
        ls.select_backend("numpyro")


def test_fit_method_not_supported_by_stanli(monkeypatch):
    _no_cmdstan(monkeypatch)
    X, y = _tiny()
    data = ls.stan_data("logistic_normal", X, y)
    with pytest.raises(NotImplementedError, match="stanli"):
        ls.fit_method("logistic_normal", data, method="laplace")
    with pytest.raises(ValueError, match="method must be"):
        ls.fit_method("logistic_normal", data, method="nuts")


@needs_fixtures
def test_cmdstan_backend_wiring(monkeypatch):
    """With CmdStan 'installed', fit() calls cmdstanpy with exact CSV output and converts it."""
    import cmdstanpy

    calls = {}

    class FakeModel:
        def sample(self, **kw):
            calls["sample"] = kw
            return cmdstanpy.from_csv(sorted(glob.glob(str(FIXTURES / "relu1/sample/*.csv"))))

        def laplace_sample(self, **kw):
            calls["laplace"] = kw
            files = glob.glob(str(FIXTURES / "relu1/laplace/*.csv"))
            return cmdstanpy.from_csv([f for f in files if "-opt-" not in f])

    monkeypatch.setattr(cmdstanpy, "cmdstan_path", lambda: "/opt/cmdstan")
    monkeypatch.setattr(ls, "_cmdstan_model", lambda path: FakeModel())
    monkeypatch.chdir(FIXTURES)  # the Laplace CSV names its mode file relative to this
    data = json.loads((FIXTURES / "relu1.data.json").read_text())
    draws = ls.fit("relu_net", data, chains=4, warmup=1000, draws=250, seed=11, adapt_delta=0.95)
    kw = calls["sample"]
    assert kw["sig_figs"] == 18 and kw["adapt_delta"] == 0.95 and kw["seed"] == 11
    assert kw["data"]["mixis"] == 0 and kw["iter_sampling"] == 250
    assert draws["W1"].shape == (4, 250, 30, 3) and draws.source.startswith("cmdstan")
    lap = ls.fit_method("relu_net", data, method="laplace", draws=1000)
    assert lap.method == "laplace" and lap.log_q is not None
    assert calls["laplace"]["draws"] == 1000 and calls["laplace"]["sig_figs"] == 18


# ------------------------------------------------------------------ data and refits


def test_stan_data_defaults():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 20)), rng.integers(0, 2, 40)
    d = ls.stan_data("logistic_rhs", X, y)
    p0 = 20 / 10
    assert d["scale_global"] == pytest.approx(p0 / ((20 - p0) * np.sqrt(40)), rel=1e-14)
    assert (d["slab_scale"], d["slab_df"], d["scale_icept"], d["nu_global"], d["nu_local"]) == (
        2.5, 1.0, 5.0, 1.0, 1.0)
    assert d["has_intercept"] == 1 and d["mixis"] == 0
    assert ls.stan_data("logistic_rhs", X, y, p0=5)["scale_global"] == pytest.approx(
        5 / (15 * np.sqrt(40)))
    n = ls.stan_data("logistic_normal", X, y)
    assert (n["prior_sd"], n["scale_icept"], n["N"], n["D"]) == (1.0, 2.5, 40, 20)
    r = ls.stan_data("relu_net", X, y.astype(bool), H=4)
    assert r["H"] == 4 and r["y"].dtype == np.int64 and r["prior_sd"] == 1.0


def test_fixture_rhs_data_is_the_default_setup():
    """The fixture's rhs data (p0 = D / 10) is what stan_data builds by default."""
    path = FIXTURES / "rhs_logistic.data.json"
    if not path.is_file():
        pytest.skip(reason="CmdStan fixtures not copied to tests/data/cmdstan")
    fix = json.loads(path.read_text())
    d = ls.stan_data("logistic_rhs", np.array(fix["X"]), fix["y"])
    for key in ("scale_global", "scale_icept", "slab_scale", "slab_df", "nu_global", "nu_local"):
        assert d[key] == pytest.approx(fix[key], rel=1e-12), key


@pytest.mark.parametrize(
    "X,y,priors,err,match",
    [
        (np.zeros(5), [0, 1, 0, 1, 0], {}, ValueError, "2-D"),
        (np.array([[0.0], [np.nan]]), [0, 1], {}, ValueError, "non-finite"),
        (np.zeros((3, 2)), [0, 1], {}, ValueError, "3 rows but y has 2"),
        (np.zeros((3, 2)), [0, 2, 1], {}, ValueError, "0/1"),
        (np.zeros((3, 2)), [0, 0.5, 1], {}, ValueError, "0/1"),
        (np.zeros((3, 2)), ["a", "b", "c"], {}, TypeError, "0/1"),
        (np.zeros((3, 2)), [0, 1, 1], {"prior_sd": -1}, ValueError, "prior_sd"),
        (np.zeros((3, 2)), [0, 1, 1], {"slab": 2}, TypeError, "unknown prior"),
        (np.zeros((3, 2)), [0, 1, 1], {"mixis": 2}, ValueError, "mixis"),
    ],
)
def test_stan_data_rejects_bad_input(X, y, priors, err, match):
    with pytest.raises(err, match=match):
        ls.stan_data("logistic_normal", X, y, **priors)


def test_stan_data_rejects_bad_model_settings():
    X, y = _tiny()
    with pytest.raises(ValueError, match="p0 must be below"):
        ls.stan_data("logistic_rhs", X, y, p0=3)
    with pytest.raises(ValueError, match="either p0 or scale_global"):
        ls.stan_data("logistic_rhs", X, y, p0=1, scale_global=0.1)
    with pytest.raises(ValueError, match="nu_local must be >= 1"):
        ls.stan_data("logistic_rhs", X, y, nu_local=0.5)
    with pytest.raises(ValueError, match="H"):
        ls.stan_data("relu_net", X, y, H=0)
    with pytest.raises(ValueError, match="unknown bundled model"):
        ls.stan_data("probit", X, y)


def test_fit_rejects_bad_data_and_arguments():
    X, y = _tiny()
    data = ls.stan_data("logistic_normal", X, y)
    with pytest.raises(ValueError, match=r"lacks \['prior_sd'\]"):
        ls.fit("logistic_normal", {k: v for k, v in data.items() if k != "prior_sd"})
    with pytest.raises(ValueError, match="disagree"):
        ls.fit("logistic_normal", dict(data, N=3))
    with pytest.raises(ValueError, match="chains"):
        ls.fit("logistic_normal", data, chains=0)
    with pytest.raises(ValueError, match="adapt_delta"):
        ls.fit("logistic_normal", data, adapt_delta=1.5)
    with pytest.raises(FileNotFoundError):
        ls.fit("no/such/model.stan", data)
    with pytest.raises(TypeError, match="dict or a JSON"):
        ls.fit("logistic_normal", [1, 2])


def test_refit_without_drops_the_row():
    X, y = _tiny(seed=6, n=12)
    data = ls.stan_data("logistic_normal", X, y)
    small = ls.drop_observation(data, 4)
    assert small["N"] == 11 and small["X"].shape == (11, 3)
    np.testing.assert_array_equal(small["X"], np.delete(X, 4, axis=0))
    np.testing.assert_array_equal(small["y"], np.delete(y, 4))
    kw = dict(backend="stanli", chains=2, warmup=200, draws=200, seed=9)
    refit = ls.refit_without("logistic_normal", data, 4, **kw)
    manual = ls.fit("logistic_normal", ls.stan_data("logistic_normal", np.delete(X, 4, 0),
                                                     np.delete(y, 4)), **kw)
    assert refit.log_lik().shape == (2, 200, 11)
    np.testing.assert_array_equal(refit["beta"], manual["beta"])
    held = ls.heldout_log_lik("logistic_normal", refit, X[4], y[4])
    eta = refit.flat("alpha") + refit.flat("beta") @ X[4]
    np.testing.assert_allclose(held, _ref_loglik(eta, y[4]), rtol=0, atol=1e-12)
    with pytest.raises(IndexError):
        ls.drop_observation(data, 12)
    with pytest.raises(ValueError, match="N, X and y"):
        ls.drop_observation({"N": 2, "x": [1, 2]}, 0)


def test_heldout_log_lik_is_finite_for_huge_logits():
    draws = Draws({"alpha": np.array([[800.0, -800.0, 0.0]]), "beta": np.zeros((1, 3, 2))})
    x = np.zeros(2)
    np.testing.assert_allclose(ls.heldout_log_lik("logistic_normal", draws, x, 1),
                               [0.0, -800.0, -np.log(2.0)], rtol=1e-15, atol=1e-300)
    np.testing.assert_allclose(ls.heldout_log_lik("logistic_normal", draws, x, 0),
                               [-800.0, 0.0, -np.log(2.0)], rtol=1e-15, atol=1e-300)
    with pytest.raises(ValueError, match="columns"):
        ls.heldout_log_lik("logistic_normal", draws, np.zeros(3), 1)
    with pytest.raises(ValueError, match="0/1"):
        ls.heldout_log_lik("logistic_normal", draws, x, 3)


def test_package_run_fits_drop_stans_rejection_warnings_only(caplog):
    """cmdstanpy logs Stan's rejected proposals ("Non-fatal error during sampling", three
    lines per refit) as warnings; the package's own fits drop those unless verbose, and keep
    every other warning."""
    import logging

    log = logging.getLogger("cmdstanpy")
    with caplog.at_level(logging.WARNING, logger="cmdstanpy"):
        with ls.quiet_cmdstanpy():
            log.warning("Non-fatal error during sampling:\nException: normal_lpdf: Scale ...")
            log.warning("Some chains may have failed to converge.")
        with ls.quiet_cmdstanpy(verbose=True):
            log.warning("Non-fatal error during sampling:\nException: kept when verbose")
        log.warning("Non-fatal error during sampling: the user's own fit, outside")
    messages = [r.getMessage() for r in caplog.records]
    assert not any("Scale ..." in m for m in messages)
    assert "Some chains may have failed to converge." in messages
    assert any("kept when verbose" in m for m in messages)
    assert any("the user's own fit" in m for m in messages)
