"""Brute-force leave-one-out truth for the benchmark suite: one NUTS refit per observation.

For benchmark NAME and each observation i: refit the Stan program on the data without row i
(``StanProgram.refit_without``, stanli NUTS, seed ``SEED_BASE + i``), evaluate the held-out
log-likelihood log p(y_i | theta_s) at the refit's draws, and record

- ``elpd_loo``  = log mean_s p(y_i | theta_s)   (:func:`loo_adapt.stan.refit.heldout_elpd`),
- ``mc_se``     = its Monte Carlo error (delta method with the multi-chain ESS of p(y_i | theta)),
- ``p_loo_y1``  = mean_s P(y_i = 1 | theta_s).

Each finished fold is appended to ``<name>.checkpoint.jsonl`` (with seed, seconds, ESS, the
spread of the per-chain estimates, the divergences and the Pareto k-hat of p(y_i | theta)
over the refit's draws, ``khat``: above 1 the fold's mean is not to be trusted and a line
says so, `loo_adapt.stan.heldout.tail_check`), so a rerun resumes where it stopped;
once every fold is there ``<name>.csv`` is written with the columns of
``tests/data/cmdstan/truth/*.csv``.  The data are simulated from a fixed seed and written to
``<name>.data.json`` on first use (an existing data file is used as is).

    python benchmarks/truth/make_truth.py --benchmark t_outliers [--jobs 1]
    python benchmarks/truth/make_truth.py --benchmark rhs_wide --time-one   # one refit, timed
    python benchmarks/truth/make_truth.py --benchmark rhs_wide --khat       # PSIS on 4 x 1000

Run it with ``nice -n 10``. One job runs one refit at a time on one core (stanli would
otherwise run the chains of a refit in parallel threads on every core).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.special import logsumexp

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

from loo_adapt.stan import backends  # noqa: E402
from loo_adapt.stan.heldout import tail_check  # noqa: E402
from loo_adapt.stan.program import StanProgram  # noqa: E402
from loo_adapt.stan.refit import heldout_elpd  # noqa: E402

SEED_BASE = 100  # refit without observation i uses seed SEED_BASE + i (as the fixture truth)
REDO_SEED_STEP = 1000  # a redone fold (--redo-min-ess) uses seed SEED_BASE + i + 1000 k
REDO_MIN_ESS = 400  # Stan's rule of thumb: an ESS below 100 per chain (4 chains) is not enough
COLUMNS = ("i", "elpd_loo", "mc_se", "p_loo_y1")

#: the CmdStan fixtures (data, Stan output and a truth of their own under ``truth/``; no
#: checkpoint: divergences unknown, MC se the spread of the 4 chains' estimates / 2)
FIXTURE_DIR = ROOT / "tests" / "data" / "cmdstan"
#: fixture -> (bundled program with the same parameters and data, adapt_delta of its truth)
FIXTURE_TRUTHS = {"logistic_normal": ("logistic_normal", 0.8),
                  "rhs_logistic": ("logistic_rhs", 0.95), "relu1": ("relu_net", 0.95)}


# ------------------------------------------------------------------------------------------
# simulated data (each from its own fixed seed)
# ------------------------------------------------------------------------------------------
def _standardise(X):
    return (X - X.mean(axis=0)) / X.std(axis=0)


def _ar1_normal(rng, n, p, rho):
    """n rows of a stationary AR(1) Gaussian vector of length p (correlation rho^|j-k|)."""
    X = np.empty((n, p))
    X[:, 0] = rng.standard_normal(n)
    innov = math.sqrt(1.0 - rho**2)
    for j in range(1, p):
        X[:, j] = rho * X[:, j - 1] + innov * rng.standard_normal(n)
    return X


def _bernoulli_logit(rng, eta):
    return (rng.uniform(size=eta.shape) < 1.0 / (1.0 + np.exp(-eta))).astype(np.int64)


def data_rhs_wide(n=130, p=300, seed=20261):
    """Horseshoe logistic regression: AR(1)(0.5) predictors, six strong signals."""
    rng = np.random.default_rng(seed)
    X = _standardise(_ar1_normal(rng, n, p, 0.5))
    beta = np.zeros(p)
    beta[[10, 60, 120, 180, 240, 290]] = [2.0, -1.8, 1.5, -1.5, 1.2, 1.0]
    y = _bernoulli_logit(rng, -0.3 + X @ beta)
    return backends.stan_data("logistic_rhs", X, y)  # the package's default priors


def data_t_outliers(n=80, p=10, n_out=4, seed=20262):
    """Student-t prior logistic regression; 5% of the rows are far out on the two strongest
    predictors (x 3 before standardising) and carry the label the signal argues against."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    X[:n_out, :2] *= 3.0
    X = _standardise(X)
    beta = np.zeros(p)
    beta[:4] = [3.0, -2.25, 1.5, 0.75]
    eta = 0.2 + X @ beta
    y = _bernoulli_logit(rng, eta)
    y[:n_out] = (eta[:n_out] < 0).astype(np.int64)  # mislabelled at strong-signal points
    X, y = backends._check_xy(X, y)
    return {"N": n, "D": p, "X": X, "y": y, "nu": 3.0, "prior_scale": 1.0, "scale_icept": 2.5,
            "mixis": 0}


