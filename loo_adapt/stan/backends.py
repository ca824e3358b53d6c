"""The bundled Stan programs and the fitting backends (an edge module).

Three programs ship with the package (``stan_models/`` in a checkout, the sub-package
``loo_adapt.stan_models`` once installed): ``logistic_normal``, ``logistic_rhs``
(regularized horseshoe) and ``relu_net`` (one hidden ReLU layer). Each writes
``generated quantities { vector[N] log_lik; }`` and takes a data flag ``mixis``: with
``mixis = 1`` it samples the mixture importance-sampling proposal of Silva & Zanella (2023),
``p(theta | D) * sum_i 1 / p(y_i | theta)``, instead of the posterior.

Backends, in the order ``backend="auto"`` tries them:

- ``"cmdstan"``: CmdStan through cmdstanpy, when an installation is found (the ``CMDSTAN``
  environment variable, or ``cmdstanpy.cmdstan_path()``);
- ``"stanli"``: the embedded interpreter (no C++ toolchain), the default in practice;
- ``"pystan"``: PyStan 3 (the ``stan`` module).

Every fit returns a :class:`loo_adapt.draws.Draws` with Stan's shapes, built from the flat
column names (``W1[2,3]`` / ``W1.2.3``) so no backend's storage order is trusted.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.resources
import json
import logging
import os
import pathlib
import re
from collections.abc import Mapping

import numpy as np

from loo_adapt.draws import Draws
from loo_adapt.models import registry as _registry
from loo_adapt.stan.stan_source import program_text

BACKENDS = ("cmdstan", "stanli", "pystan")
APPROXIMATE_METHODS = ("variational", "laplace", "pathfinder")

# Names, aliases, prior defaults and data of the bundled programs: one table,
# `loo_adapt.models.registry`; these are views of it.
BUNDLED_MODELS = tuple(_registry.REGISTRY)
_ALIASES = {alias: e.program for e in _registry.REGISTRY.values() for alias in e.aliases}
_PRIOR_DEFAULTS = {name: dict(e.prior_defaults) for name, e in _registry.REGISTRY.items()}
_REQUIRED_DATA = {name: e.required_data for name, e in _registry.REGISTRY.items()}


# --------------------------------------------------------------------------- programs


def list_models() -> list[str]:
    """Names of the bundled Stan programs.

    Returns
    -------
    list of str
        ``["logistic_normal", "logistic_rhs", "relu_net"]`` (the registry's programs).

    Examples
    --------
    >>> list_models()
    ['logistic_normal', 'logistic_rhs', 'relu_net']
    """
    return list(BUNDLED_MODELS)


def _canonical_name(name: str) -> str:
    """The bundled program of any registered name (program, fixture alias, CLI family)."""
    try:
        return _registry.resolve(name).program
    except ValueError:
        raise ValueError(
            f"unknown bundled model {name!r}; choose one of {list(BUNDLED_MODELS)}") from None


def stan_model_path(name: str) -> pathlib.Path:
    """Path of a bundled ``.stan`` file ("logistic_normal", "logistic_rhs", "relu_net")."""
    name = _canonical_name(name)
    filename = f"{name}.stan"
    try:
        resource = importlib.resources.files("loo_adapt.stan_models") / filename
        if resource.is_file():
            return pathlib.Path(str(resource))
    except ModuleNotFoundError:
        # A checkout: loo_adapt.stan_models only exists once installed (package-dir mapping).
        pass
    path = pathlib.Path(__file__).resolve().parent.parent / "stan_models" / filename
    if not path.is_file():
        raise FileNotFoundError(
            f"bundled Stan program {filename} not found (looked in the installed package "
            f"loo_adapt.stan_models and in {path.parent})"
        )
    return path


def _resolve_program(name_or_stan_file) -> tuple[pathlib.Path, str | None]:
    """(path to the .stan file, bundled model name or None for a user program)."""
    if isinstance(name_or_stan_file, str) and not name_or_stan_file.endswith(".stan"):
        name = _canonical_name(name_or_stan_file)
        return stan_model_path(name), name
    if not isinstance(name_or_stan_file, (str, os.PathLike)):
        raise TypeError(
            "expected a bundled model name or a path to a .stan file, got "
            f"{type(name_or_stan_file).__name__}"
        )
    path = pathlib.Path(name_or_stan_file)
    if not path.is_file():
        raise FileNotFoundError(f"Stan program {str(path)!r} does not exist")
    for name in BUNDLED_MODELS:
        try:
            if path.resolve() == stan_model_path(name).resolve():
                return path, name
        except FileNotFoundError:
            break
    return path, None


# --------------------------------------------------------------------------- data


def _positive(name, value):
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {value!r}") from None
    if not np.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be positive and finite, got {value!r}")
    return v


def _check_xy(X, y) -> tuple[np.ndarray, np.ndarray]:
    try:
        X = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError("X must be a 2-D array of numbers") from None
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (N observations x D predictors), got shape {X.shape}")
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must have at least one row and one column, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        bad = np.argwhere(~np.isfinite(X))[0]
        raise ValueError(f"X has non-finite values (first at row {bad[0]}, column {bad[1]})")
    y_arr = np.asarray(y)
    if y_arr.ndim != 1:
        raise ValueError(f"y must be 1-D, got shape {y_arr.shape}")
    if y_arr.shape[0] != X.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but y has {y_arr.shape[0]} values")
    if y_arr.dtype == object or not (
        np.issubdtype(y_arr.dtype, np.number) or y_arr.dtype == bool
    ):
        raise TypeError(f"y must hold 0/1 numbers, got dtype {y_arr.dtype}")
    yf = y_arr.astype(np.float64)
    if not np.all((yf == 0) | (yf == 1)):
        bad = np.flatnonzero((yf != 0) & (yf != 1))[0]
        raise ValueError(f"y must be 0/1 (Bernoulli outcome); y[{bad}] = {y_arr[bad]!r}")
    return X, yf.astype(np.int64)


def stan_data(name: str, X, y, **priors) -> dict:
    """Data dict for a bundled program, with validated X (N x D, finite) and y (0/1).

    Defaults (override by keyword):

    - ``logistic_normal``: ``prior_sd=1`` (coefficients), ``scale_icept=2.5`` (intercept).
    - ``logistic_rhs``: regularized horseshoe as in the adaptive-IS LOO paper's Table 1:
      ``has_intercept=1``, ``scale_icept=5``, ``slab_scale=2.5``, ``slab_df=1``,
      ``nu_global=nu_local=1`` and ``scale_global = p0 / ((D - p0) * sqrt(N))`` with ``p0``
      the prior guess of the number of relevant coefficients, default ``D / 10`` (the
      fixture data's choice; Paananen et al. 2021 used ``p0=20`` on ovarian). Give either
      ``p0`` or ``scale_global``.
    - ``relu_net``: ``H=3`` hidden units, ``prior_sd=1`` for all weights.

    ``mixis`` (0/1, default 0) is always set, because Stan data has no defaults, and so are
    ``mixis_n_rows = 0`` and an empty ``mixis_rows`` (a mixture over every observation; see
    `loo_adapt.stan.mixture_fit.fit_mixture` for one focused on some rows).
    """
    name = _canonical_name(name)
    X, y = _check_xy(X, y)
    n, d = X.shape
    mixis = priors.pop("mixis", 0)
    if mixis not in (0, 1, True, False):
        raise ValueError(f"mixis must be 0 or 1, got {mixis!r}")
    defaults = _PRIOR_DEFAULTS[name]
    unknown = sorted(set(priors) - set(defaults))
    if unknown:
        raise TypeError(
            f"unknown prior setting(s) {unknown} for {name}; allowed: {sorted(defaults)}"
        )
    opts = {**defaults, **priors}
    data: dict = {"N": n, "D": d, "X": X, "y": y}
    if name == "logistic_normal":
        data["prior_sd"] = _positive("prior_sd", opts["prior_sd"])
        data["scale_icept"] = _positive("scale_icept", opts["scale_icept"])
    elif name == "relu_net":
        h = opts["H"]
        if isinstance(h, bool) or not isinstance(h, (int, np.integer)) or h < 1:
            raise ValueError(f"H (hidden units) must be a positive integer, got {h!r}")
        data["H"] = int(h)
        data["prior_sd"] = _positive("prior_sd", opts["prior_sd"])
    else:
        if opts["has_intercept"] not in (0, 1, True, False):
            raise ValueError(f"has_intercept must be 0 or 1, got {opts['has_intercept']!r}")
        data["has_intercept"] = int(opts["has_intercept"])
        data["scale_icept"] = _positive("scale_icept", opts["scale_icept"])
        if opts["scale_global"] is not None:
            if opts["p0"] is not None:
                raise ValueError("give either p0 or scale_global, not both")
            data["scale_global"] = _positive("scale_global", opts["scale_global"])
        else:
            p0 = d / 10 if opts["p0"] is None else _positive("p0", opts["p0"])
            if not p0 < d:
                raise ValueError(f"p0 must be below the number of predictors D = {d}, got {p0}")
            data["scale_global"] = p0 / ((d - p0) * np.sqrt(n))
        for key in ("nu_global", "nu_local"):
            v = _positive(key, opts[key])
            if v < 1:
                raise ValueError(f"{key} must be >= 1 (the program's constraint), got {v}")
            data[key] = v
        data["slab_scale"] = _positive("slab_scale", opts["slab_scale"])
        data["slab_df"] = _positive("slab_df", opts["slab_df"])
    data["mixis"] = int(mixis)
    data["mixis_n_rows"], data["mixis_rows"] = 0, []  # the mixture over every observation
    return data


def _load_data(data) -> dict:
    if isinstance(data, (str, os.PathLike)):
        path = pathlib.Path(data)
        if not path.is_file():
            raise FileNotFoundError(f"data file {str(path)!r} does not exist")
        data = json.loads(path.read_text())
    if not isinstance(data, Mapping):
        raise TypeError(f"data must be a dict or a JSON file path, got {type(data).__name__}")
    return dict(data)


def _prepare_data(path: pathlib.Path, name: str | None, data, mixis: bool) -> dict:
    data = _load_data(data)
    code = program_text(path)
    declares_mixis = re.search(r"\bint\s*<[^>]*>\s*mixis\s*;|\bint\s+mixis\s*;", code)
    if mixis and not declares_mixis:
        raise ValueError(
            f"mixis=True needs a program that declares `int mixis;` in its data block; "
            f"{path.name} does not"
        )
    if declares_mixis:
        if mixis:
            data["mixis"] = 1
        else:
            data.setdefault("mixis", 0)
        _default_mixis_rows(code, data)
    if name is not None:
        missing = [k for k in _REQUIRED_DATA[name] if k not in data]
        if missing:
            raise ValueError(
                f"data for {name} lacks {missing}; build it with loo_adapt.stan.backends.stan_data"
            )
        X, y = _check_xy(data["X"], data["y"])
        if data["N"] != X.shape[0] or data["D"] != X.shape[1]:
            raise ValueError(
                f"N = {data['N']}, D = {data['D']} disagree with X of shape {X.shape}"
            )
        data["X"], data["y"] = X, y
    return data


_MIXIS_ROWS_DECL = re.compile(r"\bint\s*<[^>]*>\s*mixis_n_rows\s*;|\bint\s+mixis_n_rows\s*;")


def _default_mixis_rows(code: str, data: dict) -> None:
    """``mixis_n_rows = 0`` and an empty ``mixis_rows`` (the mixture over every row) for a
    program that declares them and data that does not set them; programs declaring only
    ``mixis`` (hand-flagged, older bundled ones) get nothing."""
    if "mixis_n_rows" in data or not _MIXIS_ROWS_DECL.search(code):
        return
    if "mixis_rows" in data and np.size(data["mixis_rows"]) > 0:
        raise ValueError("data sets mixis_rows but not mixis_n_rows; set both")
    data["mixis_n_rows"] = 0
    data["mixis_rows"] = []


def _jsonable(data: dict) -> dict:
    out = {}
    for k, v in data.items():
        if isinstance(v, np.ndarray):
            out[k] = v.tolist()
        elif isinstance(v, np.generic):
            out[k] = v.item()
        else:
            out[k] = v
    return out


# --------------------------------------------------------------------------- backends


def cmdstan_available() -> bool:
    """True if cmdstanpy is importable and finds a CmdStan installation."""
    try:
        import cmdstanpy
    except ImportError:
        return False
    try:
        cmdstanpy.cmdstan_path()
    except Exception:  # cmdstanpy raises ValueError, older versions other types
        return False
    return True


def stanli_available() -> bool:
    try:
        import stanli  # noqa: F401
    except Exception:  # a broken native build must not break backend selection
        return False
    return True


def pystan_available() -> bool:
    try:
        import stan  # noqa: F401
    except Exception:
        return False
    return True


_AVAILABLE = {"cmdstan": cmdstan_available, "stanli": stanli_available, "pystan": pystan_available}
_INSTALL_HINT = {
    "cmdstan": "install CmdStan (python -m cmdstanpy.install_cmdstan) or set CMDSTAN",
    "stanli": "pip install 'loo-adapt[stanli]'",
    "pystan": "pip install 'loo-adapt[pystan]'",
}


def available_backends() -> list[str]:
    """The usable backends, in the order ``backend="auto"`` prefers them."""
    return [b for b in BACKENDS if _AVAILABLE[b]()]


def select_backend(backend: str = "auto") -> str:
    """Resolve ``"auto"`` (CmdStan if installed, else stanli, else PyStan) or check a forced one."""
    if backend == "auto":
        for b in BACKENDS:
            if _AVAILABLE[b]():
                return b
        raise RuntimeError(
            "no Stan backend available: install CmdStan (with cmdstanpy), stanli "
            "(pip install 'loo-adapt[stanli]') or PyStan 3"
        )
    if backend not in BACKENDS:
        raise ValueError(f"backend must be 'auto' or one of {list(BACKENDS)}, got {backend!r}")
    if not _AVAILABLE[backend]():
        raise RuntimeError(f"backend {backend!r} is not available: {_INSTALL_HINT[backend]}")
    return backend


# --------------------------------------------------------------------------- draws


def draws_from_columns(names, values, *, method: str = "mcmc", source: str = "") -> Draws:
    """Draws from flat Stan columns (see `loo_adapt.io.readers.read_columns`)."""
    from loo_adapt.io.readers import read_columns

    return read_columns(names, values, method=method, source=source or "columns")


def draws_from_cmdstanpy(fit, *, source: str = "") -> Draws:
    """Draws from a cmdstanpy result (see `loo_adapt.io.readers.read_cmdstanpy`)."""
    from loo_adapt.io.readers import read_cmdstanpy

    draws = read_cmdstanpy(fit)
    if source:
        draws.source = source
    return draws


# --------------------------------------------------------------------------- fitting


def _cache_dir() -> pathlib.Path:
    root = os.environ.get("LOO_ADAPT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "loo_adapt"
    )
    return pathlib.Path(root)


class CacheNotWritableError(RuntimeError):
    """The cache folder (compiled models, flagged programs) cannot be written; the message
    names it and ``LOO_ADAPT_CACHE`` (it is never the report folder)."""


def write_to_cache(target: pathlib.Path, write) -> None:
    """Create ``target``'s folder in the cache and call ``write(target)``; a folder or file
    that cannot be written is reported as the cache's fault, naming it."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        write(target)
    except OSError as err:
        where = err.filename or target
        raise CacheNotWritableError(
            f"the loo_adapt cache folder {str(_cache_dir())!r} cannot be written "
            f"({err.strerror or err} at {str(where)!r}); set the environment variable "
            "LOO_ADAPT_CACHE to a writable folder") from None


def cached_program_copy(path, kind: str) -> pathlib.Path:
    """``<cache>/<kind>/<hash of the text>/<name>.stan``: the program's copy, its ``#include``
    files inlined (the copy lives elsewhere), written once per text, for a compiler that
    writes beside it (the user's folder may be read-only) and whose library a process cannot
    load again under the same name once the program changes."""
    path = pathlib.Path(path)
    text = program_text(path)
    target = _cache_dir() / kind / hashlib.sha256(text.encode()).hexdigest()[:16] / path.name
    if not target.is_file():
        write_to_cache(target, lambda t: t.write_text(text))
    return target


def _cmdstan_model(path: pathlib.Path):
    """A compiled CmdStanModel, built once per program text in a writable cache
    (`cached_program_copy`): CmdStan writes the executable next to the .stan file."""
    import cmdstanpy

    return cmdstanpy.CmdStanModel(stan_file=str(cached_program_copy(path, "cmdstan")))


@contextlib.contextmanager
def quiet_cmdstanpy(verbose: bool = False, warnings_too: bool = False):
    """Silence cmdstanpy's INFO lines (one per chain start / finish) and its "Non-fatal error
    during sampling" warnings (a rejected proposal) unless ``verbose``.

    Parameters
    ----------
    verbose : keep cmdstanpy's logging as it is.
    warnings_too : silence its WARNING lines as well: for a fit whose NUTS tree depth the
        package capped on purpose, cmdstanpy's "Some chains may have failed to converge
        ... iterations at max treedepth" is expected and says nothing about convergence
        (the caller reports divergences itself).

    Examples
    --------
    >>> with quiet_cmdstanpy():
    ...     pass
    """
    log = logging.getLogger("cmdstanpy")
    previous = log.level
    floor = logging.ERROR if warnings_too else logging.WARNING
    if not verbose and log.getEffectiveLevel() < floor:
        log.setLevel(floor)
    if not verbose:
        log.addFilter(_drop_rejections)
    try:
        yield
    finally:
        log.setLevel(previous)
        log.removeFilter(_drop_rejections)


def _drop_rejections(record: logging.LogRecord) -> bool:
    """False for cmdstanpy's "Non-fatal error during sampling" (Stan rejecting a proposal,
    mostly in warm-up: three lines per refit or mixture fit the package runs, which its own
    divergence and convergence checks judge)."""
    return not str(record.msg).startswith("Non-fatal error during sampling")


def compile_model(name_or_stan_file, *, verbose: bool = False):
    """Compile a program with CmdStan once (into the cache); later fits reuse the executable.

    Parameters
    ----------
    name_or_stan_file : bundled program name or ``.stan`` path.
    verbose : show cmdstanpy's INFO logging.

    Returns
    -------
    cmdstanpy.CmdStanModel

    Examples
    --------
    >>> compile_model("logistic_normal")  # doctest: +SKIP
    """
    path, _ = _resolve_program(name_or_stan_file)
    with quiet_cmdstanpy(verbose):
        return _cmdstan_model(path)


def _check_counts(chains, warmup, draws):
    for key, v, low in (("chains", chains, 1), ("warmup", warmup, 0), ("draws", draws, 1)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
            raise ValueError(f"{key} must be an integer >= {low}, got {v!r}")


def fit(
    name_or_stan_file,
    data,
    *,
    backend: str = "auto",
    chains: int = 4,
    warmup: int = 1000,
    draws: int = 1000,
    seed: int = 1,
    mixis: bool = False,
    adapt_delta: float | None = None,
    max_treedepth: int = 10,
    refresh: int | None = None,
    show_progress: bool = False,
    parallel_chains: int | None = None,
    verbose: bool = False,
) -> Draws:
    """NUTS fit of a bundled program (by name) or a ``.stan`` file; returns ``Draws``.

    ``parallel_chains`` caps the chains sampled at once (None: all of them, up to the cores);
    ``verbose`` keeps cmdstanpy's INFO logging, which is silenced otherwise.

    ``data``: a dict (e.g. from :func:`stan_data`) or a JSON file. ``mixis=True`` sets the
    program's ``mixis`` flag, so the draws come from the mixture-IS proposal rather than the
    posterior. ``adapt_delta`` None means Stan's 0.8. ``refresh`` None means 100 iterations
    between progress messages when ``show_progress`` else silent. CmdStan writes its CSV with
    18 significant figures, so the draws are as exact as the other backends'.
    """
    path, name = _resolve_program(name_or_stan_file)
    _check_counts(chains, warmup, draws)
    if adapt_delta is not None and not 0 < adapt_delta < 1:
        raise ValueError(f"adapt_delta must be in (0, 1), got {adapt_delta!r}")
    data = _prepare_data(path, name, data, mixis)
    chosen = select_backend(backend)
    if refresh is None:
        refresh = 100 if show_progress else 0
    source = (
        f"{chosen} NUTS fit of {path.name}: {chains} chains x {draws} draws after {warmup} "
        f"warm-up, seed {seed}" + (", mixis proposal" if data.get("mixis") else "")
    )
    delta = 0.8 if adapt_delta is None else float(adapt_delta)
    if parallel_chains is not None:
        _check_counts(parallel_chains, 0, 1)
    parallel = min(chains, parallel_chains or os.cpu_count() or 1)
    if chosen == "cmdstan":
        with quiet_cmdstanpy(verbose):
            model = _cmdstan_model(path)
            result = model.sample(
                data=_jsonable(data), chains=chains, iter_warmup=warmup, iter_sampling=draws,
                seed=seed, adapt_delta=delta, max_treedepth=max_treedepth,
                refresh=refresh if refresh > 0 else None, show_progress=show_progress,
                sig_figs=18, parallel_chains=parallel,
            )
        return draws_from_cmdstanpy(result, source=source)
    if chosen == "stanli":
        import stanli

        from loo_adapt.stan.interrupts import signals_not_lost

        model = stanli.Model(stan_file=str(path), data=_jsonable(data), seed=seed)
        with signals_not_lost():  # stanli may drop a Ctrl-C that lands as a fit ends
            result = model.sample(
                chains=chains, seed=seed, warmup=warmup, samples=draws, delta=delta,
                max_depth=max_treedepth, refresh=refresh, parallel_chains=parallel,
            )
        from loo_adapt.io.readers import read_stanli

        out = read_stanli(result)
        out.source = source
        return out
    import stan  # PyStan 3

    posterior = stan.build(path.read_text(), data=_jsonable(data), random_seed=seed)
    result = posterior.sample(
        num_chains=chains, num_samples=draws, num_warmup=warmup, delta=delta,
        max_depth=max_treedepth, refresh=max(refresh, 1),
    )
    names = list(result.sample_and_sampler_param_names) + list(result.constrained_param_names)
    # PyStan keeps (columns, draws, chains)
    values = np.transpose(np.asarray(result._draws), (2, 1, 0))
    return draws_from_columns(names, values, method="mcmc", source=source)


def fit_method(
    name_or_stan_file,
    data,
    *,
    method: str,
    backend: str = "auto",
    draws: int = 1000,
    seed: int = 1,
    mixis: bool = False,
    show_progress: bool = False,
    **kwargs,
) -> Draws:
    """An approximate posterior ("variational" = ADVI meanfield, "laplace", "pathfinder").

    Only CmdStan offers these (stanli and PyStan 3 sample with NUTS only; stanli's Pathfinder
    only initialises chains), so any other backend raises NotImplementedError. Extra keyword
    arguments go to the cmdstanpy method. The draws carry ``log_p``/``log_q`` for
    importance sampling. Pathfinder defaults to a single path (``num_paths=1``) so its
    draws are not PSIS-resampled.
    """
    if method not in APPROXIMATE_METHODS:
        raise ValueError(f"method must be one of {list(APPROXIMATE_METHODS)}, got {method!r}")
    path, name = _resolve_program(name_or_stan_file)
    _check_counts(1, 0, draws)
    data = _prepare_data(path, name, data, mixis)
    chosen = select_backend(backend)
    if chosen != "cmdstan":
        raise NotImplementedError(
            f"method={method!r} is not supported by the {chosen!r} backend (it only runs NUTS); "
            "install CmdStan for variational, Laplace and Pathfinder fits"
        )
    common = dict(data=_jsonable(data), seed=seed, show_console=show_progress, sig_figs=18)
    common.update(kwargs)
    with quiet_cmdstanpy(show_progress):
        model = _cmdstan_model(path)
        if method == "variational":
            result = model.variational(draws=draws, **common)
        elif method == "laplace":
            result = model.laplace_sample(draws=draws, **common)
        else:
            common.setdefault("num_paths", 1)
            if common["num_paths"] == 1:
                common.setdefault("psis_resample", False)
            result = model.pathfinder(draws=draws, **common)
    return draws_from_cmdstanpy(
        result, source=f"cmdstan {method} fit of {path.name}, {draws} draws, seed {seed}"
    )


# --------------------------------------------------------------------------- refits


def drop_observation(data, i: int) -> dict:
    """The data without row ``i`` of ``X`` and ``y`` (``N`` reduced by one)."""
    data = _load_data(data)
    missing = [k for k in ("N", "X", "y") if k not in data]
    if missing:
        raise ValueError(
            f"refits need data with N, X and y (the bundled programs' layout); missing "
            f"{missing}. For other programs pass your own refit function."
        )
    X = np.asarray(data["X"], dtype=np.float64)
    y = np.asarray(data["y"])
    n = int(data["N"])
    if X.shape[0] != n or y.shape[0] != n:
        raise ValueError(f"N = {n} disagrees with X of shape {X.shape} / y of length {len(y)}")
    if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
        raise TypeError(f"observation index must be an integer, got {i!r}")
    if not 0 <= i < n:
        raise IndexError(f"observation index {i} out of range for N = {n}")
    if n < 2:
        raise ValueError("cannot leave out the only observation")
    out = dict(data)
    out["X"] = np.delete(X, i, axis=0)
    out["y"] = np.delete(y, i)
    out["N"] = n - 1
    return out


def refit_without(name_or_stan_file, data, i: int, **fit_kw) -> Draws:
    """Exact LOO refit: :func:`fit` on the data without observation ``i`` (0-based)."""
    return fit(name_or_stan_file, drop_observation(data, i), **fit_kw)


def _likelihood_family(name: str, draws: Draws, X, y):
    """The model family computing a bundled program's likelihood (the registry's)."""
    entry = _registry.resolve(_canonical_name(name))
    icept = entry.roles.get("intercept")
    has_intercept = icept is not None and icept in draws and draws[icept].size > 0
    return _registry.likelihood_family(entry.program, X, y, has_intercept=has_intercept)


def linear_predictor(name: str, draws: Draws, X) -> np.ndarray:
    """Linear predictor eta (S, n) of a bundled program at the draws' parameters.

    ``name`` may also be a fixture alias ("rhs_logistic", "relu1"). ``X`` is (n, D) or (D,).
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[None, :]
    if X.ndim != 2 or not np.all(np.isfinite(X)):
        raise ValueError(f"X must be a finite (n, D) or (D,) array, got shape {X.shape}")
    model = _likelihood_family(name, draws, X, np.zeros(X.shape[0]))
    return model.linear_predictor(model.theta_from_draws(draws)[0])


def pointwise_log_lik(name: str, draws: Draws, X, y) -> np.ndarray:
    """Bernoulli-logit log-likelihood (S, n) of rows X (n, D), y (n,) under each draw."""
    X, yv = _check_xy(np.atleast_2d(np.asarray(X, dtype=np.float64)), np.atleast_1d(y))
    model = _likelihood_family(name, draws, X, yv)
    return model.log_lik(model.theta_from_draws(draws)[0])


def heldout_log_lik(name: str, draws: Draws, x_i, y_i) -> np.ndarray:
    """log p(y_i | x_i, theta_s) for each draw s, shape (S,): the held-out term of a refit."""
    x_i = np.asarray(x_i, dtype=np.float64)
    if x_i.ndim != 1:
        raise ValueError(f"x_i must be one row (D,), got shape {x_i.shape}")
    return pointwise_log_lik(name, draws, x_i[None, :], [y_i])[:, 0]
