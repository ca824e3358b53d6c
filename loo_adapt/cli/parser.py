"""The ``loo-adapt`` argument parser."""

from __future__ import annotations

import argparse

from .evaluate import CHECKPOINT, cmd_evaluate
from .fit import DEMO_FULL, DEMO_QUICK, cmd_demo, cmd_fit
from .inputs import (
    _draws_per_chain,
    _nonnegative_int,
    _positive_float,
    _positive_int,
    _unit_interval,
)
from .vifa import add_vifa_parser


def build_parser() -> argparse.ArgumentParser:
    from loo_adapt import __version__
    from loo_adapt.api import ALL_TRANSFORMS, DEFAULT_TRANSFORMS, FALLBACKS
    from loo_adapt.estimators.adaptive import SELECTIONS
    from loo_adapt.models.bundled import ALIASES

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

    ev = sub.add_parser(
        "evaluate", parents=[common],
        help="LOO of Stan CSV draws, written as a report",
        description="LOO of Stan CSV draws (any Stan program whose generated quantities "
                    "write log_lik), written as a report. The draws alone give PSIS-LOO with "
                    "k-hat; --program FILE.stan --data DATA.json adds mixture IS on every "
                    "observation and refits; --model adds adaptive IS for a bundled family.")
    ev.add_argument("csv", nargs="+", help="Stan CSV files (one per chain), globs or a folder")
    ev.add_argument("--data", help="Stan data JSON the draws were fitted with (needed by "
                                   "--program and --model; y, when 0/1, adds ROC/PR figures)")
    ev.add_argument("--program", "--stan", dest="program", metavar="FILE.stan",
                    help="the Stan program of the draws: adds mixture IS (MixIS) and refits; "
                         "with --model, replaces the bundled program")
    ev.add_argument("--adapt-delta", type=_unit_interval, default=None,
                    help="target acceptance rate of --program's fits this tool makes (the "
                         "mixture fits and refits; default: the posterior fit's, from its "
                         "CSV header, else Stan's 0.8); raise it when a note reports "
                         "divergent transitions")
    ev.add_argument("--obs-vars", nargs="+", metavar="NAME",
                    help="--program's per-observation data entries (their first axis is the "
                         "observation; default: every entry whose first dimension is N)")
    ev.add_argument("--model", choices=models, metavar="MODEL",
                    help="logistic | logistic-rhs | relu (or a bundled program name): adds "
                         "adaptive IS")
    ev.add_argument("--names", help="Stan variable names, e.g. coef=beta,intercept=alpha "
                                    "(relu: W1=..,b1=..,w2=..,b2=..; intercept=none drops it)")
    ev.add_argument("--out", required=True, help="report directory")
    ev.add_argument("--mixis-csv", nargs="+", help="draws of the MixIS mixture proposal, "
                                                   "already fitted (MixIS without a program)")
    ev.add_argument("--fallback", nargs="+", choices=FALLBACKS, default=[],
                    help="estimators for observations still unreliable, in order")
    ev.add_argument("--transforms", nargs="+", choices=ALL_TRANSFORMS,
                    default=list(DEFAULT_TRANSFORMS), help="adaptive-IS transforms to try")
    ev.add_argument("--selection", choices=SELECTIONS, default="split",
                    help="how a transform is chosen (split: honest held-out k-hat; "
                         "min_khat: the paper's rule)")
    ev.add_argument("--method", choices=("auto", "psis", "mixis"), default="auto",
                    help="auto (default: MixIS + refits with --program, adaptation with "
                         "--model, else PSIS), psis (adapted with --model) or mixis for "
                         "every observation")
    ev.add_argument("--no-adapt", action="store_true", help="plain PSIS-LOO only")
    ev.add_argument("--reff", type=_positive_float,
                    help="relative efficiency of the draws (R loo's r_eff; default: from the "
                         "chains)")
    ev.add_argument("--backend", default="auto", choices=("auto", "cmdstan", "stanli",
                                                           "pystan"))
    ev.add_argument("--threshold", type=_unit_interval,
                    help="k-hat threshold in (0, 1] (default min(1 - 1/log10 S, 0.7))")
    ev.add_argument("--prior-sd", type=_positive_float,
                    help="prior sd when the data JSON lacks prior_sd")
    ev.add_argument("--scale-icept", type=_positive_float,
                    help="intercept prior sd when the data JSON lacks scale_icept")
    ev.add_argument("--max-refits", type=_positive_int,
                    help="refit at most this many observations (keeps a run with --program "
                         "short)")
    ev.add_argument("--max-seconds", type=_positive_float, help="time budget of the refits")
    ev.add_argument("--resume", metavar="DIR",
                    help="continue the refits of an interrupted run from its checkpoint "
                         f"folder (OUT/{CHECKPOINT} unless given)")
    ev.add_argument("--fresh", action="store_true",
                    help=f"discard the finished refits an earlier run left in "
                         f"OUT/{CHECKPOINT} and refit from scratch (without --resume or "
                         "--fresh, a run that finds them there stops and says so)")
    ev.add_argument("--scheduler", metavar="ADDRESS",
                    help="run the refits on a dask.distributed scheduler (e.g. "
                         "tcp://host:8786)")
    ev.add_argument("--seed", type=_nonnegative_int, default=1)
    ev.set_defaults(func=cmd_evaluate)

    ft = sub.add_parser("fit", parents=[common], help="fit a bundled Stan program and save "
                                                      "the draws as Stan CSV")
    ft.add_argument("--model", required=True, choices=models, metavar="MODEL",
                    help="logistic | logistic-rhs | relu")
    ft.add_argument("--data", required=True,
                    help="CSV (first column y, the rest X; header optional) or JSON with X, y")
    ft.add_argument("--out", required=True, help="output directory")
    ft.add_argument("--chains", type=_positive_int, default=4)
    ft.add_argument("--draws", type=_draws_per_chain, default=1000)
    ft.add_argument("--warmup", type=_nonnegative_int, default=1000)
    ft.add_argument("--seed", type=_nonnegative_int, default=1)
    ft.add_argument("--adapt-delta", type=_unit_interval, default=None)
    ft.add_argument("--backend", default="auto", choices=("auto", "cmdstan", "stanli",
                                                           "pystan"))
    ft.add_argument("--mixis", action="store_true",
                    help="also fit the MixIS mixture proposal (written to OUT/mixis/)")
    ft.add_argument("--standardize", action="store_true",
                    help="scale each predictor to mean 0, sd 1")
    ft.add_argument("--columns", type=int, help="use a random subset of this many predictor "
                                                "columns (chosen without looking at y)")
    ft.add_argument("--columns-seed", type=_nonnegative_int, default=0)
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
    dm.add_argument("--draws", type=_draws_per_chain)
    dm.add_argument("--adapt-delta", type=_unit_interval, default=0.95,
                    help="target acceptance rate of every fit the demo makes (default 0.95); "
                         "raise it when a note reports divergent transitions")
    dm.set_defaults(func=cmd_demo)
    add_vifa_parser(sub, common, models)
    return parser

