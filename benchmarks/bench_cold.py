"""Cold start: the first ``loo()`` of a fresh environment against arviz's first ``az.loo``.

Run from the repository root:  python benchmarks/bench_cold.py [--draws 1000] [--obs 1000]

Every measurement is a fresh Python process with an empty numba cache (``NUMBA_CACHE_DIR``
pointed at a new temporary directory), timed inside the process from just before the
first import of the package to the end of the first call (interpreter start-up and the
construction of the input matrix are outside the clock):

* ``loo_adapt``: ``import loo_adapt; loo_adapt.loo(log_lik)`` (4 chains, returns arviz's
  ELPDData, so it imports arviz too);
* ``arviz``: ``import arviz as az; az.loo(az.from_dict(...), pointwise=True)``;
* the two imports alone: ``import loo_adapt`` and ``import arviz``;

alternating, ``--repeat`` times, median printed.  Targets (issue 11): first loo at most
1.5x arviz's first az.loo; ``import loo_adapt`` no slower than ``import arviz``.  Also lists
the heavy modules that ``import loo_adapt`` loaded (should be none).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, sys, time
import numpy as np
n_chains, n_draws, n_obs, what = 4, int(sys.argv[1]) // 4, int(sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(0)
sd = np.exp(rng.normal(-1.0, 0.5, size=n_obs))
ll = rng.normal(-1.0, 1.0, size=(n_chains, n_draws, n_obs)) * sd - 1.0
ll[..., : n_obs // 50] -= rng.exponential(2.0, size=(n_chains, n_draws, n_obs // 50)) ** 2
t0 = time.perf_counter()
if what == "ours":
    import loo_adapt
    res = loo_adapt.loo(ll)
    value = float(res.elpd_loo)
elif what == "arviz":
    import arviz as az
    idata = az.from_dict(posterior={"a": np.zeros((n_chains, n_draws))},
                         log_likelihood={"y": ll})
    res = az.loo(idata, pointwise=True)
    value = float(res.elpd_loo) if hasattr(res, "elpd_loo") else float(res["elpd_loo"])
elif what == "import_ours":
    import loo_adapt
    value = 0.0
else:
    import arviz
    value = 0.0
elapsed = time.perf_counter() - t0
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"arviz", "numba", "matplotlib",
                                                          "xarray", "pandas"})
if "scipy.stats" in sys.modules:
    heavy.append("scipy.stats")
print(json.dumps({"seconds": elapsed, "value": value, "heavy": heavy}))
"""


def run_child(what: str, n_draws: int, n_obs: int) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory(prefix="numba-cold-") as cache:
        env["NUMBA_CACHE_DIR"] = cache
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, str(n_draws), str(n_obs), what],
            capture_output=True, text=True, env=env, check=True, cwd=tempfile.gettempdir(),
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=4000, help="total draws (4 chains)")
    parser.add_argument("--obs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    times = {k: [] for k in ("ours", "arviz", "import_ours", "import_arviz")}
    info = {}
    for _ in range(args.repeat):
        for what in times:
            r = run_child(what, args.draws, args.obs)
            times[what].append(r["seconds"])
            info[what] = r
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"fresh processes, empty numba cache, S = {args.draws} (4 chains), n = {args.obs}, "
          f"median of {args.repeat}")
    for k, v in times.items():
        print(f"  {k:<13s} {med[k]:7.2f} s   ({', '.join(f'{t:.2f}' for t in v)})")
    print(f"  first loo: loo_adapt / arviz = {med['ours'] / med['arviz']:.2f}x (target <= 1.5)")
    print(f"  import:    loo_adapt / arviz = {med['import_ours'] / med['import_arviz']:.2f}x "
          "(target <= 1)")
    print(f"  modules loaded by `import loo_adapt`: {info['import_ours']['heavy'] or 'none'}")
    print(f"  elpd_loo: loo_adapt {info['ours']['value']:.4f}, arviz {info['arviz']['value']:.4f}"
          " (arviz's default r_eff differs; close, not equal)")


if __name__ == "__main__":
    main()
