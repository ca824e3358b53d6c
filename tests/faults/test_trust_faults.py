"""Issue 14, the rows where the package said "reliable" on assumptions it never checked, run
as a user would (the CLI on the CmdStan fixture), and the memory row.

Independent expectations: a clear one-line error, or rows that are not "reliable"; the
brute-force truth file where numbers come back; tracemalloc for memory.
"""

import json
import tracemalloc
from pathlib import Path

import numpy as np
from cli_run import one_line as _one_line
from cli_run import run_cli as _run

import loo_adapt

DATA = Path(__file__).resolve().parents[1] / "data" / "cmdstan"
SAMPLE = DATA / "logistic_normal" / "sample"
RHS = DATA / "rhs_logistic" / "sample"
DATA_JSON = DATA / "logistic_normal.data.json"


def test_prior_in_the_data_json_wrong_for_the_draws(capsys, tmp_path):
    """The data JSON says prior_sd 0.3 for a fit made with Normal(0, 1): refused, naming
    the prior, before any row is called reliable (it gave 29 "reliable" rows, 3.16 nats off)."""
    data = json.loads(DATA_JSON.read_text())
    data["prior_sd"] = 0.3
    path = tmp_path / "data.json"
    path.write_text(json.dumps(data))
    rc, _, err = _run(capsys, "evaluate", SAMPLE, "--data", path, "--model", "logistic",
                      "-q", "--out", tmp_path / "rep")
    assert rc == 1 and "prior does not match" in _one_line(err)
    assert not (tmp_path / "rep" / "results.json").exists()


def test_logistic_model_on_horseshoe_draws(capsys, tmp_path):
    """--model logistic (a Normal prior) on regularized-horseshoe draws: refused."""
    data = json.loads((DATA / "rhs_logistic.data.json").read_text())
    data["prior_sd"] = 1.0
    path = tmp_path / "data.json"
    path.write_text(json.dumps(data))
    rc, _, err = _run(capsys, "evaluate", RHS, "--data", path, "--model", "logistic",
                      "--names", "coef=beta,intercept=beta0", "-q", "--out", tmp_path / "rep")
    line = _one_line(err)
    assert rc == 1 and ("prior does not match" in line or "log_lik" in line), line


def test_posterior_csvs_passed_as_mixture_csvs(capsys, tmp_path):
    """--method mixis --mixis-csv <the posterior's own CSVs>: refused (it gave -15.78, all
    "reliable", where the truth is -19.39)."""
    rc, _, err = _run(capsys, "evaluate", SAMPLE, "--data", DATA_JSON, "--model", "logistic",
                      "--method", "mixis", "--mixis-csv", *sorted(SAMPLE.glob("*.csv")),
                      "-q", "--out", tmp_path / "rep")
    assert rc == 1 and "mixture posterior" in _one_line(err)


def test_mixture_fit_with_few_draws_is_not_reliable():
    """A mixture fit of 20 draws gave MCSE 0.001 and 53 of 54 "reliable" rows; now no row is
    reliable and each says why."""
    rng = np.random.default_rng(0)
    ll = -np.abs(rng.normal(1.0, 0.3, size=(4, 1000, 12)))
    res = loo_adapt.loo(ll, estimator="mixis",
                        mixis_draws=loo_adapt.read_draws(ll[:2, :10], method="mcmc"))
    pw = res.loo_adapt
    assert not pw.reliable.any()
    assert all("MixIS draws too few" in r for r in pw.reason)


def test_psis_memory_is_at_most_twice_the_input():
    """4000 x 100000 took ~9x the input; the numba kernel (every matrix above
    `NUMPY_MAX_CELLS`, where the numpy cold-start twin is not used) adds at most the weights."""
    from loo_adapt.core._compiled import NUMPY_MAX_CELLS

    rng = np.random.default_rng(1)
    n = NUMPY_MAX_CELLS // 4000 + 100
    ll = -np.abs(rng.normal(1.0, 0.5, size=(4, 1000, n)))
    tracemalloc.start()
    res = loo_adapt.core.psis_loo.loo_pointwise(ll)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert res.elpd_i.shape == (n,)
    assert peak <= 2.0 * ll.nbytes, peak / ll.nbytes
