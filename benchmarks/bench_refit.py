"""Refit scheduling: the time estimate against the actual time, and workers on the cores.

Two measurements, each against a reference measured in the same run:

1. CPU-bound fake refits (a refit_fn that spends a fixed amount of numpy work): serial in
   this process (the reference) vs the default local pool (workers = cores for 1-chain
   jobs, BLAS threads per worker = cores / workers); prints the speed-up and, for each run,
   estimate / actual where actual excludes the one-time start-up (worker processes,
   compile), which the per-refit estimate does not cover.
2. Real stanli refits of the bundled logistic program (4 chains each): the default
   schedule (workers x parallel chains <= cores: on 2 cores one refit at a time, its chains
   two at a time) vs ``n_jobs=cores`` (one refit per core, its chains one at a time);
   prints wall times and estimate / actual of both.

    python benchmarks/bench_refit.py [--refits 6] [--draws 500]

Only ratios are meaningful on a shared machine; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from loo_adapt.stan.pool import available_cores
from loo_adapt.stan.program import StanProgram
from loo_adapt.stan.refit import refit_loo

ROOT = Path(__file__).resolve().parents[1]


def busy_refit(i, seed):
    """About 0.5 s of single-threaded numpy work, then exact draws of a known density."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(120, 120))
    for _ in range(250):
        a = np.tanh(a @ a.T / 120.0)
    return np.log(rng.uniform(0.2, 0.4, size=(4, 250)))


def run(label, **kw):
    t0 = time.perf_counter()
    res = refit_loo(progress=False, **kw)
    wall = time.perf_counter() - t0
    est = res.estimated_seconds_planned
    work = res.wall_seconds - res.startup_seconds
    print(f"{label:<38} wall {wall:6.2f} s (start-up {res.startup_seconds:5.2f} s)  estimate "
          f"{est:6.2f} s  estimate/(wall - start-up) {est / work:5.2f}  workers "
          f"{res.workers} x parallel chains {res.parallel_chains or '-'}")
    return wall


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--refits", type=int, default=6)
    ap.add_argument("--draws", type=int, default=500)
    args = ap.parse_args(argv)
    cores = available_cores()
    print(f"cores available: {cores}")

    idx = list(range(args.refits))
    serial = run("fake refits, serial (reference)", indices=idx, refit_fn=busy_refit, n_jobs=1)
    pooled = run("fake refits, default pool", indices=idx, refit_fn=busy_refit)
    print(f"speed-up of the pool: {serial / pooled:.2f} (ideal {min(cores, args.refits)})")

    data = json.loads((ROOT / "tests/data/cmdstan/logistic_normal.data.json").read_text())
    data["mixis"] = 0
    prog = StanProgram(ROOT / "stan_models/logistic_normal.stan", data, backend="stanli")
    common = dict(indices=idx, program=prog, chains=4, draws=args.draws, warmup=args.draws)
    fit = run("stanli refits, default schedule", **common)
    per_core = run("stanli refits, n_jobs=cores", n_jobs=cores, **common)
    print(f"n_jobs=cores / default wall time: {per_core / fit:.2f}")


if __name__ == "__main__":
    main()
