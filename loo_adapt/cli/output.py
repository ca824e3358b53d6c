"""What the command line prints: the stage bar, results, warnings, and the exit code a
result earns."""

from __future__ import annotations

import inspect
import re
import sys
import threading
import warnings
from collections import Counter

import numpy as np

# exit code 2 (usage error) is argparse's own
EXIT_OK, EXIT_BAD_INPUT, EXIT_UNRELIABLE, EXIT_FAILED = 0, 1, 3, 4
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143


class _Stages:
    """A tqdm bar over the named stages of a command (silent with --quiet).

    ``next(desc, ticking=True)`` (or ``ticking=True`` for the first stage) starts a stage
    that may take long (a fit, refits): its elapsed time is redrawn every second until the
    next stage, so a long call is seen to be running."""

    TICK = 1.0

    def __init__(self, stages, quiet: bool, *, ticking: bool = False):
        self.quiet = quiet
        self.bar = None
        self.labels = [stages[0]]  # every label shown, in order
        self._stop = None
        if not quiet:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=len(stages), desc=stages[0], unit="step", file=sys.stderr,
                            bar_format="{desc:<34s}|{bar:20}| {n_fmt}/{total_fmt} "
                                       "[{elapsed}]", leave=False)
            if ticking:
                self._start_ticking()

    def _stop_ticking(self):
        if self._stop is not None:
            self._stop.set()
            self._stop = None

    def _start_ticking(self):
        self._stop = threading.Event()
        threading.Thread(target=self._tick, args=(self._stop, self.bar), daemon=True).start()

    def _tick(self, stop: threading.Event, bar):
        while not stop.wait(self.TICK):
            bar.refresh()

    def next(self, desc=None, *, ticking: bool = False):
        self._stop_ticking()
        if desc:
            self.labels.append(desc)
        if self.bar is not None:
            self.bar.update(1)
            if desc:
                self.bar.set_description_str(desc)
            if ticking:
                self._start_ticking()

    def close(self):
        self._stop_ticking()
        if self.bar is not None:
            self.bar.close()


def _say(args, *text):
    if not args.quiet:
        print(*text, flush=True)


# --------------------------------------------------------------------------- wording
_FLAGS = {"max_refits": "--max-refits", "max_seconds": "--max-seconds",
          "prior_sd": "--prior-sd", "scale_icept": "--scale-icept", "seed": "--seed",
          "khat_threshold": "--threshold"}

#: Python keywords in the library's messages -> the options of this tool, applied in order
_CLI_WORDS = [
    # "loo(..., a=x, b=y)": the arguments alone, translated below
    (re.compile(r"\bloo\(\.\.\.,\s*((?:[^()]|\([^()]*(?:\([^()]*\)[^()]*)*\))*)\)"),
     lambda m: m.group(1)),
    (re.compile(r"\bStanProgram\(\.\.\., fit_kwargs=\{'adapt_delta': \.\.\.\}\)"),
     "--adapt-delta"),
    (re.compile(r"\bprogram=(?:loo_adapt\.)?StanProgram\([^)]*\)"),
     "--program FILE.stan --data DATA.json"),
    (re.compile(r"\bprogram=(?:\.\.\.)?"), "--program FILE.stan --data DATA.json"),
    (re.compile(r"\bfallback=\(([^)]*)\)"),
     lambda m: "--fallback " + " ".join(re.findall(r"\w+", m.group(1)))),
    (re.compile(r"\bestimator=['\"](\w+)['\"]"), lambda m: f"--method {m.group(1)}"),
    (re.compile(r"\bmodel=\w*"), "--model FAMILY"),
    (re.compile(r"\bmixis_draws=(?:\.\.\.)?"), "--mixis-csv"),
    (re.compile(r"\brefit_kwargs\[['\"](\w+)['\"]\]"),
     lambda m: "--" + m.group(1).replace("_", "-")),
    (re.compile(r"\b(max_refits|max_seconds|prior_sd|scale_icept|seed|khat_threshold)="
                r"(?=[\w\-+'\"])"), lambda m: _FLAGS[m.group(1)] + " "),
    (re.compile(r"\b(max_refits|max_seconds|prior_sd|scale_icept|seed|khat_threshold)"
                r"=(?:\.\.\.)?"), lambda m: _FLAGS[m.group(1)]),
    # bare names that are options only (prior_sd, scale_icept also name data entries)
    (re.compile(r"\b(max_refits|max_seconds|khat_threshold)\b"),
     lambda m: _FLAGS[m.group(1)]),
    (re.compile(r"\bobs_dim_vars(?:=\[\.\.\.\]|=)?"), "--obs-vars NAME..."),
    (re.compile(r"\by=(?:\.\.\.)?"), "--data (a JSON with y)"),
    (re.compile(r"; pass method=$"), "; pass the CSV files as CmdStan wrote them (their "
                                     "'# method = sample' comment names the method)"),
    # "python words (CLI: --flag)" is now "--flag (CLI: --flag)": keep one
    (re.compile(r"\s*\((?:CLI|command line): [^)]*\)"), ""),
]


