"""The paper's Table 1 on the ovarian data: unsuccessful adaptations per transform set.

Model (Sec. 5 of the adaptive-IS LOO paper, as Paananen et al. 2021): logistic regression
with a regularized horseshoe on the standardised ovarian data (54 x 1536), p0 = n / 10,
slab scale 2.5, slab df 1, intercept sd 5.  One long NUTS fit (stanli) is cached under
benchmarks/cache/; then R resamples of S draws without replacement.  Per resample and
transform set: observations with PSIS k-hat > 0.7 ("none"), and those left unsuccessful
by the paper's rule (no candidate over the rho grid with k-hat < 0.7 on the same draws),
beside the honest count of ``selection="split"`` (candidate chosen on one half of the
draws, k-hat checked on the other half).

    python benchmarks/ovarian_table1.py [--draws 1000] [--resamples 20] [--seed 1]
        [--fit-only] [--chains 4 --warmup 1000 --iter 1000]

The transforms move the regression block (intercept + 1536 coefficients) with each draw's
horseshoe scales held fixed (conditional Gaussian prior ratio); see loo_adapt.models.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
import warnings
from pathlib import Path

import numpy as np

CACHE = Path(__file__).resolve().parent / "cache"
KHAT = 0.7  # the paper's fixed threshold (not the S-dependent one)
ALL = ("kl", "var", "ll", "mm1", "mm2")

#: Paper Table 1 (S = 1000, 100 resamples).  The text extraction lost the check-mark
#: columns; rows are assigned by consistency: a union of transforms cannot fail more
#: often than any of its members, and the text says KL/Var alone are comparable to the
#: original MM (~20), MM1/MM2 are "by far the best" alone and together.
PAPER = {
    "none": "31.5 +- 2.8",
    "kl": "16.2 +- 3.0",
    "var": "18.2 +- 2.6",
    "kl+var": "12.41 +- 2.6",
    "ll": "20.4 +- 3.1",
    "mm1": "2.9 +- 1.6",
    "mm2": "3.1 +- 3.1",
    "mm1+mm2": "0.8 +- 1.0",
    "all": "0.2 +- 0.1",
}
ROWS = [
    ("kl",), ("var",), ("kl", "var"), ("ll",), ("mm1",), ("mm2",), ("mm1", "mm2"),
    ("kl", "var", "ll"), ("ll", "mm1", "mm2"), ALL,
]


def row_label(names) -> str:
    return "all" if tuple(names) == ALL else "+".join(names)


def ovarian_data() -> dict:
    from loo_adapt.datasets import load_ovarian
    from loo_adapt.stan.backends import stan_data

    X, y = load_ovarian(standardize=True)
    n = X.shape[0]
    # p0 = n / 10 as the issue specifies (the paper: "same model as Paananen et al.")
    return stan_data("logistic_rhs", X, y, p0=n / 10, slab_scale=2.5, slab_df=1.0,
                     scale_icept=5.0, has_intercept=1)


KEEP = ("beta0", "beta", "tau", "lambda_tilde", "log_lik")


def cache_path(chains, warmup, n_iter, seed, adapt_delta) -> Path:
    data = ovarian_data()
    key = hashlib.sha256(json.dumps(
        {k: (np.asarray(v).tolist() if hasattr(v, "__len__") else v) for k, v in data.items()},
        sort_keys=True).encode()).hexdigest()[:10]
    return CACHE / (f"ovarian_rhs_{key}_c{chains}_w{warmup}_s{n_iter}_seed{seed}"
                    f"_ad{adapt_delta}.npz")


def load_fit(chains=4, warmup=1000, n_iter=1000, seed=1, adapt_delta=0.95, fit=True):
    """The cached long fit as `Draws` (fitting it with stanli first when absent)."""
    from loo_adapt.io.readers import read_dict

    path = cache_path(chains, warmup, n_iter, seed, adapt_delta)
    if not path.is_file():
        if not fit:
            raise FileNotFoundError(f"no cached fit {path}; run ovarian_table1.py --fit-only")
        from loo_adapt.stan.backends import fit as stan_fit

        CACHE.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        draws = stan_fit("logistic_rhs", ovarian_data(), backend="stanli", chains=chains,
                         warmup=warmup, draws=n_iter, seed=seed, adapt_delta=adapt_delta,
                         refresh=100, show_progress=True)
        seconds = time.perf_counter() - t0
        stats = {f"stat_{k}": v for k, v in draws.sample_stats.items()}
        tmp = path.with_suffix(".tmp.npz")
        np.savez_compressed(tmp, **{k: draws[k] for k in KEEP}, **stats,
                            fit_seconds=seconds)
        tmp.rename(path)
        print(f"fitted in {seconds:.0f} s, cached to {path}")
    with np.load(path) as f:
        variables = {k: f[k] for k in KEEP}
        stats = {k[5:]: f[k] for k in f.files if k.startswith("stat_")}
        seconds = float(f["fit_seconds"])
    draws = read_dict(variables, method="mcmc", sample_stats=stats, source=str(path))
    return draws, seconds


def subset(draws, idx):
    """S draws (flat indices) as a one-chain `Draws` (resampled draws have no chains)."""
    from loo_adapt.draws import Draws

    variables = {k: draws.flat(k)[idx][None] for k in draws.variables}
    return Draws(variables, method="mcmc", source=f"{len(idx)} resampled draws")


def fit_diagnostics(draws) -> str:
    stats = draws.sample_stats
    div = int(np.sum(stats.get("divergent__", 0)))
    depth = stats.get("treedepth__")
    out = f"{draws.n_chains} chains x {draws.n_draws} draws; divergences {div}"
    if depth is not None:
        out += f"; max treedepth {int(np.max(depth))}"
    try:
        import arviz as az

        tau = draws["tau"]
        out += f"; R-hat(tau) {float(az.rhat(tau)):.3f}, ESS(tau) {float(az.ess(tau)):.0f}"
        b0 = draws["beta0"].reshape(draws.n_chains, draws.n_draws)
        out += f"; R-hat(beta0) {float(az.rhat(b0)):.3f}"
    except Exception as exc:  # diagnostics are informative only
        out += f" (no R-hat: {exc})"
    return out


def one_resample(sub, model, rows, seed):
    """Counts for one resample: none, per row (paper's rule, split) and wall time."""
    from loo_adapt.estimators.adaptive import adapt_loo
    from loo_adapt.estimators.psis import psis_of_draws

    base = psis_of_draws(sub, reff=1.0)
    high = np.flatnonzero(base.pareto_k > KHAT)
    out = {"none": len(high)}
    t0 = time.perf_counter()
    # One min_khat run with every transform gives every candidate's k-hat: each row's
    # paper-rule count is then "no candidate of that row's transforms below 0.7".
    res = adapt_loo(sub, model, base=base, transforms=ALL, selection="min_khat",
                    khat_threshold=KHAT, keep_candidates=True)
    best = {}
    for c in res.candidates:
        key = (c["i"], c["transform"])
        best[key] = min(best.get(key, np.inf), c["khat"])
    for names in rows:
        ok = [any(best.get((int(i), t), np.inf) < KHAT for t in names) for i in high]
        out[row_label(names)] = len(high) - int(np.sum(ok))
    out["seconds_min_khat"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    # the package default (LL descent) and every transform; each split run costs a full pass
    for names in (("ll",), ALL):
        split = adapt_loo(sub, model, base=base, transforms=names, selection="split",
                          khat_threshold=KHAT, seed=seed, keep_candidates=False)
        out[f"split:{row_label(names)}"] = int(np.sum(split.pareto_k_after[high] > KHAT))
    out["seconds_split"] = time.perf_counter() - t0
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=1000, help="S per resample")
    parser.add_argument("--resamples", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--iter", type=int, default=1000, help="kept draws per chain")
    parser.add_argument("--fit-seed", type=int, default=1)
    parser.add_argument("--adapt-delta", type=float, default=0.95)
    parser.add_argument("--fit-only", action="store_true")
    args = parser.parse_args(argv)

    from loo_adapt.models import model_for

    draws, fit_seconds = load_fit(args.chains, args.warmup, args.iter, args.fit_seed,
                                  args.adapt_delta)
    print(f"fit: {fit_diagnostics(draws)}; fit time {fit_seconds:.0f} s")
    if args.fit_only:
        return
    if args.draws > draws.n_samples:
        parser.error(f"--draws {args.draws} exceeds the {draws.n_samples} cached draws")
    model = model_for("logistic_rhs", ovarian_data())
    rng = np.random.default_rng(args.seed)
    rows = []
    warnings.simplefilter("ignore")
    t_all = time.perf_counter()
    for r in range(args.resamples):
        idx = np.sort(rng.choice(draws.n_samples, size=args.draws, replace=False))
        counts = one_resample(subset(draws, idx), model, ROWS, seed=args.seed + r)
        rows.append(counts)
        print(f"resample {r + 1:3d}/{args.resamples}: none {counts['none']:2d}, all "
              f"{counts['all']:2d}, split(all) {counts['split:all']:2d}  "
              f"({counts['seconds_min_khat']:.1f} s + {counts['seconds_split']:.1f} s)",
              flush=True)
    print(f"\nTable 1 on ovarian (S = {args.draws}, {args.resamples} resamples without "
          f"replacement of {draws.n_samples} draws; rho = 4^-r, r = 0..10; k-hat "
          f"threshold {KHAT}; {time.perf_counter() - t_all:.0f} s)")
    print(f"{'transforms':18s} {'unsuccessful (paper rule)':>26s} {'paper':>14s}"
          f" {'still k>0.7 with split':>24s}")

    def fmt(key):
        v = np.array([c[key] for c in rows], dtype=float)
        return f"{v.mean():.1f} +- {v.std(ddof=1) if len(v) > 1 else 0.0:.1f}"

    print(f"{'none (PSIS)':18s} {fmt('none'):>26s} {PAPER['none']:>14s}")
    for names in ROWS:
        label = row_label(names)
        split = fmt(f"split:{label}") if f"split:{label}" in rows[0] else ""
        print(f"{label:18s} {fmt(label):>26s} {PAPER.get(label, '-'):>14s} {split:>24s}")
    print("\nPaper rule: an observation counts as fixed when any candidate has k-hat < 0.7 "
          "on the same draws that chose it (optimistic: min of ~55 noisy k-hats).\n"
          "Split: candidate chosen on one half of the draws, k-hat taken on the other half "
          "(reported k-hat = the larger of the two held-out k-hats).")


if __name__ == "__main__":
    main()
