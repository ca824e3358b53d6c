"""A module that can be called as its verb: ``loo_adapt.kfold(...)`` keeps working after
``import loo_adapt.kfold`` has made the package attribute the module itself."""

from __future__ import annotations

import sys
import types


def make_module_callable(module_name: str, fn) -> None:
    """Calling module ``module_name`` calls ``fn`` with the same arguments."""

    class _CallableModule(types.ModuleType):
        __doc__ = sys.modules[module_name].__doc__

        def __call__(self, *args, **kwargs):
            return fn(*args, **kwargs)

    sys.modules[module_name].__class__ = _CallableModule
