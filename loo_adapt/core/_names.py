"""One vocabulary for per-observation results (`PsisLoo`, `PointwiseLoo`, `Estimate`).

Per-observation arrays end in ``_i`` where a total of the same name exists (``elpd_i`` per
row, ``elpd_loo`` the total), as arviz 1.x's ``elpd_i``; the Pareto k-hat is arviz's
``pareto_k`` and its threshold arviz's ``good_k``.  The names used before this vocabulary
stay readable as deprecated properties.
"""

from __future__ import annotations

import warnings

#: old attribute name -> current name
OLD_NAMES = {"elpd_loo": "elpd_i", "p_loo": "p_loo_i", "lpd": "lpd_i",
             "mcse_elpd_loo": "mcse_elpd_i", "khat": "pareto_k", "khat_after": "pareto_k_after",
             "khat_threshold": "good_k", "khat_pq": "pareto_k_pq",
             "khat_before": "pareto_k_before", "khat_split": "pareto_k_split"}


def _alias(cls_name: str, old: str, new: str) -> property:
    def get(self):
        warnings.warn(f"{cls_name}.{old} is deprecated; use .{new} (per-observation arrays "
                      "end in _i; k-hat is arviz's pareto_k, its threshold good_k)",
                      FutureWarning, stacklevel=2)
        return getattr(self, new)

    get.__doc__ = f"Deprecated name of ``{new}``."
    return property(get)


def add_deprecated_aliases(cls):
    """Class decorator: the old name of every renamed field of ``cls`` as a warning property."""
    have = set(getattr(cls, "__dataclass_fields__", {}))
    for old, new in OLD_NAMES.items():
        if new in have and old not in have:
            setattr(cls, old, _alias(cls.__name__, old, new))
    return cls
