"""The ``loo-adapt`` command-line tool.

    loo-adapt evaluate CSV... --data data.json --model logistic|logistic-rhs|relu --out DIR
    loo-adapt fit --model logistic-rhs --data FILE.csv|FILE.json --out DIR [--mixis]
    loo-adapt demo [--out DIR] [--quick]
    loo-adapt vifa --data data.json --model logistic|relu --out DIR [--K 5]

Exit codes (for scripts):

- 0: done, every observation has a reliable estimate (``demo``: done);
- 1: bad input (missing file, malformed data, unknown variable, ...) or an output that
  cannot be written (``--out`` not writable, disk full, folder in use by another run),
  one line on stderr naming the file or option and the fix;
- 2: usage error (unknown option or command, bad choice, an option value of the wrong
  type or range), from argparse;
- 3: ``evaluate`` only: results written, but some observations are still unreliable or
  unverified (their estimator's check failed: refit them, or rerun with
  ``--fallback mixis refit``); the summary names the failed check per observation;
- 4: the computation failed for a reason other than the input (a refit or backend error,
  or out of memory), one line on stderr;
- 130: interrupted (SIGINT, Ctrl-C); 143: terminated (SIGTERM).  Finished refits are kept
  in the checkpoint folder named on stderr, and ``--resume DIR`` continues from them; the
  report folder keeps its previous report (reports are written atomically).

Every error is one line on stderr; ``LOO_ADAPT_DEBUG=1`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import gzip
import inspect
import json
import logging
import os
import pathlib
import shutil
import signal
import sys
import time
import warnings
from collections import Counter

import numpy as np

from loo_adapt.io.csv import write_stan_csv  # the Stan CSV writer (also used by `fit`)

from .models import registry as _registry

# exit code 2 (usage error) is argparse's own
EXIT_OK, EXIT_BAD_INPUT, EXIT_UNRELIABLE, EXIT_FAILED = 0, 1, 3, 4
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143

#: Folder (inside --out) where finished refits are saved as they complete, unless --resume.
CHECKPOINT = ".loo-adapt-refits"
#: Seconds to wait for a --scheduler to answer.
SCHEDULER_TIMEOUT = 30

#: command-line model family -> bundled Stan program (from `loo_adapt.models.registry`)
FAMILIES = {e.family: e.program for e in _registry.REGISTRY.values()}

#: Stan variable roles each family reads from the draws, with their default names.
NAME_ROLES = {e.family: dict(e.roles) for e in _registry.REGISTRY.values()}

#: The demo: regularized horseshoe on a random subset of the ovarian predictors.
DEMO_FULL = {"columns": 100, "chains": 4, "draws": 1000, "warmup": 1000}
DEMO_QUICK = {"columns": 30, "chains": 2, "draws": 300, "warmup": 300}
DEMO_SEED = 2021


class InputError(Exception):
    """Bad input from the user: reported on stderr as one line, exit code 1."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that the same clean-up runs (exit code 143)."""


# --------------------------------------------------------------------------- option types
def _number_type(kind, test, what):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not test(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value
    parse.__name__ = what
    return parse


_unit_interval = _number_type(float, lambda v: 0 < v <= 1, "a number in (0, 1]")
_positive_float = _number_type(float, lambda v: 0 < v < float("inf"), "a positive number")
_positive_int = _number_type(int, lambda v: v > 0, "a positive integer")


# --------------------------------------------------------------------------- helpers
def _family(name: str) -> str:
    try:
        return _registry.resolve(name).family
    except ValueError:
        raise InputError(f"unknown model {name!r}; choose logistic, logistic-rhs or relu") from None


def _parse_names(text: str | None, family: str) -> dict:
    """``coef=beta,intercept=alpha`` -> {role: stan_name}; ``intercept=none`` drops it."""
    roles = dict(NAME_ROLES[family])
    if not text:
        return roles
    for item in text.split(","):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise InputError(f"--names expects role=stan_name pairs separated by commas, "
                             f"got {item!r}")
        if key not in roles:
            raise InputError(f"--names: unknown role {key!r} for model {family}; roles are "
                             f"{sorted(roles)}")
        roles[key] = None if value.lower() in ("none", "-") else value
    return roles


def _parse_key_values(items, what: str) -> dict:
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"{what} expects KEY=VALUE, got {item!r}")
        value = value.strip()
        try:
            out[key.strip()] = int(value)
        except ValueError:
            try:
                out[key.strip()] = float(value)
            except ValueError:
                raise InputError(f"{what} {key.strip()}: {value!r} is not a number") from None
    return out


