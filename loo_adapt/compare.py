"""Model comparison: R loo's ``loo_compare`` and arviz's ``compare``, and what rests on rows
nothing verified.

`compare({name: result, ...})` ranks models by elpd and gives, as R loo 2.10:
``elpd_diff`` (each model minus the best, from the pointwise differences), ``se_diff``
(``sqrt(n) * sd(diff)``, the n - 1 variance), ``p_worse`` (the normal approximation
Phi(-elpd_diff / se_diff) = ``pnorm(0, elpd_diff, se_diff)``, NaN for the best), ``diag_diff``
(``"N < 100"`` when n < 100, else ``"|elpd_diff| < 4"``) and ``diag_elpd`` (``"K k_psis >
t"``: K rows whose final importance-sampling estimate has k-hat above t = min(1 - 1 /
log10(S), 0.7)); stacking and pseudo-BMA weights come from the installed arviz's
``compare`` (not reimplemented).

What neither has, per model against the best: ``n_unverified`` rows where either model's
estimate was not verified (no certification, MixIS MCSE or refit; plain PSIS rows are
"accepted on k-hat alone", so every row of a plain arviz result counts), the part of
``elpd_diff`` those rows carry (``elpd_diff_unverified``), the range of ``elpd_diff`` when each
of those rows may lie anywhere in its plausible range (``diff_low``, ``diff_high``), whether
that range reaches 0 (``may_flip``: the order with the best model could flip) and the call
that would verify the rows (``verify``).

Plausible range of an unverified row (`plausible_range`):

* k-hat at most the threshold (or an estimator without k-hat, e.g. MixIS whose MCSE was too
  large): ``elpd_i +- 2 mcse_i`` (zero width where the MCSE is unknown, as for a plain arviz
  result, which keeps no pointwise MCSE);
* importance sampling with k-hat above the threshold (the estimate is not reliable and is
  typically optimistic): from ``elpd_i - high_k_factor * max(p_loo_i, mcse_i)`` up to
  ``max(lpd_i, elpd_i + 2 mcse_i)`` (the exact LOO density is a harmonic mean of the
  likelihood, so it does not exceed the full-posterior ``lpd_i``; the estimate may be too
  high by a multiple of the influence ``p_loo_i`` PSIS already assigns); without ``lpd_i``
  (plain arviz results) the upper end is ``elpd_i + high_k_factor * p_loo_i``; where neither
  ``p_loo_i`` nor the MCSE is known (arviz 0.x) the influence counts as one nat.

Verified rows keep their estimate.  In ``diff_low`` / ``diff_high`` the high-k-hat rows
(possible bias, which would not average out) sit at the ends of their ranges together, while
the Monte Carlo errors of the other unverified rows, independent across rows, add in
quadrature: ``elpd_diff +- 2 sqrt(sum mcse_i^2)`` (both models' unverified rows).  The range
says nothing about ``se_diff`` (the sampling uncertainty of the data): ``may_flip`` asks
whether the Monte Carlo and bias error of the unverified rows alone could reverse the
order.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import ndtr

from loo_adapt.core._callable import make_module_callable

__all__ = ["compare", "CompareFrame", "format_compare", "plausible_range", "is_verified",
           "COLUMNS"]

#: Columns of the returned frame, in order (index: model name, best first).
COLUMNS = ("elpd_loo", "se_elpd_loo", "p_loo", "elpd_diff", "se_diff", "p_worse",
           "diag_diff", "diag_elpd", "weight_stacking", "weight_pseudo_bma", "n_unverified",
           "elpd_diff_unverified", "diff_low", "diff_high", "may_flip", "verify")

_SCALE = {"log": 1.0, "negative_log": -1.0, "deviance": -2.0}
_GLOSSARY = ("Diagnostic flags present.\nSee ?`loo-glossary` (sections `diag_diff` and "
             "`diag_elpd`)\nor https://mc-stan.org/loo/reference/loo-glossary.html.")


# --------------------------------------------------------------------------- inputs
@dataclass
class _Model:
    """What `compare` reads from one result (arviz 0.x / 1.x ELPDData, ours or arviz's)."""

    elpd_i: np.ndarray
    p_loo_i: np.ndarray
    lpd_i: np.ndarray
    mcse_i: np.ndarray
    khat: np.ndarray | None  # k-hat of the final importance-sampling estimate (NaN: none)
    good_k: float
    n_samples: int
    kind: str
    verified: np.ndarray
    method: np.ndarray
    se: float
    p: float


def is_verified(result) -> np.ndarray:
    """Per row, whether something that can see bias verified the estimate.

    Verified: reliable, with ``verified_by`` naming a check other than k-hat
    ("certified", "mixis_mcse", "refit"), or a reliable refit (k-fold rows).  Rows accepted on
    k-hat alone (``verified_by`` "khat" or any label containing "khat" without "certif") are
    not verified.

    Parameters
    ----------
    result : a `PointwiseLoo`.

    Returns
    -------
    ndarray of bool, (n,)

    Examples
    --------
    >>> from loo_adapt.result import PointwiseLoo
    >>> res = PointwiseLoo(*(np.zeros(3),) * 4, np.zeros(3), 0.7, 100, np.ones(3),
    ...                    verified_by=np.array(["khat", "refit", ""], dtype=object))
    >>> is_verified(res).tolist()
    [False, True, False]
    """
    refit = np.asarray(result.method, dtype=object) == "refit"
    return np.asarray(result.checked_for_bias) | (np.asarray(result.reliable, bool) & refit)


def _arr(x) -> np.ndarray:
    return np.asarray(getattr(x, "values", x), dtype=float).ravel()


_POINTWISE_KEYS = ("loo_i", "waic_i", "elpd_kfold_i", "elpd_i")


def _require_pointwise(name: str, res) -> None:
    """Refuse an ELPDData without pointwise values (``pointwise=False``), on either arviz
    line and whatever ``weights`` is, before arviz's ``compare`` would fail with a less
    clear message; ours too, although ``.loo_adapt`` keeps the arrays, as arviz refuses it."""
    if isinstance(res, pd.Series):  # arviz 0.x ELPDData
        missing = not any(k in res.index for k in _POINTWISE_KEYS)
    else:  # arviz 1.x ELPDData
        missing = getattr(res, "elpd_i", None) is None
    if missing:
        raise ValueError(f"model {name!r} has no pointwise values (it was computed with "
                         "pointwise=False); recompute it with pointwise=True")


def _read(name: str, res) -> _Model:
    from loo_adapt.evaluation.arviz import pointwise_from_elpd_data
    from loo_adapt.result import PointwiseLoo

    if not isinstance(res, PointwiseLoo):
        _require_pointwise(name, res)
    pw = res if isinstance(res, PointwiseLoo) else pointwise_from_elpd_data(res)
    if pw is not None:
        est = pw.estimates()
        n = pw.n_obs
        khat = np.where(np.isin(pw.method.astype(str), ("mixis", "refit")), np.nan,
                        np.asarray(pw.pareto_k_after, dtype=float))
        kind = "loo"
        if not isinstance(res, PointwiseLoo):
            kind = "kfold" if getattr(res, "kfold", None) is not None else _kind(res) or "loo"
        return _Model(np.asarray(pw.elpd_i, float), np.asarray(pw.p_loo_i, float),
                      np.asarray(pw.lpd_i, float), np.asarray(pw.mcse_elpd_i, float), khat,
                      float(pw.good_k), int(pw.n_samples), kind, is_verified(pw),
                      np.asarray(pw.method, dtype=object), est["se_elpd_loo"], est["p_loo"])
    if isinstance(res, pd.Series):  # arviz 0.x ELPDData
        keys = list(res.index)
        pointwise = next(k for k in _POINTWISE_KEYS if k in keys)
        factor = _SCALE.get(str(res.get("scale", "log")), 1.0)
        elpd_i = _arr(res[pointwise]) / factor
        p_key = next((k for k in keys if k.startswith("p_")), None)
        p = float(res[p_key]) if p_key else np.nan
        se = float(res["se"]) / abs(factor) if "se" in keys else np.nan
        khat = _arr(res["pareto_k"]) if "pareto_k" in keys else None
        kind = "waic" if pointwise == "waic_i" else "kfold" if "kfold" in pointwise else "loo"
        n_samples = int(res.get("n_samples", 0) or 0)
        good_k = float(res["good_k"]) if "good_k" in keys else _threshold(n_samples)
    else:  # arviz 1.x ELPDData
        elpd_i = _arr(res.elpd_i)
        p, se = float(getattr(res, "p", np.nan)), float(getattr(res, "se", np.nan))
        k = getattr(res, "pareto_k", None)
        khat = None if k is None else _arr(k)
        kind = _kind(res) or "loo"
        n_samples = int(getattr(res, "n_samples", 0) or 0)
        good_k = getattr(res, "good_k", None)
        good_k = _threshold(n_samples) if good_k is None else float(good_k)
    n = elpd_i.size
    p_i = getattr(res, "p_loo_i", None)
    p_loo_i = _arr(p_i) if p_i is not None and not isinstance(res, pd.Series) else np.full(
        n, np.nan)
    nan = np.full(n, np.nan)
    return _Model(elpd_i, p_loo_i, nan, nan.copy(), khat, good_k, n_samples, kind,
                  np.zeros(n, dtype=bool), np.full(n, "psis", dtype=object), se, p)


def _kind(res) -> str | None:
    kind = getattr(res, "kind", None)
    if kind is None and isinstance(res, pd.Series):
        return None
    return None if kind is None else ("kfold" if "kfold" in str(kind) else str(kind))


def _threshold(n_samples: int) -> float:
    """R loo's ``ps_khat_threshold(S)``: min(1 - 1 / log10(S), 0.7)."""
    if n_samples <= 1:
        return 0.7
    return float(min(1.0 - 1.0 / np.log10(n_samples), 0.7))


# --------------------------------------------------------------------------- ranges
def plausible_range(elpd_i, mcse_i, khat, good_k, *, p_loo_i=None, lpd_i=None,
                    high_k_factor: float = 2.0):
    """Low and high ends of where each row's elpd_i may plausibly lie (module docstring).

    Parameters
    ----------
    elpd_i, mcse_i : (n,) estimates and their Monte Carlo SE (NaN: unknown, width 0).
    khat : (n,) k-hat of the final importance-sampling estimate (NaN: none) or None.
    good_k : k-hat threshold.
    p_loo_i, lpd_i : (n,) effective number of parameters and full-posterior log predictive
        density per row (NaN or None where unknown).
    high_k_factor : how many times the influence ``p_loo_i`` a high-k-hat estimate may be
        off by.

    Returns
    -------
    low, high : (n,) arrays.

    Examples
    --------
    >>> low, high = plausible_range(np.array([-1.0, -2.0]), np.array([0.1, 0.1]),
    ...                             np.array([0.2, 0.9]), 0.7, p_loo_i=np.array([0.1, 1.5]),
    ...                             lpd_i=np.array([-0.9, -0.5]))
    >>> np.round(low, 6).tolist(), np.round(high, 6).tolist()
    ([-1.2, -5.0], [-0.8, -0.5])
    """
    elpd_i = np.asarray(elpd_i, dtype=float)
    n = elpd_i.size

    def col(x):
        return np.full(n, np.nan) if x is None else np.asarray(x, dtype=float)

    mcse, p_i, lpd = col(mcse_i), col(p_loo_i), col(lpd_i)
    k = col(khat)
    m2 = np.where(np.isfinite(mcse), 2.0 * mcse, 0.0)
    low, high = elpd_i - m2, elpd_i + m2
    high_k = np.isfinite(k) & (k > good_k)
    infl = np.fmax(np.where(np.isfinite(p_i), np.maximum(p_i, 0.0), np.nan),
                   np.where(np.isfinite(mcse), mcse, np.nan))
    infl = np.where(np.isfinite(infl), infl, 1.0)  # nothing known: one nat
    low = np.where(high_k, elpd_i - high_k_factor * infl, low)
    up = np.where(np.isfinite(lpd), np.fmax(lpd, elpd_i + m2), elpd_i + high_k_factor * infl)
    high = np.where(high_k, up, high)
    return low, high


def _verify_call(model: _Model, rows: np.ndarray) -> str:
    """The call that would verify ``rows`` of one model ("" when all are verified); the
    advice of `loo_adapt.loo`'s own warning."""
    from loo_adapt.advice import PROGRAM_METHODS, next_call

    methods = {str(m) for m in model.method[rows]}
    return next_call(had_program=bool(methods & set(PROGRAM_METHODS)),
                     n_unverified=int(rows.size))


# --------------------------------------------------------------------------- weights
def _arviz_weights(models: dict, method: str) -> dict:
    """Weights from the installed arviz's ``compare`` (stacking / pseudo-BMA)."""
    import arviz as az

    from loo_adapt.evaluation.arviz import arviz_major, to_elpd_data
    from loo_adapt.result import PointwiseLoo

    models = {k: to_elpd_data(v) if isinstance(v, PointwiseLoo) else v
              for k, v in models.items()}
    kwargs = {"method": method}
    if arviz_major() >= 1:
        kwargs["round_to"] = "none"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # arviz repeats the k-hat diagnostics shown here
        table = az.compare(models, **kwargs)
    return {str(name): float(w) for name, w in table["weight"].items()}


# --------------------------------------------------------------------------- verb
def compare(models: dict, *, weights=("stacking", "pseudo-BMA"), high_k_factor: float = 2.0):
    """Compare models by elpd as R loo's ``loo_compare`` and arviz's ``compare`` do, and
    say how much of each difference rests on rows nothing verified.

    Parameters
    ----------
    models : dict name -> result: `loo_adapt.loo` results (either arviz line), plain arviz
        ``ELPDData`` with pointwise values (``az.loo(..., pointwise=True)``; arviz 0.x WAIC
        too), or `PointwiseLoo`.  All must have the same observations.
    weights : arviz ``compare`` methods whose weights are added (``"stacking"``,
        ``"pseudo-BMA"``, ``"BB-pseudo-BMA"``); each becomes ``weight_<method>`` (lower case,
        "-" as "_"); ``()`` for none.
    high_k_factor : width of the plausible range of a high-k-hat row, in units of its
        ``p_loo_i`` (see `plausible_range`).

    Returns
    -------
    CompareFrame
        A pandas DataFrame indexed by model name, best first, with the columns of
        ``COLUMNS`` (R loo's ``elpd_diff``, ``se_diff``, ``p_worse``, ``diag_diff``,
        ``diag_elpd``; ``elpd_loo`` is elpd of whatever the results estimate: LOO, k-fold or
        WAIC).  ``print`` shows R loo's layout followed by the unverified rows per pair.

    Raises
    ------
    ValueError
        Fewer than two models, models with different numbers of observations, a result
        computed with ``pointwise=False`` (an ELPDData without pointwise values; refused
        on both arviz lines and whatever ``weights`` is, even when ``.loo_adapt`` keeps the
        arrays, as arviz's ``compare`` refuses it) or with a non-finite elpd_i.

    Warns
    -----
    UserWarning
        Comparing LOO with k-fold results (as R loo); more than 11 models whose differences
        may be due to chance (McLatchie and Vehtari's order-statistic check, as R loo).

    Examples
    --------
    >>> import loo_adapt
    >>> ll = np.random.default_rng(0).normal(-1.0, 0.2, size=(2, 400, 30))
    >>> cmp = compare({"a": loo_adapt.loo(ll), "b": loo_adapt.loo(ll - 0.1)}, weights=())
    >>> cmp.index.tolist(), round(float(cmp.loc["b", "elpd_diff"]), 6)
    (['a', 'b'], -3.0)
    """
    if not isinstance(models, dict) or len(models) < 2:
        raise ValueError("compare requires a dict of at least two models, name -> result")
    names = [str(k) for k in models]
    read = {name: _read(name, res) for name, res in zip(names, models.values())}
    counts = {name: m.elpd_i.size for name, m in read.items()}
    if len(set(counts.values())) > 1:
        detail = ", ".join(f"'{k}' ({v})" for k, v in counts.items())
        raise ValueError("All models must have the same number of observations, but models "
                         f"have inconsistent observation counts: {detail}")
    for name, m in read.items():
        bad = np.flatnonzero(~np.isfinite(m.elpd_i))
        if bad.size:
            from loo_adapt.result import observation_label

            raise ValueError(f"model {name!r} has non-finite pointwise elpd at observations "
                             f"{observation_label(bad)}; compare needs every row")
    kinds = {m.kind for m in read.values()}
    if "kfold" in kinds and "loo" in kinds:
        warnings.warn("Comparing LOO-CV to K-fold-CV. For a more accurate comparison use the "
                      "same number of folds or loo for all models compared.", UserWarning,
                      stacklevel=2)
    totals = {name: float(np.sum(m.elpd_i)) for name, m in read.items()}
    order = sorted(names, key=lambda k: -totals[k])  # stable: ties keep the given order
    best = read[order[0]]
    n = best.elpd_i.size
    rows = []
    for name in order:
        m = read[name]
        diff = m.elpd_i - best.elpd_i
        elpd_diff = float(np.sum(diff))
        se_diff = float(np.sqrt(n) * np.std(diff, ddof=1)) if n > 1 else np.nan
        p_worse = _p_worse(elpd_diff, se_diff)
        rows.append(dict(model=name, elpd_loo=totals[name], se_elpd_loo=m.se, p_loo=m.p,
                         elpd_diff=elpd_diff, se_diff=se_diff, p_worse=p_worse,
                         diag_diff=_diag_diff(n, elpd_diff), diag_elpd=_diag_elpd(m),
                         **_unverified(name == order[0], m, best, diff, high_k_factor)))
    frame = CompareFrame(pd.DataFrame(rows).set_index("model"))
    for method in weights:
        col = "weight_" + method.lower().replace("-", "_")
        w = _arviz_weights(models, method)
        frame[col] = [w[name] for name in frame.index]
    cols = [c for c in COLUMNS if c in frame.columns]
    cols += [c for c in frame.columns if c not in cols]
    frame = CompareFrame(frame[cols])
    _order_stat_check(read, order)
    return frame


def _p_worse(elpd_diff: float, se_diff: float) -> float:
    """R's ``pnorm(0, elpd_diff, se_diff)``, NaN where elpd_diff == 0."""
    if elpd_diff == 0.0 or not np.isfinite(se_diff):
        return np.nan
    if se_diff == 0.0:
        return 0.0 if 0.0 < elpd_diff else 1.0
    return float(ndtr(-elpd_diff / se_diff))


def _diag_diff(n: int, elpd_diff: float) -> str:
    if elpd_diff == 0.0:
        return ""
    if n < 100:
        return "N < 100"
    return "|elpd_diff| < 4" if elpd_diff > -4.0 else ""


def _diag_elpd(m: _Model) -> str:
    if m.khat is None:
        return ""
    k = np.asarray(m.khat, dtype=float)
    count = int(np.sum(np.isfinite(k) & (k > m.good_k)))
    return f"{count} k_psis > {round(m.good_k, 2):g}" if count else ""


def _unverified(is_best: bool, m: _Model, best: _Model, diff: np.ndarray,
                high_k_factor: float) -> dict:
    out = dict(n_unverified=0, elpd_diff_unverified=0.0, diff_low=float(np.sum(diff)),
               diff_high=float(np.sum(diff)), may_flip=False, verify="")
    if is_best:
        out.update(n_unverified=int(np.sum(~best.verified)), diff_low=np.nan,
                   diff_high=np.nan, elpd_diff_unverified=np.nan,
                   verify=_verify_call(best, np.flatnonzero(~best.verified)))
        return out
    bad = ~(m.verified & best.verified)
    lo_m, hi_m, bias_m, var_m = _sides(m, high_k_factor)
    lo_b, hi_b, bias_b, var_b = _sides(best, high_k_factor)
    # high-k-hat rows (bias) move to the ends of their ranges together; the Monte Carlo
    # errors of the others are independent across rows and add in quadrature
    spread = 2.0 * math.sqrt(float(np.sum(var_m) + np.sum(var_b)))
    total = float(np.sum(diff))
    low = total + float(np.sum(np.where(bias_m, lo_m - m.elpd_i, 0.0))
                        - np.sum(np.where(bias_b, hi_b - best.elpd_i, 0.0))) - spread
    high = total + float(np.sum(np.where(bias_m, hi_m - m.elpd_i, 0.0))
                         - np.sum(np.where(bias_b, lo_b - best.elpd_i, 0.0))) + spread
    calls = [c for c in (_verify_call(m, np.flatnonzero(~m.verified)),
                         _verify_call(best, np.flatnonzero(~best.verified))) if c]
    out.update(n_unverified=int(bad.sum()), elpd_diff_unverified=float(np.sum(diff[bad])),
               diff_low=low, diff_high=high,
               may_flip=bool(high >= 0.0) if bad.any() else False,
               verify="; ".join(dict.fromkeys(calls)))
    return out


def _sides(m: _Model, high_k_factor: float):
    """Per row of one model: range ends, whether the row is a high-k-hat (bias) row, and
    the Monte Carlo variance of an unverified row otherwise (0 for verified rows)."""
    low, high = plausible_range(m.elpd_i, m.mcse_i, m.khat, m.good_k, p_loo_i=m.p_loo_i,
                                lpd_i=m.lpd_i, high_k_factor=high_k_factor)
    k = np.full(m.elpd_i.size, np.nan) if m.khat is None else np.asarray(m.khat, float)
    bias = ~m.verified & np.isfinite(k) & (k > m.good_k)
    mcse = np.where(np.isfinite(m.mcse_i), m.mcse_i, 0.0)
    var = np.where(~m.verified & ~bias, mcse**2, 0.0)
    return low, high, bias, var


def _order_stat_check(read: dict, order: list) -> None:
    """R loo's ``loo_order_stat_check`` (McLatchie and Vehtari 2023) for > 11 models."""
    if len(read) <= 11:
        return
    from scipy.stats import norm

    base = read[order[len(order) // 2]]
    diffs = np.array([np.sum(read[k].elpd_i - base.elpd_i) for k in order])
    trunc = diffs[diffs >= np.median(diffs)]
    sd = math.sqrt(np.sum(trunc**2) / max(np.sum(~np.isnan(trunc)), 1))
    if np.max(diffs) <= norm.ppf(1 - 1 / (2 * (len(read) - 1)), scale=sd):
        warnings.warn("Difference in performance potentially due to chance. See McLatchie and "
                      "Vehtari (2023) for details.", UserWarning, stacklevel=3)


# --------------------------------------------------------------------------- printing
def _fr(values, digits: int) -> list[str]:
    """R's ``format(round(x, digits), nsmall = digits)`` of a column (NA for NaN)."""
    out = []
    for v in values:
        v = float(v)
        out.append("NA" if not np.isfinite(v) else f"{round(v, digits) + 0.0:.{digits}f}")
    return out


def _table(columns: dict) -> str:
    """print.data.frame(quote = FALSE, row.names = FALSE): right-aligned, one space."""
    widths = {k: max([len(k)] + [len(c) for c in v]) for k, v in columns.items()}
    n = len(next(iter(columns.values())))
    lines = ["".join(" " + k.rjust(widths[k]) for k in columns)]
    for i in range(n):
        lines.append("".join(" " + columns[k][i].rjust(widths[k]) for k in columns))
    return "\n".join(lines)


def format_compare(frame, digits: int = 1, *, p_worse: bool = True, simplify: bool = True,
                   unverified: bool = True) -> str:
    """R loo's ``print(loo_compare(...))`` layout, then the unverified rows per pair.

    Parameters
    ----------
    frame : the result of `compare`.
    digits : decimals of elpd columns (``p_worse`` has 2, as R).
    p_worse : show ``p_worse``, ``diag_diff``, ``diag_elpd`` (R's ``p_worse``).
    simplify : False adds elpd_loo, se_elpd_loo, p_loo and the weights (R's ``simplify``).
    unverified : add the section on rows without a verified estimate.

    Returns
    -------
    str

    Examples
    --------
    >>> from loo_adapt.result import PointwiseLoo
    >>> def res(e):
    ...     e = np.asarray(e, dtype=float)
    ...     return PointwiseLoo(e, *(np.zeros(3),) * 3, np.zeros(3), 0.7, 100, np.ones(3))
    >>> cmp = compare({"m1": res([-1.0, -2.0, -1.5]), "m2": res([-1.5, -2.5, -1.7])},
    ...               weights=())
    >>> print(format_compare(cmp, unverified=False).splitlines()[2])
         m2      -1.2     0.3    1.00   N < 100
    """
    cols = {"model": [str(i) for i in frame.index],
            "elpd_diff": _fr(frame["elpd_diff"], digits),
            "se_diff": _fr(frame["se_diff"], digits)}
    if p_worse:
        cols["p_worse"] = _fr(frame["p_worse"], 2)
        cols["diag_diff"] = [str(v) for v in frame["diag_diff"]]
        cols["diag_elpd"] = [str(v) for v in frame["diag_elpd"]]
    if not simplify:
        for c in ("elpd_loo", "se_elpd_loo", "p_loo"):
            cols[c] = _fr(frame[c], digits)
        for c in [c for c in frame.columns if c.startswith("weight_")]:
            cols[c] = _fr(frame[c], 2)
    text = _table(cols)
    flagged = any(str(v) for v in frame["diag_diff"]) or any(str(v) for v in frame["diag_elpd"])
    if flagged and p_worse:
        text += "\n\n" + _GLOSSARY
    if unverified and "n_unverified" in frame.columns:
        rest = frame.iloc[1:]
        if len(rest) and int(frame["n_unverified"].max()) > 0:
            text += ("\n\nRows without a verified estimate (either model; PSIS rows are accepted "
                     "on k-hat alone), each model vs " + str(frame.index[0]) + ":\n")
            text += _table({
                "model": [str(i) for i in rest.index],
                "n_unverified": [str(int(v)) for v in rest["n_unverified"]],
                "elpd_diff_unverified": _fr(rest["elpd_diff_unverified"], digits),
                "elpd_diff_range": [f"[{a}, {b}]" for a, b in zip(
                    _fr(rest["diff_low"], digits), _fr(rest["diff_high"], digits))],
                "may_flip": ["yes" if v else "no" for v in rest["may_flip"]],
            })
            calls = [str(c) for c in frame["verify"] if str(c)]
            if calls:
                text += "\nverify with: " + " or ".join(dict.fromkeys(
                    c for cc in calls for c in cc.split("; ")))
    return text


class CompareFrame(pd.DataFrame):
    """The DataFrame of `compare`; ``print`` shows R loo's layout (`format_compare`).

    Anything derived from it (slices, arithmetic) is a plain DataFrame.
    """

    @property
    def _constructor(self):
        return pd.DataFrame

    def __repr__(self) -> str:
        try:
            return format_compare(self)
        except (KeyError, ValueError, TypeError):
            return pd.DataFrame.__repr__(self)

    def __str__(self) -> str:
        return self.__repr__()


make_module_callable(__name__, compare)
