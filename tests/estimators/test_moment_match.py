"""Full-unconstrained-space moment matching (loo_adapt.estimators.moment_match) and the
Stan log density it runs on (loo_adapt.stan.log_density)."""

import glob
import json
import pathlib
import warnings

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from loo_adapt.core.psis import psislw
from loo_adapt.estimators.moment_match import _split_weights, moment_match_loo
from loo_adapt.stan.backends import draws_from_columns
from loo_adapt.stan.log_density import StanLogDensity

HERE = pathlib.Path(__file__).resolve().parents[1]
DATA = HERE / "data" / "fullspace"
CMDSTAN = HERE / "data" / "cmdstan"

pytest.importorskip("stanli")


def _read_sample(name):
    vals, names = [], None
    for f in sorted(glob.glob(str(CMDSTAN / name / "sample" / "*.csv"))):
        with open(f) as fh:
            lines = [ln for ln in fh if not ln.startswith("#") and ln.strip()]
        names = lines[0].strip().split(",")
        vals.append(np.array([[float(v) for v in ln.split(",")] for ln in lines[1:]]))
    return draws_from_columns(names, np.stack(vals))


def _model(name):
    return StanLogDensity.from_stan(DATA / f"{name}.stan",
                                    json.loads((DATA / f"{name}.data.json").read_text()))


@pytest.fixture(scope="module")
def logistic():
    draws = _read_sample("logistic_normal")
    m = _model("logistic_normal")
    U = m.unconstrain(draws)
    return m, draws, U, draws.log_lik().reshape(U.shape[0], -1)


@pytest.mark.parametrize("name", ["logistic_normal", "rhs_logistic", "relu1"])
def test_unconstrain_and_log_lik_roundtrip(name):
    """Draws (Stan shapes, matrices W1[D,H], array[1] beta0, constrained tau/lambda) ->
    unconstrained -> generated quantities must reproduce CmdStan's own log_lik columns
    (written with 6 significant digits)."""
    draws = _read_sample(name)
    m = _model(name)
    U = m.unconstrain(draws)
    assert U.shape == (draws.n_samples, m.n_params)
    ll = m.log_lik(U[:200])
    ref = draws.log_lik().reshape(draws.n_samples, -1)[:200]
    # parameters are read back from 6 significant digits too, so errors reach ~5e-5; a wrong
    # name or order mapping gives O(1) errors
    np.testing.assert_allclose(ll, ref, rtol=1e-4, atol=1e-4)


def test_unconstrain_reuses_only_the_same_draws():
    """A second unconstrain of draws with the same constrained values (another object)
    makes no BridgeStan call and returns the same numbers; changed values are unconstrained
    again.  Oracle: tau is declared <lower=0>, so its unconstrained value is log(tau)."""
    draws = _read_sample("rhs_logistic")
    m = _model("rhs_logistic")
    calls = []
    inner = m.model

    class Counting:  # the BridgeStan model, its param_unconstrain counted
        def __getattr__(self, name):
            return getattr(inner, name)

        def param_unconstrain(self, theta, out=None):
            calls.append(1)
            return inner.param_unconstrain(theta, out=out)

    m.model = Counting()
    U = m.unconstrain(draws)
    k = m._block.index(next(b for b in m._block if b[0] == "tau"))
    col = sum(size for _, size, _ in m._block[:k])  # tau's column (scalars map one to one)
    np.testing.assert_allclose(U[:, col], np.log(draws.flat("tau")), rtol=1e-12)
    n_first = len(calls)
    assert n_first == draws.n_samples
    same = type(draws)(variables={k: np.array(v) for k, v in draws.variables.items()},
                       sample_stats=draws.sample_stats)
    U2 = m.unconstrain(same)
    assert len(calls) == n_first  # no call: the values are the same
    np.testing.assert_array_equal(U2, U)
    U2[:] = 0.0  # the caller's copy; the kept result is not touched
    np.testing.assert_array_equal(m.unconstrain(same), U)
    changed = type(draws)(variables={k: np.array(v) for k, v in draws.variables.items()},
                          sample_stats=draws.sample_stats)
    changed.variables["tau"][0, 0] *= 2.0
    U3 = m.unconstrain(changed)
    assert len(calls) == 2 * n_first  # unconstrained again
    assert U3[0, col] == pytest.approx(np.log(2.0 * draws.flat("tau")[0]), rel=1e-12)
    np.testing.assert_array_equal(U3[1:], U[1:])
    # a few draws (as the identity check asks) do not evict the kept whole result
    m.unconstrain(changed, np.arange(5))
    n_calls = len(calls)
    np.testing.assert_array_equal(m.unconstrain(changed), U3)
    assert len(calls) == n_calls


