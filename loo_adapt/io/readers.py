"""Readers: turn a fit from CmdStan / cmdstanpy / ArviZ / stanli / plain arrays into `Draws`.

Every reader returns a :class:`loo_adapt.draws.Draws` whose variables keep Stan's own names and
shapes (``W1`` declared ``matrix[30, 3]`` -> ``(chains, draws, 30, 3)``). Stan writes array
elements column-major (``W1.1.1, W1.2.1, ...``); we place every column by the index in its name,
so the result does not depend on the column order of the source.

Per-draw densities of approximate methods (what importance sampling needs):

=============  ============================  =========================================
method         log_p (target, unconstrained)  log_q (approximation)
=============  ============================  =========================================
advi           ``log_p__``                    ``log_g__`` (constants dropped, see below)
laplace        ``log_p__``                    ``log_q__``
pathfinder     ``lp__``                       ``lp_approx__``
=============  ============================  =========================================

Both are on Stan's unconstrained space with the Jacobian included. CmdStan's ADVI writes
``log_g__ = -||eta||^2 / 2`` for the standardised draw ``eta``: the log density of the
approximation up to an additive constant (the log-determinant and ``2 pi`` terms), which cancels
in self-normalised importance weights. The first data row of an ADVI CSV is the mean of the
approximation, not a draw, and is dropped. Optimisation output is one "draw" (the mode) with
method ``"other"``; its ``lp__`` goes to ``sample_stats``.
"""

from __future__ import annotations

import glob as _glob
import math
import os
import re
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from loo_adapt.draws import APPROXIMATE_METHODS, METHODS, Draws

__all__ = [
    "read_draws",
    "read_csv",
    "read_cmdstanpy",
    "read_inference_data",
    "read_stanli",
    "read_dict",
    "read_array",
]

# CmdStan's own method names -> Draws.method.
_STAN_METHODS = {
    "sample": "mcmc",
    "variational": "advi",
    "laplace": "laplace",
    "pathfinder": "pathfinder",
    "optimize": "other",
}
_METHOD_ALIASES = {
    **_STAN_METHODS,
    **{m: m for m in METHODS},
    "nuts": "mcmc",
    "hmc": "mcmc",
    "vb": "advi",
    "meanfield": "advi",
    "fullrank": "advi",
    "mle": "other",
    "map": "other",
}
# Which Stan output column holds log_p / log_q for each approximate method.
_DENSITY_COLUMNS = {
    "advi": ("log_p__", "log_g__"),
    "laplace": ("log_p__", "log_q__"),
    "pathfinder": ("lp__", "lp_approx__"),
}
MCMC_STATS = (
    "lp__",
    "accept_stat__",
    "stepsize__",
    "treedepth__",
    "n_leapfrog__",
    "divergent__",
    "energy__",
)
# ArviZ's sample_stats names -> Stan's.
_ARVIZ_STATS = {
    "lp": "lp__",
    "acceptance_rate": "accept_stat__",
    "step_size": "stepsize__",
    "tree_depth": "treedepth__",
    "n_steps": "n_leapfrog__",
    "diverging": "divergent__",
    "energy": "energy__",
}

_ACCEPTED = (
    "loo_adapt.Draws; cmdstanpy CmdStanMCMC / CmdStanVB / CmdStanLaplace / CmdStanPathfinder / "
    "CmdStanMLE; a Stan CSV path, directory, glob or list of paths (str or pathlib.Path); "
    "arviz.InferenceData or xarray.DataTree; stanli.Fit; dict of (chains, draws, ...) arrays "
    "(with method=); numpy array of pointwise log-likelihood, (chains, draws, n) or (S, n)"
)


def normalize_method(method: str | None) -> str | None:
    """Map a Stan / cmdstanpy / Draws method name to one of ``Draws`` methods (None passes)."""
    if method is None:
        return None
    key = str(method).strip().lower()
    if key not in _METHOD_ALIASES:
        raise ValueError(
            f"unknown method {method!r}; use one of {METHODS} "
            f"or a CmdStan method name {tuple(_STAN_METHODS)}"
        )
    return _METHOD_ALIASES[key]


# ---------------------------------------------------------------------------------------------
# Column names -> Stan shapes (private helpers)
# ---------------------------------------------------------------------------------------------

_BRACKET_RE = re.compile(r"^(.+?)\[([^\[\]]+)\]$")
_COMPLEX_PART = {"real": 1, "imag": 2}


