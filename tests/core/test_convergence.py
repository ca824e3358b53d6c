"""Rank-normalised split R-hat, bulk and tail ESS of many columns at once, against arviz's
``rhat(method="rank")`` / ``ess(method="bulk" | "tail")`` on the same arrays (one column at
a time there), for both engines (numpy twin and numba kernel)."""

import arviz as az
import numpy as np
import pytest

from loo_adapt.core import convergence as cv
from loo_adapt.core._sort import _sorted_order


def columns(draws=301, seed=3):
    """Columns meant to stress each step: iid, a shifted chain, ties, a scaled chain, a
    stuck chain, a random walk, integers (many ties around the median), heavy tails."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(4, draws, 8))
    x[0, :, 1] += 0.5
    x[:, :, 2] = np.round(x[:, :, 2], 1)
    x[1, :, 3] *= 3.0
    x[2, :, 4] = x[2, 0, 4]
    x[:, :, 5] = np.cumsum(x[:, :, 5], axis=1) * 0.1
    x[:, :, 6] = np.round(x[:, :, 6] * 2.0)
    x[:, :, 7] = rng.standard_t(1.5, size=(4, draws))
    return x


@pytest.mark.parametrize("draws", [300, 301])
def test_all_three_equal_arviz(draws):
    x = columns(draws)
    got = cv.convergence_columns(x)
    for j in range(x.shape[2]):
        col = x[:, :, j]
        assert got["rhat"][j] == pytest.approx(az.rhat(col, method="rank"), rel=1e-12)
        assert got["ess_bulk"][j] == pytest.approx(az.ess(col, method="bulk"), rel=1e-9)
        tail = az.ess(col, method="tail", prob=(0.05, 0.95))
        assert got["ess_tail"][j] == pytest.approx(tail, rel=1e-9)


def test_fused_kernel_equals_arviz_and_flags_the_stuck_chain(monkeypatch):
    x = columns(301)
    monkeypatch.setattr(cv, "use_numba", lambda *a: True)
    bad, rhat = cv.disagreeing_columns(x)
    want = np.array([az.rhat(x[:, :, j], method="rank") for j in range(x.shape[2])])
    np.testing.assert_allclose(rhat, want, rtol=1e-12)
    assert bad[4] and bad[1]  # the stuck chain, the shifted chain
    assert bad.tolist() == ((want > 1.01) | (np.arange(8) == 4)).tolist()


def test_numpy_twin_flags_the_same_columns(monkeypatch):
    x = columns(300, seed=9)
    monkeypatch.setattr(cv, "use_numba", lambda *a: False)
    bad_np, rhat_np = cv.disagreeing_columns(x)
    monkeypatch.setattr(cv, "use_numba", lambda *a: True)
    bad_nb, rhat_nb = cv.disagreeing_columns(x)
    np.testing.assert_allclose(rhat_np, rhat_nb, rtol=1e-12)
    assert bad_np.tolist() == bad_nb.tolist()


@pytest.mark.parametrize("chains", [4, 10])
def test_screen_flags_the_same_columns_as_arviz(monkeypatch, chains):
    """``all_rhat=False`` (what ``loo`` runs): a bucketing screen skips the sort where it can
    show R-hat <= 1.01.  Against arviz's rank R-hat on columns from well mixed to failing,
    drifting around the threshold (a shifted chain, a scaled chain, AR(1) up to rho 0.995),
    heavy tails, both signs, ties and -0.0: the flagged columns are exactly arviz's, each
    flagged column has arviz's R-hat, a NaN is only where arviz's is <= 1.01, and the screen
    does skip most mixed columns; with 4 chains of 400 draws and with 10 of 160."""
    monkeypatch.setattr(cv, "use_numba", lambda *a: True)
    rng = np.random.default_rng(11)
    m, d = 60, 1600 // chains
    ar = np.empty((chains, d, m))
    e = rng.normal(size=(chains, d, m))
    rho = np.linspace(0.5, 0.995, m)
    ar[:, 0] = e[:, 0]
    for t in range(1, d):
        ar[:, t] = rho * ar[:, t - 1] + np.sqrt(1 - rho**2) * e[:, t]
    shifted = rng.normal(size=(chains, d, m))
    shifted[0] += np.linspace(0, 0.4, m)
    scaled = rng.normal(size=(chains, d, m))
    scaled[1] *= np.linspace(1, 1.6, m)
    shape = (chains, d, m)
    signed_zeros = np.where(rng.random(shape) < 0.3, -0.0, rng.normal(size=shape))
    x = np.concatenate([rng.normal(size=shape), -np.exp(2 * rng.normal(size=shape)),
                        rng.standard_t(1, size=shape), shifted, scaled, ar,
                        np.round(rng.normal(size=shape), 1), signed_zeros], axis=2)
    bad, rhat = cv.disagreeing_columns(x, all_rhat=False)
    want = np.array([az.rhat(x[:, :, j], method="rank") for j in range(x.shape[2])])
    assert bad.tolist() == (want > 1.01).tolist()
    shown = np.isnan(rhat)
    np.testing.assert_allclose(rhat[~shown], want[~shown], rtol=1e-12)
    assert np.all(want[shown] <= 1.01)
    assert 0.3 * m < bad.sum() < 3 * m  # columns on both sides of the threshold
    assert shown[:3 * m].mean() > 0.9  # iid, log-normal, Cauchy columns: no sort needed
    assert shown[3 * m:].any()  # and columns near the threshold


def test_screen_tiers_fine_buckets_where_coarse_ones_cannot_show(monkeypatch):
    """The screen tries its coarse buckets first and the fine ones where those cannot show
    R-hat <= 1.01 (short chains: 4 x 250 well-mixed normal draws).  Columns of both kinds
    occur here, and every verdict is arviz's: the flagged columns exactly arviz's, a NaN
    (shown by the screen, coarse or fine) only where arviz's R-hat is <= 1.01."""
    from loo_adapt.core import _rhat_kernel as rk
    from loo_adapt.core.ess import _direct_params

    monkeypatch.setattr(cv, "use_numba", lambda *a: True)
    rng = np.random.default_rng(21)
    chains, d, m = 4, 250, 120
    x = rng.normal(size=(chains, d, m))
    x[0] += np.linspace(0.0, 0.3, m)  # from mixed to a chain apart
    coarse, fine = rk._SCREEN_TIERS
    _, _, ratio, table = _direct_params(chains, d, 1.01)
    k, h = 2 * chains, d // 2
    scratch = rk._screen_scratch(k * h, k)
    bidx, count, glo, ghi, _, lanes = scratch

    def bulk(col, nb):
        lo, hi = col.min(), col.max()
        e = np.int64(0)
        if lo < 0.0 < hi:
            e = np.array([max(-lo, hi) * 2.0 ** -30]).view(np.int64)[0]
        return rk._screen_bulk(col, e, rk._level(lo, e), rk._level(hi, e), nb, k, h, table,
                               ratio, bidx, count, glo, ghi, lanes)

    split = [np.ascontiguousarray(x[:, :, j]).reshape(-1) + 0.0 for j in range(m)]
    needs_fine = [j for j in range(m) if not bulk(split[j], coarse) and bulk(split[j], fine)]
    bad, rhat = cv.disagreeing_columns(x, all_rhat=False)
    want = np.array([az.rhat(x[:, :, j], method="rank") for j in range(m)])
    assert bad.tolist() == (want > 1.01).tolist()
    shown = np.isnan(rhat)
    np.testing.assert_allclose(rhat[~shown], want[~shown], rtol=1e-12)
    assert np.all(want[shown] <= 1.01)
    assert len(needs_fine) >= 3  # the fine tier is exercised ...
    assert shown[needs_fine].any()  # ... and shows columns the coarse one could not
    assert shown.sum() > len(needs_fine) and bad.any()


