"""Bridge sampling of p(y_i | y_-i) from posterior and leave-one-out draws (`core.bridge`),
against closed forms and quadrature."""

import numpy as np
import pytest
from scipy import integrate, stats

from loo_adapt.core.bridge import bridge_elpd
from loo_adapt.stan.heldout import heldout_elpd


def _ll(theta):
    return stats.norm.logpdf(1.0, theta, 1.0)


def test_conjugate_normal_against_the_closed_form():
    """theta | y_-i ~ N(0, 1), y_i | theta ~ N(theta, 1) with y_i = 1: theta | y ~ N(1/2, 1/2)
    and p(y_i | y_-i) = N(1 | 0, 2); over 30 seeds the z's have rms near 1."""
    exact = stats.norm.logpdf(1.0, 0.0, np.sqrt(2.0))
    z = []
    for seed in range(30):
        rng = np.random.default_rng(seed)
        loo = rng.normal(0.0, 1.0, size=(4, 500))
        post = rng.normal(0.5, np.sqrt(0.5), size=(4, 500))
        elpd, se = bridge_elpd(_ll(post), _ll(loo))
        z.append((elpd - exact) / se)
    rms = float(np.sqrt(np.mean(np.square(z))))
    assert 0.7 < rms < 1.3, rms
    assert np.max(np.abs(z)) < 4


# An observation with a parameter of its own, theta = mu + tau * eta, left out: eta drawn
# from its prior, y = 75 far out; mu ~ N(5, 2), tau ~ logN(log 3, 0.5), y | theta ~ N(theta, 10).
def _exact_own_parameter():
    def f(t):
        return stats.norm.pdf(75.0, 5.0, np.sqrt(4.0 + t**2 + 100.0)) * stats.lognorm.pdf(
            t, 0.5, scale=3.0)

    return float(np.log(integrate.quad(f, 0.0, 2000.0, points=[3.0, 30.0, 100.0],
                                       limit=400, epsabs=0.0, epsrel=1e-10)[0]))


def _own_parameter_samples(seed, shape=(4, 1000)):
    """(posterior, leave-one-out) draws of log p(y | theta): the latter from the prior, the
    former by sampling-importance-resampling (mu, tau) against the marginal N(75 | mu,
    sqrt(tau^2 + 100)) and theta | mu, tau, y from its normal conditional."""
    rng = np.random.default_rng(seed)
    mu = rng.normal(5.0, 2.0, size=shape)
    tau = 3.0 * np.exp(0.5 * rng.normal(size=shape))
    loo = stats.norm.logpdf(75.0, mu + tau * rng.normal(size=shape), 10.0)
    M = 400_000
    mu_b = rng.normal(5.0, 2.0, size=M)
    tau_b = 3.0 * np.exp(0.5 * rng.normal(size=M))
    lw = stats.norm.logpdf(75.0, mu_b, np.sqrt(tau_b**2 + 100.0))
    w = np.exp(lw - lw.max())
    pick = rng.choice(M, size=int(np.prod(shape)), p=w / w.sum())
    m, t = mu_b[pick], tau_b[pick]
    v = 1.0 / (1.0 / t**2 + 1.0 / 100.0)
    theta = rng.normal(v * (m / t**2 + 75.0 / 100.0), np.sqrt(v))
    return stats.norm.logpdf(75.0, theta, 10.0).reshape(shape), loo


def test_bridge_holds_where_the_refits_plain_mean_misses():
    """The refit's plain mean misses the quadrature value by several of its MCSEs (rms z far
    above 1); the bridge with the posterior draws is within its own (rms z near 1)."""
    exact = _exact_own_parameter()
    zb, zp = [], []
    for seed in range(12):
        post, loo = _own_parameter_samples(seed)
        elpd, se = bridge_elpd(post, loo)
        zb.append((elpd - exact) / se)
        pe, pse, _ = heldout_elpd(loo)
        zp.append((pe - exact) / pse)
    assert float(np.sqrt(np.mean(np.square(zp)))) > 3
    rms = float(np.sqrt(np.mean(np.square(zb))))
    assert 0.6 < rms < 1.4, rms
    assert np.max(np.abs(zb)) < 4


def test_bridge_checks_its_input():
    ok = np.zeros((4, 100))
    with pytest.raises(ValueError, match="NaN"):
        bridge_elpd(np.full((4, 100), np.nan), ok)
    with pytest.raises(ValueError, match="at least 4"):
        bridge_elpd(np.zeros((4, 3)), ok)
    with pytest.raises(ValueError, match="-inf"):
        bridge_elpd(ok, np.full((4, 100), -np.inf))
    # a constant likelihood: the ratio is that constant, exactly
    elpd, se = bridge_elpd(np.full((4, 100), -2.0), np.full((4, 100), -2.0))
    assert elpd == pytest.approx(-2.0, abs=1e-12) and se == pytest.approx(0.0, abs=1e-12)
