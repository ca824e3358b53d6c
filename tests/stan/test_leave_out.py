"""A program with predictors centred in transformed data (the shape brms writes) is left out
by term: dropping a row re-centres every other row, so a refit on the reduced data is
another model's, and the full-data log_lik at its draws mixes the two parameterisations.

The oracle is the same model written independently with a weight on each observation's
likelihood term, the held-out row's weight 0 (every row still centres the predictors),
sampled long; its Monte Carlo error comes from batch means.  So is a program whose
transformed data centres priors on the outcome's mean and scales them by its sd (swapping
two rows leaves those as they were); one whose transformed data standardises the outcome,
the variate then being transformed data, stays refused."""

from __future__ import annotations

import pathlib
import re
import warnings

import numpy as np
import pytest
from scipy.special import logsumexp

import loo_adapt
from loo_adapt.stan.identity import ProgramMismatchError, check_program_matches
from loo_adapt.stan.leave_out import couples_through_data
from loo_adapt.stan.program import StanProgram
from loo_adapt.stan.refit import refit_loo

stanli = pytest.importorskip("stanli", reason="the embedded sampler comes with the stanli extra")

PROGRAMS = pathlib.Path(__file__).resolve().parent / "programs"
CENTRED = PROGRAMS / "brms_centred.stan"

# the oracle: brms_centred.stan written with a weight per observation's likelihood term
WEIGHTED = """
data { int<lower=1> N; vector[N] Y; int<lower=1> K; matrix[N, K] X; vector[N] w; }
transformed data {
  matrix[N, K] Xc;
  for (k in 1:K) Xc[, k] = X[, k] - mean(X[, k]);
}
parameters { vector[K] b; real Intercept; real<lower=0> sigma; }
model {
  for (n in 1:N) target += w[n] * normal_lpdf(Y[n] | Intercept + Xc[n] * b, sigma);
  Intercept ~ student_t(3, 0, 2.5);
  b ~ normal(0, 5);
  sigma ~ student_t(3, 0, 2.5);
}
generated quantities {
  vector[N] log_lik;
  for (n in 1:N) log_lik[n] = normal_lpdf(Y[n] | Intercept + Xc[n] * b, sigma);
}
"""

# the outcome standardised in transformed data: each row's y enters every row's term
STANDARDISED = """
data { int<lower=1> N; vector[N] Y; vector[N] x; }
transformed data { vector[N] Ys = (Y - mean(Y)) / sd(Y); }
parameters { real a; real b; real<lower=0> sigma; }
model {
  Ys ~ normal(a + b * x, sigma);
  a ~ normal(0, 2); b ~ normal(0, 2); sigma ~ normal(0, 2);
}
generated quantities {
  vector[N] log_lik;
  for (n in 1:N) log_lik[n] = normal_lpdf(Ys[n] | a + b * x[n], sigma);
}
"""


# an intercept's prior centred on the outcome's mean, priors scaled by its sd (the autoscaled
# priors rstanarm writes), in transformed data; and the weighted oracle of the same model
OUTCOME_MEAN = """
data { int<lower=1> N; vector[N] Y; vector[N] x; }
transformed data { real Y_mean = mean(Y); real Y_sd = sd(Y); real x_sd = sd(x); }
parameters { real a; real b; real<lower=0> sigma; }
model {
  a ~ normal(Y_mean, 2.5 * Y_sd);
  b ~ normal(0, 2.5 * Y_sd / x_sd);
  sigma ~ exponential(1 / Y_sd);
  Y ~ normal(a + b * x, sigma);
}
generated quantities {
  vector[N] log_lik;
  vector[N] y_rep;
  for (n in 1:N) {
    log_lik[n] = normal_lpdf(Y[n] | a + b * x[n], sigma);
    y_rep[n] = normal_rng(a + b * x[n], sigma);
  }
}
"""
OUTCOME_MEAN_WEIGHTED = (OUTCOME_MEAN
                         .replace("vector[N] x; }", "vector[N] x; vector[N] w; }")
                         .replace("  Y ~ normal(a + b * x, sigma);",
                                  "  for (n in 1:N) target += w[n] * normal_lpdf(Y[n] | a + b "
                                  "* x[n], sigma);"))


