"""Mixture-IS programs and fits: the ``mixis`` flag written into a user's program, and a
cheaper mixture fit warm-started from the posterior fit (an edge module: it runs Stan).

Mixture importance sampling (Silva & Zanella 2023) needs draws from
``p(theta | D) * sum_i 1 / p(y_i | theta)``: the model block adds
``target += log_sum_exp(-log_lik)`` when a data flag ``mixis`` is set.  The bundled programs
carry the flag; :func:`add_mixis_flag` writes it into a user's program whose generated
quantities compute ``log_lik`` from ``*_lpmf`` / ``*_lpdf`` statements, by copying that
computation (and the generated-quantity locals it reads) into the model block under
``if (mixis) { ... }`` with every copied name prefixed, so ``mixis = 0`` leaves the log
density exactly as it was.

:func:`fit_mixture` samples the mixture with the posterior fit as a pilot: inverse metric
(diagonal) from the variance of the posterior draws on the unconstrained scale, step size from
the posterior fit's ``stepsize__``, one posterior draw as each chain's start, and a short
warm-up that adapts the step size only (under 150 warm-up iterations Stan keeps a supplied
metric).  ``benchmarks/bench_mixis_fit.py`` measures it against the default mixture fit.
"""

from __future__ import annotations

import hashlib
import os
import re
import textwrap

import numpy as np

from loo_adapt.draws import Draws
from loo_adapt.stan import backends as _stan

__all__ = ["MixisProgramError", "add_mixis_flag", "warm_start", "fit_mixture",
           "declares_mixis_rows"]

_FLAG_LINE = "int<lower=0, upper=1> mixis;"
_TARGET_LINE = "if (mixis) target += log_sum_exp(-log_lik_local);"
_BLOCKS = ("functions", "data", "transformed data", "parameters", "transformed parameters",
           "model", "generated quantities")
_LOCAL_TYPES = {"int", "real", "complex", "vector", "row_vector", "matrix", "complex_vector",
                "complex_row_vector", "complex_matrix", "array", "tuple"}
# constrained types a block variable may have and a model-block local may not
_BLOCK_ONLY_TYPES = {"simplex", "unit_vector", "sum_to_zero_vector", "ordered",
                     "positive_ordered", "cholesky_factor_corr", "cholesky_factor_cov",
                     "corr_matrix", "cov_matrix"}
_TYPES = _LOCAL_TYPES | _BLOCK_ONLY_TYPES
_DENSITY = re.compile(r"\w+_(?:lpmf|lpdf|lupmf|lupdf)\b")
_IDENT = re.compile(r"(?<![\w.])[A-Za-z]\w*")
_CLOSE = {"(": ")", "[": "]", "{": "}"}


class MixisProgramError(ValueError):
    """The program's ``log_lik`` cannot be copied into the model block automatically."""


def _howto(log_lik: str) -> str:
    return (
        f"add the two lines by hand: `{_FLAG_LINE}` at the end of the data block, and at the "
        f"end of the model block, after computing the pointwise log-likelihood as a local "
        f"vector log_lik_local (what generated quantities puts in {log_lik}), "
        f"`{_TARGET_LINE}`"
    )


# --------------------------------------------------------------------------- scanning
def _mask(code: str) -> str:
    """The code with comments and string literals blanked (same length, newlines kept)."""
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
        for k in range(i, j):
            if out[k] != "\n":
                out[k] = " "
        i = j
    return "".join(out)


def _match(masked: str, i: int) -> int:
    """Index just past the bracket closing the one at ``i``."""
    stack = [_CLOSE[masked[i]]]
    j = i + 1
    while stack:
        if j >= len(masked):
            raise MixisProgramError("unbalanced brackets in the Stan program")
        c = masked[j]
        if c in _CLOSE:
            stack.append(_CLOSE[c])
        elif c in ")]}":
            if c != stack.pop():
                raise MixisProgramError("unbalanced brackets in the Stan program")
        j += 1
    return j


