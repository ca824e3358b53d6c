"""The ``loo-adapt`` command-line tool.

    loo-adapt evaluate CSV... --data data.json --model logistic|logistic-rhs|relu --out DIR
    loo-adapt fit --model logistic-rhs --data FILE.csv|FILE.json --out DIR [--mixis]
    loo-adapt demo [--out DIR] [--quick]

Exit codes (for scripts):

- 0: done, every observation has a reliable estimate (``demo``: done);
- 1: bad input (missing file, malformed data, unknown variable, ...), message on stderr;
- 2: usage error (unknown option or command, bad choice), from argparse;
- 3: ``evaluate`` only: results written, but some observations are still unreliable (their
  estimator's diagnostic is above its threshold: refit them, or rerun with
  ``--fallback mixis refit``);
- 130: interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import pathlib
import sys
import time
import warnings

import numpy as np

from loo_adapt.io.csv import write_stan_csv  # the Stan CSV writer (also used by `fit`)

from .models import registry as _registry

EXIT_OK, EXIT_BAD_INPUT, EXIT_USAGE, EXIT_UNRELIABLE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

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


def _load_json(path) -> dict:
    path = pathlib.Path(path)
    if not path.is_file():
        raise InputError(f"data file {str(path)!r} does not exist")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise InputError(f"{path} is not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path} must hold a JSON object (Stan data), got "
                         f"{type(data).__name__}")
    return data


def _read_xy_csv(path) -> tuple[np.ndarray, np.ndarray]:
    """A CSV (optionally .gz) with y in the first column and X in the rest; a header row
    (any non-numeric first line) is skipped."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise InputError(f"data file {str(path)!r} does not exist")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        first = fh.readline()
    try:
        [float(v) for v in first.strip().split(",")]
        skip = 0
    except ValueError:
        skip = 1
    try:
        table = np.loadtxt(path, delimiter=",", skiprows=skip, dtype=np.float64, ndmin=2)
    except ValueError as err:
        raise InputError(f"{path}: cannot read a numeric table ({err})") from None
    if table.shape[1] < 2:
        raise InputError(f"{path} needs the outcome y and at least one predictor column")
    return table[:, 1:], table[:, 0]


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
        if not quiet:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=len(stages), desc=stages[0], unit="step", file=sys.stderr,
                            bar_format="{desc:<34s}|{bar:20}| {n_fmt}/{total_fmt} "
                                       "[{elapsed}]", leave=False)

    def next(self, desc=None):
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
    for w in caught:
        if not quiet and "are unreliable" not in str(w.message):
            # the summary lists unreliable observations; other warnings are news
            print(f"warning: {w.message}", file=sys.stderr)
    return res


# --------------------------------------------------------------------------- commands
def cmd_evaluate(args) -> int:
    from loo_adapt import read_csv
    from loo_adapt.estimators.adaptive import SELECTIONS
    from loo_adapt.evaluation.report import save_report

    family = _family(args.model)
    data = _load_json(args.data)
    names = _parse_names(args.names, family)
    if args.selection not in SELECTIONS:  # argparse choices cover this; kept for main([...])
        raise InputError(f"--selection must be one of {SELECTIONS}")
    stages = _Stages(["reading draws", "LOO", "report"], args.quiet)
    try:
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
        stages.next("LOO (PSIS + adaptation)")
        refit_kwargs = {"progress": not args.quiet, "max_refits": args.max_refits,
                        "max_seconds": args.max_seconds}
        res = _loo_quietly(
            args.quiet, data=draws, model=model, transforms=tuple(args.transforms),
            selection=args.selection, khat_threshold=args.threshold, seed=args.seed,
            method=args.method, program=program, fallback=tuple(fallback),
            mixis_draws=mixis_draws, refit_kwargs=refit_kwargs,
            y=y if model is None else None,
        )
        stages.next("writing report")
        files = save_report(res, args.out, name=f"loo-adapt evaluate ({args.model})")
        stages.next()
    finally:
        stages.close()
    _print_result(args, res, args.out, files)
    return _exit_for(res)


