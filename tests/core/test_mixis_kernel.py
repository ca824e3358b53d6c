"""The compiled MixIS kernels (`loo_adapt.core._mixis_kernel`) against their numpy twins and
against the closed form of a conjugate normal model.

`mixis_loo` and `snis_influence_moments` pick the numba kernel or the numpy code by
`loo_adapt.core._compiled.use_numba` (a cold start runs numpy); both must give the same
numbers, and the kernel must hand non-finite input back to the numpy code, which handles
-inf and refuses the rest.  Both engines against the closed form of a conjugate normal
model: tests/estimators/test_mixis.py."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from loo_adapt.core import _compiled, mixis, skew


def _engine(monkeypatch, name):
    monkeypatch.setattr(_compiled, "use_numba", lambda kernel, cells, record=True:
                        name == "numba")


def _both(monkeypatch, fn):
    out = {}
    for name in ("numpy", "numba"):
        _engine(monkeypatch, name)
        out[name] = fn()
    return out["numpy"], out["numba"]


FIELDS = ("elpd_i", "lpd_i", "p_loo_i", "mcse_elpd_i", "ess", "ess_mcse", "log_weights",
          "mcse_delta_i", "mcse_inflation", "mcse_total")


@pytest.mark.parametrize("chains", [1, 2, 4])
@pytest.mark.parametrize("mcse", ["skew", "delta", "chains"])
def test_kernel_equals_numpy(monkeypatch, chains, mcse):
    rng = np.random.default_rng(chains)
    ll = rng.normal(-1.5, 1.2, size=(chains, 800, 37))
    ll[..., 3] -= 8.0  # one observation far out: its weights carry most of the mass
    a, b = _both(monkeypatch, lambda: mixis.mixis_loo(ll, mcse=mcse))
    for f in FIELDS:
        np.testing.assert_allclose(np.asarray(getattr(b, f)), np.asarray(getattr(a, f)),
                                   rtol=1e-11, atol=1e-13, err_msg=f)
    np.testing.assert_allclose(b.influence, a.influence, rtol=1e-11, atol=1e-11)
    if chains >= 4:
        np.testing.assert_allclose(b.elpd_chain_i, a.elpd_chain_i, rtol=1e-12, atol=1e-13)
    else:
        assert a.elpd_chain_i is None and b.elpd_chain_i is None


def test_minus_infinity_goes_to_the_numpy_twin(monkeypatch):
    """A likelihood of exactly 0 (log_lik -inf) is the numpy code's case: the kernel returns
    without an answer, and the result is the numpy twin's, NaN-free where it is."""
    rng = np.random.default_rng(3)
    ll = rng.normal(-1.0, 0.5, size=(2, 300, 5))
    ll[0, 7, 2] = -np.inf
    a, b = _both(monkeypatch, lambda: mixis.mixis_loo(ll))
    np.testing.assert_array_equal(b.elpd_i, a.elpd_i)
    assert np.all(np.isfinite(b.elpd_i))
    every = np.full((1, 10, 3), -np.inf)
    _engine(monkeypatch, "numba")
    with pytest.raises(ValueError, match="every observation"):
        mixis.mixis_loo(every)


