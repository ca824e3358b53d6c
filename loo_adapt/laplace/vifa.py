"""VIFA: variational inference with a factor-analysis Gaussian q(theta) = N(c, F F^T + Psi).

The objective (Section 3 of the VIFA paper) is the negative ELBO

    -E_q[log p(D | theta)] - E_q[log p(theta)] - H[q],

with the likelihood term a Monte Carlo average over L reparameterised draws
theta_l = c + F h_l + psi^{1/2} * z_l and a minibatch of M of the N observations scaled by
N / M; the Gaussian prior's expectation and the entropy are exact:

    E_q[log N(theta; m, diag(1/a))] = -1/2 sum_d a_d ((c_d - m_d)^2 + sum_k F_dk^2 + psi_d) + const,
    H[q] = 1/2 log|F F^T + Psi| + const,   dH/dF = S^{-1} F,  dH/dlog psi = psi diag(S^{-1}) / 2,

through `fa.FactorGaussian` (Woodbury, one K x K Cholesky; no D x D matrix).  With
g_l = grad log p(D_batch | theta_l) N / M (+ grad log prior for a non-Gaussian prior):

    dELBO/dc = mean_l g_l - a (c - m),   dELBO/dF = mean_l g_l h_l^T - a F + S^{-1} F,
    dELBO/dlog psi = mean_l g_l z_l psi^{1/2} / 2 - a psi / 2 + psi diag(S^{-1}) / 2.

Adam maximises the ELBO with each block's gradient clipped to a norm (the paper's 10),
optionally in two stages (the mean alone first, then everything).  Convergence: the mean
ELBO over windows of steps stops rising (relative change below ``tol``); the learning rate
then decays linearly to zero over ``decay_iter`` steps to settle the iterate.

`VIFA.to_draws` returns `Draws` of method "vifa" carrying the model's log posterior
``log_p`` and the exact ``log_q``, so `loo_adapt.loo(fit, model=...)` reweights them by p/q
(Pareto k-hat of p/q in the summary) and then adapts and certifies as for any approximate
posterior.

The model is a family of `loo_adapt.models` (`ReLUNet`, `LogisticRegression` with
non-hierarchical priors) or any object with the `Target` interface (e.g. a Gaussian linear
model in the tests).
"""

from __future__ import annotations

import contextlib
import time
import warnings
from typing import Protocol, runtime_checkable

import numpy as np
from scipy.special import expit

from loo_adapt.laplace.fa import FactorGaussian

__all__ = ["VIFA", "Target", "FamilyTarget", "as_target", "elbo_and_grad", "map_estimate"]


@runtime_checkable
class Target(Protocol):
    """What VIFA needs from a model: N observations, D parameters, minibatch log likelihood
    and its gradient, the pointwise log likelihood (for LOO) and the prior.

    ``prior_gaussian`` is ``(mean (D,), precision (D,))`` for an independent Gaussian prior
    (then its expectation under q is exact), or None, in which case ``log_prior_grad`` is
    averaged over the draws.
    """

    n_obs: int
    dim: int
    prior_gaussian: tuple | None

    def log_lik_grad(self, theta, rows=None): ...  # (L,), (L, D): sums over rows

    def log_lik(self, theta): ...  # (S, n) pointwise

    def log_prior(self, theta): ...  # (S,)

    def log_prior_grad(self, theta): ...  # (S,), (S, D)


def _bernoulli_ll(mu, y):
    return -np.logaddexp(0.0, -(2.0 * y - 1.0) * mu)


