"""A report folder written atomically: its lock (one writer at a time, `report_lock`), the
files staged in a hidden folder and renamed into place together (`_Staging`), and the
manifest naming the run that wrote them (`read_manifest`).
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import pathlib
import shutil
import uuid

import numpy as np

__all__ = ["MANIFEST", "LOCK", "ReportBusyError", "report_lock", "read_manifest"]


#: The file naming the run that wrote a report folder and the files it wrote.
MANIFEST = "loo-adapt-manifest.json"
#: Lock file (holding the writer's pid) while a run writes into a report folder.
LOCK = ".loo-adapt.lock"
_STAGING = ".loo-adapt-staging-"
_HELD: set[str] = set()


class ReportBusyError(RuntimeError):
    """Another live process is writing into the same report folder."""


def _pid_alive(pid: int) -> bool:
    if os.name == "nt":  # os.kill(pid, 0) would send Ctrl-C there: assume alive
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _acquire(lock: pathlib.Path) -> None:
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                pid = int(lock.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                pid = None
            if pid is not None and pid != os.getpid() and not _pid_alive(pid):
                lock.unlink(missing_ok=True)  # left by a run that died
                continue
            who = f"pid {pid}" if pid is not None else "unknown pid"
            raise ReportBusyError(
                f"{lock.parent} is being written by another loo-adapt run ({who}); wait for "
                f"it to finish or choose another output folder (delete {lock.name} there "
                "only if no run is active)") from None
        with os.fdopen(fd, "w") as fh:
            fh.write(f"{os.getpid()}\n")
        return
    raise ReportBusyError(f"cannot lock {lock}: it keeps reappearing; choose another folder")


@contextlib.contextmanager
def report_lock(out_dir):
    """Hold the lock of a report folder: a second writer is refused with `ReportBusyError`.

    Re-entrant within one process (the CLI holds it for a whole run and `save_report`
    takes it again); a lock left by a process that no longer exists is taken over.

    Parameters
    ----------
    out_dir : the report folder (created if needed).

    Returns
    -------
    A context manager.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d, report_lock(d):
    ...     pass
    """
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    lock = out / LOCK
    key = str(lock.resolve())
    if key in _HELD:
        yield
        return
    _acquire(lock)
    _HELD.add(key)
    try:
        yield
    finally:
        _HELD.discard(key)
        lock.unlink(missing_ok=True)


def read_manifest(out_dir) -> dict | None:
    """The manifest of the run that last completed a report in ``out_dir`` (None if none).

    Parameters
    ----------
    out_dir : a report folder.

    Returns
    -------
    dict or None
        run_id, time (UTC), name, versions and files (name, bytes, sha256).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     read_manifest(d) is None
    True
    """
    path = pathlib.Path(out_dir) / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("files"), list) else None


class _Staging:
    """Files written into a hidden folder inside the target, moved in place by `commit`.

    Until `commit` the previous report is untouched; on any error (a full disk included)
    the staged files are removed and the error propagates.  `commit` renames each file
    (atomic on one file system), writes the manifest, then removes the files the previous
    manifest listed that this run did not write - never any other file.
    """

    def __init__(self, out: pathlib.Path, name: str):
        self.out, self.name = out, name
        self.run_id = uuid.uuid4().hex
        self.dir = out / f"{_STAGING}{self.run_id}"
        self.names: list[str] = []

    def __enter__(self):
        for old in self.out.glob(f"{_STAGING}*"):  # left by a run that was killed
            shutil.rmtree(old, ignore_errors=True)
        self.dir.mkdir()
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.dir, ignore_errors=True)
        return False

    def path(self, filename: str) -> pathlib.Path:
        self.names.append(filename)
        return self.dir / filename

    def write_text(self, filename: str, text: str) -> None:
        with open(self.path(filename), "w", encoding="utf-8") as fh:
            fh.write(text)

    def commit(self) -> list[pathlib.Path]:
        previous = read_manifest(self.out)
        files = []
        for filename in self.names:
            data = (self.dir / filename).read_bytes()
            files.append({"name": filename, "bytes": len(data),
                          "sha256": hashlib.sha256(data).hexdigest()})
        manifest = {"run_id": self.run_id,
                    "time": datetime.datetime.now(datetime.UTC).isoformat(),
                    "name": self.name, "writer": "loo_adapt.evaluation.report.save_report",
                    "versions": _versions(), "files": files}
        tmp = self.dir / MANIFEST
        tmp.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        for filename in self.names:
            os.replace(self.dir / filename, self.out / filename)
        os.replace(tmp, self.out / MANIFEST)
        for item in (previous or {}).get("files", []):
            old = item.get("name") if isinstance(item, dict) else None
            if (isinstance(old, str) and old not in self.names and old == pathlib.Path(old).name
                    and old not in (MANIFEST, LOCK)):
                with contextlib.suppress(OSError):
                    (self.out / old).unlink()
        return [self.out / filename for filename in self.names]


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    from loo_adapt import __version__

    out = {"loo_adapt": __version__, "numpy": np.__version__}
    for dist in ("arviz", "scipy", "matplotlib"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            pass
    return out
