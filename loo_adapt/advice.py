"""The one next step: what to call when some observations have no verified estimate.

Every message that recommends a call prints what `next_step` returns: `loo()`'s closing
warning, ``summary()``, the CLI and the README.  The call is the one measured closest to
brute-force truth (`benchmarks/truth.py`): mixture IS on every row from a fit of the user's
own Stan program, pooled with PSIS only where the two agree, refits where its MCSE is too
large.  With a program already given, what is left is the refit budget, for the rows it left
out; rows whose refit ran and failed are named apart (a larger budget would not help them).
"""

from __future__ import annotations

import numpy as np

__all__ = ["next_call", "next_step", "next_step_for", "refit_outcomes", "PROGRAM_CALL",
           "PROGRAM_FLAGS"]

#: the recommended call, in Python and on the command line
PROGRAM_CALL = 'loo(fit, program=loo_adapt.StanProgram("model.stan", data))'
PROGRAM_FLAGS = "--program FILE.stan --data DATA.json"
_WHAT = ("mixture IS on every row, pooled with PSIS where they agree, refits where its MCSE "
         "is too large")
#: estimators that only run when a program or mixture draws were given
PROGRAM_METHODS = ("mixis", "mixis+psis", "refit", "mm")


def next_step(*, had_program: bool, n_unverified: int, cli: bool = False,
              n_failed: int = 0) -> str:
    """The call that verifies the rows still without a verified estimate.

    Parameters
    ----------
    had_program : the call had a Stan program (or mixture draws): then only the refit
        budget is left to raise.
    n_unverified : how many rows lack a verified estimate that a larger refit budget could
        verify (rows resting on PSIS k-hat alone count), not counting ``n_failed``.
    cli : word it for the command line instead of Python.
    n_failed : how many rows lack one because their refit ran and failed (it raised,
        returned NaN or inf, timed out, lost its worker, did not converge or its held-out
        likelihood was heavy-tailed, `loo_adapt.stan.heldout.tail_check`): a larger
        ``max_refits`` is not suggested for them.

    Returns
    -------
    str
        One sentence; "" when every row is verified.

    Examples
    --------
    >>> next_step(had_program=False, n_unverified=3)[:40]
    'verify them with loo(fit, program=loo_ad'
    >>> next_step(had_program=True, n_unverified=0, n_failed=2)[:47]
    'the refits of 2 rows failed (their reasons say '
    """
    call = next_call(had_program=had_program, n_unverified=n_unverified, cli=cli)
    failed = _failed_step(n_failed, cli) if had_program else ""
    if not call:
        return failed
    if not had_program:
        return f"verify them with {call} ({_WHAT})"
    if cli:
        step = f"refit them: {call} (and --max-seconds to bound the time)"
    else:
        step = f"refit them: {call} (raise 'max_seconds' too if the budget ran out)"
    return f"{step}; {failed}" if failed else step


def _failed_step(n_failed: int, cli: bool) -> str:
    """What to do about rows whose refits ran and failed ("" for none)."""
    if n_failed <= 0:
        return ""
    rows = "1 row" if n_failed == 1 else f"{n_failed} rows"
    fix = "the program or its data" if cli else (
        "the program or its data, refit_kwargs['timeout'] where a refit timed out")
    fix += (", or, for a heavy-tailed held-out likelihood, log_lik with a parameter of the "
            "observation's own integrated out; a far outlier keeps its estimate and MCSE, "
            "unverified")
    budget = "--max-refits" if cli else "max_refits"
    return (f"the refits of {rows} failed (their reasons say how: an error, NaN or inf, a "
            f"timeout, a lost worker, no convergence, a heavy-tailed held-out likelihood), "
            f"which a larger {budget} does not mend: fix the cause ({fix}) and rerun")


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


def refit_outcomes(result) -> np.ndarray:
    """What the last refit of each row came to, from the result's history.

    Parameters
    ----------
    result : a `loo_adapt.result.PointwiseLoo`.

    Returns
    -------
    (n,) object array
        "" (no refit was tried, or it verified the row), "budget" (the refit limits left
        the row out: a larger ``max_refits`` / ``max_seconds`` would refit it) or "failed"
        (the refit ran and failed: it raised, returned NaN or inf, timed out, lost its
        worker, did not converge or its held-out likelihood was heavy-tailed).
    """
    from loo_adapt.estimators.refit import BUDGET

    out = np.full(len(np.asarray(result.elpd_i)), "", dtype=object)
    for rec in getattr(result, "history", []):
        if rec.get("estimator") != "refit":
            continue
        for i, why in zip(np.asarray(rec["rows"]), np.asarray(rec["reason"], dtype=object)):
            why = str(why)
            out[i] = "" if not why else "budget" if why.startswith(BUDGET) else "failed"
    return out


def next_step_for(result, *, cli: bool = False) -> str:
    """`next_step` for a finished result (`loo_adapt.result.PointwiseLoo`): whether a
    program was had is read from the estimators its rows record, and which rows' refits
    failed (not left out by the budget) from its history (`refit_outcomes`)."""
    methods = {str(m) for m in np.asarray(result.method)}
    had = any(m in PROGRAM_METHODS for m in methods) or any(
        rec.get("estimator") in PROGRAM_METHODS for rec in getattr(result, "history", []))
    todo = ~np.asarray(result.checked_for_bias)
    n_failed = int(np.sum(todo & (refit_outcomes(result) == "failed")))
    if not had:
        return next_step(had_program=False, n_unverified=int(np.sum(todo)) - n_failed,
                         cli=cli, n_failed=n_failed)
    # with a program, the refit stage takes only unverified rows: rows accepted on PSIS
    # k-hat alone (where MixIS verified nothing, e.g. its fit failed its check) are named
    # apart, not counted towards max_refits
    n_khat = int(np.sum(np.asarray(result.khat_only)))
    step = next_step(had_program=True, n_unverified=int(np.sum(todo)) - n_failed - n_khat,
                     cli=cli, n_failed=n_failed)
    if not n_khat:
        return step
    rows = "1 row rests" if n_khat == 1 else f"{n_khat} rows rest"
    how = ("check them with refit_loo(rows, program) in Python" if cli else
           "check them with loo_adapt.stan.refit.refit_loo(rows, program)")
    khat = (f"{rows} on PSIS k-hat alone, which the refit stage does not take (the notes say "
            f"why MixIS did not verify them): {how}")
    return f"{step}; {khat}" if step else khat
