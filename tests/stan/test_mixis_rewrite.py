"""`add_mixis_flag` on a corpus of programs written as people write them (tests/stan/programs).

Each program is rewritten (pure Python, and through ``stanc --print-canonical`` when a stanc
is found) and checked with BridgeStan (stanli's embedded compiler, no C++ toolchain) at random
unconstrained points against two oracles that do not involve the rewrite: the original
program's log density (``mixis = 0`` must equal it to 1e-10) and the original program's own
generated ``log_lik`` (``mixis = 1`` must add exactly ``logsumexp(-log_lik)``, over every row
or over ``mixis_rows``). A few programs are sampled: MixIS through ``loo(fit, program=...)``
must agree with PSIS within Monte Carlo error on data where PSIS is easy (every k-hat < 0.5).
"""

import pathlib
import zlib

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from loo_adapt.stan import backends as stan
from loo_adapt.stan.mixis_program import (
    FLAG_LINES,
    TARGET_LINE,
    MixisProgramError,
    add_mixis_flag,
)
from loo_adapt.stan.stanc import find_stanc

pytest.importorskip("stanli")
pytest.importorskip("bridgestan")

from loo_adapt.stan.log_density import StanLogDensity  # noqa: E402
from loo_adapt.stan.program import StanProgram  # noqa: E402

PROGRAMS = pathlib.Path(__file__).resolve().parent / "programs"


# ----------------------------------------------------------------------------- data
def _logistic(rng, n=12, d=3):
    X = rng.normal(size=(n, d))
    return {"N": n, "D": d, "X": X, "y": rng.integers(0, 2, size=n)}


def _linreg(rng, n=12, d=3):
    X = rng.normal(size=(n, d))
    return {"N": n, "D": d, "X": X, "y": X @ rng.normal(size=d) + rng.normal(size=n)}


def _normal(rng, n=10):
    return {"N": n, "y": rng.normal(1.0, 2.0, size=n)}


def _xy(rng, n=10):
    x = rng.normal(size=n)
    return {"N": n, "x": x, "y": 0.5 + x + rng.normal(size=n)}


def _poisson(rng, n=10):
    x = rng.normal(size=n)
    exposure = rng.uniform(0.5, 2.0, size=n)
    return {"N": n, "x": x, "exposure": exposure,
            "y": rng.poisson(exposure * np.exp(0.3 + 0.5 * x))}


def _grouped(rng, size=(2, 3, 4)):
    size = np.asarray(size)
    return {"J": size.size, "size": size, "N": int(size.sum()),
            "y": np.repeat(rng.normal(size=size.size), size) + rng.normal(size=size.sum())}


def _binary_x(rng, n=12):
    x = rng.normal(size=n)
    return {"N": n, "x": x, "y": (rng.uniform(size=n) < 1 / (1 + np.exp(-x))).astype(int)}


def _censored(rng, n=10):
    return {"N": n, "t": rng.weibull(1.5, size=n) * 2.0,
            "censored": rng.integers(0, 2, size=n)}


def _counts(rng, n=8):
    return {"N": n, "k": rng.poisson(3.0, size=n)}


def _schools(rng):
    return {"J": 8, "y": [28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0],
            "sigma": [15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0]}


def _schools_tau(rng):
    return {**_schools(rng), "tau": 6.0}


def _group_index(rng, n_groups=4, n=16):
    g = rng.integers(1, n_groups + 1, size=n)
    return {"N": n, "J": n_groups, "g": g, "y": rng.normal(size=n_groups)[g - 1]
            + rng.normal(size=n)}


def _binomial(rng, n=6):
    return {"N": n, "k": rng.binomial(10, 0.3, size=n)}


def _brms(rng, n=12, k=2):
    X = rng.normal(size=(n, k))
    return {"N": n, "K": k, "X": X, "Y": 1.0 + X @ rng.normal(size=k) + rng.normal(size=n)}


def _brms_groups(rng, n=12, n_groups=3):
    x = rng.normal(size=n)
    g = rng.integers(1, n_groups + 1, size=n)
    return {"N": n, "Y": 0.5 + x + rng.normal(size=n), "K": 2,
            "X": np.column_stack([np.ones(n), x]), "Kc": 1, "N_1": n_groups, "M_1": 1,
            "J_1": g, "Z_1_1": np.ones(n), "prior_only": 0}