class FamilyTarget:
    """`Target` of a Bernoulli-logit family of `loo_adapt.models` (no hyperparameters).

    ReLUNet and LogisticRegression get minibatch gradients at O(M) cost; other families
    compute the full-data linear predictor and zero the residuals outside the batch.
    """

    def __init__(self, model):
        from loo_adapt.models import LogisticRegression, ReLUNet
        from loo_adapt.models.priors import Normal

        if getattr(model, "hierarchical", False):
            raise ValueError("VIFA approximates the block of a family without "
                             "hyperparameters; the horseshoe's scales are not in it")
        if isinstance(model, ReLUNet) and model.hidden is None:
            raise ValueError("ReLUNet(hidden=H) is needed for VIFA (the width is otherwise "
                             "read from draws)")
        self.model = model
        self.n_obs = int(model.n_obs)
        self.dim = int(model.dim)
        self.y = np.asarray(model.y, dtype=float)
        self._relu = isinstance(model, ReLUNet)
        self._logistic = isinstance(model, LogisticRegression)
        self.prior_gaussian = None
        if self._relu:
            sd = model.prior.sd
            self.prior_gaussian = (np.full(self.dim, model.prior.loc),
                                   np.full(self.dim, 1.0 / sd**2))
        elif self._logistic:
            priors = ([model.intercept_prior] if model.has_intercept else []) + [model.prior]
            if all(isinstance(p, Normal) for p in priors):
                sizes = ([1] if model.has_intercept else []) + [model.n_coef]
                self.prior_gaussian = (
                    np.concatenate([np.full(k, p.loc) for p, k in zip(priors, sizes)]),
                    np.concatenate([np.full(k, 1.0 / p.sd**2) for p, k in zip(priors, sizes)]))

    def _mu_grad(self, theta, rows, resid_fn):
        m = self.model
        if self._logistic:
            Xd = m.design if rows is None else m.design[rows]
            mu = theta @ Xd.T
            ll, r = resid_fn(mu, rows)
            return ll, r @ Xd
        if self._relu:
            X = m.X if rows is None else m.X[rows]
            D, H = m.n_inputs, m.hidden
            W1, b1, w2, b2 = m.unpack(theta, D, H)
            Z = np.matmul(X, W1) + b1[:, None, :]
            act = np.maximum(Z, 0.0)
            mu = np.einsum("snh,sh->sn", act, w2) + b2[:, None]
            ll, r = resid_fn(mu, rows)
            Ag = r[:, :, None] * (Z > 0.0) * w2[:, None, :]
            S, DH = theta.shape[0], D * H
            g = np.empty_like(theta)
            g[:, :DH] = np.matmul(X.T, Ag).reshape(S, DH)
            g[:, DH:DH + H] = Ag.sum(axis=1)
            g[:, DH + H:DH + 2 * H] = np.einsum("sn,snh->sh", r, act)
            g[:, DH + 2 * H] = r.sum(axis=1)
            return ll, g
        mu = m.linear_predictor(theta)
        ll, r = resid_fn(mu if rows is None else mu[:, rows], rows)
        if rows is not None:
            full = np.zeros_like(mu)
            full[:, rows] = r
            r = full
        return ll, m._grad_loglik_sum(theta, r)

    def log_lik_grad(self, theta, rows=None):
        """Sum over ``rows`` (all when None) of the log likelihood and its gradient."""
        def resid(mu, rows):
            y = self.y if rows is None else self.y[rows]
            return _bernoulli_ll(mu, y).sum(axis=1), y - expit(mu)
        return self._mu_grad(np.atleast_2d(theta), rows, resid)

    def log_lik(self, theta):
        return self.model.log_lik(np.atleast_2d(theta))

    def log_prior(self, theta):
        return self.model.log_prior(np.atleast_2d(theta), None)

    def log_prior_grad(self, theta):
        theta = np.atleast_2d(theta)
        return self.model.log_prior(theta, None), self.model.grad_log_prior(theta, None)

    def variables(self, theta):
        """The family's Stan variables of draws theta (S, D), each (1, S, *shape)."""
        m = self.model
        S = theta.shape[0]
        if self._relu:
            W1, b1, w2, b2 = m.unpack(theta, m.n_inputs, m.hidden)
            out = dict(zip((m.names[k] for k in ("W1", "b1", "w2", "b2")), (W1, b1, w2, b2)))
        elif self._logistic:
            out = {m.coef: theta[:, m._k0:]}
            if m.has_intercept:
                out[m.intercept] = theta[:, 0]
        else:
            raise TypeError(f"no Stan variables known for {type(m).__name__}; pass draws "
                            "variables yourself")
        return {k: np.asarray(v)[None].reshape((1, S) + np.shape(v)[1:])
                for k, v in out.items()}


