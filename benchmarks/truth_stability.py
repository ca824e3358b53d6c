"""Is a brute-force truth stable under stricter NUTS settings?

For a fixed random subset of a suite benchmark's folds (chosen from ``--subset-seed`` alone,
nothing about any estimator's errors), refit each fold with a higher ``adapt_delta`` and a
longer warm-up than its truth was made with (`make_truth.run_fold`'s record, a new seed),
and compare with the stored truth row by row: the difference, its z (over the two folds' MC
errors in quadrature), their sum and the sum scaled to all n rows.  A truth whose refits
diverge may sit off the leave-one-out quantity it stands for; if the stricter remake moves
it consistently one way, estimator errors measured against it carry that shift.

``--estimates rows.npz`` (`benchmarks/error_by_fit.py --dump`) also scores an estimator's
per-row estimates on the remade folds against both truths.

Each finished fold is appended to ``benchmarks/cache/<name>-stability-<adapt_delta>.jsonl``,
so a rerun resumes.

    nice -n 10 python benchmarks/truth_stability.py --benchmark rhs_microarray --rows 20 \
        --adapt-delta 0.999 --warmup 2000
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE / "truth"))

import make_truth  # noqa: E402

#: the stricter refit of fold i is `make_truth.run_fold`'s attempt 5: seed SEED_BASE + i + 5000
STRICT_ATTEMPT = 5


def strict_fold(name: str, i: int, adapt_delta: float, warmup: int) -> dict:
    """`make_truth.run_fold`'s record of fold ``i`` refitted at ``adapt_delta`` after
    ``warmup`` warm-up iterations (a seed of its own), with those two settings."""
    rec = make_truth.run_fold(name, i, STRICT_ATTEMPT, adapt_delta=adapt_delta, warmup=warmup)
    return {**rec, "adapt_delta": adapt_delta, "warmup": warmup}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--benchmark", required=True, choices=sorted(make_truth.BENCHMARKS))
    ap.add_argument("--rows", type=int, default=20)
    ap.add_argument("--subset-seed", type=int, default=0)
    ap.add_argument("--adapt-delta", type=float, default=0.999)
    ap.add_argument("--warmup", type=int, default=2000)
    ap.add_argument("--report", action="store_true", help="only compare the folds done")
    ap.add_argument("--estimates", default=None,
                    help="an error_by_fit.py --dump file to score on the remade folds")
    args = ap.parse_args(argv)

    bench = make_truth.BENCHMARKS[args.benchmark]
    truth = make_truth.read_checkpoint(bench.checkpoint)
    n = len(truth)
    rows = sorted(np.random.default_rng(args.subset_seed).choice(n, args.rows, replace=False))
    out = HERE / "cache" / f"{args.benchmark}-stability-{args.adapt_delta}.jsonl"
    out.parent.mkdir(exist_ok=True)
    done = make_truth.read_checkpoint(out)
    if not args.report:
        for i in rows:
            if i in done:
                continue
            rec = strict_fold(args.benchmark, int(i), args.adapt_delta, args.warmup)
            with out.open("a") as fh:
                fh.write(json.dumps(rec) + "\n")
            done[i] = rec
            print(f"fold {i}: {rec['elpd_loo']:+.4f} (MC {rec['mc_se']:.4f}) against "
                  f"{truth[i]['elpd_loo']:+.4f} ({truth[i]['mc_se']:.4f}); divergent "
                  f"{rec['divergent']} against {truth[i]['divergent']}; "
                  f"{rec['seconds']:.0f} s", flush=True)
    have = [i for i in rows if i in done]
    if not have:
        print("no fold done yet")
        return
    d = np.array([done[i]["elpd_loo"] - truth[i]["elpd_loo"] for i in have])
    se = np.array([math.hypot(done[i]["mc_se"], truth[i]["mc_se"]) for i in have])
    z = d / se
    div_old = np.array([truth[i]["divergent"] for i in have])
    div_new = np.array([done[i]["divergent"] for i in have])
    total_se = math.sqrt(float(np.sum(se**2)))
    print(f"{args.benchmark}: {len(have)} of {n} folds (subset seed {args.subset_seed}) "
          f"remade at adapt_delta {args.adapt_delta}, warm-up {args.warmup}: "
          f"remake - truth summed {d.sum():+.3f} (MC {total_se:.3f}, z {d.sum() / total_se:+.2f}),"
          f" scaled to all {n} rows {d.sum() * n / len(have):+.2f}; mean z {z.mean():+.2f}, "
          f"rms z {math.sqrt(float(np.mean(z**2))):.2f}, {int((d > 0).sum())} up / "
          f"{int((d < 0).sum())} down; divergent transitions {int(div_new.sum())} against "
          f"{int(div_old.sum())}")
    moved = div_old > 0
    if moved.any() and (~moved).any():
        print(f"  folds whose truth refit diverged ({int(moved.sum())}): summed "
              f"{d[moved].sum():+.3f}, mean z {z[moved].mean():+.2f}; the others "
              f"({int((~moved).sum())}): summed {d[~moved].sum():+.3f}, mean z "
              f"{z[~moved].mean():+.2f}")
    if args.estimates:
        _score(np.load(args.estimates), have, truth, done)


def _score(est, rows, truth, remade):
    """Each seed's summed error and mean z on ``rows`` against the stored truth and the
    remake."""
    where = {int(i): k for k, i in enumerate(est["i"])}
    k = np.array([where[int(i)] for i in rows])
    for seed in sorted(int(key.split("_")[1]) for key in est.files if key.startswith("elpd_")):
        e, m = est[f"elpd_{seed}"][k], est[f"mcse_{seed}"][k]
        parts = []
        for label, ref in (("truth", truth), ("remake", remade)):
            t = np.array([ref[i]["elpd_loo"] for i in rows])
            mc = np.array([ref[i]["mc_se"] for i in rows])
            z = (e - t) / np.hypot(m, mc)
            parts.append(f"against the {label} {np.sum(e - t):+.3f} (mean z {z.mean():+.2f}, "
                         f"rms z {math.sqrt(float(np.mean(z**2))):.2f})")
        print(f"  estimates seed {seed} on these folds: " + "; ".join(parts))


if __name__ == "__main__":
    main()
