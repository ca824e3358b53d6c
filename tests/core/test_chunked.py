"""The per-block PSIS-LOO kernel: blocks of whole columns reproduce the in-memory PSIS-LOO
(the reference is `loo_pointwise` on the whole matrix, and R loo's SE formula by hand)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from loo_adapt.core.chunked import FIELDS, from_blocks, loo_block
from loo_adapt.core.ess import relative_eff
from loo_adapt.core.psis_loo import loo_pointwise


def _log_lik(shape, seed=0):
    rng = np.random.default_rng(seed)
    # heavy-tailed columns give k-hat from ~0 to above 0.7
    scale = rng.uniform(0.05, 1.5, shape[-1])
    return -0.5 * (rng.standard_t(4, shape) * scale) ** 2 - 1.0


@pytest.mark.parametrize("engine", ["numba", "numpy"])
@pytest.mark.parametrize("shape", [(4, 250, 97), (600, 97)])
def test_blocks_reproduce_the_whole_matrix(shape, engine, monkeypatch):
    """With either engine for every call (which one runs otherwise depends on whether the
    kernel is compiled yet, and the two agree to ~1e-14 only), the blocks' numbers are the
    whole matrix's; the blocks are strided column slices, read in place."""
    from loo_adapt.core import psis

    monkeypatch.setattr(psis, "_engine", lambda *_: engine)
    ll = _log_lik(shape)
    ref = loo_pointwise(ll)
    cuts = [0, 1, 33, 64, 97]  # uneven blocks, one of a single column
    blocks = [loo_block(ll[..., a:b], a) for a, b in zip(cuts[:-1], cuts[1:])]
    res = from_blocks(np.hstack(blocks), int(np.prod(shape[:-1])))
    for name in FIELDS:
        np.testing.assert_allclose(getattr(res, name), getattr(ref, name), rtol=0, atol=1e-12)
    assert res.log_weights is None
    assert res.pareto_k.max() > 0.7 > res.pareto_k.min()
    if len(shape) == 3:
        np.testing.assert_allclose(res.r_eff, relative_eff(ll, log=True), rtol=1e-12)
    else:
        np.testing.assert_array_equal(res.r_eff, 1.0)
    est = res.estimates()
    n = shape[-1]
    assert est["elpd_loo"] == pytest.approx(ref.elpd_i.sum(), abs=1e-9)
    assert est["se_elpd_loo"] == pytest.approx(
        np.sqrt(n * np.var(ref.elpd_i, ddof=1)), abs=1e-9)


def test_given_r_eff_is_used_per_block():
    ll = _log_lik((500, 20), seed=1)
    r = np.linspace(0.3, 1.0, 20)
    ref = loo_pointwise(ll, r_eff=r)
    res = from_blocks(np.hstack([loo_block(ll[:, :7], 0, r[:7]),
                                 loo_block(ll[:, 7:], 7, r[7:])]), 500)
    np.testing.assert_allclose(res.elpd_i, ref.elpd_i, atol=1e-12)
    np.testing.assert_allclose(res.mcse_elpd_i, ref.mcse_elpd_i, atol=1e-12)


def test_block_errors_name_the_global_observation():
    ll = _log_lik((300, 10), seed=2)
    ll[5, 3] = np.nan
    with pytest.raises(ValueError, match=r"observations 40\.\.49 .*count from 40.* 3"):
        loo_block(ll, 40)


def test_failed_fits_are_reported_once_with_global_columns():
    ll = _log_lik((300, 6), seed=3)
    ll[:, 4] = -2.0  # a constant column: constant tail, k-hat = inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the block itself must stay silent
        blocks = [loo_block(ll[:, :3], 0), loo_block(ll[:, 3:], 3)]
    with pytest.warns(UserWarning, match=r"could not be fitted .* column\(s\) 4;"):
        res = from_blocks(np.hstack(blocks), 300)
    assert np.isinf(res.pareto_k[4]) and np.isfinite(np.delete(res.pareto_k, 4)).all()
    with pytest.warns(UserWarning, match="only 50 draws"):
        from_blocks(np.hstack([loo_block(ll[:50, :3], 0)]), 50)
