"""Cost and error of the mixture-IS fit: the default cold fit against warm-started variants.

Run from the repository root:  python benchmarks/bench_mixis_fit.py [--seeds 1 2 3]
[--models logistic_normal rhs_logistic relu1] [--variants default warm warm8]

For each CmdStan fixture model (``tests/data/cmdstan/``), the program is built from the model
family alone (``StanProgram.from_model(model_for(name, data))``: no Stan written) and the
mixture proposal is sampled with stanli:

- ``default``: ``program.fit(mixis=True)``, 4 chains x 1000 warm-up x 1000 draws, cold start;
- ``warm``: ``program.fit_mixture(posterior)``, 4 chains x 100 warm-up x 1000 draws, inverse
  metric = variance of the posterior draws (unconstrained), step size from the posterior
  fit, each chain started at a posterior draw (the fixture's CmdStan 4 x 1000 fit);
- ``warm8``: the same warm start, 8 shorter chains x 100 warm-up x 250 draws (more chains
  where modes matter: the ReLU net).

Each line: seconds of the fit (wall clock, on this machine's shared cores, so compare within
a run), the total elpd error against the brute-force truth (``tests/data/cmdstan/truth/``),
that error in units of the combined Monte Carlo error sqrt(MixIS MCSE_total^2 + sum truth
mc_se^2), and the pointwise RMSE. The summary prints, per variant, the mean seconds as a
fraction of the default's and the worst |error| / combined MC error.
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from loo_adapt import read_csv  # noqa: E402
from loo_adapt.core.mixis import mixis_loo  # noqa: E402
from loo_adapt.models import model_for  # noqa: E402
from loo_adapt.stan.program import StanProgram  # noqa: E402

FIXTURES = ROOT / "tests" / "data" / "cmdstan"
VARIANTS = {
    "default": None,
    "warm": {"chains": 4, "warmup": 100, "draws": 1000},
    "warm8": {"chains": 8, "warmup": 100, "draws": 250},
}


def run(name: str, variant: str, seed: int, program, posterior, truth) -> dict:
    t0 = time.perf_counter()
    if VARIANTS[variant] is None:
        mix = program.fit(mixis=True, seed=seed)
    else:
        mix = program.fit_mixture(posterior, seed=seed, **VARIANTS[variant])
    seconds = time.perf_counter() - t0
    est = mixis_loo(mix.log_lik())
    err = est.elpd_i - truth[:, 1]
    combined = float(np.sqrt(est.mcse_total ** 2 + np.sum(truth[:, 2] ** 2)))
    total = float(err.sum())
    return {"model": name, "variant": variant, "seed": seed, "seconds": seconds,
            "total_error": total, "combined_mc": combined, "ratio": abs(total) / combined,
            "rmse": float(np.sqrt(np.mean(err ** 2))),
            "divergent": int(np.sum(mix.sample_stats.get("divergent__", 0)))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", nargs="+", default=["logistic_normal", "rhs_logistic",
                                                         "relu1"])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    args = parser.parse_args()

    rows = []
    print(f"{'model':16s} {'variant':8s} {'seed':>4s} {'seconds':>8s} {'total err':>10s} "
          f"{'MC err':>7s} {'|err|/MC':>8s} {'RMSE':>6s} {'div':>4s}")
    for name in args.models:
        data = json.loads((FIXTURES / f"{name}.data.json").read_text())
        posterior = read_csv(sorted(glob.glob(str(FIXTURES / name / "sample" / "*.csv"))))
        truth = np.loadtxt(FIXTURES / "truth" / f"{name}.csv", delimiter=",", skiprows=1)
        program = StanProgram.from_model(model_for(name, data), backend="stanli")
        for seed in args.seeds:
            for variant in args.variants:
                r = run(name, variant, seed, program, posterior, truth)
                rows.append(r)
                print(f"{name:16s} {variant:8s} {seed:4d} {r['seconds']:8.1f} "
                      f"{r['total_error']:+10.3f} {r['combined_mc']:7.3f} {r['ratio']:8.2f} "
                      f"{r['rmse']:6.3f} {r['divergent']:4d}", flush=True)
    print("\nper model and variant: mean seconds (fraction of default), max |err|/MC, "
          "mean RMSE")
    for name in args.models:
        base = [r["seconds"] for r in rows if r["model"] == name and r["variant"] == "default"]
        for variant in args.variants:
            sel = [r for r in rows if r["model"] == name and r["variant"] == variant]
            sec = float(np.mean([r["seconds"] for r in sel]))
            frac = f"{sec / np.mean(base):.2f}" if base else "-"
            print(f"{name:16s} {variant:8s} {sec:8.1f} s ({frac}) "
                  f"{max(r['ratio'] for r in sel):6.2f} {np.mean([r['rmse'] for r in sel]):.3f}")


if __name__ == "__main__":
    main()
