"""Build the `ELPDData` of whichever arviz is installed from a `PointwiseLoo`.

arviz 0.x: `ELPDData` is a pandas Series indexed by elpd_loo, se, p_loo, n_samples,
n_data_points, warning, loo_i, pareto_k, scale, good_k.
arviz 1.x: `ELPDDataLOO` (arviz_stats.utils) is a dataclass with elpd, se, p, ...,
elpd_i, pareto_k, log_weights as xarray DataArrays.

In both we return `LooAdaptELPDData`, a module-level subclass (so it pickles) that keeps
the array-level result as ``.loo_adapt`` and adds ``.summary()``; its layout is arviz's
own for the same draws:

* the pointwise arrays (``loo_i`` / ``elpd_i``, ``pareto_k``, ``p_loo_i``) keep the
  observation dims and coords of the source (InferenceData / DataTree / xarray), else
  arviz's default names ``{var_name}_dim_k``, so a 6 x 9 observation grid stays 6 x 9;
* ``log_weights`` are the PSIS log weights on the posterior draws, dims
  ``(*obs_dims, "chain", "draw")`` as arviz 1.x's ``loo(..., pointwise=True)``; on arviz
  0.x (whose ``loo`` returns none) an attribute with dims ``(*obs_dims, "__sample__")``,
  the shape arviz 0.x's ``loo_pit(..., log_weights=)`` takes.  Rows produced by another
  estimator have no weights on the posterior draws (adaptive IS weighs transformed draws,
  MixIS mixture draws, a refit its own draws): their columns are NaN,
  ``log_weights.attrs["nan_rows"]`` says why, and ``res.loo_adapt.row_draws`` holds each
  row's own draws and weights (`loo_adapt.loo_pit` and `loo_expectations` use them);
* scale: arviz 0.x has log, negative_log and deviance (its compare ranks by the scale);
  arviz 1.x reports the log scale only and its ``compare`` ranks by ``elpd`` as a log
  score, so another scale is refused there (a deviance ELPDData would rank the worse model
  first).
"""

from __future__ import annotations

import copy as _copy_module
import dataclasses

import arviz
import numpy as np
import xarray as xr

from loo_adapt.result import PointwiseLoo

__all__ = ["LooAdaptELPDData", "ObsLayout", "SCALES", "arviz_major", "elpd_data_class",
           "observation_layout", "resolve_scale", "to_elpd_data", "pointwise_from_elpd_data",
           "khat_from_elpd_data", "log_weights_matrix"]

SCALES = {"log": 1.0, "negative_log": -1.0, "deviance": -2.0}
SAMPLE_DIMS = ("chain", "draw")
_MAJOR = int(arviz.__version__.split(".")[0])


def arviz_major() -> int:
    """Major version of the installed arviz (0 or 1).

    Returns
    -------
    int

    Examples
    --------
    >>> arviz_major() in (0, 1)
    True
    """
    return _MAJOR


def _scale_factor(scale: str) -> float:
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {sorted(SCALES)}, got {scale!r}")
    return SCALES[scale]


def resolve_scale(scale: str | None) -> str:
    """The scale of the ELPDData, as the installed arviz's ``loo`` chooses it.

    Parameters
    ----------
    scale : "log", "negative_log", "deviance" or None.  None follows arviz 0.x's
        ``rcParams["stats.ic_scale"]``; arviz 1.x's ``loo`` always reports the log scale.

    Returns
    -------
    str
        The scale.

    Examples
    --------
    >>> resolve_scale("log")
    'log'
    """
    if scale is None:
        if _MAJOR >= 1:
            return "log"
        value = arviz.rcParams.get("stats.ic_scale", "log")
        return value if value in SCALES else "log"
    _scale_factor(scale)
    if _MAJOR >= 1 and scale != "log":
        raise ValueError(
            f"scale={scale!r} is not supported with arviz {arviz.__version__}: arviz 1.x "
            "reports elpd on the log scale only and az.compare ranks by it (a "
            f"{scale} result would rank the worse model first); use scale='log' "
            "(looic = -2 elpd_loo is in res.loo_adapt.estimates()['looic'])")
    return scale


