"""Mixture-IS fits: draws of a flagged program's mixture (`loo_adapt.stan.mixis_program`),
warm-started from the posterior fit (an edge module: it runs Stan).

:func:`fit_mixture` samples the mixture with the posterior fit as a pilot: inverse metric
(diagonal) from the variance of the posterior draws on the unconstrained scale, step size from
the posterior fit's ``stepsize__``, one posterior draw as each chain's start, and a short
warm-up that adapts the step size only (under 150 warm-up iterations Stan keeps a supplied
metric).  A mixture over some rows only (a focused fit) sets ``mixis_rows``.
``benchmarks/bench_mixis_fit.py`` measures it against the default mixture fit.
"""

from __future__ import annotations

import numpy as np

from loo_adapt.draws import Draws
from loo_adapt.estimators.mixture_checks import MAX_DIVERGENT_SHARE, divergent_count
from loo_adapt.stan import backends as _stan
from loo_adapt.stan import stan_source as _src
from loo_adapt.stan.mixis_program import declares_mixis_rows

__all__ = ["warm_start", "fit_mixture", "RETRY_SEED_OFFSET"]


def _rows_data(program, rows) -> dict:
    """The data entries of a focused mixture over ``rows`` (0-based), or {} for all."""
    if rows is None:
        return {}
    r = np.asarray(rows)
    if r.ndim != 1 or r.size == 0 or r.dtype.kind not in "iu":
        raise ValueError(f"rows must be a non-empty 1-D sequence of integers, got {rows!r}")
    n = program.n_obs
    if r.min() < 0 or r.max() >= n or np.unique(r).size != r.size:
        raise ValueError(f"rows must be distinct observation indices in [0, {n}), got {rows!r}")
    if not declares_mixis_rows(_src.program_text(program.stan_file)):
        raise ValueError(
            f"{program.stan_file.name} cannot mix only some rows: its data block must declare "
            "`int<lower=0> mixis_n_rows;` and `array[mixis_n_rows] int<lower=1> mixis_rows;` "
            "and its model block add `target += log_sum_exp(-log_lik_local[mixis_rows]);` "
            "when mixis_n_rows > 0")
    return {"mixis_n_rows": int(r.size), "mixis_rows": [int(i) + 1 for i in np.sort(r)]}


def _with_data(program, extra: dict):
    import copy

    out = copy.copy(program)
    out.data = {**program.data, **extra}
    return out


# --------------------------------------------------------------------------- warm start
def warm_start(program, posterior: Draws, *, chains: int, seed: int = 1) -> dict:
    """Sampler settings for the mixture fit taken from a posterior fit of the same program.

    Parameters
    ----------
    program : loo_adapt.stan.program.StanProgram
        The program (with the ``mixis`` flag) whose mixture is to be sampled.
    posterior : Draws
        Posterior draws of the same program and data (any backend, CSV or arrays).
    chains : int
        Number of mixture chains; each starts at a different posterior draw.
    seed : int
        Seed of the choice of starting draws.

    Returns
    -------
    dict
        ``inits`` (chains, P) unconstrained starts, ``inv_metric`` (P,) the variance of the
        unconstrained posterior draws, ``step_size`` the posterior fit's mean step size (None
        when the draws carry no ``stepsize__``), and ``inits_constrained`` (one dict of
        parameter values per chain, for CmdStan).

    Examples
    --------
    >>> opts = warm_start(program, posterior, chains=8)  # doctest: +SKIP
    >>> opts["inv_metric"].shape  # doctest: +SKIP
    (34,)
    """
    if not isinstance(posterior, Draws):
        raise TypeError(f"posterior must be a Draws, got {type(posterior).__name__}")
    density = program.log_density()
    U = density.unconstrain(posterior)
    if not np.all(np.isfinite(U)):
        raise ValueError("the posterior draws have non-finite values on the unconstrained scale")
    if U.shape[0] < 2:
        raise ValueError("a warm start needs at least two posterior draws")
    inv_metric = U.var(axis=0, ddof=1)
    inv_metric = np.where(inv_metric > 0, inv_metric, 1.0)
    rng = np.random.default_rng(seed)
    pick = rng.choice(U.shape[0], size=chains, replace=U.shape[0] < chains)
    step = posterior.sample_stats.get("stepsize__")
    step_size = float(np.mean(step)) if step is not None and np.size(step) else None
    flat = {name: posterior.flat(name) for name, _, _ in density._block}
    inits_constrained = [{name: v[s].tolist() if np.ndim(v[s]) else float(v[s])
                          for name, v in flat.items()} for s in pick]
    return {"inits": U[pick], "inv_metric": inv_metric, "step_size": step_size,
            "inits_constrained": inits_constrained}


