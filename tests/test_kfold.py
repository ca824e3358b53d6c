"""K-fold CV: exact predictive densities of a conjugate Gaussian linear model, the bundled
logistic program against its brute-force LOO truth (K = N), folds as R loo makes them,
az.compare on the result, checkpoint / resume and failed folds."""

import json
import pathlib

import numpy as np
import pytest
from scipy import stats

from loo_adapt.kfold import kfold, kfold_split

HERE = pathlib.Path(__file__).resolve().parent
TRUTH = HERE / "data" / "cmdstan" / "truth" / "logistic_normal.csv"
DATA_JSON = HERE / "data" / "cmdstan" / "logistic_normal.data.json"
BUNDLED = HERE.parent / "stan_models" / "logistic_normal.stan"

# y = X beta + e, e ~ N(0, SIGMA^2), beta ~ N(0, tau^2 I): the posterior given any rows is
# Gaussian and the predictive density of a held-out row is N(x'm, SIGMA^2 + x' S x).
SIGMA = 0.8
_rng = np.random.default_rng(42)
N, D = 24, 2
X = _rng.normal(size=(N, D))
Y = X @ np.array([1.0, -0.5]) + SIGMA * _rng.normal(size=N)
Y[5] += 4.0  # one outlier, so the folds differ


def posterior(train, tau):
    Xt, yt = X[train], Y[train]
    cov = np.linalg.inv(Xt.T @ Xt / SIGMA**2 + np.eye(D) / tau**2)
    return cov @ Xt.T @ yt / SIGMA**2, cov


def exact_heldout(rows, tau):
    train = np.setdiff1d(np.arange(N), rows)
    m, cov = posterior(train, tau)
    xr = X[rows]
    var = SIGMA**2 + np.einsum("id,de,ie->i", xr, cov, xr)
    return stats.norm.logpdf(Y[rows], loc=xr @ m, scale=np.sqrt(var))


def exact_lpd(tau):
    m, cov = posterior(np.arange(N), tau)
    var = SIGMA**2 + np.einsum("id,de,ie->i", X, cov, X)
    return stats.norm.logpdf(Y, loc=X @ m, scale=np.sqrt(var))


def beta_draws(train, tau, seed, shape=(4, 1000)):
    m, cov = posterior(train, tau)
    return np.random.default_rng(seed).multivariate_normal(m, cov, size=shape)


def full_log_lik(tau, seed=99):
    beta = beta_draws(np.arange(N), tau, seed)  # (4, 1000, D)
    return stats.norm.logpdf(Y, loc=beta @ X.T, scale=SIGMA)  # (4, 1000, N)


class LinRefit:
    """The exact posterior refit without ``rows``: module level, so it runs in workers."""

    def __init__(self, tau, fail_fold_with=None):
        self.tau, self.fail = tau, fail_fold_with

    def __call__(self, rows, seed):
        if self.fail is not None and self.fail in rows:
            raise RuntimeError("fold refit failed")
        train = np.setdiff1d(np.arange(N), rows)
        beta = beta_draws(train, self.tau, seed)
        return stats.norm.logpdf(Y[rows], loc=beta @ X[rows].T, scale=SIGMA)


def test_kfold_equals_the_exact_predictive_densities():
    res = kfold(refit_fn=LinRefit(1.0), n_obs=N, K=4, log_lik=full_log_lik(1.0), seed=3,
                n_jobs=2, progress=False)
    pl = res.loo_adapt
    folds = res.kfold["folds"]
    assert np.bincount(folds).tolist() == [6, 6, 6, 6]
    exact = np.empty(N)
    for k in range(4):
        rows = np.flatnonzero(folds == k)
        exact[rows] = exact_heldout(rows, 1.0)
    assert np.all(np.abs(pl.elpd_i - exact) < 4 * pl.mcse_elpd_i)
    total_mcse = np.sqrt(np.sum(pl.mcse_elpd_i**2))
    assert abs(float(res["elpd_loo"]) - exact.sum()) < 4 * total_mcse
    # p_kfold against the exact lpd of the full posterior (its MC error is small: 4000 draws)
    assert abs(float(res["p_loo"]) - (exact_lpd(1.0).sum() - exact.sum())) < 4 * total_mcse + 0.05
    se = np.sqrt(N * np.var(exact, ddof=1))
    assert float(res["se"]) == pytest.approx(se, rel=0.05)
    assert pl.reliable.all() and not bool(res["warning"])
    assert list(res.kfold["fold_status"]) == ["ok"] * 4


