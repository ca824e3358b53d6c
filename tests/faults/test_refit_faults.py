"""Refit faults lose nothing: raise / NaN / hang / dead worker, checkpoint + resume, signals.

Expectations are independent of the code: the surviving rows equal the closed-form LOO
predictive density of a conjugate normal model (within 4 MCSE) and, bit for bit, a serial run
with the same seeds; the failed rows are unverified with the reason; killed workers' process
ids no longer exist; a resumed run refits exactly the rows the checkpoint lacks.
"""

import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from scipy import stats

from loo_adapt.stan.pool import Checkpoint, LocalProcessPool, run_tasks
from loo_adapt.stan.refit import refit_loo

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]

TAU = 10.0
Y = np.array([0.3, -1.2, 0.8, 4.5, 0.1, -0.4, 1.1, 0.6])


def exact_elpd(i):
    rest = np.delete(Y, i)
    prec = 1.0 / TAU**2 + rest.size
    m, v = rest.sum() / prec, 1.0 / prec
    return stats.norm.logpdf(Y[i], loc=m, scale=np.sqrt(1.0 + v))


def conj_refit(i, seed):
    rest = np.delete(Y, i)
    prec = 1.0 / TAU**2 + rest.size
    mu = np.random.default_rng(seed).normal(rest.sum() / prec, np.sqrt(1.0 / prec), (4, 500))
    return stats.norm.logpdf(Y[i], loc=mu, scale=1.0)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = pathlib.Path(f"/proc/{pid}/status")
    if status.is_file():
        try:
            return "zombie" not in status.read_text()
        except OSError:
            return False
    return True


def wait_gone(pids, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if pid_alive(p)]


class Faulty:
    """Observation 1 raises, 2 returns NaN, 3 hangs, 4 kills its worker; the rest are exact.

    Module-level class so that it pickles into worker processes; it records each call's pid.
    """

    def __init__(self, log_dir):
        self.log_dir = str(log_dir)

    def __call__(self, i, seed):
        pathlib.Path(self.log_dir, f"call_{i}_{os.getpid()}_{time.monotonic_ns()}").touch()
        if i == 1:
            raise RuntimeError("sampler exploded")
        if i == 2:
            return np.full((4, 500), np.nan)
        if i == 3:
            time.sleep(120)
        if i == 4:
            os._exit(7)
        return conj_refit(i, seed)


def calls(log_dir):
    out = []
    for f in pathlib.Path(log_dir).glob("call_*"):
        _, i, pid, _ = f.name.split("_")
        out.append((int(i), int(pid)))
    return out


def test_each_fault_marks_its_row_and_the_run_continues(tmp_path):
    idx = [0, 1, 2, 3, 4, 5]
    with pytest.warns(UserWarning, match="4 of 6 refit"):
        res = refit_loo(idx, refit_fn=Faulty(tmp_path), seed=3, n_jobs=2, timeout=4.0,
                        progress=False)
    assert res.status.tolist() == ["ok", "error", "error", "timeout", "died", "ok"]
    assert res.reliable.tolist() == [True, False, False, False, False, True]
    assert "RuntimeError: sampler exploded" in res.reason[1]
    assert "NaN" in res.reason[2]
    assert "timed out after 4 s" in res.reason[3] and "worker was stopped" in res.reason[3]
    assert "died (exit code 7)" in res.reason[4]
    # the survivors are right, and exactly what a serial run gives
    for pos in (0, 5):
        i = idx[pos]
        assert abs(res.elpd_i[pos] - exact_elpd(i)) < 4 * res.mcse_elpd_i[pos]
        serial = refit_loo([i], refit_fn=conj_refit, seed=3, n_jobs=1, progress=False)
        assert serial.elpd_i[0] == res.elpd_i[pos]
    assert np.isnan(res.elpd_i[1:5]).all()
    # a dead worker is retried once (two calls), the hung worker was terminated
    seen = calls(tmp_path)
    assert sum(i == 4 for i, _ in seen) == 2
    hung = [pid for i, pid in seen if i == 3]
    assert len(hung) == 1 and wait_gone(hung) == []


