"""The default with a user's own program, as a new user would run it, against brute force.

A horseshoe logistic regression written the usual way (``y ~ bernoulli_logit``, ``log_lik``
and ``y_rep`` in one generated-quantities loop, no ``mixis`` lines: `loo` writes them in)
is fitted with stanli to a suite benchmark's data (a fresh posterior fit, its own seed), then
``loo(fit, program=program)`` with every default.  Printed: the posterior fit's and the
call's seconds (the call's cost in posterior fits), each stage's rows and seconds, the
total's error against the benchmark's brute-force truth with the combined Monte Carlo
error, and the verified rows' rms z.

    LOO_ADAPT_COLON_CSV=.../colon.csv python benchmarks/user_program.py
        [--benchmarks rhs_microarray_next ...] [--seeds 11] [--easy-budgets 1 1e9]
        [--worst 4] [--again-margins 1e9 1.5]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth_suite import calibration_z, fit_group, focused_rows, suite_module, total_mc  # noqa: E402

import loo_adapt  # noqa: E402
from loo_adapt.estimators import focused, focused_easy  # noqa: E402

DEFAULT_BUDGET = focused_easy.EASY_FOCUS_BUDGET
DEFAULT_MARGIN = focused.AGAIN_MARGIN

#: the user's program: every benchmark it runs on is a horseshoe logistic regression
PROGRAM = """// a user's horseshoe logistic regression, written the usual way
data {
  int<lower=1> N;
  int<lower=1> D;
  matrix[N, D] X;
  array[N] int<lower=0, upper=1> y;
  int<lower=0, upper=1> has_intercept;
  real<lower=0> scale_icept;
  real<lower=0> scale_global;
  real<lower=1> nu_global;
  real<lower=1> nu_local;
  real<lower=0> slab_scale;
  real<lower=0> slab_df;
}
parameters {
  array[has_intercept] real beta0;
  vector[D] z;
  real<lower=0> tau;
  vector<lower=0>[D] lambda;
  real<lower=0> caux;
}
transformed parameters {
  real<lower=0> c = slab_scale * sqrt(caux);
  vector<lower=0>[D] lambda_tilde = sqrt(c^2 * square(lambda) ./ (c^2 + tau^2 * square(lambda)));
  vector[D] beta = z .* lambda_tilde * tau;
}
model {
  vector[N] eta = X * beta;
  if (has_intercept) {
    eta += beta0[1];
    beta0[1] ~ normal(0, scale_icept);
  }
  z ~ std_normal();
  lambda ~ student_t(nu_local, 0, 1);
  tau ~ student_t(nu_global, 0, scale_global);
  caux ~ inv_gamma(0.5 * slab_df, 0.5 * slab_df);
  y ~ bernoulli_logit(eta);
}
generated quantities {
  vector[N] log_lik;
  array[N] int y_rep;
  {
    vector[N] eta = X * beta;
    if (has_intercept) eta += beta0[1];
    for (n in 1:N) {
      log_lik[n] = bernoulli_logit_lpmf(y[n] | eta[n]);
      y_rep[n] = bernoulli_logit_rng(eta[n]);
    }
  }
}
"""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", nargs="+", default=["rhs_microarray_next"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[11])
    parser.add_argument("--easy-budgets", type=float, nargs="+", default=None,
                        help="run loo() on each fit once per value of the easy-row focus's "
                        "leapfrog budget (focused_easy.EASY_FOCUS_BUDGET, in posterior fits; a "
                        "large value: the 4 x 4000 draws it had before), an A/B on one fit")
    parser.add_argument("--again-margins", type=float, nargs="+", default=None,
                        help="run loo() on each fit once per value of focused.AGAIN_MARGIN "
                        "(the second focused round's draws; a large value: the first "
                        "round's 1000, as before), an A/B on one fit")
    parser.add_argument("--worst", type=int, default=0,
                        help="also print the rows with the k most negative and positive errors")
    args = parser.parse_args(argv)
    budgets = args.easy_budgets or [focused_easy.EASY_FOCUS_BUDGET]
    margins = args.again_margins or [focused.AGAIN_MARGIN]
    suite = suite_module()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "my_horseshoe.stan"
        path.write_text(PROGRAM)
        for name in args.benchmarks:
            data, _, truth = suite.load(name)
            data = {k: v for k, v in data.items() if not k.startswith("mixis")}
            program = loo_adapt.StanProgram(path, data, backend="stanli",
                                            fit_kwargs=suite.BENCHMARKS[name].fit_kwargs)
            truth = np.asarray(truth)
            idx = truth[:, 0].astype(int)
            for seed in args.seeds:
                t0 = time.perf_counter()
                fit = program.fit(seed=seed)
                t_fit = time.perf_counter() - t0
                for budget in budgets:
                    for margin in margins:
                        _run(name, seed, program, fit, t_fit, truth, idx, budget,
                             len(budgets) > 1, args.worst, margin, len(margins) > 1)


def _run(name, seed, program, fit, t_fit, truth, idx, budget, say_budget, worst,
         margin=DEFAULT_MARGIN, say_margin=False):
    """One loo() call with the easy-row focus's budget at ``budget`` and the second focused
    round's margin at ``margin``, printed."""
    focused_easy.EASY_FOCUS_BUDGET = budget
    focused.AGAIN_MARGIN = margin
    try:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = loo_adapt.loo(fit, program=program, seed=seed, progress=False)
        t_loo = time.perf_counter() - t0
    finally:
        focused_easy.EASY_FOCUS_BUDGET = DEFAULT_BUDGET
        focused.AGAIN_MARGIN = DEFAULT_MARGIN
    r = res.loo_adapt
    label = f" (easy-row budget {budget:g})" if say_budget else ""
    label += f" (second-round margin {margin:g})" if say_margin else ""
    err = r.elpd_i[idx] - truth[:, 1]
    z = calibration_z(r.elpd_i[idx], r.mcse_elpd_i[idx], truth[:, 1], truth[:, 2])
    ver = np.asarray(r.reliable, dtype=bool)[idx]
    mc = total_mc(r.estimates()["mcse_elpd_loo"], truth[:, 2])
    stages = ", ".join(f"{h['estimator']} {len(h['rows'])} rows "
                       f"{h.get('seconds', 0.0):.0f} s" for h in r.history)
    print(f"{name} seed {seed}{label}: posterior fit {t_fit:.1f} s, loo {t_loo:.1f} s "
          f"({t_loo / t_fit:.2f} posterior fits; {stages}); total error "
          f"{err.sum():+.2f} (combined MC {mc:.2f}, {err.sum() / mc:+.1f}); "
          f"verified {ver.sum()} of {ver.size}, rms z "
          f"{np.sqrt(np.mean(z[ver] ** 2)):.2f}, mean z {z[ver].mean():+.2f}", flush=True)
    print("    NUTS per chain, mean tree depth / leapfrog steps per draw: "
          + "; ".join(_nuts(fit, r)), flush=True)
    groups = np.array([fit_group(r.row_draws[i] if r.row_draws is not None else None,
                                 r.method[i]) for i in idx])
    print("    summed error by the fit each row is held from: " + "; ".join(
        f"{g} {int(np.sum(groups == g))} rows {err[groups == g].sum():+.2f}"
        for g in sorted(set(groups))), flush=True)
    order = np.argsort(err)
    for j in [*order[:worst], *order[len(order) - worst:]] if worst else ():
        i = idx[j]
        print(f"    row {i:3d}: error {err[j]:+.3f}, MCSE {r.mcse_elpd_i[i]:.3f}, z {z[j]:+.2f}, "
              f"{r.method[i]}, verified by {r.verified_by[i] or '-'}, PSIS k-hat "
              f"{r.pareto_k[i]:.2f}", flush=True)


