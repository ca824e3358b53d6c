"""The bundled ovarian data (loo_adapt.datasets)."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from loo_adapt import datasets

# ../shared beside the project (the developers' and CI's layout); the tests that use it
# check the shipped copy against the source and skip where it is absent
SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared"
SHARED_CSV = SHARED / "data" / "ovarian.csv"


def test_ovarian_shape_and_classes():
    X, y = datasets.load_ovarian(standardize=False)
    assert X.shape == (54, 1536) and X.dtype == np.float64
    assert y.shape == (54,) and y.dtype == np.int64
    assert np.bincount(y).tolist() == [24, 30]
    # rows are sorted by outcome, as published
    assert np.all(np.diff(y) >= 0)
    assert np.all(np.isfinite(X))


def test_ovarian_standardised_columns():
    raw, y_raw = datasets.load_ovarian(standardize=False)
    X, y = datasets.load_ovarian()
    np.testing.assert_array_equal(y, y_raw)
    np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(X.std(axis=0, ddof=1), 1.0, rtol=1e-12)
    # standardisation is an affine map per column, so it keeps each column's correlations
    np.testing.assert_allclose(np.corrcoef(X[:, :5].T), np.corrcoef(raw[:, :5].T), atol=1e-12)
    j = 17
    expected = (raw[:, j] - raw[:, j].sum() / 54) / np.sqrt(
        ((raw[:, j] - raw[:, j].mean()) ** 2).sum() / 53
    )
    np.testing.assert_allclose(X[:, j], expected, rtol=1e-12)


@pytest.mark.skipif(not SHARED_CSV.is_file(), reason=f"{SHARED_CSV} absent")
def test_ovarian_equals_shared_csv():
    table = np.genfromtxt(SHARED_CSV, delimiter=",", names=True)
    assert table.dtype.names[0] == "y" and len(table.dtype.names) == 1537
    ref = np.column_stack([table[n] for n in table.dtype.names])
    X, y = datasets.load_ovarian(standardize=False)
    np.testing.assert_array_equal(y, ref[:, 0])
    np.testing.assert_array_equal(X, ref[:, 1:])


def test_cmdstan_fixture_columns_are_standardised_ovarian_columns():
    """The fixtures used 30 standardised ovarian columns: our loader reproduces their X."""
    import json

    fixtures = pathlib.Path(__file__).parent / "data" / "cmdstan"
    data_file = fixtures / "logistic_normal.data.json"
    manifest = SHARED / "fixtures" / "cmdstan" / "MANIFEST.json"
    if not (data_file.is_file() and manifest.is_file()):
        pytest.skip(reason="fixture data or manifest not available")
    # the manifest numbers the predictors as in the CSV header (x1..x1536), i.e. 1-based
    cols = np.array(json.loads(manifest.read_text())["columns_of_ovarian_used"]) - 1
    fix = json.loads(data_file.read_text())
    X, y = datasets.load_ovarian()
    np.testing.assert_array_equal(fix["y"], y)
    # the fixture JSON keeps 6 decimals
    np.testing.assert_allclose(np.array(fix["X"]), X[:, cols], rtol=0, atol=5.1e-7)


def test_dataset_info_and_errors():
    info = datasets.dataset_info("ovarian")
    assert "Schummer" in info and "1536" in info
    assert datasets.list_datasets() == ["ovarian"]
    with pytest.raises(ValueError, match="unknown dataset"):
        datasets.dataset_info("colon")
    with pytest.raises(ValueError, match="constant column"):
        datasets.standardize_columns(np.ones((4, 2)))
    with pytest.raises(ValueError, match="2-D"):
        datasets.standardize_columns(np.ones(4))
