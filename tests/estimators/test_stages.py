"""The one estimator interface: immutable estimates, one writer, every `loo()` path.

Oracles: hand-made estimates (what merge must write is known exactly), the identity
P(observed y_i | y_-i) = exp(elpd_loo_i) for a Bernoulli outcome (two columns computed by
different code must agree), closed-form normal means, and the CmdStan fixture truth.
"""

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import loo_adapt
from loo_adapt.estimators.base import Context, Stage, run_stages
from loo_adapt.estimators.estimate import Estimate
from loo_adapt.estimators.psis import PSIS, initial_result, psis_of_draws
from loo_adapt.io.readers import read_csv, read_dict

DATA = Path(__file__).resolve().parents[1] / "data" / "cmdstan"


def _fixture(name="logistic_normal"):
    data = json.loads((DATA / f"{name}.data.json").read_text())
    return data, read_csv(sorted((DATA / name / "sample").glob("*.csv")))


def _base_result(n=6, S=400, seed=0):
    rng = np.random.default_rng(seed)
    ll = -np.abs(rng.normal(size=(S, n)))
    draws = read_dict({"log_lik": ll[None]}, method="mcmc")
    base = psis_of_draws(draws, reff=1.0)
    return draws, base, initial_result(base, y=np.ones(n), loo_prob=np.full(n, 0.5))


def test_estimate_is_immutable_and_fills_missing_columns():
    est = Estimate.make("refit", [1, 3], [-0.5, -0.7], [0.01, 0.02], [True, False])
    with pytest.raises(ValueError):
        est.elpd_i[0] = 0.0
    with pytest.raises(AttributeError):
        est.estimator = "psis"
    assert np.all(np.isnan(est.pareto_k)) and np.all(np.isnan(est.loo_prob))
    assert list(est.verified_by) == ["refit", ""] and est.reason[0] == ""
    assert est.reason[1] != ""


def test_merge_writes_every_column_and_nan_for_what_the_stage_does_not_produce():
    _, base, res = _base_result()
    est = Estimate.make("refit", [1, 3], [-0.5, -0.7], [0.01, 0.02], [True, True],
                        diagnostic=[900.0, 800.0])
    new = res.merge(est)
    assert new is not res
    # the old result is untouched
    np.testing.assert_array_equal(res.elpd_i, base.elpd_i)
    np.testing.assert_array_equal(new.elpd_i[[1, 3]], [-0.5, -0.7])
    np.testing.assert_array_equal(new.p_loo_i[[1, 3]], base.lpd_i[[1, 3]] - [-0.5, -0.7])
    # refits produce no k-hat and (here) no probability: NaN, not PSIS's stale values
    assert np.all(np.isnan(new.pareto_k_after[[1, 3]])) and np.all(np.isnan(new.loo_prob[[1, 3]]))
    assert np.all(new.loo_prob[[0, 2, 4, 5]] == 0.5)
    assert list(new.method[[1, 3]]) == ["refit", "refit"]
    assert list(new.verified_by[[1, 3]]) == ["refit", "refit"]
    np.testing.assert_array_equal(new.pareto_k, base.pareto_k)  # "before" stays
    assert [h["estimator"] for h in new.row_history(1)] == ["refit"]


def test_merge_records_which_rows_got_draws_of_their_own():
    """A stage that gives rows new draws records is told apart in the history from one that
    moves their estimates but passes their records on (`Estimate.of_result`)."""
    from loo_adapt.estimators.estimate import RowDraws

    _, _, res = _base_result()
    rec = RowDraws(source="mixture", log_weights=np.zeros(1), p1=None, draws=None)
    first = res.merge(Estimate.make("mixis", [0, 1], [-0.1, -0.2], 0.01, True,
                                    row_draws=[rec, rec]))
    assert first.history[-1]["new_record"].tolist() == [True, True]
    moved = first.merge(Estimate.of_result("mixis", first, [0, 1], elpd_i=[-0.15, -0.25]))
    assert moved.history[-1]["new_record"].tolist() == [False, False]
    assert moved.row_draws[0] is rec and moved.elpd_i[0] == -0.15
    other = RowDraws(source="mixture", log_weights=np.zeros(1), p1=None, draws=None)
    again = moved.merge(Estimate.make("mixis_focused", [1, 2], -0.3, 0.01, True,
                                      row_draws=[other, None]))
    # row 2 had no record and gets none: nothing new
    assert again.history[-1]["new_record"].tolist() == [True, False]


