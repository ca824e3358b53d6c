"""How a refit leaves one observation out of a Stan program: drop its data, or take its
``log_lik`` term out of the full-data target (an edge module: it evaluates the program
through BridgeStan).

Dropping observation i's data row is exact leave-one-out when the rest of the program does
not see that row: log p(theta | data) - log p(theta | data without i) - log_lik[i] is then
constant in theta.  It is not where transformed data is computed from every row, as in the
code brms writes, which centres each predictor column on its mean (``Xc = X - mean(X)``): the
refit without row i centres on another mean, so its ``Intercept`` is another parameter
than the full-data fit's, and the program's ``log_lik[i]`` evaluated at its draws (the
generic held-out term) mixes the two parameterisations.  Such a program is left out *by
term*: the full-data target without observation i's ``log_lik`` term, the leave-one-out
posterior p(theta | y) / p(y_i | theta) that PSIS and MixIS estimate too.

That is right only where ``log_lik[i]`` is the whole of what the outcome of row i contributes
to the target.  `outcome_entry` checks that directly: it gives row i of each per-observation
data entry that the program models as a variate (``Y[n] ~ ...``, ``normal_lpdf(Y[n] | ...)``:
what is predicted, not a covariate) the value of another row j, and asks that the target
change exactly as ``log_lik[i]`` does, at every draw; failing that, it swaps rows i and j and
asks the same of ``log_lik[i] + log_lik[j]`` (a change that must vary, so that the two terms
are not merely exchanged).  The swap leaves a mean or a scale
that transformed data computes from every row as it was: an intercept's prior centred on the
outcome's mean (as hand-written programs and rstanarm's autoscaled priors have) is the full
data's in the leave-one-out posterior that PSIS and MixIS estimate, and the refits by term
keep it so.  A covariate that transformed data centres is no variate; an outcome that
transformed data standardises (the variate is then transformed data, not a data entry) or
that enters another row's term (an autoregression) passes for no entry, and the program
stays refused.
"""

from __future__ import annotations

import re

import numpy as np

__all__ = ["TERM_SLACK", "spread", "term_residual", "outcome_entry", "couples_through_data",
           "reason_by_term", "grouped_entry", "reason_grouped", "is_variate"]

#: how much (nats) log p(theta | data) - log p(theta | other data) - (the log_lik change) may
#: vary across draws: below the MCSEs any verified row carries, far below a log_lik with
#: another scale or a missing term
TERM_SLACK = 0.01
#: a perturbation of an entry's row moves log_lik[i] across draws by at least this much, or it
#: tells nothing about whether log_lik[i] is the row's term
_INFORMATIVE = 10 * TERM_SLACK
_EPS = np.finfo(np.float64).eps


def spread(r) -> float | None:
    """max - min of the finite values of ``r``; None with fewer than two."""
    r = np.asarray(r, dtype=np.float64)
    r = r[np.isfinite(r)]
    return None if r.size < 2 else float(r.max() - r.min())


