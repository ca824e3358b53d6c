"""A user's program that ``#include``s its functions (`loo_adapt.stan.stan_source.program_text`).

``loo(fit, program=...)`` used to refuse such a program ("the program uses #include; add the
lines by hand"), because the flagged copy it writes into the cache folder could not resolve
an include relative to the user's folder. Every copy now has its includes inlined, as stanc
resolves them (the program's folder first).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

import loo_adapt
from loo_adapt.stan.stan_source import SourceError, program_text

FUNCTIONS = """real shifted(real mu, real c) {
  return mu + c;
}
"""

PROGRAM = """functions {
#include "shift.stanfunctions"
}
data {
  int<lower=1> N;
  vector[N] y;
}
parameters {
  real mu;
}
model {
  mu ~ normal(0, 10);
  for (n in 1:N) y[n] ~ normal(shifted(mu, 0), 1);
}
generated quantities {
  vector[N] log_lik;
  vector[N] y_rep;
  for (n in 1:N) {
    log_lik[n] = normal_lpdf(y[n] | shifted(mu, 0), 1);
    y_rep[n] = normal_rng(shifted(mu, 0), 1);
  }
}
"""


def _write(folder, main="model.stan"):
    (folder / "shift.stanfunctions").write_text(FUNCTIONS)
    (folder / main).write_text(PROGRAM)
    return folder / main


def test_program_text_inlines_includes_in_every_spelling(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "inner.stan").write_text("real one() { return 1; }")
    (tmp_path / "outer.stan").write_text("#include <lib/inner.stan>\nreal two() { return 2; }")
    (tmp_path / "m.stan").write_text("functions {\n  #include outer.stan\n}\n"
                                     "// #include is only a directive at a line's start\n")
    assert program_text(tmp_path / "m.stan") == (
        "functions {\nreal one() { return 1; }\nreal two() { return 2; }\n}\n"
        "// #include is only a directive at a line's start\n")


def test_program_text_refuses_a_missing_file_and_a_cycle(tmp_path):
    (tmp_path / "m.stan").write_text('#include "absent.stan"\n')
    with pytest.raises(SourceError, match="absent.stan.*no such file"):
        program_text(tmp_path / "m.stan")
    (tmp_path / "a.stan").write_text("#include b.stan\n")
    (tmp_path / "b.stan").write_text("#include a.stan\n")
    with pytest.raises(SourceError, match="includes itself"):
        program_text(tmp_path / "a.stan")


def test_loo_with_a_program_that_includes_its_functions(tmp_path, monkeypatch):
    """stanli fit of the program, then the recommended call: no refusal, the flagged copy
    carries the functions, and every row matches the conjugate closed form
    (mu | y_-i normal; y_i | y_-i ~ N(m_-i, 1 + v_-i)) within its Monte Carlo error."""
    pytest.importorskip("stanli", reason="the embedded sampler comes with the stanli extra")
    from loo_adapt.stan.program import StanProgram

    monkeypatch.setenv("LOO_ADAPT_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(8)
    y = rng.normal(1.0, 1.0, size=20)
    y[0] = 6.0  # an outlier: PSIS's k-hat is high there
    data = {"N": y.size, "y": y.tolist()}
    program = StanProgram(_write(tmp_path), data, backend="stanli")
    flagged = program.with_mixis().stan_file.read_text()
    assert "#include" not in flagged and "real shifted(real mu, real c)" in flagged
    fit = program.fit(chains=4, warmup=500, draws=1000, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pw = loo_adapt.loo(fit, program=program, seed=3, progress=False,
                           refit_kwargs={"n_jobs": 1}).loo_adapt
    assert pw.checked_for_bias.all()
    precision = (y.size - 1) + 1 / 100.0
    m = (y.sum() - y) / precision
    truth = stats.norm.logpdf(y, m, np.sqrt(1 + 1 / precision))
    z = (pw.elpd_i - truth) / pw.mcse_elpd_i
    assert np.all(np.abs(z) < 4.5), (pw.elpd_i - truth, pw.mcse_elpd_i)
    assert abs(pw.elpd_i.sum() - truth.sum()) < 4 * pw.estimates()["mcse_elpd_loo"]
