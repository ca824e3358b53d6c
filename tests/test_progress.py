"""Progress in the Python API (issue 20): the long stages show a bar with its ETA unless
``progress=False``; short stages (under the bar's delay) show nothing."""

from __future__ import annotations

import time
import warnings

import numpy as np

import loo_adapt
from loo_adapt.io.arrays import read_dict
from loo_adapt.progress import progress_bar, stage_progress


def _refit_fn(i):
    return np.full((2, 100), -1.25)


def _loo(progress):
    ll = -np.random.default_rng(3).exponential(1.0, size=(4, 250, 6)) ** 2  # k-hat > 0.01
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return loo_adapt.loo(read_dict({"log_lik": ll}, method="mcmc"), estimator="psis",
                             fallback=("refit",), khat_threshold=0.01, progress=progress,
                             refit_kwargs={"refit_fn": _refit_fn, "n_jobs": 1})


def test_refits_show_a_bar_unless_silenced(capsys):
    res = _loo(True)
    assert (res.loo_adapt.method == "refit").all()
    err = capsys.readouterr().err
    assert "LOO refits" in err and "/6 [" in err  # the count and the time estimate
    _loo(False)
    assert "LOO refits" not in capsys.readouterr().err


def test_short_stages_show_nothing_long_ones_their_elapsed_time(capsys):
    with stage_progress("quick stage"):
        pass
    assert "quick stage" not in capsys.readouterr().err
    bar = progress_bar(3, "slow stage", delay=0.05)
    time.sleep(0.2)
    bar.update(3)
    bar.close()
    assert "slow stage" in capsys.readouterr().err
    assert progress_bar(3, "off", enabled=False) is None