def test_merge_accept_mask_keeps_rejected_rows_and_records_why():
    _, base, res = _base_result()
    est = Estimate.make("mixis", [0, 2], [-0.1, -0.2], [0.5, 0.01], [False, True],
                        reason=["MixIS MCSE: 0.5 above 0.1", ""])
    new = res.merge(est, accept=est.reliable)
    assert new.elpd_i[0] == res.elpd_i[0] and new.elpd_i[2] == -0.2
    assert "MixIS MCSE" in new.reason[0]
    assert new.row_history(0)[0]["accepted"] is False


def test_a_block_note_holds_while_a_row_keeps_its_fits_estimate():
    """Notes about one fit's estimates (``block_notes``) are printed, stored and warned
    about only while the result holds a row from that fit: a later stage that
    re-estimates some of its rows keeps them; one that re-estimates all drops them.  Rows
    re-judged with their estimate unchanged stay the fit's; `take` and `concat` carry each
    note with its block."""
    _, _, res = _base_result()

    def block(held):
        return 0.1 * float(np.sum(held))

    fit = Estimate.make("mixis", [0, 1, 2], [-0.1, -0.2, -0.3], [0.01] * 3, [True] * 3,
                        sum_mcse=(([0, 1, 2], block),), notes=("said once",),
                        block_notes=((0, "about the fit", False), (0, "and loud", True)))
    with pytest.raises(ValueError, match="block 1 of 1"):
        Estimate.make("mixis", [0], [-0.1], [0.01], [True], sum_mcse=(([0], block),),
                      block_notes=((1, "x", False),))
    one = res.merge(fit)
    assert one.live_block_notes() == [("about the fit", False), ("and loud", True)]
    assert one.all_notes() == ["said once", "about the fit", "and loud"]
    # re-judged, unchanged: still the fit's estimates
    rejudged = one.merge(Estimate.of_result("spot", one, [0, 1, 2], reliable=False))
    assert len(rejudged.live_block_notes()) == 2
    some = one.merge(Estimate.make("refit", [0, 1], [-0.15, -0.25], [0.02] * 2, [True] * 2))
    assert [t for t, _ in some.live_block_notes()] == ["about the fit", "and loud"]
    every = some.merge(Estimate.make("refit", [2], [-0.35], [0.02], [True]))
    assert every.live_block_notes() == [] and every.all_notes() == ["said once"]
    assert every.without_mcse_blocks().notes == ["said once"]
    assert some.without_mcse_blocks().notes == ["said once", "about the fit", "and loud"]
    assert "Note: and loud." in _summary_of(some) and "and loud" not in _summary_of(every)
    # take keeps a note with its block's rows; concat renumbers the blocks
    part = fit.take(np.array([False, True, False]))
    assert part.block_notes == ((0, "about the fit", False), (0, "and loud", True))
    other = Estimate.make("mixis_focused", [4], [-0.4], [0.01], [True],
                          sum_mcse=(([0], block),), block_notes=((0, "focused", False),))
    both = Estimate.concat("x", [fit, other])
    assert [(k, t) for k, t, _ in both.block_notes] == [
        (0, "about the fit"), (0, "and loud"), (1, "focused")]
    after = res.merge(both).merge(Estimate.make("refit", [4], [-0.5], [0.02], [True]))
    assert [t for t, _ in after.live_block_notes()] == ["about the fit", "and loud"]


def _summary_of(result):
    from loo_adapt.evaluation.summary import format_summary

    return format_summary(result)


def test_merge_rejects_rows_out_of_range():
    _, _, res = _base_result()
    with pytest.raises(IndexError):
        res.merge(Estimate.make("refit", [6], [-1.0], [0.0], [True]))


def test_stage_options_are_checked():
    with pytest.raises(ValueError, match="rows"):
        Stage(PSIS(), rows="some")
    with pytest.raises(ValueError, match="accept"):
        Stage(PSIS(), accept="maybe")


def test_run_stages_asks_each_stage_only_for_the_rows_it_should():
    draws, base, res = _base_result()
    asked = []

    class Recorder:
        name = "rec"

        def __call__(self, ctx, rows):
            asked.append(np.asarray(rows).tolist())
            return Estimate.make("rec", rows, -1.0, 0.0, True)

    ctx = Context(draws=draws, r_eff=1.0)
    out = run_stages(ctx, res, [Stage(Recorder()), Stage(Recorder())])
    assert asked == [np.flatnonzero(~res.reliable).tolist()]  # second stage: nothing left
    assert out.reliable.all()


def _prob_of_observed(res):
    y = np.asarray(res.y)
    return np.where(y == 1, res.loo_prob, 1.0 - res.loo_prob)


