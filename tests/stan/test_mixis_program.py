"""Mixture IS without writing Stan: programs from model families, the mixis flag written into
a user's program, and the warm-started mixture fit."""

import glob
import json
import pathlib

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit, logsumexp

from loo_adapt import read_csv
from loo_adapt.core.mixis import mixis_loo
from loo_adapt.models import LogisticRegression, Normal, RegularizedHorseshoe, ReLUNet
from loo_adapt.stan import backends as stan
from loo_adapt.stan.log_density import StanLogDensity
from loo_adapt.stan.mixis_program import TARGET_LINE, MixisProgramError, add_mixis_flag
from loo_adapt.stan.program import StanProgram

pytest.importorskip("stanli")

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data" / "cmdstan"


def _fixture(name):
    data = json.loads((FIXTURES / f"{name}.data.json").read_text())
    draws = read_csv(sorted(glob.glob(str(FIXTURES / name / "sample" / "*.csv"))))
    return data, draws


def _family(name, data):
    """The fixture's model written out by hand (not through the registry)."""
    X, y = np.asarray(data["X"]), np.asarray(data["y"])
    if name == "logistic_normal":
        return LogisticRegression(X, y, coef="beta", intercept="alpha", prior=Normal(1.0),
                                  intercept_prior=Normal(2.5))
    if name == "rhs_logistic":
        hs = RegularizedHorseshoe(tau="tau", lambda_tilde="lambda_tilde",
                                  scale_global=data["scale_global"], nu_global=1.0,
                                  nu_local=1.0, slab_scale=2.5, slab_df=1.0)
        return LogisticRegression(X, y, coef="beta", intercept="beta0", prior=hs,
                                  intercept_prior=Normal(5.0))
    return ReLUNet(X, y, prior_sd=1.0, hidden=3)


# ----------------------------------------------------------------------------- from_model
@pytest.mark.parametrize("name", ["logistic_normal", "rhs_logistic", "relu1"])
def test_program_from_family_reproduces_cmdstan_lp(name):
    """The bundled program built from the family alone has CmdStan's lp__ up to a constant."""
    data, draws = _fixture(name)
    program = StanProgram.from_model(_family(name, data), backend="stanli")
    assert program.data["mixis"] == 0
    density = program.log_density()
    U = density.unconstrain(draws)[::8]
    diff = density.log_density(U) - draws.sample_stats["lp__"].reshape(-1)[::8]
    # the CSV holds 6 significant figures: lp__ and the parameters are rounded
    assert np.max(np.abs(diff - np.median(diff))) < 2e-3


def test_a_different_prior_is_seen_by_the_lp_check():
    """The check above can fail: a prior scale off by a factor of two moves lp - lp__."""
    data, draws = _fixture("logistic_normal")
    X, y = np.asarray(data["X"]), np.asarray(data["y"])
    wrong = LogisticRegression(X, y, coef="beta", intercept="alpha", prior=Normal(2.0),
                               intercept_prior=Normal(2.5))
    density = StanProgram.from_model(wrong, backend="stanli").log_density()
    U = density.unconstrain(draws)[::8]
    diff = density.log_density(U) - draws.sample_stats["lp__"].reshape(-1)[::8]
    assert np.ptp(diff) > 0.5


# ----------------------------------------------------------------------------- with_mixis
_LINREG_DATA_PARAMETERS = """
data {
  int<lower=1> N;
  int<lower=1> D;
  matrix[N, D] X;
  vector[N] y;
}
parameters {
  vector[D] beta;
  real<lower=0> sigma;
}
"""

LINREG_LOOP = _LINREG_DATA_PARAMETERS + """
model {
  beta ~ normal(0, 1);
  sigma ~ exponential(1);
  y ~ normal(X * beta, sigma);
}
generated quantities {
  vector[N] log_lik;
  for (n in 1:N) log_lik[n] = normal_lpdf(y[n] | X[n] * beta, sigma);
}
"""

# vectorised linear predictor in a generated-quantity local that clashes with a model-block
# local, a y_rep drawn with _rng that must stay out of the model block, comments with braces
LINREG_VECTORISED = """
functions {
  real half(real x) { return 0.5 * x; }
}""" + _LINREG_DATA_PARAMETERS + """
model {
  vector[N] mu = X * beta;  // { not a block }
  beta ~ normal(0, 1);
  sigma ~ exponential(1);
  y ~ normal(mu, sigma);
}
generated quantities {
  vector[N] mu = X * beta;
  real s = half(2 * sigma);
  vector[N] log_lik;
  array[N] real y_rep = normal_rng(mu, sigma);
  for (n in 1:N) {
    log_lik[n] = normal_lpdf(y[n] | mu[n], s);
  }
}
"""

