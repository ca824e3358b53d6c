"""``loo-adapt evaluate``: LOO of Stan CSV draws, from plain PSIS (draws alone) to MixIS
and refits (``--program``) and adaptation (``--model``), written as a report."""

from __future__ import annotations

import contextlib
import inspect
import os
import pathlib
import shutil

import numpy as np

from loo_adapt.models import registry as _registry

from . import matching
from .inputs import (
    FAMILIES,
    InputError,
    _check_csv_inputs,
    _family,
    _load_json,
    _need_file,
    _parse_names,
    _prepare_out,
)
from .output import _exit_for, _loo_quietly, _print_result, _Stages, next_step

#: Folder (inside --out) where finished refits are saved as they complete, unless --resume.
#: A run without --resume that finds finished refits there stops unless --fresh is given.
CHECKPOINT = ".loo-adapt-refits"
#: Seconds to wait for a --scheduler to answer.
SCHEDULER_TIMEOUT = 30


def _build_model(family: str, data: dict, names: dict, prior_sd=None, scale_icept=None):
    """The model family reading the draws' variables by the given Stan names (registry)."""
    priors = {k: v for k, v in (("prior_sd", prior_sd), ("scale_icept", scale_icept))
              if v is not None}
    try:
        return _registry.model_for(family, data, names=names, **priors)
    except ValueError as err:
        raise InputError(str(err)) from None


def _finished_refits(checkpoint: pathlib.Path) -> int:
    """How many finished refits a checkpoint folder holds (its ``obs_<i>.npz`` rows; the
    temporary files of a row being written do not count)."""
    if not checkpoint.is_dir():
        return 0
    return sum(1 for f in checkpoint.glob("obs_*.npz") if f.is_file())


def _refuse_to_discard(checkpoint: pathlib.Path) -> None:
    """Stop (`InputError`, exit 1) when ``checkpoint`` holds finished refits a run without
    ``--resume`` or ``--fresh`` would delete: a fault (or a rerun) loses nothing already
    computed."""
    n = _finished_refits(checkpoint)
    if n == 0:
        return
    held = f"{checkpoint} holds {n} finished refit{'s' * (n != 1)} of an earlier run"
    if not (checkpoint / "manifest.json").is_file():
        raise InputError(f"{held} but no manifest.json (nothing says which run they belong "
                         "to, so they cannot be resumed): pass --fresh to discard them")
    raise InputError(f"{held}: pass --resume {checkpoint} to reuse them, or --fresh to "
                     "discard them")


def _fit_options(args, draws) -> dict | None:
    """Fit options of --program's StanProgram (the mixture fits and refits this tool
    makes): ``--adapt-delta``, else the adapt delta the posterior fit's CSV header records
    (CmdStan's ``delta``), else Stan's default."""
    delta = args.adapt_delta
    if delta is None and draws.method == "mcmc":
        try:
            delta = float(draws.config.get("delta", "nan"))
        except ValueError:
            delta = None
        if delta is not None and not 0.0 < delta < 1.0:
            delta = None
    return None if delta is None else {"adapt_delta": delta}


def _refit_options(args, out: pathlib.Path, stack: contextlib.ExitStack, refits: bool) -> dict:
    """refit_kwargs of `evaluate`: limits, then (with refits) the checkpoint folder and the
    executor."""
    kwargs = {"progress": not args.quiet, "max_refits": args.max_refits,
              "max_seconds": args.max_seconds}
    if not refits:
        return kwargs
    from loo_adapt.stan.refit import refit_loo

    accepted = inspect.signature(refit_loo).parameters
    if args.resume:
        checkpoint = pathlib.Path(args.resume)
        if not checkpoint.is_dir():
            raise InputError(f"--resume {str(checkpoint)!r} is not a folder; give the "
                             "checkpoint folder an interrupted run named")
        if not (checkpoint / "manifest.json").is_file() and any(checkpoint.glob("*.npz")):
            raise InputError(f"--resume {str(checkpoint)!r} holds saved refits but no "
                             "manifest.json, so nothing says which run they belong to; they "
                             "are not reused: drop --resume to refit from scratch")
    else:
        checkpoint = out / CHECKPOINT
        if checkpoint.is_symlink() or (checkpoint.exists() and not checkpoint.is_dir()):
            what = (f"a symbolic link to {os.readlink(checkpoint)!r}" if checkpoint.is_symlink()
                    else "not a folder")
            raise InputError(f"--out {str(out)!r}: {CHECKPOINT} there is {what}; loo-adapt "
                             "writes only inside --out: remove it, or pass --resume FOLDER "
                             "to use a checkpoint folder elsewhere")
        if not args.fresh:
            _refuse_to_discard(checkpoint)
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


def _plan(args, family) -> dict:
    """What ``evaluate`` runs, decided from the options alone (before reading any file).

    Returns the estimator, the fallback list, whether a Stan program is used (``--program``
    or, for a family's fallbacks, its bundled program) and whether refits may run."""
    fallback = list(args.fallback or [])
    if args.no_adapt:
        estimator = "psis"
    elif args.method == "mixis":
        estimator = "mixis"
    elif args.method == "psis":
        estimator = "adaptive" if family else "psis"
    else:  # auto: the library's choice (MixIS + refits with a program, adaptation with --model)
        estimator = "auto"
    if args.mixis_csv and "mixis" not in fallback and estimator in ("psis", "adaptive"):
        fallback.append("mixis")
    needs_program = ("mm" in fallback or "refit" in fallback
                     or (not args.mixis_csv and ("mixis" in fallback or estimator == "mixis")))
    if needs_program and not args.program and not family:
        what = ("--method mixis" if estimator == "mixis"
                else "--fallback " + " ".join(f for f in fallback if f in ("mm", "mixis",
                                                                           "refit")))
        raise InputError(f"{what} needs the Stan program: add --program FILE.stan --data "
                         "DATA.json (the program and data the draws were fitted with)")
    use_program = bool(args.program) or needs_program
    refits = "refit" in fallback or (use_program and estimator == "auto" and not fallback)
    return {"estimator": estimator, "fallback": fallback, "use_program": use_program,
            "refits": refits}


