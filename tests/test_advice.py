"""One next step (issue 20): k-hat below the threshold is not verification, and every message
recommends the same call (`loo_adapt.advice.next_step`)."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest

import loo_adapt
from loo_adapt.advice import PROGRAM_CALL, PROGRAM_FLAGS, next_step
from loo_adapt.evaluation.report import save_report
from loo_adapt.io.arrays import read_dict


def _easy(seed=0, n=30):
    """Every row easy for PSIS (all k-hat < 0.5)."""
    return np.random.default_rng(seed).normal(-1.0, 0.05, size=(4, 500, n))


def test_khat_alone_is_not_called_verified(tmp_path):
    res = loo_adapt.loo(_easy())
    pw = res.loo_adapt
    assert np.all(pw.pareto_k < 0.5) and pw.reliable.all()
    assert pw.khat_only.all() and not pw.checked_for_bias.any()
    assert set(pw.provenance) == {"PSIS, k-hat below the threshold; not checked for bias"}
    text = res.summary()
    assert "Every observation has a reliable estimate" not in text
    assert "30 observations rest on PSIS with k-hat below the threshold, not checked for bias" \
        in text
    assert "accepted on k-hat alone (not checked for bias): 30" in text
    assert PROGRAM_CALL in text
    save_report(res, tmp_path, figures=False)
    stored = json.loads((tmp_path / "results.json").read_text())
    assert stored["n_khat_only"] == 30 and stored["n_unreliable"] == 0
    assert stored["provenance"] == list(pw.provenance)


def test_closing_warning_and_summary_recommend_the_same_call():
    ll = _easy()
    ll[:, :, 3] = np.random.default_rng(1).standard_cauchy((4, 500)) * 8 - 40  # one hard row
    with pytest.warns(UserWarning, match="no verified estimate") as rec:
        res = loo_adapt.loo(ll)
    warned = next(str(w.message) for w in rec if "no verified estimate" in str(w.message))
    assert PROGRAM_CALL in warned
    assert PROGRAM_CALL in res.summary()
    # the rows a program's MixIS verified leave only the refit budget to raise
    step = next_step(had_program=True, n_unverified=2)
    assert "max_refits': 2" in step and PROGRAM_CALL not in step
    assert PROGRAM_FLAGS in next_step(had_program=False, n_unverified=1, cli=True)
    assert next_step(had_program=False, n_unverified=0) == ""


def test_every_row_verified_by_a_bias_check_says_so():
    """MixIS draws of the exact LOO posteriors (a normal mean with known variance): every row
    verified by MixIS's MCSE, and only then the summary says every estimate is reliable."""
    posterior, mix = _normal_mean()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = loo_adapt.loo(posterior, estimator="mixis", mixis_draws=mix)
    pw = res.loo_adapt
    assert pw.checked_for_bias.all()
    assert re.search(r"Every observation has a reliable estimate", res.summary())


def _normal_mean(seed=4, n=12):
    """Posterior and exact mixture draws of a normal mean with known variance."""
    rng = np.random.default_rng(seed)
    y = rng.normal(size=n)
    m_loo = np.array([np.delete(y, i).mean() for i in range(n)])
    post = y.mean() + rng.normal(size=(4, 2000)) / np.sqrt(n)
    lp = -np.logaddexp.reduce(-(-0.5 * (y - m_loo) ** 2 / (1 + 1 / (n - 1))))
    w = np.exp(0.5 * (y - m_loo) ** 2 / (1 + 1 / (n - 1)) + lp)
    comp = rng.choice(n, size=8000, p=w / w.sum())
    mix = rng.normal(m_loo[comp], np.sqrt(1 / (n - 1))).reshape(4, 2000)

    def ll(mu):
        return -0.5 * np.log(2 * np.pi) - 0.5 * (y - mu[..., None]) ** 2

    return read_dict({"log_lik": ll(post)}, method="mcmc"), read_dict({"log_lik": ll(mix)},
                                                                       method="mcmc")


def _failing_refit(i):
    """A refit whose held-out log-likelihood is NaN (module level: it pickles)."""
    return np.full((2, 50), np.nan)


@pytest.mark.parametrize("budget", [4, None])
def test_failed_refits_are_not_told_to_raise_max_refits(budget):
    """Refits that ran and failed (NaN here) were advised a larger max_refits, which changes
    nothing for them: only the rows the budget left out are counted in that advice, and the
    failed ones are named apart, in the closing warning, summary() and the CLI's line."""
    from loo_adapt.advice import next_step_for, refit_outcomes
    from loo_adapt.cli.output import next_step as cli_next_step

    posterior, mix = _normal_mean()
    with pytest.warns(UserWarning) as rec:  # no row passes MixIS's bar: all go to refits
        res = loo_adapt.loo(posterior, mixis_draws=mix, mixis_max_mcse=1e-9, progress=False,
                            refit_kwargs={"refit_fn": _failing_refit, "n_jobs": 1,
                                          "max_refits": budget})
    pw = res.loo_adapt
    outcome = refit_outcomes(pw)
    n_failed = int(np.sum(outcome == "failed"))
    n_budget = int(np.sum(outcome == "budget"))
    assert not pw.reliable.any()
    assert (n_failed, n_budget) == ((4, 8) if budget else (12, 0))
    assert all("refit failed: " in str(pw.reason[i]) and "NaN" in str(pw.reason[i])
               for i in np.flatnonzero(outcome == "failed"))
    warned = next(str(w.message) for w in rec if "no verified estimate" in str(w.message))
    step = next_step_for(pw)
    for text in (warned, step, res.summary().replace("Next step: The", "Next step: the")):
        assert f"the refits of {n_failed} rows failed" in text
        assert "which a larger max_refits does not mend" in text
        if budget:
            assert f"refit_kwargs={{'max_refits': {n_budget}}}" in text
        else:
            assert "refit_kwargs={'max_refits'" not in text
    line = cli_next_step(res, program=False, model=False, mixis_draws=True)
    assert f"the refits of {n_failed} rows failed" in line
    assert "a larger --max-refits does not mend" in line and "max_refits" not in line
    assert ("--max-refits 8" in line) == bool(budget)
    # the call alone and the rows left out only by the budget: unchanged
    assert next_step(had_program=True, n_unverified=3) == next_step(
        had_program=True, n_unverified=3, n_failed=0)
    assert next_step(had_program=True, n_unverified=0, n_failed=0) == ""