# --------------------------------------------------------------------------- layout
@dataclasses.dataclass(frozen=True)
class ObsLayout:
    """Observation dims/coords and chain/draw sizes of the log-likelihood of the source.

    Attributes
    ----------
    dims : observation dimension names.
    shape : observation shape (product = number of observations n).
    coords : dim name -> coordinate values.
    chains, draws : number of chains and draws per chain.
    """

    dims: tuple
    shape: tuple
    coords: dict
    chains: int
    draws: int

    @property
    def n_obs(self) -> int:
        return int(np.prod(self.shape))

    def pointwise(self, values, name: str) -> xr.DataArray:
        """A length-n vector as a DataArray with the observation dims and coords."""
        values = np.asarray(values, dtype=float)
        return xr.DataArray(values.reshape(self.shape), dims=self.dims, coords=self.coords,
                            name=name)


def _is_xarray_container(data) -> bool:
    """InferenceData (arviz 0.x) or DataTree, told by type, without probing attributes."""
    mod = type(data).__module__
    return isinstance(data, xr.DataTree) if hasattr(xr, "DataTree") and isinstance(
        data, xr.DataTree) else mod.startswith(("arviz", "xarray", "datatree"))


def _source_log_lik(data, var_name: str):
    """The log-likelihood DataArray of an InferenceData / DataTree / xarray input, or None."""
    if isinstance(data, xr.DataArray):
        return data
    if isinstance(data, xr.Dataset):
        group = data
    elif not _is_xarray_container(data):
        return None  # e.g. a cmdstanpy fit, whose unknown attributes are Stan variables
    else:
        try:
            group = data["log_likelihood"] if hasattr(data, "children") else getattr(
                data, "log_likelihood", None)
        except (KeyError, TypeError, AttributeError):
            return None
        if group is None:
            return None
        if hasattr(group, "to_dataset"):
            group = group.to_dataset()
        if not isinstance(group, xr.Dataset):
            return None
    if var_name in group.data_vars:
        return group[var_name]
    names = list(group.data_vars)
    return group[names[0]] if len(names) == 1 else None


def observation_layout(data, var_name: str, chains: int, draws: int, obs_shape) -> ObsLayout:
    """Observation dims and coords of ``data``'s log-likelihood, as arviz reads them.

    Parameters
    ----------
    data : what `loo_adapt.loo` was given (InferenceData, DataTree, xarray, or anything).
    var_name : the log-likelihood variable.
    chains, draws : chain/draw sizes of the draws.
    obs_shape : observation shape of the log-likelihood in the draws.

    Returns
    -------
    ObsLayout
        The source's dims and coords when it is an xarray-based container whose
        log-likelihood has that shape; else arviz's default names ``{var_name}_dim_k`` with
        integer coords (what ``az.from_dict`` gives the same array).

    Examples
    --------
    >>> observation_layout(None, "log_lik", 4, 100, (6, 9)).dims
    ('log_lik_dim_0', 'log_lik_dim_1')
    """
    obs_shape = tuple(int(s) for s in obs_shape) or (1,)
    da = _source_log_lik(data, var_name)
    if da is not None:
        dims = tuple(d for d in da.dims if d not in SAMPLE_DIMS)
        shape = tuple(int(da.sizes[d]) for d in dims)
        if int(np.prod(shape)) == int(np.prod(obs_shape)):
            coords = {d: (da.coords[d].values if d in da.coords else np.arange(da.sizes[d]))
                      for d in dims}
            return ObsLayout(dims, shape, coords, int(chains), int(draws))
    dims = tuple(f"{var_name}_dim_{k}" for k in range(len(obs_shape)))
    coords = {d: np.arange(s) for d, s in zip(dims, obs_shape)}
    return ObsLayout(dims, obs_shape, coords, int(chains), int(draws))


def _default_layout(result: PointwiseLoo, var_name: str = "log_lik") -> ObsLayout:
    return observation_layout(None, var_name, 1, int(result.n_samples), (result.n_obs,))


