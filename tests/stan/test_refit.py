"""Exact LOO by refitting: truth files, MCSE, parallel = serial, limits, refit_fn paths."""

import json
import logging
import os
import pathlib
import types
import warnings

import numpy as np
import pytest
from scipy import stats

import loo_adapt.stan.heldout as heldout_mod
import loo_adapt.stan.refit as refit_mod
from loo_adapt.core.ess_split import ess_bulk, rhat_rank
from loo_adapt.result import PointwiseLoo
from loo_adapt.stan.program import StanProgram
from loo_adapt.stan.refit import RefitResult, heldout_elpd, refit_loo

HERE = pathlib.Path(__file__).resolve().parents[1]
TRUTH = HERE / "data" / "cmdstan" / "truth" / "logistic_normal.csv"
DATA_JSON = HERE / "data" / "cmdstan" / "logistic_normal.data.json"
BUNDLED = HERE.parent / "stan_models" / "logistic_normal.stan"

# Conjugate normal model y_j ~ N(mu, 1), mu ~ N(0, TAU^2): the exact LOO predictive density
# is N(y_i | m_-i, 1 + v_-i), an independent reference for the refit_fn paths.
TAU = 10.0
Y_CONJ = np.array([0.3, -1.2, 0.8, 4.5, 0.1, -0.4, 1.1, 0.6])


def _posterior_without(i):
    rest = np.delete(Y_CONJ, i)
    prec = 1.0 / TAU**2 + rest.size
    return rest.sum() / prec, 1.0 / prec


def exact_elpd(i):
    m, v = _posterior_without(i)
    return stats.norm.logpdf(Y_CONJ[i], loc=m, scale=np.sqrt(1.0 + v))


def conj_refit(i, seed):
    """Module level, so that it pickles into worker processes."""
    m, v = _posterior_without(i)
    mu = np.random.default_rng(seed).normal(m, np.sqrt(v), size=(4, 500))
    return stats.norm.logpdf(Y_CONJ[i], loc=mu, scale=1.0)


class _FakeDataArray:
    def __init__(self, values):
        self.values = values


class FakeWrapper:
    """The arviz SamplingWrapper duck type, for the conjugate model (no PyMC needed)."""

    def __init__(self, seed=0):
        self.seed = seed
        self.calls = []

    def sel_observations(self, idx):
        self.calls.append(int(idx))
        return np.delete(Y_CONJ, idx), Y_CONJ[idx]

    def sample(self, modified_observed_data):
        prec = 1.0 / TAU**2 + modified_observed_data.size
        m, v = modified_observed_data.sum() / prec, 1.0 / prec
        rng = np.random.default_rng(self.seed + len(self.calls))
        return rng.normal(m, np.sqrt(v), size=(4, 500))

    def get_inference_data(self, fitted_model):
        return {"mu": fitted_model}

    def log_likelihood__i(self, excluded_obs, idata__i):
        return _FakeDataArray(stats.norm.logpdf(excluded_obs, loc=idata__i["mu"], scale=1.0))


# ------------------------------------------------------------------------------- truth files
@pytest.fixture(scope="module")
def program():
    pytest.importorskip("stanli")
    data = json.loads(DATA_JSON.read_text())
    data["mixis"] = 0  # the fixture data predates the flag of the bundled program
    return StanProgram(BUNDLED, data, backend="stanli")


def test_refit_matches_brute_force_truth_and_parallel_equals_serial(program, caplog):
    truth = np.loadtxt(TRUTH, delimiter=",", skiprows=1)
    idx = [46, 23, 2]  # the hardest observation (elpd -4.6), a y = 0 one, an easy one
    with caplog.at_level(logging.INFO, logger="loo_adapt.stan.refit"):
        par = refit_loo(idx, program, seed=7, n_jobs=2, progress=False)
    assert par.refitted.all() and par.not_refitted.size == 0
    np.testing.assert_array_equal(par.seeds, [53, 30, 9])
    np.testing.assert_array_equal(par.n_samples, 4000)
    t_elpd, t_se, t_p1 = truth[idx, 1], truth[idx, 2], truth[idx, 3]
    tol = 4.0 * np.sqrt(par.mcse_elpd_i**2 + t_se**2) + 0.01
    assert np.all(np.abs(par.elpd_i - t_elpd) < tol), (par.elpd_i, t_elpd, tol)
    assert np.all(par.mcse_elpd_i > 0) and np.all(par.mcse_elpd_i < 0.2)
    assert np.all((par.ess > 200) & (par.ess < 16000))
    p_tol = 4.0 * np.exp(t_elpd) * np.sqrt(par.mcse_elpd_i**2 + t_se**2) + 0.005
    assert np.all(np.abs(par.loo_prob - t_p1) < p_tol), (par.loo_prob, t_p1)
    # the time estimate is reported before the remaining refits, from the first one's time
    msgs = [r.getMessage() for r in caplog.records if r.name == "loo_adapt.stan.refit"]
    assert len(msgs) == 1 and "estimated" in msgs[0] and "remaining 2 refit(s)" in msgs[0]
    assert par.estimated_seconds_total == pytest.approx(par.seconds[0] * (1 + 2 / 2))

    ser = refit_loo(idx, program, seed=7, n_jobs=1, progress=False)
    for a, b in zip(par.log_lik, ser.log_lik):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(par.elpd_i, ser.elpd_i)
    np.testing.assert_array_equal(par.mcse_elpd_i, ser.mcse_elpd_i)


