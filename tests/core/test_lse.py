"""`loo_adapt.core.lse.logsumexp` against scipy's, on shapes, axes and the edge values the
estimators meet (huge magnitudes, all -inf slices, +inf, NaN)."""

import numpy as np
import pytest
from scipy.special import logsumexp as scipy_lse

from loo_adapt.core.lse import logsumexp


@pytest.mark.parametrize("shape,axis", [((5,), None), ((4, 7), 0), ((4, 7), 1),
                                        ((3, 4, 5), -1), ((3, 4, 5), (0, 1)), ((3, 4), None)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_equals_scipy(shape, axis, keepdims):
    a = np.random.default_rng(0).normal(size=shape) * 300.0
    np.testing.assert_allclose(logsumexp(a, axis=axis, keepdims=keepdims),
                               scipy_lse(a, axis=axis, keepdims=keepdims), rtol=1e-13)


def test_edge_values_as_scipy():
    a = np.array([[-np.inf, -np.inf], [np.inf, 0.0], [np.nan, 1.0], [-np.inf, 2.0],
                  [-1e308, -1e308], [709.0, 709.0]])
    with np.errstate(all="ignore"):
        want = scipy_lse(a, axis=1)
    np.testing.assert_array_equal(logsumexp(a, axis=1), want)
    assert isinstance(logsumexp([0.0, 0.0]), float)