def _split_index(part: str) -> tuple[str, tuple[int, ...]] | None:
    """``beta.2.3`` / ``beta[2,3]`` -> ("beta", (2, 3)); None if ``part`` has no index."""
    m = _BRACKET_RE.match(part)
    if m:
        base, pieces = m.group(1), [p.strip() for p in m.group(2).split(",")]
    elif "." in part:
        base, *pieces = part.split(".")
    else:
        return None
    idx = []
    for k, piece in enumerate(pieces):
        if piece.isdigit() and int(piece) >= 1:
            idx.append(int(piece))
        elif piece in _COMPLEX_PART and k == len(pieces) - 1:
            # a complex number is stored as a trailing axis of length 2 (real, imag)
            idx.append(_COMPLEX_PART[piece])
        else:
            return None
    if not base:
        return None
    return base, tuple(idx)


def _stan_name_to_index(name: str) -> tuple[str, tuple[int, ...]]:
    """Variable name and 1-based index of one output column.

    ``alpha`` -> ("alpha", ()), ``W1.2.3`` or ``W1[2,3]`` -> ("W1", (2, 3)),
    ``z.1.imag`` -> ("z", (1, 2)). Tuple components (``t:2.1``) become their own variables
    named up to the last ``:`` part (``"t:2"``), because a float array cannot hold a tuple.
    """
    head, sep, tail = name.rpartition(":")
    parsed = _split_index(tail)
    if parsed is None:
        return name, ()
    base, idx = parsed
    return (head + sep + base) if sep else base, idx


def _group_columns(names: Sequence[str]) -> dict[str, tuple[tuple[int, ...], np.ndarray]]:
    """{variable: (stan_shape, column index per element in C order)} in first-seen order."""
    entries: dict[str, list[tuple[tuple[int, ...], int]]] = {}
    for col, name in enumerate(names):
        base, idx = _stan_name_to_index(name)
        entries.setdefault(base, []).append((idx, col))
    out = {}
    for base, items in entries.items():
        ndims = {len(idx) for idx, _ in items}
        if len(ndims) != 1:
            raise ValueError(
                f"columns of variable {base!r} have mixed numbers of indices: "
                f"{[names[c] for _, c in items][:6]}"
            )
        ndim = ndims.pop()
        if ndim == 0:
            if len(items) > 1:
                raise ValueError(f"column {base!r} appears {len(items)} times")
            out[base] = ((), np.array([items[0][1]]))
            continue
        idx = np.array([i for i, _ in items]) - 1
        shape = tuple(int(s) for s in idx.max(axis=0) + 1)
        flat = np.ravel_multi_index(idx.T, shape)
        if len(items) != math.prod(shape) or len(np.unique(flat)) != len(items):
            raise ValueError(
                f"columns of variable {base!r} do not fill a {shape} array "
                f"({len(items)} columns for {math.prod(shape)} elements, or duplicates)"
            )
        cols = np.empty(len(items), dtype=np.intp)
        cols[flat] = [c for _, c in items]
        out[base] = (shape, cols)
    return out