def _need_file(path, what: str) -> pathlib.Path:
    path = pathlib.Path(path)
    if path.is_dir():
        raise InputError(f"{what} {str(path)!r} is a folder; give the file itself")
    if not path.is_file():
        raise InputError(f"{what} {str(path)!r} does not exist")
    return path


def _load_json(path) -> dict:
    path = _need_file(path, "data file")
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))  # a BOM is harmless here
    except UnicodeDecodeError as err:
        raise InputError(f"{path} is not UTF-8 text (byte {err.start}); save the Stan data "
                         "JSON as UTF-8") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{path} is not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path} must hold a JSON object (Stan data), got "
                         f"{type(data).__name__}")
    return data


def _read_xy_csv(path) -> tuple[np.ndarray, np.ndarray]:
    """A CSV (optionally .gz) with y in the first column and X in the rest; a header row
    (any non-numeric first line) is skipped."""
    path = _need_file(path, "data file")
    _check_text_file(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8-sig") as fh:
            first = fh.readline()
        try:
            [float(v) for v in first.strip().split(",")]
            skip = 0
        except ValueError:
            skip = 1
        with opener(path, "rt", encoding="utf-8-sig") as fh:
            table = np.loadtxt(fh, delimiter=",", skiprows=skip, dtype=np.float64, ndmin=2)
    except (UnicodeDecodeError, EOFError, gzip.BadGzipFile) as err:
        raise InputError(f"{path}: cannot read it as {'gzipped ' * (opener is gzip.open)}"
                         f"UTF-8 text ({err}); save it as a plain UTF-8 CSV") from None
    except ValueError as err:
        raise InputError(f"{path}: cannot read a numeric table ({err})") from None
    if table.shape[1] < 2:
        raise InputError(f"{path} needs the outcome y and at least one predictor column")
    return table[:, 1:], table[:, 0]


_GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"


def _check_text_file(path) -> None:
    """One-line errors for a file that cannot be a text CSV: checked before any parser.

    A file named .gz that is not gzip-compressed (or is truncated), binary content, a UTF-8
    byte-order mark (CmdStan never writes one) and data lines that are not UTF-8 (comment
    lines, starting with '#', may hold any bytes).
    """
    path = pathlib.Path(path)
    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
        if path.suffix == ".gz" and head != _GZIP_MAGIC:
            raise InputError(f"{path} is named .gz but is not gzip-compressed; rename it "
                             "without .gz (or compress it with gzip)")
        opener = gzip.open if head == _GZIP_MAGIC else open
        with opener(path, "rb") as fh:
            chunk = fh.read(1 << 16)
    except (EOFError, gzip.BadGzipFile, OSError) as err:
        raise InputError(f"{path}: cannot read it ({err}); is it a complete file?") from None
    if chunk.startswith(_BOM):
        raise InputError(f"{path} starts with a UTF-8 byte-order mark (BOM); save it without "
                         "one (e.g. in a text editor: encoding 'UTF-8', not 'UTF-8 with BOM')")
    if b"\x00" in chunk:
        raise InputError(f"{path} is binary, not a text CSV; pass the CSV files CmdStan "
                         "wrote (one per chain)")
    lines = chunk.split(b"\n")
    if len(chunk) == 1 << 16:
        lines = lines[:-1]  # the last line may be cut in the middle of a character
    for number, line in enumerate(lines, start=1):
        if line.lstrip().startswith(b"#"):
            continue
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"{path} line {number} is not UTF-8 text (byte {err.start}); "
                             "pass the CSV files CmdStan wrote, or save it as UTF-8") from None


def _check_csv_inputs(paths) -> None:
    """Every Stan CSV named on the command line exists and is a text CSV."""
    from loo_adapt.io.csv import expand_paths

    for path in expand_paths(list(paths)):
        _check_text_file(path)


def _prepare_out(path, stack: contextlib.ExitStack | None = None) -> pathlib.Path:
    """The report folder, created (or checked writable) before any work is done.

    With ``stack``, a folder created here is removed again if the command fails while it
    is still empty (a failed run leaves no empty folder behind)."""
    out = pathlib.Path(path)
    if stack is not None and not out.exists():
        stack.push(lambda *exc: _remove_if_empty(out) if exc[0] is not None else None)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {str(out)!r} is a file; give a folder for the report")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".loo-adapt-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise InputError(f"--out {str(out)!r}: cannot write there ({err.strerror}); choose a "
                         "writable folder") from None
    return out


def _remove_if_empty(folder: pathlib.Path) -> None:
    with contextlib.suppress(OSError):
        folder.rmdir()  # only succeeds when empty