def _nuts(fit, r):
    """Per fit (the posterior and each mixture fit whose draws some row is held from, named
    by what its draws' source says it sampled: the full mixture or a focus on k rows), the
    chains' mean tree depth and leapfrog steps per draw: what the fit's seconds scale with.
    Also the note of an easy-row focus whose draws the leapfrog budget cut."""
    from loo_adapt.io import read_draws

    fits = [("posterior", read_draws(fit))]
    seen = set()
    for rec in r.row_draws or ():
        d = getattr(rec, "draws", None)
        if d is not None and id(d) not in seen and getattr(d, "sample_stats", None):
            seen.add(id(d))
            k = focused_rows(d)
            what = "full mixture" if k is None else f"focused on {k} rows"
            fits.append((f"{what} ({d.n_chains} x {d.n_draws})", d))
    out = []
    for label, d in fits:
        st = d.sample_stats
        if "treedepth__" not in st or "n_leapfrog__" not in st:
            continue
        depth = np.mean(st["treedepth__"], axis=1)
        steps = np.mean(st["n_leapfrog__"], axis=1)
        out.append(f"{label}: " + " ".join(f"{a:.1f}/{b:.0f}" for a, b in zip(depth, steps)))
    return out + [t for t in r.notes if "draws per chain, not" in str(t)]  # the cuts


if __name__ == "__main__":
    main()
