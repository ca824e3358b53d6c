"""Progress bars for the long stages (mixture fit, refits, moment matching): one helper, so
every stage shows the same kind of bar, in notebooks and terminals alike.

A bar appears only after ``delay`` seconds (nothing for short calls), shows the time
estimate, and is silenced with ``enabled=False`` (``loo(..., progress=False)``).  In a
notebook without ipywidgets it falls back to the text bar instead of warning.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys

__all__ = ["progress_bar", "stage_progress"]


def _tqdm_class():
    try:
        if "ipykernel" in sys.modules and importlib.util.find_spec("ipywidgets"):
            from tqdm.notebook import tqdm
        else:
            from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return None
    return tqdm


def progress_bar(total: int | None, desc: str, *, enabled: bool = True, unit: str = "it",
                 delay: float = 2.0):
    """A tqdm bar (or None when disabled): shown after ``delay`` seconds, with the ETA.

    Parameters
    ----------
    total : number of steps (None: elapsed time only).
    desc : what is running.
    enabled : False returns None (callers update only a bar that exists).
    unit : the unit of a step.
    delay : seconds before the bar appears.

    Returns
    -------
    tqdm or None
    """
    tqdm = _tqdm_class() if enabled else None
    if tqdm is None:
        return None
    return tqdm(total=total, desc=desc, unit=unit, delay=delay, leave=False)


@contextlib.contextmanager
def stage_progress(desc: str, *, enabled: bool = True):
    """A one-step bar around a call whose inside cannot report progress (a Stan fit):
    elapsed time while it runs, closed when it ends."""
    bar = progress_bar(1, desc, enabled=enabled, unit="fit")
    try:
        yield bar
        if bar is not None:
            bar.update(1)
    finally:
        if bar is not None:
            bar.close()