def _assemble(
    values: np.ndarray,
    names: Sequence[str],
    method: str,
    source: str,
) -> Draws:
    """(chains, draws, columns) values + Stan column names -> Draws.

    Columns ending in ``__`` are algorithm output (sample_stats); the rest are model variables.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 3 or values.shape[2] != len(names):
        raise ValueError(
            f"values of shape {values.shape} do not match {len(names)} column names"
        )
    if values.shape[1] == 0:
        raise ValueError(f"no draws in {source}")
    stats_cols = [i for i, n in enumerate(names) if n.endswith("__")]
    var_cols = [i for i, n in enumerate(names) if not n.endswith("__")]
    if not var_cols:
        raise ValueError(
            f"{source} has no model variables, only algorithm columns {list(names)[:8]}"
        )
    sample_stats = {names[i]: values[:, :, i] for i in stats_cols}
    var_names = [names[i] for i in var_cols]
    var_values = values[:, :, var_cols]
    variables = {}
    for base, (shape, cols) in _group_columns(var_names).items():
        variables[base] = var_values[:, :, cols].reshape(values.shape[:2] + shape)
    n_nan = {k: int(np.isnan(v).sum()) for k, v in variables.items()}
    n_nan = {k: n for k, n in n_nan.items() if n}
    if n_nan:
        # Stan writes NaN when generated quantities fail for a draw; estimators must know
        warnings.warn(
            f"NaN values in {source}: {n_nan} (variable: count)", UserWarning, stacklevel=3
        )
    log_p = log_q = None
    if method in _DENSITY_COLUMNS:
        log_p, log_q = _densities_from_stats(sample_stats, method, source)
    return Draws(
        variables=variables,
        method=method,
        log_p=log_p,
        log_q=log_q,
        sample_stats=sample_stats,
        source=source,
    )


def read_columns(names, values, *, method: str = "mcmc", source: str = "columns") -> Draws:
    """Draws from flat Stan columns: ``values`` (chains, draws, columns), ``names`` per column.

    ``W1[2,3]`` or ``W1.2.3`` names are placed by their 1-based indices, so variables get
    Stan's declared shapes whatever the column order; ``*__`` columns go to sample_stats
    (and give log_p/log_q for approximate methods).
    """
    return _assemble(values, list(names), method, source)


def _densities_from_stats(stats: Mapping[str, np.ndarray], method: str, source: str):
    p_name, q_name = _DENSITY_COLUMNS[method]
    missing = [n for n in (p_name, q_name) if n not in stats]
    if missing:
        raise ValueError(
            f"{method} draws from {source} lack the column(s) {missing} that hold "
            f"log_p / log_q (found {sorted(stats)})"
        )
    log_p, log_q = np.asarray(stats[p_name], float), np.asarray(stats[q_name], float)
    if np.isnan(log_p).all():
        # CmdStan writes NaN here when run with calculate_lp=false
        warnings.warn(
            f"{p_name} is NaN for every draw in {source} (calculate_lp=false?): "
            "log_p is left unset; these draws cannot serve as an importance-sampling proposal",
            UserWarning,
            stacklevel=4,
        )
        log_p = None
    elif not np.isfinite(log_p).all() or not np.isfinite(log_q).all():
        bad = int((~np.isfinite(log_p) | ~np.isfinite(log_q)).sum())
        warnings.warn(
            f"{bad} draw(s) in {source} have non-finite {p_name}/{q_name}",
            UserWarning,
            stacklevel=4,
        )
    return log_p, log_q


# ---------------------------------------------------------------------------------------------
# Stan CSV
# ---------------------------------------------------------------------------------------------


def _natural_key(path: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(path))]


def _expand_paths(paths) -> list[str]:
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    elif not isinstance(paths, Sequence) or not paths:
        raise TypeError(f"paths must be a path, glob, directory or a non-empty list, got {paths!r}")
    out: list[str] = []
    for p in paths:
        if not isinstance(p, (str, os.PathLike)):
            raise TypeError(f"expected a file path (str or pathlib.Path), got {type(p).__name__}")
        p = os.fspath(p)
        if os.path.isdir(p):
            found = sorted(_glob.glob(os.path.join(p, "*.csv")), key=_natural_key)
            if not found:
                raise FileNotFoundError(f"no .csv files in directory {p}")
            out.extend(found)
        elif os.path.isfile(p):
            out.append(p)
        elif _glob.has_magic(p):
            found = sorted(_glob.glob(p), key=_natural_key)
            if not found:
                raise FileNotFoundError(f"no files match {p!r}")
            out.extend(found)
        else:
            raise FileNotFoundError(f"Stan CSV file not found: {p}")
    return out


def _config_from_comments(comments: Sequence[str]) -> dict[str, str]:
    """``# key = value`` lines -> {key: value}; first occurrence wins, '(Default)' dropped."""
    config: dict[str, str] = {}
    for line in comments:
        text = line.lstrip("#").strip()
        key, sep, value = text.partition(" = ")
        if not sep or " " in key.strip():
            continue
        config.setdefault(key.strip(), value.replace("(Default)", "").strip())
    return config


def _parse_own(path: str) -> tuple[list[str], list[str], np.ndarray]:
    """Minimal Stan CSV parser: (comment lines, header names, values (rows, cols))."""
    comments: list[str] = []
    header: list[str] | None = None
    rows: list[list[float]] = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            stripped = line.strip()
            if line.startswith("#"):
                comments.append(line.rstrip("\n"))
            elif not stripped:
                continue
            elif header is None:
                header = [h.strip() for h in stripped.split(",")]
            else:
                fields = stripped.split(",")
                if len(fields) != len(header):
                    raise ValueError(
                        f"{path}, line {lineno}: {len(fields)} values for {len(header)} columns"
                    )
                try:
                    rows.append([float(f) for f in fields])
                except ValueError as err:
                    raise ValueError(f"{path}, line {lineno}: {err}") from None
    if header is None:
        raise ValueError(f"{path} is not a Stan CSV file: no header line (empty file?)")
    values = np.array(rows, dtype=np.float64).reshape(len(rows), len(header))
    return comments, header, values


