"""The one estimator interface: an estimator takes the rows it is asked about and returns an
immutable `Estimate`; `loo_adapt.result.PointwiseLoo.merge` is the only writer.

    est = estimator(ctx, rows)            # Estimate for those rows, nothing written
    result = result.merge(est, accept)    # new PointwiseLoo, history recorded

An `Estimate` carries, per asked row: elpd_loo, its Monte Carlo SE, the LOO probability
P(y_i = 1 | y_-i) (binary outcomes), the estimator's own diagnostic (Pareto k-hat for
importance sampling, ESS for MixIS/refits), whether it is shown reliable, what showed it
(``verified_by``) and, where it is not, why (``reason``).  Columns an estimator does not
produce are NaN (never the previous estimator's value).

`Context` holds what estimators share, built lazily: the draws, the pointwise
log-likelihood, plain PSIS (the base weights), the model family, the Stan program, the
mixture draws.  `Stage` says which rows an estimator is asked about and which of its rows
are merged; `run_stages` is the fold `loo()` is made of.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

import numpy as np

from loo_adapt.core import psis_loo
from loo_adapt.core._names import add_deprecated_aliases

__all__ = ["Estimate", "RowDraws", "Estimator", "Context", "Stage", "run_stages", "rows_of",
           "psis_of_draws",
           "frozen"]


def frozen(a, dtype=None) -> np.ndarray:
    """A read-only copy of ``a`` (the columns of an `Estimate`)."""
    out = np.array(a, dtype=dtype, copy=True)
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class RowDraws:
    """The draws and final weights one row's estimate uses (for LOO-PIT and expectations).

    Attributes
    ----------
    source : "posterior" (the posterior draws), "mixture" (draws of the mixture posterior,
        MixIS), "transformed" (posterior draws moved by adaptive IS or moment matching),
        "refit" (draws of the fit without the row) or "pooled" (MixIS pooled with PSIS:
        the mixture draws here and the posterior draws in ``posterior``).
    log_weights : (S_r,) normalised log weights (logsumexp 0) of those draws.
    p1 : (S_r,) P(y_i = 1 | theta_s) at those draws for a binary outcome, else None.
    draws : the `loo_adapt.draws.Draws` the weights refer to when they are whole draws of a
        fit (MixIS: the mixture fit, shared by every row), else None.
    column : the row's observation index in ``draws`` (-1 without ``draws``).
    posterior : a pooled row's record on the posterior draws (PSIS weights), else None.
    posterior_share : the weight of ``posterior`` in the pooled estimate (the rest is on
        ``log_weights``); see `loo_adapt.core.pool`.

    The arrays may be read-only views of a matrix shared by many rows (MixIS: one (S, n)
    weight matrix for all of them), never copies of it; `all_weights` concatenates a pooled
    row's two parts when asked.

    Examples
    --------
    >>> rec = RowDraws("refit", np.log(np.full(4, 0.25)), p1=np.array([0.1, 0.2, 0.3, 0.4]))
    >>> round(float(np.sum(np.exp(rec.log_weights) * rec.p1)), 12)
    0.25
    """

    source: str
    log_weights: np.ndarray
    p1: np.ndarray | None = None
    draws: Any = None
    column: int = -1
    posterior: RowDraws | None = None
    posterior_share: float = 0.0

    def __post_init__(self):
        if self.source not in ("posterior", "mixture", "transformed", "refit", "pooled"):
            raise ValueError(f"RowDraws.source must be posterior, mixture, transformed, "
                             f"refit or pooled, got {self.source!r}")
        lw = np.asarray(self.log_weights, dtype=float)
        if lw.ndim != 1 or (self.p1 is not None and np.shape(self.p1) != lw.shape):
            raise ValueError(f"log_weights {lw.shape} must be 1-D and p1 "
                             f"{np.shape(self.p1)} the same shape")
        if (self.source == "pooled") != (self.posterior is not None):
            raise ValueError("a pooled RowDraws (and only one) has a posterior part")
        if self.posterior is not None and not (
                0.0 <= self.posterior_share <= 1.0
                and (self.p1 is None) == (self.posterior.p1 is None)):
            raise ValueError("posterior_share must be in [0, 1] and both parts have p1 "
                             "or neither")

    def all_weights(self):
        """(log_weights, p1) over every draw behind the row: a pooled row's posterior draws
        (weighted by ``posterior_share``) followed by its mixture draws; the record's own
        arrays otherwise.

        Returns
        -------
        log_weights : (S,) normalised log weights.
        p1 : (S,) P(y_i = 1 | theta_s), or None.

        Examples
        --------
        >>> post = RowDraws("posterior", np.log([0.5, 0.5]), p1=np.array([0.2, 0.4]))
        >>> rec = RowDraws("pooled", np.log([1.0]), p1=np.array([0.9]), posterior=post,
        ...                posterior_share=0.25)
        >>> lw, p1 = rec.all_weights()
        >>> round(float(np.sum(np.exp(lw) * p1)), 12)  # 0.25 * 0.3 + 0.75 * 0.9
        0.75
        """
        if self.posterior is None:
            return self.log_weights, self.p1
        w = self.posterior_share
        with np.errstate(divide="ignore"):
            lw = np.concatenate([np.log(w) + self.posterior.log_weights,
                                 np.log1p(-w) + np.asarray(self.log_weights, dtype=float)])
        p1 = None if self.p1 is None else np.concatenate([self.posterior.p1, self.p1])
        return lw, p1


@add_deprecated_aliases
@dataclass(frozen=True)
class Estimate:
    """Per-row estimates of one estimator (arrays aligned with ``rows``; read-only).

    Attributes
    ----------
    estimator : name recorded as the row's method ("psis", "ll", "kl+ll", "mm", "mixis",
        "refit", ...).
    rows : observation indices (0-based) the estimate is about.
    elpd_i, mcse_elpd_i : log LOO predictive density of each row and its Monte Carlo SE.
    reliable : shown reliable by the estimator's own diagnostic or a certification.
    verified_by : what showed it reliable ("khat", "certified", "mixis_mcse", "refit"), or "".
    reason : why a row is not reliable ("" where it is).
    pareto_k : Pareto k-hat of the final importance weights (NaN where none apply).
    diagnostic : the estimator's own diagnostic (ESS for MixIS and refits), else NaN.
    loo_prob : P(y_i = 1 | y_-i) for binary outcomes, else NaN.
    rho : step-size parameter of an adaptive transform, else NaN.
    lpd_i : log full-posterior mean likelihood when the estimator defines its own (MixIS
        over all rows), else None.
    mcse_total : Monte Carlo SE of the total over every row, when an estimator that re-judges
        all rows sets it (spot checks), else None.
    sum_mcse : ``(positions, block)`` pairs: the rows at ``positions`` share one fit's draws
        and ``block(held)`` (`loo_adapt.core.mixis.SumMCSE`) is the MCSE of the sum of
        those still held; the result adds the blocks' variances to the other rows' pointwise
        ones for the total's MCSE.
    candidates : optional per-candidate records (adaptive IS).
    notes : what the estimator found worth saying in the summary that is not a failure
        (e.g. MixIS not pooled with PSIS, and why); printed by ``summary()``.
    block_notes : ``(k, text, warn)`` triples: notes about the estimates of the k-th
        ``sum_mcse`` block's fit, which hold only while the result holds a row from it (a
        later stage that re-estimates every one of them makes the note moot: it is
        dropped); ``warn``: `loo` also warns with it when it still holds at the end.
    row_draws : None, or per row a `RowDraws` (the draws and final weights behind the
        estimate; None for a row without them).
    """

    estimator: str
    rows: np.ndarray
    elpd_i: np.ndarray
    mcse_elpd_i: np.ndarray
    reliable: np.ndarray
    verified_by: np.ndarray
    reason: np.ndarray
    pareto_k: np.ndarray
    diagnostic: np.ndarray
    loo_prob: np.ndarray
    rho: np.ndarray
    method: np.ndarray
    lpd_i: np.ndarray | None = None
    mcse_total: float | None = None
    candidates: tuple = ()
    row_draws: tuple | None = None
    notes: tuple = ()
    sum_mcse: tuple = ()
    block_notes: tuple = ()

    @classmethod
    def make(cls, estimator: str, rows, elpd_i, mcse_elpd_i, reliable, *,
             verified_by=None, reason=None, pareto_k=None, diagnostic=None, loo_prob=None,
             rho=None, method=None, lpd_i=None, mcse_total=None, candidates=(),
             row_draws=None, notes=(), sum_mcse=(), block_notes=()) -> Estimate:
        """Build an estimate, filling the columns not given with NaN / "" and freezing it.

        ``method`` gives a per-row estimator name where rows differ (adaptive IS keeps
        PSIS on some rows); it defaults to ``estimator``.  ``row_draws`` is None or one
        `RowDraws` (or None) per row.
        """
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        m = rows.size

        def col(v, fill, dtype=float):
            if v is None:
                return frozen(np.full(m, fill, dtype=dtype))
            a = np.broadcast_to(np.asarray(v, dtype=dtype), (m,))
            return frozen(a, dtype=dtype)

        reliable = col(reliable, False, bool)
        blocks = _blocks(sum_mcse, m)
        if verified_by is None:
            verified_by = np.where(reliable, estimator, "")
        if reason is None:
            reason = np.where(reliable, "", f"{estimator}: not shown reliable")
        return cls(
            estimator=str(estimator),
            rows=frozen(rows),
            elpd_i=col(elpd_i, np.nan),
            mcse_elpd_i=col(mcse_elpd_i, np.nan),
            reliable=reliable,
            verified_by=col(verified_by, "", object),
            reason=col(reason, "", object),
            pareto_k=col(pareto_k, np.nan),
            diagnostic=col(diagnostic, np.nan),
            loo_prob=col(loo_prob, np.nan),
            rho=col(rho, np.nan),
            method=col(estimator if method is None else method, estimator, object),
            lpd_i=None if lpd_i is None else col(lpd_i, np.nan),
            mcse_total=None if mcse_total is None else float(mcse_total),
            candidates=tuple(candidates),
            notes=tuple(str(n) for n in notes),
            row_draws=None if row_draws is None else _row_records(row_draws, m),
            sum_mcse=blocks,
            block_notes=_block_notes(block_notes, len(blocks)),
        )

    def __len__(self) -> int:
        return int(self.rows.size)

    #: the per-row columns (besides ``rows`` and ``row_draws``)
    ROW_COLUMNS = ("elpd_i", "mcse_elpd_i", "reliable", "verified_by", "reason", "pareto_k",
                   "diagnostic", "loo_prob", "rho", "method")

    def take(self, mask) -> Estimate:
        """The rows of this estimate where ``mask`` holds (same estimator)."""
        mask = np.asarray(mask, dtype=bool)
        records = (None if self.row_draws is None
                   else tuple(r for r, m in zip(self.row_draws, mask) if m))
        new_pos = np.cumsum(mask) - 1  # old position -> new one, where kept
        blocks, new_block = [], {}
        for k, (pos, block) in enumerate(self.sum_mcse):  # each block keeps its own rows,
            kept = mask[pos]                              # the dropped unheld
            if kept.any():
                new_block[k] = len(blocks)
                blocks.append((new_pos[pos[kept]], _Restricted(block, kept)))
        notes = tuple((new_block[k], t, w) for k, t, w in self.block_notes if k in new_block)
        return Estimate.make(self.estimator, self.rows[mask], row_draws=records,
                             notes=self.notes, sum_mcse=tuple(blocks), block_notes=notes,
                             **{c: getattr(self, c)[mask] for c in self.ROW_COLUMNS})

    @classmethod
    def concat(cls, estimator: str, parts, *, mcse_total=None) -> Estimate:
        """One estimate named ``estimator`` with the rows, columns, draws records and
        notes of ``parts`` in order (each row keeps its own ``method``)."""
        parts = [p for p in parts if len(p) or p.notes]
        if not parts:
            return cls.make(estimator, np.empty(0, dtype=np.int64), np.nan, np.nan, False)
        records = None
        if any(p.row_draws is not None for p in parts):
            records = tuple(r for p in parts for r in (p.row_draws or (None,) * len(p)))
        blocks, notes, offset = [], [], 0
        for p in parts:
            notes.extend((k + len(blocks), t, w) for k, t, w in p.block_notes)
            blocks.extend((pos + offset, block) for pos, block in p.sum_mcse)
            offset += len(p)
        return cls.make(estimator, np.concatenate([p.rows for p in parts]),
                        row_draws=records, mcse_total=mcse_total, sum_mcse=tuple(blocks),
                        notes=tuple(n for p in parts for n in p.notes),
                        block_notes=tuple(notes),
                        **{c: np.concatenate([getattr(p, c) for p in parts])
                           for c in cls.ROW_COLUMNS})

    @classmethod
    def of_result(cls, estimator: str, result, rows, **columns) -> Estimate:
        """``rows`` of a `PointwiseLoo` as they stand there (estimate, MCSE, verification,
        reason, k-hat after, ESS, LOO probability, rho, method, draws records), with the
        columns given (and ``notes`` / ``mcse_total``) in their place: for a stage that
        re-judges earlier estimates without making new ones."""
        rows = np.asarray(rows, dtype=np.int64)
        current = dict(
            elpd_i=result.elpd_i[rows], mcse_elpd_i=result.mcse_elpd_i[rows],
            reliable=result.reliable[rows], verified_by=np.asarray(result.verified_by)[rows],
            reason=np.asarray(result.reason, dtype=object)[rows],
            pareto_k=result.pareto_k_after[rows], diagnostic=result.diagnostic[rows],
            loo_prob=None if result.loo_prob is None else result.loo_prob[rows],
            rho=None if result.rho is None else result.rho[rows],
            method=np.asarray(result.method, dtype=object)[rows],
            row_draws=(None if result.row_draws is None
                       else tuple(result.row_draws[i] for i in rows)))
        current.update(columns)
        return cls.make(estimator, rows, current.pop("elpd_i"), current.pop("mcse_elpd_i"),
                        current.pop("reliable"), **current)


@dataclass(frozen=True)
class _Restricted:
    """A `SumMCSE`-like block over a subset of its rows (``kept``): called with the held
    mask of the kept rows, it calls the block with the others not held."""

    block: Any
    kept: np.ndarray

    def __call__(self, held) -> float:
        full = np.zeros(self.kept.size, dtype=bool)
        full[np.flatnonzero(self.kept)] = np.asarray(held, dtype=bool)
        return self.block(full)


def _blocks(sum_mcse, m: int) -> tuple:
    """``sum_mcse`` checked: (positions, callable) pairs, positions within the m rows."""
    out = []
    for pos, block in sum_mcse:
        pos = frozen(np.asarray(pos, dtype=np.int64).reshape(-1))
        if pos.size and (pos.min() < 0 or pos.max() >= m):
            raise ValueError(f"sum_mcse positions out of range for {m} rows")
        if not callable(block):
            raise TypeError("a sum_mcse block must be callable (held mask -> MCSE)")
        out.append((pos, block))
    return tuple(out)


def _block_notes(block_notes, n_blocks: int) -> tuple:
    """``block_notes`` checked: (block index, text, warn) triples, indices below
    ``n_blocks``."""
    out = []
    for k, text, warn in block_notes:
        if not 0 <= int(k) < n_blocks:
            raise ValueError(f"a block note names block {k} of {n_blocks}")
        out.append((int(k), str(text), bool(warn)))
    return tuple(out)


def _row_records(row_draws, m: int) -> tuple:
    records = tuple(row_draws)
    if len(records) != m or not all(r is None or isinstance(r, RowDraws) for r in records):
        raise ValueError(f"row_draws must hold {m} RowDraws (or None), one per row")
    return records


def psis_of_draws(draws, *, var_name: str | None = None, reff=None, weights: bool = True):
    """Plain PSIS-LOO of `Draws` (`loo_adapt.core.psis_loo.PsisLoo`).

    Parameters
    ----------
    draws : `loo_adapt.draws.Draws`.
    var_name : the pointwise log-likelihood variable.
    reff : relative efficiency; None computes it from the chains (R loo's ``relative_eff``
        of exp(log_lik)); 1 for a single chain and for approximate draws.
    weights : write the (S, n) log weights (False: ``log_weights`` is None).

    Returns
    -------
    PsisLoo
    """
    log_lik = draws.log_lik(var_name)
    if draws.is_approximate:
        return psis_loo.loo_pointwise_approximate(
            log_lik.reshape(draws.n_samples, -1), draws.log_ratio_offset(),
            r_eff=1.0 if reff is None else reff, weights=weights,
        )
    if draws.n_chains == 1 and reff is None:
        reff = 1.0
    return psis_loo.loo_pointwise(log_lik, r_eff=reff, weights=weights)


class Estimator(Protocol):
    """Anything with a ``name`` that maps (context, rows) to an `Estimate`."""

    name: str

    def __call__(self, ctx: Context, rows: np.ndarray) -> Estimate: ...


@dataclass
class Context:
    """What the estimators share, handed over by the verb layer (`loo_adapt.entry`):
    estimators import no readers and no Stan backends, so whatever needs them (the mixture
    fit, the model-prior check) arrives here as a function; expensive members are computed
    on first use.

    Parameters
    ----------
    draws : `loo_adapt.draws.Draws` of the fit being cross-validated.
    var_name : name of the pointwise log-likelihood variable.
    r_eff : relative efficiency given by the user (None: from the chains).
    model : a model family of `loo_adapt.models` (adaptive IS), or None.
    program : the `loo_adapt.stan.program.StanProgram` checked to be the fit's
        (`loo_adapt.stan.identity`): mixture fit, moment matching, refits; or None.
    mixture_fn : () -> `Draws` of the mixture posterior (given draws, or a fit of the
        program), called once on first use; None when there is none.
    own_mixture : the draws of ``mixture_fn`` are the package's own fit of ``program`` (the
        user gave no mixture draws): when they fail
        `loo_adapt.estimators.mixture_checks.mixture_draws_check`, MixIS verifies no row from them
        and the later stages go on; the user's own draws that fail it are refused.
    prior_check_fn : (ctx) -> "" when the model family's prior was checked against the fit,
        else why it could not be; None: nothing to check.
    refit_runner : ``refit_loo(rows, program, **options)`` (`loo_adapt.stan.refit`), the
        refit machinery, or None.
    focused_mixture_fn : (rows, chains=, draws=, max_treedepth=) -> (draws of the mixture
        focused on those rows, "") or (None, why it cannot be fitted); None without a
        program.
    mixture_again_fn : () -> `Draws` of a second, independent fit of the full mixture
        (another seed), or None: asked for only when the package's own first fit fails its
        check against the posterior draws (a third opinion on which of the two is off).
    y : binary outcomes (LOO probabilities), or None.
    khat_threshold : Pareto k-hat threshold (None: min(1 - 1/log10 S, 0.7)).
    seed : seeds every random choice of the estimators.
    progress : show progress bars for long stages (mixture fit, refits, moment matching).
    weights : keep the (S, n) PSIS log weights in ``base`` (False: `loo` of plain PSIS whose
        caller wants no pointwise output; the weights are then never written).
    """

    draws: Any
    var_name: str | None = None
    r_eff: Any = None
    model: Any = None
    program: Any = None
    mixture_fn: Any = None
    own_mixture: bool = False
    prior_check_fn: Any = None
    refit_runner: Any = None
    focused_mixture_fn: Any = None
    mixture_again_fn: Any = None
    y: np.ndarray | None = None
    khat_threshold: float | None = None
    seed: int | None = None
    progress: bool = True
    options: dict = field(default_factory=dict)
    weights: bool = True
    result: Any = None

    @cached_property
    def log_lik(self) -> np.ndarray:
        """(S, n) pointwise log-likelihood of the draws."""
        return self.draws.log_lik(self.var_name).reshape(self.draws.n_samples, -1)

    @cached_property
    def psis_loo_prob(self) -> np.ndarray | None:
        """(n,) P(y_i = 1 | y_-i) under the plain PSIS weights of every row (binary ``y``),
        computed once for the PSIS result and the rows MixIS pools with PSIS; None without
        ``y``."""
        if self.y is None:
            return None
        from loo_adapt.core.bernoulli import loo_prob_from_log_lik

        return loo_prob_from_log_lik(self.log_lik, self.base.log_weights, self.y)

    @cached_property
    def base(self):
        """Plain PSIS (`loo_adapt.core.psis_loo.PsisLoo`): the base weights of every stage."""
        reff = self.r_eff
        if reff is None and "_mcmc_checks" not in self.__dict__:
            fused = self._base_and_checks()
            if fused is not None:
                return fused
        if reff is None and self._mcmc_checks is not None:
            reff = self._mcmc_checks[0]
        return psis_of_draws(self.draws, var_name=self.var_name, reff=reff,
                             weights=self.weights)

    @cached_property
    def chain_log_lik(self):
        """The (chains, draws, n) log-likelihood when its chains can be compared (MCMC
        draws, at least 2 chains of 4 draws), else None."""
        draws = self.draws
        if (draws is None or getattr(draws, "is_approximate", False)
                or draws.n_chains < 2 or draws.n_draws < 4):
            return None
        ll = draws.log_lik(self.var_name)
        return ll.reshape(ll.shape[0], ll.shape[1], -1)

    def _base_and_checks(self):
        """`base` and `_mcmc_checks` from one pass of the PSIS kernel over the draws
        (`loo_adapt.core.psis_loo.loo_pointwise_checked`: the same numbers as r_eff and the R-hat
        check followed by PSIS), or None (no chains to compare, or a log-likelihood the
        separate calls must report on)."""
        if self.chain_log_lik is None:
            return None
        from loo_adapt.core.convergence import MAX_RHAT

        try:
            res, bad, rhat = psis_loo.loo_pointwise_checked(
                self.chain_log_lik, MAX_RHAT, weights=self.weights)
        except ValueError:  # the separate calls raise what the user should see
            return None
        self.__dict__["_mcmc_checks"] = (res.r_eff, bad, rhat)
        return res

    @cached_property
    def _mcmc_checks(self):
        """(r_eff, bad, R-hat) of `chain_log_lik` from one pass over the draws
        (`loo_adapt.core.convergence.relative_eff_and_disagreement`), or None (no chains to
        compare, or a log-likelihood the separate calls must report on)."""
        if self.chain_log_lik is None:
            return None
        from loo_adapt.core.convergence import relative_eff_and_disagreement

        try:
            return relative_eff_and_disagreement(self.chain_log_lik)
        except ValueError:  # the separate calls raise what the user should see
            return None

    @property
    def threshold(self) -> float:
        return float(self.base.good_k if self.khat_threshold is None
                     else self.khat_threshold)

    @property
    def stan_program(self):
        """The identity-checked Stan program, or None (kept for estimators written
        against the old name)."""
        return self.program

    @cached_property
    def mixture(self):
        """Draws of the mixture posterior (`mixture_fn`, called once)."""
        if self.mixture_fn is None:
            raise ValueError(
                "mixture IS needs draws of the mixture posterior: pass mixis_draws= (a fit of "
                "the program with its mixis flag) or program=loo_adapt.StanProgram(stan_file, "
                "data) to fit them"
            )
        return self.mixture_fn()

    @cached_property
    def prior_unchecked(self) -> str:
        """"" when the model family's prior was checked against the fit (or there is
        nothing to check), else why it could not be checked."""
        return "" if self.prior_check_fn is None else str(self.prior_check_fn(self))

    @cached_property
    def chains_disagree(self):
        """(rows, R-hat) of the observations whose log-likelihood chains disagree
        (`loo_adapt.core.convergence.disagreeing_columns`: rank-normalised split R-hat above
        1.01 or a chain stuck at one value), or None when there is nothing to compare (one
        chain, draws of an approximation, fewer than 4 draws per chain).  R-hat is exact
        for those rows; the others may be NaN (a bound showed it at most 1.01)."""
        checks = self._mcmc_checks
        if checks is not None:
            return np.flatnonzero(checks[1]), checks[2]
        if self.chain_log_lik is None:
            return None
        from loo_adapt.core.convergence import disagreeing_columns

        bad, rhat = disagreeing_columns(self.chain_log_lik, all_rhat=False)
        return np.flatnonzero(bad), rhat

    def need_program(self, what: str):
        if self.program is None:
            raise ValueError(
                f"{what} needs program=loo_adapt.StanProgram(stan_file, data)"
            )
        return self.program


@dataclass(frozen=True)
class Stage:
    """One step of the LOO fold.

    rows : "all" (every observation), "unreliable" (rows not yet shown reliable) or
        "unchecked" (rows not verified by a check that can see bias: unreliable rows and
        rows accepted on PSIS k-hat alone).
    accept : "all" (merge every row the estimator returns) or "reliable" (merge only rows
        it shows reliable; the others keep their previous estimate, their history records
        the attempt).
    """

    estimator: Estimator
    rows: str = "unreliable"
    accept: str = "reliable"

    def __post_init__(self):
        if self.rows not in ("all", "unreliable", "unchecked"):
            raise ValueError(f"Stage.rows must be 'all', 'unreliable' or 'unchecked', got "
                             f"{self.rows!r}")
        if self.accept not in ("all", "reliable"):
            raise ValueError(f"Stage.accept must be 'all' or 'reliable', got {self.accept!r}")


def rows_of(result, which: str) -> np.ndarray:
    """Indices of the rows a stage asks about."""
    if which == "all":
        return np.arange(result.n_obs)
    if which == "unchecked":
        return np.flatnonzero(~result.checked_for_bias)
    return np.flatnonzero(~result.reliable)


#: what verifies a row independently of the posterior draws (their chains may disagree);
#: a pooled "mixis+psis" row leans on the posterior's PSIS too
INDEPENDENT_OF_DRAWS = {"refit": None, "mixis_mcse": ("mixis",)}


def _mark_disagreeing(result, rows, rhat):
    """Rows whose chains disagree lose any "reliable" that rests on the posterior draws
    (k-hat, certification of an adapted draw), with the reason; refits and MixIS on its own
    mixture draws keep theirs."""
    import dataclasses

    from loo_adapt.result import add_reason

    reliable, verified, reason = (result.reliable.copy(), result.verified_by.copy(),
                                  result.reason.copy())
    for i in rows:
        methods = INDEPENDENT_OF_DRAWS.get(str(verified[i]), ())
        if reliable[i] and (methods is None or str(result.method[i]) in methods):
            continue
        why = (f"chains disagree: rank-normalised split R-hat {rhat[i]:.3g} of its "
               "log-likelihood > 1.01" if np.isfinite(rhat[i]) and rhat[i] > 1.01 else
               "chains disagree: a chain is stuck at one value of its log-likelihood")
        reliable[i] = False
        verified[i] = ""
        if "chains disagree" not in str(reason[i]):  # last: the reason that decides
            reason[i] = add_reason(reason[i], why)
    return dataclasses.replace(result, reliable=reliable, verified_by=verified, reason=reason)


def _warn_disagreeing(rows, rhat, var_name, reliable) -> None:
    """One warning naming the rows whose posterior chains disagree, and saying which of them
    still have no verified estimate (``reliable`` after the fold) and which a verification
    independent of those draws (MixIS on its own mixture draws, a refit) covers."""
    import warnings

    from loo_adapt.result import observation_label

    name = var_name or "log_lik"
    worst = float(np.nanmax(rhat[rows])) if np.isfinite(rhat[rows]).any() else float("nan")
    left = rows[~np.asarray(reliable, dtype=bool)[rows]]
    if left.size == rows.size:
        fate = ("no PSIS or adapted estimate of them is verified: run the chains longer, "
                "check the sampler, or refit them (fallback=('refit',))")
    elif left.size:
        fate = (f"{rows.size - left.size} of them are verified independently of the posterior "
                f"draws (MixIS on its own mixture draws, or a refit); "
                f"{observation_label(left, name, limit=100)} have no verified estimate: run "
                "the chains longer, check the sampler, or refit them (fallback=('refit',))")
    else:
        fate = ("each is verified independently of the posterior draws (MixIS on its own "
                "mixture draws, or a refit), but the posterior fit's chains have not mixed on "
                "them: run them longer or check the sampler")
    warnings.warn(
        f"the chains disagree on the log-likelihood of {rows.size} observation(s) "
        f"(rank-normalised split R-hat > 1.01, largest {worst:.3g}, or a chain stuck at one "
        f"value; Vehtari et al. 2021): {observation_label(rows, name, limit=100)}; {fate}",
        UserWarning, stacklevel=4)


def divergent_note(draws) -> str:
    """"" or the note that the posterior fit (MCMC draws carrying Stan's ``divergent__``)
    has divergent transitions: Stan's own warning that the draws may miss part of the
    posterior, which every estimate resting on them inherits.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> d = SimpleNamespace(method="mcmc", sample_stats={"divergent__": np.eye(2, 4)})
    >>> divergent_note(d)[:56]
    'the posterior fit has 2 divergent transitions in 8 draws'
    """
    from loo_adapt.estimators.mixture_checks import divergent_count

    if draws is None or str(getattr(draws, "method", "")) != "mcmc":
        return ""
    k, n = divergent_count(draws)
    if k == 0:
        return ""
    return (f"the posterior fit has {k} divergent transition{'s' if k > 1 else ''} in "
            f"{n} draws (Stan's warning: its draws may miss part of the posterior); "
            "the estimates resting on them (rows verified by PSIS k-hat, adapted or pooled "
            "rows, the mixture fit started from them) inherit what they miss, which no "
            "check on those draws can see: refit with a higher adapt_delta or a "
            "reparameterised program")


def run_stages(ctx: Context, result, stages) -> Any:
    """Fold the stages over ``result``: each estimator sees the rows its stage asks for, and
    `PointwiseLoo.merge` writes what the stage accepts.  Each stage's history entry records
    its wall time (``seconds``, including fits it triggers, e.g. the mixture fit).

    Rows whose posterior chains disagree (`Context.chains_disagree`) start unreliable, and
    after the fold only a verification independent of those draws (a refit, MixIS on its
    own mixture draws) leaves them reliable; one warning names them.  A posterior fit with
    divergent transitions gets a warning and a note (`divergent_note`)."""
    import time

    flagged = ctx.chains_disagree
    if flagged is not None and flagged[0].size:
        result = _mark_disagreeing(result, *flagged)
    for stage in stages:
        rows = rows_of(result, stage.rows)
        if rows.size == 0:
            continue
        t0 = time.perf_counter()
        ctx.result = result
        est = stage.estimator(ctx, rows)
        if len(est.rows) == 0 and not est.notes:  # a stage with nothing to change
            continue
        accept = None if stage.accept == "all" else est.reliable
        result = result.merge(est, accept=accept)
        if result.history:
            result.history[-1]["seconds"] = time.perf_counter() - t0
    if flagged is not None and flagged[0].size:
        result = _mark_disagreeing(result, *flagged)
        _warn_disagreeing(flagged[0], flagged[1], ctx.var_name, result.reliable)
    note = divergent_note(getattr(ctx, "draws", None))
    if note:
        import dataclasses
        import warnings

        warnings.warn(note, UserWarning, stacklevel=3)
        result = dataclasses.replace(result, notes=list(result.notes) + [note])
    return result
