"""Issue 14, CLI rows: every bad input or fault ends with one line on stderr naming the file
or option and the fix, the documented exit code, no traceback, and no half-written report."""

import errno
import gzip
import json
import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from cli_run import one_line as _one_line
from cli_run import run_cli as _run
from small_disk import small_disk  # noqa: F401 (a fixture)

import loo_adapt
from loo_adapt import cli
from loo_adapt.cli import main
from loo_adapt.evaluation.report import read_manifest

DATA = Path(__file__).resolve().parents[1] / "data" / "cmdstan"
SAMPLE = DATA / "logistic_normal" / "sample"
DATA_JSON = DATA / "logistic_normal.data.json"
TRUTH = DATA / "truth" / "logistic_normal.csv"
CHAIN = sorted(SAMPLE.glob("*.csv"))[0]


def _evaluate(csv, out, *extra):
    return ["evaluate", csv, "--data", DATA_JSON, "--model", "logistic", "--out", out,
            "--no-adapt", "-q", *extra]


@pytest.fixture
def files(tmp_path):
    """Bad copies of the fixture's first chain, each a row of the issue's table."""
    raw = CHAIN.read_bytes()
    made = {}
    made["text.csv.gz"] = raw
    made["binary.csv"] = np.random.default_rng(0).bytes(4000)
    made["bom.csv"] = b"\xef\xbb\xbf" + raw
    made["latin1_data.csv"] = raw.replace(b"\nlp__", b"\n\xe9lp__", 1)
    made["truncated.csv.gz"] = gzip.compress(raw)[:200]
    for name, content in made.items():
        (tmp_path / name).write_bytes(content)
    return tmp_path


@pytest.mark.parametrize("name, words", [
    ("text.csv.gz", ["text.csv.gz", "not gzip-compressed", "rename it"]),
    ("binary.csv", ["binary.csv", "binary", "CSV files CmdStan wrote"]),
    ("bom.csv", ["bom.csv", "byte-order mark", "save it without"]),
    ("latin1_data.csv", ["latin1_data.csv", "line", "not UTF-8", "save it as UTF-8"]),
    ("truncated.csv.gz", ["truncated.csv.gz", "complete file"]),
])
def test_unreadable_draws_files(files, capsys, name, words):
    out = files / "rep"
    rc, _, err = _run(capsys, *_evaluate(files / name, out))
    line = _one_line(err)
    assert rc == 1 and line.startswith("loo-adapt evaluate: error:")
    for word in words:
        assert word in line, line
    assert not out.exists()  # checked before anything is written


def test_latin1_comments_are_read_like_the_original(tmp_path, capsys):
    """Comment lines in latin-1 (a user's note in the header) do not change the numbers."""
    lat = tmp_path / "lat"
    lat.mkdir()
    for src in sorted(SAMPLE.glob("*.csv")):
        (lat / src.name).write_bytes(b"# caf\xe9 na\xefve \xb5\n" + src.read_bytes())
    rc_a, _, err_a = _run(capsys, *_evaluate(lat, tmp_path / "a"))
    rc_b, _, _ = _run(capsys, *_evaluate(SAMPLE, tmp_path / "b"))
    assert rc_a == rc_b == 3 and "Traceback" not in err_a
    a = json.loads((tmp_path / "a" / "results.json").read_text())["pointwise"]["elpd_i"]
    b = json.loads((tmp_path / "b" / "results.json").read_text())["pointwise"]["elpd_i"]
    assert a == b


def test_fit_data_files(tmp_path, capsys):
    (tmp_path / "xy.csv.gz").write_text("y,a\n0,1\n1,2\n")
    rc, _, err = _run(capsys, "fit", "--model", "logistic", "--data", tmp_path / "xy.csv.gz",
                      "--out", tmp_path / "f")
    assert rc == 1 and "not gzip-compressed" in _one_line(err)
    (tmp_path / "xy.csv").write_bytes(b"y,a\n0,1\n1,\xff\n")
    rc, _, err = _run(capsys, "fit", "--model", "logistic", "--data", tmp_path / "xy.csv",
                      "--out", tmp_path / "f")
    assert rc == 1 and "xy.csv line 3 is not UTF-8" in _one_line(err)
    rc, _, err = _run(capsys, "fit", "--model", "logistic", "--data", tmp_path,
                      "--out", tmp_path / "f")
    assert rc == 1 and "is a folder" in _one_line(err)


