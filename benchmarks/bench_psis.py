"""PSIS kernel speed and memory against arviz and the memory floor, in one run.

Run from the repository root:  python benchmarks/bench_psis.py [--quick] [--repeat 3]

For each size (default S x n = 4000 x 10000 and 16000 x 10000; ``--quick``: 1000 x 2000
and 4000 x 2000) it times, best of ``--repeat`` with the candidates interleaved:

* ``ours 1 thr``  ``loo_adapt.core.psis.psislw`` with ``numba.set_num_threads(1)``;
* ``ours N thr``  the same with all numba threads;
* ``ours loo``    ``loo_pointwise(..., weights=False)`` (elpd_i, k_i, MCSE_i, p_loo_i
                  without the S x n weights), one thread;
* ``arviz``       ``arviz.psislw`` (0.x API); under arviz 1.x the arviz-stats kernel
                  ``arviz_stats.base.array_stats.psislw``; each gets its preferred layout;
* ``floor``       a numba sum over the matrix (one thread): reading it once;

and prints each as a ratio (arviz time / ours, ours / floor).  Peak extra memory of ours is
measured in a fresh subprocess from the kernel's high-water mark of the resident set
(``/proc/self/status`` VmHWM after resetting it), relative to the input's size; likewise
for the numpy cold-start path (``core._psis_numpy``) on the largest problem it is used for
(``NUMPY_MAX_CELLS`` cells).  Results are
compared (max |khat - khat_arviz|).  Times are wall clock on whatever else the machine runs,
so only the ratios of one run mean something; the CPU time of the calling thread is printed
too, and for the single-threaded runs (ours with one numba thread, arviz, the floor) it
measures the work better than the wall clock on a loaded machine.  For the run on all
threads the CPU time of the whole process gives the parallel efficiency (CPU time on one
thread / CPU time of all threads) and the ratio the threads would reach on idle cores
(arviz's CPU time x threads / ours' CPU time of all threads): on a machine whose cores are
busy with other work the wall clock of a multi-threaded run says little.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fresh_cache import fresh_numba_cache  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def make_log_ratios(n_draws: int, n_obs: int, seed: int = 0) -> np.ndarray:
    """-log_lik of a normal model under posterior draws of (mu, sigma); 2% outlying
    observations give heavy-tailed importance ratios (khat up to > 1).  C order (S, n)."""
    rng = np.random.default_rng(seed)
    mu = rng.normal(0.0, 0.1, size=(n_draws, 1))
    sigma = np.exp(rng.normal(0.0, 0.07, size=(n_draws, 1)))
    y = rng.normal(size=n_obs)
    y[rng.random(n_obs) < 0.02] *= 5.0
    lr = 0.5 * ((y - mu) / sigma) ** 2
    lr += np.log(sigma) + 0.5 * np.log(2 * np.pi)
    return lr


def _arviz_kernel():
    """(name, function(log_ratios_transposed, r_eff) -> (lw, khat)) of the installed arviz."""
    import arviz as az

    if int(az.__version__.split(".")[0]) < 1:
        return f"arviz {az.__version__} psislw", lambda lr_t, r: az.psislw(lr_t, reff=r)
    try:
        from arviz_stats.base import array_stats
    except ImportError:
        return None, None
    return "arviz-stats psislw", lambda lr_t, r: array_stats.psislw(lr_t, r_eff=r, axis=-1)


def _floor_kernel():
    from numba import njit

    @njit(cache=True)
    def matrix_sum(a):
        acc = 0.0
        for s in range(a.shape[0]):
            for j in range(a.shape[1]):
                acc += a[s, j]
        return acc

    return matrix_sum


def _memory_child(n_draws: int, n_obs: int) -> None:
    """In a fresh process: peak extra resident memory of psislw and of loo without weights."""
    import numba

    from loo_adapt.core.psis import psislw
    from loo_adapt.core.psis_loo import loo_pointwise

    lr = make_log_ratios(n_draws, n_obs)
    _warm_up(lr)  # compile / load outside the measurement
    ll = -lr
    out = {"input_mb": lr.nbytes / 2**20, "threads": numba.get_num_threads()}
    for name, fn in (("psislw", lambda: psislw(lr, r_eff=1.0)),
                     ("loo_no_weights", lambda: loo_pointwise(ll, r_eff=1.0, weights=False))):
        out[name] = _peak_extra_mb(fn)
    # the numpy cold-start path, on the largest problem it takes (NUMPY_MAX_CELLS)
    from loo_adapt.core import psis
    from loo_adapt.core._compiled import NUMPY_MAX_CELLS

    cols = max(1, min(n_obs, NUMPY_MAX_CELLS // n_draws))
    lr_np, ll_np = np.ascontiguousarray(lr[:, :cols]), np.ascontiguousarray(ll[:, :cols])
    out["numpy_cols"], out["numpy_input_mb"] = cols, lr_np.nbytes / 2**20
    psis._engine = lambda n_draws, n_obs: "numpy"
    for name, fn in (("numpy_psislw", lambda: psislw(lr_np, r_eff=1.0)),
                     ("numpy_loo_no_weights",
                      lambda: loo_pointwise(ll_np, r_eff=1.0, weights=False))):
        out[name] = _peak_extra_mb(fn)
    print(json.dumps(out))


def _peak_extra_mb(fn) -> float:
    """Peak resident memory of ``fn()`` above the resident set before it, in MiB."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    base = _vm("VmRSS")
    res = fn()
    peak = (_vm("VmHWM") - base) / 2**20
    del res
    return peak