def cmd_fit(args) -> int:
    from loo_adapt.stan import backends as stan

    family = _family(args.model)
    name = FAMILIES[family]
    data = _prepare_fit_data(args)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "data.json").write_text(json.dumps(stan._jsonable(data)))
    kw = dict(backend=args.backend, chains=args.chains, draws=args.draws, warmup=args.warmup,
              seed=args.seed, adapt_delta=args.adapt_delta)
    backend = stan.select_backend(args.backend)
    stages = _Stages([f"{backend} NUTS fit of {name}"]
                     + (["mixture (MixIS) fit"] if args.mixis else []), args.quiet)
    t0 = time.perf_counter()
    try:
        draws = stan.fit(name, data, **kw)
        config = {"warmup": args.warmup, "seed": args.seed,
                  "adapt_delta": args.adapt_delta or 0.8}
        files = write_stan_csv(draws, out, name, model=name, config=config)
        stages.next("mixture (MixIS) fit")
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
        stages.next("LOO (PSIS, adaptation, MixIS)")
        t0 = time.perf_counter()
        model = model_for("logistic_rhs", data)
        res = _loo_quietly(args.quiet, data=draws, model=model, fallback=("mixis",),
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


# --------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    from loo_adapt import __version__
    from loo_adapt.estimators.adaptive import SELECTIONS

    from .api import ALL_TRANSFORMS, DEFAULT_TRANSFORMS, FALLBACKS
    from .models.bundled import ALIASES

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-q", "--quiet", action="store_true",
                        help="print nothing but errors (no progress bars, no summary)")

    parser = argparse.ArgumentParser(
        prog="loo-adapt",
        description="Leave-one-out cross-validation for Stan models: PSIS, adaptive "
                    "importance sampling, mixture IS and refits.",
        epilog="Exit codes: 0 ok; 1 bad input; 2 usage error; 3 (evaluate) results written "
               "but some observations are still unreliable.",
    )
    parser.add_argument("--version", action="version", version=f"loo-adapt {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{evaluate,fit,demo}")
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
    ev.add_argument("--threshold", type=float, help="k-hat threshold "
                                                    "(default min(1 - 1/log10 S, 0.7))")
    ev.add_argument("--prior-sd", type=float, help="prior sd when the data JSON lacks prior_sd")
    ev.add_argument("--scale-icept", type=float,
                    help="intercept prior sd when the data JSON lacks scale_icept")
    ev.add_argument("--max-refits", type=int, help="refit at most this many observations")
    ev.add_argument("--max-seconds", type=float, help="time budget of the refits")
    ev.add_argument("--seed", type=int, default=1)
    ev.set_defaults(func=cmd_evaluate)

    ft = sub.add_parser("fit", parents=[common], help="fit a bundled Stan program and save "
                                                      "the draws as Stan CSV")
    ft.add_argument("--model", required=True, choices=models, metavar="MODEL",
                    help="logistic | logistic-rhs | relu")
    ft.add_argument("--data", required=True,
                    help="CSV (first column y, the rest X; header optional) or JSON with X, y")
    ft.add_argument("--out", required=True, help="output directory")
    ft.add_argument("--chains", type=int, default=4)
    ft.add_argument("--draws", type=int, default=1000)
    ft.add_argument("--warmup", type=int, default=1000)
    ft.add_argument("--seed", type=int, default=1)
    ft.add_argument("--adapt-delta", type=float, default=None)
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
    dm.add_argument("--chains", type=int)
    dm.add_argument("--draws", type=int)
    dm.set_defaults(func=cmd_demo)
    return parser


def main(argv=None) -> int:
    """Run the tool; returns the exit code (the console script exits with it)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version (0) and usage errors (2)
        return int(exc.code or 0)
    try:
        with contextlib.ExitStack() as stack:
            if args.quiet:
                devnull = stack.enter_context(open(os.devnull, "w"))
                stack.enter_context(contextlib.redirect_stdout(devnull))
            return args.func(args)
    except KeyboardInterrupt:
        print("loo-adapt: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (InputError, FileNotFoundError, NotADirectoryError, IsADirectoryError,
            ValueError, TypeError, KeyError, IndexError, RuntimeError,
            NotImplementedError) as err:
        if os.environ.get("LOO_ADAPT_DEBUG"):
            raise
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"loo-adapt {args.command}: error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
