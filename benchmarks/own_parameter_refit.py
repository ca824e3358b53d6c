"""A refit the tail check fails: an observation with a parameter of its own.

A 12-school hierarchical model (non-centred, theta_j = mu + tau * eta_j, y_j ~ N(theta_j,
sigma_j), sigma_j ~ U(8, 16)) with one school's estimate set to 75, far from the others.
Left out, that school's eta is drawn from its prior, so p(y | theta) is large only in the
rare draws with a large tau: the refit's plain mean of p(y | theta) misses.  The script

1. refits the outlier through ``refit_loo`` (the program path `loo` takes: its log_lik term
   taken out of the full-data target) on three seeds and prints elpd, MCSE, the Pareto k-hat
   of its held-out likelihood (`loo_adapt.stan.heldout.tail_check`) and the verdict;
2. gives the reference value: fits of the 11 other schools (4 x 25,000 draws, adapt_delta
   0.99, two seeds) and the mean over their draws of N(75 | mu, sqrt(tau^2 + sigma^2)),
   theta integrated out (whose own k-hat is printed too);
3. runs ``loo(fit, program=...)`` and prints what it says about that row (its refit bridged
   with the posterior draws, `loo_adapt.core.bridge`);
4. a refit that passes at k-hat above PSIS's 0.7: the Poisson regression of
   `tests/stan/test_own_program.py` (n = 40, one count of 18 where about 2 is expected):
   ten refits of that row (4 x 1000 draws) with their k-hat, elpd, MCSE and z against one
   refit of 4 x 25,000 draws;
5. a far outlier the check fails although its refits are right within their MCSEs: a
   negative-binomial regression with five varying intercepts (n = 40, one count of 60 where
   about 3 is expected), eight refits of that row against one of 4 x 25,000 draws.

    python benchmarks/own_parameter_refit.py
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import numpy as np
from scipy import stats
from scipy.special import logsumexp

SCHOOLS = """
data { int<lower=0> J; array[J] real y; array[J] real<lower=0> sigma; }
parameters { real mu; real<lower=0> tau; vector[J] eta; }
transformed parameters { vector[J] theta = mu + tau * eta; }
model { mu ~ normal(0, 5); tau ~ cauchy(0, 5); eta ~ std_normal(); y ~ normal(theta, sigma); }
generated quantities {
  vector[J] log_lik;
  vector[J] y_rep;
  for (j in 1:J) {
    log_lik[j] = normal_lpdf(y[j] | theta[j], sigma[j]);
    y_rep[j] = normal_rng(theta[j], sigma[j]);
  }
}
"""
OUTLIER = 4


def data():
    rng = np.random.default_rng(7)
    J = 12
    sigma = rng.uniform(8, 16, size=J)
    y = 5 + 6 * rng.normal(size=J) + sigma * rng.normal(size=J)
    y[OUTLIER] = 75.0
    return {"J": J, "y": y.tolist(), "sigma": sigma.tolist()}


def main():
    import stanli

    from loo_adapt import StanProgram, loo
    from loo_adapt.stan.heldout import tail_check
    from loo_adapt.stan.refit import refit_loo

    d = data()
    with tempfile.TemporaryDirectory() as tmp:
        stan = Path(tmp) / "schools.stan"
        stan.write_text(SCHOOLS)
        program = StanProgram(stan, d)
        print(f"school {OUTLIER}: y = 75, sigma = {d['sigma'][OUTLIER]:.2f}")
        for seed in (0, 100, 200):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = refit_loo([OUTLIER], program, seed=seed, progress=False, n_jobs=1)
            print(f"refit_loo seed {seed + OUTLIER}: elpd {r.elpd_i[0]:.3f} (MCSE "
                  f"{r.mcse_elpd_i[0]:.3f}), k-hat {r.pareto_k[0]:.2f}, verified "
                  f"{bool(r.reliable[0])}")
        keep = [j for j in range(d["J"]) if j != OUTLIER]
        rest = {"J": d["J"] - 1, "y": [d["y"][j] for j in keep],
                "sigma": [d["sigma"][j] for j in keep]}
        s4 = d["sigma"][OUTLIER]
        for seed in (1, 2):
            f = stanli.Model(stan_file=str(stan), data=rest, seed=seed).sample(
                seed=seed, refresh=0, delta=0.99, samples=25000)
            mu, tau = np.asarray(f["mu"]), np.asarray(f["tau"])
            ll = stats.norm.logpdf(75.0, mu, np.sqrt(tau**2 + s4**2))
            print(f"reference, seed {seed} (theta integrated out, {ll.size} draws): "
                  f"{logsumexp(ll) - np.log(ll.size):.3f}, its k-hat {tail_check(ll)[1]:.2f}, "
                  f"{int(np.sum(f.divergences))} divergent")
        fit = stanli.Model(stan_file=str(stan), data=d, seed=1).sample(seed=1, refresh=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = loo(fit, program=program, progress=False)
        pw = res.loo_adapt
        print(f"loo(fit, program=...): row {OUTLIER} {pw.elpd_i[OUTLIER]:.3f} (MCSE "
              f"{pw.mcse_elpd_i[OUTLIER]:.3f}), {pw.method[OUTLIER]}, verified "
              f"{bool(pw.reliable[OUTLIER])}: {pw.reason[OUTLIER]}")
    poisson()
    negbin()


def refits_against_reference(program, row: int, label: str, seeds) -> None:
    """Refits of ``row`` (4 x 1000 draws, one per seed) against one of 4 x 25,000: elpd,
    MCSE, the tail check's k-hat, z, and the rms z."""
    from loo_adapt.stan.heldout import heldout_elpd, tail_check

    def refit(seed, draws):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = program.refit_without(row, seed=seed, draws=draws)
        ll = program.heldout_log_lik(fit, row).reshape(4, -1)
        e, m, ess = heldout_elpd(ll)
        return e, m, tail_check(ll, ess)[1]

    ref, ref_se, ref_k = refit(999, 25000)
    print(f"{label}, row {row}: reference refit 4 x 25000: {ref:.3f} (MCSE {ref_se:.3f}), "
          f"k-hat {ref_k:.2f}")
    z = []
    for seed in seeds:
        e, m, k = refit(seed, 1000)
        z.append((e - ref) / np.hypot(m, ref_se))
        print(f"  refit seed {seed}: {e:.3f} (MCSE {m:.3f}), k-hat {k:.2f}, z {z[-1]:+.2f}")
    print(f"  rms z {np.sqrt(np.mean(np.square(z))):.2f}")


