"""One vocabulary (`loo_adapt.core._names`): per-row arrays end in _i, k-hat is pareto_k;
the names used before still read, with a FutureWarning naming the new one."""

import numpy as np
import pytest

from loo_adapt.core._names import OLD_NAMES
from loo_adapt.core.psis_loo import loo_pointwise
from loo_adapt.estimators.psis import initial_result


def _psis():
    ll = np.random.default_rng(0).normal(-1.0, 0.5, (400, 6))
    return loo_pointwise(ll, r_eff=1.0)


def test_per_row_totals_use_the_i_suffix_and_estimates_the_total_names():
    res = initial_result(_psis())
    est = res.estimates()
    assert est["elpd_loo"] == pytest.approx(res.elpd_i.sum(), abs=1e-12)
    assert est["p_loo"] == pytest.approx(np.sum(res.lpd_i - res.elpd_i), abs=1e-12)
    assert res.elpd_i.shape == res.pareto_k.shape == (6,)


@pytest.mark.parametrize("old", ["elpd_loo", "p_loo", "lpd", "mcse_elpd_loo", "khat",
                                 "khat_threshold", "khat_pq"])
def test_old_names_warn_and_return_the_new_field(old):
    for obj in (_psis(), initial_result(_psis())):
        with pytest.warns(FutureWarning, match=f"use .{OLD_NAMES[old]}"):
            value = getattr(obj, old)
        np.testing.assert_array_equal(value, getattr(obj, OLD_NAMES[old]))
