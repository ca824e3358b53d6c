"""Stan column names -> arrays of Stan's shapes, and the names every reader shares.

Stan writes array elements column-major (``W1.1.1, W1.2.1, ...``); every column is placed by
the index in its name, so the result does not depend on the column order of the source.

Per-draw densities of approximate methods (what importance sampling needs):

=============  ============================  =========================================
method         log_p (target, unconstrained)  log_q (approximation)
=============  ============================  =========================================
advi           ``log_p__``                    ``log_g__`` (constants dropped, see below)
laplace        ``log_p__``                    ``log_q__``
pathfinder     ``lp__``                       ``lp_approx__``
=============  ============================  =========================================

Both are on Stan's unconstrained space, with the Jacobian included unless a Laplace run was
made with ``jacobian=false`` (recorded in ``Draws.config``). CmdStan's ADVI writes
``log_g__ = -||eta||^2 / 2`` for the standardised draw ``eta``: the log density of the
approximation up to an additive constant, which cancels in self-normalised weights.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from loo_adapt.draws import METHODS, Draws

# CmdStan's own method names -> Draws.method.
STAN_METHODS = {
    "sample": "mcmc",
    "variational": "advi",
    "laplace": "laplace",
    "pathfinder": "pathfinder",
    "optimize": "other",
}
#: Draws.method -> CmdStan method name (for writing)
CMDSTAN_METHOD = {v: k for k, v in STAN_METHODS.items()}
_METHOD_ALIASES = {
    **STAN_METHODS,
    **{m: m for m in METHODS},
    "nuts": "mcmc",
    "hmc": "mcmc",
    "vb": "advi",
    "meanfield": "advi",
    "fullrank": "advi",
    "mle": "other",
    "map": "other",
}
#: Which Stan output column holds log_p / log_q for each approximate method.
DENSITY_COLUMNS = {
    "advi": ("log_p__", "log_g__"),
    "laplace": ("log_p__", "log_q__"),
    "pathfinder": ("lp__", "lp_approx__"),
    "vifa": ("log_p__", "log_q__"),  # loo_adapt.laplace.vifa, not a CmdStan method
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
#: CmdStan settings kept in ``Draws.config`` (they decide how draws may be used, or how the
#: package's own fits of the program should run: ``delta``, the sampler's adapt delta;
#: ``num_warmup`` and ``thin``, what the posterior fit cost: the easy-row focus's budget)
CONFIG_KEYS = ("jacobian", "num_paths", "psis_resample", "algorithm", "delta", "num_warmup",
               "thin")


def normalize_method(method: str | None) -> str | None:
    """Map a Stan / cmdstanpy / Draws method name to one of ``Draws`` methods.

    Parameters
    ----------
    method : str or None
        ``"mcmc"``, ``"advi"``, ``"laplace"``, ``"pathfinder"``, ``"other"``, CmdStan's
        ``"sample"``, ``"variational"``, ``"optimize"``, or an alias (``"nuts"``, ``"vb"``,
        ``"meanfield"``, ``"fullrank"``, ``"mle"``, ``"map"``). None passes through.

    Returns
    -------
    str or None

    Examples
    --------
    >>> normalize_method("variational"), normalize_method("NUTS"), normalize_method(None)
    ('advi', 'mcmc', None)
    """
    if method is None:
        return None
    key = str(method).strip().lower()
    if key not in _METHOD_ALIASES:
        raise ValueError(
            f"unknown method {method!r}; use one of {METHODS} "
            f"or a CmdStan method name {tuple(STAN_METHODS)}"
        )
    return _METHOD_ALIASES[key]


def method_from_columns(names) -> str | None:
    """CmdStan method told by its algorithm columns (None when they do not say).

    Examples
    --------
    >>> method_from_columns(["lp__", "log_p__", "log_g__", "mu"])
    'variational'
    """
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


def check_method(expected: str | None, found: str, what: str) -> None:
    """Raise when a requested ``method=`` contradicts the method detected in ``what``."""
    if expected is not None and normalize_method(expected) != found:
        raise ValueError(f"method={expected!r} was requested but {what} holds {found!r} draws")


# ---------------------------------------------------------------------------------------------
# Column names -> Stan shapes
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


def stan_name_to_index(name: str) -> tuple[str, tuple[int, ...]]:
    """Variable name and 1-based index of one output column.

    ``alpha`` -> ("alpha", ()), ``W1.2.3`` or ``W1[2,3]`` -> ("W1", (2, 3)),
    ``z.1.imag`` -> ("z", (1, 2)). Tuple components (``t:2.1``) become their own variables
    named up to the last ``:`` part (``"t:2"``), because a float array cannot hold a tuple.

    Parameters
    ----------
    name : one CSV / stanli column name.

    Returns
    -------
    (variable, index) : tuple of str and tuple of int

    Examples
    --------
    >>> stan_name_to_index("W1.2.3"), stan_name_to_index("alpha")
    (('W1', (2, 3)), ('alpha', ()))
    """
    head, sep, tail = name.rpartition(":")
    parsed = _split_index(tail)
    if parsed is None:
        return name, ()
    base, idx = parsed
    return (head + sep + base) if sep else base, idx


def _vector_run(names: Sequence[str], col: int) -> tuple[str, int] | None:
    """(base, m) when ``names[col:col + m]`` are ``base.1`` ... ``base.m`` (or ``base[1]``
    ... ``base[m]``), m >= 2, exactly as `stan_name_to_index` parses them one by one (a
    plain identifier as base); else None.  A log-likelihood vector's thousands of columns
    are then matched by string comparison instead of one parse each."""
    name = names[col]
    for opener, closer in ((".", ""), ("[", "]")):
        tail = opener + "1" + closer
        base = name[:-len(tail)]
        if not (name.endswith(tail) and base.isidentifier()):
            continue
        m = 1
        while col + m < len(names) and names[col + m] == f"{base}{opener}{m + 1}{closer}":
            m += 1
        return (base, m) if m >= 2 else None
    return None


def group_columns(names: Sequence[str]) -> dict[str, tuple[tuple[int, ...], np.ndarray]]:
    """{variable: (stan_shape, column index per element in C order)} in first-seen order.

    Parameters
    ----------
    names : Stan output column names (``b.1.2`` or ``b[1,2]``), in file order.

    Returns
    -------
    dict
        variable -> (its Stan shape, the column of each element in C order).

    Examples
    --------
    >>> shape, cols = group_columns(["b.1.1", "b.2.1", "b.1.2", "b.2.2"])["b"]
    >>> shape, cols.tolist()
    ((2, 2), [0, 2, 1, 3])
    """
    entries: dict[str, list[tuple[tuple[int, ...], int]]] = {}
    col = 0
    while col < len(names):
        run = _vector_run(names, col)
        if run is not None:  # base.1, base.2, ... (or base[1], ...): parsed as one
            base, m = run
            entries.setdefault(base, []).extend(((k + 1,), col + k) for k in range(m))
            col += m
            continue
        base, idx = stan_name_to_index(names[col])
        entries.setdefault(base, []).append((idx, col))
        col += 1
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


def select_columns(names: Sequence[str], var_names) -> list[int]:
    """Indices of the columns to read: every ``*__`` column plus those of ``var_names``.

    ``var_names=None`` selects every column. A requested variable with no column is a
    KeyError listing the variables there are.

    Examples
    --------
    >>> select_columns(["lp__", "mu", "ll.1", "ll.2"], ["ll"])
    [0, 2, 3]
    """
    if var_names is None:
        return list(range(len(names)))
    wanted = {var_names} if isinstance(var_names, str) else set(var_names)
    keep, seen = [], set()
    for i, name in enumerate(names):
        if name.endswith("__"):
            keep.append(i)
            continue
        base = stan_name_to_index(name)[0]
        if base in wanted:
            keep.append(i)
            seen.add(base)
    missing = sorted(wanted - seen)
    if missing:
        available = sorted({stan_name_to_index(n)[0] for n in names if not n.endswith("__")})
        raise KeyError(f"variable(s) {missing} not in the draws (variables: {available})")
    return keep


def pick_config(config: Mapping) -> dict:
    """The run settings kept in ``Draws.config`` (see `CONFIG_KEYS`), as strings."""
    out = {}
    for key in CONFIG_KEYS:
        value = config.get(key)
        if isinstance(value, (list, tuple)):  # arviz 0.x stores attrs as 1-element lists
            value = value[0] if value else None
        if value is None:
            continue
        value = str(value).replace("(Default)", "").strip()
        if key in ("jacobian", "psis_resample"):
            value = "true" if value.lower() in ("1", "true", "1.0") else "false"
        elif key == "num_paths":
            value = str(int(float(value)))
        out[key] = value
    return out


def _take(values: np.ndarray, cols) -> np.ndarray:
    """``values[..., cols]``: a slice (a view) when the columns are a contiguous ascending
    run, else numpy's fancy-index copy."""
    cols = np.asarray(cols, dtype=np.intp)
    if cols.size and np.all(np.diff(cols) == 1):
        return values[..., int(cols[0]):int(cols[-1]) + 1]
    return values[..., cols]