def test_refit_fn_takes_precedence_and_program_supplies_y(program):
    y = np.asarray(program.data["y"])
    i0, i1 = int(np.flatnonzero(y == 0)[0]), int(np.flatnonzero(y == 1)[0])
    res = refit_loo([i0, i1], program, refit_fn=lambda i: np.log(np.full(40, 0.25)),
                    n_jobs=1, progress=False)
    np.testing.assert_allclose(res.elpd_i, np.log(0.25), rtol=1e-15)
    np.testing.assert_allclose(res.loo_prob, [0.75, 0.25], rtol=1e-15)
    np.testing.assert_array_equal(res.mcse_elpd_i, 0.0)  # constant likelihood
    with pytest.raises(IndexError, match="N = 54"):
        refit_loo([54], program, progress=False)


# ------------------------------------------------------------------------------- MCSE
def _ar1(rng, phi, shape):
    x = np.empty(shape)
    x[..., 0] = rng.normal(size=shape[:-1])
    eps = rng.normal(size=shape) * np.sqrt(1.0 - phi**2)
    for t in range(1, shape[-1]):
        x[..., t] = phi * x[..., t - 1] + eps[..., t]
    return x


@pytest.mark.parametrize("phi", [0.0, 0.9])
def test_mcse_matches_spread_over_replications(phi):
    rng = np.random.default_rng(1 + int(10 * phi))
    reps = 300
    x = _ar1(rng, phi, (reps, 4, 250))
    ll = stats.norm.logpdf(1.5, loc=x, scale=0.7)  # heavy-ish right tail of exp(ll)
    est = np.array([heldout_elpd(ll[r]) for r in range(reps)])
    elpd, mcse, ess = est.T
    exact = np.log(stats.norm.pdf(1.5, scale=np.sqrt(1 + 0.49)))
    assert abs(elpd.mean() - exact) < 4 * elpd.std() / np.sqrt(reps)
    assert 0.85 < mcse.mean() / elpd.std(ddof=1) < 1.15
    if phi > 0:
        # ignoring the autocorrelation would understate the error by far
        naive = np.array([np.std(np.exp(v - e), ddof=1) / np.sqrt(v.size)
                          for v, e in zip(ll, elpd)])
        assert naive.mean() / elpd.std(ddof=1) < 0.5
        assert ess.mean() < 250
    else:
        assert 800 < ess.mean() < 1200


def test_mcse_of_a_skewed_heldout_likelihood_is_widened():
    """A held-out likelihood with rare large values (ll i.i.d. N(0, 2^2): exp(ll) log-normal,
    log E = 2 exactly): the delta method alone gives rms z 1.25 over replicates (the sweep
    met a refit row whose MCSE was half its spread); widened for the skew of exp(ll) it is
    near 1 (1.11 here)."""
    rng = np.random.default_rng(3)
    z = []
    for _ in range(300):
        elpd, mcse, _ = heldout_elpd(rng.normal(0.0, 2.0, size=(4, 1000)))
        z.append((elpd - 2.0) / mcse)
    rms = float(np.sqrt(np.mean(np.square(z))))
    assert 0.9 < rms < 1.2, rms


def test_heldout_elpd_is_stable_and_checks_input():
    ll = np.full((2, 10), -800.0)  # exp underflows; the log-space estimate does not
    ll[0, 0] = -799.0
    elpd, mcse, _ = heldout_elpd(ll)
    assert elpd == pytest.approx(-800.0 + np.log((np.e + 19) / 20), abs=1e-12)
    assert np.isfinite(mcse) and mcse > 0
    with pytest.raises(ValueError, match="NaN"):
        heldout_elpd(np.r_[np.zeros(9), np.nan])
    with pytest.raises(ValueError, match="at least 4 draws"):
        heldout_elpd(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="-inf"):
        heldout_elpd(np.full(8, -np.inf))


