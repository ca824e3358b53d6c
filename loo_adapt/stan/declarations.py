"""The variables a Stan program declares, block by block, read from its source.

Enough of Stan's grammar to list the names declared at the top level of the ``data`` and
``parameters`` blocks (and the others), so that a program can be checked against a data
file and a fit's draws before anything is compiled or sampled: comments and strings are
masked, constraints (``<lower=0, upper=1>``), sizes (``[N, K]``, old-style ``real y[N]``)
and tuple types are skipped, and several names in one declaration (``real a, b;``) are all
listed. Local blocks (``{ ... }``) inside a block are not declarations of the block.
"""

from __future__ import annotations

import pathlib
import re

from loo_adapt.stan import stan_source as _src

BLOCKS = _src.BLOCKS
_IDENT = re.compile(r"[A-Za-z]\w*")
_KEYWORDS = {"array", "int", "real", "complex", "vector", "row_vector", "matrix",
             "complex_vector", "complex_row_vector", "complex_matrix", "simplex",
             "unit_vector", "sum_to_zero_vector", "sum_to_zero_matrix", "ordered",
             "positive_ordered", "cholesky_factor_corr", "cholesky_factor_cov", "corr_matrix",
             "cov_matrix", "column_stochastic_matrix", "row_stochastic_matrix", "tuple"}


def _blocks(masked: str) -> dict[str, str]:
    """Top-level block name -> the text between its braces (`stan_source.blocks`)."""
    return {name: masked[brace + 1:end - 1]
            for name, (_, brace, end) in _src.blocks(masked).items()}


def _drop_groups(text: str) -> str:
    """``text`` up to its first top-level ``=`` without its bracketed groups: ``<...>``,
    ``[...]`` and ``(...)``."""
    pairs = {"<": ">", "[": "]", "(": ")"}
    out, stack = [], []
    for ch in text:
        if ch == "=" and not stack:
            break
        if ch in pairs:
            stack.append(pairs[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
        elif not stack:
            out.append(ch)
    return "".join(out)


def _top_level(body: str) -> str:
    """The block's text without nested local blocks."""
    out, depth = [], 0
    for ch in body:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                out.append(";")  # a local block ends a statement
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def _names(statement: str) -> list[str]:
    """The names a declaration statement declares ([] for anything else)."""
    text = _drop_groups(statement)
    names = []
    for k, piece in enumerate(text.split(",")):
        words = _IDENT.findall(piece)
        if k == 0:
            if len(words) < 2 or words[0] not in _KEYWORDS:
                return []
        if words and words[-1] not in _KEYWORDS:
            names.append(words[-1])
    return names


def declared(stan_file_or_code) -> dict[str, list[str]]:
    """Names declared at the top level of each block of a Stan program.

    Parameters
    ----------
    stan_file_or_code : path of a ``.stan`` file, or the program's text.

    Returns
    -------
    dict
        Block name (``"data"``, ``"parameters"``, ...) -> declared names, in order; blocks
        the program does not have are absent.

    Examples
    --------
    >>> declared('''data { int<lower=0> N; array[N] int<lower=0, upper=1> y;
    ...                   real x[N]; } // old array syntax
    ...             parameters { real a, b; vector<lower=0>[2] s; }
    ...             model { y ~ bernoulli_logit(a + b * to_vector(x)); }''')["data"]
    ['N', 'y', 'x']
    """
    code = stan_file_or_code
    if isinstance(code, pathlib.Path) or (isinstance(code, str) and "{" not in code):
        code = pathlib.Path(code).read_text(encoding="utf-8")
    blocks = _blocks(_src.mask(code))
    out = {}
    for name, body in blocks.items():
        if name in ("functions", "model"):
            out[name] = []
            continue
        names = []
        for statement in _top_level(body).split(";"):
            names.extend(_names(statement))
        out[name] = names
    return out
