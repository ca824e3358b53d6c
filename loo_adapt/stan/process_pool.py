"""The local pool of worker processes (`LocalProcessPool`, the pool of ``executor=None`` in
`loo_adapt.stan.pool`): persistent processes fed through their own pipes; a hung or dead
worker is replaced.  A task's failure comes back as one line (`describe_error`).

Workers are started with ``forkserver`` (``spawn`` where unavailable), never plain ``fork``: the
parent may already run sampler or numba threads, and a forked copy of a thread pool can
deadlock.  A job that does not reference ``__main__`` is started with the main module hidden
from the worker's preparation data, so a script without ``if __name__ == "__main__":`` works;
a job that does (a ``refit_fn`` defined in the script) needs the guard, and a worker that
dies while importing the script gives an error that says so.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import threading
import time

from loo_adapt.stan.scheduling import available_cores

__all__ = ["LocalProcessPool", "describe_error", "references_main", "check_not_bootstrapping"]


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
        try:
            slot.conn.send((key, fn, args))
        except (EOFError, OSError):
            # the worker is gone (it failed starting, or died since its last task): `poll`
            # finds it dead and reports the task as died, or raises the start-up hint
            pass
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