def data_relu5(n=64, seed=20263):
    """Two uniform features, XOR-like labels (eta = 4 tanh(1.5 x1 x2)); the bundled ReLU net
    with H = 5 hidden units and prior_sd = 2 (wide enough for its modes to matter)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2.0, 2.0, size=(n, 2))
    eta = 4.0 * np.tanh(1.5 * X[:, 0] * X[:, 1])
    y = _bernoulli_logit(rng, eta)
    return backends.stan_data("relu_net", X, y, H=5, prior_sd=2.0)


def data_fixture_logistic_normal():
    """The CmdStan fixture logistic_normal's data (``tests/data/cmdstan``), as is."""
    return json.loads((FIXTURE_DIR / "logistic_normal.data.json").read_text())


def data_logistic_n300(n=320, p=10, n_out=4, seed=20264):
    """Normal-prior logistic regression, n = 320; four rows far out (x 5 before
    standardising) with the label the signal argues against: a few influential points."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    X[:n_out] *= 5.0
    X = _standardise(X)
    beta = np.zeros(p)
    beta[:6] = [1.5, -1.2, 0.9, 0.6, -0.45, 0.3]
    eta = -0.3 + X @ beta
    y = _bernoulli_logit(rng, eta)
    y[:n_out] = (eta[:n_out] < 0).astype(np.int64)
    return backends.stan_data("logistic_normal", X, y)


#: where ``data_rhs_microarray`` reads the colon data (Alon et al. 1999; first column y, then
#: x1..x2000, raw values, as in the shared data directory's README): environment variable
COLON_CSV_ENV = "LOO_ADAPT_COLON_CSV"


def data_rhs_microarray(p_each=150, skip=0):
    """Horseshoe logistic regression on real micro-array columns with n >= 100.

    No real data set the package has reaches n = 100 (ovarian: 54 rows, colon: 62), so the
    two are stacked: n = 62 + 54 = 116 real samples with their published labels (colon
    tumour vs normal; ovarian cancer vs not).  Each data set's ``p_each`` most variable raw
    predictors (sorted by variance, no use of y), standardised within the data set, fill
    columns 1..p_each (column j is the data set's j-th most variable gene, so a column
    means different genes in the two blocks of rows), and a last column marks the data set
    (standardised 0/1): p = p_each + 1 = 151.  Program ``logistic_rhs`` with the package's
    default priors (p0 = p / 10).  The colon file is read from ``$LOO_ADAPT_COLON_CSV``; the
    ovarian data come with the package (`loo_adapt.datasets.load_ovarian`).  ``skip``: leave
    out the ``skip`` most variable predictors first (``data_rhs_microarray_next``: the next
    150 genes of each data set, a design no rule was chosen on).
    """
    from loo_adapt.datasets import load_ovarian

    path = os.environ.get(COLON_CSV_ENV)
    if not path or not Path(path).is_file():
        raise FileNotFoundError(
            f"rhs_microarray needs the colon data: set {COLON_CSV_ENV} to colon.csv (column y, "
            "then x1..x2000, e.g. converted from github.com/jpiironen/dimreduce "
            "data/colon.RData)")
    colon = np.loadtxt(path, delimiter=",", skiprows=1)
    Xo, yo = load_ovarian(standardize=False)
    blocks, ys = [], []
    for X, y in ((colon[:, 1:], colon[:, 0]), (np.asarray(Xo, float), np.asarray(yo))):
        top = np.argsort(-X.var(axis=0, ddof=1), kind="stable")[skip:skip + p_each]
        blocks.append(_standardise(X[:, top]))
        ys.append(y.astype(np.int64))
    which = np.repeat([0.0, 1.0], [len(ys[0]), len(ys[1])])
    X = np.column_stack([np.vstack(blocks), (which - which.mean()) / which.std()])
    return backends.stan_data("logistic_rhs", X, np.concatenate(ys))


def data_rhs_microarray_next():
    """`data_rhs_microarray` on each data set's 151st to 300th most variable genes."""
    return data_rhs_microarray(p_each=150, skip=150)


