"""Names a Stan program declares, block by block (read from the source, before stanc)."""

from pathlib import Path

import pytest

from loo_adapt.stan.declarations import declared

DATA = Path(__file__).resolve().parents[1] / "data"


def test_fixture_programs():
    rhs = declared(DATA / "cmdstan" / "rhs_logistic.stan")
    assert rhs["data"] == ["N", "D", "X", "y", "has_intercept", "scale_icept", "scale_global",
                           "nu_global", "nu_local", "slab_scale", "slab_df"]
    assert rhs["parameters"] == ["beta0", "z", "tau", "lambda", "caux"]
    assert rhs["transformed parameters"] == ["c", "lambda_tilde", "beta"]
    assert rhs["generated quantities"] == ["log_lik"]  # not the local eta
    assert declared(DATA / "poisson" / "poisson.stan")["data"] == ["N", "K", "x", "count"]


def test_idioms():
    code = """
    functions { real f(real x) { return x; } }  // data { int fake; }
    data {
      int<lower=0> N;                 /* a comment { with braces } */
      array[N] int<lower=0, upper=1> y;
      real x[N];                      // old array syntax
      tuple(real, array[2] int) t;
      real<offset=0, multiplier=2> a, b;
      matrix[N, 2] X;
      // string "int bogus;" in a comment
    }
    transformed data { real s = N < 3 ? 1 : 2; }
    parameters { vector<lower=-1, upper=1>[2] beta; cholesky_factor_corr[2] L; }
    model { y ~ bernoulli_logit(X * beta); }
    generated quantities {
      vector[N] log_lik;
      for (n in 1:N) { real eta = X[n] * beta; log_lik[n] = bernoulli_logit_lpmf(y[n] | eta); }
      real after;
    }
    """
    blocks = declared(code)
    assert blocks["data"] == ["N", "y", "x", "t", "a", "b", "X"]
    assert blocks["transformed data"] == ["s"]
    assert blocks["parameters"] == ["beta", "L"]
    assert blocks["generated quantities"] == ["log_lik", "after"]
    assert "functions" in blocks and blocks["model"] == []


def test_unbalanced_braces_are_an_error():
    with pytest.raises(ValueError, match="unbalanced brackets"):
        declared("data { int N; ")