def poisson():
    from loo_adapt import StanProgram

    stan = Path(__file__).resolve().parents[1] / "tests" / "data" / "poisson" / "poisson_yrep.stan"
    rng = np.random.default_rng(3)
    x = rng.normal(size=40)
    y = rng.poisson(np.exp(0.5 + 0.6 * x))
    y[5] = 18
    program = StanProgram(stan, {"N": 40, "x": x.tolist(), "y": y.tolist()},
                          backend="stanli")
    refits_against_reference(program, 5, "Poisson count 18", range(5, 105, 10))


NEGBIN = """
data { int<lower=1> N; int<lower=1> J; array[N] int<lower=1, upper=J> g; vector[N] x;
       array[N] int<lower=0> y; }
parameters { real mu0; real beta; real<lower=0> tau; vector[J] z; real<lower=0> phi; }
transformed parameters { vector[J] u = tau * z; }
model {
  mu0 ~ normal(0, 2); beta ~ normal(0, 1); tau ~ normal(0, 1); z ~ std_normal();
  phi ~ gamma(2, 0.5);
  y ~ neg_binomial_2_log(mu0 + u[g] + beta * x, phi);
}
generated quantities {
  vector[N] log_lik;
  for (n in 1:N) log_lik[n] = neg_binomial_2_log_lpmf(y[n] | mu0 + u[g[n]] + beta * x[n], phi);
}
"""


def negbin():
    from loo_adapt import StanProgram

    rng = np.random.default_rng(5)
    N, J = 40, 5
    g = rng.integers(1, J + 1, size=N)
    x = rng.normal(size=N)
    u = rng.normal(scale=0.5, size=J)
    m = np.exp(1 + u[g - 1] + 0.5 * x)
    y = rng.negative_binomial(5, 5 / (5 + m))
    y[7] = 60
    with tempfile.TemporaryDirectory() as tmp:
        stan = Path(tmp) / "negbin.stan"
        stan.write_text(NEGBIN)
        program = StanProgram(stan, {"N": N, "J": J, "g": g.tolist(), "x": x.tolist(),
                                     "y": y.tolist()}, backend="stanli")
        refits_against_reference(program, 7, "negative binomial, count 60", range(7, 87, 10))


if __name__ == "__main__":
    main()