def _blocks(masked: str) -> dict[str, tuple[int, int, int]]:
    """Program block -> (header start, index of its ``{``, index just past its ``}``)."""
    header = re.compile(r"\s*(" + "|".join(b.replace(" ", r"\s+") for b in _BLOCKS) + r")\s*\{")
    out, i = {}, 0
    while True:
        m = header.match(masked, i)
        if m is None:
            if masked[i:].strip():
                raise MixisProgramError(
                    f"cannot read the program's block structure near {masked[i:i + 40]!r}"
                )
            return out
        brace = m.end() - 1
        end = _match(masked, brace)
        out[" ".join(m.group(1).split())] = (m.start(1), brace, end)
        i = end


def _skip_ws(masked: str, i: int) -> int:
    while i < len(masked) and masked[i].isspace():
        i += 1
    return i


def _statement_end(masked: str, i: int, end: int) -> int:
    """Index just past the statement starting at ``i`` (``i`` on its first character)."""
    if masked[i] == "{":
        return _match(masked, i)
    m = re.match(r"(for|while|if)\b", masked[i:end])
    if m:
        j = _skip_ws(masked, i + m.end())
        if j >= end or masked[j] != "(":
            raise MixisProgramError(f"cannot parse the {m.group(1)} statement at {i}")
        j = _statement_end(masked, _skip_ws(masked, _match(masked, j)), end)
        if m.group(1) == "if":
            k = _skip_ws(masked, j)
            if re.match(r"else\b", masked[k:end]):
                j = _statement_end(masked, _skip_ws(masked, k + 4), end)
        return j
    j = i
    while j < end:
        c = masked[j]
        if c in _CLOSE:
            j = _match(masked, j)
            continue
        if c == ";":
            return j + 1
        j += 1
    raise MixisProgramError(f"statement without a closing ';' near {masked[i:i + 40]!r}")


def _statements(masked: str, start: int, end: int) -> list[tuple[int, int]]:
    out, i = [], _skip_ws(masked, start)
    while i < end:
        j = _statement_end(masked, i, end)
        out.append((i, j))
        i = _skip_ws(masked, j)
    return out


def _declared(text: str) -> str | None:
    """The variable a declaration statement declares (None for other statements)."""
    m = _IDENT.match(text)
    if m is None or m.group() not in _TYPES:
        return None
    depth, j = 0, 0
    while j < len(text):
        c = text[j]
        if c in "([<{":
            depth += 1
        elif c in ")]>}":
            depth -= 1
        elif depth == 0 and (c == ";" or (c == "=" and text[j + 1:j + 2] != "=")):
            break
        j += 1
    names = _IDENT.findall(text[:j])
    return names[-1] if names else None


def _strip_constraints(text: str) -> str:
    """A generated-quantity declaration as a model-block local: ``<lower=..>`` removed."""
    out, i = [], 0
    for m in re.finditer(r"\b(?:int|real|complex|vector|row_vector|matrix)\s*<", text):
        if m.start() < i:
            continue
        j, depth = m.end(), 1
        while j < len(text) and depth:
            if text[j] in "([":
                j = _match(text, j)  # comparisons inside brackets are not the bound's end
                continue
            depth += {"<": 1, ">": -1}.get(text[j], 0)
            j += 1
        out.append(text[i:m.end() - 1].rstrip())
        i = j
    out.append(text[i:])
    return "".join(out)


def _local_names(masked: str, start: int, end: int) -> set[str]:
    """Every variable declared inside a statement span (locals and loop variables)."""
    names = set(re.findall(r"\bfor\s*\(\s*([A-Za-z]\w*)\s+in\b", masked[start:end]))
    stack = [(start, end)]
    while stack:
        a, b = stack.pop()
        for s, e in _statements(masked, a, b):
            name = _declared(masked[s:e])
            if name:
                names.add(name)
            # descend into every braced body of a compound statement
            k = s
            while k < e:
                if masked[k] == "{":
                    close = _match(masked, k)
                    stack.append((k + 1, close - 1))
                    k = close
                else:
                    k += 1
    return names


