"""One ReLU net: the adaptive-IS family (`models.relu.ReLUNet`), the Laplace bridge
(`laplace.net.ReLUPoint`) and the bundled Stan program ``relu_net`` agree.

Oracles independent of the package: the Stan program's own ``log_lik`` (sampled with
stanli, full double precision) and the logits / log-likelihood / Jacobian written out here
in plain numpy from the drawn Stan-shaped weights.
"""

from __future__ import annotations

import numpy as np
import pytest

from loo_adapt.laplace.net import ReLUPoint, log_posterior
from loo_adapt.models.relu import ReLUNet


def _tiny(seed=0, n=12, d=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (rng.random(n) < 0.5).astype(int)
    return X, y


def _logits_by_hand(W1, b1, w2, b2, X):
    """mu_i = sum_k w2_k max(0, sum_d X_id W1_dk + b1_k) + b2, loop by loop."""
    n, D = X.shape
    out = np.empty(n)
    for i in range(n):
        acc = b2
        for k in range(W1.shape[1]):
            z = b1[k] + sum(X[i, d] * W1[d, k] for d in range(D))
            acc += w2[k] * max(z, 0.0)
        out[i] = acc
    return out


def _jacobian_by_hand(W1, b1, w2, X):
    """Rows [dmu/dW1 (row-major), dmu/db1, dmu/dw2, dmu/db2] from the chain rule."""
    D, H = W1.shape
    rows = []
    for x in X:
        z = x @ W1 + b1
        on = (z > 0).astype(float)
        dW1 = [x[d] * w2[k] * on[k] for d in range(D) for k in range(H)]
        rows.append(dW1 + list(w2 * on) + list(np.maximum(z, 0.0)) + [1.0])
    return np.array(rows)


@pytest.fixture(scope="module")
def stan_relu():
    stanli = pytest.importorskip("stanli")
    from loo_adapt.stan import backends as ls

    X, y = _tiny()
    data = ls._jsonable(ls.stan_data("relu_net", X, y, H=2))
    raw = stanli.Model(str(ls.stan_model_path("relu_net")), data=data).sample(
        chains=1, warmup=100, samples=30, refresh=0, seed=4
    )
    return X, y, ls.draws_from_columns(raw.names, raw.draws())


def test_family_bridge_and_stan_program_give_the_same_log_lik(stan_relu):
    X, y, draws = stan_relu
    W1, b1, w2, b2 = (np.asarray(draws[k]).reshape(30, *np.shape(draws[k])[2:])
                      for k in ("W1", "b1", "w2", "b2"))
    stan_ll = draws.log_lik().reshape(30, -1)

    family = ReLUNet(X, y)
    theta, _ = family.theta_from_draws(draws)
    mu_family = family.linear_predictor(theta)
    np.testing.assert_allclose(family.log_lik(theta), stan_ll, rtol=0, atol=1e-8)

    for s in (0, 11, 29):
        by_hand = _logits_by_hand(W1[s], b1[s], w2[s], float(b2[s]), X)
        net = ReLUPoint(W1[s], b1[s], w2[s], b2[s])
        np.testing.assert_array_equal(net.theta, theta[s])  # one packing order
        np.testing.assert_allclose(mu_family[s], by_hand, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(net.forward(X), by_hand, rtol=1e-12, atol=1e-12)
        ll_bridge = y * net.forward(X) - np.logaddexp(0.0, net.forward(X))
        np.testing.assert_allclose(ll_bridge, stan_ll[s], rtol=0, atol=1e-8)
        # the bridge's log posterior is the Stan program's: log_lik + N(0, 1) priors
        prior = -0.5 * np.sum(theta[s] ** 2)
        assert log_posterior(net, X, y, 1.0) == pytest.approx(stan_ll[s].sum() + prior,
                                                              abs=1e-8)
        jac = _jacobian_by_hand(W1[s], b1[s], w2[s], X)
        np.testing.assert_allclose(net.jacobian(X), jac, rtol=1e-12, atol=1e-12)
        for i in (0, 5, X.shape[0] - 1):
            np.testing.assert_allclose(family.grad_linear_predictor(theta[s:s + 1], i)[0],
                                       jac[i], rtol=1e-12, atol=1e-12)


def test_pack_unpack_round_trip_and_stan_order():
    rng = np.random.default_rng(1)
    W1, b1, w2, b2 = rng.normal(size=(4, 3, 2)), rng.normal(size=(4, 2)), \
        rng.normal(size=(4, 2)), rng.normal(size=4)
    theta = ReLUNet.pack(W1, b1, w2, b2)
    assert theta.shape == (4, 3 * 2 + 2 * 2 + 1)
    # W1[d, k] is component d * H + k (Stan's matrix[D, H] read row-major)
    assert theta[2, 1 * 2 + 1] == W1[2, 1, 1]
    for got, want in zip(ReLUNet.unpack(theta, 3, 2), (W1, b1, w2, b2)):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="expected"):
        ReLUNet.unpack(theta[:, :-1], 3, 2)
    with pytest.raises(ValueError, match="no one-hidden-layer net"):
        ReLUNet.forward(theta[:, :-1], rng.normal(size=(5, 3)))


def test_old_laplace_name_warns_and_is_the_point_class():
    import loo_adapt.laplace as lap

    with pytest.warns(DeprecationWarning, match="ReLUPoint"):
        old = lap.ReluNet
    assert old is ReLUPoint