def _prepare_fit_data(args) -> dict:
    from loo_adapt.stan import backends as stan

    from .datasets import standardize_columns

    name = FAMILIES[_family(args.model)]
    path = pathlib.Path(args.data)
    priors = {}
    if path.suffix.lower() == ".json":
        raw = _load_json(path)
        if "X" not in raw or "y" not in raw:
            raise InputError(f"{path} needs entries X (N x D) and y (0/1)")
        X, y = raw["X"], raw["y"]
        allowed = set(_registry.resolve(name).prior_defaults)
        priors = {k: v for k, v in raw.items() if k in allowed}
    else:
        X, y = _read_xy_csv(path)
    X = np.asarray(X, dtype=np.float64)
    if args.columns:
        if not 0 < args.columns <= X.shape[1]:
            raise InputError(f"--columns {args.columns}: the data has {X.shape[1]} predictors")
        # chosen from the column count and the seed only, never from y
        rng = np.random.default_rng(args.columns_seed)
        X = X[:, np.sort(rng.choice(X.shape[1], args.columns, replace=False))]
    if args.standardize:
        X = standardize_columns(X)
    priors.update(_parse_key_values(args.prior, "--prior"))
    if "p0" in priors and "scale_global" in priors:
        priors.pop("scale_global")
    return stan.stan_data(name, X, y, **priors)


def _build_model(family: str, data: dict, names: dict, prior_sd=None, scale_icept=None):
    """The model family reading the draws' variables by the given Stan names (registry)."""
    priors = {k: v for k, v in (("prior_sd", prior_sd), ("scale_icept", scale_icept))
              if v is not None}
    try:
        return _registry.model_for(family, data, names=names, **priors)
    except ValueError as err:
        raise InputError(str(err)) from None


class _Stages:
    """A tqdm bar over the named stages of a command (silent with --quiet)."""

    def __init__(self, stages, quiet: bool):
        self.quiet = quiet
        self.bar = None
        self.labels = [stages[0]]  # every label shown, in order
        if not quiet:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=len(stages), desc=stages[0], unit="step", file=sys.stderr,
                            bar_format="{desc:<34s}|{bar:20}| {n_fmt}/{total_fmt} "
                                       "[{elapsed}]", leave=False)

    def next(self, desc=None):
        if desc:
            self.labels.append(desc)
        if self.bar is not None:
            self.bar.update(1)
            if desc:
                self.bar.set_description_str(desc)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _say(args, *text):
    if not args.quiet:
        print(*text, flush=True)


def _print_result(args, res, out_dir, files, extra=""):
    if args.quiet:
        return
    print(res)
    if np.isin(np.asarray(res.loo_adapt.method).astype(str), ("mixis", "refit")).any():
        print("(arviz's k table above leaves out the observations estimated by MixIS or "
              "refits, which have no k-hat; the table below shows k-hat before and after.)")
    print()
    print(res.summary())
    if extra:
        print(extra)
    names = ", ".join(p.name for p in files)
    print(f"\nReport written to {out_dir}/ ({names})")


def _exit_for(res) -> int:
    return EXIT_UNRELIABLE if np.any(res.loo_adapt.unreliable) else EXIT_OK


def _loo_quietly(quiet, **kw):
    """loo_adapt.loo with its unreliable-observation warning shown once, as a note."""
    from loo_adapt import loo

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = loo(**kw)
    if not quiet:
        _print_warnings(str(w.message) for w in caught)
    return res


def _print_warnings(messages) -> None:
    """Each distinct warning once, with its count; loo()'s closing "no verified estimate"
    warning is left out (the summary lists those observations with the reason of each)."""
    counts = Counter(m for m in messages if "have no verified estimate" not in m)
    for message, count in counts.items():
        times = f" ({count} times)" if count > 1 else ""
        print(f"warning{times}: {message}", file=sys.stderr)