def test_every_row_probability_agrees_with_its_own_elpd_after_mm_fallback():
    """The "mm" fallback used to keep PSIS's probability on the rows it replaced."""
    pytest.importorskip("stanli")
    data, draws = _fixture()
    program = loo_adapt.StanProgram("logistic_normal", {**data, "mixis": 0})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = loo_adapt.loo(draws, reff=1.0, y=data["y"], program=program,
                            fallback=("mm",)).loo_adapt
    mm = res.method == "mm"
    assert mm.sum() >= 2
    # P(observed) = sum_s w_s l_i(theta_s) = exp(elpd_i) with the same weights; the CSV's
    # log_lik has 6 significant digits, the recomputed one is exact
    np.testing.assert_allclose(np.log(_prob_of_observed(res))[mm], res.elpd_i[mm], atol=1e-4)
    assert np.all(res.verified_by[mm] == "certified")
    # each mm row keeps the final weights on its moment-matched draws (LOO-PIT, E_loo): the
    # same identity holds on the record
    y = np.asarray(res.y)
    for i in np.flatnonzero(mm):
        rec = res.row_draws[i]
        p_obs = rec.p1 if y[i] == 1 else 1.0 - rec.p1
        assert rec.source == "transformed"
        assert np.log(np.sum(np.exp(rec.log_weights) * p_obs)) == pytest.approx(
            res.elpd_i[i], abs=1e-4)


