"""Is a results.json what `loo_adapt.evaluation.report.save_report` wrote?

`load_results` runs three checks before it builds a `PointwiseLoo`:

- **integrity**: the file's sha256 against the report folder's manifest
  (``loo-adapt-manifest.json``, written with the file), and the summary it carries (the
  list of unreliable observations, ``n_obs``) against its own per-row columns.  A mismatch
  means the file was edited after it was written: an error, or with ``verify=False`` a
  loud warning (the file is then loaded as it is);
- **structure**: every per-observation column has one value per observation, a dtype of
  the ones results.json stores (float, bool, integer, object) and values of that type;
- anything else that does not fit a `PointwiseLoo` is one error naming the file.

A file without a manifest (copied alone, or written before manifests existed) cannot be
checked against one; its structure and its summary still are.
"""

from __future__ import annotations

import hashlib
import math
import pathlib
import warnings

import numpy as np

__all__ = ["ResultsFileError", "check_columns", "check_fields", "check_integrity"]

#: dtypes a per-observation column of results.json may have (``_split_fields`` writes these)
_KINDS = {"f": (4, 8), "b": (1,), "i": (1, 2, 4, 8), "u": (1, 2, 4, 8)}
_NON_FINITE = ("NaN", "Infinity", "-Infinity")


class ResultsFileError(ValueError):
    """A results.json that is not what save_report wrote: edited, truncated or malformed."""


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _value_ok(v, kind: str) -> bool:
    if kind == "f":
        return _is_number(v) or v in _NON_FINITE or v is None
    if kind == "b":
        return isinstance(v, bool)
    if kind in "iu":
        return isinstance(v, int) and not isinstance(v, bool)
    return v is None or isinstance(v, (str, int, float, bool, dict, list))


def check_columns(path, pointwise: dict, dtypes: dict, n_obs=None) -> int:
    """Check the per-observation columns of a results.json; returns the number of rows.

    Parameters
    ----------
    path : the file (named in the errors).
    pointwise : column name -> list of values, as stored.
    dtypes : column name -> dtype string, as stored.
    n_obs : the file's ``n_obs`` entry, if any.

    Returns
    -------
    int

    Raises
    ------
    ResultsFileError
        Naming the file, the column and what is wrong with it.

    Examples
    --------
    >>> check_columns("r.json", {"elpd_i": [-1.0, "NaN"]}, {"elpd_i": "<f8"})
    2
    """
    def fail(msg):
        raise ResultsFileError(f"{path}: {msg}; it is not what loo_adapt wrote (edited or "
                               "damaged): write it again with save_report")

    if not isinstance(pointwise, dict) or not isinstance(dtypes, dict):
        fail("'pointwise' and 'dtypes' must be JSON objects")
    lengths = {}
    for name, values in pointwise.items():
        if values is None:
            continue
        if not isinstance(values, list):
            fail(f"column {name!r} is a {type(values).__name__}, not a list")
        dtype = dtypes.get(name)
        if dtype is None:
            fail(f"column {name!r} has no dtype in 'dtypes'")
        if dtype == "object":
            kind = "O"
        else:
            try:
                dt = np.dtype(dtype)
            except (TypeError, ValueError):
                fail(f"column {name!r} has the dtype {dtype!r}, which is not a numpy dtype")
            if dt.kind not in _KINDS or dt.itemsize not in _KINDS[dt.kind]:
                fail(f"column {name!r} has the dtype {dtype!r}; results.json stores only "
                     "float, bool, integer and object columns")
            kind = dt.kind
        bad = next((k for k, v in enumerate(values) if not _value_ok(v, kind)), None)
        if bad is not None:
            fail(f"column {name!r} (dtype {dtype}) holds {values[bad]!r} at row {bad}")
        if kind == "f" and any(_is_number(v) and not math.isfinite(v) for v in values):
            fail(f"column {name!r} holds a non-finite number not written as text")
        lengths[name] = len(values)
    if not lengths:
        fail("no per-observation columns")
    n = lengths.get("elpd_i", next(iter(lengths.values())))
    if n_obs is not None and (not _is_number(n_obs) or n_obs != n):
        fail(f"n_obs is {n_obs!r} but column 'elpd_i' has {n} values")
    wrong = {k: v for k, v in lengths.items() if v != n}
    if wrong:
        name, length = next(iter(wrong.items()))
        fail(f"column {name!r} has {length} values, 'elpd_i' has {n}"
             + (f" (and {len(wrong) - 1} more column(s) differ)" if len(wrong) > 1 else ""))
    return n