# ------------------------------------------------------------------------------------------
# the suite
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Benchmark:
    name: str
    program: str  # bundled name or a path relative to benchmarks/truth/
    make_data: object
    chains: int = 4
    draws: int = 2000
    warmup: int = 1000
    fit_kwargs: dict = field(default_factory=dict)
    data_from: str | None = None  # another benchmark whose data file this one reads

    @property
    def stan_file(self) -> Path:
        if self.program.endswith(".stan"):
            return HERE / self.program
        return backends.stan_model_path(self.program)

    @property
    def data_file(self) -> Path:
        return HERE / f"{self.data_from or self.name}.data.json"

    @property
    def checkpoint(self) -> Path:
        return HERE / f"{self.name}.checkpoint.jsonl"

    @property
    def csv(self) -> Path:
        return HERE / f"{self.name}.csv"

    def data(self) -> dict:
        if not self.data_file.is_file():
            self.data_file.write_text(json.dumps(backends._jsonable(self.make_data())) + "\n")
        return json.loads(self.data_file.read_text())

    def stan_program(self) -> StanProgram:
        return StanProgram(self.stan_file, self.data(), backend="stanli",
                           fit_kwargs=self.fit_kwargs)


BENCHMARKS = {
    b.name: b
    for b in (
        Benchmark("t_outliers", "logistic_t.stan", data_t_outliers),
        Benchmark("logistic_n300", "logistic_normal", data_logistic_n300),
        Benchmark("relu5", "relu_net", data_relu5, chains=8, draws=1000, warmup=500,
                  fit_kwargs={"adapt_delta": 0.95}),
        Benchmark("rhs_wide", "logistic_rhs", data_rhs_wide, fit_kwargs={"adapt_delta": 0.95}),
        # held out for issue 21 (report half); adapt_delta 0.99: at 0.95 most refits diverged
        Benchmark("rhs_microarray", "logistic_rhs", data_rhs_microarray,
                  fit_kwargs={"adapt_delta": 0.99}),
        # held out for issue 21 after rules were chosen looking at rhs_microarray: the same
        # samples, the next 150 genes of each data set (report half)
        Benchmark("rhs_microarray_next", "logistic_rhs", data_rhs_microarray_next,
                  fit_kwargs={"adapt_delta": 0.99}),
        # a second truth for the fixture logistic_normal (its truth's MC error is the spread of
        # 4 chain estimates, 3 degrees of freedom): the same data and program, stanli, 4 x
        # 25000 draws per fold.  In neither half: it shares the data of a report benchmark.
        Benchmark("logistic_normal_long", "logistic_normal", data_fixture_logistic_normal,
                  draws=25000, fit_kwargs={"adapt_delta": 0.8}),
        # rhs_wide's data remade at adapt_delta 0.99 (106 of its 130 folds diverged at 0.95)
        Benchmark("rhs_wide_099", "logistic_rhs", data_rhs_wide,
                  fit_kwargs={"adapt_delta": 0.99}, data_from="rhs_wide"),
    )
}


# ------------------------------------------------------------------------------------------
# one fold
# ------------------------------------------------------------------------------------------
def _one_core():
    """stanli runs a fit's chains in min(chains, os.cpu_count()) threads; keep a job on one."""
    os.cpu_count = lambda: 1


