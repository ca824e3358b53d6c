"""Mixture-IS programs: the ``mixis`` flag written into a user's program (an edge module: it
reads and writes Stan).

Mixture importance sampling (Silva & Zanella 2023) needs draws from
``p(theta | D) * sum_i 1 / p(y_i | theta)``: the model block adds
``target += log_sum_exp(-log_lik)`` when a data flag ``mixis`` is set.  The bundled programs
carry the flag; :func:`add_mixis_flag` writes it into a user's program: the statements of
generated quantities that ``log_lik`` depends on (sliced out of loops and local blocks by
:mod:`loo_adapt.stan.stan_source`; ``y_rep`` and other quantities stay behind) are copied
into the model block under ``if (mixis) { ... }`` with every copied name prefixed, so
``mixis = 0`` leaves the log density exactly as it was (a ``log_lik`` declared in
transformed parameters is used where it stands). The data block gains ``mixis``,
``mixis_n_rows`` and ``mixis_rows`` (``FLAG_LINES``; a mixture over the rows
``mixis_rows``, or every row when ``mixis_n_rows = 0``) and the model block ends with
``TARGET_LINE``.

The fits that sample these programs are `loo_adapt.stan.mixture_fit`'s.
"""

from __future__ import annotations

import hashlib
import re

from loo_adapt.stan import backends as _stan
from loo_adapt.stan import stan_source as _src
from loo_adapt.stan import stanc as _stanc

__all__ = ["MixisProgramError", "add_mixis_flag", "flagged_program_path",
           "declares_mixis_rows", "declares_fold_terms", "FLAG_LINES", "TARGET_LINE"]

#: the lines at the end of the data block of a program with the mixture-IS flag (``mixis``:
#: 0 the posterior, 1 the mixture, 2 the posterior without the terms of ``mixis_rows``)
FLAG_LINES = ("int<lower=0, upper=2> mixis;", "int<lower=0> mixis_n_rows;",
              "array[mixis_n_rows] int<lower=1> mixis_rows;")
#: the line at the end of its model block (``log_lik_local``: the pointwise log-likelihood)
TARGET_LINE = ("if (mixis == 1) { if (mixis_n_rows == 0) "
               "target += log_sum_exp(-log_lik_local); "
               "else target += log_sum_exp(-log_lik_local[mixis_rows]); } "
               "else if (mixis == 2) target += -sum(log_lik_local[mixis_rows]);")
#: the flag of a program that can take several rows' terms out (mixis 0, 1 or 2), and the
#: test its model block branches on for that (a program flagged before ``mixis = 2`` existed
#: declares mixis 0 or 1 only)
_FLAG_TERMS = re.compile(r"\bint\s*<\s*lower\s*=\s*0\s*,\s*upper\s*=\s*2\s*>\s*mixis\s*;")
_FOLD_BRANCH = re.compile(r"\bmixis\s*==\s*2\b")
_RESERVED = ("mixis", "mixis_n_rows", "mixis_rows")
# what a log density is computed with: density functions, or log-scale closed forms
_DENSITY = re.compile(r"\b(?:\w+_(?:lpmf|lpdf|lupmf|lupdf|lcdf|lccdf)|log\w*|lgamma|lbeta|"
                      r"lchoose|lmgamma|lmultiply|binomial_coefficient_log)\s*\(")
_RNG = re.compile(r"\b\w+_rng\s*\(")
_LOCAL_VECTOR = re.compile(r"\b(?:simplex|unit_vector|sum_to_zero_vector|ordered|"
                           r"positive_ordered)\b")
_LOCAL_SQUARE = re.compile(r"\b(?:cholesky_factor_corr|corr_matrix|cov_matrix|"
                           r"cholesky_factor_cov)\s*\[([^\[\],]+)\]")
_LOCAL_MATRIX = re.compile(r"\b(?:cholesky_factor_cov|sum_to_zero_matrix|"
                           r"column_stochastic_matrix|row_stochastic_matrix)\b")


class MixisProgramError(ValueError):
    """The program's ``log_lik`` cannot be copied into the model block automatically."""


def _howto(log_lik: str) -> str:
    flags = " ".join(f"`{line}`" for line in FLAG_LINES)
    return (
        f"add the lines by hand: at the end of the data block {flags}, and at the end of "
        f"the model block, after computing the pointwise log-likelihood (what generated "
        f"quantities put in {log_lik}) as a local vector log_lik_local, `{TARGET_LINE}`"
    )


