"""Program <-> fit identity (`loo_adapt.stan.identity`), on real CmdStan 2.35 output: the
fit's own program and data pass for every method (NUTS, ADVI, Laplace, Pathfinder); another
model, another N, flipped labels, another prior scale (in the data or in the program text)
are refused before anything is estimated, with a message that says what differs."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import loo_adapt
from loo_adapt.io.readers import read_draws
from loo_adapt.stan.identity import ProgramMismatchError, check_program_matches
from loo_adapt.stan.program import StanProgram

pytest.importorskip("stanli", reason="BridgeStan comes with the stanli extra")

FIX = pathlib.Path(__file__).resolve().parents[1] / "data" / "cmdstan"
MODELS = ("logistic_normal", "rhs_logistic", "relu1")
METHODS = ("sample", "variational", "laplace", "pathfinder")


def _draws(model, method):
    files = sorted(p for p in (FIX / model / method).glob("*.csv") if "-opt-" not in p.name)
    return read_draws([str(p) for p in files])


def _data(model):
    return json.loads((FIX / f"{model}.data.json").read_text())


def _program(model, data=None, text=None, tmp=None):
    if text is None:
        return StanProgram(FIX / f"{model}.stan", _data(model) if data is None else data)
    path = tmp / f"{model}_edited.stan"
    path.write_text(text)
    return StanProgram(path, _data(model) if data is None else data)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("model", MODELS)
def test_the_fits_own_program_passes(model, method):
    check = check_program_matches(_program(model), _draws(model, method))
    assert check.n_draws >= 8
    assert check.density == ("lp__" if method == "sample" else "log_p__")


@pytest.mark.parametrize("other", ["rhs_logistic", "relu1"])
def test_another_model_is_refused_naming_the_variable(other):
    with pytest.raises(ProgramMismatchError, match="declares the parameter"):
        check_program_matches(_program(other), _draws("logistic_normal", "sample"))


def test_another_n_is_refused():
    data = _data("logistic_normal")
    data.update(N=data["N"] - 1, y=data["y"][:-1], X=data["X"][:-1])
    with pytest.raises(ProgramMismatchError, match="N = 53 observations .* has 54"):
        check_program_matches(_program("logistic_normal", data),
                              _draws("logistic_normal", "sample"))


@pytest.mark.parametrize("n_flipped", [1, 10])
def test_flipped_labels_are_refused_naming_the_rows(n_flipped):
    data = _data("logistic_normal")
    y = np.array(data["y"])
    rows = np.arange(41, 41 + n_flipped) % y.size
    y[rows] = 1 - y[rows]
    data["y"] = y.tolist()
    with pytest.raises(ProgramMismatchError, match=f"log_lik differs .* at {n_flipped} of 54"):
        check_program_matches(_program("logistic_normal", data),
                              _draws("logistic_normal", "sample"))


@pytest.mark.parametrize("method", ["sample", "variational"])
@pytest.mark.parametrize("factor", [1.2, 1.01])
def test_another_prior_scale_in_the_data_is_refused(method, factor):
    data = _data("logistic_normal")
    data["prior_sd"] = data["prior_sd"] * factor
    with pytest.raises(ProgramMismatchError, match="log density does not match"):
        check_program_matches(_program("logistic_normal", data),
                              _draws("logistic_normal", method))


def test_another_prior_in_the_program_text_is_refused(tmp_path):
    text = (FIX / "logistic_normal.stan").read_text()
    edited = text.replace("beta ~ normal(0, prior_sd);", "beta ~ student_t(5, 0, prior_sd);")
    assert edited != text
    with pytest.raises(ProgramMismatchError, match="log density does not match"):
        check_program_matches(_program("logistic_normal", text=edited, tmp=tmp_path),
                              _draws("logistic_normal", "sample"))


def test_loo_refuses_a_wrong_program_before_estimating_anything(monkeypatch):
    """The issue's case: the logistic_normal fit with the rhs_logistic program (and, of the
    same shapes, flipped labels) is refused at once; no mixture fit or refit starts."""
    from loo_adapt.stan import program as program_module

    def no_fit(*a, **k):
        raise AssertionError("a fit started before the identity check")

    monkeypatch.setattr(program_module.StanProgram, "fit", no_fit)
    monkeypatch.setattr(program_module.StanProgram, "fit_mixture", no_fit)
    draws = _draws("logistic_normal", "sample")
    with pytest.raises(ProgramMismatchError):
        loo_adapt.loo(draws, program=_program("rhs_logistic"))
    data = _data("logistic_normal")
    y = np.array(data["y"])
    y[:10] = 1 - y[:10]
    data["y"] = y.tolist()
    for fallback in ((), ("refit",)):
        with pytest.raises(ProgramMismatchError, match="log_lik differs"):
            loo_adapt.loo(draws, program=_program("logistic_normal", data),
                          estimator="psis" if fallback else "auto", fallback=fallback)


def test_kfold_refuses_a_program_that_is_not_the_fits():
    """k-fold given the full-data fit (its Draws) refits only the identity-checked program."""
    from loo_adapt.kfold import kfold

    data = _data("logistic_normal")
    data["prior_sd"] = data["prior_sd"] * 2
    with pytest.raises(ProgramMismatchError, match="log density does not match"):
        kfold(_program("logistic_normal", data), K=2,
                        log_lik=_draws("logistic_normal", "sample"), progress=False)


def _without_lp(draws):
    """The same draws as an InferenceData built by hand would give: no lp__."""
    from loo_adapt.draws import Draws

    stats = {k: v for k, v in (draws.sample_stats or {}).items() if k != "lp__"}
    return Draws(variables=dict(draws.variables), sample_stats=stats)


@pytest.mark.parametrize("model", MODELS)
def test_without_lp_the_fits_own_program_passes_by_its_score(model):
    check = check_program_matches(_program(model), _without_lp(_draws(model, "sample")))
    assert check.density == "score"
    assert 0.0 < check.max_score_z < check.score_bound


@pytest.mark.parametrize("edit", [("data", 1.2), ("data", 0.5),
                                  ("text", "beta ~ student_t(5, 0, prior_sd);")])
def test_without_lp_another_prior_is_refused_by_the_score(edit, tmp_path):
    """The sweep's case: draws without lp__ (az.from_dict) and another prior were accepted,
    every row called reliable.  The mean gradient of the wrong log density is many MCSEs
    from zero (a 20 % wider prior: about 7 against the bound 5.5)."""
    kind, value = edit
    if kind == "data":
        data = _data("logistic_normal")
        data["prior_sd"] = data["prior_sd"] * value
        program = _program("logistic_normal", data)
    else:
        text = (FIX / "logistic_normal.stan").read_text()
        program = _program("logistic_normal", tmp=tmp_path,
                           text=text.replace("beta ~ normal(0, prior_sd);", value))
    with pytest.raises(ProgramMismatchError, match="gradient was checked instead.*Monte Carlo"):
        check_program_matches(program, _without_lp(_draws("logistic_normal", "sample")))


def test_approximate_draws_without_log_p_warn_that_the_prior_is_not_checked():
    from loo_adapt.draws import Draws

    d = _draws("logistic_normal", "variational")
    bare = Draws(variables=dict(d.variables), method=d.method, config=d.config)
    with pytest.warns(UserWarning, match="prior and model could not be checked"):
        check = check_program_matches(_program("logistic_normal"), bare)
    assert check.density == ""


def _fit_with_stanli(path, data):
    import stanli

    from loo_adapt.io.readers import read_stanli

    fit = stanli.Model(stan_file=str(path), data=data, seed=3).sample(
        chains=2, seed=3, warmup=200, samples=200, refresh=0)
    return read_stanli(fit)


@pytest.mark.parametrize("log_lik, refused", [
    ("bernoulli_logit_lpmf(y[n] | 0.5 * (alpha + X[n] * beta))", True),  # another scale
    ("bernoulli_logit_lpmf(y[n] | alpha + X[n] * beta) + 0.5", False),    # a constant: fine
])
def test_a_log_lik_that_is_not_the_model_blocks_term_is_refused(log_lik, refused, tmp_path):
    """The sweep's case: a program whose log_lik is not its model block's likelihood term
    (fitted with that program, so its log_lik matches the fit's) had every row verified,
    1.8 nats off the refits.  Oracle: at the fit's draws, log p(theta | data) - log p(theta |
    data without i) is observation i's model-block term, so it minus log_lik[i] is a
    constant only when log_lik is that term (plus a constant)."""
    text = (FIX / "logistic_normal.stan").read_text()
    old = "bernoulli_logit_lpmf(y[n] | alpha + X[n] * beta)"
    assert old in text
    path = tmp_path / "edited.stan"
    path.write_text(text.replace(old, log_lik))
    data = _data("logistic_normal")
    draws = _fit_with_stanli(path, data)
    program = StanProgram(path, data)
    if refused:
        with pytest.raises(ProgramMismatchError, match="not that observation's term"):
            check_program_matches(program, draws)
    else:
        check = check_program_matches(program, draws)
        assert len(check.log_lik_terms) == 3 and check.max_term_residual < 1e-9


def test_a_program_that_does_not_compile_says_so(tmp_path):
    """The sweep's case: a syntax error was reported as 'does not load with its data'."""
    path = tmp_path / "broken.stan"
    path.write_text((FIX / "logistic_normal.stan").read_text().replace("real alpha;",
                                                                       "real alpha"))
    with pytest.raises(ProgramMismatchError, match="broken.stan does not compile: Syntax error"):
        check_program_matches(StanProgram(path, _data("logistic_normal")),
                              _draws("logistic_normal", "sample"))


