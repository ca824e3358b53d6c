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
