"""The immutable estimate every estimator returns: `Estimate` (per asked row: elpd_loo, its
Monte Carlo SE, the LOO probability, the estimator's diagnostic, whether it is shown reliable,
what showed it and, where not, why) and `RowDraws` (the draws and weights one row's estimate
uses, for LOO-PIT and expectations).  `loo_adapt.result.PointwiseLoo.merge` is the only
writer of the per-observation result; `loo_adapt.estimators.base` holds the fold over stages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from loo_adapt.core._names import add_deprecated_aliases

__all__ = ["Estimate", "RowDraws", "frozen"]


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
