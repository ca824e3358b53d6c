"""KL-divergence descent (Eq. 21, 23, 29): Q_i = (-1)^y pi(theta|D) e^{mu_i (1 - 2 y)} grad mu_i."""

from __future__ import annotations

from .gradient_flow import GradientFlowStep


def prepare_kl(model, theta, hyper, i, *, post_sd=None, terms=None, **_ignored) -> GradientFlowStep:
    """Prepare the KL-descent step of observation i (exact log|det J| per h)."""
    return GradientFlowStep("kl", model, theta, hyper, i, post_sd=post_sd, terms=terms)
