"""The compiled Stan CSV parser: every value bitwise equal to Python's ``float`` of its text
(a correctly rounded conversion), its table of powers of ten against the constants Go's
``strconv`` publishes, and `read_csv` through it equal to pandas' C parser on the same
files, whatever the buffer size, line ends, comments, blank lines and malformed rows."""

from __future__ import annotations

import gzip
from decimal import Decimal, localcontext
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from loo_adapt.io import _csv_kernel as K
from loo_adapt.io import csv as csv_mod
from loo_adapt.io.csv import read_csv

DATA = Path(__file__).resolve().parents[1] / "data" / "cmdstan"
SAMPLE = sorted((DATA / "logistic_normal" / "sample").glob("*.csv"))


def _parse_column(texts):
    """Parse one value per line; the tokens the kernel leaves converted by float()."""
    raw = ("\n".join(texts) + "\n").encode()
    buf = np.frombuffer(raw + b"\0" * K.PAD, dtype=np.uint8).copy()
    out = np.full((len(texts), 1), -7.0)
    tokens = np.empty((len(texts) + 8, 4), dtype=np.int64)
    pos, row, n_tok, lines, status = K.parse_rows(buf, 0, len(raw), True,
                                                  np.array([0]), out, 0, tokens)
    assert status == K.PARSE_OK and row == len(texts) and pos == len(raw)
    got = out[:, 0].copy()
    for r, _, s, e in tokens[:n_tok]:
        got[r] = float(buf[s:e].tobytes())
    return got, n_tok


def _assert_bitwise(got, texts):
    ref = np.array([float(t) for t in texts])
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(got), nan)
    bad = np.flatnonzero(got[~nan].view(np.int64) != ref[~nan].view(np.int64))
    assert bad.size == 0, [np.asarray(texts)[~nan][b] for b in bad[:5]]


def test_table_matches_go_strconv():
    """Go's strconv (eisel_lemire.go) lists the same truncated mantissas: its first row
    (1e-348), the 1e43 example of its comment, and its last row (1e347)."""
    hi, lo = K.powers_of_ten()
    assert (int(hi[0]), int(lo[0])) == (0xFA8FD5A0081C0288, 0x1732C869CD60E453)
    assert int(hi[43 + 348]) == 0xE596B7B0C643C719
    assert (int(hi[-1]), int(lo[-1])) == (0xD13EB46469447567, 0x4B7195F2D2D1A9FB)


@pytest.mark.parametrize("fmt", ["repr", ".6g", ".17e", ".19e", ".3f"])
def test_random_values_round_like_python_float(fmt):
    rng = np.random.default_rng(11)
    x = rng.standard_normal(40_000) * 10.0 ** rng.integers(-300, 300, 40_000)
    x = np.concatenate([x, rng.standard_normal(20_000)])
    texts = [repr(float(v)) if fmt == "repr" else format(float(v), fmt) for v in x]
    got, n_tok = _parse_column(texts)
    _assert_bitwise(got, texts)
    if fmt == ".6g":  # Stan's default precision: only subnormal values take the slow path
        assert n_tok <= np.count_nonzero((np.abs(x) < 2.3e-308) & (x != 0))


def test_halfway_cases_round_to_even():
    """Decimal strings at and next to the midpoint of two adjacent doubles, 17-19 digits:
    the cases Clinger's shortcut and Eisel-Lemire must get right or hand back."""
    rng = np.random.default_rng(5)
    texts = []
    for d in rng.standard_normal(1500) * 10.0 ** rng.integers(-25, 25, 1500):
        with localcontext() as ctx:
            ctx.prec = 60
            mid = (Decimal(float(d)) + Decimal(float(np.nextafter(d, np.inf)))) / 2
        for prec in (17, 18, 19):
            for rounding in ("ROUND_DOWN", "ROUND_UP", "ROUND_HALF_EVEN"):
                with localcontext() as ctx:
                    ctx.prec = prec
                    ctx.rounding = rounding
                    texts.append(format(+mid, "e"))
    got, _ = _parse_column(texts)
    _assert_bitwise(got, texts)


