"""Every estimator against brute-force LOO truth on the three CmdStan fixture models.

Truth: 54 CmdStan refits per model (tests/data/cmdstan/truth/, copied from
../shared/fixtures/cmdstan/truth/).  Draws: the 4 x 250 CmdStan fixture draws.
Printed per model: pointwise RMSE to truth (all observations and those with PSIS k-hat
above the threshold), error of the total elpd, observations flagged unreliable, time.

Rows: plain PSIS; each adaptive transform alone and all five together under each selection
rule; moment matching in the full unconstrained space (Paananen et al.); mixture IS from
one extra stanli fit of the bundled program with its mixis flag (same parameter names and
data as the fixture); the full pipeline (`loo(method="mixis", fallback="refit")`: MixIS for
every observation, exact refits where its MCSE exceeds 0.1); and the cost of refitting all
n observations (one refit timed, times n).  The total-error column is judged against the
combined Monte Carlo error of truth and estimator (`MC`).

    python benchmarks/truth.py [--models logistic_normal rhs_logistic relu1] [--quick]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

from loo_adapt.api import loo
from loo_adapt.estimators.adaptive import adapt_loo
from loo_adapt.estimators.psis import psis_of_draws
from loo_adapt.io.readers import read_csv
from loo_adapt.models import model_for
from loo_adapt.stan.program import StanProgram

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "cmdstan"
MODELS = ("logistic_normal", "rhs_logistic", "relu1")
TRANSFORMS = ("kl", "var", "ll", "mm1", "mm2")
BUNDLED = {"logistic_normal": "logistic_normal", "rhs_logistic": "logistic_rhs",
           "relu1": "relu_net"}
ADAPT_DELTA = {"logistic_normal": 0.8, "rhs_logistic": 0.95, "relu1": 0.95}


def load(name):
    data = json.loads((DATA / f"{name}.data.json").read_text())
    draws = read_csv(sorted((DATA / name / "sample").glob("*.csv")))
    truth = np.loadtxt(DATA / "truth" / f"{name}.csv", delimiter=",", skiprows=1)
    return data, draws, truth


def row(label, elpd, truth, high, flagged, seconds):
    err = elpd - truth[:, 1]
    return (f"{label:28s} {np.sqrt(np.mean(err**2)):8.4f} {np.sqrt(np.mean(err[high]**2)):9.4f}"
            f" {elpd.sum() - truth[:, 1].sum():+9.2f} {flagged:8d} {seconds:8.1f}")


def _mc_total(res, truth):
    """Combined Monte Carlo SE of the total: the estimator's and the truth's."""
    mcse = res.estimates()["mcse_elpd_loo"]
    return float(np.sqrt(mcse**2 + np.sum(truth[:, 2] ** 2)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--quick", action="store_true", help="all-transform rows only")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    for name in args.models:
        data, draws, truth = load(name)
        model = model_for(name, data)
        t0 = time.perf_counter()
        base = psis_of_draws(draws, reff=1.0)
        t_psis = time.perf_counter() - t0
        high = base.khat > base.khat_threshold
        mc = np.sqrt(np.mean(truth[:, 2] ** 2))
        print(f"\n== {name}: {draws.n_samples} draws, {high.sum()} of {len(high)} with k-hat > "
              f"{base.khat_threshold:.2f}; truth total {truth[:, 1].sum():.2f}, "
              f"truth MC error (rms) {mc:.4f}")
        print(f"{'estimator':28s} {'RMSE':>8s} {'RMSE k>t':>9s} {'total err':>9s} "
              f"{'flagged':>8s} {'seconds':>8s}")
        print(row("psis", base.elpd_loo, truth, high, int(high.sum()), t_psis))
        combos = [TRANSFORMS] if args.quick else [(t,) for t in TRANSFORMS] + [TRANSFORMS]
        for transforms in combos:
            label = "all" if len(transforms) > 1 else transforms[0]
            for selection in ("min_khat", "split_keep", "split"):
                t0 = time.perf_counter()
                res = adapt_loo(draws, model, base=base, transforms=transforms,
                                selection=selection, seed=args.seed, keep_candidates=False)
                dt = time.perf_counter() - t0
                print(row(f"{label} / {selection}", res.elpd_loo, truth, high,
                          int(res.unreliable.sum()), dt))
        fullspace_and_mixis(name, data, draws, base, truth, high, args.seed)


def fullspace_and_mixis(name, data, draws, base, truth, high, seed):
    program = StanProgram(BUNDLED[name], {**data, "mixis": 0},
                          fit_kwargs={"adapt_delta": ADAPT_DELTA[name]})
    t0 = time.perf_counter()
    res = loo(draws, reff=1.0, program=program, fallback=("mm",)).loo_adapt
    print(row("moment matching (full space)", res.elpd_loo, truth, high,
              int(res.unreliable.sum()), time.perf_counter() - t0))
    t0 = time.perf_counter()
    mix = program.fit(mixis=True, seed=seed)
    t_mix = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = loo(draws, reff=1.0, method="mixis", mixis_draws=mix, y=data["y"]).loo_adapt
    print(row("mixis (all observations)", res.elpd_loo, truth, high,
              int(res.unreliable.sum()), t_mix + time.perf_counter() - t0)
          + f"   MC {_mc_total(res, truth):.2f}")
    t0 = time.perf_counter()
    res = loo(draws, reff=1.0, y=data["y"], fallback=("mixis",), mixis_draws=mix).loo_adapt
    print(row("psis + mixis where k-hat high", res.elpd_loo, truth, high,
              int(res.unreliable.sum()), t_mix + time.perf_counter() - t0))
    t0 = time.perf_counter()
    res = loo(draws, reff=1.0, method="mixis", mixis_draws=mix, program=program,
              fallback=("refit",), refit_kwargs={"progress": False, "seed": seed}).loo_adapt
    t_pipe = t_mix + time.perf_counter() - t0
    n_refit = int(np.sum(res.method == "refit"))
    print(row("full pipeline", res.elpd_loo, truth, high, int(res.unreliable.sum()), t_pipe)
          + f"   MC {_mc_total(res, truth):.2f}, {n_refit} refits")
    t0 = time.perf_counter()
    program.refit_without(0, seed=seed)
    t_one = time.perf_counter() - t0
    print(f"{'refit all (estimated)':28s} {'':8s} {'':9s} {'':9s} {'':8s} "
          f"{t_one * len(truth):8.1f}   pipeline / refit-all = "
          f"{t_pipe / (t_one * len(truth)):.1%}")


if __name__ == "__main__":
    main()
