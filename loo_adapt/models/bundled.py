"""Model families of the bundled Stan programs (and the CmdStan fixture programs).

The table -- names, aliases, prior defaults, parameter roles -- is
`loo_adapt.models.registry`; this module keeps the historical import path of its
:func:`~loo_adapt.models.registry.model_for`.
"""

from .registry import ALIASES, model_for

__all__ = ["ALIASES", "model_for"]
