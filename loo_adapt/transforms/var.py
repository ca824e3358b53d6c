"""Variance descent (Eq. 22, 24, 30): Q_i = (-1)^y pi(theta|D) e^{2 mu_i (1 - 2 y)} grad mu_i."""

from __future__ import annotations

from .gradient_flow import GradientFlowStep


def prepare_var(
    model, theta, hyper, i, *, post_sd=None, terms=None, **_ignored
) -> GradientFlowStep:
    """Prepare the variance-descent step of observation i (exact log|det J| per h)."""
    return GradientFlowStep("var", model, theta, hyper, i, post_sd=post_sd, terms=terms)