def _binary_y(data, n):
    """The data's y when it is a 0/1 vector of the draws' length (for ROC etc.), else None."""
    if data is None or "y" not in data:
        return None
    y = np.asarray(data["y"])
    if y.ndim != 1 or (n is not None and y.shape[0] != n) or y.dtype.kind not in "biuf":
        return None
    return y if np.isin(y, (0, 1)).all() else None


def _loo_label(plan, model) -> str:
    if plan["estimator"] == "psis" and not plan["fallback"]:
        return "LOO (PSIS)"
    if plan["use_program"] and plan["estimator"] in ("auto", "mixis"):
        return "LOO (mixture fit, MixIS" + (", refits)" if plan["refits"] else ")")
    if model is not None:
        return "LOO (PSIS + adaptation)"
    return "LOO (PSIS)"


def cmd_evaluate(args) -> int:
    from loo_adapt import read_csv
    from loo_adapt.estimators.adaptive import SELECTIONS
    from loo_adapt.evaluation.report import report_lock, save_report

    family = _family(args.model) if args.model else None
    if args.selection not in SELECTIONS:  # argparse choices cover this; kept for main([...])
        raise InputError(f"--selection must be one of {SELECTIONS}")
    if (args.model or args.program) and not args.data:
        raise InputError(f"--{'model' if args.model else 'program'} needs --data DATA.json "
                         "(the Stan data the draws were fitted with)")
    plan = _plan(args, family)
    if (args.resume or args.scheduler or args.fresh) and not plan["refits"]:
        raise InputError("--resume, --fresh and --scheduler apply to refits: add --fallback "
                         "refit")
    if args.resume and args.fresh:
        raise InputError("--resume reuses the finished refits of a checkpoint folder, --fresh "
                         "discards them: give one of the two")
    data = _load_json(args.data) if args.data else None
    names = _parse_names(args.names, family) if family else None
    given = [k for k, v in (("prior_sd", args.prior_sd), ("scale_icept", args.scale_icept))
             if v is not None]
    if family:
        matching.check_family(family, args.model, data, args.data, given_flags=given)
    stan_file = None
    if args.program:
        stan_file = _need_file(args.program, "--program")
        matching.check_program(stan_file, data, args.data, None, None)
    elif plan["use_program"]:
        stan_file = FAMILIES[family]
    _check_csv_inputs(args.csv)
    if args.mixis_csv:
        _check_csv_inputs(args.mixis_csv)
    csv = " ".join(map(str, args.csv))
    stages = _Stages(["reading draws", "LOO", "report"], args.quiet)
    with contextlib.ExitStack() as stack:
        out = _prepare_out(args.out, stack)
        stack.callback(stages.close)
        stack.enter_context(report_lock(out))  # a second run into this folder is refused
        draws = read_csv(args.csv)
        n = matching.n_log_lik(draws)
        if n is None:
            raise InputError(f"the draws in {csv} have no log_lik: the Stan program must write "
                             "'generated quantities { vector[N] log_lik; ... }'")
        if family or args.program:  # (--data alone only lends y to the report)
            count = matching.count_name(stan_file, data) if args.program else "N"
            matching.check_observations(data, args.data, n, count)
        if family:
            matching.check_family_draws(family, args.model, names, draws, csv)
        if args.program:
            matching.check_program(stan_file, data, args.data, draws, csv)
        model = None
        if family and plan["estimator"] in ("auto", "adaptive"):
            model = _build_model(family, data, names, args.prior_sd, args.scale_icept)
        mixis_draws = read_csv(args.mixis_csv) if args.mixis_csv else None
        program = None
        if stan_file is not None:
            from loo_adapt.stan.program import StanProgram

            program = StanProgram(stan_file, data, backend=args.backend,
                                  obs_dim_vars=args.obs_vars,
                                  fit_kwargs=_fit_options(args, draws))
            if plan["refits"]:
                program.observation_vars()  # which entries a refit drops: known, or an error
        refit_kwargs = _refit_options(args, out, stack, plan["refits"])
        stages.next(_loo_label(plan, model), ticking=True)
        res = _loo_quietly(
            args.quiet, data=draws, model=model, transforms=tuple(args.transforms),
            selection=args.selection, khat_threshold=args.threshold, seed=args.seed,
            estimator=plan["estimator"], program=program, fallback=tuple(plan["fallback"]),
            mixis_draws=mixis_draws, refit_kwargs=refit_kwargs, reff=args.reff,
            y=_binary_y(data, n) if model is None else None,
        )
        stages.next("writing report")
        what = args.model or (pathlib.Path(args.program).name if args.program else "PSIS")
        files = save_report(res, out, name=f"loo-adapt evaluate ({what})")
        stages.next()
    _print_result(args, res, args.out, files,
                  advice=next_step(res, program=program is not None, model=model is not None,
                                   mixis_draws=mixis_draws is not None))
    return _exit_for(res)
