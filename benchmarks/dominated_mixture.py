"""Is the full mixture dominated by one observation, and what does the default do then?

`loo_adapt.estimators.focused_easy.dominated` calls the full mixture dominated when it leaves
fewer than `DOMINATED_DRAWS` of its draws to the components of every row but its heaviest
(the mixture weights row j's leave-one-out posterior by exp(-elpd_j)); the easy-row stage
then fits a mixture over the other rows.

Part 1, the truth suite (both halves, cached posterior and mixture fits, nothing fitted):
per benchmark and seed, the draws the full mixture leaves to the other rows, as
`dominated` computes them from ``loo(..., estimator="mixis")``.

Part 2, the case a new user met (a Poisson regression, n = 40, x ~ N(0, 1), y ~
Poisson(exp(0.5 + 0.4 x)), one count set to 25): the posterior fit (stanli, 4 x 1000), a
brute-force truth (one refit per observation, 4 x 5000 draws, cached under
`benchmarks/cache/`), then the default ``loo(fit, program=...)`` on seeds 1-3, with the rule
and without it (``DOMINATED_DRAWS = 0``): the summed error over the 39 other rows with its
combined MC error, and the rms of z = error / (MCSE and the truth's MC error combined) over
the verified rows.

    python benchmarks/dominated_mixture.py [--part 1 2] [--seeds 1 2 3]
"""

from __future__ import annotations

import argparse
import pickle
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth_suite import CACHE, benchmark_names, load_benchmark, mixture_fit  # noqa: E402

from loo_adapt.api import loo  # noqa: E402
from loo_adapt.estimators import focused_easy  # noqa: E402

POISSON = """
data { int<lower=0> N; vector[N] x; array[N] int<lower=0> y; }
parameters { real alpha; real beta; }
model {
  alpha ~ normal(0, 2);
  beta ~ normal(0, 1);
  y ~ poisson_log(alpha + beta * x);
}
generated quantities {
  vector[N] log_lik;
  array[N] int y_rep;
  {
    vector[N] eta = alpha + beta * x;
    for (n in 1:N) {
      log_lik[n] = poisson_log_lpmf(y[n] | eta[n]);
      y_rep[n] = poisson_log_rng(eta[n]);
    }
  }
}
"""


def part1(seeds):
    print("== the truth suite: draws the full mixture leaves to every row but its heaviest "
          f"(dominated below {focused_easy.DOMINATED_DRAWS:g})")
    for name in benchmark_names("all", None):
        bench = load_benchmark(name)
        left = []
        for seed in seeds:
            res = loo(bench.draws, estimator="mixis", mixis_draws=mixture_fit(bench, seed)[0],
                      seed=seed).loo_adapt
            e = res.elpd_i
            share = np.exp(-(e - e.min()))
            share /= share.sum()
            n_draws = mixture_fit(bench, seed)[0].n_samples
            left.append(n_draws * (share.sum() - share.max()))
            is_dominated = focused_easy.dominated(res) is not None
            assert is_dominated == (left[-1] < focused_easy.DOMINATED_DRAWS)
        print(f"{name:22s} " + " / ".join(f"{v:.0f}" for v in left) + f" of {n_draws}",
              flush=True)


def _poisson():
    from loo_adapt.stan.program import StanProgram

    rng = np.random.default_rng(1)
    x = rng.normal(size=40)
    y = rng.poisson(np.exp(0.5 + 0.4 * x))
    y[0] = 25
    path = CACHE / "poisson_outlier.stan"
    CACHE.mkdir(exist_ok=True)
    if not path.exists() or path.read_text() != POISSON:
        path.write_text(POISSON)
    return StanProgram(path, {"N": 40, "x": x.tolist(), "y": [int(v) for v in y]},
                       backend="stanli")


def _poisson_truth(program):
    from loo_adapt.stan.heldout import heldout_elpd

    cache = CACHE / "poisson_outlier-truth.pkl"
    if cache.exists():
        return pickle.loads(cache.read_bytes())
    out = np.empty((40, 2))
    for i in range(40):
        fit = program.refit_without(i, seed=100 + i, chains=4, draws=5000)
        ll = program.heldout_log_lik(fit, i).reshape(fit.shape)
        out[i] = heldout_elpd(ll)[:2]
    cache.write_bytes(pickle.dumps(out))
    return out


def part2(seeds):
    program = _poisson()
    posterior = program.fit(seed=1, chains=4, draws=1000)
    truth = _poisson_truth(program)
    print("\n== a Poisson regression with one count of 25 (n = 40): truth total "
          f"{truth[:, 0].sum():.3f}, outlier elpd {truth[0, 0]:.2f}")
    rest = np.arange(1, 40)
    default = focused_easy.DOMINATED_DRAWS
    for rule in (default, 0.0):
        focused_easy.DOMINATED_DRAWS = rule
        for seed in seeds:
            res = loo(posterior, program=program, seed=seed, progress=False).loo_adapt
            err = res.elpd_i - truth[:, 0]
            mc = float(np.sqrt(np.sum(res.mcse_elpd_i[rest] ** 2 + truth[rest, 1] ** 2)))
            ver = np.asarray(res.reliable, bool)
            z = err[ver] / np.hypot(res.mcse_elpd_i[ver], truth[ver, 1])
            stages = ", ".join(dict.fromkeys(r["estimator"] for r in res.history))
            print(f"rule {'on ' if rule else 'off'} seed {seed}: 39 other rows' summed error "
                  f"{err[rest].sum():+.3f} (MC {mc:.3f}); verified {ver.sum()}/40, rms z "
                  f"{np.sqrt(np.mean(z**2)):.2f}, |z| > 3: {int(np.sum(np.abs(z) > 3))}; "
                  f"stages: {stages}", flush=True)
    focused_easy.DOMINATED_DRAWS = default


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", type=int, nargs="+", default=[1, 2], choices=(1, 2))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    if 1 in args.part:
        part1(args.seeds)
    if 2 in args.part:
        part2(args.seeds)


if __name__ == "__main__":
    main()