def check_fields(path, loaded) -> None:
    """The scalar fields of a loaded result have their types and ranges (a file without a
    manifest is checked this far).

    Parameters
    ----------
    path : the file (named in the errors).
    loaded : the `PointwiseLoo` built from it.

    Returns
    -------
    None

    Raises
    ------
    ResultsFileError
        Naming the file and the field.
    """
    def number(v):
        return _is_number(v) or isinstance(v, (np.integer, np.floating))

    problems = []
    if not (number(loaded.good_k) and 0 < float(loaded.good_k) <= 1):
        problems.append(f"good_k is {loaded.good_k!r}, not a number in (0, 1]")
    if not (number(loaded.n_samples) and float(loaded.n_samples) >= 1
            and float(loaded.n_samples) == int(loaded.n_samples)):
        problems.append(f"n_samples is {loaded.n_samples!r}, not a positive integer")
    if loaded.mcse_total is not None and not number(loaded.mcse_total):
        problems.append(f"mcse_total is {loaded.mcse_total!r}, not a number")
    if not isinstance(loaded.candidates, list) or not all(
            isinstance(c, dict) for c in loaded.candidates):
        problems.append("candidates is not a list of objects")
    if problems:
        raise ResultsFileError(f"{path}: " + "; ".join(problems) + "; it is not what "
                               "loo_adapt wrote (edited or damaged): write it again with "
                               "save_report")


def check_integrity(path: pathlib.Path, payload: bytes, data: dict, loaded, manifest,
                    verify: bool = True) -> None:
    """The file's hash against the manifest and its summary against its rows.

    Parameters
    ----------
    path : the results.json.
    payload : its bytes, as read.
    data : its parsed content.
    loaded : the `PointwiseLoo` built from it.
    manifest : the folder's manifest (`loo_adapt.evaluation.report.read_manifest`) or None.
    verify : raise on a mismatch (True), or warn loudly and go on (False).

    Returns
    -------
    None

    Raises
    ------
    ResultsFileError
        With ``verify=True``, when the file differs from what its manifest recorded or its
        summary contradicts its rows.
    """
    problems = []
    if manifest is not None:
        entry = next((f for f in manifest.get("files", [])
                      if isinstance(f, dict) and f.get("name") == path.name), None)
        if entry is None:
            problems.append(f"the folder's manifest does not list {path.name}, so it was not "
                            "written with this report")
        elif hashlib.sha256(payload).hexdigest() != entry.get("sha256"):
            problems.append(f"its sha256 differs from the one recorded in the manifest when "
                            f"it was written ({str(entry.get('sha256'))[:12]}...)")
    stated = data.get("unreliable")
    if isinstance(stated, list):
        actual = np.flatnonzero(loaded.unreliable).tolist()
        if stated != actual:
            diff = sorted(set(map(str, stated)) ^ set(map(str, actual)))
            problems.append(f"its summary lists {len(stated)} unreliable observation(s) but "
                            f"its rows mark {len(actual)} (they differ at {', '.join(diff[:5])})")
    if not problems:
        return
    text = f"{path} was modified after loo_adapt wrote it: " + "; ".join(problems)
    if verify:
        raise ResultsFileError(text + ". Write it again with save_report, or pass "
                               "verify=False to load it anyway (with a warning)")
    warnings.warn("LOADING A MODIFIED RESULTS FILE (verify=False): " + text
                  + "; its estimates and 'reliable' flags are not loo_adapt's", UserWarning,
                  stacklevel=3)
