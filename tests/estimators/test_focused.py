"""Focused mixture IS (loo_adapt.estimators.focused): one mixture fit over the leave-one-out
posteriors of the rows the first mixture left unverified.

Oracles: a model with one parameter per observation, whose LOO predictive densities and
mixture posteriors (full and focused) are known in closed form and sampled exactly; the
CmdStan fixture's brute-force truth (54 refits of 4 x 4000 draws) through ``loo()``.
"""

import json
import pathlib
import warnings

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

import loo_adapt
from loo_adapt.api import plan_stages
from loo_adapt.core.mixis import mixis_loo
from loo_adapt.estimators.base import Context
from loo_adapt.estimators.focused import FocusedMixIS
from loo_adapt.io.readers import read_csv, read_dict

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data" / "cmdstan"

# ---- y_i ~ N(theta_i, SIG), theta_i ~ N(0, TAU): p(y_i | y_-i) = N(y_i | 0, SIG^2 + TAU^2),
# the LOO posterior of i has theta_i from the prior and every other theta_j from its posterior
SIG, TAU = 1.0, 2.0
POST_SD = 1.0 / np.sqrt(1.0 / SIG**2 + 1.0 / TAU**2)


def _problem(n=100, seed=1):
    rng = np.random.default_rng(seed)
    y = rng.normal(0.0, np.hypot(SIG, TAU), n)
    y[:3] *= 2.5
    return y, y * POST_SD**2 / SIG**2, stats.norm.logpdf(y, 0.0, np.hypot(SIG, TAU))


def _chains(y, post_mean, truth, rows, rng, chains=4, draws=1000, stay=0.5):
    """Exact autocorrelated draws of the mixture over ``rows``' LOO posteriors (weights
    proportional to 1 / p(y_i | y_-i)): a lazy chain that repeats its state with
    probability ``stay`` and otherwise draws afresh, so its stationary law is the mixture."""
    n, S = y.size, chains * draws
    p = np.exp(-truth[rows] - logsumexp(-truth[rows]))
    comp = rows[rng.choice(rows.size, size=S, p=p)]
    theta = rng.normal(post_mean, POST_SD, size=(S, n))
    theta[np.arange(S), comp] = rng.normal(0.0, TAU, S)
    theta = theta.reshape(chains, draws, n)
    repeat = rng.uniform(size=(chains, draws)) < stay
    idx = np.tile(np.arange(draws), (chains, 1))
    for t in range(1, draws):
        idx[:, t] = np.where(repeat[:, t], idx[:, t - 1], t)
    return np.take_along_axis(theta, idx[..., None], axis=1)


class _ExactProgram:
    """A program whose focused mixture fit draws exactly from the focused mixture."""

    declares_mixis = True

    def __init__(self, y, post_mean, truth, tmp_path, seed):
        self.y, self.post_mean, self.truth, self.seed = y, post_mean, truth, seed
        self.asked = []
        self.draws_asked = []
        self.stan_file = tmp_path / "exact.stan"
        self.stan_file.write_text("data { int<lower=0> mixis_n_rows; "
                                  "array[mixis_n_rows] int<lower=1> mixis_rows; }")

    def fit_mixture(self, posterior, *, rows, seed, chains, draws):
        self.asked.append(np.asarray(rows).tolist())
        self.draws_asked.append(draws)
        rng = np.random.default_rng(self.seed)
        theta = _chains(self.y, self.post_mean, self.truth, np.asarray(rows), rng)
        return read_dict({"log_lik": stats.norm.logpdf(self.y, theta, SIG)}, method="mcmc")


def _ctx(posterior, prog=None, seed=None):
    """The context the verb layer builds: the focused fit handed over as a function."""
    from loo_adapt.entry import focused_sampler

    return Context(draws=posterior, program=prog, seed=seed,
                   focused_mixture_fn=focused_sampler(prog, posterior, seed, False))


def test_focused_mixture_is_calibrated_where_the_full_mixture_is_not(tmp_path):
    """100 observations, autocorrelated chains: over the full mixture each row gets ~1% of the
    draws and the delta-method MCSE is too small (rms z 1.5 over replicates: a sample that
    missed a rare large weight is off and sure of itself); the chains' disagreement sees it
    (`chain_inflation`, mcse="chains"), the default skew widening part of it
    (`skew_inflation`), and the focused fit on 8 rows has the right
    estimate and an honest MCSE (rms z ~ 1 over 50 replicates)."""
    y, post_mean, truth = _problem()
    rng = np.random.default_rng(2)
    rows = np.argsort(np.abs(y))[:8]  # the rows the full mixture serves worst (y near 0)
    theta_post = rng.normal(post_mean, POST_SD, size=(4, 500, y.size))
    posterior = read_dict({"log_lik": stats.norm.logpdf(y, theta_post, SIG)}, method="mcmc")
    z_focus, z_full, z_delta, z_skew, factor = [], [], [], [], []
    for rep in range(50):
        prog = _ExactProgram(y, post_mean, truth, tmp_path, seed=100 + rep)
        ctx = _ctx(posterior, prog, seed=rep)
        est = FocusedMixIS(max_mcse=0.1)(ctx, rows)
        assert prog.asked == [rows.tolist()]
        z_focus.append((est.elpd_i - truth[rows]) / est.mcse_elpd_i)
        if rep < 20:
            full = _chains(y, post_mean, truth, np.arange(y.size), rng)
            res = mixis_loo(stats.norm.logpdf(y, full, SIG), mcse="chains")
            z_full.append((res.elpd_i - truth) / res.mcse_elpd_i)
            z_delta.append((res.elpd_i - truth) / res.mcse_delta_i)
            factor.append(res.mcse_inflation)
            np.testing.assert_allclose(res.mcse_elpd_i, res.mcse_inflation * res.mcse_delta_i)
            np.testing.assert_array_equal(
                mixis_loo(stats.norm.logpdf(y, full, SIG), mcse="delta").mcse_elpd_i,
                res.mcse_delta_i)
            skew = mixis_loo(stats.norm.logpdf(y, full, SIG))
            z_skew.append((skew.elpd_i - truth) / skew.mcse_elpd_i)
    rms_focus = float(np.sqrt(np.mean(np.square(z_focus))))
    rms_full = float(np.sqrt(np.mean(np.square(z_full))))
    rms_delta = float(np.sqrt(np.mean(np.square(z_delta))))
    rms_skew = float(np.sqrt(np.mean(np.square(z_skew))))
    assert 0.8 <= rms_focus <= 1.2, rms_focus
    assert rms_delta > 1.3, rms_delta  # the failure the focused fit exists for
    assert 0.8 <= rms_full <= 1.25, (rms_full, np.median(factor))
    # the default skew widening sees part of it (1.30 against 1.57 here), never too wide
    assert 0.8 <= rms_skew <= rms_delta - 0.2, (rms_skew, rms_delta)
    assert min(factor) > 1.2
    assert est.reliable.all() and set(est.verified_by) == {"mixis_mcse"}
    assert set(est.method) == {"mixis"} and est.estimator == "mixis_focused"
    rec = est.row_draws[0]
    assert rec.source == "mixture" and rec.column == rows[0]
    np.testing.assert_allclose(logsumexp(rec.log_weights), 0.0, atol=1e-12)