def run_fold(name: str, i: int, attempt: int = 0, *, adapt_delta: float | None = None,
             warmup: int | None = None) -> dict:
    """Refit benchmark ``name`` without observation ``i``; the checkpoint record of the fold.
    ``attempt`` k > 0 redoes the fold with seed ``SEED_BASE + i + 1000 k``; ``adapt_delta``
    and ``warmup`` override the benchmark's (`benchmarks/truth_stability.py`'s stricter
    remakes)."""
    _one_core()
    bench = BENCHMARKS[name]
    program = bench.stan_program()
    seed = SEED_BASE + i + REDO_SEED_STEP * attempt
    t0 = time.perf_counter()
    fit = program.refit_without(i, seed=seed, chains=bench.chains, draws=bench.draws,
                                warmup=bench.warmup if warmup is None else warmup,
                                adapt_delta=adapt_delta)
    ll = program.heldout_log_lik(fit, i).reshape(fit.shape)  # (chains, draws)
    seconds = time.perf_counter() - t0
    elpd, mcse, ess = heldout_elpd(ll)
    tail, khat = tail_check(ll, ess)
    if tail:  # a truth is only as good as its mean: say so beside the fold's record
        print(f"{name} fold {i}: {tail}", flush=True)
    chain_elpd = logsumexp(ll, axis=1) - math.log(ll.shape[1])
    p_obs = math.exp(elpd)
    y_i = int(program.data["y"][i])
    stats = fit.sample_stats or {}
    divergent = int(np.sum(stats["divergent__"])) if "divergent__" in stats else -1
    return {
        "i": i, "seed": seed, "elpd_loo": elpd, "mc_se": mcse,
        "p_loo_y1": p_obs if y_i == 1 else 1.0 - p_obs, "ess": ess,
        "chain_se": float(np.std(chain_elpd, ddof=1) / math.sqrt(len(chain_elpd))),
        "chains": int(ll.shape[0]), "draws": int(ll.shape[1]), "divergent": divergent,
        "seconds": seconds, "khat": khat,
    }


def redo_poor(bench: Benchmark, min_ess: float = REDO_MIN_ESS) -> dict[int, dict]:
    """Redo, with the next seed, every finished fold whose ESS is below ``min_ess`` (a stuck
    chain makes its elpd and its MC error both unreliable).  The new record is appended (the
    old one stays in the file, the last record of a fold is the one read) and carries
    ``redo_of`` = the seed it replaces; the CSV is rewritten when every fold is done."""
    done = read_checkpoint(bench.checkpoint)
    poor = sorted(i for i, r in done.items() if r["ess"] < min_ess)
    print(f"{bench.name}: {len(poor)} fold(s) with ESS < {min_ess:.0f}: {poor}", flush=True)
    for i in poor:
        old = done[i]
        attempt = (old["seed"] - SEED_BASE - i) // REDO_SEED_STEP + 1
        rec = dict(run_fold(bench.name, i, attempt=attempt), redo_of=old["seed"])
        with bench.checkpoint.open("a") as fh:
            fh.write(json.dumps(rec) + "\n")
        print(f"  fold {i}: ESS {old['ess']:.0f} -> {rec['ess']:.0f}, elpd "
              f"{old['elpd_loo']:+.4f} -> {rec['elpd_loo']:+.4f} (MC se {rec['mc_se']:.4f})",
              flush=True)
    done = read_checkpoint(bench.checkpoint)
    if len(done) == int(bench.data()["N"]):
        write_csv(bench, done)
    return done


def read_checkpoint(path: Path) -> dict[int, dict]:
    """Finished folds by index (a torn last line from an interrupted run is ignored)."""
    done = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            done[int(rec["i"])] = rec
    return done


def write_csv(bench: Benchmark, done: dict[int, dict]) -> None:
    rows = np.array([[i, done[i]["elpd_loo"], done[i]["mc_se"], done[i]["p_loo_y1"]]
                     for i in sorted(done)])
    np.savetxt(bench.csv, rows, delimiter=",", header=",".join(COLUMNS), comments="",
               fmt="%.18e")


