"""How many workers: workers x chain processes within the machine's cores
(`plan_workers`, `available_cores`), and the wall time the remaining tasks will take
(`estimate_seconds`).
"""

from __future__ import annotations

import math
import os

__all__ = ["available_cores", "plan_workers", "estimate_seconds"]


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