def _small_kfold():
    def refit_fn(rows, seed):  # nested: n_jobs=1 runs it in this process
        return np.full((200, len(rows)), np.log(0.3))

    return kfold(refit_fn=refit_fn, n_obs=6, K=3, log_lik=np.full((200, 6), np.log(0.5)),
                 seed=2, n_jobs=1, progress=False)


@pytest.mark.arviz1  # runs under arviz 1.x too (CI: -m arviz1)
@pytest.mark.parametrize("how", ["pickle", "copy", "shallow copy", "deepcopy"])
def test_kfold_attribute_survives_pickle_and_copy(how):
    """``.kfold`` (folds, fold_status, fold_reason, seconds) survives as ``.loo_adapt`` does,
    on arviz 0.x (pandas Series: pandas metadata) and 1.x (dataclass)."""
    import copy
    import pickle

    res = _small_kfold()
    assert set(res.kfold) == {"folds", "fold_status", "fold_reason", "seconds"}
    back = {"pickle": lambda r: pickle.loads(pickle.dumps(r)), "copy": lambda r: r.copy(),
            "shallow copy": lambda r: r.copy(deep=False) if hasattr(r, "index") else
            copy.copy(r), "deepcopy": copy.deepcopy}[how](res)
    assert type(back) is type(res)
    assert back.loo_adapt is not None
    assert getattr(back, "kfold", None) is not None, f"{how} lost .kfold"
    assert set(back.kfold) == set(res.kfold)
    for key, value in res.kfold.items():
        np.testing.assert_array_equal(np.asarray(back.kfold[key]), np.asarray(value),
                                      err_msg=key)
    if how in ("pickle", "copy", "deepcopy"):  # an independent copy
        assert back.kfold is not res.kfold
        assert back.kfold["folds"] is not res.kfold["folds"]
    np.testing.assert_array_equal(back.loo_adapt.elpd_i, res.loo_adapt.elpd_i)


@pytest.mark.arviz1
def test_az_compare_ranks_kfold_results_as_the_exact_elpd():
    az = pytest.importorskip("arviz")
    taus = {"wide": 1.0, "tight": 0.05}
    fits = {name: kfold(refit_fn=LinRefit(t), n_obs=N, K=6, log_lik=full_log_lik(t), seed=1,
                        n_jobs=1, progress=False) for name, t in taus.items()}
    exact = {}
    for name, t in taus.items():
        folds = fits[name].kfold["folds"]
        exact[name] = sum(exact_heldout(np.flatnonzero(folds == k), t).sum() for k in range(6))
    table = az.compare(fits)  # arviz 0.x and 1.x alike
    assert list(table.index) == sorted(exact, key=exact.get, reverse=True)
    if "elpd_loo" in table.columns:  # arviz 1.x rounds the table for display
        totals = [fits[m].loo_adapt.elpd_i.sum() for m in table.index]
        assert table["elpd_loo"].to_numpy(dtype=float) == pytest.approx(totals, rel=1e-12)
    for name in fits:  # the K-fold totals are right, not only their order
        mcse = np.sqrt(np.sum(fits[name].loo_adapt.mcse_elpd_i ** 2))
        assert abs(fits[name].loo_adapt.elpd_i.sum() - exact[name]) < 4 * mcse