def run(bench: Benchmark, jobs: int = 1, limit: int | None = None,
        first: list[int] | None = None) -> dict[int, dict]:
    n = int(bench.data()["N"])
    done = read_checkpoint(bench.checkpoint)
    first = [i for i in (first or []) if 0 <= i < n]
    order = first + [i for i in range(n) if i not in set(first)]
    todo = [i for i in order if i not in done][:limit]
    print(f"{bench.name}: {len(done)} of {n} folds done, running {len(todo)}", flush=True)

    def store(rec):
        done[rec["i"]] = rec
        with bench.checkpoint.open("a") as fh:
            fh.write(json.dumps(rec) + "\n")
        print(f"  fold {rec['i']:4d}: elpd {rec['elpd_loo']:+.4f} (MC se {rec['mc_se']:.4f}), "
              f"{rec['seconds']:.1f} s, {len(done)}/{n}", flush=True)

    if jobs == 1:
        for i in todo:
            store(run_fold(bench.name, i))
    else:
        import multiprocessing

        ctx = multiprocessing.get_context("forkserver")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            pending = {pool.submit(run_fold, bench.name, i) for i in todo}
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    store(fut.result())
    if len(done) == n:
        write_csv(bench, done)
        print(f"{bench.name}: wrote {bench.csv.name}, total elpd "
              f"{sum(r['elpd_loo'] for r in done.values()):.2f}", flush=True)
    return done


def khat_report(bench: Benchmark, seed: int = 1) -> None:
    """Plain PSIS-LOO on a 4 x 1000 posterior fit of the full data: k-hat counts, and, for the
    finished folds, two checks of the truth that need no refit: where k-hat < 0.5 PSIS must
    agree with it, and p_loo_i = lpd_i - elpd_loo_i must not be below zero beyond the
    Monte Carlo error (harmonic <= arithmetic mean)."""
    from loo_adapt.api import loo

    _one_core()
    t0 = time.perf_counter()
    fit = bench.stan_program().fit(seed=seed, chains=4, draws=1000, warmup=1000)
    seconds = time.perf_counter() - t0
    res = loo(fit, estimator="psis", progress=False).loo_adapt
    k = res.pareto_k
    print(f"{bench.name}: 4 x 1000 posterior fit (seed {seed}, {seconds:.1f} s), PSIS elpd "
          f"{res.elpd_i.sum():.2f}; k-hat > 0.5: {(k > 0.5).sum()}, > 0.7: {(k > 0.7).sum()}, "
          f"> 1: {(k > 1).sum()} of {k.size}")
    done = read_checkpoint(bench.checkpoint)
    if not done:
        return
    idx = np.array(sorted(done))
    truth = np.array([done[i]["elpd_loo"] for i in idx])
    se = np.array([done[i]["mc_se"] for i in idx])
    err = res.elpd_i[idx] - truth
    low = k[idx] < 0.5
    if not low.any():  # no easy fold: PSIS where k-hat < 0.7, said so
        low = k[idx] < 0.7
    z = err[low] / np.hypot(se[low], res.mcse_elpd_i[idx][low])
    p_loo = res.lpd_i[idx] - truth
    print(f"  truth of {idx.size} folds: total {truth.sum():.2f} (MC se "
          f"{np.sqrt(np.sum(se**2)):.3f}, mean fold MC se {se.mean():.4f}); PSIS - truth on "
          f"{low.sum()} folds with k-hat < {0.5 if (k[idx] < 0.5).any() else 0.7}: RMSE "
          f"{np.sqrt(np.mean(err[low]**2)):.4f}, "
          f"rms z {np.sqrt(np.mean(z**2)):.2f}; all folds: RMSE {np.sqrt(np.mean(err**2)):.4f}, "
          f"total {err.sum():+.2f}; p_loo_i < -3 MC se: {(p_loo < -3 * se).sum()}")


def _truth_records(name: str) -> dict[int, dict]:
    """A truth's finished folds by index: a suite benchmark's checkpoint, or a fixture's CSV
    (its divergences recorded as -1, unknown)."""
    if name in BENCHMARKS:
        return read_checkpoint(BENCHMARKS[name].checkpoint)
    rows = np.loadtxt(FIXTURE_DIR / "truth" / f"{name}.csv", delimiter=",", skiprows=1,
                      ndmin=2)
    return {int(r[0]): {"elpd_loo": float(r[1]), "mc_se": float(r[2]), "divergent": -1}
            for r in rows}