def _assigned(text: str) -> set[str]:
    """Names written by assignments (``x = ``, ``x[i] = ``, ``x += ``...) in a masked span."""
    out = set()
    for m in _IDENT.finditer(text):
        j = _skip_ws(text, m.end())
        while j < len(text) and text[j] == "[":
            j = _skip_ws(text, _match(text, j))
        op = re.match(r"(?:\.\*|\./|[-+*/])?=(?!=)", text[j:])
        if op:
            out.add(m.group())
    return out


# --------------------------------------------------------------------------- the rewrite
def add_mixis_flag(code: str, log_lik: str = "log_lik") -> str:
    """The program with the mixture-IS flag ``mixis`` written in.

    Parameters
    ----------
    code : str
        Stan program text whose generated quantities compute the pointwise log-likelihood
        ``log_lik`` from ``*_lpmf`` / ``*_lpdf`` statements (in a loop, vectorised through
        generated-quantity locals, or inside local blocks).
    log_lik : str
        Name of the generated quantity holding the pointwise log-likelihood.

    Returns
    -------
    str
        The program with ``int<lower=0, upper=1> mixis;`` appended to the data block and, at
        the end of the model block, a copy of the ``log_lik`` computation (generated-quantity
        names prefixed ``mixis_``) followed by ``target += log_sum_exp(-log_lik)`` under
        ``if (mixis)``. Generated quantities are unchanged, and with ``mixis = 0`` the log
        density is the original program's.

    Raises
    ------
    MixisProgramError
        When the program already has ``mixis``, uses ``#include``, has no generated quantity
        ``log_lik``, or computes it without a ``*_lpmf`` / ``*_lpdf`` call or with a ``_rng``
        call; the message gives the two lines to add by hand.

    Examples
    --------
    >>> code = '''
    ... data { int N; vector[N] y; }
    ... parameters { real mu; }
    ... model { y ~ normal(mu, 1); }
    ... generated quantities {
    ...   vector[N] log_lik;
    ...   for (n in 1:N) log_lik[n] = normal_lpdf(y[n] | mu, 1);
    ... }'''
    >>> flagged = add_mixis_flag(code)
    >>> "int<lower=0, upper=1> mixis;" in flagged
    True
    >>> "target += log_sum_exp(-to_vector(mixis_log_lik));" in flagged
    True
    """
    if re.search(r"^\s*#include", code, flags=re.M):
        raise MixisProgramError(f"the program uses #include; {_howto(log_lik)}")
    masked = _mask(code)
    idents = set(_IDENT.findall(masked))
    if "mixis" in idents:
        raise MixisProgramError("the program already uses the name `mixis`; no rewrite needed "
                                "if it is the mixture-IS data flag")
    blocks = _blocks(masked)
    if "generated quantities" not in blocks:
        raise MixisProgramError(
            f"the program has no generated quantities block computing {log_lik!r}; "
            f"{_howto(log_lik)}")
    _, g_open, g_end = blocks["generated quantities"]
    stmts = _statements(masked, g_open + 1, g_end - 1)
    declared = {}
    for k, (s, e) in enumerate(stmts):
        name = _declared(masked[s:e])
        if name:
            declared[name] = k
    if log_lik not in declared:
        raise MixisProgramError(
            f"generated quantities declare no {log_lik!r} at their top level; {_howto(log_lik)}")

    # the statements computing log_lik, closed over the generated-quantity names they use
    needed, moved = {log_lik}, set()
    changed = True
    while changed:
        changed = False
        for k, (s, e) in enumerate(stmts):
            text = masked[s:e]
            writes = _assigned(text) | ({declared_name} if (declared_name := _declared(text))
                                        else set())
            if k not in moved and writes & needed:
                moved.add(k)
                changed = True
            if k in moved:
                used = set(_IDENT.findall(text)) & set(declared)
                if not used <= needed:
                    needed |= used
                    changed = True
    spans = [stmts[k] for k in sorted(moved)]
    moved_masked = " ".join(masked[s:e] for s, e in spans)
    if "_rng" in moved_masked and re.search(r"\w+_rng\s*\(", moved_masked):
        raise MixisProgramError(
            f"{log_lik!r} is computed with random numbers (_rng) in generated quantities; "
            f"{_howto(log_lik)}")
    if not _DENSITY.search(moved_masked):
        raise MixisProgramError(
            f"{log_lik!r} is not computed from *_lpmf / *_lpdf statements in generated "
            f"quantities; {_howto(log_lik)}")

    for s, e in spans:
        first = _IDENT.match(masked[s:e])
        if first is not None and first.group() in _BLOCK_ONLY_TYPES:
            raise MixisProgramError(
                f"the log_lik computation declares a {first.group()} in generated quantities, "
                f"which cannot be a model-block local; {_howto(log_lik)}")
    # copy with every name the copy declares prefixed (no clash with model-block locals)
    locals_ = set()
    for s, e in spans:
        locals_ |= _local_names(masked, s, e)
    prefix = "mixis_"
    while any(name.startswith(prefix) for name in idents):
        prefix = "mixis" + prefix
    rename = re.compile(r"(?<![\w.])(" + "|".join(sorted(map(re.escape, locals_))) + r")\b")
    pieces = []
    for s, e in spans:
        line = code.rfind("\n", 0, s) + 1
        start = line if not code[line:s].strip() else s
        text = rename.sub(lambda m: prefix + m.group(1), code[start:e])
        if _declared(masked[s:e]):  # a top-level declaration: locals take no constraints
            text = _strip_constraints(text)
        text = textwrap.dedent(text)
        pieces.append(textwrap.indent(text.strip("\n"), "    "))
    body = "\n".join(pieces)
    addition = (
        "  if (mixis) {\n"
        "    // mixture-IS proposal (Silva & Zanella 2023), written by loo_adapt: the\n"
        f"    // pointwise log-likelihood of generated quantities, then log_sum_exp(-{log_lik})\n"
        f"{body}\n"
        f"    target += log_sum_exp(-to_vector({prefix}{log_lik}));\n"
        "  }\n"
    )
    edits = []  # (position, text), applied back to front
    if "model" in blocks:
        edits.append((blocks["model"][2] - 1, addition))
    else:
        edits.append((blocks["generated quantities"][0], "model {\n" + addition + "}\n"))
    if "data" in blocks:
        close = blocks["data"][2] - 1
        edits.append((close, "  " + _FLAG_LINE + "\n"))
    else:
        at = blocks["functions"][2] if "functions" in blocks else 0
        edits.append((at, "\ndata {\n  " + _FLAG_LINE + "\n}\n"))
    out = code
    for pos, text in sorted(edits, reverse=True):
        before = out[:pos]
        if text.startswith("  ") and not before.endswith("\n"):
            text = "\n" + text
        out = before + text + out[pos:]
    return out


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
    code = path.read_text()
    flagged = add_mixis_flag(code, log_lik=log_lik)
    key = hashlib.sha256((log_lik + "\0" + code).encode()).hexdigest()[:16]
    target = _stan._cache_dir() / "mixis" / key / f"{path.stem}_mixis.stan"
    if not target.is_file() or target.read_text() != flagged:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(flagged)
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
    return _ROWS_DECL.search(_mask(code)) is not None