def test_special_texts():
    texts = ["nan", "NaN", "-nan", "inf", "-inf", "Infinity", "-INFINITY", "+3.5", "  2.5 ",
             "-0.0", "0", "00001.5000", "1e400", "-1e400", "1e-400", "4.9e-324",
             "2.2250738585072011e-308", "1.7976931348623157e308", "9007199254740993",
             "123456789012345678901234567890", "0.000000000000000000000000001234", "1E5",
             "1e+05", ".5", "5.", "-.5e-3"]
    got, _ = _parse_column(texts)
    _assert_bitwise(got, texts)
    assert np.signbit(got[texts.index("-0.0")])


def _stan_csv(tmp_path, name, rows, *, eol="\n", middle_comments=False, blank=False,
              final_newline=True):
    header = ["# model = m", "# method = sample", "#   sample", "#     num_samples = 9",
              "lp__,accept_stat__,log_lik.1,log_lik.2,mu"]
    lines = list(header)
    for k, r in enumerate(rows):
        lines.append(",".join(r))
        if middle_comments and k == 1:
            lines.append("# Adaptation terminated")
        if blank and k == 2:
            lines.append("")
    text = eol.join(lines) + (eol if final_newline else "")
    path = tmp_path / name
    path.write_bytes(text.encode())
    return path


def _rows(seed, n=9, digits=17):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, 5)) * 10.0 ** rng.integers(-8, 8, (n, 5))
    return [[format(float(x), f".{digits}g") for x in r] for r in v]


def _read_both(monkeypatch, paths, **kw):
    out = {}
    for engine in ("numba", "pandas"):
        monkeypatch.setattr(csv_mod, "use_numba", lambda *a, _e=engine, **k: _e == "numba")
        out[engine] = read_csv(paths, **kw)
    return out["numba"], out["pandas"]


@pytest.mark.parametrize("chunk", [16, 37, 1 << 20])
@pytest.mark.parametrize("layout", ["plain", "crlf", "comments", "blank", "no-final-newline"])
def test_compiled_reader_equals_pandas(tmp_path, monkeypatch, chunk, layout):
    """Buffers shorter than a line (16 bytes) and lines cut anywhere (37) give the same
    draws as pandas' parser, and the text's own values (float of each field)."""
    monkeypatch.setattr(csv_mod, "_CHUNK", chunk)
    monkeypatch.setattr(csv_mod, "_BLOCK_VALUES", 10)  # blocks of 2 rows: many flushes
    kw = {"eol": "\r\n" if layout == "crlf" else "\n",
          "middle_comments": layout == "comments", "blank": layout == "blank",
          "final_newline": layout != "no-final-newline"}
    rows = [_rows(1), _rows(2)]
    paths = [_stan_csv(tmp_path, f"c{k}.csv", r, **kw) for k, r in enumerate(rows)]
    ours, theirs = _read_both(monkeypatch, paths)
    expect = np.array([[[float(x) for x in r[2:4]] for r in chain] for chain in rows])
    np.testing.assert_array_equal(ours["log_lik"], expect)
    np.testing.assert_array_equal(theirs["log_lik"], expect)
    np.testing.assert_array_equal(ours["mu"], theirs["mu"])
    for k in ("lp__", "accept_stat__"):
        np.testing.assert_array_equal(ours.sample_stats[k], theirs.sample_stats[k])


def test_compiled_reader_on_cmdstan_output(monkeypatch):
    """CmdStan 2.35's own files (default precision, adaptation and timing comments)."""
    ours, theirs = _read_both(monkeypatch, SAMPLE)
    assert ours["log_lik"].shape == theirs["log_lik"].shape
    for name in theirs.variables:
        np.testing.assert_array_equal(ours[name], theirs[name])
    df = pd.read_csv(SAMPLE[0], comment="#")
    ll = df[[c for c in df.columns if c.startswith("log_lik.")]].to_numpy()
    np.testing.assert_array_equal(ours["log_lik"][0], ll)