def test_rows_left_above_the_bar_get_one_more_fit(tmp_path):
    """30 rows in one focused fit, a bar (0.07) half of them miss: those rows alone get a
    second fit (and no third), whose estimates replace the first's for them (the rows the
    first verified move together by what the second shows on the others): closed-form
    LOO densities within their MCSEs over replicates (rms z near 1), and more rows verified
    than one fit verifies (``rounds=1``), which asks for the first fit only."""
    y, post_mean, truth = _problem()
    rng = np.random.default_rng(2)
    rows = np.argsort(np.abs(y))[:30]
    theta_post = rng.normal(post_mean, POST_SD, size=(4, 500, y.size))
    posterior = read_dict({"log_lik": stats.norm.logpdf(y, theta_post, SIG)}, method="mcmc")
    z, one, two = [], [], []
    for rep in range(8):
        prog = _ExactProgram(y, post_mean, truth, tmp_path, seed=100 + rep)
        first = FocusedMixIS(max_mcse=0.07, rounds=1)(_ctx(posterior, prog, seed=rep), rows)
        assert prog.asked == [rows.tolist()]
        missed = rows[~first.reliable]
        assert 0 < missed.size < rows.size
        prog = _ExactProgram(y, post_mean, truth, tmp_path, seed=100 + rep)
        est = FocusedMixIS(max_mcse=0.07)(_ctx(posterior, prog, seed=rep), rows)
        assert prog.asked == [rows.tolist(), missed.tolist()]
        kept = first.reliable
        move = est.elpd_i[kept] - first.elpd_i[kept]  # together, by what the second fit shows
        assert np.all(np.sign(move) == np.sign(move[0])) and np.all(move != 0), move
        assert not np.any(est.elpd_i[~kept] == first.elpd_i[~kept])
        for j in np.flatnonzero(~kept):
            rec = est.row_draws[j]
            assert rec.column == rows[j] and len(rec.log_weights) == 4000
            np.testing.assert_allclose(logsumexp(rec.log_weights), 0.0, atol=1e-12)
        again = est.reason[~kept & ~est.reliable]
        assert all("again, on" in r for r in again)
        assert set(est.verified_by[est.reliable]) == {"mixis_mcse"}
        np.testing.assert_array_equal(est.mcse_elpd_i[kept], first.mcse_elpd_i[kept])
        one.append(first.reliable.sum())
        two.append(est.reliable.sum())
        z.extend((est.elpd_i - truth[rows]) / est.mcse_elpd_i)
    rms = float(np.sqrt(np.mean(np.square(z))))
    assert 0.8 <= rms <= 1.2, rms
    assert sum(two) > sum(one) + 8 * 8, (one, two)  # 12-19 of 30 verified by one fit here


def test_second_round_draws_from_the_first_fits_mcses_and_shares():
    """`again_draws`, by hand: D = draws / r x max((1.5 MCSE / bar)^2, 1.5 x 100 / ESS),
    r = sum_all exp(-elpd) / sum_again exp(-elpd), in hundreds, within [250, draws]."""
    from types import SimpleNamespace

    from loo_adapt.estimators.focused import again_draws

    def est(elpd, mcse, ess=1e4, ess_mcse=1e4):
        n = len(elpd)
        return SimpleNamespace(elpd_i=np.array(elpd, float), mcse_elpd_i=np.array(mcse, float),
                               ess=np.full(n, ess, float), ess_mcse=np.full(n, ess_mcse, float))

    # 10 rows of elpd -1, one (MCSE 0.12) again: r = 10, D = 1000 x 3.24 / 10 = 324 -> 400
    e = est([-1.0] * 10, [0.12] + [0.05] * 9)
    again = np.arange(10) == 0
    assert again_draws(e, again, 1000, 0.1) == 400
    # the same row carrying half the mass (elpd -1 + log 9): r = 2, D = 1620 -> the cap 1000
    e2 = est([-1.0 - np.log(9.0)] + [-1.0] * 9, [0.12] + [0.05] * 9)
    assert again_draws(e2, again, 1000, 0.1) == 1000
    # 40 equal rows: r = 40, D = 81 -> the floor 250
    e3 = est([-0.5] * 40, [0.12] + [0.05] * 39)
    assert again_draws(e3, np.arange(40) == 0, 1000, 0.1) == 250
    # too few effective draws rules: ESS 60 asks 1.5 x 100 / 60 = 2.5 > 0.81 (MCSE 0.06)
    e4 = est([-1.0] * 10, [0.06] * 10, ess=60.0)
    assert again_draws(e4, again, 1000, 0.1) == 300  # 1000 x 2.5 / 10 = 250 -> 300
    # a row with no finite MCSE: the first fit's draws
    e5 = est([-1.0] * 10, [np.nan] + [0.05] * 9)
    assert again_draws(e5, again, 1000, 0.1) == 1000


class _Honest(_ExactProgram):
    """An exact program that draws as many per chain as it is asked."""

    def fit_mixture(self, posterior, *, rows, seed, chains, draws):
        self.asked.append(np.asarray(rows).tolist())
        self.draws_asked.append(draws)
        rng = np.random.default_rng(self.seed + len(self.asked))
        theta = _chains(self.y, self.post_mean, self.truth, np.asarray(rows), rng,
                        chains=chains, draws=draws)
        return read_dict({"log_lik": stats.norm.logpdf(self.y, theta, SIG)}, method="mcmc")


def test_the_second_round_draws_what_its_rows_need_and_holds_its_mcses(tmp_path):
    """The 30-row focus of the test above at a bar of 0.08, with a program that draws what
    it is asked: 3-6 rows miss the first fit's bar and hold a small share of its mass, so
    the second fit is asked for fewer draws per chain than the first's 1000 and a note gives
    them; over replicates the rows it re-estimates reach the bar and their closed-form LOO
    densities lie within their MCSEs (rms z in [0.8, 1.25])."""

    y, post_mean, truth = _problem()
    rng = np.random.default_rng(2)
    rows = np.argsort(np.abs(y))[:30]
    theta_post = rng.normal(post_mean, POST_SD, size=(4, 500, y.size))
    posterior = read_dict({"log_lik": stats.norm.logpdf(y, theta_post, SIG)}, method="mcmc")
    z, cut, reached, again = [], [], 0, 0
    for rep in range(12):
        prog = _Honest(y, post_mean, truth, tmp_path, seed=300 + rep)
        est = FocusedMixIS(max_mcse=0.08)(_ctx(posterior, prog, seed=rep), rows)
        if len(prog.asked) < 2:
            continue
        assert prog.draws_asked[0] == 1000 and 250 <= prog.draws_asked[1] <= 1000
        second = np.isin(rows, prog.asked[1])
        again += int(second.sum())
        reached += int(est.reliable[second].sum())
        z.extend((est.elpd_i[second] - truth[rows[second]]) / est.mcse_elpd_i[second])
        if prog.draws_asked[1] < 1000:
            cut.append(prog.draws_asked[1])
            note = [n for n in est.notes if n.startswith("The second mixture fit focused")]
            assert note == [f"The second mixture fit focused on {second.sum()} rows drew "
                            f"{prog.draws_asked[1]} draws per chain, not 1000: by the first "
                            "fit's MCSEs and those rows' larger shares of a fit over them "
                            "alone, enough for MCSEs of 0.0533 (each row is verified by its "
                            "own)"]
    assert len(cut) >= 6, cut
    assert reached >= 0.9 * again, (reached, again)
    rms = float(np.sqrt(np.mean(np.square(z))))
    assert 0.8 <= rms <= 1.25, (rms, len(z))


