"""The candidates of adaptive importance sampling (array core): for one observation, the
untransformed draws and every (transform, rho) of `loo_adapt.transforms`, as columns of log
importance ratios, log l_i and P(y_i = 1) at the transformed draws (`row_candidates`).

Every transform here is affine in its step, phi(h) = theta + h D, so the O(S n P)
likelihood work is one product per (observation, transform) for models whose linear
predictor is linear in the block (logistic regression); the rho grid then costs O(S n):
`_loglik_steps` evaluates the Bernoulli-logit likelihood at every step in one pass.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange
from scipy.special import expit

from loo_adapt.core._vmath import exp_clamped
from loo_adapt.transforms import TRANSFORMS, prepare_first_order

#: factors 1 + exp(-|u|) in [1, 2] multiplied before one log: 2**512 is far from overflow
_PROD_CHUNK = 512


@njit(cache=True, error_model="numpy", fastmath={"reassoc", "nsz"})
def _sum_and_log_prod(pos, one):
    """sum(pos) + log(prod(one)) for factors ``one`` in [1, 2] (reassociated: vectorised)."""
    n = pos.shape[0]
    acc = 0.0
    for j in range(n):
        acc += pos[j]
    for j0 in range(0, n, _PROD_CHUNK):
        prod = 1.0
        for j in range(j0, min(j0 + _PROD_CHUNK, n)):
            prod *= one[j]
        acc += math.log(prod)
    return acc


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def _softplus_parts(mu_row, scale, d_row, h, sign, pos, one):
    """-log l_j = softplus(t_j) = max(t_j, 0) + log(1 + exp(-|t_j|)) at
    t_j = -sign_j (mu_j + h scale d_j): the two parts into ``pos`` and ``one`` (vectorised
    with `loo_adapt.core._vmath.exp_clamped`)."""
    for j in range(mu_row.shape[0]):
        t = -sign[j] * (mu_row[j] + h * (scale * d_row[j]))
        pos[j] = max(t, 0.0)
        one[j] = 1.0 + exp_clamped(-abs(t))


#: |change of the linear predictor| below which `_loglik_steps` uses the fifth-order Taylor
#: expansion of log sigmoid (for every term of a draw at once): with a = sigmoid(u)
#: sigmoid(-u) its sixth derivative is a (-120 a^2 + 30 a - 1), at most 1/4 in size, so
#: the remainder is below |d|^6 / 720 / 4 < 4e-16 per term (and it needs no exp or log).
_TAYLOR_MAX = 1e-2


@njit(parallel=True, cache=True)
def _logsig_at(mu, sign):
    """(sum_j log sigmoid(u_j), exp(-|u|)) at u = sign_j mu_sj, (S,) and (S, n): the
    expansion point of `_loglik_steps`, shared by every row and step."""
    n_draws, n_obs = mu.shape
    v0 = np.empty(n_draws)
    e0 = np.empty((n_draws, n_obs))
    for s in prange(n_draws):
        acc = 0.0
        for j in range(n_obs):
            u = sign[j] * mu[s, j]
            e = math.exp(-abs(u))
            e0[s, j] = e
            acc += -(max(-u, 0.0) + math.log1p(e))
        v0[s] = acc
    return v0, e0


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def _taylor_coefficients(mu_row, e_row, scale, d_row, sign, coef):
    """Per term j: the change of u_j per unit step and the derivatives of log sigmoid at
    u_j / k! (k = 1..5), into ``coef`` (6, n)."""
    for j in range(mu_row.shape[0]):
        e = e_row[j]
        r = 1.0 / (1.0 + e)
        # sigmoid(u0), sigmoid(-u0) from exp(-|u0|)
        pos = sign[j] * mu_row[j] >= 0.0
        sp = r if pos else e * r
        sm = e * r if pos else r
        a = sp * sm
        du = sign[j] * (scale * d_row[j])
        coef[0, j] = du
        coef[1, j] = sm
        coef[2, j] = -0.5 * a
        coef[3, j] = a * (sp - sm) / 6.0
        coef[4, j] = a * (6.0 * a - 1.0) / 24.0
        coef[5, j] = a * (sm - sp) * (12.0 * a - 1.0) / 120.0


@njit(cache=True, error_model="numpy", fastmath={"reassoc", "contract", "nsz"})
def _taylor_sum(h, coef):
    """sum_j of the expansion's change of log sigmoid for step h (no exp or log)."""
    acc = 0.0
    for j in range(coef.shape[1]):
        du = h * coef[0, j]
        acc += du * (coef[1, j] + du * (coef[2, j] + du * (coef[3, j] + du * (
            coef[4, j] + du * coef[5, j]))))
    return acc


