"""Where refits, K-fold folds and MixIS chains run: executors, scheduling, checkpoints.

One small interface serves three kinds of executor:

- ``executor=None``: a local pool of worker processes owned by this module
  (:class:`LocalProcessPool`).  Each worker is a persistent process fed through its own pipe,
  so a task that hangs past its time limit is stopped by terminating *that* worker (and a new
  one takes its place), a worker that dies loses only its own task, and on SIGINT / SIGTERM
  every worker is terminated and reaped before the exception propagates (no orphans).
- any :class:`concurrent.futures.Executor` (threads or processes): tasks are submitted to it;
  a timed-out task is reported and abandoned (an Executor offers no way to stop a running
  task, and the executor is the caller's, so it is never shut down here).
- a ``dask.distributed.Client``: tasks go through ``client.submit(..., pure=False)``; dask is
  never imported by this module (the client is recognised by its type's module).

Workers are started with ``forkserver`` (``spawn`` where unavailable), never plain ``fork``: the
parent may already run sampler or numba threads, and a forked copy of a thread pool can
deadlock.  A job that does not reference ``__main__`` is started with the main module hidden
from the worker's preparation data, so a script without ``if __name__ == "__main__":`` works;
a job that does (a ``refit_fn`` defined in the script) needs the guard, and a worker that
dies while importing the script gives an error that says so.

:func:`run_tasks` is the loop: it keeps at most ``pool.capacity`` tasks running, enforces the
per-task ``timeout``, reports each finished task to a callback as it completes (the callers
write it to their :class:`Checkpoint` right there) and turns SIGTERM into an exception like
SIGINT so both stop the workers cleanly.

:func:`plan_workers` keeps workers x chain processes within the machine's cores.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import multiprocessing
import multiprocessing.connection
import os
import pathlib
import pickle
import signal
import sys
import tempfile
import threading
import time
import zipfile
from collections import deque
from concurrent.futures import Executor

import numpy as np

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "Interrupted",
    "LocalProcessPool",
    "ExecutorPool",
    "SerialPool",
    "available_cores",
    "make_pool",
    "plan_workers",
    "run_tasks",
]

logger = logging.getLogger("loo_adapt.stan.pool")


class Interrupted(KeyboardInterrupt):
    """Raised in the main thread on SIGTERM (SIGINT raises KeyboardInterrupt as usual)."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by signal {signal.Signals(signum).name}")
        self.signum = signum