def _data(n=30, seed=3):
    """A linear regression whose row 0 has far predictors and a far outcome."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    X[0] = [6.0, -4.0]
    Y = 1.0 + X @ np.array([1.0, -0.5]) + rng.normal(scale=0.6, size=n)
    Y[0] += 3.0
    return {"N": n, "K": 2, "X": X.tolist(), "Y": Y.tolist()}


def _weighted_truth(tmp_path, data, i, draws=25000, code=WEIGHTED, count="N"):
    """elpd_i of the weighted program with w_i = 0 and its MCSE (batch means, 20 batches);
    ``i`` an index (floats back) or an array of indices (a fold: w = 0 on all of them, an
    elpd and MCSE per index); ``count`` names the data entry counting the observations
    (log_lik's size)."""
    path = tmp_path / "weighted.stan"
    path.write_text(code)
    w = np.ones(data[count])
    w[i] = 0.0
    fit = stanli.Model(stan_file=str(path), data={**data, "w": w.tolist()}).sample(
        seed=11, chains=4, samples=draws, refresh=0)
    ll = np.asarray(fit["log_lik"]).reshape(4 * draws, data[count])[:, i]
    elpd = logsumexp(ll, axis=0) - np.log(ll.shape[0])
    batches = np.array([logsumexp(b, axis=0) - np.log(b.shape[0]) for b in np.split(ll, 20)])
    se = batches.std(axis=0, ddof=1) / np.sqrt(20)
    return (float(elpd), float(se)) if np.ndim(i) == 0 else (elpd, se)


def test_centred_predictors_leave_out_by_term_and_an_uncentred_program_by_data(tmp_path):
    data = _data()
    prog = StanProgram(CENTRED, data, backend="stanli")
    assert couples_through_data(prog) is not None
    assert prog.leaves_out_by_term()
    assert "'Y'" in prog.by_term_reason
    raw = tmp_path / "raw.stan"  # the same model on the raw predictors: dropping a row is exact
    raw.write_text(CENTRED.read_text().replace("Xc[, i] = X[, i] - means_X[i];",
                                               "Xc[, i] = X[, i];"))
    plain = StanProgram(raw, data, backend="stanli")
    assert couples_through_data(plain) is None
    assert not plain.leaves_out_by_term()


def test_refits_of_centred_predictors_match_the_weighted_program(tmp_path):
    data = _data()
    truth, truth_se = _weighted_truth(tmp_path, data, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        by_term = refit_loo([0], program=StanProgram(CENTRED, data, backend="stanli"),
                            seed=3, progress=False, n_jobs=1)
        dropped = StanProgram(CENTRED, data, backend="stanli")
        dropped.leave_out_by_term(None)  # as before: the row's data dropped
        old = refit_loo([0], program=dropped, seed=3, progress=False, n_jobs=1)
    assert by_term.reliable[0]
    se = np.hypot(by_term.mcse_elpd_i[0], truth_se)
    assert abs(by_term.elpd_i[0] - truth) < 4 * se, (by_term.elpd_i[0], truth, se)
    # the construction tells the two apart: dropping the row misses by many MCSEs
    se_old = np.hypot(old.mcse_elpd_i[0], truth_se)
    assert abs(old.elpd_i[0] - truth) > 5 * se_old, (old.elpd_i[0], truth, se_old)


def test_loo_accepts_centred_predictors_and_its_outlier_is_right(tmp_path):
    data = _data()
    prog = StanProgram(CENTRED, data, backend="stanli")
    fit = prog.fit(chains=4, warmup=500, draws=1000, seed=2)
    check = check_program_matches(prog, fit)  # refused before
    assert check.by_term_reason is not None and "'Y'" in check.by_term_reason
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pw = loo_adapt.loo(fit, program=prog, seed=4, progress=False,
                           refit_kwargs={"n_jobs": 1}).loo_adapt
        # the refits loo() runs (in worker processes) leave the row out by term too
        refits = loo_adapt.loo(fit, program=prog, estimator="psis", fallback="refit",
                               khat_threshold=0.3, seed=4, progress=False).loo_adapt
    assert pw.checked_for_bias.all(), pw.reason[~pw.checked_for_bias]
    assert refits.method[0] == "refit" and refits.checked_for_bias[0]
    # the summary says what "refit" means for this program
    assert any("log_lik term out of the full-data target" in note and "'Y'" in note
               for note in refits.all_notes())
    truth, truth_se = _weighted_truth(tmp_path, data, 0)
    for est in (pw, refits):
        se = np.hypot(est.mcse_elpd_i[0], truth_se)
        assert abs(est.elpd_i[0] - truth) < 4 * se, (est.method[0], est.elpd_i[0], truth, se)


def test_an_outcome_standardised_in_transformed_data_is_refused(tmp_path):
    rng = np.random.default_rng(5)
    x = rng.normal(size=25)
    data = {"N": 25, "x": x.tolist(), "Y": (2.0 + 3.0 * x + rng.normal(size=25)).tolist()}
    path = tmp_path / "standardised.stan"
    path.write_text(STANDARDISED)
    prog = StanProgram(path, data, backend="stanli")
    fit = prog.fit(chains=2, warmup=300, draws=300, seed=1)
    with pytest.raises(ProgramMismatchError, match="no per-observation data entry"):
        check_program_matches(prog, fit)
    assert couples_through_data(prog) is None  # refits by themselves drop the row, as before


def test_an_outcome_mean_in_transformed_data_is_left_out_by_term(tmp_path):
    """Swapping two rows of Y leaves its mean and sd as they were, and the target then moves
    exactly as their two log_lik terms: accepted (it was refused), refitted by term, and the
    refit of the outlier matches the weighted program, whose priors see every row's Y."""
    rng = np.random.default_rng(6)
    x = rng.normal(size=25)
    y = 2.0 + 3.0 * x + rng.normal(size=25)
    x[0], y[0] = 3.0, 8.5
    data = {"N": 25, "x": x.tolist(), "Y": y.tolist()}
    _by_term_refit_matches_weighted(tmp_path, OUTCOME_MEAN, OUTCOME_MEAN_WEIGHTED, data, "'Y'")


def _by_term_refit_matches_weighted(tmp_path, code, weighted, data, says, count="N",
                                    draws=25000):
    """The identity check at a short fit of ``code`` records refits by term (its reason
    naming ``says``), and the by-term refit of observation 0 matches the weighted program
    ``weighted`` with w_0 = 0 within 4 combined MCSEs."""
    path = tmp_path / "program.stan"
    path.write_text(code)
    prog = StanProgram(path, data, backend="stanli")
    fit = prog.fit(chains=2, warmup=300, draws=300, seed=1)
    check = check_program_matches(prog, fit)
    assert check.by_term_reason is not None and says in check.by_term_reason
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        by_term = refit_loo([0], program=prog, seed=3, progress=False, n_jobs=1)
    assert by_term.reliable[0], by_term.reason
    truth, truth_se = _weighted_truth(tmp_path, data, 0, draws=draws, code=weighted,
                                      count=count)
    se = np.hypot(by_term.mcse_elpd_i[0], truth_se)
    assert abs(by_term.elpd_i[0] - truth) < 4 * se, (by_term.elpd_i[0], truth, se)


def test_kfold_leaves_a_fold_out_by_term(tmp_path):
    """A fold of five rows, the far row 0 among them, refitted by term (the flagged program
    with mixis = 2 takes the five terms out): each row's held-out elpd matches the weighted
    program with w = 0 on the five rows within 4 combined MCSEs."""
    data = _data()
    fold = np.arange(5)
    folds = np.where(np.isin(np.arange(data["N"]), fold), 0, 1)
    prog = StanProgram(CENTRED, data, backend="stanli")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = loo_adapt.kfold(prog, folds=folds, draws=2000, seed=2, n_jobs=1,
                              progress=False).loo_adapt
    assert prog.leaves_out_by_term() and res.reliable[fold].all(), res.reason
    truth, truth_se = _weighted_truth(tmp_path, data, fold)
    z = (res.elpd_i[fold] - truth) / np.hypot(res.mcse_elpd_i[fold], truth_se)
    assert np.all(np.abs(z) < 4.0), (res.elpd_i[fold], truth, z)
    # leaving one row out is another quantity, which the fold's estimates are told from
    loo_row0 = _weighted_truth(tmp_path, data, 0)[0]
    assert abs(res.elpd_i[0] - loo_row0) > 4 * np.hypot(res.mcse_elpd_i[0], truth_se[0])


# the centred program with the mixis flag written by hand before mixis = 2 existed: it takes
# one row's term out (log_sum_exp of one term), not a fold's
FLAGGED_BY_HAND = WEIGHTED.replace(
    "vector[N] w; }",
    "int<lower=0, upper=1> mixis; int<lower=0> mixis_n_rows;\n"
    "  array[mixis_n_rows] int<lower=1> mixis_rows; }").replace(
    "  for (n in 1:N) target += w[n] * normal_lpdf(Y[n] | Intercept + Xc[n] * b, sigma);\n",
    "  Y ~ normal(Intercept + Xc * b, sigma);\n"
    "  if (mixis) {\n    vector[N] ll;\n"
    "    for (n in 1:N) ll[n] = normal_lpdf(Y[n] | Intercept + Xc[n] * b, sigma);\n"
    "    if (mixis_n_rows == 0) target += log_sum_exp(-ll);\n"
    "    else target += log_sum_exp(-ll[mixis_rows]);\n  }\n")


def test_kfold_refuses_a_fold_where_the_flag_takes_out_one_row(tmp_path):
    path = tmp_path / "flagged_by_hand.stan"
    path.write_text(FLAGGED_BY_HAND)
    prog = StanProgram(path, _data(), backend="stanli")
    assert prog.declares_mixis and prog.leaves_out_by_term()
    with pytest.raises(ValueError, match="one row at a time.*upper=2"):
        loo_adapt.kfold(prog, K=5, n_jobs=1, progress=False)
    # a flag that admits mixis = 2 without a model block that branches on it would refit
    # each fold on the full posterior: refused the same way
    path.write_text(FLAGGED_BY_HAND.replace("upper=1> mixis;", "upper=2> mixis;"))
    prog = StanProgram(path, _data(), backend="stanli")
    with pytest.raises(ValueError, match="one row at a time.*mixis == 2"):
        loo_adapt.kfold(prog, K=5, n_jobs=1, progress=False)


def test_other_names_and_an_array_log_lik_take_the_same_path(tmp_path):
    """The count sizes log_lik whatever its name, the variate is found by its own name, and
    an ``array[n_obs] real log_lik`` is read as the vector is."""
    code = re.sub(r"\bY\b", "y_obs", re.sub(r"\bN\b", "n_obs", CENTRED.read_text()))
    code = code.replace("vector[n_obs] log_lik;", "array[n_obs] real log_lik;")
    path = tmp_path / "renamed.stan"
    path.write_text(code)
    data = _data()
    renamed = {"n_obs": data["N"], "K": data["K"], "X": data["X"], "y_obs": data["Y"]}
    prog = StanProgram(path, renamed, backend="stanli")
    assert prog.leaves_out_by_term() and "'y_obs'" in prog.by_term_reason
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = refit_loo([0], program=prog, seed=5, progress=False, n_jobs=1)
    truth, truth_se = _weighted_truth(tmp_path, data, 0)
    se = np.hypot(res.mcse_elpd_i[0], truth_se)
    assert res.reliable[0] and abs(res.elpd_i[0] - truth) < 4 * se, (res.elpd_i[0], truth, se)


AR1 = """
data { int<lower=2> N; vector[N] y; }
parameters { real alpha; real<lower=-1, upper=1> beta; real<lower=0> sigma; }
model {
  alpha ~ normal(0, 1); beta ~ normal(0, 0.5); sigma ~ normal(0, 1);
  y[2:N] ~ normal(alpha + beta * y[1:(N - 1)], sigma);
}
generated quantities {
  vector[N] log_lik = rep_vector(0, N);
  for (n in 2:N) log_lik[n] = normal_lpdf(y[n] | alpha + beta * y[n - 1], sigma);
}
"""


def test_an_autoregression_stays_refused(tmp_path):
    """Row t of y enters log_lik[t + 1] as well: no swap of two rows moves the target as
    their own two terms alone, so the program is refused, not left out by term."""
    rng = np.random.default_rng(9)
    y = np.zeros(30)
    for t in range(1, 30):
        y[t] = 0.2 + 0.6 * y[t - 1] + rng.normal(scale=0.5)
    path = tmp_path / "ar1.stan"
    path.write_text(AR1)
    prog = StanProgram(path, {"N": 30, "y": y.tolist()}, backend="stanli")
    fit = prog.fit(chains=2, warmup=300, draws=300, seed=1)
    with pytest.raises(ProgramMismatchError, match="no per-observation data entry"):
        check_program_matches(prog, fit)
    assert couples_through_data(prog) is None


# leave one group out: log_lik per group over a group index (no data entry has a row per
# group), a non-centred varying intercept; and its weighted oracle
GROUPS = """
data { int<lower=1> N; int<lower=1> J; array[N] int<lower=1, upper=J> g; vector[N] y; }
parameters { real mu; real<lower=0> tau; vector[J] z; real<lower=0> sigma; }
transformed parameters { vector[J] a = mu + tau * z; }
model {
  mu ~ normal(0, 5); tau ~ normal(0, 1); z ~ std_normal(); sigma ~ normal(0, 1);
  y ~ normal(a[g], sigma);
}
generated quantities {
  vector[J] log_lik = rep_vector(0, J);
  for (n in 1:N) log_lik[g[n]] += normal_lpdf(y[n] | a[g[n]], sigma);
}
"""
GROUPS_WEIGHTED = GROUPS.replace("vector[N] y; }", "vector[N] y; vector[J] w; }").replace(
    "  y ~ normal(a[g], sigma);",
    "  for (n in 1:N) target += w[g[n]] * normal_lpdf(y[n] | a[g[n]], sigma);")


def _groups(seed=4, n=30, n_groups=5):
    rng = np.random.default_rng(seed)
    g = np.arange(n) % n_groups + 1
    y = rng.normal(scale=0.7, size=n_groups)[g - 1] + rng.normal(scale=0.5, size=n)
    y[g == 1] += 2.5  # the left-out group is far from the others
    return {"N": n, "J": n_groups, "g": g.tolist(), "y": y.tolist()}


def test_log_lik_per_group_is_left_out_by_term_and_matches_the_weighted_program(tmp_path):
    """No data entry has a row per group, so a refit cannot drop one (it used to fail:
    "no data entry has a leading dimension equal to J"). Each row of y, swapped with
    another, moves the target exactly as the log_lik of their groups: refits take the
    group's term out, and match the weighted program with w = 0 on that group."""
    _by_term_refit_matches_weighted(tmp_path, GROUPS, GROUPS_WEIGHTED, _groups(), "group",
                                    count="J", draws=10000)


def test_a_group_log_lik_that_is_not_the_groups_likelihood_is_not_left_out(tmp_path):
    """log_lik per group with a fixed scale where the model has sigma: no swap moves the
    target as log_lik does, so no refit by term (and the data cannot drop a group)."""
    path = tmp_path / "wrong_groups.stan"
    path.write_text(GROUPS.replace("log_lik[g[n]] += normal_lpdf(y[n] | a[g[n]], sigma);",
                                   "log_lik[g[n]] += normal_lpdf(y[n] | a[g[n]], 1);"))
    prog = StanProgram(path, _groups(), backend="stanli")
    assert not prog.leaves_out_by_term() and prog.by_term_reason is None


COLUMNS = """
data { int<lower=1> N; int<lower=1> K; matrix[K, N] Xt; vector[N] y; }
parameters { real alpha; vector[K] beta; real<lower=0> sigma; }
model {
  alpha ~ normal(0, 2); beta ~ normal(0, 1); sigma ~ normal(0, 1);
  y ~ normal(alpha + (beta' * Xt)', sigma);
}
generated quantities {
  vector[N] log_lik;
  for (n in 1:N) log_lik[n] = normal_lpdf(y[n] | alpha + beta' * col(Xt, n), sigma);
}
"""


def test_a_column_per_observation_is_left_out_by_term_as_by_its_data(tmp_path):
    """``matrix[K, N] Xt``: the data without a row of y does not load (Xt keeps N columns),
    so the refit goes by term; it agrees with the refit that drops the column, given
    ``obs_dim_vars``, within their Monte Carlo errors."""
    rng = np.random.default_rng(1)
    xt = rng.normal(size=(2, 30))
    y = 0.5 + np.array([1.0, -1.0]) @ xt + rng.normal(size=30)
    xt[:, 0], y[0] = [2.5, -2.0], 2.5
    data = {"N": 30, "K": 2, "Xt": xt.tolist(), "y": y.tolist()}
    path = tmp_path / "columns.stan"
    path.write_text(COLUMNS)
    by_term = StanProgram(path, data, backend="stanli")
    assert by_term.leaves_out_by_term() and "Xt" in by_term.by_term_reason
    by_data = StanProgram(path, data, backend="stanli", obs_dim_vars={"y": 0, "Xt": 1})
    assert not by_data.leaves_out_by_term()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = refit_loo([0], program=by_term, seed=3, progress=False, n_jobs=1)
        b = refit_loo([0], program=by_data, seed=5, progress=False, n_jobs=1)
    assert a.reliable[0] and b.reliable[0]
    se = np.hypot(a.mcse_elpd_i[0], b.mcse_elpd_i[0])
    assert abs(a.elpd_i[0] - b.elpd_i[0]) < 4 * se, (a.elpd_i[0], b.elpd_i[0], se)


def test_a_log_lik_outside_the_target_is_refused_whatever_the_rows(tmp_path):
    """No model block: log_lik is no term of the target. Its rows share one parameter, so
    swapping two outcomes leaves log_lik[i] + log_lik[j] as it was; that swap must tell
    nothing (a check that passed it accepted this program and refitted every row)."""
    rng = np.random.default_rng(2)
    data = {"N": 20, "k": rng.binomial(10, 0.3, size=20).tolist()}
    prog = StanProgram(PROGRAMS / "no_model_block_vector_fn.stan", data, backend="stanli")
    fit = prog.fit(chains=2, warmup=300, draws=300, seed=1)
    with pytest.raises(ProgramMismatchError, match="not that observation's term"):
        check_program_matches(prog, fit)
    assert couples_through_data(prog) is None