def test_unconstrain_keeps_no_large_result(monkeypatch):
    """Draws larger than the cap are unconstrained on every call (nothing kept)."""
    import loo_adapt.stan.log_density as ld

    draws = _read_sample("logistic_normal")
    m = _model("logistic_normal")
    monkeypatch.setattr(ld, "_KEEP_VALUES", 10)
    m.unconstrain(draws)
    assert m._last_unconstrained is None


def test_missing_parameter_is_a_clear_error(logistic):
    m, draws, _, _ = logistic
    bad = type(draws)(variables={"alpha": draws["alpha"]})
    with pytest.raises(KeyError, match="beta"):
        m.unconstrain(bad)


# ---- moment matching on an exactly solvable model --------------------------------------------
SIGMA, PRIOR_SD = 1.0, 3.0
Y = np.array([-0.4, 0.3, 1.1, -1.2, 0.5, 0.0, 0.8, -0.6, 3.5])


def _post(y):
    prec = 1 / PRIOR_SD**2 + len(y) / SIGMA**2
    return y.sum() / SIGMA**2 / prec, 1 / prec


def _normal_model():
    """Normal mean with a log-scale nuisance-free 2-D parameter (mu, z) where z ~ N(0, 1)
    independently: the affine steps must move mu and leave z alone."""
    def log_prob(U):
        mu, z = U[:, 0], U[:, 1]
        return (stats.norm.logpdf(mu, 0, PRIOR_SD) + stats.norm.logpdf(z)
                + stats.norm.logpdf(Y[None, :], mu[:, None], SIGMA).sum(axis=1))

    def log_lik_i(U, i):
        return stats.norm.logpdf(Y[i], U[:, 0], SIGMA)

    return log_prob, log_lik_i


def test_moment_matching_normal_closed_form():
    rng = np.random.default_rng(0)
    S = 2000
    m, v = _post(Y)
    U = np.column_stack([rng.normal(m, np.sqrt(v), S), rng.normal(size=S)])
    log_prob, log_lik_i = _normal_model()
    ll = stats.norm.logpdf(Y[None, :], U[:, :1], SIGMA)
    truth = np.array([stats.norm.logpdf(Y[i], *(lambda a, b: (a, np.sqrt(SIGMA**2 + b)))(
        *_post(np.delete(Y, i)))) for i in range(len(Y))])
    res = moment_match_loo(U, ll, log_prob, log_lik_i, indices=[8], khat_threshold=0.0)
    assert res.improved[8] and res.steps[8][0] == "shift"
    psis_err = abs(logsumexp(ll[:, 8] + psislw(-ll[:, 8])[0]) - truth[8])
    assert abs(res.elpd_i[8] - truth[8]) < 3 * res.mcse_elpd_i[8] + 1e-3
    assert abs(res.elpd_i[8] - truth[8]) < psis_err
    assert res.pareto_k[8] < res.pareto_k_before[8]
    # untouched observations keep PSIS
    np.testing.assert_array_equal(res.elpd_i[:8], logsumexp(ll + psislw(-ll)[0], axis=0)[:8])


