"""The vectorisable exp and log1p of loo_adapt.core._vmath against numpy's libm."""

from __future__ import annotations

import numpy as np
from numba import njit

from loo_adapt.core._vmath import exp_clamped, log1p


@njit(cache=True)
def _exp_all(x, out):
    for i in range(x.shape[0]):
        out[i] = exp_clamped(x[i])


@njit(cache=True)
def _log1p_all(x, out):
    for i in range(x.shape[0]):
        out[i] = log1p(x[i])


def _ulp(ours, ref):
    return np.abs(ours - ref) / np.spacing(np.abs(ref))


def test_exp_clamped_within_2_ulp_and_zero_below_minus_708():
    rng = np.random.default_rng(0)
    x = np.concatenate([
        rng.uniform(-708.0, 709.0, 200_000),
        -rng.exponential(3.0, 200_000),
        rng.uniform(-1e-8, 1e-8, 10_000),
        [-708.0, 0.0, -0.0, 709.0, -1e-300, 0.5 * np.log(2.0), -0.5 * np.log(2.0)],
    ])
    out = np.empty_like(x)
    _exp_all(x, out)
    assert _ulp(out, np.exp(x)).max() <= 2.0
    below = np.array([-708.0001, -745.2, -1e6, -np.inf])
    out = np.empty_like(below)
    _exp_all(below, out)
    np.testing.assert_array_equal(out, 0.0)


def test_log1p_within_2_ulp_including_tiny_and_near_minus_one():
    rng = np.random.default_rng(1)
    t = np.concatenate([
        rng.uniform(-0.999, 3.0, 200_000),
        10.0 ** rng.uniform(-300, 299, 100_000),  # up to 1 + t = 1e299
        -(10.0 ** rng.uniform(-300, -1e-6, 100_000)),  # tiny negative up to near -1
        [0.0, -0.0, 1e-17, -1e-17, -0.5, 1.0, np.sqrt(0.5) - 1.0],
    ])
    out = np.empty_like(t)
    _log1p_all(t, out)
    ref = np.log1p(t)
    nz = ref != 0
    assert _ulp(out[nz], ref[nz]).max() <= 2.0
    np.testing.assert_array_equal(out[~nz], 0.0)