def test_screen_with_extremes_outside_the_split_draws(monkeypatch):
    """Odd chains: the split chains drop each chain's middle draw, so the range the screen
    buckets over (the whole column's smallest and largest value) can be wider than the split
    draws'.  With that middle draw far out (above or below), columns from well mixed to
    shifted chains get arviz's verdict, and a NaN only where arviz's R-hat is <= 1.01."""
    monkeypatch.setattr(cv, "use_numba", lambda *a: True)
    rng = np.random.default_rng(5)
    m, d = 40, 301
    x = rng.normal(size=(4, d, m))
    x[0] += np.linspace(0.0, 0.5, m)  # chain 0 drifts away across the columns
    x[1, d // 2, ::2] = 1e6  # the largest value of every other column is never split
    x[2, d // 2, 1::2] = -1e6
    bad, rhat = cv.disagreeing_columns(x, all_rhat=False)
    want = np.array([az.rhat(x[:, :, j], method="rank") for j in range(m)])
    assert bad.tolist() == (want > 1.01).tolist()
    shown = np.isnan(rhat)
    np.testing.assert_allclose(rhat[~shown], want[~shown], rtol=1e-12)
    assert np.all(want[shown] <= 1.01) and shown.any() and bad.any()


@pytest.mark.parametrize("all_rhat", [True, False])
def test_constant_columns_have_no_rhat_in_the_kernels(monkeypatch, all_rhat):
    """A column whose draws are all equal (an observation the parameters do not touch) has
    no R-hat (arviz: NaN) and no stuck chain (every chain is still), in the numba kernels as
    in numpy; it used to raise inside the compiled kernel (0 / 0).  Chains each still at a
    different value disagree (arviz: R-hat inf); one constant chain among moving ones is a
    stuck chain."""
    from loo_adapt.core import ess

    monkeypatch.setattr(cv, "use_numba", lambda *a: True)
    monkeypatch.setattr(ess, "use_numba", lambda *a: True)
    x = np.random.default_rng(8).normal(size=(4, 48, 5))
    x[:, :, 1] = 5.0
    x[:, :, 3] = np.round(x[:, :, 3])
    x[2, :, 3] = 0.0
    x[:, :, 4] = np.array([-0.2, 0.0, 0.0, -0.0])[:, None]  # every chain still, apart
    want = np.array([az.rhat(x[:, :, j], method="rank") for j in range(5)])
    assert np.isnan(want[1])
    # column 4: between-chain variance > 0 over within 0 is inf (arviz gives inf with 3
    # chains and NaN with 4, from max(NaN, inf) in its bulk / tail maximum; disagreeing
    # chains must be flagged either way)
    want[4] = np.inf
    bad, rhat = cv.disagreeing_columns(x, all_rhat=all_rhat)
    stuck = np.array([False, False, False, True, False])
    assert bad.tolist() == ((want > 1.01) | stuck).tolist() and bad[4]
    assert np.isnan(rhat[1]) and rhat[4] > 1e6  # inf, or x / (rounding error of 0)
    r_eff, bad1, rhat1 = cv.relative_eff_and_disagreement(x)
    assert bad1.tolist() == bad.tolist() and np.isnan(rhat1[1]) and rhat1[4] > 1e6
    assert r_eff[1] == 1.0
    if all_rhat:
        np.testing.assert_allclose(rhat[[0, 2, 3]], want[[0, 2, 3]], rtol=1e-12)


def test_one_chain_has_no_rhat():
    bad, rhat = cv.disagreeing_columns(np.random.default_rng(0).normal(size=(1, 100, 3)))
    assert not bad.any() and np.isnan(rhat).all()


def test_sorted_order_is_a_stable_sort():
    """The kernel's radix argsort (high 32 bits of the keys, then a fix-up of runs sharing
    them) against numpy's stable sort: negatives, ties, -0.0 / 0.0, tiny and huge
    magnitudes, neighbours one ulp apart (its ranks decide every R-hat above)."""
    rng = np.random.default_rng(5)
    base = rng.normal(size=100)
    v = np.concatenate([rng.normal(size=500), np.zeros(20), -np.zeros(5), [1e-300, -1e-300],
                        [1e300, -1e300], np.round(rng.normal(size=200), 1), base,
                        np.nextafter(base, np.inf), np.nextafter(base, -np.inf),
                        [5e-324, -5e-324]])
    rng.shuffle(v)
    sv = np.empty_like(v)
    order = _sorted_order(np.ascontiguousarray(v), sv)
    np.testing.assert_array_equal(v[order], np.sort(v, kind="stable"))
    np.testing.assert_array_equal(sv.view(np.uint64), v[order].view(np.uint64))  # -0.0 kept
    same = v[order][1:] == v[order][:-1]  # equal values keep their input order (stable)
    assert np.all(order[1:][same & (v[order][1:] != 0)] > order[:-1][same & (v[order][1:] != 0)])


@pytest.mark.parametrize("shape", [(4, 300, 40), (3, 301, 40)])
def test_relative_eff_and_disagreement_in_one_pass(monkeypatch, shape):
    """loo's single pass (relative efficiency and the R-hat check from one buffer per
    column), both kernels forced, even and odd draws: r_eff is R loo's (ESS of exp(log_lik)
    over S; for 300 draws arviz's unsplit ESS of the exponentiated column), the flagged
    columns are those whose arviz rank R-hat exceeds 1.01 or whose chain is stuck, with
    arviz's R-hat."""
    from arviz.stats.diagnostics import _ess

    from loo_adapt.core import ess

    monkeypatch.setattr(cv, "use_numba", lambda *a: True)
    monkeypatch.setattr(ess, "use_numba", lambda *a: True)
    rng = np.random.default_rng(17)
    c, d, m = shape
    x = rng.normal(size=shape) * 0.7 - 1.0
    x[0, :, :m // 2] += np.linspace(0.0, 0.5, m // 2)  # a drifting first chain
    x[1, :, m - 1] = x[1, 0, m - 1]  # a stuck chain
    x[:, :, m - 2] = np.cumsum(x[:, :, m - 2], axis=1) * 0.05  # random walks
    r_eff, bad, rhat = cv.relative_eff_and_disagreement(x)
    want = np.array([az.rhat(x[:, :, j], method="rank") for j in range(m)])
    stuck = np.arange(m) == m - 1
    assert bad.tolist() == ((want > 1.01) | stuck).tolist()
    assert 3 < bad.sum() < m - 3
    shown = np.isnan(rhat)
    np.testing.assert_allclose(rhat[~shown], want[~shown], rtol=1e-12)
    assert np.all(want[shown] <= 1.01) and shown.sum() > m // 4
    # the same r_eff as the separate call (tested against R loo in test_psis.py) ...
    np.testing.assert_array_equal(r_eff, ess.relative_eff(x, log=True))
    if d == 300:  # ... which for draws R's FFT does not pad is arviz's unsplit ESS / S
        for j in range(m):
            col = np.exp(x[:, :, j] - x[:, :, j].max())
            assert r_eff[j] == pytest.approx(_ess(col) / (c * d), rel=1e-10), j
