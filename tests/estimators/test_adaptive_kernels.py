"""The adaptive driver's numba kernels against straightforward numpy references."""

from __future__ import annotations

import numpy as np
import pytest

from loo_adapt.estimators.adaptive import (
    _TAYLOR_MAX,
    _loglik_rowsum_and_column,
    _loglik_steps,
    _logsig_at,
)


def _reference(mu, dmu, h, sign, i):
    """sum_j log l_j and log l_i at mu + h dmu, with numpy's logaddexp (no expansion)."""
    ll = -np.logaddexp(0.0, -sign * (mu + h * dmu))
    return ll.sum(axis=1), ll[:, i]


@pytest.mark.parametrize("scale", [0.5, 8.0, 40.0])
def test_loglik_steps_matches_numpy(scale):
    rng = np.random.default_rng(3)
    n_draws, n_obs, i = 300, 37, 5
    mu = scale * rng.standard_normal((n_draws, n_obs))
    dmu = np.outer(rng.standard_normal(n_draws), rng.standard_normal(n_obs))
    dmu[7] = 0.0  # a draw that does not move
    sign = np.where(rng.random(n_obs) < 0.5, -1.0, 1.0)
    # steps on both sides of the expansion's cut and the default rho grid's range
    hs = np.array([3.0, 1.0, 0.2, _TAYLOR_MAX, 3e-3, 1e-3, 1e-5, 1e-8, -0.05])
    total, column = _loglik_steps(mu, dmu, hs, sign, i, *_logsig_at(mu, sign))
    assert total.shape == column.shape == (hs.size, n_draws)
    for k, h in enumerate(hs):
        ref_total, ref_col = _reference(mu, dmu, h, sign, i)
        # remainder of the expansion < 4e-16 per term; the rest is rounding of n_obs terms
        np.testing.assert_allclose(total[k], ref_total, rtol=0, atol=1e-12 * n_obs)
        np.testing.assert_allclose(column[k], ref_col, rtol=1e-13, atol=1e-15)


def test_loglik_steps_agrees_with_the_single_step_kernel():
    rng = np.random.default_rng(4)
    mu = rng.standard_normal((200, 11))
    dmu = rng.choice([-1.0, 1.0], (200, 11)) * (1.0 + rng.random((200, 11)))
    sign = np.where(rng.random(11) < 0.5, -1.0, 1.0)
    hs = np.array([0.7, 0.02])  # |h dmu| >= 0.02: no step small enough for the expansion
    total, column = _loglik_steps(mu, dmu, hs, sign, 2, *_logsig_at(mu, sign))
    for k, h in enumerate(hs):
        ref_total, ref_col = _loglik_rowsum_and_column(mu + h * dmu, sign, 2)
        np.testing.assert_array_equal(total[k], ref_total)
        np.testing.assert_array_equal(column[k], ref_col)
