"""Reports written to disk: results.json and the report folder.

* :func:`save_report` - summary.txt, results.json (every pointwise array), metrics.json and
  PNG figures in a directory; :func:`load_results` reads results.json back.
* :func:`results_dict` - the content of results.json, exact for every field.

The printed summaries (`format_summary`, `format_pointwise`) live in
`loo_adapt.evaluation.summary`, the folder's lock, staging and manifest in
`loo_adapt.evaluation.report_folder`; both are importable from here as before.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import warnings
from collections.abc import Mapping

import numpy as np

from loo_adapt.core._names import OLD_NAMES as _OLD_NAMES
from loo_adapt.evaluation.report_folder import (
    LOCK,
    MANIFEST,
    ReportBusyError,
    _Staging,
    _versions,
    read_manifest,
    report_lock,
)
from loo_adapt.evaluation.summary import (
    NO_KHAT,
    POINTWISE_LEGEND,
    _scale_of,
    as_pointwise,
    format_pointwise,
    format_summary,
    khat_counts,
    unreliable_reasons,
)
from loo_adapt.result import PointwiseLoo, observation_label

#: PointwiseLoo fields written to results.json, in this order.
POINTWISE_FIELDS = ("elpd_i", "p_loo_i", "lpd_i", "mcse_elpd_i", "pareto_k", "pareto_k_after",
                    "method", "rho", "loo_prob", "diagnostic", "reliable", "r_eff")

__all__ = ["format_summary", "format_pointwise", "khat_counts", "save_report",
           "load_results", "as_pointwise", "observation_label", "unreliable_reasons",
           "results_dict", "POINTWISE_FIELDS", "POINTWISE_LEGEND",
           # moved to summary / report_folder, importable from here as before
           "NO_KHAT", "MANIFEST", "LOCK", "ReportBusyError", "report_lock", "read_manifest"]


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


def _split_fields(res: PointwiseLoo) -> tuple[dict, dict, dict]:
    """Every dataclass field of the result: (per-observation lists, their dtypes, the rest).

    ``row_draws`` (each row's draws and weights, for LOO-PIT) and the per-fit MCSE blocks
    (``mcse_blocks``, ``row_block``: the total's MCSE they give is ``mcse_total``) are not
    stored; the notes about the blocks that still give a row (``block_notes``) are stored
    with the other notes."""
    pointwise, dtypes, rest = {}, {}, {}
    res = res.without_mcse_blocks()
    for f in dataclasses.fields(res):
        if f.name in ("row_draws", "mcse_blocks", "row_block", "block_notes"):
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

    Raises
    ------
    FileNotFoundError
        No results.json at ``path``.
    ValueError
        Not readable JSON, not a loo_adapt results.json, or (`ResultsFileError`) edited or
        damaged: see ``verify``.

    Warns
    -----
    UserWarning
        The file says it was written by another loo_adapt version (``versions.loo_adapt``)
        or with another ``encoding`` than this one writes (both values named; the file is
        still read); with ``verify=False``, a modified file.

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
    _warn_other_writer(path, data)
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


def _warn_other_writer(path: pathlib.Path, data: dict) -> None:
    """Warn when results.json says another loo_adapt version or another encoding wrote it.

    Neither is refused: the encoding is a description, not a version number, so whether
    this reader can read another one cannot be told from it; the structure checks that
    follow reject columns it cannot read.  A file that states neither (written before
    either was stored) is not warned about.
    """
    from loo_adapt import __version__

    versions = data.get("versions")
    written = versions.get("loo_adapt") if isinstance(versions, dict) else None
    if written is not None and str(written) != __version__:
        warnings.warn(f"{path} was written by loo_adapt {written}, but loo_adapt "
                      f"{__version__} is installed; it is read as this version writes "
                      "results.json, which may differ", UserWarning, stacklevel=3)
    encoding = data.get("encoding")
    if encoding is not None and encoding != ENCODING:
        warnings.warn(f"{path} states the encoding {encoding!r}, but this loo_adapt "
                      f"({__version__}) writes and reads {ENCODING!r}; values it encodes "
                      "otherwise may be read wrongly or refused", UserWarning, stacklevel=3)


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
    if not str(out_dir).strip():  # Path("") is the current folder: never what was meant
        raise ValueError("out_dir is empty; give a folder for the report")
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