_NORMAL_MEAN = """
data { int<lower=1> N; vector[N] y; real prior_mean; real<lower=0> prior_sd; }
parameters { real mu; }
model { mu ~ normal(prior_mean, prior_sd); y ~ normal(mu, 1); }
generated quantities {
  vector[N] log_lik;
  for (n in 1:N) log_lik[n] = normal_lpdf(y[n] | mu, 1);
}
"""


def test_the_score_check_is_calibrated_on_exact_posterior_draws(tmp_path):
    """Null distribution of the score check: a normal mean with a normal prior, whose
    posterior is normal in closed form, sampled exactly (4 chains of 250 i.i.d. draws, no
    lp__).  The mean gradient's z is then |N(0, 1)|: its mean square over 40 replicates is
    near 1 and no replicate reaches the bound; with another prior mean every replicate is
    refused."""
    from loo_adapt.draws import Draws

    path = tmp_path / "normal_mean.stan"
    path.write_text(_NORMAL_MEAN)
    rng = np.random.default_rng(11)
    y = rng.normal(0.7, 1.0, 20)
    data = {"N": 20, "y": y.tolist(), "prior_mean": 0.0, "prior_sd": 3.0}
    prec = 1.0 / 9.0 + y.size
    mean, sd = y.sum() / prec, 1.0 / np.sqrt(prec)
    right = StanProgram(path, data)
    wrong = StanProgram(path, {**data, "prior_mean": 2.0, "prior_sd": 0.3})
    z = []
    for rep in range(40):
        mu = rng.normal(mean, sd, size=(4, 250))
        ll = -0.5 * np.log(2 * np.pi) - 0.5 * (y - mu[..., None]) ** 2
        draws = Draws(variables={"mu": mu, "log_lik": ll})
        check = check_program_matches(right, draws)
        assert check.density == "score" and check.max_score_z < check.score_bound
        z.append(check.max_score_z)
        if rep < 5:
            with pytest.raises(ProgramMismatchError, match="gradient was checked instead"):
                check_program_matches(wrong, draws)
    assert 0.6 < np.mean(np.square(z)) < 1.5, np.mean(np.square(z))