# --------------------------------------------------------------------------- classes
#: R loo's names of a k-fold result (stored beside arviz's own on the ELPDData)
KFOLD_NAMES = ("elpd_kfold", "se_elpd_kfold", "p_kfold", "se_p_kfold", "kfoldic", "se_kfoldic")


def _kfold_values(result: PointwiseLoo, factor: float) -> dict:
    est = result.estimates()
    return {"elpd_kfold": factor * est["elpd_loo"],
            "se_elpd_kfold": abs(factor) * est["se_elpd_loo"],
            "p_kfold": est["p_loo"], "se_p_kfold": est["se_p_loo"],
            "kfoldic": est["looic"], "se_kfoldic": est["se_looic"]}


def _text(self, scale: str, n_folds) -> str | None:
    """R loo's printed layout for our result (`diagnostics.format_loo`), else None."""
    from loo_adapt.evaluation.diagnostics import format_loo

    if self.loo_adapt is None:
        return None
    kind = "kfold" if n_folds is not None else "loo"
    return format_loo(self.loo_adapt, scale, kind=kind, n_folds=n_folds)


def _summary(self, scale: str, elpd_i) -> str:
    from loo_adapt.evaluation.report import format_summary

    if self.loo_adapt is None:
        raise ValueError("this ELPDData carries no loo_adapt result")
    text = format_summary(self.loo_adapt, scale=scale)
    if elpd_i is not None:
        ours = _scale_factor(scale) * self.loo_adapt.elpd_i
        now = np.asarray(elpd_i, dtype=float).ravel()
        changed = np.flatnonzero(~np.isclose(now, ours, rtol=1e-12, atol=0.0))
        if changed.size:
            text += (f"\nNote: {changed.size} pointwise values were changed after loo_adapt "
                     "built this ELPDData (e.g. by az.reloo / az.loo_moment_match; rows "
                     f"{changed[:10].tolist()}); the table above is loo_adapt's estimate.")
    return text


if _MAJOR == 0:
    from arviz.stats.stats_utils import ELPDData as _ArvizELPDData

    class LooAdaptELPDData(_ArvizELPDData):
        """arviz 0.x ELPDData that also carries the loo_adapt pointwise result.

        ``.loo_adapt`` is the `PointwiseLoo`; ``.log_weights`` the PSIS log weights with
        dims ``(*obs_dims, "__sample__")`` (NaN for rows of other estimators); ``.kfold``
        the folds and per-fold status of a `loo_adapt.kfold` result.  All three are pandas
        metadata, so they survive pickling and `copy`.
        """

        _metadata = ["loo_adapt", "log_weights", "kfold"]

        @property
        def _constructor(self):
            return LooAdaptELPDData

        def __str__(self):
            n_folds = int(self["n_folds"]) if "n_folds" in self.index else None
            text = _text(self, self["scale"], n_folds)
            return super().__str__() if text is None else text

        def __repr__(self):
            return self.__str__()

        def copy(self, deep: bool = True):  # pylint:disable=overridden-final-method
            """A copy (deep by default) that keeps ``.loo_adapt``, ``.log_weights`` and
            ``.kfold``.

            Parameters
            ----------
            deep : copy the values and the attributes too (else share them).

            Returns
            -------
            LooAdaptELPDData
            """
            out = LooAdaptELPDData(_ArvizELPDData.copy(self, deep=deep))
            for name in self._metadata:
                value = getattr(self, name, None)
                setattr(out, name, _copy_module.deepcopy(value) if deep else value)
            return out

        def summary(self) -> str:
            """R-loo-style summary with the k-hat table and the estimator of every row."""
            loo_i = self["loo_i"] if "loo_i" in self.index else None
            return _summary(self, self["scale"], loo_i)