# --------------------------------------------------------------------------------------------
# scheduling
# --------------------------------------------------------------------------------------------
def available_cores() -> int:
    """Cores this process may run on (the affinity mask where the OS has one).

    Returns
    -------
    int

    Examples
    --------
    >>> available_cores() >= 1
    True
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def plan_workers(n_tasks: int, chains_per_task: int, n_jobs: int | None = None,
                 cores: int | None = None) -> tuple[int, int]:
    """Workers and parallel chains per task so that workers x chains <= cores.

    Parameters
    ----------
    n_tasks : number of tasks to run (no more workers than tasks).
    chains_per_task : chains each task samples (1 for a task that is one process).
    n_jobs : workers asked for; None chooses ``cores // chains_per_task`` (at least 1).
    cores : cores available (default :func:`available_cores`).

    Returns
    -------
    (workers, parallel_chains) : parallel_chains is how many chains each task may run at
        once, ``max(1, min(chains_per_task, cores // workers))``.

    Examples
    --------
    >>> plan_workers(20, 4, cores=2)
    (1, 2)
    >>> plan_workers(20, 1, cores=8)
    (8, 1)
    >>> plan_workers(20, 2, cores=8)
    (4, 2)
    """
    cores = available_cores() if cores is None else max(1, int(cores))
    chains_per_task = max(1, int(chains_per_task))
    workers = max(1, cores // chains_per_task) if n_jobs is None else max(1, int(n_jobs))
    workers = max(1, min(workers, max(1, n_tasks)))
    parallel = max(1, min(chains_per_task, cores // workers))
    return workers, parallel


def estimate_seconds(first: float, remaining: int, workers: int) -> float:
    """Wall time of ``remaining`` tasks of ``first`` seconds each on ``workers`` workers.

    Tasks run in waves of ``workers``: ``first * ceil(remaining / workers)``.

    Parameters
    ----------
    first : seconds of one task (measured on a task that did not compile anything).
    remaining : tasks still to run.
    workers : tasks that run at once.

    Returns
    -------
    float

    Examples
    --------
    >>> estimate_seconds(10.0, 5, 2)
    30.0
    """
    if remaining <= 0:
        return 0.0
    return float(first) * math.ceil(remaining / max(1, workers))


# --------------------------------------------------------------------------------------------
# checkpoint: one small file per finished task, written to a temporary name then renamed
# --------------------------------------------------------------------------------------------
def fingerprint(*parts) -> str:
    """A short hash of JSON-able parts (the settings a checkpoint must agree with).

    Parameters
    ----------
    *parts : JSON-serialisable values (numpy arrays are hashed by their bytes).

    Returns
    -------
    str : 16 hex digits.

    Examples
    --------
    >>> fingerprint("refit", {"chains": 4}) == fingerprint("refit", {"chains": 4})
    True
    """
    h = hashlib.sha256()

    def default(obj):
        if isinstance(obj, np.ndarray):
            return hashlib.sha256(np.ascontiguousarray(obj).tobytes()).hexdigest() + str(
                obj.shape)
        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, pathlib.PurePath):
            return str(obj)
        return repr(obj)

    for part in parts:
        h.update(json.dumps(part, sort_keys=True, default=default).encode())
    return h.hexdigest()[:16]


class CheckpointError(ValueError):
    """A checkpoint folder that cannot be used for this run (another run's, no manifest,
    a file that is not a saved row): the message names the folder or file and the fix."""


class Checkpoint:
    """A directory holding one ``<key>.npz`` per finished task and a ``manifest.json``.

    Each row is written to a temporary file in the same directory, flushed to disk and renamed
    into place, so an interruption (or a full disk) leaves either the whole row or none.  The
    manifest records what run the rows belong to; opening the directory for a different run
    (other program, data or settings) is refused, so a resume never mixes runs.

    Parameters
    ----------
    path : directory (created if missing).
    kind : what the rows are ("refit", "kfold", "mixis-chains").
    fingerprint : hash of the settings the rows depend on (see :func:`fingerprint`).

    Examples
    --------
    >>> import tempfile
    >>> ck = Checkpoint(tempfile.mkdtemp(), "refit", "abc")
    >>> ck.save("obs_3", {"log_lik": np.zeros((1, 4))}, {"seconds": 1.5})
    >>> sorted(ck.load())
    ['obs_3']
    """

    def __init__(self, path, kind: str, fingerprint: str):
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"checkpoint must be a directory path, got {type(path).__name__}")
        self.path = pathlib.Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise CheckpointError(
                f"checkpoint {str(self.path)!r} is a file; give a directory (it is created)"
            )
        self.path.mkdir(parents=True, exist_ok=True)
        self.kind = kind
        self.fingerprint = fingerprint
        manifest = self.path / "manifest.json"
        wanted = {"kind": kind, "fingerprint": fingerprint, "format": 1}
        if manifest.is_file():
            try:
                found = json.loads(manifest.read_text())
            except ValueError:
                found = None
            if found != wanted:
                raise CheckpointError(
                    f"checkpoint {str(self.path)!r} holds another run ({found}); its rows would "
                    "not belong to this one. Use a new directory, or delete this one to start "
                    "over"
                )
        else:
            rows = [f.name for f in self.path.glob("*.npz") if not f.name.startswith(".tmp-")]
            if rows:
                raise CheckpointError(
                    f"checkpoint {str(self.path)!r} holds {len(rows)} saved row(s) (e.g. "
                    f"{rows[0]}) but no manifest.json, so nothing says which run they belong "
                    "to (they may be another program's, data set's or function's); they are not "
                    "reused. Use a new directory, or delete this one to start over"
                )
            self._write_bytes(manifest, json.dumps(wanted).encode())

    def _write_bytes(self, target: pathlib.Path, payload: bytes) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=".tmp-", suffix=target.suffix)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(payload)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def save(self, key: str, arrays: dict, meta: dict) -> None:
        """Write one finished row atomically.

        Parameters
        ----------
        key : row name (letters, digits, ``_`` and ``-``).
        arrays : name -> numpy array.
        meta : JSON-able metadata (seconds, seed, status, diagnostics).

        Returns
        -------
        None

        Examples
        --------
        >>> import tempfile
        >>> Checkpoint(tempfile.mkdtemp(), "refit", "x").save("obs_0", {}, {"ok": True})
        """
        import io

        buf = io.BytesIO()
        np.savez(buf, __meta__=np.array(json.dumps(meta)), **arrays)
        self._write_bytes(self.path / f"{key}.npz", buf.getvalue())

    def load(self) -> dict[str, tuple[dict, dict]]:
        """The saved rows: key -> (arrays, meta).

        Returns
        -------
        dict

        Examples
        --------
        >>> import tempfile
        >>> Checkpoint(tempfile.mkdtemp(), "refit", "x").load()
        {}
        """
        out = {}
        for f in sorted(self.path.glob("*.npz")):
            if f.name.startswith(".tmp-"):
                continue
            try:
                with np.load(f, allow_pickle=False) as z:
                    arrays = {k: z[k] for k in z.files if k != "__meta__"}
                    meta = json.loads(str(z["__meta__"]))
                if not isinstance(meta, dict):
                    raise CheckpointError("its metadata is not a JSON object")
            except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as err:
                # numpy's own text suggests allow_pickle=True: never for a checkpoint file
                why = ("not a numpy .npz archive of plain arrays" if "pickle" in str(err)
                       else str(err))
                raise CheckpointError(
                    f"checkpoint file {str(f)!r} is not a row this package wrote ({why}); "
                    f"delete it (its row is then redone) or use a new checkpoint directory"
                ) from None
            out[f.stem] = (arrays, meta)
        return out


# --------------------------------------------------------------------------------------------
# pools
# --------------------------------------------------------------------------------------------
def describe_error(err: BaseException) -> str:
    """One line naming an exception: ``Type: message (notes)``.

    Parameters
    ----------
    err : the exception.

    Returns
    -------
    str

    Examples
    --------
    >>> describe_error(ValueError("bad"))
    'ValueError: bad'
    """
    text = f"{type(err).__name__}: {err}".strip()
    notes = getattr(err, "__notes__", None)
    if notes:
        text += " " + " ".join(notes)
    return " ".join(text.split())


def _limit_blas_threads(threads: int) -> None:
    """Cap BLAS/OpenMP threads in this worker, so workers x BLAS threads <= cores."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # without threadpoolctl the BLAS keeps its default
        return
    threadpool_limits(limits=threads)


def _worker_main(conn, blas_threads: int = 1) -> None:  # pragma: no cover - in the worker
    # the parent handles Ctrl-C and terminates the workers; they must not print tracebacks
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _limit_blas_threads(blas_threads)
    parent = multiprocessing.parent_process()
    if parent is not None:
        def watch():
            parent.join()
            os._exit(1)  # the parent is gone: nobody will read the result

        threading.Thread(target=watch, daemon=True).start()
    conn.send(("__ready__", "ready", os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        key, fn, args = msg
        conn.send((key, "started", None))  # the time limit counts from here, not the import
        try:
            out = (key, "ok", fn(*args))
        except BaseException as err:  # report everything; the worker keeps serving
            out = (key, "error", describe_error(err))
        try:
            conn.send(out)
        except Exception as err:  # an unpicklable result
            conn.send((key, "error", f"the result could not be sent back: {describe_error(err)}"))


def _mp_context():
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" in methods:
        ctx = multiprocessing.get_context("forkserver")
        # workers fork from a server that has already imported numpy, scipy and the refit code
        ctx.set_forkserver_preload(["numpy", "scipy.stats", "loo_adapt.stan.refit"])
        return ctx
    return multiprocessing.get_context("spawn")


def references_main(obj) -> bool:
    """True if pickling ``obj`` refers to ``__main__`` (a function or class of the script).

    Parameters
    ----------
    obj : any picklable object.

    Returns
    -------
    bool

    Examples
    --------
    >>> references_main(len)
    False
    """
    try:
        return b"__main__" in pickle.dumps(obj)
    except Exception:
        return True


@contextlib.contextmanager
def _main_hidden(hide: bool):
    """Start processes without telling them to import the main script (when it is not needed).

    ``multiprocessing`` re-imports the script in every spawned / forkserver child so that
    functions defined there can be unpickled; a script without a main guard then re-runs
    itself in each worker.  Jobs that do not reference ``__main__`` do not need that import.
    """
    main = sys.modules.get("__main__")
    if not hide or main is None:
        yield
        return
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if k in main.__dict__}
    try:
        main.__dict__.pop("__file__", None)
        main.__spec__ = None
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        main.__dict__.update(saved)


def check_not_bootstrapping(verb: str) -> None:
    """Refuse to start work while this process is a worker importing the user's script.

    A script without a main guard re-runs its top-level code in every worker process that
    imports it; starting refits there would recurse.

    Parameters
    ----------
    verb : the function called (named in the error).

    Returns
    -------
    None

    Examples
    --------
    >>> check_not_bootstrapping("refit_loo")
    """
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise RuntimeError(
            f"{verb} was called while a worker process was importing your script: put the "
            "call under `if __name__ == \"__main__\":` (worker processes import the script "
            "to find functions defined in it)"
        )


_STARTUP_HINT = (
    "a worker process failed while starting (exit code {code}). Worker processes import the "
    "script that defines your refit function; if the script calls refit_loo / kfold / fit at "
    "top level, put that call under `if __name__ == \"__main__\":` (or define the function in "
    "a module)"
)


class _Slot:
    def __init__(self, process, conn):
        self.process = process
        self.conn = conn
        self.key = None
        self.ready = False


class LocalProcessPool:
    """Persistent worker processes, one pipe each; a hung or dead worker is replaced.

    Parameters
    ----------
    workers : number of worker processes.
    needs_main : whether the tasks reference the main script (see module docstring).
    blas_threads : BLAS threads per worker (default cores // workers; applied with
        threadpoolctl when it is installed), so numpy-heavy tasks do not oversubscribe.

    Examples
    --------
    >>> pool = LocalProcessPool(1, needs_main=False)  # doctest: +SKIP
    >>> pool.submit("a", abs, (-2,)); pool.poll(10)  # doctest: +SKIP
    [('a', 'ok', 2)]
    """

    def __init__(self, workers: int, *, needs_main: bool = True,
                 blas_threads: int | None = None):
        self.capacity = max(1, int(workers))
        self._blas = blas_threads or max(1, available_cores() // self.capacity)
        self._ctx = _mp_context()
        self._needs_main = needs_main
        self._slots: list[_Slot] = []
        self._started: dict = {}
        self._closed = False
        for _ in range(self.capacity):
            self._slots.append(self._start())

    def _start(self) -> _Slot:
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(target=_worker_main, args=(child_conn, self._blas),
                                 daemon=True, name="loo-adapt-worker")
        with _main_hidden(not self._needs_main):
            proc.start()
        child_conn.close()
        return _Slot(proc, parent_conn)

    def pids(self) -> list[int]:
        """Process ids of the current workers."""
        return [s.process.pid for s in self._slots]

    def submit(self, key, fn, args) -> None:
        """Send ``fn(*args)`` to an idle worker; its result comes back from `poll`."""
        slot = next((s for s in self._slots if s.key is None), None)
        if slot is None:
            raise RuntimeError("no idle worker")  # run_tasks never over-submits
        slot.conn.send((key, fn, args))
        slot.key = key

    def started_at(self, key) -> float | None:
        """When the task's worker began it (time.monotonic), None while it waits."""
        return self._started.get(key)

    def _replace(self, slot: _Slot) -> None:
        self._stop(slot)
        self._slots[self._slots.index(slot)] = self._start()

    @staticmethod
    def _stop(slot: _Slot) -> None:
        if slot.process.is_alive():
            slot.process.terminate()
            slot.process.join(2.0)
            if slot.process.is_alive():
                slot.process.kill()
        slot.process.join()
        slot.conn.close()

    def poll(self, timeout: float) -> list[tuple]:
        """Wait up to ``timeout`` s; finished tasks as (key, "ok" | "error" | "died", value)."""
        busy = [s for s in self._slots if s.key is not None or not s.ready]
        if not busy:
            time.sleep(min(timeout, 0.05))
            return []
        waitables = [s.conn for s in busy] + [s.process.sentinel for s in busy]
        multiprocessing.connection.wait(waitables, timeout)
        out = []
        for slot in busy:
            died = False
            try:
                while slot.conn.poll():
                    key, kind, value = slot.conn.recv()
                    if key == "__ready__":
                        slot.ready = True
                        continue
                    if kind == "started":
                        self._started[key] = time.monotonic()
                        continue
                    self._started.pop(key, None)
                    out.append((key, kind, value))
                    slot.key = None
            except (EOFError, OSError):
                died = True
            if died or not slot.process.is_alive():
                slot.process.join(1.0)
                code = slot.process.exitcode
                if not slot.ready:
                    self.close(kill=True)
                    raise RuntimeError(_STARTUP_HINT.format(code=code))
                if slot.key is not None:
                    out.append((slot.key, "died",
                                f"the worker process died (exit code {code})"))
                self._replace(slot)
        return out

    def kill(self, key) -> bool:
        """Terminate the worker running ``key`` and start a new one; True if it was found."""
        self._started.pop(key, None)
        for slot in self._slots:
            if slot.key == key:
                self._replace(slot)
                return True
        return False

    def close(self, kill: bool = False) -> None:
        """Stop every worker (``kill``: terminate at once, else let idle ones exit)."""
        if self._closed:
            return
        self._closed = True
        for slot in self._slots:
            if not kill and slot.key is None and slot.process.is_alive():
                with contextlib.suppress(OSError, ValueError):
                    slot.conn.send(None)
                slot.process.join(2.0)
            self._stop(slot)


def is_dask_client(obj) -> bool:
    """True for a ``dask.distributed.Client`` (recognised without importing dask).

    Parameters
    ----------
    obj : anything.

    Returns
    -------
    bool

    Examples
    --------
    >>> is_dask_client(None)
    False
    """
    return type(obj).__module__.split(".")[0] == "distributed" and hasattr(obj, "submit")


class ExecutorPool:
    """Tasks on a caller's ``concurrent.futures.Executor`` or ``dask.distributed.Client``.

    The executor is not shut down here (it is the caller's); a task past its timeout is
    cancelled if it has not started and otherwise abandoned.

    Parameters
    ----------
    executor : the executor or client.
    capacity : tasks kept in flight (default: its workers' threads / ``max_workers``).

    Examples
    --------
    >>> from concurrent.futures import ThreadPoolExecutor
    >>> with ThreadPoolExecutor(2) as ex:
    ...     pool = ExecutorPool(ex)
    ...     pool.submit("a", abs, (-3,))
    ...     pool.poll(5.0)
    [('a', 'ok', 3)]
    """

    def __init__(self, executor, capacity: int | None = None):
        self._ex = executor
        self._dask = is_dask_client(executor)
        if not self._dask and not isinstance(executor, Executor):
            raise TypeError(
                "executor must be a concurrent.futures.Executor or a dask.distributed.Client, "
                f"got {type(executor).__name__}"
            )
        if capacity is None:
            if self._dask:
                capacity = sum(executor.nthreads().values())
            else:
                capacity = getattr(executor, "_max_workers", None) or available_cores()
        self.capacity = max(1, int(capacity))
        self._futures: dict = {}
        self._started: dict = {}

    def submit(self, key, fn, args) -> None:
        """Submit ``fn(*args)`` to the executor (dask: ``pure=False``, so never cached)."""
        if self._dask:
            fut = self._ex.submit(fn, *args, pure=False)
            self._started[key] = time.monotonic()  # dask does not say when a task starts
        else:
            fut = self._ex.submit(fn, *args)
        self._futures[key] = fut

    def started_at(self, key) -> float | None:
        """When the task was first seen running (dask: when it was submitted)."""
        fut = self._futures.get(key)
        if key not in self._started and fut is not None and fut.running():
            self._started[key] = time.monotonic()
        return self._started.get(key)

    def poll(self, timeout: float) -> list[tuple]:
        """Wait up to ``timeout`` s; finished tasks as (key, "ok" | "error" | "died", value)."""
        deadline = time.monotonic() + timeout
        while True:
            done = [k for k, f in self._futures.items() if f.done()]
            if done or time.monotonic() >= deadline:
                break
            time.sleep(0.02)
        out = []
        for key in done:
            fut = self._futures.pop(key)
            self._started.pop(key, None)
            try:
                out.append((key, "ok", fut.result()))
            except BaseException as err:  # noqa: B036 - a task's failure is data here
                if isinstance(err, KeyboardInterrupt):
                    raise
                died = type(err).__name__ in ("BrokenProcessPool", "KilledWorker")
                out.append((key, "died" if died else "error", describe_error(err)))
        return out

    def kill(self, key) -> bool:
        """Cancel ``key`` if it has not started; a running task cannot be stopped (False)."""
        self._started.pop(key, None)
        fut = self._futures.pop(key, None)
        if fut is not None:
            fut.cancel()
        return False

    def close(self, kill: bool = False) -> None:
        """Cancel this pool's pending futures (the executor itself stays the caller's)."""
        for fut in self._futures.values():
            fut.cancel()
        self._futures.clear()


class SerialPool:
    """Runs each task in this process when polled (no pickling; no hard timeout).

    Examples
    --------
    >>> pool = SerialPool()
    >>> pool.submit("a", abs, (-1,)); pool.poll(0.0)
    [('a', 'ok', 1)]
    """

    capacity = 1

    def __init__(self):
        self._queue: deque = deque()

    def submit(self, key, fn, args) -> None:
        """Queue ``fn(*args)``; it runs in this process at the next `poll`."""
        self._queue.append((key, fn, args))

    def started_at(self, key) -> float | None:
        return None  # runs inside poll(); nothing can interrupt it

    def poll(self, timeout: float) -> list[tuple]:
        """Run the next queued task now and return its outcome."""
        if not self._queue:
            return []
        key, fn, args = self._queue.popleft()
        try:
            return [(key, "ok", fn(*args))]
        except Exception as err:
            return [(key, "error", describe_error(err))]

    def kill(self, key) -> bool:
        """A task running in this process cannot be stopped."""
        return False

    def close(self, kill: bool = False) -> None:
        """Drop queued tasks."""
        self._queue.clear()


def make_pool(executor, workers: int, job, *, timeout: float | None = None,
              hard: bool | None = None):
    """The pool for ``executor`` (None: local processes, or this process when serial).

    Parameters
    ----------
    executor : None, a ``concurrent.futures.Executor`` or a ``dask.distributed.Client``.
    workers : local worker processes (executor None); 1 without a timeout runs in-process.
    job : the task function (checked for picklability for process pools).
    timeout : per-task time limit; with a local pool it needs worker processes to be enforced.
    hard : run even a single worker in a separate process, so that it can be stopped
        (default: when ``timeout`` is given).

    Returns
    -------
    (pool, owned) : owned is True when the pool was created here (and is closed after use).

    Examples
    --------
    >>> pool, owned = make_pool(None, 1, abs)
    >>> type(pool).__name__, owned
    ('SerialPool', True)
    """
    hard = timeout is not None if hard is None else hard
    if executor is not None:
        return ExecutorPool(executor), False
    if workers <= 1 and not hard:
        return SerialPool(), True
    try:
        pickle.dumps(job)
    except Exception as err:  # lambdas, closures, open handles
        import warnings

        warnings.warn(
            f"the job cannot be sent to worker processes ({err}); running it serially in this "
            "process" + (" (the time limit cannot be enforced)" if hard else "")
            + ". Define the function at module level to run it in parallel.",
            UserWarning,
            stacklevel=3,
        )
        return SerialPool(), True
    return LocalProcessPool(workers, needs_main=references_main(job)), True


# --------------------------------------------------------------------------------------------
# the loop
# --------------------------------------------------------------------------------------------
@contextlib.contextmanager
def _sigterm_raises():
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    if callable(signal.getsignal(signal.SIGTERM)):
        # the application handles SIGTERM already (the CLI answers it like Ctrl-C, exit 143)
        yield
        return

    def handler(signum, frame):
        raise Interrupted(signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_tasks(tasks, pool, *, on_result, timeout: float | None = None, stop=None,
              deadline: float | None = None, deadline_reason: str = "the time budget ran out",
              poll_interval: float = 0.25):
    """Run ``tasks`` on ``pool``, reporting each as it finishes.

    Parameters
    ----------
    tasks : iterable of (key, fn, args).
    pool : from :func:`make_pool`.
    on_result : ``on_result(key, kind, value)`` with kind "ok" (value: the result), "error",
        "died" or "timeout" (value: the reason). It may return further (key, fn, args) tasks
        to run (a retry).
    timeout : hard limit per task in seconds (the worker is killed where the pool can).
    stop : callable; when it returns True no further task is started (running ones finish).
    deadline : ``time.monotonic()`` after which nothing starts and running tasks are stopped
        (reported as "timeout" with ``deadline_reason``): a hard time budget.
    deadline_reason : the reason reported for tasks stopped at the deadline.
    poll_interval : seconds between checks of the timeouts and ``stop``.

    Returns
    -------
    list : keys of the tasks never started (because of ``stop``).

    The pool is not closed here: the caller closes it (``pool.close(kill=True)`` in a
    ``finally``), so an exception or a signal stops every worker.

    Examples
    --------
    >>> seen = []
    >>> run_tasks([("a", abs, (-1,))], SerialPool(), on_result=lambda *r: seen.append(r))
    []
    >>> seen
    [('a', 'ok', 1)]
    """
    queue = deque(tasks)
    running: dict = {}
    left_out: list = []
    with _sigterm_raises():
        while queue or running:
            past = deadline is not None and time.monotonic() >= deadline
            if queue and (past or (stop is not None and stop())):
                left_out.extend(key for key, _, _ in queue)
                queue.clear()
                continue
            if past:
                for key in list(running):
                    killed = pool.kill(key)
                    del running[key]
                    how = "its worker was stopped" if killed else "abandoned"
                    on_result(key, "timeout", f"stopped: {deadline_reason} ({how})")
                continue
            while queue and len(running) < pool.capacity:
                key, fn, args = queue.popleft()
                pool.submit(key, fn, args)
                running[key] = time.monotonic()
            wait_s = poll_interval
            starts = [t for t in map(pool.started_at, running) if t is not None]
            if timeout is not None and starts:
                left = min(starts) + timeout - time.monotonic()
                wait_s = max(0.0, min(wait_s, left))
            if deadline is not None:
                wait_s = max(0.0, min(wait_s, deadline - time.monotonic()))
            for key, kind, value in pool.poll(wait_s):
                if running.pop(key, None) is None:
                    continue  # a task already reported as timed out
                queue.extend(on_result(key, kind, value) or ())
            if timeout is not None:
                now = time.monotonic()
                for key in list(running):
                    t0 = pool.started_at(key)
                    if t0 is not None and now - t0 > timeout:
                        killed = pool.kill(key)
                        del running[key]
                        how = ("its worker was stopped" if killed else
                               "the executor cannot stop a running task; it was abandoned")
                        queue.extend(on_result(
                            key, "timeout", f"timed out after {timeout:g} s ({how})") or ())
    return left_out
