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

:func:`run_tasks` is the loop: it keeps at most ``pool.capacity`` tasks running, enforces the
per-task ``timeout``, reports each finished task to a callback as it completes (the callers
write it to their :class:`Checkpoint` right there) and turns SIGTERM into an exception like
SIGINT so both stop the workers cleanly.

:func:`plan_workers` keeps workers x chain processes within the machine's cores.

The local worker processes live in `loo_adapt.stan.process_pool`, checkpoints in
`loo_adapt.stan.checkpoint`, `plan_workers` / `estimate_seconds` in `loo_adapt.stan.scheduling`;
every name is importable from here as before.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import signal
import threading
import time
from collections import deque
from concurrent.futures import Executor

from loo_adapt.stan.checkpoint import Checkpoint, CheckpointError, fingerprint
from loo_adapt.stan.process_pool import (
    LocalProcessPool,
    check_not_bootstrapping,
    describe_error,
    references_main,
)
from loo_adapt.stan.scheduling import available_cores, estimate_seconds, plan_workers

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
    # moved to checkpoint / process_pool / scheduling, importable from here as before
    "fingerprint",
    "estimate_seconds",
    "check_not_bootstrapping",
]

logger = logging.getLogger("loo_adapt.stan.pool")


class Interrupted(KeyboardInterrupt):
    """Raised in the main thread on SIGTERM (SIGINT raises KeyboardInterrupt as usual)."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by signal {signal.Signals(signum).name}")
        self.signum = signum


# --------------------------------------------------------------------------------------------
# pools
# --------------------------------------------------------------------------------------------
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
