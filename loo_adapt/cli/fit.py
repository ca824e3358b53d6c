"""``loo-adapt fit`` (a bundled program, draws saved as Stan CSV) and ``loo-adapt demo``."""

from __future__ import annotations

import json
import pathlib
import time

import numpy as np

from loo_adapt.estimators.mixture_checks import divergent_count
from loo_adapt.io.csv import write_stan_csv  # the Stan CSV writer
from loo_adapt.models import registry as _registry

from .inputs import (
    FAMILIES,
    InputError,
    _family,
    _load_json,
    _parse_key_values,
    _prepare_out,
    _read_xy_csv,
)
from .output import EXIT_OK, _loo_quietly, _print_result, _say, _Stages

#: The demo: regularized horseshoe on a random subset of the ovarian predictors.
DEMO_FULL = {"columns": 100, "chains": 4, "draws": 1000, "warmup": 1000}
DEMO_QUICK = {"columns": 30, "chains": 2, "draws": 300, "warmup": 300}
DEMO_SEED = 2021


def _prepare_fit_data(args) -> dict:
    from loo_adapt.datasets import standardize_columns
    from loo_adapt.stan import backends as stan

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
                     + ([f"{backend} mixture (MixIS) fit"] if args.mixis else []), args.quiet,
                     ticking=True)
    t0 = time.perf_counter()
    try:
        draws = stan.fit(name, data, **kw)
        config = {"warmup": args.warmup, "seed": args.seed,
                  "adapt_delta": args.adapt_delta or 0.8}
        files = write_stan_csv(draws, out, name, model=name, config=config)
        stages.next(f"{backend} mixture (MixIS) fit" if args.mixis else None,
                    ticking=args.mixis)
        mix_files = []
        if args.mixis:
            mix = stan.fit(name, data, mixis=True, **{**kw, "seed": args.seed + 1})
            mix_files = write_stan_csv(mix, out / "mixis", f"{name}_mixis", model=name,
                                       config={**config, "seed": args.seed + 1})
            stages.next()
    finally:
        stages.close()
    seconds = time.perf_counter() - t0
    div = divergent_count(draws)[0]
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
    from loo_adapt.datasets import load_ovarian
    from loo_adapt.evaluation.report import save_report
    from loo_adapt.models.bundled import model_for
    from loo_adapt.stan import backends as stan
    from loo_adapt.stan.program import StanProgram

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
    from loo_adapt.datasets import standardize_columns

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
                  warmup=settings["warmup"], adapt_delta=getattr(args, "adapt_delta", 0.95))
    stages = _Stages(["NUTS fit (posterior)", "NUTS fit (MixIS mixture)", "LOO",
                      "report"], args.quiet, ticking=True)
    try:
        t0 = time.perf_counter()
        draws = stan.fit("logistic_rhs", data, seed=1, **fit_kw)
        t_fit = time.perf_counter() - t0
        stages.next("NUTS fit (MixIS mixture)", ticking=True)
        t0 = time.perf_counter()
        mix = stan.fit("logistic_rhs", data, seed=2, mixis=True, **fit_kw)
        t_mix = time.perf_counter() - t0
        stages.next("LOO (PSIS, MixIS for every observation, focused fits)", ticking=True)
        t0 = time.perf_counter()
        model = model_for("logistic_rhs", data)
        program = StanProgram("logistic_rhs", data, backend=backend,
                              fit_kwargs={"adapt_delta": fit_kw["adapt_delta"]})
        res = _loo_quietly(args.quiet, data=draws, model=model, mixis_draws=mix,
                           program=program, seed=1)
        t_loo = time.perf_counter() - t0
        stages.next("writing report")
        files = save_report(res, args.out, name="loo-adapt demo: ovarian, regularized "
                                                  "horseshoe logistic regression")
        stages.next()
    finally:
        stages.close()
    div = divergent_count(draws)[0]
    total = time.perf_counter() - t_start
    extra = (f"\nTimes: posterior fit {t_fit:.1f} s ({div} divergent transitions), mixture "
             f"fit {t_mix:.1f} s, LOO {t_loo:.1f} s; total {total:.1f} s.")
    _print_result(args, res, args.out, files, extra)
    return EXIT_OK