def test_focus_draws_predicts_a_one_row_focus_from_the_closed_form_variance():
    """A mixture focused on one row is that row's leave-one-out posterior, where MixIS is the
    mean of l_i = N(y_i | theta_i, SIG) over theta_i ~ N(0, TAU): its variance per draw is
    Var(l_i) / E[l_i]^2 in closed form, so with iid draws a bar b needs D = Var / E^2 x
    (1.5 / b)^2 / 4 draws per chain.  `focus_draws`, from exact full-mixture draws
    reweighted to that posterior, gives D within a quarter (bars asking 500 and 900), or
    the most it may draw where the reweighting has too few effective draws to tell; never
    a cut to more than half of the most it may draw (`FOCUS_CUT`)."""
    from loo_adapt.estimators.focused import focus_draws

    y, post_mean, truth = _problem()
    n = y.size
    i = int(np.argsort(np.abs(y))[n // 2])  # a middling row
    mean_l = stats.norm.pdf(y[i], 0.0, np.hypot(SIG, TAU))
    mean_l2 = stats.norm.pdf(y[i], 0.0, np.sqrt(SIG**2 / 2 + TAU**2)) / (2 * np.sqrt(np.pi) * SIG)
    rel_var = mean_l2 / mean_l**2 - 1.0
    told = 0
    for rep in range(5):
        theta = _chains(y, post_mean, truth, np.arange(n), np.random.default_rng(rep), stay=0.0)
        ll = stats.norm.logpdf(y, theta, SIG)
        ess = mixis_loo(ll).ess_mcse
        for want in (500, 900):
            bar = 1.5 * np.sqrt(rel_var / (4 * want))
            got = focus_draws(ll, np.array([i]), ess, 5000, bar)
            if got == 5000:
                continue
            told += 1
            assert abs(got - want) <= 0.25 * want, (rep, want, got)
            # a cut to more than half of the most it may draw is not taken (FOCUS_CUT)
            assert focus_draws(ll, np.array([i]), ess, int(1.2 * want), bar) == int(1.2 * want)
    assert told >= 6, told


def test_the_first_focused_fit_draws_what_the_full_mixture_says_its_rows_need(tmp_path):
    """The first focused fit draws what the full mixture (the fit behind the result so far)
    predicts its rows need: its draws reweighted to the focused mixture give each row's
    MixIS variance there (`focus_draws`).  100 rows, a full mixture drawn exactly (lazy
    chains, 4 x 1000), the 6 rows it left with the largest MCSEs (0.25-0.5) above a bar of
    0.15: the focused fit is asked for fewer than 1000 draws per chain, a note says how
    many, the largest MCSE it gets is near the one predicted (the bar / 1.5: 0.6-1.1 of it
    on average; the prediction errs wide), and over replicates its rows reach the bar with
    their closed-form LOO densities within their MCSEs (rms z in [0.8, 1.25])."""
    from types import SimpleNamespace

    from loo_adapt.estimators.focused import AGAIN_MARGIN, focus_draws

    y, post_mean, truth = _problem()
    n = y.size
    rng = np.random.default_rng(6)
    theta_post = rng.normal(post_mean, POST_SD, size=(4, 500, n))
    posterior = read_dict({"log_lik": stats.norm.logpdf(y, theta_post, SIG)}, method="mcmc")
    z, cut, reached, asked, worst = [], [], 0, 0, []
    for rep in range(10):
        theta = _chains(y, post_mean, truth, np.arange(n), rng)
        full = read_dict({"log_lik": stats.norm.logpdf(y, theta, SIG)}, method="mcmc")
        first = mixis_loo(full.log_lik())
        rows = np.sort(np.argsort(first.mcse_elpd_i)[-6:])
        assert np.all(first.mcse_elpd_i[rows] > 0.15)
        prog = _Honest(y, post_mean, truth, tmp_path, seed=700 + rep)
        ctx = _ctx(posterior, prog, seed=rep)
        held = SimpleNamespace(source="mixture", draws=full)
        ctx.result = SimpleNamespace(  # the MixIS stage held every row from the full mixture
            row_draws=[held] * n,
            history=[{"estimator": "mixis", "rows": np.arange(n), "accepted": np.ones(n, bool)}])
        est = FocusedMixIS(max_mcse=0.15, rounds=1)(ctx, rows)
        want = focus_draws(full.log_lik(), rows, first.ess_mcse, 1000, 0.15)
        assert prog.asked == [rows.tolist()] and prog.draws_asked == [want]
        if want < 1000:
            cut.append(want)
            assert (f"The mixture fit focused on {rows.size} rows drew {want} draws per "
                    "chain, not 1000: by the full mixture's draws reweighted to it, enough "
                    "for MCSEs of 0.1") in " ".join(est.notes)
            worst.append(est.mcse_elpd_i.max() / (0.15 / AGAIN_MARGIN))
        asked += rows.size
        reached += int(est.reliable.sum())
        z.extend((est.elpd_i - truth[rows]) / est.mcse_elpd_i)
    assert len(cut) >= 5, cut
    assert 0.6 <= np.mean(worst) <= 1.1, worst  # the largest MCSE, against the prediction
    assert reached >= 0.9 * asked, (reached, asked)
    rms = float(np.sqrt(np.mean(np.square(z))))
    assert 0.8 <= rms <= 1.25, (rms, len(z))
    # no full mixture behind the result (the earlier tests' contexts): ``draws``
    prog = _Honest(y, post_mean, truth, tmp_path, seed=1)
    FocusedMixIS(max_mcse=0.15, rounds=1)(_ctx(posterior, prog, seed=1), rows)
    assert prog.draws_asked == [1000]


def test_a_failed_second_fit_keeps_the_first_fits_estimates(tmp_path):
    """The second focused fit crashes: the first fit's estimates stand for every row, the
    rows it left above the bar stay unverified and their reasons say both what the first
    fit showed and why the second did not run."""

    class _SecondFails(_ExactProgram):
        def fit_mixture(self, posterior, **kw):
            if self.asked:
                self.asked.append(np.asarray(kw["rows"]).tolist())
                raise RuntimeError("sampler exploded")
            return super().fit_mixture(posterior, **kw)

    y, post_mean, truth = _problem()
    rng = np.random.default_rng(2)
    rows = np.argsort(np.abs(y))[:30]
    theta_post = rng.normal(post_mean, POST_SD, size=(4, 500, y.size))
    posterior = read_dict({"log_lik": stats.norm.logpdf(y, theta_post, SIG)}, method="mcmc")
    prog = _ExactProgram(y, post_mean, truth, tmp_path, seed=100)
    first = FocusedMixIS(max_mcse=0.07, rounds=1)(_ctx(posterior, prog, seed=0), rows)
    missed = ~first.reliable
    assert 0 < missed.sum() < rows.size
    prog = _SecondFails(y, post_mean, truth, tmp_path, seed=100)
    est = FocusedMixIS(max_mcse=0.07)(_ctx(posterior, prog, seed=0), rows)
    assert prog.asked == [rows.tolist(), rows[missed].tolist()]
    for name in ("elpd_i", "mcse_elpd_i", "reliable", "verified_by"):
        np.testing.assert_array_equal(getattr(est, name), getattr(first, name))
    assert all(r.startswith("focused MixIS MCSE") and "sampler exploded" in r
               for r in est.reason[missed])
    assert all(r == "" for r in est.reason[~missed])
    for a, b in zip(est.row_draws, first.row_draws):
        np.testing.assert_array_equal(a.log_weights, b.log_weights)


def test_focused_stage_skips_with_reasons(tmp_path):
    y, post_mean, truth = _problem(n=10)
    theta = np.random.default_rng(0).normal(post_mean, POST_SD, size=(2, 300, 10))
    posterior = read_dict({"log_lik": stats.norm.logpdf(y, theta, SIG)}, method="mcmc")
    prog = _ExactProgram(y, post_mean, truth, tmp_path, seed=1)
    est = FocusedMixIS()(_ctx(posterior, prog), np.arange(10))
    assert not est.reliable.any() and "every row" in est.reason[0] and prog.asked == []
    prog.stan_file.write_text("data { int<lower=0, upper=1> mixis; }")
    est = FocusedMixIS()(_ctx(posterior, prog), np.array([1, 4]))
    assert not est.reliable.any() and np.isnan(est.elpd_i).all()
    assert "declares only the mixis flag" in est.reason[1] and prog.asked == []
    est = FocusedMixIS()(_ctx(posterior), np.array([1]))
    assert "no Stan program" in est.reason[0]
    # draws that are not the focused mixture (the posterior itself) are refused
    prog.stan_file.write_text("data { int<lower=0> mixis_n_rows; "
                              "array[mixis_n_rows] int<lower=1> mixis_rows; }")
    prog.fit_mixture = lambda posterior_, **kw: read_dict(
        {"log_lik": stats.norm.logpdf(y, np.random.default_rng(3).normal(
            post_mean, POST_SD, size=(4, 1000, 10)), SIG)}, method="mcmc")
    est = FocusedMixIS()(_ctx(posterior, prog), np.array([0, 1, 2]))
    assert not est.reliable.any() and "do not look like draws" in est.reason[0]


# ------------------------------------------------------------------------------ with Stan
def _fixture(name="logistic_normal"):
    data = json.loads((FIXTURES / f"{name}.data.json").read_text())
    draws = read_csv(sorted((FIXTURES / name / "sample").glob("*.csv")))
    truth = np.loadtxt(FIXTURES / "truth" / f"{name}.csv", delimiter=",", skiprows=1)
    return data, draws, truth


def test_loo_with_a_program_focuses_before_refitting():
    """Through loo(): rows whose MixIS MCSE is above the bar get the focused fit; its
    estimates agree with the brute-force truth; refits are left for what still misses."""
    pytest.importorskip("stanli", reason="the bundled programs are fitted with stanli")
    data, draws, truth = _fixture()
    program = loo_adapt.StanProgram("logistic_normal", {**data, "mixis": 0}, backend="stanli")
    model = loo_adapt.models.model_for("logistic_normal", data)
    kw = dict(model=model, program=program, seed=1, mixis_max_mcse=0.02,
              refit_kwargs={"max_refits": 0, "progress": False})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = loo_adapt.loo(draws, **kw).loo_adapt
        plain = loo_adapt.loo(draws, mixis_focus=False, **kw).loo_adapt
    # 8 of 54 rows have PSIS k-hat < 1/2 here (15 %, not below 10 %): no easy-row focus,
    # and nothing said about it
    assert [h["estimator"] for h in res.history] == ["mixis", "mixis_focused", "refit"]
    assert not any("easy rows" in note for note in res.notes)
    assert all(h["seconds"] >= 0 for h in res.history)  # each stage's wall time
    focused = np.array([any(h["estimator"] == "mixis_focused" and h["accepted"][
        np.flatnonzero(h["rows"] == i)[0]] for h in res.history if i in h["rows"])
        for i in range(res.n_obs)])
    asked = ~plain.reliable  # MixIS alone leaves these (same mixture fit, same seed)
    assert asked.sum() >= 3 and focused.any()
    assert not (focused & ~asked).any()
    # the focused rows are verified and right: within 4 combined MCSEs of the truth
    err = res.elpd_i[focused] - truth[focused, 1]
    assert np.all(np.abs(err) <= 4 * np.hypot(res.mcse_elpd_i[focused], truth[focused, 2])), err
    assert res.reliable[focused].all() and set(res.verified_by[focused]) == {"mixis_mcse"}
    # ... with smaller MCSEs than the first mixture gave them
    assert np.all(res.mcse_elpd_i[focused] < plain.mcse_elpd_i[focused])
    assert res.reliable.sum() > plain.reliable.sum()
    # the plain path never tried a focused fit
    assert "mixis_focused" not in [h["estimator"] for h in plain.history]


def test_old_style_program_is_not_focused_and_says_why(tmp_path):
    pytest.importorskip("stanli", reason="the bundled programs are fitted with stanli")
    from loo_adapt.stan.backends import stan_model_path

    code = stan_model_path("logistic_normal").read_text()
    code = code.replace("  int<lower=0> mixis_n_rows;\n", "").replace(
        "  array[mixis_n_rows] int<lower=1> mixis_rows;\n", "")
    code = code.replace("if (mixis_n_rows == 0) target += log_sum_exp(-log_lik_local);\n",
                        "target += log_sum_exp(-log_lik_local);\n")
    code = code.replace("    else target += log_sum_exp(-log_lik_local[mixis_rows]);\n", "")
    assert "mixis_n_rows;" not in code and "[mixis_rows]" not in code
    path = tmp_path / "old_style.stan"
    path.write_text(code)
    data, draws, _ = _fixture()
    program = loo_adapt.StanProgram(path, {**data, "mixis": 0}, backend="stanli")
    with pytest.raises(ValueError, match="cannot mix only some rows"):
        program.fit_mixture(draws, rows=[1, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = loo_adapt.loo(draws, program=program, seed=1, mixis_max_mcse=0.02,
                            refit_kwargs={"max_refits": 0, "progress": False}).loo_adapt
    miss = ~res.reliable
    assert miss.any()
    assert all("focused MixIS skipped" in r and "declares only the mixis flag" in r
               for r in res.reason[miss])


def test_fit_mixture_rows_are_checked():
    pytest.importorskip("stanli", reason="the bundled programs are fitted with stanli")
    data, draws, _ = _fixture()
    program = loo_adapt.StanProgram("logistic_normal", {**data, "mixis": 0}, backend="stanli")
    for bad in ([], [54], [-1], [2, 2], [[1]], [0.5]):
        with pytest.raises(ValueError, match="rows must"):
            program.fit_mixture(draws, rows=bad)
    assert program.data["mixis_n_rows"] == 0 and program.data["mixis_rows"] == []


def test_mcse_choice_is_checked():
    with pytest.raises(ValueError, match="mcse must be one of"):
        mixis_loo(np.zeros((2, 10, 3)) - 1.0, mcse="batch")
    with pytest.raises(ValueError, match="mixis_mcse must be one of"):
        plan_stages(mixis_draws=object(), mixis_mcse="batch")


def _result_so_far(n, method, kish, reliable):
    """What `FocusedEasyMixIS` reads of the result the earlier stages left."""
    from types import SimpleNamespace

    return SimpleNamespace(method=np.asarray(method, dtype=object), diagnostic=np.asarray(kish),
                           reliable=np.asarray(reliable, dtype=bool))


def test_easy_rows_get_their_own_focused_fit(tmp_path):
    """The stage as ``mixis_focus_easy=True`` runs it (no k-hat rule): the rows MixIS
    verified with a Kish ESS above `EASY_FOCUS_KISH` (400; pooled or not) get one
    focused fit; rows from other estimators, unverified or with a small Kish ESS are not
    asked about.  Its estimates match the closed-form LOO densities within their MCSEs (rms
    z over replicates near 1); with no easy row it asks for no fit and returns no rows."""
    from loo_adapt.estimators.focused_easy import FocusedEasyMixIS

    y, post_mean, truth = _problem(n=40)
    rng = np.random.default_rng(4)
    theta_post = rng.normal(post_mean, POST_SD, size=(4, 500, y.size))
    posterior = read_dict({"log_lik": stats.norm.logpdf(y, theta_post, SIG)}, method="mcmc")
    n = y.size
    method = np.array(["mixis"] * n, dtype=object)
    method[::5] = "mixis+psis"
    method[1] = "psis"
    kish = np.where(np.arange(n) % 3 == 0, 150.0, 900.0)
    reliable = np.ones(n, dtype=bool)
    reliable[2] = False
    want = [i for i in range(n) if i != 1 and i != 2 and i % 3 != 0]
    z, verified = [], []
    for rep in range(20):
        prog = _ExactProgram(y, post_mean, truth, tmp_path, seed=300 + rep)
        ctx = _ctx(posterior, prog, seed=rep)
        ctx.result = _result_so_far(n, method, kish, reliable)
        est = FocusedEasyMixIS()(ctx, np.arange(n))
        assert prog.asked == [want] and est.rows.tolist() == want
        assert est.estimator == "mixis_focused_easy"
        assert np.all(est.mcse_elpd_i[est.reliable] <= 0.1)  # the bar, as FocusedMixIS
        verified.append(est.reliable.mean())
        z.extend((est.elpd_i - truth[want]) / est.mcse_elpd_i)
    rms = float(np.sqrt(np.mean(np.square(z))))
    assert 0.8 <= rms <= 1.2, rms
    # the skew-widened MCSE (rms z 1.00 here; the delta method's 1.12) verifies 79-100 % of
    # the rows per replicate, 91 % on average (the delta method 92-100 %, 98 %)
    assert np.mean(verified) > 0.85 and min(verified) > 0.75, verified
    # the floor: the rows at Kish 150 join at min_kish=100, none is easy at 1000
    so_far = _result_so_far(n, method, kish, reliable)
    lower = [i for i in range(n) if i not in (1, 2)]
    assert FocusedEasyMixIS(min_kish=100.0).easy_rows(so_far, np.arange(n)).tolist() == lower
    assert FocusedEasyMixIS(min_kish=1000.0).easy_rows(so_far, np.arange(n)).size == 0
    prog = _ExactProgram(y, post_mean, truth, tmp_path, seed=1)
    ctx = _ctx(posterior, prog)
    ctx.result = _result_so_far(n, method, np.full(n, 50.0), reliable)
    est = FocusedEasyMixIS()(ctx, np.arange(n))
    assert est.rows.size == 0 and prog.asked == [] and "0 of 40 rows" in est.notes[0]
    # every row easy (a fit over all of them is the mixture fit again), or a program that
    # cannot focus: no row comes back, so MixIS's verified estimates stay as they were
    ctx.result = _result_so_far(n, ["mixis"] * n, np.full(n, 900.0), np.ones(n, bool))
    est = FocusedEasyMixIS()(ctx, np.arange(n))
    assert est.rows.size == 0 and prog.asked == [] and "40 of 40 rows" in est.notes[0]
    prog.stan_file.write_text("data { int<lower=0, upper=1> mixis; }")
    ctx.result = _result_so_far(n, method, kish, reliable)
    est = FocusedEasyMixIS()(ctx, np.arange(n))
    assert est.rows.size == 0 and prog.asked == []
    assert "declares only the mixis flag" in est.notes[0]


def test_easy_row_focus_runs_after_mixis_where_the_posterior_needs_it():
    from loo_adapt.estimators.focused_easy import EASY_FOCUS_SHARE

    stages = plan_stages(program="model.stan")
    names = [type(s.estimator).__name__ for s in stages]
    assert names[:3] == ["MixIS", "FocusedEasyMixIS", "FocusedMixIS"]
    assert (stages[1].rows, stages[1].accept) == ("all", "all")
    assert stages[1].estimator.max_low_khat_share == EASY_FOCUS_SHARE == 0.1  # "auto"
    always = plan_stages(program="model.stan", mixis_focus_easy=True)[1].estimator
    assert type(always).__name__ == "FocusedEasyMixIS" and always.max_low_khat_share is None
    assert "FocusedEasyMixIS" not in [type(s.estimator).__name__ for s in plan_stages(
        program="model.stan", mixis_focus_easy=False)]
    assert "FocusedEasyMixIS" not in [type(s.estimator).__name__ for s in plan_stages(
        mixis_draws=object(), mixis_focus_easy=True)]  # no program: nothing to fit
    for bad in ("yes", 2, None):
        with pytest.raises(ValueError, match="mixis_focus_easy must be"):
            plan_stages(program="model.stan", mixis_focus_easy=bad)


def test_auto_easy_row_focus_follows_the_share_of_low_khat_rows(tmp_path):
    """"auto" focuses only where fewer than 10 % of the rows have a plain-PSIS k-hat below
    1/2.  One parameter per observation: each leave-one-out posterior puts theta_i back on
    its prior, 2.2 times wider than its posterior (importance ratios with tail index
    1 - (0.894 / 2)^2 = 0.8), so no row has k-hat < 1/2 and the focused fit runs; one mean
    shared by 40 observations: every leave-one-out posterior is close to the posterior
    (k-hat < 1/2 in every row, as arviz's psislw finds), so it asks for no fit and returns
    nothing (no row, no note: a stage with nothing to do); `needed` says why."""
    import arviz as az

    from loo_adapt.estimators.focused_easy import EASY_FOCUS_SHARE, FocusedEasyMixIS

    auto = FocusedEasyMixIS(max_low_khat_share=EASY_FOCUS_SHARE)
    y, post_mean, truth = _problem(n=40)
    n = y.size
    rng = np.random.default_rng(5)
    theta = rng.normal(post_mean, POST_SD, size=(4, 500, n))
    apart = read_dict({"log_lik": stats.norm.logpdf(y, theta, SIG)}, method="mcmc")
    mu = rng.normal(y.mean(), SIG / np.sqrt(n), size=(4, 500, 1))
    shared = read_dict({"log_lik": stats.norm.logpdf(y, mu, SIG)}, method="mcmc")
    k_apart = az.psislw(-apart.log_lik().reshape(2000, n).T.copy())[1]
    k_shared = az.psislw(-shared.log_lik().reshape(2000, n).T.copy())[1]
    assert np.mean(k_apart < 0.5) < 0.1 and np.all(k_shared < 0.5)
    kish = np.full(n, 900.0)
    kish[::4] = 50.0  # a quarter of the rows not easy: the focus is not the full mixture
    for posterior, runs in ((apart, True), (shared, False)):
        prog = _ExactProgram(y, post_mean, truth, tmp_path, seed=7)
        ctx = _ctx(posterior, prog)
        ctx.result = _result_so_far(n, ["mixis"] * n, kish, np.ones(n, bool))
        est = auto(ctx, np.arange(n))
        if runs:
            assert prog.asked == [[i for i in range(n) if i % 4]] and est.rows.size == 30
        else:
            assert prog.asked == [] and est.rows.size == 0 and est.notes == ()
            assert "100% of the rows have a plain-PSIS k-hat below 0.5" in auto.needed(ctx)[1]


def test_a_dominated_mixture_gets_a_focused_fit_over_the_other_rows(tmp_path):
    """One observation far out (y_0 = 40: its component holds all but ~1e-300 of the full
    mixture's weight): MixIS of every other row would reweight draws of that row's
    leave-one-out posterior.  `dominated` sees it from the MixIS estimates; "auto" then fits
    a mixture over every other row MixIS holds (verified or not), whose estimates match the
    closed-form LOO densities within their MCSEs over replicates; with the usual outliers
    (``_problem``: three rows at 2.5 x) the mixture is not dominated and nothing changes."""
    from types import SimpleNamespace

    from loo_adapt.estimators.focused_easy import (
        DOMINATED_DRAWS,
        EASY_FOCUS_SHARE,
        FocusedEasyMixIS,
        dominated,
    )

    def result(elpd, reliable):
        rec = SimpleNamespace(source="mixture", draws=SimpleNamespace(n_samples=4000))
        return SimpleNamespace(elpd_i=elpd, method=np.array(["mixis"] * elpd.size, object),
                               diagnostic=np.full(elpd.size, 50.0), reliable=reliable,
                               row_draws=[rec] * elpd.size)

    y, post_mean, truth = _problem(n=30)
    assert dominated(result(truth, np.ones(30, bool))) is None  # three rows at 2.5 x
    y[0] = 40.0
    post_mean = y * POST_SD**2 / SIG**2
    truth = stats.norm.logpdf(y, 0.0, np.hypot(SIG, TAU))
    reliable = np.ones(30, bool)
    reliable[[0, 7]] = False  # unverified rows are asked about too (but not the heaviest)
    top, left, n_draws = dominated(result(truth, reliable))
    assert top == 0 and left < 1e-100 < DOMINATED_DRAWS and n_draws == 4000
    rng = np.random.default_rng(8)
    theta_post = rng.normal(post_mean, POST_SD, size=(4, 500, y.size))
    posterior = read_dict({"log_lik": stats.norm.logpdf(y, theta_post, SIG)}, method="mcmc")
    # the Kish-ESS rule alone would find no easy row (every Kish ESS is 50 here)
    auto = FocusedEasyMixIS(max_low_khat_share=EASY_FOCUS_SHARE)
    z = []
    for rep in range(10):
        prog = _ExactProgram(y, post_mean, truth, tmp_path, seed=500 + rep)
        ctx = _ctx(posterior, prog, seed=rep)
        ctx.result = result(truth, reliable)
        est = auto(ctx, np.arange(30))
        assert prog.asked == [list(range(1, 30))] and est.rows.tolist() == list(range(1, 30))
        assert est.notes[-1].startswith("The full mixture left less than one of its 4000 "
                                        "draws to the observations other than 0")
        assert not est.notes[-1].endswith(".")  # summary() adds the period
        z.extend((est.elpd_i - truth[1:]) / est.mcse_elpd_i)
    rms = float(np.sqrt(np.mean(np.square(z))))
    assert 0.8 <= rms <= 1.25, rms


def test_divergent_focused_fits_are_noted_through_the_second_round(tmp_path):
    """Each focused fit's divergent transitions are named in the estimate's block notes
    (each bound to its fit's rows), the second round's beside the first's (the rounds of
    `test_rows_left_above_the_bar_...`)."""
    y, post_mean, truth = _problem()
    rng = np.random.default_rng(2)
    rows = np.argsort(np.abs(y))[:30]
    theta_post = rng.normal(post_mean, POST_SD, size=(4, 500, y.size))
    posterior = read_dict({"log_lik": stats.norm.logpdf(y, theta_post, SIG)}, method="mcmc")

    class Divergent(_ExactProgram):
        def fit_mixture(self, posterior, *, rows, seed, chains, draws):
            fit = super().fit_mixture(posterior, rows=rows, seed=seed, chains=chains,
                                      draws=draws)
            div = np.zeros((fit.n_chains, fit.n_samples // fit.n_chains))
            div[0, :len(self.asked)] = 1.0  # 1 in the first fit, 2 in the second
            fit.sample_stats["divergent__"] = div
            return fit

    prog = Divergent(y, post_mean, truth, tmp_path, seed=100)
    est = FocusedMixIS(max_mcse=0.07)(_ctx(posterior, prog, seed=0), rows)
    assert len(prog.asked) == 2
    # each bound to its own fit's block: it holds while a row keeps that fit's estimate
    notes = [(k, n) for k, n, warn in est.block_notes if "divergent" in n and not warn]
    assert len(notes) == 2 and [k for k, _ in notes] == [0, 1] and len(est.sum_mcse) == 2
    assert "focused on 30 rows had 1 divergent transition in 4000 draws" in notes[0][1]
    assert f"focused on {len(prog.asked[1])} rows had 2 divergent transitions" in notes[1][1]


def test_posterior_tree_depth_is_the_fastest_chains_median():
    from loo_adapt.estimators.focused import posterior_tree_depth

    depth = np.array([[7] * 6 + [8] * 4, [8] * 10, [9] * 7 + [10] * 3, [8] * 5 + [7] * 5])
    assert posterior_tree_depth(read_dict({"x": np.zeros((4, 10))}, method="mcmc",
                                          sample_stats={"treedepth__": depth})) == 7
    # from the leapfrog counts of full trees (2^d - 1 steps) when treedepth__ is absent
    leap = 2.0 ** np.array([[8] * 10, [9] * 10]) - 1.0
    assert posterior_tree_depth(read_dict({"x": np.zeros((2, 10))}, method="mcmc",
                                          sample_stats={"n_leapfrog__": leap})) == 8
    assert posterior_tree_depth(read_dict({"x": np.zeros((2, 10))}, method="mcmc")) is None


def test_easy_row_focus_caps_its_tree_depth_and_the_other_focus_does_not(tmp_path):
    """The easy-row focused fit is asked for the posterior's tree depth (its fastest chain's
    median); the focus on the rows above the bar, and a posterior without sampler columns,
    ask for none."""
    from loo_adapt.estimators.focused_easy import FocusedEasyMixIS

    y, post_mean, truth = _problem(n=40)
    rng = np.random.default_rng(4)
    theta_post = rng.normal(post_mean, POST_SD, size=(4, 500, y.size))
    ll = stats.norm.logpdf(y, theta_post, SIG)
    depth = np.full((4, 500), 9.0)
    depth[2] = 6.0
    with_stats = read_dict({"log_lik": ll}, method="mcmc", sample_stats={"treedepth__": depth})
    without = read_dict({"log_lik": ll}, method="mcmc")

    class Recording(_ExactProgram):
        def fit_mixture(self, posterior, *, rows, seed, chains, draws, **kw):
            self.kw = kw
            return super().fit_mixture(posterior, rows=rows, seed=seed, chains=chains,
                                       draws=draws)

    n = y.size
    for posterior, want in ((with_stats, {"max_treedepth": 6}), (without, {})):
        prog = Recording(y, post_mean, truth, tmp_path, seed=1)
        ctx = _ctx(posterior, prog, seed=0)
        ctx.result = _result_so_far(n, ["mixis"] * n, np.where(np.arange(n) < 20, 900.0, 50.0),
                                    np.ones(n, bool))
        FocusedEasyMixIS()(ctx, np.arange(n))
        assert prog.kw == want
        prog = Recording(y, post_mean, truth, tmp_path, seed=1)
        FocusedMixIS(max_mcse=0.1)(_ctx(posterior, prog, seed=0), np.arange(8))
        assert prog.kw == {}


def test_easy_row_focus_draws_within_one_posterior_fit_of_leapfrog_steps(tmp_path):
    """The easy-row fit draws 4000 per chain unless that takes more leapfrog steps than one
    posterior fit.  Posterior: 4 chains x 1000 draws at 255 steps (tree depth 8) after 1000
    warm-up iterations: 4 * 2000 * 255 = 2,040,000 steps.  A full mixture fit whose draws
    took 1023 and 127 steps alike costs (255 + 127) / 2 = 191 a draw at the cap (depth 8):
    2,040,000 / (4 * 191) - 100 warm-up = 2570, so 2500 per chain, and a note says so.  At
    63 steps a draw 4000 fit (no note); without leapfrog counts 4000; and a posterior fit
    a tenth as long leaves the floor of 2000."""
    from dataclasses import replace
    from types import SimpleNamespace

    from loo_adapt.estimators.focused_easy import (
        EASY_FOCUS_BUDGET,
        EASY_FOCUS_MIN_DRAWS,
        FocusedEasyMixIS,
        posterior_leapfrog,
    )

    assert (EASY_FOCUS_BUDGET, EASY_FOCUS_MIN_DRAWS) == (1.0, 2000)
    y, post_mean, truth = _problem(n=40)
    n = y.size
    rng = np.random.default_rng(4)

    def posterior(n_draws, warmup):
        theta = rng.normal(post_mean, POST_SD, size=(4, n_draws, n))
        d = read_dict({"log_lik": stats.norm.logpdf(y, theta, SIG)}, method="mcmc",
                      sample_stats={"n_leapfrog__": np.full((4, n_draws), 255.0),
                                    "treedepth__": np.full((4, n_draws), 8.0)})
        return replace(d, config={"num_warmup": warmup})

    full_post = posterior(1000, 1000)
    assert posterior_leapfrog(full_post) == 4 * 2000 * 255

    class Recording(_ExactProgram):
        def fit_mixture(self, posterior, *, rows, seed, chains, draws, **kw):
            self.draws = draws
            return super().fit_mixture(posterior, rows=rows, seed=seed, chains=chains,
                                       draws=draws)

    def run(post, leap):
        full = None if leap is None else SimpleNamespace(
            sample_stats={"n_leapfrog__": np.asarray(leap, dtype=float)}, config={})
        records = [SimpleNamespace(source="mixture", draws=full)] * n
        prog = Recording(y, post_mean, truth, tmp_path, seed=1)
        ctx = _ctx(post, prog, seed=0)
        ctx.result = _result_so_far(n, ["mixis"] * n, np.where(np.arange(n) < 20, 900.0, 50.0),
                                    np.ones(n, bool))
        ctx.result.row_draws = records
        est = FocusedEasyMixIS()(ctx, np.arange(n))
        return prog.draws, [t for t in est.notes if "draws per chain" in t]

    mixed = np.tile([1023.0, 127.0], (4, 500))
    draws, notes = run(full_post, mixed)
    assert draws == 2500 and len(notes) == 1 and "drew 2500 draws per chain, not 4000" in notes[0]
    assert "191 leapfrog steps per draw (tree depth 8)" in notes[0]
    assert run(full_post, np.full((4, 1000), 63.0)) == (4000, [])
    assert run(full_post, None) == (4000, [])
    assert run(posterior(100, 100), mixed)[0] == EASY_FOCUS_MIN_DRAWS


def test_the_first_focus_is_sized_from_the_mixis_stages_fit_not_the_easy_focus():
    """`_full_mixture` finds the fit the MixIS stage used through a row it still holds:
    after an easy-row focus re-estimated most rows from its own fit (draws near the
    posterior, missing the hard rows' components), the full mixture's draws are still the
    ones the hard rows' first focus is sized from; with every row re-estimated since, none."""
    from types import SimpleNamespace

    from loo_adapt.estimators.focused import _full_mixture

    n = 6
    full, easy = object(), object()
    rows = np.arange(n)
    history = [{"estimator": "psis", "rows": rows, "accepted": np.ones(n, bool)},
               {"estimator": "mixis", "rows": rows, "accepted": np.ones(n, bool)},
               {"estimator": "mixis_focused_easy", "rows": rows[:4],
                "accepted": np.ones(4, bool)}]
    records = [SimpleNamespace(source="mixture", draws=easy)] * 4 + \
        [SimpleNamespace(source="mixture", draws=full)] * 2
    got = _full_mixture(SimpleNamespace(history=history, row_draws=records))
    assert got is full
    history[2] = {"estimator": "mixis_focused_easy", "rows": rows, "accepted": np.ones(n, bool)}
    records = [SimpleNamespace(source="mixture", draws=easy)] * n
    assert _full_mixture(SimpleNamespace(history=history, row_draws=records)) is None
    # a row the easy focus tried but did not accept stays the MixIS stage's
    history[2] = {"estimator": "mixis_focused_easy", "rows": rows,
                  "accepted": np.array([1, 1, 1, 1, 1, 0], bool)}
    records = [SimpleNamespace(source="mixture", draws=easy)] * 5 + \
        [SimpleNamespace(source="mixture", draws=full)]
    assert _full_mixture(SimpleNamespace(history=history, row_draws=records)) is full
    # rows the easy focus wrote but whose draws records it passed on (its shift of the rows
    # the full mixture keeps: ``new_record`` False) still hold the full mixture's draws; its
    # own rows do not
    history = [{"estimator": "mixis", "rows": rows, "accepted": np.ones(n, bool)},
               {"estimator": "mixis_focused_easy", "rows": rows, "accepted": np.ones(n, bool)}]
    records = [SimpleNamespace(source="mixture", draws=easy)] * 4 + \
        [SimpleNamespace(source="mixture", draws=full)] * 2
    history[1]["new_record"] = np.r_[np.ones(4, bool), np.zeros(2, bool)]
    assert _full_mixture(SimpleNamespace(history=history, row_draws=records)) is full
    history[1]["new_record"] = np.ones(n, bool)
    assert _full_mixture(SimpleNamespace(history=history, row_draws=records)) is None


def _missing_chains(y, post_mean, truth, rng, extra):
    """The full mixture's chains with a miss they all share: a share ``extra`` of the draws
    stays at the posterior (no observation left out), so every row's leave-one-out tail is
    under-sampled alike and every MixIS estimate errs optimistic."""
    theta = _chains(y, post_mean, truth, np.arange(y.size), rng, draws=4000)
    stay = rng.uniform(size=theta.shape[:2]) < extra
    theta[stay] = rng.normal(post_mean, POST_SD, size=(int(stay.sum()), y.size))
    return read_dict({"log_lik": stats.norm.logpdf(y, theta, SIG)}, method="mcmc")


class _ExactProgramAllDraws(_ExactProgram):
    """`_ExactProgram` drawing as many draws per chain as it is asked for."""

    def fit_mixture(self, posterior, *, rows, seed, chains, draws):
        self.asked.append(np.asarray(rows).tolist())
        self.draws_asked.append(draws)
        rng = np.random.default_rng(self.seed)
        theta = _chains(self.y, self.post_mean, self.truth, np.asarray(rows), rng,
                        chains=chains, draws=draws)
        return read_dict({"log_lik": stats.norm.logpdf(self.y, theta, SIG)}, method="mcmc")


def _full_then_easy(y, post_mean, truth, posterior, full, tmp_path, seed):
    """The fold's first two stages on ``full`` (MixIS over every row, then the easy-row focus
    on the half of the rows with the larger Kish ESS, drawn exactly): the merged result, the
    rows the full mixture keeps and the focus's estimate."""
    from loo_adapt.estimators.base import Stage, run_stages
    from loo_adapt.estimators.focused_easy import FocusedEasyMixIS
    from loo_adapt.estimators.mixis import MixIS
    from loo_adapt.estimators.psis import initial_result

    prog = _ExactProgramAllDraws(y, post_mean, truth, tmp_path, seed=seed)
    ctx = _ctx(posterior, prog, seed=seed)
    ctx.mixture_fn = lambda: full
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = run_stages(ctx, initial_result(ctx.base, draws=posterior),
                           [Stage(MixIS(pool_khat=None), rows="all", accept="all")])
        ctx.result = first
        easy = FocusedEasyMixIS(min_kish=float(np.median(first.diagnostic)))
        est = easy(ctx, np.arange(y.size))
    focused = np.asarray([r for r, m in zip(est.rows, est.method) if r in prog.asked[0]])
    kept = np.setdiff1d(np.flatnonzero(first.method == "mixis"), focused)
    return first, first.merge(est), kept, est


def test_rows_the_full_mixture_keeps_are_moved_by_the_miss_the_easy_focus_shows(tmp_path):
    """The full mixture's chains share a miss (8 % of their draws stuck at the posterior:
    every row optimistic, which no MCSE from those draws sees).  The easy-row focus, drawn
    exactly, re-estimates half the rows and disagrees with the full mixture; the verified
    rows of the other half, still held from the full mixture, are moved by the mean
    difference, half of it for all (the middle of the range from none to all of it), their
    pointwise MCSEs kept.  Against the closed-form
    truth their summed error then shrinks in every replicate and is within the MCSE of
    their sum (widened for what the shift may miss: rms z over replicates at most 1.25),
    where the full mixture's own MCSE of that sum is far too small (rms z above 2).  On a
    full mixture drawn exactly the shift is noise, and the summed error stays within that
    MCSE."""
    from loo_adapt.estimators.focused import _WithSharedOffset

    y, post_mean, truth = _problem(n=40)
    rng = np.random.default_rng(7)
    theta_post = rng.normal(post_mean, POST_SD, size=(4, 1000, y.size))
    posterior = read_dict({"log_lik": stats.norm.logpdf(y, theta_post, SIG)}, method="mcmc")

    def run(full, seed):
        first, merged, kept, est = _full_then_easy(y, post_mean, truth, posterior, full,
                                                   tmp_path, seed=seed)
        ver = first.reliable[kept]
        before = float(np.sum(first.elpd_i[kept] - truth[kept]))
        after = float(np.sum(merged.elpd_i[kept] - truth[kept]))
        b_old = first.mcse_blocks[first.row_block[kept[0]]]
        b_new = merged.mcse_blocks[merged.row_block[kept[0]]]
        assert isinstance(b_new[1], _WithSharedOffset)
        assert (merged.row_block[kept] == merged.row_block[kept[0]]).all()
        # one shift for all the verified kept rows (none for a row above the bar, whose
        # selection leans the other way); pointwise MCSEs, verification and draws kept
        shift = merged.elpd_i[kept] - first.elpd_i[kept]
        assert ver.sum() >= kept.size - 2 and shift[ver][0] != 0
        np.testing.assert_allclose(shift[ver], shift[ver][0], atol=1e-12)
        np.testing.assert_array_equal(shift[~ver], 0.0)
        for col in ("mcse_elpd_i", "reliable", "verified_by"):
            np.testing.assert_array_equal(getattr(merged, col)[kept], getattr(first, col)[kept])
        assert all(merged.row_draws[i] is first.row_draws[i] for i in kept)
        assert merged.mcse_total > first.mcse_total
        assert any("are moved by" in n for n in merged.notes)
        m = first.mcse_elpd_i[kept]
        pointwise.append(((first.elpd_i[kept] - truth[kept]) / m,
                          (merged.elpd_i[kept] - truth[kept]) / m))
        return (before / b_old[1](np.isin(b_old[0], kept)), before,
                after / b_new[1](np.ones(kept.size, dtype=bool)), after)

    pointwise = []
    missed = [run(_missing_chains(y, post_mean, truth, rng, extra=0.08), 500 + rep)
              for rep in range(8)]
    z_old, before, z_new, after = (np.array(v) for v in zip(*missed))
    assert np.all(before > 0)  # the miss: the kept rows optimistic together
    assert np.sqrt(np.mean(z_old ** 2)) > 2.0, z_old
    assert np.all(np.abs(after) < before), (before, after)
    assert np.sqrt(np.mean(z_new ** 2)) <= 1.25, z_new
    # row by row too, with their own MCSEs kept: closer to the truth (rms z 1.28 -> 1.05)
    zp_old, zp_new = (np.concatenate(v) for v in zip(*pointwise))
    assert np.sqrt(np.mean(zp_new ** 2)) < np.sqrt(np.mean(zp_old ** 2)) - 0.1
    assert np.sqrt(np.mean(zp_new ** 2)) <= 1.25
    exact = [run(_missing_chains(y, post_mean, truth, rng, extra=0.0), 600 + rep)
             for rep in range(8)]
    z_exact = np.array([e[2] for e in exact])
    assert np.sqrt(np.mean(z_exact ** 2)) <= 1.25, z_exact


def _sum_mcse(est, n):
    """The MCSE of ``est``'s sum over its rows, as `PointwiseLoo.merge` holds its blocks: its
    total once merged into a result of ``n`` rows that carries no other error."""
    from loo_adapt.result import PointwiseLoo

    zeros = np.zeros(n)
    return PointwiseLoo(zeros, zeros, zeros, zeros, zeros, 0.7, 4000,
                        np.ones(n)).merge(est).mcse_total


def test_the_rows_a_focused_fit_keeps_are_moved_by_what_its_second_fit_shows(tmp_path):
    """The 30-row focus at a bar of 0.07, 13 of its rows above the bar a fit: a row whose
    draws missed its leave-one-out tail looks verified and errs optimistic, one whose draws
    caught it lands above the bar, so the rows the first fit keeps lean up.  Against the
    closed-form LOO densities over 40 replicates, those rows and the second fit's summed
    +0.53 (se 0.06) without the move; with it the sum over the 30 rows is within its own
    error (mean within 2.5 standard errors of zero, rms z of the sums in [0.7, 1.25]), and
    the kept rows' moves bring them closer to the truth row by row (rms z)."""
    y, post_mean, truth = _problem()
    rng = np.random.default_rng(2)
    rows = np.argsort(np.abs(y))[:30]
    theta_post = rng.normal(post_mean, POST_SD, size=(4, 500, y.size))
    posterior = read_dict({"log_lik": stats.norm.logpdf(y, theta_post, SIG)}, method="mcmc")
    sums, z_sum, z_before, z_after = [], [], [], []
    for rep in range(40):
        prog = _Honest(y, post_mean, truth, tmp_path, seed=500 + rep)
        first = FocusedMixIS(max_mcse=0.07, rounds=1)(_ctx(posterior, prog, seed=rep), rows)
        prog = _Honest(y, post_mean, truth, tmp_path, seed=500 + rep)
        est = FocusedMixIS(max_mcse=0.07)(_ctx(posterior, prog, seed=rep), rows)
        assert len(prog.asked) == 2
        kept = first.reliable
        assert any(n.startswith(f"The {(~kept).sum()} rows the mixture fit focused on 30 "
                                "rows left above the bar") for n in est.notes)
        err = est.elpd_i - truth[rows]
        sums.append(err.sum())
        z_sum.append(err.sum() / _sum_mcse(est, y.size))
        z_before.extend((first.elpd_i[kept] - truth[rows[kept]]) / first.mcse_elpd_i[kept])
        z_after.extend(err[kept] / est.mcse_elpd_i[kept])
    sums = np.asarray(sums)
    assert abs(sums.mean()) < 2.5 * sums.std(ddof=1) / np.sqrt(sums.size), sums.mean()
    rms = float(np.sqrt(np.mean(np.square(z_sum))))
    assert 0.7 <= rms <= 1.25, rms
    before, after = (float(np.sqrt(np.mean(np.square(z)))) for z in (z_before, z_after))
    assert after < before, (before, after)


def test_the_move_keeps_a_binary_rows_density_at_most_one():
    """A kept row of a 0 / 1 outcome at elpd -0.001 (MCSE 0.01), where the rows fitted again
    came out 0.3 lower in the second fit: moved up by its MCSE it would claim a LOO density
    above one; it stops at elpd 0, where the other kept row (a count) moves by its MCSE."""
    from loo_adapt.estimators.estimate import Estimate
    from loo_adapt.estimators.focused import _kept_rows_move

    def est(elpd, mcse, reliable):
        n = len(elpd)
        return Estimate.make("mixis_focused", np.arange(n), np.asarray(elpd, float),
                             np.asarray(mcse, float), np.asarray(reliable),
                             sum_mcse=((np.arange(n), lambda held: 0.1 * np.sqrt(held.sum())),))

    first = est([-0.001, -1.0, -2.0], [0.01, 0.01, 0.2], [True, True, False])
    second = est([-2.3], [0.05], [True])
    again = np.array([False, False, True])
    keep, step, _, note = _kept_rows_move(first, second, again, y=np.array([1, 3, 0]))
    np.testing.assert_array_equal(keep, [True, True, False])
    np.testing.assert_allclose(step, [0.001, 0.01])  # capped at -elpd, and at its MCSE
    assert "(not +0.3: by no more than its MCSE, 1 row of a 0 / 1 outcome to an elpd of 0)" in note
