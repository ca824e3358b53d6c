"""Stan CSV files: the reader (only the columns asked for) and the writer.

The reader takes the header comments (CmdStan's settings) and the column names itself and
streams the data rows through a compiled parser (`_csv_kernel`: correctly rounded, as
Python's ``float``; files in threads) into the variables' arrays, converting only the
columns asked for; before that kernel is compiled, a small read uses pandas' C parser with
``usecols`` instead (the same numbers). Files are recognised by their content: gzip by
its magic bytes (not the ``.gz`` name), a UTF-8 byte-order mark and non-UTF-8 (e.g. latin-1)
comment lines are accepted, binary content is a one-line error naming the file.
"""

from __future__ import annotations

import glob as _glob
import gzip
import math
import os
import pathlib
import re
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from loo_adapt.core._compiled import use_numba
from loo_adapt.draws import Draws, _truthy

from .columns import (
    CMDSTAN_METHOD,
    DENSITY_COLUMNS,
    MCMC_STATS,
    STAN_METHODS,
    assemble_parts,
    column_plan,
    method_from_columns,
    normalize_method,
    select_columns,
)

__all__ = ["read_csv", "write_stan_csv"]

_GZIP_MAGIC = b"\x1f\x8b"
#: bytes the compiled reader reads at a time
_CHUNK = 1 << 22
#: values in one block of parsed rows (rows x columns)
_BLOCK_VALUES = 1 << 18


def _natural_key(path: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(path))]


def expand_paths(paths) -> list[str]:
    """A path, directory (its ``*.csv``), glob, or a list of these -> file paths."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    elif not isinstance(paths, Sequence) or not paths:
        raise TypeError(f"paths must be a path, glob, directory or a non-empty list, got {paths!r}")
    out: list[str] = []
    for p in paths:
        if not isinstance(p, (str, os.PathLike)):
            raise TypeError(f"expected a file path (str or pathlib.Path), got {type(p).__name__}")
        p = os.fspath(p)
        if os.path.isdir(p):
            found = sorted(_glob.glob(os.path.join(p, "*.csv")), key=_natural_key)
            if not found:
                raise FileNotFoundError(f"no .csv files in directory {p}")
            out.extend(found)
        elif os.path.isfile(p):
            out.append(p)
        elif _glob.has_magic(p):
            found = sorted(_glob.glob(p), key=_natural_key)
            if not found:
                raise FileNotFoundError(f"no files match {p!r}")
            out.extend(found)
        else:
            raise FileNotFoundError(f"Stan CSV file not found: {p}")
    return out


def config_from_comments(comments: Sequence[str]) -> dict[str, str]:
    """``# key = value`` lines -> {key: value}; first occurrence wins, '(Default)' dropped."""
    config: dict[str, str] = {}
    for line in comments:
        text = line.lstrip("#").strip()
        key, sep, value = text.partition(" = ")
        if not sep or " " in key.strip():
            continue
        config.setdefault(key.strip(), value.replace("(Default)", "").strip())
    return config


def _open_binary(path: str):
    with open(path, "rb") as fh:
        head = fh.read(8192)
    gz = head.startswith(_GZIP_MAGIC)
    if gz:
        try:
            with gzip.open(path, "rb") as fh:
                head = fh.read(8192)
        except (OSError, EOFError) as err:
            raise ValueError(f"{path}: not a readable gzip file ({err})") from None
    if b"\x00" in head:
        raise ValueError(
            f"{path} is not a Stan CSV file: it holds binary data (a netCDF/zarr file? "
            "pass it to read_draws, which opens those with xarray)"
        )
    return (gzip.open(path, "rb") if gz else open(path, "rb")), gz


def _decode(line: bytes) -> str:
    return line.decode("utf-8", "replace").lstrip("\ufeff").rstrip("\r\n")