else:
    from arviz_stats.utils import ELPDDataLOO as _ArvizELPDData

    @dataclasses.dataclass(kw_only=True, repr=False)
    class LooAdaptELPDData(_ArvizELPDData):
        """arviz 1.x ELPDDataLOO that also carries the loo_adapt pointwise result.

        ``.loo_adapt`` is the `PointwiseLoo`; ``.kfold`` (an instance attribute, set by
        `loo_adapt.kfold`) the folds and per-fold status; both survive pickling and `copy`.
        """

        loo_adapt: PointwiseLoo | None = None
        n_folds: int | None = None
        elpd_kfold: float | None = None
        se_elpd_kfold: float | None = None
        p_kfold: float | None = None
        se_p_kfold: float | None = None
        kfoldic: float | None = None
        se_kfoldic: float | None = None

        def __str__(self):
            text = _text(self, self.scale, self.n_folds)
            if text is None:
                return super().__str__()
            if self.approx_posterior:  # as arviz 1.x's own header says it
                head, _, rest = text.partition("\n")
                text = f"{head}\nPosterior approximation correction used.\n{rest}"
            return text

        def __repr__(self):
            return self.__str__()

        def copy(self):
            """A deep copy that keeps ``.loo_adapt`` and ``.kfold`` (arviz 1.x's own class
            has no ``copy``).

            Returns
            -------
            LooAdaptELPDData
            """
            return _copy_module.deepcopy(self)

        def summary(self) -> str:
            """R-loo-style summary with the k-hat table and the estimator of every row."""
            return _summary(self, self.scale, self.elpd_i)


def elpd_data_class() -> type:
    """The ELPDData subclass matching the installed arviz.

    Returns
    -------
    type
        `LooAdaptELPDData` built on the installed arviz's ELPDData.

    Examples
    --------
    >>> elpd_data_class().__name__
    'LooAdaptELPDData'
    """
    return LooAdaptELPDData


# --------------------------------------------------------------------------- builder
def _reported_khat(result: PointwiseLoo) -> np.ndarray:
    """k-hat of the estimator actually used (NaN for MixIS and refits, which have none)."""
    from loo_adapt.evaluation.diagnostics import reported_khat

    return reported_khat(result)


def _nan_rows_note(result: PointwiseLoo, cols: np.ndarray) -> str:
    if not cols.any():
        return ""
    names, counts = np.unique(result.method[cols].astype(str), return_counts=True)
    by = ", ".join(f"{c} {m}" for m, c in zip(names, counts))
    return (f"NaN for {int(cols.sum())} rows produced by estimators without weights on the "
            f"posterior draws ({by}): adaptive IS weighs transformed draws, MixIS the "
            "mixture draws, a refit its own draws; those draws and weights are in "
            "res.loo_adapt.row_draws, which loo_adapt.loo_pit / loo_expectations use")


def _log_weights_da(log_weights: np.ndarray, result: PointwiseLoo,
                    layout: ObsLayout) -> xr.DataArray:
    # no copy: the ELPDData holds the (S, n) array the PSIS kernel wrote (a view of it),
    # unless some rows come from other estimators: their columns are NaN in a copy, since
    # those estimators' records may share the PSIS weights
    lw = np.asarray(log_weights, dtype=float)
    if lw.ndim != 2:
        raise ValueError(f"log_weights must be (draws, observations), got shape {lw.shape}")
    s, n = lw.shape
    if n != result.n_obs or s != layout.chains * layout.draws:
        raise ValueError(f"log_weights have shape {lw.shape}, expected "
                         f"({layout.chains * layout.draws}, {result.n_obs})")
    cols = result.method.astype(str) != "psis"
    if cols.any():
        lw = lw.copy()
        lw[:, cols] = np.nan
    attrs = {"nan_rows": _nan_rows_note(result, cols)} if cols.any() else {}
    if _MAJOR == 0:
        return xr.DataArray(lw.T.reshape(layout.shape + (s,)),
                            dims=layout.dims + ("__sample__",), coords=layout.coords,
                            name="log_weights", attrs=attrs)
    arr = lw.reshape((layout.chains, layout.draws) + layout.shape)
    arr = np.moveaxis(arr, (0, 1), (-2, -1))
    coords = dict(layout.coords, chain=np.arange(layout.chains), draw=np.arange(layout.draws))
    return xr.DataArray(arr, dims=layout.dims + SAMPLE_DIMS, coords=coords,
                        name="log_weights", attrs=attrs)