@njit(parallel=True, cache=True, error_model="numpy")
def _loglik_steps(mu, scale, dmu, hs, sign, i, v0, e0):
    """sum_j log l_j and log l_i at mu + h D for every step h of ``hs`` in one pass.

    Bernoulli-logit, log l_j = log sigmoid(sign_j mu_j).  The change of the linear
    predictor is D_sj = scale_s dmu_sj, with ``dmu`` (S, n) or one row (1, n) shared by
    every draw (a direction that is a per-draw scale times a fixed row needs no (S, n)
    array).  Returns (sum_j log l_j, log l_i), each (K, S) for K = len(hs).  mu is read
    once for all steps and draws are split across threads.  For a draw and step whose
    every |h D_sj| is below `_TAYLOR_MAX` the sum and log l_i come from the fifth-order
    expansion around mu (error < 4e-16 per term) with ``(v0, e0) = _logsig_at(mu, sign)`` (pass
    empty arrays to turn it off); otherwise it is -(sum_j max(t_j, 0) + log prod_j (1 +
    exp(-|t_j|))): one vectorised exp per term and one log per draw and step (the
    product of at most `_PROD_CHUNK` factors in [1, 2] cannot overflow), and log l_i with
    libm's exp and log1p.
    """
    n_draws, n_obs = mu.shape
    n_steps = hs.size
    row_step = 1 if dmu.shape[0] > 1 else 0
    h_min = np.inf
    for k in range(n_steps):
        h_min = min(h_min, abs(hs[k]))
    if e0.shape[0] != n_draws:
        h_min = np.inf  # no expansion point: never the expansion
    total = np.empty((n_steps, n_draws))
    column = np.empty((n_steps, n_draws))
    for s in prange(n_draws):
        pos = np.empty(n_obs)
        one = np.empty(n_obs)
        coef = np.empty((6, n_obs))
        d_row = dmu[s * row_step]
        f = scale[s]
        d_top = 0.0
        for j in range(n_obs):
            d_top = max(d_top, abs(f * d_row[j]))
        taylor = h_min * d_top < _TAYLOR_MAX  # some step of this draw is small enough
        v0_i = 0.0
        if taylor:
            _taylor_coefficients(mu[s], e0[s], f, d_row, sign, coef)
            u = sign[i] * mu[s, i]
            v0_i = -(max(-u, 0.0) + math.log1p(e0[s, i]))
        for k in range(n_steps):
            if taylor and abs(hs[k]) * d_top < _TAYLOR_MAX:
                total[k, s] = v0[s] + _taylor_sum(hs[k], coef)
                du = hs[k] * coef[0, i]
                column[k, s] = v0_i + du * (coef[1, i] + du * (coef[2, i] + du * (
                    coef[3, i] + du * (coef[4, i] + du * coef[5, i]))))
            else:
                _softplus_parts(mu[s], f, d_row, hs[k], sign, pos, one)
                total[k, s] = -_sum_and_log_prod(pos, one)
                t = -sign[i] * (mu[s, i] + hs[k] * (f * d_row[i]))
                column[k, s] = -(max(t, 0.0) + math.log1p(math.exp(-abs(t))))
    return total, column


def _loglik_rowsum_and_column(mu, sign, i):
    """sum_j log l_j and log l_i (each (S,)) at the linear predictors ``mu`` (S, n)."""
    total, column = _loglik_steps(mu, np.ones(mu.shape[0]), np.zeros((1, mu.shape[1])),
                                  np.zeros(1), sign, i, np.empty(0), np.empty((0, 0)))
    return total[0], column[0]


#: columns (rows x observations) of one batched product of affine directions
_AFFINE_COLUMNS = 2048


