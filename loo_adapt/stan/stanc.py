"""The Stan compiler where one is installed: find ``stanc``, pretty-print, check syntax.

Nothing here is required: the package parses Stan programs in pure Python
(:mod:`loo_adapt.stan.stan_source`). When a ``stanc`` binary is found at run time it is
used to canonicalise a program (``stanc --print-canonical``) and to check that a rewritten
program is valid Stan; without one, stanli's embedded stanc3 (``stanli.stan_to_mir``)
checks the syntax. No C++ toolchain is involved: stanc is a standalone executable.

Where ``stanc`` is looked for, first found wins:

1. ``$LOO_ADAPT_STANC`` (a path to the executable; ``"none"`` turns stanc off);
2. ``stanc`` on ``$PATH``;
3. ``$CMDSTAN/bin/stanc``;
4. the CmdStan cmdstanpy is configured with (``cmdstanpy.cmdstan_path()``);
5. the ``stanc`` shipped inside an installed ``httpstan`` wheel (PyStan 3), or a stock
   ``stanc`` in stanli's ``_bin`` folder (builds without the embedded compiler).

stanli's embedded stanc3 prints no canonical form (it only lowers to MIR), so it serves as
the syntax check alone.
"""

from __future__ import annotations

import functools
import os
import pathlib
import shutil
import subprocess
import tempfile

__all__ = ["find_stanc", "canonical", "syntax_error"]

_TIMEOUT = 60.0


def _candidates():
    env = os.environ.get("LOO_ADAPT_STANC")
    if env:
        yield pathlib.Path(env)
    found = shutil.which("stanc")
    if found:
        yield pathlib.Path(found)
    if os.environ.get("CMDSTAN"):
        yield pathlib.Path(os.environ["CMDSTAN"]) / "bin" / "stanc"
    try:
        import logging

        import cmdstanpy

        logger = logging.getLogger("cmdstanpy")
        level = logger.level
        logger.setLevel(logging.CRITICAL)
        try:
            yield pathlib.Path(cmdstanpy.cmdstan_path()) / "bin" / "stanc"
        finally:
            logger.setLevel(level)
    except Exception:  # noqa: BLE001 - no cmdstanpy, or no CmdStan configured
        pass
    import importlib.util

    for package, where in (("httpstan", "stanc"), ("stanli", "_bin/stanc")):
        try:
            spec = importlib.util.find_spec(package)
        except Exception:  # noqa: BLE001 - a broken install is no stanc
            continue
        if spec is not None and spec.submodule_search_locations:
            for folder in spec.submodule_search_locations:
                yield pathlib.Path(folder) / where


@functools.cache
def _find(env_key: tuple) -> str | None:
    if os.environ.get("LOO_ADAPT_STANC", "").lower() == "none":
        return None
    for path in _candidates():
        if path.is_file() and os.access(path, os.X_OK):
            try:
                r = subprocess.run([str(path), "--version"], capture_output=True, text=True,
                                   timeout=_TIMEOUT)
            except (OSError, subprocess.SubprocessError):
                continue
            if r.returncode == 0 and "stanc3" in r.stdout:
                return str(path)
    return None


def find_stanc() -> str | None:
    """Path of a working stanc3 executable, or None (see the module docstring for where).

    Returns
    -------
    str or None

    Examples
    --------
    >>> path = find_stanc()
    >>> path is None or path.endswith("stanc")
    True
    """
    key = tuple(os.environ.get(k, "") for k in ("LOO_ADAPT_STANC", "PATH", "CMDSTAN"))
    return _find(key)


def _run(stanc: str, code: str, *flags: str) -> tuple[int, str, str]:
    """(return code, output written with ``--o``, stderr) of stanc on a program text."""
    with tempfile.TemporaryDirectory(prefix="loo_adapt_stanc_") as tmp:
        source = pathlib.Path(tmp) / "program.stan"
        target = pathlib.Path(tmp) / "out.txt"
        source.write_text(code)
        r = subprocess.run([stanc, *flags, "--o", str(target), str(source)],
                           capture_output=True, text=True, timeout=_TIMEOUT, cwd=tmp)
        out = target.read_text() if target.is_file() else r.stdout
        return r.returncode, out, (r.stderr or r.stdout).strip()


def canonical(code: str, stanc: str | None = None) -> str | None:
    """The program as ``stanc --print-canonical`` prints it; None without stanc or on error.

    Parameters
    ----------
    code : str
        Stan program text.
    stanc : str or None
        The executable; None finds one with :func:`find_stanc`.

    Returns
    -------
    str or None
    """
    stanc = stanc or find_stanc()
    if stanc is None:
        return None
    try:
        rc, out, _ = _run(stanc, code, "--print-canonical")
    except (OSError, subprocess.SubprocessError):
        return None
    return out if rc == 0 and out.strip() else None


def syntax_error(code: str, *, use_stanc: bool = True) -> str | None:
    """The compiler's error message for a program, None when it compiles (or nothing checks).

    stanc (when found and ``use_stanc``) type-checks the program; otherwise stanli's
    embedded stanc3 compiles it to MIR. With neither installed nothing is checked.

    Parameters
    ----------
    code : str
        Stan program text.
    use_stanc : bool
        Look for a stanc executable first.

    Returns
    -------
    str or None
    """
    stanc = find_stanc() if use_stanc else None
    if stanc is not None:
        try:
            rc, _, err = _run(stanc, code)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"stanc could not run: {exc}"
        return None if rc == 0 else err
    try:
        import stanli
    except ImportError:
        return None
    try:
        stanli.stan_to_mir(code)
    except RuntimeError as err:
        return str(err).strip()
    return None
