"""Build the `ELPDData` of whichever arviz is installed from a `PointwiseLoo`.

arviz 0.x: `ELPDData` is a pandas Series indexed by elpd_loo, se, p_loo, n_samples,
n_data_points, warning, loo_i, pareto_k, scale, good_k.
arviz 1.x: `ELPDDataLOO` (arviz_stats.utils) is a dataclass with elpd, se, p, ...,
elpd_i, pareto_k as xarray DataArrays.

In both we return a subclass that keeps the array-level result as ``.loo_adapt`` and adds
``.summary()``, so `print`, `az.compare` and `az.plot_khat` keep working on it.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import xarray as xr

from loo_adapt.result import PointwiseLoo

SCALES = {"log": 1.0, "negative_log": -1.0, "deviance": -2.0}


def arviz_major() -> int:
    import arviz

    return int(arviz.__version__.split(".")[0])


def _scale_factor(scale: str) -> float:
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {sorted(SCALES)}, got {scale!r}")
    return SCALES[scale]


def _pointwise_da(values: np.ndarray, name: str, obs_dim: str) -> xr.DataArray:
    n = len(values)
    return xr.DataArray(
        np.asarray(values, dtype=float),
        dims=[obs_dim],
        coords={obs_dim: np.arange(n)},
        name=name,
    )


def _make_v0_class():
    from arviz.stats.stats_utils import ELPDData

    class LooAdaptELPDData(ELPDData):
        """arviz 0.x ELPDData that also carries the loo_adapt pointwise result."""

        _metadata = ["loo_adapt"]

        @property
        def _constructor(self):
            return LooAdaptELPDData

        def summary(self) -> str:
            from loo_adapt.evaluation.report import format_summary

            return format_summary(self.loo_adapt, scale=self["scale"])

    return LooAdaptELPDData


def _make_v1_class():
    from arviz_stats.utils import ELPDDataLOO

    @dataclasses.dataclass
    class LooAdaptELPDData(ELPDDataLOO):
        """arviz 1.x ELPDDataLOO that also carries the loo_adapt pointwise result."""

        loo_adapt: PointwiseLoo | None = None

        def summary(self) -> str:
            from loo_adapt.evaluation.report import format_summary

            return format_summary(self.loo_adapt, scale=self.scale)

    return LooAdaptELPDData


_CLASSES: dict[int, type] = {}


def elpd_data_class() -> type:
    """The ELPDData subclass matching the installed arviz."""
    major = arviz_major()
    if major not in _CLASSES:
        _CLASSES[major] = _make_v0_class() if major == 0 else _make_v1_class()
    return _CLASSES[major]


def to_elpd_data(
    result: PointwiseLoo,
    *,
    scale: str = "log",
    pointwise: bool = True,
    obs_dim: str = "obs_id",
    log_weights: np.ndarray | None = None,
):
    """Wrap a `PointwiseLoo` as the installed arviz's ELPDData.

    Standard errors follow R loo (variance with n - 1), which is sqrt(n/(n-1)) larger
    than arviz's own; the pointwise MCSE and looic are kept in ``.loo_adapt``.
    """
    factor = _scale_factor(scale)
    est = result.estimates()
    elpd = factor * est["elpd_loo"]
    se = abs(factor) * est["se_elpd_loo"]
    warning = bool(np.any(result.unreliable))
    cls = elpd_data_class()
    elpd_i = _pointwise_da(factor * result.elpd_loo, "loo_i", obs_dim)
    # arviz's printed k table and plot_khat read "pareto_k": report the k-hat of the
    # estimator actually used, so an observation fixed by adaptation counts as good, and
    # NaN for MixIS and refits, which have no k-hat (arviz then leaves them out of its
    # table; .summary() lists them by estimator).
    no_khat = np.isin(result.method.astype(str), ("mixis", "refit"))
    khat = np.where(no_khat, np.nan, np.where(np.isnan(result.khat_after), result.khat,
                                              result.khat_after))
    pareto_k = _pointwise_da(khat, "pareto_shape", obs_dim)
    if cls.__mro__[1].__module__.startswith("arviz.stats"):
        data = [
            elpd,
            se,
            est["p_loo"],
            int(result.n_samples),
            int(result.n_obs),
            warning,
            elpd_i if pointwise else None,
            pareto_k if pointwise else None,
            scale,
            float(result.khat_threshold),
        ]
        index = [
            "elpd_loo", "se", "p_loo", "n_samples", "n_data_points", "warning",
            "loo_i", "pareto_k", "scale", "good_k",
        ]
        if not pointwise:
            data = data[:6] + data[8:]
            index = index[:6] + index[8:]
        out = cls(data=data, index=index)
        out.loo_adapt = result
        return out
    kwargs = dict(
        elpd=elpd,
        se=se,
        p=est["p_loo"],
        n_samples=int(result.n_samples),
        n_data_points=int(result.n_obs),
        scale=scale,
        warning=warning,
        good_k=float(result.khat_threshold),
        elpd_i=elpd_i.rename("elpd_i") if pointwise else None,
        pareto_k=pareto_k if pointwise else None,
        p_loo_i=_pointwise_da(result.p_loo, "p_loo_i", obs_dim) if pointwise else None,
        loo_adapt=result,
    )
    if log_weights is not None and pointwise:
        s, n = log_weights.shape
        kwargs["log_weights"] = xr.DataArray(
            log_weights.reshape(1, s, n),
            dims=["chain", "draw", obs_dim],
            coords={obs_dim: np.arange(n)},
        )
    return cls(**kwargs)


def pointwise_from_elpd_data(elpd) -> PointwiseLoo | None:
    """The `PointwiseLoo` inside an ELPDData we built, or None for a plain arviz one."""
    value = getattr(elpd, "loo_adapt", None)
    return value if isinstance(value, PointwiseLoo) else None


def khat_from_elpd_data(elpd) -> np.ndarray:
    """Pareto k-hat values from any arviz ELPDData (0.x Series or 1.x dataclass)."""
    if hasattr(elpd, "index") and "pareto_k" in getattr(elpd, "index", []):
        return np.asarray(elpd["pareto_k"]).ravel()
    k = getattr(elpd, "pareto_k", None)
    if k is None:
        raise ValueError("this ELPDData has no pointwise pareto_k; compute it with pointwise=True")
    return np.asarray(k).ravel()