# --------------------------------------------------------------------------- commands
def _refit_options(args, out: pathlib.Path, stack: contextlib.ExitStack) -> dict:
    """refit_kwargs of `evaluate`: limits, then (with refits) the checkpoint folder and the
    executor."""
    kwargs = {"progress": not args.quiet, "max_refits": args.max_refits,
              "max_seconds": args.max_seconds}
    if "refit" not in (args.fallback or []):
        return kwargs
    from loo_adapt.stan.refit import refit_loo

    accepted = inspect.signature(refit_loo).parameters
    if args.resume:
        checkpoint = pathlib.Path(args.resume)
        if not checkpoint.is_dir():
            raise InputError(f"--resume {str(checkpoint)!r} is not a folder; give the "
                             "checkpoint folder an interrupted run named")
    else:
        checkpoint = out / CHECKPOINT
        shutil.rmtree(checkpoint, ignore_errors=True)  # a previous run's, not resumed
    if "checkpoint" in accepted:
        kwargs["checkpoint"] = str(checkpoint)
        args.checkpoint = checkpoint
    elif args.resume:
        raise InputError("--resume: this installation's refits keep no checkpoints; "
                         "update loo-adapt")
    if args.scheduler:
        if "executor" not in accepted:
            raise InputError("--scheduler: this installation's refits take no executor; "
                             "update loo-adapt")
        try:
            from dask.distributed import Client
        except ImportError:
            raise InputError("--scheduler needs dask.distributed: pip install "
                             "'dask[distributed]'") from None
        try:
            client = Client(args.scheduler, timeout=SCHEDULER_TIMEOUT)
        except (OSError, TimeoutError, ValueError) as err:
            raise InputError(f"--scheduler {args.scheduler}: cannot connect ({err}); start "
                             "the scheduler or drop --scheduler") from None
        stack.callback(client.close)
        kwargs["executor"] = client
    return kwargs


def cmd_evaluate(args) -> int:
    from loo_adapt import read_csv
    from loo_adapt.estimators.adaptive import SELECTIONS
    from loo_adapt.evaluation.report import report_lock, save_report

    family = _family(args.model)
    data = _load_json(args.data)
    names = _parse_names(args.names, family)
    if args.selection not in SELECTIONS:  # argparse choices cover this; kept for main([...])
        raise InputError(f"--selection must be one of {SELECTIONS}")
    if (args.resume or args.scheduler) and "refit" not in (args.fallback or []):
        raise InputError("--resume and --scheduler apply to refits: add --fallback refit")
    _check_csv_inputs(args.csv)
    if args.mixis_csv:
        _check_csv_inputs(args.mixis_csv)
    stages = _Stages(["reading draws", "LOO", "report"], args.quiet)
    with contextlib.ExitStack() as stack:
        out = _prepare_out(args.out, stack)
        stack.callback(stages.close)
        stack.enter_context(report_lock(out))  # a second run into this folder is refused
        draws = read_csv(args.csv)
        model = None
        if args.method == "psis" and not args.no_adapt:
            model = _build_model(family, data, names, args.prior_sd, args.scale_icept)
        fallback = list(args.fallback or [])
        mixis_draws = read_csv(args.mixis_csv) if args.mixis_csv else None
        if mixis_draws is not None and "mixis" not in fallback and args.method == "psis":
            fallback.append("mixis")
        program = None
        needs_program = ("mm" in fallback or "refit" in fallback
                         or (mixis_draws is None and ("mixis" in fallback
                                                      or args.method == "mixis")))
        if needs_program:
            from loo_adapt.stan.program import StanProgram

            program = StanProgram(args.stan or FAMILIES[family], data, backend=args.backend)
        y = np.asarray(data["y"]) if "y" in data else None
        refit_kwargs = _refit_options(args, out, stack)
        stages.next("LOO (PSIS + adaptation)")
        res = _loo_quietly(
            args.quiet, data=draws, model=model, transforms=tuple(args.transforms),
            selection=args.selection, khat_threshold=args.threshold, seed=args.seed,
            estimator="mixis" if args.method == "mixis" else "auto", program=program,
            fallback=tuple(fallback),
            mixis_draws=mixis_draws, refit_kwargs=refit_kwargs,
            y=y if model is None else None,
        )
        stages.next("writing report")
        files = save_report(res, out, name=f"loo-adapt evaluate ({args.model})")
        stages.next()
    _print_result(args, res, args.out, files)
    return _exit_for(res)


