"""One-hidden-layer ReLU network in closed form (the model of ``relu1.stan``).

    mu(x) = w2 . relu(W1^T x + b1) + b2,   W1 (D, H), b1 (H,), w2 (H,), b2 scalar,

with independent N(0, sigma0^2) priors on every weight and a Bernoulli-logit likelihood.
The parameter vector is ``theta = [W1.ravel() (row-major, D x H), b1, w2, b2]``; packing,
forward pass and Jacobian are `loo_adapt.models.relu.ReLUNet`'s (one architecture for the
Stan family and this bridge); `ReLUPoint` holds one set of weights.

Everything the Laplace bridge needs is available without automatic differentiation:
the Jacobian rows, the neural tangent kernel J(x) J(x')^T (without forming J), the log
posterior with its gradient, and the MAP by L-BFGS from given starting weights.
`LinearModel` offers the same interface for f(x) = x^T w + b (logistic regression), where
linearised and ordinary Laplace coincide.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment, minimize

from loo_adapt.models.relu import ReLUNet

__all__ = [
    "ReLUPoint",
    "LinearModel",
    "log_posterior",
    "find_map",
    "Mode",
    "find_modes",
    "weights_from_draws",
]


def _as_matrix(X, name="X"):
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (n, D), got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{name} contains non-finite values")
    return X


class ReLUPoint:
    """The one-hidden-layer ReLU net at fixed weights (Stan shapes).

    Packing order, forward pass and Jacobian are those of the model family
    `loo_adapt.models.relu.ReLUNet` (one architecture for adaptive IS and the Laplace
    bridge); this class adds what the bridge needs at one point of weight space: J^T r,
    the neural tangent kernel and its gradient, and the canonical hidden-unit order.

    Parameters
    ----------
    W1 : (D, H) input weights; b1, w2 : (H,) hidden biases and output weights; b2 : scalar.

    Examples
    --------
    >>> net = ReLUPoint(np.ones((2, 1)), [0.5], [2.0], -1.0)
    >>> net.forward(np.array([[1.0, 1.0], [1.0, -3.0]]))
    array([ 4., -1.])
    """

    def __init__(self, W1, b1, w2, b2):
        W1 = np.asarray(W1, dtype=float)
        if W1.ndim != 2:
            raise ValueError(f"W1 must have shape (D, H), got {W1.shape}")
        D, H = W1.shape
        b1 = np.asarray(b1, dtype=float).reshape(-1)
        w2 = np.asarray(w2, dtype=float).reshape(-1)
        if b1.shape != (H,) or w2.shape != (H,):
            raise ValueError(f"b1 and w2 must have shape ({H},), got {b1.shape} and {w2.shape}")
        b2 = float(np.asarray(b2, dtype=float).reshape(()))
        theta = ReLUNet.pack(W1, b1, w2, b2)
        if not np.all(np.isfinite(theta)):
            raise ValueError("network weights contain non-finite values")
        self._theta = theta[None, :]  # one draw, as ReLUNet's architecture takes (S, P)
        self.W1, self.b1, self.w2, self.b2 = W1, b1, w2, b2

    # -- parameter vector ------------------------------------------------------------
    @property
    def D(self) -> int:
        return self.W1.shape[0]

    @property
    def H(self) -> int:
        return self.W1.shape[1]

    @property
    def P(self) -> int:
        return ReLUNet.n_params(self.D, self.H)

    @property
    def theta(self) -> np.ndarray:
        return self._theta[0].copy()

    @classmethod
    def from_vector(cls, theta, D: int, H: int) -> ReLUPoint:
        theta = np.asarray(theta, dtype=float).reshape(-1)
        if theta.size != ReLUNet.n_params(D, H):
            raise ValueError(f"theta has {theta.size} entries, expected D*H + 2H + 1 = "
                             f"{ReLUNet.n_params(D, H)}")
        return cls(*ReLUNet.unpack(theta, D, H))

    def with_vector(self, theta) -> ReLUPoint:
        return ReLUPoint.from_vector(theta, self.D, self.H)

    # -- network pieces ----------------------------------------------------------------
    def _check_X(self, X):
        X = _as_matrix(X)
        if X.shape[1] != self.D:
            raise ValueError(f"X has {X.shape[1]} columns, the net expects D = {self.D}")
        return X

    def hidden(self, X):
        """Pre-activations z (n, H), activations a = relu(z), active mask m = 1[z > 0]."""
        z = ReLUNet.pre_activation(self._theta, self._check_X(X))[0]
        m = z > 0
        return z, np.where(m, z, 0.0), m

    def forward(self, X) -> np.ndarray:
        return ReLUNet.forward(self._theta, self._check_X(X))[0]

    def jacobian(self, X) -> np.ndarray:
        """Rows d mu(x_i) / d theta, shape (n, P)."""
        return ReLUNet.jacobian(self._theta, self._check_X(X))[0]

    def vjp(self, X, r) -> np.ndarray:
        """J^T r without forming J."""
        return self.forward_vjp(X)[1](r)

    def forward_vjp(self, X):
        """f(X) and the map r -> J(X)^T r, sharing one pass through the hidden layer."""
        X = self._check_X(X)
        _, a, m = self.hidden(X)
        mw = m * self.w2

        def vjp(r):
            r = np.asarray(r, dtype=float)
            g = mw * r[:, None]
            return ReLUNet.pack(X.T @ g, g.sum(0), a.T @ r, np.sum(r))

        return self.forward(X), vjp

    def ntk(self, X1, X2=None) -> np.ndarray:
        """J(X1) J(X2)^T in closed form: a^T a' + 1 + sum_k w2_k^2 m_k m'_k (x~^T x~')."""
        X1 = self._check_X(X1)
        X2 = X1 if X2 is None else self._check_X(X2)
        _, a1, m1 = self.hidden(X1)
        _, a2, m2 = (None, a1, m1) if X2 is X1 else self.hidden(X2)
        K = X1 @ X2.T
        K += 1.0
        # in-place products keep the peak at about three n1 x n2 arrays
        K *= (m1 * self.w2**2) @ m2.T.astype(float)
        K += a1 @ a2.T
        K += 1.0
        return K

    def ntk_diag(self, X) -> np.ndarray:
        X = self._check_X(X)
        _, a, m = self.hidden(X)
        return np.sum(a * a, 1) + 1.0 + (m @ self.w2**2) * (np.sum(X * X, 1) + 1.0)

    def ntk_vjp(self, X1, X2, G) -> np.ndarray:
        """d/dX2 of sum_ij G_ij k(X1_i, X2_j), shape X2.shape (k = `ntk`, unscaled).

        With z = W1^T x2 + b1:  dk(x1, x2)/dx2 = W1 (a(x1) * m(x2)) + x1 sum_k w2_k^2
        m_k(x1) m_k(x2).  The kernel is only piecewise smooth in x2: on a kink
        (z_k = 0) the indicator m_k(x2) jumps, so k jumps by w2_k^2 m_k(x1) (x1^T x2 + 1)
        and the a^T a' term has a corner.  The derivative of the indicator is zero on
        either side and is taken as zero; at z_k = 0 exactly the unit counts as off
        (``hidden``'s convention 1[z > 0]), i.e. the one-sided derivative from the
        inactive side.  Across a kink this is not the derivative of anything.
        For the gradient with respect to both arguments of k(Z, Z) use G + G^T.
        """
        X1 = self._check_X(X1)
        X2 = self._check_X(X2)
        G = np.asarray(G, dtype=float)
        if G.shape != (X1.shape[0], X2.shape[0]):
            raise ValueError(f"G must have shape {(X1.shape[0], X2.shape[0])}, got {G.shape}")
        _, a1, m1 = self.hidden(X1)
        _, _, m2 = self.hidden(X2)
        Q = (m1 * self.w2**2) @ m2.T.astype(float)  # the mask factor of k
        Q *= G
        return ((G.T @ a1) * m2) @ self.W1.T + Q.T @ X1

    # -- symmetries --------------------------------------------------------------------
    def canonical(self) -> np.ndarray:
        """theta with hidden units sorted, so permuted copies of a mode compare equal."""
        units = np.vstack([self.w2, self.b1, self.W1])  # one column per unit
        order = np.lexsort(units[::-1])
        return ReLUNet.pack(self.W1[:, order], self.b1[order], self.w2[order], self.b2)


class LinearModel:
    """f(x) = x^T w + b, the logistic-regression special case with the ReLUPoint interface."""

    def __init__(self, w, b=0.0):
        self.w = np.asarray(w, dtype=float).reshape(-1)
        self.b = float(b)
        if not np.all(np.isfinite(self.w)) or not np.isfinite(self.b):
            raise ValueError("linear-model weights contain non-finite values")

    @property
    def D(self) -> int:
        return self.w.size

    @property
    def P(self) -> int:
        return self.D + 1

    @property
    def theta(self) -> np.ndarray:
        return np.concatenate([self.w, [self.b]])

    @classmethod
    def from_vector(cls, theta, D: int | None = None) -> LinearModel:
        theta = np.asarray(theta, dtype=float).reshape(-1)
        return cls(theta[:-1], theta[-1])

    def with_vector(self, theta) -> LinearModel:
        return LinearModel.from_vector(theta)

    def _check_X(self, X):
        X = _as_matrix(X)
        if X.shape[1] != self.D:
            raise ValueError(f"X has {X.shape[1]} columns, the model expects D = {self.D}")
        return X

    def forward(self, X):
        return self._check_X(X) @ self.w + self.b

    def jacobian(self, X):
        X = self._check_X(X)
        return np.hstack([X, np.ones((X.shape[0], 1))])

    def vjp(self, X, r):
        X = self._check_X(X)
        return np.concatenate([X.T @ r, [np.sum(r)]])

    def forward_vjp(self, X):
        X = self._check_X(X)
        return X @ self.w + self.b, lambda r: np.concatenate([X.T @ r, [np.sum(r)]])

    def ntk(self, X1, X2=None):
        X1 = self._check_X(X1)
        X2 = X1 if X2 is None else self._check_X(X2)
        return X1 @ X2.T + 1.0

    def ntk_diag(self, X):
        X = self._check_X(X)
        return np.sum(X * X, 1) + 1.0

    def ntk_vjp(self, X1, X2, G):
        """d/dX2 of sum_ij G_ij k(X1_i, X2_j) with k = x1^T x2 + 1 (smooth)."""
        X1 = self._check_X(X1)
        X2 = self._check_X(X2)
        G = np.asarray(G, dtype=float)
        if G.shape != (X1.shape[0], X2.shape[0]):
            raise ValueError(f"G must have shape {(X1.shape[0], X2.shape[0])}, got {G.shape}")
        return G.T @ X1

    def canonical(self):
        return self.theta


def _check_y(y, n):
    y = np.asarray(y)
    if y.shape != (n,):
        raise ValueError(f"y must have shape ({n},), got {y.shape}")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("y must be binary (0/1)")
    return y.astype(float)


def _check_sd(prior_sd):
    prior_sd = float(prior_sd)
    if not np.isfinite(prior_sd) or prior_sd <= 0:
        raise ValueError(f"prior_sd must be a positive finite number, got {prior_sd}")
    return prior_sd


def log_posterior(model, X, y, prior_sd, grad=False):
    """Log posterior as Stan's ``lp__`` for relu1.stan (constants dropped), optionally with
    its gradient in theta.  Uses logaddexp so that logits of any size stay finite."""
    prior_sd = _check_sd(prior_sd)
    f, vjp = model.forward_vjp(X)
    y = _check_y(y, f.size)
    lp = np.sum(y * f - np.logaddexp(0.0, f)) - 0.5 * np.sum(model.theta**2) / prior_sd**2
    if not grad:
        return float(lp)
    r = y - _sigmoid(f)
    return float(lp), vjp(r) - model.theta / prior_sd**2


def _sigmoid(f):
    return np.exp(-np.logaddexp(0.0, -f))


def find_map(model, X, y, prior_sd, *, gtol=1e-9, ftol=1e-13, maxiter=5000):
    """Polish starting weights to a local maximum of the log posterior with L-BFGS.

    Returns ``(model_at_mode, log_posterior, scipy_result)``.  The ReLU kinks make the
    posterior only piecewise smooth: a mode may sit on a kink (some z_ik = 0 for a training
    input), where the gradient does not vanish and L-BFGS stops on the function tolerance.
    The start is put in canonical hidden-unit order first, so permuted copies of a start
    give the same result.
    """
    X = _as_matrix(X)
    model = model.with_vector(model.canonical())
    theta0 = model.theta

    def fun(theta):
        lp, g = log_posterior(model.with_vector(theta), X, y, prior_sd, grad=True)
        return -lp, -g

    res = minimize(fun, theta0, jac=True, method="L-BFGS-B",
                   options={"maxiter": maxiter, "maxfun": 2 * maxiter, "gtol": gtol,
                            "ftol": ftol, "maxcor": 30})
    best = model.with_vector(res.x)
    lp = log_posterior(best, X, y, prior_sd)
    start = log_posterior(model, X, y, prior_sd)
    if lp < start:  # never return something worse than the start
        best, lp = model, start
    return best, lp, res


def weights_from_draws(draws):
    """(W1, b1, w2, b2) arrays of shape (chains, draws, ...) from a `Draws` or a dict."""
    variables = getattr(draws, "variables", draws)
    missing = [k for k in ("W1", "b1", "w2", "b2") if k not in variables]
    if missing:
        raise ValueError(f"draws lack the ReLU-net variables {missing} (need W1, b1, w2, b2)")
    W1 = np.asarray(variables["W1"], dtype=float)
    if W1.ndim != 4:
        raise ValueError(f"W1 draws must have shape (chains, draws, D, H), got {W1.shape}")
    C, S, D, H = W1.shape
    b1 = np.asarray(variables["b1"], dtype=float).reshape(C, S, H)
    w2 = np.asarray(variables["w2"], dtype=float).reshape(C, S, H)
    b2 = np.asarray(variables["b2"], dtype=float).reshape(C, S)
    return W1, b1, w2, b2


@dataclass
class Mode:
    """A polished posterior mode and the chains whose best draw reached it."""

    net: ReLUPoint
    log_post: float
    chains: list
    start_log_post: list


def _same_mode(a: ReLUPoint, b: ReLUPoint, rtol, X=None, lp=None):
    """Equal up to a hidden-unit permutation (matched by linear assignment)?  Also equal
    when the log posteriors agree to 1e-6 and the outputs on X to 1e-4: L-BFGS stalls at
    slightly different points of the same kinked optimum."""
    if X is not None and lp is not None and abs(lp[0] - lp[1]) <= 1e-6 * (1 + abs(lp[0])):
        if np.max(np.abs(a.forward(X) - b.forward(X))) <= 1e-4:
            return True
    ua = np.vstack([a.w2, a.b1, a.W1]).T
    ub = np.vstack([b.w2, b.b1, b.W1]).T
    cost = ((ua[:, None, :] - ub[None, :, :]) ** 2).sum(-1)
    ia, ib = linear_sum_assignment(cost)
    scale = 1.0 + max(np.max(np.abs(a.theta)), np.max(np.abs(b.theta)))
    gap = max(np.max(np.abs(ua[ia] - ub[ib])), abs(a.b2 - b.b2))
    return gap <= rtol * scale


def find_modes(draws, X, y, prior_sd, *, per_chain=1, rtol=1e-3):
    """One polished MAP per distinct mode, started from the best-lp draws of each chain.

    The best draws are ranked by this module's log posterior (equal to Stan's lp__ up to a
    constant), never by anything averaged over draws: hidden-unit permutations make weight
    averages meaningless.  Modes are deduplicated after sorting hidden units (ReLU has no
    sign symmetry, so permutation is the only one); two modes are the same when their
    weights agree to ``rtol`` relative to their size after matching hidden units by linear
    assignment (L-BFGS stops short of exact stationarity on ReLU kinks, hence the loose
    default).  Sorted by log posterior, best first.
    """
    X = _as_matrix(X)
    W1, b1, w2, b2 = weights_from_draws(draws)
    C, S, D, H = W1.shape
    if X.shape[1] != D:
        raise ValueError(f"X has {X.shape[1]} columns, the draws have D = {D}")
    modes: list[Mode] = []
    for c in range(C):
        lps = np.array([log_posterior(ReLUPoint(W1[c, s], b1[c, s], w2[c, s], b2[c, s]), X, y,
                                      prior_sd) for s in range(S)])
        for s in np.argsort(lps)[::-1][:per_chain]:
            start = ReLUPoint(W1[c, s], b1[c, s], w2[c, s], b2[c, s])
            net, lp, _ = find_map(start, X, y, prior_sd)
            for mode in modes:
                if _same_mode(net, mode.net, rtol, X, (lp, mode.log_post)):
                    mode.chains.append(c)
                    mode.start_log_post.append(float(lps[s]))
                    if lp > mode.log_post:
                        mode.net, mode.log_post = net, lp
                    break
            else:
                modes.append(Mode(net, lp, [c], [float(lps[s])]))
    return sorted(modes, key=lambda m: -m.log_post)


def __getattr__(name):
    if name == "ReluNet":
        warnings.warn("loo_adapt.laplace.net.ReluNet is deprecated: use ReLUPoint (the net at "
                      "fixed weights; its architecture is loo_adapt.models.relu.ReLUNet)",
                      DeprecationWarning, stacklevel=2)
        return ReLUPoint
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