# ------------------------------------------------------------------------------- refit_fn
def test_refit_fn_callable_parallel_serial_and_exact():
    idx = [3, 0, 6, 1]
    par = refit_loo(idx, refit_fn=conj_refit, seed=11, n_jobs=2, progress=False)
    ser = refit_loo(idx, refit_fn=conj_refit, seed=11, n_jobs=1, progress=False)
    np.testing.assert_array_equal(par.elpd_i, ser.elpd_i)
    np.testing.assert_array_equal(par.seeds, np.array(idx) + 11)
    exact = np.array([exact_elpd(i) for i in idx])
    assert np.all(np.abs(par.elpd_i - exact) < 4 * par.mcse_elpd_i)
    assert np.isnan(par.loo_prob).all()  # not a binary outcome
    # an observation far from the others (y = 4.5) is the one with the largest error
    assert par.mcse_elpd_i[0] == par.mcse_elpd_i.max()


def test_refit_fn_fake_sampling_wrapper():
    wrapper = FakeWrapper(seed=5)
    res = refit_loo([6, 3], refit_fn=wrapper, n_jobs=1, progress=False)
    assert wrapper.calls == [6, 3]
    exact = np.array([exact_elpd(6), exact_elpd(3)])
    assert np.all(np.abs(res.elpd_i - exact) < 4 * res.mcse_elpd_i)
    assert [a.shape for a in res.log_lik] == [(4, 500), (4, 500)]

    class Incomplete(FakeWrapper):
        def check_implemented_methods(self, methods):
            return ["log_likelihood__i"]

    with pytest.raises(TypeError, match="does not implement"):
        refit_loo([1], refit_fn=Incomplete(), progress=False)
    with pytest.raises(TypeError, match="lacks"):
        refit_loo([1], refit_fn=object(), progress=False)


def test_refit_fn_errors_name_the_observation():
    def bad(i):
        return np.full(40, np.nan) if i == 2 else np.zeros(40)

    # a refit returning NaN no longer aborts the run: its row is unverified with the reason
    with pytest.warns(UserWarning, match="1 of 2 refit"):
        res = refit_loo([0, 2], refit_fn=bad, n_jobs=1, progress=False)
    assert res.reliable.tolist() == [True, False]
    assert res.status.tolist() == ["ok", "error"]
    assert "NaN" in res.reason[1] and "observation 2" in res.reason[1]
    assert res.elpd_i[0] == 0.0 and np.isnan(res.elpd_i[1])
    with pytest.raises(ValueError, match="program= .* or refit_fn="):
        refit_loo([0], progress=False)
    with pytest.raises(ValueError, match="duplicates"):
        refit_loo([0, 0], refit_fn=bad, progress=False)
    with pytest.raises(IndexError, match="out of range"):
        refit_loo([8], refit_fn=bad, y=np.zeros(8, dtype=int), progress=False)


# ------------------------------------------------------------------------------- limits
class _FakeClock:
    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now


def test_limits_leave_the_right_observations_out(monkeypatch, caplog):
    clock = _FakeClock()
    fake_time = types.SimpleNamespace(perf_counter=clock.perf_counter)
    monkeypatch.setattr(refit_mod, "time", fake_time)  # the budget
    monkeypatch.setattr(heldout_mod, "time", fake_time)  # each refit's own time (the job)
    cost = {7: 10.0, 3: 10.0, 9: 30.0, 1: 10.0, 5: 10.0}
    calls = []

    def slow(i):  # a closure: cannot be pickled, so it runs serially with a warning
        calls.append(i)
        clock.now += cost[i]
        return conj_refit(i % 8, seed=i)

    # budget 25 s, first refit 10 s: one more fits, three are left out
    with caplog.at_level(logging.INFO, logger="loo_adapt.stan.refit"):
        with pytest.warns(UserWarning, match="3 of 5 observations were not refitted"):
            res = refit_loo([7, 3, 9, 1, 5], refit_fn=slow, n_jobs=1, max_seconds=25,
                            progress=False)
    assert calls == [7, 3]
    np.testing.assert_array_equal(res.refitted, [True, True, False, False, False])
    np.testing.assert_array_equal(res.not_refitted, [9, 1, 5])
    assert res.estimated_seconds_total == 50.0 and res.estimated_seconds_planned == 20.0
    assert np.isnan(res.elpd_i[2:]).all() and np.isfinite(res.elpd_i[:2]).all()
    msg = caplog.records[-1].getMessage()
    assert "took 10.00 s" in msg and "estimated 10.0 s for the remaining 1" in msg
    assert "all 5 would take about 50.0 s" in msg

    # budget 45 s: three more are scheduled, but observation 9 takes 30 s, so the hard stop
    # drops the rest once the budget is spent
    calls.clear()
    clock.now = 0.0
    with pytest.warns(UserWarning, match="2 of 5"):
        res = refit_loo([7, 3, 9, 1, 5], refit_fn=slow, n_jobs=1, max_seconds=45,
                        progress=False)
    assert calls == [7, 3, 9]
    np.testing.assert_array_equal(res.not_refitted, [1, 5])

    calls.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = refit_loo([1, 5, 3, 7], refit_fn=slow, n_jobs=2, max_refits=3, progress=False)
    messages = [str(w.message) for w in caught]
    assert any("cannot be sent to worker processes" in m for m in messages)
    assert any("1 of 4 observations were not refitted" in m for m in messages)
    assert calls == [1, 5, 3]
    np.testing.assert_array_equal(res.not_refitted, [7])

    with pytest.warns(UserWarning, match="3 of 3"):
        res = refit_loo([1, 5, 3], refit_fn=slow, max_refits=0, progress=False)
    assert res.n_refitted == 0 and res.estimated_seconds_total == 0.0