def fit_mixture(
    program,
    posterior: Draws | None = None,
    *,
    chains: int = 4,
    warmup: int | None = None,
    draws: int = 1000,
    seed: int = 1,
    rows=None,
    parallel_chains: int | None = None,
    max_treedepth: int | None = None,
    retry_divergent: bool = True,
) -> Draws:
    """Draws of the mixture-IS proposal, warm-started from a posterior fit when one is given.

    Parameters
    ----------
    program : loo_adapt.stan.program.StanProgram
        A program with the ``mixis`` flag (bundled, or from ``StanProgram.with_mixis()``).
    posterior : Draws or None
        Posterior draws of the same program and data. None: a cold fit
        (``program.fit(mixis=True)``, 1000 warm-up iterations unless ``warmup`` says otherwise).
    chains, draws : int
        Chains and kept draws per chain.
    warmup : int or None
        Warm-up iterations; None means 100 with a warm start (step size adapted, the
        posterior's metric kept: Stan adapts no metric below 150) and 1000 without.
    seed : int
        Sampler seed.
    rows : sequence of int or None
        Observations (0-based) whose leave-one-out posteriors alone are mixed (a *focused*
        mixture, ``p(theta | D) sum_{i in rows} 1 / l_i(theta)``): sets the data entries
        ``mixis_n_rows`` / ``mixis_rows`` (1-based), which the program must declare (see
        :func:`declares_mixis_rows`). None: every observation.
    parallel_chains : int or None
        Chains sampled at once (None: every chain, even past the cores, see the comment
        where it is set; the posterior fit and the refits, `loo_adapt.stan.backends.fit`,
        run at most one chain a core, as cmdstanpy does).
    max_treedepth : int or None
        NUTS's largest tree depth for the warm-started fit, at most the program's
        (``fit_kwargs["max_treedepth"]``, else 10); None: the program's.  A capped trajectory
        is still a valid MCMC transition, only a shorter one
        (`loo_adapt.estimators.focused.posterior_tree_depth`).
    retry_divergent : a warm-started fit with more than
        `loo_adapt.estimators.mixture_checks.MAX_DIVERGENT_SHARE` of its draws divergent is run once
        more at ``adapt_delta`` `loo_adapt.stan.refit.RETRY_ADAPT_DELTA` (smaller steps, as a
        refit with divergences is rerun), with another seed; the rerun replaces it (its
        ``source`` says so) unless it has more divergent draws.  MixIS verifies no row from
        a fit still above that share.

    Returns
    -------
    Draws
        The mixture draws (with ``log_lik``), for `loo_adapt.core.mixis.mixis_loo`.

    Examples
    --------
    >>> mix = fit_mixture(program, posterior, chains=8, draws=250)  # doctest: +SKIP
    """
    focus = _rows_data(program, rows)
    if posterior is None:
        if focus:
            program = _with_data(program, focus)
        return program.fit(mixis=True, seed=seed, chains=chains, draws=draws,
                           warmup=1000 if warmup is None else warmup)
    if not program.declares_mixis:
        raise ValueError(
            "fit_mixture needs a program with the mixis flag: use program.with_mixis()")
    warmup = 100 if warmup is None else warmup
    _stan._check_counts(chains, warmup, draws)
    opts = warm_start(program, posterior, chains=chains, seed=seed)
    data = dict(program.data)
    data["mixis"] = 1
    if focus:
        data.update(focus)
    elif declares_mixis_rows(_src.program_text(program.stan_file)):
        data.setdefault("mixis_n_rows", 0)
        data.setdefault("mixis_rows", [])
    backend = _stan.select_backend(program.backend)
    if parallel_chains is not None:
        _stan._check_counts(parallel_chains, 0, 1)
    # every chain at once by default, even past the cores (cmdstanpy and stanli run one a
    # core): the chains adapt their step sizes apart in the short warm-up, so their costs
    # differ (rhs_wide's easy-row fit: 255 to 1011 leapfrog steps a draw), and one a core
    # leaves a core idle while the slowest finishes, where time-sharing keeps both busy.
    # The draws are the same either way (each chain its own stream); 4 chains on 2 cores,
    # median of 3: rhs_wide's mixture fit 20.6 -> 17.0 s, rhs_logistic's 1.19 -> 1.06 s,
    # the others within 6 % (`benchmarks/results/mixture_chains_at_once.txt`)
    parallel = min(chains, parallel_chains or chains)
    kw = dict(program.fit_kwargs)
    delta = kw.get("adapt_delta") or 0.8
    depth = kw.get("max_treedepth", 10)
    capped = False
    if max_treedepth is not None:
        if int(max_treedepth) < 1:
            raise ValueError(f"max_treedepth must be at least 1, got {max_treedepth}")
        capped = int(max_treedepth) < depth
        depth = min(depth, int(max_treedepth))
    what = (f"focused mixis proposal ({len(focus['mixis_rows'])} rows)" if focus
            else "mixis proposal")
    out = _warm_fit(program, backend, data, opts, chains=chains, warmup=warmup, draws=draws,
                    seed=seed, delta=delta, depth=depth, capped=capped, parallel=parallel)
    out.source = (f"{backend} NUTS fit of {program.stan_file.name}, {what} warm-started "
                  f"from the posterior: {chains} chains x {draws} draws after {warmup} "
                  f"warm-up, max tree depth {depth}, seed {seed}")
    k, n = divergent_count(out)
    if retry_divergent and k > MAX_DIVERGENT_SHARE * n:
        from loo_adapt.stan.refit import RETRY_ADAPT_DELTA

        retry = max(float(delta), RETRY_ADAPT_DELTA)
        if retry > delta:
            again = _warm_fit(program, backend, data, opts, chains=chains, warmup=warmup,
                              draws=draws, seed=seed + RETRY_SEED_OFFSET, delta=retry,
                              depth=depth, capped=capped, parallel=parallel)
            again.source = (f"{out.source}; rerun at adapt_delta {retry:g}, seed "
                            f"{seed + RETRY_SEED_OFFSET}, after {k} divergent transitions "
                            f"in {n} draws at adapt_delta {delta:g}")
            again.config = {**again.config, "adapt_delta": retry,
                            "rerun_after_divergent": (f"{k} of {n} draws divergent at "
                                                      f"adapt_delta {delta:g}")}
            if divergent_count(again)[0] <= k:  # else the first fit, the less divergent
                out = again
    return out


