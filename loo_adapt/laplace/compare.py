"""Predictive checks of the Laplace-family approximations against MCMC leave-one-out.

`compare` finds the distinct posterior modes of the ReLU net from the best-lp MCMC draws,
fits MAP / LLA / ELLA / VaLLA at each, and sets their cavity LOO predictives next to the
MCMC (adaptive-IS) LOO: elpd_loo, LOO-AUROC, average precision, Brier, ECE, and the
per-observation differences of LOO logits and probabilities stratified by the MCMC k-hat
(<= 0.5, 0.5-0.7, > 0.7).  MAP is the in-sample plug-in sigmoid(f^) (it has no LOO).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from loo_adapt.laplace.ella import ELLA, PAPER_K, PAPER_M
from loo_adapt.laplace.lla import FunctionSpaceLLA, LooPredictive, likelihood_terms
from loo_adapt.laplace.net import find_modes
from loo_adapt.laplace.valla import VaLLA

__all__ = ["compare", "Comparison", "KHAT_BINS", "plot_comparison"]

KHAT_BINS = (("k<=0.5", -np.inf, 0.5), ("0.5<k<=0.7", 0.5, 0.7), ("k>0.7", 0.7, np.inf))


def _metrics():
    from loo_adapt.evaluation import metrics  # numpy only, no edges

    return metrics


def _mcmc_arrays(mcmc, y):
    """elpd_loo, loo_prob, khat from a PointwiseLoo, a dict or a tuple of arrays."""
    if mcmc is None:
        return None
    if hasattr(mcmc, "elpd_i"):
        elpd, prob, khat = mcmc.elpd_i, mcmc.loo_prob, mcmc.pareto_k
    elif isinstance(mcmc, dict):
        elpd, prob, khat = mcmc["elpd_loo"], mcmc.get("loo_prob"), mcmc.get("khat")
    else:
        elpd, prob, khat = mcmc
    n = y.size
    elpd = np.asarray(elpd, dtype=float)
    if elpd.shape != (n,):
        raise ValueError(f"MCMC elpd_loo has shape {elpd.shape}, expected ({n},)")
    if prob is None or np.all(np.isnan(np.asarray(prob, dtype=float))):
        # binary outcome: p(y_i | y_-i) = exp(elpd_i) determines P(y_i = 1 | y_-i)
        p_obs = np.exp(elpd)
        prob = np.where(y == 1, p_obs, 1.0 - p_obs)
    prob = np.asarray(prob, dtype=float)
    khat = np.full(n, np.nan) if khat is None else np.asarray(khat, dtype=float)
    if prob.shape != (n,) or khat.shape != (n,):
        raise ValueError("MCMC loo_prob and khat must have one entry per observation")
    return elpd, prob, khat


def _logit(p):
    p = np.clip(p, 1e-300, 1.0)
    q = np.clip(1.0 - p, 1e-300, 1.0)
    return np.log(p) - np.log(q)


@dataclass(repr=False)
class Comparison:
    """Result of `compare`.

    table : one dict per (method, mode) with elpd_loo, auroc, ap, brier, ece, sigma0.
    pointwise : (method, mode) -> dict of arrays elpd_loo, loo_prob, loo_logit.
    strata : list of dicts (method, mode, stratum, n, mean/max |d logit|, mean |d prob|,
        mean d elpd) of differences to MCMC by MCMC k-hat.
    modes : the `net.Mode` objects (best log posterior first).
    """

    table: list
    pointwise: dict
    strata: list = field(default_factory=list)
    modes: list = field(default_factory=list)
    y: np.ndarray | None = None
    khat: np.ndarray | None = None

    def to_dataframe(self):
        """The table as a pandas DataFrame, one row per (method, mode)."""
        import pandas as pd

        return pd.DataFrame(self.table)

    def __str__(self) -> str:
        """The table (``print(compare(...))``), not the pointwise arrays."""
        n = 0 if self.y is None else len(self.y)
        head = f"Cavity LOO against MCMC ({n} observations, {len(self.modes)} mode(s)):"
        return head + "\n" + self.to_dataframe().to_string(index=False, float_format="%.4g")

    __repr__ = __str__

    def strata_dataframe(self):
        import pandas as pd

        return pd.DataFrame(self.strata)


def _row(name, mode, y, elpd, prob, sigma0, m):
    return {"method": name, "mode": mode, "elpd_loo": float(np.sum(elpd)),
            "auroc": m.auroc(y, prob), "average_precision": m.average_precision(y, prob),
            "brier": m.brier_score(y, prob), "ece": m.expected_calibration_error(y, prob),
            "sigma0": sigma0}


def compare(fit_draws, X, y, *, mcmc=None, prior_sd=1.0, sigma0="prior", nets=None,
            methods=("map", "lla", "ella", "valla"), all_modes=False,
            ella_kw=None, valla_kw=None, predictive="gh", seed=0):
    """Compare MAP / LLA / ELLA / VaLLA cavity LOO with the MCMC LOO.

    fit_draws : `Draws` (or dict) with W1 (chains, draws, D, H), b1, w2, b2; may be None
        when ``nets`` is given.
    mcmc : MCMC LOO results: `PointwiseLoo`, dict with elpd_loo [, loo_prob, khat] or a
        tuple (elpd_loo, loo_prob, khat); loo_prob may be None (derived from elpd and y).
    prior_sd : the Stan prior sd of the weights.  sigma0 : "prior" (= prior_sd),
        "evidence" (Laplace evidence optimum per mode) or a number.
    all_modes : fit every distinct mode (else only the best-lp one).
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    if y.ndim != 1 or X.ndim != 2 or X.shape[0] != y.size:
        raise ValueError(f"X {X.shape} and y {y.shape} do not match")
    unknown = set(methods) - {"map", "lla", "ella", "valla"}
    if unknown:
        raise ValueError(f"unknown methods {sorted(unknown)}")
    m = _metrics()
    if nets is None:
        if fit_draws is None:
            raise ValueError("give fit_draws (to find the modes) or nets")
        modes = find_modes(fit_draws, X, y, prior_sd)
        nets = [md.net for md in modes]
    else:
        modes = []
        nets = list(nets)
    if not all_modes:
        nets = nets[:1]
    ella_kw = {"M": PAPER_M, "K": PAPER_K, "seed": seed} | dict(ella_kw or {})
    valla_kw = {"M": 128, "seed": seed} | dict(valla_kw or {})
    table, pointwise = [], {}
    mc = _mcmc_arrays(mcmc, y)
    if mc is not None:
        elpd, prob, khat = mc
        table.append(_row("mcmc", None, y, elpd, prob, np.nan, m))
        pointwise[("mcmc", None)] = {"elpd_loo": elpd, "loo_prob": prob,
                                    "loo_logit": _logit(prob)}
    for k, net in enumerate(nets):
        if sigma0 == "prior":
            s0 = float(prior_sd)
        elif sigma0 == "evidence":
            s0 = FunctionSpaceLLA(net, X, y, prior_sd).optimize_prior()
        else:
            s0 = float(sigma0)
        if "map" in methods:
            f = net.forward(X)
            loglik, _, _ = likelihood_terms(f, y)
            prob = np.exp(likelihood_terms(f, np.ones_like(y))[0])
            table.append(_row("map", k, y, loglik, prob, s0, m))
            pointwise[("map", k)] = {"elpd_loo": loglik, "loo_prob": prob,
                                     "loo_logit": f}
        fitted = {}
        if "lla" in methods:
            fitted["lla"] = FunctionSpaceLLA(net, X, y, s0)
        if "ella" in methods:
            fitted["ella"] = ELLA(net, X, y, s0, **ella_kw)
        if "valla" in methods:
            fitted["valla"] = VaLLA(net, X, y, s0, **valla_kw)
        for name, approx in fitted.items():
            loo: LooPredictive = approx.loo(method=predictive, seed=seed)
            table.append(_row(name, k, y, loo.elpd_loo, loo.loo_prob, s0, m))
            pointwise[(name, k)] = {"elpd_loo": loo.elpd_loo, "loo_prob": loo.loo_prob,
                                    "loo_logit": loo.loo_logit}
    strata = []
    if mc is not None:
        ref = pointwise[("mcmc", None)]
        for key, pw in pointwise.items():
            if key[0] == "mcmc":
                continue
            dl = pw["loo_logit"] - ref["loo_logit"]
            dp = pw["loo_prob"] - ref["loo_prob"]
            de = pw["elpd_loo"] - ref["elpd_loo"]
            for label, lo, hi in KHAT_BINS:
                sel = (khat > lo) & (khat <= hi)
                cnt = int(np.sum(sel))
                strata.append({
                    "method": key[0], "mode": key[1], "stratum": label, "n": cnt,
                    "mean_abs_dlogit": float(np.mean(np.abs(dl[sel]))) if cnt else np.nan,
                    "max_abs_dlogit": float(np.max(np.abs(dl[sel]))) if cnt else np.nan,
                    "mean_abs_dprob": float(np.mean(np.abs(dp[sel]))) if cnt else np.nan,
                    "mean_delpd": float(np.mean(de[sel])) if cnt else np.nan})
    return Comparison(table=table, pointwise=pointwise, strata=strata, modes=modes, y=y,
                      khat=None if mc is None else mc[2])