def test_resumed_run_announces_the_resumed_refits_time(tmp_path, caplog):
    """A run that resumes finished refits announces their median time in plain words (it said
    "a previous refit refit took")."""
    ck = tmp_path / "ck"
    with pytest.warns(UserWarning, match="2 of 3 observations were not refitted"):
        first = refit_loo([0, 1, 2], refit_fn=conj_refit, seed=1, n_jobs=1, max_refits=1,
                          checkpoint=ck, progress=False)
    assert first.n_refitted == 1
    with caplog.at_level(logging.INFO, logger="loo_adapt.stan.refit"):
        again = refit_loo([0, 1, 2], refit_fn=conj_refit, seed=1, n_jobs=1, checkpoint=ck,
                          progress=False)
    assert again.n_refitted == 3 and again.seconds[0] == first.seconds[0]
    msgs = [r.getMessage() for r in caplog.records if "estimated" in r.getMessage()]
    assert len(msgs) == 1, msgs
    took = f"{first.seconds[0]:.2f} s (median)"
    assert msgs[0].startswith(f"refit_loo: the refits resumed from the checkpoint took {took}")
    assert "for the remaining 2 refit(s)" in msgs[0] and "refit refit" not in msgs[0]


# ------------------------------------------------------------------------------- to_estimate
def test_to_estimate_merged_into_pointwise_loo():
    n = 8
    rng = np.random.default_rng(3)
    lpd = -rng.uniform(0.1, 1.0, n)
    base = PointwiseLoo(
        elpd_i=lpd - 0.05, p_loo_i=np.full(n, 0.05), lpd_i=lpd, mcse_elpd_i=np.full(n, 0.01),
        pareto_k=np.linspace(0.1, 1.2, n), good_k=0.7, n_samples=1000, r_eff=1.0,
        method=np.array(["psis"] * n),  # a fixed-width string array must not truncate
    )
    y = (Y_CONJ > 0).astype(int)
    res = refit_loo([7, 1], refit_fn=conj_refit, y=y, seed=1, n_jobs=1, progress=False)
    assert isinstance(res, RefitResult)
    assert list(y[[7, 1]]) == [1, 0]
    np.testing.assert_allclose(res.loo_prob, [np.exp(res.elpd_i[0]),
                                              1.0 - np.exp(res.elpd_i[1])], rtol=1e-15)
    khat = base.pareto_k.copy()
    out = base.merge(res.to_estimate())
    assert out is not base
    assert list(out.method) == ["psis", "refit"] + ["psis"] * 5 + ["refit"]
    np.testing.assert_array_equal(out.elpd_i[[7, 1]], res.elpd_i)
    np.testing.assert_allclose(out.p_loo_i[[7, 1]], lpd[[7, 1]] - res.elpd_i)
    np.testing.assert_array_equal(out.mcse_elpd_i[[7, 1]], res.mcse_elpd_i)
    np.testing.assert_array_equal(out.diagnostic[[7, 1]], res.ess)
    assert np.isnan(out.pareto_k_after[[7, 1]]).all() and np.isnan(out.diagnostic[0])
    np.testing.assert_array_equal(out.pareto_k, khat)
    np.testing.assert_array_equal(out.loo_prob[[7, 1]], res.loo_prob)
    assert not out.unreliable[7]  # a refit is never flagged, whatever its k-hat was
    assert out.unreliable[6]
    assert np.isclose(out.estimates()["elpd_loo"], out.elpd_i.sum())
    # outcomes known to the result only: loo_prob is still filled in
    with_y = PointwiseLoo(
        elpd_i=lpd.copy(), p_loo_i=np.zeros(n), lpd_i=lpd, mcse_elpd_i=np.zeros(n),
        pareto_k=np.ones(n), good_k=0.7, n_samples=1000, r_eff=1.0, y=y.astype(float),
    )
    res_no_y = refit_loo([7, 1], refit_fn=conj_refit, seed=1, n_jobs=1, progress=False)
    assert np.isnan(res_no_y.loo_prob).all()
    np.testing.assert_allclose(with_y.merge(res_no_y.to_estimate(y=with_y.y)).loo_prob[[7, 1]],
                               res.loo_prob, rtol=1e-15)
    small = PointwiseLoo(elpd_i=np.zeros(3), p_loo_i=np.zeros(3), lpd_i=np.zeros(3),
                         mcse_elpd_i=np.zeros(3), pareto_k=np.zeros(3), good_k=0.7,
                         n_samples=10, r_eff=1.0)
    with pytest.raises(IndexError, match="3 observations"):
        small.merge(res.to_estimate())