def _parse_cmdstanpy(path: str) -> tuple[list[str], list[str], np.ndarray]:
    """Same result as `_parse_own`, through cmdstanpy's (CmdStan-free) Stan CSV parser."""
    from cmdstanpy.utils import stancsv

    comment_bytes, header, draw_lines = stancsv.parse_comments_header_and_draws(path)
    comments = [c.decode("utf-8", "replace").rstrip("\n") for c in comment_bytes]
    if not header:
        raise ValueError(f"{path} is not a Stan CSV file: no header line (empty file?)")
    names = [h.strip() for h in header.split(",")]
    draw_lines = [ln for ln in draw_lines if ln.strip()]
    if not draw_lines:
        return comments, names, np.empty((0, len(names)))
    try:
        values = stancsv.csv_bytes_list_to_numpy(draw_lines)
    except ValueError as err:
        raise ValueError(f"{path}: malformed data rows ({err})") from None
    if values.ndim != 2 or values.shape[1] != len(names):
        raise ValueError(
            f"{path}: data rows have {values.shape[-1]} values for {len(names)} columns"
        )
    return comments, names, np.asarray(values, dtype=np.float64)


def _parse_file(path: str, parser: str) -> tuple[list[str], list[str], np.ndarray]:
    if parser == "own":
        return _parse_own(path)
    if parser == "cmdstanpy":
        return _parse_cmdstanpy(path)
    if parser != "auto":
        raise ValueError(f"parser must be 'auto', 'cmdstanpy' or 'own', got {parser!r}")
    try:
        from cmdstanpy.utils import stancsv  # noqa: F401
    except ImportError:  # pragma: no cover - cmdstanpy is a dependency, but its internals move
        return _parse_own(path)
    return _parse_cmdstanpy(path)


def _method_from_columns(names: Sequence[str]) -> str | None:
    cols = set(names)
    if "lp_approx__" in cols:
        return "pathfinder"
    if {"log_p__", "log_g__"} <= cols:
        return "variational"
    if {"log_p__", "log_q__"} <= cols:
        return "laplace"
    if {"accept_stat__", "lp__"} <= cols:
        return "sample"
    return None


def _truthy(value: str | None) -> bool:
    return str(value).strip().lower() in ("1", "true")


class _CsvFile:
    """One parsed Stan CSV file, reduced to the rows that are draws."""

    def __init__(self, path: str, parser: str):
        self.path = path
        comments, names, values = _parse_file(path, parser)
        self.config = _config_from_comments(comments)
        self.names = names
        stan_method = self.config.get("method") or _method_from_columns(names)
        if stan_method is None:
            raise ValueError(
                f"cannot tell which CmdStan method wrote {path}: no '# method = ...' comment "
                "and no method-specific columns; pass method="
            )
        if stan_method not in _STAN_METHODS:
            raise ValueError(
                f"{path} comes from CmdStan method {stan_method!r}; readable methods are "
                f"{tuple(_STAN_METHODS)}"
            )
        self.stan_method = stan_method
        self.method = _STAN_METHODS[stan_method]
        if values.shape[0] == 0:
            raise ValueError(f"{path} has a header but no draws")
        if stan_method == "variational":
            # the first row is the mean of the approximation, written with lp__ = log_p__ =
            # log_g__ = 0; it is not a draw
            first = dict(zip(names, values[0]))
            if any(first.get(k, 0.0) != 0.0 for k in ("lp__", "log_p__", "log_g__")):
                warnings.warn(
                    f"{path}: the first ADVI row does not look like the approximation's mean "
                    "(lp__/log_p__/log_g__ not all 0); dropping it anyway as CmdStan writes it",
                    UserWarning,
                    stacklevel=3,
                )
            values = values[1:]
            if values.shape[0] == 0:
                raise ValueError(f"{path} holds only the ADVI mean row, no draws")
        elif stan_method == "sample" and _truthy(self.config.get("save_warmup")):
            thin = max(int(float(self.config.get("thin", 1))), 1)
            n_warm = math.ceil(int(float(self.config.get("num_warmup", 0))) / thin)
            if values.shape[0] <= n_warm:
                raise ValueError(
                    f"{path} has {values.shape[0]} rows but save_warmup=true with "
                    f"{n_warm} warm-up rows: no post-warm-up draws"
                )
            values = values[n_warm:]
        self.values = values

    @property
    def mode_file(self) -> str | None:
        mode = self.config.get("mode") if self.stan_method == "laplace" else None
        return os.path.basename(mode) if mode else None