def test_checkpoint_resume_skips_finished_rows(tmp_path):
    ck = tmp_path / "ck"
    log1, log2 = tmp_path / "a", tmp_path / "b"
    log1.mkdir()
    log2.mkdir()
    with pytest.warns(UserWarning, match="1 of 3"):
        # Faulty(log1) and Faulty(log2) differ in content (their log folder): the key names
        # them as one run
        first = refit_loo([0, 1, 5], refit_fn=Faulty(log1), seed=2, n_jobs=1, checkpoint=ck,
                          progress=False, key="faulty")
    assert first.status.tolist() == ["ok", "error", "ok"]
    assert sorted(f.name for f in ck.glob("*.npz")) == ["obs_0.npz", "obs_5.npz"]
    # resume (same settings): only the failed row runs again
    again = refit_loo([0, 1, 5], refit_fn=Faulty(log2), seed=2, n_jobs=1, checkpoint=ck,
                      progress=False, key="faulty")
    assert again.status[1] == "error"
    assert sorted(i for i, _ in calls(log2)) == [1]
    np.testing.assert_array_equal(again.elpd_i[[0, 2]], first.elpd_i[[0, 2]])
    np.testing.assert_array_equal(again.log_lik[0], first.log_lik[0])
    assert again.reliable[[0, 2]].all()
    # another run's settings must not pick up these rows
    with pytest.raises(ValueError, match="holds another run"):
        refit_loo([0, 5], refit_fn=Faulty(log2), seed=9, n_jobs=1, checkpoint=ck,
                  progress=False, key="faulty")
    with pytest.raises(ValueError, match="holds another run"):  # nor another function's
        refit_loo([0, 5], refit_fn=Faulty(log2), seed=2, n_jobs=1, checkpoint=ck,
                  progress=False)
    with pytest.raises(ValueError, match="is a file"):
        Checkpoint(ck / "obs_0.npz", "refit", "x")


def test_checkpoint_rows_are_written_whole(tmp_path, monkeypatch):
    ck = Checkpoint(tmp_path, "refit", "f")
    ck.save("obs_1", {"log_lik": np.arange(8.0).reshape(2, 4)}, {"seconds": 1.0})

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="No space"):
        ck.save("obs_2", {"log_lik": np.zeros((2, 4))}, {"seconds": 2.0})
    monkeypatch.undo()
    rows = Checkpoint(tmp_path, "refit", "f").load()
    assert list(rows) == ["obs_1"]  # no half-written row, no temporary file left behind
    assert [f.name for f in tmp_path.iterdir() if f.name.startswith(".tmp")] == []
    np.testing.assert_array_equal(rows["obs_1"][0]["log_lik"], np.arange(8.0).reshape(2, 4))


class Slow:
    """Sleeps, then returns exact draws; records its pid (for the signal tests)."""

    def __init__(self, log_dir, seconds):
        self.log_dir, self.seconds = str(log_dir), seconds

    def __call__(self, i, seed):
        pathlib.Path(self.log_dir, f"call_{i}_{os.getpid()}_{time.monotonic_ns()}").touch()
        time.sleep(self.seconds)
        return conj_refit(i, seed)


SCRIPT = """
import signal
import sys
# a runner started in the background (`cmd &` in a script) ignores SIGINT, and children
# inherit that: take Python's usual KeyboardInterrupt back, as an interactive run has it
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path[:0] = [{here!r}, {root!r}]
from test_refit_faults import Slow
from loo_adapt.stan.refit import refit_loo
# no `if __name__ == "__main__":` guard on purpose
refit_loo(range(8), refit_fn=Slow({log!r}, 1.5), seed=4, n_jobs=2, checkpoint={ck!r},
          progress=False, key="slow")
print("finished")
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_workers_and_keeps_finished_refits(tmp_path, sig):
    log, ck = tmp_path / "log", tmp_path / "ck"
    log.mkdir()
    script = tmp_path / "run.py"
    script.write_text(SCRIPT.format(here=str(HERE), root=str(ROOT), log=str(log), ck=str(ck)))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and len(list(ck.glob("obs_*.npz"))) < 2:
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()
    assert len(list(ck.glob("obs_*.npz"))) < 8
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "finished" not in out
    assert "Traceback" not in err or "KeyboardInterrupt" in err or "Interrupted" in err
    workers = sorted({pid for _, pid in calls(log)})
    assert workers and proc.pid not in workers
    assert wait_gone(workers) == [], "worker processes outlived the run"
    saved = sorted(int(f.stem.split("_")[1]) for f in ck.glob("obs_*.npz"))
    assert len(saved) >= 2
    # resume in this process: exactly the missing rows are refitted, the saved ones reused
    log2 = tmp_path / "log2"
    log2.mkdir()
    res = refit_loo(range(8), refit_fn=Slow(log2, 0.0), seed=4, n_jobs=1, checkpoint=ck,
                    progress=False, key="slow")  # another log folder and delay: same run
    assert sorted(i for i, _ in calls(log2)) == sorted(set(range(8)) - set(saved))
    assert res.reliable.all()
    exact = np.array([exact_elpd(i) for i in range(8)])
    assert np.all(np.abs(res.elpd_i - exact) < 4 * res.mcse_elpd_i)


GUARDLESS = """
import sys
sys.path[:0] = [{root!r}]
import numpy as np
from loo_adapt.stan.refit import refit_loo