def column_plan(names: Sequence[str], cols=None):
    """How the columns ``cols`` (default all) of Stan output named ``names`` become arrays.

    Returns ``(stats, variables)``: ``{stat name: column}`` for the ``*__`` columns and
    ``{variable: (Stan shape, column per element in C order)}`` for the model variables,
    column indices counting in ``names``."""
    cols = list(range(len(names))) if cols is None else list(cols)
    stats = {names[c]: c for c in cols if names[c].endswith("__")}
    var_cols = [c for c in cols if not names[c].endswith("__")]
    grouped = group_columns([names[c] for c in var_cols])
    variables = {base: (shape, np.asarray(var_cols, dtype=np.intp)[idx])
                 for base, (shape, idx) in grouped.items()}
    return stats, variables


def assemble(
    values: np.ndarray,
    names: Sequence[str],
    method: str,
    source: str,
    config: Mapping | None = None,
    cols=None,
    views: bool = False,
) -> Draws:
    """(chains, draws, columns) values + Stan column names -> Draws.

    Columns ending in ``__`` are algorithm output (sample_stats); the rest are model variables.
    ``config`` (CmdStan's settings) is reduced to `CONFIG_KEYS`.  ``cols`` (default all)
    selects the columns to keep.  Each variable is one C-contiguous copy of its columns
    (a variable whose columns already are its own contiguous array is not copied); with
    ``views``, a variable whose columns are a run of ``values`` stays a read-only view of
    them (for an array its owner keeps anyway, such as a cmdstanpy fit's: no copy of a
    large log-likelihood, and the fit cannot be changed through the draws).
    """
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 3 or values.shape[2] != len(names):
        raise ValueError(f"values of shape {values.shape} do not match {len(names)} column names")
    stat_cols, plan = column_plan(names, cols)
    sample_stats = {k: values[:, :, c] for k, c in stat_cols.items()}
    variables = {base: _variable(values, c, shape, views) for base, (shape, c) in plan.items()}
    return assemble_parts(variables, sample_stats, method, source, config,
                          n_draws=values.shape[1])