def read_csv(paths, method: str | None = None, *, parser: str = "auto") -> Draws:
    """Read Stan CSV output files into a `Draws`.

    Parameters
    ----------
    paths : str, pathlib.Path, glob pattern, directory, or a list of these
        Several files are stacked as chains (in natural sort order for globs / directories,
        in the given order for lists). A Laplace run's ``-opt-`` mode file (named in the
        Laplace file's ``mode =`` comment) is skipped when it sits among the files.
    method : optional
        Expected method (``"mcmc"``, ``"advi"``, ..., or CmdStan's ``"sample"``,
        ``"variational"``, ...). It is detected from the ``# method = ...`` header comment;
        a mismatch raises ValueError. Needed only for files without header comments.
    parser : "auto" (cmdstanpy's parser), "cmdstanpy" or "own" (the package's minimal parser)
    """
    expected = normalize_method(method)
    files = [_CsvFile(p, parser) for p in _expand_paths(paths)]
    modes = {f.mode_file for f in files if f.mode_file}
    if modes and len(files) > 1:
        files = [
            f
            for f in files
            if not (f.stan_method == "optimize" and os.path.basename(f.path) in modes)
        ]
    methods = sorted({f.stan_method for f in files})
    if len(methods) > 1:
        detail = ", ".join(f"{os.path.basename(f.path)}: {f.stan_method}" for f in files)
        raise ValueError(f"the files come from different CmdStan methods ({detail})")
    found = files[0].method
    if expected is not None and expected != found:
        raise ValueError(
            f"method={method!r} was requested but {files[0].path} was written by CmdStan "
            f"method {files[0].stan_method!r} ({found!r})"
        )
    names = files[0].names
    for f in files[1:]:
        if f.names != names:
            if set(f.names) != set(names):
                only_a = sorted(set(names) - set(f.names))[:5]
                only_b = sorted(set(f.names) - set(names))[:5]
                raise ValueError(
                    f"chains have different columns: {files[0].path} has {only_a} not in "
                    f"{f.path}, which has {only_b} not in the first"
                )
            # same columns in another order: align to the first file
            order = [f.names.index(n) for n in names]
            f.values, f.names = f.values[:, order], list(names)
    counts = [f.values.shape[0] for f in files]
    if len(set(counts)) != 1:
        detail = ", ".join(f"{os.path.basename(f.path)}: {n}" for f, n in zip(files, counts))
        raise ValueError(f"chains have different numbers of draws ({detail})")
    values = np.stack([f.values for f in files])
    source = "Stan CSV: " + ", ".join(f.path for f in files)
    if found == "pathfinder":
        _warn_pathfinder_paths(files[0].config, source)
    if found == "other":
        source += " (optimize: the mode as a single draw)"
    return _assemble(values, names, found, source)


def _warn_pathfinder_paths(config: Mapping[str, str], source: str) -> None:
    num_paths = int(float(config.get("num_paths", 1)))
    if num_paths > 1:
        resampled = _truthy(config.get("psis_resample", "true"))
        how = "PSIS-resampled from" if resampled else "pooled from"
        warnings.warn(
            f"Pathfinder draws in {source} were {how} {num_paths} single-path approximations: "
            "they are not independent draws from one distribution whose density is "
            "lp_approx__ (that is the density of the path that produced each draw), so "
            "log_p - log_q are not valid importance ratios for them. For an importance-"
            "sampling proposal run Pathfinder with num_paths=1 (or psis_resample=false and "
            "one path per file).",
            UserWarning,
            stacklevel=3,
        )


# ---------------------------------------------------------------------------------------------
# cmdstanpy objects
# ---------------------------------------------------------------------------------------------


def _cmdstanpy_classes() -> dict[str, type]:
    import cmdstanpy

    names = ("CmdStanMCMC", "CmdStanVB", "CmdStanLaplace", "CmdStanPathfinder", "CmdStanMLE")
    return {n: getattr(cmdstanpy, n) for n in names if hasattr(cmdstanpy, n)}


def _is_cmdstanpy_fit(obj) -> bool:
    if not type(obj).__module__.startswith("cmdstanpy"):
        return False
    return isinstance(obj, tuple(_cmdstanpy_classes().values()))


def _cmdstanpy_csv_files(fit) -> list[str]:
    runset = getattr(fit, "runset", None) or getattr(fit, "_runset", None)
    return list(getattr(runset, "csv_files", []) or [])


