"""The user's whole ``loo()`` call, end to end, against ``az.loo`` and R loo, in one run.

Run from the repository root (arviz 0.x in ``.venv``; arviz 1.x is run through
``--arviz1-python``, default ``.venv312/bin/python`` when it exists):

    python benchmarks/bench_loo_call.py [--chains 4] [--draws 1000] [--obs 10000]
                                        [--reps 2] [--keep DIR]

A realistic pointwise log-likelihood (a normal model with Student-t data, mean and log
scale drawn as AR(1) chains, so r_eff is about 0.25 and a few observations have high k-hat)
is written with the package's Stan CSV writer (``io.csv.write_stan_csv``, with CmdStan's
sampler columns, ``mu`` and ``sigma``) into a temporary folder, and its raw float64 values
beside it.  Each measurement then runs in a fresh subprocess, which first builds its input
(not measured), loads the kernels on a tiny input, and then times the call:

* ``csv``        ``loo_adapt.loo(paths)`` vs ``az.loo(az.from_cmdstan(paths, log_likelihood=
                 "log_lik"))`` (arviz 0.x; arviz 1.x has no CSV reader: ``from_cmdstanpy(
                 cmdstanpy.from_csv(folder))``, the parse inside the timed call);
* ``cmdstanpy``  ``loo_adapt.loo(fit)`` vs ``az.loo(az.from_cmdstanpy(fit, log_likelihood=
                 "log_lik"))``, ``fit = cmdstanpy.from_csv(folder)`` with its draws loaded
                 before the measurement (no CmdStan needed);
* ``idata``      ``loo_adapt.loo(idata)`` vs ``az.loo(idata)``: an InferenceData (0.x) or a
                 DataTree (1.x) from ``az.from_dict``;

``loo_adapt`` with its defaults (r_eff from the chains, pointwise output with the log
weights) and with ``pointwise=False``; ``az.loo(..., pointwise=True)`` (arviz's default r_eff).
Each on one core (``NUMBA_NUM_THREADS=OMP_NUM_THREADS=MKL_NUM_THREADS=OPENBLAS_NUM_THREADS
=1``) and on all cores.  Before timing, each worker touches and frees 4x the input's size
(on this virtual machine a page's first touch after the host reclaimed it costs ~50x a warm
one, which would charge each tool for the size of its allocations rather than its work).
Printed per row: wall time (best of ``--reps``), CPU time of the process during the call,
the first call's wall time, the ratio az / loo_adapt of each, and the peak extra memory of the
call over the input's size (S x n x 8 bytes): the high-water mark of the resident set
(``/proc/self/status`` VmHWM, reset through ``/proc/self/clear_refs`` just before the call)
minus the resident set before it.

R loo runs when ``Rscript`` is on the PATH (``loo::loo`` of the same array with
``relative_eff``; on Debian ``apt-get install r-cran-loo`` gives R with loo 2.5.1);
otherwise the script prints "skipped: no Rscript" and compares with R loo 2.5.1's published
one-core time for 4000 x 4000 (5.4 s, issue 25) by timing ``loo_adapt.loo`` on a 4 x 1000 x
4000 array in the same run, saying that it does so.

Times are wall clock on whatever else the machine runs; only ratios of one run mean
something, and on a loaded machine the CPU-time ratio of the one-core rows measures the
work better.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from fresh_cache import fresh_numba_cache, past_numpy_cells  # noqa: E402

ONE_CORE = {k: "1" for k in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                             "OPENBLAS_NUM_THREADS")}
R_LOO_4000 = 5.4  # s, R loo 2.5.1 on one core for 4000 x 4000 (issue 25)


# ------------------------------------------------------------------------------ the data
def _ar1(rng, shape, phi):
    z = np.empty(shape)
    z[:, 0] = rng.normal(size=shape[:1] + shape[2:])
    eps = rng.normal(size=shape) * np.sqrt(1 - phi**2)
    for t in range(1, shape[1]):
        z[:, t] = phi * z[:, t - 1] + eps[:, t]
    return z


def simulate(chains, draws, n, seed=0):
    """(log_lik (chains, draws, n), mu, sigma (chains, draws)) of a normal model fitted to
    Student-t data, with AR(1) posterior chains (phi 0.6)."""
    rng = np.random.default_rng(seed)
    z = _ar1(rng, (chains, draws, 2), 0.6)
    mu = 0.05 * z[..., 0]
    log_sigma = 0.03 * z[..., 1]
    y = rng.standard_t(5, size=n)
    ll = np.empty((chains, draws, n))
    ll[:] = y
    ll -= mu[..., None]
    ll *= np.exp(-log_sigma)[..., None]
    np.square(ll, out=ll)
    ll *= -0.5
    ll -= (0.5 * np.log(2 * np.pi) + log_sigma)[..., None]
    return ll, mu, np.exp(log_sigma)


def write_inputs(folder: Path, chains, draws, n, seed=0):
    from loo_adapt.draws import Draws
    from loo_adapt.io.csv import write_stan_csv

    ll, mu, sigma = simulate(chains, draws, n, seed)
    rng = np.random.default_rng(seed + 1)
    stats = {
        "lp__": -0.5 * (mu**2 + np.log(sigma) ** 2),
        "accept_stat__": rng.uniform(0.6, 1.0, (chains, draws)),
        "stepsize__": np.full((chains, draws), 0.7),
        "treedepth__": np.full((chains, draws), 2.0),
        "n_leapfrog__": np.full((chains, draws), 3.0),
        "divergent__": np.zeros((chains, draws)),
        "energy__": rng.normal(1.0, 1.0, (chains, draws)),
    }
    d = Draws({"mu": mu, "sigma": sigma, "log_lik": ll}, method="mcmc", sample_stats=stats)
    write_stan_csv(d, folder / "csv", "fit", model="normal_t", config={"warmup": 1000})
    np.save(folder / "log_lik.npy", ll)
    np.save(folder / "mu.npy", mu)
    np.save(folder / "sigma.npy", sigma)
    return ll.nbytes


# ------------------------------------------------------------------------------ a worker
def _status_kb(key):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(key)


def _reset_peak():
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def _prepare(source, tool, folder: Path):
    """(call, small_call): the measured call on the full input, and a warm-up call."""
    import warnings

    warnings.simplefilter("ignore")
    csv = sorted(str(p) for p in (folder / "csv").glob("fit_*.csv"))
    if tool.startswith("loo_adapt"):
        import loo_adapt

        pointwise = tool == "loo_adapt"
        ll_small = past_numpy_cells(np.load(folder / "log_lik.npy", mmap_mode="r"))

        def small():
            return loo_adapt.loo(ll_small, pointwise=pointwise)

        if source == "csv":
            # the reader's own kernels compile on a small CSV set (`write_inputs`)
            csv_small = sorted(str(p) for p in (folder / "small" / "csv").glob("fit_*.csv"))

            def small_csv():
                small()
                return loo_adapt.loo(csv_small, pointwise=pointwise)

            return (lambda: loo_adapt.loo(csv, pointwise=pointwise)), small_csv
        if source == "cmdstanpy":
            import cmdstanpy

            fit = cmdstanpy.from_csv(str(folder / "csv"))
            fit.draws()  # cmdstanpy reads the values on first use: the input is in memory
            # cmdstanpy's draws are (draws, chains, columns): log_lik reaches the kernels as
            # a read-only strided view (`io.cmdstanpy`), which numba compiles apart; warm
            # that up too
            c, d, m = ll_small.shape
            grid = np.zeros((d, c, m + 9))
            grid[:, :, 9:] = ll_small.transpose(1, 0, 2)
            strided = grid[:, :, 9:].transpose(1, 0, 2)
            strided.flags.writeable = False

            def small_both():
                small()
                return loo_adapt.loo(strided, pointwise=pointwise)

            return (lambda: loo_adapt.loo(fit, pointwise=pointwise)), small_both
        if source in ("memmap", "dask"):
            mm = np.load(folder / "log_lik.npy", mmap_mode="r")
            if source == "memmap":
                # warm up on a read-only memory map too (numba compiles read-only arrays
                # separately: the first call would otherwise compile inside the clock)
                np.save(folder / "log_lik_small.npy", ll_small)
                mm_small = np.load(folder / "log_lik_small.npy", mmap_mode="r")
                return ((lambda: loo_adapt.loo(mm, pointwise=pointwise)),
                        (lambda: loo_adapt.loo(mm_small, pointwise=pointwise)))
            import dask
            import dask.array as da

            dask.config.set(scheduler="threads")
            x = da.from_array(mm, chunks=(-1, -1, 500))  # whole columns, 500 per chunk
            # the chunks are below NUMPY_MAX_CELLS: a warm-up with the same chunks runs
            # numpy until the process's budget is spent, then compiles the chunk kernels
            x_small = da.from_array(ll_small, chunks=(-1, -1, 500))
            return (lambda: loo_adapt.loo(x)), (lambda: loo_adapt.loo(x_small))
        idata = _idata(folder)
        return (lambda: loo_adapt.loo(idata, pointwise=pointwise)), small
    import arviz as az

    major = int(az.__version__.split(".")[0])
    ll_small = np.load(folder / "log_lik.npy", mmap_mode="r")[:, :, :200].copy()
    small_idata = _from_dict(az, {"mu": ll_small[..., 0]}, ll_small)

    def small():
        return az.loo(small_idata, pointwise=True)

    if source == "csv" and major == 0:
        return (lambda: az.loo(az.from_cmdstan(csv, log_likelihood="log_lik"),
                               pointwise=True)), small
    if source == "csv":  # arviz 1.x reads CSV through cmdstanpy: parsing is in the call
        import cmdstanpy

        return (lambda: az.loo(az.from_cmdstanpy(cmdstanpy.from_csv(str(folder / "csv")),
                                                 log_likelihood="log_lik"),
                               pointwise=True)), small
    if source == "cmdstanpy":
        import cmdstanpy

        fit = cmdstanpy.from_csv(str(folder / "csv"))
        fit.draws()
        return (lambda: az.loo(az.from_cmdstanpy(fit, log_likelihood="log_lik"),
                               pointwise=True)), small
    idata = _idata(folder)
    return (lambda: az.loo(idata, pointwise=True)), small


def _idata(folder: Path):
    import arviz as az

    return _from_dict(az, {"mu": np.load(folder / "mu.npy"),
                           "sigma": np.load(folder / "sigma.npy")},
                      np.load(folder / "log_lik.npy"))


def _from_dict(az, posterior, log_lik):
    """InferenceData (arviz 0.x) / DataTree (arviz 1.x) of a posterior and a log_lik."""
    if int(az.__version__.split(".")[0]) == 0:
        return az.from_dict(posterior=posterior, log_likelihood={"log_lik": log_lik})
    return az.from_dict({"posterior": posterior, "log_likelihood": {"log_lik": log_lik}})


class _AnonPeak:
    """Peak anonymous resident memory (``RssAnon``), sampled every 5 ms by a thread: for a
    memory-mapped input, whose file pages count in VmHWM but are not the call's memory."""

    def __init__(self):
        import threading

        self.peak = _status_kb("RssAnon")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, _status_kb("RssAnon"))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.peak, _status_kb("RssAnon"))