@pytest.mark.parametrize("normalized", [True, False])
def test_snis_moments_kernel_equals_numpy(monkeypatch, normalized):
    rng = np.random.default_rng(5)
    S, n = 2000, 12
    ll = rng.normal(-1.0, 0.7, size=(S, n))
    lw = rng.standard_t(3, size=(S, n))
    if normalized:
        lw -= logsumexp(lw, axis=0)
    cols = np.array([0, 3, 4, 11])
    a, b = _both(monkeypatch, lambda: skew.snis_influence_moments(
        lw, ll, cols, chains=4, normalized=normalized))
    for x, y in zip(a, b):
        np.testing.assert_allclose(y, x, rtol=1e-11, atol=1e-12)
    # a strided input (as a cmdstanpy fit's draws reach it) gives the same numbers
    wide = np.zeros((S, 2 * n))
    wide[:, ::2] = ll
    strided = skew.snis_influence_moments(lw, wide[:, ::2], cols, chains=4,
                                          normalized=normalized)
    for x, y in zip(b, strided):
        np.testing.assert_allclose(y, x, rtol=1e-13, atol=1e-14)
    # the inflation is the documented formula on the influence values themselves
    z = skew.snis_influence(lw[:, cols], ll[:, cols], normalized=normalized)
    ess = skew.influence_ess(z, 4)
    g = stats.skew(z, axis=0, bias=True)
    np.testing.assert_allclose(b[1], 1 + np.abs(g) / (2 * np.sqrt(ess)), rtol=1e-10)


def test_loo_prob_kernel_equals_numpy_and_refuses_the_same(monkeypatch):
    """P(y_i = 1 | y_-i) from given MixIS weights: the kernel's equals numpy's, and a
    log_p1 above 0 or NaN is refused by both."""
    rng = np.random.default_rng(7)
    ll = -np.abs(rng.normal(0.7, 0.5, size=(4, 250, 9)))
    y = (rng.uniform(size=9) < 0.5).astype(int)
    res = mixis.mixis_loo(ll)
    log_p1 = mixis.bernoulli_log_p1(ll, y)
    a, b = _both(monkeypatch, lambda: mixis.mixis_loo_prob(ll, log_p1,
                                                           log_weights=res.log_weights))
    np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-15)
    # against the definition: sum_s w_is P(y_i = 1 | theta_s)
    np.testing.assert_allclose(b, np.sum(np.exp(res.log_weights) * np.exp(
        log_p1.reshape(-1, 9)), axis=0), rtol=1e-12)
    # a NaN weight is not read as a zero one: both engines give NaN for that row
    lw_nan = res.log_weights.copy()
    lw_nan[5, 2] = np.nan
    a, b = _both(monkeypatch, lambda: mixis.mixis_loo_prob(ll, log_p1, log_weights=lw_nan))
    assert np.isnan(a[2]) and np.isnan(b[2])
    np.testing.assert_allclose(np.delete(b, 2), np.delete(a, 2), rtol=1e-12)
    bad = log_p1.copy()
    bad[1, 3, 4] = 0.5
    for name in ("numpy", "numba"):
        _engine(monkeypatch, name)
        with pytest.raises(ValueError, match="log-probabilities"):
            mixis.mixis_loo_prob(ll, bad, log_weights=res.log_weights)


def test_bernoulli_log_p1_kernel_equals_numpy(monkeypatch):
    """log P(y = 1 | theta) from the Bernoulli log-likelihood: the kernel's equals numpy's,
    for y = 1 (ll itself) and y = 0 (log(1 - exp(ll)), -inf at ll = 0, finite at ll = -1e-300
    and near 0), and both refuse ll > 0."""
    rng = np.random.default_rng(11)
    ll = -rng.exponential(1.0, size=(3, 40, 6))
    ll[0, 0, 0] = 0.0
    ll[0, 1, 0] = -1e-300
    ll[0, 2, 1] = -1e-12
    y = np.array([0, 0, 1, 0, 1, 1])
    a, b = _both(monkeypatch, lambda: mixis.bernoulli_log_p1(ll, y))
    assert b.shape == ll.shape
    np.testing.assert_allclose(b, a, rtol=1e-14, atol=0)  # libm's and numpy's last bits
    assert b[0, 0, 0] == -np.inf and np.isfinite(b[0, 1, 0])
    np.testing.assert_allclose(np.exp(b[..., 3]), 1 - np.exp(ll[..., 3]), rtol=1e-12)
    for name in ("numpy", "numba"):
        _engine(monkeypatch, name)
        with pytest.raises(ValueError, match="<= 0"):
            mixis.bernoulli_log_p1(np.abs(ll), y)