def _strip_constraints(text: str) -> str:
    """A generated-quantity declaration as a model-block local: ``<lower=..>`` removed."""
    out, i = [], 0
    for m in re.finditer(r"\b(?:int|real|complex|vector|row_vector|matrix)\s*<", text):
        if m.start() < i:
            continue
        j, depth = m.end(), 1
        while j < len(text) and depth:
            if text[j] in "([":
                j = _src.match(text, j)  # comparisons inside brackets are not the bound's end
                continue
            depth += {"<": 1, ">": -1}.get(text[j], 0)
            j += 1
        out.append(text[i:m.end() - 1].rstrip())
        i = j
    out.append(text[i:])
    return "".join(out)


def _local_type(text: str) -> str:
    """A top-level generated-quantity declaration as a local: constraints and constrained
    types (simplex, cov_matrix, ...) become plain vectors and matrices."""
    text = _LOCAL_VECTOR.sub("vector", text)
    text = _LOCAL_SQUARE.sub(lambda m: f"matrix[{m.group(1)}, {m.group(1)}]", text)
    text = _LOCAL_MATRIX.sub("matrix", text)
    return _strip_constraints(text)


def _size(decl: str, log_lik: str) -> str:
    """The length of a one-dimensional ``log_lik`` declaration (its size expression)."""
    text = _strip_constraints(decl)
    m = re.match(r"\s*(vector|row_vector|array)\s*\[", text)
    bad = MixisProgramError(
        f"{log_lik!r} is declared as {' '.join(decl.split())!r}, not a vector or a "
        f"one-dimensional array; {_howto(log_lik)}")
    if m is None:
        raise bad
    close = _src.match(text, m.end() - 1)
    size = text[m.end():close - 1].strip()
    depth, flat = 0, ""
    for c in size:  # a top-level comma: more than one dimension
        depth += c in "([{"
        depth -= c in ")]}"
        flat += c if depth == 0 else " "
    rest = text[close:].split()
    if "," in flat or (m.group(1) == "array" and (not rest or rest[0] not in ("real", "int"))):
        raise bad
    return size


def _density_functions(masked: str, blks: dict) -> set[str]:
    """User functions whose body (or a user function it calls) evaluates a density."""
    if "functions" not in blks:
        return set()
    _, f_open, f_end = blks["functions"]
    bodies = _src.functions(masked, f_open + 1, f_end - 1)
    out = {name for name, body in bodies.items() if _DENSITY.search(body)}
    changed = True
    while changed:
        changed = False
        for name, body in bodies.items():
            if name not in out and any(re.search(rf"\b{f}\s*\(", body) for f in out):
                out.add(name)
                changed = True
    return out


# --------------------------------------------------------------------------- the rewrite
def _rewrite(code: str, log_lik: str) -> str:
    """One pure-Python pass: slice ``log_lik`` out of generated quantities, copy it."""
    masked = _src.mask(code)
    idents = set(_src.IDENT.findall(masked))
    clash = sorted(set(_RESERVED) & idents)
    if clash:
        raise MixisProgramError(
            f"the program already uses the name(s) {clash}; no rewrite needed if `mixis` is "
            f"the mixture-IS data flag, else rename them")
    try:
        blks = _src.blocks(masked)
        tp = _transformed_parameter(masked, blks, log_lik)
        if tp is not None:
            return _rewrite_transformed(code, masked, blks, idents, log_lik, *tp)
        if "generated quantities" not in blks:
            raise MixisProgramError(
                f"the program has no generated quantities block computing {log_lik!r}; "
                f"{_howto(log_lik)}")
        _, g_open, g_end = blks["generated quantities"]
        stmts = _src.parse(masked, g_open + 1, g_end - 1)
    except _src.SourceError as err:
        raise MixisProgramError(f"{err}; {_howto(log_lik)}") from None
    top = [st for st in stmts if st.kind == "decl" and log_lik in st.declares]
    if not top:
        names = [n for st in stmts if st.kind == "decl" for n in st.declares]
        raise MixisProgramError(
            f"generated quantities declare no {log_lik!r} at their top level (they declare "
            f"{names}; pass log_lik= to name the pointwise log-likelihood); {_howto(log_lik)}")
    size = _size(_src.text_of(masked, top[0]), log_lik)
    kept = _src.slice_statements(masked, stmts, log_lik)
    pieces = [_src.text_of(masked, st) if st.kind in ("decl", "simple")
              else masked[st.head[0]:st.head[1]] if st.head else "" for st in kept]
    for piece in pieces:
        if _RNG.search(piece):
            raise MixisProgramError(
                f"{log_lik!r} depends on random numbers (_rng) in generated quantities: "
                f"`{' '.join(piece.split())}`; {_howto(log_lik)}")
    _check_density(masked, blks, " ".join(pieces), log_lik, "generated quantities")

    # every name the copy declares is prefixed (no clash with model-block locals)
    names = {n for st in kept for n in st.declares}
    prefix = "mixis_"
    while any(name.startswith(prefix) for name in idents):
        prefix = "mixis" + prefix
    local = _local_name(idents, prefix)
    rename = re.compile(r"(?<![\w.])(" + "|".join(sorted(map(re.escape, names))) + r")\b")
    top_level = set(stmts)

    def simple(st, text):
        text = rename.sub(lambda m: prefix + m.group(1), text)
        return _local_type(text) if st.kind == "decl" and st in top_level else text

    # copied without comments (a comment inside a joined header would swallow code)
    body = _src.emit(_src.mask(code, strings=False), masked, stmts, kept, 2, simple)
    target = TARGET_LINE.replace("log_lik_local", local)
    addition = "\n".join([
        "  // mixture-IS proposal (Silva & Zanella 2023), written by loo_adapt: the pointwise",
        f"  // log-likelihood of generated quantities ({log_lik}) and, with mixis = 1,",
        "  // target += log_sum_exp(-log_lik) over all rows or the rows mixis_rows; with",
        "  // mixis = 2, the terms of the rows mixis_rows taken out of the target",
        f"  vector[{size}] {local};",
        "  if (mixis) {",
        *body,
        f"    {local} = to_vector({prefix}{log_lik});",
        "  }",
        f"  {target}",
        "",
    ])
    return _insert(code, blks, addition)


