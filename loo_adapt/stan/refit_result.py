"""The result of exact LOO refits (`RefitResult`): per row the held-out elpd, its Monte Carlo
error, the convergence diagnostics, why a row is not verified, and the row as an `Estimate`
for `PointwiseLoo.merge`.  `loo_adapt.stan.refit.refit_loo` fills it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from loo_adapt.core._names import add_deprecated_aliases

__all__ = ["RefitResult", "TIME_BUDGET"]

#: how `loo_adapt.stan.refit.refit_loo` names ``max_seconds`` in the reason of a refit its
#: hard deadline stopped ("stopped: the time budget max_seconds=... ran out (...)")
TIME_BUDGET = "the time budget"


@add_deprecated_aliases
@dataclass
class RefitResult:
    """Exact LOO refits. Arrays are aligned to ``indices`` (NaN where there is no estimate).

    indices : observations asked for, in the caller's order (most severe first).
    elpd_i, mcse_elpd_i : held-out log predictive density and its Monte Carlo error.
    reliable : the refit finished and passed the convergence and the tail checks.
    reason : why a row is not reliable ("" where it is): the failure, the timeout, the
        convergence check, or the limit that left it out.
    status : "ok", "unconverged" (an estimate that failed the convergence or the tail
        check: not verified), "error", "timeout", "died",
        "skipped" (left out by max_refits / max_seconds).
    ess : effective sample size of exp(held-out log-lik) across the refit's chains.
    rhat, ess_bulk, n_divergent : the convergence diagnostics (NaN / -1 where unknown).
    pareto_k : Pareto k-hat of exp(held-out log-lik) over the refit's draws
        (`loo_adapt.stan.heldout.tail_check`; NaN where unknown): above the threshold the
        refit's mean is unreliable and the row is not verified.
    loo_prob : P(y_i = 1 | y_-i) for a binary outcome, else NaN.
    seconds : wall time of each refit (measured in its worker).
    seeds : seed of each refit (-1 where not refitted).
    refitted : bool mask of rows with an estimate; ``not_refitted`` lists the indices left out
        by the limits.
    estimated_seconds_total : estimated wall time of refitting every index asked for,
        first + first * ceil(remaining / workers), known before the rest started.
    estimated_seconds_planned : the same for the refits actually scheduled.
    n_samples : number of held-out draws per refit (0 where not refitted).
    workers, parallel_chains : the scheduling used (parallel_chains 0: the backend's default).
    wall_seconds : wall time of the whole call.
    startup_seconds : wall time until the first refit's result minus that refit's own time
        (starting the worker processes, compiling, sending the job): not part of the
        estimate, which is per refit.
    log_lik : the held-out log-likelihood draws (chains, draws) per index, None if not refitted.
    rerun : per row, "" or how the estimate's refit was rerun after failing the convergence
        check (longer warm-up and draws; after divergences a higher adapt_delta).
    """

    indices: np.ndarray
    elpd_i: np.ndarray
    mcse_elpd_i: np.ndarray
    ess: np.ndarray
    loo_prob: np.ndarray
    seconds: np.ndarray
    seeds: np.ndarray
    refitted: np.ndarray
    not_refitted: np.ndarray
    estimated_seconds_total: float
    estimated_seconds_planned: float
    n_samples: np.ndarray
    log_lik: list = field(default_factory=list, repr=False)
    reliable: np.ndarray | None = None
    reason: np.ndarray | None = None
    status: np.ndarray | None = None
    rhat: np.ndarray | None = None
    ess_bulk: np.ndarray | None = None
    n_divergent: np.ndarray | None = None
    workers: int = 1
    parallel_chains: int = 0
    wall_seconds: float = 0.0
    startup_seconds: float = 0.0
    rerun: np.ndarray | None = None
    pareto_k: np.ndarray | None = None

    def __post_init__(self):
        k = len(self.indices)
        if self.rerun is None:
            self.rerun = np.full(k, "", dtype=object)
        if self.reliable is None:
            self.reliable = np.asarray(self.refitted, dtype=bool).copy()
        if self.reason is None:
            self.reason = np.full(k, "", dtype=object)
        if self.status is None:
            self.status = np.where(self.refitted, "ok", "skipped").astype(object)
        for name in ("rhat", "ess_bulk", "pareto_k"):
            if getattr(self, name) is None:
                setattr(self, name, np.full(k, np.nan))
        if self.n_divergent is None:
            self.n_divergent = np.full(k, -1, dtype=np.int64)

    @classmethod
    def empty(cls, indices) -> RefitResult:
        """A result for ``indices`` with nothing refitted yet (every row "skipped")."""
        k = len(indices)
        return cls(
            indices=np.asarray(indices, dtype=np.int64), elpd_i=np.full(k, np.nan),
            mcse_elpd_i=np.full(k, np.nan), ess=np.full(k, np.nan),
            loo_prob=np.full(k, np.nan), seconds=np.full(k, np.nan),
            seeds=np.full(k, -1, dtype=np.int64), refitted=np.zeros(k, dtype=bool),
            not_refitted=np.empty(0, dtype=np.int64), estimated_seconds_total=0.0,
            estimated_seconds_planned=0.0, n_samples=np.zeros(k, dtype=np.int64),
            log_lik=[None] * k,
        )

    @property
    def n_refitted(self) -> int:
        return int(np.sum(self.refitted))

    def warn_unverified(self, what: str = "refit", stacklevel: int = 2) -> None:
        """One warning listing the rows that were tried but are not verified, with the
        reasons (nothing when there are none)."""
        from loo_adapt.result import observation_label

        bad = np.flatnonzero(~np.asarray(self.reliable, dtype=bool)
                             & (np.asarray(self.status) != "skipped"))
        if not bad.size:
            return
        lines = [f"observation {observation_label(self.indices[p])}: {self.reason[p]}"
                 for p in bad[:10]]
        more = "" if bad.size <= 10 else f"; +{bad.size - 10} more"
        warnings.warn(
            f"{bad.size} of {len(self.indices)} {what}(s) are unverified (0-based indices): "
            + "; ".join(lines) + more,
            UserWarning,
            stacklevel=stacklevel + 1,
        )

    @property
    def failed(self) -> np.ndarray:
        """Rows whose refit raised, returned NaN, timed out or lost its worker."""
        return np.isin(self.status.astype(str), ("error", "timeout", "died"))

    @property
    def left_by_budget(self) -> np.ndarray:
        """Rows the limits left without an estimate: never started (``max_refits``, or
        ``max_seconds`` spent first) or stopped by the hard ``max_seconds`` deadline.  A
        larger budget would refit them, unlike the rows whose refit raised, returned NaN or
        inf, timed out (``timeout``) or lost its worker."""
        status = self.status.astype(str)
        stopped = np.array([str(r).startswith(f"stopped: {TIME_BUDGET}")
                            for r in self.reason], dtype=bool)
        return (status == "skipped") | ((status == "timeout") & stopped)

    def to_estimate(self, y=None, notes=()):
        """The refitted rows as an `loo_adapt.estimators.estimate.Estimate` (merge it with
        `PointwiseLoo.merge`, the only writer).

        Parameters
        ----------
        y : binary outcomes of all n observations, to give the LOO probability of rows whose
            refits did not (a ``refit_fn`` without y); None leaves those NaN.
        notes : notes the estimate carries (the refit estimator's, about bridged rows).

        Returns
        -------
        Estimate
            Rows that were refitted: elpd_loo, MCSE, ESS as the diagnostic, ``reliable`` as
            the refit's own (False for one that did not pass its convergence check, with the
            reason), ``verified_by = "refit"`` where reliable.  Rows not refitted (budget,
            failure) are left out.

        Examples
        --------
        >>> result = result.merge(refit_loo([3, 7], program).to_estimate())  # doctest: +SKIP
        """
        from loo_adapt.estimators.estimate import Estimate

        sel = np.asarray(self.refitted, dtype=bool)
        rows = np.asarray(self.indices)[sel]
        elpd = np.asarray(self.elpd_i, dtype=float)[sel]
        prob = np.asarray(self.loo_prob, dtype=float)[sel]
        if y is not None:
            p_obs = np.exp(elpd)
            yy = np.asarray(y)[rows]
            prob = np.where(np.isnan(prob), np.where(yy == 1, p_obs, 1.0 - p_obs), prob)
        ok = np.asarray(self.reliable, dtype=bool)[sel]
        reason = np.where(ok, "", np.asarray(self.reason, dtype=object)[sel]).astype(object)
        return Estimate.make(
            "refit", rows, elpd, np.asarray(self.mcse_elpd_i, dtype=float)[sel], ok,
            diagnostic=np.asarray(self.ess, dtype=float)[sel], loo_prob=prob,
            verified_by=np.where(ok, "refit", ""), reason=reason,
            row_draws=[self.row_draws(int(j), y) for j in np.flatnonzero(sel)],
            notes=notes,
        )

    def row_draws(self, pos: int, y=None):
        """The held-out draws of one refit as a `loo_adapt.estimators.estimate.RowDraws`.

        Parameters
        ----------
        pos : position in ``indices``.
        y : binary outcomes of all n observations, or None.

        Returns
        -------
        RowDraws or None
            Uniform weights over the refit's draws and, for a binary ``y``,
            P(y_i = 1 | theta_s) = exp(log_lik) if y_i = 1 else 1 - exp(log_lik); None
            where the row has no held-out log-likelihood draws (not refitted).

        Examples
        --------
        >>> res = refit_loo([3], refit_fn=lambda i: np.log(np.full((2, 50), 0.25)),
        ...                 progress=False, n_jobs=1)
        >>> rec = res.row_draws(0, y=np.ones(5))
        >>> rec.source, float(rec.p1.mean())
        ('refit', 0.25)
        """
        from loo_adapt.core.bernoulli import bernoulli_log_p1
        from loo_adapt.estimators.estimate import RowDraws

        ll = self.log_lik[pos] if pos < len(self.log_lik) else None
        if ll is None:
            return None
        ll = np.asarray(ll, dtype=float).ravel()
        p1 = None
        if y is not None:
            p1 = np.exp(bernoulli_log_p1(ll[:, None], np.asarray(y)[[self.indices[pos]]])[:, 0])
        return RowDraws("refit", np.full(ll.size, -np.log(ll.size)), p1)