def test_many_slow_tokens_and_gzip(tmp_path, monkeypatch):
    """Over 4096 values with 20 significant digits (each converted by float() through the
    token list, which fills and is emptied several times), gzip-compressed."""
    rows = [_rows(s, n=1200, digits=20) for s in (3, 4)]
    paths = []
    for k, r in enumerate(rows):
        plain = _stan_csv(tmp_path, f"p{k}.csv", r)
        gz = tmp_path / f"g{k}.csv"
        gz.write_bytes(gzip.compress(plain.read_bytes()))
        paths.append(gz)
    ours, theirs = _read_both(monkeypatch, paths)
    expect = np.array([[[float(x) for x in row[2:4]] for row in chain] for chain in rows])
    np.testing.assert_array_equal(ours["log_lik"], expect)
    np.testing.assert_array_equal(theirs["log_lik"], expect)


@pytest.mark.parametrize("bad, message", [
    ("abc", r"line 7: malformed data rows \('abc' is not a number\)"),
    ("1_0", r"line 7: malformed data rows \('1_0' is not a number\)"),
    ("", r"line 7: malformed data rows \('' is not a number\)"),
    ("1.5e", r"line 7: malformed data rows \('1.5e' is not a number\)"),
    ("2 3", r"line 7: malformed data rows \('2 3' is not a number\)"),
])
def test_malformed_values_name_their_line(tmp_path, monkeypatch, bad, message):
    rows = _rows(7)
    rows[1][2] = bad
    path = _stan_csv(tmp_path, "bad.csv", rows)
    monkeypatch.setattr(csv_mod, "use_numba", lambda *a, **k: True)
    with pytest.raises(ValueError, match=message):
        read_csv(path)


@pytest.mark.parametrize("fields", [3, 6])
def test_wrong_field_counts_name_their_line(tmp_path, monkeypatch, fields):
    rows = _rows(8)
    rows[4] = (rows[4] * 2)[:fields]
    path = _stan_csv(tmp_path, "cut.csv", rows, middle_comments=True)
    monkeypatch.setattr(csv_mod, "use_numba", lambda *a, **k: True)
    # 4 comments + header, 2 rows, 1 comment, 2 rows: the fifth row is line 11
    with pytest.raises(ValueError, match=f"cut.csv, line 11: {fields} values for 5 columns"):
        read_csv(path)


@pytest.mark.parametrize("threads", [1, 2])
def test_chains_of_different_lengths(tmp_path, monkeypatch, threads):
    """Files parsed one after another or in threads: the same error, with true counts."""
    monkeypatch.setattr(csv_mod, "_threads", lambda: threads)
    paths = [_stan_csv(tmp_path, "a.csv", _rows(1)), _stan_csv(tmp_path, "b.csv", _rows(2, 8)),
             _stan_csv(tmp_path, "c.csv", _rows(3, 10))]
    monkeypatch.setattr(csv_mod, "use_numba", lambda *a, **k: True)
    with pytest.raises(ValueError, match=r"different numbers of draws \(a.csv: 9, b.csv: 8"):
        read_csv(paths)
    with pytest.raises(ValueError, match=r"different numbers of draws \(a.csv: 9, c.csv: 10"):
        read_csv([paths[0], paths[2]])


def test_blank_lines_leave_contiguous_draws(tmp_path, monkeypatch):
    """Blank lines make the first file's row count an overestimate: the chains are moved
    together in the same buffer, C-contiguous, with every value where it belongs."""
    rows = [_rows(s) for s in (1, 2, 3)]
    paths = [_stan_csv(tmp_path, f"b{k}.csv", r, blank=True) for k, r in enumerate(rows)]
    monkeypatch.setattr(csv_mod, "use_numba", lambda *a, **k: True)
    d = read_csv(paths)
    expect = np.array([[[float(x) for x in r[2:4]] for r in chain] for chain in rows])
    assert d["log_lik"].flags["C_CONTIGUOUS"] and d.sample_stats["lp__"].flags["C_CONTIGUOUS"]
    np.testing.assert_array_equal(d["log_lik"], expect)
    np.testing.assert_array_equal(d.sample_stats["lp__"],
                                  [[float(r[0]) for r in chain] for chain in rows])