def cmd_fit(args) -> int:
    from loo_adapt.stan import backends as stan

    family = _family(args.model)
    name = FAMILIES[family]
    data = _prepare_fit_data(args)
    out = _prepare_out(args.out)
    (out / "data.json").write_text(json.dumps(stan._jsonable(data)))
    kw = dict(backend=args.backend, chains=args.chains, draws=args.draws, warmup=args.warmup,
              seed=args.seed, adapt_delta=args.adapt_delta)
    backend = stan.select_backend(args.backend)
    stages = _Stages([f"{backend} NUTS fit of {name}"]
                     + ([f"{backend} mixture (MixIS) fit"] if args.mixis else []), args.quiet)
    t0 = time.perf_counter()
    try:
        draws = stan.fit(name, data, **kw)
        config = {"warmup": args.warmup, "seed": args.seed,
                  "adapt_delta": args.adapt_delta or 0.8}
        files = write_stan_csv(draws, out, name, model=name, config=config)
        stages.next(f"{backend} mixture (MixIS) fit" if args.mixis else None)
        mix_files = []
        if args.mixis:
            mix = stan.fit(name, data, mixis=True, **{**kw, "seed": args.seed + 1})
            mix_files = write_stan_csv(mix, out / "mixis", f"{name}_mixis", model=name,
                                       config={**config, "seed": args.seed + 1})
            stages.next()
    finally:
        stages.close()
    seconds = time.perf_counter() - t0
    div = int(np.sum(draws.sample_stats.get("divergent__", 0)))
    _say(args, f"Fitted {name} with {backend}: {args.chains} chains x {args.draws} draws "
               f"({args.warmup} warm-up) in {seconds:.1f} s; {div} divergent transitions.")
    _say(args, f"Wrote {out / 'data.json'} and {len(files)} draw files "
               f"({files[0].name} ...)" + (f"; mixture draws in {out / 'mixis'}/"
                                           if mix_files else ""))
    cmd = (f"loo-adapt evaluate {out}/{name}_*.csv --data {out}/data.json --model "
           f"{family} --out {out}/report")
    if mix_files:
        cmd += f" --mixis-csv {out}/mixis/{name}_mixis_*.csv"
    _say(args, f"Next: {cmd}")
    return EXIT_OK


def cmd_demo(args) -> int:
    from loo_adapt.evaluation.report import save_report
    from loo_adapt.stan import backends as stan

    from .datasets import load_ovarian
    from .models.bundled import model_for

    _prepare_out(args.out)
    settings = dict(DEMO_QUICK if args.quick else DEMO_FULL)
    if args.chains:
        settings["chains"] = args.chains
    if args.draws:
        settings["draws"] = args.draws
    backend = stan.select_backend(args.backend)
    t_start = time.perf_counter()
    X, y = load_ovarian(standardize=False)
    rng = np.random.default_rng(DEMO_SEED)
    cols = np.sort(rng.choice(X.shape[1], settings["columns"], replace=False))
    from .datasets import standardize_columns

    Xs = standardize_columns(X[:, cols])
    data = stan.stan_data("logistic_rhs", Xs, y)
    _say(args, f"Ovarian cancer micro-array data (Schummer et al. 1999): n = {X.shape[0]}, "
               f"{X.shape[1]} predictors.")
    _say(args, f"Model: logistic regression with a regularized horseshoe prior on "
               f"{settings['columns']} predictor columns chosen at random (seed {DEMO_SEED}, "
               f"without looking at y), standardised; the full 1536-column fit takes longer.")
    _say(args, f"Fitting with {backend}: {settings['chains']} chains x {settings['draws']} "
               f"draws after {settings['warmup']} warm-up, then the MixIS mixture proposal.")
    fit_kw = dict(backend=backend, chains=settings["chains"], draws=settings["draws"],
                  warmup=settings["warmup"], adapt_delta=0.95)
    stages = _Stages(["NUTS fit (posterior)", "NUTS fit (MixIS mixture)", "LOO",
                      "report"], args.quiet)
    try:
        t0 = time.perf_counter()
        draws = stan.fit("logistic_rhs", data, seed=1, **fit_kw)
        t_fit = time.perf_counter() - t0
        stages.next("NUTS fit (MixIS mixture)")
        t0 = time.perf_counter()
        mix = stan.fit("logistic_rhs", data, seed=2, mixis=True, **fit_kw)
        t_mix = time.perf_counter() - t0
        stages.next("LOO (PSIS, then MixIS for every observation)")
        t0 = time.perf_counter()
        model = model_for("logistic_rhs", data)
        res = _loo_quietly(args.quiet, data=draws, model=model, estimator="mixis",
                           mixis_draws=mix, seed=1)
        t_loo = time.perf_counter() - t0
        stages.next("writing report")
        files = save_report(res, args.out, name="loo-adapt demo: ovarian, regularized "
                                                  "horseshoe logistic regression")
        stages.next()
    finally:
        stages.close()
    div = int(np.sum(draws.sample_stats.get("divergent__", 0)))
    total = time.perf_counter() - t_start
    extra = (f"\nTimes: posterior fit {t_fit:.1f} s ({div} divergent transitions), mixture "
             f"fit {t_mix:.1f} s, LOO {t_loo:.1f} s; total {total:.1f} s.")
    _print_result(args, res, args.out, files, extra)
    return EXIT_OK


