"""The PSIS kernel's two engines (numba, numpy cold-start path), its tail selection on
adversarial columns, the weightless LOO mode and the lazy import, against independent
oracles: R's definition of the tail spelled out with a stable full sort and ``gpdfit``,
closed-form MCSE, and each other."""

from __future__ import annotations

import math
import subprocess
import sys
import warnings

import numpy as np
import pytest
from scipy.special import logsumexp

from loo_adapt.core import psis
from loo_adapt.core.ess import _autocov, _geyer_ess_numpy, _geyer_ess_serial
from loo_adapt.core.psis import gpdfit, psis_tail_length, psislw
from loo_adapt.core.psis_loo import loo_pointwise, loo_pointwise_approximate


@pytest.fixture(params=["numba", "numpy"])
def engine(request, monkeypatch):
    monkeypatch.setattr(psis, "_engine", lambda *_: request.param)
    return request.param


def _r_tail_khat(lr, r_eff=1.0):
    """R loo's k-hat of one column, spelled out: stable full sort of the shifted ratios,
    the last M are the tail, the one below is the cutoff (lowered by eps if tied)."""
    x = lr - lr.max()
    m = int(psis_tail_length(x.size, r_eff))
    xs = np.sort(x, kind="stable")
    tail, cutoff = xs[-m:], xs[-m - 1]
    if cutoff == tail[0]:
        cutoff -= np.finfo(float).eps
    return gpdfit(np.exp(tail) - np.exp(cutoff), sort_x=False)[0]


def _adversarial_columns(rng, s_draws=3000):
    base = rng.standard_t(3, size=s_draws)
    cols = [
        np.sort(base),  # ascending: worst order for a running top-k
        np.sort(base)[::-1],  # descending
        np.round(base, 1),  # heavy ties everywhere, also at the cutoff
        np.where(rng.random(s_draws) < 0.3, -np.inf, base),  # zero-weight draws
        np.concatenate([np.full(s_draws - 50, -2.0), rng.normal(size=50)]),  # ties below
        base * 40.0,  # one draw dominating by e^100
    ]
    return np.stack(cols, axis=1)