def test_split_inverse_is_exact():
    rng = np.random.default_rng(1)
    U = rng.normal(size=(10, 3))
    shift, scale = np.array([0.5, -1.0, 2.0]), np.array([1.5, 0.7, 1.2])
    M = np.array([[1.0, 0, 0], [0.3, 0.9, 0], [-0.2, 0.4, 1.1]])
    seen = []

    def log_prob(x):
        seen.append(x.copy())
        return np.zeros(len(x))

    _split_weights(U, log_prob, lambda x, i: np.zeros(len(x)), 0, shift, scale, M, True)
    fwd, inv = seen
    half = len(U) // 2
    # first half of `fwd` is T(U); second half of `inv` is T^-1(U): T(T^-1(u)) must be u
    mean = U.mean(axis=0)
    T = lambda x: ((x - mean) * scale) @ M.T + mean + shift  # noqa: E731
    np.testing.assert_allclose(fwd[:half], T(U[:half]), rtol=1e-12)
    np.testing.assert_allclose(T(inv[half:]), U[half:], rtol=1e-12, atol=1e-12)


@pytest.mark.slow
def test_moment_matching_fixture_vs_truth(logistic):
    m, _, U, ll = logistic
    truth = np.loadtxt(DATA / "logistic_normal.csv", delimiter=",", skiprows=1)[:, 1]
    res = moment_match_loo(U, ll, m.log_density, lambda u, i: m.log_lik(u, i))
    psis = logsumexp(ll + psislw(-ll)[0], axis=0)
    bad = res.pareto_k_before > 0.7
    rmse = lambda e: np.sqrt(np.mean((e - truth)[bad] ** 2))  # noqa: E731
    print(f"logistic_normal high-k: PSIS {rmse(psis):.4f}, MM {rmse(res.elpd_i):.4f}")
    assert bad.sum() == 29
    assert rmse(res.elpd_i) < rmse(psis)
    assert np.all(res.pareto_k[bad] < res.pareto_k_before[bad])


@pytest.mark.arviz1
@pytest.mark.slow
def test_moment_matching_matches_arviz_stats(logistic):
    """Same draws, log density and PSIS: arviz-stats >= 1.3 ``loo_moment_match`` must agree
    to rounding when our split inverse is R's (which arviz-stats copies; the default
    "exact" inverse differs by design, see ``moment_match_loo``)."""
    azb = pytest.importorskip("arviz_base")
    xr = pytest.importorskip("xarray")
    az_stats = pytest.importorskip("arviz_stats")
    m, _, U, ll = logistic
    S, P = U.shape
    dt = azb.from_dict({"posterior": {"u": U[None]}, "log_likelihood": {"y": ll[None]},
                        "observed_data": {"y": np.zeros(ll.shape[1])}})
    upars = xr.DataArray(U[None], dims=("chain", "draw", "upars_dim"))

    def lp_fn(up):
        return xr.DataArray(m.log_density(up.values.reshape(-1, P)).reshape(up.shape[:2]),
                            dims=("chain", "draw"))

    def lli_fn(up, i):
        return xr.DataArray(m.log_lik(up.values.reshape(-1, P), i).reshape(up.shape[:2]),
                            dims=("chain", "draw"))

    def az_psis(lr, reff):
        lw, k = xr.DataArray(-lr[None], dims=("chain", "draw")).azstats.psislw(
            r_eff=reff, dim=["chain", "draw"])
        return lw.values.reshape(-1), float(k)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lo = az_stats.loo(dt, pointwise=True, var_name="y", reff=1.0)
        ref = az_stats.loo_moment_match(dt, lo, lp_fn, lli_fn, upars=upars, var_name="y",
                                        reff=1.0, split=True)
    ours = moment_match_loo(U, ll, m.log_density, lambda u, i: m.log_lik(u, i),
                            split_inverse="r", psis_fn=az_psis)
    np.testing.assert_allclose(ours.elpd_i, ref.elpd_i.values, atol=1e-9)
    np.testing.assert_allclose(ours.pareto_k, ref.pareto_k.values, atol=1e-8)