def as_target(model):
    """A `Target` from a model family or an object that already is one."""
    if all(hasattr(model, a) for a in ("log_lik_grad", "log_lik", "n_obs", "dim")):
        return model
    if hasattr(model, "linear_predictor") and hasattr(model, "y"):
        return FamilyTarget(model)
    raise TypeError(f"{type(model).__name__} is neither a loo_adapt.models family nor a "
                    "vifa.Target (n_obs, dim, log_lik_grad, log_lik, log_prior, "
                    "log_prior_grad, prior_gaussian)")


def elbo_and_grad(target, q: FactorGaussian, h, z, rows=None):
    """Monte Carlo ELBO at q for the given draws (h (L, K), z (L, D)) and minibatch ``rows``
    (None: all N), with its exact gradient for those draws.

    Returns ``(elbo, (d_c, d_F, d_log_psi))``.  The likelihood is scaled by N / M; the
    Gaussian prior's expectation and the entropy are exact (constants included, so with
    a Gaussian target the ELBO equals log evidence - KL).
    """
    h = np.atleast_2d(np.asarray(h, dtype=float))
    z = np.atleast_2d(np.asarray(z, dtype=float))
    theta = q.transform(h, z)
    L = theta.shape[0]
    scale = 1.0 if rows is None else target.n_obs / len(rows)
    ll, g = target.log_lik_grad(theta, rows)
    value = scale * float(np.mean(ll))
    g = scale * g
    prior = target.prior_gaussian
    dc = np.zeros(q.dim)
    dF = np.zeros_like(q.F)
    dlp = np.zeros(q.dim)
    if prior is None:
        lp, gp = target.log_prior_grad(theta)
        value += float(np.mean(lp))
        g = g + gp
    else:
        m, a = prior
        diff = q.c - m
        value += -0.5 * float(np.sum(a * (diff**2 + np.einsum("dk,dk->d", q.F, q.F) + q.psi)))
        value += 0.5 * float(np.sum(np.log(a))) - 0.5 * q.dim * np.log(2 * np.pi)
        dc -= a * diff
        dF -= a[:, None] * q.F
        dlp -= 0.5 * a * q.psi
    value += q.entropy()
    hF, hpsi = q.entropy_grads()
    dc += g.mean(axis=0)
    dF += g.T @ h / L + hF
    dlp += 0.5 * np.sqrt(q.psi) * np.mean(g * z, axis=0) + hpsi
    return value, (dc, dF, dlp)


def map_estimate(target, init, *, maxiter=2000):
    """The posterior mode by L-BFGS from ``init`` (D,), for VIFA's ``init="map"``."""
    from scipy.optimize import minimize

    prior = target.prior_gaussian

    def fun(theta):
        ll, g = target.log_lik_grad(theta[None])
        if prior is None:
            lp, gp = target.log_prior_grad(theta[None])
            lp, gp = float(lp[0]), gp[0]
        else:
            m, a = prior
            lp, gp = -0.5 * float(np.sum(a * (theta - m) ** 2)), -a * (theta - m)
        return -(float(ll[0]) + lp), -(g[0] + gp)

    res = minimize(fun, np.asarray(init, dtype=float), jac=True, method="L-BFGS-B",
                   options={"maxiter": int(maxiter), "gtol": 1e-8})
    return res.x


