"""What the command line reads: option types, files (Stan data JSON, y/X tables, Stan CSV
checked as text before any parser), the report folder, model names and variable names."""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import pathlib
import warnings

import numpy as np

from loo_adapt.models import registry as _registry

#: command-line model family -> bundled Stan program (from `loo_adapt.models.registry`)
FAMILIES = {e.family: e.program for e in _registry.REGISTRY.values()}

#: Stan variable roles each family reads from the draws, with their default names.
NAME_ROLES = {e.family: dict(e.roles) for e in _registry.REGISTRY.values()}


class InputError(Exception):
    """Bad input from the user: reported on stderr as one line, exit code 1."""


# --------------------------------------------------------------------------- option types
def _number_type(kind, test, what):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not test(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value
    parse.__name__ = what
    return parse


_unit_interval = _number_type(float, lambda v: 0 < v <= 1, "a number in (0, 1]")
_positive_float = _number_type(float, lambda v: 0 < v < float("inf"), "a positive number")
_positive_int = _number_type(int, lambda v: v > 0, "a positive integer")
#: draws per chain: R-hat, ESS and r_eff need at least 4 (a fit of fewer is refused before
#: it runs, not after)
_draws_per_chain = _number_type(int, lambda v: v >= 4, "an integer of at least 4 (draws per "
                                "chain: R-hat and the ESS need 4)")
_nonnegative_int = _number_type(int, lambda v: v >= 0, "a non-negative integer")



# --------------------------------------------------------------------------- helpers
def _family(name: str) -> str:
    try:
        return _registry.resolve(name).family
    except ValueError:
        raise InputError(f"unknown model {name!r}; choose logistic, logistic-rhs or relu") from None


def _parse_names(text: str | None, family: str) -> dict:
    """``coef=beta,intercept=alpha`` -> {role: stan_name}; ``intercept=none`` drops it."""
    roles = dict(NAME_ROLES[family])
    if not text:
        return roles
    for item in text.split(","):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise InputError(f"--names expects role=stan_name pairs separated by commas, "
                             f"got {item!r}")
        if key not in roles:
            raise InputError(f"--names: unknown role {key!r} for model {family}; roles are "
                             f"{sorted(roles)}")
        roles[key] = None if value.lower() in ("none", "-") else value
    return roles


def _parse_key_values(items, what: str) -> dict:
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"{what} expects KEY=VALUE, got {item!r}")
        value = value.strip()
        try:
            out[key.strip()] = int(value)
        except ValueError:
            try:
                out[key.strip()] = float(value)
            except ValueError:
                raise InputError(f"{what} {key.strip()}: {value!r} is not a number") from None
    return out


def _need_file(path, what: str) -> pathlib.Path:
    path = pathlib.Path(path)
    if path.is_dir():
        raise InputError(f"{what} {str(path)!r} is a folder; give the file itself")
    if not path.is_file():
        raise InputError(f"{what} {str(path)!r} does not exist")
    return path


def _load_json(path) -> dict:
    path = _need_file(path, "data file")
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))  # a BOM is harmless here
    except UnicodeDecodeError as err:
        raise InputError(f"{path} is not UTF-8 text (byte {err.start}); save the Stan data "
                         "JSON as UTF-8") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{path} is not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path} must hold a JSON object (Stan data), got "
                         f"{type(data).__name__}")
    return data


def _read_xy_csv(path) -> tuple[np.ndarray, np.ndarray]:
    """A CSV (optionally .gz) with y in the first column and X in the rest; a header row
    (any non-numeric first line) is skipped."""
    path = _need_file(path, "data file")
    _check_text_file(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8-sig") as fh:
            first = fh.readline()
        try:
            [float(v) for v in first.strip().split(",")]
            skip = 0
        except ValueError:
            skip = 1
        with opener(path, "rt", encoding="utf-8-sig") as fh, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numpy's "input contained no data": checked below
            table = np.loadtxt(fh, delimiter=",", skiprows=skip, dtype=np.float64, ndmin=2)
    except (UnicodeDecodeError, EOFError, gzip.BadGzipFile) as err:
        raise InputError(f"{path}: cannot read it as {'gzipped ' * (opener is gzip.open)}"
                         f"UTF-8 text ({err}); save it as a plain UTF-8 CSV") from None
    except ValueError as err:
        raise InputError(f"{path}: cannot read a numeric table ({err})") from None
    if table.shape[0] == 0:
        raise InputError(f"{path} holds no rows of numbers (a header alone?)")
    if table.shape[1] < 2:
        raise InputError(f"{path} needs the outcome y and at least one predictor column")
    return table[:, 1:], table[:, 0]


_GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"


def _check_text_file(path) -> None:
    """One-line errors for a file that cannot be a text CSV: checked before any parser.

    A file named .gz that is not gzip-compressed (or is truncated), binary content, a UTF-8
    byte-order mark (CmdStan never writes one) and data lines that are not UTF-8 (comment
    lines, starting with '#', may hold any bytes).
    """
    path = pathlib.Path(path)
    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
        if path.suffix == ".gz" and head != _GZIP_MAGIC:
            raise InputError(f"{path} is named .gz but is not gzip-compressed; rename it "
                             "without .gz (or compress it with gzip)")
        opener = gzip.open if head == _GZIP_MAGIC else open
        with opener(path, "rb") as fh:
            chunk = fh.read(1 << 16)
    except (EOFError, gzip.BadGzipFile, OSError) as err:
        raise InputError(f"{path}: cannot read it ({err}); is it a complete file?") from None
    if chunk.startswith(_BOM):
        raise InputError(f"{path} starts with a UTF-8 byte-order mark (BOM); save it without "
                         "one (e.g. in a text editor: encoding 'UTF-8', not 'UTF-8 with BOM')")
    if b"\x00" in chunk:
        raise InputError(f"{path} is binary, not a text CSV; pass the CSV files CmdStan "
                         "wrote (one per chain)")
    lines = chunk.split(b"\n")
    if len(chunk) == 1 << 16:
        lines = lines[:-1]  # the last line may be cut in the middle of a character
    for number, line in enumerate(lines, start=1):
        if line.lstrip().startswith(b"#"):
            continue
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"{path} line {number} is not UTF-8 text (byte {err.start}); "
                             "pass the CSV files CmdStan wrote, or save it as UTF-8") from None


def _check_csv_inputs(paths) -> None:
    """Every Stan CSV named on the command line exists and is a text CSV."""
    from loo_adapt.io.csv import expand_paths

    for path in expand_paths(list(paths)):
        _check_text_file(path)


def _prepare_out(path, stack: contextlib.ExitStack | None = None) -> pathlib.Path:
    """The report folder, created (or checked writable) before any work is done.

    With ``stack``, a folder created here is removed again if the command fails while it
    is still empty (a failed run leaves no empty folder behind)."""
    if not str(path).strip():  # Path("") is the current folder: never what was meant
        raise InputError("--out is empty; give a folder for the report")
    out = pathlib.Path(path)
    if stack is not None and not out.exists():
        stack.push(lambda *exc: _remove_if_empty(out) if exc[0] is not None else None)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {str(out)!r} is a file; give a folder for the report")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".loo-adapt-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise InputError(f"--out {str(out)!r}: cannot write there ({err.strerror}); choose a "
                         "writable folder") from None
    return out


def _remove_if_empty(folder: pathlib.Path) -> None:
    with contextlib.suppress(OSError):
        folder.rmdir()  # only succeeds when empty

