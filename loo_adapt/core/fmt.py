"""Numbers in messages: a comparison that failed must read as failing.

``f"k-hat {k:.2f} > {thr:.2f}"`` prints ``k-hat 0.67 > 0.67`` for k = 0.6731 and
thr = 0.6699; `comparison` prints both sides with as many decimals as it takes to tell them
apart (two at least, both sides alike), so every message and report that names a failed
check uses it.
"""

from __future__ import annotations

import math

__all__ = ["distinct", "comparison"]

#: most decimals `distinct` tries before switching to 6 significant digits
MAX_DIGITS = 6


def distinct(value: float, bound: float, digits: int = 2) -> tuple[str, str]:
    """Both numbers with the fewest decimals (at least ``digits``) that tell them apart.

    Parameters
    ----------
    value, bound : the two numbers of a comparison.
    digits : the fewest decimals.

    Returns
    -------
    (str, str)
        The two numbers with the same number of decimals; non-finite values as Python
        prints them ("inf", "nan").

    Examples
    --------
    >>> distinct(0.6731, 0.6699)
    ('0.673', '0.670')
    >>> distinct(0.9, 0.7)
    ('0.90', '0.70')
    """
    value, bound = float(value), float(bound)
    if not (math.isfinite(value) and math.isfinite(bound)):
        fmt = lambda x: f"{x:.{digits}f}" if math.isfinite(x) else str(x)  # noqa: E731
        return fmt(value), fmt(bound)
    for d in range(digits, MAX_DIGITS + 1):
        a, b = f"{value:.{d}f}", f"{bound:.{d}f}"
        if a != b or value == bound:
            return a, b
    return f"{value:.{MAX_DIGITS}g}", f"{bound:.{MAX_DIGITS}g}"


def comparison(name: str, value: float, op: str, bound: float, digits: int = 2) -> str:
    """``"<name> <value> <op> <bound>"`` with `distinct` numbers.

    Parameters
    ----------
    name : what is compared ("k-hat", "MixIS MCSE").
    value : its value.
    op : the failed relation as text (">", "<", "above").
    bound : the threshold.
    digits : the fewest decimals.

    Returns
    -------
    str

    Examples
    --------
    >>> comparison("k-hat", 0.70004, ">", 0.7)
    'k-hat 0.70004 > 0.70000'
    >>> comparison("MixIS MCSE", 0.1003, ">", 0.1)
    'MixIS MCSE 0.1003 > 0.1000'
    """
    a, b = distinct(value, bound, digits)
    return f"{name} {a} {op} {b}"
