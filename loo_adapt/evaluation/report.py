"""Printed summaries in the style of R loo's print method, and reports written to disk.

* :func:`format_summary` - estimates with SE, MCSE, the Pareto-k table before and after
  adaptation, counts per estimator, and the observations that still need a refit.
* :func:`format_pointwise` - one line per observation: estimator, k-hat before / after (or
  the MixIS / refit diagnostic), elpd_loo_i, MCSE, LOO probability.
* :func:`save_report` - summary.txt, results.json (every pointwise array), metrics.json and
  PNG figures in a directory; :func:`load_results` reads results.json back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import json
import math
import os
import pathlib
import shutil
import uuid
from collections.abc import Mapping

import numpy as np

from loo_adapt.core._names import OLD_NAMES as _OLD_NAMES
from loo_adapt.core.fmt import comparison
from loo_adapt.result import PointwiseLoo, observation_label

_SCALE_FACTOR = {"log": 1.0, "negative_log": -1.0, "deviance": -2.0}

#: Estimators without a Pareto k-hat of their own (their diagnostic is an ESS).
NO_KHAT = ("mixis", "refit")

#: PointwiseLoo fields written to results.json, in this order.
POINTWISE_FIELDS = ("elpd_i", "p_loo_i", "lpd_i", "mcse_elpd_i", "pareto_k", "pareto_k_after",
                    "method", "rho", "loo_prob", "diagnostic", "reliable", "r_eff")

__all__ = ["format_summary", "format_pointwise", "khat_counts", "save_report",
           "load_results", "as_pointwise", "observation_label", "unreliable_reasons",
           "results_dict", "POINTWISE_FIELDS", "POINTWISE_LEGEND"]


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
                     "pooled) MCSE small enough; refit: exact refit)")
    for note in getattr(result, "notes", None) or ():
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


# --------------------------------------------------------------------------- JSON
#: How results.json writes values JSON cannot hold (stated in the file as "encoding").
ENCODING = ("floats: NaN, +inf and -inf are the strings 'NaN', 'Infinity', '-Infinity' in "
            "numeric lists (their dtype is in 'dtypes'), and {'$float': ...} elsewhere; "
            "tuples are {'$tuple': [...]}; arrays other than per-observation ones are "
            "{'$ndarray': {'dtype', 'shape', 'values'}}")

_NON_FINITE = {"NaN": np.nan, "Infinity": np.inf, "-Infinity": -np.inf}


def _float_text(v: float) -> str:
    return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")


def _plain_list(values: np.ndarray) -> list:
    """A 1-D array as a JSON list: numbers, strings, booleans; non-finite floats as text."""
    if values.dtype.kind == "f":
        return [float(v) if math.isfinite(v) else _float_text(float(v)) for v in values]
    if values.dtype.kind == "c":
        raise TypeError("complex arrays cannot be stored in results.json")
    return [_encode(v) for v in values.tolist()]


def _encode(value, where: str = "value"):
    """Exact JSON form of a value (see `ENCODING`); raises TypeError for other types."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else {"$float": _float_text(v)}
    if isinstance(value, np.ndarray):
        return {"$ndarray": {"dtype": value.dtype.str if value.dtype.kind != "O" else "object",
                             "shape": list(value.shape),
                             "values": _plain_list(value.reshape(-1))}}
    if isinstance(value, tuple):
        return {"$tuple": [_encode(v, where) for v in value]}
    if isinstance(value, list):
        return [_encode(v, where) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _encode(v, where) for k, v in value.items()}
    raise TypeError(f"{where} of type {type(value).__name__} cannot be stored in results.json; "
                    "store plain numbers, strings, lists, dicts or numpy arrays")


def _decode(value):
    """Inverse of `_encode`."""
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {"$float"}:
            return float(_NON_FINITE[value["$float"]])
        if set(value) == {"$tuple"}:
            return tuple(_decode(v) for v in value["$tuple"])
        if set(value) == {"$ndarray"}:
            spec = value["$ndarray"]
            return _array(spec["values"], spec["dtype"]).reshape(spec["shape"])
        return {k: _decode(v) for k, v in value.items()}
    return value