def read_cmdstanpy(fit, method: str | None = None) -> Draws:
    """Read a cmdstanpy fit (MCMC, VB, Laplace, Pathfinder, MLE) through its own API.

    The numbers come from the object (which drops warm-up and the ADVI mean row itself);
    only the column-name -> Stan-shape step is shared with `read_csv`.
    """
    classes = _cmdstanpy_classes()
    names = list(fit.column_names)
    files = _cmdstanpy_csv_files(fit)
    cls = type(fit).__name__
    source = f"cmdstanpy {cls}: " + ", ".join(files)
    if isinstance(fit, classes["CmdStanMCMC"]):
        found = "mcmc"
        values = np.asarray(fit.draws(concat_chains=False), float).transpose(1, 0, 2)
    elif isinstance(fit, classes["CmdStanVB"]):
        found = "advi"
        values = np.asarray(fit.variational_sample, float)[None]
    elif "CmdStanLaplace" in classes and isinstance(fit, classes["CmdStanLaplace"]):
        found = "laplace"
        values = np.asarray(fit.draws(), float)[None]
    elif "CmdStanPathfinder" in classes and isinstance(fit, classes["CmdStanPathfinder"]):
        found = "pathfinder"
        values = np.asarray(fit.draws(), float)[None]
        config = dict(getattr(fit.metadata, "cmdstan_config", {}) or {})
        _warn_pathfinder_paths({k: str(v) for k, v in config.items()}, source)
    elif isinstance(fit, classes["CmdStanMLE"]):
        found = "other"
        values = np.asarray(fit.optimized_params_np, float)[None, None]
        source += " (optimize: the mode as a single draw)"
    else:
        raise TypeError(f"unsupported cmdstanpy object {cls}")
    expected = normalize_method(method)
    if expected is not None and expected != found:
        raise ValueError(f"method={method!r} was requested but a {cls} holds {found!r} draws")
    return _assemble(values, names, found, source)


# ---------------------------------------------------------------------------------------------
# ArviZ InferenceData (arviz 0.x) and xarray DataTree (arviz 1.x)
# ---------------------------------------------------------------------------------------------


def _is_inference_data(obj) -> bool:
    t = type(obj)
    return t.__name__ == "InferenceData" and t.__module__.startswith("arviz")


def _is_datatree(obj) -> bool:
    t = type(obj)
    return t.__name__ == "DataTree" and t.__module__.startswith(("xarray", "datatree"))


def _xr_groups(obj) -> dict:
    """{group name: xarray.Dataset} for an InferenceData or a DataTree."""
    if _is_inference_data(obj):
        return {g: getattr(obj, g) for g in obj.groups()}
    return {name: child.to_dataset() for name, child in obj.children.items()}


def _dataset_arrays(ds, group: str) -> dict[str, np.ndarray]:
    out = {}
    for name, da in ds.data_vars.items():
        if "chain" not in da.dims or "draw" not in da.dims:
            raise ValueError(
                f"variable {name!r} of group {group!r} has dims {da.dims}; "
                "expected ('chain', 'draw', ...)"
            )
        rest = [d for d in da.dims if d not in ("chain", "draw")]
        out[str(name)] = np.asarray(da.transpose("chain", "draw", *rest).values, dtype=float)
    return out


def _stat_to_stan(name: str) -> str:
    if name.endswith("__"):
        return name
    return _ARVIZ_STATS.get(name, name + "__")


def read_inference_data(
    idata,
    method: str | None = None,
    *,
    log_p=None,
    log_q=None,
) -> Draws:
    """Read an ArviZ ``InferenceData`` (arviz 0.x) or ``xarray.DataTree`` (arviz 1.x).

    Variables come from the ``posterior`` group plus the ``log_likelihood`` group (a single
    log-likelihood variable there is named ``log_lik`` unless the posterior already has one).
    ``sample_stats`` names are mapped back to Stan's (``lp`` -> ``lp__``, ``diverging`` ->
    ``divergent__``, others get ``__`` appended). ``method`` defaults to ``"mcmc"``. For an
    approximate method, ``log_p`` / ``log_q`` are a sample_stats name or a (chains, draws)
    array; by default they are looked up as for Stan CSV (e.g. ``log_p``/``log_g`` for advi).
    """
    groups = _xr_groups(idata)
    if "posterior" not in groups:
        raise ValueError(f"no 'posterior' group (groups: {sorted(groups)})")
    variables = _dataset_arrays(groups["posterior"], "posterior")
    if "log_likelihood" in groups:
        ll = _dataset_arrays(groups["log_likelihood"], "log_likelihood")
        if len(ll) == 1 and "log_lik" not in variables:
            variables["log_lik"] = next(iter(ll.values()))
        else:
            for name, value in ll.items():
                variables[name if name not in variables else f"log_lik_{name}"] = value
    stats = {}
    if "sample_stats" in groups:
        stats = {
            _stat_to_stan(k): v
            for k, v in _dataset_arrays(groups["sample_stats"], "sample_stats").items()
        }
    found = normalize_method(method) or "mcmc"
    p_arr = _resolve_density(log_p, stats, "log_p")
    q_arr = _resolve_density(log_q, stats, "log_q")
    if found in APPROXIMATE_METHODS and (p_arr is None or q_arr is None):
        auto_p, auto_q = _densities_from_stats(stats, found, "the InferenceData sample_stats")
        p_arr = auto_p if p_arr is None else p_arr
        q_arr = auto_q if q_arr is None else q_arr
    return Draws(
        variables=variables,
        method=found,
        log_p=p_arr,
        log_q=q_arr,
        sample_stats=stats,
        source=f"{type(idata).__module__}.{type(idata).__name__}",
    )


