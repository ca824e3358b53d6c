"""Issue 22.1 and 22.6: a checkpoint is reused only by the run that wrote it, identified by
content; nothing is written outside --out; errors name the file or folder at fault.

Independent expectations: the held-out elpd of a refit_fn with known predictive density
(a closed form), the files on disk, and one-line errors naming the path.
"""

import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
from cli_run import one_line as _one_line
from cli_run import run_cli as _run

import loo_adapt
from loo_adapt.stan.pool import Checkpoint
from loo_adapt.stan.refit import refit_loo

DATA = Path(__file__).resolve().parents[1] / "data" / "cmdstan"
SAMPLE = DATA / "logistic_normal" / "sample"
DATA_JSON = DATA / "logistic_normal.data.json"


def constant_refit(mu, calls=None):
    """refit_fn whose held-out log-likelihood is mu at every draw: elpd_i = mu exactly."""
    def refit_fn(i):
        if calls is not None:
            calls.append(i)
        return np.full((2, 50), mu)
    return refit_fn


def test_refit_fn_closures_with_other_values_are_other_runs(tmp_path):
    """Two closures of one def (mu = -1, then mu = -5) are two runs: the second is refused
    (it returned the first run's rows, -1.0 "reliable"), never given the first's rows."""
    ck = tmp_path / "ck"
    first = refit_loo([0, 1], refit_fn=constant_refit(-1.0), checkpoint=ck, n_jobs=1,
                      progress=False)
    assert first.elpd_i.tolist() == [-1.0, -1.0]
    with pytest.raises(ValueError, match="holds another run"):
        refit_loo([0, 1], refit_fn=constant_refit(-5.0), checkpoint=ck, n_jobs=1,
                  progress=False)
    # the same computation (a new closure with the same value) resumes: the rows come back
    # from the checkpoint with the first run's own timings
    again = refit_loo([0, 1], refit_fn=constant_refit(-1.0), checkpoint=ck, n_jobs=1,
                      progress=False)
    assert again.elpd_i.tolist() == [-1.0, -1.0]
    np.testing.assert_array_equal(again.seconds, first.seconds)


def test_fingerprint_sees_code_defaults_globals_and_nested_functions():
    from loo_adapt.stan.fingerprint import function_fingerprint

    def a(i, s=1.0):
        return i * s

    def b(i, s=2.0):
        return i * s

    def c(i, s=1.0):
        return i + s

    assert function_fingerprint(a) != function_fingerprint(b)  # a default
    assert function_fingerprint(a) != function_fingerprint(c)  # the code
    data = {"x": np.arange(3.0)}

    def outer(scale):
        def inner(i):
            return data["x"][i] * scale
        return inner

    f1 = function_fingerprint(outer(2.0))
    data["x"] = np.arange(3.0) + 1  # a value the function reads changed
    assert function_fingerprint(outer(2.0)) != f1
    assert function_fingerprint(outer(2.0)) == function_fingerprint(outer(2.0))


def test_unhashable_closure_value_needs_a_key(tmp_path):
    source = io.BytesIO(b"-2.0")  # a C object: its content cannot be hashed reliably

    def refit_fn(i):
        return np.full((2, 50), float(source.getvalue()))

    with pytest.raises(ValueError, match=r"closure variable 'source'.*key="):
        refit_loo([0], refit_fn=refit_fn, checkpoint=tmp_path / "ck", n_jobs=1,
                  progress=False)
    res = refit_loo([0], refit_fn=refit_fn, checkpoint=tmp_path / "ck", n_jobs=1,
                    progress=False, key="lock-run-1")
    assert res.elpd_i.tolist() == [-2.0]
    with pytest.raises(ValueError, match="holds another run"):
        refit_loo([0], refit_fn=refit_fn, checkpoint=tmp_path / "ck", n_jobs=1,
                  progress=False, key="lock-run-2")


def test_rows_without_a_manifest_are_refused(tmp_path):
    """A folder of another data set's refits with no manifest.json was trusted (row 41:
    -0.215 "reliable", right -0.008): now refused, naming the folder and the reason."""
    ck = tmp_path / "ck"
    refit_loo([0, 1], refit_fn=constant_refit(-0.215), checkpoint=ck, n_jobs=1,
              progress=False)
    (ck / "manifest.json").unlink()
    calls = []
    with pytest.raises(ValueError, match=r"no manifest\.json.*not reused") as info:
        refit_loo([0, 1], refit_fn=constant_refit(-0.008, calls), checkpoint=ck, n_jobs=1,
                  progress=False)
    assert str(ck) in str(info.value) and calls == []