def _variable(values: np.ndarray, cols, shape: tuple, view: bool) -> np.ndarray:
    """One variable's (chains, draws, *shape) array from its columns of ``values``: a
    read-only view when ``view`` and the columns are a run, else a C-contiguous copy."""
    part = _take(values, cols)
    if view and np.may_share_memory(part, values):  # a slice, not a fancy-index copy
        part = part.view()
        part.setflags(write=False)
        return part.reshape(values.shape[:2] + shape)
    return np.ascontiguousarray(part).reshape(values.shape[:2] + shape)


def assemble_parts(variables: dict, sample_stats: dict, method: str, source: str,
                   config: Mapping | None = None, *, n_draws: int) -> Draws:
    """`Draws` from variables (chains, draws, *shape) and sample_stats (chains, draws)
    already split by `column_plan`: the checks of `assemble`, no copies."""
    if n_draws == 0:
        raise ValueError(f"no draws in {source}")
    if not variables:
        raise ValueError(
            f"{source} has no model variables, only algorithm columns "
            f"{list(sample_stats)[:8]}"
        )
    # NaN propagates through max: count only in the variables that have some
    n_nan = {k: int(np.isnan(v).sum()) for k, v in variables.items()
             if v.size and np.isnan(np.max(v))}
    n_nan = {k: n for k, n in n_nan.items() if n}
    if n_nan:
        # Stan writes NaN when generated quantities fail for a draw; estimators must know
        warnings.warn(
            f"NaN values in {source}: {n_nan} (variable: count)", UserWarning, stacklevel=4
        )
    log_p = log_q = None
    if method in DENSITY_COLUMNS:
        log_p, log_q = densities_from_stats(sample_stats, method, source)
    return Draws(variables=variables, method=method, log_p=log_p, log_q=log_q,
                 sample_stats=sample_stats, source=source, config=pick_config(config or {}))


def read_columns(names, values, *, method: str = "mcmc", source: str = "columns") -> Draws:
    """Draws from flat Stan columns: ``values`` (chains, draws, columns), ``names`` per column.

    Parameters
    ----------
    names : sequence of str
        ``W1[2,3]`` or ``W1.2.3`` names are placed by their 1-based indices, so variables get
        Stan's declared shapes whatever the column order; ``*__`` columns go to sample_stats
        (and give log_p/log_q for approximate methods).
    values : array of shape (chains, draws, len(names))
    method, source : the draws' origin and a description of where they came from

    Returns
    -------
    Draws

    Examples
    --------
    >>> d = read_columns(["lp__", "b[1]", "b[2]"], np.zeros((1, 5, 3)))
    >>> d["b"].shape
    (1, 5, 2)
    """
    return assemble(values, list(names), normalize_method(method), source)


def densities_from_stats(stats: Mapping[str, np.ndarray], method: str, source: str):
    """(log_p, log_q) of an approximate method from its Stan algorithm columns."""
    p_name, q_name = DENSITY_COLUMNS[method]
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