def test_readme_fallback_mixis_then_refit_through_loo():
    """fallback=("mixis", "refit"): MixIS runs on every row not verified by a check that can
    see bias (PSIS rows accepted on k-hat alone included), and the rows it does not verify are
    refitted (a user refit_fn returning the exact held-out log-likelihood)."""
    rng = np.random.default_rng(3)
    n, S = 8, 4000
    # a likelihood that barely depends on the parameters: posterior and mixture coincide
    ll = -1.0 - 0.01 * np.abs(rng.normal(size=(4, S // 4, n)))
    posterior = read_dict({"log_lik": ll}, method="mcmc")
    mix = read_dict({"log_lik": ll[:, ::-1]}, method="mcmc")
    exact = -1.25

    def refit_fn(i):
        return np.full((2, 100), exact)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = loo_adapt.loo(posterior, reff=1.0, fallback=("mixis", "refit"), mixis_draws=mix,
                            khat_threshold=0.01, mixis_max_mcse=1e-12,
                            refit_kwargs={"refit_fn": refit_fn, "n_jobs": 1,
                                          "progress": False}).loo_adapt
    refit = res.method == "refit"
    assert (res.pareto_k <= 0.01).any()  # rows PSIS accepts on k-hat alone went on too
    # every row went to MixIS, and MixIS (MCSE > 1e-12) handed each on to a refit
    assert refit.all() and res.reliable.all() and res.checked_for_bias.all()
    i = int(np.flatnonzero(refit)[0])
    assert [h["estimator"] for h in res.row_history(i)] == ["mixis", "refit"]
    np.testing.assert_allclose(res.elpd_i[refit], exact, atol=1e-12)
    assert set(res.verified_by[refit]) == {"refit"}


@pytest.mark.parametrize("selection", ["split", "split_keep", "min_khat", "min_khat_fallback"])
def test_every_selection_rule_through_loo(selection):
    data, draws = _fixture()
    model = loo_adapt.models.model_for("logistic_normal", data)
    truth = np.loadtxt(DATA / "truth" / "logistic_normal.csv", delimiter=",", skiprows=1)[:, 1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = loo_adapt.loo(draws, reff=1.0, model=model, selection=selection, seed=1,
                            estimator="adaptive", certify=False).loo_adapt
        psis = loo_adapt.loo(draws, reff=1.0, estimator="psis").loo_adapt
    high = psis.pareto_k > psis.good_k
    assert (res.method[high] != "psis").any()
    # LL descent moves high-k rows towards truth on this model under every rule
    err = np.sqrt(np.mean((res.elpd_i - truth)[high] ** 2))
    err_psis = np.sqrt(np.mean((psis.elpd_i - truth)[high] ** 2))
    assert err < err_psis


def test_certified_rows_never_above_lpd_and_default_never_worse_than_psis():
    data, draws = _fixture()
    model = loo_adapt.models.model_for("logistic_normal", data)
    truth = np.loadtxt(DATA / "truth" / "logistic_normal.csv", delimiter=",", skiprows=1)[:, 1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        psis = loo_adapt.loo(draws, reff=1.0, estimator="psis").loo_adapt
        for seed in (1, 2, 3):
            res = loo_adapt.loo(draws, reff=1.0, model=model, seed=seed).loo_adapt
            cert = res.verified_by == "certified"
            assert cert.any()
            assert np.all(res.elpd_i[cert] <= res.lpd_i[cert] + 2 * res.mcse_elpd_i[cert])
            assert np.sqrt(np.mean((res.elpd_i - truth) ** 2)) <= np.sqrt(
                np.mean((psis.elpd_i - truth) ** 2))
            assert abs(np.sum(res.elpd_i - truth)) <= abs(np.sum(psis.elpd_i - truth))


def test_adaptation_on_advi_draws_through_loo():
    data = json.loads((DATA / "logistic_normal.data.json").read_text())
    draws = read_csv(DATA / "logistic_normal" / "variational")
    model = loo_adapt.models.model_for("logistic_normal", data)
    truth = np.loadtxt(DATA / "truth" / "logistic_normal.csv", delimiter=",", skiprows=1)[:, 1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = loo_adapt.loo(draws, model=model, seed=1).loo_adapt
    assert res.n_samples == 1000
    # p/q-corrected and adapted: within 0.3 nats of truth in total (PSIS of these draws is
    # within 1 nat; the truth's own MC error is 0.05)
    assert abs(res.elpd_i.sum() - truth.sum()) < 1.0


@pytest.mark.parametrize("scale,factor", [("log", 1.0), ("negative_log", -1.0),
                                          ("deviance", -2.0)])
def test_scale_and_pointwise_false(scale, factor):
    rng = np.random.default_rng(0)
    ll = rng.normal(-1.0, 0.05, size=(4, 250, 10))
    res = loo_adapt.loo(ll, scale=scale, pointwise=False)
    total = res.loo_adapt.estimates()["elpd_loo"]
    from loo_adapt.evaluation.arviz import arviz_major

    value = float(res["elpd_loo"] if arviz_major() < 1 else res.elpd)
    assert value == pytest.approx(factor * total if arviz_major() < 1 else total, rel=1e-12)


def test_non_default_var_name():
    rng = np.random.default_rng(0)
    ll = rng.normal(-1.0, 0.05, size=(4, 250, 10))
    draws = read_dict({"obs_ll": ll, "log_lik": ll * 2}, method="mcmc")
    a = loo_adapt.loo(draws, var_name="obs_ll").loo_adapt
    b = loo_adapt.loo(ll).loo_adapt
    np.testing.assert_array_equal(a.elpd_i, b.elpd_i)


def test_estimator_mixis_without_program_or_draws_says_both():
    rng = np.random.default_rng(0)
    ll = rng.normal(-1.0, 0.05, size=(4, 250, 10))
    with pytest.raises(ValueError, match="mixis_draws=.*program="):
        loo_adapt.loo(ll, estimator="mixis")


def test_posterior_draws_passed_as_mixture_draws_are_refused():
    """The user's own mixis_draws that fail the check stop the call, with advice that works
    (it recommended StanProgram.fit(mixis=True), which a program without the flag refuses)."""
    data, draws = _fixture()
    with pytest.raises(ValueError, match="mixture posterior") as err:
        loo_adapt.loo(draws, reff=1.0, estimator="mixis", mixis_draws=draws, y=data["y"])
    msg = str(err.value)
    assert "Monte Carlo SEs" in msg and "StanProgram.fit(mixis=True)" not in msg
    assert "program.with_mixis().fit(mixis=True)" in msg
    assert "leave out mixis_draws= and pass program=" in msg


# ---- a normal mean (known variance), one outlier: PSIS fails on it alone; the posterior
# draws, passed off as mixture draws, fail `mixture_draws_check` (-22 Monte Carlo SEs)
Y_OUT = np.array([-0.4, 0.3, 1.1, -1.2, 0.5, 0.0, 0.8, -0.6, 0.2, -0.1, 9.0])


def _outlier_posterior(seed=0):
    from scipy import stats

    prec = 1.0 / 9.0 + Y_OUT.size
    mu = np.random.default_rng(seed).normal(Y_OUT.sum() / prec, np.sqrt(1.0 / prec),
                                            size=(4, 500))
    return read_dict({"log_lik": stats.norm.logpdf(Y_OUT, mu[..., None], 1.0)},
                     method="mcmc")


def _exact_refit(calls):
    def refit_fn(i):
        calls.append(int(i))
        return np.full((2, 100), -1.5)
    return refit_fn


def test_own_mixture_fit_failing_its_check_leaves_rows_to_the_later_stages():
    """The package's own mixture fit (no mixis_draws from the user) that fails the check no
    longer stops the fold: MixIS verifies no row, each keeps PSIS's estimate and verification,
    the unverified row says why (with the check's numbers), a note says so, and the refits
    still run on it."""
    from loo_adapt.estimators.mixis import OWN_FIT_FAILED, MixIS
    from loo_adapt.estimators.refit import Refit
    from loo_adapt.stan.refit import refit_loo

    post = _outlier_posterior()
    calls = []
    ctx = Context(draws=post, mixture_fn=lambda: post, own_mixture=True,
                  refit_runner=refit_loo, seed=1, progress=False)
    start = initial_result(ctx.base, khat_threshold=ctx.threshold)
    assert start.reliable[:-1].all() and not start.reliable[-1]  # PSIS: the outlier alone
    stages = [Stage(MixIS(), rows="all", accept="all"),
              Stage(Refit(options={"refit_fn": _exact_refit(calls), "n_jobs": 1}))]
    res = run_stages(ctx, start, stages)
    assert calls == [10]  # the refits were reached, for the row PSIS left unverified
    assert res.method[10] == "refit" and res.verified_by[10] == "refit" and res.reliable[10]
    assert res.elpd_i[10] == pytest.approx(-1.5)
    # the other rows: PSIS's estimates and k-hat verification, untouched by MixIS
    np.testing.assert_array_equal(res.elpd_i[:-1], start.elpd_i[:-1])
    assert set(res.method[:-1]) == {"psis"} and set(res.verified_by[:-1]) == {"khat"}
    assert (res.reason[:-1] == "").all()
    mix = res.row_history(10)[0]
    assert mix["estimator"] == "mixis" and not mix["reliable"]
    assert mix["reason"].startswith("k-hat") and OWN_FIT_FAILED in mix["reason"]
    far = re.compile(r"\(-2\d\.\d Monte Carlo SEs")  # the check's numbers, far beyond 4
    assert far.search(mix["reason"])
    assert len(res.notes) == 1 and res.notes[0].startswith("MixIS verified no row: the "
                                                           "package's mixture fit failed")
    assert far.search(res.notes[0])
    # the same draws given by the user (own_mixture False) still stop the call
    ctx = Context(draws=post, mixture_fn=lambda: post, refit_runner=refit_loo)
    with pytest.raises(ValueError, match="do not look like draws.*with_mixis"):
        run_stages(ctx, initial_result(ctx.base, khat_threshold=ctx.threshold), stages)


def test_own_mixture_fit_failing_its_check_through_loo(monkeypatch):
    """The user's report: loo(fit, program=...) died with the check's ValueError when the
    package's own mixture fit failed it.  Now (the mixture fits replaced by the posterior
    draws, which fail it) the call returns; MixIS verifies no row, the focused fit is tried
    and skipped, and the budgeted refits run on the rows PSIS left unverified."""
    pytest.importorskip("stanli", reason="the bundled programs are fitted with stanli")
    from loo_adapt.stan.program import StanProgram

    data, draws = _fixture()
    program = StanProgram("logistic_normal", {**data, "mixis": 0}, backend="stanli")
    asked = []

    def posterior_as_mixture(self, posterior=None, **kw):
        asked.append(kw.get("rows"))
        return posterior

    monkeypatch.setattr(StanProgram, "fit_mixture", posterior_as_mixture)
    calls = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        psis = loo_adapt.loo(draws, estimator="psis").loo_adapt
        res = loo_adapt.loo(draws, program=program, seed=1, progress=False,
                            refit_kwargs={"refit_fn": _exact_refit(calls), "n_jobs": 1,
                                          "max_refits": 2}).loo_adapt
    # the full fit, a second one (it failed its check: a third opinion), then a focused one
    assert asked[0] is None and asked[1] is None and asked[2] is not None
    hard = ~psis.reliable
    assert hard.sum() > 2 and len(calls) == 2 and set(calls) <= set(np.flatnonzero(hard))
    refit = res.method == "refit"
    assert np.flatnonzero(refit).tolist() == sorted(calls) and res.reliable[refit].all()
    # no row verified by MixIS: the rest keep PSIS's estimates and verification
    assert set(res.method[~refit]) == {"psis"} and "mixis_mcse" not in set(res.verified_by)
    np.testing.assert_array_equal(res.elpd_i[~refit], psis.elpd_i[~refit])
    np.testing.assert_array_equal(res.reliable[~refit], psis.reliable[~refit])
    for i in np.flatnonzero(hard & ~refit):
        why = str(res.reason[i])
        assert "MixIS skipped: the package's mixture fit failed its check" in why
        assert "Monte Carlo SEs" in why and "focused MixIS skipped" in why
        assert why.endswith("refit budget: not refitted: max_refits=2")
    assert any(n.startswith("MixIS verified no row") for n in res.notes)
    # the advice: max_refits counts the unverified rows only; the rows accepted on PSIS
    # k-hat alone, which the refit stage does not take, are named apart
    from loo_adapt.advice import next_step_for

    n_left = int(np.sum(~res.reliable))
    n_khat = int(np.sum(res.khat_only))
    assert n_left > 0 and n_khat > 0
    step = next_step_for(res)
    assert f"refit_kwargs={{'max_refits': {n_left}}}" in step
    assert f"{n_khat} rows rest on PSIS k-hat alone, which the refit stage does not take" in step
    # the user's own draws that fail the check are still refused, program or not
    with pytest.raises(ValueError, match="do not look like draws"):
        loo_adapt.loo(draws, program=program, mixis_draws=draws, progress=False)


# ---- an outlier that holds the mixture: the same normal mean with y = 12, where the
# outlier's leave-one-out posterior sits ~30 posterior sds from the posterior, so exact draws
# of the mixture reach the posterior only in their tail (the sweep's Poisson regression with
# a count of 25 had failed the check this way in 3 of 4 of the package's own fits)
Y_FAR = np.array([-0.4, 0.3, 1.1, -1.2, 0.5, 0.0, 0.8, -0.6, 0.2, -0.1, 12.0])


def _normal_mean_post(y, prior_sd=3.0):
    prec = 1.0 / prior_sd**2 + y.size
    return y.sum() / prec, 1.0 / prec


def _normal_mean_loo(y):
    """log p(y_i | y_-i) in closed form (unit noise)."""
    from scipy import stats

    out = np.empty(y.size)
    for i in range(y.size):
        m, v = _normal_mean_post(np.delete(y, i))
        out[i] = stats.norm.logpdf(y[i], m, np.sqrt(1.0 + v))
    return out


def _normal_mean_draws(y, shape, rng, mixture):
    """log_lik at exact i.i.d. draws of the posterior, or (``mixture``) of the mixture
    posterior: the leave-one-out posteriors weighted by 1 / p(y_i | y_-i)."""
    from scipy import stats
    from scipy.special import softmax

    size = int(np.prod(shape))
    if mixture:
        comp = rng.choice(y.size, size=size, p=softmax(-_normal_mean_loo(y)))
        mv = np.array([_normal_mean_post(np.delete(y, i)) for i in range(y.size)])
        mu = rng.normal(mv[comp, 0], np.sqrt(mv[comp, 1]))
    else:
        m, v = _normal_mean_post(y)
        mu = rng.normal(m, np.sqrt(v), size=size)
    return stats.norm.logpdf(y, mu[:, None], 1.0).reshape(*shape, y.size)


def test_mixture_check_cannot_tell_where_an_outlier_holds_the_mixture():
    """Exact mixture draws, where the posterior lies in the mixture's tail: the check's z
    is no test there (|z| > 4 in a third of the replicates), and the check says it
    cannot tell instead of failing; where the weights are tame (an outlier at 4.5) it
    still decides, and posterior draws passed off as mixture draws still fail."""
    from loo_adapt.estimators.mixture_checks import CHECK_MAX_KHAT, mixture_draws_check

    rng = np.random.default_rng(3)
    verdicts, zs = [], []
    for _ in range(40):
        post = _normal_mean_draws(Y_FAR, (4000,), rng, mixture=False)
        mix = _normal_mean_draws(Y_FAR, (4000,), rng, mixture=True)
        check = mixture_draws_check(post, mix)
        verdicts.append(check.ok)
        zs.append(check.z)
        assert check.khat > CHECK_MAX_KHAT and "cannot tell" in check.message
    assert verdicts == [None] * 40
    assert np.mean(np.abs(zs) > 4.0) > 0.25  # what the check had called "not mixture draws"
    mild = np.append(Y_FAR[:-1], 4.5)
    post = _normal_mean_draws(mild, (4000,), rng, mixture=False)
    mix = _normal_mean_draws(mild, (4000,), rng, mixture=True)
    assert mixture_draws_check(post, mix).ok is True
    other = _normal_mean_draws(mild, (4000,), rng, mixture=False)
    assert mixture_draws_check(post, other).ok is False
    same = mixture_draws_check(post, post)
    assert same.ok is False and "the posterior draws themselves" in same.message


@pytest.mark.parametrize("own", [True, False])
def test_mixture_the_check_cannot_tell_about(own):
    """The package's own fit that the check cannot tell about is used, with a note, and the
    outlier's row is verified by its MCSE against the closed form; the user's own such draws
    verify no row (a warning says why)."""
    from loo_adapt.estimators.mixis import GIVEN_UNCHECKED, MixIS

    rng = np.random.default_rng(5)
    post = read_dict({"log_lik": _normal_mean_draws(Y_FAR, (4, 1000), rng, False)},
                     method="mcmc")
    mix = read_dict({"log_lik": _normal_mean_draws(Y_FAR, (4, 1000), rng, True)},
                    method="mcmc")
    ctx = Context(draws=post, mixture_fn=lambda: mix, own_mixture=own, seed=1,
                  progress=False)
    start = initial_result(ctx.base, khat_threshold=ctx.threshold)
    assert not start.reliable[-1]  # PSIS fails on the outlier
    stages = [Stage(MixIS(), rows="all", accept="all")]
    truth = _normal_mean_loo(Y_FAR)
    if not own:
        with pytest.warns(UserWarning, match="cannot tell.*verifies no row"):
            res = run_stages(ctx, start, stages)
        assert "mixis_mcse" not in set(res.verified_by) and not res.reliable[-1]
        assert str(res.reason[-1]).find(GIVEN_UNCHECKED) >= 0
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the other rows' PSIS / MixIS disagreement
        res = run_stages(ctx, start, stages)
    # used, not skipped: the outlier's row has MixIS's estimate, right within its MCSE
    # (0.35 here: above the bar, so the later stages take it, as they take the other
    # rows, which the outlier's component leaves with a Kish ESS near 10)
    assert res.method[-1] == "mixis" and "failed its check" not in str(res.reason[-1])
    z = (res.elpd_i[-1] - truth[-1]) / res.mcse_elpd_i[-1]
    assert abs(z) < 3.0 and str(res.reason[-1]).startswith("MixIS MCSE")
    assert any("cannot tell" in n and "own mixture fit" in n for n in res.all_notes())
    ok = res.reliable
    assert np.all(np.abs(res.elpd_i[ok] - truth[ok]) <= 4.0 * res.mcse_elpd_i[ok])


def _focused_normal_mean_draws(y, rows, shape, rng, shift=0.0):
    """log_lik at exact draws of the mixture of the leave-one-out posteriors of ``rows``
    (weights 1 / p(y_i | y_-i)), the means moved by ``shift`` (a fit that is off)."""
    from scipy import stats
    from scipy.special import softmax

    size = int(np.prod(shape))
    w = softmax(-_normal_mean_loo(y)[rows])
    comp = np.asarray(rows)[rng.choice(len(rows), size=size, p=w)]
    mv = np.array([_normal_mean_post(np.delete(y, i)) for i in range(y.size)])
    mu = rng.normal(mv[comp, 0] + shift, np.sqrt(mv[comp, 1]))
    return stats.norm.logpdf(y, mu[:, None], 1.0).reshape(*shape, y.size)


@pytest.mark.parametrize("odd_one", ["posterior", "focused"])
def test_focused_fit_failing_against_the_posterior_asks_the_full_mixture(odd_one):
    """Three fits: the posterior draws, the full mixture, a mixture focused on 8 rows.  Where
    the posterior draws are off (every mean moved by half a posterior sd) the focused fit
    fails its check against them but agrees with the full mixture: its rows are verified,
    right within their MCSEs of the closed form, and a note says why.  Where the focused fit
    is the one off, it fails the check and disagrees with the full mixture: skipped."""
    from scipy import stats

    from loo_adapt.estimators.focused import FocusedMixIS
    from loo_adapt.estimators.mixis import MixIS

    rng = np.random.default_rng(11)
    y = np.random.default_rng(2).normal(0.5, 1.0, size=30)
    m, v = _normal_mean_post(y)
    rows = np.arange(8)

    def posterior(shift):
        mu = rng.normal(m + shift, np.sqrt(v), size=4000)
        return read_dict({"log_lik": stats.norm.logpdf(y, mu[:, None], 1.0).reshape(
            4, 1000, -1)}, method="mcmc")

    full = read_dict({"log_lik": _normal_mean_draws(y, (4, 1000), rng, True)}, method="mcmc")
    focused = read_dict({"log_lik": _focused_normal_mean_draws(
        y, rows, (4, 1000), rng, shift=0.0 if odd_one == "posterior" else np.sqrt(v))},
        method="mcmc")
    # the full mixture's MixIS estimates (checked against exact posterior draws)
    ctx = Context(draws=posterior(0.0), mixture_fn=lambda: full, own_mixture=True, seed=1,
                  progress=False)
    res = run_stages(ctx, initial_result(ctx.base, khat_threshold=ctx.threshold),
                     [Stage(MixIS(pool_khat=None), rows="all", accept="all")])
    assert set(res.method) == {"mixis"} and res.reliable.all()
    # the focused stage against posterior draws that are off, or exact ones
    shift = np.sqrt(v) / 2.0 if odd_one == "posterior" else 0.0
    ctx = Context(draws=posterior(shift), mixture_fn=lambda: full, own_mixture=True,
                  seed=1, progress=False, focused_mixture_fn=lambda r, **kw: (focused, ""))
    ctx.result = res
    est = FocusedMixIS(rounds=1)(ctx, rows)
    truth = _normal_mean_loo(y)[rows]
    if odd_one == "posterior":
        assert est.reliable.all() and set(est.verified_by) == {"mixis_mcse"}
        assert np.all(np.abs(est.elpd_i - truth) < 4.0 * est.mcse_elpd_i)
        assert any("failed its check against the posterior draws" in n
                   and "the posterior draws are the odd one out" in n
                   for _, n, _ in est.block_notes)
    else:
        assert not est.reliable.any() and np.isnan(est.elpd_i).all()
        assert all("focused MixIS skipped: these do not look like draws" in r
                   for r in est.reason)


@pytest.mark.parametrize("case", ["posterior off", "first fit off", "both fits off"])
def test_a_second_mixture_fit_decides_a_failed_check(case):
    """The package's own mixture fit fails its check against the posterior draws; a second
    fit (another seed) is the third opinion.  Posterior draws that are off (moved by half a
    posterior sd): both fits fail but agree, the first is used and its rows verified,
    right within their MCSEs.  A first fit that is off: the second passes and is used.  Two
    fits off in opposite directions: they disagree, MixIS is skipped as before."""
    from scipy import stats

    from loo_adapt.estimators.mixis import MixIS

    rng = np.random.default_rng(21)
    y = np.random.default_rng(2).normal(0.5, 1.0, size=30)
    m, v = _normal_mean_post(y)
    sd = np.sqrt(v)

    def posterior(shift):
        mu = rng.normal(m + shift, sd, size=4000)
        return read_dict({"log_lik": stats.norm.logpdf(y, mu[:, None], 1.0).reshape(
            4, 1000, -1)}, method="mcmc")

    def mixture(shift):
        return read_dict({"log_lik": _focused_normal_mean_draws(
            y, np.arange(y.size), (4, 1000), rng, shift=shift)}, method="mcmc")

    shifts = {"posterior off": (sd / 2, 0.0, 0.0), "first fit off": (0.0, sd, 0.0),
              "both fits off": (0.0, sd, -sd)}[case]
    post, first, second = posterior(shifts[0]), mixture(shifts[1]), mixture(shifts[2])
    calls = []

    def again():
        calls.append(1)
        return second

    ctx = Context(draws=post, mixture_fn=lambda: first, own_mixture=True, seed=1,
                  progress=False, mixture_again_fn=again)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = run_stages(ctx, initial_result(ctx.base, khat_threshold=ctx.threshold),
                         [Stage(MixIS(pool_khat=None), rows="all", accept="all")])
    assert calls == [1]  # the first fit failed its check: one second fit
    truth = _normal_mean_loo(y)
    if case == "both fits off":
        assert set(res.method) == {"psis"} and "mixis_mcse" not in set(res.verified_by)
        assert any(n.startswith("MixIS verified no row") for n in res.notes)
        return
    assert set(res.method) == {"mixis"} and res.reliable.all()
    assert np.all(np.abs(res.elpd_i - truth) < 4.0 * res.mcse_elpd_i)
    used = {"posterior off": "the posterior draws are the odd one out",
            "first fit off": "a second fit with another seed passes it and is used"}[case]
    assert any(used in n for n in res.all_notes())
    if case == "first fit off":  # the second fit's draws are the rows' draws
        assert all(r.draws is second for r in res.row_draws)


def test_model_prior_that_is_not_the_fits_is_refused():
    """Issue 14: Normal(0.3) on a Normal(1) fit made 29 rows "reliable", worst off by 3.16."""
    data, draws = _fixture()
    X, y = np.asarray(data["X"]), np.asarray(data["y"])
    wrong = loo_adapt.models.LogisticRegression(
        X, y, coef="beta", intercept="alpha", prior=loo_adapt.models.Normal(0.3),
        intercept_prior=loo_adapt.models.Normal(2.5))
    with pytest.raises(ValueError, match="prior does not match"):
        loo_adapt.loo(draws, model=wrong)
    # the right prior passes (the draws' lp__ is its log posterior up to a constant)
    right = loo_adapt.models.model_for("logistic_normal", data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert loo_adapt.loo(draws, model=right, seed=1).loo_adapt.n_obs == 54


def test_hierarchical_prior_checked_through_its_bundled_program():
    """A horseshoe family whose hyperpriors are not the fit's (slab and global scales x5) is
    refused: the bundled program encoding it gives a log density that is not lp__ + const."""
    pytest.importorskip("stanli")
    data, draws = _fixture("rhs_logistic")
    wrong = {**data, "slab_scale": data["slab_scale"] * 5,
             "scale_global": data["scale_global"] * 5}
    with pytest.raises(ValueError, match="prior does not match"):
        loo_adapt.loo(draws, model=loo_adapt.models.model_for("rhs_logistic", wrong), seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = loo_adapt.loo(draws, model=loo_adapt.models.model_for("rhs_logistic", data),
                            seed=1).loo_adapt
    assert res.n_obs == 54