def test_bom_in_data_json_is_accepted(tmp_path, capsys):
    bom = tmp_path / "data.json"
    bom.write_bytes(b"\xef\xbb\xbf" + DATA_JSON.read_bytes())
    rc, _, err = _run(capsys, "evaluate", SAMPLE, "--data", bom, "--model", "logistic",
                      "--out", tmp_path / "a", "-q", "--no-adapt")
    assert rc == 3 and err == ""
    rc2, _, _ = _run(capsys, *_evaluate(SAMPLE, tmp_path / "b"))
    a = json.loads((tmp_path / "a" / "results.json").read_text())["pointwise"]
    b = json.loads((tmp_path / "b" / "results.json").read_text())["pointwise"]
    assert rc == rc2 and a == b


@pytest.mark.parametrize("option, value, code, words", [
    ("--data", "DIR", 1, ["is a folder", "give the file itself"]),
    ("--seed", "abc", 2, ["--seed", "'abc'"]),
    ("--max-seconds", "5x", 2, ["--max-seconds", "'5x'", "positive number"]),
    ("--max-seconds", "-5", 2, ["--max-seconds", "positive number"]),
    ("--max-refits", "0", 2, ["--max-refits", "positive integer"]),
    ("--threshold", "1.5", 2, ["--threshold", "(0, 1]"]),
    ("--threshold", "5", 2, ["--threshold", "(0, 1]"]),
    ("--threshold", "nan", 2, ["--threshold", "(0, 1]"]),
    ("--threshold", "0", 2, ["--threshold", "(0, 1]"]),
    ("--out", "/sys/loo-adapt-x", 1, ["--out", "/sys/loo-adapt-x", "writable folder"]),
    ("--out", "FILE", 1, ["--out", "is a file", "folder"]),
    ("--out", "", 1, ["--out is empty", "folder"]),  # Path("") would be the current folder
    ("--resume", "MISSING", 1, ["--resume", "add --fallback refit"]),
])
def test_bad_options_before_anything_is_written(tmp_path, capsys, option, value, code, words):
    value = {"DIR": str(tmp_path), "FILE": str(CHAIN),
             "MISSING": str(tmp_path / "nope")}.get(value, value)
    args = ["evaluate", SAMPLE, "--data", DATA_JSON, "--model", "logistic", "--out",
            tmp_path / "rep", "-q"]
    if option == "--data" or option == "--out":
        args[args.index(option) + 1] = value
    else:
        args += [option, value]
    rc, _, err = _run(capsys, *args)
    assert rc == code
    line = err.strip().splitlines()[-1]  # argparse prints its usage line above (exit 2)
    assert "Traceback" not in err
    for word in words:
        assert word in line, line
    assert not (tmp_path / "rep").exists()


def test_library_options_checked_before_work():
    """The same checks in loo(): a clear one-line error naming the option and the fix."""
    ll = -np.random.default_rng(0).exponential(0.5, size=(1, 200, 5))
    cases = [({"khat_threshold": 1.5}, ValueError, r"khat_threshold must be a number in \(0, 1\]"),
             ({"khat_threshold": float("nan")}, ValueError, "khat_threshold"),
             ({"khat_threshold": 0.0}, ValueError, "khat_threshold"),
             ({"seed": "abc"}, TypeError, "seed must be an integer"),
             ({"var_name": ["a", "b"]}, TypeError, "var_name must be the name of one"),
             ({"transforms": "ll"}, TypeError, r"transforms=\('ll',\)"),
             ({"mixis_max_mcse": -1}, ValueError, "mixis_max_mcse"),
             ({"refit_kwargs": {"max_seconds": "5"}}, ValueError,
              r"refit_kwargs\['max_seconds'\] must be a positive number"),
             ({"refit_kwargs": {"max_refits": -1}}, ValueError, "max_refits")]
    for kwargs, exc, match in cases:
        with pytest.raises(exc, match=match):
            loo_adapt.loo(ll, **kwargs)
    # in range: the numbers are R loo's (k-hat counts use the given threshold)
    res = loo_adapt.loo(ll, khat_threshold=1.0).loo_adapt
    assert res.good_k == 1.0 and res.reliable.tolist() == (res.pareto_k <= 1.0).tolist()


def test_enospc_while_writing_figures_keeps_the_old_report(tmp_path, capsys, monkeypatch):
    from matplotlib.figure import Figure

    out = tmp_path / "rep"
    assert _run(capsys, *_evaluate(SAMPLE, out))[0] == 3
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    calls = []

    def savefig(self, path, **kw):
        calls.append(path)
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(Figure, "savefig", savefig)
    rc, _, err = _run(capsys, *_evaluate(SAMPLE, out, "--seed", "9"))
    line = _one_line(err)
    assert rc == 1 and calls
    assert "no space left on the device" in line and "free space or choose another --out" in line
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_memory_error_advises_the_dask_path(tmp_path, capsys, monkeypatch):
    def out_of_memory(*args, **kwargs):
        raise MemoryError()

    monkeypatch.setattr(loo_adapt, "loo", out_of_memory)
    rc, _, err = _run(capsys, *_evaluate(SAMPLE, tmp_path / "rep"))
    line = _one_line(err)
    assert rc == cli.EXIT_FAILED == 4
    assert "out of memory" in line and "loo_adapt.loo(dask_array)" in line
    assert read_manifest(tmp_path / "rep") is None


