"""Model families matching the bundled Stan programs (and the CmdStan fixture programs).

The bundled programs (``stan_models/``) and the fixture programs share parameter names,
so one mapping serves both: a program name and its Stan data dict give the model family
whose log-likelihood reproduces the program's ``log_lik``.
"""

from __future__ import annotations

import numpy as np

from .logistic import LogisticRegression
from .priors import Normal, RegularizedHorseshoe
from .relu import ReLUNet

#: accepted names (bundled program, fixture program, command-line spelling) -> family
ALIASES = {
    "logistic_normal": "logistic",
    "logistic": "logistic",
    "logistic_rhs": "logistic-rhs",
    "rhs_logistic": "logistic-rhs",
    "logistic-rhs": "logistic-rhs",
    "relu_net": "relu",
    "relu1": "relu",
    "relu": "relu",
}


def _data_arrays(data: dict) -> tuple[np.ndarray, np.ndarray]:
    missing = [k for k in ("X", "y") if k not in data]
    if missing:
        raise ValueError(f"Stan data lacks {missing}")
    return np.asarray(data["X"], dtype=float), np.asarray(data["y"])


def model_for(name: str, data: dict):
    """The model family for a bundled program name and its Stan data dict."""
    try:
        family = ALIASES[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known: {sorted(ALIASES)}") from None
    X, y = _data_arrays(data)
    if family == "logistic":
        return LogisticRegression(
            X, y, coef="beta", intercept="alpha",
            prior=Normal(float(data["prior_sd"])),
            intercept_prior=Normal(float(data["scale_icept"])),
        )
    if family == "logistic-rhs":
        has_intercept = bool(int(data.get("has_intercept", 1)))
        return LogisticRegression(
            X, y, coef="beta",
            intercept="beta0" if has_intercept else None,
            prior=RegularizedHorseshoe(tau="tau", lambda_tilde="lambda_tilde"),
            intercept_prior=Normal(float(data["scale_icept"])) if has_intercept else None,
        )
    return ReLUNet(X, y, prior_sd=float(data["prior_sd"]), hidden=int(data["H"]) if "H" in data
                   else None)
