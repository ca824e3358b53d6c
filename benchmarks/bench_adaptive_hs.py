"""Wall time of the default adaptive LOO on a regularized-horseshoe logistic regression.

n = 130 observations, p = 300 coefficients (+ intercept), S = 4000 draws (4 chains x 1000),
as in issue 11 (a horseshoe fit with n = 126, p = 312 took 95 s).  The draws are not a
NUTS fit (that takes minutes with stanli): they are consistent with the model, which is
all the timing needs, and the driver checks that the draws' log_lik equals the model's.

* X, y simulated (seed 0): standardised Gaussian predictors, 6 true signals.
* Per draw horseshoe hyperparameters: tau log-normal around the Piironen-Vehtari global
  scale, lambda_tilde log-normal with larger scales on the coefficients that matter.
* beta, beta0 Gaussian around the penalised MAP (Newton) with the Laplace covariance,
  inflated 1.3x so that many observations have high PSIS k-hat.
* log_lik from ``LogisticRegression(...).log_lik``.

Printed: plain PSIS on the same draws, the default ``loo(draws, model=model, seed=1)``
(LL transform, split selection, certification) as wall time and as a ratio to PSIS, the
number of rows adapted, and the stages from a cProfile pass (cumulative time per stage
function; profiling inflates Python overhead a little).

    python benchmarks/bench_adaptive_hs.py [--repeat 2] [--n 130] [--p 300] [--profile 0]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import time
import warnings

import numpy as np

#: (label, function names as cProfile reports them) of the stages of `adaptive_estimate`
STAGES = (
    ("theta_from_draws", ("theta_from_draws",)),
    ("posterior terms", ("posterior_terms", "_logsig_at", "cache_weighted_moments")),
    ("per-row candidates", ("row_candidates", "_affine_directions")),
    ("PSIS (selection)", ("_block_estimates", "select_candidate")),
    ("certification", ("certify_candidate",)),
)


def print_stages(prof):
    """Cumulative time per stage of `adaptive_estimate` (`STAGES`) from a cProfile pass."""
    cum = {}
    for (_, _, fname), (_, _, _, ct, _) in pstats.Stats(prof).stats.items():
        cum[fname] = cum.get(fname, 0.0) + ct
    print("stages (cProfile cumulative):")
    for label, fnames in STAGES:
        print(f"  {label:20s} {sum(cum.get(f, 0.0) for f in fnames):8.3f} s")


def compile_psis_kernels(n_draws):
    """Compile (or load from numba's cache) the PSIS kernels of `loo_adapt.core.psis`.

    `psislw` runs its numpy twin until the numba kernel is compiled or cached, or the numpy
    runs of the process exceed the cell budget (`loo_adapt.core._compiled.use_numba`); the
    adaptive path's small calls reach that budget only part-way through a run, so without
    this the timed runs of a fresh checkout would mix numpy PSIS and the compilation into the
    "steady state".  Returns the seconds it took (~20 s the first time, ~0 once cached)."""
    from loo_adapt.core import psis

    t0 = time.perf_counter()
    lr = np.random.default_rng(0).standard_normal((n_draws, 2 * psis._PARALLEL_MIN_COLS))
    for cols in (lr, np.ascontiguousarray(lr[:, :2])):  # the parallel and serial kernels
        psis._run(cols, None, False, np.ones(cols.shape[1]), True, True, engine="numba")
    return time.perf_counter() - t0


def simulate(n=130, p=300, chains=4, n_draws=1000, seed=0):
    """(Draws, model) of a horseshoe logistic regression, draws consistent with the model."""
    from loo_adapt.draws import Draws
    from loo_adapt.models import LogisticRegression, Normal, RegularizedHorseshoe

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    X = (X - X.mean(0)) / X.std(0)
    beta_true = np.zeros(p)
    beta_true[:6] = [2.0, -1.5, 1.2, -1.0, 0.8, 0.6]
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(0.3 + X @ beta_true)))).astype(int)
    S = chains * n_draws
    p0 = p / 10
    tau0 = p0 / ((p - p0) * np.sqrt(n))
    # MAP with a fixed ridge of prior sd s_j (larger where the truth is non-zero: a horseshoe
    # posterior has that shape), Newton's method
    sd = np.full(p, 0.15)
    sd[:6] = 1.5
    A = np.hstack([np.ones((n, 1)), X])
    prec = np.concatenate([[1.0 / 25.0], 1.0 / sd**2])
    theta = np.zeros(p + 1)
    for _ in range(50):
        mu = A @ theta
        pr = 1.0 / (1.0 + np.exp(-mu))
        g = A.T @ (y - pr) - prec * theta
        H = (A * (pr * (1 - pr))[:, None]).T @ A + np.diag(prec)
        step = np.linalg.solve(H, g)
        theta += step
        if np.max(np.abs(step)) < 1e-10:
            break
    L = np.linalg.cholesky(np.linalg.inv(H) * 1.3**2)
    draws_theta = theta + rng.standard_normal((S, p + 1)) @ L.T
    tau = tau0 * np.exp(0.3 * rng.standard_normal(S))
    lam = (sd / tau0) * np.exp(0.5 * rng.standard_normal((S, p)))
    model = LogisticRegression(
        X, y, coef="beta", intercept="beta0",
        prior=RegularizedHorseshoe(tau="tau", lambda_tilde="lambda_tilde"),
        intercept_prior=Normal(5.0),
    )
    ll = model.log_lik(draws_theta)
    shape = (chains, n_draws)
    variables = {
        "beta0": draws_theta[:, 0].reshape(shape),
        "beta": draws_theta[:, 1:].reshape(*shape, p),
        "tau": tau.reshape(shape),
        "lambda_tilde": lam.reshape(*shape, p),
        "log_lik": ll.reshape(*shape, n),
    }
    return Draws(variables, method="mcmc", source="simulated horseshoe draws"), model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=130)
    parser.add_argument("--p", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=2, help="timed repetitions (best kept)")
    parser.add_argument("--profile", type=int, default=0, help="cProfile rows to print")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")

    import numba

    import loo_adapt

    t0 = time.perf_counter()
    draws, model = simulate(args.n, args.p)
    print(f"simulated {draws.n_samples} draws x {model.dim} block, n = {model.n_obs} "
          f"in {time.perf_counter() - t0:.1f} s; numba threads {numba.get_num_threads()}")

    def run_psis():
        return loo_adapt.loo(draws, estimator="psis", seed=1)

    def run_adapt():
        return loo_adapt.loo(draws, model=model, seed=1)

    print(f"PSIS kernels compiled or loaded in {compile_psis_kernels(draws.n_samples):.1f} s")
    run_psis()
    run_adapt()  # warm-up: numba compilation is not part of the steady-state cost
    t_psis = t_adapt = cpu_adapt = np.inf
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        run_psis()
        t_psis = min(t_psis, time.perf_counter() - t0)
        t0, c0 = time.perf_counter(), time.process_time()
        res = run_adapt()
        t_adapt = min(t_adapt, time.perf_counter() - t0)
        cpu_adapt = min(cpu_adapt, time.process_time() - c0)
    la = res.loo_adapt
    n_high = int(np.sum(la.pareto_k > la.good_k))
    methods = np.asarray(la.method)
    print(f"rows above the k-hat threshold (adapted): {n_high}; accepted adapted: "
          f"{int(np.sum(methods != 'psis'))}; elpd_loo {float(np.sum(la.elpd_i)):.4f}")
    print(f"PSIS loo():             {t_psis:8.3f} s")
    print(f"adaptive loo():         {t_adapt:8.3f} s  ({t_adapt / t_psis:.1f} x PSIS; "
          f"target < 10 s)")
    # on a shared machine wall time depends on the other load; CPU time (all threads) does not
    print(f"adaptive loo() CPU:     {cpu_adapt:8.3f} s  (load average now "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")

    prof = cProfile.Profile()
    prof.enable()
    run_adapt()
    prof.disable()
    print_stages(prof)
    if args.profile:
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(args.profile)
        print("\n".join(out.getvalue().splitlines()[4:]))


if __name__ == "__main__":
    main()
