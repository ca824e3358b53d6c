"""``loo-adapt vifa``: a factor-analysis variational fit of a family, then LOO from its draws
(p/q ratios, certified adaptive IS), reported as ``evaluate`` reports."""

from __future__ import annotations

import contextlib

from .evaluate import _build_model
from .inputs import (
    InputError,
    _family,
    _load_json,
    _nonnegative_int,
    _parse_names,
    _positive_float,
    _positive_int,
    _prepare_out,
    _unit_interval,
)
from .output import _exit_for, _loo_quietly, _print_result, _Stages


def cmd_vifa(args) -> int:
    """Fit VIFA (factor-analysis VI) to a family, then LOO from its draws (p/q ratios,
    certified adaptive IS) as `evaluate` reports it."""
    from loo_adapt.evaluation.report import report_lock, save_report
    from loo_adapt.laplace.vifa import VIFA

    family = _family(args.model)
    data = _load_json(args.data)
    model = _build_model(family, data, _parse_names(args.names, family), args.prior_sd,
                         args.scale_icept)
    if args.K is None:  # the default, capped at the model's dimension
        from loo_adapt.laplace.vifa import as_target

        args.K = min(5, int(as_target(model).dim))
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


def add_vifa_parser(sub, common, models):
    """The ``vifa`` sub-command's options."""
    vf = sub.add_parser("vifa", parents=[common],
                        help="factor-analysis variational fit, then LOO from its draws")
    vf.add_argument("--data", required=True, help="Stan data JSON (with X and y)")
    vf.add_argument("--model", required=True, choices=models, metavar="MODEL",
                    help="logistic | relu (families without hyperparameters)")
    vf.add_argument("--names", help="Stan variable names, as for evaluate")
    vf.add_argument("--out", required=True, help="report directory")
    vf.add_argument("--K", type=_positive_int, default=None,
                    help="number of factors (default 5, or the number of parameters D when "
                         "that is smaller)")
    vf.add_argument("--draws", type=_positive_int, default=4000)
    vf.add_argument("--n-mc", type=_positive_int, default=4, help="draws per step")
    vf.add_argument("--batch-size", type=_positive_int, help="minibatch (default: all)")
    vf.add_argument("--max-iter", type=_positive_int, default=5000,
                    help="steps of the joint constant-rate stage (default 5000); the decay "
                         "stage's steps come on top of them")
    vf.add_argument("--threshold", type=_unit_interval)
    vf.add_argument("--prior-sd", type=_positive_float)
    vf.add_argument("--scale-icept", type=_positive_float)
    vf.add_argument("--seed", type=_nonnegative_int, default=1)
    vf.set_defaults(func=cmd_vifa)
