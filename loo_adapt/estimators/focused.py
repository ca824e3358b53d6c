"""Focused mixture IS: one more mixture fit for the rows the first one left unverified.

The mixture posterior of `loo_adapt.estimators.mixis` spreads its draws over every
observation's leave-one-out posterior, so an observation whose LOO posterior is far from
the others gets few draws and a large Monte Carlo error.  For the rows ``R`` that miss the
MCSE bar, a second fit of the program samples

    q_R(theta)  proportional to  p(theta | D) * sum_{i in R} 1 / l_i(theta)

(the program's ``mixis_rows``), warm-started from the posterior fit like the first.  For
``i`` in ``R``, p(theta | D_-i) / q_R(theta) is proportional to

    w_i(theta) = (1 / l_i(theta)) / sum_{j in R} (1 / l_j(theta))   (self-normalised),

which is `loo_adapt.core.mixis.mixis_log_weights` of the columns ``R``: the estimate,
its MCSE and the LOO probabilities are `mixis_loo` / `mixis_loo_prob` of those columns
(``|R| = 1`` samples the LOO posterior itself: the weights are all one).  One fit verifies
what would otherwise take ``|R|`` refits; refits follow only for rows that still miss.

A program that declares only the ``mixis`` flag cannot be focused: the stage is skipped,
each row recording why, and the rows go on to the refits.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from loo_adapt.core.bernoulli import moved_loo_prob

__all__ = ["FocusedMixIS", "FOCUS_SEED_OFFSET", "posterior_tree_depth", "AGAIN_MARGIN",
           "AGAIN_MIN_DRAWS", "again_draws", "focus_draws", "FOCUS_CUT",
           "reweighted_influence"]

#: seed of the focused fit: the first mixture fit's seed plus this
FOCUS_SEED_OFFSET = 7919


#: the fit focused on the rows a first focused fit left above the bar draws as many per
#: chain as bring each of them, by `again_draws`'s prediction, to an MCSE of the bar over
#: this (and ``MIN_ESS`` times it effective draws); never more than the first fit's
AGAIN_MARGIN = 1.5

#: fewest draws per chain of that fit
AGAIN_MIN_DRAWS = 250


def again_draws(est, again, draws: int, max_mcse: float) -> int:
    """Draws per chain of a mixture fit focused on the rows ``again`` of the MixIS fit
    ``est`` (a `loo_adapt.core.mixis.MixISResult` of a fit of ``draws`` per chain, focused
    on all its rows), predicted from ``est``.

    Row j's component holds a share exp(-elpd_j) / sum_i exp(-elpd_i) of a mixture's draws,
    so in a fit over ``again`` alone the share of each of those rows grows by r = (sum over
    all rows) / (sum over ``again``), its effective draws by about r D / ``draws`` at D draws
    per chain, and its MCSE falls as their square root.  D is the least that brings every
    row of ``again`` to an MCSE of ``max_mcse`` / `AGAIN_MARGIN` and to `AGAIN_MARGIN` x
    ``MIN_ESS`` effective draws (by the chains and by Kish), in hundreds, at least
    `AGAIN_MIN_DRAWS` and at most ``draws``; ``draws`` when a row's MCSE, ESS or elpd is not
    finite.

    Parameters
    ----------
    est : the first fit's MixIS result over its rows (``elpd_i``, ``mcse_elpd_i``, ``ess``,
        ``ess_mcse``).
    again : bool mask over those rows: the rows the next fit focuses on.
    draws : the first fit's draws per chain (the most the next fit draws).
    max_mcse : the MCSE bar.

    Returns
    -------
    int
        Draws per chain of the next fit.

    Examples
    --------
    With effective draws ample: of two rows of equal elpd, one left above a bar of 0.1 at
    MCSE 0.12 doubles its share, so D = 1000 / 2 x (1.5 x 0.12 / 0.1)^2 = 1620, above 1000:
    1000.  Of 20 such rows, its share grows 20 times: 1000 / 20 x 3.24 = 162, the floor 250.
    """
    from loo_adapt.estimators.mixture_checks import MIN_ESS

    again = np.asarray(again, dtype=bool)
    elpd = np.asarray(est.elpd_i, dtype=float)
    mcse = np.asarray(est.mcse_elpd_i, dtype=float)[again]
    ess = np.fmin(np.asarray(est.ess, dtype=float), np.asarray(est.ess_mcse, dtype=float))
    ess = ess[again]
    if not (np.all(np.isfinite(elpd)) and np.all(np.isfinite(mcse))
            and np.all(np.isfinite(ess)) and np.all(ess > 0) and again.any()):
        return int(draws)
    shift = float(np.max(-elpd))
    r = np.sum(np.exp(-elpd - shift)) / np.sum(np.exp(-elpd[again] - shift))
    need = max(float(np.max((AGAIN_MARGIN * mcse / max_mcse) ** 2)),
               float(np.max(AGAIN_MARGIN * MIN_ESS / ess)))
    d = int(np.ceil(draws * need / r / 100.0)) * 100
    return int(min(draws, max(AGAIN_MIN_DRAWS, d)))


#: `focus_draws` cuts a focused fit's draws only to at most this share of the most it may
#: draw: the MCSE it predicts does not see the optimistic lean that fewer mixture draws
#: bring on wide horseshoes (rhs_wide seed 3: its 30-row focus cut to 900 draws moved the
#: total from +1.50 to +2.01 against truth, 2.2 to 3.0 combined MCs, with every row at the
#: bar), and a cut of less than half saves less than half of one focused fit
FOCUS_CUT = 0.5


def focus_draws(log_lik, rows, ess, draws: int, max_mcse: float) -> int:
    """Draws per chain of a mixture fit focused on ``rows``, predicted from draws of the full
    mixture: their pointwise log-likelihood ``log_lik`` (chains, draws, n) reweighted to the
    focused mixture (weights (sum_{j in rows} 1/l_j) / (sum_j 1/l_j), bounded by one) give
    each row's per-draw variance of its MixIS influence (the delta method's, as
    `loo_adapt.core.mixis.mixis_loo` computes it) and the Kish ESS per draw of its weights
    there; ``ess`` (the full mixture's multi-chain ESS of every row's influence) gives the
    chains' efficiency per draw, their median over the rows (a row the focus serves is a rare
    event in the full mixture, whose own ESS there is a fraction of what it gets in the
    focused fit: 0.08-0.28 against 0.31-0.44 per draw in `tests/estimators/test_focused.py`'s
    exact lazy chains).  D is the least that brings every row to an MCSE of
    ``max_mcse`` / `AGAIN_MARGIN` and to `AGAIN_MARGIN` x ``MIN_ESS`` effective draws, in
    hundreds, at least `AGAIN_MIN_DRAWS`; ``draws`` where D is above `FOCUS_CUT` x
    ``draws``, where the reweighting itself has fewer than ``MIN_ESS`` effective draws or
    where a number is not finite.

    A row's share of the full mixture (`again_draws`' rule) misjudges the first focus: the
    full mixture's MixIS of a row uses every draw, not only its own component's (on
    logistic_n300 a one-row focus sized so drew 250 per chain and missed the bar, MCSE
    0.10-0.13, where this predicts 0.12 at 250 and 0.06 at 1000, and 1000 gave 0.05-0.06).

    Parameters
    ----------
    log_lik : (chains, draws, n) full mixture draws' pointwise log-likelihood.
    rows : the rows of the focus.
    ess : (n,) the full mixture's ESS of each row's MixIS influence (`MixISResult.ess_mcse`).
    draws : the most draws per chain.
    max_mcse : the MCSE bar.

    Returns
    -------
    int
    """
    from loo_adapt.estimators.mixture_checks import MIN_ESS

    log_lik = np.asarray(log_lik, dtype=float)
    chains, per_chain, n = log_lik.shape
    s = chains * per_chain
    ess = np.asarray(ess, dtype=float)
    if not (np.all(np.isfinite(ess)) and np.all(ess > 0)):
        return int(draws)
    there = reweighted_influence(log_lik, rows)
    if there is None:
        return int(draws)
    var, kish = there
    eff = min(float(np.median(ess)) / s, 1.0)  # the chains' effective draws per draw
    need = np.maximum(var * (AGAIN_MARGIN / max_mcse) ** 2 / eff,
                      AGAIN_MARGIN * MIN_ESS / np.minimum(eff, kish)) / chains
    if not np.all(np.isfinite(need)):
        return int(draws)
    d = max(AGAIN_MIN_DRAWS, int(np.ceil(float(np.max(need)) / 100.0)) * 100)
    return int(d if d <= FOCUS_CUT * draws else draws)


def reweighted_influence(log_lik, rows):
    """(per-draw variance of each row's MixIS influence, Kish ESS per draw of its weights)
    under the mixture focused on ``rows``, from draws of the full mixture (their pointwise
    log-likelihood ``log_lik``, (chains, draws, n)) reweighted to it: weights
    (sum_{j in rows} 1/l_j) / (sum_j 1/l_j), bounded by one, the influence the delta
    method's (as `loo_adapt.core.mixis.mixis_loo` computes it); `focus_draws` sizes a
    focused fit from them.  None where ``rows`` is empty, a value is not finite, or the
    reweighting has fewer than ``MIN_ESS`` effective draws."""
    from loo_adapt.core.lse import logsumexp
    from loo_adapt.estimators.mixture_checks import MIN_ESS

    log_lik = np.asarray(log_lik, dtype=float)
    ll = log_lik.reshape(-1, log_lik.shape[-1])
    rows = np.asarray(rows, dtype=np.int64)
    if rows.size == 0 or not np.all(np.isfinite(ll)):
        return None
    lse_rows = logsumexp(-ll[:, rows], axis=1)  # log sum_{j in rows} 1 / l_j
    log_v = lse_rows - logsumexp(-ll, axis=1)
    v = np.exp(log_v - logsumexp(log_v))  # normalised weights: full -> focused mixture
    if 1.0 / np.sum(v * v) < MIN_ESS:
        return None
    log_a = -lse_rows  # a_s = 1 / sum_{j in rows} 1/l_j, the numerator's terms
    a = np.exp(log_a - log_a.max())
    log_b = -ll[:, rows] - lse_rows[:, None]  # b_is = a_s / l_is <= 1: row i's MixIS weights
    b = np.exp(log_b - log_b.max(axis=0))
    a_rel = a / (v @ a)
    b_rel = b / (v @ b)[None, :]
    z = a_rel[:, None] - b_rel  # the delta method's influence under the focused mixture
    var = v @ (z - v @ z) ** 2
    kish = 1.0 / (v @ (b_rel * b_rel))  # Kish ESS per draw of each row's weights there
    return var, kish


def posterior_tree_depth(draws) -> int | None:
    """The tree depth the fastest chain of a NUTS posterior fit typically needed: per chain
    the median of ``treedepth__`` (or of ``log2(n_leapfrog__ + 1)``, rounded), the smallest
    over the chains; None when the draws carry neither (not NUTS, or no sampler columns).

    The easy-row focus (`loo_adapt.estimators.focused_easy.FocusedEasyMixIS`) caps its fit's
    tree depth there.  Its mixture stays close to the posterior, but each chain adapts its
    step size in 100 warm-up iterations, and a chain whose step came out small doubles its
    trajectory once or twice more (255 or 1023 leapfrog steps where the posterior's fastest
    chain took 127 or 255: the cost of a NUTS draw goes in powers of two).  A trajectory cut
    at the cap is still a valid MCMC transition, only a shorter one, whose autocorrelation
    the MCSE's ESS sees. On rhs_wide_099 (in neither half, where the rule was chosen; cap 8,
    seeds 1-3) the 4 x 4000 fit took 44 / 44 / 45 s against 127 / 66 / 129 s (the posterior
    fit: 42 s), with the easy rows' rms z 1.22 / 0.99 / 1.12 against 0.99 / 1.04 / 1.00
    (`benchmarks/focused_tree_depth.py`), and 1.67 against 1.28 in the default's run of seed
    2 (`benchmarks/stage_calibration.py`): shorter trajectories reach the easy rows' tails
    less often, a calibration cost the benchmark's verified rows as a whole carry (rms z
    1.06 / 1.35 / 0.99, 1.14 over the seeds) for the easy-row focus at about one posterior
    fit instead of two to three.
    """
    stats = getattr(draws, "sample_stats", None) or {}
    depth = stats.get("treedepth__")
    if depth is None:
        leap = stats.get("n_leapfrog__")
        if leap is None:
            return None
        depth = np.rint(np.log2(np.asarray(leap, dtype=float) + 1.0))
    depth = np.asarray(depth, dtype=float)
    if depth.ndim != 2 or depth.size == 0 or not np.all(np.isfinite(depth)):
        return None
    return max(1, int(np.min(np.median(depth, axis=1))))


def _config_int(draws, key: str, default: int) -> int:
    """``draws.config[key]`` as an int (CmdStan's settings are kept as strings), ``default``
    where it is absent or not a number."""
    try:
        return int(float((getattr(draws, "config", None) or {}).get(key, default)))
    except (TypeError, ValueError):
        return default


def _full_mixture(result):
    """The draws of the full mixture fit behind ``result``'s MixIS rows (the fit the MixIS
    stage used: a row held from mixture draws, pooled or not, whose estimate no focused fit
    gave last), None where no row is.  A focused fit's rows also hold mixture draws, of a
    fit over some rows' components only: ``result.history`` (`PointwiseLoo.history`) tells
    them apart; a result without one is taken as the MixIS stage's alone.  A stage that
    passed a row's draws record on (the easy-row focus shifting the rows the full mixture
    keeps, `loo_adapt.estimators.focused_easy`: the entry's ``new_record`` is False there)
    did not re-estimate it; an entry without that mask re-estimated every row it wrote."""
    last = {}
    for h in getattr(result, "history", None) or ():
        accepted = np.asarray(h.get("accepted", []), dtype=bool)
        rows = np.asarray(h.get("rows", []), dtype=np.int64)
        new = np.asarray(h.get("new_record", np.ones(rows.size, dtype=bool)), dtype=bool)
        for i in rows[accepted & new]:
            last[int(i)] = str(h.get("estimator", ""))
    return next((r.draws for i, r in enumerate(getattr(result, "row_draws", None) or ())
                 if r is not None and r.source in ("mixture", "pooled")
                 and r.draws is not None
                 and not last.get(i, "").startswith("mixis_focused")), None)


def _rows(k: int) -> str:
    return f"{k} row" if k == 1 else f"{k} rows"


#: fewest rows a focused fit that fails its check against the posterior draws must share
#: with an earlier mixture fit's estimates for their agreement to speak for it
SECOND_OPINION_ROWS = 3


def _second_opinion(ctx, rows, est, failed: str, what: str) -> str:
    """A note when a focused fit that failed `mixture_draws_check` against the posterior
    draws agrees with an earlier, independent mixture fit (the full one, or the easy-row
    focus) on its rows, else "".

    The check compares two fits, so its failure says one of them is off, not which.  Where
    the posterior fit is the one off (short chains that all under-explore alike: on the relu1
    fixture PSIS's sum over 23 easy rows is +0.77 off the brute-force truth, MixIS's -0.14),
    a focused fit on the rows where PSIS and MixIS disagree fails against it (+4.8 SEs) while
    agreeing with the full mixture fit.  Two mixture fits (different targets and seeds) that
    agree, against the posterior draws, point at the posterior draws: the focused estimates
    are used, verified by their MCSE.  At least `SECOND_OPINION_ROWS` rows must be compared
    (held from MixIS alone, "mixis": a row pooled with PSIS is not independent of the
    posterior draws), and agree by `loo_adapt.core.pool.agree`.
    """
    from loo_adapt.core.pool import agree

    res = ctx.result
    if res is None or res.method is None:
        return ""
    method = np.asarray(res.method, dtype=object)[rows]
    prior = np.asarray(res.elpd_i, dtype=float)[rows]
    prior_se = np.asarray(res.mcse_elpd_i, dtype=float)[rows]
    same = (method == "mixis") & np.isfinite(prior) & np.isfinite(prior_se)
    same &= np.isfinite(est.elpd_i) & np.isfinite(est.mcse_elpd_i)
    if same.sum() < SECOND_OPINION_ROWS:
        return ""
    ok, z, z_sum = agree(est.elpd_i[same], est.mcse_elpd_i[same], prior[same],
                         prior_se[same])
    if not ok:
        return ""
    return (f"The mixture fit focused on {what} failed its check against the posterior draws "
            f"({failed}) but agrees with the earlier mixture fit's independent estimates of "
            f"{int(same.sum())} of those rows (up to {float(np.max(np.abs(z))):.1f} combined "
            f"MCSEs, sum {z_sum:+.1f}): the posterior draws are the odd one out, so the "
            "focused estimates are used, each row verified by its own MCSE")


def _block_sum_mcse(est, mask) -> float | None:
    """The MCSE of the sum of ``est``'s rows at ``mask`` from the one fit block that holds
    them all (`Estimate.sum_mcse`), None where no single block does."""
    pos = np.flatnonzero(np.asarray(mask, dtype=bool))
    for block_pos, block in getattr(est, "sum_mcse", ()):
        block_pos = np.asarray(block_pos, dtype=np.int64)
        if np.isin(pos, block_pos).all():
            return float(block(np.isin(block_pos, pos)))
    return None


@dataclass(frozen=True)
class _WithSharedOffset:
    """A `SumMCSE`-like block whose rows also share an error, ``offset`` on each row (one
    number, or one per row): the MCSE of the sum over the held rows is the block's and the
    held rows' offsets summed, in quadrature (the shared error is the same sign on every
    row)."""

    block: Any
    offset: Any

    def __call__(self, held) -> float:
        held = np.asarray(held, dtype=bool)
        shared = np.sum(np.broadcast_to(np.asarray(self.offset, dtype=float), held.shape)[held])
        return float(np.hypot(self.block(held), shared))


def _from_mixis(result, rows) -> np.ndarray:
    """Which of ``rows`` ``result`` holds from MixIS (method "mixis" or "mixis+psis")."""
    method = np.asarray(result.method, dtype=object)[rows]
    return np.array([str(m).startswith("mixis") for m in method], dtype=bool)


def _kept_rows_move(first, second, again, y=None):
    """(rows, moves, block, note) for the rows a first focused fit verified and
    keeps, where a second fit re-estimated the rows ``again`` it left above the bar; None
    where there is nothing to move or a number is not finite.  ``y``: the rows' observed
    outcomes, if known (a 0 / 1 outcome's row is moved to an elpd of at most 0).

    A row whose draws caught its leave-one-out tail lands above the bar, and errs
    pessimistic; one whose draws missed it looks verified, and errs optimistic.  So the rows
    the first fit keeps lean up by as much, in expectation, as the rows it left above the
    bar lean down: over all its rows the first fit's sum is not selected.  The second fit's
    independent draws measure the latter, ``c`` = sum over ``again`` of (first - second), and
    the kept rows are moved by ``c`` in all, each by the same fraction of its own MCSE (as
    a selection of like strength would bias each), but by no more than its MCSE (selection
    on a row's own draws moves it by less; more is the noise of the rows above the bar,
    large where few rows are kept: 3 kept of 28 at a bar of 0.02 on `logistic_normal`,
    ``c`` +0.18 with standard error 0.37).  The move's error is one number shared by the
    rows, so, as `focused_easy.FocusedEasyMixIS.shift_kept_rows`'s, it goes to the MCSE of
    their sum (`_WithSharedOffset`): the first fit's MCSE of its sum over ``again`` (the
    second fit's part is in its own rows' block) with what the cap left unmoved, shared out
    the same way.  Pointwise MCSEs stay; widened by their share of that error they would
    take rows near the bar above it and on to refits (rhs_wide seed 1: one horseshoe refit,
    10 posterior fits), where the kept rows' pointwise rms z is 0.98 without it.  On the
    synthetic 30-row focus of `tests/estimators/test_focused.py`, 13 of its rows above a bar
    of 0.07, the kept and re-estimated rows summed +0.53 (se 0.06) over 40 replicates; with
    the move +0.08 (0.05), the kept rows' rms z 1.10 -> 0.98; a cap at half the MCSE left
    +0.16 (0.05).
    """
    from loo_adapt.estimators.estimate import frozen

    keep = np.asarray(first.reliable, dtype=bool) & ~np.asarray(again, dtype=bool)
    j = np.flatnonzero(again)
    e1 = np.asarray(first.elpd_i, dtype=float)
    e2 = np.asarray(second.elpd_i, dtype=float)
    mcse = np.asarray(first.mcse_elpd_i, dtype=float)[keep]
    if not keep.any() or not (np.all(np.isfinite(e1[j])) and np.all(np.isfinite(e2))
                              and np.all(np.isfinite(mcse)) and mcse.sum() > 0):
        return None
    first_sum = _block_sum_mcse(first, again)
    second_sum = _block_sum_mcse(second, np.ones(j.size, dtype=bool))
    if first_sum is None or second_sum is None or len(first.sum_mcse) != 1:
        return None
    c = float(np.sum(e1[j] - e2))
    se = float(np.hypot(first_sum, second_sum))
    # each row by the same fraction of its own MCSE, at most all of it
    frac = float(np.clip(c / mcse.sum(), -1.0, 1.0))
    step = frac * mcse
    stops = []  # why the rows move by less than ``c``
    if abs(c) > mcse.sum():
        stops.append("by no more than its MCSE")
    if y is not None:  # a 0 / 1 outcome's LOO density stays at most one
        binary = np.isin(np.asarray(y, dtype=float)[keep], (0.0, 1.0))
        at_zero = binary & (step > -e1[keep])
        if at_zero.any():
            step = np.where(at_zero, -e1[keep], step)
            stops.append(f"{_rows(int(at_zero.sum()))} of a 0 / 1 outcome to an elpd of 0")
    offset = np.zeros(len(first))
    # the total holds the second fit's rows too, whose block carries its part of ``se``
    widen = float(np.hypot(first_sum, c - step.sum()))
    offset[keep] = widen * mcse / mcse.sum()
    pos, block = first.sum_mcse[0]
    note = (f"The {_rows(j.size)} the mixture fit focused on {_rows(len(first))} left above the "
            f"bar came out {-c:+.3g} in all from a second fit over them alone (standard error "
            f"{se:.2g}): a row whose draws caught its tail lands above the bar, one whose "
            f"draws missed it is kept, so the {_rows(int(keep.sum()))} that fit verified "
            f"{'is' if keep.sum() == 1 else 'are'} moved by {float(step.sum()):+.3g} in all, "
            f"each by {frac:+.2f} of its MCSE"
            + (f" (not {c:+.3g}: {', '.join(stops)})" if stops else "")
            + f"; the MCSE of their sum is widened by {widen:.2g} for that "
            "move's own error")
    return (keep, step,
            (pos, _WithSharedOffset(block, frozen(offset[np.asarray(pos)]))), note)


@dataclass(frozen=True)
class FocusedMixIS:
    """A mixture fit over the asked rows' leave-one-out posteriors only (see the module).

    Parameters
    ----------
    max_mcse : a row is verified where its MCSE is at most this (backed by at least
        `loo_adapt.estimators.mixture_checks.MIN_DRAWS` draws and ``MIN_ESS`` effective draws).
    mcse : the pointwise MCSE of `loo_adapt.core.mixis.mixis_loo`.
    bias : its bias correction ("delta": each row's second-order bias subtracted,
        `loo_adapt.core.mixis.second_order_bias`, as `loo_adapt.estimators.mixis.MixIS`).
    chains, draws : of the focused fit (its warm-up: that of
        `loo_adapt.stan.mixture_fit.fit_mixture`, 100 iterations after a warm start);
        ``draws`` is the most: with ``size_first`` the first fit draws `first_draws`, what the
        full mixture's draws reweighted to the focused mixture say its rows need
        (`focus_draws`; a note gives the count when it is fewer).
    rounds : fits at most: rows a fit leaves above the bar (with enough draws) get one more
        fit focused on them alone, while they are fewer than the rows of the fit before;
        its estimates replace the earlier fit's for those rows, and its draws per chain
        are the fewer of `again_draws` (what the earlier fit's MCSEs and those rows' larger
        shares of a fit over them alone say they need, at most the earlier fit's) and
        `focus_draws` (the earlier fit's draws reweighted to the new focus); the rows the
        earlier fit verified are moved by what the new fit shows on the others
        (`_kept_rows_move`: the rows a fit leaves above the bar err pessimistic by
        selection, the rows it keeps optimistic by as much).  Each fit costs about
        half a posterior fit, a refit of a horseshoe row several: on rhs_wide the rows a
        first focused fit left at MCSE 0.10-0.13 went on to refits worth 15-20 posterior
        fits.
    size_first : size the first fit by `first_draws` (False: ``draws``).
    cap_tree_depth : cap the fit's NUTS tree depth at `posterior_tree_depth` of MCMC
        posterior draws (False here: the rows above the bar have leave-one-out posteriors
        far from the posterior, whose trajectories may need the length;
        `focused_easy.FocusedEasyMixIS` caps).
    """

    max_mcse: float = 0.1
    mcse: str = "skew"
    bias: str | None = "delta"
    chains: int = 4
    draws: int = 1000
    name: str = "mixis_focused"
    rounds: int = 2
    cap_tree_depth: bool = False
    size_first: bool = True

    def _skip(self, rows, why):
        from loo_adapt.estimators.estimate import Estimate

        return Estimate.make(self.name, rows, np.nan, np.nan, False, method="mixis",
                             reason=f"focused MixIS skipped: {why}")

    def __call__(self, ctx, rows):
        from loo_adapt.core.mixis import mixis_bernoulli, mixis_loo
        from loo_adapt.estimators.estimate import Estimate, RowDraws
        from loo_adapt.estimators.mixture_checks import (
            MIN_DRAWS,
            divergence_note,
            enough_draws,
            mixture_draws_check,
            unverify_divergent,
        )

        rows = np.asarray(rows, dtype=np.int64)
        n = ctx.log_lik.shape[1]
        draws, cut = self.first_draws(ctx, rows) if self.size_first else (self.draws, "")
        fit, why = replace(self, draws=draws)._fit(ctx, rows, n)
        if fit is None:
            return self._skip(rows, why)
        ll = fit.log_lik(ctx.var_name)
        if ll.reshape(fit.n_samples, -1).shape[1] != n:
            return self._skip(rows, f"the focused fit has {ll.reshape(fit.n_samples, -1).shape[1]}"
                                    f" observations, the LOO has {n}")
        sub = ll.reshape(fit.n_chains, -1, n)[..., rows]
        est = mixis_loo(sub, mcse=self.mcse, bias=self.bias)
        untold = ""
        if not ctx.draws.is_approximate:
            check = mixture_draws_check(ctx.log_lik[:, rows], sub.reshape(-1, rows.size),
                                        chains_posterior=ctx.draws.n_chains,
                                        chains_mixture=sub.shape[0])
            if check.ok is False:
                untold = _second_opinion(ctx, rows, est, check.message, _rows(rows.size))
                if not untold:
                    return self._skip(rows, check.message)
            if check.ok is None:  # the package's own fit: used, and said so
                untold = (f"The mixture fit focused on {_rows(rows.size)} was used although "
                          f"{check.message}: each row is verified by its own MCSE")
        prob = p1 = None
        if ctx.y is not None:
            prob, p1 = mixis_bernoulli(sub, ctx.y[rows], est)
        lw = est.log_weights
        lw.setflags(write=False)
        records = [RowDraws("mixture", lw[:, j], None if p1 is None else p1[:, j], draws=fit,
                            column=int(i)) for j, i in enumerate(rows)]
        enough, too_few = enough_draws(est, what="focused MixIS")
        ok = (est.mcse_elpd_i <= self.max_mcse) & enough
        reason = np.array([
            "" if good else (
                f"focused MixIS MCSE {m:.2f} > {self.max_mcse:.2f}" if e else str(few))
            for good, m, e, few in zip(ok, est.mcse_elpd_i, enough, too_few)], dtype=object)
        # too divergent: no row verified, and another round would be as divergent
        ok, reason, wild = unverify_divergent(
            fit, f"the mixture fit focused on {_rows(rows.size)}", ok, reason)
        div = divergence_note(fit, f"The mixture fit focused on {_rows(rows.size)}")
        every = np.arange(rows.size)
        out = Estimate.make(
            self.name, rows, est.elpd_i, est.mcse_elpd_i, ok, diagnostic=est.ess,
            method="mixis", loo_prob=prob, verified_by=np.where(ok, "mixis_mcse", ""),
            reason=reason, row_draws=records, sum_mcse=((every, est.sum_mcse(every)),),
            # about this fit's estimates: each holds while a row keeps one
            notes=(cut,) if cut else (),
            block_notes=tuple((0, t, False) for t in (untold, div) if t))
        # rows above the bar, or with too few effective draws in this fit (a long enough
        # fit): one more fit focused on them alone gives each a larger share of its draws
        again = ~ok & (est.n_samples >= MIN_DRAWS) & (not wild)
        if self.rounds > 1 and 0 < again.sum() < rows.size:
            per_chain = fit.n_samples // fit.n_chains
            d = min(again_draws(est, again, per_chain, self.max_mcse),
                    focus_draws(sub, np.flatnonzero(again), est.ess_mcse, per_chain,
                                self.max_mcse))
            out = self._again(ctx, out, again, d, per_chain)
        return out

    def _again(self, ctx, first, again, draws, first_draws):
        """``first`` (of a fit of ``first_draws`` per chain) with the rows ``again``
        re-estimated by one more fit focused on them alone, of ``draws`` per chain, and the
        rows ``first`` verified moved by what that fit shows on the others
        (`_kept_rows_move`; the rows' reasons say what each fit showed; notes give the move,
        and the draws when fewer)."""
        from loo_adapt.estimators.estimate import Estimate
        from loo_adapt.result import add_reason

        second = replace(self, rounds=self.rounds - 1, draws=draws, size_first=False)(
            ctx, first.rows[again])
        cut = ()
        if draws < first_draws and second.row_draws is not None:
            cut = (f"The second mixture fit focused on {_rows(int(again.sum()))} drew {draws} "
                   f"draws per chain, not {first_draws}: by the first fit's MCSEs and those "
                   "rows' larger shares of a fit over them alone, enough for MCSEs of "
                   f"{self.max_mcse / AGAIN_MARGIN:.3g} (each row is verified by its own)",)
        j = np.flatnonzero(again)
        replaced = ("elpd_i", "mcse_elpd_i", "reliable", "diagnostic", "loo_prob",
                    "verified_by")
        merged = {name: getattr(first, name).copy() for name in replaced + ("reason",)}
        records = list(first.row_draws)
        blocks = tuple(first.sum_mcse)
        bound = tuple(first.block_notes)  # each note with its fit's block
        if second.row_draws is None:  # skipped: the first fit's estimates stand
            merged["reason"][j] = [add_reason(r, s) for r, s in zip(first.reason[j],
                                                                    second.reason)]
        else:
            for name in replaced:
                merged[name][j] = getattr(second, name)
            merged["reason"][j] = ["" if not s else f"{r}; again, on {j.size} rows: {s}"
                                   for r, s in zip(first.reason[j], second.reason)]
            for t, jj in enumerate(j):
                records[jj] = second.row_draws[t]
            y = None if ctx.y is None else np.asarray(ctx.y)[first.rows]
            moved = _kept_rows_move(first, second, again, y)
            if moved is not None:
                keep, step, block, note = moved
                merged["elpd_i"][keep] += step
                if merged["loo_prob"] is not None and y is not None:
                    merged["loo_prob"][keep] = moved_loo_prob(first.loo_prob, y, keep, -step)
                blocks = (block,) + blocks[1:]
                cut += (note,)
            # the second fit's block claims its rows after the first's (`PointwiseLoo.merge`)
            bound += tuple((k + len(blocks), t, w) for k, t, w in second.block_notes)
            blocks += tuple((j[pos], block) for pos, block in second.sum_mcse)
        return Estimate.make(
            self.name, first.rows, merged["elpd_i"], merged["mcse_elpd_i"], merged["reliable"],
            diagnostic=merged["diagnostic"], method="mixis", loo_prob=merged["loo_prob"],
            verified_by=merged["verified_by"], reason=merged["reason"], row_draws=records,
            notes=tuple(first.notes) + tuple(n for n in second.notes if n not in first.notes)
            + cut, sum_mcse=blocks, block_notes=bound)

    def first_draws(self, ctx, rows) -> tuple[int, str]:
        """(draws per chain, a note when fewer than ``draws``) of the first fit focused on
        ``rows``: `focus_draws` from the full mixture fit behind ``ctx.result`` (the MixIS
        stage's, `_full_mixture`: not an easy-row focus's, whose draws miss these rows'
        components), at most ``draws``; ``draws`` where no row is held from it or its
        observations are not the LOO's."""
        from loo_adapt.core.mixis import mixis_loo

        full = _full_mixture(ctx.result)
        n = ctx.log_lik.shape[1]
        if full is None or rows.size == 0:
            return self.draws, ""
        ll = full.log_lik(ctx.var_name)  # (chains, draws, n)
        if ll.shape[2] != n:
            return self.draws, ""
        est = mixis_loo(ll, mcse=self.mcse)
        draws = focus_draws(ll, rows, est.ess_mcse, self.draws, self.max_mcse)
        if draws >= self.draws:
            return self.draws, ""
        return draws, (f"The mixture fit focused on {_rows(rows.size)} drew {draws} draws per "
                       f"chain, not {self.draws}: by the full mixture's draws reweighted to "
                       "it, enough for MCSEs of "
                       f"{self.max_mcse / AGAIN_MARGIN:.3g} (each row is verified by its own)")

    def _fit(self, ctx, rows, n):
        """(draws of the focused mixture, "") or (None, why it cannot be fitted); the fit
        itself is the verb layer's (``Context.focused_mixture_fn``)."""
        if ctx.focused_mixture_fn is None:
            return None, "no Stan program"
        if rows.size >= n:
            return None, ("every row missed the bar: a fit focused on all of them is the "
                          "mixture fit again")
        kw = {}
        if self.cap_tree_depth and not ctx.draws.is_approximate:
            depth = posterior_tree_depth(ctx.draws)
            if depth is not None:
                kw["max_treedepth"] = depth
        return ctx.focused_mixture_fn(rows, chains=self.chains, draws=self.draws, **kw)
