"""The easy-row focus: one more mixture fit over the rows the full mixture verified easily.

The full mixture of `loo_adapt.estimators.mixis` gives row j's component a mass of about
exp(-elpd_j) / sum_i exp(-elpd_i), so the rows whose leave-one-out posterior is close to the
posterior get few draws of their tails.  On wide horseshoe fits (p > n) those rows erred
optimistic together while their MCSEs said they were fine.  `FocusedEasyMixIS` gives them a
focused fit of their own (`loo_adapt.estimators.focused.FocusedMixIS` over those rows, with
more draws), held to about one posterior fit of leapfrog steps; where one row's
leave-one-out posterior holds the full mixture (`dominated`) it focuses on every other row.

Its rows were estimated by the full mixture too, from independent draws: the two differ
on them as a whole by the full mixture's lean (`shared_offset`), which the verified rows it
keeps share, and they are moved by half of it (`shift_kept_rows`).  The lean is selection: the
full mixture sorts the rows by its own draws, and a row whose draws missed its
leave-one-out tail errs optimistic and looks verified, one whose draws caught it errs
pessimistic and lands above the MCSE bar (`benchmarks/selection_split.py`: scored by
independent chains of the same fit, the rows so sorted do not lean).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from loo_adapt.core.bernoulli import moved_loo_prob
from loo_adapt.core.pool import agreement
from loo_adapt.estimators.focused import (
    FocusedMixIS,
    _block_sum_mcse,
    _config_int,
    _from_mixis,
    _full_mixture,
    _rows,
    _WithSharedOffset,
    posterior_tree_depth,
)

__all__ = ["FocusedEasyMixIS", "EASY_FOCUS_SHARE", "EASY_FOCUS_BUDGET", "EASY_FOCUS_KISH",
           "EASY_FOCUS_MIN_DRAWS", "DOMINATED_DRAWS",
           "SHARED_OFFSET_MIN_ROWS", "dominated",
           "offset_se", "posterior_leapfrog", "shared_offset"]

#: ``mixis_focus_easy="auto"`` focuses the easy rows when fewer than this share of the rows
#: have a plain-PSIS k-hat below 1/2 (every leave-one-out posterior far from the
#: posterior).  Chosen on the choose half and rhs_wide_099
#: (`benchmarks/results/focus_easy_trigger.txt`): where the easy rows erred (rhs_wide_099)
#: 1 of 130 rows has k-hat < 1/2; where they did not (rhs_logistic, relu5, logistic_n300,
#: t_outliers) 43-99 % do.  The cut sits in that gap, near its geometric middle (6 %).
EASY_FOCUS_SHARE = 0.1

#: the easy-row focus draws at most as many leapfrog steps as this many posterior fits
#: (`posterior_leapfrog`), estimated before the fit from the full mixture fit's steps per
#: draw at the focus's tree-depth cap.  Its 4 x 4000 draws cost about one posterior fit where
#: one posterior chain ran a tree depth below the others (the cap then halves the easy fit's
#: trajectories: rhs_wide_099, and the suite's horseshoe posteriors), and 2.2 posterior fits
#: on a fresh user fit whose four chains all ran at depth 8 (`benchmarks/user_program.py`,
#: rhs_microarray_next seed 21), which put the default above three posterior fits.
EASY_FOCUS_BUDGET = 1.0

#: the easy-row focus takes the rows MixIS verified with a Kish ESS above this.  The rows the
#: full mixture verified at Kish ESS 100-400 keep its estimates and carry most of the wide
#: horseshoes' optimistic totals (`benchmarks/results/error_by_fit.txt`).  Taking those
#: above 200 into the focus too was best on rhs_wide_099 (totals +0.00 / +0.01 / -0.08
#: against -0.21 / +1.12 / +0.22, same cost) and lowered RMSE on all 9 report-half runs,
#: but left rhs_microarray's rows at rms z 1.30 (1.16 at 400) with its totals all positive
#: (`benchmarks/results/easy_focus_kish.txt`): so 400.
EASY_FOCUS_KISH = 400.0

#: fewest draws per chain the budget leaves the easy-row focus (it exists to sample those
#: rows' tails: at 4 x 1000 their rms z was 1.2-2.0 per window, at 4 x 2000 1.1-1.6, at
#: 4 x 4000 0.9-1.4; `benchmarks/results/easy_rows_alternatives.txt`)
EASY_FOCUS_MIN_DRAWS = 2000

#: the full mixture is *dominated* when it leaves fewer than this many of its draws to the
#: components of every row but its heaviest (the mixture weights row j's component by
#: exp(-elpd_j)): one outlier's leave-one-out posterior then holds all the draws, and MixIS
#: of every other row reweights draws of that posterior, far from its own (the sweep's
#: Poisson regression with one count of 25: 1e-12 draws left, 18 of 39 rows off by more
#: than 3 MCSEs, all verified).  On every benchmark of both halves at least 1298 of 4000
#: draws are left (logistic_n300; `benchmarks/results/dominated_mixture.txt`), so the rule
#: changes none of them.
DOMINATED_DRAWS = 1000.0


#: fewest rows both fits verified for their mean difference to say anything of a shared
#: error (a mean over a handful of rows is mostly their own Monte Carlo error)
SHARED_OFFSET_MIN_ROWS = 10


def shared_offset(before_elpd, before_mcse, after_elpd, after_mcse) -> tuple[float, float]:
    """(mean per-row difference ``before - after``, the z of the summed difference) of two
    independent estimates of the same rows (NaN rows left out; (0, 0) when none is left).

    Examples
    --------
    >>> d, z = shared_offset([-1.0, -2.0, -3.0], [0.01] * 3, [-1.02, -2.02, -3.02], [0.01] * 3)
    >>> round(d, 6), round(z, 3)
    (0.02, 2.449)
    """
    a, sa, b, sb = (np.asarray(v, dtype=float) for v in (before_elpd, before_mcse,
                                                        after_elpd, after_mcse))
    ok = np.isfinite(a) & np.isfinite(sa) & np.isfinite(b) & np.isfinite(sb)
    if not ok.any():
        return 0.0, 0.0
    _, z_sum = agreement(a[ok], sa[ok], b[ok], sb[ok])
    return float(np.mean(a[ok] - b[ok])), float(z_sum)


def offset_se(before_mcse, after_mcse, before_sum=None, after_sum=None) -> float:
    """Standard error of `shared_offset`'s mean difference over n rows: the two estimates'
    MCSEs of their sums over those rows in quadrature, over n.  Each fit's rows share its
    draws, so the MCSE of a sum is its fit's (``before_sum``, ``after_sum``: a `SumMCSE`
    over those rows), which sees what they share; where one is None, that estimate's
    pointwise MCSEs in quadrature stand in (as if its rows erred independently).  Rows
    where a pointwise MCSE is not finite are left out of the count; NaN when none is left.

    Examples
    --------
    >>> round(offset_se([0.03, 0.04], [0.0, 0.0]), 6)
    0.025
    >>> round(offset_se([0.03, 0.04], [0.0, 0.0], before_sum=0.1), 6)
    0.05
    """
    sa, sb = (np.asarray(v, dtype=float) for v in (before_mcse, after_mcse))
    ok = np.isfinite(sa) & np.isfinite(sb)
    if not ok.any():
        return float("nan")
    va = np.sum(sa[ok] ** 2) if before_sum is None else float(before_sum) ** 2
    vb = np.sum(sb[ok] ** 2) if after_sum is None else float(after_sum) ** 2
    return float(np.sqrt(va + vb) / ok.sum())


def posterior_leapfrog(draws) -> float | None:
    """Leapfrog steps of the NUTS posterior fit behind ``draws``, warm-up included: per chain
    its mean ``n_leapfrog__`` times its iterations (draws times ``thin``, plus
    ``num_warmup``: Stan's default of 1000 where the draws do not say, warm-up counted at
    the sampling rate); None without ``n_leapfrog__`` (not NUTS, or no sampler columns)."""
    stats = getattr(draws, "sample_stats", None) or {}
    leap = stats.get("n_leapfrog__")
    if leap is None:
        return None
    leap = np.asarray(leap, dtype=float)
    if leap.ndim != 2 or leap.size == 0 or not np.all(np.isfinite(leap)):
        return None
    thin = max(1, _config_int(draws, "thin", 1))
    warmup = max(0, _config_int(draws, "num_warmup", 1000))
    return float(np.sum(leap.mean(axis=1) * (leap.shape[1] * thin + warmup)))


def _steps_per_draw(fit, depth) -> float | None:
    """Mean leapfrog steps per draw of a NUTS fit, each draw's count cut at a full tree of
    ``depth`` (2^depth - 1 steps; None: uncut); None without ``n_leapfrog__``."""
    leap = (getattr(fit, "sample_stats", None) or {}).get("n_leapfrog__")
    if leap is None or np.size(leap) == 0:
        return None
    leap = np.asarray(leap, dtype=float)
    if depth is not None:
        leap = np.minimum(leap, 2.0 ** depth - 1.0)
    per = float(np.mean(leap))
    return per if np.isfinite(per) and per > 0 else None


def dominated(result):
    """(heaviest row, draws the full mixture leaves to the other rows, its draws) when those
    are fewer than `DOMINATED_DRAWS`, else None; from the MixIS estimates in ``result``."""
    elpd = getattr(result, "elpd_i", None)
    full = _full_mixture(result)
    if elpd is None or full is None:
        return None
    n_draws = full.n_samples
    e = np.asarray(elpd, dtype=float)
    if e.size < 2 or not np.all(np.isfinite(e)):
        return None
    share = np.exp(-(e - e.min()))
    share /= share.sum()
    top = int(np.argmax(share))
    left = float(n_draws * (share.sum() - share[top]))
    return (top, left, int(n_draws)) if left < DOMINATED_DRAWS else None


@dataclass(frozen=True)
class FocusedEasyMixIS(FocusedMixIS):
    """A focused fit over the rows the full mixture found easy, with more draws
    (``loo(..., mixis_focus_easy="auto")``, the default, where the posterior is sensitive to
    every observation; ``True``: always).

    The full mixture gives row j's component a mass of about exp(-elpd_j) / sum_i
    exp(-elpd_i), so the rows whose leave-one-out posterior is close to the posterior (a large
    Kish ESS) get few draws of its tails.  On wide horseshoe fits (p > n) those rows erred
    optimistic together while their MCSEs said they were fine (rms z 2.2-2.5,
    `benchmarks/results/focus_easy_rows.txt`); a mixture over those rows alone, with 4 x
    4000 draws, brought them to rms z 1.0-1.2 on the held-out rhs_microarray_next.  It costs
    one more fit with four times the draws (about two posterior fits before its tree depth
    was capped at `posterior_tree_depth`, about one after), so by default it runs only where
    almost no row has a plain-PSIS k-hat below 1/2 (`EASY_FOCUS_SHARE`): there the full
    mixture's easy rows erred; elsewhere they did not.

    Asked about every row, it takes those the result so far holds from MixIS (method
    "mixis" or "mixis+psis"), shown reliable, with a Kish ESS (the ``diagnostic``) above
    ``min_kish`` (None: `EASY_FOCUS_KISH`), and returns the focused estimates of those
    rows.  It returns no row (the rows keep the full mixture's estimates; a note says why)
    when no row or every row is easy (a fit over all of them is the mixture fit again), the
    focused fit is skipped, or ``max_low_khat_share`` is set and at least that share of the
    rows has a plain-PSIS k-hat below 1/2 (`EASY_FOCUS_SHARE`: what
    ``mixis_focus_easy="auto"``, the default of `loo_adapt.loo`, sets; None focuses whatever
    the posterior); in that last case without a note, as a stage with nothing to do.

    Its draws per chain are ``draws`` (4000), fewer where those would take more leapfrog
    steps than `EASY_FOCUS_BUDGET` posterior fits (`posterior_leapfrog`, against the full
    mixture fit's steps per draw at the tree-depth cap), never below `EASY_FOCUS_MIN_DRAWS`;
    a note gives the count when it is cut.

    Whatever the k-hats, where the full mixture is `dominated` (one row's component holds
    all but fewer than `DOMINATED_DRAWS` of its draws) the focused fit runs over every other
    row MixIS holds, verified or not, and a note says why.
    """

    min_kish: float | None = None  # None: `EASY_FOCUS_KISH`, read when it runs
    draws: int = 4000
    max_low_khat_share: float | None = None
    name: str = "mixis_focused_easy"
    rounds: int = 1  # rows it leaves above the bar go on to `FocusedMixIS`'s own fits
    cap_tree_depth: bool = True  # at `posterior_tree_depth`: the mixture is near the posterior
    size_first: bool = False  # its draws are `budget_draws`'s

    def needed(self, ctx) -> tuple[bool, str]:
        """(whether to focus, why not): with ``max_low_khat_share``, only when fewer than
        that share of the rows have a plain-PSIS k-hat below 1/2 (NaN counts as not).  The
        rule was chosen on MCMC posteriors; on draws of an approximation (ADVI, Laplace,
        Pathfinder) the k-hats also carry the approximation's error, so it focuses more
        often there."""
        if self.max_low_khat_share is None or dominated(ctx.result) is not None:
            return True, ""
        khat = np.asarray(ctx.base.pareto_k, dtype=float)
        with np.errstate(invalid="ignore"):
            share = float(np.mean(khat < 0.5))
        if share < self.max_low_khat_share:
            return True, ""
        return False, (f"{share:.0%} of the rows have a plain-PSIS k-hat below 0.5 (the "
                       f"focus runs below {self.max_low_khat_share:.0%}, where the full "
                       "mixture under-samples the easy rows' tails)")

    @property
    def _min_kish(self) -> float:
        return EASY_FOCUS_KISH if self.min_kish is None else float(self.min_kish)

    def easy_rows(self, result, rows) -> np.ndarray:
        """The rows of ``rows`` that ``result`` holds from MixIS, reliable, with a Kish
        ESS above ``min_kish``."""
        rows = np.asarray(rows, dtype=np.int64)
        if result is None or result.method is None or result.diagnostic is None:
            return rows[:0]
        from_mixis = _from_mixis(result, rows)
        with np.errstate(invalid="ignore"):
            kish = np.asarray(result.diagnostic, dtype=float)[rows] > self._min_kish
        return rows[from_mixis & kish & np.asarray(result.reliable, dtype=bool)[rows]]

    def __call__(self, ctx, rows):
        if not self.needed(ctx)[0]:  # "auto" and not needed: no row, no note
            return self._nothing(None)
        n = ctx.log_lik.shape[1]
        dom = dominated(ctx.result)
        if dom is not None:
            top, left, n_draws = dom
            rows = np.asarray(rows, dtype=np.int64)
            easy = rows[_from_mixis(ctx.result, rows) & (rows != top)]
            few = f"{left:.0f}" if left >= 0.5 else "less than one"
            note = (f"The full mixture left {few} of its {n_draws} draws to the "
                    f"observations other than {top} (whose leave-one-out posterior holds "
                    f"the rest): a focused fit over the {easy.size} others")
            if easy.size == 0:
                return self._nothing(None)
        else:
            easy = self.easy_rows(ctx.result, rows)
            note = None
            if easy.size == 0 or easy.size >= n:  # nothing to focus on, or the full mixture
                return self._nothing(f"{easy.size} of {n} rows have a Kish ESS above "
                                     f"{self._min_kish:g}")
        draws, cut = self.budget_draws(ctx, easy)
        est = FocusedMixIS.__call__(replace(self, draws=draws), ctx, easy)
        if np.isnan(np.asarray(est.elpd_i, dtype=float)).all():  # skipped: keep MixIS's rows
            return self._nothing(str(est.reason[0]))
        extra = tuple(t for t in (note, cut) if t)
        est = replace(est, notes=tuple(est.notes) + extra) if extra else est
        kept = self.shift_kept_rows(ctx, est)
        if kept is None:
            return est
        from loo_adapt.estimators.estimate import Estimate

        return Estimate.concat(self.name, [est, kept])

    def shift_kept_rows(self, ctx, est):
        """The rows the full mixture keeps, its verified ones moved by half the lean the
        focus shows, or None where the focus cannot measure one.

        The focus re-estimated rows the full mixture had estimated too, from independent
        draws.  Over the rows both verified (at least `SHARED_OFFSET_MIN_ROWS`), the full
        mixture's estimates sat off by ``d`` a row on average (`shared_offset`): the lean of
        rows sorted by the draws that estimate them (a row whose draws missed its
        leave-one-out tail looks verified and errs optimistic;
        `benchmarks/results/selection_split.txt`), which no MCSE from those draws can see.
        The verified rows still held from that fit (method "mixis"; pooled rows lean on
        PSIS too and are left as they are) share it, by an amount per row between none and
        ``d``: near ``d`` on the wide horseshoes (their summed error 0.8-1.0 times ``d``
        times their count, `benchmarks/results/shared_offset.txt`), 0.3-0.6 of it where the
        chains' miss is spread over all components alike (`tests/estimators/test_focused.py`).
        Each is moved by ``-d / 2``, the middle of that range, and ``|d| / 2`` (its
        half-width) and the standard error of ``d`` (`offset_se`, from each fit's MCSE of
        its sum over the rows it was measured on), in quadrature, are added, the same on
        every row, to the MCSE of their sum (so to the total's).  Their pointwise MCSEs stay
        (0.08 or so, against a move of 0.007-0.014 nats on the wide horseshoes); a binary
        outcome's LOO probability moves with its row (the observed outcome's probability
        times ``exp(-d / 2)``); the draws records (weights for LOO-PIT and expectations) stay
        the full mixture's.  Kept rows above the MCSE bar are not moved
        (their selection leans the other way: a row whose draws caught its tail lands
        above the bar); the MCSE of their sum gets ``|d|`` a row, for as long as no later
        fit re-estimates them.  The move is made whatever the z of ``d``, so that it does
        not lean itself.  A note gives ``d``, its standard error and the rows."""
        from loo_adapt.estimators.estimate import Estimate, _Restricted, frozen

        result = ctx.result
        if result is None or not getattr(result, "mcse_blocks", None) or len(est) == 0:
            return None
        rows = np.asarray(est.rows, dtype=np.int64)
        block = np.unique(result.row_block[rows])
        if block.size != 1 or block[0] < 0:  # not all from one fit's block: nothing to say
            return None
        ok = np.asarray(est.reliable, dtype=bool) & np.asarray(result.reliable, bool)[rows]
        if ok.sum() < SHARED_OFFSET_MIN_ROWS:
            return None
        before = result.elpd_i[rows[ok]], result.mcse_elpd_i[rows[ok]]
        after = np.asarray(est.elpd_i)[ok], np.asarray(est.mcse_elpd_i)[ok]
        d, _ = shared_offset(*before, *after)
        block_rows, sums = result.mcse_blocks[int(block[0])]
        se = offset_se(before[1], after[1],
                       sums(np.isin(block_rows, rows[ok])), _block_sum_mcse(est, ok))
        if not (np.isfinite(d) and np.isfinite(se)) or se <= 0:
            return None
        z = d / se
        keep = ((result.row_block[block_rows] == block[0])
                & (np.asarray(result.method, dtype=object)[block_rows] == "mixis")
                & ~np.isin(block_rows, rows))
        kept = np.asarray(block_rows)[keep]
        if kept.size == 0:
            return None
        moved = np.asarray(result.reliable, dtype=bool)[kept]
        n_moved, later = int(moved.sum()), int(kept.size - moved.sum())
        half = 0.5 * d
        shared = float(np.hypot(half, se))
        lean = ("the rows the full mixture verified lean together (it sorted them by its own "
                "draws)" if abs(z) > 2 else "within its own error, but the rows the full "
                "mixture verified may lean together (it sorted them by its own draws)")
        note = (f"The focused fit over the {int(ok.sum())} easy rows moved their full-mixture "
                f"estimates by {-d:+.3g} a row on average (standard error {se:.2g}, z "
                f"{-z:+.1f}): {lean}, and of the rows it verified the {_rows(n_moved)} still "
                f"held from it {'is' if n_moved == 1 else 'are'} moved by half of that, "
                f"{-half:+.3g} each ({-half * n_moved:+.3g} in "
                f"all); the MCSE of their sum, and of the total, is widened by {shared:.2g} "
                "a row for what that move may miss"
                + (f" (and by {abs(d):.3g} a row for the {_rows(later)} above the bar, until "
                   "a later fit re-estimates them)" if later else ""))
        offset = np.where(moved, shared, abs(d))
        step = np.where(moved, half, 0.0)
        return Estimate.of_result(
            "mixis", result, kept, notes=(note,), elpd_i=result.elpd_i[kept] - step,
            loo_prob=moved_loo_prob(result.loo_prob, result.y, kept, step),
            sum_mcse=((np.arange(kept.size), _WithSharedOffset(_Restricted(sums, keep),
                                                               frozen(offset))),))

    def budget_draws(self, ctx, rows) -> tuple[int, str]:
        """(draws per chain, a note when fewer than ``draws``): as many as keep the fit's
        estimated leapfrog steps (its chains x (warm-up + draws) x the full mixture fit's
        steps per draw, each cut at the tree-depth cap) within `EASY_FOCUS_BUDGET` times
        `posterior_leapfrog`; at least `EASY_FOCUS_MIN_DRAWS`, at most ``draws``, in
        hundreds.  ``draws`` where either fit has no leapfrog counts (not NUTS)."""
        if ctx.draws.is_approximate:
            return self.draws, ""
        posterior = posterior_leapfrog(ctx.draws)
        full = _full_mixture(ctx.result)
        depth = posterior_tree_depth(ctx.draws) if self.cap_tree_depth else None
        per_draw = None if full is None else _steps_per_draw(full, depth)
        if posterior is None or per_draw is None:
            return self.draws, ""
        warmup = _config_int(full, "num_warmup", 100)  # a warm-started fit's warm-up
        fit = EASY_FOCUS_BUDGET * posterior / (self.chains * per_draw) - warmup
        draws = int(min(self.draws, max(EASY_FOCUS_MIN_DRAWS, 100 * (fit // 100))))
        if draws >= self.draws:
            return self.draws, ""
        return draws, (f"The focused fit over the easy rows drew {draws} draws per chain, not "
                       f"{self.draws}: at the full mixture fit's {per_draw:.0f} leapfrog steps "
                       f"per draw{'' if depth is None else f' (tree depth {depth})'}, "
                       f"{self.draws} would take more steps than {EASY_FOCUS_BUDGET:g} "
                       f"posterior fit ({posterior:.3g} steps, warm-up included)")

    def _nothing(self, why):
        """No row: the rows keep the full mixture's estimates; a note says why (none when
        ``why`` is None)."""
        from loo_adapt.estimators.estimate import Estimate

        notes = () if why is None else (f"No focused fit over the easy rows: {why}",)
        return Estimate.make(self.name, np.empty(0, np.int64), np.nan, np.nan, False,
                             method="mixis", notes=notes)