# ------------------------------------------------------------------------------- executors
def test_thread_executor_and_default_pool_equal_serial():
    from concurrent.futures import ThreadPoolExecutor

    idx = [5, 2, 7, 0]
    ser = refit_loo(idx, refit_fn=conj_refit, seed=13, n_jobs=1, progress=False)
    with ThreadPoolExecutor(max_workers=2) as ex:
        thr = refit_loo(idx, refit_fn=conj_refit, seed=13, executor=ex, progress=False)
    default = refit_loo(idx, refit_fn=conj_refit, seed=13, progress=False)
    for res in (thr, default):
        np.testing.assert_array_equal(res.elpd_i, ser.elpd_i)
        np.testing.assert_array_equal(res.mcse_elpd_i, ser.mcse_elpd_i)
        assert res.reliable.all()
    assert thr.workers == 2
    exact = np.array([exact_elpd(i) for i in idx])
    assert np.all(np.abs(ser.elpd_i - exact) < 4 * ser.mcse_elpd_i)


def sleepy_refit(i, seed):
    import time as _time

    _time.sleep(30 if i == 1 else 0)
    return conj_refit(i, seed)


def test_thread_executor_timeout_abandons_the_task():
    from concurrent.futures import ThreadPoolExecutor

    ex = ThreadPoolExecutor(max_workers=2)
    try:
        with pytest.warns(UserWarning, match="1 of 3 refit"):
            res = refit_loo([0, 1, 2], refit_fn=sleepy_refit, executor=ex, timeout=1.0,
                            progress=False)
    finally:
        ex.shutdown(wait=False, cancel_futures=True)
    assert res.status.tolist() == ["ok", "timeout", "ok"]
    assert "cannot stop a running task" in res.reason[1]
    assert res.reliable.tolist() == [True, False, True]