_LOGISTIC_DATA_PARAMETERS = """
data {
  int<lower=1> N;
  int<lower=1> D;
  matrix[N, D] X;
  array[N] int<lower=0, upper=1> y;
}
parameters {
  real alpha;
  vector[D] beta;
}"""

# log_lik as a constrained array, computed inside a local block (the relu1 fixture's pattern)
LOGISTIC_LOCAL_BLOCK = _LOGISTIC_DATA_PARAMETERS + """
model {
  alpha ~ normal(0, 2.5);
  beta ~ normal(0, 1);
  y ~ bernoulli_logit(alpha + X * beta);
}
generated quantities {
  array[N] real<upper=0> log_lik;
  {
    vector[N] eta = alpha + X * beta;
    for (n in 1:N) log_lik[n] = bernoulli_logit_lpmf(y[n] | eta[n]);
  }
}
"""

# log_lik as a transformed parameter the model block sums (no copy needed: the model block
# sees it), with a y_rep in generated quantities
LOGISTIC_TRANSFORMED = _LOGISTIC_DATA_PARAMETERS + """
transformed parameters {
  vector[N] log_lik;
  for (n in 1:N) log_lik[n] = bernoulli_logit_lpmf(y[n] | alpha + X[n] * beta);
}
model {
  alpha ~ normal(0, 2.5);
  beta ~ normal(0, 1);
  target += sum(log_lik);
}
generated quantities {
  array[N] int y_rep = bernoulli_logit_rng(alpha + X * beta);
}
"""


def _linreg_ll(theta, data):
    D = data["D"]
    beta, sigma = theta[:, :D], theta[:, D]
    return stats.norm.logpdf(np.asarray(data["y"])[None, :], beta @ np.asarray(data["X"]).T,
                             sigma[:, None])


def _logistic_ll(theta, data):
    eta = theta[:, :1] + theta[:, 1:] @ np.asarray(data["X"]).T
    y = np.asarray(data["y"])[None, :]
    return np.where(y == 1, np.log(expit(eta)), np.log(expit(-eta)))


def _data(kind, rng):
    n, d = 12, 3
    X = rng.normal(size=(n, d))
    if kind == "logistic":
        return {"N": n, "D": d, "X": X, "y": rng.integers(0, 2, size=n)}
    return {"N": n, "D": d, "X": X, "y": X @ rng.normal(size=d) + rng.normal(size=n)}


def _density(path, data, mixis=None):
    data = dict(data)
    if mixis is not None:
        data.update(mixis=mixis, mixis_n_rows=0, mixis_rows=[])
    return StanLogDensity.from_stan(path, stan._jsonable(data))


@pytest.mark.parametrize(
    "code, kind, loglik",
    [(LINREG_LOOP, "linreg", _linreg_ll), (LINREG_VECTORISED, "linreg", _linreg_ll),
     (LOGISTIC_LOCAL_BLOCK, "logistic", _logistic_ll),
     (LOGISTIC_TRANSFORMED, "logistic", _logistic_ll)],
    ids=["loop", "vectorised", "local-block", "transformed-parameter"],
)
def test_with_mixis_adds_exactly_log_sum_exp_of_minus_log_lik(tmp_path, code, kind, loglik):
    path = tmp_path / "user.stan"
    path.write_text(code)
    data = _data(kind, np.random.default_rng(7))
    user = StanProgram(path, data, backend="stanli")
    assert not user.declares_mixis
    flagged = user.with_mixis()
    assert flagged.declares_mixis and flagged.stan_file != path
    assert flagged.data["mixis"] == 0
    # the generated quantities are untouched
    gq = code[code.index("generated quantities"):]
    assert gq.strip() in flagged.stan_file.read_text()

    original = _density(path, data)
    off, on = _density(flagged.stan_file, data, 0), _density(flagged.stan_file, data, 1)
    U = np.random.default_rng(1).normal(scale=0.7, size=(25, original.n_params))
    base = original.log_density(U)
    np.testing.assert_allclose(off.log_density(U), base, rtol=0, atol=1e-12)
    theta = U.copy()
    if kind == "linreg":
        theta[:, -1] = np.exp(U[:, -1])  # sigma > 0: log transform
    expected = logsumexp(-loglik(theta, data), axis=1)
    np.testing.assert_allclose(on.log_density(U) - base, expected, rtol=1e-12, atol=1e-10)
    # and the flagged program's own log_lik is still the original's
    np.testing.assert_allclose(on.log_lik(U), original.log_lik(U), rtol=0, atol=1e-12)


