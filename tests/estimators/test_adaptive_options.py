"""Options of the adaptive driver that the main adaptive tests do not cover."""

import json
from pathlib import Path

import numpy as np
import pytest

from loo_adapt.estimators.adaptive import adapt_loo
from loo_adapt.estimators.psis import psis_of_draws
from loo_adapt.io.readers import read_csv
from loo_adapt.models import model_for

DATA = Path(__file__).resolve().parents[1] / "data" / "cmdstan"


@pytest.fixture(scope="module")
def logistic_fixture():
    data = json.loads((DATA / "logistic_normal.data.json").read_text())
    draws = read_csv(DATA / "logistic_normal" / "sample")
    return draws, model_for("logistic_normal", data), psis_of_draws(draws, reff=1.0)


def test_first_order_jacobian_is_exact_for_logistic_regression(logistic_fixture):
    # For logistic regression J = I + h grad_mu (grad phi)^T is rank-one, so
    # det J = 1 + h div Q exactly: Eq. 27 has no O(h^2) term and both options agree.
    draws, model, base = logistic_fixture
    kw = dict(base=base, transforms=("kl", "var", "ll"), selection="min_khat", seed=0)
    exact = adapt_loo(draws, model, jacobian="exact", **kw)
    first = adapt_loo(draws, model, jacobian="first_order", **kw)
    a = np.array([c["elpd_loo"] for c in exact.candidates])
    b = np.array([c["elpd_loo"] for c in first.candidates])
    assert len(a) == len(b) > 100
    np.testing.assert_allclose(b, a, rtol=0, atol=1e-9)


def test_bad_jacobian_option(logistic_fixture):
    draws, model, base = logistic_fixture
    with pytest.raises(ValueError, match="jacobian"):
        adapt_loo(draws, model, base=base, jacobian="approx")


def test_split_selection_reports_holdout_khat_and_keeps_psis_when_unproven(logistic_fixture):
    draws, model, base = logistic_fixture
    res = adapt_loo(draws, model, base=base, selection="split", seed=3)
    high = base.pareto_k > base.good_k
    kept = high & (res.method == "psis")
    # observations left to PSIS keep PSIS's numbers exactly and stay flagged
    np.testing.assert_array_equal(res.elpd_i[kept], base.elpd_i[kept])
    assert np.all(res.unreliable[kept])
    # adapted ones are reliable by a k-hat computed on draws that did not choose them
    adapted = res.method != "psis"
    assert adapted.any()
    assert np.all(res.pareto_k_after[adapted] <= res.good_k)
    # untouched low-k observations are plain PSIS
    np.testing.assert_array_equal(res.elpd_i[~high], base.elpd_i[~high])
