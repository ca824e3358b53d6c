"""The ``loo-adapt`` command-line tool.

    loo-adapt evaluate CSV... --out DIR                       # PSIS-LOO with k-hat
    loo-adapt evaluate CSV... --program FILE.stan --data DATA.json --out DIR  # + MixIS, refits
    loo-adapt evaluate CSV... --data data.json --model logistic|logistic-rhs|relu --out DIR
    loo-adapt fit --model logistic-rhs --data FILE.csv|FILE.json --out DIR [--mixis]
    loo-adapt demo [--out DIR] [--quick]
    loo-adapt vifa --data data.json --model logistic|relu --out DIR [--K 5]

Exit codes (for scripts):

- 0: done, every observation has a reliable estimate (``demo``: done);
- 1: bad input (missing file, malformed data, unknown variable, draws / data / model that
  do not belong together: "the model and the data do not match: ...") or an output that
  cannot be written (``--out`` not writable, disk full, folder in use by another run),
  one line on stderr naming the file or option and the fix;
- 2: usage error (unknown option or command, bad choice, an option value of the wrong
  type or range), from argparse;
- 3: ``evaluate`` only: results written, but some observations are still unreliable or
  unverified (their estimator's check failed); the summary names the failed check per
  observation and the output ends with the next step (e.g. ``--program FILE.stan``);
- 4: the computation failed for a reason other than the input (a refit or backend error,
  or out of memory), one line on stderr;
- 130: interrupted (SIGINT, Ctrl-C); 143: terminated (SIGTERM).  Finished refits are kept
  in the checkpoint folder named on stderr, and ``--resume DIR`` continues from them (a
  rerun without ``--resume`` that finds them stops with exit 1, unless ``--fresh`` says to
  discard them); the report folder keeps its previous report (reports are written
  atomically).

Every error is one line on stderr; ``LOO_ADAPT_DEBUG=1`` shows the traceback instead.

The package: `parser` (options), `inputs` (files and option values), `matching` (draws,
data and model belong together), `evaluate`, `fit` (``fit`` and ``demo``), `output`
(what is printed, exit codes); this module runs a command and turns errors into one line.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import pathlib
import signal
import sys

# the names of the single-module cli, kept importable from here
from .evaluate import CHECKPOINT, SCHEDULER_TIMEOUT, _build_model, cmd_evaluate  # noqa: F401
from .fit import DEMO_FULL, DEMO_QUICK, DEMO_SEED, cmd_demo, cmd_fit  # noqa: F401
from .inputs import FAMILIES, NAME_ROLES, InputError, _family, _parse_names  # noqa: F401
from .matching import MISMATCH, MismatchError
from .output import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_UNRELIABLE,
    _print_warnings,  # noqa: F401
    _Stages,  # noqa: F401
    cli_message,
)
from .parser import build_parser

__all__ = ["main", "build_parser", "InputError", "EXIT_OK", "EXIT_BAD_INPUT",
           "EXIT_UNRELIABLE", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_TERMINATED"]


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that the same clean-up runs (exit code 143)."""


_SIGTERM = {"received": False, "pid": None}


def _on_sigterm(signum, frame):
    """SIGTERM is answered as Ctrl-C is: through the SIGINT handler in force (a native
    sampler's own watcher stops it cleanly; a handler raising inside a native call would be
    lost), and remembered so that the exit code says "terminated"."""
    if os.getpid() != _SIGTERM["pid"]:  # a forked worker: SIGTERM ends it, as by default
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    _SIGTERM["received"] = True
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
    else:
        raise Terminated()


@contextlib.contextmanager
def _signals():
    """SIGTERM stops a command like Ctrl-C (refits stop their workers and keep what is
    finished), with exit code 143 (main thread only)."""
    _SIGTERM.update(received=False, pid=os.getpid())
    try:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _quiet_backends(verbose: bool):
    """cmdstanpy's per-chain INFO lines and matplotlib's font fallbacks only with --verbose.

    A level alone does not hold: cmdstanpy's logger, set up on first use (inside the
    command), resets its own level to DEBUG. A filter on the logger stays."""
    logger = logging.getLogger("cmdstanpy")
    level = logger.level
    logger.setLevel(logging.INFO if verbose else logging.WARNING)
    # matplotlib's "findfont: ... not found. Falling back to DejaVu Sans" (a machine
    # without the fonts mathtext names), logged on every report, only with --verbose
    fonts = logging.getLogger("matplotlib.font_manager")
    font_level = fonts.level
    if not verbose:
        logger.addFilter(_warnings_only)
        fonts.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.removeFilter(_warnings_only)
        logger.setLevel(level)
        fonts.setLevel(font_level)