def test_with_mixis_program_samples_the_mixture(tmp_path):
    """The flagged program runs through StanProgram.fit(mixis=True)."""
    path = tmp_path / "user.stan"
    path.write_text(LOGISTIC_LOCAL_BLOCK)
    data = _data("logistic", np.random.default_rng(7))
    prog = StanProgram(path, data, backend="stanli").with_mixis()
    mix = prog.fit(mixis=True, chains=2, warmup=150, draws=100, seed=3)
    assert mix.log_lik().shape == (2, 100, 12)
    assert "mixis proposal" in mix.source


def test_with_mixis_is_identity_for_flagged_programs():
    data, _ = _fixture("logistic_normal")
    prog = StanProgram("logistic_normal", {**data, "mixis": 0}, backend="stanli")
    assert prog.with_mixis() is prog


@pytest.mark.parametrize(
    "gq, match",
    [("generated quantities { vector[N] log_lik;\n"
      "  for (n in 1:N) log_lik[n] = -0.5 * square(y[n] - X[n] * beta); }",
      "not computed from \\*_lpmf / \\*_lpdf"),
     ("generated quantities { vector[N] log_lik;\n  real e = normal_rng(0, 1);\n"
      "  for (n in 1:N) log_lik[n] = normal_lpdf(y[n] | X[n] * beta + 0 * e, sigma); }",
      "random numbers"),
     ("generated quantities { vector[N] ll;\n"
      "  for (n in 1:N) ll[n] = normal_lpdf(y[n] | X[n] * beta, sigma); }",
      "declare no 'log_lik'")],
    ids=["no-lpdf", "rng", "no-log_lik"],
)
def test_with_mixis_refuses_with_the_two_lines_to_add(tmp_path, gq, match):
    code = LINREG_LOOP[:LINREG_LOOP.index("generated quantities")] + gq
    with pytest.raises(MixisProgramError, match=match) as err:
        add_mixis_flag(code)
    message = str(err.value)
    assert "`int<lower=0, upper=2> mixis;`" in message
    assert f"`{TARGET_LINE}`" in message
    assert "`array[mixis_n_rows] int<lower=1> mixis_rows;`" in message


def test_add_mixis_flag_creates_a_missing_data_block(tmp_path):
    code = ("parameters { real mu; }\nmodel { mu ~ normal(0, 1); }\n"
            "generated quantities { vector[1] log_lik; log_lik[1] = normal_lpdf(1 | mu, 1); }")
    out = add_mixis_flag(code)
    assert out.index("int<lower=0, upper=2> mixis;") < out.index("parameters")
    (tmp_path / "a.stan").write_text(code)
    (tmp_path / "b.stan").write_text(out)
    mu = np.linspace(-2, 2, 5)[:, None]
    base = _density(tmp_path / "a.stan", {}).log_density(mu)
    on = _density(tmp_path / "b.stan", {}, 1).log_density(mu)
    # one observation: log_sum_exp(-log_lik) = -log N(1 | mu, 1)
    np.testing.assert_allclose(on - base, -stats.norm.logpdf(1.0, mu[:, 0], 1.0), atol=1e-12)


# ----------------------------------------------------------------------------- warm start
def test_warm_started_mixture_fit_is_within_mc_error_of_truth():
    """8 short chains started from the posterior fit; truth from brute-force refits."""
    data, posterior = _fixture("logistic_normal")
    program = StanProgram.from_model(_family("logistic_normal", data), backend="stanli")
    mix = program.fit_mixture(posterior, seed=2, chains=8, warmup=100, draws=250)
    assert mix.log_lik().shape == (8, 250, 54)
    truth = np.loadtxt(FIXTURES / "truth" / "logistic_normal.csv", delimiter=",", skiprows=1)
    est = mixis_loo(mix.log_lik())
    combined = np.sqrt(est.mcse_total ** 2 + np.sum(truth[:, 2] ** 2))
    assert abs(est.elpd_i.sum() - truth[:, 1].sum()) < 3 * combined
    assert np.sqrt(np.mean((est.elpd_i - truth[:, 1]) ** 2)) < 0.08


