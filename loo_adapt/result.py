"""Array-level LOO results: what the estimators return before anything arviz-shaped is built.

`PointwiseLoo` is the one object the edges (arviz_compat, metrics, plots, report, cli)
read.  Every field is a numpy array of length n (observations) unless stated otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: Names used in ``PointwiseLoo.method`` for the estimator that produced an observation.
ESTIMATORS = ("psis", "kl", "var", "ll", "mm1", "mm2", "mm", "mixis", "refit")


@dataclass
class PointwiseLoo:
    """Pointwise leave-one-out results.

    elpd_loo : log LOO predictive density of each observation.
    p_loo : lpd_i - elpd_loo_i, the effective number of parameters per observation.
    lpd : log of the full-posterior mean likelihood of each observation.
    mcse_elpd_loo : Monte Carlo standard error of elpd_loo_i (NaN where unknown).
    khat : Pareto k-hat of plain PSIS (before any adaptation).
    khat_after : k-hat of the estimator finally used (equal to ``khat`` for PSIS; for a
        selected transform it is computed on draws that did not select it when
        ``selection="split"``; NaN for refits and MixIS, whose own diagnostic is in
        ``diagnostic``).
    method : name of the estimator per observation (one of ``ESTIMATORS``).
    rho : step-size parameter of the chosen transform (NaN when none).
    loo_prob : LOO predictive probability P(y_i = 1 | y_-i) for binary outcomes (NaN otherwise).
    khat_threshold : sample-size dependent threshold min(1 - 1/log10(S), 0.7).
    n_samples : number of posterior draws S.
    r_eff : relative efficiency used for each observation.
    y : observed outcomes when known (binary models), else None.
    diagnostic : optional per-observation diagnostic of the final estimator
        (e.g. ESS of the MixIS weights), NaN where not applicable.
    candidates : optional list of dicts, one per tried (observation, transform, rho),
        with keys i, transform, rho, khat, elpd_loo, loo_prob.
    reliable : per observation, whether the final estimator's own diagnostic shows it
        reliable (k-hat at most the threshold for importance sampling, MCSE at most the
        accepted bound for MixIS, always for an exact refit).  Derived from ``khat_after``
        when not given.
    mcse_total : Monte Carlo SE of the total elpd_loo when the estimator knows it (MixIS:
        its pointwise errors are correlated); else the pointwise MCSEs are added in
        quadrature, as R loo does.
    """

    elpd_loo: np.ndarray
    p_loo: np.ndarray
    lpd: np.ndarray
    mcse_elpd_loo: np.ndarray
    khat: np.ndarray
    khat_threshold: float
    n_samples: int
    r_eff: np.ndarray
    khat_after: np.ndarray | None = None
    method: np.ndarray | None = None
    rho: np.ndarray | None = None
    loo_prob: np.ndarray | None = None
    y: np.ndarray | None = None
    diagnostic: np.ndarray | None = None
    candidates: list[dict] = field(default_factory=list)
    reliable: np.ndarray | None = None
    mcse_total: float | None = None

    def __post_init__(self):
        n = len(self.elpd_loo)
        if self.khat_after is None:
            self.khat_after = np.array(self.khat, dtype=float, copy=True)
        if self.method is None:
            self.method = np.full(n, "psis", dtype=object)
        if self.rho is None:
            self.rho = np.full(n, np.nan)
        if self.loo_prob is None:
            self.loo_prob = np.full(n, np.nan)
        if self.diagnostic is None:
            self.diagnostic = np.full(n, np.nan)
        if self.reliable is None:
            self.reliable = np.asarray(self.khat_after, dtype=float) <= self.khat_threshold
        self.reliable = np.asarray(self.reliable, dtype=bool).copy()
        self.r_eff = np.broadcast_to(np.asarray(self.r_eff, dtype=float), (n,)).copy()
        for name in ("p_loo", "lpd", "mcse_elpd_loo", "khat", "khat_after", "method", "rho",
                     "loo_prob", "diagnostic", "reliable"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} has length {len(getattr(self, name))}, expected {n}")

    @property
    def n_obs(self) -> int:
        return len(self.elpd_loo)

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
        n = self.n_obs
        out = {}
        for name, values in (("elpd_loo", self.elpd_loo), ("p_loo", self.p_loo)):
            out[name] = float(np.sum(values))
            out[f"se_{name}"] = float(np.sqrt(n * np.var(values, ddof=1))) if n > 1 else np.nan
        out["looic"] = -2.0 * out["elpd_loo"]
        out["se_looic"] = 2.0 * out["se_elpd_loo"]
        out["mcse_elpd_loo"] = float(np.sqrt(np.nansum(self.mcse_elpd_loo**2)))
        if self.mcse_total is not None and np.isfinite(self.mcse_total):
            out["mcse_elpd_loo"] = max(out["mcse_elpd_loo"], float(self.mcse_total))
        return out