def test_refit_failure_is_not_bad_input(tmp_path, capsys, monkeypatch):
    """A refit that raises is the refit's failure, reported as such (or, where refits mark
    failed rows unverified, in the summary for that row) - never "bad input"."""
    from loo_adapt.stan.program import StanProgram

    def broken(self, i, **kw):
        raise RuntimeError(f"sampler crashed without observation {i}")

    monkeypatch.setattr(StanProgram, "refit_without", broken)
    out = tmp_path / "rep"
    rc, _, err = _run(capsys, *_evaluate(SAMPLE, out, "--fallback", "refit", "--backend",
                                         "stanli", "--max-refits", "1"))
    assert "Traceback" not in err and rc != cli.EXIT_BAD_INPUT
    if rc == cli.EXIT_FAILED:  # the refit's error ended the run: said so in one line
        line = _one_line(err)
        assert "the refits failed" in line and "sampler crashed" in line
        assert read_manifest(out) is None
    else:  # the failed row is unverified, everything else kept
        assert rc == cli.EXIT_UNRELIABLE
        assert "sampler crashed" in (out / "summary.txt").read_text()


def test_second_run_into_a_busy_folder_is_refused(tmp_path, capsys):
    import subprocess
    import sys

    out = tmp_path / "rep"
    out.mkdir()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (out / ".loo-adapt.lock").write_text(f"{other.pid}\n")
        rc, _, err = _run(capsys, *_evaluate(SAMPLE, out))
    finally:
        other.kill()
        other.wait()
    line = _one_line(err)
    assert rc == 1 and f"pid {other.pid}" in line and "another output folder" in line
    assert {p.name for p in out.iterdir()} == {".loo-adapt.lock"}


def test_rerun_into_a_folder_replaces_the_previous_run(tmp_path, capsys):
    out = tmp_path / "rep"
    assert _run(capsys, *_evaluate(SAMPLE, out))[0] == 3
    (out / "mine.txt").write_text("keep")
    rc, _, _ = _run(capsys, "evaluate", SAMPLE, "--data", DATA_JSON, "--model", "logistic",
                    "--out", out, "-q", "--no-adapt", "--threshold", "1")
    assert rc == 3  # 2 observations have k-hat above 1 (fixture README: k-hat up to 1.2)
    results = json.loads((out / "results.json").read_text())
    assert results["good_k"] == 1.0
    assert read_manifest(out)["files"][0]["name"] == "summary.txt"
    assert (out / "mine.txt").read_text() == "keep"


def test_reasons_and_indices_in_the_printed_summary(tmp_path, capsys):
    """Each unreliable row: 0-based index, Stan's 1-based log_lik index, and its k-hat."""
    rc, printed, _ = _run(capsys, "evaluate", SAMPLE, "--data", DATA_JSON, "--model",
                          "logistic", "--no-adapt", "--out", tmp_path / "rep")
    with pytest.warns(UserWarning):
        res = loo_adapt.loo(str(SAMPLE)).loo_adapt  # the library, outside the CLI
    bad = np.flatnonzero(res.pareto_k > res.good_k)
    assert rc == 3 and bad.size > 20
    for i in bad[:20]:  # value and threshold printed with the decimals that tell them apart
        got = re.search(rf"^\s+{i}  log_lik\[{i + 1}\]  psis: k-hat (\S+) > (\S+)$", printed,
                        flags=re.M)
        assert float(got[1]) > float(got[2])
        assert float(got[1]) == pytest.approx(res.pareto_k[i], abs=0.006)
        assert float(got[2]) == pytest.approx(res.good_k, abs=0.006)
    assert f"({bad.size} in all" in printed


def test_repeated_warnings_collapsed(capsys):
    cli._print_warnings(["generalized Pareto fit failed in column(s) 1"] * 5
                        + ["other", "12 of 54 observations have no verified estimate (...)"])
    err = capsys.readouterr().err.splitlines()
    assert err == ["warning (5 times): generalized Pareto fit failed in column(s) 1",
                   "warning: other"]


