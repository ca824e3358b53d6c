"""Out-of-core PSIS-LOO on dask: every lazy input equals the in-memory `loo` to 1e-9, on the
threaded scheduler and on a LocalCluster of two worker processes; loo_adapt never imports dask
for in-memory input."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import loo_adapt
from loo_adapt.core.chunked import FIELDS
from loo_adapt.core.psis_loo import loo_pointwise

da = pytest.importorskip("dask.array")
xr = pytest.importorskip("xarray")

from loo_adapt.io.lazy import (  # noqa: E402
    from_function,
    is_lazy,
    lazy_log_lik,
    psis_loo_lazy,
)


def _log_lik(shape, seed=0):
    rng = np.random.default_rng(seed)
    scale = rng.uniform(0.05, 1.5, shape[-1])
    ar = rng.standard_t(4, shape)
    if len(shape) >= 3:  # autocorrelated chains, so that r_eff differs from 1
        for t in range(1, shape[1]):
            ar[:, t] = 0.6 * ar[:, t - 1] + 0.8 * ar[:, t]
    return -0.5 * (ar * scale) ** 2 - 1.0


def _assert_same(res, ref):
    for name in FIELDS:
        np.testing.assert_allclose(getattr(res, name), getattr(ref, name), rtol=0, atol=1e-9,
                                   err_msg=name)


def _assert_same_elpd(elpd, ref_elpd):
    a, b = elpd.loo_adapt, ref_elpd.loo_adapt
    ea, eb = a.estimates(), b.estimates()
    for key in eb:
        assert ea[key] == pytest.approx(eb[key], abs=1e-9), key
    # PointwiseLoo keeps the PSIS n_eff as its `diagnostic` (the Min. ESS column)
    alias = {"khat": "khat_after", "n_eff": "diagnostic"}
    for name in FIELDS:
        np.testing.assert_allclose(getattr(a, alias.get(name, name)),
                                   getattr(b, alias.get(name, name)),
                                   rtol=0, atol=1e-9, err_msg=name)


def test_draw_chunked_chains_are_rechunked_to_columns():
    x = _log_lik((4, 200, 130))
    lazy = da.from_array(x, chunks=(2, 50, 40))  # chunks across draws and chains
    assert is_lazy(lazy) and not is_lazy(x)
    ref = loo_pointwise(x)
    assert np.ptp(ref.r_eff) > 0.1  # chain-wise r_eff, per observation
    _assert_same(psis_loo_lazy(lazy), ref)
    _assert_same(psis_loo_lazy(lazy, obs_chunk=7), ref)
    with pytest.warns(UserWarning, match="k-hat above"):
        elpd = loo_adapt.loo(lazy)
    with pytest.warns(UserWarning, match="k-hat above"):
        ref_elpd = loo_adapt.loo(x)
    _assert_same_elpd(elpd, ref_elpd)


def test_matrix_input_keeps_column_chunks_and_uses_given_r_eff():
    x = _log_lik((800, 90), seed=1)
    r = np.linspace(0.4, 1.0, 90)
    lazy = da.from_array(x, chunks=(800, 25))
    _assert_same(psis_loo_lazy(lazy, r_eff=r), loo_pointwise(x, r_eff=r))
    _assert_same(psis_loo_lazy(lazy, r_eff=0.7), loo_pointwise(x, r_eff=0.7))
    _assert_same(psis_loo_lazy(lazy), loo_pointwise(x))


def test_single_chain_gets_r_eff_one_as_in_memory():
    x = _log_lik((1, 500, 20), seed=2)
    with pytest.warns(UserWarning, match="k-hat above"):
        elpd = loo_adapt.loo(da.from_array(x, chunks=(1, 500, 8)))
    with pytest.warns(UserWarning, match="k-hat above"):
        ref = loo_adapt.loo(x)
    _assert_same_elpd(elpd, ref)
    np.testing.assert_array_equal(elpd.loo_adapt.r_eff, 1.0)


def test_several_observation_dims_are_flattened_in_c_order():
    x = _log_lik((2, 150, 6, 5), seed=3)
    lazy = lazy_log_lik(da.from_array(x, chunks=(1, 150, 2, 5)))
    assert lazy.shape == (2, 150, 30)
    _assert_same(psis_loo_lazy(lazy), loo_pointwise(x.reshape(2, 150, 30)))


def test_log_lik_function_evaluated_chunk_by_chunk():
    x = _log_lik((3, 200, 70), seed=7)
    flat = x.reshape(600, 70)
    seen = []

    def fn(draws, idx):
        seen.append(len(idx))
        return draws[:, idx]

    lazy = from_function(fn, flat, n_obs=70, n_samples=600, obs_chunk=30, chains=3)
    assert lazy.shape == (3, 200, 70) and not seen  # nothing evaluated yet
    _assert_same(psis_loo_lazy(lazy), loo_pointwise(x))
    assert max(seen) <= 30
    with pytest.raises(ValueError, match=r"returned shape \(5, \d+\), expected \(600, \d+\)"):
        psis_loo_lazy(from_function(lambda d, i: d[:5, i], flat, 70, 600, obs_chunk=30))


def test_inference_data_opened_lazily_from_netcdf(tmp_path):
    az = pytest.importorskip("arviz")
    x = _log_lik((3, 200, 60), seed=4)
    path = tmp_path / "fit.nc"
    az.from_dict(posterior={"mu": np.zeros((3, 200))}, log_likelihood={"y": x}).to_netcdf(path)
    ref = loo_pointwise(x)
    if int(az.__version__.split(".")[0]) == 0:
        idata = az.from_netcdf(path, group_kwargs={"log_likelihood": {"chunks": {"y_dim_0": 16}}})
        assert is_lazy(idata)
        _assert_same(psis_loo_lazy(idata), ref)
    tree = xr.open_datatree(path, chunks={})
    assert is_lazy(tree)
    _assert_same(psis_loo_lazy(tree), ref)
    ds = xr.open_dataset(path, group="log_likelihood", chunks={"y_dim_0": 25})
    assert is_lazy(ds) and is_lazy(ds["y"])
    _assert_same(psis_loo_lazy(ds, var_name="y"), ref)
    _assert_same(psis_loo_lazy(ds["y"]), ref)
    assert not is_lazy(ds.load())
    plain = xr.open_dataset(path, group="log_likelihood")  # lazily indexed, not dask
    assert not is_lazy(plain) and not plain["y"].variable._in_memory  # and not loaded by it


def test_errors_name_the_fix():
    x = _log_lik((300, 40), seed=5)
    x[7, 33] = np.nan
    with pytest.raises(ValueError, match=r"observations 30\.\.39 .* 3"):
        psis_loo_lazy(da.from_array(x, chunks=(300, 10)))
    lazy = da.from_array(np.abs(x[:, :30]) * -1, chunks=(300, 10))
    with pytest.raises(ValueError, match="plain PSIS-LOO only"):
        loo_adapt.loo(lazy, method="mixis")
    with pytest.raises(ValueError, match="'chain' and 'draw'"):
        psis_loo_lazy(xr.DataArray(lazy, dims=("sample", "obs")))


def test_in_memory_loo_does_not_import_dask():
    # loo_adapt's own code never imports dask for in-memory input (xarray itself imports an
    # installed dask when the ELPDData's DataArrays are built, so stop before that) ...
    code = textwrap.dedent("""
        import sys
        import numpy as np
        import loo_adapt, loo_adapt.api, loo_adapt.io.lazy, loo_adapt.subsample
        import loo_adapt.estimators.psis
        from loo_adapt.io.readers import read_draws
        x = np.random.default_rng(0).normal(-1, 0.2, (2, 100, 5))
        assert not loo_adapt.io.lazy.is_lazy(x)
        loo_adapt.estimators.psis.psis_of_draws(read_draws(x))
        assert "dask" not in sys.modules, sorted(m for m in sys.modules if "dask" in m)
    """)
    subprocess.run([sys.executable, "-c", code], check=True)
    # ... and `loo` works where dask cannot be imported at all (no [dask] extra)
    code = textwrap.dedent("""
        import sys, warnings
        sys.modules["dask"] = None
        import numpy as np
        import loo_adapt
        warnings.simplefilter("ignore")
        res = loo_adapt.loo(np.random.default_rng(0).normal(-1, 0.2, (2, 100, 5)))
        assert np.isfinite(res.loo_adapt.estimates()["elpd_loo"])
    """)
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.fixture(scope="module")
def cluster_client():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            yield client


@pytest.mark.distributed
def test_local_cluster_with_two_worker_processes(cluster_client):
    from distributed import get_task_stream

    x = _log_lik((2, 300, 120), seed=6)
    with get_task_stream(cluster_client) as ts:
        with pytest.warns(UserWarning, match="k-hat above"):
            elpd = loo_adapt.loo(da.from_array(x, chunks=(2, 300, 30)))
    with pytest.warns(UserWarning, match="k-hat above"):
        ref = loo_adapt.loo(x)
    _assert_same_elpd(elpd, ref)
    workers = set(cluster_client.scheduler_info()["workers"])
    used = {t["worker"] for t in ts.data}
    assert used and used <= workers  # the PSIS blocks ran on the cluster's workers