def _warm_memory(nbytes: int) -> None:
    """Touch and free ``nbytes``: on a virtual machine whose host reclaims idle guest memory,
    the first touch of a page costs a VM exit (here 0.7 s for 305 MiB against 0.02 s once
    warm), which would charge each tool for its allocations' size rather than its work."""
    buf = np.ones(nbytes // 8)
    del buf


def worker(source, tool, folder: Path, reps: int, input_bytes: int) -> dict:
    import gc

    call, small = _prepare(source, tool, folder)
    small()
    _warm_memory(4 * input_bytes)
    gc.collect()
    mapped = source in ("memmap", "dask")
    rss0 = _status_kb("RssAnon" if mapped else "VmRSS")
    _reset_peak()
    sampler = _AnonPeak() if mapped else None
    times, cpus = [], []
    for rep in range(reps):
        c0, t0 = time.process_time(), time.perf_counter()
        res = call()
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        if rep == 0:
            peak = sampler.stop() if mapped else _status_kb("VmHWM")
        del res
        gc.collect()
    return {"time": min(times), "cpu": min(cpus), "first": times[0],
            "extra": (peak - rss0) * 1024 / input_bytes}


def run_worker(args_list, env_extra, python=sys.executable) -> dict | None:
    env = dict(os.environ)
    for k in ONE_CORE:
        env.pop(k, None)
    env.update(env_extra)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([python, str(Path(__file__).resolve()), "--worker", *args_list],
                          env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"  worker {args_list[:2]} failed: {proc.stderr.strip().splitlines()[-1:]}")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------ R loo
R_SCRIPT = """
args <- commandArgs(trailingOnly = TRUE)
dims <- as.integer(args[2:4])  # chains, draws, n
x <- readBin(args[1], "double", n = prod(dims))
dim(x) <- rev(dims)            # C order: (n, draws, chains) in R
ll <- aperm(x, c(2, 3, 1))     # iterations x chains x n, as loo wants
suppressMessages(library(loo))
t <- system.time({
  r <- relative_eff(exp(ll), cores = as.integer(args[5]))
  res <- loo(ll, r_eff = r, cores = as.integer(args[5]))
})[["elapsed"]]
cat(t, "\\n")
"""


def run_r(folder: Path, shape, cores: int) -> float | None:
    raw = folder / "log_lik.f64"
    if not raw.exists():
        np.load(folder / "log_lik.npy").tofile(raw)
    script = folder / "loo.R"
    script.write_text(R_SCRIPT)
    proc = subprocess.run(["Rscript", str(script), str(raw), *map(str, shape), str(cores)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"  R loo failed: {proc.stderr.strip()[-300:]}")
        return None
    return float(proc.stdout.split()[-1])


# ------------------------------------------------------------------------------ main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--obs", type=int, default=10000)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--sources", default="csv,cmdstanpy,idata")
    ap.add_argument("--memory-only", action="store_true",
                    help="only the memory-mapped / dask section")
    ap.add_argument("--keep", help="write the inputs here and keep them (default: a temp dir)")
    ap.add_argument("--arviz1-python", default=str(ROOT / ".venv312" / "bin" / "python"))
    ap.add_argument("--worker", nargs=5, metavar=("SOURCE", "TOOL", "DIR", "REPS", "BYTES"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        source, tool, folder, reps, nbytes = args.worker
        print(json.dumps(worker(source, tool, Path(folder), int(reps), int(nbytes))))
        return
    fresh_numba_cache()  # the workers compile the kernels of this tree (`fresh_cache`)

    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_loo_call_"))
    tmp.mkdir(parents=True, exist_ok=True)
    shape = (args.chains, args.draws, args.obs)
    try:
        t0 = time.perf_counter()
        if (tmp / "log_lik.npy").exists() and np.load(tmp / "log_lik.npy",
                                                      mmap_mode="r").shape == shape:
            nbytes = int(np.prod(shape)) * 8
        else:
            nbytes = write_inputs(tmp, *shape)
        if not (tmp / "small" / "csv").is_dir():  # compiles the CSV reader before the clock
            (tmp / "small").mkdir(exist_ok=True)
            write_inputs(tmp / "small", args.chains, args.draws, 50)
        print(f"# {' x '.join(map(str, shape))} log-likelihood ({nbytes / 2**20:.0f} MiB as "
              f"float64), Stan CSV written in {time.perf_counter() - t0:.0f} s; "
              f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}")
        import arviz

        pythons = {f"az {arviz.__version__}": sys.executable}
        a1 = Path(args.arviz1_python)
        if a1.exists():
            ver = subprocess.run([str(a1), "-c", "import arviz; print(arviz.__version__)"],
                                 capture_output=True, text=True).stdout.strip()
            pythons[f"az {ver}"] = str(a1)
        else:
            print(f"# arviz 1.x: skipped (no {a1})")
        cores = {"1 core": ONE_CORE, "all cores": {}}
        rows = []
        if args.memory_only:
            _memory_section(tmp, nbytes, args)
            return
        for source in args.sources.split(","):
            for label, env in cores.items():
                ours = run_worker([source, "loo_adapt", str(tmp), str(args.reps), str(nbytes)],
                                  env)
                ours_nw = run_worker([source, "loo_adapt_nopw", str(tmp), str(args.reps),
                                      str(nbytes)], env)
                refs = {name: run_worker([source, "arviz", str(tmp), "1", str(nbytes)], env,
                                         python=py)
                        for name, py in pythons.items()}
                rows.append((source, label, ours, ours_nw, refs))
                _print_row(rows[-1])
        print()
        _memory_section(tmp, nbytes, args)
        print()
        if shutil.which("Rscript"):
            for label, n_cores in (("1 core", 1), ("all cores", os.cpu_count() or 1)):
                t_r = run_r(tmp, shape, n_cores)
                # R reads the array in memory: against an in-memory source where the run
                # has one (a CSV row includes parsing the files), and say which
                mine = [r for r in rows if r[1] == label]
                row = next((r for r in mine if r[0] != "csv"), mine[0] if mine else None)
                ours = row[2] if row else None
                if t_r is not None and ours:
                    print(f"R loo ({label}, array): {t_r:.2f} s; R / loo_adapt({row[0]}) "
                          f"{t_r / ours['time']:.1f}x")
        else:
            print("R loo: skipped: no Rscript")
            _published_r(args)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


def _fmt(m):
    return "failed" if m is None else (f"{m['time']:6.2f} s (cpu {m['cpu']:6.2f} s, first "
                                        f"call {m.get('first', m['time']):6.2f} s), "
                                        f"peak extra {m['extra']:.2f}x input")


def _print_row(row):
    source, label, ours, ours_nw, refs = row
    print(f"\n== {source}, {label}")
    print(f"  loo_adapt.loo             {_fmt(ours)}")
    print(f"  loo_adapt.loo(pw=False)   {_fmt(ours_nw)}")
    for name, ref in refs.items():
        ratio = ""
        if ref and ours:
            ratio = (f"; az / loo_adapt: wall {ref['time'] / ours['time']:.1f}x, "
                     f"cpu {ref['cpu'] / ours['cpu']:.1f}x, first call "
                     f"{ref.get('first', ref['time']) / ours.get('first', ours['time']):.1f}x")
        print(f"  {name + '.loo':<25} {_fmt(ref)}{ratio}")


def _memory_section(tmp: Path, nbytes: int, args) -> None:
    """loo() of a memory-mapped .npy and of a dask array over it (chunks of 500 whole
    columns, threaded scheduler, all cores): peak extra anonymous memory over the input."""
    print("== memory-mapped input (np.load(mmap_mode='r')) and dask over it; peak extra "
          "anonymous memory (RssAnon, sampled) over the input; all cores")
    for source, tool, label in (("memmap", "loo_adapt", "loo(memmap)"),
                                ("memmap", "loo_adapt_nopw", "loo(memmap, pointwise=False)"),
                                ("dask", "loo_adapt", "loo(dask array), 500-column chunks")):
        m = run_worker([source, tool, str(tmp), "1", str(nbytes)], {})
        print(f"  {label:<36} {_fmt(m)}")


def _published_r(args):
    """loo_adapt.loo on 4 x 1000 x 4000 (one core) against R loo 2.5.1's published 5.4 s."""
    tmp = Path(tempfile.mkdtemp(prefix="bench_loo_r_"))
    try:
        ll, mu, sigma = simulate(4, 1000, 4000, seed=1)
        np.save(tmp / "log_lik.npy", ll)
        np.save(tmp / "mu.npy", mu)
        np.save(tmp / "sigma.npy", sigma)
        m = run_worker(["idata", "loo_adapt", str(tmp), str(args.reps), str(ll.nbytes)],
                       ONE_CORE)
        if m:
            print(f"  no R here: R loo 2.5.1's published one-core time for 4000 x 4000 is "
                  f"{R_LOO_4000} s (issue 25, not measured in this run); loo_adapt.loo on a "
                  f"4 x 1000 x 4000 InferenceData, one core, this run: {m['time']:.2f} s "
                  f"(cpu {m['cpu']:.2f} s): {R_LOO_4000 / m['time']:.1f}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
