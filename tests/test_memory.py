"""What `loo()` allocates, measured by tracemalloc (no timing): at most the log weights.

tracemalloc sees numpy's buffers and numba's too (numba's runtime allocates through
``PyMem_RawMalloc``; checked in `test_tracemalloc_sees_numba_allocations`), so the traced
peak is every array the call creates.  Fixed per-thread work buffers of the kernels
(a block of columns x S each) do not grow with n; the input here is large enough
(2000 x 4000, 64 MB) that they stay below 5% of it, while any temporary of the input's
shape (a float copy: 1.0x, a boolean mask: 0.125x) would break the bounds.
"""

from __future__ import annotations

import tracemalloc
import warnings

import numpy as np
import pytest
from numba import njit

import loo_adapt


def _traced_peak(fn):
    tracemalloc.start()
    try:
        out = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, out


@njit(cache=False)
def _ones_sum(n):
    return np.ones(n).sum()


def test_tracemalloc_sees_numba_allocations():
    _ones_sum(4)
    peak, _ = _traced_peak(lambda: _ones_sum(1_000_000))
    assert peak >= 8_000_000


@pytest.fixture(scope="module")
def log_lik():
    rng = np.random.default_rng(0)
    ll = rng.normal(-1.0, 0.2, size=(4, 500, 4000))
    with warnings.catch_warnings():
        # compile / load the kernels outside the measurement, for this very input (the
        # engine and numba's specialisation depend on its size and memory layout)
        warnings.simplefilter("ignore")
        loo_adapt.loo(ll)
        loo_adapt.loo(ll, pointwise=False)
    return ll


def test_loo_with_pointwise_weights_adds_only_the_weights(log_lik):
    peak, res = _traced_peak(lambda: loo_adapt.loo(log_lik))
    assert res.log_weights is not None
    lw = res.log_weights.values
    assert lw.size == log_lik.size
    assert peak <= 1.1 * log_lik.nbytes, peak / log_lik.nbytes
    # the ELPDData holds the weights the kernel wrote (a view of them, not a copy)
    base = lw.base if lw.base is not None else lw
    assert base.nbytes <= log_lik.nbytes


def test_loo_without_pointwise_writes_no_weights(log_lik):
    peak, res = _traced_peak(lambda: loo_adapt.loo(log_lik, pointwise=False))
    assert res.loo_adapt.n_obs == log_lik.shape[2]
    assert peak <= 0.05 * log_lik.nbytes, peak / log_lik.nbytes


def test_loo_of_dask_array_holds_a_few_chunks(log_lik):
    da = pytest.importorskip("dask.array", reason="the dask path needs the [dask] extra")
    import dask

    x = da.from_array(log_lik, chunks=(4, 500, 200))  # chunks of 1/20 of the input
    with dask.config.set(scheduler="threads", num_workers=2):
        loo_adapt.loo(x)  # the chunks' kernels compiled / loaded outside the measurement
        peak, res = _traced_peak(lambda: loo_adapt.loo(x))
    assert res.loo_adapt.n_obs == log_lik.shape[2]
    # two workers, each with the kernels' per-thread buffers for its chunk (the chunks
    # themselves are views of the array here), and the n-long results: about 10 MB whatever
    # n is; an S x n temporary anywhere, or one per chunk kept alive, breaks the bound
    assert peak <= 0.25 * log_lik.nbytes, peak / log_lik.nbytes


@pytest.fixture(scope="module")
def stan_csv(tmp_path_factory):
    """4 chains x 200 draws of mu, sigma and a 1000-column log_lik as CmdStan CSV."""
    from loo_adapt.draws import Draws
    from loo_adapt.io.csv import write_stan_csv

    rng = np.random.default_rng(1)
    ll = rng.normal(-1.0, 0.2, size=(4, 200, 1000))
    stats = {"lp__": rng.normal(size=(4, 200)), "accept_stat__": rng.uniform(size=(4, 200))}
    d = Draws({"mu": rng.normal(size=(4, 200)), "log_lik": ll, "sigma": rng.normal(size=(4, 200))},
              method="mcmc", sample_stats=stats)
    folder = tmp_path_factory.mktemp("csv")
    paths = write_stan_csv(d, folder, "fit", config={"warmup": 100})
    return [str(p) for p in paths], ll


def test_read_csv_holds_one_chain_besides_the_draws(stan_csv):
    """The chains are parsed one at a time into the variables' own arrays: the peak is the
    draws plus one file's parse (pandas), not a stack of all chains plus reordered copies."""
    from loo_adapt.io.csv import read_csv

    paths, ll = stan_csv
    read_csv(paths[:1])
    peak, d = _traced_peak(lambda: read_csv(paths, var_names="log_lik"))
    np.testing.assert_allclose(d.log_lik(), ll, rtol=1e-15)
    assert d.log_lik().flags["C_CONTIGUOUS"]
    assert peak <= 1.9 * ll.nbytes, peak / ll.nbytes


def test_read_cmdstanpy_keeps_a_read_only_view(stan_csv):
    """A vector log_lik's columns are a run of cmdstanpy's (draws, chains, columns) array:
    the draws keep a read-only view of it (the fit holds the array anyway), no copy."""
    cmdstanpy = pytest.importorskip("cmdstanpy", reason="cmdstanpy is an optional reader")
    from loo_adapt.io.cmdstanpy import read_cmdstanpy

    paths, ll = stan_csv
    fit = cmdstanpy.from_csv(paths)
    fit.draws()  # cmdstanpy's own array, read before the measurement
    peak, d = _traced_peak(lambda: read_cmdstanpy(fit))
    np.testing.assert_allclose(d.log_lik(), ll, rtol=1e-15)
    assert np.shares_memory(d.log_lik(), fit.draws())
    assert not d.log_lik().flags.writeable
    assert peak <= 0.1 * ll.nbytes, peak / ll.nbytes


def test_loo_of_a_cmdstanpy_fit_adds_only_the_weights(stan_csv, monkeypatch):
    """``loo(fit)`` reads the view in place (the compiled kernels take any strides): the
    weights are the only allocation of the input's size, and there is none without them."""
    cmdstanpy = pytest.importorskip("cmdstanpy", reason="cmdstanpy is an optional reader")
    from loo_adapt.core import _compiled

    monkeypatch.setattr(_compiled, "NUMPY_MAX_CELLS", 0)  # the kernels, not the numpy twins
    paths, ll = stan_csv
    fit = cmdstanpy.from_csv(paths)
    fit.draws()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loo_adapt.loo(fit)  # this layout's kernels compiled / loaded outside the measurement
        loo_adapt.loo(fit, pointwise=False)
        peak_pw, res = _traced_peak(lambda: loo_adapt.loo(fit))
        peak, _ = _traced_peak(lambda: loo_adapt.loo(fit, pointwise=False))
        np.testing.assert_allclose(res.elpd_loo, loo_adapt.loo(ll).elpd_loo, rtol=1e-12)
    assert peak_pw <= 1.3 * ll.nbytes, peak_pw / ll.nbytes
    assert peak <= 0.3 * ll.nbytes, peak / ll.nbytes
