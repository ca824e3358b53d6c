"""Printed summaries in the style of R loo's print method.

* :func:`format_summary` - estimates with SE, MCSE, the Pareto-k table before and after
  adaptation, counts per estimator, and the observations that still need a refit.
* :func:`format_pointwise` - one line per observation: estimator, k-hat before / after (or
  the MixIS / refit diagnostic), elpd_loo_i, MCSE, LOO probability.
* :func:`unreliable_reasons` - why each unreliable observation is not shown reliable.
"""

from __future__ import annotations

import numpy as np

from loo_adapt.core.fmt import comparison
from loo_adapt.result import PointwiseLoo

__all__ = ["format_summary", "format_pointwise", "khat_counts", "as_pointwise",
           "unreliable_reasons", "POINTWISE_LEGEND", "NO_KHAT"]

_SCALE_FACTOR = {"log": 1.0, "negative_log": -1.0, "deviance": -2.0}

#: Estimators without a Pareto k-hat of their own (their diagnostic is an ESS).
NO_KHAT = ("mixis", "refit")


# --------------------------------------------------------------------------- inputs
def as_pointwise(result) -> PointwiseLoo:
    """The `PointwiseLoo` of an ELPDData from `loo_adapt.loo`, or the PointwiseLoo itself.

    Parameters
    ----------
    result : a `PointwiseLoo`, or the ELPDData returned by `loo_adapt.loo` (its
        ``loo_adapt`` attribute).

    Returns
    -------
    PointwiseLoo

    Examples
    --------
    >>> from loo_adapt.result import PointwiseLoo
    >>> res = PointwiseLoo(*(np.zeros(2),) * 4, np.array([0.2, 0.9]), 0.7, 100, 1.0)
    >>> as_pointwise(res) is res
    True
    """
    if isinstance(result, PointwiseLoo):
        return result
    inner = getattr(result, "loo_adapt", None)
    if isinstance(inner, PointwiseLoo):
        return inner
    if result is None or inner is None and hasattr(result, "loo_adapt"):
        raise ValueError("no loo_adapt result attached to this object")
    raise TypeError(
        "expected the ELPDData returned by loo_adapt.loo or a loo_adapt.PointwiseLoo, got "
        f"{type(result).__name__} (a plain arviz ELPDData has no per-observation estimators)"
    )


def _scale_of(result, scale):
    if scale is not None:
        return scale
    for get in (lambda r: r["scale"], lambda r: r.scale):
        try:
            value = get(result)
        except (KeyError, AttributeError, TypeError, IndexError):
            continue
        if isinstance(value, str) and value in _SCALE_FACTOR:
            return value
    return "log"


# --------------------------------------------------------------------------- summary
def khat_counts(khat, threshold: float) -> np.ndarray:
    """Counts of finite k-hat in (-inf, threshold], (threshold, 1], (1, inf).

    Parameters
    ----------
    khat : array of k-hat values (non-finite ones are not counted).
    threshold : the good / bad boundary.

    Returns
    -------
    ndarray of 3 ints

    Examples
    --------
    >>> khat_counts(np.array([0.1, 0.5, 0.8, 1.2, np.nan]), 0.7)
    array([2, 1, 1])
    """
    k = np.asarray(khat, dtype=float)
    k = k[~np.isnan(k)]
    return np.array([np.sum(k <= threshold), np.sum((k > threshold) & (k <= 1)),
                     np.sum(k > 1)], dtype=int)


def _fmt(x, spec: str, width: int) -> str:
    x = float(x)
    return f"{'NA':>{width}s}" if not np.isfinite(x) else f"{x:>{width}{spec}}"


