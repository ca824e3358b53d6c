"""Data shipped with the package (``loo_adapt/data/``).

``ovarian``: the ovarian cancer cDNA micro-array data (Schummer et al. 1999), 54 patients,
1536 predictors, binary outcome; the p >> n example of the adaptive-IS LOO paper.
Provenance in ``loo_adapt/data/README.md`` and :func:`dataset_info`.
"""

from __future__ import annotations

import gzip
import importlib.resources
import io
import pathlib

import numpy as np

_OVARIAN_INFO = """\
ovarian: ovarian cancer cDNA micro-array data, n = 54 patients (y = 0: 24, y = 1: 30;
rows sorted by y), p = 1536 predictors (raw, unstandardised expression values).
Source: Schummer et al. (1999), Gene 238:375-385; used by Hernandez-Lobato et al. (2010),
Paananen et al. (2021, implicitly adaptive importance sampling) and the gradient-flow
adaptive-IS LOO paper (Table 1). Public copies with identical numbers:
github.com/topipa/iter-mm-paper (data/ovarian.mat) and github.com/jpiironen/dimreduce
(data/ovarian.RData). The adaptive-IS LOO paper's text says "1056 + 1 predictors"; every
public copy has 1536 (Paananen et al. also report 1536).
File: loo_adapt/data/ovarian.csv.gz, columns y, x1..x1536, comma-separated."""

_INFO = {"ovarian": _OVARIAN_INFO}


def list_datasets() -> list[str]:
    """Names of the bundled datasets."""
    return list(_INFO)


def dataset_info(name: str = "ovarian") -> str:
    """Provenance of a bundled dataset."""
    if name not in _INFO:
        raise ValueError(f"unknown dataset {name!r}; available: {list_datasets()}")
    return _INFO[name]


def _read_bytes(filename: str) -> bytes:
    try:
        return (importlib.resources.files("loo_adapt.data") / filename).read_bytes()
    except (ModuleNotFoundError, FileNotFoundError):
        # loo_adapt.data without an __init__ (or a zip-less checkout): read next to this file
        return (pathlib.Path(__file__).resolve().parent / "data" / filename).read_bytes()


def standardize_columns(X) -> np.ndarray:
    """Columns to (x - mean) / sd with sd the sample standard deviation (ddof = 1).

    Raises for a constant column rather than dividing by zero.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 2:
        raise ValueError(f"standardize needs a 2-D array with at least 2 rows, got {X.shape}")
    sd = X.std(axis=0, ddof=1)
    if np.any(sd == 0):
        raise ValueError(f"constant column(s) {np.flatnonzero(sd == 0).tolist()} cannot be scaled")
    return (X - X.mean(axis=0)) / sd


def load_ovarian(standardize: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The ovarian data as ``(X, y)``: X (54, 1536) float64, y (54,) int64 in {0, 1}.

    ``standardize=True`` (default) scales each column to mean 0 and sample sd 1 (ddof = 1),
    as for the CmdStan fixtures and the paper's Table 1 experiment.

    Parameters
    ----------
    standardize : scale the columns of X (mean 0, sample sd 1).

    Returns
    -------
    X : ndarray of shape (54, 1536)
    y : ndarray of shape (54,)

    Examples
    --------
    >>> X, y = load_ovarian()
    >>> X.shape, int(y.sum()) > 0
    ((54, 1536), True)
    """
    raw = gzip.decompress(_read_bytes("ovarian.csv.gz")).decode("ascii")
    header = raw.split("\n", 1)[0].strip().split(",")
    if header[0] != "y" or len(header) != 1537:
        raise RuntimeError(f"bundled ovarian.csv.gz has an unexpected header: {header[:3]}...")
    table = np.loadtxt(io.StringIO(raw), delimiter=",", skiprows=1, dtype=np.float64)
    y = table[:, 0].astype(np.int64)
    X = table[:, 1:]
    if standardize:
        X = standardize_columns(X)
    return X, y