def to_elpd_data(
    result: PointwiseLoo,
    *,
    scale: str | None = "log",
    pointwise: bool = True,
    layout: ObsLayout | None = None,
    log_weights: np.ndarray | None = None,
    approx_posterior: bool = False,
    n_folds: int | None = None,
):
    """Wrap a `PointwiseLoo` as the installed arviz's ELPDData.

    Parameters
    ----------
    result : the pointwise result.
    scale : "log", "negative_log", "deviance" (arviz 0.x), or None (see `resolve_scale`).
    pointwise : keep the pointwise arrays.
    layout : observation dims/coords and chain/draw sizes (`observation_layout`); default
        ``log_lik_dim_0`` with one chain.
    log_weights : (S, n) normalised PSIS log weights on the posterior draws (rows of other
        estimators become NaN).
    approx_posterior : the draws came from an approximation corrected by p/q (arviz 1.x
        ``approx_posterior``).
    n_folds : K of a k-fold result (`loo_adapt.kfold`): it prints as R loo's ``print.kfold``
        and also stores R loo's ``elpd_kfold``, ``se_elpd_kfold``, ``p_kfold``,
        ``se_p_kfold``, ``kfoldic``, ``se_kfoldic`` (arviz 0.x: extra entries of the Series;
        1.x: attributes) beside arviz's own ``elpd_loo`` / ``elpd``, which ``az.compare``
        reads.

    Returns
    -------
    LooAdaptELPDData
        Standard errors follow R loo (variance with n - 1), sqrt(n/(n-1)) larger than
        arviz's own; the pointwise MCSE and looic are kept in ``.loo_adapt``.

    Examples
    --------
    >>> import numpy as np
    >>> from loo_adapt.core.psis_loo import loo_pointwise
    >>> from loo_adapt.estimators.psis import initial_result
    >>> ll = np.random.default_rng(0).normal(-1.0, 0.1, size=(2, 500, 5))
    >>> res = to_elpd_data(initial_result(loo_pointwise(ll)))
    >>> res.loo_adapt.n_obs
    5
    """
    scale = resolve_scale(scale)
    factor = _scale_factor(scale)
    layout = _default_layout(result) if layout is None else layout
    if layout.n_obs != result.n_obs:
        raise ValueError(f"layout has {layout.n_obs} observations, the result {result.n_obs}")
    est = result.estimates()
    elpd = factor * est["elpd_loo"]
    se = abs(factor) * est["se_elpd_loo"]
    warning = bool(np.any(result.unreliable))
    pareto_k = layout.pointwise(_reported_khat(result), "pareto_shape")
    lw = (None if log_weights is None or not pointwise
          else _log_weights_da(log_weights, result, layout))
    if _MAJOR == 0:
        data = [elpd, se, est["p_loo"], int(result.n_samples), int(result.n_obs), warning,
                layout.pointwise(factor * result.elpd_i, "loo_i"), pareto_k, scale,
                float(result.good_k)]
        index = ["elpd_loo", "se", "p_loo", "n_samples", "n_data_points", "warning",
                 "loo_i", "pareto_k", "scale", "good_k"]
        if not pointwise:
            data = data[:6] + data[8:]
            index = index[:6] + index[8:]
        if n_folds is not None:
            extra = _kfold_values(result, factor)
            data = data + [int(n_folds)] + list(extra.values())
            index = index + ["n_folds"] + list(extra)
        out = LooAdaptELPDData(data=data, index=index)
        out.loo_adapt = result
        out.log_weights = lw if pointwise else None
        return out
    return LooAdaptELPDData(
        elpd=elpd, se=se, p=est["p_loo"], n_samples=int(result.n_samples),
        n_data_points=int(result.n_obs), scale=scale, warning=warning,
        good_k=float(result.good_k),
        elpd_i=layout.pointwise(factor * result.elpd_i, "elpd_i") if pointwise else None,
        pareto_k=pareto_k if pointwise else None,
        p_loo_i=layout.pointwise(result.p_loo_i, "p_loo_i") if pointwise else None,
        log_weights=lw if pointwise else None,
        approx_posterior=bool(approx_posterior),
        loo_adapt=result,
        **({} if n_folds is None else {"n_folds": int(n_folds),
                                       **_kfold_values(result, factor)}),
    )