def test_fit_progress_labels(monkeypatch, tmp_path):
    """The fit bar says what runs: no "mixture (MixIS) fit" without --mixis."""
    shown = []
    from loo_adapt.cli import fit

    real = fit._Stages

    class Recording(real):
        def close(self):
            shown.append(list(self.labels))
            super().close()

    monkeypatch.setattr(fit, "_Stages", Recording)
    X = np.random.default_rng(1).normal(size=(20, 2))
    y = (X[:, 0] > 0).astype(int)
    csv = tmp_path / "xy.csv"
    np.savetxt(csv, np.column_stack([y, X]), delimiter=",")
    common = ["fit", "--model", "logistic", "--data", str(csv), "--chains", "1", "--draws",
              "20", "--warmup", "20", "--backend", "stanli", "-q"]
    assert main([*common, "--out", str(tmp_path / "a")]) == 0
    assert main([*common, "--out", str(tmp_path / "b"), "--mixis"]) == 0
    assert shown[0] == ["stanli NUTS fit of logistic_normal"]
    assert shown[1] == ["stanli NUTS fit of logistic_normal", "stanli mixture (MixIS) fit"]


def test_cmdstanpy_info_silenced_unless_verbose(tmp_path, capsys, monkeypatch):
    import logging

    seen = []

    def fake_loo(**kwargs):
        seen.append(logging.getLogger("cmdstanpy").getEffectiveLevel())
        raise MemoryError()

    monkeypatch.setattr(loo_adapt, "loo", fake_loo)
    _run(capsys, *_evaluate(SAMPLE, tmp_path / "a"))
    _run(capsys, *_evaluate(SAMPLE, tmp_path / "b", "--verbose"))
    assert seen[0] == logging.WARNING and seen[1] <= logging.INFO


def _refit_loo_with_checkpoints(indices, program=None, *, checkpoint=None, executor=None,
                                **kwargs):
    """The signature of refit_loo with checkpoints and executors (issue 14.2)."""
    raise AssertionError("not called: loo() is replaced in these tests")


def test_resume_and_scheduler_reach_the_refits(tmp_path, capsys, monkeypatch):
    """--resume DIR and --scheduler ADDRESS become refit_kwargs checkpoint= / executor=."""
    from loo_adapt.stan import refit

    got = {}

    def fake_loo(**kwargs):
        got.update(kwargs["refit_kwargs"])
        raise MemoryError()

    monkeypatch.setattr(loo_adapt, "loo", fake_loo)
    monkeypatch.setattr(refit, "refit_loo", _refit_loo_with_checkpoints)
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    rc, _, err = _run(capsys, *_evaluate(SAMPLE, tmp_path / "rep", "--fallback", "refit",
                                         "--resume", ckpt))
    assert got["checkpoint"] == str(ckpt)
    rc, _, err = _run(capsys, *_evaluate(SAMPLE, tmp_path / "rep", "--fallback", "refit"))
    assert got["checkpoint"] == str(tmp_path / "rep" / cli.CHECKPOINT)
    # an address where no scheduler listens: one line naming the option
    monkeypatch.setattr(cli.evaluate, "SCHEDULER_TIMEOUT", 2)
    rc, _, err = _run(capsys, *_evaluate(SAMPLE, tmp_path / "rep", "--fallback", "refit",
                                         "--scheduler", "tcp://127.0.0.1:9"))
    assert rc == 1 and "--scheduler tcp://127.0.0.1:9: cannot connect" in _one_line(err)



