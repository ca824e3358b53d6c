"""Every program of the rewrite corpus (``tests/stan/programs``) through the recommended call,
as a new user would run it: a short stanli fit (4 x 500), then ``loo(fit, program=...)``.

A smoke test of the whole path on many program shapes, not an accuracy claim: the reference
is plain PSIS on a long fit of the same program (4 x 10000 draws; rows with k-hat > 0.7 there
are counted, and its total is then no reference). Printed per program: seconds, the total's
difference from the reference in combined Monte Carlo SEs, each estimator's rows, how many
rows are reliable, whether refits leave an observation out by term, or the error.

    python benchmarks/program_corpus.py [--programs loop_yrep glm ...] [--n 30] [--seed 2]
"""

from __future__ import annotations

import argparse
import inspect
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "stan"))
import test_mixis_rewrite as corpus  # noqa: E402  (the programs' data builders)

import loo_adapt  # noqa: E402
from loo_adapt.stan.program import StanProgram  # noqa: E402


def run(name: str, n: int, seed: int) -> str:
    _, build = corpus.CORPUS[name]
    kw = {"n": n} if "n" in inspect.signature(build).parameters else {}
    data = build(np.random.default_rng(11), **kw)
    t0 = time.perf_counter()
    try:
        program = StanProgram(corpus.PROGRAMS / f"{name}.stan", data, backend="stanli")
        fit = program.fit(chains=4, warmup=500, draws=500, seed=seed)
        long = program.fit(chains=4, warmup=1000, draws=10000, seed=seed + 1000)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = loo_adapt.loo(fit, program=program, seed=seed, progress=False,
                                refit_kwargs={"n_jobs": 1}).loo_adapt
            ref = loo_adapt.loo(long, estimator="psis").loo_adapt
    except Exception as err:  # noqa: BLE001 - the point is to see it
        return f"{name:26s} ERROR {type(err).__name__}: {' '.join(str(err).split())[:400]}"
    se = float(np.hypot(res.estimates()["mcse_elpd_loo"], ref.estimates()["mcse_elpd_loo"]))
    diff = float(res.elpd_i.sum() - ref.elpd_i.sum())
    methods = dict(zip(*np.unique(res.method, return_counts=True)))
    return (f"{name:26s} {time.perf_counter() - t0:5.1f} s  total - long PSIS {diff:+.3f} "
            f"({diff / se:+.1f} SE)  long-fit k-hat > 0.7: {int(np.sum(ref.pareto_k > 0.7))}  "
            f"{', '.join(f'{k} {v}' for k, v in methods.items())}  reliable "
            f"{int(np.sum(res.reliable))}/{res.elpd_i.size}  by term: "
            f"{program.by_term_reason is not None}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", nargs="+", default=sorted(corpus.CORPUS))
    ap.add_argument("--n", type=int, default=30, help="observations, where the builder takes n")
    ap.add_argument("--seed", type=int, default=2)
    args = ap.parse_args(argv)
    for name in args.programs:
        print(run(name, args.n, args.seed), flush=True)


if __name__ == "__main__":
    main()
