"""Stan program text in pure Python: blocks, a statement tree, and the slice of a block
that computes one variable (used to copy ``log_lik`` into the model block).

Comments and string literals are blanked first (:func:`mask`, same length), so nothing they
mention is read as code. Statements are parsed into a tree (local blocks, ``for``,
``while``, ``if``/``else``, ``profile``, declarations, other statements); every name is
resolved to the declaration in scope, so two sibling blocks that both declare ``eta`` are
two variables. :func:`slice_statements` keeps the statements a variable depends on: those
that write it or any variable it reads, the loops and branches around them, and nothing
else (``y_rep`` filled in the same loop stays behind).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["SourceError", "program_text", "mask", "blocks", "parse", "Stmt", "slice_statements",
           "emit", "functions", "declared_names", "text_of", "IDENT", "TYPES", "BLOCK_ONLY_TYPES"]

BLOCKS = ("functions", "data", "transformed data", "parameters", "transformed parameters",
          "model", "generated quantities")
LOCAL_TYPES = {"int", "real", "complex", "vector", "row_vector", "matrix", "complex_vector",
               "complex_row_vector", "complex_matrix", "array", "tuple"}
# constrained types a block variable may have and a local may not
BLOCK_ONLY_TYPES = {"simplex", "unit_vector", "sum_to_zero_vector", "ordered",
                    "positive_ordered", "cholesky_factor_corr", "cholesky_factor_cov",
                    "corr_matrix", "cov_matrix", "sum_to_zero_matrix", "column_stochastic_matrix",
                    "row_stochastic_matrix"}
TYPES = LOCAL_TYPES | BLOCK_ONLY_TYPES
IDENT = re.compile(r"(?<![\w.])[A-Za-z]\w*")
_CLOSE = {"(": ")", "[": "]", "{": "}"}
_CONTROL = re.compile(r"(for|while|if|profile)\b")
_ASSIGN = re.compile(r"(?:\.\*|\./|[-+*/])?=(?!=)")


class SourceError(ValueError):
    """The program text cannot be read (unbalanced brackets, unknown block...)."""


_INCLUDE = re.compile(r'^[ \t]*#include[ \t]+(?:"([^"\n]+)"|<([^>\n]+)>|(\S+))[ \t]*$', re.M)


def program_text(stan_file, include_paths=()) -> str:
    r"""A program's text with every ``#include`` replaced by the file it names, as stanc
    reads it: searched in the including program's folder, then ``include_paths`` in order;
    included files may include others.

    The package reads and rewrites programs as text (the flagged program is written to a
    cache folder, where an ``#include`` relative to the user's folder would not resolve).

    Raises
    ------
    SourceError
        An included file that is not found, or a file that includes itself.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "f.stan").write_text("real twice(real x) { return 2 * x; }")
    >>> _ = (d / "m.stan").write_text("functions {\n#include f.stan\n}")
    >>> program_text(d / "m.stan")
    'functions {\nreal twice(real x) { return 2 * x; }\n}'
    """
    import pathlib

    main = pathlib.Path(stan_file)
    roots = [main.resolve().parent, *(pathlib.Path(p) for p in include_paths)]

    def expand(path: pathlib.Path, chain: tuple) -> str:
        code = path.read_text(encoding="utf-8")

        def one(m: re.Match) -> str:
            name = next(g for g in m.groups() if g)
            found = next((r / name for r in roots if (r / name).is_file()), None)
            if found is None:
                raise SourceError(f"#include {name} in {path.name}: no such file in "
                                  f"{', '.join(str(r) for r in roots)}")
            if found.resolve() in chain:
                raise SourceError(f"#include {name} in {path.name} includes itself")
            return expand(found, (*chain, found.resolve())).rstrip("\n")

        return _INCLUDE.sub(one, code)

    return expand(main, (main.resolve(),))


def mask(code: str, strings: bool = True) -> str:
    r"""The code with comments and string literals blanked (same length, newlines kept).

    Parameters
    ----------
    code : str
        Stan program text.
    strings : bool
        Blank string literals too (False: comments only).

    Returns
    -------
    str

    Examples
    --------
    >>> mask('x = 1; // log_lik\nprint("_rng");')
    'x = 1;           \nprint(      );'
    """
    out = list(code)
    i, n = 0, len(code)
    while i < n:
        two = code[i:i + 2]
        if two == "//" or code[i] == "#":
            j = code.find("\n", i)
            j = n if j < 0 else j
        elif two == "/*":
            j = code.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif code[i] == '"':
            j = code.find('"', i + 1)
            j = n if j < 0 else j + 1
        else:
            i += 1
            continue
        if strings or code[i] != '"':
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
        i = j
    return "".join(out)


def match(masked: str, i: int) -> int:
    """Index just past the bracket closing the one at ``i``."""
    stack = [_CLOSE[masked[i]]]
    j = i + 1
    while stack:
        if j >= len(masked):
            raise SourceError("unbalanced brackets in the Stan program")
        c = masked[j]
        if c in _CLOSE:
            stack.append(_CLOSE[c])
        elif c in ")]}":
            if c != stack.pop():
                raise SourceError("unbalanced brackets in the Stan program")
        j += 1
    return j


def blocks(masked: str) -> dict[str, tuple[int, int, int]]:
    """Program block -> (header start, index of its ``{``, index just past its ``}``)."""
    header = re.compile(r"\s*(" + "|".join(b.replace(" ", r"\s+") for b in BLOCKS) + r")\s*\{")
    out, i = {}, 0
    while True:
        m = header.match(masked, i)
        if m is None:
            if masked[i:].strip():
                raise SourceError(
                    f"cannot read the program's block structure near {masked[i:i + 40]!r}")
            return out
        brace = m.end() - 1
        end = match(masked, brace)
        out[" ".join(m.group(1).split())] = (m.start(1), brace, end)
        i = end


def _skip_ws(masked: str, i: int) -> int:
    while i < len(masked) and masked[i].isspace():
        i += 1
    return i


@dataclass(eq=False)
class Stmt:
    """One statement: ``kind`` is block, for, while, if, profile, decl or simple.

    ``head`` is the span of a compound statement's header (``for (n in 1:N)``); ``body`` its
    sub-statements (a block's statements; a loop's one body; an if's then and else). A
    declaration of several variables (``real a = 1, b;``) is parsed as one declaration per
    variable: ``prefix`` is the span of the shared type, ``start:end`` the variable's part.
    """

    kind: str
    start: int
    end: int
    head: tuple[int, int] | None = None
    body: list = field(default_factory=list)
    declares: list = field(default_factory=list)
    prefix: tuple[int, int] | None = None


def text_of(source: str, st: Stmt) -> str:
    """A simple or declaration statement's text (with the shared type of a multi-variable
    declaration, ``;``-terminated).

    Parameters
    ----------
    source : str
        The program text (or its masked twin) the statement indexes.
    st : Stmt

    Returns
    -------
    str
    """
    if st.prefix is None:
        return source[st.start:st.end]
    return source[st.prefix[0]:st.prefix[1]] + source[st.start:st.end].strip() + ";"


def _simple_end(masked: str, i: int, end: int) -> int:
    j = i
    while j < end:
        c = masked[j]
        if c in _CLOSE:
            j = match(masked, j)
            continue
        if c == ";":
            return j + 1
        j += 1
    raise SourceError(f"statement without a closing ';' near {masked[i:i + 40]!r}")


def declared_names(text: str) -> list[str]:
    """The variables a declaration statement declares ([] for other statements).

    Parameters
    ----------
    text : str
        One statement, masked.

    Returns
    -------
    list of str

    Examples
    --------
    >>> declared_names("array[N] real<lower=0> a = f(x, y), b;")
    ['a', 'b']
    >>> declared_names("a[n] = 1;")
    []
    """
    return list(dict.fromkeys(name for name, _, _ in _declarators(text)))


def _declarators(text: str) -> list[tuple[str, int, int]]:
    """(name, start, end) of each variable of a declaration, its initialiser included."""
    m = IDENT.match(text)
    if m is None or m.group() not in TYPES:
        return []
    out, depth, j, piece = [], 0, 0, 0
    while j < len(text):
        c = text[j]
        if c in _CLOSE:
            j = match(text, j)
            continue
        if c == "<":
            depth += 1
        elif c == ">":
            depth = max(depth - 1, 0)
        elif depth == 0 and (c in ",;" or (c == "=" and text[j + 1:j + 2] != "=")):
            found = list(IDENT.finditer(text, piece, j))
            if c == "=":  # skip the initialiser up to the next top-level ',' or ';'
                k = j + 1
                while k < len(text) and text[k] not in ",;":
                    k = match(text, k) if text[k] in _CLOSE else k + 1
                j = k
            if found:
                out.append((found[-1].group(), found[-1].start(), j))
            if j >= len(text) or text[j] == ";":
                break
            piece = j + 1
        j += 1
    return out


def _statement(masked: str, i: int, end: int) -> Stmt:
    if masked[i] == "{":
        close = match(masked, i)
        return Stmt("block", i, close, body=parse(masked, i + 1, close - 1))
    m = _CONTROL.match(masked, i, end)
    if m:
        j = _skip_ws(masked, m.end())
        if j >= end or masked[j] != "(":
            raise SourceError(f"cannot parse the {m.group(1)} statement near "
                              f"{masked[i:i + 40]!r}")
        head_end = match(masked, j)
        body = _statement(masked, _skip_ws(masked, head_end), end)
        if body.kind == "multi":
            raise SourceError(f"a declaration as the body of {m.group(1)} near "
                              f"{masked[i:i + 40]!r}")
        out = Stmt(m.group(1), i, body.end, head=(i, head_end), body=[body])
        if m.group(1) == "for":
            var = re.match(r"\(\s*([A-Za-z]\w*)\s+in\b", masked[j:head_end])
            if var is None:
                raise SourceError(f"cannot parse the for loop near {masked[i:i + 40]!r}")
            out.declares = [var.group(1)]
        elif m.group(1) == "if":
            k = _skip_ws(masked, body.end)
            if re.match(r"else\b", masked[k:end]):
                other = _statement(masked, _skip_ws(masked, k + 4), end)
                if other.kind == "multi":
                    raise SourceError(f"a declaration as the body of else near "
                                      f"{masked[k:k + 40]!r}")
                out.body.append(other)
                out.end = other.end
        return out
    j = _simple_end(masked, i, end)
    decls = _declarators(masked[i:j])
    if len(decls) > 1:  # one declaration per variable, sharing the type
        prefix = (i, i + decls[0][1])
        return Stmt("multi", i, j, body=[Stmt("decl", i + a, i + b, declares=[name],
                                              prefix=prefix) for name, a, b in decls])
    return Stmt("decl" if decls else "simple", i, j, declares=[d[0] for d in decls])


def parse(masked: str, start: int, end: int) -> list[Stmt]:
    """The statements between ``start`` and ``end`` (a block's inside), as a tree.

    Parameters
    ----------
    masked : str
        Program text from :func:`mask`.
    start, end : int
        The span to parse (inside a block's braces).

    Returns
    -------
    list of Stmt

    Examples
    --------
    >>> code = "for (n in 1:N) { a[n] = 1; b[n] = 2; }"
    >>> [(st.kind, len(st.body[0].body)) for st in parse(code, 0, len(code))]
    [('for', 2)]
    """
    out, i = [], _skip_ws(masked, start)
    while i < end:
        stmt = _statement(masked, i, end)
        out.extend(stmt.body if stmt.kind == "multi" else [stmt])
        i = _skip_ws(masked, stmt.end)
    return out


def functions(masked: str, start: int, end: int) -> dict[str, str]:
    """User function name -> masked body text (definitions in a functions block)."""
    out: dict[str, str] = {}
    i = start
    pat = re.compile(r"([A-Za-z]\w*)\s*\(")
    while True:
        m = pat.search(masked, i, end)
        if m is None:
            return out
        close = match(masked, m.end() - 1)
        j = _skip_ws(masked, close)
        if j < end and masked[j] == "{":
            body_end = match(masked, j)
            out[m.group(1)] = out.get(m.group(1), "") + masked[j:body_end]
            i = body_end
        else:
            i = j + 1


# --------------------------------------------------------------------------- slicing
class _Info:
    """Per statement: resolved names written and read (header only for compounds)."""

    def __init__(self):
        self.writes: dict[Stmt, set] = {}
        self.uses: dict[Stmt, set] = {}
        self.parent: dict[Stmt, Stmt | None] = {}
        self.names: dict[tuple, str] = {}  # declaration id -> name


def _resolve(scopes: list[dict], name: str):
    for scope in reversed(scopes):
        if name in scope:
            return scope[name]
    return ("global", name)


def _analyse(masked: str, stmts: list[Stmt], info: _Info, scopes: list[dict], parent):
    scopes.append({})
    for st in stmts:
        info.parent[st] = parent
        if st.kind in ("decl", "simple"):
            text = text_of(masked, st)
            idents = [m.group() for m in IDENT.finditer(text)]
            own = set()
            for name in st.declares:
                key = ("decl", len(info.names))
                info.names[key] = name
                own.add(key)
            info.uses[st] = {_resolve(scopes, n) for n in idents if n not in st.declares}
            writes = set(own)
            lhs = re.match(r"\s*([A-Za-z]\w*)", text)
            if st.kind == "simple" and lhs:
                k = _skip_ws(text, lhs.end())
                while k < len(text) and text[k] in "[.":
                    if text[k] == "[":
                        k = _skip_ws(text, match(text, k))
                    else:
                        k = _skip_ws(text, re.match(r"\.\w*", text[k:]).end() + k)
                if _ASSIGN.match(text, k):
                    writes.add(_resolve(scopes, lhs.group(1)))
            info.writes[st] = writes
            for name, key in zip(st.declares, sorted(own, key=lambda x: x[1])):
                scopes[-1][name] = key
            continue
        head = masked[st.head[0]:st.head[1]] if st.head else ""
        info.uses[st] = {_resolve(scopes, n) for n in IDENT.findall(head)
                         if n not in st.declares}
        info.writes[st] = set()
        if st.kind == "for":
            key = ("decl", len(info.names))
            info.names[key] = st.declares[0]
            scopes.append({st.declares[0]: key})
            _analyse(masked, st.body, info, scopes, st)
            scopes.pop()
        elif st.kind == "block":
            _analyse(masked, st.body, info, scopes, st)
        else:
            for sub in st.body:
                _analyse(masked, [sub], info, scopes, st)
    scopes.pop()


def _walk(stmts):
    for st in stmts:
        yield st
        yield from _walk(st.body)


def slice_statements(masked: str, stmts: list[Stmt], target: str) -> set[Stmt]:
    r"""The statements (any depth) the final value of top-level ``target`` depends on.

    A statement is kept when it writes (assigns or declares) a variable that a kept
    statement reads, or ``target``; loops, branches and local blocks around kept
    statements are kept with the variables their headers read; ``break`` / ``continue``
    are kept inside kept loops. Prints, rejects and statements that write nothing needed
    are left out.

    Parameters
    ----------
    masked : str
        Program text from :func:`mask`.
    stmts : list of Stmt
        A block's statements (:func:`parse`).
    target : str
        A variable declared at the top level of ``stmts``.

    Returns
    -------
    set of Stmt
        The kept statements, at any depth.

    Examples
    --------
    >>> code = ("vector[N] ll; array[N] real r; "
    ...         "for (n in 1:N) { ll[n] = normal_lpdf(y[n] | m, 1); r[n] = normal_rng(m, 1); }")
    >>> stmts = parse(code, 0, len(code))
    >>> kept = slice_statements(code, stmts, "ll")
    >>> "\n".join(emit(code, code, stmts, kept, 0))
    'vector[N] ll;\nfor (n in 1:N) {\n  ll[n] = normal_lpdf(y[n] | m, 1);\n}'
    """
    info = _Info()
    _analyse(masked, stmts, info, [], None)
    top = [key for st in stmts if st.kind == "decl" and target in st.declares
           for key in info.writes[st] if info.names[key] == target]
    needed = set(top)
    kept: set[Stmt] = set()
    every = list(_walk(stmts))
    jumps = [st for st in every if st.kind == "simple"
             and re.fullmatch(r"\s*(break|continue)\s*;\s*", masked[st.start:st.end])]
    changed = True
    while changed:
        changed = False
        for st in every:
            if st in kept:
                continue
            hit = info.writes[st] & needed
            if not hit and st in jumps:
                loop = info.parent[st]
                while loop is not None and loop.kind not in ("for", "while"):
                    loop = info.parent[loop]
                hit = loop is not None and loop in kept
            if hit:
                node = st
                while node is not None and node not in kept:
                    kept.add(node)
                    needed |= info.uses[node]
                    node = info.parent[node]
                changed = True
        for st in kept:
            if not info.uses[st] <= needed:
                needed |= info.uses[st]
                changed = True
    return kept


# --------------------------------------------------------------------------- emitting
def _lines(text: str, level: int) -> list[str]:
    rows = [r.strip() for r in text.strip().splitlines()]
    pad = "  " * level
    return [pad + rows[0]] + [pad + "  " + r for r in rows[1:] if r]


def emit(code: str, masked: str, stmts: list[Stmt], kept: set[Stmt], level: int,
         simple=lambda st, text: text) -> list[str]:
    """The kept statements as program lines (compound statements braced, others verbatim,
    each statement's text and each header passed through ``simple(stmt, text)``).

    Parameters
    ----------
    code, masked : str
        The program text the statements index, and its masked twin.
    stmts : list of Stmt
    kept : set of Stmt
        From :func:`slice_statements`.
    level : int
        Indentation level (two spaces each).
    simple : callable
        ``(stmt, text) -> text`` applied before writing (renaming, local types).

    Returns
    -------
    list of str
    """
    out: list[str] = []
    for st in stmts:
        if st not in kept:
            continue
        if st.kind in ("decl", "simple"):
            out += _lines(simple(st, text_of(code, st)), level)
        elif st.kind == "block":
            out.append("  " * level + "{")
            out += emit(code, masked, st.body, kept, level + 1, simple)
            out.append("  " * level + "}")
        elif st.kind == "if":
            head = " ".join(simple(st, code[st.head[0]:st.head[1]]).split())
            out.append("  " * level + head + " {")
            out += emit(code, masked, _flatten(st.body[0]), kept, level + 1, simple)
            if len(st.body) > 1 and st.body[1] in kept:
                out.append("  " * level + "} else {")
                out += emit(code, masked, _flatten(st.body[1]), kept, level + 1, simple)
            out.append("  " * level + "}")
        else:
            head = " ".join(simple(st, code[st.head[0]:st.head[1]]).split())
            out.append("  " * level + head + " {")
            out += emit(code, masked, _flatten(st.body[0]), kept, level + 1, simple)
            out.append("  " * level + "}")
    return out


def _flatten(body: Stmt) -> list[Stmt]:
    """A compound's body as a list: a block's statements (its braces are re-written)."""
    return body.body if body.kind == "block" else [body]
