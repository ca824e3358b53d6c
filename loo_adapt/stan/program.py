"""`StanProgram`: a Stan program plus its data, everything LOO needs beyond the user's draws.

The LOO pipeline needs a model for three things the draws alone cannot give: a second fit
(the mixture-IS proposal), refits without one observation (exact LOO), and the log density
on the unconstrained scale (full-space moment matching).  This class bundles the program
and the data once so each of those is one call (an edge module: it runs Stan backends).

Dropping an observation is generic: every data entry whose leading dimension is the number
of observations loses that row and the count shrinks by one.  The count is the data entry
that sizes ``log_lik`` in generated quantities (``vector[J] log_lik;`` -> ``J``; the
program's text says so), else ``N``, else the one named by ``n_obs_var``.  When another size
variable has the same value (``D == N``, ``K == N``) a leading dimension of ``N`` no longer
says "one row per observation", so the per-observation entries must be named
(``obs_dim_vars``).

The held-out log-likelihood of a refit is recomputed by the program itself: the refit's
draws are unconstrained with the *full-data* model and its generated quantities
``log_lik`` are evaluated, entry i.  This is valid for any program whose parameter
dimensions do not depend on ``N`` (a mismatch raises); the bundled programs also have a
closed form in numpy (:func:`loo_adapt.stan.backends.heldout_log_lik`), used by default for them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np

from loo_adapt.draws import Draws
from loo_adapt.stan import backends as _stan
from loo_adapt.stan import stan_source as _src

__all__ = ["StanProgram", "count_entry", "log_lik_size"]


_MIXIS_DATA = ("mixis", "mixis_n_rows", "mixis_rows")
_MIXIS_DECL = re.compile(r"\bint\s*<[^>]*>\s*mixis\s*;|\bint\s+mixis\s*;")


def _check_index(i, n: int) -> int:
    if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
        raise TypeError(f"observation index must be an integer, got {i!r}")
    if not 0 <= i < n:
        raise IndexError(f"observation index {i} out of range for N = {n}")
    return int(i)


def _is_size_scalar(value) -> bool:
    """An integer scalar (a candidate dimension of some data entry)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, np.integer)):
        return True
    return isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iu"


def _leading_dim(value) -> int | None:
    if isinstance(value, (str, bytes)) or np.ndim(value) == 0:
        return None
    return len(value)


def log_lik_size(code: str, log_lik: str = "log_lik") -> str | None:
    """The size of ``log_lik``'s top-level declaration in generated quantities when it is
    one name (``vector[J] log_lik;`` -> ``"J"``), else None; the declaration is read as the
    mixis rewrite reads it (`loo_adapt.stan.mixis_program`).

    Examples
    --------
    >>> log_lik_size("data { int J; } generated quantities { vector[J] log_lik; }")
    'J'
    """
    from loo_adapt.stan.mixis_program import MixisProgramError, _size

    try:
        masked = _src.mask(code)
        blks = _src.blocks(masked)
        if "generated quantities" not in blks:
            return None
        _, g_open, g_end = blks["generated quantities"]
        stmts = _src.parse(masked, g_open + 1, g_end - 1)
        decl = next((st for st in stmts if st.kind == "decl" and log_lik in st.declares), None)
        size = None if decl is None else _size(_src.text_of(masked, decl), log_lik)
    except (_src.SourceError, MixisProgramError):
        return None
    return size if size is not None and re.fullmatch(r"[A-Za-z]\w*", size) else None


def count_entry(stan_file, data: Mapping, log_lik: str = "log_lik") -> str:
    """The data entry counting a program's observations: the integer entry that sizes
    ``log_lik`` in its generated quantities (`log_lik_size`), else ``N``.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "m.stan"
    >>> _ = f.write_text("data { int J; } generated quantities { vector[J] log_lik; }")
    >>> count_entry(f, {"J": 8}), count_entry(f, {"N": 8})
    ('J', 'N')
    """
    try:
        code = _src.program_text(stan_file)
    except (OSError, UnicodeDecodeError, _src.SourceError):
        return "N"
    size = log_lik_size(code, log_lik)
    return size if size is not None and _is_size_scalar(data.get(size)) else "N"