def _poisson_offset(rng, n=10, k=2):
    X = rng.normal(size=(n, k))
    exposure = rng.uniform(0.5, 3.0, size=n)
    return {"N": n, "K": k, "X": X, "E": exposure,
            "y": rng.poisson(exposure * np.exp(0.2 + X @ rng.normal(scale=0.5, size=k)))}


def _negbin(rng, n=10):
    x = rng.normal(size=n)
    return {"N": n, "x": x, "y": rng.negative_binomial(3, 3 / (3 + np.exp(1 + 0.5 * x)))}


def _ordinal(rng, n=12):
    x = rng.normal(size=n)
    y = np.clip(np.round(2.5 + x + 0.7 * rng.logistic(size=n)), 1, 4).astype(int)
    return {"N": n, "K": 4, "x": x, "y": y}


def _missing(rng, n=10):
    return {"N_obs": n, "N_mis": 3, "y_obs": rng.normal(1.0, 2.0, size=n)}


def _glm(rng, n=12, k=2):
    X = rng.normal(size=(n, k))
    return {"N": n, "K": k, "X": X,
            "y": (rng.uniform(size=n) < 1 / (1 + np.exp(-X @ np.array([1.0, -1.0])))).astype(int)}


def _zero_inflated(rng, n=12):
    x = rng.normal(size=n)
    y = np.where(rng.uniform(size=n) < 0.3, 0, rng.poisson(np.exp(0.8 + 0.5 * x)))
    return {"N": n, "x": x, "y": y}


def _two_outcomes(rng, n=10):
    x = rng.normal(size=n)
    return {"N": n, "x": x, "y1": 1.0 + 0.7 * x + rng.normal(size=n),
            "y2": rng.poisson(np.exp(0.5 + 0.7 * x))}


def _mvn_rows(rng, n=10, k=3):
    corr = np.array([[1.0, 0.5, 0.2], [0.5, 1.0, 0.3], [0.2, 0.3, 1.0]])[:k, :k]
    return {"N": n, "K": k, "y": rng.multivariate_normal(np.arange(k, dtype=float), corr,
                                                         size=n)}


def _poisson_glm(rng, n=12, k=2):
    X = rng.normal(size=(n, k))
    return {"N": n, "K": k, "X": X, "y": rng.poisson(np.exp(0.5 + X @ np.array([0.4, -0.3])))}


def _offset_groups(rng, n=16, j=4):
    g = np.arange(n) % j + 1
    return {"N": n, "J": j, "g": g, "y": rng.normal(size=j)[g - 1] + rng.normal(size=n)}


def _binomial_trials(rng, n=12, k=2):
    X = rng.normal(size=(n, k))
    trials = rng.integers(5, 30, size=n)
    p = 1 / (1 + np.exp(-(0.3 + X @ np.array([0.8, -0.5]))))
    return {"N": n, "K": k, "X": X, "trials": trials, "y": rng.binomial(trials, p)}