def format_summary(result, scale: str = "log") -> str:
    """R-loo-style summary of a `PointwiseLoo` (or the ELPDData from `loo_adapt.loo`).

    What ``print(res)`` shows (`loo_adapt.evaluation.diagnostics.format_loo`: totals with
    standard errors (n - 1 variance, as R loo), the MCSE of elpd_loo, the Pareto-k table of
    the estimator that produced each row with R loo's Min. ESS column, MixIS and refits in
    their own bins), then plain PSIS's k table when another estimator replaced a row, the
    number of observations per estimator, what verified them, and the observations whose
    estimate is still unreliable with the check each failed.

    Parameters
    ----------
    result : a `PointwiseLoo` or ELPDData from `loo_adapt.loo`.
    scale : "log" (elpd), "negative_log" or "deviance" (looic = -2 elpd), as R loo.

    Returns
    -------
    str

    Examples
    --------
    >>> from loo_adapt.result import PointwiseLoo
    >>> pw = PointwiseLoo(*(np.zeros(3),) * 4, np.array([0.2, 0.9, 0.1]), 0.7, 100, 1.0)
    >>> text = format_summary(pw)
    >>> text.splitlines()[0]
    'Computed from 100 by 3 log-likelihood matrix.'
    """
    if result is None:
        raise ValueError("no loo_adapt result attached to this object")
    result = as_pointwise(result)
    if scale not in _SCALE_FACTOR:
        raise ValueError(f"scale must be one of {sorted(_SCALE_FACTOR)}, got {scale!r}")
    from loo_adapt.evaluation.diagnostics import format_loo, pareto_k_table

    lines = format_loo(result, scale).splitlines()
    if np.any(result.unreliable):
        lines.pop()  # the pointer to this summary: the list is below
    method = np.asarray(result.method).astype(str)
    if np.any(method != "psis"):
        lines.append("")
        lines.append(pareto_k_table(result, before=True).format(
            "Plain PSIS on the posterior draws, before the other estimators:"))
    lines.append("")

    names, counts = np.unique(method, return_counts=True)
    order = np.argsort(-counts, kind="stable")
    parts = []
    for j in order:
        sel = method == names[j]
        ok = int(np.sum(result.reliable[sel]))
        parts.append(f"{names[j]} {counts[j]}" + ("" if ok == counts[j] else f" ({ok} reliable)"))
    lines.append("Estimator per observation: " + ", ".join(parts)
                 + (" (mixis+psis: MixIS pooled with PSIS, two independent samples)"
                    if "mixis+psis" in names else ""))
    verified = getattr(result, "verified_by", None)
    if verified is not None:
        checked = result.checked_for_bias
        kinds, counts = np.unique(np.asarray(verified[checked], dtype=str), return_counts=True)
        n_khat = int(np.sum(result.khat_only))
        lines.append(
            "Verified (by a check that can see bias): "
            + (", ".join(f"{k} {c}" for k, c in zip(kinds, counts)) or "none")
            + f"; accepted on k-hat alone (not checked for bias): {n_khat}"
            + f"; not verified: {int(np.sum(result.unreliable))}")
        lines.append("  (certified: adapted and passed the bias checks; mixis_mcse: MixIS (or "
                     "pooled) MCSE small enough, from the mixture fit's own draws: it cannot "
                     "see a region every chain of that fit missed; refit: exact refit)")
    for note in result.all_notes():
        lines.append(f"Note: {note}.")
    lines.extend(_unreliable_lines(result))
    return "\n".join(lines)


def unreliable_reasons(result) -> dict[int, str]:
    """Why each unreliable observation is not shown reliable, keyed by 0-based index.

    The estimator's own failed check: its k-hat above the threshold (importance sampling),
    its MCSE and ESS (MixIS), or the reason a refit or check recorded (a ``reason`` field
    of the result, when present, takes precedence).

    Parameters
    ----------
    result : a `PointwiseLoo` or the ELPDData from `loo_adapt.loo`.

    Returns
    -------
    dict
        {i: reason} for every unreliable observation, in index order.

    Examples
    --------
    >>> import numpy as np
    >>> from loo_adapt.result import PointwiseLoo, observation_label
    >>> res = PointwiseLoo(*(np.zeros(2),) * 4, np.array([0.2, 0.9]), 0.7, 100, 1.0)
    >>> unreliable_reasons(res)
    {1: 'psis: k-hat 0.90 > 0.70'}
    """
    res = as_pointwise(result)
    recorded = getattr(res, "reason", None)
    thr = float(res.good_k)
    out = {}
    for i in np.flatnonzero(res.unreliable):
        m = str(res.method[i])
        given = None if recorded is None else recorded[i]
        if isinstance(given, str) and given:
            out[int(i)] = f"{m}: {given}"
            continue
        k = float(res.pareto_k_after[i])
        if m not in NO_KHAT and np.isfinite(k):
            out[int(i)] = f"{m}: " + comparison("k-hat", k, ">", thr)
        elif m not in NO_KHAT and np.isnan(k):
            out[int(i)] = f"{m}: no k-hat (the Pareto fit failed)"
        elif m not in NO_KHAT:
            out[int(i)] = f"{m}: " + comparison("k-hat", k, ">", thr)
        else:
            ess = float(res.diagnostic[i])
            mcse = float(res.mcse_elpd_i[i])
            what = "not verified" if m == "refit" else "MCSE above the accepted bound"
            ess_txt = f", ESS {ess:.1f}" if np.isfinite(ess) else ""
            out[int(i)] = f"{m}: {what} (MCSE {mcse:.2f}{ess_txt})"
    return out


