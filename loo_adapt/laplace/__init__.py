"""Laplace / ELLA / VaLLA bridge: GP-based LOO predictive checks for the one-hidden-layer
ReLU net against MCMC leave-one-out.

- `net`: the net at fixed weights (`ReLUPoint`: the architecture of
  `loo_adapt.models.relu.ReLUNet` plus J^T r and the NTK), log posterior, MAP, modes.
- `lla`: linearised Laplace in weight and function space, predictive, cavity LOO, evidence.
- `ella`: Nystrom-feature LLA.  `valla`: sparse variational LLA.
- `vifa`: factor-analysis variational inference (q = N(c, F F^T + Psi), `fa`), whose draws
  carry log p and log q for LOO through p/q.
- `compare`: the comparison table against MCMC LOO.
"""

from loo_adapt.laplace.compare import Comparison, compare, plot_comparison
from loo_adapt.laplace.ella import ELLA, ella_sweep
from loo_adapt.laplace.lla import (
    FunctionSpaceLLA,
    LooPredictive,
    WeightSpaceLLA,
    cavity_loo,
    log_predictive,
    predictive_prob,
)
from loo_adapt.laplace.net import (
    LinearModel,
    Mode,
    ReLUPoint,
    find_map,
    find_modes,
    log_posterior,
)
from loo_adapt.laplace.valla import VaLLA, kmeans_inducing
from loo_adapt.laplace.vifa import VIFA

__all__ = [
    "Comparison", "compare", "plot_comparison", "ELLA", "ella_sweep", "FunctionSpaceLLA",
    "WeightSpaceLLA", "LooPredictive", "cavity_loo", "log_predictive", "predictive_prob",
    "LinearModel", "Mode", "ReLUPoint", "find_map", "find_modes", "log_posterior", "VaLLA",
    "kmeans_inducing", "VIFA",
]


def __getattr__(name):
    if name == "ReluNet":  # deprecated alias, warns
        from loo_adapt.laplace import net

        return net.ReluNet
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