def test_finished_refits_are_not_discarded_without_fresh(tmp_path, capsys, monkeypatch):
    """An interrupted run's checkpoint holds finished refits: rerunning the command without
    --resume used to delete them silently.  Now it stops (exit 1, one line saying how many
    and what to pass) and leaves every file; --resume reuses the folder, --fresh deletes it."""
    from loo_adapt.stan import refit
    from loo_adapt.stan.checkpoint import Checkpoint

    seen = []

    def fake_loo(**kwargs):
        seen.append(kwargs["refit_kwargs"].get("checkpoint"))
        raise MemoryError()

    monkeypatch.setattr(loo_adapt, "loo", fake_loo)
    monkeypatch.setattr(refit, "refit_loo", _refit_loo_with_checkpoints)
    out = tmp_path / "rep"
    folder = out / cli.CHECKPOINT
    ck = Checkpoint(folder, "refit", "abc")
    for i in (3, 7, 11):
        ck.save(f"obs_{i}", {"log_lik": np.zeros((1, 4))}, {"i": i})
    (folder / ".tmp-unfinished.npz").write_bytes(b"half a row")  # not a finished refit
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    rc, _, err = _run(capsys, *_evaluate(SAMPLE, out, "--fallback", "refit"))
    line = _one_line(err)
    assert rc == 1 and seen == [], line
    assert "3 finished refits" in line and f"--resume {folder}" in line and "--fresh" in line
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before

    # --resume DIR: the folder goes to the refits as it is
    rc, _, err = _run(capsys, *_evaluate(SAMPLE, out, "--fallback", "refit",
                                         "--resume", folder))
    assert rc == 4 and seen == [str(folder)]
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    # both flags: refused before anything is touched
    rc, _, err = _run(capsys, *_evaluate(SAMPLE, out, "--fallback", "refit",
                                         "--resume", folder, "--fresh"))
    assert rc == 1 and "give one of the two" in _one_line(err) and len(seen) == 1
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    # --fresh without refits would discard nothing: refused
    rc, _, err = _run(capsys, *_evaluate(SAMPLE, out, "--fresh"))
    assert rc == 1 and "--fresh" in _one_line(err) and "add --fallback refit" in _one_line(err)
    assert folder.is_dir()
    # saved refits without a manifest cannot be resumed: the line says to pass --fresh
    (folder / "manifest.json").unlink()
    rc, _, err = _run(capsys, *_evaluate(SAMPLE, out, "--fallback", "refit"))
    line = _one_line(err)
    assert rc == 1 and "3 finished refits" in line and "no manifest.json" in line
    assert "--fresh" in line and "--resume" not in line and len(seen) == 1
    # --fresh: discarded, and the run goes on to the refits with an empty folder
    rc, _, err = _run(capsys, *_evaluate(SAMPLE, out, "--fallback", "refit", "--fresh"))
    assert rc == 4 and seen[-1] == str(folder) and not folder.exists()
    # a folder with a manifest and no finished refit holds nothing to lose: cleared quietly
    Checkpoint(folder, "refit", "abc")
    rc, _, err = _run(capsys, *_evaluate(SAMPLE, out, "--fallback", "refit"))
    assert rc == 4 and seen[-1] == str(folder) and not folder.exists()

def test_reliable_rows_agree_with_truth(tmp_path, capsys):
    """The CLI's "reliable" rows are within 4 MCSE of the brute-force truth file."""
    rc, _, _ = _run(capsys, "evaluate", SAMPLE, "--data", DATA_JSON, "--model", "logistic",
                    "--out", tmp_path / "rep", "-q", "--seed", "4")
    res = loo_adapt.report.load_results(tmp_path / "rep")
    truth = np.loadtxt(TRUTH, delimiter=",", skiprows=1)
    ok = res.reliable
    err = np.abs(res.elpd_i[ok] - truth[ok, 1])
    assert ok.sum() >= 25
    assert np.all(err <= 4 * np.hypot(res.mcse_elpd_i[ok], truth[ok, 2]) + 1e-3)
    shutil.rmtree(tmp_path / "rep")


def test_reader_error_leaves_no_empty_report_folder(tmp_path, capsys):
    """A CSV that looks like text but is malformed fails in the reader, after the report
    folder was prepared: the folder the run created is removed again."""
    bad = tmp_path / "bad.csv"
    bad.write_text("lp__,alpha,beta.1\n1,2\n")
    out = tmp_path / "new" / "rep"
    rc, _, err = _run(capsys, *_evaluate(bad, out))
    assert rc == 1 and "bad.csv" in _one_line(err)
    assert not out.exists()


def test_scheduler_passes_a_client(tmp_path, capsys, monkeypatch):
    """--scheduler ADDRESS: refit_kwargs['executor'] is a dask Client of that scheduler."""
    from loo_adapt.stan import refit

    monkeypatch.setattr(refit, "refit_loo", _refit_loo_with_checkpoints)
    distributed = pytest.importorskip("dask.distributed")
    got = {}

    def fake_loo(**kwargs):
        client = kwargs["refit_kwargs"]["executor"]
        got["address"] = client.scheduler.address
        got["sum"] = client.submit(sum, [1, 2, 3]).result()
        raise MemoryError()

    monkeypatch.setattr(loo_adapt, "loo", fake_loo)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        _run(capsys, *_evaluate(SAMPLE, tmp_path / "rep", "--fallback", "refit",
                                "--scheduler", cluster.scheduler_address))
    assert got == {"address": cluster.scheduler_address, "sum": 6}


def test_full_disk_during_a_run(small_disk, capsys):  # noqa: F811 (the fixture)
    """A real 64 kB disk: the figures do not fit. One line, exit 1, and nothing left over
    (no staging folder, no lock, no empty report folder)."""
    out = small_disk / "rep"
    rc, _, err = _run(capsys, *_evaluate(SAMPLE, out))
    line = _one_line(err)
    assert rc == 1 and "no space left on the device" in line
    assert list(small_disk.iterdir()) == []


