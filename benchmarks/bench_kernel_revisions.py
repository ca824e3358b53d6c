"""The fused PSIS-LOO kernel of two git revisions, measured alternately in one run.

Run from the repository root:

    python benchmarks/bench_kernel_revisions.py [--base REV] [--rounds 3] [--reps 5]
                                                [--chains 4] [--draws 1000] [--obs 10000]

What `loo()` runs on an MCMC log-likelihood, ``core.psis_loo.loo_pointwise_checked`` (r_eff,
the per-column R-hat check, PSIS, elpd / lpd / MCSE / n_eff, and the weights or not), on
`bench_loo_call.simulate`'s array laid out as a cmdstanpy fit's draws reach it
(observation-major, a read-only strided view), one core.  The base revision (default
``HEAD~1``) is checked out into a temporary git worktree; the working tree is the other
side.  Each measurement runs in a fresh subprocess that imports the package from its tree
(not from an editable install), compiles into a numba cache of its own tree (``--cache``,
default a temporary folder per tree: a cache left by other code would measure that code,
see `fresh_cache`), warms up on `fresh_cache.past_numpy_cells` of the input, touches and
frees 4x the input's size, then times the call ``--reps`` times (CPU time of the process:
the host's other load moves wall time more).  The two sides alternate ``--rounds`` times,
so that a change in the host's speed during the run hits both; printed: each round's best
three, and the median over rounds of the ratio working tree / base.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent


def _worker(tree: str, npy: str, reps: int) -> None:
    """Time the kernel of the package in ``tree`` on the array in ``npy``; prints JSON."""
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
    sys.path.insert(0, tree)
    sys.path.insert(0, str(HERE))
    import time
    import warnings

    from fresh_cache import past_numpy_cells

    import loo_adapt
    from loo_adapt.core.psis_loo import loo_pointwise_checked

    if not Path(loo_adapt.__file__).resolve().is_relative_to(Path(tree).resolve()):
        raise RuntimeError(f"imported {loo_adapt.__file__}, not the package in {tree}")
    warnings.simplefilter("ignore")
    c_major = np.load(npy)
    # observation-major and read-only, as `io.cmdstanpy` hands a fit's log_lik over
    a = c_major.transpose(2, 0, 1).copy().transpose(1, 2, 0)
    del c_major
    a.flags.writeable = False
    small = past_numpy_cells(a)
    small = small.transpose(2, 0, 1).copy().transpose(1, 2, 0)
    small.flags.writeable = False
    for weights in (True, False):
        loo_pointwise_checked(small, 1.01, weights=weights)
    x = np.ones(4 * a.size)
    del x
    out = {}
    for weights in (True, False):
        times = []
        for _ in range(reps):
            t = time.process_time()
            res = loo_pointwise_checked(a, 1.01, weights=weights)
            times.append(time.process_time() - t)
            del res
        out["weights" if weights else "no weights"] = sorted(times)[:3]
    print(json.dumps(out))


def _run(tree: Path, npy: Path, reps: int, cache: Path, one_core: dict) -> dict:
    env = dict(os.environ, **one_core, NUMBA_CACHE_DIR=str(cache))
    proc = subprocess.run([sys.executable, __file__, "--worker", str(tree), str(npy), str(reps)],
                          env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"worker for {tree} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="HEAD~1", help="the revision to compare with")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--obs", type=int, default=10000)
    ap.add_argument("--worker", nargs=3, metavar=("TREE", "NPY", "REPS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        _worker(args.worker[0], args.worker[1], int(args.worker[2]))
        return
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(HERE))
    from bench_loo_call import ONE_CORE, simulate

    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", args.base],
                         capture_output=True, text=True, check=True).stdout.strip()
    tmp = Path(tempfile.mkdtemp(prefix="loo_adapt_revisions_"))
    base_tree = tmp / "base"
    try:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q",
                        str(base_tree), rev], check=True)
        ll, _, _ = simulate(args.chains, args.draws, args.obs)
        npy = tmp / "log_lik.npy"
        np.save(npy, ll)
        del ll
        sides = {f"base {rev}": (base_tree, tmp / "cache_base"),
                 "working tree": (ROOT, tmp / "cache_work")}
        print(f"# {args.chains} x {args.draws} x {args.obs}, observation-major, one core, "
              f"CPU seconds of loo_pointwise_checked (best 3 of {args.reps} per round)")
        ratios = {"weights": [], "no weights": []}
        for r in range(args.rounds):
            got = {name: _run(tree, npy, args.reps, cache, ONE_CORE)
                   for name, (tree, cache) in sides.items()}
            for name, res in got.items():
                print(f"round {r + 1}  {name:>18}: " + ", ".join(
                    f"{k} {' '.join(f'{t:.3f}' for t in v)}" for k, v in res.items()))
            base, work = got[f"base {rev}"], got["working tree"]
            for k in ratios:
                ratios[k].append(min(work[k]) / min(base[k]))
        for k, v in ratios.items():
            print(f"working tree / base {rev}, {k}: median {np.median(v):.3f} "
                  f"(rounds: {', '.join(f'{x:.3f}' for x in v)})")
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                        str(base_tree)], check=False, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
