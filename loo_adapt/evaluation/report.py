"""Printed summaries in the style of R loo's print method, and reports written to disk.

* :func:`format_summary` - estimates with SE, MCSE, the Pareto-k table before and after
  adaptation, counts per estimator, and the observations that still need a refit.
* :func:`format_pointwise` - one line per observation: estimator, k-hat before / after (or
  the MixIS / refit diagnostic), elpd_loo_i, MCSE, LOO probability.
* :func:`save_report` - summary.txt, results.json (every pointwise array), metrics.json and
  PNG figures in a directory; :func:`load_results` reads results.json back.
"""

from __future__ import annotations

import json
import math
import pathlib
from collections.abc import Mapping

import numpy as np

from loo_adapt.result import PointwiseLoo

_SCALE_FACTOR = {"log": 1.0, "negative_log": -1.0, "deviance": -2.0}
_SCALE_LABEL = {"log": "elpd_loo", "negative_log": "-elpd_loo", "deviance": "looic"}

#: Estimators without a Pareto k-hat of their own (their diagnostic is an ESS).
NO_KHAT = ("mixis", "refit")

#: PointwiseLoo fields written to results.json, in this order.
POINTWISE_FIELDS = ("elpd_loo", "p_loo", "lpd", "mcse_elpd_loo", "khat", "khat_after",
                    "method", "rho", "loo_prob", "diagnostic", "reliable", "r_eff")

__all__ = ["format_summary", "format_pointwise", "khat_counts", "save_report",
           "load_results", "as_pointwise", "POINTWISE_FIELDS"]


# --------------------------------------------------------------------------- inputs
def as_pointwise(result) -> PointwiseLoo:
    """The `PointwiseLoo` of an ELPDData from `loo_adapt.loo`, or the PointwiseLoo itself."""
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
    """Counts of finite k-hat in (-inf, threshold], (threshold, 1], (1, inf)."""
    k = np.asarray(khat, dtype=float)
    k = k[~np.isnan(k)]
    return np.array([np.sum(k <= threshold), np.sum((k > threshold) & (k <= 1)),
                     np.sum(k > 1)], dtype=int)


def _fmt(x, spec: str, width: int) -> str:
    x = float(x)
    return f"{'NA':>{width}s}" if not np.isfinite(x) else f"{x:>{width}{spec}}"


