"""The one next step: what to call when some observations have no verified estimate.

Every message that recommends a call prints what `next_step` returns: `loo()`'s closing
warning, ``summary()``, the CLI and the README.  The call is the one measured closest to
brute-force truth (`benchmarks/truth.py`): mixture IS on every row from a fit of the user's
own Stan program, pooled with PSIS only where the two agree, refits where its MCSE is too
large.  With a program already given, what is left is the refit budget.
"""

from __future__ import annotations

import numpy as np

__all__ = ["next_call", "next_step", "next_step_for", "PROGRAM_CALL", "PROGRAM_FLAGS"]

#: the recommended call, in Python and on the command line
PROGRAM_CALL = 'loo(fit, program=loo_adapt.StanProgram("model.stan", data))'
PROGRAM_FLAGS = "--program FILE.stan --data DATA.json"
_WHAT = ("mixture IS on every row, pooled with PSIS where they agree, refits where its MCSE "
         "is too large")
#: estimators that only run when a program or mixture draws were given
PROGRAM_METHODS = ("mixis", "mixis+psis", "refit", "mm")


def next_step(*, had_program: bool, n_unverified: int, cli: bool = False) -> str:
    """The call that verifies the rows still without a verified estimate.

    Parameters
    ----------
    had_program : the call had a Stan program (or mixture draws): then only the refit
        budget is left to raise.
    n_unverified : how many rows lack a verified estimate (rows resting on PSIS k-hat alone
        count).
    cli : word it for the command line instead of Python.

    Returns
    -------
    str
        One sentence; "" when every row is verified.

    Examples
    --------
    >>> next_step(had_program=False, n_unverified=3)[:40]
    'verify them with loo(fit, program=loo_ad'
    """
    call = next_call(had_program=had_program, n_unverified=n_unverified, cli=cli)
    if not call:
        return ""
    if not had_program:
        return f"verify them with {call} ({_WHAT})"
    if cli:
        return f"refit them: {call} (and --max-seconds to bound the time)"
    return f"refit them: {call} (raise 'max_seconds' too if the budget ran out)"


def next_call(*, had_program: bool, n_unverified: int, cli: bool = False) -> str:
    """The call of `next_step` alone ("" when every row is verified).

    Examples
    --------
    >>> next_call(had_program=True, n_unverified=2)
    "loo(fit, program=..., refit_kwargs={'max_refits': 2})"
    """
    if n_unverified <= 0:
        return ""
    if not had_program:
        return PROGRAM_FLAGS if cli else PROGRAM_CALL
    if cli:
        return f"rerun with --program and --max-refits {n_unverified}"
    return f"loo(fit, program=..., refit_kwargs={{'max_refits': {n_unverified}}})"


def next_step_for(result, *, cli: bool = False) -> str:
    """`next_step` for a finished result (`loo_adapt.result.PointwiseLoo`): whether a
    program was had is read from the estimators its rows record."""
    methods = {str(m) for m in np.asarray(result.method)}
    had = any(m in PROGRAM_METHODS for m in methods) or any(
        rec.get("estimator") in PROGRAM_METHODS for rec in getattr(result, "history", []))
    n = int(np.sum(~np.asarray(result.checked_for_bias)))
    return next_step(had_program=had, n_unverified=n, cli=cli)
