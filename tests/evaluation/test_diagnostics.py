"""R loo's pareto_k_table / pareto_k_ids / mcse_loo and the failing-reads-as-failing numbers."""

import numpy as np
import pytest

import loo_adapt
from loo_adapt.core.fmt import comparison, distinct
from loo_adapt.evaluation.arviz import arviz_major
from loo_adapt.evaluation.diagnostics import mcse_loo, pareto_k_ids, pareto_k_table
from loo_adapt.result import PointwiseLoo


def _heavy(seed=4, n=40):
    """A log-likelihood with a few influential observations (k-hat above 0.7)."""
    rng = np.random.default_rng(seed)
    ll = rng.normal(-1.0, 0.3, size=(1, 1000, n))
    ll[..., :6] += rng.standard_t(1.5, size=(1, 1000, 6)) * 3.0
    return ll


@pytest.mark.skipif(arviz_major() != 0, reason="arviz 0.x's loo equals R loo's PSIS")
def test_ids_and_table_equal_arviz_khat():
    import arviz as az

    ll = _heavy()
    with pytest.warns(UserWarning, match="no verified estimate"):
        ours = loo_adapt.loo(ll, reff=1.0)
    with pytest.warns(UserWarning, match="shape parameter"):
        theirs = az.loo(az.from_dict(log_likelihood={"y": ll}), pointwise=True, reff=1.0)
    k = theirs.pareto_k.values
    thr = float(theirs.good_k)
    want = np.flatnonzero(k > thr)
    assert want.size >= 2
    np.testing.assert_array_equal(pareto_k_ids(ours), want)
    np.testing.assert_array_equal(pareto_k_ids(theirs), want)  # arviz's own object too
    np.testing.assert_array_equal(pareto_k_ids(ours, 0.5), np.flatnonzero(k > 0.5))
    table = pareto_k_table(ours)
    counts = np.histogram(k, bins=[-np.inf, thr, 1.0, np.inf])[0]
    np.testing.assert_array_equal(table.counts, counts)
    np.testing.assert_allclose(table.proportions, counts / k.size)
    # Min. ESS as R loo: r_eff / sum(w^2) of the PSIS weights, only over k-hat <= threshold
    lw, _ = az.psislw(-ll.reshape(1000, -1).T, reff=1.0)  # (n, S) in arviz 0.x
    w = np.exp(lw - lw.max(axis=1, keepdims=True))
    ess = w.sum(axis=1) ** 2 / np.sum(w**2, axis=1)
    assert table.min_ess[0] == pytest.approx(ess[k <= thr].min(), rel=1e-8)
    assert np.isnan(table.min_ess[1:]).all()
    text = str(table)
    assert "Min. ESS" in text and f"{round(ess[k <= thr].min())}" in text


def test_a_pooled_rows_mixis_ess_is_not_shown_in_its_psis_khat_bin():
    """The sweep's case: a row pooled with PSIS (k-hat 0.44, PSIS's) whose MixIS ESS is 3
    put "Min. ESS 3" in the good bin; the bins' ESS is now that of the k-hat's own weights."""
    z = np.zeros(3)
    res = PointwiseLoo(z - 1, z + 0.1, z - 0.9, z + 0.05, np.array([0.2, 0.44, 0.3]), 0.7,
                       1000, 1.0, method=np.array(["psis", "mixis+psis", "psis"]),
                       pareto_k_after=np.array([0.2, 0.44, 0.3]),
                       diagnostic=np.array([800.0, 3.0, 650.0]),
                       reliable=np.ones(3, bool))
    t = pareto_k_table(res)
    assert t.counts.tolist()[0] == 3 and t.min_ess[0] == 650.0


def test_rows_without_khat_have_bins_of_their_own():
    z = np.zeros(5)
    res = PointwiseLoo(z - 1, z + 0.1, z - 0.9, z + 0.05, np.array([0.2, 0.9, 1.3, 0.8, 0.1]),
                       0.7, 1000, 1.0, method=np.array(["psis", "psis", "mixis", "refit",
                                                        "mixis"]),
                       pareto_k_after=np.array([0.2, 0.9, np.nan, np.nan, np.nan]),
                       diagnostic=np.array([800.0, 50.0, 300.0, 900.0, 250.0]),
                       reliable=np.array([True, False, True, True, True]))
    t = pareto_k_table(res)
    assert t.kinds == ("(good)", "(bad)", "(very bad)", "(MixIS)", "(refit)")
    np.testing.assert_array_equal(t.counts, [1, 1, 0, 2, 1])
    assert t.n == 5 and t.proportions.sum() == pytest.approx(1.0)
    np.testing.assert_array_equal(t.min_ess, [800.0, np.nan, np.nan, 250.0, 900.0])
    before = pareto_k_table(res, before=True)
    np.testing.assert_array_equal(before.counts, [2, 2, 1])
    np.testing.assert_array_equal(pareto_k_ids(res), [1])
    np.testing.assert_array_equal(pareto_k_ids(res, before=True), [1, 2, 3])
    # R loo's mcse_loo is NA when an estimate is not shown reliable
    assert np.isnan(mcse_loo(res))
    fixed = PointwiseLoo(**{**res.__dict__, "reliable": np.ones(5, bool)})
    assert mcse_loo(fixed) == pytest.approx(np.sqrt(5 * 0.05**2))
    assert np.isnan(mcse_loo(fixed, threshold=0.5))  # row 1's k-hat 0.9 is above 0.5


