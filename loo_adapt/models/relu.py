"""Bayesian ReLU network with one hidden layer: mu = w2 . relu(X W1 + b1) + b2.

Block layout (P = D H + 2 H + 1): ``W1`` row-major as Stan's ``matrix[D, H]``
(component ``d * H + k`` is ``W1[d, k]``), then ``b1`` (H), ``w2`` (H), ``b2``.

Hessian of mu_i (Eq. 41, S.2.1.1, with the first-layer bias kept explicit): the only
non-zero entries couple unit k's incoming weights ``(W1[:, k], b1[k])`` with its
outgoing weight ``w2[k]``: ``d^2 mu / d(W1[d,k], b1[k]) d w2[k] = s_k (x_d, 1)`` with
``s_k = 1[z_k > 0]``.  So ``I + a H`` is block diagonal with one (D + 2)-block
``[[I, a u_k], [a u_k^T, 1]]`` per active unit (``u_k = (x, 1)``), whose determinant is
``1 - a^2 |u_k|^2 = 1 - a^2 (|x|^2 + 1)`` (the eigenvalues are ``+-|u_k|``) and whose
solve is a 2x2 Schur-complement step: everything is O(P) per draw.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .base import SigmoidModel, flat_draw_variable
from .priors import Normal


@njit(cache=True, parallel=True)
def _hess_logdet_kernel(theta, x, usq, a, D, H):
    S = theta.shape[0]
    out = np.zeros(S)
    DH = D * H
    for s in prange(S):
        t = a[s] * a[s] * usq
        if t < 0.5:
            term = np.log1p(-t)
        else:
            term = np.log(np.abs(1.0 - t))
        acc = 0.0
        for k in range(H):
            z = theta[s, DH + k]
            for d in range(D):
                z += x[d] * theta[s, d * H + k]
            if z > 0.0:
                acc += term
        out[s] = acc
    return out


@njit(cache=True, parallel=True)
def _hess_inv_quad_kernel(theta, x, usq, a, left, right, D, H):
    S = theta.shape[0]
    P = theta.shape[1]
    DH = D * H
    out = np.empty(S)
    for s in prange(S):
        acc = 0.0
        for p in range(P):
            acc += left[s, p] * right[s, p]
        den = 1.0 - a[s] * a[s] * usq
        for k in range(H):
            z = theta[s, DH + k]
            ul = left[s, DH + k]
            ur = right[s, DH + k]
            for d in range(D):
                idx = d * H + k
                z += x[d] * theta[s, idx]
                ul += x[d] * left[s, idx]
                ur += x[d] * right[s, idx]
            if z > 0.0:
                t = right[s, DH + H + k]
                q = (t - a[s] * ur) / den
                acc += -a[s] * q * ul + left[s, DH + H + k] * (q - t)
        out[s] = acc
    return out


@njit(cache=True, parallel=True)
def _hess_solve_kernel(theta, x, usq, a, v, D, H):
    S = theta.shape[0]
    DH = D * H
    out = v.copy()
    for s in prange(S):
        den = 1.0 - a[s] * a[s] * usq
        for k in range(H):
            z = theta[s, DH + k]
            ur = v[s, DH + k]
            for d in range(D):
                z += x[d] * theta[s, d * H + k]
                ur += x[d] * v[s, d * H + k]
            if z > 0.0:
                q = (v[s, DH + H + k] - a[s] * ur) / den
                for d in range(D):
                    out[s, d * H + k] -= a[s] * x[d] * q
                out[s, DH + k] -= a[s] * q
                out[s, DH + H + k] = q
    return out


class ReLUNet(SigmoidModel):
    """One-hidden-layer ReLU network for a binary outcome, ``normal(0, prior_sd)`` priors.

    Parameters
    ----------
    X : (n, D) inputs, y : (n,) 0/1 outcomes.
    W1, b1, w2, b2 : Stan names of ``matrix[D, H] W1``, ``vector[H] b1``, ``vector[H] w2``
        and ``real b2`` (defaults match ``relu1.stan``).
    prior_sd : sd of the independent normal prior on every weight and bias.
    hidden : H; inferred from the draws when None (then set by ``theta_from_draws``).
    """

    def __init__(
        self,
        X,
        y,
        W1: str = "W1",
        b1: str = "b1",
        w2: str = "w2",
        b2: str = "b2",
        prior_sd: float = 1.0,
        hidden: int | None = None,
    ):
        super().__init__(X, y)
        self.names = {"W1": W1, "b1": b1, "w2": w2, "b2": b2}
        self.prior = Normal(prior_sd)
        self.prior_sd = self.prior.sd
        self.n_inputs = self.X.shape[1]
        self._usq = np.einsum("nd,nd->n", self.X, self.X) + 1.0  # |(x_i, 1)|^2
        self.hidden = None
        if hidden is not None:
            self._set_hidden(hidden)

    def _set_hidden(self, hidden: int):
        hidden = int(hidden)
        if hidden < 1:
            raise ValueError(f"hidden must be >= 1, got {hidden}")
        self.hidden = hidden

    def _require_hidden(self) -> int:
        if self.hidden is None:
            raise ValueError("hidden width H unknown: pass hidden= or call theta_from_draws first")
        return self.hidden

    @property
    def dim(self) -> int:
        H = self._require_hidden()
        return self.n_inputs * H + 2 * H + 1

    @property
    def param_names(self) -> list[str]:
        H, D = self._require_hidden(), self.n_inputs
        n = self.names
        out = [f"{n['W1']}[{d + 1},{k + 1}]" for d in range(D) for k in range(H)]
        out += [f"{n['b1']}[{k + 1}]" for k in range(H)]
        out += [f"{n['w2']}[{k + 1}]" for k in range(H)]
        return out + [n["b2"]]

    # ----------------------------------------------------------------- the architecture
    # Packing order, forward pass and Jacobian of the net for any weights and inputs: the
    # family below and the Laplace bridge (`loo_adapt.laplace.net.ReLUPoint`) both use these.
    @staticmethod
    def n_params(D: int, H: int) -> int:
        """Length P = D H + 2 H + 1 of the parameter vector.

        Parameters
        ----------
        D, H : number of inputs and hidden units.

        Returns
        -------
        int

        Examples
        --------
        >>> ReLUNet.n_params(3, 2)
        11
        """
        return int(D) * int(H) + 2 * int(H) + 1

    @staticmethod
    def pack(W1, b1, w2, b2) -> np.ndarray:
        """The parameter vector(s) ``[W1 (row-major D x H), b1, w2, b2]``.

        Parameters
        ----------
        W1 : (..., D, H) input weights; b1, w2 : (..., H); b2 : (...) (any common leading
            batch shape, e.g. none for one net or (S,) for S draws).

        Returns
        -------
        ndarray of shape (..., P)

        Examples
        --------
        >>> ReLUNet.pack(np.arange(4.0).reshape(2, 2), [4.0, 5.0], [6.0, 7.0], 8.0)
        array([0., 1., 2., 3., 4., 5., 6., 7., 8.])
        """
        W1 = np.asarray(W1, dtype=float)
        lead = W1.shape[:-2]
        parts = (W1.reshape(*lead, -1), np.asarray(b1, dtype=float),
                 np.asarray(w2, dtype=float), np.asarray(b2, dtype=float)[..., None])
        return np.concatenate(parts, axis=-1)

    @staticmethod
    def unpack(theta, D: int, H: int):
        """Views ``(W1 (..., D, H), b1 (..., H), w2 (..., H), b2 (...))`` of ``theta``.

        Parameters
        ----------
        theta : (..., P) parameter vector(s) in the order of `pack`.
        D, H : number of inputs and hidden units.

        Returns
        -------
        tuple of ndarray

        Examples
        --------
        >>> W1, b1, w2, b2 = ReLUNet.unpack(np.arange(11.0), 3, 2)
        >>> W1.shape, b1, w2, float(b2)
        ((3, 2), array([6., 7.]), array([8., 9.]), 10.0)
        """
        theta = np.asarray(theta, dtype=float)
        P = ReLUNet.n_params(D, H)
        if theta.shape[-1:] != (P,):
            raise ValueError(f"theta has shape {theta.shape}, expected (..., D*H + 2H + 1 = {P})")
        DH = D * H
        W1 = theta[..., :DH].reshape(*theta.shape[:-1], D, H)
        return W1, theta[..., DH : DH + H], theta[..., DH + H : DH + 2 * H], theta[..., DH + 2 * H]

    @staticmethod
    def _width(theta, X) -> tuple[int, int]:
        D = X.shape[-1]
        P = theta.shape[-1]
        H, rest = divmod(P - 1, D + 2)
        if rest or H < 1:
            raise ValueError(f"theta of length {P} is no one-hidden-layer net on D = {D} inputs")
        return D, H

    @staticmethod
    def pre_activation(theta, X) -> np.ndarray:
        """Hidden-layer pre-activations ``z = X W1 + b1`` per draw, shape (S, n, H).

        Parameters
        ----------
        theta, X : as in `forward`.

        Returns
        -------
        ndarray of shape (S, n, H)

        Examples
        --------
        >>> theta = ReLUNet.pack(np.ones((1, 2, 1)), [[0.5]], [[2.0]], [0.0])
        >>> ReLUNet.pre_activation(theta, np.array([[1.0, -3.0]]))
        array([[[-1.5]]])
        """
        D, H = ReLUNet._width(theta, X)
        W1, b1, _, _ = ReLUNet.unpack(theta, D, H)
        return np.matmul(X, W1) + b1[:, None, :]

    @staticmethod
    def forward(theta, X) -> np.ndarray:
        """The logits ``mu = relu(X W1 + b1) w2 + b2`` per draw, shape (S, n).

        Parameters
        ----------
        theta : (S, P) parameter vectors (`pack` order).
        X : (n, D) inputs.

        Returns
        -------
        ndarray of shape (S, n)

        Examples
        --------
        >>> theta = ReLUNet.pack(np.ones((1, 2, 1)), [[0.5]], [[2.0]], [-1.0])
        >>> ReLUNet.forward(theta, np.array([[1.0, 1.0], [1.0, -3.0]]))
        array([[ 4., -1.]])
        """
        D, H = ReLUNet._width(theta, X)
        _, _, w2, b2 = ReLUNet.unpack(theta, D, H)
        Z = ReLUNet.pre_activation(theta, X)
        return np.einsum("snh,sh->sn", np.maximum(Z, 0.0), w2) + b2[:, None]

    @staticmethod
    def jacobian(theta, X) -> np.ndarray:
        """Per-observation Jacobian rows ``d mu(x_i) / d theta``, shape (S, n, P).

        At a kink (``z_k = 0``) the unit counts as inactive (the derivative from that side).

        Parameters
        ----------
        theta, X : as in `forward`.

        Returns
        -------
        ndarray of shape (S, n, P)

        Examples
        --------
        >>> theta = ReLUNet.pack(np.ones((1, 2, 1)), [[0.5]], [[2.0]], [-1.0])
        >>> ReLUNet.jacobian(theta, np.array([[1.0, 1.0]]))
        array([[[2. , 2. , 2. , 2.5, 1. ]]])
        """
        D, H = ReLUNet._width(theta, X)
        _, _, w2, _ = ReLUNet.unpack(theta, D, H)
        Z = ReLUNet.pre_activation(theta, X)
        S, n = Z.shape[:2]
        gw = (Z > 0.0) * w2[:, None, :]  # d mu / d z_k
        dW1 = (X[None, :, :, None] * gw[:, :, None, :]).reshape(S, n, D * H)
        return np.concatenate([dW1, gw, np.maximum(Z, 0.0), np.ones((S, n, 1))], axis=-1)

    # ----------------------------------------------------------------- unpacking
    def _split(self, theta):
        return self.unpack(theta, self.n_inputs, self.hidden)

    # ----------------------------------------------------------------- mu
    def linear_predictor(self, theta):
        return self.forward(self._check_theta(theta), self.X)

    def _z_i(self, theta, i):
        return self.pre_activation(theta, self.X[i : i + 1])[:, 0]

    def linear_predictor_i(self, theta, i):
        theta = self._check_theta(theta)
        i = self._check_i(i)
        return self.forward(theta, self.X[i : i + 1])[:, 0]

    def grad_linear_predictor(self, theta, i):
        theta = self._check_theta(theta)
        i = self._check_i(i)
        return self.jacobian(theta, self.X[i : i + 1])[:, 0]

    def _grad_loglik_sum(self, theta, resid):
        S, H, D = theta.shape[0], self.hidden, self.n_inputs
        DH = D * H
        Z = self.pre_activation(theta, self.X)
        _, _, w2, _ = self._split(theta)
        A = resid[:, :, None] * (Z > 0.0) * w2[:, None, :]
        g = np.empty_like(theta)
        g[:, :DH] = np.matmul(self.X.T, A).reshape(S, DH)
        g[:, DH : DH + H] = A.sum(axis=1)
        g[:, DH + H : DH + 2 * H] = np.einsum("sn,snh->sh", resid, np.maximum(Z, 0.0))
        g[:, DH + 2 * H] = resid.sum(axis=1)
        return g

    # ----------------------------------------------------------------- prior
    def log_prior(self, theta, hyper=None):
        theta = self._check_theta(theta)
        if hyper is not None:
            raise ValueError("ReLUNet has no hyperparameters; pass hyper=None")
        return self.prior.logpdf(theta).sum(axis=1)

    def grad_log_prior(self, theta, hyper=None):
        theta = self._check_theta(theta)
        if hyper is not None:
            raise ValueError("ReLUNet has no hyperparameters; pass hyper=None")
        return self.prior.grad(theta)

    # ----------------------------------------------------------------- Hessian kernels
    def _kernel_args(self, theta, i, a):
        theta = np.ascontiguousarray(self._check_theta(theta))
        i = self._check_i(i)
        a = np.ascontiguousarray(np.broadcast_to(np.asarray(a, dtype=float), theta.shape[:1]))
        return theta, np.ascontiguousarray(self.X[i]), float(self._usq[i]), a

    def hess_logdet(self, theta, i, a):
        theta, x, usq, a = self._kernel_args(theta, i, a)
        return _hess_logdet_kernel(theta, x, usq, a, self.n_inputs, self.hidden)

    def hess_inv_quad(self, theta, i, a, left, right):
        theta, x, usq, a = self._kernel_args(theta, i, a)
        left = np.ascontiguousarray(left, dtype=float)
        right = np.ascontiguousarray(right, dtype=float)
        return _hess_inv_quad_kernel(theta, x, usq, a, left, right, self.n_inputs, self.hidden)

    def hess_solve(self, theta, i, a, v):
        theta, x, usq, a = self._kernel_args(theta, i, a)
        v = np.ascontiguousarray(v, dtype=float)
        return _hess_solve_kernel(theta, x, usq, a, v, self.n_inputs, self.hidden)

    def hess_dense(self, theta_row: np.ndarray, i: int) -> np.ndarray:
        """Dense Hessian of mu_i at one draw (P, P); for tests and small problems only."""
        theta_row = np.asarray(theta_row, dtype=float).reshape(1, -1)
        self._check_theta(theta_row)
        H, D = self.hidden, self.n_inputs
        DH = D * H
        z = self._z_i(theta_row, self._check_i(i))[0]
        M = np.zeros((self.dim, self.dim))
        for k in range(H):
            if z[k] > 0:
                for d in range(D):
                    M[d * H + k, DH + H + k] = M[DH + H + k, d * H + k] = self.X[i, d]
                M[DH + k, DH + H + k] = M[DH + H + k, DH + k] = 1.0
        return M

    # ----------------------------------------------------------------- edge
    def theta_from_draws(self, draws):
        n = self.names
        W1 = flat_draw_variable(draws, n["W1"])
        if W1.ndim != 3 or W1.shape[1] != self.n_inputs:
            raise ValueError(
                f"{n['W1']!r} must have Stan shape (D={self.n_inputs}, H) per draw, got "
                f"{W1.shape[1:]}"
            )
        H = W1.shape[2]
        if self.hidden is not None and self.hidden != H:
            raise ValueError(f"draws have H={H} hidden units, model was built with {self.hidden}")
        self._set_hidden(H)
        S = W1.shape[0]
        b1 = flat_draw_variable(draws, n["b1"]).reshape(S, -1)
        w2 = flat_draw_variable(draws, n["w2"]).reshape(S, -1)
        b2 = flat_draw_variable(draws, n["b2"]).reshape(S, -1)
        for name, arr, width in ((n["b1"], b1, H), (n["w2"], w2, H), (n["b2"], b2, 1)):
            if arr.shape[1] != width:
                raise ValueError(
                    f"{name!r} has {arr.shape[1]} components per draw, expected {width}"
                )
        theta = self.pack(W1, b1, w2, b2[:, 0])
        return np.ascontiguousarray(theta), None

    def __repr__(self):
        return (
            f"ReLUNet(n={self.n_obs}, D={self.n_inputs}, H={self.hidden}, prior_sd={self.prior_sd})"
        )
