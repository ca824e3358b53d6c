"""Convergence of many columns of MCMC draws at once: rank-normalised split R-hat and bulk /
tail ESS (Vehtari, Gelman, Simpson, Carpenter & Buerkner 2021), as arviz computes them.

For each column of ``x`` (chains, draws, n):

* the chains are split in halves (the middle draw of an odd length is dropped), and the
  draws are replaced by normal scores of their average ranks, ``z = Phi^-1((r - 3/8) /
  (S + 1/4))`` (Blom), over all split chains together;
* ``rhat`` is the larger of the split R-hat of ``z`` (bulk) and of the normal scores of
  ``|x - median(x)|`` (tail: scale differences), arviz ``rhat(method="rank")``;
* ``ess_bulk`` is the ESS of ``z`` with split chains (arviz ``ess(method="bulk")``);
* ``ess_tail`` is the smaller ESS of the indicators ``x <= q05`` and ``x <= q95`` (quantiles
  of all draws, type 7), with split chains (arviz ``ess(method="tail")``).

A column with fewer than 2 chains or 4 draws per chain gets NaN for R-hat (it is undefined,
as in arviz).  The work is vectorised over columns, block by block (memory: a few copies of
S x block), with the ESS of the PSIS core (Geyer's initial monotone sequence,
:mod:`loo_adapt.core.ess`) on arviz's autocovariance.

`disagreeing_columns` is the check `loo` runs on the log-likelihood: columns whose R-hat
exceeds 1.01 (the 2021 paper's threshold), or in which a chain is stuck (one value for all
its draws while the other chains move).  ``loo`` asks only which columns exceed it: a screen
buckets each column's draws (no sort), which bounds every draw's rank, hence its normal
score, hence the chain means and both variances of R-hat; a column whose bound is at most
the threshold needs no exact R-hat (most columns of a fit whose chains mix), the others get
the exact one.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange
from scipy.fft import next_fast_len

from loo_adapt.core._compiled import use_numba
from loo_adapt.core._rhat_kernel import (
    _rhat_column,
    _score_table,
    _screen_scratch,
    screen_ratio,
)
from loo_adapt.core.ess import _geyer_ess_numpy

__all__ = ["MAX_RHAT", "convergence_columns", "disagreeing_columns", "rhat_columns",
           "ess_bulk_columns", "ess_tail_columns", "relative_eff_and_disagreement"]

#: R-hat above this says the chains disagree (Vehtari et al. 2021)
MAX_RHAT = 1.01
#: cells (draws x columns) per block
_BLOCK_CELLS = 1 << 20


def _as_chains(x) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3:
        raise ValueError(f"x must have shape (chains, draws) or (chains, draws, n), got "
                         f"{a.shape}")
    return a


def _split(a: np.ndarray) -> np.ndarray:
    """(chains, draws, m) -> (2 chains, draws // 2, m): first and last halves."""
    half = a.shape[1] // 2
    return np.concatenate([a[:, :half], a[:, a.shape[1] - half:]], axis=0)


def _normal_scores(rows: np.ndarray) -> np.ndarray:
    """Blom normal scores of average ranks along the last axis of (m, N) (ties share the
    mean of their ranks, scipy ``rankdata(method="average")``), looked up by twice the
    average rank in `_score_table`.  Tied values get the same score whatever their order,
    so numpy's fastest (unstable) argsort does; rows without ties need no tie bookkeeping."""
    m, n = rows.shape
    order = np.argsort(rows, axis=1)
    s = np.take_along_axis(rows, order, axis=1)
    table = _score_table(n)
    new = np.ones((m, n), dtype=bool)
    new[:, 1:] = s[:, 1:] != s[:, :-1]
    z = np.empty((m, n))
    if new.all():
        np.put_along_axis(z, order, np.broadcast_to(table[2:2 * n + 1:2], (m, n)), axis=1)
        return z
    pos = np.broadcast_to(np.arange(n), (m, n))
    first = np.maximum.accumulate(np.where(new, pos, 0), axis=1)
    last_of = np.ones((m, n), dtype=bool)
    last_of[:, :-1] = new[:, 1:]
    last = np.minimum.accumulate(np.where(last_of, pos, n - 1)[:, ::-1], axis=1)[:, ::-1]
    np.put_along_axis(z, order, table[first + last + 2], axis=1)  # 2 x (average rank)
    return z


def _rhat(z: np.ndarray) -> np.ndarray:
    """Split R-hat of (chains, draws, m) per column (arviz ``_rhat``)."""
    n = z.shape[1]
    chain_mean = z.mean(axis=1)
    within = z.var(axis=1, ddof=1).mean(axis=0)
    between = n * chain_mean.var(axis=0, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sqrt((between / within + n - 1) / n)


def _ess(y: np.ndarray) -> np.ndarray:
    """ESS of each column of (chains, draws, m) (arviz ``_ess``: biased autocovariance,
    Geyer's initial monotone sequence); a constant column has ESS = its size."""
    c, n, m = y.shape
    const = np.ptp(y.reshape(c * n, m), axis=0) < np.finfo(float).resolution
    yc = y - y.mean(axis=1, keepdims=True)
    size = next_fast_len(2 * n)
    f = np.fft.rfft(yc, n=size, axis=1)
    acov = np.fft.irfft(f * np.conj(f), n=size, axis=1)[:, :n, :] / n
    out = _geyer_ess_numpy(acov, y.mean(axis=1))
    out[const] = c * n
    return out


def _block(a: np.ndarray, want: tuple[str, ...]) -> dict:
    c, d, m = a.shape
    sp = _split(a)
    k, h, _ = sp.shape
    out = {}
    rows = np.ascontiguousarray(sp.reshape(k * h, m).T)  # (m, N): each column's draws
    z = _normal_scores(rows).T.reshape(k, h, m)
    if "rhat" in want:
        folded = np.abs(rows - np.median(rows, axis=1, keepdims=True))
        zf = _normal_scores(folded).T.reshape(k, h, m)
        out["rhat"] = np.fmax(_rhat(z), _rhat(zf))
        if c < 2 or d < 4:
            out["rhat"] = np.full(m, np.nan)
    if "ess_bulk" in want:
        out["ess_bulk"] = _ess(z)
    if "ess_tail" in want:
        q = np.quantile(a.reshape(c * d, m), [0.05, 0.95], axis=0)
        low = _ess(_split((a <= q[0]).astype(np.float64)))
        high = _ess(_split((a <= q[1]).astype(np.float64)))
        out["ess_tail"] = np.fmin(low, high)
    return out


def convergence_columns(x, which=("rhat", "ess_bulk", "ess_tail")) -> dict:
    """Rank-normalised split R-hat, bulk ESS and tail ESS of every column.

    Parameters
    ----------
    x : array (chains, draws, n) or (chains, draws); finite values.
    which : the diagnostics to compute ("rhat", "ess_bulk", "ess_tail").

    Returns
    -------
    dict
        name -> array (n,), equal to arviz's ``rhat(method="rank")``, ``ess(method="bulk")``
        and ``ess(method="tail")`` of each column.

    Examples
    --------
    >>> x = np.random.default_rng(0).normal(size=(4, 500, 3))
    >>> d = convergence_columns(x)
    >>> bool(np.all(d["rhat"] < 1.01)), bool(np.all(d["ess_bulk"] > 1000))
    (True, True)
    """
    a = _as_chains(x)
    c, d, n = a.shape
    if d < 4:
        raise ValueError(f"convergence diagnostics need at least 4 draws per chain, got {d}")
    if not np.all(np.isfinite(a)):
        raise ValueError("convergence diagnostics need finite draws")
    unknown = set(which) - {"rhat", "ess_bulk", "ess_tail"}
    if unknown:
        raise ValueError(f"unknown diagnostics {sorted(unknown)}")
    out = {name: np.empty(n) for name in which}
    step = max(1, _BLOCK_CELLS // (c * d))
    for j0 in range(0, n, step):
        res = _block(a[:, :, j0:j0 + step], tuple(which))
        for name in which:
            out[name][j0:j0 + step] = res[name]
    return out


def rhat_columns(x) -> np.ndarray:
    """Rank-normalised split R-hat of every column, as arviz ``rhat(method="rank")``.

    Parameters
    ----------
    x : array (chains, draws, n).

    Returns
    -------
    array (n,)

    Examples
    --------
    >>> x = np.random.default_rng(0).normal(size=(4, 500, 2))
    >>> x[0] += 1.0  # the first chain elsewhere
    >>> bool(np.all(rhat_columns(x) > 1.05))
    True
    """
    return convergence_columns(x, ("rhat",))["rhat"]


def ess_bulk_columns(x) -> np.ndarray:
    """Bulk ESS of every column, as arviz ``ess(method="bulk")``.

    Parameters
    ----------
    x : array (chains, draws, n).

    Returns
    -------
    array (n,)

    Examples
    --------
    >>> x = np.random.default_rng(0).normal(size=(4, 500, 2))
    >>> bool(np.all(ess_bulk_columns(x) > 1500))
    True
    """
    return convergence_columns(x, ("ess_bulk",))["ess_bulk"]


def ess_tail_columns(x) -> np.ndarray:
    """Tail ESS of every column (5% and 95% quantiles), as arviz ``ess(method="tail")``.

    Parameters
    ----------
    x : array (chains, draws, n).

    Returns
    -------
    array (n,)

    Examples
    --------
    >>> x = np.random.default_rng(0).normal(size=(4, 500, 2))
    >>> bool(np.all(ess_tail_columns(x) > 1000))
    True
    """
    return convergence_columns(x, ("ess_tail",))["ess_tail"]


# ---- the fused check run by loo(): kernels in core._rhat_kernel -------------------------
@njit(parallel=True, cache=True)
def _rhat_stuck_kernel(a, table, rhat, stuck, ratio):  # pragma: no cover - compiled
    """Rank R-hat (bulk and folded, split chains) and 'a chain never moves' per column of
    a (chains, draws, n), in tiles of columns read row by row (contiguous).  With
    ``ratio`` > 0 a column the screen shows below the threshold gets R-hat NaN (not
    computed)."""
    n_chains, n_draws, n_cols = a.shape
    h = n_draws // 2
    n = 2 * n_chains * h
    tile = 32
    n_tiles = (n_cols + tile - 1) // tile
    for b in prange(n_tiles):
        j0 = b * tile
        m = min(tile, n_cols - j0)
        buf = np.empty((m, n))
        lo = np.empty((n_chains, m))
        hi = np.empty((n_chains, m))
        scratch = _screen_scratch(n, 2 * n_chains)
        for c in range(n_chains):
            for q in range(m):
                lo[c, q] = a[c, 0, j0 + q]
                hi[c, q] = lo[c, q]
            for t in range(n_draws):
                if t < h:
                    pos = 2 * c * h + t
                elif t >= n_draws - h:
                    pos = (2 * c + 1) * h + t - (n_draws - h)
                else:
                    pos = -1
                for q in range(m):
                    v = a[c, t, j0 + q]
                    if pos >= 0:
                        buf[q, pos] = v + 0.0  # -0.0 -> 0.0 (the screen's buckets)
                    lo[c, q] = min(lo[c, q], v)
                    hi[c, q] = max(hi[c, q], v)
        for q in range(m):
            n_fixed = 0
            for c in range(n_chains):
                if hi[c, q] == lo[c, q]:
                    n_fixed += 1
            stuck[j0 + q] = 0 < n_fixed < n_chains
            rhat[j0 + q] = _rhat_column(buf[q], lo[:, q].min(), hi[:, q].max(), n_chains, h,
                                        table, ratio, scratch)


def _rhat_stuck(a: np.ndarray, screen_at: float | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """(rank R-hat, stuck chain) of every column: the numba kernel for large inputs or when
    compiled, else the numpy twin (same numbers).  With ``screen_at`` (a threshold), the
    kernel leaves NaN for the columns its screen shows at or below it."""
    c, d, n = a.shape
    if use_numba(_rhat_stuck_kernel, c * d * n):
        rhat, stuck = np.empty(n), np.zeros(n, dtype=np.bool_)
        h = d // 2
        ratio = -1.0 if screen_at is None else screen_ratio(h, screen_at)
        with np.errstate(invalid="ignore", divide="ignore"):
            _rhat_stuck_kernel(a, _score_table(2 * c * h), rhat, stuck, ratio)
    else:
        rhat = convergence_columns(a, ("rhat",))["rhat"]
        spread = np.ptp(a, axis=1)
        stuck = (spread == 0).any(axis=0) & (spread > 0).any(axis=0)
    return rhat, stuck


def disagreeing_columns(x, max_rhat: float = MAX_RHAT, all_rhat: bool = True
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Columns whose chains disagree: R-hat above ``max_rhat`` or a chain stuck at one value.

    Parameters
    ----------
    x : array (chains, draws, n) of at least 2 chains, finite (checked by the numpy path;
        the numba kernel, for large inputs, adds no S x n temporary to check it).
    max_rhat : R-hat threshold (default 1.01).
    all_rhat : if False, the R-hat is computed only where a screen cannot show it is at
        most ``max_rhat`` (rank intervals from a bucketing of each column, no sort; the
        flagged columns are the same, every flagged column gets its R-hat, and the others
        may get NaN).  ``loo`` uses this: most well-mixed columns need no sort.

    Returns
    -------
    (bad, rhat) : bool array (n,) and the R-hat of every column (NaN where undefined, or
        shown at most ``max_rhat`` when ``all_rhat`` is False).

    Examples
    --------
    >>> x = np.random.default_rng(1).normal(size=(4, 200, 3))
    >>> x[2, :, 1] = x[2, 0, 1]  # chain 2 stuck at one draw in column 1
    >>> disagreeing_columns(x)[0].tolist()
    [False, True, False]
    """
    a = _as_chains(x)
    if a.shape[0] < 2 or a.shape[1] < 4:
        return np.zeros(a.shape[2], dtype=bool), np.full(a.shape[2], np.nan)
    # finite draws: loo's log-likelihood is checked before
    rhat, stuck = _rhat_stuck(a, None if all_rhat else float(max_rhat))
    with np.errstate(invalid="ignore"):
        bad = (rhat > max_rhat) | stuck
    return bad, rhat


def relative_eff_and_disagreement(log_lik, max_rhat: float = MAX_RHAT
                                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """R loo's relative efficiency of ``exp(log_lik)`` and the columns whose chains disagree,
    in one pass over the draws.

    What ``loo`` needs from an MCMC log-likelihood before PSIS: `core.ess.relative_eff`
    (``log=True``) and `disagreeing_columns` (``all_rhat=False``), the same numbers, but the
    draws are read (transposed into column buffers) once: the R-hat check runs on each
    buffer before the relative-efficiency kernel exponentiates it.

    Parameters
    ----------
    log_lik : array (chains, draws, n), at least 2 chains of 4 draws, finite.
    max_rhat : R-hat threshold (default 1.01).

    Returns
    -------
    (r_eff, bad, rhat) : arrays (n,): the relative efficiency, the columns whose R-hat
        exceeds ``max_rhat`` or in which a chain is stuck, and R-hat (exact for the flagged
        columns, NaN where a bound showed it at most ``max_rhat``).

    Examples
    --------
    >>> ll = np.random.default_rng(1).normal(size=(4, 200, 3))
    >>> ll[2, :, 1] = ll[2, 0, 1]  # chain 2 stuck in column 1
    >>> r_eff, bad, rhat = relative_eff_and_disagreement(ll)
    >>> bad.tolist(), bool(np.all((r_eff > 0.5) & (r_eff < 2)))
    ([False, True, False], True)
    """
    from loo_adapt.core.ess import _ess_fast, relative_eff

    a = _as_chains(log_lik)
    c, d, _ = a.shape
    if c < 2 or d < 4:
        raise ValueError(f"need at least 2 chains of 4 draws, got {c} x {d}")
    fused = _ess_fast(a, True, float(max_rhat))
    if fused is None:  # the numpy path: two calls
        bad, rhat = disagreeing_columns(a, max_rhat, all_rhat=False)
        return relative_eff(a, log=True), bad, rhat
    ess, rhat, stuck = fused
    with np.errstate(invalid="ignore"):
        bad = (rhat > max_rhat) | stuck
    return ess / (c * d), bad, rhat