class StanProgram:
    """A Stan program (bundled name or ``.stan`` path) with its data.

    Parameters
    ----------
    stan_file_or_bundled_name : "logistic_normal", "logistic_rhs", "relu_net" (or a fixture
        alias) or the path of a ``.stan`` file. The program must write
        ``generated quantities { vector[N] log_lik; }``.
    data : dict or JSON file. For a program that declares ``int mixis;`` the flag defaults
        to 0 (the posterior), and, where the program declares them, ``mixis_n_rows`` to 0
        and ``mixis_rows`` to an empty array (a mixture over every row).
    backend : "auto" (CmdStan if installed, else stanli, else PyStan) or one backend name.
    fit_kwargs : default keyword arguments of every fit (e.g. ``adapt_delta``).
    obs_dim_vars : names of the per-observation data entries (their leading axis is the
        observation), or a mapping name -> observation axis. None detects them: every entry
        whose leading dimension equals the number of observations.
    log_lik : name of the pointwise log-likelihood generated quantity.
    n_obs_var : the data entry holding the number of observations (the one a refit reduces
        by one).  None: the integer data entry that sizes ``log_lik`` in generated
        quantities (``vector[J] log_lik;`` -> ``J``), else ``N``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(6, 2))
    >>> from loo_adapt.stan.backends import stan_data
    >>> prog = StanProgram("logistic_normal", stan_data("logistic_normal", X, [0, 1] * 3))
    >>> prog.n_obs, prog.data_without(0)["N"]
    (6, 5)
    """

    def __init__(
        self,
        stan_file_or_bundled_name,
        data,
        *,
        backend: str = "auto",
        fit_kwargs: Mapping | None = None,
        obs_dim_vars: Sequence[str] | Mapping[str, int] | None = None,
        log_lik: str = "log_lik",
        n_obs_var: str | None = None,
    ):
        self.stan_file, self.name = _stan._resolve_program(stan_file_or_bundled_name)
        self._declares_mixis = bool(_MIXIS_DECL.search(_src.program_text(self.stan_file)))
        # validates the bundled programs' data (X finite, y 0/1, N/D consistent) up front
        self.data = _stan._prepare_data(self.stan_file, self.name, data, False)
        if backend != "auto" and backend not in _stan.BACKENDS:
            raise ValueError(
                f"backend must be 'auto' or one of {list(_stan.BACKENDS)}, got {backend!r}"
            )
        self.backend = backend
        if fit_kwargs is not None and not isinstance(fit_kwargs, Mapping):
            raise TypeError(f"fit_kwargs must be a dict, got {type(fit_kwargs).__name__}")
        self.fit_kwargs = dict(fit_kwargs or {})
        reserved = {"mixis", "chains", "draws", "warmup", "seed", "backend"} & set(self.fit_kwargs)
        if reserved:
            raise ValueError(
                f"fit_kwargs must not set {sorted(reserved)}: pass them to fit()/refit_without()"
            )
        self.log_lik_name = log_lik
        self.n_obs_var = self._find_n_obs_var(n_obs_var)
        self.obs_dim_vars = self._check_obs_dim_vars(obs_dim_vars)
        self._log_density = None
        self._reduced_densities: dict[int, object] = {}  # log_density_without(i)
        self._flagged = None  # with_mixis(), written once
        self._by_term = None  # leaves_out_by_term(), decided once
        self.by_term_reason: str | None = None

    # ---- pickling: the bridgestan model holds ctypes handles; workers rebuild it ----------
    def __getstate__(self):
        state = self.__dict__.copy()
        state["_log_density"] = None
        state["_reduced_densities"] = {}
        return state

    def __repr__(self) -> str:
        what = self.name or str(self.stan_file)
        size = self.n_obs_var
        n = self.data.get(size, "?")
        return f"StanProgram({what!r}, {size}={n}, backend={self.backend!r})"

    # ---- data -----------------------------------------------------------------------------
    def _find_n_obs_var(self, given: str | None) -> str:
        """The data entry counting the observations: ``given``, else the integer data entry
        sizing ``log_lik`` in generated quantities, else ``N``."""
        if given is not None:
            if not isinstance(given, str) or given not in self.data:
                raise ValueError(f"n_obs_var={given!r} is not a data entry; the data has "
                                 f"{sorted(self.data)}")
            return given
        return count_entry(self.stan_file, self.data, self.log_lik_name)

    @property
    def n_obs(self) -> int:
        """Number of observations: the data entry ``n_obs_var`` (``N`` unless the program
        sizes ``log_lik`` by another)."""
        size = self.n_obs_var
        if size not in self.data:
            raise ValueError(
                f"the data has no {size}: leave-one-out needs the number of observations as "
                f"a data entry (N, or the one that sizes {self.log_lik_name} in generated "
                "quantities; StanProgram(..., n_obs_var=...) names another)"
            )
        n = self.data[size]
        if not _is_size_scalar(n):
            raise TypeError(f"data entry {size} must be an integer, got {n!r}")
        return int(n)

    @property
    def declares_mixis(self) -> bool:
        """True if the program has the ``int mixis`` data flag."""
        return self._declares_mixis

    @property
    def y(self) -> np.ndarray | None:
        """The data's ``y`` when it is a binary (0/1) outcome vector of length N, else None."""
        if "y" not in self.data or self.n_obs_var not in self.data:
            return None
        y = np.asarray(self.data["y"])
        if y.ndim != 1 or y.shape[0] != self.n_obs or y.dtype.kind not in "biuf":
            return None
        if not np.all((y == 0) | (y == 1)):
            return None
        return y.astype(np.int64)

    def _check_obs_dim_vars(self, obs_dim_vars) -> dict[str, int] | None:
        if obs_dim_vars is None:
            return None
        if isinstance(obs_dim_vars, str):
            raise TypeError("obs_dim_vars must be a list of names, not a single string")
        if isinstance(obs_dim_vars, Mapping):
            axes = dict(obs_dim_vars)
        else:
            axes = {name: 0 for name in obs_dim_vars}
        n = self.n_obs
        for name, axis in axes.items():
            if name not in self.data:
                raise ValueError(f"obs_dim_vars names {name!r}, which is not in the data")
            if name == self.n_obs_var:
                raise ValueError(f"obs_dim_vars must not contain {name} itself (it is reduced "
                                 "anyway)")
            shape = np.shape(self.data[name])
            if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
                raise TypeError(f"axis of {name!r} must be an integer, got {axis!r}")
            if not 0 <= axis < len(shape) or shape[axis] != n:
                raise ValueError(
                    f"data entry {name!r} has shape {shape}: axis {axis} is not of length "
                    f"{self.n_obs_var} = {n}"
                )
        return axes

    def observation_vars(self) -> dict[str, int]:
        """The data entries that hold one row per observation, with their observation axis."""
        if self.obs_dim_vars is not None:
            return dict(self.obs_dim_vars)
        n = self.n_obs
        # the mixture-IS flags are never per-observation (mixis_rows may have N entries)
        skip = (self.n_obs_var,) + _MIXIS_DATA
        rest = {k: v for k, v in self.data.items() if k not in skip}
        per_obs = {k: 0 for k, v in rest.items() if _leading_dim(v) == n}
        twins = sorted(k for k, v in rest.items() if _is_size_scalar(v) and int(v) == n)
        if twins and per_obs:
            raise ValueError(
                f"cannot tell which data entries are per-observation: {twins} "
                f"{'equals' if len(twins) == 1 else 'equal'} {self.n_obs_var} = {n}, so entries "
                "with a leading "
                f"dimension of {n} ({sorted(per_obs)}) may be indexed by either; pass "
                "obs_dim_vars=[...] naming the per-observation entries"
            )
        if not per_obs:
            raise ValueError(
                f"no data entry has a leading dimension equal to {self.n_obs_var} = {n}; pass "
                "obs_dim_vars"
            )
        return per_obs

    def data_without(self, i) -> dict:
        """The data without observation ``i`` (0-based): per-observation rows dropped, the
        count ``n_obs_var`` (``N``) one less.

        ``i`` may also be a sequence of distinct indices (a K-fold fold): all of them are
        dropped and the count shrinks by their number.
        """
        n = self.n_obs
        if np.ndim(i) == 0:
            rows = np.array([_check_index(i, n)])
        else:
            rows = np.array([_check_index(j, n) for j in i], dtype=np.int64)
            if rows.size == 0 or len(np.unique(rows)) != rows.size:
                raise ValueError("the rows to leave out must be distinct and at least one")
        if n - rows.size < 1:
            raise ValueError("cannot leave out every observation")
        out = dict(self.data)
        for name, axis in self.observation_vars().items():
            out[name] = np.delete(np.asarray(self.data[name]), rows, axis=axis)
        out[self.n_obs_var] = n - rows.size
        return out

    # ---- fits -----------------------------------------------------------------------------
    def _fit_options(self, kw: dict) -> dict:
        opts = {**self.fit_kwargs, **kw}
        opts.setdefault("backend", self.backend)
        return opts

    def fit(self, *, mixis: bool = False, seed: int = 1, executor=None, checkpoint=None,
            timeout: float | None = None, n_jobs: int | None = None, **kw) -> Draws:
        """NUTS fit of the program on the full data (``mixis=True``: the MixIS proposal).

        Keyword arguments go to :func:`loo_adapt.stan.backends.fit` (chains, draws, warmup,
        adapt_delta, ...), over ``fit_kwargs``.

        With ``executor``, ``checkpoint``, ``timeout`` or ``n_jobs`` the chains run as
        separate single-chain jobs (chain c with seed ``seed + c``) on the executor of
        :mod:`loo_adapt.stan.pool` (None: local worker processes, workers <= cores), each
        finished chain saved to ``checkpoint`` (a rerun with it fits only missing chains),
        and are combined; a chain that fails or runs past ``timeout`` is left out with a
        warning (an error if none is left).

        Examples
        --------
        >>> mix = prog.fit(mixis=True, chains=4, executor=client)  # doctest: +SKIP
        """
        if mixis and not self._declares_mixis:
            from loo_adapt.stan.mixis_program import _howto

            raise ValueError(
                f"mixis=True needs the program to declare the mixture-IS flag in its data "
                f"block, and {self.stan_file.name} does not: use program.with_mixis(), or "
                f"{_howto(self.log_lik_name)}"
            )
        if executor is None and checkpoint is None and timeout is None and n_jobs is None:
            return _stan.fit(self.stan_file, self.data, mixis=mixis, seed=seed,
                             **self._fit_options(kw))
        return self._fit_chains(mixis, seed, executor, checkpoint, timeout, n_jobs, kw)

    def _fit_chains(self, mixis, seed, executor, checkpoint, timeout, n_jobs, kw) -> Draws:
        from loo_adapt.stan.chain_jobs import fit_chains

        return fit_chains(self, mixis, seed, executor, checkpoint, timeout, n_jobs, kw)

    def refit_without(self, i, *, seed: int, chains: int = 4, draws: int = 1000,
                      warmup: int = 1000, parallel_chains: int | None = None,
                      adapt_delta: float | None = None) -> Draws:
        """Exact LOO refit: NUTS on the data without observation ``i`` (or rows ``i``).

        ``parallel_chains`` caps the chains run at once (None: the backend's default), so
        that refits running side by side do not oversubscribe the cores; ``adapt_delta``
        overrides ``fit_kwargs``'s (the rerun of a refit with divergent transitions).

        Where dropping an observation's data changes the parameters (`leaves_out_by_term`:
        a parameter per observation), the refit is NUTS on the full data with that
        observation's ``log_lik`` term taken out of the target instead (the mixis-flagged
        program with ``mixis_rows = [i]``: ``target += -log_lik[i]``), the same
        leave-one-out posterior p(theta | y) / p(y_i | theta) that PSIS and MixIS estimate;
        its draws keep every parameter, so the held-out ``log_lik[i]`` is the program's own.
        """
        opts = self._fit_options({} if adapt_delta is None else {"adapt_delta": adapt_delta})
        if parallel_chains is not None:
            opts["parallel_chains"] = parallel_chains
        if self.leaves_out_by_term():
            stan_file, data = self.without_terms(i)
        else:
            stan_file, data = self.stan_file, self.data_without(i)
        return _stan.fit(stan_file, data, seed=seed, chains=chains, draws=draws,
                         warmup=warmup, **opts)

    def leaves_out_by_term(self) -> bool:
        """Whether a refit takes the observation's ``log_lik`` term out of the full-data
        target (True) instead of dropping its data (False).

        True where dropping one observation's data changes the number of parameters (eight
        schools' ``theta[J]``: the refit's draws would not say ``theta_j``, so no held-out
        ``log_lik[j]`` follows from them), and where it changes the other observations'
        terms while the observation's outcome enters the target only through ``log_lik``
        (predictors centred on their means in transformed data, as brms writes them:
        `loo_adapt.stan.leave_out`), and where no data entry has a row per observation but
        each row of the outcome enters only its group's ``log_lik`` (leave one group out:
        `loo_adapt.stan.leave_out.grouped_entry`); `by_term_reason` says which.  Decided
        once, by loading the model with the reduced data (at the fit's draws where ``loo()``'s
        identity check ran first, else at seeded standard-normal points)."""
        if self._by_term is None:
            from loo_adapt.stan.leave_out import couples_through_data

            full = self.log_density().n_params
            try:
                reduced = self.log_density_without(0)
            except Exception:  # noqa: BLE001 - the data cannot drop a row: couples_through_data
                reduced = None  # decides (by term where each row enters one log_lik only)
            if reduced is not None and reduced.n_params != full:
                self._by_term = True
                self.by_term_reason = (
                    f"dropping an observation's data changes the parameters ({full} "
                    f"unconstrained with every row, {reduced.n_params} without one)")
            else:
                self.leave_out_by_term(couples_through_data(self))
        return self._by_term

    def leave_out_by_term(self, reason: str | None) -> None:
        """Record how refits leave an observation out, as a check at draws found it:
        by term with ``reason`` (`loo_adapt.stan.leave_out`), or by dropping the data row
        (None)."""
        self._by_term = reason is not None
        self.by_term_reason = reason

    def without_terms(self, rows) -> tuple:
        """(stan file, data) of the full-data target without the ``log_lik`` term of the
        observation ``rows`` (0-based), or of each of several (a K-fold fold): the program
        with the mixis flag (`with_mixis`), with ``mixis = 1`` over one row
        (``log_sum_exp`` of one term is the term), ``mixis = 2`` over several.

        Raises
        ------
        ValueError
            The flagged program declares no ``mixis_rows``, or, for several rows, flags only
            ``mixis`` 0 / 1 (a program flagged by hand before ``mixis = 2``)."""
        from loo_adapt.stan.mixis_program import declares_fold_terms, declares_mixis_rows

        rows = np.unique(np.atleast_1d(np.asarray(rows)))
        flagged = self.with_mixis()
        code = _src.program_text(flagged.stan_file)
        if not declares_mixis_rows(code):
            raise ValueError(
                f"{flagged.stan_file.name} has parameters per observation and declares only "
                "the mixis flag, not mixis_n_rows / mixis_rows, so no refit can take one "
                "observation's term out; declare them as StanProgram.with_mixis() writes them")
        stan_rows = [_check_index(int(r), self.n_obs) + 1 for r in rows]  # 1-based
        data = dict(flagged.data)
        if rows.size == 1:  # log_sum_exp of one term: the flag of programs of any age
            data.update(mixis=1, mixis_n_rows=1, mixis_rows=stan_rows)
        elif declares_fold_terms(code):
            data.update(mixis=2, mixis_n_rows=len(stan_rows), mixis_rows=stan_rows)
        else:
            raise ValueError(
                f"{flagged.stan_file.name}: a refit takes the observations' log_lik terms out "
                f"of the target ({self.by_term_reason or 'dropping its data changes the model'})"
                "; its flag takes out one row at a time (leave-one-out), not a fold of "
                "several: declare `int<lower=0, upper=2> mixis;` and end the model block with "
                "`target += -sum(log_lik_local[mixis_rows]);` under `mixis == 2`, as "
                "StanProgram.with_mixis() writes them for a program without the flag")
        return flagged.stan_file, data

    def compiled(self) -> StanProgram:
        """This program with its backend resolved and its model compiled, ready for workers.

        CmdStan compiles the executable here, once, into the cache every worker then reuses
        (so no refit's time includes a compile); ``backend="auto"`` is resolved so workers do
        not probe for backends again. Returns a shallow copy; ``self`` is unchanged.

        Returns
        -------
        StanProgram

        Examples
        --------
        >>> prog = StanProgram("logistic_normal", data)  # doctest: +SKIP
        >>> prog.compiled().backend in ("cmdstan", "stanli", "pystan")  # doctest: +SKIP
        True
        """
        import copy

        self.leaves_out_by_term()  # decided here, once, not in every worker
        out = copy.copy(self)
        out.backend = _stan.select_backend(self.backend)
        if out.backend == "cmdstan":
            _stan.compile_model(self.stan_file)
            if self._by_term:  # the refits fit the flagged program
                _stan.compile_model(self.with_mixis().stan_file)
        return out

    # ---- log densities --------------------------------------------------------------------
    def log_density(self):
        """The full-data model on the unconstrained scale (cached ``StanLogDensity``)."""
        if self._log_density is None:
            from loo_adapt.stan.log_density import StanLogDensity

            self._log_density = StanLogDensity.from_stan(
                self.stan_file, _stan._jsonable(self.data), log_lik=self.log_lik_name
            )
        return self._log_density

    def log_density_without(self, i: int):
        """The model on the data without observation ``i`` (0-based), unconstrained scale:
        the ``StanLogDensity`` of `data_without`, cached per observation like
        `log_density` (the identity check of every ``loo()`` call with this program reads
        the same few observations' models)."""
        i = _check_index(i, self.n_obs)
        if i not in self._reduced_densities:
            from loo_adapt.stan.log_density import StanLogDensity

            self._reduced_densities[i] = StanLogDensity.from_stan(
                self.stan_file, _stan._jsonable(self.data_without(i)),
                log_lik=self.log_lik_name)
        return self._reduced_densities[i]

    def heldout_log_lik(self, refit_draws: Draws, i: int, *, method: str = "auto") -> np.ndarray:
        """log p(y_i | theta_s) at the draws of a refit without i, shape (S,), chains stacked.

        ``method="generic"``: unconstrain the draws with the full-data model and recompute its
        generated ``log_lik``, entry i (any program whose parameter sizes do not depend on N).
        ``"numpy"``: the closed form of a bundled program. ``"auto"``: numpy for bundled
        programs, generic otherwise.
        """
        if not isinstance(refit_draws, Draws):
            raise TypeError(f"refit_draws must be a Draws, got {type(refit_draws).__name__}")
        i = _check_index(i, self.n_obs)
        if method not in ("auto", "generic", "numpy"):
            raise ValueError(f"method must be 'auto', 'generic' or 'numpy', got {method!r}")
        if method == "auto":
            method = "numpy" if self.name is not None else "generic"
        if method == "numpy":
            if self.name is None:
                raise ValueError(
                    f"method='numpy' needs a bundled program; {self.stan_file.name} is not one"
                )
            X = np.asarray(self.data["X"], dtype=np.float64)
            return _stan.heldout_log_lik(self.name, refit_draws, X[i], int(self.data["y"][i]))
        model = self.log_density()
        if model.n_obs != self.n_obs or len(model.log_lik_shape) > 1:
            raise ValueError(
                f"generated quantity {self.log_lik_name!r} has shape {model.log_lik_shape}; the "
                f"held-out term needs a vector of length N = {self.n_obs}"
            )
        try:
            U = model.unconstrain(refit_draws)
        except ValueError as err:
            raise ValueError(
                f"the refit's draws do not fit the full-data program ({err}); the generic "
                "held-out log-likelihood needs parameter dimensions that do not depend on N"
            ) from None
        ll = model.log_lik(U, i)
        if np.isnan(ll).any():
            bad = int(np.isnan(ll).sum())
            raise ValueError(
                f"the program rejected {bad} of {ll.size} refit draws when recomputing "
                f"log_lik[{i + 1}]"
            )
        return ll

    # ---- mixture IS without writing Stan ------------------------------------------------------
    @classmethod
    def from_model(cls, model, **kwargs) -> StanProgram:
        """The bundled program (and data) encoding a model family with complete priors.

        Parameters
        ----------
        model : LogisticRegression or ReLUNet
            A family whose priors a bundled program has exactly (see
            `loo_adapt.models.registry.bundled_program_for`); its ``X`` and ``y`` are the data.
        **kwargs
            ``backend``, ``fit_kwargs``, ... of :class:`StanProgram`.

        Returns
        -------
        StanProgram
            The bundled program with the family's data and prior settings (``mixis = 0``), so
            ``fit(mixis=True)`` samples the mixture-IS proposal of the same model.

        Raises
        ------
        ValueError
            When the priors cannot be mapped to a bundled program exactly (e.g. a horseshoe
            without its hyperprior settings, a Student-t prior).

        Examples
        --------
        >>> from loo_adapt.models import LogisticRegression, Normal
        >>> model = LogisticRegression(X, y, intercept="alpha", prior=Normal(1.0),
        ...                            intercept_prior=Normal(2.5))  # doctest: +SKIP
        >>> StanProgram.from_model(model).fit(mixis=True)  # doctest: +SKIP
        """
        from loo_adapt.models.registry import bundled_program_for

        name, priors = bundled_program_for(model)
        return cls(name, _stan.stan_data(name, model.X, model.y, **priors), **kwargs)

    def with_mixis(self) -> StanProgram:
        """This program with the mixture-IS data flag ``mixis`` (itself if it has one).

        The flagged variant is written to the cache: the statements of generated quantities
        that ``log_lik`` depends on are copied into the model block as a local vector
        ``log_lik_local``, and the data block gains ``mixis``, ``mixis_n_rows`` and
        ``mixis_rows``, see `loo_adapt.stan.mixis_program.add_mixis_flag`.

        Returns
        -------
        StanProgram
            Same data (plus ``mixis = 0``, ``mixis_n_rows = 0``, empty ``mixis_rows``: the
            mixture over every row), backend and options.

        Raises
        ------
        loo_adapt.stan.mixis_program.MixisProgramError
            When ``log_lik`` cannot be copied automatically; the message gives the two lines
            to add by hand.

        Examples
        --------
        >>> prog = StanProgram("my_model.stan", data).with_mixis()  # doctest: +SKIP
        >>> mixture_draws = prog.fit(mixis=True)  # doctest: +SKIP
        """
        if self._declares_mixis:
            return self
        if self._flagged is None:  # the rewrite (and its compile check) runs once
            from loo_adapt.stan.mixis_program import flagged_program_path

            path = flagged_program_path(self.stan_file, log_lik=self.log_lik_name)
            data = {k: v for k, v in self.data.items()
                     if k not in ("mixis", "mixis_n_rows", "mixis_rows")}
            data["mixis"] = 0
            self._flagged = type(self)(path, data, backend=self.backend,
                                       fit_kwargs=self.fit_kwargs,
                                       obs_dim_vars=self.obs_dim_vars,
                                       log_lik=self.log_lik_name, n_obs_var=self.n_obs_var)
        return self._flagged

    def fit_mixture(self, posterior: Draws | None = None, *, seed: int = 1, **kw) -> Draws:
        """Draws of the mixture-IS proposal, warm-started from ``posterior`` when given.

        Parameters
        ----------
        posterior : Draws or None
            Posterior draws of this program and data: their unconstrained variance is the
            inverse metric, their step size the first step size, and chains start at them.
            None: the default cold fit, ``fit(mixis=True)``.
        seed : int
            Sampler seed.
        **kw
            ``chains``, ``draws``, ``warmup``, ``rows`` (a mixture focused on those
            observations' leave-one-out posteriors) of
            `loo_adapt.stan.mixture_fit.fit_mixture`.

        Returns
        -------
        Draws

        Examples
        --------
        >>> mix = program.fit_mixture(posterior, chains=8, draws=250)  # doctest: +SKIP
        """
        from loo_adapt.stan.mixture_fit import fit_mixture

        program = self if self._declares_mixis else self.with_mixis()
        return fit_mixture(program, posterior, seed=seed, **kw)