def format_summary(result, scale: str = "log") -> str:
    """R-loo-style summary of a `PointwiseLoo` (or the ELPDData from `loo_adapt.loo`).

    Totals with standard errors (n - 1 variance, as R loo), the MCSE of elpd_loo, the
    Pareto-k table before adaptation (plain PSIS) and after (the k-hat of the estimator
    finally used; MixIS and refits have none and are counted on their own row), the number
    of observations per estimator, and the observations whose estimate is still unreliable.
    """
    if result is None:
        raise ValueError("no loo_adapt result attached to this object")
    result = as_pointwise(result)
    if scale not in _SCALE_FACTOR:
        raise ValueError(f"scale must be one of {sorted(_SCALE_FACTOR)}, got {scale!r}")
    est = result.estimates()
    factor = _SCALE_FACTOR[scale]
    n, s = result.n_obs, result.n_samples
    lines = [f"Computed from {s} by {n} log-likelihood matrix.", ""]
    lines.append(f"{'':10s}{'Estimate':>10s}{'SE':>8s}")
    label = _SCALE_LABEL[scale]
    lines.append(f"{label:10s}{factor * est['elpd_loo']:>10.1f}"
                 f"{abs(factor) * est['se_elpd_loo']:>8.1f}")
    lines.append(f"{'p_loo':10s}{est['p_loo']:>10.1f}{est['se_p_loo']:>8.1f}")
    if scale != "deviance":
        lines.append(f"{'looic':10s}{est['looic']:>10.1f}{est['se_looic']:>8.1f}")
    lines.append("------")
    n_bad = int(np.sum(result.unreliable))
    note = ""
    if n_bad:
        # R loo prints NA here; the number over the reliable part is still worth seeing
        note = (f" (excluding the bias of {n_bad} unreliable observation"
                f"{'s' if n_bad > 1 else ''}, which it does not measure)")
    lines.append(f"MCSE of elpd_loo is {est['mcse_elpd_loo']:.2f}{note}.")
    r_eff = np.asarray(result.r_eff, dtype=float)
    if np.any(np.isfinite(r_eff)):
        lines.append(f"MCSE and ESS estimates assume MCMC draws (r_eff in "
                     f"[{np.nanmin(r_eff):.1f}, {np.nanmax(r_eff):.1f}]).")
    lines.append("")

    thr = float(result.khat_threshold)
    method = np.asarray(result.method).astype(str)
    no_khat = np.isin(method, NO_KHAT) | np.isnan(np.asarray(result.khat_after, dtype=float))
    before = khat_counts(result.khat, thr)
    after_k = np.where(no_khat, np.nan, result.khat_after)
    after = khat_counts(after_k, thr)
    lines.append(f"Pareto k diagnostic values (threshold {thr:.2f}):")
    labels = [f"(-Inf, {thr:.2f}]  (good)", f"({thr:.2f}, 1]     (bad)",
              "(1, Inf)      (very bad)"]
    width = max(len(t) for t in labels + ["no k-hat (mixis, refit)"]) + 2
    lines.append(f"{'':{width}s}{'before':>13s}{'after':>13s}")
    for lab, b, a in zip(labels, before, after):
        lines.append(f"{lab:{width}s}{b:>6d} {100 * b / n:5.1f}%{a:>6d} {100 * a / n:5.1f}%")
    n_no = int(np.sum(no_khat))
    n_nan_before = n - int(before.sum())
    if n_no or n_nan_before:
        lines.append(f"{'no k-hat (mixis, refit)':{width}s}{n_nan_before:>6d} "
                     f"{100 * n_nan_before / n:5.1f}%{n_no:>6d} {100 * n_no / n:5.1f}%")
    lines.append("")

    names, counts = np.unique(method, return_counts=True)
    order = np.argsort(-counts, kind="stable")
    parts = []
    for j in order:
        sel = method == names[j]
        ok = int(np.sum(result.reliable[sel]))
        parts.append(f"{names[j]} {counts[j]}" + ("" if ok == counts[j] else f" ({ok} reliable)"))
    lines.append("Estimator per observation: " + ", ".join(parts))
    bad = np.flatnonzero(result.unreliable)
    if bad.size:
        shown = ", ".join(_bad_item(result, i) for i in bad[:20])
        more = "" if bad.size <= 20 else f", ... ({bad.size} in all)"
        lines.append(f"Still unreliable ({bad.size}), refit these observations: {shown}{more}")
    else:
        lines.append("Every observation has a reliable estimate.")
    return "\n".join(lines)


def _bad_item(result: PointwiseLoo, i: int) -> str:
    m = str(result.method[i])
    if m in NO_KHAT or not np.isfinite(result.khat_after[i]):
        return f"{i} ({m}, MCSE={result.mcse_elpd_loo[i]:.2f})"
    return f"{i} ({m}, k={result.khat_after[i]:.2f})"