def _rows_data(program, rows) -> dict:
    """The data entries of a focused mixture over ``rows`` (0-based), or {} for all."""
    if rows is None:
        return {}
    r = np.asarray(rows)
    if r.ndim != 1 or r.size == 0 or r.dtype.kind not in "iu":
        raise ValueError(f"rows must be a non-empty 1-D sequence of integers, got {rows!r}")
    n = program.n_obs
    if r.min() < 0 or r.max() >= n or np.unique(r).size != r.size:
        raise ValueError(f"rows must be distinct observation indices in [0, {n}), got {rows!r}")
    if not declares_mixis_rows(program.stan_file.read_text()):
        raise ValueError(
            f"{program.stan_file.name} cannot mix only some rows: its data block must declare "
            "`int<lower=0> mixis_n_rows;` and `array[mixis_n_rows] int<lower=1> mixis_rows;` "
            "and its model block add `target += log_sum_exp(-log_lik_local[mixis_rows]);` "
            "when mixis_n_rows > 0")
    return {"mixis_n_rows": int(r.size), "mixis_rows": [int(i) + 1 for i in np.sort(r)]}


def _with_data(program, extra: dict):
    import copy

    out = copy.copy(program)
    out.data = {**program.data, **extra}
    return out


# --------------------------------------------------------------------------- warm start
def warm_start(program, posterior: Draws, *, chains: int, seed: int = 1) -> dict:
    """Sampler settings for the mixture fit taken from a posterior fit of the same program.

    Parameters
    ----------
    program : loo_adapt.stan.program.StanProgram
        The program (with the ``mixis`` flag) whose mixture is to be sampled.
    posterior : Draws
        Posterior draws of the same program and data (any backend, CSV or arrays).
    chains : int
        Number of mixture chains; each starts at a different posterior draw.
    seed : int
        Seed of the choice of starting draws.

    Returns
    -------
    dict
        ``inits`` (chains, P) unconstrained starts, ``inv_metric`` (P,) the variance of the
        unconstrained posterior draws, ``step_size`` the posterior fit's mean step size (None
        when the draws carry no ``stepsize__``), and ``inits_constrained`` (one dict of
        parameter values per chain, for CmdStan).

    Examples
    --------
    >>> opts = warm_start(program, posterior, chains=8)  # doctest: +SKIP
    >>> opts["inv_metric"].shape  # doctest: +SKIP
    (34,)
    """
    if not isinstance(posterior, Draws):
        raise TypeError(f"posterior must be a Draws, got {type(posterior).__name__}")
    density = program.log_density()
    U = density.unconstrain(posterior)
    if not np.all(np.isfinite(U)):
        raise ValueError("the posterior draws have non-finite values on the unconstrained scale")
    if U.shape[0] < 2:
        raise ValueError("a warm start needs at least two posterior draws")
    inv_metric = U.var(axis=0, ddof=1)
    inv_metric = np.where(inv_metric > 0, inv_metric, 1.0)
    rng = np.random.default_rng(seed)
    pick = rng.choice(U.shape[0], size=chains, replace=U.shape[0] < chains)
    step = posterior.sample_stats.get("stepsize__")
    step_size = float(np.mean(step)) if step is not None and np.size(step) else None
    flat = {name: posterior.flat(name) for name, _, _ in density._block}
    inits_constrained = [{name: v[s].tolist() if np.ndim(v[s]) else float(v[s])
                          for name, v in flat.items()} for s in pick]
    return {"inits": U[pick], "inv_metric": inv_metric, "step_size": step_size,
            "inits_constrained": inits_constrained}