# program -> (idioms it exercises, data builder)
CORPUS = {
    "loop_yrep": ("log_lik and y_rep (_rng) in the same loop", _logistic),
    "local_block_shared": ("local block shared with a vectorised _rng, target += model",
                           _logistic),
    "user_lpdf_lupdf": ("user _lpdf on _lupdf, called as _lupdf in the model, array log_lik",
                        _normal),
    "user_vector_function": ("user function returning the log_lik vector, declaration "
                             "with initialiser", _linreg),
    "tdata_tparams": ("transformed data and transformed parameters", _linreg),
    "target_vectorised_array": ("vectorised target +=, array[N] real log_lik, transformed "
                                "data, vectorised _rng at declaration", _poisson),
    "nested_running_index": ("nested loops with a running index n += 1, y_rep inside",
                             _grouped),
    "constrained_array_loglik": ("array[N] real<upper=0> log_lik in a local block",
                                 _logistic),
    "closed_form_vectorised": ("one vectorised closed-form assignment", _binary_x),
    "comments_strings": ("comments and strings mentioning log_lik, _rng and braces, a print",
                         _normal),
    "censored_if_else": ("if / else if / else with lccdf, reject, _rng in the loop",
                         _censored),
    "sibling_scopes": ("sibling blocks declaring the same local, one from _rng; model-block "
                       "locals with the generated quantities' names", _xy),
    "while_profile": ("profile block, while loop, break, running index, user _lpmf on "
                      "_lupmf", _counts),
    "mixture_simplex": ("log_mix, a generated-quantity simplex the log_lik reads, "
                        "categorical_rng", _normal),
    "hierarchical_multi_decl": ("non-centred hierarchy, a multi-variable declaration (one "
                                "from _rng), a quantity computed from log_lik afterwards",
                                _schools),
    "no_model_block_vector_fn": ("no model block, row_vector log_lik", _binomial),
    "schools_known_tau": ("log_lik sized by J, no N in the data", _schools_tau),
    "centred_groups": ("log_lik per group filled with += over a group index, sized by J "
                       "while the data also has N", _group_index),
    "brms_centred": ("brms's shape: predictors centred in transformed data, a glm call, "
                     "log_lik added by hand", _brms),
    "brms_hierarchical": ("brms's shape for a varying intercept: the likelihood inside "
                          "if (!prior_only) with a local mu, lprior in transformed "
                          "parameters, a group index", _brms_groups),
    "transformed_loglik": ("log_lik a transformed parameter the model block sums, y_rep in "
                           "generated quantities", _logistic),
    "poisson_offset": ("poisson_log with an offset from transformed data, an int y_rep in a "
                       "local block of generated quantities", _poisson_offset),
    "negbin": ("neg_binomial_2_log with a dispersion parameter", _negbin),
    "ordinal": ("ordered cut points, ordered_logistic in a loop", _ordinal),
    "missing": ("missing outcomes as parameters, log_lik counted by N_obs", _missing),
    "glm": ("bernoulli_logit_glm; log_lik through a one-row slice X[n:n] and {y[n]}", _glm),
    "zero_inflated": ("zero-inflated Poisson: log_sum_exp in an if / else in the loop, a "
                      "local real, y_rep from a ternary on bernoulli_rng", _zero_inflated),
    "two_outcomes": ("two outcomes per observation (normal and Poisson), log_lik their sum",
                     _two_outcomes),
    "mvn_rows": ("array[N] vector[K] rows, multi_normal_cholesky, an LKJ Cholesky factor, a "
                 "local matrix in a local block", _mvn_rows),
    "poisson_glm": ("poisson_log_glm in the model block, log_lik from a matrix row X[n]",
                    _poisson_glm),
    "offset_multiplier": ("varying intercepts non-centred by <offset, multiplier>, indexed "
                          "through a group array in the loop", _offset_groups),
    "binomial_trials": ("binomial_logit with trials, a vectorised binomial_rng outside the "
                        "loop, a local eta in a local block", _binomial_trials),
}


def _modes():
    stanc = find_stanc()
    return [pytest.param(False, id="python"),
            pytest.param(True, id="stanc", marks=pytest.mark.skipif(
                stanc is None, reason="no stanc executable found (LOO_ADAPT_STANC, PATH, "
                                      "CMDSTAN, cmdstanpy, httpstan)"))]


def _density(path, data, **flags):
    return StanLogDensity.from_stan(path, stan._jsonable({**data, **flags}))