def _array(values: list, dtype: str) -> np.ndarray:
    if dtype == "object":
        out = np.empty(len(values), dtype=object)
        out[:] = [_decode(v) for v in values]
        return out
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return np.array([_NON_FINITE[v] if isinstance(v, str) else np.nan if v is None else v
                         for v in values], dtype=dt)
    return np.array(values, dtype=dt)


def _json_safe(value):
    """Plain JSON for the summaries (estimates, metrics): non-finite floats as strings."""
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return _json_safe(value.tolist())
    if isinstance(value, (float, np.floating)) and not math.isfinite(float(value)):
        return _float_text(float(value))
    return _encode(value)


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    from loo_adapt import __version__

    out = {"loo_adapt": __version__, "numpy": np.__version__}
    for dist in ("arviz", "scipy", "matplotlib"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            pass
    return out


def _split_fields(res: PointwiseLoo) -> tuple[dict, dict, dict]:
    """Every dataclass field of the result: (per-observation lists, their dtypes, the rest).

    ``row_draws`` (each row's draws and weights, for LOO-PIT) are not stored."""
    pointwise, dtypes, rest = {}, {}, {}
    for f in dataclasses.fields(res):
        if f.name == "row_draws":
            continue
        value = getattr(res, f.name)
        if isinstance(value, np.ndarray) and value.ndim == 1 and len(value) == res.n_obs:
            pointwise[f.name] = _plain_list(value)
            dtypes[f.name] = "object" if value.dtype.kind == "O" else value.dtype.str
        else:
            rest[f.name] = _encode(value, where=f"PointwiseLoo.{f.name}")
    return pointwise, dtypes, rest


def results_dict(result, *, scale: str | None = None, name: str = "loo") -> dict:
    """The content of results.json: summaries, then every field of the `PointwiseLoo`.

    Parameters
    ----------
    result : the ELPDData from `loo_adapt.loo` or a `PointwiseLoo`.
    scale : "log", "negative_log" or "deviance"; default the result's own.
    name : label stored as "name".

    Returns
    -------
    dict
        JSON-ready (no NaN or inf: see `ENCODING`); :func:`load_results` reads it back.

    Examples
    --------
    >>> import numpy as np
    >>> from loo_adapt.result import PointwiseLoo, observation_label
    >>> res = PointwiseLoo(*(np.zeros(2),) * 4, np.array([0.2, np.inf]), 0.7, 100, 1.0)
    >>> results_dict(res)["pointwise"]["pareto_k"]
    [0.2, 'Infinity']
    """
    res = as_pointwise(result)
    scale = _scale_of(result, scale)
    pointwise, dtypes, rest = _split_fields(res)
    return {
        "name": name,
        "scale": scale,
        "encoding": ENCODING,
        "n_obs": res.n_obs,
        "n_samples": int(res.n_samples),
        "good_k": float(res.good_k),
        "estimates": _json_safe(res.estimates()),
        "n_unreliable": int(np.sum(res.unreliable)),
        "unreliable": np.flatnonzero(res.unreliable).tolist(),
        "reasons": {str(i): r for i, r in unreliable_reasons(res).items()},
        "n_khat_only": int(np.sum(res.khat_only)),
        "provenance": res.provenance.tolist(),
        "khat_counts_before": khat_counts(res.pareto_k, res.good_k).tolist(),
        "pointwise": pointwise,
        "dtypes": dtypes,
        "fields": rest,
        "candidates": rest.get("candidates", []),
        "versions": _versions(),
    }


def load_results(path, *, verify: bool = True) -> PointwiseLoo:
    """The `PointwiseLoo` stored in a results.json by :func:`save_report`, field for field.

    Parameters
    ----------
    path : the results.json file or the report directory holding it.
    verify : check the file against the sha256 its folder's manifest recorded and its
        summary against its rows (`loo_adapt.evaluation.results_check`): a modified file is
        an error; False loads it with a loud warning instead.  Columns of the wrong length,
        dtype or type are an error either way.

    Returns
    -------
    PointwiseLoo
        Equal to the saved one in every field (+-inf, NaN, strings, booleans, candidates,
        ``mcse_total``); fields missing from older files take their defaults.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> from loo_adapt.result import PointwiseLoo, observation_label
    >>> res = PointwiseLoo(*(np.zeros(2),) * 4, np.array([0.2, np.inf]), 0.7, 100, 1.0)
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = save_report(res, d, figures=False)
    ...     load_results(d).pareto_k
    array([0.2, inf])
    """
    path = pathlib.Path(path)
    if path.is_dir():
        path = path / "results.json"
    if not path.is_file():
        raise FileNotFoundError(f"no results file {str(path)!r}")
    from loo_adapt.evaluation import results_check as _check

    try:
        payload = path.read_bytes()
        data = json.loads(payload.decode("utf-8"))
        pw = data["pointwise"]
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not readable JSON ({err}); was it written completely?"
                         ) from None
    except (KeyError, TypeError):
        raise ValueError(f"{path} is not a loo_adapt results.json (no 'pointwise')") from None
    dtypes, rest = data.get("dtypes"), data.get("fields")
    if dtypes is None:  # written before every field was stored: null meant NaN
        dtypes = {k: ("object" if k == "method" else "|b1" if k == "reliable" else "<f8")
                  for k in pw if pw[k] is not None}
        rest = {"good_k": data["khat_threshold"], "n_samples": data["n_samples"],
                "candidates": [{k: (np.nan if v is None else v) for k, v in c.items()}
                               for c in data.get("candidates", [])]}
    # files written before the per-row ``_i`` / arviz names (`PointwiseLoo` field renames)
    pw = {_OLD_NAMES.get(k, k): v for k, v in pw.items()}
    dtypes = {_OLD_NAMES.get(k, k): v for k, v in dtypes.items()}
    rest = {_OLD_NAMES.get(k, k): v for k, v in rest.items()}
    _check.check_columns(path, pw, dtypes, data.get("n_obs"))
    kwargs = {}
    try:
        for f in dataclasses.fields(PointwiseLoo):
            if not f.init:
                continue
            if f.name in dtypes and pw.get(f.name) is not None:
                kwargs[f.name] = _array(pw[f.name], dtypes[f.name])
            elif f.name in rest:
                kwargs[f.name] = _decode(rest[f.name])
        loaded = PointwiseLoo(**kwargs)
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as err:
        raise _check.ResultsFileError(
            f"{path}: not a loo_adapt result ({type(err).__name__}: {err}); was it edited? "
            "Write it again with save_report") from None
    _check.check_integrity(path, payload, data, loaded, read_manifest(path.parent), verify)
    _check.check_fields(path, loaded)
    return loaded


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

    Returns
    -------
    list of pathlib.Path
        The report files: ``summary.txt`` (summary + pointwise table), ``results.json``
        (estimates with SE and every field of the `PointwiseLoo`, exactly: see `ENCODING`;
        :func:`load_results` reads it back), ``khat.png``, ``khat_hist.png``,
        ``khat_candidates.png`` (when candidates exist), and when y and LOO probabilities
        are known ``metrics.json`` (`metrics.classification_report` per label), ``roc.png``,
        ``pr.png``, ``calibration.png``.

    Notes
    -----
    Written atomically: the files are staged in a hidden folder inside ``out_dir`` and
    renamed into place only when all are written, so an error (a full disk included) leaves
    the previous report intact.  ``loo-adapt-manifest.json`` then names the run (id, time,
    versions, files); the previous run's files that this run did not write are removed
    (only files its manifest lists, never other files).  A second process writing into the
    same folder at the same time is refused with `ReportBusyError`.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> from loo_adapt.result import PointwiseLoo, observation_label
    >>> res = PointwiseLoo(*(np.zeros(3),) * 5, 0.7, 100, 1.0)
    >>> with tempfile.TemporaryDirectory() as d:
    ...     [p.name for p in save_report(res, d, figures=False)]
    ['summary.txt', 'results.json']
    """
    res = as_pointwise(result)
    scale = _scale_of(result, scale)
    out = pathlib.Path(out_dir)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"{str(out)!r} exists and is not a directory")
    y_arr, prob_map = _probabilities(res, y, probs, name)
    # everything is computed before the folder is touched: a failure leaves it as it was
    text = (f"{name}\n{'=' * len(name)}\n\n{format_summary(res, scale=scale)}\n\n"
            f"Pointwise (observation i is 0-based; Stan's log_lik index is i + 1):\n"
            f"{format_pointwise(res)}\n\n{POINTWISE_LEGEND}\n")
    results = json.dumps(results_dict(result, scale=scale, name=name), indent=1,
                         allow_nan=False)
    metrics_text = None
    if y_arr is not None and prob_map:
        from loo_adapt.evaluation import metrics

        report = {label: metrics.classification_report(y_arr, p, n_boot=n_boot, seed=seed)
                  for label, p in prob_map.items()}
        metrics_text = json.dumps(_json_safe(report), indent=1, allow_nan=False)

    out.mkdir(parents=True, exist_ok=True)
    with report_lock(out), _Staging(out, name) as stage:
        stage.write_text("summary.txt", text)
        stage.write_text("results.json", results)
        if metrics_text is not None:
            stage.write_text("metrics.json", metrics_text)
        if figures:
            _figures(res, stage, y_arr, prob_map)
        return stage.commit()


# --------------------------------------------------------------------------- atomic folder
#: The file naming the run that wrote a report folder and the files it wrote.
MANIFEST = "loo-adapt-manifest.json"
#: Lock file (holding the writer's pid) while a run writes into a report folder.
LOCK = ".loo-adapt.lock"
_STAGING = ".loo-adapt-staging-"
_HELD: set[str] = set()


class ReportBusyError(RuntimeError):
    """Another live process is writing into the same report folder."""


def _pid_alive(pid: int) -> bool:
    if os.name == "nt":  # os.kill(pid, 0) would send Ctrl-C there: assume alive
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _acquire(lock: pathlib.Path) -> None:
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                pid = int(lock.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                pid = None
            if pid is not None and pid != os.getpid() and not _pid_alive(pid):
                lock.unlink(missing_ok=True)  # left by a run that died
                continue
            who = f"pid {pid}" if pid is not None else "unknown pid"
            raise ReportBusyError(
                f"{lock.parent} is being written by another loo-adapt run ({who}); wait for "
                f"it to finish or choose another output folder (delete {lock.name} there "
                "only if no run is active)") from None
        with os.fdopen(fd, "w") as fh:
            fh.write(f"{os.getpid()}\n")
        return
    raise ReportBusyError(f"cannot lock {lock}: it keeps reappearing; choose another folder")


@contextlib.contextmanager
def report_lock(out_dir):
    """Hold the lock of a report folder: a second writer is refused with `ReportBusyError`.

    Re-entrant within one process (the CLI holds it for a whole run and `save_report`
    takes it again); a lock left by a process that no longer exists is taken over.

    Parameters
    ----------
    out_dir : the report folder (created if needed).

    Returns
    -------
    A context manager.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d, report_lock(d):
    ...     pass
    """
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    lock = out / LOCK
    key = str(lock.resolve())
    if key in _HELD:
        yield
        return
    _acquire(lock)
    _HELD.add(key)
    try:
        yield
    finally:
        _HELD.discard(key)
        lock.unlink(missing_ok=True)


def read_manifest(out_dir) -> dict | None:
    """The manifest of the run that last completed a report in ``out_dir`` (None if none).

    Parameters
    ----------
    out_dir : a report folder.

    Returns
    -------
    dict or None
        run_id, time (UTC), name, versions and files (name, bytes, sha256).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     read_manifest(d) is None
    True
    """
    path = pathlib.Path(out_dir) / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("files"), list) else None


class _Staging:
    """Files written into a hidden folder inside the target, moved in place by `commit`.

    Until `commit` the previous report is untouched; on any error (a full disk included)
    the staged files are removed and the error propagates.  `commit` renames each file
    (atomic on one file system), writes the manifest, then removes the files the previous
    manifest listed that this run did not write - never any other file.
    """

    def __init__(self, out: pathlib.Path, name: str):
        self.out, self.name = out, name
        self.run_id = uuid.uuid4().hex
        self.dir = out / f"{_STAGING}{self.run_id}"
        self.names: list[str] = []

    def __enter__(self):
        for old in self.out.glob(f"{_STAGING}*"):  # left by a run that was killed
            shutil.rmtree(old, ignore_errors=True)
        self.dir.mkdir()
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.dir, ignore_errors=True)
        return False

    def path(self, filename: str) -> pathlib.Path:
        self.names.append(filename)
        return self.dir / filename

    def write_text(self, filename: str, text: str) -> None:
        with open(self.path(filename), "w", encoding="utf-8") as fh:
            fh.write(text)

    def commit(self) -> list[pathlib.Path]:
        previous = read_manifest(self.out)
        files = []
        for filename in self.names:
            data = (self.dir / filename).read_bytes()
            files.append({"name": filename, "bytes": len(data),
                          "sha256": hashlib.sha256(data).hexdigest()})
        manifest = {"run_id": self.run_id,
                    "time": datetime.datetime.now(datetime.UTC).isoformat(),
                    "name": self.name, "writer": "loo_adapt.evaluation.report.save_report",
                    "versions": _versions(), "files": files}
        tmp = self.dir / MANIFEST
        tmp.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        for filename in self.names:
            os.replace(self.dir / filename, self.out / filename)
        os.replace(tmp, self.out / MANIFEST)
        for item in (previous or {}).get("files", []):
            old = item.get("name") if isinstance(item, dict) else None
            if (isinstance(old, str) and old not in self.names and old == pathlib.Path(old).name
                    and old not in (MANIFEST, LOCK)):
                with contextlib.suppress(OSError):
                    (self.out / old).unlink()
        return [self.out / filename for filename in self.names]


def _figures(res: PointwiseLoo, stage: _Staging, y, prob_map) -> None:
    # Figures without pyplot: no backend switch, nothing left open in the caller's session.
    from matplotlib.figure import Figure

    from loo_adapt.evaluation import plots

    def new(figsize):
        fig = Figure(figsize=figsize, layout="constrained")  # room for outside legends
        return fig, fig.add_subplot()

    def save(fig, filename):
        fig.savefig(stage.path(filename), dpi=110, bbox_inches="tight")

    fig, ax = new((9, 4))
    plots.plot_khat(res, ax=ax)  # its title says whether anything was adapted
    save(fig, "khat.png")
    fig, ax = new((7, 4))
    plots.plot_khat_hist(res, ax=ax)
    save(fig, "khat_hist.png")
    if res.candidates:
        n_obs = len({c["i"] for c in res.candidates})
        fig, ax = new((max(7.5, 0.35 * n_obs + 1.5), 4.5))
        plots.plot_khat_candidates(res, ax=ax)
        save(fig, "khat_candidates.png")
    if y is not None and prob_map:
        for func, filename in ((plots.plot_roc, "roc.png"), (plots.plot_pr, "pr.png"),
                               (plots.plot_calibration, "calibration.png")):
            fig, ax = new((5, 6))
            func(y, prob_map, ax=ax)
            save(fig, filename)