def test_an_all_good_table_before_the_other_estimators_keeps_its_title():
    """Every row MixIS's, every plain-PSIS k-hat good: the summary printed R's bare "All
    Pareto k estimates are good" under the final table, which had none in its good bin; the
    line now names the plain-PSIS table it is about."""
    from loo_adapt.evaluation.summary import format_summary

    z = np.zeros(4)
    res = PointwiseLoo(z - 1, z + 0.1, z - 0.9, z + 0.05, np.array([0.2, 0.4, 0.1, 0.6]), 0.7,
                       1000, 1.0, method=np.array(["mixis"] * 4),
                       pareto_k_after=np.full(4, np.nan), diagnostic=np.full(4, 900.0),
                       reliable=np.ones(4, bool))
    lines = format_summary(res).splitlines()
    final = pareto_k_table(res)
    assert final.counts.tolist() == [0, 0, 0, 4]
    assert "All Pareto k estimates are good (k <= 0.70)." not in lines
    assert ("Plain PSIS on the posterior draws, before the other estimators: all Pareto k "
            "estimates are good (k <= 0.70).") in lines
    # R's own line for a table of its own, every k-hat good
    psis = PointwiseLoo(**{**res.__dict__, "method": np.array(["psis"] * 4),
                           "pareto_k_after": res.pareto_k})
    assert str(pareto_k_table(psis)) == "All Pareto k estimates are good (k <= 0.70)."


@pytest.mark.parametrize("seed", range(3))
def test_failed_comparisons_read_as_failing(seed):
    rng = np.random.default_rng(seed)
    bound = rng.uniform(0.5, 0.8, 500)
    value = bound + 10.0 ** rng.uniform(-7, -1, 500)  # value > bound, often by a hair
    for v, b in zip(value, bound):
        a, c = distinct(v, b)
        assert len(a.split(".")[1]) == len(c.split(".")[1]) >= 2
        if v - b > 2e-6:  # six decimals tell them apart
            assert float(a) > float(c), (v, b, a, c)
        assert abs(float(a) - v) <= 0.5 * 10.0 ** -len(a.split(".")[1]) + 1e-15
    assert comparison("k-hat", 0.6731, ">", 0.6699) == "k-hat 0.673 > 0.670"
    assert comparison("k-hat", float("inf"), ">", 0.7) == "k-hat inf > 0.70"


def _refit_heldout(rows, seed):  # module level: the fold pool pickles it
    rng = np.random.default_rng(seed)
    return np.log(0.3) + rng.normal(0.0, 0.01, (400, len(rows)))


@pytest.mark.arviz1
def test_kfold_prints_and_stores_r_loo_names_and_compares():
    """A k-fold result prints elpd_kfold / p_kfold / kfoldic (R loo's print.kfold), stores
    them, and az.compare (either arviz line) still ranks it against a PSIS-LOO result."""
    import warnings

    import arviz as az

    from loo_adapt import kfold

    ll = np.log(0.35) + np.random.default_rng(1).normal(0.0, 0.05, (2, 200, 20))
    cv = kfold(refit_fn=_refit_heldout, K=5, log_lik=ll, n_obs=20, progress=False, n_jobs=1,
               check_convergence=False)
    text = str(cv)
    est = cv.loo_adapt.estimates()
    assert text.startswith("Based on 5-fold cross-validation.")
    for name, key in (("elpd_kfold", "elpd_loo"), ("p_kfold", "p_loo"), ("kfoldic", "looic")):
        assert f"\n{name} " in text and cv[name] == pytest.approx(est[key])
    # the oracle: lpd - elpd from the draws themselves (p_kfold = lpd - elpd_kfold)
    held = np.mean(np.log(0.3) + np.zeros(20))
    assert cv["elpd_kfold"] == pytest.approx(20 * held, abs=0.01)
    assert "elpd_loo" not in text and "Pareto" not in text
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        table = az.compare({"kfold": cv, "loo": loo_adapt.loo(ll)})
    assert list(table.index) == ["loo", "kfold"]  # held-out density 0.3 < 0.35


def test_large_estimates_keep_their_columns_apart():
    """The sweep's case: log-likelihoods near -3e4 printed 'elpd_loo  -1111128.6116994.3'.
    The columns widen to fit and stay a space apart; the usual sizes keep R's layout."""
    rng = np.random.default_rng(0)
    big = loo_adapt.loo(rng.normal(-3e4, 1.0, size=(4, 250, 50)) * rng.uniform(0.5, 1.5, 50))
    for line in str(big).splitlines():
        if line.startswith(("elpd_loo", "looic")):
            name, value, se = line.split()
            assert float(value) < 0 if name == "elpd_loo" else float(value) > 0
            assert float(se) > 0
    est = big.loo_adapt.estimates()
    row = next(ln for ln in str(big).splitlines() if ln.startswith("elpd_loo"))
    assert row.split()[1:] == [f"{est['elpd_loo']:.1f}", f"{est['se_elpd_loo']:.1f}"]
    small = str(loo_adapt.loo(rng.normal(-1.0, 0.3, size=(4, 250, 50))))
    assert "        Estimate     SE" in small  # R's widths 8 and 7
