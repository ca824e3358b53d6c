"""PSIS-LOO for large n by subsampling observations (R loo's ``loo_subsample``).

Magnusson, Andersen, Jonasson and Vehtari (2019), *Bayesian leave-one-out cross-validation
for large data* (ICML), and (2020), *Leave-one-out cross-validation for Bayesian model
comparison in large data* (AISTATS).  Instead of the S x n log-likelihood matrix this takes a
log-likelihood *function* and evaluates PSIS-LOO only on a sample of m observations; a cheap
approximation ``a_i`` of every ``elpd_loo_i`` carries the rest:

* ``approximation="plpd"``: ``a_i = log p(y_i | theta_hat)`` at the posterior mean (default);
  ``"lpd"``: ``a_i = log mean_s p(y_i | theta_s)`` (optionally on ``approximation_draws``
  thinned draws, R's ``.thin_draws``).
* ``estimator="diff_srs"`` (default): simple random sampling without replacement and the
  difference estimator ``elpd = sum_i a_i + (N / m) sum_{j in sample} (elpd_j - a_j)``;
  ``"srs"``: the plain expansion estimator ``N mean(elpd_j)``; ``"hh_pps"``: sampling with
  replacement with probabilities proportional to ``|a_i|`` and the Hansen-Hurwitz estimator.
  ``p_loo`` is estimated by simple random sampling (Hansen-Hurwitz for ``"hh_pps"``).

Each estimate comes with two standard errors, as R loo prints them: ``se_*`` estimates the
usual LOO standard error ``sqrt(N var(elpd_i))`` of the full data, ``subsampling_se_*`` the
extra error from looking at m < N observations (zero when all are used).  The formulas are
R loo's ``srs_diff_est``, ``srs_est`` and ``whhest`` (loo 2.8).  When every observation is
used (``observations=None``, or ``N`` with simple random sampling) the result is exactly the
full PSIS-LOO, as R loo falls back to ``loo()``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np
from scipy.special import logsumexp

from loo_adapt.core.chunked import FIELDS, check_r_eff, from_blocks, loo_block
from loo_adapt.core.psis_loo import PsisLoo

__all__ = ["APPROXIMATIONS", "ESTIMATORS", "SubsampleLoo", "loo_subsample"]

APPROXIMATIONS = ("plpd", "lpd")
ESTIMATORS = ("diff_srs", "srs", "hh_pps")

#: Observations per call of the log-likelihood when an approximation needs all n of them.
_APPROX_BLOCK = 4096
#: Subsampled observations per call of the log-likelihood and of PSIS (memory S x this).
_PSIS_BLOCK = 1024


# ---------------------------------------------------------------------------------------------
# where the log-likelihood comes from: a model family or a user callable
# ---------------------------------------------------------------------------------------------


def _thin_index(n_samples: int, k: int | None) -> np.ndarray:
    """R loo ``.thin_draws``: draws ``(1:k) * S %/% k`` (1-based), all draws when k is None."""
    if k is None:
        return np.arange(n_samples)
    k = int(k)
    if not 1 <= k <= n_samples:
        raise ValueError(f"approximation_draws must be in 1..{n_samples}, got {k}")
    return (np.arange(1, k + 1) * n_samples) // k - 1


def _draw_rows(draws, rows):
    if isinstance(draws, np.ndarray):
        return draws[rows]
    if isinstance(draws, Mapping):
        return {k: np.asarray(v)[rows] for k, v in draws.items()}
    raise TypeError(
        "thinning and posterior means need draws as an (S, P) array or a dict of (S, ...) "
        f"arrays, got a {type(draws).__name__}; pass point= (for 'plpd') or leave "
        "approximation_draws=None"
    )


def _point_estimate(draws):
    """Posterior mean as a one-draw draws object (R ``.compute_point_estimate``)."""
    if isinstance(draws, np.ndarray):
        return draws.mean(axis=0, keepdims=True)
    if isinstance(draws, Mapping):
        return {k: np.asarray(v, dtype=float).mean(axis=0, keepdims=True)
                for k, v in draws.items()}
    return _draw_rows(draws, None)  # raises the TypeError naming the fix


class _FunctionSource:
    """``log_lik_fn(draws, idx) -> (S, len(idx))`` on opaque draws."""

    def __init__(self, fn, draws, n_obs, n_chains, point):
        self.fn, self.draws, self.n_obs = fn, draws, int(n_obs)
        self.n_chains, self.point = int(n_chains), point

    def _call(self, draws, idx, rows=None):
        out = np.asarray(self.fn(draws, idx), dtype=np.float64)
        if out.ndim != 2 or out.shape[1] != len(idx) or (rows and out.shape[0] != rows):
            want = f"({rows if rows else 'S'}, {len(idx)})"
            raise ValueError(f"log_lik_fn returned shape {out.shape}, expected {want}")
        return out

    def columns(self, idx):
        return self._call(self.draws, np.asarray(idx))

    def approximation(self, kind, thin):
        if kind == "plpd":
            point = _point_estimate(self.draws) if self.point is None else self.point
            draws, rows = point, 1
        else:
            draws = self.draws if thin is None else _draw_rows(self.draws, _thin_index(
                _n_rows(self.draws), thin))
            rows = None
        out = np.empty(self.n_obs)
        for j0 in range(0, self.n_obs, _APPROX_BLOCK):
            idx = np.arange(j0, min(j0 + _APPROX_BLOCK, self.n_obs))
            ll = self._call(draws, idx, rows)
            out[idx] = logsumexp(ll, axis=0) - math.log(ll.shape[0])
        return out


def _n_rows(draws) -> int:
    if isinstance(draws, np.ndarray):
        return draws.shape[0]
    if isinstance(draws, Mapping):
        return len(next(iter(draws.values())))
    raise TypeError(f"cannot count the draws of a {type(draws).__name__}")


class _ModelSource:
    """A model family of `loo_adapt.models` (``log_lik(theta)``, ``log_lik_i(theta, i)``)."""

    #: draws per call of ``model.log_lik`` for the "lpd" approximation (memory rows x n)
    rows = 64

    def __init__(self, model, theta, n_chains, point):
        self.model, self.theta = model, np.asarray(theta, dtype=float)
        self.n_obs, self.n_chains = int(model.n_obs), int(n_chains)
        self.point = point

    def columns(self, idx):
        return np.column_stack([self.model.log_lik_i(self.theta, int(i)) for i in idx])

    def approximation(self, kind, thin):
        if kind == "plpd":
            point = self.theta.mean(axis=0) if self.point is None else self.point
            return self.model.log_lik(np.asarray(point, dtype=float).reshape(1, -1))[0]
        theta = self.theta[_thin_index(len(self.theta), thin)]
        acc = np.full(self.n_obs, -np.inf)
        for s0 in range(0, len(theta), self.rows):
            acc = np.logaddexp(acc, logsumexp(self.model.log_lik(theta[s0:s0 + self.rows]),
                                              axis=0))
        return acc - math.log(len(theta))


def _source(log_lik, draws, n_obs, chains, point):
    if hasattr(log_lik, "log_lik_i") and hasattr(log_lik, "theta_from_draws"):
        model = log_lik
        if n_obs is not None and int(n_obs) != model.n_obs:
            raise ValueError(f"n_obs={n_obs} but the model has {model.n_obs} observations")
        if isinstance(draws, np.ndarray):
            theta, n_chains = draws, 1 if chains is None else chains
        else:
            from loo_adapt.io.readers import read_draws

            d = read_draws(draws)
            theta, _ = model.theta_from_draws(d)
            n_chains = d.n_chains if chains is None else chains
        if np.ndim(theta) != 2 or np.shape(theta)[1] != model.dim:
            raise ValueError(f"theta must be (S, {model.dim}), got shape {np.shape(theta)}")
        return _ModelSource(model, theta, n_chains, point)
    if not callable(log_lik):
        raise TypeError(
            "log_lik must be a model family of loo_adapt.models or a callable "
            f"(draws, indices) -> (S, len(indices)), got {type(log_lik).__name__}"
        )
    if n_obs is None:
        raise ValueError("a log-likelihood callable needs n_obs= (the number of observations)")
    return _FunctionSource(log_lik, draws, n_obs, 1 if chains is None else chains, point)


# ---------------------------------------------------------------------------------------------
# estimators (R loo: srs_diff_est, srs_est, whhest)
# ---------------------------------------------------------------------------------------------


def _srs_diff_est(approx, y, idx):
    """Difference estimator under SRS without replacement: (total, var of total, sigma^2)."""
    n_pop, m = len(approx), len(y)
    e = y - approx[idx]
    t_pi, t_pi2 = approx.sum(), np.sum(approx**2)
    t_e = n_pop * e.mean()
    t_eps = n_pop * np.mean(y**2 - approx[idx] ** 2)
    y_hat = t_pi + t_e
    v_y_hat = n_pop**2 * (1 - m / n_pop) * np.var(e, ddof=1) / m
    hat_v_y = (t_pi2 + t_eps) - (t_e**2 - v_y_hat + 2 * t_pi * y_hat - t_pi**2) / n_pop
    return y_hat, v_y_hat, hat_v_y


def _srs_est(y, n_pop):
    m = len(y)
    return n_pop * y.mean(), n_pop**2 * (1 - m / n_pop) * np.var(y, ddof=1) / m, \
        n_pop * np.var(y, ddof=1)


def _whhest(z, m_i, y, n_pop):
    """Hansen-Hurwitz with draw probabilities z and multiplicities m_i."""
    m = m_i.sum()
    y_hat = np.sum(m_i * y / z) / m
    v_hat = np.sum(m_i * (y / z - y_hat) ** 2) / m / (m - 1)
    hat_v = np.sum(m_i * y**2 / z) / m + v_hat / n_pop - y_hat**2 / n_pop
    return y_hat, v_hat, hat_v


def _pps_probabilities(approx):
    p = np.abs(approx)
    return p / p.sum()


# ---------------------------------------------------------------------------------------------
# the result
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SubsampleLoo:
    """Subsampled PSIS-LOO (R loo's ``psis_loo_ss``).

    Attributes
    ----------
    estimates : dict with elpd_loo, p_loo, looic, their ``se_*`` and ``subsampling_se_*``.
    idx : indices of the distinct subsampled observations (sampling order of first draw).
    m_i : how many times each was drawn (1 except with ``"hh_pps"``).
    pointwise : `loo_adapt.core.psis_loo.PsisLoo` of the observations ``idx`` (``log_weights``
        None).
    elpd_loo_approx : the approximation a_i of every observation, (n,).
    n_obs, estimator, approximation : N and the settings used.
    """

    estimates: dict
    idx: np.ndarray
    m_i: np.ndarray
    pointwise: PsisLoo
    elpd_loo_approx: np.ndarray
    n_obs: int
    estimator: str
    approximation: str
    _source: object = field(repr=False, compare=False)
    _fields: np.ndarray = field(repr=False, compare=False)
    _r_eff: np.ndarray | None = field(repr=False, compare=False)
    _rng: np.random.Generator = field(repr=False, compare=False)

    @property
    def n_subsample(self) -> int:
        """Number of subsample draws m (with repeats for ``"hh_pps"``)."""
        return int(self.m_i.sum())

    @property
    def elpd_loo(self) -> float:
        """Estimated total elpd_loo."""
        return self.estimates["elpd_loo"]

    @property
    def se_elpd_loo(self) -> float:
        """Estimated SE of elpd_loo over the data (R loo's ``SE``)."""
        return self.estimates["se_elpd_loo"]

    @property
    def subsampling_se_elpd_loo(self) -> float:
        """Extra SE of elpd_loo from subsampling (R loo's ``subsampling SE``)."""
        return self.estimates["subsampling_se_elpd_loo"]

    def update(self, observations) -> SubsampleLoo:
        """A new result with more (or exactly the given) subsampled observations.

        Parameters
        ----------
        observations : int or array of indices
            int: the new total subsample size m (larger than now); new observations are drawn
            by the same scheme (without replacement from the rest for simple random sampling,
            more draws with replacement for ``"hh_pps"``).  Array: exactly these observations
            (repeats count as multiplicities for ``"hh_pps"``).  Only observations not already
            in the subsample are evaluated.

        Returns
        -------
        SubsampleLoo (this object is unchanged; its random generator advances).

        Examples
        --------
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> theta = rng.normal(0.0, 0.1, (400, 1))
        >>> y = rng.normal(0.0, 1.0, 500)
        >>> fn = lambda th, i: -0.5 * (y[i][None, :] - th) ** 2
        >>> ss = loo_subsample(fn, theta, n_obs=500, observations=50, seed=1)
        >>> ss.update(80).n_subsample
        80
        """
        _check_numbers(n_obs=None, observations=observations, approximation_draws=None,
                       chains=None, seed=None)
        idx, m_i = _choose(observations, self.estimator, self.elpd_loo_approx, self._rng,
                           current=(self.idx, self.m_i))
        return _evaluate(self._source, idx, m_i, self.elpd_loo_approx, self.estimator,
                         self.approximation, self._r_eff, self._rng,
                         known=(self.idx, self._fields))

    def __str__(self) -> str:
        e = self.estimates
        lines = [
            f"Computed from {self.pointwise.n_samples} by {self.n_subsample} subsampled "
            f"log-likelihood values from {self.n_obs} total observations "
            f"({self.estimator}, {self.approximation} approximation).",
            "",
            f"{'':10s}{'Estimate':>10s}{'SE':>9s}{'subsampling SE':>16s}",
        ]
        for name in ("elpd_loo", "p_loo", "looic"):
            lines.append(f"{name:10s}{e[name]:10.1f}{e['se_' + name]:9.1f}"
                         f"{e['subsampling_se_' + name]:16.1f}")
        return "\n".join(lines)


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _check_numbers(*, n_obs, observations, approximation_draws, chains, seed) -> None:
    """Integer options are integers in range (a NaN, inf or 10.5 is refused, never cast)."""
    for name, value, low in (("n_obs", n_obs, 1), ("approximation_draws", approximation_draws, 1),
                             ("chains", chains, 1)):
        if value is not None and not (_is_int(value) and value >= low):
            raise ValueError(f"{name} must be an integer >= {low} or None, got {value!r}")
    if observations is not None and np.ndim(observations) == 0 and not (
            _is_int(observations) and observations >= 1):
        raise ValueError(f"observations must be a positive integer, a 1-D array of integer "
                         f"indices or None, got {observations!r}")
    if seed is not None and not isinstance(seed, np.random.Generator) and not (
            _is_int(seed) and seed >= 0):
        raise ValueError(f"seed must be a non-negative integer, a numpy Generator or None, got "
                         f"{seed!r}")


def _choose(observations, estimator, approx, rng, current=None):
    """(idx, m_i) of the subsample; ``current`` is the subsample to extend."""
    n_pop = len(approx)
    if np.ndim(observations) == 0:
        m = int(observations)
        have = 0 if current is None else int(current[1].sum())
        if m <= have:
            raise ValueError(f"observations={m} must exceed the current subsample size {have}")
        if estimator == "hh_pps":
            draws = rng.choice(n_pop, size=m - have, replace=True, p=_pps_probabilities(approx))
            new_idx, new_m = np.unique(draws, return_counts=True)
            if current is None:
                return new_idx, new_m
            idx = np.concatenate([current[0], new_idx])
            uniq, inv = np.unique(idx, return_inverse=True)
            counts = np.bincount(inv, weights=np.concatenate([current[1], new_m]))
            return uniq, counts.astype(np.int64)
        if m > n_pop:
            raise ValueError(f"observations={m} is larger than the number of observations {n_pop}")
        rest = np.arange(n_pop) if current is None else np.setdiff1d(np.arange(n_pop),
                                                                      current[0])
        new = np.sort(rng.choice(rest, size=m - have, replace=False))
        idx = new if current is None else np.concatenate([current[0], new])
        return idx, np.ones(len(idx), dtype=np.int64)
    obs = np.asarray(observations)
    if obs.ndim != 1 or obs.size == 0 or not np.issubdtype(obs.dtype, np.integer):
        raise ValueError("observations must be an int or a 1-D array of integer indices")
    if obs.min() < 0 or obs.max() >= n_pop:
        raise ValueError(f"observation indices must be in 0..{n_pop - 1}")
    idx, counts = np.unique(obs, return_counts=True)
    if estimator != "hh_pps" and np.any(counts > 1):
        raise ValueError(f"estimator={estimator!r} samples without replacement: repeated "
                         "indices are only meaningful with estimator='hh_pps'")
    return idx, counts.astype(np.int64)


def _evaluate(source, idx, m_i, approx, estimator, approximation, r_eff, rng, known=None):
    """PSIS-LOO on the subsample (reusing ``known`` = (idx, fields)) and the estimates."""
    fields = np.empty((len(FIELDS), len(idx)))
    todo = np.ones(len(idx), dtype=bool)
    if known is not None:
        pos = {int(j): k for k, j in enumerate(known[0])}
        for k, j in enumerate(idx):
            if int(j) in pos:
                fields[:, k] = known[1][:, pos[int(j)]]
                todo[k] = False
    cols = np.flatnonzero(todo)
    for j0 in range(0, len(cols), _PSIS_BLOCK):  # bounded memory: S x _PSIS_BLOCK at a time
        at = cols[j0:j0 + _PSIS_BLOCK]
        new = idx[at]
        ll = source.columns(new)
        n_samples = ll.shape[0]
        if source.n_chains > 1:
            if n_samples % source.n_chains:
                raise ValueError(f"{n_samples} draws do not split into {source.n_chains} chains")
            ll = ll.reshape(source.n_chains, n_samples // source.n_chains, len(new))
        try:
            fields[:, at] = loo_block(ll, None, None if r_eff is None else r_eff[new])
        except ValueError as err:
            raise ValueError(f"PSIS-LOO of observations {list(new[:10])}...: {err} (column "
                             "numbers count within this list)") from err
        source.n_samples = n_samples
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reported below, with the full-data indices
        pointwise = from_blocks(fields, source.n_samples)
    _warn_khat(pointwise, idx)
    estimates = _estimates(pointwise, idx, m_i, approx, estimator)
    return SubsampleLoo(estimates, idx, m_i, pointwise, approx, len(approx), estimator,
                        approximation, source, fields, r_eff, rng)


def _warn_khat(pointwise, idx):
    bad = idx[~(pointwise.pareto_k <= pointwise.good_k)]
    if bad.size:
        warnings.warn(
            f"{bad.size} of the {len(idx)} subsampled observations have Pareto k-hat above "
            f"{pointwise.khat_threshold:.2f} (e.g. {', '.join(map(str, bad[:5]))}): their "
            "elpd_loo estimates, and so the subsampled total, are unreliable",
            UserWarning, stacklevel=4,
        )


def _estimates(pw: PsisLoo, idx, m_i, approx, estimator) -> dict:
    n_pop = len(approx)
    if estimator != "hh_pps" and len(idx) == n_pop:
        # every observation: the full PSIS-LOO (R loo falls back to loo()), no subsampling
        order = np.argsort(idx)
        full = replace(pw, **{f: getattr(pw, f)[order] for f in FIELDS}).estimates()
        out = {k: full[k] for k in ("elpd_loo", "se_elpd_loo", "p_loo", "se_p_loo")}
        out.update(subsampling_se_elpd_loo=0.0, subsampling_se_p_loo=0.0)
    else:
        if int(m_i.sum()) < 2:
            raise ValueError("the subsample needs at least 2 observations")
        if estimator == "hh_pps":
            z = _pps_probabilities(approx)[idx]
            est_elpd = _whhest(z, m_i, pw.elpd_i, n_pop)
            est_p = _whhest(z, m_i, pw.p_loo_i, n_pop)
        elif estimator == "diff_srs":
            est_elpd = _srs_diff_est(approx, pw.elpd_i, idx)
            est_p = _srs_est(pw.p_loo_i, n_pop)
        else:
            est_elpd = _srs_est(pw.elpd_i, n_pop)
            est_p = _srs_est(pw.p_loo_i, n_pop)
        out = {}
        for name, (total, v_sub, v_full) in (("elpd_loo", est_elpd), ("p_loo", est_p)):
            out[name] = float(total)
            if v_full > 0:
                out[f"se_{name}"] = float(np.sqrt(v_full))
            else:
                warnings.warn(f"negative estimate of the {name} variance: subsample more "
                              "observations (update())", UserWarning, stacklevel=4)
                out[f"se_{name}"] = math.nan
            out[f"subsampling_se_{name}"] = float(np.sqrt(v_sub))
    out["looic"] = -2.0 * out["elpd_loo"]
    out["se_looic"] = 2.0 * out["se_elpd_loo"]
    out["subsampling_se_looic"] = 2.0 * out["subsampling_se_elpd_loo"]
    return out


# ---------------------------------------------------------------------------------------------
# the verb
# ---------------------------------------------------------------------------------------------


def loo_subsample(
    log_lik: Callable | object,
    draws,
    *,
    n_obs: int | None = None,
    observations=400,
    approximation: str = "plpd",
    estimator: str = "diff_srs",
    approximation_draws: int | None = None,
    r_eff=None,
    chains: int | None = None,
    point=None,
    seed=None,
) -> SubsampleLoo:
    """PSIS-LOO for large n from a log-likelihood function on a subsample of observations.

    Parameters
    ----------
    log_lik : model family or callable
        A model family of `loo_adapt.models` (its ``log_lik_i`` gives the subsampled columns,
        its ``log_lik`` the approximations), or a callable ``(draws, indices) ->
        array (S, len(indices))`` of log p(y_i | theta_s).
    draws : the posterior draws
        For a model: anything `loo_adapt.read_draws` reads (``theta_from_draws`` picks the
        block), or theta itself as an (S, P) array.  For a callable: whatever it takes; for
        ``"plpd"`` (posterior mean) and ``approximation_draws`` it must be an (S, P) array or
        a dict of (S, ...) arrays, unless ``point=`` is given.
    n_obs : number of observations N (required with a callable).
    observations : int, array of indices or None
        Subsample size m (default 400, as R), the indices themselves, or None for all N (the
        exact full PSIS-LOO).
    approximation : "plpd" (log p(y_i | posterior mean)) or "lpd" (log mean_s p(y_i | theta_s)).
    estimator : "diff_srs" (default), "srs" or "hh_pps" (see the module docstring).
    approximation_draws : thin the draws to this many for "lpd" (R's ``.thin_draws``).
    r_eff : None, float or array (N,); None: from the chain structure when there are several
        chains (``chains=`` or a multi-chain fit), else 1.
    chains : number of chains, the draws stacked chain-major (overrides the fit's).
    point : the point estimate for "plpd" in the form ``log_lik`` takes (theta (P,) for a
        model); default the posterior mean.
    seed : seed or numpy Generator of the subsampling.

    Returns
    -------
    SubsampleLoo: ``.estimates`` (elpd_loo, se_elpd_loo, subsampling_se_elpd_loo, p_loo,
    looic, ...), ``.pointwise`` on the subsample, ``.update(m)`` for more observations.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(0.0, 1.0, 2000)
    >>> theta = rng.normal(y.mean(), 1 / np.sqrt(2000), (1000, 1))   # posterior of a mean
    >>> fn = lambda th, i: -0.5 * (y[i][None, :] - th) ** 2 - 0.5 * np.log(2 * np.pi)
    >>> ss = loo_subsample(fn, theta, n_obs=2000, observations=200, seed=1)
    >>> full = loo_subsample(fn, theta, n_obs=2000, observations=None)  # all 2000: exact
    >>> round(ss.elpd_loo), round(full.elpd_loo), full.subsampling_se_elpd_loo
    (-2839, -2839, 0.0)
    """
    if approximation not in APPROXIMATIONS:
        raise ValueError(f"approximation must be one of {APPROXIMATIONS}, got {approximation!r}")
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    _check_numbers(n_obs=n_obs, observations=observations,
                   approximation_draws=approximation_draws, chains=chains, seed=seed)
    source = _source(log_lik, draws, n_obs, chains, point)
    source.n_samples = None
    n_pop = source.n_obs
    r = check_r_eff(r_eff, n_pop)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    census = observations is None or (
        np.ndim(observations) == 0 and estimator != "hh_pps" and int(observations) == n_pop
    )
    if census:
        idx, m_i = np.arange(n_pop), np.ones(n_pop, dtype=np.int64)
        approx = np.full(n_pop, np.nan)  # not needed: nothing is left to approximate
        if estimator == "hh_pps":
            raise ValueError("observations=None uses every observation; choose "
                             "estimator='diff_srs' or 'srs'")
    else:
        approx = np.asarray(source.approximation(approximation, approximation_draws), float)
        if approx.shape != (n_pop,) or not np.all(np.isfinite(approx)):
            raise ValueError(f"the {approximation!r} approximation must be finite for all "
                             f"{n_pop} observations")
        idx, m_i = _choose(observations, estimator, approx, rng)
    return _evaluate(source, idx, m_i, approx, estimator, approximation, r, rng)

