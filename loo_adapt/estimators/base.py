"""The one estimator interface: an estimator takes the rows it is asked about and returns an
immutable `Estimate` (`loo_adapt.estimators.estimate`); `loo_adapt.result.PointwiseLoo.merge`
is the only writer.

    est = estimator(ctx, rows)            # Estimate for those rows, nothing written
    result = result.merge(est, accept)    # new PointwiseLoo, history recorded

An `Estimate` carries, per asked row: elpd_loo, its Monte Carlo SE, the LOO probability
P(y_i = 1 | y_-i) (binary outcomes), the estimator's own diagnostic (Pareto k-hat for
importance sampling, ESS for MixIS/refits), whether it is shown reliable, what showed it
(``verified_by``) and, where it is not, why (``reason``).  Columns an estimator does not
produce are NaN (never the previous estimator's value).

`Context` holds what estimators share, built lazily: the draws, the pointwise
log-likelihood, plain PSIS (the base weights), the model family, the Stan program, the
mixture draws.  `Stage` says which rows an estimator is asked about and which of its rows
are merged; `run_stages` is the fold `loo()` is made of.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

import numpy as np

from loo_adapt.core import psis_loo
from loo_adapt.estimators.estimate import Estimate

__all__ = ["Estimator", "Context", "Stage", "run_stages", "rows_of", "psis_of_draws"]



def psis_of_draws(draws, *, var_name: str | None = None, reff=None, weights: bool = True):
    """Plain PSIS-LOO of `Draws` (`loo_adapt.core.psis_loo.PsisLoo`).

    Parameters
    ----------
    draws : `loo_adapt.draws.Draws`.
    var_name : the pointwise log-likelihood variable.
    reff : relative efficiency; None computes it from the chains (R loo's ``relative_eff``
        of exp(log_lik)); 1 for a single chain and for approximate draws.
    weights : write the (S, n) log weights (False: ``log_weights`` is None).

    Returns
    -------
    PsisLoo
    """
    log_lik = draws.log_lik(var_name)
    if draws.is_approximate:
        return psis_loo.loo_pointwise_approximate(
            log_lik.reshape(draws.n_samples, -1), draws.log_ratio_offset(),
            r_eff=1.0 if reff is None else reff, weights=weights,
        )
    if draws.n_chains == 1 and reff is None:
        reff = 1.0
    return psis_loo.loo_pointwise(log_lik, r_eff=reff, weights=weights)


class Estimator(Protocol):
    """Anything with a ``name`` that maps (context, rows) to an `Estimate`."""

    name: str

    def __call__(self, ctx: Context, rows: np.ndarray) -> Estimate: ...


@dataclass
class Context:
    """What the estimators share, handed over by the verb layer (`loo_adapt.entry`):
    estimators import no readers and no Stan backends, so whatever needs them (the mixture
    fit, the model-prior check) arrives here as a function; expensive members are computed
    on first use.

    Parameters
    ----------
    draws : `loo_adapt.draws.Draws` of the fit being cross-validated.
    var_name : name of the pointwise log-likelihood variable.
    r_eff : relative efficiency given by the user (None: from the chains).
    model : a model family of `loo_adapt.models` (adaptive IS), or None.
    program : the `loo_adapt.stan.program.StanProgram` checked to be the fit's
        (`loo_adapt.stan.identity`): mixture fit, moment matching, refits; or None.
    mixture_fn : () -> `Draws` of the mixture posterior (given draws, or a fit of the
        program), called once on first use; None when there is none.
    own_mixture : the draws of ``mixture_fn`` are the package's own fit of ``program`` (the
        user gave no mixture draws): when they fail
        `loo_adapt.estimators.mixture_checks.mixture_draws_check`, MixIS verifies no row from them
        and the later stages go on; the user's own draws that fail it are refused.
    prior_check_fn : (ctx) -> "" when the model family's prior was checked against the fit,
        else why it could not be; None: nothing to check.
    refit_runner : ``refit_loo(rows, program, **options)`` (`loo_adapt.stan.refit`), the
        refit machinery, or None.
    focused_mixture_fn : (rows, chains=, draws=, max_treedepth=) -> (draws of the mixture
        focused on those rows, "") or (None, why it cannot be fitted); None without a
        program.
    mixture_again_fn : () -> `Draws` of a second, independent fit of the full mixture
        (another seed), or None: asked for only when the package's own first fit fails its
        check against the posterior draws (a third opinion on which of the two is off).
    y : binary outcomes (LOO probabilities), or None.
    khat_threshold : Pareto k-hat threshold (None: min(1 - 1/log10 S, 0.7)).
    seed : seeds every random choice of the estimators.
    progress : show progress bars for long stages (mixture fit, refits, moment matching).
    weights : keep the (S, n) PSIS log weights in ``base`` (False: `loo` of plain PSIS whose
        caller wants no pointwise output; the weights are then never written).
    """

    draws: Any
    var_name: str | None = None
    r_eff: Any = None
    model: Any = None
    program: Any = None
    mixture_fn: Any = None
    own_mixture: bool = False
    prior_check_fn: Any = None
    refit_runner: Any = None
    focused_mixture_fn: Any = None
    mixture_again_fn: Any = None
    y: np.ndarray | None = None
    khat_threshold: float | None = None
    seed: int | None = None
    progress: bool = True
    options: dict = field(default_factory=dict)
    weights: bool = True
    result: Any = None

    @cached_property
    def log_lik(self) -> np.ndarray:
        """(S, n) pointwise log-likelihood of the draws."""
        return self.draws.log_lik(self.var_name).reshape(self.draws.n_samples, -1)

    @cached_property
    def psis_loo_prob(self) -> np.ndarray | None:
        """(n,) P(y_i = 1 | y_-i) under the plain PSIS weights of every row (binary ``y``),
        computed once for the PSIS result and the rows MixIS pools with PSIS; None without
        ``y``."""
        if self.y is None:
            return None
        from loo_adapt.core.bernoulli import loo_prob_from_log_lik

        return loo_prob_from_log_lik(self.log_lik, self.base.log_weights, self.y)

    @cached_property
    def base(self):
        """Plain PSIS (`loo_adapt.core.psis_loo.PsisLoo`): the base weights of every stage."""
        reff = self.r_eff
        if reff is None and "_mcmc_checks" not in self.__dict__:
            fused = self._base_and_checks()
            if fused is not None:
                return fused
        if reff is None and self._mcmc_checks is not None:
            reff = self._mcmc_checks[0]
        return psis_of_draws(self.draws, var_name=self.var_name, reff=reff,
                             weights=self.weights)

    @cached_property
    def chain_log_lik(self):
        """The (chains, draws, n) log-likelihood when its chains can be compared (MCMC
        draws, at least 2 chains of 4 draws), else None."""
        draws = self.draws
        if (draws is None or getattr(draws, "is_approximate", False)
                or draws.n_chains < 2 or draws.n_draws < 4):
            return None
        ll = draws.log_lik(self.var_name)
        return ll.reshape(ll.shape[0], ll.shape[1], -1)

    def _base_and_checks(self):
        """`base` and `_mcmc_checks` from one pass of the PSIS kernel over the draws
        (`loo_adapt.core.psis_loo.loo_pointwise_checked`: the same numbers as r_eff and the R-hat
        check followed by PSIS), or None (no chains to compare, or a log-likelihood the
        separate calls must report on)."""
        if self.chain_log_lik is None:
            return None
        from loo_adapt.core.convergence import MAX_RHAT

        try:
            res, bad, rhat = psis_loo.loo_pointwise_checked(
                self.chain_log_lik, MAX_RHAT, weights=self.weights)
        except ValueError:  # the separate calls raise what the user should see
            return None
        self.__dict__["_mcmc_checks"] = (res.r_eff, bad, rhat)
        return res

    @cached_property
    def _mcmc_checks(self):
        """(r_eff, bad, R-hat) of `chain_log_lik` from one pass over the draws
        (`loo_adapt.core.convergence.relative_eff_and_disagreement`), or None (no chains to
        compare, or a log-likelihood the separate calls must report on)."""
        if self.chain_log_lik is None:
            return None
        from loo_adapt.core.convergence import relative_eff_and_disagreement

        try:
            return relative_eff_and_disagreement(self.chain_log_lik)
        except ValueError:  # the separate calls raise what the user should see
            return None

    @property
    def threshold(self) -> float:
        return float(self.base.good_k if self.khat_threshold is None
                     else self.khat_threshold)

    @property
    def stan_program(self):
        """The identity-checked Stan program, or None (kept for estimators written
        against the old name)."""
        return self.program

    @cached_property
    def mixture(self):
        """Draws of the mixture posterior (`mixture_fn`, called once)."""
        if self.mixture_fn is None:
            raise ValueError(
                "mixture IS needs draws of the mixture posterior: pass mixis_draws= (a fit of "
                "the program with its mixis flag) or program=loo_adapt.StanProgram(stan_file, "
                "data) to fit them"
            )
        return self.mixture_fn()

    @cached_property
    def prior_unchecked(self) -> str:
        """"" when the model family's prior was checked against the fit (or there is
        nothing to check), else why it could not be checked."""
        return "" if self.prior_check_fn is None else str(self.prior_check_fn(self))

    @cached_property
    def chains_disagree(self):
        """(rows, R-hat) of the observations whose log-likelihood chains disagree
        (`loo_adapt.core.convergence.disagreeing_columns`: rank-normalised split R-hat above
        1.01 or a chain stuck at one value), or None when there is nothing to compare (one
        chain, draws of an approximation, fewer than 4 draws per chain).  R-hat is exact
        for those rows; the others may be NaN (a bound showed it at most 1.01)."""
        checks = self._mcmc_checks
        if checks is not None:
            return np.flatnonzero(checks[1]), checks[2]
        if self.chain_log_lik is None:
            return None
        from loo_adapt.core.convergence import disagreeing_columns

        bad, rhat = disagreeing_columns(self.chain_log_lik, all_rhat=False)
        return np.flatnonzero(bad), rhat

    def need_program(self, what: str):
        if self.program is None:
            raise ValueError(
                f"{what} needs program=loo_adapt.StanProgram(stan_file, data)"
            )
        return self.program


@dataclass(frozen=True)
class Stage:
    """One step of the LOO fold.

    rows : "all" (every observation), "unreliable" (rows not yet shown reliable) or
        "unchecked" (rows not verified by a check that can see bias: unreliable rows and
        rows accepted on PSIS k-hat alone).
    accept : "all" (merge every row the estimator returns) or "reliable" (merge only rows
        it shows reliable; the others keep their previous estimate, their history records
        the attempt).
    """

    estimator: Estimator
    rows: str = "unreliable"
    accept: str = "reliable"

    def __post_init__(self):
        if self.rows not in ("all", "unreliable", "unchecked"):
            raise ValueError(f"Stage.rows must be 'all', 'unreliable' or 'unchecked', got "
                             f"{self.rows!r}")
        if self.accept not in ("all", "reliable"):
            raise ValueError(f"Stage.accept must be 'all' or 'reliable', got {self.accept!r}")


def rows_of(result, which: str) -> np.ndarray:
    """Indices of the rows a stage asks about."""
    if which == "all":
        return np.arange(result.n_obs)
    if which == "unchecked":
        return np.flatnonzero(~result.checked_for_bias)
    return np.flatnonzero(~result.reliable)


#: what verifies a row independently of the posterior draws (their chains may disagree);
#: a pooled "mixis+psis" row leans on the posterior's PSIS too
INDEPENDENT_OF_DRAWS = {"refit": None, "mixis_mcse": ("mixis",)}


def _mark_disagreeing(result, rows, rhat):
    """Rows whose chains disagree lose any "reliable" that rests on the posterior draws
    (k-hat, certification of an adapted draw), with the reason; refits and MixIS on its own
    mixture draws keep theirs."""
    import dataclasses

    from loo_adapt.result import add_reason

    reliable, verified, reason = (result.reliable.copy(), result.verified_by.copy(),
                                  result.reason.copy())
    for i in rows:
        methods = INDEPENDENT_OF_DRAWS.get(str(verified[i]), ())
        if reliable[i] and (methods is None or str(result.method[i]) in methods):
            continue
        why = (f"chains disagree: rank-normalised split R-hat {rhat[i]:.3g} of its "
               "log-likelihood > 1.01" if np.isfinite(rhat[i]) and rhat[i] > 1.01 else
               "chains disagree: a chain is stuck at one value of its log-likelihood")
        reliable[i] = False
        verified[i] = ""
        if "chains disagree" not in str(reason[i]):  # last: the reason that decides
            reason[i] = add_reason(reason[i], why)
    return dataclasses.replace(result, reliable=reliable, verified_by=verified, reason=reason)


def _warn_disagreeing(rows, rhat, var_name, reliable) -> None:
    """One warning naming the rows whose posterior chains disagree, and saying which of them
    still have no verified estimate (``reliable`` after the fold) and which a verification
    independent of those draws (MixIS on its own mixture draws, a refit) covers."""
    import warnings

    from loo_adapt.result import observation_label

    name = var_name or "log_lik"
    worst = float(np.nanmax(rhat[rows])) if np.isfinite(rhat[rows]).any() else float("nan")
    left = rows[~np.asarray(reliable, dtype=bool)[rows]]
    if left.size == rows.size:
        fate = ("no PSIS or adapted estimate of them is verified: run the chains longer, "
                "check the sampler, or refit them (fallback=('refit',))")
    elif left.size:
        fate = (f"{rows.size - left.size} of them are verified independently of the posterior "
                f"draws (MixIS on its own mixture draws, or a refit); "
                f"{observation_label(left, name, limit=100)} have no verified estimate: run "
                "the chains longer, check the sampler, or refit them (fallback=('refit',))")
    else:
        fate = ("each is verified independently of the posterior draws (MixIS on its own "
                "mixture draws, or a refit), but the posterior fit's chains have not mixed on "
                "them: run them longer or check the sampler")
    warnings.warn(
        f"the chains disagree on the log-likelihood of {rows.size} observation(s) "
        f"(rank-normalised split R-hat > 1.01, largest {worst:.3g}, or a chain stuck at one "
        f"value; Vehtari et al. 2021): {observation_label(rows, name, limit=100)}; {fate}",
        UserWarning, stacklevel=4)


def divergent_note(draws) -> str:
    """"" or the note that the posterior fit (MCMC draws carrying Stan's ``divergent__``)
    has divergent transitions: Stan's own warning that the draws may miss part of the
    posterior, which every estimate resting on them inherits.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> d = SimpleNamespace(method="mcmc", sample_stats={"divergent__": np.eye(2, 4)})
    >>> divergent_note(d)[:56]
    'the posterior fit has 2 divergent transitions in 8 draws'
    """
    from loo_adapt.estimators.mixture_checks import divergent_count

    if draws is None or str(getattr(draws, "method", "")) != "mcmc":
        return ""
    k, n = divergent_count(draws)
    if k == 0:
        return ""
    return (f"the posterior fit has {k} divergent transition{'s' if k > 1 else ''} in "
            f"{n} draws (Stan's warning: its draws may miss part of the posterior); "
            "the estimates resting on them (rows verified by PSIS k-hat, adapted or pooled "
            "rows, the mixture fit started from them) inherit what they miss, which no "
            "check on those draws can see: refit with a higher adapt_delta or a "
            "reparameterised program")


def run_stages(ctx: Context, result, stages) -> Any:
    """Fold the stages over ``result``: each estimator sees the rows its stage asks for, and
    `PointwiseLoo.merge` writes what the stage accepts.  Each stage's history entry records
    its wall time (``seconds``, including fits it triggers, e.g. the mixture fit).

    Rows whose posterior chains disagree (`Context.chains_disagree`) start unreliable, and
    after the fold only a verification independent of those draws (a refit, MixIS on its
    own mixture draws) leaves them reliable; one warning names them.  A posterior fit with
    divergent transitions gets a warning and a note (`divergent_note`)."""
    import time

    flagged = ctx.chains_disagree
    if flagged is not None and flagged[0].size:
        result = _mark_disagreeing(result, *flagged)
    for stage in stages:
        rows = rows_of(result, stage.rows)
        if rows.size == 0:
            continue
        t0 = time.perf_counter()
        ctx.result = result
        est = stage.estimator(ctx, rows)
        if len(est.rows) == 0 and not est.notes:  # a stage with nothing to change
            continue
        accept = None if stage.accept == "all" else est.reliable
        result = result.merge(est, accept=accept)
        if result.history:
            result.history[-1]["seconds"] = time.perf_counter() - t0
    if flagged is not None and flagged[0].size:
        result = _mark_disagreeing(result, *flagged)
        _warn_disagreeing(flagged[0], flagged[1], ctx.var_name, result.reliable)
    note = divergent_note(getattr(ctx, "draws", None))
    if note:
        import dataclasses
        import warnings

        warnings.warn(note, UserWarning, stacklevel=3)
        result = dataclasses.replace(result, notes=list(result.notes) + [note])
    return result
