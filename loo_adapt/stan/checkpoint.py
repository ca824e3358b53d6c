"""Checkpoints of refits, K-fold folds and MixIS chains: one small file per finished task,
written to a temporary name then renamed, in a folder whose manifest names the run
(`Checkpoint`; `fingerprint` hashes the settings the rows depend on).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pathlib
import tempfile
import zipfile

import numpy as np

__all__ = ["Checkpoint", "CheckpointError", "fingerprint"]


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