# --------------------------------------------------------------------------- vifa
def cmd_vifa(args) -> int:
    """Fit VIFA (factor-analysis VI) to a family, then LOO from its draws (p/q ratios,
    certified adaptive IS) as `evaluate` reports it."""
    from loo_adapt.evaluation.report import report_lock, save_report
    from loo_adapt.laplace.vifa import VIFA

    family = _family(args.model)
    data = _load_json(args.data)
    model = _build_model(family, data, _parse_names(args.names, family), args.prior_sd,
                         args.scale_icept)
    stages = _Stages([f"VIFA fit (K = {args.K})", "LOO (p/q + adaptation)", "report"],
                     args.quiet)
    with contextlib.ExitStack() as stack:
        out = _prepare_out(args.out, stack)
        stack.callback(stages.close)
        stack.enter_context(report_lock(out))
        try:
            fit = VIFA(model, K=args.K, init="map", n_mc=args.n_mc,
                       batch_size=args.batch_size, max_iter=args.max_iter, seed=args.seed,
                       progress=False)
        except (ValueError, TypeError) as err:
            raise InputError(f"vifa: {err}") from None
        stages.next("LOO (p/q + adaptation)")
        res = _loo_quietly(args.quiet, data=fit.to_draws(n_draws=args.draws, seed=args.seed),
                           model=model, seed=args.seed, khat_threshold=args.threshold)
        stages.next("writing report")
        files = save_report(res, out, name=f"loo-adapt vifa ({args.model}, K = {args.K})")
        stages.next()
    _print_result(args, res, args.out, files,
                  f"VIFA: {fit.n_iter} steps in {fit.seconds:.1f} s"
                  + ("" if fit.converged else " (the ELBO had not levelled off)"))
    return _exit_for(res)


def _add_vifa_parser(sub, common, models):
    vf = sub.add_parser("vifa", parents=[common],
                        help="factor-analysis variational fit, then LOO from its draws")
    vf.add_argument("--data", required=True, help="Stan data JSON (with X and y)")
    vf.add_argument("--model", required=True, choices=models, metavar="MODEL",
                    help="logistic | relu (families without hyperparameters)")
    vf.add_argument("--names", help="Stan variable names, as for evaluate")
    vf.add_argument("--out", required=True, help="report directory")
    vf.add_argument("--K", type=_positive_int, default=5, help="number of factors")
    vf.add_argument("--draws", type=_positive_int, default=4000)
    vf.add_argument("--n-mc", type=_positive_int, default=4, help="draws per step")
    vf.add_argument("--batch-size", type=_positive_int, help="minibatch (default: all)")
    vf.add_argument("--max-iter", type=_positive_int, default=5000)
    vf.add_argument("--threshold", type=_unit_interval)
    vf.add_argument("--prior-sd", type=float)
    vf.add_argument("--scale-icept", type=float)
    vf.add_argument("--seed", type=int, default=1)
    vf.set_defaults(func=cmd_vifa)