def test_fold_splits_follow_r_loo():
    f = kfold_split(23, 5, seed=2)
    assert sorted(np.bincount(f).tolist()) == [4, 4, 5, 5, 5]
    y = np.r_[np.zeros(17), np.ones(8)].astype(int)
    s = kfold_split(25, 4, folds="stratified", y=y, seed=2)
    for cls in (0, 1):
        counts = np.bincount(s[y == cls], minlength=4)
        assert counts.max() - counts.min() <= 1
    groups = np.repeat(np.arange(7), 3)
    g = kfold_split(21, 3, folds="grouped", groups=groups, seed=0)
    for grp in range(7):
        assert np.unique(g[groups == grp]).size == 1  # a group never straddles folds
    assert sorted(np.bincount([g[groups == grp][0] for grp in range(7)]).tolist()) == [2, 2, 3]
    assert kfold_split(4, folds=["b", "a", "b", "c"]).tolist() == [1, 0, 1, 2]
    with pytest.raises(ValueError, match="needs the outcome"):
        kfold_split(10, 2, folds="stratified")
    with pytest.raises(ValueError, match="at least K groups"):
        kfold_split(6, 4, folds="grouped", groups=[0, 0, 1, 1, 2, 2])
    with pytest.raises(ValueError, match="'random', 'stratified'"):
        kfold_split(6, 2, folds="loo")


def test_failed_fold_raises_and_resume_fits_only_the_missing_fold(tmp_path):
    ck = tmp_path / "ck"
    bad = int(np.flatnonzero(kfold_split(N, 4, seed=0) == 2)[0])
    with pytest.raises(RuntimeError, match=r"fold 2 .*fold refit failed.*same checkpoint"):
        kfold(refit_fn=LinRefit(1.0, fail_fold_with=bad), n_obs=N, K=4,
              log_lik=full_log_lik(1.0), n_jobs=1, checkpoint=ck, progress=False,
              key="linrefit-1")  # the failure is part of the object: the key says "same run"
    assert sorted(f.name for f in ck.glob("fold_*.npz")) == [
        "fold_0.npz", "fold_1.npz", "fold_3.npz"]
    resumed = kfold(refit_fn=LinRefit(1.0), n_obs=N, K=4, log_lik=full_log_lik(1.0),
                    n_jobs=1, checkpoint=ck, progress=False, key="linrefit-1")
    fresh = kfold(refit_fn=LinRefit(1.0), n_obs=N, K=4, log_lik=full_log_lik(1.0),
                  n_jobs=1, progress=False)
    np.testing.assert_array_equal(resumed.loo_adapt.elpd_i, fresh.loo_adapt.elpd_i)
    with pytest.raises(ValueError, match="pass log_lik="):
        kfold(refit_fn=LinRefit(1.0), n_obs=N, K=4)


@pytest.fixture(scope="module")
def program():
    pytest.importorskip("stanli")
    from loo_adapt.stan.program import StanProgram

    data = json.loads(DATA_JSON.read_text())
    data["mixis"] = 0
    return StanProgram(BUNDLED, data, backend="stanli")


def test_bundled_logistic_kfold_with_k_equal_n_is_exact_loo(program):
    az = pytest.importorskip("arviz")
    truth = np.loadtxt(TRUTH, delimiter=",", skiprows=1)
    n = program.n_obs
    loo = kfold(program, K=n, chains=2, draws=300, warmup=300, seed=5, progress=False)
    pl = loo.loo_adapt
    assert loo.kfold["fold_status"].tolist().count("ok") >= n - 2
    t_elpd, t_se, t_p1 = truth[:, 1], truth[:, 2], truth[:, 3]
    tol = 4 * np.sqrt(pl.mcse_elpd_i**2 + t_se**2) + 0.02
    assert np.all(np.abs(pl.elpd_i - t_elpd) < tol)
    assert abs(pl.elpd_i.sum() - t_elpd.sum()) < 4 * np.sqrt(
        np.sum(pl.mcse_elpd_i**2 + t_se**2)) + 0.05
    assert np.all(np.abs(pl.loo_prob - t_p1) < 4 * np.exp(t_elpd) * np.sqrt(
        pl.mcse_elpd_i**2 + t_se**2) + 0.01)
    # K = 3, stratified: every fold keeps the outcome balance
    k3 = kfold(program, K=3, folds="stratified", chains=2, draws=300, warmup=300, seed=5,
               progress=False)
    y = program.y
    for cls in (0, 1):
        counts = np.bincount(k3.kfold["folds"][y == cls], minlength=3)
        assert counts.max() - counts.min() <= 1
    # oracle for fold 0: a fit on the training rows built by hand, held-out Bernoulli-logit
    # densities computed with scipy (no data_without, no heldout_log_lik)
    from scipy.special import log_expit, logsumexp

    from loo_adapt.stan.backends import fit, stan_data

    test = np.flatnonzero(k3.kfold["folds"] == 0)
    train = np.setdiff1d(np.arange(n), test)
    Xa = np.asarray(program.data["X"], dtype=float)
    data = stan_data("logistic_normal", Xa[train], y[train],
                     prior_sd=program.data["prior_sd"], scale_icept=program.data["scale_icept"])
    ref = fit(BUNDLED, data, backend="stanli", chains=4, draws=1000, warmup=500, seed=17)
    eta = ref.flat("alpha").reshape(-1, 1) + ref.flat("beta") @ Xa[test].T
    ll = np.where(y[test] == 1, log_expit(eta), log_expit(-eta))
    oracle = logsumexp(ll, axis=0) - np.log(ll.shape[0])
    got = k3.loo_adapt.elpd_i[test]
    assert abs(got.sum() - oracle.sum()) < 4 * 1.5 * np.sqrt(
        np.sum(k3.loo_adapt.mcse_elpd_i[test] ** 2)) + 0.05
    table = az.compare({"k3": k3, "loo": loo}, ic="loo")
    assert sorted(table.index) == ["k3", "loo"]
    assert table.loc["k3", "elpd_loo"] == pytest.approx(float(k3["elpd_loo"]))