# --------------------------------------------------------------------------- readers
def pointwise_from_elpd_data(elpd) -> PointwiseLoo | None:
    """The `PointwiseLoo` inside an ELPDData we built, or None for a plain arviz one.

    Parameters
    ----------
    elpd : an arviz ELPDData.

    Returns
    -------
    PointwiseLoo or None

    Examples
    --------
    >>> from loo_adapt.core.psis_loo import loo_pointwise
    >>> from loo_adapt.estimators.psis import initial_result
    >>> ll = np.random.default_rng(3).normal(-1.0, 0.1, (1, 300, 3))
    >>> res = initial_result(loo_pointwise(ll))
    >>> pointwise_from_elpd_data(to_elpd_data(res)) is res
    True
    """
    value = getattr(elpd, "loo_adapt", None)
    return value if isinstance(value, PointwiseLoo) else None


def khat_from_elpd_data(elpd) -> np.ndarray:
    """Pareto k-hat values from any arviz ELPDData (0.x Series or 1.x dataclass).

    Parameters
    ----------
    elpd : an arviz ELPDData with pointwise results (ours or arviz's own).

    Returns
    -------
    ndarray of shape (n,)

    Examples
    --------
    >>> from loo_adapt.core.psis_loo import loo_pointwise
    >>> from loo_adapt.estimators.psis import initial_result
    >>> ll = np.random.default_rng(0).normal(-1.0, 0.1, size=(2, 500, 4))
    >>> res = initial_result(loo_pointwise(ll))
    >>> bool(np.allclose(khat_from_elpd_data(to_elpd_data(res)), res.pareto_k))
    True
    """
    if hasattr(elpd, "index") and "pareto_k" in getattr(elpd, "index", []):
        return np.asarray(elpd["pareto_k"]).ravel()
    k = getattr(elpd, "pareto_k", None)
    if k is None:
        raise ValueError("this ELPDData has no pointwise pareto_k; compute it with pointwise=True")
    return np.asarray(k).ravel()


def log_weights_matrix(log_weights) -> np.ndarray:
    """(S, n) log weights from arviz's layouts (0.x ``__sample__`` last, 1.x chain/draw).

    Parameters
    ----------
    log_weights : DataArray with dims (*obs, "__sample__") or (*obs, "chain", "draw") in any
        order, or an (S, n) array (returned as is).

    Returns
    -------
    ndarray
        Draws along axis 0 (chains concatenated), observations (C order) along axis 1.

    Examples
    --------
    >>> log_weights_matrix(np.zeros((10, 3))).shape
    (10, 3)
    """
    if isinstance(log_weights, xr.Dataset):
        names = list(log_weights.data_vars)
        if len(names) != 1:
            raise ValueError(f"log_weights Dataset has variables {names}; pass one DataArray")
        log_weights = log_weights[names[0]]
    if not isinstance(log_weights, xr.DataArray):
        lw = np.asarray(log_weights, dtype=float)
        if lw.ndim != 2:
            raise ValueError(f"log_weights must be (draws, observations), got shape {lw.shape}")
        return lw
    sample = [d for d in ("chain", "draw", "__sample__") if d in log_weights.dims]
    if not sample:
        raise ValueError(f"log_weights dims {log_weights.dims} have no chain/draw/__sample__")
    obs = [d for d in log_weights.dims if d not in sample]
    arr = log_weights.transpose(*sample, *obs).values
    s = int(np.prod(arr.shape[:len(sample)]))
    return arr.reshape(s, -1)