def fit_mixture(
    program,
    posterior: Draws | None = None,
    *,
    chains: int = 4,
    warmup: int | None = None,
    draws: int = 1000,
    seed: int = 1,
    rows=None,
    parallel_chains: int | None = None,
) -> Draws:
    """Draws of the mixture-IS proposal, warm-started from a posterior fit when one is given.

    Parameters
    ----------
    program : loo_adapt.stan.program.StanProgram
        A program with the ``mixis`` flag (bundled, or from ``StanProgram.with_mixis()``).
    posterior : Draws or None
        Posterior draws of the same program and data. None: a cold fit
        (``program.fit(mixis=True)``, 1000 warm-up iterations unless ``warmup`` says otherwise).
    chains, draws : int
        Chains and kept draws per chain.
    warmup : int or None
        Warm-up iterations; None means 100 with a warm start (step size adapted, the
        posterior's metric kept: Stan adapts no metric below 150) and 1000 without.
    seed : int
        Sampler seed.
    rows : sequence of int or None
        Observations (0-based) whose leave-one-out posteriors alone are mixed (a *focused*
        mixture, ``p(theta | D) sum_{i in rows} 1 / l_i(theta)``): sets the data entries
        ``mixis_n_rows`` / ``mixis_rows`` (1-based), which the program must declare (see
        :func:`declares_mixis_rows`). None: every observation.
    parallel_chains : int or None
        Chains sampled at once (None: every chain, up to the cores), as the posterior fit and
        the refits (`loo_adapt.stan.backends.fit`).

    Returns
    -------
    Draws
        The mixture draws (with ``log_lik``), for `loo_adapt.estimators.mixis.mixis_loo`.

    Examples
    --------
    >>> mix = fit_mixture(program, posterior, chains=8, draws=250)  # doctest: +SKIP
    """
    focus = _rows_data(program, rows)
    if posterior is None:
        if focus:
            program = _with_data(program, focus)
        return program.fit(mixis=True, seed=seed, chains=chains, draws=draws,
                           warmup=1000 if warmup is None else warmup)
    if not program.declares_mixis:
        raise ValueError(
            "fit_mixture needs a program with the mixis flag: use program.with_mixis()")
    warmup = 100 if warmup is None else warmup
    _stan._check_counts(chains, warmup, draws)
    opts = warm_start(program, posterior, chains=chains, seed=seed)
    data = dict(program.data)
    data["mixis"] = 1
    if focus:
        data.update(focus)
    elif declares_mixis_rows(program.stan_file.read_text()):
        data.setdefault("mixis_n_rows", 0)
        data.setdefault("mixis_rows", [])
    backend = _stan.select_backend(program.backend)
    if parallel_chains is not None:
        _stan._check_counts(parallel_chains, 0, 1)
    parallel = min(chains, parallel_chains or os.cpu_count() or 1)
    kw = dict(program.fit_kwargs)
    delta = kw.get("adapt_delta") or 0.8
    depth = kw.get("max_treedepth", 10)
    what = (f"focused mixis proposal ({len(focus['mixis_rows'])} rows)" if focus
            else "mixis proposal")
    source = (f"{backend} NUTS fit of {program.stan_file.name}, {what} warm-started "
              f"from the posterior: {chains} chains x {draws} draws after {warmup} warm-up, "
              f"seed {seed}")
    if backend == "stanli":
        import stanli

        from loo_adapt.io.readers import read_stanli

        model = stanli.Model(stan_file=str(program.stan_file), data=_stan._jsonable(data),
                             seed=seed)
        fit = model.sample(
            chains=chains, seed=seed, warmup=warmup, samples=draws, delta=delta,
            max_depth=depth, refresh=0, inits=opts["inits"], inv_metric=opts["inv_metric"],
            step_size=opts["step_size"], parallel_chains=parallel,
        )
        out = read_stanli(fit)
    elif backend == "cmdstan":
        result = _stan._cmdstan_model(program.stan_file).sample(
            data=_stan._jsonable(data), chains=chains, iter_warmup=warmup, iter_sampling=draws,
            seed=seed, adapt_delta=delta, max_treedepth=depth, show_progress=False,
            sig_figs=18, inits=opts["inits_constrained"], step_size=opts["step_size"],
            parallel_chains=parallel,
            metric={"inv_metric": opts["inv_metric"].tolist()},
        )
        out = _stan.draws_from_cmdstanpy(result)
    else:
        raise NotImplementedError(
            "a warm-started mixture fit needs CmdStan or stanli (PyStan takes no metric); "
            "pass posterior=None for a cold fit")
    out.source = source
    return out