def _resolve_density(value, stats: Mapping[str, np.ndarray], what: str):
    if value is None:
        return None
    if isinstance(value, str):
        key = value if value in stats else _stat_to_stan(value)
        if key not in stats:
            raise KeyError(f"{what}={value!r} is not in sample_stats ({sorted(stats)})")
        return stats[key]
    return np.asarray(value, dtype=float)


# ---------------------------------------------------------------------------------------------
# stanli, dicts, arrays
# ---------------------------------------------------------------------------------------------


def _is_stanli_fit(obj) -> bool:
    t = type(obj)
    return t.__name__ == "Fit" and t.__module__.split(".")[0] == "stanli"


def read_stanli(fit) -> Draws:
    """Read a ``stanli.Fit`` (NUTS): every draw it holds, so sample with save_warmup=False."""
    values = np.asarray(fit.draws(), dtype=float)
    names = list(fit.names)
    try:
        from stanli import SAMPLER_COLUMNS as stat_names
    except ImportError:  # pragma: no cover - older stanli
        stat_names = MCMC_STATS
    stats = np.asarray(fit.sampler_stats, dtype=float)
    if stats.shape[:2] != values.shape[:2] or stats.shape[2] != len(stat_names):
        raise ValueError(
            f"stanli sampler_stats of shape {stats.shape} do not match draws {values.shape}"
        )
    draws = _assemble(values, names, "mcmc", f"stanli.Fit (seed {getattr(fit, 'seed', '?')})")
    draws.sample_stats.update({n: stats[:, :, i] for i, n in enumerate(stat_names)})
    return draws


def read_dict(
    data: Mapping[str, np.ndarray],
    method: str | None = None,
    *,
    log_p=None,
    log_q=None,
    sample_stats: Mapping[str, np.ndarray] | None = None,
    source: str = "dict of arrays",
) -> Draws:
    """Read a dict of (chains, draws, *shape) arrays; ``method`` is required.

    Keys ending in ``__`` (Stan's algorithm columns such as ``lp__``, ``log_p__``) go to
    sample_stats; for an approximate method without explicit log_p / log_q they are looked
    up there as for Stan CSV.
    """
    if method is None:
        raise ValueError(
            f"method= is required for a dict of arrays: one of {METHODS} (the draws' origin "
            "decides whether they are reweighted)"
        )
    found = normalize_method(method)
    stats = {k: np.asarray(v, float) for k, v in (sample_stats or {}).items()}
    variables = {}
    for k, v in data.items():
        arr = np.asarray(v, dtype=float)
        (stats if str(k).endswith("__") else variables)[str(k)] = arr
    p_arr = _resolve_density(log_p, stats, "log_p")
    q_arr = _resolve_density(log_q, stats, "log_q")
    if found in APPROXIMATE_METHODS and p_arr is None and q_arr is None:
        if all(n in stats for n in _DENSITY_COLUMNS[found]):
            p_arr, q_arr = _densities_from_stats(stats, found, source)
    return Draws(
        variables=variables,
        method=found,
        log_p=p_arr,
        log_q=q_arr,
        sample_stats=stats,
        source=source,
    )


def _as_log_lik(array, what: str) -> np.ndarray:
    arr = np.asarray(array, dtype=float)
    if arr.ndim == 2:
        arr = arr[None]
    if arr.ndim != 3:
        raise ValueError(
            f"{what} must be (chains, draws, n) or (S, n), got shape {np.shape(array)}"
        )
    if np.isnan(arr).any():
        raise ValueError(f"{what} contains {int(np.isnan(arr).sum())} NaN value(s)")
    return arr


