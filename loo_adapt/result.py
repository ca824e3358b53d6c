"""Array-level LOO results: what the estimators produce before anything arviz-shaped is built.

`PointwiseLoo` is the one object the edges (evaluation.arviz, metrics, plots, report, cli)
read.  Every field is a numpy array of length n (observations) unless stated otherwise.
`PointwiseLoo.merge(estimate)` is the only writer: it returns a new result with the
estimate's rows written and the history of every row recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

import numpy as np

from loo_adapt.core._names import add_deprecated_aliases
from loo_adapt.core.fmt import comparison

#: Names used in ``PointwiseLoo.method`` for the estimator that produced an observation.
ESTIMATORS = ("psis", "kl", "var", "ll", "mm1", "mm2", "mm", "mixis", "mixis+psis", "refit")

#: ``verified_by`` values and what they mean for a row.  Only `BIAS_CHECKS` can see a bias:
#: a Pareto k-hat below the threshold says the importance ratios have a finite variance,
#: not that the draws (or the model behind them) are right.
PROVENANCE = {
    "khat": "PSIS, k-hat below the threshold; not checked for bias",
    "certified": "adapted IS, passed the bias checks",
    "mixis_mcse": "MixIS (or MixIS pooled with PSIS), MCSE small enough",
    "refit": "exact refit",
    "": "not verified",
}
BIAS_CHECKS = ("certified", "mixis_mcse", "refit")


@add_deprecated_aliases
@dataclass
class PointwiseLoo:
    """Pointwise leave-one-out results.

    Per-observation quantities carry the suffix ``_i`` where a total of the same name exists
    (``elpd_i`` per row, ``elpd_loo`` the total of `estimates`), as arviz 1.x's ``elpd_i``;
    ``pareto_k`` and ``good_k`` are arviz's names.

    Parameters
    ----------
    elpd_i : log LOO predictive density of each observation.
    p_loo_i : lpd_i - elpd_i, the effective number of parameters per observation.
    lpd_i : log of the full-posterior mean likelihood of each observation.
    mcse_elpd_i : Monte Carlo standard error of elpd_i (NaN where unknown).
    pareto_k : Pareto k-hat of plain PSIS (before any adaptation), as arviz's ``pareto_k``.
    pareto_k_after : k-hat of the estimator finally used (equal to ``pareto_k`` for PSIS; for a
        selected transform it is computed on draws that did not select it when
        ``selection="split"``; NaN for refits and MixIS, whose own diagnostic is in
        ``diagnostic``; PSIS's k-hat for MixIS pooled with PSIS, "mixis+psis").
    method : name of the estimator per observation (one of ``ESTIMATORS``).
    rho : step-size parameter of the chosen transform (NaN when none).
    loo_prob : LOO predictive probability P(y_i = 1 | y_-i) for binary outcomes (NaN otherwise).
    good_k : sample-size dependent k-hat threshold min(1 - 1/log10(S), 0.7).
    n_samples : number of posterior draws S.
    r_eff : relative efficiency used for each observation.
    y : observed outcomes when known (binary models), else None.
    diagnostic : optional per-observation diagnostic of the final estimator
        (e.g. ESS of the MixIS weights), NaN where not applicable.
    candidates : optional list of dicts, one per tried (observation, transform, rho),
        with keys i, transform, rho, khat, elpd_loo, loo_prob.
    notes : what the estimators found worth saying that is not a failure of a row (e.g.
        MixIS not pooled with PSIS, and why); ``summary()`` prints them.
    reliable : per observation, whether the final estimator's own diagnostic shows it
        reliable (k-hat at most the threshold for importance sampling, MCSE at most the
        accepted bound for MixIS, always for an exact refit).  Derived from ``pareto_k_after``
        when not given.
    mcse_total : Monte Carlo SE of the total elpd_loo where rows share a fit's draws (their
        errors are correlated): the variances of the sums over each fit's rows still held
        (``mcse_blocks``) plus the other rows' pointwise ones, recomputed at every merge;
        None where no estimator said how its rows' errors are shared (the pointwise MCSEs
        are then added in quadrature, as R loo does).  `estimates` reports the larger of it
        and the quadrature sum.
    mcse_blocks : ``(rows, block)`` per fit whose rows share draws (`Estimate.sum_mcse`);
        ``row_block[i]`` is the index of the block row i's estimate comes from (-1: none).
        Neither is written to results.json (``mcse_total`` is).
    verified_by : per observation, what showed the final estimate reliable: "khat" (PSIS or
        a transform whose held-out k-hat is below the threshold and which passed the
        certification), "certified", "mixis_mcse", "refit"; "" where nothing did.
    reason : per observation, why the final estimate is not shown reliable ("" where it is).
    history : one record per merged estimate: estimator, rows, accepted mask, elpd_loo,
        its MCSE, reliable and reason of each row it returned (see `row_history`), and
        ``new_record``: whether it gave the row a draws record of its own (a stage that
        corrects or re-judges earlier estimates passes the rows' records on).
    draws_method : origin of the draws ("mcmc", "advi", "laplace", "pathfinder", ...).
    row_draws : per observation the `loo_adapt.estimators.estimate.RowDraws` of the estimator
        that produced the row (its draws and final weights; None for plain PSIS rows, whose
        weights are the posterior PSIS weights, and for estimators that keep none).
    pareto_k_pq : for draws of an approximation q, the Pareto k-hat of p/q (how well q stands in
        for the posterior, as R loo's ``loo_approximate_posterior`` reports); NaN for MCMC.

    Examples
    --------
    >>> res = PointwiseLoo(*(np.array([-1.0, -2.0]),) * 4, np.array([0.2, 0.9]), 0.7, 100,
    ...                    np.ones(2))
    >>> res.reliable.tolist(), res.n_obs
    ([True, False], 2)
    """

    elpd_i: np.ndarray
    p_loo_i: np.ndarray
    lpd_i: np.ndarray
    mcse_elpd_i: np.ndarray
    pareto_k: np.ndarray
    good_k: float
    n_samples: int
    r_eff: np.ndarray
    pareto_k_after: np.ndarray | None = None
    method: np.ndarray | None = None
    rho: np.ndarray | None = None
    loo_prob: np.ndarray | None = None
    y: np.ndarray | None = None
    diagnostic: np.ndarray | None = None
    candidates: list[dict] = field(default_factory=list)
    reliable: np.ndarray | None = None
    mcse_total: float | None = None
    verified_by: np.ndarray | None = None
    reason: np.ndarray | None = None
    history: list[dict] = field(default_factory=list)
    draws_method: str = "mcmc"
    pareto_k_pq: float = float("nan")
    row_draws: list | None = None
    notes: list = field(default_factory=list)
    mcse_blocks: list = field(default_factory=list)
    row_block: np.ndarray | None = None
    block_notes: list = field(default_factory=list)

    def __post_init__(self):
        n = len(self.elpd_i)
        if self.row_draws is None:
            self.row_draws = [None] * n
        if self.row_block is None:
            self.row_block = np.full(n, -1, dtype=np.int64)
        if self.pareto_k_after is None:
            self.pareto_k_after = np.array(self.pareto_k, dtype=float, copy=True)
        if self.method is None:
            self.method = np.full(n, "psis", dtype=object)
        if self.rho is None:
            self.rho = np.full(n, np.nan)
        if self.loo_prob is None:
            self.loo_prob = np.full(n, np.nan)
        if self.diagnostic is None:
            self.diagnostic = np.full(n, np.nan)
        if self.reliable is None:
            self.reliable = np.asarray(self.pareto_k_after, dtype=float) <= self.good_k
        self.reliable = np.asarray(self.reliable, dtype=bool).copy()
        if self.verified_by is None:
            self.verified_by = np.where(self.reliable, "khat", "").astype(object)
        if self.reason is None:
            self.reason = np.array(
                ["" if ok else comparison("k-hat", k, ">", self.good_k)
                 for ok, k in zip(self.reliable, np.asarray(self.pareto_k_after, dtype=float))],
                dtype=object)
        self.method = np.asarray(self.method, dtype=object)
        self.verified_by = np.asarray(self.verified_by, dtype=object)
        self.reason = np.asarray(self.reason, dtype=object)
        self.r_eff = np.broadcast_to(np.asarray(self.r_eff, dtype=float), (n,)).copy()
        for name in ("p_loo_i", "lpd_i", "mcse_elpd_i", "pareto_k", "pareto_k_after", "method",
                     "rho", "loo_prob", "diagnostic", "reliable", "verified_by", "reason",
                     "row_draws"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} has length {len(getattr(self, name))}, expected {n}")

    @property
    def checked_for_bias(self) -> np.ndarray:
        """Per row: accepted, and verified by a check that can see a bias (`BIAS_CHECKS`:
        certification, MixIS MCSE, an exact refit)."""
        return self.reliable & np.isin(self.verified_by.astype(str), BIAS_CHECKS)

    @property
    def khat_only(self) -> np.ndarray:
        """Per row: accepted on the Pareto k-hat alone (not checked for bias)."""
        return self.reliable & ~self.checked_for_bias

    @property
    def provenance(self) -> np.ndarray:
        """Per row, in words, what the estimate rests on (`PROVENANCE`)."""
        vb = np.where(self.reliable, self.verified_by.astype(str), "")
        return np.array([PROVENANCE.get(v, v) for v in vb], dtype=object)

    def merge(self, estimate, accept=None) -> PointwiseLoo:
        """A new result with the rows of ``estimate`` written (the only writer).

        Parameters
        ----------
        estimate : `loo_adapt.estimators.estimate.Estimate`.
        accept : bool array aligned with ``estimate.rows``: which rows to write (default:
            all).  Rows not accepted keep their previous estimate; their ``reason`` gains
            the estimate's reason, and the attempt is recorded in ``history``.

        Returns
        -------
        PointwiseLoo
            For accepted rows every per-row column comes from the estimate (NaN where the
            estimator does not produce it, never the previous estimator's value);
            ``p_loo_i = lpd_i - elpd_i``; ``row_draws`` of an accepted row is the
            estimate's record (None when it keeps none: a previous record never survives).
        """
        rows = np.asarray(estimate.rows, dtype=np.int64)
        if rows.size and (rows.min() < 0 or rows.max() >= self.n_obs):
            raise IndexError(f"estimate rows out of range for {self.n_obs} observations")
        accept = (np.ones(rows.size, dtype=bool) if accept is None
                  else np.asarray(accept, dtype=bool).reshape(rows.size))
        new = {f.name: _copy(getattr(self, f.name)) for f in fields(self)}
        take = rows[accept]
        # a row whose estimate changes leaves its fit's block (an unchanged one, re-judged
        # only, keeps it); the estimate's own blocks then claim their accepted rows
        changed = ~np.equal(np.asarray(estimate.elpd_i)[accept], self.elpd_i[take])
        new["row_block"][take[changed]] = -1
        placed = {}  # the estimate's block k -> its index among the result's blocks
        for k, (pos, block) in enumerate(estimate.sum_mcse):
            held = rows[pos][accept[pos]]
            if held.size:
                new["mcse_blocks"].append((rows[pos], block))
                new["row_block"][held] = len(new["mcse_blocks"]) - 1
                placed[k] = len(new["mcse_blocks"]) - 1
        new["block_notes"].extend((placed[k], text, warn) for k, text, warn
                                  in getattr(estimate, "block_notes", ()) if k in placed)
        for col, src in (("elpd_i", "elpd_i"), ("mcse_elpd_i", "mcse_elpd_i"),
                         ("pareto_k_after", "pareto_k"), ("diagnostic", "diagnostic"),
                         ("loo_prob", "loo_prob"), ("rho", "rho"), ("method", "method"),
                         ("reliable", "reliable"), ("verified_by", "verified_by"),
                         ("reason", "reason")):
            new[col][take] = np.asarray(getattr(estimate, src))[accept]
        records = estimate.row_draws
        # which rows the estimate gave draws of its own (a new record) rather than the draws
        # they held (a stage that re-judges or corrects earlier estimates passes theirs on)
        new_record = np.array([(None if records is None else records[j])
                               is not self.row_draws[r] for j, r in enumerate(rows)],
                              dtype=bool)
        for j in np.flatnonzero(accept):
            new["row_draws"][rows[j]] = None if records is None else records[j]
        skipped = rows[~accept]
        for i, why in zip(skipped, np.asarray(estimate.reason)[~accept]):
            if why:
                new["reason"][i] = add_reason(new["reason"][i], why)
        if estimate.lpd_i is not None and accept.all() and rows.size == self.n_obs:
            new["lpd_i"][rows] = estimate.lpd_i
        if estimate.mcse_total is not None and accept.all() and rows.size == self.n_obs:
            # an estimator that re-judged every row set the total itself (spot checks): it
            # stands for every row, and no block is kept apart
            new["mcse_total"] = float(estimate.mcse_total)
            # the rows stay, their blocks go: the notes about them stay too
            new["notes"] = _with_live_notes(new["notes"], new["block_notes"], new["row_block"])
            new["block_notes"] = []
            new["mcse_blocks"] = []
            new["row_block"][:] = -1
        elif new["mcse_blocks"]:
            new["mcse_total"] = _blocks_total(new["mcse_blocks"], new["row_block"],
                                              new["mcse_elpd_i"])
        new["p_loo_i"] = new["lpd_i"] - new["elpd_i"]
        new["candidates"] = list(self.candidates) + list(estimate.candidates)
        new["notes"] = list(new["notes"]) + [n for n in getattr(estimate, "notes", ())
                                             if n not in new["notes"]]
        new["history"] = list(self.history) + [dict(
            estimator=estimate.estimator, rows=rows, accepted=accept, new_record=new_record,
            elpd_i=np.asarray(estimate.elpd_i), mcse_elpd_i=np.asarray(estimate.mcse_elpd_i),
            reliable=np.asarray(estimate.reliable), reason=np.asarray(estimate.reason))]
        return replace(self, **new)

    def without_mcse_blocks(self) -> PointwiseLoo:
        """This result with its per-fit MCSE blocks dropped (each holds its fit's influence
        values, draws x rows): ``mcse_total``, which they gave, stays, for the rows as they
        stand.  `loo` returns its result so, once no stage will replace rows any more."""
        if not self.mcse_blocks:
            return self
        return replace(self, mcse_blocks=[], row_block=np.full(self.n_obs, -1, dtype=np.int64),
                       notes=self.all_notes(), block_notes=[])

    def all_notes(self) -> list[str]:
        """``notes`` and the texts of the live block notes (`live_block_notes`): what the
        summary prints."""
        return _with_live_notes(self.notes, self.block_notes, self.row_block)

    def live_block_notes(self) -> list[tuple[str, bool]]:
        """The (text, warn) of the block notes whose fit still gives some row's estimate
        (`Estimate.block_notes`); the others were made moot by later stages."""
        return _live(self.block_notes, self.row_block)

    def row_history(self, i: int) -> list[dict]:
        """Every estimate made for observation ``i``, in order: estimator, elpd_i,
        reliable, accepted, reason."""
        out = []
        for rec in self.history:
            hit = np.flatnonzero(rec["rows"] == i)
            if hit.size:
                j = int(hit[0])
                out.append(dict(estimator=rec["estimator"],
                                elpd_i=float(rec["elpd_i"][j]),
                                reliable=bool(rec["reliable"][j]),
                                accepted=bool(rec["accepted"][j]),
                                reason=str(rec["reason"][j])))
        return out

    @property
    def n_obs(self) -> int:
        return len(self.elpd_i)

    @property
    def adapted(self) -> np.ndarray:
        """Observations whose estimate did not come from plain PSIS."""
        return self.method != "psis"

    @property
    def unreliable(self) -> np.ndarray:
        """Observations whose final estimate is not shown to be reliable by its diagnostic."""
        return ~self.reliable

    def estimates(self) -> dict[str, float]:
        """Totals with standard errors as R loo computes them (SE with the n-1 variance)."""
        from loo_adapt.core.psis_loo import loo_totals

        return loo_totals(self.elpd_i, self.p_loo_i, self.mcse_elpd_i, self.mcse_total)


def _live(block_notes, row_block) -> list[tuple[str, bool]]:
    """(text, warn) of the block notes whose block still holds a row."""
    held = set(np.unique(row_block[row_block >= 0]).tolist())
    return [(text, warn) for b, text, warn in block_notes if b in held]


def _with_live_notes(notes, block_notes, row_block) -> list:
    """``notes`` with the live block notes added (each once)."""
    out = list(notes)
    out += [t for t, _ in _live(block_notes, row_block) if t not in out]
    return out


def _blocks_total(blocks, row_block, mcse_i) -> float:
    """MCSE of the total: each block's sum over the rows still held from it, the other rows'
    pointwise MCSEs in quadrature (NaN counts as 0), the variances added (the fits are
    independent)."""
    var = 0.0
    for b, (rows, block) in enumerate(blocks):
        held = row_block[rows] == b
        if held.any():
            var += float(block(held)) ** 2
    rest = row_block < 0
    var += float(np.nansum(np.asarray(mcse_i, dtype=float)[rest] ** 2))
    return float(np.sqrt(var))


def _copy(value):
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, list):
        return list(value)
    return value


def add_reason(old: str, why: str) -> str:
    """A row's reason with ``why`` added after what it already says ("; " between them).

    Examples
    --------
    >>> add_reason("MixIS MCSE 0.12 > 0.10", "refit budget: not refitted")
    'MixIS MCSE 0.12 > 0.10; refit budget: not refitted'
    >>> add_reason("", "refit failed: NaN")
    'refit failed: NaN'
    """
    return f"{old}; {why}" if old and why else (old or why)


def observation_label(rows, var_name: str = "log_lik", limit: int | None = 10) -> str:
    """Observations as 0-based indices with Stan's 1-based index of ``var_name`` beside them.

    The one way messages, warnings and reports name observations.

    Parameters
    ----------
    rows : one 0-based observation index or a sequence of them.
    var_name : the Stan variable of the pointwise log-likelihood.
    limit : at most this many are listed, then how many more there are (None: all).

    Returns
    -------
    str

    Examples
    --------
    >>> observation_label(3)
    '3 (log_lik[4])'
    >>> observation_label([0, 5, 9], var_name="ll", limit=2)
    '0 (ll[1]), 5 (ll[6]), ... (1 more)'
    """
    rows = [int(i) for i in np.atleast_1d(rows)]
    shown = rows if limit is None else rows[:limit]
    text = ", ".join(f"{i} ({var_name}[{i + 1}])" for i in shown)
    return text + (f", ... ({len(rows) - len(shown)} more)" if len(rows) > len(shown) else "")
