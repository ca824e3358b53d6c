"""The vectorisable exp, expm1, log and log1p of loo_adapt.core._vmath against numpy's libm."""

from __future__ import annotations

import numpy as np
from numba import njit

from loo_adapt.core._vmath import exp_clamped, expm1, index_float, log, log1p


@njit
def _apply(f, x):
    """``f`` (a numba function of one value) on every element of ``x``."""
    out = np.empty(x.shape[0])
    for i in range(x.shape[0]):
        out[i] = f(x[i])
    return out


def _ulp(ours, ref):
    return np.abs(ours - ref) / np.spacing(np.abs(ref))


def _assert_within_2_ulp(f, ref_f, x):
    out, ref = _apply(f, x), ref_f(x)
    nz = ref != 0
    assert _ulp(out[nz], ref[nz]).max() <= 2.0
    np.testing.assert_array_equal(out[~nz], ref[~nz])


def test_exp_clamped_within_2_ulp_and_zero_below_minus_708():
    rng = np.random.default_rng(0)
    x = np.concatenate([
        rng.uniform(-708.0, 709.0, 200_000),
        -rng.exponential(3.0, 200_000),
        rng.uniform(-1e-8, 1e-8, 10_000),
        [-708.0, 0.0, -0.0, 709.0, -1e-300, 0.5 * np.log(2.0), -0.5 * np.log(2.0)],
    ])
    out = _apply(exp_clamped, x)
    assert _ulp(out, np.exp(x)).max() <= 2.0
    below = np.array([-708.0001, -745.2, -1e6, -np.inf])
    out = _apply(exp_clamped, below)
    np.testing.assert_array_equal(out, 0.0)


def test_log1p_within_2_ulp_including_tiny_and_near_minus_one():
    rng = np.random.default_rng(1)
    t = np.concatenate([
        rng.uniform(-0.999, 3.0, 200_000),
        10.0 ** rng.uniform(-300, 299, 100_000),  # up to 1 + t = 1e299
        -(10.0 ** rng.uniform(-300, -1e-6, 100_000)),  # tiny negative up to near -1
        [0.0, -0.0, 1e-17, -1e-17, -0.5, 1.0, np.sqrt(0.5) - 1.0],
    ])
    _assert_within_2_ulp(log1p, np.log1p, t)


def test_log_within_2_ulp_over_the_normal_range():
    rng = np.random.default_rng(2)
    x = np.concatenate([
        10.0 ** rng.uniform(-307.6, 299.9, 200_000),
        rng.uniform(0.5, 2.0, 200_000),  # around 1, where log is small
        [1.0, np.nextafter(1.0, 2.0), np.nextafter(1.0, 0.0), 2.2250738585072014e-308, 0.5],
    ])
    _assert_within_2_ulp(log, np.log, x)


def test_expm1_within_2_ulp_including_tiny_and_minus_one_below_minus_708():
    rng = np.random.default_rng(3)
    y = np.concatenate([
        rng.uniform(-708.0, 709.0, 200_000),
        rng.uniform(-1.0, 1.0, 200_000),
        np.sign(rng.normal(size=100_000)) * 10.0 ** rng.uniform(-300, -1, 100_000),
        [0.3465, -0.3466, 0.3467, -0.3467, 1e-300, -1e-300],
    ])
    _assert_within_2_ulp(expm1, np.expm1, y)
    below = np.array([-708.0001, -745.2, -1e6, -np.inf])
    out = _apply(expm1, below)
    np.testing.assert_array_equal(out, -1.0)


def test_index_float_is_exact():
    j = np.concatenate([np.arange(5000), [2**31 - 1, 2**40 + 3, 2**52 - 1]]).astype(np.int64)
    out = _apply(index_float, j)
    np.testing.assert_array_equal(out, j.astype(np.float64))


def test_fma_rounds_once_as_exact_rational_arithmetic_says():
    """``fma(a, b, c)`` is a b + c rounded once: for random operands, and for the products
    whose error it recovers (a b - fl(a b), which a separate multiply and add round to 0)."""
    from fractions import Fraction

    from loo_adapt.core._vmath import fma

    @njit
    def apply3(a, b, c):
        out = np.empty(a.shape[0])
        for i in range(a.shape[0]):
            out[i] = fma(a[i], b[i], c[i])
        return out

    rng = np.random.default_rng(4)
    a = rng.normal(size=500) * 10.0 ** rng.integers(-5, 5, 500)
    b = rng.normal(size=500)
    c = np.concatenate([rng.normal(size=250), -(a[250:] * b[250:])])  # error of a b
    out = apply3(a, b, c)
    want = np.array([float(Fraction(x) * Fraction(y) + Fraction(z)) for x, y, z in zip(a, b, c)])
    np.testing.assert_array_equal(out, want)
    assert np.count_nonzero(out[250:]) > 200  # the product errors are not lost


def test_gpd_small_grid_sums_match_exact_summation_of_libm_log1p():
    """`core.gpd._small_grid_logs` (double-double products) gives sum_s log1p(a x_s) within
    a few ulp of the sum, for sums near zero (where a plain product loses up to 1e-16 per
    factor in absolute terms) and far from it, tails short and long, against math.fsum of
    math.log1p (each term within 1 ulp, summed exactly)."""
    import math

    from loo_adapt.core.gpd import _small_grid_logs

    rng = np.random.default_rng(9)
    for n in (5, 60, 447, 3000):
        x = np.sort(rng.exponential(size=n))
        a = np.concatenate([rng.uniform(-0.9, 0.9, 6) / x[-1], [1e-9 / x[-1], -3e-7 / x[-1]],
                            rng.uniform(-0.05, 0.05, 3) / x[-1]])
        acc = np.full(a.size, np.nan)
        _small_grid_logs(a, np.arange(a.size), x, acc)
        want = np.array([math.fsum(math.log1p(aj * xs) for xs in x) for aj in a])
        np.testing.assert_allclose(acc, want, rtol=4 * n ** 0.5 * 2.0 ** -53, atol=0)