def read_array(log_lik, method: str | None = None, *, log_p=None, log_q=None) -> Draws:
    """A pointwise log-likelihood array, (chains, draws, n) or (S, n) -> one chain of S draws.

    ``method`` defaults to ``"mcmc"``; an approximate method needs ``log_p`` and ``log_q``.
    """
    arr = _as_log_lik(log_lik, "the log-likelihood array")
    found = normalize_method(method) or "mcmc"
    p_arr = None if log_p is None else np.asarray(log_p, float).reshape(arr.shape[:2])
    q_arr = None if log_q is None else np.asarray(log_q, float).reshape(arr.shape[:2])
    return Draws(
        variables={"log_lik": arr},
        method=found,
        log_p=p_arr,
        log_q=q_arr,
        source="numpy log-likelihood array",
    )


# ---------------------------------------------------------------------------------------------
# Dispatcher
# ---------------------------------------------------------------------------------------------


def _is_path_like(obj) -> bool:
    if isinstance(obj, (str, os.PathLike)):
        return True
    return (
        isinstance(obj, (list, tuple))
        and len(obj) > 0
        and all(isinstance(p, (str, os.PathLike)) for p in obj)
    )


def _apply_log_lik(draws: Draws, log_lik) -> Draws:
    """Name the pointwise log-likelihood ``log_lik``: rename a variable or attach an array."""
    if log_lik is None:
        return draws
    variables = dict(draws.variables)
    if isinstance(log_lik, str):
        if log_lik == "log_lik":
            draws.log_lik()  # raises a clear KeyError when absent
            return draws
        if log_lik not in variables:
            raise KeyError(
                f"log_lik={log_lik!r} is not a variable of the draws "
                f"(available: {sorted(variables)})"
            )
        if "log_lik" in variables:
            raise ValueError(
                f"the draws already hold a variable 'log_lik'; cannot rename {log_lik!r} to it"
            )
        variables["log_lik"] = variables.pop(log_lik)
    else:
        arr = _as_log_lik(log_lik, "log_lik")
        if arr.shape[:2] != draws.shape:
            if arr.shape[0] == 1 and arr.shape[1] == draws.n_samples:
                arr = arr.reshape(draws.shape + arr.shape[2:])
            else:
                raise ValueError(
                    f"log_lik has shape {np.shape(log_lik)}; the draws are "
                    f"(chains, draws) = {draws.shape}"
                )
        variables["log_lik"] = arr
    return Draws(
        variables=variables,
        method=draws.method,
        log_p=draws.log_p,
        log_q=draws.log_q,
        sample_stats=dict(draws.sample_stats),
        source=draws.source,
    )


def read_draws(obj, *, method: str | None = None, log_lik=None, **kw) -> Draws:
    """Turn any supported fit into a `Draws`.

    Parameters
    ----------
    obj : see the module docstring; a `Draws` is returned as is.
    method : expected / declared method (required for a dict; checked against files/objects).
    log_lik : None, the name of the model's pointwise log-likelihood variable (renamed to
        ``log_lik``), or an array (chains, draws, n) / (S, n) attached as ``log_lik``.
    **kw : passed to the specific reader (``parser=`` for CSV; ``log_p=``, ``log_q=`` for
        InferenceData / dict / array; ``sample_stats=``, ``source=`` for dict).
    """
    if isinstance(obj, Draws):
        if kw:
            raise TypeError(f"unexpected options for a Draws: {sorted(kw)}")
        expected = normalize_method(method)
        if expected is not None and expected != obj.method:
            raise ValueError(f"method={method!r} requested but the Draws are {obj.method!r}")
        draws = obj
    elif _is_cmdstanpy_fit(obj):
        draws = read_cmdstanpy(obj, method=method, **kw)
    elif _is_path_like(obj):
        draws = read_csv(obj, method=method, **kw)
    elif _is_inference_data(obj) or _is_datatree(obj):
        draws = read_inference_data(obj, method=method, **kw)
    elif _is_stanli_fit(obj):
        expected = normalize_method(method)
        if expected not in (None, "mcmc"):
            raise ValueError(f"a stanli.Fit holds NUTS draws, not {method!r}")
        draws = read_stanli(obj, **kw)
    elif isinstance(obj, Mapping):
        draws = read_dict(obj, method=method, **kw)
    elif isinstance(obj, np.ndarray):
        draws = read_array(obj, method=method, **kw)
    else:
        raise TypeError(f"cannot read draws from a {type(obj).__name__}; accepted: {_ACCEPTED}")
    return _apply_log_lik(draws, log_lik)