def _warm_up(lr) -> None:
    """Compile (or load) the numba kernels the timed calls use: a small call alone could
    take the numpy cold-start path and leave the compilation to the first timed call."""
    from loo_adapt.core import psis, psis_loo

    engine = psis._engine
    psis._engine = lambda n_draws, n_obs: "numba"
    try:
        for cols in (slice(0, 64), slice(0, 8)):  # parallel and serial kernels
            psis.psislw(lr[:, cols])
            psis_loo.loo_pointwise(-lr[:, cols], r_eff=1.0, weights=False)
    finally:
        psis._engine = engine


def _vm(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(key)


def _best(times):
    return min(times)


def bench(n_draws: int, n_obs: int, repeat: int) -> None:
    import numba

    from loo_adapt.core.psis import psislw
    from loo_adapt.core.psis_loo import loo_pointwise

    lr = make_log_ratios(n_draws, n_obs)
    ll = -lr
    lr_t = np.ascontiguousarray(lr.T)  # arviz wants draws last
    r_eff = 1.0
    n_threads = numba.config.NUMBA_NUM_THREADS
    floor = _floor_kernel()
    az_name, az_psislw = _arviz_kernel()
    small = np.ascontiguousarray(lr[:, :64])
    _warm_up(lr)  # compile or load from cache before timing
    floor(small)
    if az_psislw is not None:
        az_psislw(np.ascontiguousarray(small.T), r_eff)
    runs = {"ours 1 thr": [], f"ours {n_threads} thr": [], "ours loo 1 thr": [], "floor": []}
    if az_psislw is not None:
        runs[az_name] = []
    cpu = {k: [] for k in runs}
    proc_cpu = {k: [] for k in runs}
    khat = khat_ref = None

    def timed(name, fn):
        c0, p0, t0 = time.thread_time(), time.process_time(), time.perf_counter()
        out = fn()
        runs[name].append(time.perf_counter() - t0)
        cpu[name].append(time.thread_time() - c0)
        proc_cpu[name].append(time.process_time() - p0)
        return out

    for _ in range(repeat):
        numba.set_num_threads(1)
        khat = timed("ours 1 thr", lambda: psislw(lr, r_eff=r_eff))[1]
        timed("ours loo 1 thr", lambda: loo_pointwise(ll, r_eff=r_eff, weights=False))
        timed("floor", lambda: floor(lr))
        numba.set_num_threads(n_threads)
        timed(f"ours {n_threads} thr", lambda: psislw(lr, r_eff=r_eff))
        if az_psislw is not None:
            khat_ref = timed(az_name, lambda: az_psislw(lr_t, r_eff))[1]
    best = {k: _best(v) for k, v in runs.items()}
    best_cpu = {k: _best(v) for k, v in cpu.items()}
    best_proc = {k: _best(v) for k, v in proc_cpu.items()}
    print(f"\nS = {n_draws}, n = {n_obs} (input {lr.nbytes / 2**20:.0f} MiB), r_eff = 1, "
          f"best of {repeat}; wall clock, and CPU time of the calling thread")
    for k, v in best.items():
        cpu_txt = "     (threads)" if k == f"ours {n_threads} thr" else f"{best_cpu[k]:8.3f} s cpu"
        print(f"  {k:<22s} {v:8.3f} s wall  {cpu_txt}   "
              f"(wall {', '.join(f'{t:.3f}' for t in runs[k])})")
    if az_psislw is not None:
        c_az = best_cpu[az_name]
        print(f"  CPU-time ratio {az_name} / ours 1 thr     : "
              f"{c_az / best_cpu['ours 1 thr']:.1f}x  (single-threaded work, robust to load)")
        print(f"  CPU-time ratio {az_name} / ours loo 1 thr : "
              f"{c_az / best_cpu['ours loo 1 thr']:.1f}x")
        par = f"ours {n_threads} thr"
        print(f"  ours {n_threads} thr used {best_proc[par]:.3f} s CPU in all threads "
              f"(1 thr: {best_cpu['ours 1 thr']:.3f} s): parallel efficiency "
              f"{best_cpu['ours 1 thr'] / best_proc[par]:.2f}; CPU-time ratio {az_name} / "
              f"ours {n_threads} thr if each thread had an idle core: "
              f"{c_az * n_threads / best_proc[par]:.1f}x")
        t_az = best[az_name]
        print(f"  ratio {az_name} / ours 1 thr      : {t_az / best['ours 1 thr']:.1f}x")
        print(f"  ratio {az_name} / ours {n_threads} thr      : "
              f"{t_az / best[f'ours {n_threads} thr']:.1f}x")
        print(f"  ratio {az_name} / ours loo 1 thr  : {t_az / best['ours loo 1 thr']:.1f}x")
        dk = np.asarray(khat_ref) - khat
        note = "" if az_name.startswith("arviz 0") else (
            " (arviz-stats fits the tail differently from R loo: not expected to agree)")
        print(f"  max |khat - khat_arviz| = {np.max(np.abs(dk)):.2e}{note}")
    print(f"  ratio ours 1 thr / floor: {best['ours 1 thr'] / best['floor']:.0f}x;  "
          f"ours {n_threads} thr / floor: {best[f'ours {n_threads} thr'] / best['floor']:.0f}x")
    child = subprocess.run(
        [sys.executable, __file__, "--memory-child", str(n_draws), str(n_obs)],
        capture_output=True, text=True, check=True,
    )
    mem = json.loads(child.stdout.strip().splitlines()[-1])
    print(f"  peak extra memory (fresh process, {mem['threads']} thr): psislw "
          f"{mem['psislw'] / mem['input_mb']:.2f}x input (the weights are 1.00x), "
          f"loo without weights {mem['loo_no_weights'] / mem['input_mb']:.3f}x input")
    print(f"  peak extra memory of the numpy cold-start path ({n_draws} x {mem['numpy_cols']}): "
          f"psislw {mem['numpy_psislw'] / mem['numpy_input_mb']:.2f}x input (the weights are "
          f"1.00x), loo without weights "
          f"{mem['numpy_loo_no_weights'] / mem['numpy_input_mb']:.2f}x input")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1000 x 2000 and 4000 x 2000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--memory-child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        _memory_child(*args.memory_child)
        return
    fresh_numba_cache()  # time the kernels of this tree (`fresh_cache`)
    import numba

    sizes = [(1000, 2000), (4000, 2000)] if args.quick else [(4000, 10000), (16000, 10000)]
    print(f"numba {numba.__version__}, {numba.config.NUMBA_NUM_THREADS} threads, "
          f"{os.cpu_count()} cpus")
    for n_draws, n_obs in sizes:
        bench(n_draws, n_obs, args.repeat)


if __name__ == "__main__":
    main()
