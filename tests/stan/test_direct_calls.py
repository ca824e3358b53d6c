"""`StanLogDensity`'s loops over draws call BridgeStan's C functions directly
(`loo_adapt.stan.log_density.direct_calls`): the same numbers as closed forms, rejected points
where Stan rejects them, and the Python methods' path for any other model object.

The program: y ~ normal(mu, sigma) with priors mu ~ normal(0, 5), sigma ~ exponential(1),
a transformed parameter, and two ``reject`` calls (the model block above mu = 3, the
generated quantities above mu = 2.5).  Oracles: the unconstrained point (mu, log sigma), the
log density's differences between points and its gradient in closed form (the Jacobian
log sigma included), ``scipy.stats.norm.logpdf`` for ``log_lik``.
"""

import numpy as np
import pytest
from scipy import stats

from loo_adapt.draws import Draws
from loo_adapt.stan.log_density import StanLogDensity, bridgestan_model, direct_calls

pytest.importorskip("stanli")

PROGRAM = """
data { int<lower=1> N; vector[N] y; }
parameters { real mu; real<lower=0> sigma; }
transformed parameters { real s2 = square(sigma); }
model {
  if (mu > 3) reject("mu too large: ", mu);
  mu ~ normal(0, 5);
  sigma ~ exponential(1);
  y ~ normal(mu, sigma);
}
generated quantities {
  vector[N] log_lik;
  array[N] real y_rep;
  if (mu > 2.5) reject("gq: mu ", mu);
  for (n in 1:N) {
    log_lik[n] = normal_lpdf(y[n] | mu, sigma);
    y_rep[n] = normal_rng(mu, sigma);
  }
}
"""

Y = np.array([0.3, -1.2, 2.2, 0.8, 1.1, -0.4])


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("direct") / "normal_reject.stan"
    path.write_text(PROGRAM)
    return bridgestan_model(path, {"N": len(Y), "y": Y.tolist()})


def _points(seed=4, s=40):
    rng = np.random.default_rng(seed)
    U = np.column_stack([rng.uniform(-2.0, 4.0, s), rng.normal(0.0, 0.7, s)])
    U[:3, 0] = [0.1, 2.7, 3.5]  # accepted, rejected by the generated quantities, by both
    return U


def _log_density(U):
    mu, log_sigma = U[:, 0], U[:, 1]
    sigma = np.exp(log_sigma)
    lp = (stats.norm.logpdf(mu, 0, 5) + stats.expon.logpdf(sigma) + log_sigma
          + stats.norm.logpdf(Y[None, :], mu[:, None], sigma[:, None]).sum(axis=1))
    d_mu = -mu / 25 + ((Y[None, :] - mu[:, None]) / sigma[:, None] ** 2).sum(axis=1)
    d_ls = (-sigma + 1 - len(Y)
            + ((Y[None, :] - mu[:, None]) ** 2 / sigma[:, None] ** 2).sum(axis=1))
    return lp, np.column_stack([d_mu, d_ls])


def test_the_direct_calls_match_closed_forms_and_reject_where_stan_rejects(model):
    density = StanLogDensity(model)
    assert density._direct is not None, "a stanli model is a bridgestan.StanModel"
    U = _points()
    ok = U[:, 0] <= 3.0
    lp_true, grad_true = _log_density(U)

    lp = density.log_density(U)
    assert np.all(np.isneginf(lp[~ok])) and np.all(np.isfinite(lp[ok]))
    # propto drops a constant: compare differences from the first (accepted) point
    np.testing.assert_allclose(lp[ok] - lp[0], lp_true[ok] - lp_true[0], rtol=0, atol=1e-9)

    lp2, grad = density.log_density_gradient(U)
    np.testing.assert_array_equal(lp2, lp)
    np.testing.assert_allclose(grad[ok], grad_true[ok], rtol=1e-10, atol=1e-10)
    assert np.all(np.isnan(grad[~ok]))

    ll = density.log_lik(U)
    gq_ok = U[:, 0] <= 2.5
    want = stats.norm.logpdf(Y[None, :], U[:, :1], np.exp(U[:, 1:]))
    np.testing.assert_allclose(ll[gq_ok], want[gq_ok], rtol=1e-12, atol=1e-12)
    assert np.all(np.isnan(ll[~gq_ok]))
    np.testing.assert_allclose(density.log_lik(U, 2)[gq_ok], want[gq_ok, 2], rtol=1e-12)


def test_unconstrain_matches_the_closed_form_and_names_the_draw_it_cannot_take(model):
    density = StanLogDensity(model)
    rng = np.random.default_rng(9)
    mu, sigma = rng.normal(size=(2, 50)), rng.gamma(2.0, 1.0, size=(2, 50))
    U = density.unconstrain(Draws({"mu": mu, "sigma": sigma}))
    np.testing.assert_allclose(U, np.column_stack([mu.ravel(), np.log(sigma.ravel())]),
                               rtol=1e-13, atol=1e-13)
    sigma[1, 7] = -1.0  # below the lower bound: Stan refuses to unconstrain it
    with pytest.raises(RuntimeError, match="param_unconstrain of draw 57"):
        density.unconstrain(Draws({"mu": mu, "sigma": sigma}))


class _Wrapped:
    """The same model behind an object that is not a bridgestan.StanModel."""

    def __init__(self, model):
        self._model = model

    def __getattr__(self, name):
        return getattr(self._model, name)


def test_any_other_model_object_goes_through_its_python_methods(model):
    wrapped = _Wrapped(model)
    assert direct_calls(wrapped) is None
    density = StanLogDensity(wrapped)
    assert density._direct is None
    U = _points(seed=5)
    ok = U[:, 0] <= 3.0
    lp_true, grad_true = _log_density(U)
    lp, grad = density.log_density_gradient(U)
    np.testing.assert_allclose(lp[ok] - lp[0], lp_true[ok] - lp_true[0], rtol=0, atol=1e-9)
    np.testing.assert_allclose(grad[ok], grad_true[ok], rtol=1e-10, atol=1e-10)
    assert np.all(np.isneginf(lp[~ok]))


def test_a_replaced_model_answers_for_itself(model, tmp_path):
    """``density.model`` replaced by the same program on other data: the loops call the new
    model's C functions, not the first one's."""
    path = tmp_path / "normal_reject.stan"
    path.write_text(PROGRAM)
    y2 = Y + 1.5
    density = StanLogDensity(model)
    density.model = bridgestan_model(path, {"N": len(y2), "y": y2.tolist()})
    U = _points(seed=6)
    keep = U[:, 0] <= 2.5
    want = stats.norm.logpdf(y2[None, :], U[:, :1], np.exp(U[:, 1:]))
    np.testing.assert_allclose(density.log_lik(U)[keep], want[keep], rtol=1e-12, atol=1e-12)


def test_threads_sharing_a_model_get_their_own_answers(model):
    """Two threads through one density, many points rejected in both: each gets what one
    thread alone gets (each call reads and frees its own error messages)."""
    from concurrent.futures import ThreadPoolExecutor

    density = StanLogDensity(model)
    points = [_points(seed=s, s=400) for s in (7, 8)]
    alone = [density.log_density_gradient(U) for U in points]
    with ThreadPoolExecutor(2) as pool:
        for _ in range(3):
            both = list(pool.map(density.log_density_gradient, points))
            for (lp, grad), (lp0, grad0) in zip(both, alone):
                np.testing.assert_array_equal(lp, lp0)
                np.testing.assert_array_equal(grad, grad0)
    assert np.isneginf(alone[0][0]).sum() > 50  # the error path ran, in both threads