def _unreliable_lines(result: PointwiseLoo, shown: int = 20) -> list[str]:
    from loo_adapt.advice import next_step_for

    reasons = unreliable_reasons(result)
    n_khat = int(np.sum(result.khat_only))
    if not reasons and not n_khat:
        return ["Every observation has a reliable estimate (verified by a check that can see "
                "bias)."]
    lines = []
    n = len(reasons)
    if n:
        lines.append(f"Still unreliable: {n} observation{'s' if n > 1 else ''} (0-based "
                     "index, Stan's 1-based log_lik index beside it), with the failed check:")
        for i, why in list(reasons.items())[:shown]:
            lines.append(f"  {i:>5d}  log_lik[{i + 1}]  {why}")
        if n > shown:
            lines.append(f"  ... ({n} in all; every one in the pointwise table)")
    if n_khat:
        lines.append(f"{n_khat} observation{'s rest' if n_khat > 1 else ' rests'} on PSIS "
                     "with k-hat below the threshold, not checked for bias.")
    step = next_step_for(result)
    lines.append(f"Next step: {step[0].upper()}{step[1:]}.")
    return lines


#: What each column of `format_pointwise` means (written below the table in summary.txt).
POINTWISE_LEGEND = """\
Columns: i = observation (0-based); estimator = what produced the row (psis; a transform
kl / var / ll / mm1 / mm2, or a '+'-joined pair from the split selection; mm = moment
matching; mixis = mixture importance sampling; mixis+psis = MixIS pooled with PSIS; refit =
exact refit); rho = step size of the chosen transform (blank when none); k_before = plain
PSIS k-hat; k_after = k-hat of the estimator that produced the row (held-out draws for a
transform; NA for MixIS and refits, which have none); diag = that estimator's effective
sample size (ESS of the PSIS, MixIS or refit draws; blank when unknown); elpd_loo = the
row's log LOO predictive density; mcse = its Monte Carlo SE; loo_prob = P(y_i = 1 | y_-i)
for binary outcomes; reliable = whether the estimator's own check passed (the summary names
the failed check of every NO)."""


def format_pointwise(result) -> str:
    """One line per observation (0-based index i).

    Columns: estimator (psis, a transform or a '+'-joined pair from the split selection,
    mm, mixis, refit), rho (step size of a transform), k_before (plain PSIS), k_after (the
    estimator's k-hat; NA for MixIS and refits), diag (their ESS), elpd_loo_i, its MCSE,
    the LOO probability P(y_i = 1 | y_-i) and whether the estimate is reliable.

    Parameters
    ----------
    result : `PointwiseLoo` or the ELPDData of `loo_adapt.loo`.

    Returns
    -------
    str
        A header line and one line per observation.

    Examples
    --------
    >>> from loo_adapt.result import PointwiseLoo
    >>> res = PointwiseLoo(*(np.zeros(2),) * 4, np.array([0.2, 0.9]), 0.7, 100, 1.0)
    >>> len(format_pointwise(res).splitlines())
    3
    """
    result = as_pointwise(result)
    cols = [("i", 5), ("estimator", 12), ("rho", 10), ("k_before", 9), ("k_after", 9),
            ("diag", 9), ("elpd_loo", 11), ("mcse", 9), ("loo_prob", 10), ("reliable", 9)]
    head = "".join(f"{name:>{w}s}" if name != "estimator" else f"  {name:<{w - 2}s}"
                   for name, w in cols)
    lines = [head]
    for i in range(result.n_obs):
        m = str(result.method[i])
        rho = float(result.rho[i])
        lines.append(
            f"{i:>5d}  {m:<10s}"
            + (f"{rho:>10.3g}" if np.isfinite(rho) else f"{'':>10s}")
            + _fmt(result.pareto_k[i], ".2f", 9)
            + _fmt(result.pareto_k_after[i], ".2f", 9)
            + (_fmt(result.diagnostic[i], ".1f", 9) if np.isfinite(result.diagnostic[i])
               else f"{'':>9s}")
            + _fmt(result.elpd_i[i], ".4f", 11)
            + _fmt(result.mcse_elpd_i[i], ".4f", 9)
            + _fmt(result.loo_prob[i], ".4f", 10)
            + f"{'yes' if result.reliable[i] else 'NO':>9s}"
        )
    return "\n".join(lines)