def format_pointwise(result) -> str:
    """One line per observation (0-based index i).

    Columns: estimator (psis, a transform or a '+'-joined pair from the split selection,
    mm, mixis, refit), rho (step size of a transform), k_before (plain PSIS), k_after (the
    estimator's k-hat; NA for MixIS and refits), diag (their ESS), elpd_loo_i, its MCSE,
    the LOO probability P(y_i = 1 | y_-i) and whether the estimate is reliable.
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
            + _fmt(result.khat[i], ".2f", 9)
            + _fmt(result.khat_after[i], ".2f", 9)
            + (_fmt(result.diagnostic[i], ".1f", 9) if np.isfinite(result.diagnostic[i])
               else f"{'':>9s}")
            + _fmt(result.elpd_loo[i], ".4f", 11)
            + _fmt(result.mcse_elpd_loo[i], ".4f", 9)
            + _fmt(result.loo_prob[i], ".4f", 10)
            + f"{'yes' if result.reliable[i] else 'NO':>9s}"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------- JSON
def _json_safe(value):
    """Plain Python containers for json: NaN and +-inf become null (JSON has neither)."""
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return _json_safe(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else None
    if value is None or isinstance(value, str):
        return value
    return str(value)


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    import arviz

    from loo_adapt import __version__

    out = {"loo_adapt": __version__, "arviz": arviz.__version__, "numpy": np.__version__}
    for dist in ("scipy", "matplotlib"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            pass
    return out


def results_dict(result, *, scale: str | None = None, name: str = "loo") -> dict:
    """The content of results.json (before NaN -> null)."""
    res = as_pointwise(result)
    scale = _scale_of(result, scale)
    pointwise = {f: np.asarray(getattr(res, f)).tolist() for f in POINTWISE_FIELDS}
    pointwise["method"] = [str(m) for m in res.method]
    pointwise["reliable"] = [bool(r) for r in res.reliable]
    pointwise["y"] = None if res.y is None else np.asarray(res.y, dtype=float).tolist()
    return {
        "name": name,
        "scale": scale,
        "n_obs": res.n_obs,
        "n_samples": int(res.n_samples),
        "khat_threshold": float(res.khat_threshold),
        "estimates": res.estimates(),
        "n_unreliable": int(np.sum(res.unreliable)),
        "unreliable": np.flatnonzero(res.unreliable).tolist(),
        "khat_counts_before": khat_counts(res.khat, res.khat_threshold).tolist(),
        "pointwise": pointwise,
        "candidates": [dict(c) for c in res.candidates],
        "versions": _versions(),
    }


def load_results(path) -> PointwiseLoo:
    """A `PointwiseLoo` from a results.json written by :func:`save_report` (null -> NaN)."""
    path = pathlib.Path(path)
    if path.is_dir():
        path = path / "results.json"
    if not path.is_file():
        raise FileNotFoundError(f"no results file {str(path)!r}")
    data = json.loads(path.read_text())
    try:
        pw = data["pointwise"]
    except (KeyError, TypeError):
        raise ValueError(f"{path} is not a loo_adapt results.json (no 'pointwise')") from None

    def arr(key):
        return np.array([np.nan if v is None else v for v in pw[key]], dtype=float)

    candidates = [{k: (np.nan if v is None else v) for k, v in c.items()}
                  for c in data.get("candidates", [])]
    return PointwiseLoo(
        elpd_loo=arr("elpd_loo"), p_loo=arr("p_loo"), lpd=arr("lpd"),
        mcse_elpd_loo=arr("mcse_elpd_loo"), khat=arr("khat"),
        khat_threshold=float(data["khat_threshold"]), n_samples=int(data["n_samples"]),
        r_eff=arr("r_eff"), khat_after=arr("khat_after"),
        method=np.array(pw["method"], dtype=object), rho=arr("rho"),
        loo_prob=arr("loo_prob"), y=None if pw.get("y") is None else arr("y"),
        diagnostic=arr("diagnostic"), candidates=candidates,
        reliable=np.array(pw["reliable"], dtype=bool),
    )


# --------------------------------------------------------------------------- report
def _probabilities(res: PointwiseLoo, y, probs, name):
    """(y, {label: p}) for the classification outputs, or (None, {}) when unknown."""
    if y is None:
        y = res.y
    if probs is None:
        p = np.asarray(res.loo_prob, dtype=float)
        probs = {} if not np.all(np.isfinite(p)) else {name: p}
    elif not isinstance(probs, Mapping):
        probs = {name: probs}
    out = {}
    for label, p in probs.items():
        inner = p if isinstance(p, PointwiseLoo) else getattr(p, "loo_adapt", None)
        if isinstance(inner, PointwiseLoo):
            p = inner.loo_prob
        p = np.asarray(p, dtype=float)
        if p.shape != (res.n_obs,):
            raise ValueError(f"probs[{label!r}] has shape {p.shape}, expected ({res.n_obs},)")
        if not np.all(np.isfinite(p)):
            raise ValueError(f"probs[{label!r}] has {int(np.sum(~np.isfinite(p)))} NaN values")
        out[str(label)] = p
    if y is None:
        return None, {}
    y = np.asarray(y, dtype=float)
    if y.shape != (res.n_obs,):
        raise ValueError(f"y has shape {y.shape}, expected ({res.n_obs},)")
    return y, out


def save_report(result, out_dir, *, y=None, probs=None, name: str = "loo",
                scale: str | None = None, figures: bool = True, n_boot: int = 2000,
                seed: int = 0) -> list[pathlib.Path]:
    """Write a LOO report to ``out_dir`` (created if needed); returns the files written.

    Parameters
    ----------
    result : the ELPDData from `loo_adapt.loo` or a `PointwiseLoo`.
    y : binary outcomes; default ``result.y``.
    probs : LOO probabilities for the classification outputs: one array, or a dict
        label -> array / PointwiseLoo (several fits on one ROC axis, e.g. MCMC vs ADVI).
        Default: the result's own ``loo_prob`` when every entry is known.
    name : label of the result (title of the summary, "name" in results.json, legend).
    figures : write the PNG figures (matplotlib, Agg backend).
    n_boot, seed : Bayesian-bootstrap replicates and seed of metrics.json.

    Files: ``summary.txt`` (summary + pointwise table), ``results.json`` (estimates with
    SE, every pointwise array, the candidates, k-hat threshold, versions; NaN as null),
    ``khat.png``, ``khat_hist.png``, ``khat_candidates.png`` (when candidates exist), and
    when y and LOO probabilities are known ``metrics.json`` (`metrics.classification_report`
    per label), ``roc.png``, ``pr.png``, ``calibration.png``.
    """
    res = as_pointwise(result)
    scale = _scale_of(result, scale)
    out = pathlib.Path(out_dir)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"{str(out)!r} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    y_arr, prob_map = _probabilities(res, y, probs, name)
    written = []

    text = (f"{name}\n{'=' * len(name)}\n\n{format_summary(res, scale=scale)}\n\n"
            f"Pointwise (observation i is 0-based):\n{format_pointwise(res)}\n")
    path = out / "summary.txt"
    path.write_text(text)
    written.append(path)

    path = out / "results.json"
    path.write_text(json.dumps(_json_safe(results_dict(result, scale=scale, name=name)),
                               indent=1, allow_nan=False))
    written.append(path)

    if y_arr is not None and prob_map:
        from loo_adapt.evaluation import metrics

        report = {label: metrics.classification_report(y_arr, p, n_boot=n_boot, seed=seed)
                  for label, p in prob_map.items()}
        path = out / "metrics.json"
        path.write_text(json.dumps(_json_safe(report), indent=1, allow_nan=False))
        written.append(path)

    if figures:
        written.extend(_figures(res, out, y_arr, prob_map))
    return written


def _figures(res: PointwiseLoo, out: pathlib.Path, y, prob_map) -> list[pathlib.Path]:
    # Figures without pyplot: no backend switch, nothing left open in the caller's session.
    from matplotlib.figure import Figure

    from loo_adapt.evaluation import plots

    written = []

    def new(figsize):
        fig = Figure(figsize=figsize)
        return fig, fig.add_subplot()

    def save(fig, filename):
        path = out / filename
        fig.savefig(path, dpi=110, bbox_inches="tight")
        written.append(path)

    fig, ax = new((8, 4))
    plots.plot_khat(res, ax=ax)
    ax.set_title("Pareto k-hat before and after adaptation")
    save(fig, "khat.png")
    fig, ax = new((6, 4))
    plots.plot_khat_hist(res, ax=ax)
    save(fig, "khat_hist.png")
    if res.candidates:
        n_obs = len({c["i"] for c in res.candidates})
        fig, ax = new((max(6.0, 0.35 * n_obs), 4.5))
        plots.plot_khat_candidates(res, ax=ax)
        ax.set_title("k-hat of every tried transform and step size")
        save(fig, "khat_candidates.png")
    if y is not None and prob_map:
        for func, filename in ((plots.plot_roc, "roc.png"), (plots.plot_pr, "pr.png"),
                               (plots.plot_calibration, "calibration.png")):
            fig, ax = new((5, 5))
            func(y, prob_map, ax=ax)
            save(fig, filename)
    return written
