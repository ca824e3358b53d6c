"""Printed summaries in the style of R loo's print method."""

from __future__ import annotations

import numpy as np

from .result import PointwiseLoo

_SCALE_FACTOR = {"log": 1.0, "negative_log": -1.0, "deviance": -2.0}


def _khat_counts(khat: np.ndarray, threshold: float) -> np.ndarray:
    k = np.asarray(khat, dtype=float)
    k = k[~np.isnan(k)]
    return np.array([np.sum(k <= threshold), np.sum((k > threshold) & (k <= 1)), np.sum(k > 1)])


def format_summary(result: PointwiseLoo, scale: str = "log") -> str:
    """Estimates with SE, the Pareto-k table before and after adaptation, counts per
    estimator, and the observations that still need a refit."""
    if result is None:
        raise ValueError("no loo_adapt result attached to this object")
    est = result.estimates()
    factor = _SCALE_FACTOR[scale]
    n, s = result.n_obs, result.n_samples
    lines = [f"Computed from {s} by {n} log-likelihood matrix.", ""]
    lines.append(f"{'':10s}{'Estimate':>10s}{'SE':>8s}")
    label = {"log": "elpd_loo", "negative_log": "-elpd_loo", "deviance": "looic"}[scale]
    lines.append(f"{label:10s}{factor * est['elpd_loo']:>10.1f}"
                 f"{abs(factor) * est['se_elpd_loo']:>8.1f}")
    lines.append(f"{'p_loo':10s}{est['p_loo']:>10.1f}{est['se_p_loo']:>8.1f}")
    if scale != "deviance":
        lines.append(f"{'looic':10s}{est['looic']:>10.1f}{est['se_looic']:>8.1f}")
    lines.append("------")
    lines.append(f"MCSE of elpd_loo is {est['mcse_elpd_loo']:.2f}.")
    lines.append("")
    thr = result.khat_threshold
    before = _khat_counts(result.khat, thr)
    final_k = np.where(result.method == "psis", result.khat, result.khat_after)
    after = _khat_counts(final_k[~np.isin(result.method, ("refit", "mixis"))], thr)
    lines.append(f"Pareto k diagnostic values (threshold {thr:.2f}):")
    lines.append(f"{'':26s}{'before':>14s}{'after':>14s}")
    labels = [f"(-Inf, {thr:.2f}] (good)", f"({thr:.2f}, 1]  (bad)", "(1, Inf)   (very bad)"]
    for lab, b, a in zip(labels, before, after):
        lines.append(f"{lab:26s}{b:>6d} {100 * b / n:5.1f}%{a:>7d} {100 * a / n:5.1f}%")
    methods, counts = np.unique(result.method.astype(str), return_counts=True)
    lines.append("")
    lines.append("Estimator per observation: "
                 + ", ".join(f"{m} {c}" for m, c in zip(methods, counts)))
    bad = np.flatnonzero(result.unreliable)
    if bad.size:
        shown = ", ".join(f"{i} (k={result.khat_after[i]:.2f})" for i in bad[:20])
        more = "" if bad.size <= 20 else f", ... ({bad.size} in all)"
        lines.append(f"Still unreliable, refit these observations: {shown}{more}")
    else:
        lines.append("Every observation has a reliable estimate.")
    return "\n".join(lines)
