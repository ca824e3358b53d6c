"""R loo's Pareto-k diagnostics for every row, whatever estimator produced it.

* :func:`pareto_k_table` - counts, percentages and the smallest ESS per k-hat bin (R loo's
  ``pareto_k_table``), with one more bin per estimator that has no k-hat (MixIS, refits,
  k-fold), so every observation is counted once and percentages add up to 100.
* :func:`pareto_k_ids` - 0-based indices of the observations whose k-hat is above the
  threshold (R loo's ``pareto_k_ids``, 1-based there).
* :func:`mcse_loo` - the Monte Carlo SE of elpd_loo, NaN when a row is not shown reliable
  (R loo's ``mcse_loo``: NA when a k-hat is above the threshold).
* :func:`format_estimates` - the "Computed from S by n ..." block with one rounding, shared by
  ``print(res)`` and ``res.summary()``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from loo_adapt.result import PointwiseLoo

__all__ = ["ParetoKTable", "pareto_k_table", "pareto_k_ids", "mcse_loo", "reported_khat",
           "format_estimates", "format_loo", "NO_KHAT_LABELS"]

#: Estimators whose rows have no Pareto k-hat of their own, and how the table names them.
NO_KHAT_LABELS = {"mixis": "MixIS", "refit": "refit", "kfold": "k-fold"}

_SCALE_FACTOR = {"log": 1.0, "negative_log": -1.0, "deviance": -2.0}
_SCALE_LABEL = {"log": "elpd_{}", "negative_log": "-elpd_{}", "deviance": "{}ic"}


def _pointwise(result) -> PointwiseLoo:
    if isinstance(result, PointwiseLoo):
        return result
    inner = getattr(result, "loo_adapt", None)
    if isinstance(inner, PointwiseLoo):
        return inner
    raise TypeError("expected the ELPDData returned by loo_adapt.loo / kfold or a "
                    f"loo_adapt.PointwiseLoo, got {type(result).__name__}")


def reported_khat(result) -> np.ndarray:
    """k-hat of the estimator that produced each row; NaN where it has none.

    Parameters
    ----------
    result : a `PointwiseLoo` or the ELPDData of `loo_adapt.loo`.

    Returns
    -------
    ndarray (n,)
        ``pareto_k_after`` (plain PSIS's k-hat for PSIS rows, the held-out k-hat of an
        adapted row, PSIS's for MixIS pooled with PSIS); NaN for MixIS and refit rows.

    Examples
    --------
    >>> res = PointwiseLoo(*(np.zeros(2),) * 4, np.array([0.2, 0.9]), 0.7, 100, 1.0,
    ...                    method=np.array(["psis", "mixis"]))
    >>> reported_khat(res).tolist()
    [0.2, nan]
    """
    res = _pointwise(result)
    method = np.asarray(res.method).astype(str)
    after = np.asarray(res.pareto_k_after, dtype=float)
    k = np.where(np.isnan(after), np.asarray(res.pareto_k, dtype=float), after)
    return np.where(np.isin(method, tuple(NO_KHAT_LABELS)), np.nan, k)


#: the title of a Pareto-k table (R loo's)
_DEFAULT_TITLE = "Pareto k diagnostic values:"


@dataclasses.dataclass(frozen=True)
class ParetoKTable:
    """Rows of a Pareto-k table (R loo's ``pareto_k_table``), printed as R loo prints it.

    Attributes
    ----------
    labels : interval of each row ("(-Inf, 0.70]", "(0.70, 1]", "(1, Inf)", then
        "no k-hat" rows).
    kinds : "(good)", "(bad)", "(very bad)", or the estimator of a no-k-hat row ("(MixIS)").
    counts : observations per row (they add up to n).
    proportions : counts / n.
    min_ess : smallest ESS of the row's estimator in the row (R: of the PSIS weights, NA
        above the threshold); NaN where unknown; None for a table without the column.
    threshold : the k-hat threshold.
    """

    labels: tuple
    kinds: tuple
    counts: np.ndarray
    proportions: np.ndarray
    min_ess: np.ndarray | None
    threshold: float

    @property
    def n(self) -> int:
        return int(np.sum(self.counts))

    def as_dict(self) -> dict:
        """{label kind: (count, proportion, min ESS)}."""
        ess = self.min_ess if self.min_ess is not None else np.full(len(self.labels), np.nan)
        return {f"{a} {b}": (int(c), float(p), float(e))
                for a, b, c, p, e in zip(self.labels, self.kinds, self.counts,
                                         self.proportions, ess)}

    def all_good(self) -> bool:
        """Every row in the good bin (R prints one line then)."""
        return int(self.counts[0]) == self.n

    def format(self, title: str = _DEFAULT_TITLE, digits: int = 1) -> str:
        """The table as R loo's ``print.pareto_k_table`` lays it out.

        Parameters
        ----------
        title : first line.
        digits : decimals of the percentages.

        Returns
        -------
        str
        """
        if self.all_good():
            if not self.n:
                return "No observations."
            good = f"Pareto k estimates are good (k <= {self.threshold:.2f})."
            if title == _DEFAULT_TITLE:
                return "All " + good  # R's one line
            # under its own title: a table of plain PSIS before the other estimators must
            # not read as the final one
            return f"{title} all {good}"
        lab_w = max(len(x) for x in self.labels)
        kind_w = max(len(x) for x in self.kinds)
        head = f"{'':{lab_w}s}  {'':{kind_w}s} {'Count':>6s} {'Pct.':>{digits + 5}s}"
        if self.min_ess is not None:
            head += f" {'Min. ESS':>9s}"
        lines = [title, head]
        for j, (lab, kind) in enumerate(zip(self.labels, self.kinds)):
            row = (f"{lab:>{lab_w}s}  {kind:<{kind_w}s} {int(self.counts[j]):>6d} "
                   f"{100 * self.proportions[j]:>{digits + 4}.{digits}f}%")
            if self.min_ess is not None:
                e = float(self.min_ess[j])
                row += f" {round(e):>9d}" if np.isfinite(e) else f" {'NA':>9s}"
            lines.append(row)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


def _bins(k, thr):
    return [k <= thr, (k > thr) & (k <= 1), k > 1]


def pareto_k_table(result, *, before: bool = False, threshold: float | None = None
                   ) -> ParetoKTable:
    """Counts of observations per Pareto k-hat bin, with the smallest ESS per bin.

    Parameters
    ----------
    result : the ELPDData of `loo_adapt.loo` / `loo_adapt.kfold`, or a `PointwiseLoo`.
    before : bin plain PSIS's k-hat of every row (before any other estimator); default the
        k-hat of the estimator that produced each row, with one more row per estimator that
        has none (MixIS, refits).
    threshold : good / bad boundary; default the result's (``good_k``, R loo's
        ``ps_khat_threshold``).

    Returns
    -------
    ParetoKTable
        Every observation is counted in exactly one row.  ``min_ess``: per bin the smallest
        ESS of the row's own weights (PSIS: r_eff / sum(w^2), R loo's ``psis_n_eff``, left
        out above the threshold as R loo does; MixIS and refits: their ESS; none for MixIS
        pooled with PSIS, whose k-hat is PSIS's); None with ``before=True`` once another
        estimator replaced a row.

    Examples
    --------
    >>> res = PointwiseLoo(*(np.zeros(3),) * 4, np.array([0.2, 0.9, 1.3]), 0.7, 100, 1.0,
    ...                    method=np.array(["psis", "psis", "mixis"]),
    ...                    diagnostic=np.array([95.0, 20.0, 310.0]))
    >>> t = pareto_k_table(res)
    >>> t.counts.tolist(), t.min_ess.tolist()
    ([1, 1, 0, 1], [95.0, nan, nan, 310.0])
    >>> pareto_k_table(res, before=True).counts.tolist()
    [1, 1, 1]
    """
    res = _pointwise(result)
    thr = float(res.good_k if threshold is None else threshold)
    n = res.n_obs
    method = np.asarray(res.method).astype(str)
    ess = np.asarray(res.diagnostic, dtype=float)
    labels = [f"(-Inf, {thr:.2f}]", f"({thr:.2f}, 1]", "(1, Inf)"]
    kinds = ["(good)", "(bad)", "(very bad)"]
    if before:
        k = np.asarray(res.pareto_k, dtype=float)
        masks = _bins(k, thr)
        if np.any(np.isnan(k)):
            labels.append("no k-hat")
            kinds.append("(Pareto fit failed)")
            masks.append(np.isnan(k))
        counts = np.array([int(m.sum()) for m in masks])
        min_ess = None
        if np.all(method == "psis"):
            min_ess = np.array([_min(ess[m & (k <= thr)]) for m in masks])
        return ParetoKTable(tuple(labels), tuple(kinds), counts, counts / max(n, 1), min_ess,
                            thr)
    k = reported_khat(res)
    masks = _bins(k, thr)
    # R: NA above the threshold; a pooled row's k-hat is PSIS's but its ESS MixIS's (the
    # ESS of other weights than the k-hat's), so it gives the k-hat bins no ESS
    same_weights = ~np.char.startswith(method, "mixis")
    ess_masks = [m & (k <= thr) & same_weights for m in masks]
    for name in dict.fromkeys(method[np.isnan(k)]):
        sel = np.isnan(k) & (method == name)
        labels.append("no k-hat")
        kinds.append(f"({NO_KHAT_LABELS.get(name, name)})")
        masks.append(sel)
        ess_masks.append(sel)
    counts = np.array([int(m.sum()) for m in masks])
    min_ess = np.array([_min(ess[m]) for m in ess_masks])
    return ParetoKTable(tuple(labels), tuple(kinds), counts, counts / max(n, 1), min_ess, thr)


def _min(values) -> float:
    values = values[np.isfinite(values)]
    return float(values.min()) if values.size else float("nan")


def pareto_k_ids(result, threshold: float | None = None, *, before: bool = False
                 ) -> np.ndarray:
    """0-based indices of the observations whose k-hat is above ``threshold``.

    Parameters
    ----------
    result : the ELPDData of `loo_adapt.loo` or a `PointwiseLoo`; an ELPDData of arviz's own
        (its ``pareto_k``) or an array of k-hat also works.
    threshold : default the result's ``good_k`` (R loo's ``ps_khat_threshold``); 0.7 for a
        bare array.
    before : plain PSIS's k-hat instead of the k-hat of the estimator that produced each row
        (rows without one, MixIS and refits, are never listed then).

    Returns
    -------
    ndarray of int
        R loo's ``pareto_k_ids`` minus one (Python counts from 0; Stan's ``log_lik[i + 1]``).

    Examples
    --------
    >>> res = PointwiseLoo(*(np.zeros(3),) * 4, np.array([0.2, 0.9, 1.3]), 0.7, 100, 1.0,
    ...                    method=np.array(["psis", "psis", "mixis"]))
    >>> pareto_k_ids(res).tolist(), pareto_k_ids(res, before=True).tolist()
    ([1], [1, 2])
    """
    try:
        res = _pointwise(result)
    except TypeError:
        index = getattr(result, "index", None)
        if index is not None and not callable(index) and "pareto_k" in index:  # arviz 0.x
            k, good = result["pareto_k"], result["good_k"] if "good_k" in index else None
        elif getattr(result, "pareto_k", None) is not None:  # arviz 1.x
            k, good = result.pareto_k, getattr(result, "good_k", None)
        else:
            k, good = result, None
        k = np.asarray(getattr(k, "values", k), dtype=float).ravel()
        thr = float(threshold if threshold is not None else (0.7 if good is None else good))
        return np.flatnonzero(k > thr)
    thr = float(res.good_k if threshold is None else threshold)
    k = np.asarray(res.pareto_k, dtype=float) if before else reported_khat(res)
    return np.flatnonzero(k > thr)


def mcse_loo(result, threshold: float | None = None) -> float:
    """Monte Carlo SE of elpd_loo; NaN when some row's estimate is not shown reliable.

    R loo's ``mcse_loo`` returns NA when a k-hat is above the threshold: the MCSE says
    nothing about the bias of those rows.  Here a row counts when its own estimator's check
    fails (k-hat above ``threshold`` for importance sampling, the MCSE bound for MixIS, a
    refit that did not converge).

    Parameters
    ----------
    result : the ELPDData of `loo_adapt.loo` or a `PointwiseLoo`.
    threshold : k-hat threshold for the rows that have a k-hat; default the result's.

    Returns
    -------
    float
        sqrt(sum mcse_elpd_i^2), or the total's MCSE when the estimator knows it (MixIS rows
        share one sample), as ``res.loo_adapt.estimates()["mcse_elpd_loo"]``; NaN as above.

    Examples
    --------
    >>> res = PointwiseLoo(*(np.zeros(2),) * 3, np.array([0.3, 0.4]), np.array([0.2, 0.5]),
    ...                    0.7, 100, 1.0)
    >>> round(mcse_loo(res), 3), mcse_loo(res, threshold=0.4)
    (0.5, nan)
    """
    res = _pointwise(result)
    k = reported_khat(res)
    has_k = np.isfinite(k)
    if threshold is None:
        bad = np.asarray(res.unreliable, dtype=bool)
    else:
        bad = np.where(has_k, k > float(threshold), np.asarray(res.unreliable, dtype=bool))
    if np.any(bad):
        return float("nan")
    return float(res.estimates()["mcse_elpd_loo"])


def format_estimates(result, scale: str = "log", *, kind: str = "loo",
                     n_folds: int | None = None, digits: int = 1) -> list[str]:
    """The header and estimates block of R loo's ``print.loo``, one rounding for all.

    Parameters
    ----------
    result : a `PointwiseLoo` (or the ELPDData of `loo_adapt.loo`).
    scale : "log", "negative_log" or "deviance".
    kind : "loo" or "kfold" (R loo's ``elpd_kfold``, ``p_kfold``, ``kfoldic``).
    n_folds : K of a k-fold result (its header).
    digits : decimals of every estimate and SE.

    Returns
    -------
    list of str
        Lines: header, blank, "Estimate SE", elpd, p, ic (no ic row on the deviance scale,
        whose first row is the ic).

    Examples
    --------
    >>> res = PointwiseLoo(*(np.array([-1.0, -2.0]),) * 4, np.zeros(2), 0.7, 100, 1.0)
    >>> format_estimates(res)[3]
    'elpd_loo      -3.0    1.0'
    """
    res = _pointwise(result)
    est = res.estimates()
    factor = _SCALE_FACTOR[scale]
    if kind == "kfold":
        head = (f"Based on {n_folds}-fold cross-validation." if n_folds else
                "Based on K-fold cross-validation.")
    else:
        head = f"Computed from {res.n_samples} by {res.n_obs} log-likelihood matrix."
    first = _SCALE_LABEL[scale].format(kind)
    rows = [(first, factor * est["elpd_loo"], abs(factor) * est["se_elpd_loo"]),
            (f"p_{kind}", est["p_loo"], est["se_p_loo"])]
    if scale != "deviance":
        rows.append((f"{kind}ic", est["looic"], est["se_looic"]))
    width = max(10, max(len(r[0]) for r in rows) + 1)
    # R's layout (widths 8 and 7) for the usual sizes; wider columns, always a space
    # apart, when the numbers need them (large n, or a degenerate fit)
    values = [f"{v:.{digits}f}" for _, v, _ in rows]
    ses = [f"{se:.{digits}f}" if np.isfinite(se) else "NA" for _, _, se in rows]
    w_val = max(8, max(len(v) for v in values) + 1)
    w_se = max(7, max(len(v) for v in ses) + 1)
    lines = [head, "", f"{'':{width}s}{'Estimate':>{w_val}s}{'SE':>{w_se}s}"]
    for (name, _, _), value, se in zip(rows, values, ses):
        lines.append(f"{name:{width}s}{value:>{w_val}s}{se:>{w_se}s}")
    return lines


def format_loo(result, scale: str = "log", *, kind: str = "loo",
               n_folds: int | None = None) -> str:
    """What ``print(res)`` shows: R loo's ``print.psis_loo`` layout for every row.

    The estimates (one decimal, SE with the n - 1 variance), the MCSE of elpd_loo, and the
    Pareto-k table of the estimator that produced each row (`pareto_k_table`: rows without a
    k-hat, MixIS and refits, in their own bins, so nothing is left out).  A k-fold result
    prints ``elpd_kfold``, ``p_kfold``, ``kfoldic`` (R loo's ``print.kfold``) and no k table.

    Parameters
    ----------
    result : a `PointwiseLoo` or the ELPDData of `loo_adapt.loo`.
    scale : "log", "negative_log" or "deviance".
    kind : "loo" or "kfold".
    n_folds : K of a k-fold result.

    Returns
    -------
    str

    Examples
    --------
    >>> res = PointwiseLoo(*(np.zeros(3),) * 4, np.array([0.2, 0.3, 0.1]), 0.7, 100, 1.0)
    >>> format_loo(res).splitlines()[-1]
    'All Pareto k estimates are good (k <= 0.70).'
    """
    from loo_adapt.core.psis import pareto_k_threshold

    res = _pointwise(result)
    lines = format_estimates(res, scale, kind=kind, n_folds=n_folds)
    if kind == "kfold":
        bad = int(np.sum(res.unreliable))
        if bad:
            lines.append(f"------\n{bad} observation{'s are' if bad > 1 else ' is'} in folds "
                         "whose refit failed its convergence checks (.loo_adapt.reason).")
        return "\n".join(lines)
    lines.append("------")
    est = res.estimates()
    n_bad = int(np.sum(res.unreliable))
    note = ""
    if n_bad:
        # R loo prints NA here; the number over the reliable part is still worth seeing
        note = (f" (excluding the bias of {n_bad} unreliable observation"
                f"{'s' if n_bad > 1 else ''}, which it does not measure)")
    lines.append(f"MCSE of elpd_loo is {est['mcse_elpd_loo']:.2f}{note}.")
    r_eff = np.asarray(res.r_eff, dtype=float)
    origin = str(getattr(res, "draws_method", "mcmc"))
    if origin not in ("mcmc", "other"):
        k_pq = float(getattr(res, "pareto_k_pq", float("nan")))
        good = k_pq <= pareto_k_threshold(int(res.n_samples))
        lines.append(f"Draws of an approximation ({origin}), not of the posterior: every "
                     f"importance ratio includes p/q. Pareto k-hat of p/q: {k_pq:.2f} "
                     f"({'good' if good else 'poor'}; as R loo's loo_approximate_posterior).")
    elif np.any(np.isfinite(r_eff)):
        lines.append(f"MCSE and ESS estimates assume MCMC draws (r_eff in "
                     f"[{np.nanmin(r_eff):.1f}, {np.nanmax(r_eff):.1f}]).")
    lines.append("")
    lines.append(pareto_k_table(res).format())
    if n_bad:
        lines.append(f"{n_bad} observation{'s are' if n_bad > 1 else ' is'} not shown reliable; "
                     ".summary() names each and the check it failed.")
    return "\n".join(lines)
