"""A Stan model's log density, gradient and pointwise log-likelihood in the unconstrained space.

Given a Stan program and its data (through a ``bridgestan.StanModel``, e.g. from
``stanli.bridgestan_model``), every parameter -- hyperparameters included -- lives in the
unconstrained space R^P where the log density ``log p(u | D)`` (with the change-of-variables
Jacobian) and its gradient are available, and ``param_constrain(..., include_gq=True)``
recomputes the pointwise log-likelihood.  Used by full-space moment matching
(`loo_adapt.estimators.moment_match`).
"""

from __future__ import annotations

import ctypes
import hashlib
import pathlib
import re

import numpy as np

__all__ = ["StanLogDensity", "UnsupportedProgramError", "bridgestan_model"]

#: `StanLogDensity.unconstrain` keeps its last result when it holds at most this many values
#: (8 x 2^20: 64 MiB)
_KEEP_VALUES = 8 * 2**20

class UnsupportedProgramError(RuntimeError):
    """No log-density interface here can run this program (stanli's interpreter lacks a
    function or type it uses, and BridgeStan cannot compile it). Says nothing against the
    program itself."""


#: words of stanli's errors for a Stan feature its interpreter does not implement
_STANLI_LACKS = re.compile(r"\bunsupported\b|not (?:yet )?(?:supported|implemented)", re.I)


def bridgestan_model(stan_file, data, **kw):
    """A ``bridgestan.StanModel`` of the program with ``data`` (a JSON-able mapping).

    stanli's (``stanli.bridgestan_model``: nothing compiled) first. Where stanli is not
    installed or its interpreter lacks a feature the program uses (``qr_thin_Q``, for one),
    BridgeStan compiles the program (``bridgestan.StanModel``: a C++ toolchain and
    BridgeStan's sources, found through ``BRIDGESTAN`` or ``bridgestan.set_bridgestan_path``).
    BridgeStan compiles a copy of the program in loo_adapt's cache, in a folder named by its
    text: the user's folder may be read-only, and a process cannot load a changed library
    again under the same name, so an edited program gets a library of its own. stanc's
    syntax and semantic errors, and data that does not fit the program, are raised as
    stanli or BridgeStan gives them.

    Raises
    ------
    UnsupportedProgramError
        Neither can run the program; the message says what each answered.
    """
    import json

    try:
        import stanli
    except ImportError as err:
        stanli_said = f"stanli is not installed ({err})"
    else:
        try:
            return stanli.bridgestan_model(stan_file=str(stan_file), data=data, **kw)
        except RuntimeError as err:
            if not _STANLI_LACKS.search(str(err)):
                raise
            stanli_said = f"stanli's interpreter cannot run it ({err})"
    try:
        import bridgestan
    except ImportError:
        raise UnsupportedProgramError(
            f"cannot evaluate {pathlib.Path(stan_file).name}'s log density: {stanli_said}, and "
            "BridgeStan, which would compile it, is not installed (pip install bridgestan; "
            "it needs a C++ toolchain). This is a limit of the tools, not a fault of the "
            "program.") from None
    try:
        from loo_adapt.stan.backends import cached_program_copy

        lib = bridgestan.compile_model(cached_program_copy(stan_file, "bridgestan"))
    except Exception as err:  # noqa: BLE001 - no toolchain, no sources, a compile error
        raise UnsupportedProgramError(
            f"cannot evaluate {pathlib.Path(stan_file).name}'s log density: {stanli_said}, and "
            f"BridgeStan could not compile it ({type(err).__name__}: "
            f"{' '.join(str(err).split())[:400]}). BridgeStan compiles with a C++ toolchain "
            "from its sources: set the BRIDGESTAN environment variable to a BridgeStan "
            "checkout where it cannot download them.") from err
    return bridgestan.StanModel(str(lib), json.dumps(data), **{"warn": False, **kw})


