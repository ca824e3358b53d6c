"""core.checks: the log-likelihood array check shared by MixIS and refits."""

from __future__ import annotations

import numpy as np
import pytest

from loo_adapt.core.checks import as_log_lik_array
from loo_adapt.core.mixis import mixis_loo
from loo_adapt.result import observation_label
from loo_adapt.stan.refit import heldout_elpd


def test_float64_view_or_copy():
    a = np.array([[-1.0, -np.inf]])
    assert as_log_lik_array(a) is a  # -inf is a valid log-likelihood
    b = as_log_lik_array(a, copy=True)
    assert b is not a and np.array_equal(b, a)
    ints = as_log_lik_array(np.array([[-1, -2]], dtype=np.int32))
    assert ints.dtype == np.float64 and ints.tolist() == [[-1.0, -2.0]]


@pytest.mark.parametrize("bad, error, text", [
    (np.array([["a", "b"]]), TypeError, "numeric"),
    (np.array([[-1.0, np.nan]]), ValueError, "contains NaN"),
    (np.array([[-1.0, np.inf]]), ValueError, r"contains \+inf"),
])
def test_refused_by_both_users_with_the_name_of_the_array(bad, error, text):
    with pytest.raises(error, match=f"^log_lik .*{text}|^log_lik {text}"):
        as_log_lik_array(bad)
    draws = np.repeat(bad, 4, axis=0)  # (4, 2): enough draws for either user
    with pytest.raises(error, match=text):
        mixis_loo(draws)
    heldout = "held-out log-likelihood"
    with pytest.raises(error, match=f"{heldout} .*{text}|{heldout} {text}"):
        heldout_elpd(draws[:, 1])


def test_observation_label():
    assert observation_label(0) == "0 (log_lik[1])"
    assert observation_label(np.arange(12)).endswith("9 (log_lik[10]), ... (2 more)")
    assert observation_label([4, 7], var_name="ll", limit=None) == "4 (ll[5]), 7 (ll[8])"
