"""The Stan CSV writer: CmdStan's layout (column-major names, method header, ADVI mean row),
read back exactly by our reader and by cmdstanpy's public ``from_csv``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import loo_adapt
from loo_adapt.io import read_csv, write_stan_csv


def _header(path):
    return next(ln for ln in path.read_text().splitlines() if not ln.startswith("#"))


def test_write_stan_csv_matrix_order(tmp_path):
    import cmdstanpy

    rng = np.random.default_rng(0)
    w = rng.normal(size=(2, 5, 3, 4))
    d = loo_adapt.Draws({"W1": w, "b": rng.normal(size=(2, 5)), "log_lik": -rng.exponential(
        size=(2, 5, 6))}, sample_stats={"lp__": rng.normal(size=(2, 5))})
    paths = write_stan_csv(d, tmp_path, "m", model="m", config={"warmup": 100, "seed": 3})
    assert _header(paths[0]).startswith("lp__,W1.1.1,W1.2.1,W1.3.1,W1.1.2")  # column-major
    back = read_csv(paths)
    assert np.array_equal(back["W1"], w) and np.array_equal(back["b"], d["b"])
    assert np.array_equal(back.sample_stats["lp__"], d.sample_stats["lp__"])
    # cmdstanpy's own parser agrees (17 significant digits: exact float64 round trip)
    fit = cmdstanpy.from_csv([str(p) for p in paths])
    assert type(fit).__name__ == "CmdStanMCMC"
    np.testing.assert_array_equal(fit.stan_variable("W1"), w.reshape(10, 3, 4))
    np.testing.assert_array_equal(fit.stan_variable("log_lik"), d["log_lik"].reshape(10, 6))


@pytest.mark.parametrize("method", ("advi", "laplace", "pathfinder", "other"))
def test_every_method_round_trips(tmp_path, method):
    rng = np.random.default_rng(1)
    shape = (1, 1) if method == "other" else (1, 20)
    d = loo_adapt.Draws(
        {"mu": rng.normal(size=shape), "log_lik": -rng.exponential(size=(*shape, 3))},
        method=method,
        log_p=None if method == "other" else rng.normal(size=shape),
        log_q=None if method == "other" else rng.normal(size=shape),
        sample_stats={"lp__": rng.normal(size=shape)} if method == "other" else {},
        config={"jacobian": "true"} if method == "laplace" else {},
    )
    (path,) = write_stan_csv(d, tmp_path, method)
    frame = pd.read_csv(path, comment="#")
    stan = {"advi": "variational", "other": "optimize"}.get(method, method)
    assert f"# method = {stan}" in path.read_text()
    back = read_csv(path)
    assert back.method == method and back.config == d.config
    np.testing.assert_array_equal(back["log_lik"], d["log_lik"])
    if method == "advi":  # CmdStan's mean row first, with zero densities
        assert len(frame) == 21 and (frame.loc[0, ["log_p__", "log_g__"]] == 0).all()
        np.testing.assert_allclose(frame.loc[0, "mu"], d["mu"].mean(), rtol=1e-15)
    if d.log_p is not None:
        np.testing.assert_array_equal(back.log_p, d.log_p)
        np.testing.assert_array_equal(back.log_q, d.log_q)