class _DirectCalls:
    """BridgeStan's C functions (its documented C API: ``bs_param_unconstrain``,
    ``bs_param_constrain``, ``bs_log_density``, ``bs_log_density_gradient``) called with the
    addresses of one draw's row of a C-contiguous matrix.

    BridgeStan's Python methods check and convert their arrays on every call, about 15 us a
    draw, as much as stanli's interpreter takes to unconstrain a draw of a small model: one
    pass over 4000 posterior draws took 0.25 s through them and 0.12 s here on
    logistic_n300, whose posterior fit takes 0.5 s.  The numbers are the same C function's.
    Built only for a ``bridgestan.StanModel`` (its ``stanlib`` a ``ctypes.CDLL`` and
    ``model`` the C model's pointer) whose answers at one point match its Python methods'
    (`direct_calls`); anything else goes through the Python methods.  Each method runs
    over the rows of C-contiguous float64 matrices, the outputs' row s written from the
    input's row s, and returns {row: BridgeStan's error message} of the rows it rejected.
    """

    def __init__(self, model):
        lib, self._m = model.stanlib, model.model
        vp, b, err = ctypes.c_void_p, ctypes.c_bool, ctypes.POINTER(ctypes.c_char_p)

        def fn(name, *args):
            f = lib[name]  # a new function object: bridgestan's own keep their argtypes
            f.restype, f.argtypes = ctypes.c_int, [vp, *args, err]
            return f

        self._unc = fn("bs_param_unconstrain", vp, vp)
        self._con = fn("bs_param_constrain", b, b, vp, vp, vp)
        self._lp = fn("bs_log_density", b, b, vp, vp)
        self._grad = fn("bs_log_density_gradient", b, b, vp, vp, vp)
        self._free = lib["bs_free_error_msg"]
        self._free.restype, self._free.argtypes = None, [ctypes.c_char_p]

    def _message(self, err):
        msg = (err.value or b"").decode("utf-8", "replace")
        self._free(err)
        err.value = None
        return msg or "unknown error"

    def _rows(self, f, before, U, outs, after=()):
        """``f(model, *before, row s of U, row s of each of outs, *after, err)`` for each
        row s; the rows BridgeStan rejected -> their messages.  The error pointer is the
        call's own (threads sharing a model do not share it)."""
        err = ctypes.c_char_p()
        m, perr, failed = self._m, ctypes.byref(err), {}
        u0, su = U.ctypes.data, U.strides[0]
        bases = [(o.ctypes.data, o.strides[0]) for o in outs]
        for s in range(U.shape[0]):
            if f(m, *before, u0 + s * su, *[b + s * st for b, st in bases], *after, perr):
                failed[s] = self._message(err)
        return failed

    def unconstrain(self, theta, out):
        return self._rows(self._unc, (), theta, (out,))

    def constrain(self, U, out, include_tp, include_gq, rng):
        return self._rows(self._con, (include_tp, include_gq), U, (out,), (rng,))

    def log_density(self, U, lp):
        return self._rows(self._lp, (True, True), U, (lp,))

    def log_density_gradient(self, U, lp, grad):
        return self._rows(self._grad, (True, True), U, (lp, grad))


def direct_calls(model) -> _DirectCalls | None:
    """`_DirectCalls` for a ``bridgestan.StanModel`` whose C functions, called directly at
    one point (the origin of the unconstrained space, and the constrained values it maps
    to), give what its Python methods give; None for any other object, or where they
    differ or cannot be compared (the point is rejected)."""
    if not (type(model).__module__.split(".")[0] == "bridgestan"
            and isinstance(getattr(model, "stanlib", None), ctypes.CDLL)
            and getattr(model, "model", None)):
        return None
    try:
        calls = _DirectCalls(model)
        P = int(model.param_unc_num())
        u = np.zeros(P)
        theta = model.param_constrain(u)
        lp, grad = model.log_density_gradient(u, propto=True, jacobian=True)
        U, Theta = u[None, :], np.ascontiguousarray(theta[None, :])
        theta_c, u_c = np.empty_like(Theta), np.empty_like(U)
        lp_c, lp_g, grad_c = np.empty((1, 1)), np.empty((1, 1)), np.empty_like(U)
        if (calls.constrain(U, theta_c, False, False, None)
                or calls.unconstrain(Theta, u_c)
                or calls.log_density(U, lp_c)
                or calls.log_density_gradient(U, lp_g, grad_c)):
            return None
        same = (np.array_equal(theta_c[0], theta)
                and np.array_equal(u_c[0], model.param_unconstrain(theta))
                and lp_c[0, 0] == model.log_density(u, propto=True, jacobian=True)
                == lp_g[0, 0] == lp
                and np.array_equal(grad_c[0], grad))
    except (RuntimeError, AttributeError, TypeError, ValueError, OSError):
        return None
    return calls if same else None


