"""Transformations T_i of the draws with their log|det J| (array core).

Every transform is prepared once per observation and then applied per step:

    step = TRANSFORMS[name](model, theta, hyper, i, post_sd=..., terms=..., log_weights=...)
    phi, log_abs_det_J = step.apply(step.step_for_rho(rho))    # or step.apply_rho(rho)

``terms`` (from :func:`posterior_terms`) lets the O(S n P) posterior quantities be
computed once for all observations; ``log_weights`` (PSIS log weights of observation i)
is needed by MM1/MM2 only; ``post_sd`` defaults to the draws' marginal sds (Eq. 26).
A step of 0 returns ``phi == theta`` and ``log|J| == 0`` exactly.
"""

from .first_order import (
    CallableModel,
    FirstOrderStep,
    callable_model_from_sigmoid,
    hutchinson_trace,
    prepare_first_order,
)
from .gradient_flow import (
    DEFAULT_RHO,
    GradientFlowStep,
    PosteriorTerms,
    posterior_sd,
    posterior_terms,
)
from .kl import prepare_kl
from .ll import prepare_ll
from .mm import MomentMatchStep, prepare_mm1, prepare_mm2
from .var import prepare_var

#: name -> prepare(model, theta, hyper, i, *, post_sd=None, terms=None, log_weights=None)
TRANSFORMS = {
    "kl": prepare_kl,
    "var": prepare_var,
    "ll": prepare_ll,
    "mm1": prepare_mm1,
    "mm2": prepare_mm2,
}

__all__ = [
    "TRANSFORMS",
    "DEFAULT_RHO",
    "GradientFlowStep",
    "MomentMatchStep",
    "FirstOrderStep",
    "CallableModel",
    "PosteriorTerms",
    "posterior_terms",
    "posterior_sd",
    "prepare_kl",
    "prepare_var",
    "prepare_ll",
    "prepare_mm1",
    "prepare_mm2",
    "prepare_first_order",
    "callable_model_from_sigmoid",
    "hutchinson_trace",
]