def test_dask_local_cluster_runs_the_refits_on_its_workers():
    distributed = pytest.importorskip("distributed")
    idx = [3, 6, 1, 4]
    ser = refit_loo(idx, refit_fn=conj_refit, seed=5, n_jobs=1, progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        res = refit_loo(idx, refit_fn=conj_refit, seed=5, executor=client, progress=False)
        worker_pids = set(client.run(os.getpid).values())
    np.testing.assert_array_equal(res.elpd_i, ser.elpd_i)
    assert res.reliable.all() and res.workers == 2
    assert len(worker_pids) == 2 and os.getpid() not in worker_pids


# ------------------------------------------------------------------------------- scheduling
class SleepyProgram(StanProgram):
    """A fake backend: compiling takes COMPILE s, a refit REFIT s, a refit before any compile
    fails (so a worker that had to compile would show up as an error row)."""

    COMPILE, REFIT = 0.6, 0.25
    compiles = 0

    def compiled(self):
        import copy
        import time as _time

        _time.sleep(self.COMPILE)
        SleepyProgram.compiles += 1
        out = copy.copy(self)
        out.is_compiled = True
        return out

    def refit_without(self, i, *, seed, chains=4, draws=1000, warmup=1000,
                      parallel_chains=None):
        import time as _time

        from loo_adapt.draws import Draws

        if not getattr(self, "is_compiled", False):
            raise RuntimeError("refit in a worker before compiling")
        _time.sleep(self.REFIT)
        mu = np.random.default_rng(seed).normal(size=(chains, draws))
        return Draws({"mu": mu}, sample_stats={"divergent__": np.zeros((chains, draws))})

    def heldout_log_lik(self, refit_draws, i, *, method="auto"):
        return stats.norm.logpdf(0.5, loc=refit_draws["mu"], scale=1.0).reshape(-1)


def test_compile_once_and_estimate_from_a_refit_that_did_not_compile(program):
    fake = SleepyProgram(BUNDLED, program.data, backend="stanli")
    SleepyProgram.compiles = 0
    res = refit_loo([0, 1, 2, 3, 4], fake, chains=2, draws=200, n_jobs=2, progress=False)
    assert SleepyProgram.compiles == 1  # in this process, before the workers started
    assert res.reliable.all() and res.status.tolist() == ["ok"] * 5
    assert res.workers == 2
    first = res.seconds[0]
    assert first >= SleepyProgram.REFIT
    # 4 remaining refits on 2 workers: two waves of the first refit's time
    assert res.estimated_seconds_total == first * (1 + 2)
    assert res.estimated_seconds_planned == first * (1 + 2)
    # exact held-out density of N(0.5 | mu, 1), mu ~ N(0, 1): N(0.5 | 0, 2)
    exact = stats.norm.logpdf(0.5, scale=np.sqrt(2.0))
    assert np.all(np.abs(res.elpd_i - exact) < 4 * res.mcse_elpd_i)


@pytest.mark.parametrize("cores,chains,n_jobs,expect", [
    (2, 4, None, (1, 2)), (2, 1, None, (2, 1)), (8, 4, None, (2, 4)), (8, 4, 4, (4, 2)),
    (16, 4, None, (3, 4)),
])
def test_workers_times_chains_fit_the_cores(cores, chains, n_jobs, expect):
    from loo_adapt.stan.pool import plan_workers

    workers, parallel = plan_workers(3 if cores == 16 else 20, chains, n_jobs, cores=cores)
    assert (workers, parallel) == expect
    assert workers * parallel <= cores


# ------------------------------------------------------------------------------- convergence
def test_rhat_and_bulk_ess_match_arviz():
    az = pytest.importorskip("arviz")
    rng = np.random.default_rng(8)
    x = _ar1(rng, 0.8, (4, 300)) + np.array([0.0, 0.0, 0.0, 0.6])[:, None]
    x = np.exp(x)  # skewed, so the rank normalisation matters
    assert rhat_rank(x) == pytest.approx(float(az.rhat(x, method="rank")), rel=1e-10)
    assert ess_bulk(x) == pytest.approx(float(az.ess(x, method="bulk")), rel=1e-10)


def stuck_refit(i, seed):
    """Four chains stuck at different levels: R-hat far above 1."""
    rng = np.random.default_rng(seed)
    return rng.normal(size=(4, 200)) * 0.1 + np.arange(4)[:, None] - 2.0


def test_unconverged_refit_fn_is_reported_never_reliable():
    with pytest.warns(UserWarning, match="1 of 2 refit"):
        res = refit_loo([0, 1], refit_fn=lambda i, seed: (conj_refit if i == 0 else stuck_refit)(
            i, seed), n_jobs=1, progress=False)
    assert res.reliable.tolist() == [True, False]
    assert res.status[1] == "unconverged" and "R-hat" in res.reason[1]
    assert np.isfinite(res.elpd_i[1])  # the estimate is kept, flagged
    assert res.rhat[1] > 1.5 and res.rhat[0] < 1.01


def test_short_program_refit_is_rerun_longer_then_reported(program):
    # 2 chains x 20 draws after 5 warm-up (the case): the check must fail
    with pytest.warns(UserWarning, match="unverified"):
        res = refit_loo([46], program, chains=2, draws=20, warmup=5, seed=3, n_jobs=1,
                        progress=False)
    assert not res.reliable[0] and res.status[0] == "unconverged"
    assert res.reason[0].startswith("not converged")
    assert res.seeds[0] == 3 + 46 + refit_mod.RETRY_SEED_OFFSET  # the longer rerun
    assert res.n_samples[0] == 2 * 40
    base = PointwiseLoo(
        elpd_i=np.zeros(54), p_loo_i=np.zeros(54), lpd_i=np.zeros(54),
        mcse_elpd_i=np.zeros(54), pareto_k=np.ones(54), good_k=0.7, n_samples=4000,
        r_eff=1.0)
    out = base.merge(res.to_estimate())
    assert not out.reliable[46] and out.method[46] == "refit"
    assert out.reason[46].startswith("not converged")


class FunnelProgram(SleepyProgram):
    """A fake backend whose refits have DIVERGENT divergent transitions unless adapt_delta is
    at least CURES (a horseshoe's funnel: smaller steps pass it)."""

    COMPILE, REFIT = 0.0, 0.0
    DIVERGENT, CURES = 2, 0.99
    calls: list = []

    def refit_without(self, i, *, seed, chains=4, draws=1000, warmup=1000,
                      parallel_chains=None, adapt_delta=None):
        FunnelProgram.calls.append((i, warmup, draws, adapt_delta))
        fit = super().refit_without(i, seed=seed, chains=chains, draws=draws, warmup=warmup)
        div = np.zeros((chains, draws))
        if adapt_delta is None or adapt_delta < self.CURES:
            div[0, :self.DIVERGENT] = 1
        fit.sample_stats["divergent__"] = div
        return fit


def test_divergent_refit_reruns_at_higher_adapt_delta_and_passes(program):
    FunnelProgram.calls = []
    fake = FunnelProgram(BUNDLED, program.data, backend="stanli")
    res = refit_loo([4, 7], fake, chains=2, draws=300, warmup=200, n_jobs=1, progress=False)
    # each row: the first refit (2 divergences), then one rerun at adapt_delta 0.99 with
    # twice the warm-up and draws, which passes
    assert FunnelProgram.calls == [(4, 200, 300, None), (4, 400, 600, 0.99),
                                   (7, 200, 300, None), (7, 400, 600, 0.99)]
    assert res.reliable.all() and res.status.tolist() == ["ok", "ok"]
    assert res.n_divergent.tolist() == [0, 0] and res.n_samples.tolist() == [1200, 1200]
    assert all("adapt_delta 0.99" in r and "divergent" in r for r in res.rerun)
    assert res.seeds.tolist() == [4 + refit_mod.RETRY_SEED_OFFSET, 7 + refit_mod.RETRY_SEED_OFFSET]
    exact = stats.norm.logpdf(0.5, scale=np.sqrt(2.0))  # N(0.5 | mu, 1), mu ~ N(0, 1)
    assert np.all(np.abs(res.elpd_i - exact) < 4 * res.mcse_elpd_i)


def test_divergences_that_persist_leave_the_row_unverified_with_both_attempts_recorded(program):
    FunnelProgram.calls = []
    fake = FunnelProgram(BUNDLED, program.data, backend="stanli", fit_kwargs={"adapt_delta": 0.995})
    fake.CURES = 1.1  # nothing cures it
    with pytest.warns(UserWarning, match="unverified"):
        res = refit_loo([3], fake, chains=2, draws=300, warmup=200, n_jobs=1, progress=False)
    # the program's own adapt_delta is above 0.99: the rerun keeps it, never lowers it
    assert [c[3] for c in FunnelProgram.calls] == [None, 0.995]
    assert not res.reliable[0] and res.status[0] == "unconverged"
    assert "2 divergent transition(s)" in res.reason[0]
    assert "adapt_delta 0.995" in res.rerun[0]


# ------------------------------------------------------------------------------- MixIS chains
class _NoSubmit:
    """An 'executor' that must not be used (everything is in the checkpoint)."""

    _max_workers = 1

    def submit(self, *a, **k):
        raise AssertionError("a chain was fitted again although it was checkpointed")


def test_mixis_chains_as_separate_jobs_checkpointed_and_right(program, tmp_path):
    from concurrent.futures import Executor, ThreadPoolExecutor

    from loo_adapt.core.mixis import mixis_loo

    truth = np.loadtxt(TRUTH, delimiter=",", skiprows=1)
    ck = tmp_path / "chains"
    with ThreadPoolExecutor(max_workers=2) as ex:
        mix = program.fit(mixis=True, seed=3, chains=2, draws=1000, warmup=500, executor=ex,
                          checkpoint=ck)
    assert mix.shape == (2, 1000) and mix.sample_stats["divergent__"].shape == (2, 1000)
    assert sorted(f.name for f in ck.glob("chain_*.npz")) == ["chain_0.npz", "chain_1.npz"]
    # the mixture estimate from the combined chains agrees with the brute-force truth
    est = mixis_loo(mix.log_lik())
    t_total, t_se = truth[:, 1].sum(), np.sqrt(np.sum(truth[:, 2] ** 2))
    assert abs(est.elpd_i.sum() - t_total) < 4 * np.hypot(est.mcse_total, t_se) + 0.05
    # the default local pool gives the same chains (same seeds), and a rerun with the
    # checkpoint fits nothing
    local = program.fit(mixis=True, seed=3, chains=2, draws=1000, warmup=500, n_jobs=2)
    np.testing.assert_array_equal(local["beta"], mix["beta"])

    class Refuse(_NoSubmit, Executor):
        pass

    again = program.fit(mixis=True, seed=3, chains=2, draws=1000, warmup=500,
                        executor=Refuse(), checkpoint=ck)
    np.testing.assert_array_equal(again["beta"], mix["beta"])
    np.testing.assert_array_equal(again.sample_stats["lp__"], mix.sample_stats["lp__"])


# ------------------------------------------------------------------------------- CmdStan only
def _cmdstan():
    from loo_adapt.stan.backends import cmdstan_available

    return cmdstan_available()


@pytest.mark.skipif(not _cmdstan(), reason="needs CmdStan: python -m cmdstanpy.install_cmdstan "
                    "(then run this module; everything else is tested without it)")
def test_cmdstan_refits_compile_once_and_fit_the_cores(monkeypatch):
    import loo_adapt.stan.backends as backends
    from loo_adapt.stan.pool import available_cores

    compiles = []
    real = backends.compile_model
    monkeypatch.setattr(backends, "compile_model",
                        lambda *a, **k: compiles.append(a) or real(*a, **k))
    data = json.loads(DATA_JSON.read_text())
    data["mixis"] = 0
    prog = StanProgram(BUNDLED, data, backend="cmdstan")
    truth = np.loadtxt(TRUTH, delimiter=",", skiprows=1)
    res = refit_loo([46, 2], prog, chains=4, seed=7, progress=False)
    assert len(compiles) == 1  # once, in this process, before the workers
    assert res.workers * max(res.parallel_chains, 1) <= available_cores()
    tol = 4.0 * np.sqrt(res.mcse_elpd_i**2 + truth[[46, 2], 2] ** 2) + 0.01
    assert np.all(np.abs(res.elpd_i - truth[[46, 2], 1]) < tol)


# An observation with a parameter of its own, theta = mu + tau * eta, left out: its refit
# draws eta from the prior, so p(y | theta) = N(y | theta, 10) is large only in the rare draws
# where tau is large.  mu ~ N(5, 2), tau ~ logN(log 3, 0.5), y = 75: the exact held-out
# density is the integral over tau of N(y | 5, sqrt(4 + tau^2 + 100)), by quadrature.
def _own_parameter_heldout(seed, shape=(4, 1000), y=75.0):
    rng = np.random.default_rng(seed)
    mu = rng.normal(5.0, 2.0, size=shape)
    tau = 3.0 * np.exp(0.5 * rng.normal(size=shape))
    return stats.norm.logpdf(y, mu + tau * rng.normal(size=shape), 10.0)


def _own_parameter_exact(y=75.0):
    from scipy import integrate

    def f(t):
        return stats.norm.pdf(y, 5.0, np.sqrt(4.0 + t**2 + 100.0)) * stats.lognorm.pdf(
            t, 0.5, scale=3.0)

    return float(np.log(integrate.quad(f, 0.0, 2000.0, points=[3.0, 30.0, 100.0],
                                       limit=400, epsabs=0.0, epsrel=1e-10)[0]))


def test_tail_check_fails_refits_whose_mean_misses_the_heldout_density():
    """The plain mean over such a refit's draws misses the quadrature value by more than 3
    of its own MCSEs in most seeds (the MCSE cannot see the draws it lacks); the Pareto k-hat
    of exp(ll) fails every one of them (above 1: the fitted tail has no mean)."""
    exact = _own_parameter_exact()
    missed = 0
    for seed in range(10):
        ll = _own_parameter_heldout(seed)
        elpd, mcse, ess = heldout_elpd(ll)
        missed += abs(elpd - exact) > 3 * mcse
        reason, khat = heldout_mod.tail_check(ll, ess)
        assert khat > heldout_mod.TAIL_KHAT, khat
        assert reason.startswith("heavy-tailed held-out likelihood")
        assert "log_lik can integrate out" in reason
    assert missed >= 5, missed


def test_tail_check_passes_bounded_heldout_likelihoods():
    """Held-out Bernoulli likelihoods (p <= 1) of a logit N(-2, 1), either outcome, and a
    normal likelihood whose parameter the data pin: the check passes and the estimates stay
    within 3 MCSEs of the quadrature value."""
    from scipy import integrate
    from scipy.special import expit

    def exact(f):
        return float(np.log(integrate.quad(lambda x: f(x) * stats.norm.pdf(x, -2.0, 1.0),
                                           -12.0, 8.0, epsabs=0.0, epsrel=1e-10)[0]))

    cases = [(lambda x: np.log(expit(x)), exact(expit)),
             (lambda x: np.log(expit(-x)), exact(lambda x: expit(-x))),
             (lambda x: stats.norm.logpdf(0.5, x, 1.0),
              float(stats.norm.logpdf(0.5, -2.0, np.sqrt(2.0))))]
    for seed in range(10):
        x = np.random.default_rng(100 + seed).normal(-2.0, 1.0, size=(4, 1000))
        for ll_of, value in cases:
            ll = ll_of(x)
            elpd, mcse, ess = heldout_elpd(ll)
            reason, khat = heldout_mod.tail_check(ll, ess)
            assert reason == "" and khat <= 0.7, (seed, khat)
            assert abs(elpd - value) < 3 * mcse


def _own_parameter_refit(i, seed):  # module level: refit_loo may send it to a worker
    return _own_parameter_heldout(seed) if i == 1 else _own_parameter_heldout(seed, y=5.0)


def test_refit_with_a_heavy_tailed_heldout_likelihood_is_not_verified():
    res = refit_loo([0, 1], refit_fn=_own_parameter_refit, n_jobs=1, seed=3,
                    progress=False)
    assert res.refitted.all()
    assert res.reliable.tolist() == [True, False]
    assert res.reason[1].startswith("heavy-tailed held-out likelihood: Pareto k-hat")
    assert res.pareto_k[1] > heldout_mod.TAIL_KHAT >= res.pareto_k[0]
    est = res.to_estimate()
    assert est.verified_by.tolist() == ["refit", ""]
    # the verified row is right: N(5 | 5, sqrt(4 + tau^2 + 100)) integrated over tau
    assert abs(res.elpd_i[0] - _own_parameter_exact(y=5.0)) < 3 * res.mcse_elpd_i[0]
