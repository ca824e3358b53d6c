"""Pooling two independent estimates (`loo_adapt.core.pool`) against the Gauss-Markov
optimum, and the pooled MixIS + PSIS estimator against closed-form LOO over replicates."""

import warnings

import numpy as np
import pytest
from normal_mean_loo import normal_mean_loo
from scipy.stats import norm

import loo_adapt
from loo_adapt.core.mixis import mixis_loo
from loo_adapt.core.pool import pool_log_estimates
from loo_adapt.io.readers import read_dict


def test_pooled_variance_is_the_inverse_variance_optimum():
    """Unbiased density estimates with sd 0.02 and 0.04 around p = 0.3: the pooled estimate's
    spread over 20,000 replicates is the minimum-variance 1/sqrt(1/0.02^2 + 1/0.04^2), and
    its reported MCSE matches that spread."""
    rng = np.random.default_rng(0)
    p, sa, sb, R = 0.3, 0.02, 0.04, 20_000
    pa = p + sa * rng.normal(size=R)
    pb = p + sb * rng.normal(size=R)
    elpd, mcse, w, _, _ = pool_log_estimates(np.log(pa), sa / pa, np.log(pb), sb / pb)
    best = 1.0 / np.sqrt(1.0 / sa**2 + 1.0 / sb**2)
    assert np.std(np.exp(elpd)) == pytest.approx(best, rel=0.03)
    assert np.mean(np.exp(elpd)) == pytest.approx(p, abs=4 * best / np.sqrt(R))
    assert np.mean(mcse * np.exp(elpd)) == pytest.approx(best, rel=0.03)
    assert np.mean(w) == pytest.approx(0.8, abs=0.01)  # 0.04^2 / (0.02^2 + 0.04^2)


def test_pool_edge_cases_and_errors():
    # an exact estimate (MCSE 0) takes all the weight; two exact ones are averaged
    e, s, w, _, _ = pool_log_estimates([-1.0, -1.0], [0.0, 0.0], [-2.0, -1.0], [0.1, 0.0])
    np.testing.assert_allclose(e, [-1.0, -1.0])
    np.testing.assert_allclose(w, [1.0, 0.5])
    np.testing.assert_allclose(s, [0.0, 0.0])
    # far out in the tails (p = e^-800) nothing under- or overflows
    e, s, w, _, _ = pool_log_estimates([-800.0], [0.1], [-801.0], [0.1])
    assert np.isfinite(e).all() and np.isfinite(s).all() and -801.0 < e[0] < -800.0
    with pytest.raises(ValueError, match="NaN or infinite"):
        pool_log_estimates([np.nan], [0.1], [-1.0], [0.1])
    with pytest.raises(ValueError, match="negative"):
        pool_log_estimates([-1.0], [-0.1], [-1.0], [0.1])


def _normal_mean(n=20, seed=3):
    """`normal_mean_loo` with one influential row (y_0 = 4)."""
    return normal_mean_loo({0: 4.0}, n=n, seed=seed)


