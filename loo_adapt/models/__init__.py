"""Model families for adaptive importance-sampling LOO (array core).

Each family acts on the transformed block ``theta`` (S, P) and per-draw ``hyper``; see
:mod:`loo_adapt.models.base` for the protocol.
"""

from .base import (
    SigmoidModel,
    SigmoidModelProtocol,
    bernoulli_logit_loglik,
    log_sigmoid,
)
from .bundled import model_for
from .logistic import LogisticRegression
from .priors import Flat, Normal, RegularizedHorseshoe, StudentT
from .relu import ReLUNet

__all__ = [
    "SigmoidModel",
    "SigmoidModelProtocol",
    "LogisticRegression",
    "ReLUNet",
    "model_for",
    "Normal",
    "StudentT",
    "Flat",
    "RegularizedHorseshoe",
    "bernoulli_logit_loglik",
    "log_sigmoid",
]
