"""relative_eff against R loo's values, on both engines (the direct numba kernel, which
computes only the lags Geyer's sequence reads, and the numpy FFT twin of a cold start).

The reference values are R loo 2.5.1's own ``relative_eff`` output
(tests/data/ess_reference/r_loo/*.csv, written by make_r_reference.py there with Rscript and
Debian's r-cran-loo); the inputs are rebuilt from their seeds by make_reference.py, whose
line-by-line transcription of R's code (``<case>.csv``) equals R's output to 5e-14."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from loo_adapt.core import ess

REF = Path(__file__).resolve().parents[1] / "data" / "ess_reference"
# loaded under its own name: tests/data/psis_reference has a make_reference.py too
_spec = importlib.util.spec_from_file_location("ess_make_reference", REF / "make_reference.py")
_ref = importlib.util.module_from_spec(_spec)
sys.modules["ess_make_reference"] = _ref
_spec.loader.exec_module(_ref)
ar1, cases, r_relative_eff = _ref.ar1, _ref.cases, _ref.r_relative_eff

_CASES = cases()


@pytest.fixture(params=["numba", "numpy"])
def engine(request, monkeypatch):
    """Force one engine of relative_eff (the choice normally depends on size and cache)."""
    monkeypatch.setattr(ess, "use_numba", lambda kernel, cells: request.param == "numba")
    return request.param


def _reference(name):
    """R loo's relative_eff of the case (R's own output, not the transcription)."""
    return pd.read_csv(REF / "r_loo" / f"{name}.csv", comment="#")["r_eff"].to_numpy()


@pytest.mark.parametrize("name", sorted(_CASES))
def test_relative_eff_equals_r_loo(name, engine):
    ll = _CASES[name]
    ref = _reference(name)
    np.testing.assert_allclose(ess.relative_eff(ll, log=True), ref, rtol=1e-10, atol=0)
    np.testing.assert_allclose(ess.relative_eff(np.exp(ll)), ref, rtol=1e-10, atol=0)
    # the same draws as an (S, n) matrix with chain ids, R's relative_eff.matrix
    c, d, n = ll.shape
    flat = np.exp(ll).reshape(c * d, n)
    np.testing.assert_allclose(ess.relative_eff(flat, chain_id=np.repeat(np.arange(c), d)),
                               ref, rtol=1e-10, atol=0)


def test_reference_transcription_is_not_trivial():
    """The cases cover what the estimator distinguishes: antithetic chains (r_eff > 1),
    slow mixing (r_eff < 0.01), the padding quirk (N = 251) and a single chain."""
    ref = np.concatenate([_reference(n) for n in _CASES])
    assert ref.max() > 1.5 and ref.min() < 0.01
    assert _CASES["quirk251"].shape[1] == 251 and _CASES["one_chain"].shape[0] == 1


def test_long_lag_columns_take_the_fft_path_and_match(monkeypatch):
    """Columns whose Geyer sequence runs past MAX_DIRECT_LAG are handed to the FFT path;
    the rest are not; both match R."""
    monkeypatch.setattr(ess, "use_numba", lambda kernel, cells: True)
    seen = []
    fft = ess._ess_columns

    def spy(x, shift=None, engine=None):
        seen.append(x.shape[2])
        return fft(x, shift=shift, engine=engine)

    monkeypatch.setattr(ess, "_ess_columns", spy)
    ll = _CASES["long_lag"]
    np.testing.assert_allclose(ess.relative_eff(ll, log=True), _reference("long_lag"),
                               rtol=1e-10, atol=0)
    assert seen == [ll.shape[2]]  # every column of this case needs long lags
    seen.clear()
    ll = _CASES["one_chain"]
    np.testing.assert_allclose(ess.relative_eff(ll, log=True), _reference("one_chain"),
                               rtol=1e-10, atol=0)
    assert seen == []  # fast-mixing columns never reach the FFT
    # a lag limit of 4 sends the slower-mixing columns of "mixing" to the FFT, and the
    # mixture of both paths in one call still matches R
    seen.clear()
    monkeypatch.setattr(ess, "MAX_DIRECT_LAG", 4)
    ll = _CASES["mixing"]
    np.testing.assert_allclose(ess.relative_eff(ll, log=True), _reference("mixing"),
                               rtol=1e-10, atol=0)
    assert len(seen) == 1 and 0 < seen[0] < ll.shape[2]


def test_many_columns_across_blocks_match_the_transcription(engine):
    """More columns than one task's block (and not a multiple of it), independent draws
    and AR(1) mixed; the reference is computed here by the transcription of R."""
    rng = np.random.default_rng(11)
    phis = np.tile([0.0, 0.5, 0.8, -0.2], 20)[:77]
    ll = -0.5 * (0.3 * ar1(rng, phis, 3, 120, phis.size) - 1.0) ** 2
    np.testing.assert_allclose(ess.relative_eff(ll, log=True), r_relative_eff(np.exp(ll)),
                               rtol=1e-10, atol=0)


def test_constant_columns_and_bad_values(engine):
    rng = np.random.default_rng(3)
    ll = -np.abs(ar1(rng, 0.3, 4, 100, 5))
    ll[:, :, 2] = -0.7  # a constant likelihood: no MCMC error, r_eff 1 (R: NaN)
    r = ess.relative_eff(ll, log=True)
    assert r[2] == 1.0
    np.testing.assert_allclose(np.delete(r, 2), r_relative_eff(np.exp(np.delete(ll, 2, 2))),
                               rtol=1e-10)
    assert ess.relative_eff(np.exp(ll))[2] == 1.0
    # -inf log values are a likelihood of 0 at those draws: allowed, same as exp()
    ll_inf = ll.copy()
    ll_inf[1, 7, 0] = -np.inf
    np.testing.assert_allclose(ess.relative_eff(ll_inf, log=True),
                               ess.relative_eff(np.exp(ll_inf)), rtol=1e-10)
    bad = ll.copy()
    bad[0, 3, 4] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        ess.relative_eff(bad, log=True)
    with pytest.raises(ValueError, match="NaN"):
        ess.relative_eff(np.exp(bad))
    bad[0, 3, 4] = np.inf
    with pytest.raises(ValueError, match=r"\+inf"):
        ess.relative_eff(bad, log=True)
    with pytest.raises(ValueError, match="non-finite"):
        ess.relative_eff(bad)
    bad[:, :, 4] = -np.inf
    with pytest.raises(ValueError, match="-inf for every draw"):
        ess.relative_eff(bad, log=True)
    with pytest.raises(ValueError, match="at least 4 draws"):
        ess.relative_eff(ll[:, :3], log=True)


def test_strided_input_is_read_in_place(engine):
    """A non-contiguous view (every other observation of a Fortran-ordered array) gives
    the numbers of its contiguous copy."""
    rng = np.random.default_rng(5)
    ll = np.asfortranarray(-np.abs(ar1(rng, 0.5, 2, 200, 12)))[:, :, ::2]
    np.testing.assert_allclose(ess.relative_eff(ll, log=True),
                               r_relative_eff(np.exp(np.ascontiguousarray(ll))), rtol=1e-10)