def test_random_bytes_checkpoint_file_is_named_without_the_pickle_hint(tmp_path):
    ck = Checkpoint(tmp_path, "refit", "x")
    bad = tmp_path / "obs_3.npz"
    bad.write_bytes(np.random.default_rng(0).bytes(400))
    with pytest.raises(ValueError) as info:
        ck.load()
    text = str(info.value)
    assert str(bad) in text and "allow_pickle" not in text and "delete it" in text


def _fake_loo_that_opens_the_checkpoint(monkeypatch):
    """loo() replaced by what refit_loo does first with its checkpoint (opening it writes
    the manifest), then a stop: the test needs no Stan refit."""
    def fake_loo(**kwargs):
        Checkpoint(kwargs["refit_kwargs"]["checkpoint"], "refit", "run-b")
        raise MemoryError()

    monkeypatch.setattr(loo_adapt, "loo", fake_loo)


def test_symlinked_checkpoint_folder_in_out_is_refused(tmp_path, capsys, monkeypatch):
    """--out DIR whose .loo-adapt-refits links elsewhere: the manifest and refits were
    written there and another run's rows found there reused; now nothing is written
    outside --out and the link is named."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "manifest.json").write_text(json.dumps({"kind": "refit"}))
    before = sorted(p.name for p in elsewhere.iterdir())
    out = tmp_path / "rep"
    out.mkdir()
    os.symlink(elsewhere, out / loo_adapt.cli.CHECKPOINT)
    _fake_loo_that_opens_the_checkpoint(monkeypatch)
    rc, _, err = _run(capsys, "evaluate", SAMPLE, "--data", DATA_JSON, "--model", "logistic",
                      "--out", out, "--no-adapt", "-q", "--fallback", "refit")
    line = _one_line(err)
    assert rc == 1 and "symbolic link" in line and str(elsewhere) in line
    assert sorted(p.name for p in elsewhere.iterdir()) == before
    assert (elsewhere / "manifest.json").read_text() == json.dumps({"kind": "refit"})


def test_resume_folder_without_manifest_is_refused_by_the_cli(tmp_path, capsys, monkeypatch):
    ck = tmp_path / "ck"
    ck.mkdir()
    np.savez(ck / "obs_0.npz", log_lik=np.zeros((2, 4)))
    _fake_loo_that_opens_the_checkpoint(monkeypatch)
    rc, _, err = _run(capsys, "evaluate", SAMPLE, "--data", DATA_JSON, "--model", "logistic",
                      "--out", tmp_path / "rep", "--no-adapt", "-q", "--fallback", "refit",
                      "--resume", ck)
    line = _one_line(err)
    assert rc == 1 and "no manifest.json" in line and str(ck) in line


def test_unwritable_cache_is_named_not_out(tmp_path, monkeypatch):
    """The cache folder (compiled models, flagged programs) that cannot be written is
    named with LOO_ADAPT_CACHE; --out is not blamed."""
    from loo_adapt.stan.mixis_program import flagged_program_path

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("LOO_ADAPT_CACHE", str(blocker / "cache"))
    stan = tmp_path / "m.stan"
    stan.write_text("data { int N; vector[N] y; } parameters { real mu; } model { y ~ "
                    "normal(mu, 1); } generated quantities { vector[N] log_lik; for (n in "
                    "1:N) log_lik[n] = normal_lpdf(y[n] | mu, 1); }")
    with pytest.raises(RuntimeError) as info:
        flagged_program_path(stan)
    text = str(info.value)
    assert "LOO_ADAPT_CACHE" in text and str(blocker) in text and "--out" not in text


def test_os_error_outside_out_does_not_blame_out(tmp_path):
    from loo_adapt import cli

    out = tmp_path / "rep"
    elsewhere = PermissionError(13, "Permission denied", str(tmp_path / "cache" / "x"))
    inside = PermissionError(13, "Permission denied", str(out / "results.json"))
    assert "--out" not in cli._classify(elsewhere, str(out))[1].replace(
        "that folder is not --out", "")
    assert "choose a writable --out" in cli._classify(inside, str(out))[1]