def test_tail_selection_matches_stable_full_sort(engine):
    lr = _adversarial_columns(np.random.default_rng(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lw, k = psislw(lr, r_eff=0.9, normalize=False)
    for i in range(lr.shape[1]):
        assert k[i] == pytest.approx(_r_tail_khat(lr[:, i], 0.9), abs=1e-12), i
        # the body keeps the raw ratios: exactly the draws outside R's stable tail
        m = int(psis_tail_length(lr.shape[0], 0.9))
        body = np.argsort(lr[:, i] - lr[:, i].max(), kind="stable")[:-m]
        np.testing.assert_array_equal(lw[body, i], lr[body, i])


def test_engines_agree_on_everything():
    rng = np.random.default_rng(1)
    lr = np.concatenate([_adversarial_columns(rng, 2000), rng.gumbel(size=(2000, 80))],
                        axis=1)
    r = rng.uniform(0.3, 1.5, lr.shape[1])
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for eng in ("numba", "numpy"):
            for norm in (True, False):
                out[eng, norm] = psis._run(lr, None, False, r, norm, True, engine=eng)
            ll = -np.where(np.isinf(lr), 0.0, lr)
            out[eng, "loo"] = psis._run(ll, np.zeros(2000), True, r, True, True, engine=eng)
    for key in ((True,), (False,), ("loo",)):
        a, b = out[("numba",) + key], out[("numpy",) + key]
        np.testing.assert_array_equal(a[2], b[2])  # status
        np.testing.assert_allclose(a[1], b[1], rtol=0, atol=1e-12)  # khat
        np.testing.assert_allclose(a[0], b[0], rtol=0, atol=1e-12)  # weights
        for x, y in zip(a[3:], b[3:]):  # elpd, lpd, mcse
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)


def test_numpy_engine_in_column_chunks_equals_one_chunk(monkeypatch):
    """The cold-start path runs over column chunks (memory); each column's numbers must not
    depend on which others share its chunk (tail lengths vary with r_eff, bad columns)."""
    from loo_adapt.core import _psis_numpy

    rng = np.random.default_rng(6)
    lr = np.concatenate([_adversarial_columns(rng, 1500), rng.gumbel(size=(1500, 40))],
                        axis=1)
    lr[5, 7] = np.nan
    r = rng.uniform(0.3, 1.5, lr.shape[1])
    ll = -np.where(np.isinf(lr), 0.0, lr)
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for chunks in (1, 12):
            monkeypatch.setattr(_psis_numpy, "_CHUNKS", chunks)
            out[chunks] = (psis._run(lr, None, False, r, True, True, engine="numpy")
                           + psis._run(ll, np.zeros(1500), True, r, True, True,
                                       engine="numpy"))
    for x, y in zip(out[1], out[12]):
        np.testing.assert_array_equal(x, y)
    assert out[12][0].flags.c_contiguous and out[12][0].shape == lr.shape


@pytest.mark.parametrize("n", [1, 5, 17, 40, 257, 1000])
def test_kth_largest_matches_a_full_sort(n):
    """Branch-free quickselect against np.sort on sorted, reversed, tied and -inf input."""
    rng = np.random.default_rng(n)
    base = rng.standard_t(2, size=n)
    cases = [base, np.sort(base), np.sort(base)[::-1], np.round(base), np.zeros(n),
             np.where(rng.random(n) < 0.4, -np.inf, base)]
    ks = sorted({1, 2, n // 3 + 1, n // 2 + 1, max(1, n - 1), n})
    for v in cases:
        ref = np.sort(v)
        for k in ks:
            work, tmp = np.array(v, dtype=float), np.empty(n)
            assert psis._kth_largest(work, n, k, tmp) == ref[n - k], (k, v[:5])


def test_bucketed_pair_sort_is_a_stable_sort_or_declines():
    """The tail's bucket sort against numpy's stable argsort: spread values, ties (draws in
    input order), -0.0 beside 0.0, a value at each end of the range; it declines (returns
    False) for values bunched into one bucket and for an empty or infinite range."""
    from loo_adapt.core._sort import _BUCKET_MAX, _sort_pairs_bucketed

    rng = np.random.default_rng(8)
    spread = -rng.exponential(0.3, size=425)
    tied = np.round(-rng.exponential(0.3, size=425), 1)
    zeros = np.concatenate([-np.zeros(3), np.zeros(3), -rng.uniform(0, 1, size=200)])
    for v in (spread, tied, zeros):
        lo = v.min()
        n = v.size
        idx = np.arange(n) * 3 + 1  # ascending draw numbers
        sv, sidx = np.empty(n), np.empty(n, np.int64)
        cnt = np.empty(n + 1, np.int64)
        if not _sort_pairs_bucketed(v, idx, n, lo, 0.0, sv, sidx, cnt):
            assert v is tied  # bunched: 0.1-wide ties hold more than a bucket's share
            continue
        order = np.argsort(v, kind="stable")
        np.testing.assert_array_equal(sidx, idx[order])
        np.testing.assert_array_equal(sv, v[order])
    bunched = np.concatenate([np.full(_BUCKET_MAX + 1, -0.5), [-1.0, 0.0]])
    n = bunched.size
    args = (np.arange(n), n)
    scratch = (np.empty(n), np.empty(n, np.int64), np.empty(n + 1, np.int64))
    assert not _sort_pairs_bucketed(bunched, *args, -1.0, 0.0, *scratch)
    assert not _sort_pairs_bucketed(np.zeros(n), *args, 0.0, 0.0, *scratch)
    assert not _sort_pairs_bucketed(bunched, *args, -np.inf, 0.0, *scratch)


@pytest.mark.parametrize("k", [0.0, 1e-9, -0.4, 0.3, 0.9, 2.5, 400.0, -300.0])
def test_smoothed_tail_against_the_quantile_formula(k):
    """Vectorised (and, for extreme k, libm) smoothing against numpy's libm formula."""
    m, sigma, exp_cutoff = 190, 0.37, 0.05
    p = (np.arange(m) + 0.5) / m
    with np.errstate(all="ignore"):
        q = (exp_cutoff - sigma * np.log1p(-p) if k == 0.0
             else exp_cutoff + sigma * np.expm1(-k * np.log1p(-p)) / k)
        ref = np.minimum(np.log(q), 5.0)
    tail = np.empty(m)
    psis._smooth_tail(tail, k, sigma, exp_cutoff, 5.0)
    np.testing.assert_allclose(tail, ref, rtol=1e-14, atol=1e-15)


def test_bad_input_errors_from_both_engines(engine):
    rng = np.random.default_rng(2)
    lr = rng.normal(size=(300, 5))
    bad = lr.copy()
    bad[3, 2] = np.nan
    bad[4, 4] = np.inf
    with pytest.raises(ValueError, match=r"column\(s\) 2, 4"):
        psislw(bad)
    bad = lr.copy()
    bad[:, 1] = -np.inf
    with pytest.raises(ValueError, match=r"-inf for every draw in column\(s\) 1"):
        psislw(bad)
    ll = -np.abs(lr)
    ll[7, 3] = np.nan
    with pytest.raises(ValueError, match=r"NaN in observation\(s\) 3"):
        loo_pointwise(ll)
    ll[7, 3] = -np.inf
    with pytest.raises(ValueError, match="not allowed"):
        loo_pointwise(ll)


def test_loo_without_weights_and_closed_form_mcse(engine):
    rng = np.random.default_rng(3)
    mu = rng.normal(0.0, 0.3, size=(3000, 1))
    y = np.array([0.0, 1.0, -2.5, 4.0, 6.0])
    ll = -0.5 * (y - mu) ** 2 - 0.5 * math.log(2 * math.pi)
    r = np.array([1.0, 0.8, 0.5, 1.2, 0.9])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = loo_pointwise(ll, r_eff=r)
        bare = loo_pointwise(ll, r_eff=r, weights=False)
        quad = loo_pointwise(ll, r_eff=r, weights=False, mcse_method="quadrature")
    assert bare.log_weights is None and quad.log_weights is None
    for f in ("elpd_i", "p_loo_i", "lpd_i", "mcse_elpd_i", "pareto_k"):
        np.testing.assert_array_equal(getattr(bare, f), getattr(full, f))
    # closed forms from the weights: elpd = log sum w p, lpd = log mean p,
    # MCSE = sqrt(log1p(sum w^2 (p - E)^2 / E^2) / r_eff)
    w, p = np.exp(full.log_weights), np.exp(ll)
    e = np.sum(w * p, axis=0)
    np.testing.assert_allclose(full.elpd_i, np.log(e), rtol=1e-13)
    np.testing.assert_allclose(full.lpd_i, np.log(p.mean(axis=0)), rtol=1e-13)
    mcse = np.sqrt(np.log1p(np.sum(w**2 * (p - e) ** 2, axis=0) / e**2) / r)
    np.testing.assert_allclose(full.mcse_elpd_i, mcse, rtol=1e-10)
    assert not np.allclose(quad.mcse_elpd_i, full.mcse_elpd_i, rtol=1e-6, atol=0)
    np.testing.assert_allclose(quad.mcse_elpd_i, full.mcse_elpd_i, rtol=0.3)


def test_approximate_loo_matches_its_definition(engine):
    """Ratios corr - ll, lpd = logsumexp(ll + smoothed log p/q weights)."""
    rng = np.random.default_rng(4)
    ll = rng.normal(-1.0, 0.4, size=(2000, 6))
    corr = rng.normal(0.0, 0.2, size=2000)
    res = loo_pointwise_approximate(ll, corr, r_eff=0.9)
    lw_post, _ = psislw(corr, r_eff=1.0)
    np.testing.assert_allclose(res.lpd_i, logsumexp(ll + lw_post[:, None], axis=0),
                               rtol=0, atol=1e-12)
    lw, k = psislw(corr[:, None] - ll, r_eff=0.9)
    np.testing.assert_allclose(res.pareto_k, k, rtol=0, atol=1e-12)
    np.testing.assert_allclose(res.log_weights, lw, rtol=0, atol=1e-12)
    np.testing.assert_allclose(res.elpd_i, logsumexp(ll + lw, axis=0), rtol=0, atol=1e-12)


def test_kernel_smooths_in_the_weights_own_rows():
    """The compiled kernel writes the weights observation-major (the block buffer is their
    rows, no copy back): the (S, n) result is the transpose of a C-contiguous (n, S) array,
    it holds the numpy twin's numbers, and an output in another layout is refused rather
    than written through a copy."""
    rng = np.random.default_rng(11)
    ll = rng.normal(-1.0, 0.4, size=(4, 300, 70))
    r = np.full(70, 0.8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = psis._run(ll, np.zeros(1200), True, r, True, True, engine="numba")
        slow = psis._run(ll, np.zeros(1200), True, r, True, True, engine="numpy")
    assert fast[0].shape == (1200, 70) and fast[0].T.flags.c_contiguous
    np.testing.assert_allclose(fast[0], slow[0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.exp(fast[0]).sum(axis=0), 1.0, rtol=1e-12)
    with pytest.raises(ValueError, match="observation-major"):
        psis._rows_of(np.empty((1200, 70)))


def test_layouts_threads_and_column_subsets_give_identical_results():
    rng = np.random.default_rng(5)
    lr = rng.standard_t(4, size=(1000, 130))  # >= 64 columns: the parallel kernel
    lw, k = psislw(lr)
    lw_f, k_f = psislw(np.asfortranarray(lr))
    lw_s, k_s = psislw(lr[:, 10:20])  # serial kernel
    lw_v, k_v = psislw(lr[::1, ::2])  # strided view
    np.testing.assert_array_equal(k_f, k)
    np.testing.assert_array_equal(lw_f, lw)
    np.testing.assert_array_equal(k_s, k[10:20])
    np.testing.assert_array_equal(lw_s, lw[:, 10:20])
    np.testing.assert_array_equal(k_v, k[::2])


def test_numpy_geyer_ess_equals_numba():
    rng = np.random.default_rng(6)
    for n_chains, n_draws, phi in ((1, 200, 0.0), (4, 250, 0.7), (2, 103, -0.4), (4, 50, 0.97)):
        eps = rng.normal(size=(n_chains, n_draws, 9))
        x = np.empty_like(eps)
        x[:, 0] = eps[:, 0]
        for t in range(1, n_draws):
            x[:, t] = phi * x[:, t - 1] + eps[:, t]
        x = np.exp(0.3 * x)
        x[1 % n_chains, :, 3] += 0.5  # chain means differ
        acov = np.ascontiguousarray(_autocov(x))
        cmean = np.ascontiguousarray(x.mean(axis=1))
        ref = np.empty(9)
        _geyer_ess_serial(acov, cmean, ref)
        np.testing.assert_allclose(_geyer_ess_numpy(acov, cmean), ref, rtol=1e-13)


def test_import_loads_nothing_heavy():
    code = ("import sys, loo_adapt; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('arviz', 'numba', 'matplotlib', 'xarray', 'pandas', 'scipy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_many_small_calls_switch_to_the_compiled_kernel(monkeypatch):
    """The numpy twin is a cold-start path only: once its runs in one process add up to more
    than NUMPY_MAX_CELLS, the numba kernel is compiled and used (adaptive IS makes many
    calls, each below the limit)."""
    from loo_adapt.core import _compiled

    monkeypatch.setattr(_compiled, "compiled", lambda dispatcher: False)
    monkeypatch.setattr(_compiled, "_numpy_cells", {})
    cells = _compiled.NUMPY_MAX_CELLS // 4
    engines = [psis._engine(4000, cells // 4000) for _ in range(6)]
    assert engines == ["numpy"] * 4 + ["numba"] * 2
    assert psis._engine(4000, _compiled.NUMPY_MAX_CELLS // 4000 + 1) == "numba"


def test_checked_loo_counts_a_numpy_run_once(monkeypatch):
    """On the cold-start path `loo_pointwise_checked` asks which engine runs, then makes the
    separate calls, which ask again: the numpy twin's work is counted once against the
    budget that decides when compiling pays."""
    from loo_adapt.core import _compiled
    from loo_adapt.core.psis_loo import loo_pointwise_checked

    monkeypatch.setattr(_compiled, "compiled", lambda dispatcher: False)
    monkeypatch.setattr(_compiled, "_numpy_cells", {})
    x = np.random.default_rng(4).normal(-1.0, 0.2, size=(4, 100, 70))
    loo_pointwise_checked(x, 1.01)
    assert _compiled._numpy_cells[psis._psis_parallel.__qualname__] == x.size


@pytest.mark.parametrize("engine", ["numba", "numpy"])
def test_strided_chain_view_is_read_in_place(engine, monkeypatch):
    """A (chains, draws, n) view of a fit's (draws, chains, columns) array, as cmdstanpy
    holds it, gives exactly the numbers of its contiguous copy, weights stacked chain-major,
    and the numba kernel allocates no copy of it (traced numpy memory)."""
    import dataclasses
    import tracemalloc

    monkeypatch.setattr(psis, "_engine", lambda *_: engine)
    rng = np.random.default_rng(11)
    chains, draws, n = 3, 400, 150
    fit = rng.normal(size=(draws, chains, n + 9))
    fit[:, :, 4:4 + n] = -0.5 * (rng.standard_t(4, (draws, chains, n))) ** 2 - 1.0
    view = fit.transpose(1, 0, 2)[:, :, 4:4 + n]
    assert not view.flags.c_contiguous and np.shares_memory(view, fit)
    r = rng.uniform(0.4, 1.2, n)
    got = loo_pointwise(view, r_eff=r)
    want = loo_pointwise(np.ascontiguousarray(view), r_eff=r)
    for f in dataclasses.fields(want):
        a, b = getattr(got, f.name), getattr(want, f.name)
        if isinstance(b, np.ndarray):
            np.testing.assert_array_equal(a, b, err_msg=f.name)
    # chain-major weights: PSIS of column 7 alone from the draws in that order
    lw7, _ = psislw(-np.ascontiguousarray(view[:, :, 7]).reshape(-1), r_eff=r[7])
    np.testing.assert_allclose(got.log_weights[:, 7], lw7, rtol=0, atol=1e-12)
    if engine == "numba":  # 18 MB of input: a copy would show; the scratch is ~1 MB
        wide = np.repeat(fit, 15, axis=2)
        big = wide.transpose(1, 0, 2)[:, :, 2:]
        loo_pointwise(big[:, :, :70], r_eff=1.0, weights=False)  # compiled before tracing
        tracemalloc.start()
        loo_pointwise(big, r_eff=1.0, weights=False)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 0.2 * big.size * 8, (peak, big.size * 8)


@pytest.mark.parametrize("shape", [(4, 300, 90), (3, 301, 90)])
def test_checked_loo_in_one_pass_equals_the_separate_calls(engine, shape):
    """`loo_pointwise_checked` (r_eff, tail lengths and the R-hat check computed by the PSIS
    kernel from the buffer it smooths) gives exactly the numbers of
    ``relative_eff_and_disagreement`` followed by ``loo_pointwise``: chains that drift apart,
    a stuck chain, random walks whose Geyer sequence needs the FFT, a constant column, even
    and odd draws, strided input; flagged columns and their R-hat are arviz's."""
    import dataclasses

    import arviz as az

    from loo_adapt.core.convergence import relative_eff_and_disagreement
    from loo_adapt.core.psis_loo import loo_pointwise_checked

    rng = np.random.default_rng(23)
    c, d, m = shape
    x = -0.5 * rng.standard_t(5, size=(d, c, m + 3)).transpose(1, 0, 2)[:, :, 2:m + 2] ** 2
    x[0, :, :10] += np.linspace(0.5, 1.0, 10)  # a first chain apart from the others
    x[1, :, 20] = x[1, 0, 20]  # a stuck chain
    x[:, :, 30:34] = np.cumsum(x[:, :, 30:34], axis=1) * 0.05 - 1.0  # random walks: long lags
    x[:, :, 40] = -1.5  # constant
    assert not x.flags.c_contiguous
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for weights in (True, False):
            got, bad, rhat = loo_pointwise_checked(x, 1.01, weights=weights)
            r, bad2, rhat2 = relative_eff_and_disagreement(x, 1.01)
            want = loo_pointwise(x, r_eff=r, weights=weights)
            for f in dataclasses.fields(want):
                a, b = getattr(got, f.name), getattr(want, f.name)
                if isinstance(b, np.ndarray):
                    np.testing.assert_array_equal(a, b, err_msg=f.name)
            np.testing.assert_array_equal(bad, bad2)
            np.testing.assert_array_equal(rhat, rhat2)
    ref = np.array([az.rhat(np.ascontiguousarray(x[:, :, j]), method="rank") for j in range(m)])
    stuck = np.arange(m) == 20
    with np.errstate(invalid="ignore"):
        assert bad.tolist() == ((ref > 1.01) | stuck).tolist()
    assert bad[:10].all() and bad[30:34].all() and 14 <= bad.sum() < 30
    np.testing.assert_allclose(rhat[bad & ~stuck], ref[bad & ~stuck], rtol=1e-12)


def test_checked_loo_refuses_non_finite_values_as_loo_pointwise():
    from loo_adapt.core.psis_loo import loo_pointwise_checked

    x = np.random.default_rng(3).normal(-1.0, 0.2, size=(2, 100, 70))
    x[1, 5, 66] = np.nan
    with pytest.raises(ValueError) as want:
        loo_pointwise(x)
    with pytest.raises(ValueError) as got:
        loo_pointwise_checked(x, 1.01)
    assert str(got.value) == str(want.value) and "66" in str(got.value)
    with pytest.raises(ValueError, match="at least 2 chains"):
        loo_pointwise_checked(x[:1], 1.01)
