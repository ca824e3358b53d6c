"""ess_mean (Stan's / arviz's split-chain ESS of a mean) against arviz ``ess(method="mean")``
on both engines: the direct-lag kernel and the FFT path (cold start, short chains, columns
whose Geyer sequence runs long)."""

from __future__ import annotations

import numpy as np
import pytest

from loo_adapt.core import ess_split
from loo_adapt.core.ess_split import ess_mean

az = pytest.importorskip("arviz")


def _ar1(rng, chains, draws, k, phi):
    e = rng.normal(size=(chains, draws + 50, k))
    x = np.zeros_like(e)
    for t in range(1, e.shape[1]):
        x[:, t] = phi * x[:, t - 1] + e[:, t]
    return x[:, 50:]


def _arviz(x):
    return np.array([float(az.ess(np.ascontiguousarray(x[:, :, j]), method="mean"))
                     for j in range(x.shape[2])])


@pytest.fixture(params=["numba", "numpy"])
def engine(request, monkeypatch):
    monkeypatch.setattr(ess_split, "use_numba", lambda *a, _e=request.param, **k: _e == "numba")
    return request.param


def test_many_columns_match_arviz(engine):
    rng = np.random.default_rng(11)
    # independent, mixing, slow (more lags than the kernel computes: the FFT finishes them),
    # anti-correlated, and odd-length chains (the middle draw dropped)
    x = np.concatenate([_ar1(rng, 4, 1001, 3, phi) for phi in (0.0, 0.6, 0.97, -0.7)],
                       axis=2)
    np.testing.assert_allclose(ess_mean(x), _arviz(x), rtol=1e-10)


def test_kernel_runs_and_agrees_where_it_should(monkeypatch):
    """The direct kernel really is what answers for mixing columns (not the FFT path)."""
    calls = []
    real = ess_split._ess_mean_fft
    monkeypatch.setattr(ess_split, "use_numba", lambda *a, **k: True)
    monkeypatch.setattr(ess_split, "_ess_mean_fft", lambda sp: calls.append(sp.shape[2])
                        or real(sp))
    x = _ar1(np.random.default_rng(12), 4, 1000, 40, 0.3)
    np.testing.assert_allclose(ess_mean(x), _arviz(x), rtol=1e-10)
    assert calls == []


def test_alternating_chains_and_constant_columns(engine):
    """A chain that alternates (lag-1 autocorrelation about -1: the first Geyer pair is
    negative, where R loo's sum and Stan's differ) and a constant column (its size)."""
    rng = np.random.default_rng(13)
    alt = np.tile([1.0, -1.0], (4, 500)) + 1e-3 * rng.normal(size=(4, 1000))
    x = np.stack([alt, np.full((4, 1000), 2.5), rng.normal(size=(4, 1000))], axis=2)
    want = _arviz(x)
    got = ess_mean(x)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    assert got[1] == 4000.0


def test_short_chains(engine):
    x = _ar1(np.random.default_rng(14), 3, 9, 2, 0.5)
    np.testing.assert_allclose(ess_mean(x), _arviz(x), rtol=1e-10)
    assert ess_mean(x[:, :, 0]) == pytest.approx(float(az.ess(x[:, :, 0], method="mean")),
                                                 rel=1e-10)