# --------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    from loo_adapt import __version__
    from loo_adapt.estimators.adaptive import SELECTIONS

    from .api import ALL_TRANSFORMS, DEFAULT_TRANSFORMS, FALLBACKS
    from .models.bundled import ALIASES

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-q", "--quiet", action="store_true",
                        help="print nothing but errors (no progress bars, no summary)")
    common.add_argument("-v", "--verbose", action="store_true",
                        help="also show the Stan backend's INFO logging (cmdstanpy)")

    parser = argparse.ArgumentParser(
        prog="loo-adapt",
        description="Leave-one-out cross-validation for Stan models: PSIS, adaptive "
                    "importance sampling, mixture IS and refits.",
        epilog="Exit codes: 0 ok; 1 bad input or unwritable output; 2 usage error; 3 "
               "(evaluate) results written but some observations are still unreliable; 4 "
               "the computation failed; 130 interrupted; 143 terminated.",
    )
    parser.add_argument("--version", action="version", version=f"loo-adapt {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{evaluate,fit,demo,vifa}")
    sub.required = True
    models = sorted(ALIASES)

    ev = sub.add_parser("evaluate", parents=[common],
                        help="adaptive LOO on CmdStan output files, written as a report")
    ev.add_argument("csv", nargs="+", help="Stan CSV files (one per chain), globs or a folder")
    ev.add_argument("--data", required=True, help="Stan data JSON (with X and y)")
    ev.add_argument("--model", required=True, choices=models, metavar="MODEL",
                    help="logistic | logistic-rhs | relu (or a bundled program name)")
    ev.add_argument("--names", help="Stan variable names, e.g. coef=beta,intercept=alpha "
                                    "(relu: W1=..,b1=..,w2=..,b2=..; intercept=none drops it)")
    ev.add_argument("--out", required=True, help="report directory")
    ev.add_argument("--mixis-csv", nargs="+", help="draws of the MixIS mixture proposal "
                                                   "(adds the mixis fallback)")
    ev.add_argument("--fallback", nargs="+", choices=FALLBACKS, default=[],
                    help="estimators for observations still unreliable, in order")
    ev.add_argument("--transforms", nargs="+", choices=ALL_TRANSFORMS,
                    default=list(DEFAULT_TRANSFORMS), help="adaptive-IS transforms to try")
    ev.add_argument("--selection", choices=SELECTIONS, default="split",
                    help="how a transform is chosen (split: honest held-out k-hat; "
                         "min_khat: the paper's rule)")
    ev.add_argument("--method", choices=("psis", "mixis"), default="psis",
                    help="psis (adapted) or mixis for every observation")
    ev.add_argument("--no-adapt", action="store_true", help="plain PSIS-LOO only")
    ev.add_argument("--stan", help=".stan file of the draws (for the mm/refit fallbacks and "
                                   "MixIS fits); default: the bundled program")
    ev.add_argument("--backend", default="auto", choices=("auto", "cmdstan", "stanli",
                                                           "pystan"))
    ev.add_argument("--threshold", type=_unit_interval,
                    help="k-hat threshold in (0, 1] (default min(1 - 1/log10 S, 0.7))")
    ev.add_argument("--prior-sd", type=float, help="prior sd when the data JSON lacks prior_sd")
    ev.add_argument("--scale-icept", type=float,
                    help="intercept prior sd when the data JSON lacks scale_icept")
    ev.add_argument("--max-refits", type=_positive_int,
                    help="refit at most this many observations")
    ev.add_argument("--max-seconds", type=_positive_float, help="time budget of the refits")
    ev.add_argument("--resume", metavar="DIR",
                    help="continue the refits of an interrupted run from its checkpoint "
                         f"folder (OUT/{CHECKPOINT} unless given)")
    ev.add_argument("--scheduler", metavar="ADDRESS",
                    help="run the refits on a dask.distributed scheduler (e.g. "
                         "tcp://host:8786)")
    ev.add_argument("--seed", type=int, default=1)
    ev.set_defaults(func=cmd_evaluate)

    ft = sub.add_parser("fit", parents=[common], help="fit a bundled Stan program and save "
                                                      "the draws as Stan CSV")
    ft.add_argument("--model", required=True, choices=models, metavar="MODEL",
                    help="logistic | logistic-rhs | relu")
    ft.add_argument("--data", required=True,
                    help="CSV (first column y, the rest X; header optional) or JSON with X, y")
    ft.add_argument("--out", required=True, help="output directory")
    ft.add_argument("--chains", type=_positive_int, default=4)
    ft.add_argument("--draws", type=_positive_int, default=1000)
    ft.add_argument("--warmup", type=int, default=1000)
    ft.add_argument("--seed", type=int, default=1)
    ft.add_argument("--adapt-delta", type=_unit_interval, default=None)
    ft.add_argument("--backend", default="auto", choices=("auto", "cmdstan", "stanli",
                                                           "pystan"))
    ft.add_argument("--mixis", action="store_true",
                    help="also fit the MixIS mixture proposal (written to OUT/mixis/)")
    ft.add_argument("--standardize", action="store_true",
                    help="scale each predictor to mean 0, sd 1")
    ft.add_argument("--columns", type=int, help="use a random subset of this many predictor "
                                                "columns (chosen without looking at y)")
    ft.add_argument("--columns-seed", type=int, default=0)
    ft.add_argument("--prior", action="append", metavar="KEY=VALUE",
                    help="prior setting of the bundled program (e.g. p0=20, H=5, prior_sd=2)")
    ft.set_defaults(func=cmd_fit)

    dm = sub.add_parser("demo", parents=[common],
                        help="fit + adaptive LOO + report on the bundled ovarian data")
    dm.add_argument("--out", default="loo-adapt-demo", help="report directory")
    dm.add_argument("--quick", action="store_true",
                    help=f"{DEMO_QUICK['columns']} columns, {DEMO_QUICK['chains']} chains x "
                         f"{DEMO_QUICK['draws']} draws (default: {DEMO_FULL['columns']} columns, "
                         f"{DEMO_FULL['chains']} x {DEMO_FULL['draws']})")
    dm.add_argument("--backend", default="auto", choices=("auto", "cmdstan", "stanli",
                                                           "pystan"))
    dm.add_argument("--chains", type=_positive_int)
    dm.add_argument("--draws", type=_positive_int)
    dm.set_defaults(func=cmd_demo)
    _add_vifa_parser(sub, common, models)
    return parser