def _check_density(masked: str, blks: dict, text: str, log_lik: str, block: str) -> None:
    """Refuse a ``log_lik`` whose statements (``text``) evaluate no density."""
    users = _density_functions(masked, blks)
    if not _DENSITY.search(text) and not any(re.search(rf"\b{f}\s*\(", text) for f in users):
        raise MixisProgramError(
            f"{log_lik!r} is not computed from *_lpmf / *_lpdf statements in {block} "
            f"(directly, in a user function, or in closed form with log, log1p_exp, lgamma, "
            f"...); {_howto(log_lik)}")


def _local_name(idents: set, prefix: str = "mixis_") -> str:
    """The model-block local holding the pointwise log-likelihood, clashing with no name."""
    local = "log_lik_local"
    while local in idents:
        local = prefix + local
    return local


def _transformed_parameter(masked: str, blks: dict, log_lik: str):
    """(statements, declaration) where ``log_lik`` is a top-level transformed parameter
    (the model block sees it, so nothing need be copied), else None."""
    if "transformed parameters" not in blks:
        return None
    _, t_open, t_end = blks["transformed parameters"]
    stmts = _src.parse(masked, t_open + 1, t_end - 1)
    top = [st for st in stmts if st.kind == "decl" and log_lik in st.declares]
    return (stmts, top[0]) if top else None


def _rewrite_transformed(code: str, masked: str, blks: dict, idents: set, log_lik: str,
                         stmts, decl) -> str:
    """The rewrite of a program whose ``log_lik`` is a transformed parameter: the model block
    ends with the target line over it (a local copy as a vector), the data block gains the
    flags."""
    size = _size(_src.text_of(masked, decl), log_lik)
    kept = _src.slice_statements(masked, stmts, log_lik)
    text = " ".join(_src.text_of(masked, st) if st.kind in ("decl", "simple")
                    else masked[st.head[0]:st.head[1]] if st.head else "" for st in kept)
    _check_density(masked, blks, text, log_lik, "transformed parameters")
    local = _local_name(idents)
    addition = "\n".join([
        "  // mixture-IS proposal (Silva & Zanella 2023), written by loo_adapt: with mixis = 1,",
        f"  // target += log_sum_exp(-{log_lik}) over all rows or the rows mixis_rows; with",
        "  // mixis = 2, the terms of the rows mixis_rows taken out of the target",
        f"  vector[{size}] {local} = to_vector({log_lik});",
        f"  {TARGET_LINE.replace('log_lik_local', local)}",
        "",
    ])
    return _insert(code, blks, addition)