def test_warm_started_mixture_fit_takes_a_tree_depth_cap():
    """``max_treedepth`` caps every transition's tree (the posterior's trees are deeper
    here), is recorded in the draws' source, and is checked."""
    data, posterior = _fixture("logistic_normal")
    program = StanProgram.from_model(_family("logistic_normal", data), backend="stanli")
    assert np.median(posterior.sample_stats["treedepth__"]) > 2
    mix = program.fit_mixture(posterior, seed=2, chains=2, warmup=20, draws=50, max_treedepth=2)
    assert np.max(mix.sample_stats["treedepth__"]) <= 2
    assert np.max(mix.sample_stats["n_leapfrog__"]) <= 3
    assert "max tree depth 2" in mix.source
    with pytest.raises(ValueError, match="max_treedepth must be at least 1"):
        program.fit_mixture(posterior, seed=2, chains=2, warmup=20, draws=50, max_treedepth=0)


def test_mixture_fit_samples_every_chain_at_once_with_the_same_draws(monkeypatch):
    """By default the warm-started fit hands the sampler all its chains at once (4 here,
    whatever the cores), and that changes no draw: one chain at a time gives the same."""
    import stanli

    data, posterior = _fixture("logistic_normal")
    program = StanProgram.from_model(_family("logistic_normal", data), backend="stanli")
    asked = []
    sample = stanli.Model.sample

    def spy(self, *args, **kw):
        asked.append(kw.get("parallel_chains"))
        return sample(self, *args, **kw)

    monkeypatch.setattr(stanli.Model, "sample", spy)
    at_once = program.fit_mixture(posterior, seed=2, chains=4, warmup=20, draws=40)
    one = program.fit_mixture(posterior, seed=2, chains=4, warmup=20, draws=40,
                              parallel_chains=1)
    assert asked == [4, 1]
    np.testing.assert_array_equal(at_once.log_lik(), one.log_lik())


def test_divergent_mixture_fit_is_rerun_at_a_higher_adapt_delta():
    """A centred hierarchical program (leave one group out): the warm-started mixture fit
    at adapt_delta 0.8 has more than 1 % of its draws divergent; fit_mixture reruns it once
    at 0.99 with another seed, records that in the draws, and the rerun has fewer."""
    from loo_adapt.estimators.mixture_checks import MAX_DIVERGENT_SHARE, divergent_count

    rng = np.random.default_rng(1)
    n_groups, n = 6, 30
    g = rng.integers(1, n_groups + 1, n)
    y = rng.normal(0, 1, n_groups)[g - 1] + rng.normal(size=n)
    data = {"N": n, "J": n_groups, "g": g.tolist(), "y": y.tolist()}
    program = StanProgram(pathlib.Path(__file__).resolve().parent / "programs"
                          / "centred_groups.stan", data, backend="stanli")
    assert program.n_obs_var == "J"  # log_lik is sized by J
    posterior = program.fit(seed=1)
    flagged = program.with_mixis()
    first = flagged.fit_mixture(posterior, seed=3, retry_divergent=False)
    k0, n0 = divergent_count(first)
    assert k0 > MAX_DIVERGENT_SHARE * n0 and "rerun" not in first.source
    mix = flagged.fit_mixture(posterior, seed=3)
    k1, n1 = divergent_count(mix)
    assert mix.config["adapt_delta"] == 0.99 and "rerun at adapt_delta 0.99" in mix.source
    assert mix.config["rerun_after_divergent"] == (f"{k0} of {n0} draws divergent at "
                                                   "adapt_delta 0.8")
    assert n1 == n0 and k1 < k0


def test_loo_does_mixis_from_a_program_built_from_the_family():
    """loo(fit, method="mixis") with the program from the family alone, against truth."""
    from loo_adapt import loo

    data, posterior = _fixture("rhs_logistic")
    family = _family("rhs_logistic", data)
    res = loo(posterior, method="mixis", program=StanProgram.from_model(family, backend="stanli"),
              seed=4)
    rows = res.loo_adapt
    truth = np.loadtxt(FIXTURES / "truth" / "rhs_logistic.csv", delimiter=",", skiprows=1)
    assert set(rows.method) <= {"mixis", "mixis+psis"} and "mixis" in set(rows.method)
    combined = np.sqrt(rows.mcse_total ** 2 + np.sum(truth[:, 2] ** 2))
    assert abs(rows.elpd_i.sum() - truth[:, 1].sum()) < 3 * combined
    # PSIS on the same posterior draws is off by 2.4 (README of the truth files)
    assert abs(rows.elpd_i.sum() - truth[:, 1].sum()) < 1.0


def test_a_transformed_parameter_log_lik_without_a_density_is_refused():
    code = LOGISTIC_TRANSFORMED.replace(
        "bernoulli_logit_lpmf(y[n] | alpha + X[n] * beta)", "-square(alpha + X[n] * beta)")
    with pytest.raises(MixisProgramError, match="statements in transformed parameters"):
        add_mixis_flag(code)
