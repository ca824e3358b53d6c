"""Log-likelihood descent (Elvira et al. 2022; S.1): T = theta - h grad log l_i(theta).

For a Bernoulli-logit model ``grad log l_i = (y_i - sigmoid(mu_i)) grad mu_i``, so
``J = I + h (sigmoid(mu_i) - y_i) H_i + h sigmoid'(mu_i) grad mu_i grad mu_i^T`` and
``det J = det(I + a H_i) (1 + h sigmoid'(mu_i) grad mu_i^T (I + a H_i)^{-1} grad mu_i)``
with ``a = h (sigmoid(mu_i) - y_i)`` (S.34-S.36 in another basis).
"""

from __future__ import annotations

from .gradient_flow import GradientFlowStep


def prepare_ll(model, theta, hyper, i, *, post_sd=None, terms=None, **_ignored) -> GradientFlowStep:
    """Prepare the log-likelihood-descent step of observation i (exact log|det J| per h)."""
    return GradientFlowStep("ll", model, theta, hyper, i, post_sd=post_sd, terms=terms)
