"""Issue 14, signal rows: SIGINT / SIGTERM to ``loo-adapt evaluate`` during refits end with
exit 130 / 143, one line on stderr, no worker left running, and no half-written report."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

import loo_adapt
from loo_adapt.evaluation.report import read_manifest

DATA = Path(__file__).resolve().parents[1] / "data" / "cmdstan"
SAMPLE = DATA / "logistic_normal" / "sample"
DATA_JSON = DATA / "logistic_normal.data.json"
ROOT = Path(loo_adapt.__file__).resolve().parents[1]


def _start(out: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    return subprocess.Popen(
        [sys.executable, "-m", "loo_adapt.cli", "evaluate", str(SAMPLE), "--data",
         str(DATA_JSON), "--model", "logistic", "--no-adapt", "--fallback", "refit",
         "--backend", "stanli", "--max-refits", "30", "--out", str(out)],
        stdout=subprocess.DEVNULL, stderr=open(log, "w"), env=env)


def _wait_for_refits(proc, log: Path, timeout=120.0):
    """Until the refit progress bar on stderr shows a finished refit (the pool is running)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            pytest.fail(f"the CLI ended early ({proc.returncode}): {log.read_text()[-500:]}")
        # the first refit runs alone (it is timed); the rest run in worker processes: signal
        # those (a signal inside the first refit's native sampler call is stanli's to handle)
        if re.search(r"LOO refits:.*\b[1-9]\d*/\d+", log.read_text(errors="replace")):
            return
        time.sleep(0.2)
    pytest.fail("the refits did not start")


def _refits_done(log: Path) -> int:
    """Finished refits the progress bar shows last."""
    counts = re.findall(r"LOO refits:[^\n\r]*?\b(\d+)/\d+", log.read_text(errors="replace"))
    return int(counts[-1]) if counts else 0


def _refits_go_on(proc, log: Path, seen: int, timeout=30.0) -> bool:
    """True if, after a signal, refits keep finishing beyond the two the workers may have had
    in hand (the signal was lost); False once the process ends or the refits stop."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            return False
        if time.monotonic() - t0 > 1.5 and _refits_done(log) > seen + 2:
            return True
        time.sleep(0.2)
    return False


@pytest.mark.slow
@pytest.mark.parametrize("sig, code, word", [(signal.SIGINT, 130, "interrupted"),
                                             (signal.SIGTERM, 143, "terminated")])
def test_signal_during_refits(tmp_path, sig, code, word):
    out = tmp_path / "rep"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    log = tmp_path / "stderr.txt"
    proc = _start(out, log)
    try:
        _wait_for_refits(proc, log)
        time.sleep(1.0)
        children = psutil.Process(proc.pid).children(recursive=True)
        # A signal that lands while the main thread is inside one of stanli's native calls
        # is taken by stanli's own interrupt watch and can be lost (a stanli limitation, seen
        # about once in five runs); a user who sees the refits go on presses Ctrl-C again: so
        # do we, at most twice more -- only when the progress bar shows more refits finishing
        # than the workers had in hand (a taken signal stops them; a second one during the
        # clean-up would be a different test).
        for _ in range(3):
            proc.send_signal(sig)
            if not _refits_go_on(proc, log, _refits_done(log)):
                break
        rc = proc.wait(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = log.read_text(errors="replace")
    last = [ln for ln in err.replace("\r", "\n").splitlines() if ln.strip()][-1]
    assert rc == code, err[-800:]
    assert "Traceback" not in err
    assert last.startswith(f"loo-adapt evaluate: {word}")
    # no half-written report: the folder holds the user's file (and at most a checkpoint)
    assert read_manifest(out) is None
    assert {p.name for p in out.iterdir()} <= {"notes.txt", ".loo-adapt-refits"}
    if "--resume" in last:  # finished refits were kept: the message names where
        assert (out / ".loo-adapt-refits").is_dir()
    # no worker process outlives the CLI
    gone, alive = psutil.wait_procs(children, timeout=15)
    assert not alive, [p.pid for p in alive]