class _Adam:
    def __init__(self, shapes, b1=0.9, b2=0.999, eps=1e-8):
        self.m = [np.zeros(s) for s in shapes]
        self.v = [np.zeros(s) for s in shapes]
        self.b1, self.b2, self.eps, self.t = b1, b2, eps, 0

    def step(self, grads, lrs):
        """Ascent steps for each block (zero learning rate: block frozen)."""
        self.t += 1
        out = []
        for i, (g, lr) in enumerate(zip(grads, lrs)):
            self.m[i] = self.b1 * self.m[i] + (1 - self.b1) * g
            self.v[i] = self.b2 * self.v[i] + (1 - self.b2) * g * g
            mh = self.m[i] / (1 - self.b1**self.t)
            vh = self.v[i] / (1 - self.b2**self.t)
            out.append(lr * mh / (np.sqrt(vh) + self.eps))
        return out


def _clip(g, max_norm):
    if max_norm is None:
        return g
    norm = float(np.sqrt(np.sum(g * g)))
    return g * (max_norm / norm) if norm > max_norm else g


class VIFA:
    """Fit q(theta) = N(c, F F^T + Psi) to a model's posterior (runs on construction).

    Parameters
    ----------
    model : a `loo_adapt.models` family (``ReLUNet(hidden=H)``, ``LogisticRegression`` with
        Normal / Student-t / flat priors) or a `Target`.
    K : number of factors.
    init : starting mean c (D,), e.g. the MAP the Laplace methods start from; "map": the
        L-BFGS mode from N(0, 0.1^2) entries (`map_estimate`); default (None) those
        N(0, 0.1^2) entries themselves (seeded).
    init_var : starting diagonal variances psi; F starts at N(0, init_var / K) entries.
    n_mc : L, draws per step.  batch_size : M observations per step (None: all N).
    lr : Adam learning rate (c and log psi); lr_F : for F (default lr).
    max_grad_norm : each block's gradient is rescaled to at most this norm (the paper's
        10); None disables clipping.
    mean_iter : two-stage schedule: this many steps on c alone (F, psi held) before the
        joint stage (0: joint from the start).
    max_iter : cap on the joint stage's constant-rate steps; window, tol : convergence when
        the mean ELBO of consecutive windows of steps changes by less than
        ``tol * (1 + |ELBO|)``; decay_iter : steps of linear learning-rate decay after it.
    seed : seeds every draw and minibatch.  progress : tqdm bar (None: only for runs
        expected to take more than a few seconds).

    Attributes
    ----------
    q : the fitted `fa.FactorGaussian`; elbo_trace : per-step ELBO estimates; converged,
    n_iter, seconds.
    """

    def __init__(self, model, K=5, *, init=None, init_var=1e-2, n_mc=4, batch_size=None,
                 lr=1e-2, lr_F=None, max_grad_norm=10.0, mean_iter=0, max_iter=5000,
                 window=100, tol=1e-3, decay_iter=1000, seed=0, progress=None):
        self.target = as_target(model)
        self.model = model
        D = int(self.target.dim)
        K = int(K)
        if K < 1 or K > D:
            raise ValueError(f"K must be in 1..D = {D}, got {K}")
        if int(n_mc) < 1:
            raise ValueError(f"n_mc must be >= 1, got {n_mc}")
        N = int(self.target.n_obs)
        if batch_size is not None and not 1 <= int(batch_size) <= N:
            raise ValueError(f"batch_size must be in 1..N = {N} or None, got {batch_size}")
        if not (np.isfinite(init_var) and init_var > 0):
            raise ValueError(f"init_var must be positive and finite, got {init_var}")
        for name, v in (("lr", lr), ("lr_F", lr if lr_F is None else lr_F)):
            if not (np.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be positive and finite, got {v}")
        if max_grad_norm is not None and not max_grad_norm > 0:
            raise ValueError(f"max_grad_norm must be positive or None, got {max_grad_norm}")
        if min(int(max_iter), int(window)) < 1 or int(mean_iter) < 0 or int(decay_iter) < 0:
            raise ValueError("max_iter and window must be >= 1, mean_iter and decay_iter >= 0")
        self.K, self.n_mc = K, int(n_mc)
        self.batch_size = None if batch_size is None or int(batch_size) == N else int(
            batch_size)
        self.settings = dict(K=K, n_mc=self.n_mc, batch_size=self.batch_size, lr=lr,
                             lr_F=lr if lr_F is None else lr_F, max_grad_norm=max_grad_norm,
                             mean_iter=int(mean_iter), max_iter=int(max_iter),
                             window=int(window), tol=tol, decay_iter=int(decay_iter),
                             init_var=init_var, seed=seed)
        self.rng = np.random.default_rng(seed)
        if init is None or (isinstance(init, str) and init == "map"):
            c = 0.1 * self.rng.standard_normal(D)
            if init is not None:
                c = map_estimate(self.target, c)
        elif isinstance(init, str):
            raise ValueError(f"init must be a vector, 'map' or None, got {init!r}")
        else:
            c = np.asarray(init, dtype=float).reshape(-1)
            if c.shape != (D,) or not np.all(np.isfinite(c)):
                raise ValueError(f"init must be a finite vector of length {D}")
        F = np.sqrt(init_var / K) * self.rng.standard_normal((D, K))
        self.q = FactorGaussian(c.copy(), F, np.full(D, np.log(init_var)))
        self._draws = None
        self._fit(progress)

    # -- optimisation ------------------------------------------------------------------
    def _step_grad(self, q):
        N = self.target.n_obs
        rows = (None if self.batch_size is None
                else np.sort(self.rng.choice(N, self.batch_size, replace=False)))
        h = self.rng.standard_normal((self.n_mc, q.rank))
        z = self.rng.standard_normal((self.n_mc, q.dim))
        return elbo_and_grad(self.target, q, h, z, rows)

    def _fit(self, progress):
        with _one_blas_thread():
            self._fit_loop(progress)

    def _fit_loop(self, progress):
        s = self.settings
        t0 = time.perf_counter()
        clip = s["max_grad_norm"]
        params = [self.q.c.copy(), self.q.F.copy(), self.q.log_psi.copy()]
        adam = _Adam([p.shape for p in params])
        trace, window_means = [], []
        total = s["mean_iter"] + s["max_iter"] + s["decay_iter"]
        bar = _bar(total, self.n_mc, progress, self.target)
        self.converged = False
        phase_decay = 0
        it = 0
        try:
            while True:
                if it < s["mean_iter"]:
                    lrs = (s["lr"], 0.0, 0.0)
                elif phase_decay:
                    frac = max(0.0, 1.0 - (it - phase_decay) / max(s["decay_iter"], 1))
                    lrs = (s["lr"] * frac, s["lr_F"] * frac, s["lr"] * frac)
                else:
                    lrs = (s["lr"], s["lr_F"], s["lr"])
                q = FactorGaussian(*params)
                value, grads = self._step_grad(q)
                if not np.isfinite(value) or not all(np.all(np.isfinite(g)) for g in grads):
                    raise FloatingPointError(
                        f"VIFA: non-finite ELBO or gradient at step {it}; lower lr or "
                        "init_var, or start from the MAP (init=)")
                trace.append(value)
                grads = [_clip(g, clip) for g in grads]
                if it == s["mean_iter"]:
                    adam = _Adam([p.shape for p in params])  # the joint stage starts afresh
                steps = adam.step(grads, lrs)
                params = [p + d for p, d in zip(params, steps)]
                it += 1
                if bar is not None:
                    bar.update(1)
                joint = it - s["mean_iter"]
                if phase_decay:
                    if it - phase_decay >= s["decay_iter"]:
                        break
                    continue
                if joint > 0 and joint % s["window"] == 0:
                    window_means.append(float(np.mean(trace[-s["window"]:])))
                    if len(window_means) >= 3:
                        a, b = window_means[-2], window_means[-1]
                        if abs(b - a) <= s["tol"] * (1.0 + abs(b)):
                            self.converged = True
                    if self.converged or joint >= s["max_iter"]:
                        phase_decay = it
                        if bar is not None:
                            bar.total = it + s["decay_iter"]
                            bar.refresh()
                        if s["decay_iter"] == 0:
                            break
                elif joint >= s["max_iter"]:
                    phase_decay = it
                    if s["decay_iter"] == 0:
                        break
        finally:
            if bar is not None:
                bar.close()
        self.q = FactorGaussian(*params)
        self.elbo_trace = np.asarray(trace)
        self.n_iter = it
        self.seconds = time.perf_counter() - t0
        if not self.converged:
            warnings.warn(f"VIFA: the ELBO had not levelled off after {s['max_iter']} "
                          f"steps (tol {s['tol']:g}); raise max_iter or lr",
                          RuntimeWarning, stacklevel=3)

    # -- results -----------------------------------------------------------------------
    @property
    def mean(self) -> np.ndarray:
        return self.q.c

    def elbo(self, n_mc=1000, seed=0) -> float:
        """ELBO estimate with ``n_mc`` fresh draws over all the data."""
        rng = np.random.default_rng(seed)
        h = rng.standard_normal((int(n_mc), self.q.rank))
        z = rng.standard_normal((int(n_mc), self.q.dim))
        return elbo_and_grad(self.target, self.q, h, z)[0]

    def sample(self, n_draws=4000, seed=0):
        """(theta (S, D), log_q (S,), log_p (S,)) of fresh draws from q."""
        theta, _, _ = self.q.sample(int(n_draws), np.random.default_rng(seed))
        log_q = self.q.log_density(theta)
        ll = self.target.log_lik(theta)
        log_p = ll.sum(axis=1) + self.target.log_prior(theta)
        return theta, log_q, log_p, ll

    def to_draws(self, n_draws=4000, seed=0):
        """`Draws` (method "vifa", one chain) of the family's Stan variables and
        ``log_lik``, with ``log_p`` (the model's log posterior, constants dropped) and the
        exact ``log_q``; cached per (n_draws, seed), so ``loo(fit, model=...)`` reuses it."""
        from loo_adapt.draws import Draws

        key = (int(n_draws), seed)
        if self._draws is not None and self._draws[0] == key:
            return self._draws[1]
        theta, log_q, log_p, ll = self.sample(n_draws, seed)
        if hasattr(self.target, "variables"):
            variables = self.target.variables(theta)
        else:
            variables = {"theta": theta[None]}
        variables["log_lik"] = ll[None]
        draws = Draws(variables, method="vifa", log_p=log_p[None], log_q=log_q[None],
                      source=f"VIFA (K = {self.K}, {self.n_iter} steps)",
                      log_lik_names=("log_lik",),
                      config={"K": self.K, "n_iter": self.n_iter,
                              "converged": self.converged})
        self._draws = (key, draws)
        return draws

    def __repr__(self):
        return (f"VIFA(D={self.q.dim}, K={self.K}, steps={getattr(self, 'n_iter', 0)}, "
                f"converged={getattr(self, 'converged', False)})")


def _one_blas_thread():
    """One BLAS thread for the fit: its products are D x K by K x K or L x D, far too small
    to gain from threads, and a threaded OpenBLAS on a busy machine made a K = 20 step
    forty times slower (threadpoolctl when installed; otherwise nothing changes)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


def _bar(total, n_mc, progress, target):
    """tqdm bar over the steps; by default only for runs expected to last more than a few
    seconds (steps x draws x observations x weights above 5e9)."""
    if progress is None:
        progress = total * n_mc * target.dim * target.n_obs > 5e9
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="VIFA", unit="step", leave=False)