#: How the figure names the methods of a comparison.
METHOD_LABELS = {"map": "MAP (plug-in)", "lla": "LLA", "ella": "ELLA", "valla": "VaLLA",
                 "mcmc": "MCMC"}


def _method_label(method, mode, n_modes: int) -> str:
    name = METHOD_LABELS.get(str(method), str(method))
    return name if mode is None or n_modes <= 1 else f"{name}, mode {mode}"


def plot_comparison(result: Comparison, axes=None):
    """Each method's LOO logit against the MCMC LOO logit, and elpd_loo per method.

    Left: one colour per method, one marker per MCMC k-hat stratum (two legends right of the
    axes); the dashed line is agreement with MCMC.  Right: elpd_loo per method.

    Parameters
    ----------
    result : a `Comparison` with MCMC results.
    axes : two matplotlib Axes; default a new 12 x 4.5 inch figure.

    Returns
    -------
    matplotlib Figure
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    if ("mcmc", None) not in result.pointwise:
        raise ValueError("plot_comparison needs MCMC LOO results in the comparison")
    keys = [k for k in result.pointwise if k[0] != "mcmc"]
    n_modes = len({k[1] for k in result.pointwise if k[1] is not None})
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), layout="constrained",
                                 gridspec_kw={"width_ratios": (1.6, 1.0)})
    else:
        fig = axes[0].figure
    ref = result.pointwise[("mcmc", None)]["loo_logit"]
    khat = result.khat
    markers = ("o", "^", "s")
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    method_handles = []
    for j, key in enumerate(keys):
        lg = result.pointwise[key]["loo_logit"]
        color = colors[j % len(colors)]
        for mk, (_, lo, hi) in zip(markers, KHAT_BINS):
            sel = (khat > lo) & (khat <= hi)
            axes[0].scatter(ref[sel], lg[sel], s=16, color=color, marker=mk, alpha=0.7)
        method_handles.append(Line2D([], [], ls="", marker="o", color=color,
                                     label=_method_label(*key, n_modes)))
    stratum_handles = [
        Line2D([], [], ls="", marker=mk, color="0.3",
               label=f"{label} (n={int(np.sum((khat > lo) & (khat <= hi)))})")
        for mk, (label, lo, hi) in zip(markers, KHAT_BINS)]
    finite = ref[np.isfinite(ref)]
    lim = float(np.max(np.abs(finite))) if finite.size else 1.0
    axes[0].plot([-lim, lim], [-lim, lim], "k--", lw=0.8)
    # no x tick at the lower-left corner, where it would run into the lowest y tick
    axes[0].xaxis.set_major_locator(MaxNLocator(nbins="auto", prune="lower"))
    axes[0].set_xlabel("MCMC LOO logit")
    axes[0].set_ylabel("approximate LOO logit")
    axes[0].set_title("LOO logits against MCMC (dashed: equal)", fontsize=10)
    first = axes[0].legend(handles=method_handles, title="method", fontsize=8,
                           title_fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                           borderaxespad=0.0, frameon=False)
    axes[0].add_artist(first)
    axes[0].legend(handles=stratum_handles, title="MCMC k-hat", fontsize=8, title_fontsize=8,
                   loc="lower left", bbox_to_anchor=(1.02, 0.0), borderaxespad=0.0,
                   frameon=False)
    names = [_method_label(r["method"], r["mode"], n_modes) for r in result.table]
    axes[1].barh(names, [r["elpd_loo"] for r in result.table], color="0.55")
    axes[1].invert_yaxis()
    axes[1].set_xlabel("elpd_loo")
    axes[1].set_title("elpd_loo per method (higher is better)", fontsize=10)
    return fig
