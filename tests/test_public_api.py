"""The public surface: every name in ``loo_adapt.__all__`` exists, every public verb has a
numpydoc docstring with Parameters, Returns and Examples, and the Examples of the array-only
modules run (as doctests)."""

from __future__ import annotations

import doctest
import importlib
import inspect
import types

import pytest

import loo_adapt as la

#: modules whose public functions are verbs of the package (besides loo_adapt.__all__)
VERB_MODULES = (
    "loo_adapt.evaluation.metrics", "loo_adapt.evaluation.plots", "loo_adapt.evaluation.report",
    "loo_adapt.evaluation.arviz", "loo_adapt.io", "loo_adapt.io.readers", "loo_adapt.kfold",
    "loo_adapt.subsample", "loo_adapt.expectations", "loo_adapt.compare", "loo_adapt.score",
    "loo_adapt.evaluation.diagnostics", "loo_adapt.core.fmt",
)
#: array-only modules whose Examples are cheap enough to run here
DOCTEST_MODULES = (
    "loo_adapt.core.checks", "loo_adapt.core.ess", "loo_adapt.core.psis", "loo_adapt.core.pool",
    "loo_adapt.evaluation.metrics", "loo_adapt.io.columns", "loo_adapt.io.arrays",
    "loo_adapt.result", "loo_adapt.models.relu", "loo_adapt.subsample",
    "loo_adapt.estimators.base", "loo_adapt.estimators.estimate", "loo_adapt.compare",
    "loo_adapt.score",
    "loo_adapt.evaluation.diagnostics", "loo_adapt.core.fmt",
)


def _missing_sections(obj) -> list[str]:
    doc = inspect.getdoc(obj) or ""
    wanted = ["Parameters", "Returns", "Examples"]
    if inspect.isclass(obj):
        wanted.remove("Returns")  # a class documents its constructor's parameters
    elif not inspect.signature(obj).parameters:
        wanted.remove("Parameters")
    return [s for s in wanted if f"\n{s}\n{'-' * len(s)}\n" not in f"\n{doc}\n"]


def _public_callables():
    for name in la.__all__:
        obj = getattr(la, name)
        if callable(obj) and not isinstance(obj, types.ModuleType):
            yield f"loo_adapt.{name}", obj
    for modname in VERB_MODULES:
        mod = importlib.import_module(modname)
        for name in getattr(mod, "__all__", [n for n in dir(mod) if not n.startswith("_")]):
            obj = getattr(mod, name)
            if inspect.isfunction(obj) and obj.__module__.startswith("loo_adapt"):
                yield f"{modname}.{name}", obj


def test_every_name_in_all_exists_and_is_listed_by_dir():
    assert len(set(la.__all__)) == len(la.__all__)
    missing = [name for name in la.__all__ if not hasattr(la, name)]
    assert missing == []
    assert set(la.__all__) <= set(dir(la))
    for modname in VERB_MODULES:
        mod = importlib.import_module(modname)
        absent = [n for n in getattr(mod, "__all__", ()) if not hasattr(mod, n)]
        assert absent == [], modname


def test_public_verbs_have_numpydoc_parameters_returns_examples():
    bad = {name: miss for name, obj in _public_callables() if (miss := _missing_sections(obj))}
    assert bad == {}


def test_the_section_check_can_fail():
    def no_examples(x):
        """Add one.

        Parameters
        ----------
        x : float

        Returns
        -------
        float
        """

    assert _missing_sections(no_examples) == ["Examples"]


@pytest.mark.parametrize("modname", DOCTEST_MODULES)
def test_examples_run(modname):
    mod = importlib.import_module(modname)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = finder.find(mod, mod.__name__, globs={**vars(mod)})
    assert tests, f"{modname} has no Examples to run"
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} failing example(s) in {modname}"