def _insert(code: str, blks: dict, addition: str) -> str:
    """``code`` with ``addition`` at the end of its model block (a new model block if it has
    none) and the flag lines at the end of its data block."""
    edits = []  # (position, text), applied back to front
    if "model" in blks:
        edits.append((blks["model"][2] - 1, addition))
    else:  # a model block goes before generated quantities, or at the end
        at = blks["generated quantities"][0] if "generated quantities" in blks else len(code)
        edits.append((at, "model {\n" + addition + "}\n"))
    flags = "".join(f"  {line}\n" for line in FLAG_LINES)
    if "data" in blks:
        edits.append((blks["data"][2] - 1, flags))
    else:
        at = blks["functions"][2] if "functions" in blks else 0
        edits.append((at, "\ndata {\n" + flags + "}\n"))
    out = code
    for pos, text in sorted(edits, key=lambda e: e[0], reverse=True):
        before = out[:pos]
        if text.startswith("  ") and not before.endswith("\n"):
            text = "\n" + text
        out = before + text + out[pos:]
    return out


def add_mixis_flag(code: str, log_lik: str = "log_lik", *, use_stanc: bool | None = None,
                   check: bool = True) -> str:
    """The program with the mixture-IS flag ``mixis`` written in.

    The statements of generated quantities that ``log_lik`` depends on are sliced out --
    out of loops, branches and local blocks, with the locals, running indices and loop
    bounds they read; statements filling ``y_rep`` or other quantities stay behind -- and
    copied to the end of the model block under ``if (mixis)``, every copied name prefixed.
    Generated quantities are unchanged, and with ``mixis = 0`` the log density is the
    original program's. The log-likelihood may be computed by user functions (including
    user ``_lpdf`` / ``_lpmf`` functions built on ``_lupdf`` / ``_lupmf``), from transformed
    data and transformed parameters, element-wise or in one vectorised assignment.  Where
    ``log_lik`` is itself a top-level transformed parameter (the model block sees it, and
    often sums it into the target), nothing is copied: the model block ends with
    ``log_lik_local = to_vector(log_lik)`` and ``TARGET_LINE``.

    Parameters
    ----------
    code : str
        Stan program text.
    log_lik : str
        Name of the generated quantity (or transformed parameter) holding the pointwise
        log-likelihood (a vector or a one-dimensional array).
    use_stanc : bool or None
        None: rewrite the text as written and, when that fails and a ``stanc`` is found
        (:func:`loo_adapt.stan.stanc.find_stanc`), the program as ``stanc --print-canonical``
        prints it. True: always rewrite the canonical text (an error without stanc). False:
        never run stanc.
    check : bool
        Compile the rewritten program (stanc when found, else stanli's embedded stanc3) and
        raise if it is not valid Stan.

    Returns
    -------
    str
        The program with, at the end of the data block, ``FLAG_LINES``
        (``int<lower=0, upper=2> mixis;``, ``int<lower=0> mixis_n_rows;``,
        ``array[mixis_n_rows] int<lower=1> mixis_rows;``) and, at the end of the model
        block, the copied computation of ``log_lik_local`` followed by ``TARGET_LINE``:
        with ``mixis = 1`` ``target += log_sum_exp(-log_lik_local)``, over ``mixis_rows``
        when ``mixis_n_rows > 0``; with ``mixis = 2`` ``target += -sum(log_lik_local[
        mixis_rows])``, the posterior without those rows' terms (a K-fold fold's refit by
        term).

    Raises
    ------
    MixisProgramError
        When the program already uses the name ``mixis``, uses ``#include``, has no
        top-level generated quantity or transformed parameter ``log_lik``, computes it
        without a density
        (``*_lpmf`` / ``*_lpdf``, directly or in a user function) or from random numbers
        (``_rng``), or the rewrite does not compile (e.g. a data-only function argument
        computed from parameters); the message gives the lines to add by hand. When the
        compiler used for the check cannot compile the original program either, the rewrite
        is returned unchecked with a warning.

    Examples
    --------
    >>> code = '''
    ... data { int N; vector[N] y; }
    ... parameters { real mu; }
    ... model { y ~ normal(mu, 1); }
    ... generated quantities {
    ...   vector[N] log_lik;
    ...   array[N] real y_rep;
    ...   for (n in 1:N) {
    ...     log_lik[n] = normal_lpdf(y[n] | mu, 1);
    ...     y_rep[n] = normal_rng(mu, 1);
    ...   }
    ... }'''
    >>> flagged = add_mixis_flag(code, check=False)
    >>> "int<lower=0, upper=2> mixis;" in flagged
    True
    >>> "    log_lik_local = to_vector(mixis_log_lik);" in flagged
    True
    >>> flagged.count("normal_rng")
    1
    """
    if re.search(r"^\s*#include", code, flags=re.M):
        raise MixisProgramError(f"the program uses #include; {_howto(log_lik)}")
    stanc = _stanc.find_stanc() if use_stanc is not False else None
    if use_stanc and stanc is None:
        raise MixisProgramError("use_stanc=True but no stanc executable was found "
                                "(see loo_adapt.stan.stanc.find_stanc)")
    sources = [] if use_stanc else [code]
    if stanc is not None:
        sources.append(None)  # the canonical text, computed only if needed
    first = None
    for source in sources:
        if source is None:
            source = _stanc.canonical(code, stanc)
            if source is None:
                broken = _stanc.syntax_error(code, use_stanc=True)
                raise first or MixisProgramError(f"stanc cannot read the program: {broken}")
            if source == code and not use_stanc:
                break
        try:
            out = _rewrite(source, log_lik)
        except MixisProgramError as err:
            first = first or err
            continue
        error = _stanc.syntax_error(out, use_stanc=use_stanc is not False) if check else None
        if error is None:
            return out
        broken = _stanc.syntax_error(source, use_stanc=use_stanc is not False)
        if broken is not None:
            # the checker cannot compile the user's own program (a feature stanli lacks, an
            # older stanc, or a broken program): it cannot judge the rewrite either
            import warnings

            warnings.warn(
                "the mixis-flagged program was not checked: the Stan compiler used for the "
                f"check cannot compile the original program either ({broken.splitlines()[0]})",
                UserWarning, stacklevel=2)
            return out
        first = first or MixisProgramError(
            f"the rewritten program does not compile ({error}); {_howto(log_lik)}")
    raise first