def cli_message(text: str) -> str:
    """A library message in the words of this tool: option names instead of Python's.

    Parameters
    ----------
    text : a message of the library (an error, a warning, a summary line).

    Returns
    -------
    str
        The message with Python arguments (``fallback=(...)``, ``program=StanProgram(...)``,
        ``khat_threshold``, ``refit_kwargs['max_refits']``, ...) replaced by the options of
        ``loo-adapt evaluate``; "(CLI: ...)" asides dropped, as they are now the text.

    Examples
    --------
    >>> cli_message("Estimate them with fallback=('mixis', 'refit') (CLI: --fallback mixis "
    ...             "refit) or refit them.")
    'Estimate them with --fallback mixis refit or refit them.'
    >>> cli_message("the data has no 'prior_sd': add it to the Stan data or pass "
    ...             "prior_sd=... (command line: --prior-sd)")
    "the data has no 'prior_sd': add it to the Stan data or pass --prior-sd"
    >>> cli_message("refit_kwargs['max_seconds'] must be a positive number")
    '--max-seconds must be a positive number'
    """
    for pattern, repl in _CLI_WORDS:
        text = pattern.sub(repl, text)
    return text


#: lines of the library's summary that recommend a next step (the CLI prints its own)
_ADVICE_LINE = re.compile(r"^(Next step: .*|(Estimate|Verify|Refit) them\b.*)$", re.MULTILINE)


def next_step(res, *, program: bool, model: bool, mixis_draws: bool) -> str:
    """The recommended next step, as a command-line change, or "" when none is needed.

    The one place the CLI decides its advice: what the run had (a program, a model family,
    mixture draws, nothing) and what is still unreliable. (The library's own advice,
    shared by its messages and `summary()`, can replace the body; the CLI then prints it
    through `cli_message`.)

    Parameters
    ----------
    res : the result of `loo_adapt.loo` (an ELPDData with ``.loo_adapt``).
    program, model, mixis_draws : whether the run had a Stan program, a model family,
        draws of the mixture.

    Returns
    -------
    str
        One line starting with "Next:", or "" when every observation is verified.
    """
    from loo_adapt.advice import next_step_for

    step = next_step_for(res.loo_adapt, cli=True)
    if not step:
        return ""
    pw = res.loo_adapt
    n = int(np.sum(~np.asarray(pw.checked_for_bias)))
    rows = f"{n} observation{'s' * (n != 1)} without an estimate verified for bias"
    return f"Next: {rows}; {step}."


def _print_result(args, res, out_dir, files, extra="", advice=""):
    if args.quiet:
        return
    # the summary starts with what print(res) shows (R loo's layout, every row in the k table)
    summary = res.summary()
    if advice:
        summary = _ADVICE_LINE.sub("", summary).rstrip("\n")
    print(cli_message(summary))  # notes name Python arguments too (divergences: adapt_delta)
    if advice:
        print(advice)
    if extra:
        print(extra)
    names = ", ".join(p.name for p in files)
    print(f"\nReport written to {out_dir}/ ({names})")


def _exit_for(res) -> int:
    return EXIT_UNRELIABLE if np.any(res.loo_adapt.unreliable) else EXIT_OK


def _loo_quietly(quiet, **kw):
    """loo_adapt.loo with its unreliable-observation warning shown once, as a note; its
    progress bars shown unless ``quiet`` (where the installed loo takes ``progress=``)."""
    import loo_adapt

    loo = loo_adapt.loo
    try:
        if "progress" in inspect.signature(loo).parameters:
            kw.setdefault("progress", not quiet)
    except (TypeError, ValueError):  # a stand-in without a signature
        pass
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = loo(**kw)
    if not quiet:
        _print_warnings(str(w.message) for w in caught)
    return res


def _print_warnings(messages) -> None:
    """Each distinct warning once, with its count, in the tool's words; loo()'s closing
    "no verified estimate" warning is left out (the summary lists those observations with
    the reason of each)."""
    counts = Counter(cli_message(m) for m in messages if "have no verified estimate" not in m)
    for message, count in counts.items():
        times = f" ({count} times)" if count > 1 else ""
        print(f"warning{times}: {message}", file=sys.stderr)