class StanLogDensity:
    """Log density, gradient and pointwise log-likelihood of a Stan model, unconstrained scale.

    Parameters
    ----------
    model : a ``bridgestan.StanModel`` or any object with ``param_unc_num``, ``param_names``,
        ``param_unconstrain``, ``param_constrain``, ``log_density``, ``log_density_gradient``
        (and ``new_rng`` when generated quantities draw random numbers).
    log_lik : name of the generated quantity holding the pointwise log-likelihood.
    seed : seed of the RNG passed to ``param_constrain`` (generated quantities with ``_rng``
        calls need one; log_lik itself must not depend on it).
    """

    def __init__(self, model, log_lik: str = "log_lik", seed: int = 0):
        for attr in ("param_unc_num", "param_names", "param_unconstrain", "param_constrain",
                     "log_density", "log_density_gradient"):
            if not hasattr(model, attr):
                raise TypeError(f"model has no {attr!r}: expected a bridgestan.StanModel")
        self.model = model
        self.n_params = int(model.param_unc_num())
        self.log_lik_name = log_lik
        self._rng = model.new_rng(seed) if hasattr(model, "new_rng") else None
        names = list(model.param_names(include_tp=False, include_gq=False))
        self._block = _group_names(names)
        all_names = list(model.param_names(include_tp=True, include_gq=True))
        self._ll_index, self.log_lik_shape = _log_lik_positions(all_names, log_lik)
        self.n_obs = len(self._ll_index)
        self._n_out = len(all_names)
        self._last_unconstrained = None  # (digest of the constrained values, result)
        self._direct_for = (model, direct_calls(model))

    @property
    def _direct(self):
        """`direct_calls` of the model now in ``self.model`` (built again where it was
        replaced: the C functions of another model must not answer for it)."""
        model, calls = self._direct_for
        if model is not self.model:
            self._direct_for = (self.model, direct_calls(self.model))
        return self._direct_for[1]

    @classmethod
    def from_stan(cls, stan_file, data, *, log_lik: str = "log_lik", seed: int = 0, **kw):
        """Build through `bridgestan_model`: stanli's interpreter (offline, no C++
        toolchain), or BridgeStan's compiled model where stanli cannot run the program."""
        return cls(bridgestan_model(stan_file, data, **kw), log_lik=log_lik, seed=seed)

    # ---- constrained <-> unconstrained ------------------------------------------------------
    def constrained_matrix(self, draws, rows=None) -> np.ndarray:
        """(S, K) constrained parameters in BridgeStan's order from a ``Draws`` container.

        ``Draws`` keeps Stan shapes; BridgeStan flattens each variable column-major (Stan's
        order: first index fastest), so the trailing axes are reversed before flattening.
        ``rows`` (stacked draw indices) takes only those draws.
        """
        cols = []
        S = draws.n_samples if rows is None else len(rows)
        for name, size, shape in self._block:
            if name not in draws:
                raise KeyError(
                    f"the program declares the parameter {name!r}, which the draws do not "
                    f"have (the draws' variables: {', '.join(sorted(draws.variables)[:12])}"
                    f"{', ...' if len(draws.variables) > 12 else ''})"
                )
            v = draws.flat(name) if rows is None else draws.flat(name)[rows]
            if int(np.prod(v.shape[1:], dtype=int)) != size:
                raise ValueError(
                    f"the parameter {name!r} has {int(np.prod(v.shape[1:], dtype=int))} values "
                    f"per draw in the draws but {size} in the program (shape {shape})"
                )
            if v.ndim > 2:
                v = np.transpose(v, (0,) + tuple(range(v.ndim - 1, 0, -1)))
            cols.append(v.reshape(S, size))
        return np.concatenate(cols, axis=1) if cols else np.empty((S, 0))

    def unconstrain(self, draws, rows=None) -> np.ndarray:
        """Draws (``loo_adapt.draws.Draws``) -> unconstrained matrix (S, P), chains stacked
        (only the stacked draws ``rows`` when given).

        The last result is kept with a 256-bit BLAKE2 digest of the constrained values it
        came from and returned again (a copy) when the next call's values have the same
        digest: one ``loo()`` warm-starts up to four mixture fits from the same posterior,
        and each pass is one BridgeStan call per draw (0.03 s for the 1000 draws of
        logistic_normal, whose posterior fit takes 0.08 s; 1.6 s for the 4000 draws of 603
        parameters of rhs_wide).  Results of more than `_KEEP_VALUES` values, and those of a
        selection of draws (``rows``: the identity check's few), are not kept."""
        theta = np.ascontiguousarray(self.constrained_matrix(draws, rows))
        whole = rows is None  # a few draws (the identity check's) neither use nor evict it
        key = (theta.shape, hashlib.blake2b(theta.tobytes(), digest_size=32).digest()
               ) if whole else None
        last = getattr(self, "_last_unconstrained", None)
        if whole and last is not None and last[0] == key:
            return last[1].copy()
        out = np.empty((theta.shape[0], self.n_params))
        if self._direct is not None:
            failed = self._direct.unconstrain(theta, out)
            if failed:
                s = min(failed)
                raise RuntimeError(f"param_unconstrain of draw {s}: {failed[s]}")
        else:
            for s in range(theta.shape[0]):  # into the output's rows: no array per draw
                self.model.param_unconstrain(theta[s], out=out[s])
        if whole and out.size <= _KEEP_VALUES:
            self._last_unconstrained = (key, out.copy())
        return out

    # ---- densities ---------------------------------------------------------------------------
    def _check(self, U) -> np.ndarray:
        U = np.asarray(U, dtype=np.float64)
        if U.ndim == 1:
            U = U[None, :]
        if U.ndim != 2 or U.shape[1] != self.n_params:
            raise ValueError(f"expected unconstrained draws (S, {self.n_params}), got {U.shape}")
        return np.ascontiguousarray(U)

    def log_density(self, U) -> np.ndarray:
        """log p(u | D) + const, with the Jacobian (density of u), per row; -inf where Stan
        rejects the point (overflow, domain errors)."""
        U = self._check(U)
        out = np.empty(U.shape[0])
        if self._direct is not None:
            out[list(self._direct.log_density(U, out[:, None]))] = -np.inf
        else:
            for s in range(U.shape[0]):
                try:
                    out[s] = self.model.log_density(U[s], propto=True, jacobian=True)
                except RuntimeError:
                    out[s] = -np.inf
        out[np.isnan(out)] = -np.inf
        return out

    def log_density_gradient(self, U):
        """(log density (S,), gradient (S, P)); rows where Stan rejects get -inf and NaN."""
        U = self._check(U)
        lp = np.empty(U.shape[0])
        grad = np.empty_like(U)
        if self._direct is not None:
            bad = list(self._direct.log_density_gradient(U, lp[:, None], grad))
            lp[bad], grad[bad] = -np.inf, np.nan
        else:
            for s in range(U.shape[0]):
                try:
                    lp[s], grad[s] = self.model.log_density_gradient(U[s], propto=True,
                                                                     jacobian=True)
                except RuntimeError:
                    lp[s], grad[s] = -np.inf, np.nan
        return lp, grad

    def log_lik(self, U, idx=None) -> np.ndarray:
        """Pointwise log-likelihood (S, n) at unconstrained rows ``U`` (or (S,) for an int
        ``idx``), recomputed by the generated quantities. NaN where Stan rejects the point."""
        U = self._check(U)
        sel = self._ll_index if idx is None else self._ll_index[idx]
        out = np.empty((U.shape[0],) + np.shape(sel))
        rng = None if self._rng is None else getattr(self._rng, "ptr", None)
        if self._direct is not None and rng is not None:
            step = max(1, _KEEP_VALUES // 8 // max(self._n_out, 1))  # a buffer of <= 8 MiB
            full = np.empty((min(step, U.shape[0]), self._n_out))
            for a in range(0, U.shape[0], step):
                b = min(a + step, U.shape[0])
                bad = [a + s for s in self._direct.constrain(U[a:b], full, True, True, rng)]
                out[a:b] = full[:b - a][:, sel]
                out[bad] = np.nan
            return out
        buf = np.empty(self._n_out)
        for s in range(U.shape[0]):
            try:
                self.model.param_constrain(U[s], include_tp=True, include_gq=True, out=buf,
                                           rng=self._rng)
                out[s] = buf[sel]
            except RuntimeError:
                out[s] = np.nan
        return out


def _group_names(names):
    """BridgeStan flat names (``beta.1``, ``W1.2.3``) -> [(variable, size, shape)] in order."""
    groups: list[list] = []
    for nm in names:
        base, *idx = nm.split(".")
        if groups and groups[-1][0] == base:
            groups[-1][1] += 1
            groups[-1][2] = [max(a, int(b)) for a, b in zip(groups[-1][2], idx)]
        else:
            groups.append([base, 1, [int(b) for b in idx]])
    return [(g[0], g[1], tuple(g[2])) for g in groups]


def _log_lik_positions(all_names, var):
    """Positions of ``var`` entries in param_constrain's output, in C order of its shape (the
    order in which ``Draws.log_lik`` flattens a matrix-valued log_lik)."""
    pat = re.compile(rf"^{re.escape(var)}(\.\d+)*$")
    pos = [k for k, nm in enumerate(all_names) if pat.match(nm)]
    if not pos:
        raise KeyError(
            f"the Stan program has no generated quantity {var!r}; add "
            "`generated quantities { vector[N] log_lik; ... }` or pass log_lik="
        )
    idx = np.array([[int(b) for b in all_names[k].split(".")[1:]] for k in pos], dtype=int)
    if idx.shape[1] == 0:
        return np.array(pos), ()
    shape = tuple(idx.max(axis=0))
    order = np.ravel_multi_index(tuple((idx - 1).T), shape)
    out = np.empty(len(pos), dtype=int)
    out[order] = pos
    return out, shape


