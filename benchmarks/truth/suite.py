"""The brute-force LOO truth suite: four benchmarks made here plus the three CmdStan fixtures.

``load(name)`` gives what an estimator benchmark needs: the data, the Stan program (with the
``mixis`` flag, so MixIS and refits can use it) and the truth (columns ``i, elpd_loo, mc_se,
p_loo_y1``).  ``program(name)`` wraps the same in a :class:`~loo_adapt.stan.program.StanProgram`
with the NUTS settings the truth was made with (``adapt_delta``).  ``SPLIT`` assigns the
benchmarks to the half on which estimator rules are *chosen* and the held-out half on which
they are *reported*; each half mixes model types (horseshoe, ReLU net, normal-prior logistic).

Examples
--------
>>> import sys; sys.path.insert(0, "benchmarks/truth")                     # doctest: +SKIP
>>> import suite                                                          # doctest: +SKIP
>>> data, stan_file, truth = suite.load("t_outliers")                     # doctest: +SKIP
>>> truth[:, 1].sum()  # total brute-force elpd_loo                       # doctest: +SKIP
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from make_truth import BENCHMARKS, read_checkpoint  # noqa: E402
from make_truth import FIXTURE_DIR as FIXTURES  # noqa: E402
from make_truth import FIXTURE_TRUTHS as _FIXTURES  # noqa: E402

NAMES = tuple(_FIXTURES) + tuple(BENCHMARKS)

#: Rules are chosen on "choose" and reported on "report" (held out); each half has a
#: horseshoe, a ReLU net and a normal-prior logistic regression.
SPLIT = {
    "choose": ["rhs_logistic", "relu5", "logistic_n300", "t_outliers"],
    "report": ["rhs_wide", "relu1", "logistic_normal", "rhs_microarray",
               "rhs_microarray_next"],
}


def has_truth(name: str) -> bool:
    """Is the brute-force truth of benchmark ``name`` complete (its CSV written)?

    Examples
    --------
    >>> has_truth("relu1")
    True
    """
    _check_name(name)
    if name in _FIXTURES:
        return (FIXTURES / "truth" / f"{name}.csv").is_file()
    return BENCHMARKS[name].csv.is_file()


def _check_name(name: str) -> None:
    if name not in NAMES:
        raise ValueError(f"unknown benchmark {name!r}; choose one of {list(NAMES)}")


def stan_file(name: str) -> Path:
    """Path of the Stan program of benchmark ``name`` (it declares the ``mixis`` flag).

    Parameters
    ----------
    name : one of :data:`NAMES`.

    Returns
    -------
    pathlib.Path

    Examples
    --------
    >>> stan_file("t_outliers").name
    'logistic_t.stan'
    """
    _check_name(name)
    if name in _FIXTURES:
        from loo_adapt.stan.backends import stan_model_path

        return stan_model_path(_FIXTURES[name][0])
    return BENCHMARKS[name].stan_file


def load_data(name: str) -> dict:
    """The data of benchmark ``name`` (a dict as in its ``.data.json``, with ``mixis = 0``).

    Parameters
    ----------
    name : one of :data:`NAMES`.

    Returns
    -------
    dict

    Examples
    --------
    >>> load_data("relu5")["H"]
    5
    """
    _check_name(name)
    if name in _FIXTURES:
        data = json.loads((FIXTURES / f"{name}.data.json").read_text())
    else:
        data = BENCHMARKS[name].data()
    data["mixis"] = 0
    return data


def load_truth(name: str, *, partial: bool = False) -> np.ndarray:
    """The brute-force truth of benchmark ``name``, shape (n, 4): i, elpd_loo, mc_se, p_loo_y1.

    Parameters
    ----------
    name : one of :data:`NAMES`.
    partial : for a benchmark whose refits are not all done, return the finished folds (rows
        of its checkpoint, sorted by i; the folds run in index order, so they are the first
        rows of simulated i.i.d. data) instead of raising.

    Returns
    -------
    numpy.ndarray

    Examples
    --------
    >>> load_truth("relu1").shape
    (54, 4)
    """
    _check_name(name)
    csv = FIXTURES / "truth" / f"{name}.csv" if name in _FIXTURES else BENCHMARKS[name].csv
    if csv.is_file():
        return np.loadtxt(csv, delimiter=",", skiprows=1, ndmin=2)
    done = read_checkpoint(BENCHMARKS[name].checkpoint)
    if partial and done:
        return np.array([[i, done[i]["elpd_loo"], done[i]["mc_se"], done[i]["p_loo_y1"]]
                         for i in sorted(done)])
    raise FileNotFoundError(
        f"the truth of {name} is not complete ({csv.name} missing, {len(done)} folds done); "
        f"finish it with `nice -n 10 python benchmarks/truth/make_truth.py --benchmark {name}` "
        "or pass partial=True"
    )


def load(name: str, *, partial: bool = False) -> tuple[dict, Path, np.ndarray]:
    """(data, Stan program path, truth) of benchmark ``name``.

    Parameters
    ----------
    name : one of :data:`NAMES`.
    partial : see :func:`load_truth`.

    Returns
    -------
    data : dict
    stan_file : pathlib.Path
    truth : numpy.ndarray, shape (n, 4): i, elpd_loo, mc_se, p_loo_y1

    Examples
    --------
    >>> data, path, truth = load("logistic_normal")
    >>> data["N"] == len(truth)
    True
    """
    return load_data(name), stan_file(name), load_truth(name, partial=partial)


def program(name: str):
    """A :class:`~loo_adapt.stan.program.StanProgram` of benchmark ``name`` with the NUTS
    settings its truth was made with (``adapt_delta``).

    Parameters
    ----------
    name : one of :data:`NAMES`.

    Returns
    -------
    loo_adapt.stan.program.StanProgram

    Examples
    --------
    >>> program("relu5").fit_kwargs
    {'adapt_delta': 0.95}
    """
    from loo_adapt.stan.program import StanProgram

    _check_name(name)
    if name in _FIXTURES:
        fit_kwargs = {"adapt_delta": _FIXTURES[name][1]}
    else:
        fit_kwargs = BENCHMARKS[name].fit_kwargs
    return StanProgram(stan_file(name), load_data(name), fit_kwargs=fit_kwargs)