@pytest.mark.parametrize("use_stanc", _modes())
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_rewrite_adds_exactly_log_sum_exp_of_minus_log_lik(tmp_path, name, use_stanc):
    code = (PROGRAMS / f"{name}.stan").read_text()
    data = CORPUS[name][1](np.random.default_rng(zlib.crc32(name.encode())))
    flagged = add_mixis_flag(code, use_stanc=use_stanc)
    for line in FLAG_LINES + (TARGET_LINE,):
        assert line in flagged
    # the copy is no reason to draw random numbers in the model block
    model = flagged[flagged.index("log_lik_local"):flagged.index(TARGET_LINE)]
    assert "_rng" not in model
    path = tmp_path / f"{name}_mixis.stan"
    path.write_text(flagged)

    original = _density(PROGRAMS / f"{name}.stan", data)
    n = original.n_obs
    off = _density(path, data, mixis=0, mixis_n_rows=0, mixis_rows=[])
    on = _density(path, data, mixis=1, mixis_n_rows=0, mixis_rows=[])
    rows = np.array([1, n // 2, n])
    some = _density(path, data, mixis=1, mixis_n_rows=3, mixis_rows=rows)
    assert off.n_params == original.n_params

    U = np.random.default_rng(3).normal(scale=0.5, size=(12, original.n_params))
    base = original.log_density(U)
    assert np.all(np.isfinite(base))
    np.testing.assert_allclose(off.log_density(U), base, rtol=0, atol=1e-10)
    ll = original.log_lik(U)  # the original program's generated quantities
    assert ll.shape == (12, n) and np.all(np.isfinite(ll))
    np.testing.assert_allclose(on.log_density(U) - base, logsumexp(-ll, axis=1),
                               rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(some.log_density(U) - base,
                               logsumexp(-ll[:, rows - 1], axis=1), rtol=1e-12, atol=1e-10)
    # the flagged program's generated quantities are the original's
    np.testing.assert_allclose(on.log_lik(U), ll, rtol=0, atol=1e-12)


def test_corpus_is_the_programs_folder():
    assert sorted(p.stem for p in PROGRAMS.glob("*.stan")) == sorted(CORPUS)
    assert len(CORPUS) >= 15


def test_with_mixis_supplies_the_row_defaults(tmp_path):
    """StanProgram fills mixis = 0, mixis_n_rows = 0 and an empty mixis_rows."""
    data = _logistic(np.random.default_rng(0))
    prog = StanProgram(PROGRAMS / "loop_yrep.stan", data, backend="stanli").with_mixis()
    assert prog.declares_mixis
    assert prog.data["mixis"] == 0 and prog.data["mixis_n_rows"] == 0
    assert list(prog.data["mixis_rows"]) == []
    original = _density(PROGRAMS / "loop_yrep.stan", data)
    U = np.random.default_rng(1).normal(size=(5, original.n_params))
    np.testing.assert_allclose(prog.log_density().log_density(U), original.log_density(U),
                               rtol=0, atol=1e-10)


def test_a_program_declaring_only_mixis_gets_no_row_data(tmp_path):
    """Hand-flagged programs with the one-line flag keep working (no mixis_rows added)."""
    code = (PROGRAMS / "loop_yrep.stan").read_text().replace(
        "array[N] int<lower=0, upper=1> y;\n}",
        "array[N] int<lower=0, upper=1> y;\n  int<lower=0, upper=1> mixis;\n}")
    path = tmp_path / "old.stan"
    path.write_text(code)
    prog = StanProgram(path, _logistic(np.random.default_rng(0)), backend="stanli")
    assert prog.declares_mixis and prog.with_mixis() is prog
    assert prog.data["mixis"] == 0 and "mixis_n_rows" not in prog.data
    assert np.isfinite(prog.log_density().log_density(np.zeros((1, 4)))).all()


# ----------------------------------------------------------------------------- refusals
_BASE = (PROGRAMS / "loop_yrep.stan").read_text()
_GQ = _BASE[_BASE.index("generated quantities"):]


@pytest.mark.parametrize("gq, match", [
    ("generated quantities {\n  vector[N] log_lik;\n  real e = normal_rng(0, 1);\n"
     "  for (n in 1:N) log_lik[n] = bernoulli_logit_lpmf(y[n] | alpha + e);\n}",
     r"depends on random numbers \(_rng\).*normal_rng"),
    ("generated quantities {\n  vector[N] log_lik;\n  {\n    vector[N] eta = alpha + X * beta"
     " + to_vector(normal_rng(rep_vector(0, N), 1));\n"
     "    for (n in 1:N) log_lik[n] = bernoulli_logit_lpmf(y[n] | eta[n]);\n  }\n}",
     "random numbers"),
    ("generated quantities {\n  matrix[N, 2] log_lik;\n  for (n in 1:N) log_lik[n] = "
     "rep_row_vector(bernoulli_logit_lpmf(y[n] | alpha), 2);\n}",
     "not a vector or a one-dimensional array"),
    ("generated quantities {\n  vector[N] ll;\n"
     "  for (n in 1:N) ll[n] = bernoulli_logit_lpmf(y[n] | alpha);\n}", "declare no 'log_lik'"),
], ids=["rng-scalar", "rng-in-local", "matrix", "no-log_lik"])
def test_refusals_name_the_cause_and_give_the_lines(gq, match):
    with pytest.raises(MixisProgramError, match=match) as err:
        add_mixis_flag(_BASE.replace(_GQ, gq), use_stanc=False)
    message = str(err.value)
    for line in FLAG_LINES + (TARGET_LINE,):
        assert f"`{line}`" in message


def test_include_and_broken_programs_are_refused_not_crashed():
    with pytest.raises(MixisProgramError, match="#include"):
        add_mixis_flag('#include "other.stan"\n' + _BASE)
    with pytest.raises(MixisProgramError):
        add_mixis_flag(_BASE.replace("vector[N] log_lik;", "vector[N] log_lik"),
                       use_stanc=False)
    # a program the checker cannot compile itself: the rewrite is returned, unchecked, with
    # a warning (the user's own toolchain compiles what stanli may not)
    with pytest.warns(UserWarning, match="not checked"):
        out = add_mixis_flag(_BASE.replace("bernoulli_logit_lpmf(y[n] |",
                                           "bernoulli_logit_lpmf(undeclared[n] |"),
                             use_stanc=False)
    assert TARGET_LINE in out


def test_a_rewrite_that_does_not_compile_is_refused_with_the_lines():
    """A data-only function argument computed from a parameter: valid in generated
    quantities, not in the model block; the compiler's message and the lines to add."""
    code = ("functions { real f(data real x) { return x; } }\n" + _BASE).replace(
        "vector[N] log_lik;", "vector[N] log_lik;\n  real a = alpha;").replace(
        "bernoulli_logit_lpmf(y[n] | alpha", "bernoulli_logit_lpmf(y[n] | f(a)")
    with pytest.raises(MixisProgramError, match="(?s)does not compile.*data-only") as err:
        add_mixis_flag(code, use_stanc=False)
    assert f"`{TARGET_LINE}`" in str(err.value)


# ----------------------------------------------------------------------------- sampling
def _even(n):
    """n standard-normal quantiles: data without outliers, where PSIS is easy."""
    return stats.norm.ppf((np.arange(n) + 0.5) / n)


def _easy_poisson(rng, n=40):
    x = 0.7 * rng.permutation(_even(n))
    exposure = np.linspace(0.5, 2.0, n)
    return {"N": n, "x": x, "exposure": exposure,
            "y": np.round(exposure * np.exp(1 + 0.5 * x)).astype(int)}


@pytest.mark.parametrize("name, make", [
    ("loop_yrep", lambda rng: _logistic(np.random.default_rng(11), n=20, d=2)),
    ("user_lpdf_lupdf", lambda rng: {"N": 30, "y": 1 + 2 * _even(30)}),
    ("target_vectorised_array", _easy_poisson),
], ids=["loop_yrep", "user_lpdf_lupdf", "target_vectorised_array"])
def test_mixis_through_loo_agrees_with_psis_where_psis_is_easy(name, make):
    """The user's program, unflagged, through loo(fit, program=...): MixIS on every row
    (not pooled) against PSIS on the posterior draws, all k-hat < 0.5."""
    from loo_adapt import loo

    data = make(np.random.default_rng(2))
    program = StanProgram(PROGRAMS / f"{name}.stan", data, backend="stanli")
    posterior = program.fit(chains=4, warmup=400, draws=500, seed=5)
    psis = loo(posterior, estimator="psis").loo_adapt
    assert np.all(psis.pareto_k < 0.5)
    res = loo(posterior, program=program, estimator="mixis", mixis_pool_khat=None,
              seed=6).loo_adapt
    assert set(res.method) == {"mixis"}
    se = np.sqrt(res.mcse_elpd_i ** 2 + psis.mcse_elpd_i ** 2)
    assert np.all(np.abs(res.elpd_i - psis.elpd_i) < 4 * se)
    total_se = np.sqrt(np.sum(res.mcse_elpd_i ** 2) + np.sum(psis.mcse_elpd_i ** 2))
    assert abs(res.elpd_i.sum() - psis.elpd_i.sum()) < 3 * total_se


def test_comment_inside_a_loop_header_does_not_swallow_code(tmp_path):
    code = _BASE.replace("for (n in 1:N) {", "for (n in 1:  // every row\n       N) {")
    flagged = add_mixis_flag(code, use_stanc=False)
    assert "every row" not in flagged[flagged.index("log_lik_local;"):flagged.index(TARGET_LINE)]
    data = _logistic(np.random.default_rng(4))
    path = tmp_path / "flagged.stan"
    path.write_text(flagged)
    on = _density(path, data, mixis=1, mixis_n_rows=0, mixis_rows=[])
    original = _density(PROGRAMS / "loop_yrep.stan", data)
    U = np.random.default_rng(5).normal(size=(4, original.n_params))
    np.testing.assert_allclose(on.log_density(U) - original.log_density(U),
                               logsumexp(-original.log_lik(U), axis=1), rtol=1e-12, atol=1e-10)


def test_stanc_lookup_can_be_turned_off(monkeypatch):
    from loo_adapt.stan import stanc

    monkeypatch.setenv("LOO_ADAPT_STANC", "none")
    assert stanc.find_stanc() is None and stanc.canonical(_BASE) is None
    with pytest.raises(MixisProgramError, match="no stanc"):
        add_mixis_flag(_BASE, use_stanc=True)
    # without stanc, stanli's embedded compiler still checks the syntax
    assert stanc.syntax_error(_BASE) is None
    assert "alpha" in stanc.syntax_error(_BASE.replace("real alpha;", "real alpha"))


def test_mixis_rows_of_every_row_are_not_an_observation_entry():
    """data_without keeps mixis_rows whole even when it lists N rows (N rows and a twin
    mixis_n_rows == N would otherwise look per-observation)."""
    data = _logistic(np.random.default_rng(0))
    prog = StanProgram(PROGRAMS / "loop_yrep.stan", data, backend="stanli").with_mixis()
    n = prog.n_obs
    prog.data.update(mixis_n_rows=n, mixis_rows=np.arange(1, n + 1))
    assert set(prog.observation_vars()) == {"X", "y"}
    assert prog.data_without(3)["mixis_rows"].shape == (n,)


def test_loo_with_a_program_it_cannot_flag_raises_once_with_the_lines(tmp_path, recwarn):
    """No 'warm start failed' warning before the error: the refusal is the message."""
    from loo_adapt import loo

    path = tmp_path / "rng.stan"
    path.write_text(_BASE.replace(_GQ, "generated quantities {\n  vector[N] log_lik;\n"
                                  "  real e = normal_rng(0, 1);\n  for (n in 1:N) log_lik[n] = "
                                  "bernoulli_logit_lpmf(y[n] | alpha + X[n] * beta + e);\n}"))
    data = _logistic(np.random.default_rng(0))
    rng = np.random.default_rng(1)
    draws = {"alpha": rng.normal(size=(2, 50)), "beta": rng.normal(size=(2, 50, 3)),
             "log_lik": -rng.uniform(0.1, 2.0, size=(2, 50, 12))}
    with pytest.raises(MixisProgramError, match="random numbers") as err:
        loo(draws, method="mcmc", program=StanProgram(path, data, backend="stanli"),
            estimator="mixis")
    assert f"`{TARGET_LINE}`" in str(err.value)
    assert not [w for w in recwarn if "warm-started" in str(w.message)]


@pytest.mark.parametrize("modname", ["loo_adapt.stan.stan_source", "loo_adapt.stan.stanc",
                                     "loo_adapt.stan.mixis_program"])
def test_examples_run(modname):
    import doctest
    import importlib

    mod = importlib.import_module(modname)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    tests = doctest.DocTestFinder(exclude_empty=True).find(mod, modname, globs=dict(vars(mod)))
    assert tests
    for test in tests:
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0