def test_random_numbers_in_transformed_data_are_named_in_the_refusal(tmp_path):
    """A program drawing in transformed data (here a random prior location) cannot be the
    fit's model in any later run: the refusal says why and what to do, beside the usual
    'the prior, the data or the model differs'."""
    text = (FIX / "logistic_normal.stan").read_text()
    assert "transformed data" not in text
    edited = text.replace("parameters {", "transformed data {\n  real shift = normal_rng(0, "
                          "1);\n}\nparameters {", 1).replace("alpha ~ normal(0, scale_icept)",
                                                             "alpha ~ normal(shift, scale_icept)")
    assert "normal(shift, scale_icept)" in edited
    path = tmp_path / "logistic_tdata_rng.stan"
    path.write_text(edited)
    import stanli

    fit = stanli.Model(stan_file=str(path), data=_data("logistic_normal")).sample(
        seed=2, refresh=0, chains=2, samples=200, warmup=200)
    with pytest.raises(ProgramMismatchError, match=r"differs from the fit's; the program draws "
                       r"random numbers in transformed data \(normal_rng\).*pass those values "
                       "as data"):
        check_program_matches(StanProgram(path, _data("logistic_normal")), read_draws(fit))
    # without the draw the same program is no mismatch and gets no such words
    assert "transformed data" not in str(
        check_program_matches(_program("logistic_normal"), _draws("logistic_normal", "sample")))


def test_the_programs_log_lik_name_is_the_default_var_name(tmp_path):
    """StanProgram(..., log_lik="ll") names the variable loo() reads; a var_name that
    contradicts it is refused with the fix."""
    text = (FIX / "logistic_normal.stan").read_text().replace("log_lik", "ll")
    path = tmp_path / "logistic_ll.stan"
    path.write_text(text)
    draws = _draws("logistic_normal", "sample")
    renamed = loo_adapt.read_draws({"ll": draws.variables["log_lik"],
                                    **{k: v for k, v in draws.variables.items()
                                       if k != "log_lik"}}, method="mcmc",
                                   sample_stats=draws.sample_stats)
    program = StanProgram(path, _data("logistic_normal"), log_lik="ll")
    from loo_adapt.api import _program_log_lik

    assert _program_log_lik(program, None) == "ll"
    assert _program_log_lik(program, "ll") == "ll"
    assert _program_log_lik(None, None) is None
    with pytest.raises(ValueError, match=r"var_name='log_lik'.*StanProgram\(\.\.\., "
                       r"log_lik='log_lik'\)"):
        loo_adapt.loo(renamed, program=program, var_name="log_lik")
    with pytest.raises(ValueError, match=r"var_name='ll'.*StanProgram\(\.\.\., "
                       r"log_lik='ll'\)"):
        loo_adapt.loo(renamed, program=_program("logistic_normal"), var_name="ll")