def refit(i, seed):  # defined in the script: workers must import it
    return np.log(np.random.default_rng(seed).uniform(0.2, 0.4, size=(4, 100)))

refit_loo(range(4), refit_fn=refit, n_jobs=2, progress=False)
print("finished")
"""


def test_script_without_main_guard_gets_a_clear_error(tmp_path):
    script = tmp_path / "guardless.py"
    script.write_text(GUARDLESS.format(root=str(ROOT)))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode != 0 and "finished" not in proc.stdout
    assert 'if __name__ == "__main__":' in proc.stderr.splitlines()[-1]


def test_local_pool_replaces_a_killed_worker_and_closes_cleanly():
    pool = LocalProcessPool(2, needs_main=False)
    try:
        pids = pool.pids()
        got = []
        run_tasks([("a", abs, (-2,)), ("b", time.sleep, (60,)), ("c", abs, (-5,))], pool,
                  on_result=lambda *r: got.append(r), timeout=3.0)
        assert sorted(got)[0] == ("a", "ok", 2) and ("c", "ok", 5) in got
        assert [r[:2] for r in got if r[0] == "b"] == [("b", "timeout")]
        assert set(pids) - set(pool.pids())  # the hung worker was replaced
    finally:
        pool.close()
    assert wait_gone(pids + pool.pids()) == []


def test_a_task_sent_to_a_worker_that_died_idle_is_reported_not_a_broken_pipe():
    # a worker that dies between tasks (killed, or failing as it starts) closes its pipe: the
    # next task sent to it must come back as "died" and the worker be replaced, not raise
    # BrokenPipeError out of the loop (what a script without a main guard sometimes got)
    pool = LocalProcessPool(1, needs_main=False)
    try:
        got = []
        run_tasks([("a", abs, (-1,))], pool, on_result=lambda *r: got.append(r))
        (pid,) = pool.pids()
        os.kill(pid, signal.SIGKILL)
        assert wait_gone([pid]) == []
        run_tasks([("b", abs, (-3,))], pool, on_result=lambda *r: got.append(r))
        run_tasks([("c", abs, (-5,))], pool, on_result=lambda *r: got.append(r))
        assert got[0] == ("a", "ok", 1) and got[2] == ("c", "ok", 5)
        assert got[1][:2] == ("b", "died") and "died" in got[1][2]
        assert pool.pids() != [pid]
    finally:
        pool.close()


def test_max_seconds_is_a_hard_limit_for_a_hung_refit(tmp_path):
    # observation 3 hangs for 120 s; the 6 s budget stops it and leaves the rest out
    t0 = time.monotonic()
    with pytest.warns(UserWarning):
        res = refit_loo([3, 0, 5], refit_fn=Faulty(tmp_path), n_jobs=1, max_seconds=6,
                        progress=False)
    assert time.monotonic() - t0 < 100  # returned, long before the hung refit would have
    assert res.status.tolist() == ["timeout", "skipped", "skipped"]
    assert "max_seconds=6" in res.reason[0] and "worker was stopped" in res.reason[0]
    assert all("max_seconds=6" in r for r in res.reason[1:])
    assert not res.reliable.any()
    hung = [pid for i, pid in calls(tmp_path) if i == 3]
    assert wait_gone(hung) == []