def flagged_program_path(stan_file, log_lik: str = "log_lik"):
    """Write the flagged variant of a ``.stan`` file to the cache; returns its path.

    Parameters
    ----------
    stan_file : path-like
        The user's program.
    log_lik : str
        Name of its pointwise log-likelihood generated quantity.

    Returns
    -------
    pathlib.Path
        ``<cache>/mixis/<hash of the text>/<stem>_mixis.stan`` (written once per text).

    Examples
    --------
    >>> flagged_program_path("my_model.stan")  # doctest: +SKIP
    PosixPath('/home/me/.cache/loo_adapt/mixis/3f0c.../my_model_mixis.stan')
    """
    import pathlib

    path = pathlib.Path(stan_file)
    code = _src.program_text(path)  # #include files inlined: the copy lives in the cache
    flagged = add_mixis_flag(code, log_lik=log_lik)
    key = hashlib.sha256((log_lik + "\0" + code).encode()).hexdigest()[:16]
    target = _stan._cache_dir() / "mixis" / key / f"{path.stem}_mixis.stan"
    if not target.is_file() or target.read_text() != flagged:
        _stan.write_to_cache(target, lambda t: t.write_text(flagged))
    return target


# --------------------------------------------------------------------------- focused mixtures
_ROWS_DECL = re.compile(r"\bint\s*<[^>]*>\s*mixis_n_rows\s*;.*?\bmixis_rows\s*;", re.S)


def declares_mixis_rows(code: str) -> bool:
    """Can the program mix only some observations' leave-one-out posteriors?

    True when its data declare ``int<lower=0> mixis_n_rows;`` and
    ``array[mixis_n_rows] int<lower=1> mixis_rows;`` (the bundled programs do; a program
    with only the ``mixis`` flag cannot be focused).

    Parameters
    ----------
    code : str
        Stan program text.

    Returns
    -------
    bool

    Examples
    --------
    >>> declares_mixis_rows("data { int<lower=0, upper=1> mixis; }")
    False
    >>> declares_mixis_rows("data { int<lower=0> mixis_n_rows; "
    ...                     "array[mixis_n_rows] int<lower=1> mixis_rows; }")
    True
    """
    return _ROWS_DECL.search(_src.mask(code)) is not None


def declares_fold_terms(code: str) -> bool:
    """Can the program take several observations' terms out of its target at once?

    True when it declares ``int<lower=0, upper=2> mixis;`` with ``mixis_n_rows`` and
    ``mixis_rows`` and branches on ``mixis == 2`` (`add_mixis_flag` writes them, with
    ``target += -sum(log_lik_local[mixis_rows])`` under ``mixis == 2``); a program flagged
    by hand with ``upper=1``, or without that branch, takes out one row at a time
    (``mixis = 1`` over one row), not a fold.

    Examples
    --------
    >>> declares_fold_terms("data { int<lower=0, upper=1> mixis; int<lower=0> mixis_n_rows; "
    ...                     "array[mixis_n_rows] int<lower=1> mixis_rows; }")
    False
    """
    masked = _src.mask(code)
    return all(p.search(masked) is not None for p in (_ROWS_DECL, _FLAG_TERMS, _FOLD_BRANCH))