def test_absurd_log_lik_is_a_clear_error_or_the_right_flagged_number():
    """Issue 14: one log_lik of 1e300 gave elpd_i = +0.255 (truth about -1.24), "reliable".
    +1e300 (a density of exp(1e300)) is refused; -1e300 is a draw under which y_i is all but
    impossible: p(y_i | y_-i) = 1 / E[1/l] = S exp(-1e300) / (1 + ...), so elpd_i = -1e300 to
    double precision, flagged by its infinite k-hat."""
    from loo_adapt.io.readers import read_csv

    ll = read_csv(SAMPLE).log_lik().copy()
    ll[0, 0, 3] = 1e300
    with pytest.raises(ValueError, match="observation 3 .*Stan index 4"):
        loo_adapt.loo(ll)
    ll[0, 0, 3] = -1e300
    with pytest.warns(UserWarning):
        res = loo_adapt.loo(ll).loo_adapt
    assert res.elpd_i[3] == pytest.approx(-1e300, rel=1e-12)
    assert not res.reliable[3] and res.pareto_k[3] > 1
    assert np.isfinite(res.elpd_i[np.arange(54) != 3]).all()


# --------------------------------------------------------------------------- mismatches
POISSON = Path(__file__).resolve().parents[1] / "data" / "poisson"
RHS = DATA / "rhs_logistic"
RHS_JSON = DATA / "rhs_logistic.data.json"
MISMATCH = "the model and the data do not match"


@pytest.fixture
def nothing_runs(monkeypatch):
    """Fail the test if anything is estimated or sampled: mismatches are found first."""
    from loo_adapt.stan.program import StanProgram

    def forbidden(*args, **kwargs):
        raise AssertionError("work started before the mismatch was found")

    monkeypatch.setattr(loo_adapt, "loo", forbidden)
    monkeypatch.setattr(StanProgram, "fit", forbidden)


def _json(tmp_path, name, data):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("csv, data, model, words", [
    # a family whose data the file is not (the rhs program's entries, no prior_sd)
    (SAMPLE, RHS_JSON, "logistic", ["--model logistic reads prior_sd", "--data",
                                    "looks like data for --model logistic-rhs"]),
    (RHS / "sample", DATA_JSON, "logistic-rhs", ["--model logistic-rhs reads",
                                                 "looks like data for --model logistic"]),
    (SAMPLE, DATA_JSON, "relu", ["--model relu reads H", "scale_icept"]),
    # data that fit the family, draws of another family
    (RHS / "sample", RHS_JSON.with_name("logistic_normal.data.json"), "logistic",
     ["--model logistic reads the parameter 'alpha'", "--names",
      "like a fit of --model logistic-rhs"]),
])
def test_family_and_data_that_do_not_match(tmp_path, capsys, nothing_runs, csv, data, model,
                                           words):
    out = tmp_path / "rep"
    rc, _, err = _run(capsys, "evaluate", csv, "--data", data, "--model", model, "--out", out,
                      "-q")
    line = _one_line(err)
    assert rc == 1 and line.startswith(f"loo-adapt evaluate: error: {MISMATCH}: "), line
    for word in words:
        assert word in line, line
    assert not out.exists()


def test_data_with_another_number_of_observations(tmp_path, capsys, nothing_runs):
    data = json.loads(DATA_JSON.read_text())
    fewer = {**data, "N": 50, "X": data["X"][:50], "y": data["y"][:50]}
    path = _json(tmp_path, "fewer.json", fewer)
    for extra in (["--model", "logistic"], ["--program", DATA / "logistic_normal.stan"]):
        rc, _, err = _run(capsys, "evaluate", SAMPLE, "--data", path, "--out",
                          tmp_path / "rep", "-q", *extra)
        line = _one_line(err)
        assert rc == 1 and MISMATCH in line, line
        assert "--data" in line and "N = 50" in line and "54 columns" in line, line