_SIGTERM = {"received": False, "pid": None}


def _on_sigterm(signum, frame):
    """SIGTERM is answered as Ctrl-C is: through the SIGINT handler in force (a native
    sampler's own watcher stops it cleanly; a handler raising inside a native call would be
    lost), and remembered so that the exit code says "terminated"."""
    if os.getpid() != _SIGTERM["pid"]:  # a forked worker: SIGTERM ends it, as by default
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    _SIGTERM["received"] = True
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
    else:
        raise Terminated()


@contextlib.contextmanager
def _signals():
    """SIGTERM stops a command like Ctrl-C (refits stop their workers and keep what is
    finished), with exit code 143 (main thread only)."""
    _SIGTERM.update(received=False, pid=os.getpid())
    try:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _quiet_backends(verbose: bool):
    """cmdstanpy's per-chain INFO lines only with --verbose."""
    logger = logging.getLogger("cmdstanpy")
    level = logger.level
    logger.setLevel(logging.INFO if verbose else logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def _from_refit(err: BaseException) -> bool:
    """True if the error was raised inside the refit machinery (not an input problem)."""
    tb = err.__traceback__
    while tb is not None:
        path = pathlib.Path(tb.tb_frame.f_code.co_filename)
        if path.parent.name == "stan" and path.name in ("refit.py", "pool.py"):
            return True
        tb = tb.tb_next
    return False


def _os_error_message(err: OSError) -> str:
    where = f" {err.filename}" if err.filename else ""
    if err.errno == errno.ENOSPC:
        return (f"no space left on the device writing{where or ' the output'}; free space or "
                "choose another --out (a previous report there is unchanged)")
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"cannot write{where} ({err.strerror}); choose a writable --out"
    return f"{err.strerror or err}{':' + where if where else ''}"


def _interrupted_message(args, terminated: bool) -> str:
    what = "terminated" if terminated else "interrupted"
    checkpoint = getattr(args, "checkpoint", None)
    if checkpoint is not None and pathlib.Path(checkpoint).is_dir():
        return (f"{what}; finished refits are saved in {checkpoint}: rerun the same command "
                f"with --resume {checkpoint} to continue")
    return f"{what}; no report was written (a previous report in --out is unchanged)"


def main(argv=None) -> int:
    """Run the tool; returns the exit code (the console script exits with it).

    Parameters
    ----------
    argv : the arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit code: see the module docstring.

    Examples
    --------
    >>> main(["--version"])  # doctest: +ELLIPSIS
    loo-adapt ...
    0
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version (0) and usage errors (2)
        return int(exc.code or 0)
    prefix = f"loo-adapt {args.command}: error:"
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(_signals())
            stack.enter_context(_quiet_backends(args.verbose))
            if args.quiet:
                devnull = stack.enter_context(open(os.devnull, "w"))
                stack.enter_context(contextlib.redirect_stdout(devnull))
            return args.func(args)
    except KeyboardInterrupt as err:
        terminated = isinstance(err, Terminated) or _SIGTERM["received"]
        print(f"loo-adapt {args.command}: {_interrupted_message(args, terminated)}",
              file=sys.stderr)
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    except Exception as err:
        if os.environ.get("LOO_ADAPT_DEBUG"):
            raise
        code, message = _classify(err)
        print(f"{prefix} {message}", file=sys.stderr)
        return code


def _classify(err: Exception) -> tuple[int, str]:
    """(exit code, one-line message) for an error that ended a command."""
    from loo_adapt.evaluation.report import ReportBusyError

    text = " ".join(str(err.args[0] if isinstance(err, KeyError) and err.args else err)
                    .split())
    if isinstance(err, MemoryError):
        return EXIT_FAILED, ("out of memory computing LOO; for a large log_lik use the Dask "
                             "path, loo_adapt.loo(dask_array), which works in chunks of "
                             "observations")
    if _from_refit(err):
        return EXIT_FAILED, (f"the refits failed ({type(err).__name__}: {text}); the inputs "
                             "were read fine")
    if isinstance(err, (InputError, ReportBusyError, FileNotFoundError, NotADirectoryError,
                        IsADirectoryError, ValueError, TypeError, KeyError, IndexError,
                        RuntimeError, NotImplementedError)):
        return EXIT_BAD_INPUT, text
    if isinstance(err, OSError):
        return EXIT_BAD_INPUT, _os_error_message(err)
    return EXIT_FAILED, (f"{type(err).__name__}: {text} (rerun with LOO_ADAPT_DEBUG=1 for "
                         "the traceback and report it)")


if __name__ == "__main__":
    sys.exit(main())