def _affine_directions(rows, *, model, theta, hyper, terms, post_sd, log_weights, gaussian,
                       transforms, linear, **_unused):
    """(name, i) -> (step, dmu (S, n), prior line) for the transforms whose direction is
    affine in theta (MM2: D = theta * a + c) of the observations ``rows``: their linear
    predictors in one matrix product per `_AFFINE_COLUMNS` columns and their prior changes
    in one pass over theta, instead of one product and one pass per row."""
    if not (linear and "mm2" in transforms and rows.size
            and hasattr(model, "linear_predictor_affine")
            and hasattr(model, "log_prior_change_affine")):
        return {}
    out = {}
    chunk = max(1, _AFFINE_COLUMNS // model.n_obs)
    for start in range(0, rows.size, chunk):
        part = [int(i) for i in rows[start : start + chunk]]
        steps = [TRANSFORMS["mm2"](model, theta, hyper, i, post_sd=post_sd, terms=terms,
                                   log_weights=log_weights[:, i]) for i in part]
        a, c = (np.stack(v) for v in zip(*(st.direction_affine() for st in steps)))
        dmu = model.linear_predictor_affine(theta, a, c)  # (S, R, n)
        line = model.log_prior_change_affine(theta, a, c, hyper, gaussian)
        for k, (i, st) in enumerate(zip(part, steps)):
            out["mm2", i] = (st, np.ascontiguousarray(dmu[:, k]),
                             None if line is None else (line[0][:, k], line[1][:, k]))
    return out


def row_candidates(i, *, model, theta, hyper, terms, post_sd, log_weights, offset, ll_theta,
                   ll_sum_theta, log_prior_theta, linear, gaussian, sign, rho, transforms,
                   jacobian, prior_products, logsig, affine_cache=None):
    """Observation i's candidates: (names, rhos, (log ratios, log l_i, P(y_i = 1)), log_full).

    Each of the four is a list of C columns of S draws (`adaptive._block_estimates` stacks them
    for a whole block of rows at once).  Column 0 is the untransformed draws (plain PSIS);
    then every (transform, rho) whose log ratios are finite.  ``log_full`` are the log
    ratios of the full posterior against each proposal (for the certification).
    ``affine_cache`` is
    `_affine_directions` of a block of rows containing i.
    """
    affine_cache = {} if affine_cache is None else affine_cache
    # the identity (plain PSIS) is always a candidate: adaptation may not help
    names, rhos = ["psis"], [np.nan]
    log_ratios = [offset - ll_theta[:, i]]
    ll_is, prob1s = [ll_theta[:, i]], [expit(terms.mu[:, i])]
    log_full = [offset]  # log ratios of the full posterior against the proposal
    for name in transforms:
        cached = affine_cache.get((name, i))
        if cached is not None:
            step = cached[0]
        elif jacobian == "first_order" and name in ("kl", "var", "ll"):
            step = prepare_first_order(name, model, theta, hyper, i, post_sd=post_sd,
                                       terms=terms)
        else:
            step = TRANSFORMS[name](
                model, theta, hyper, i, post_sd=post_sd, terms=terms,
                log_weights=log_weights[:, i],
            )
        factors = step.direction_factors() if hasattr(step, "direction_factors") else None
        affine = (step.direction_affine() if linear and factors is None
                  and hasattr(step, "direction_affine")
                  and hasattr(model, "linear_predictor_affine") else None)
        direction = (None if linear and (factors is not None or affine is not None)
                     else step.direction())
        if linear:
            # phi(h) = theta + h D and mu is linear in the block: one product per step,
            # and none at all when D is a per-draw scale times a fixed row
            if factors is not None:
                d_scale, dmu = factors[0], model.linear_predictor(factors[1][None, :])
                products = prior_products.get(("mm1" if name == "mm1" else "row", i))
                prior_line = model.log_prior_change_along(theta, factors, hyper, gaussian,
                                                          products=products)
            elif cached is not None:  # computed with the block's other rows
                d_scale, dmu, prior_line = np.ones(theta.shape[0]), cached[1], cached[2]
            elif affine is not None:  # D = theta * a + c: no (S, P) array
                d_scale = np.ones(theta.shape[0])
                dmu = model.linear_predictor_affine(theta, *affine)
                prior_line = model.log_prior_change_affine(theta, *affine, hyper, gaussian)
            else:
                d_scale, dmu = np.ones(theta.shape[0]), model.linear_predictor(direction)
                prior_line = model.log_prior_change_along(theta, direction, hyper, gaussian)
        steps = []  # (rho, h, log|J|, log prior(phi) - log prior(theta), likelihood terms)
        for r in rho:
            h = step.step_for_rho(r)
            if h == 0.0:
                continue
            log_j = step.log_abs_det(h)
            if linear:
                if prior_line is not None:
                    d_prior = h * prior_line[0] + h * h * prior_line[1]
                else:
                    if direction is None:
                        direction = step.direction()
                    d_prior = model.log_prior(theta + h * direction, hyper) - log_prior_theta
                steps.append((r, h, log_j, d_prior, None))
            else:
                phi = theta + h * direction
                mu = model.linear_predictor(phi)
                d_prior = model.log_prior(phi, hyper) - log_prior_theta
                steps.append((r, h, log_j, d_prior, _loglik_rowsum_and_column(mu, sign, i)
                              + (expit(mu[:, i]),)))
        if linear and steps:
            # every step of this transform in one pass over mu (mu + h dmu per step)
            hs = np.array([st[1] for st in steps])
            ll_sums, ll_i_steps = _loglik_steps(terms.mu, d_scale, dmu, hs, sign, i, *logsig)
            # P(y_i = 1) at every step in one call (K, S)
            prob1_steps = expit(terms.mu[:, i] + hs[:, None] * (d_scale * dmu[:, i]))
            steps = [(r, h, log_j, d_prior, (ll_sums[k], ll_i_steps[k], prob1_steps[k]))
                     for k, (r, h, log_j, d_prior, _) in enumerate(steps)]
        for r, _h, log_j, d_prior, (ll_sum, ll_i, prob1) in steps:
            # log post(phi) - log post(theta) + log|J|: the full posterior against the
            # proposal; minus log l_i(phi): the LOO posterior (Eq. 11-15)
            full = log_j + offset + d_prior + (ll_sum - ll_sum_theta)
            log_ratio = full - ll_i
            if not np.all(np.isfinite(log_ratio)):
                continue
            names.append(name)
            rhos.append(float(r))
            log_ratios.append(log_ratio)
            ll_is.append(ll_i)
            prob1s.append(prob1)
            log_full.append(full)
    return names, rhos, (log_ratios, ll_is, prob1s), log_full