def test_observations_counted_by_the_entry_that_sizes_log_lik(tmp_path, capsys,
                                                              nothing_runs):
    """A --program whose log_lik is sized by J (grouped data: N rows in J groups) is
    counted by J: data with the fit's J but another N is not refused, data with another J
    is, naming J."""
    from loo_adapt.cli import matching

    program = tmp_path / "groups.stan"
    program.write_text(Path(DATA / "logistic_normal.stan").read_text()
                       .replace("vector[N] log_lik;", "vector[J] log_lik;")
                       .replace("int<lower=1> N;", "int<lower=1> N;\n  int<lower=1> J;"))
    assert "int<lower=1> J;" in program.read_text()
    data = json.loads(DATA_JSON.read_text())
    assert matching.count_name(program, {**data, "J": 54}) == "J"
    assert matching.count_name(program, data) == "N"  # no J in the data: N
    assert matching.count_name(DATA / "logistic_normal.stan", {**data, "J": 54}) == "N"
    matching.check_observations({**data, "N": 300, "J": 54}, "d.json", 54, "J")
    with pytest.raises(matching.MismatchError, match="d.json has J = 50 observations"):
        matching.check_observations({**data, "J": 50}, "d.json", 54, "J")
    path = _json(tmp_path, "groups.json", {**data, "J": 50})
    rc, _, err = _run(capsys, "evaluate", SAMPLE, "--data", path, "--out", tmp_path / "rep",
                      "-q", "--program", program)
    line = _one_line(err)
    assert rc == 1 and MISMATCH in line and "J = 50" in line and "54 columns" in line, line


def test_program_data_block_checked_before_sampling(tmp_path, capsys, nothing_runs):
    """--program's declared data entries missing from --data, a program of other
    parameters, a program writing no log_lik: refused from the source, before any fit."""
    program = POISSON / "poisson.stan"
    data = json.loads((POISSON / "poisson.data.json").read_text())
    no_x = _json(tmp_path, "no_x.json", {k: v for k, v in data.items() if k != "x"})
    rc, _, err = _run(capsys, "evaluate", SAMPLE, "--program", program, "--data", no_x,
                      "--out", tmp_path / "rep", "-q")
    line = _one_line(err)
    assert rc == 1 and MISMATCH in line and "--program" in line and "--data" in line
    assert "declares the data entries x" in line
    # the logistic draws and data given with the Poisson program: its data are not there
    rc, _, err = _run(capsys, "evaluate", SAMPLE, "--program", program, "--data", DATA_JSON,
                      "--out", tmp_path / "rep", "-q")
    line = _one_line(err)
    assert rc == 1 and MISMATCH in line and "K, x, count" in line
    # the Poisson program with data that fit it, but the draws of another program
    fake = _json(tmp_path, "fake.json", {**data, "N": 54, "x": [[0, 0]] * 54,
                                         "count": [0] * 54})
    rc, _, err = _run(capsys, "evaluate", SAMPLE, "--program", program, "--data", fake,
                      "--out", tmp_path / "rep", "-q")
    line = _one_line(err)
    assert rc == 1 and MISMATCH in line and "has the parameters a, b" in line
    assert "alpha, beta, log_lik" in line
    # a program writing no log_lik
    src = program.read_text().replace("log_lik", "loglik")
    other = tmp_path / "other.stan"
    other.write_text(src.replace("real a;", "real alpha;\n  vector[2] beta;\n  real a;")
                     .replace("vector[K] b;", "real b;"))
    rc, _, err = _run(capsys, "evaluate", SAMPLE, "--program", other, "--data", fake,
                      "--out", tmp_path / "rep", "-q")
    assert rc == 1


def test_program_and_model_need_data(tmp_path, capsys, nothing_runs):
    for option, value in (("--program", POISSON / "poisson.stan"), ("--model", "logistic")):
        rc, _, err = _run(capsys, "evaluate", SAMPLE, option, value, "--out", tmp_path / "r",
                          "-q")
        line = _one_line(err)
        assert rc == 1 and f"{option} needs --data DATA.json" in line
    rc, _, err = _run(capsys, "evaluate", SAMPLE, "--fallback", "refit", "--out",
                      tmp_path / "r", "-q")
    line = _one_line(err)
    assert rc == 1 and "--fallback refit needs the Stan program" in line
    assert "--program FILE.stan --data DATA.json" in line


def test_library_identity_error_is_said_as_a_mismatch(tmp_path, capsys, monkeypatch):
    """The library's program <-> fit identity check (ProgramMismatchError, a ValueError)
    ends the command with "the model and the data do not match" and exit code 1."""
    try:
        from loo_adapt.stan.identity import ProgramMismatchError
    except ImportError:
        class ProgramMismatchError(ValueError):
            pass

    def refuse(**kwargs):
        raise ProgramMismatchError("log_lik at observation 3 differs from the fit's")

    monkeypatch.setattr(loo_adapt, "loo", refuse)
    rc, _, err = _run(capsys, "evaluate", SAMPLE, "--out", tmp_path / "rep", "-q")
    line = _one_line(err)
    assert rc == 1
    assert line == (f"loo-adapt evaluate: error: {MISMATCH}: log_lik at observation 3 "
                    "differs from the fit's")