def _draws(y, m_loo, mix_p, rng, S):
    n = y.size
    mu_post = y.mean() + rng.normal(size=(4, S // 4)) / np.sqrt(n)
    comp = rng.choice(n, size=S, p=mix_p)
    mu_mix = rng.normal(m_loo[comp], np.sqrt(1.0 / (n - 1))).reshape(4, -1)
    return norm.logpdf(y, mu_post[..., None]), norm.logpdf(y, mu_mix[..., None])


def _mixis_quiet(ll_post, ll_mix, **kw):
    """`loo_adapt.loo` with MixIS on the mixture draws ``ll_mix``, warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return loo_adapt.loo(read_dict({"log_lik": ll_post}, method="mcmc"), estimator="mixis",
                             mixis_draws=read_dict({"log_lik": ll_mix}, method="mcmc"), **kw)


def test_mixis_mcse_of_sum_is_calibrated_over_replicates():
    """The spread of MixIS's total (and of a weighted sum) over 60 independent mixture samples
    matches its reported `mcse_of_sum`, which sees the rows' shared draws; adding the
    pointwise MCSEs in quadrature would not."""
    y, m_loo, truth, mix_p = _normal_mean()
    rng = np.random.default_rng(7)
    c = rng.uniform(0.2, 1.0, size=y.size)
    tot, wtot, se, wse, quad = [], [], [], [], []
    for _ in range(60):
        _, ll_mix = _draws(y, m_loo, mix_p, rng, 2000)
        est = mixis_loo(ll_mix)
        tot.append(est.elpd_i.sum() - truth.sum())
        wtot.append(c @ (est.elpd_i - truth))
        se.append(est.mcse_total)
        wse.append(est.mcse_of_sum(c))
        quad.append(np.sqrt(np.sum(est.mcse_elpd_i**2)))
    assert np.std(tot) / np.mean(se) == pytest.approx(1.0, abs=0.3)
    assert np.std(wtot) / np.mean(wse) == pytest.approx(1.0, abs=0.3)
    assert abs(np.mean(tot)) < 3 * np.std(tot) / np.sqrt(60)
    assert np.std(tot) > 1.1 * np.mean(quad)  # the correlation the quadrature sum misses


def test_pooled_mixis_beats_mixis_alone_and_reports_its_error():
    """Through `loo()`, 40 replicates of (posterior, mixture) samples: pooling with PSIS on
    the rows with k-hat < 1/2 lowers the error of the total and of every row against the
    closed form, the reported total MCSE matches the spread, and it stays unbiased."""
    y, m_loo, truth, mix_p = _normal_mean()
    rng = np.random.default_rng(11)
    err = {None: [], 0.5: []}
    se = {None: [], 0.5: []}
    pooled_rows = []
    for _ in range(40):
        ll_post, ll_mix = _draws(y, m_loo, mix_p, rng, 2000)
        for pool in err:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = loo_adapt.loo(read_dict({"log_lik": ll_post}, method="mcmc"),
                                    estimator="mixis", mixis_pool_khat=pool,
                                    mixis_draws=read_dict({"log_lik": ll_mix}, method="mcmc"))
            pw = res.loo_adapt
            err[pool].append(pw.elpd_i - truth)
            se[pool].append(pw.estimates()["mcse_elpd_loo"])
            if pool:
                pooled_rows.append(pw.method == "mixis+psis")
                if pooled_rows[-1].any():
                    assert "MixIS pooled with PSIS" in res.summary()
    e0, e1 = np.array(err[None]), np.array(err[0.5])
    pooled = np.array(pooled_rows).mean(axis=0) > 0.5
    assert pooled.sum() >= 10
    rmse0, rmse1 = np.sqrt(np.mean(e0**2, axis=0)), np.sqrt(np.mean(e1**2, axis=0))
    assert np.all(rmse1[pooled] < rmse0[pooled])
    t0, t1 = e0.sum(axis=1), e1.sum(axis=1)
    assert np.std(t1) < 0.8 * np.std(t0)
    assert np.std(t1) / np.mean(se[0.5]) == pytest.approx(1.0, abs=0.35)
    assert abs(np.mean(t1)) < 3 * np.std(t1) / np.sqrt(40)


def test_pooled_rows_skew_mcse_is_calibrated_and_never_narrower():
    """Pooled rows (method "mixis+psis") over 40 replicates against the closed form: with
    the default skew-widened MCSEs (MixIS's and PSIS's, `loo_adapt.core.skew`) |error| /
    MCSE is near 1 in rms, and no pooled row states a smaller MCSE than with the delta
    method (``mixis_mcse="delta"``) on the same draws."""
    y, m_loo, truth, mix_p = _normal_mean()
    rng = np.random.default_rng(11)
    z, ratio = [], []
    for _ in range(40):
        ll_post, ll_mix = _draws(y, m_loo, mix_p, rng, 2000)
        out = {}
        for mcse in ("skew", "delta"):
            out[mcse] = _mixis_quiet(ll_post, ll_mix, mixis_mcse=mcse).loo_adapt
        skew, delta = out["skew"], out["delta"]
        both = (skew.method == "mixis+psis") & (delta.method == "mixis+psis")
        z.extend((skew.elpd_i - truth)[both] / skew.mcse_elpd_i[both])
        ratio.extend(skew.mcse_elpd_i[both] / delta.mcse_elpd_i[both])
    assert len(z) > 400
    rms = float(np.sqrt(np.mean(np.square(z))))
    assert 0.85 <= rms <= 1.15, rms
    assert min(ratio) >= 1.0, min(ratio)


def test_a_posterior_fit_that_misses_is_not_pooled():
    """Posterior draws 20% too narrow (chains that do not explore the whole posterior):
    every PSIS row looks fine (k-hat < 1/2) and its MCSE cannot see it, but the sum over the
    rows disagrees with MixIS, so nothing is pooled, a warning says why, and the result
    equals MixIS alone (within MC error of the closed form)."""
    y, m_loo, truth, mix_p = _normal_mean()
    rng = np.random.default_rng(5)
    ll_post, ll_mix = _draws(y, m_loo, mix_p, rng, 4000)
    mu_off = y.mean() + 0.8 * rng.normal(size=(4, 1000)) / np.sqrt(y.size)
    post = read_dict({"log_lik": norm.logpdf(y, mu_off[..., None])}, method="mcmc")
    mix = read_dict({"log_lik": ll_mix}, method="mcmc")
    # 9.7 combined MCSEs apart: beyond FAR_Z, a warning, and no row of them verified
    with pytest.warns(UserWarning, match="disagree over the 20 observations"):
        full = loo_adapt.loo(post, estimator="mixis", mixis_draws=mix)
    res = full.loo_adapt
    assert any("disagree over the 20 observations" in n for n in res.notes)
    assert "Note: PSIS on the posterior draws and MixIS" in full.summary()
    assert not res.reliable[res.pareto_k < 0.5].any()
    assert set(res.method) == {"mixis"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = loo_adapt.loo(post, estimator="mixis", mixis_draws=mix,
                              mixis_pool_khat=None).loo_adapt
        psis = loo_adapt.loo(post, estimator="psis").loo_adapt
    np.testing.assert_array_equal(res.elpd_i, alone.elpd_i)
    assert np.all(psis.pareto_k < 0.5)
    err_psis, err_mix = psis.elpd_i.sum() - truth.sum(), res.elpd_i.sum() - truth.sum()
    se_alone = alone.estimates()["mcse_elpd_loo"]
    assert abs(err_mix) < 3 * se_alone < abs(err_psis)  # MixIS is right here, PSIS is not
    # which one is wrong cannot be told from the two samples: the total's MCSE now covers
    # the unexplained part of their difference
    se = res.estimates()["mcse_elpd_loo"]
    diff = abs(psis.elpd_i.sum() - alone.elpd_i.sum())
    assert se > 5 * se_alone and 0.8 * diff < se <= diff
    # the same posterior draws, correct: pooled
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        good = loo_adapt.loo(read_dict({"log_lik": ll_post}, method="mcmc"), estimator="mixis",
                             mixis_draws=mix).loo_adapt
    assert (good.method == "mixis+psis").sum() >= 15
    # 5% too narrow: 2.6 combined MCSEs apart, MixIS alone and a note in the summary (no
    # warning: within FAR_Z the rows stay verified by MixIS's MCSE)
    mu_near = y.mean() + 0.95 * np.random.default_rng(5).normal(size=(4, 1000)) / np.sqrt(y.size)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        near = loo_adapt.loo(read_dict({"log_lik": norm.logpdf(y, mu_near[..., None])},
                                       method="mcmc"), estimator="mixis", mixis_draws=mix)
    assert set(near.loo_adapt.method) == {"mixis"} and near.loo_adapt.reliable.all()
    assert "Note: PSIS on the posterior draws and MixIS" in near.summary()


def test_psis_mcse_of_sum_sees_the_shared_draws():
    """PSIS rows reweigh the same posterior draws: over 80 replicate posterior samples the
    spread of the total matches `is_mcse_of_sum` of the PSIS weights, not the quadrature sum
    of the pointwise MCSEs (smaller here: the rows' errors are positively correlated)."""
    from loo_adapt.core import psis_loo
    from loo_adapt.core.pool import is_mcse_of_sum

    y, m_loo, truth, mix_p = _normal_mean()
    rng = np.random.default_rng(21)
    tot, se, quad = [], [], []
    for _ in range(80):
        ll_post, _ = _draws(y, m_loo, mix_p, rng, 2000)
        res = psis_loo.loo_pointwise(ll_post, warn=False)
        tot.append(res.elpd_i.sum() - truth.sum())
        se.append(is_mcse_of_sum(res.log_weights, np.ones(y.size), chains=4))
        quad.append(np.sqrt(np.sum(res.mcse_elpd_i**2)))
    assert np.std(tot) / np.mean(se) == pytest.approx(1.0, abs=0.25)
    assert np.std(tot) > 1.2 * np.mean(quad)
    with pytest.raises(ValueError, match="chains"):
        is_mcse_of_sum(res.log_weights, np.ones(y.size), chains=3)


def test_a_disagreement_far_beyond_mc_error_unverifies_the_rows():
    """Mixture draws whose log_lik was computed on other data (three outcomes shifted by 0.5,
    as a wrong program's data would give): PSIS (k-hat < 1/2, MCSE trustworthy) and MixIS
    disagree in sum by far more than their Monte Carlo error, so no row compared is
    verified, each saying why; one shifted outcome unverifies its own row only; the right
    mixture draws stay verified, with no warning."""
    y, m_loo, truth, mix_p = _normal_mean()
    rng = np.random.default_rng(11)
    ll_post, ll_mix = _draws(y, m_loo, mix_p, rng, 4000)
    comp = rng.choice(y.size, size=4000, p=mix_p)
    mu = rng.normal(m_loo[comp], np.sqrt(1.0 / (y.size - 1))).reshape(4, -1)
    post = read_dict({"log_lik": ll_post}, method="mcmc")
    for shifted in ([5, 6, 7], [5]):
        y_other = y.copy()
        y_other[shifted] += 0.5
        wrong = read_dict({"log_lik": norm.logpdf(y_other, mu[..., None])}, method="mcmc")
        with pytest.warns(UserWarning, match="no verified estimate") as rec:
            res = loo_adapt.loo(post, estimator="mixis", mixis_draws=wrong).loo_adapt
        if len(shifted) > 1:  # beyond FAR_Z in sum: a warning of its own
            assert any("no row of them is verified" in str(w.message) for w in rec)
        low_k = res.pareto_k < 0.5
        assert low_k.sum() >= 15
        bad = low_k if len(shifted) > 1 else np.isin(np.arange(y.size), shifted)
        assert not res.reliable[bad].any() and res.reliable[~bad].all()
        assert all("PSIS and MixIS disagree" in r for r in res.reason[bad])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        right = loo_adapt.loo(post, estimator="mixis",
                              mixis_draws=read_dict({"log_lik": ll_mix}, method="mcmc"))
    assert right.loo_adapt.reliable.all()


def test_short_posterior_fits_are_not_pooled_but_still_checked():
    """A posterior fit of fewer than POOL_MIN_DRAWS draws (4 x 250 exact draws of the normal
    mean) is not pooled with MixIS, with a note saying why, and its rows agree with the
    closed-form LOO within their MCSEs; the same fit at 4 x 1000 is pooled.  The agreement
    test still runs on the short fit: with mixture draws of other data (three outcomes
    shifted by 0.5) no row compared is verified, each saying why."""
    from loo_adapt.estimators.mixis import DISAGREE, POOL_MIN_DRAWS

    y, m_loo, truth, mix_p = _normal_mean()
    rng = np.random.default_rng(11)
    ll_post, ll_mix = _draws(y, m_loo, mix_p, rng, 4000)
    mix = read_dict({"log_lik": ll_mix}, method="mcmc")
    assert 4 * 250 < POOL_MIN_DRAWS <= 4 * 1000
    for short in (True, False):
        post = read_dict({"log_lik": ll_post[:, :250] if short else ll_post}, method="mcmc")
        res = loo_adapt.loo(post, estimator="mixis", mixis_draws=mix).loo_adapt
        pooled = res.method.astype(str) == "mixis+psis"
        said = any("not pooled" in n for n in res.notes)
        assert (not pooled.any() and said) if short else (pooled.sum() >= 10 and not said)
        assert res.reliable.all()
        np.testing.assert_array_less(np.abs(res.elpd_i - truth), 4 * res.mcse_elpd_i)
    comp = rng.choice(y.size, size=4000, p=mix_p)
    mu = rng.normal(m_loo[comp], np.sqrt(1.0 / (y.size - 1))).reshape(4, -1)
    y_other = y.copy()
    y_other[[5, 6, 7]] += 0.5
    wrong = read_dict({"log_lik": norm.logpdf(y_other, mu[..., None])}, method="mcmc")
    post = read_dict({"log_lik": ll_post[:, :250]}, method="mcmc")
    with pytest.warns(UserWarning, match="no verified estimate"):
        res = loo_adapt.loo(post, estimator="mixis", mixis_draws=wrong).loo_adapt
    low_k = res.pareto_k < 0.5
    assert low_k.sum() >= 10 and not res.reliable[low_k].any()
    assert all(str(r).startswith(DISAGREE) for r in res.reason[low_k])


def test_rows_that_disagree_within_far_z_are_pooled_and_err_less():
    """Rows whose PSIS and MixIS estimates differ by 2-4 combined MCSEs (by chance: both are
    unbiased here) are pooled where the sums agree, not left to MixIS alone: leaving them
    out of the pool keeps the rows where MixIS erred most (the more precise PSIS is the
    nearer there), so against the closed form, over 60 replicates, the pooled estimates of
    exactly those rows err less than MixIS's own."""
    from loo_adapt.core.psis_loo import loo_pointwise

    y, m_loo, truth, mix_p = _normal_mean()
    rng = np.random.default_rng(17)
    alone_err, pooled_err, methods = [], [], []
    for _ in range(60):
        ll_post, ll_mix = _draws(y, m_loo, mix_p, rng, 2000)
        psis = loo_pointwise(ll_post.reshape(-1, y.size), warn=False)
        out = {}
        for pool in (None, 0.5):
            out[pool] = _mixis_quiet(ll_post, ll_mix, mixis_pool_khat=pool).loo_adapt
        alone, pooled = out[None], out[0.5]
        z = (psis.elpd_i - alone.elpd_i) / np.hypot(psis.mcse_elpd_i, alone.mcse_elpd_i)
        rows = (np.abs(z) > 2) & (np.abs(z) < 4) & (psis.pareto_k < 0.5)
        if not np.any(pooled.method == "mixis+psis"):
            continue  # the sums disagreed (by chance): nothing pooled, as designed
        alone_err.extend((alone.elpd_i - truth)[rows])
        pooled_err.extend((pooled.elpd_i - truth)[rows])
        methods.extend(pooled.method[rows])
    assert len(methods) >= 15, len(methods)
    assert np.all(np.asarray(methods) == "mixis+psis")
    rms_alone = float(np.sqrt(np.mean(np.square(alone_err))))
    rms_pooled = float(np.sqrt(np.mean(np.square(pooled_err))))
    assert rms_pooled < 0.7 * rms_alone, (rms_pooled, rms_alone)