#: seed offset of the rerun of a mixture fit with too many divergent transitions
RETRY_SEED_OFFSET = 1_000_003


def _warm_fit(program, backend, data, opts, *, chains, warmup, draws, seed, delta, depth,
              capped, parallel) -> Draws:
    """One warm-started NUTS fit of the flagged program (``opts``: `warm_start`'s)."""
    if backend == "stanli":
        import stanli

        from loo_adapt.io.readers import read_stanli
        from loo_adapt.stan.interrupts import signals_not_lost

        model = stanli.Model(stan_file=str(program.stan_file), data=_stan._jsonable(data),
                             seed=seed)
        with signals_not_lost():  # stanli may drop a Ctrl-C that lands as a fit ends
            fit = model.sample(
                chains=chains, seed=seed, warmup=warmup, samples=draws, delta=delta,
                max_depth=depth, refresh=0, inits=opts["inits"],
                inv_metric=opts["inv_metric"], step_size=opts["step_size"],
                parallel_chains=parallel,
            )
        out = read_stanli(fit)
    elif backend == "cmdstan":
        # a capped tree depth is the caller's choice: cmdstanpy's warning about iterations
        # at the cap would read as a convergence failure (divergences are noted by MixIS)
        with _stan.quiet_cmdstanpy(warnings_too=capped):
            result = _stan._cmdstan_model(program.stan_file).sample(
                data=_stan._jsonable(data), chains=chains, iter_warmup=warmup,
                iter_sampling=draws, seed=seed, adapt_delta=delta, max_treedepth=depth,
                show_progress=False, sig_figs=18, inits=opts["inits_constrained"],
                step_size=opts["step_size"], metric="diag_e", inv_metric=opts["inv_metric"],
                parallel_chains=parallel,
            )
        out = _stan.draws_from_cmdstanpy(result)
    else:
        raise NotImplementedError(
            "a warm-started mixture fit needs CmdStan or stanli (PyStan takes no metric); "
            "pass posterior=None for a cold fit")
    return out