def test_library_messages_name_options_not_python(tmp_path, capsys):
    """A CSV that does not say which method wrote it: the message names no Python
    argument ("pass method=" is a Python call's advice)."""
    bad = tmp_path / "nomethod.csv"
    bad.write_text("a,b,log_lik.1\n0.1,0.2,-1\n0.3,0.1,-2\n")
    rc, _, err = _run(capsys, "evaluate", bad, "--out", tmp_path / "rep", "-q")
    line = _one_line(err)
    assert rc == 1 and "nomethod.csv" in line and "method=" not in line, line
    assert cli.cli_message("pass khat_threshold= in (0, 1] or refit_kwargs['max_refits']") \
        == "pass --threshold in (0, 1] or --max-refits"
    assert cli.cli_message("use loo(..., program=loo_adapt.StanProgram(stan_file, data))") \
        == "use --program FILE.stan --data DATA.json"
    assert cli.cli_message("or loo(..., model=model, estimator='mixis')") == \
        "or --model FAMILY, --method mixis"


def test_quiet_silences_cmdstanpy_set_up_inside_the_command(tmp_path, capsys, monkeypatch):
    """cmdstanpy sets its logger up on first use, inside the command (level DEBUG and a
    stream handler at INFO): -q still prints none of its INFO lines, --verbose does."""
    import logging
    import sys

    def like_cmdstanpy(**kwargs):
        logger = logging.getLogger("cmdstanpy")
        logger.setLevel(logging.DEBUG)  # what cmdstanpy's get_logger() does
        handler = logging.StreamHandler(sys.stderr)
        handler.setLevel(logging.INFO)
        logger.addHandler(handler)
        try:
            logger.info("Chain [1] start processing")
            logger.warning("a warning stays")
        finally:
            logger.removeHandler(handler)
        raise MemoryError()

    monkeypatch.setattr(loo_adapt, "loo", like_cmdstanpy)
    _, _, err = _run(capsys, *_evaluate(SAMPLE, tmp_path / "a"))
    assert "start processing" not in err and "a warning stays" in err
    _, _, err = _run(capsys, *_evaluate(SAMPLE, tmp_path / "b", "--verbose"))
    assert "Chain [1] start processing" in err


def test_refits_need_to_know_the_per_observation_entries(tmp_path, capsys, nothing_runs):
    """A scalar equal to N makes the per-observation entries ambiguous: said before any
    fit, with the option that settles it (--obs-vars), which then lets the run start."""
    data = json.loads((POISSON / "poisson.data.json").read_text())
    path = _json(tmp_path, "twin.json", {**data, "M": data["N"]})
    csv = tmp_path / "poisson.csv"  # any CSV with the program's parameters and 30 columns
    names = ["lp__", "a", "b.1", "b.2"] + [f"log_lik.{i}" for i in range(1, 31)]
    csv.write_text("# method = sample\n" + ",".join(names) + "\n"
                   + "\n".join(",".join(["-1.0"] * len(names)) for _ in range(4)) + "\n")
    args = ["evaluate", csv, "--program", POISSON / "poisson.stan", "--data", path,
            "--out", tmp_path / "rep", "-q", "--backend", "stanli"]
    rc, _, err = _run(capsys, *args)
    line = _one_line(err)
    assert rc == 1 and "['M'] equals N = 30" in line and "--obs-vars NAME..." in line
    assert "obs_dim_vars" not in line
    rc, _, err = _run(capsys, *args, "--obs-vars", "x", "count")
    assert "work started before the mismatch was found" in _one_line(err)


def test_fit_inputs_refused_before_any_fit(tmp_path, capsys):
    """The sweep's cases: a data CSV with a header and no rows leaked numpy's 'input contained
    no data' warning before the error; `demo --draws 1` ran both fits before failing on the
    ESS. Both are one-line errors now, and nothing is fitted."""
    csv = tmp_path / "empty.csv"
    csv.write_text("a,b\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy warning on the way
        rc, _, err = _run(capsys, "fit", "--model", "logistic", "--data", str(csv), "--out",
                          str(tmp_path / "x"), "-q")
    assert rc == 1 and "holds no rows of numbers" in err and "Traceback" not in err
    for cmd in (["demo", "--quick"], ["fit", "--model", "logistic", "--data", str(csv)]):
        rc, _, err = _run(capsys, *cmd, "--draws", "1", "--out", str(tmp_path / "y"), "-q")
        assert rc == 2 and "--draws" in err and "at least 4" in err
    assert not (tmp_path / "y").exists()