class StanCsv:
    """One Stan CSV file: settings, column names, and (on `read`) the rows that are draws."""

    def __init__(self, path: str):
        self.path = path
        comments: list[str] = []
        header = None
        n_lines = 0
        offset = 0
        fh, self.gzip = _open_binary(path)
        with fh:
            for raw in fh:
                n_lines += 1
                offset += len(raw)
                line = _decode(raw)
                if line.startswith("#"):
                    comments.append(line)
                elif line.strip():
                    header = line
                    break
        if header is None:
            raise ValueError(f"{path} is not a Stan CSV file: no header line (empty file?)")
        self.skip = n_lines  # raw lines up to and including the header
        self.data_offset = offset  # bytes (uncompressed) up to and including the header
        self.names = [h.strip() for h in header.split(",")]
        if not all(self.names) or any(" " in n for n in self.names):
            raise ValueError(
                f"{path} is not a Stan CSV file: its header line is not comma-separated "
                f"column names ({header[:60]!r})"
            )
        self.config = config_from_comments(comments)
        stan_method = self.config.get("method") or method_from_columns(self.names)
        if stan_method is None:
            raise ValueError(
                f"cannot tell which CmdStan method wrote {path}: no '# method = ...' comment "
                "and no method-specific columns; pass method="
            )
        if stan_method not in STAN_METHODS:
            raise ValueError(
                f"{path} comes from CmdStan method {stan_method!r}; readable methods are "
                f"{tuple(STAN_METHODS)}"
            )
        self.stan_method = stan_method
        self.method = STAN_METHODS[stan_method]

    @property
    def mode_file(self) -> str | None:
        mode = self.config.get("mode") if self.stan_method == "laplace" else None
        return os.path.basename(mode) if mode else None

    def _parse(self, cols: list[int]) -> np.ndarray:
        import pandas as pd

        last = len(self.names) - 1
        use = sorted(set(cols) | {last})  # the last column reveals short (truncated) rows
        try:
            frame = pd.read_csv(
                self.path,
                header=None,
                skiprows=self.skip,
                usecols=use,
                comment="#",
                skipinitialspace=True,
                dtype=np.float64,
                engine="c",
                encoding="utf-8",
                encoding_errors="replace",
                compression="gzip" if self.gzip else None,
            )
        except pd.errors.EmptyDataError:
            return np.empty((0, len(cols)))
        except (pd.errors.ParserError, ValueError) as err:
            msg = str(err).strip().splitlines()[0]
            raise ValueError(f"{self.path}: malformed data rows ({msg})") from None
        values = frame.to_numpy(dtype=np.float64)
        del frame
        if np.isnan(values[:, use.index(last)]).any():
            self._check_row_lengths()
        if use == cols:
            return values  # pandas' own block (transposed view): no copy
        at = {c: k for k, c in enumerate(use)}  # a dict: list.index per column is quadratic
        return values[:, [at[c] for c in cols]]

    def _check_row_lengths(self) -> None:
        """Slow path, run only when the last column has NaN: find rows with missing fields."""
        fh, _ = _open_binary(self.path)
        with fh:
            for lineno, raw in enumerate(fh, 1):
                if lineno <= self.skip:
                    continue
                line = _decode(raw)
                if not line.strip() or line.startswith("#"):
                    continue
                n = line.count(",") + 1
                if n != len(self.names):
                    raise ValueError(
                        f"{self.path}, line {lineno}: {n} values for {len(self.names)} columns"
                    )

    @property
    def text_bytes(self) -> int:
        """The file's size as text, estimated (gzip: 4x its compressed size)."""
        return os.path.getsize(self.path) * (4 if self.gzip else 1)

    def _chunk(self) -> int:
        """Bytes read at a time: `_CHUNK`, or a sixteenth of a small file (so a reader's
        buffers stay a small part of the values it reads, file by file)."""
        return min(_CHUNK, max(self.text_bytes // 16, 1 << 12))

    def _drop(self) -> int:
        """Leading data rows that are not draws: warm-up (save_warmup) or the ADVI mean row."""
        if self.stan_method == "variational":
            return 1
        if self.stan_method == "sample" and _truthy(self.config.get("save_warmup")):
            thin = max(int(float(self.config.get("thin", 1))), 1)
            return math.ceil(int(float(self.config.get("num_warmup", 0))) / thin)
        return 0

    def max_draws(self) -> int:
        """The draw rows, counted without parsing: lines after the header that do not
        start with ``#``, less the rows `blocks` drops; an upper bound when the file has
        blank lines.  Newlines are counted at memchr speed; the slower count of lines
        starting with ``#`` runs only on the chunks that hold a ``#`` (in CmdStan's files,
        the first and the last)."""
        lines = comments = 0
        last = b"\n"
        fh, _ = _open_binary(self.path)
        with fh:
            fh.seek(self.data_offset)
            while chunk := fh.read(self._chunk()):
                lines += chunk.count(b"\n")
                if b"#" in chunk:
                    comments += chunk.count(b"\n#") + (last == b"\n" and chunk[:1] == b"#")
                last = chunk[-1:]
        lines += last != b"\n"
        return max(lines - comments - self._drop(), 0)

    def blocks(self, cols: list[int], compiled: bool):
        """The draw rows, in successive blocks (rows, len(cols)) whose columns are
        ``cols`` in that order: warm-up and the ADVI mean row dropped.  ``compiled``: the
        compiled parser (else pandas').  A block may be a buffer the next one overwrites:
        copy it before asking for the next."""
        rows = self._compiled_rows(cols) if compiled else iter([self._parse(cols)])
        drop = self._drop()
        seen = 0
        for block in rows:
            if seen == 0 and self.stan_method == "variational" and len(block):
                self._check_advi_mean(block[0], cols)
            skip = min(max(drop - seen, 0), len(block))
            seen += len(block)
            if skip < len(block):
                yield block[skip:]
        if seen == 0:
            raise ValueError(f"{self.path} has a header but no draws")
        if seen <= drop:
            if self.stan_method == "variational":
                raise ValueError(f"{self.path} holds only the ADVI mean row, no draws")
            raise ValueError(
                f"{self.path} has {seen} rows but save_warmup=true with {drop} warm-up "
                "rows: no post-warm-up draws"
            )

    def _check_advi_mean(self, first: np.ndarray, cols: list[int]) -> None:
        # the first row is the mean of the approximation, written with lp__ = log_p__ =
        # log_g__ = 0; it is not a draw
        values = {self.names[c]: first[k] for k, c in enumerate(cols)}
        if any(values.get(k, 0.0) != 0.0 for k in ("lp__", "log_p__", "log_g__")):
            warnings.warn(
                f"{self.path}: the first ADVI row does not look like the approximation's "
                "mean (lp__/log_p__/log_g__ not all 0); dropping it anyway as CmdStan "
                "writes it",
                UserWarning,
                stacklevel=5,
            )

    def _compiled_rows(self, cols: list[int]):
        """All data rows by the compiled parser, streamed through a fixed byte buffer."""
        from . import _csv_kernel as k  # numba: imported by the reader only, not the writer
        n_fields = len(self.names)
        colmap = np.full(n_fields, -1, dtype=np.int64)
        colmap[np.asarray(cols, dtype=np.intp)] = np.arange(len(cols))
        chunk = self._chunk()
        block_values = min(_BLOCK_VALUES, chunk // 8)  # as many bytes as the text buffer
        out = np.empty((max(1, min(1024, block_values // max(len(cols), 1))), len(cols)))
        tokens = np.empty((max(4096, 2 * n_fields + 2), 4), dtype=np.int64)
        scratch = k.line_scratch(n_fields)
        pad = k.PAD  # the parser's sentinel and 8-byte reads past the end
        buf = np.empty(chunk + pad, dtype=np.uint8)
        filled = start = row = 0
        line_no = self.skip  # lines before buf[start]
        eof = False
        fh, _ = _open_binary(self.path)
        with fh:
            fh.seek(self.data_offset)
            while True:
                if not eof and start == 0 and filled < len(buf) - pad:
                    got = fh.readinto(memoryview(buf)[filled:-pad])
                    eof = not got
                    filled += got or 0
                    if not eof:
                        continue  # fill the buffer before parsing
                pos, row, n_tok, lines, status = k.parse_rows(
                    buf, start, filled, eof, colmap, out, row, tokens, scratch)
                for r, c, s, e in tokens[:n_tok]:
                    out[r, c] = self._token(buf, int(s), int(e), start, line_no)
                line_no += lines
                if status == k.PARSE_FIELDS:
                    end = int(buf[pos:filled].tobytes().find(b"\n"))
                    line = buf[pos:filled if end < 0 else pos + end].tobytes()
                    raise ValueError(
                        f"{self.path}, line {line_no + 1}: {line.count(b',') + 1} values "
                        f"for {n_fields} columns"
                    )
                if status == k.PARSE_OUT_FULL or (eof and pos >= filled and row):
                    yield out[:row]
                    row = 0
                start = pos
                if eof and pos >= filled:
                    return
                if status == k.PARSE_OK:  # the rest is a partial line: move it to the front
                    rest = filled - pos
                    if rest == len(buf) - pad:  # a line longer than the buffer
                        buf = np.concatenate([buf, np.empty(len(buf) - pad, np.uint8)])
                    buf[:rest] = buf[pos:filled]
                    filled, start = rest, 0

    def _token(self, buf: np.ndarray, s: int, e: int, start: int, line_no: int) -> float:
        """A value the compiled parser left: Python's float, which rounds correctly
        (``line_no`` lines precede ``buf[start]``, to name the line of a bad value)."""
        text = buf[s:e].tobytes()
        try:
            if b"_" in text:  # Python's float reads 1_000; a CSV number has no "_"
                raise ValueError
            return float(text)
        except ValueError:
            shown = text.decode("utf-8", "replace").strip()
            line = line_no + 1 + buf[start:s].tobytes().count(b"\n")
            raise ValueError(
                f"{self.path}, line {line}: malformed data rows ({shown!r} is not a number)"
            ) from None


def read_csv(paths, method: str | None = None, *, var_names=None) -> Draws:
    """Read Stan CSV output files into a `Draws`.

    Parameters
    ----------
    paths : str, pathlib.Path, glob pattern, directory, or a list of these
        Several files are stacked as chains (in natural sort order for globs / directories,
        in the given order for lists). A Laplace run's ``-opt-`` mode file (named in the
        Laplace file's ``mode =`` comment) is skipped when it sits among the files.
        Gzip-compressed files are read (recognised by content, not name).
    method : str, optional
        Expected method (``"mcmc"``, ``"advi"``, ..., or CmdStan's ``"sample"``,
        ``"variational"``, ...). It is detected from the ``# method = ...`` header comment
        (or the algorithm columns); a mismatch raises ValueError.
    var_names : str or list of str, optional
        Read only these variables (plus the ``*__`` algorithm columns, which hold
        log_p / log_q); None reads every column.

    Returns
    -------
    Draws
        With ``config`` holding the run settings that decide how the draws may be used
        (Laplace ``jacobian``, Pathfinder ``num_paths`` / ``psis_resample``).

    Examples
    --------
    >>> draws = read_csv("fit/output_*.csv", var_names="log_lik")  # doctest: +SKIP
    >>> draws.log_lik().shape                                       # doctest: +SKIP
    (4, 1000, 54)
    """
    expected = normalize_method(method)
    files = [StanCsv(p) for p in expand_paths(paths)]
    modes = {f.mode_file for f in files if f.mode_file}
    if modes and len(files) > 1:
        files = [
            f
            for f in files
            if not (f.stan_method == "optimize" and os.path.basename(f.path) in modes)
        ]
    methods = sorted({f.stan_method for f in files})
    if len(methods) > 1:
        detail = ", ".join(f"{os.path.basename(f.path)}: {f.stan_method}" for f in files)
        raise ValueError(f"the files come from different CmdStan methods ({detail})")
    found = files[0].method
    if expected is not None and expected != found:
        raise ValueError(
            f"method={method!r} was requested but {files[0].path} was written by CmdStan "
            f"method {files[0].stan_method!r} ({found!r})"
        )
    names = files[0].names
    for f in files[1:]:
        if f.names != names and set(f.names) != set(names):
            only_a = sorted(set(names) - set(f.names))[:5]
            only_b = sorted(set(f.names) - set(names))[:5]
            raise ValueError(
                f"chains have different columns: {files[0].path} has {only_a} not in "
                f"{f.path}, which has {only_b} not in the first"
            )
    cols = select_columns(names, var_names)
    chosen = [names[c] for c in cols]
    stat_cols, plan = column_plan(chosen)
    # each file's rows go straight into the variables' own (chains, draws, ...) arrays,
    # allocated from the first file's row count; a parsed block is a small buffer whose
    # columns follow the variables (so each goes over as one slice), no file is held whole
    layout = [(b, c) for b, (_, c) in plan.items()] + [(k, [c]) for k, c in stat_cols.items()]
    size = sum(f.text_bytes for f in files)
    # compiled when cached, else once the text is large enough that compiling (about 2 s)
    # costs less than pandas' slower parse: ~512 MB, as `use_numba`'s cells (64 bytes each)
    from . import _csv_kernel

    compiled = use_numba(_csv_kernel._parse_rows_impl, size // 64)
    n_draws = files[0].max_draws()
    variables = {b: np.empty((len(files), n_draws, len(c))) for b, (_, c) in plan.items()}
    stats = {k: np.empty((len(files), n_draws)) for k in stat_cols}
    dests = [variables[b] if b in variables else stats[b] for b, _ in layout]

    def fill(chain: int) -> int:
        f = files[chain]
        # same columns in another order: each file is read by its own positions of the names
        where = {n: i for i, n in enumerate(f.names)}  # (list.index per name: quadratic)
        file_cols = [where[chosen[k]] for _, c in layout for k in c]
        row = 0
        for block in f.blocks(file_cols, compiled):
            keep = block[:max(n_draws - row, 0)]  # rows past the first file's: counted only
            at = 0
            for dest, (_, c) in zip(dests, layout):
                part = keep[:, at:at + len(c)]
                dest[chain, row:row + len(keep)] = part if dest.ndim == 3 else part[:, 0]
                at += len(c)
            row += len(block)
        return row

    # the compiled parser releases the GIL: files are parsed in threads, each into its
    # own chain of the shared arrays
    threads = min(_threads(), len(files)) if compiled else 1
    if threads > 1:
        with ThreadPoolExecutor(threads) as pool:
            counts = list(pool.map(fill, range(len(files))))
    else:
        counts = [fill(chain) for chain in range(len(files))]
    if counts[0] < n_draws:  # blank lines were counted as rows
        n_draws = counts[0]
        variables = {b: _compact(v, n_draws) for b, v in variables.items()}
        stats = {k: _compact(v, n_draws) for k, v in stats.items()}
    if len(set(counts)) > 1:
        bad = next(k for k, n in enumerate(counts) if n != counts[0])
        _draw_count_error(files, counts[:bad + 1], bad)
    variables = {b: v.reshape(v.shape[:2] + plan[b][0]) for b, v in variables.items()}
    source = "Stan CSV: " + ", ".join(f.path for f in files)
    if found == "other":
        source += " (optimize: the mode as a single draw)"
    return assemble_parts(variables, stats, found, source, files[0].config, n_draws=counts[0])


def _compact(a: np.ndarray, n: int) -> np.ndarray:
    """The first ``n`` draws of each chain of ``a`` (chains, draws, ...), C-contiguous,
    moved to the front of ``a``'s own buffer (no second array): rows move in blocks no
    longer than the gap between a block and its source, in ascending order, so no block
    overwrites rows still to be read."""
    chains, n_up = a.shape[:2]
    flat = a.reshape(chains, n_up, -1)
    k = flat.shape[2]
    out = flat.reshape(-1)[:chains * n * k].reshape(chains, n, k)
    step = max(n_up - n, 1)
    for c in range(1, chains):
        for r in range(0, n, step):
            out[c, r:r + step] = flat[c, r:r + step]
    return out.reshape((chains, n) + a.shape[2:])


def _threads() -> int:
    """Threads for parsing files: numba's thread count (NUMBA_NUM_THREADS), as the
    kernels use."""
    import numba

    return int(numba.get_num_threads())


def _draw_count_error(files, counts, chain):
    detail = ", ".join(f"{os.path.basename(g.path)}: {n}" for g, n in zip(files, counts))
    more = ", ..." if chain + 1 < len(files) else ""
    raise ValueError(f"chains have different numbers of draws ({detail}{more})")


# ---------------------------------------------------------------------------------------------
# Writer
# ---------------------------------------------------------------------------------------------


def column_names(name: str, shape: tuple[int, ...]) -> list[str]:
    """Stan CSV column names of one variable, first index fastest (``b.1.1, b.2.1, ...``).

    Examples
    --------
    >>> column_names("b", (2, 2))
    ['b.1.1', 'b.2.1', 'b.1.2', 'b.2.2']
    """
    if not shape:
        return [name]
    idx = np.array(list(np.ndindex(*shape[::-1])))[:, ::-1] + 1
    return [name + "." + ".".join(str(k) for k in row) for row in idx]


def _stat_blocks(draws: Draws) -> tuple[list[str], list[np.ndarray]]:
    stats = dict(draws.sample_stats)
    if draws.method in DENSITY_COLUMNS and draws.log_p is not None and draws.log_q is not None:
        p_name, q_name = DENSITY_COLUMNS[draws.method]
        stats.setdefault(p_name, draws.log_p)
        stats.setdefault(q_name, draws.log_q)
    order = [k for k in MCMC_STATS if k in stats] + [k for k in stats if k not in MCMC_STATS]
    return order, [np.asarray(stats[k], dtype=float)[:, :, None] for k in order]


def write_stan_csv(draws: Draws, out_dir, prefix: str, *, model: str = "model",
                   config: dict | None = None) -> list[pathlib.Path]:
    """One Stan CSV file per chain, in CmdStan's layout, that `read_csv` reads back exactly.

    Parameters
    ----------
    draws : Draws
        Its ``method`` gives the ``# method = ...`` comment (``mcmc`` -> sample, ``advi`` ->
        variational, ...); ``sample_stats`` (and log_p / log_q as Stan's density columns)
        are written first, then every variable, first index fastest. ADVI files get
        CmdStan's leading mean row (algorithm columns 0), which readers drop. Sample files
        get CmdStan's adaptation and timing comment blocks, so that cmdstanpy's
        ``from_csv`` reads them too (it needs an ``lp__`` column).
    out_dir : path; created if needed
    prefix : file names are ``<prefix>_<chain>.csv``
    model : the ``# model = ...`` comment
    config : dict, optional
        ``warmup``, ``adapt_delta`` (sample) and ``seed`` as the CLI passes them; every other
        key (e.g. ``jacobian``, ``num_paths``) is written as a setting of the method, as are
        the draws' own ``config`` entries.

    Returns
    -------
    list of pathlib.Path

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> d = Draws({"mu": np.arange(6.0).reshape(2, 3)}, method="mcmc")
    >>> paths = write_stan_csv(d, tempfile.mkdtemp(), "fit")
    >>> [p.name for p in paths]
    ['fit_1.csv', 'fit_2.csv']
    """
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = dict(config or {})
    seed = config.pop("seed", "")
    warmup = config.pop("warmup", draws.config.get("num_warmup", 0))
    delta = config.pop("adapt_delta", draws.config.get("delta", 0.8))
    # the draws are written as they are (thin = 1: one row a draw), after their warm-up
    settings = {k: v for k, v in {**draws.config, **config}.items()
                if k not in ("delta", "num_warmup", "thin")}
    method = CMDSTAN_METHOD.get(draws.method)
    if method is None:
        raise ValueError(f"{draws.method!r} draws come from no CmdStan method, so they have no "
                         "Stan CSV form; keep the fit object (or pickle the Draws)")
    names, blocks = _stat_blocks(draws)
    n_stats = len(names)
    for key, value in draws.variables.items():
        shape = value.shape[2:]
        names.extend(column_names(key, shape))
        c, d = value.shape[:2]
        axes = (0, 1, *range(value.ndim - 1, 1, -1))  # first index fastest, as the names
        blocks.append(np.asarray(value, dtype=float).transpose(axes).reshape(c, d, -1))
    values = np.concatenate(blocks, axis=2)
    paths = []
    for chain in range(values.shape[0]):
        rows = values[chain]
        if method == "variational":
            mean = rows.mean(axis=0, keepdims=True)
            mean[:, :n_stats] = 0.0
            rows = np.concatenate([mean, rows])
        path = out_dir / f"{prefix}_{chain + 1}.csv"
        header = [f"# model = {model}", f"# method = {method}", f"#   {method}"]
        if method == "sample":
            header += [
                f"#     num_samples = {values.shape[1]}",
                f"#     num_warmup = {warmup}",
                "#     save_warmup = false (Default)",
                "#     thin = 1 (Default)",
                "#     adapt",
                f"#       engaged = {'true' if int(warmup or 0) > 0 else 'false'}",
                f"#       delta = {delta}",
                "#     algorithm = hmc (Default)",
                "#       hmc",
                "#         engine = nuts (Default)",
                "#           nuts",
                "#             max_depth = 10 (Default)",
                "#         metric = unit_e",  # the adaptation block below has no mass matrix
            ]
        header += [f"#     {k} = {_stan_value(v)}" for k, v in settings.items()]
        header += [
            f"# id = {chain + 1}",
            "# random",
            f"#   seed = {seed}",
            f"# written by loo_adapt: {draws.source}",
        ]
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("\n".join(header) + "\n")
            fh.write(",".join(names) + "\n")
            if method == "sample":  # CmdStan's adaptation block, so cmdstanpy reads the file
                step = draws.sample_stats.get("stepsize__")
                fh.write("# Adaptation terminated\n# Step size = "
                         f"{1.0 if step is None else float(step[chain, 0]):.17g}\n")
            np.savetxt(fh, rows, delimiter=",", fmt="%.17g")
            if method == "sample":
                fh.write("# \n#  Elapsed Time: 0 seconds (Warm-up)\n"
                         "#                0 seconds (Sampling)\n"
                         "#                0 seconds (Total)\n# \n")
        paths.append(path)
    return paths


def _stan_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
