"""Inputs as a careless user hands them over: arviz's ``var_name`` semantics, netCDF / zarr
paths, xarray objects, dtypes that silently change numbers, non-finite log-likelihoods, and
Stan CSV files with a byte-order mark, latin-1 comments, gzip, or binary content.
Oracles: the arrays given, arviz's own containers, pandas reads of the fixture CSVs."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from loo_adapt.io import read_csv, read_draws

DATA = Path(__file__).resolve().parents[1] / "data" / "cmdstan"
SAMPLE = sorted((DATA / "logistic_normal" / "sample").glob("*.csv"))


def _arviz_major() -> int:
    import arviz

    return int(arviz.__version__.split(".")[0])


def _idata(log_lik: dict, seed=0):
    """An InferenceData (arviz 0.x) or DataTree (arviz 1.x) with the given log_lik group."""
    import arviz as az

    rng = np.random.default_rng(seed)
    posterior = {"mu": rng.normal(size=(2, 50)), "beta": rng.normal(size=(2, 50, 3))}
    if _arviz_major() >= 1:
        return az.from_dict({"posterior": posterior, "log_likelihood": log_lik})
    return az.from_dict(posterior=posterior, log_likelihood=log_lik)


def _group(idata, name):
    return idata[name] if _arviz_major() >= 1 else getattr(idata, name)


# ------------------------------------------------------------------------------------------
# var_name as arviz
# ------------------------------------------------------------------------------------------


def test_single_log_lik_variable_any_name():
    rng = np.random.default_rng(1)
    y = -rng.exponential(size=(2, 50, 7))
    idata = _idata({"y": y})
    draws = read_draws(idata)
    assert draws.log_lik_name() == "y" and "log_lik" not in draws
    np.testing.assert_array_equal(draws.log_lik(), _group(idata, "log_likelihood")["y"].values)
    np.testing.assert_array_equal(read_draws(idata, var_name="y").log_lik(), y)
    # the old default name still finds the only log-likelihood variable
    np.testing.assert_array_equal(draws.log_lik("log_lik"), y)
    with pytest.raises(KeyError, match="no pointwise log-likelihood 'z'"):
        read_draws(idata, var_name="z")


def test_several_log_lik_variables_need_var_name():
    rng = np.random.default_rng(2)
    y1, y2 = -rng.exponential(size=(2, 50, 4)), -rng.exponential(size=(2, 50, 3, 2))
    idata = _idata({"y1": y1, "y2": y2})
    draws = read_draws(idata)
    with pytest.raises(ValueError, match=r"pass var_name= one of \['y1', 'y2'\]"):
        draws.log_lik()
    np.testing.assert_array_equal(draws.log_lik("y2"), y2.reshape(2, 50, 6))
    chosen = read_draws(idata, var_name="y1")
    np.testing.assert_array_equal(chosen.log_lik(), y1)
    assert chosen.log_lik_name() == "y1"


def test_csv_var_names_reads_only_what_is_asked():
    draws = read_csv(SAMPLE, var_names=["alpha"])
    assert list(draws.variables) == ["alpha"]
    assert "lp__" in draws.sample_stats  # algorithm columns always come along
    frames = [pd.read_csv(f, comment="#") for f in SAMPLE]
    np.testing.assert_array_equal(draws["alpha"], np.stack([f["alpha"] for f in frames]))
    both = read_draws(SAMPLE, var_names="alpha", var_name="log_lik")
    assert sorted(both.variables) == ["alpha", "log_lik"]
    with pytest.raises(KeyError, match=r"\['gamma'\] not in the draws .*'beta'"):
        read_csv(SAMPLE, var_names="gamma")


# ------------------------------------------------------------------------------------------
# netCDF, zarr, xarray
# ------------------------------------------------------------------------------------------


def test_netcdf_path(tmp_path):
    pytest.importorskip("h5netcdf")
    rng = np.random.default_rng(3)
    y = -rng.exponential(size=(2, 50, 5))
    idata = _idata({"y": y})
    path = tmp_path / "fit.nc"
    idata.to_netcdf(str(path))
    for form in (path, str(path)):
        draws = read_draws(form)
        assert draws.log_lik_name() == "y" and str(path) in draws.source
        np.testing.assert_array_equal(draws.log_lik(), y)
        np.testing.assert_array_equal(draws["beta"], _group(idata, "posterior")["beta"].values)
    # recognised by content, whatever the name
    renamed = tmp_path / "fit.dat"
    renamed.write_bytes(path.read_bytes())
    np.testing.assert_array_equal(read_draws(renamed).log_lik(), y)


def test_zarr_path(tmp_path):
    pytest.importorskip("zarr")
    y = -np.random.default_rng(4).exponential(size=(2, 50, 5))
    idata = _idata({"y": y})
    path = tmp_path / "fit.zarr"
    # arviz 0.x's own to_zarr refuses zarr 3; its DataTree writes it
    tree = idata.to_datatree() if _arviz_major() < 1 else idata
    tree.to_zarr(str(path))
    np.testing.assert_array_equal(read_draws(path).log_lik(), y)


def test_binary_files_get_one_line_errors(tmp_path):
    junk = bytes(range(256)) * 8
    for name in ("x.nc", "x.zarr"):
        (tmp_path / name).write_bytes(junk)
        with pytest.raises(ValueError, match=f"cannot open .*{name} as netCDF / zarr"):
            read_draws(tmp_path / name)
    (tmp_path / "x.csv").write_bytes(junk)
    with pytest.raises(ValueError, match="x.csv is not a Stan CSV file: it holds binary data"):
        read_draws(tmp_path / "x.csv")
    (tmp_path / "notes.csv").write_text("hello world\nthis is not a fit\n")
    with pytest.raises(ValueError, match="notes.csv is not a Stan CSV file"):
        read_draws(tmp_path / "notes.csv")


def test_xarray_dataset_and_dataarray():
    import xarray as xr

    rng = np.random.default_rng(5)
    y = -rng.exponential(size=(2, 50, 6))
    da = xr.DataArray(y, dims=("chain", "draw", "obs"), name="y")
    d = read_draws(da)
    assert d.log_lik_name() == "y"
    np.testing.assert_array_equal(d.log_lik(), y)
    unnamed = read_draws(da.rename(None))
    np.testing.assert_array_equal(unnamed.log_lik(), y)
    ds = xr.Dataset({"y": da, "mu": (("chain", "draw"), rng.normal(size=(2, 50)))})
    d = read_draws(ds)
    with pytest.raises(KeyError, match="no pointwise log-likelihood 'log_lik'"):
        d.log_lik()
    np.testing.assert_array_equal(read_draws(ds, var_name="y").log_lik(), y)
    with pytest.raises(ValueError, match="expected \\('chain', 'draw'"):
        read_draws(xr.DataArray(y.reshape(100, 6), dims=("sample", "obs")))


# ------------------------------------------------------------------------------------------
# dtypes and values
# ------------------------------------------------------------------------------------------


def test_dtypes_that_change_numbers_are_refused():
    ll = -np.random.default_rng(6).exponential(size=(2, 40, 5))
    masked = np.ma.masked_array(ll, mask=np.zeros_like(ll, dtype=bool))
    np.testing.assert_array_equal(read_draws(masked).log_lik(), ll)  # nothing masked: fine
    masked.mask[0, 3, 1] = True
    with pytest.raises(ValueError, match="masked array with 1 masked value"):
        read_draws(masked)
    wrapped = np.array([[-1, -2], [-3, -1]]).astype(np.uint8)  # -1 -> 255
    with pytest.raises(ValueError, match="unsigned integer dtype uint8.*-1 -> 255"):
        read_draws(wrapped)
    with pytest.raises(ValueError, match="boolean dtype"):
        read_draws(ll < -1)
    with pytest.raises(ValueError, match="complex dtype"):
        read_draws(ll + 0j)
    with pytest.raises(ValueError, match="object dtype with entries that are not numbers"):
        read_draws(np.array([[-1.0, "a"], [-2.0, -3.0]], dtype=object))
    as_object = ll.astype(object)
    np.testing.assert_array_equal(read_draws(as_object).log_lik(), ll)
    np.testing.assert_array_equal(read_draws(np.array([[-1, -2], [-3, -4]])).log_lik()[0],
                                  [[-1.0, -2.0], [-3.0, -4.0]])
    with pytest.raises(ValueError, match="variable 'll' has unsigned"):
        read_draws({"ll": wrapped[None]}, method="mcmc")
    with pytest.raises(ValueError, match="log_lik is a masked array"):
        read_draws({"mu": ll[..., 0]}, method="mcmc", var_name=masked)


@pytest.mark.parametrize("bad", (np.nan, np.inf, -np.inf))
def test_non_finite_log_lik_refused(bad):
    ll = -np.random.default_rng(7).exponential(size=(2, 40, 5))
    ll[1, 7, 3] = bad
    with pytest.raises(ValueError, match="non-finite values .*chain 1, draw 7, observation 3 "
                                         r"\(0-based; Stan index 4\)"):
        read_draws(ll)
    d = read_draws({"log_lik": ll}, method="mcmc")  # a dict is checked when it is used
    with pytest.raises(ValueError, match="non-finite"):
        d.log_lik()


def test_absurd_log_lik_values():
    """+1e300 is no observation's log-likelihood (and would cancel catastrophically in the
    ratios): refused, naming the cell; -1e300 (y_i all but impossible under a draw, e.g. a
    degenerate fit) is read as it is."""
    ll = -np.random.default_rng(8).exponential(size=(1, 40, 3))
    ll[0, 0, 0] = 1e300
    with pytest.raises(ValueError, match="above 1e\\+08.*observation 0"):
        read_draws(ll).log_lik()
    ll[0, 0, 0] = -1e300
    assert read_draws(ll).log_lik()[0, 0, 0] == -1e300


def test_zero_observations_and_draws():
    with pytest.raises(ValueError, match="0 observations"):
        read_draws(np.zeros((100, 0)))
    with pytest.raises(ValueError, match="0 observations"):
        read_draws({"log_lik": np.zeros((2, 10, 0))}, method="mcmc").log_lik()
    with pytest.raises(ValueError, match="no draws"):
        read_draws(np.zeros((0, 4)))


# ------------------------------------------------------------------------------------------
# Stan CSV encodings
# ------------------------------------------------------------------------------------------


def _reference():
    return read_csv(SAMPLE[0])


def _same(a, b):
    assert list(a.variables) == list(b.variables)
    for k in a.variables:
        np.testing.assert_array_equal(a[k], b[k])


def test_bom_latin1_and_gzip(tmp_path):
    src = SAMPLE[0].read_bytes()
    ref = _reference()
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + src)
    _same(read_csv(bom), ref)
    latin = tmp_path / "latin.csv"
    latin.write_bytes("# Modell von José, Größe µ\n".encode("latin-1") + src)
    d = read_csv(latin)
    _same(d, ref)
    assert d.method == "mcmc"
    gz = tmp_path / "fit.csv.gz"
    gz.write_bytes(gzip.compress(src))
    _same(read_csv(gz), ref)
    plain = tmp_path / "plain.csv.gz"  # a text file with a gzip name: read by its content
    plain.write_bytes(src)
    _same(read_csv(plain), ref)
    broken = tmp_path / "broken.csv.gz"
    broken.write_bytes(gzip.compress(src)[:200])
    with pytest.raises(ValueError, match="broken.csv.gz"):
        read_csv(broken)


def test_truncated_last_row(tmp_path):
    text = SAMPLE[0].read_text()
    lines = text.rstrip("\n").split("\n")
    data_rows = [i for i, ln in enumerate(lines) if ln and not ln.startswith("#")]
    last = data_rows[-1]
    lines[last] = ",".join(lines[last].split(",")[:10])  # a run killed mid-write
    path = tmp_path / "cut.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=f"cut.csv, line {last + 1}: 10 values for"):
        read_csv(path)


def test_loo_of_a_netcdf_path_equals_arviz(tmp_path):
    """`loo("fit.nc")` with a log-likelihood named "y": arviz's own az.loo is the oracle
    (one chain, so r_eff = 1 in both)."""
    az = pytest.importorskip("arviz")
    if _arviz_major() >= 1:
        pytest.skip(reason="arviz 0.x from_cmdstan builds the InferenceData")
    import loo_adapt

    idata = az.from_cmdstan([str(SAMPLE[0])], log_likelihood={"y": "log_lik"})
    path = tmp_path / "x.nc"
    idata.to_netcdf(str(path))
    ref = az.loo(idata, pointwise=True)
    for data, kw in ((path, {}), (idata, {"var_name": "y"})):
        ours = loo_adapt.loo(data, **kw)
        np.testing.assert_allclose(ours.loo_i.values, ref.loo_i.values, rtol=0, atol=1e-10)
        np.testing.assert_allclose(ours.pareto_k.values, ref.pareto_k.values, rtol=0, atol=1e-10)