def _warnings_only(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING


#: the files of `loo_adapt.stan` that run refits (a traceback through them is the refits')
_REFIT_FILES = ("refit.py", "heldout.py", "refit_result.py", "pool.py", "checkpoint.py",
                "process_pool.py", "scheduling.py")


def _from_refit(err: BaseException) -> bool:
    """True if the error was raised inside the refit machinery (not an input problem)."""
    tb = err.__traceback__
    while tb is not None:
        path = pathlib.Path(tb.tb_frame.f_code.co_filename)
        if path.parent.name == "stan" and path.name in _REFIT_FILES:
            return True
        tb = tb.tb_next
    return False


def _inside(path, folder) -> bool:
    try:
        return pathlib.Path(os.path.abspath(path)).is_relative_to(os.path.abspath(folder))
    except (TypeError, ValueError):
        return False


def _os_error_message(err: OSError, out=None) -> str:
    """One line for an OSError; ``--out`` is named only for files inside it (``out``)."""
    where = f" {err.filename}" if err.filename else ""
    in_out = out is None or not err.filename or _inside(err.filename, out)
    fix = "choose another --out" if in_out else "that folder is not --out: make it writable"
    if err.errno == errno.ENOSPC:
        kept = " (a previous report there is unchanged)" if in_out else ""
        return (f"no space left on the device writing{where or ' the output'}; free space or "
                f"{fix}{kept}")
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"cannot write{where} ({err.strerror}); " + (
            "choose a writable --out" if in_out else fix)
    return f"{err.strerror or err}{':' + where if where else ''}"


def _interrupted_message(args, terminated: bool) -> str:
    what = "terminated" if terminated else "interrupted"
    checkpoint = getattr(args, "checkpoint", None)
    if checkpoint is not None and pathlib.Path(checkpoint).is_dir():
        return (f"{what}; finished refits are saved in {checkpoint}: rerun the same command "
                f"with --resume {checkpoint} to continue")
    return f"{what}; no report was written (a previous report in --out is unchanged)"


def main(argv=None) -> int:
    """Run the tool; returns the exit code (the console script exits with it).

    Parameters
    ----------
    argv : the arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit code: see the module docstring.

    Examples
    --------
    >>> main(["--version"])  # doctest: +ELLIPSIS
    loo-adapt ...
    0
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version (0) and usage errors (2)
        return int(exc.code or 0)
    prefix = f"loo-adapt {args.command}: error:"
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(_signals())
            stack.enter_context(_quiet_backends(args.verbose))
            if args.quiet:
                devnull = stack.enter_context(open(os.devnull, "w"))
                stack.enter_context(contextlib.redirect_stdout(devnull))
            return args.func(args)
    except KeyboardInterrupt as err:
        terminated = isinstance(err, Terminated) or _SIGTERM["received"]
        print(f"loo-adapt {args.command}: {_interrupted_message(args, terminated)}",
              file=sys.stderr)
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    except Exception as err:
        if os.environ.get("LOO_ADAPT_DEBUG"):
            raise
        code, message = _classify(err, getattr(args, "out", None))
        print(f"{prefix} {message}", file=sys.stderr)
        return code


def _is_program_mismatch(err: Exception) -> bool:
    """The library's program <-> fit identity check refused the pair
    (`loo_adapt.stan.identity.ProgramMismatchError`, a ValueError; matched by name where
    the installed package predates it)."""
    if isinstance(err, MismatchError):
        return True
    try:
        from loo_adapt.stan.identity import ProgramMismatchError
    except ImportError:
        return any(cls.__name__ == "ProgramMismatchError" for cls in type(err).__mro__)
    return isinstance(err, ProgramMismatchError)


def _classify(err: Exception, out=None) -> tuple[int, str]:
    """(exit code, one-line message) for an error that ended a command."""
    from loo_adapt.evaluation.report import ReportBusyError

    text = cli_message(" ".join(str(err.args[0] if isinstance(err, KeyError) and err.args
                                    else err).split()))
    if _is_program_mismatch(err):
        return EXIT_BAD_INPUT, text if text.startswith(MISMATCH) else f"{MISMATCH}: {text}"
    if isinstance(err, MemoryError):
        return EXIT_FAILED, ("out of memory computing LOO; for a large log_lik use the Dask "
                             "path, loo_adapt.loo(dask_array), which works in chunks of "
                             "observations")
    from loo_adapt.stan.pool import CheckpointError

    if isinstance(err, CheckpointError):  # the folder given, not the refits, is the problem
        return EXIT_BAD_INPUT, text
    if _from_refit(err):
        return EXIT_FAILED, (f"the refits failed ({type(err).__name__}: {text}); the inputs "
                             "were read fine")
    if isinstance(err, (InputError, ReportBusyError, FileNotFoundError, NotADirectoryError,
                        IsADirectoryError, ValueError, TypeError, KeyError, IndexError,
                        RuntimeError, NotImplementedError)):
        return EXIT_BAD_INPUT, text
    if isinstance(err, OSError):
        return EXIT_BAD_INPUT, _os_error_message(err, out)
    return EXIT_FAILED, (f"{type(err).__name__}: {text} (rerun with LOO_ADAPT_DEBUG=1 for "
                         "the traceback and report it)")

