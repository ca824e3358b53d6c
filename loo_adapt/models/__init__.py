"""Model families for adaptive importance-sampling LOO (array core).

Each family acts on the transformed block ``theta`` (S, P) and per-draw ``hyper``; see
:mod:`loo_adapt.models.base` for the protocol.
"""

from . import registry
from .base import (
    SigmoidModel,
    SigmoidModelProtocol,
    bernoulli_logit_loglik,
    log_sigmoid,
)
from .logistic import LogisticRegression
from .priors import Flat, Normal, RegularizedHorseshoe, StudentT
from .registry import bundled_program_for, model_for
from .relu import ReLUNet

__all__ = [
    "SigmoidModel",
    "SigmoidModelProtocol",
    "LogisticRegression",
    "ReLUNet",
    "model_for",
    "bundled_program_for",
    "registry",
    "Normal",
    "StudentT",
    "Flat",
    "RegularizedHorseshoe",
    "bernoulli_logit_loglik",
    "log_sigmoid",
]