def term_residual(lp_full, lp_other, d_ll) -> float | None:
    """How much lp_full - lp_other - d_ll varies across draws (`spread`): the target's change
    between two data sets beyond the change of ``log_lik`` (``d_ll``; for a dropped row, its
    ``log_lik`` itself).  Draws whose log densities are too large for float64 to resolve
    `TERM_SLACK` in their difference (an approximation's draws far out, log density ~ -1e18)
    tell nothing and are left out; None with fewer than two draws left."""
    lp_full = np.asarray(lp_full, dtype=np.float64)
    lp_other = np.asarray(lp_other, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        resolved = np.abs(lp_full) + np.abs(lp_other) < 1e-3 * TERM_SLACK / _EPS
    return spread(np.where(resolved, lp_full - lp_other - np.asarray(d_ll), np.nan))


def _changed(value, axis: int, i: int, swap: bool):
    """(``value`` with its row ``i`` (along ``axis``) given the value of the row j farthest
    from it, or with rows i and j swapped, j), or None where every row equals row i.  A swap
    leaves whatever transformed data computes from all rows alike (a mean, a scale) as it
    was."""
    arr = np.moveaxis(np.array(value, copy=True), axis, 0)
    if arr.dtype.kind not in "biuf":
        return None
    flat = arr.reshape(arr.shape[0], -1).astype(np.float64)
    dist = np.abs(flat - flat[i]).sum(axis=1)
    j = int(np.argmax(dist))
    if not dist[j] > 0:
        return None
    arr[[i, j]] = arr[[j, i]] if swap else arr[[j, j]]
    return np.moveaxis(arr, 0, axis), j


_DENSITY_CALL = r"_(?:lpdf|lupdf|lpmf|lupmf|lcdf|lccdf)\s*\(\s*"


def is_variate(code: str, name: str) -> bool:
    """Whether the program models data entry ``name`` as a variate: the first argument of a
    density call (``normal_lpdf(Y[n] | ...)``) or the left side of a sampling statement
    (``Y ~ ...``), comments and strings aside.

    Examples
    --------
    >>> is_variate("model { y ~ normal(a + b * x, s); }", "y")
    True
    >>> is_variate("model { y ~ normal(a + b * x, s); }", "x")
    False
    """
    from loo_adapt.stan.stan_source import mask

    text = mask(code)
    word = re.escape(name)
    return bool(re.search(_DENSITY_CALL + word + r"\b", text)
                or re.search(r"(?<![\w.])" + word + r"\s*(?:\[[^;~{}]*\])?\s*~", text))


def _density_with(program, name: str, value):
    """The program's `StanLogDensity` with data entry ``name`` replaced by ``value``."""
    from loo_adapt.stan import backends as _stan
    from loo_adapt.stan.log_density import StanLogDensity

    return StanLogDensity.from_stan(program.stan_file,
                                    _stan._jsonable({**program.data, name: value}),
                                    log_lik=program.log_lik_name)


def outcome_entry(program, U, lp_full, ll_i, i: int) -> str | None:
    """The per-observation data entry, modelled as a variate (`is_variate`), whose row ``i``
    enters the program's target only through ``log_lik[i]``, or None.

    Row i of each such entry takes the value of the row j farthest from it, and then, where
    that does not settle it, swaps values with row j (so that transformed data computed alike
    from every row, such as the outcome's mean, stays as it was).  The entry qualifies where,
    at the unconstrained draws ``U``, the target's change minus the change of ``log_lik[i]``
    (of ``log_lik[i] + log_lik[j]`` for the swap) varies by at most `TERM_SLACK` nats while
    that change itself varies (the entry matters to it).  A swap of two rows with the same
    covariates leaves ``log_lik[i] + log_lik[j]`` as it was, so it tells nothing there.

    Parameters
    ----------
    program : `loo_adapt.stan.program.StanProgram`.
    U : (S, P) unconstrained draws of the full-data model.
    lp_full : (S,) the full-data log density at ``U`` (with the Jacobian).
    ll_i : (S,) the program's ``log_lik[i]`` at ``U``.
    i : the observation (0-based).
    """
    from loo_adapt.stan.stan_source import program_text

    try:
        entries = program.observation_vars()
    except ValueError:  # cannot tell which entries are per-observation
        return None
    code = program_text(program.stan_file)
    full = program.log_density()
    for name, axis in entries.items():
        if not is_variate(code, name):
            continue
        for swap in (False, True):
            changed = _changed(program.data[name], axis, i, swap)
            if changed is None:
                break
            value, j = changed
            try:
                other = _density_with(program, name, value)
                if other.n_params != U.shape[1]:
                    break
                lp_other = other.log_density(U)
                d_ll = np.asarray(ll_i) - other.log_lik(U, i)
                if swap:
                    d_ll = d_ll + (full.log_lik(U, j) - other.log_lik(U, j))
            except Exception:  # noqa: BLE001 - the changed data does not load: not this entry
                break
            moved = spread(d_ll)
            resid = term_residual(lp_full, lp_other, d_ll)
            if moved is not None and resid is not None and moved > _INFORMATIVE \
                    and resid <= TERM_SLACK:
                return name
    return None


#: rows of a variate `grouped_entry` swaps (spread over the entry)
_GROUP_ROWS = 8


def grouped_entry(program, U, lp_full) -> str | None:
    """The data entry, modelled as a variate, whose rows each enter the target only through
    the ``log_lik`` entry of one observation, where no data entry has a row per observation
    (``log_lik`` per group, accumulated over a group index: leave-one-group-out), or None.

    For `_GROUP_ROWS` rows m spread over each such entry, rows m and the row farthest from it
    swap values; the entry qualifies where each swap moves at most two entries of
    ``log_lik`` and the target's change minus their summed change varies by at most
    `TERM_SLACK` nats across the draws ``U``, and some swap moves ``log_lik`` (the entry
    matters to it).  An outcome that enters other groups' terms (lags), or a ``log_lik``
    missing part of its group's likelihood, fails.
    """
    from loo_adapt.stan.stan_source import program_text

    ll_full = program.log_density().log_lik(U)
    code = program_text(program.stan_file)
    for name, value in program.data.items():
        arr = np.asarray(value)
        if arr.ndim == 0 or arr.dtype.kind not in "biuf" or arr.shape[0] < 2 \
                or not is_variate(code, name):
            continue
        ok, informative = True, False
        for m in np.unique(np.linspace(0, arr.shape[0] - 1, _GROUP_ROWS).round().astype(int)):
            swap = _changed(arr, 0, int(m), swap=True)
            if swap is None:
                continue
            try:
                other = _density_with(program, name, swap[0])
                if other.n_params != U.shape[1]:
                    ok = False
                    break
                lp_other = other.log_density(U)
                d_ll = ll_full - other.log_lik(U)
            except Exception:  # noqa: BLE001 - the swapped data does not load
                ok = False
                break
            with np.errstate(invalid="ignore"):
                moving = np.flatnonzero(np.nanmax(np.abs(d_ll), axis=0) > TERM_SLACK / 10)
            moved = d_ll[:, moving].sum(axis=1)
            resid = term_residual(lp_full, lp_other, moved)
            if moving.size > 2 or resid is None or resid > TERM_SLACK:
                ok = False
                break
            informative |= bool(moving.size) and (spread(moved) or 0.0) > _INFORMATIVE
        if ok and informative:
            return name
    return None


def reason_grouped(entry: str, err: Exception | None = None) -> str:
    """Why a program whose data cannot drop an observation is left out by term (``err``:
    what dropping it raised, its first words)."""
    why = ""
    if err is not None:
        text = " ".join(str(err).split())
        why = f" ({type(err).__name__}: {text[:160]}{'...' if len(text) > 160 else ''})"
    return (f"the data without an observation does not load{why}, so a refit cannot drop "
            f"it; each row of {entry!r} enters the target only through the log_lik entry of "
            "its observation (or its group, for a log_lik per group over a group index), "
            "which is taken out of the target instead")


def couples_through_data(program, U=None, rows=(0,), seed: int = 0) -> str | None:
    """Why a refit must leave observations out by term although the parameters do not
    change, or None where dropping the data row is exact (or no check can say).

    At the unconstrained draws ``U`` (default: 16 standard-normal points, seeded), for each
    observation of ``rows``: where the program without that row's data differs from the
    full-data program by more than its ``log_lik`` term (varying by more than `TERM_SLACK`),
    and `outcome_entry` finds the entry whose row enters only through ``log_lik``, the reason
    is returned.  Where the data cannot drop the row, `grouped_entry` decides instead.

    Examples
    --------
    >>> couples_through_data(prog)  # doctest: +SKIP
    "dropping observation 0's data changes the other observations' terms (the target ..."
    """
    density = program.log_density()
    if U is None:
        U = np.random.default_rng(seed).standard_normal((16, density.n_params))
    lp_full = density.log_density(U)
    for i in rows:
        try:
            reduced = program.log_density_without(int(i))
        except Exception as err:  # noqa: BLE001 - the data cannot drop the row: by term where
            entry = grouped_entry(program, U, lp_full)  # each row enters one log_lik only;
            return None if entry is None else reason_grouped(entry, err)  # else refits fail
        if reduced.n_params != density.n_params:
            return None
        ll_i = density.log_lik(U, int(i))
        s = term_residual(lp_full, reduced.log_density(U), ll_i)
        if s is None or s <= TERM_SLACK:
            continue
        entry = outcome_entry(program, U, lp_full, ll_i, int(i))
        if entry is not None:
            return reason_by_term(int(i), entry, s)
    return None


def reason_by_term(i: int, entry: str, resid: float) -> str:
    """Why a program is left out by term (`StanProgram.by_term_reason`)."""
    return (f"dropping observation {i}'s data changes the other observations' terms (the "
            f"target without it differs from the full data's by more than its log_lik, by up "
            f"to {resid:.3g} nats across draws: transformed data computed from every row, such "
            f"as predictors centred on their means or the outcome's mean), while its row of "
            f"{entry!r} enters the target only through log_lik")