class PidLinRefit(LinRefit):
    """LinRefit that leaves a file named after the process that ran each fold."""

    def __init__(self, tau, log_dir):
        super().__init__(tau)
        self.log_dir = str(log_dir)

    def __call__(self, rows, seed):
        import os

        pathlib.Path(self.log_dir, f"{os.getpid()}_{rows[0]}").touch()
        return super().__call__(rows, seed)


def test_kfold_folds_run_on_the_workers_of_a_dask_cluster(tmp_path):
    import os

    distributed = pytest.importorskip("distributed")
    serial = kfold(refit_fn=LinRefit(1.0), n_obs=N, K=4, log_lik=full_log_lik(1.0), seed=2,
                   n_jobs=1, progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        res = kfold(refit_fn=PidLinRefit(1.0, tmp_path), n_obs=N, K=4,
                    log_lik=full_log_lik(1.0), seed=2, executor=client, progress=False)
        worker_pids = set(client.run(os.getpid).values())
    np.testing.assert_array_equal(res.loo_adapt.elpd_i, serial.loo_adapt.elpd_i)
    fold_pids = {int(f.name.split("_")[0]) for f in tmp_path.iterdir()}
    assert len(list(tmp_path.iterdir())) == 4
    assert fold_pids <= worker_pids and os.getpid() not in fold_pids


class _OwnParameterRefit:
    """Row 0's held-out draws as those of an observation with a parameter of its own drawn
    from its prior (y = 75, theta = mu + tau * eta, tau rarely large): heavy-tailed."""

    def __call__(self, rows, seed):
        rng = np.random.default_rng(seed)
        out = np.empty((4, 1000, len(rows)))
        for j, r in enumerate(rows):
            tau = 3.0 * np.exp(0.5 * rng.normal(size=(4, 1000)))
            theta = rng.normal(5.0, 2.0, size=(4, 1000)) + tau * rng.normal(size=(4, 1000))
            out[..., j] = stats.norm.logpdf(75.0 if r == 0 else 5.0, theta, 10.0)
        return out


def test_a_fold_with_a_heavy_tailed_heldout_likelihood_is_not_verified():
    res = kfold(refit_fn=_OwnParameterRefit(), n_obs=6, K=3, seed=2, n_jobs=1,
                log_lik=np.full((200, 6), np.log(0.02)), progress=False)
    pl = res.loo_adapt
    folds = res.kfold["folds"]
    bad = folds == folds[0]
    assert not pl.reliable[0]
    assert pl.reliable[~bad].all()
    assert "heavy-tailed held-out likelihood" in res.kfold["fold_reason"][folds[0]]