def compare(bench: Benchmark, other: str) -> None:
    """The folds both truths have finished, side by side: mean and rms z of the difference
    over the combined MC se, the summed difference with its MC se, and the divergent
    transitions of each (for a truth remade with other sampler settings).  ``other``: a
    suite benchmark or a CmdStan fixture (`FIXTURE_TRUTHS`) with the same data."""
    mine, theirs = read_checkpoint(bench.checkpoint), _truth_records(other)
    common = sorted(set(mine) & set(theirs))
    if not common:
        print(f"{bench.name} and {other}: no fold finished in both")
        return
    d = np.array([mine[i]["elpd_loo"] - theirs[i]["elpd_loo"] for i in common])
    se = np.array([np.hypot(mine[i]["mc_se"], theirs[i]["mc_se"]) for i in common])
    z = d / se
    div = [(mine[i]["divergent"], theirs[i]["divergent"]) for i in common]

    def total(side):  # -1: not recorded (a fixture's truth)
        vals = [pair[side] for pair in div]
        if min(vals) < 0:
            return "unknown"
        return f"{sum(vals)} (folds with any: {sum(v > 0 for v in vals)})"

    print(f"{bench.name} - {other} on {len(common)} common folds: mean z {z.mean():+.2f}, "
          f"rms z {np.sqrt(np.mean(z**2)):.2f}, |z| > 3: {(np.abs(z) > 3).sum()}, summed "
          f"difference {d.sum():+.3f} (MC se {np.sqrt(np.sum(se**2)):.3f}); divergent "
          f"transitions {total(0)} vs {total(1)}")
    for i, di, zi, (a, b) in zip(common, d, z, div):
        print(f"  fold {i:4d}: {mine[i]['elpd_loo']:+.4f} vs {theirs[i]['elpd_loo']:+.4f}, "
              f"difference {di:+.4f} (z {zi:+.2f}); divergent {a if a >= 0 else '?'} vs "
              f"{b if b >= 0 else '?'}")


def summary(bench: Benchmark) -> None:
    """One line per benchmark from its checkpoint: size, cost and Monte Carlo error."""
    data = bench.data()
    done = read_checkpoint(bench.checkpoint)
    line = (f"{bench.name}: n {data['N']}, p {data['D']}, {bench.chains} x {bench.draws} draws "
            f"per fold (+{bench.warmup} warm-up), {len(done)}/{data['N']} folds done")
    if done:
        recs = list(done.values())
        mean = {k: np.mean([r[k] for r in recs]) for k in ("seconds", "mc_se", "chain_se")}
        line += (f"; {mean['seconds']:.1f} s per fold, mean MC se {mean['mc_se']:.4f} "
                 f"(max {max(r['mc_se'] for r in recs):.4f}; per-chain spread "
                 f"{mean['chain_se']:.4f}), min ESS {min(r['ess'] for r in recs):.0f}, "
                 f"divergences {sum(max(r['divergent'], 0) for r in recs)}")
    print(line)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", required=True, choices=sorted(BENCHMARKS))
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (one core each)")
    parser.add_argument("--limit", type=int, default=None, help="run at most this many folds")
    parser.add_argument("--compare", choices=sorted(BENCHMARKS) + list(FIXTURE_TRUTHS),
                        metavar="OTHER", help="compare the finished folds with another truth "
                        "of the same data (a suite benchmark or a CmdStan fixture)")
    parser.add_argument("--first", default="", metavar="I,J,...",
                        help="run these folds before the others (comma-separated indices)")
    parser.add_argument("--time-one", action="store_true",
                        help="time one refit (observation 0) without touching the checkpoint")
    parser.add_argument("--summary", action="store_true",
                        help="size, seconds per fold and MC error of the finished folds")
    parser.add_argument("--khat", action="store_true",
                        help="PSIS k-hat counts on a 4 x 1000 posterior fit")
    parser.add_argument("--redo-min-ess", type=float, default=None, metavar="ESS",
                        help=f"redo (next seed) the finished folds with an ESS below this "
                             f"(Stan's rule of thumb: {REDO_MIN_ESS})")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be >= 1")
    bench = BENCHMARKS[args.benchmark]
    if args.time_one:
        rec = run_fold(bench.name, 0)
        print(json.dumps(rec))
    elif args.summary:
        summary(bench)
    elif args.compare:
        compare(bench, args.compare)
    elif args.khat:
        khat_report(bench)
    elif args.redo_min_ess is not None:
        redo_poor(bench, args.redo_min_ess)
    else:
        first = [int(i) for i in args.first.split(",") if i.strip()]
        run(bench, jobs=args.jobs, limit=args.limit, first=first)


if __name__ == "__main__":
    main()
