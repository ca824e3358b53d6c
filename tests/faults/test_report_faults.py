"""Issue 14, report rows: nothing lost on a full disk, no mixed runs in one folder, concurrent
writers refused, and results.json giving back every field of the result exactly."""

import dataclasses
import errno
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from small_disk import small_disk  # noqa: F401 (a fixture)

import loo_adapt
from loo_adapt.evaluation import report
from loo_adapt.evaluation.report import (
    LOCK,
    MANIFEST,
    ReportBusyError,
    load_results,
    read_manifest,
    save_report,
)
from loo_adapt.result import PointwiseLoo

DATA = Path(__file__).resolve().parents[1] / "data" / "cmdstan"
SAMPLE = DATA / "logistic_normal" / "sample"
TRUTH = DATA / "truth" / "logistic_normal.csv"


@pytest.fixture(scope="module")
def fixture_loo():
    """Plain PSIS-LOO of the CmdStan fixture with its outcomes (metrics and ROC figures)."""
    y = json.loads((DATA / "logistic_normal.data.json").read_text())["y"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return loo_adapt.loo(str(SAMPLE), y=y).loo_adapt


def _snapshot(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _same(a, b) -> bool:
    """Exact equality: NaN equals NaN; types, dtypes and shapes must match."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return False
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.dtype.kind == "f":
            return np.array_equal(a, b, equal_nan=True)
        return all(_same(x, y) for x, y in zip(a.ravel().tolist(), b.ravel().tolist()))
    if isinstance(a, float) and isinstance(b, float):
        return (np.isnan(a) and np.isnan(b)) or a == b
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return type(a) is type(b) and a == b


def _extreme_result(cls=PointwiseLoo, **extra) -> PointwiseLoo:
    n = 6
    return cls(
        elpd_i=np.array([-0.5, -np.inf, np.nan, -1e300, -5e-324, -2.0]),
        p_loo_i=np.array([0.1, np.inf, np.nan, 0.0, -0.0, 1e-17]),
        lpd_i=np.array([-0.4, -1.0, -2.0, -3.0, -4.0, -5.0]),
        mcse_elpd_i=np.array([0.01, np.nan, np.inf, 0.0, 0.2, 0.3]),
        pareto_k=np.array([0.2, np.inf, -np.inf, np.nan, 0.71, 1.5]),
        good_k=0.7, n_samples=4000, r_eff=np.linspace(0.5, 1.0, n),
        pareto_k_after=np.array([0.2, np.nan, np.nan, np.nan, 0.69, np.inf]),
        method=np.array(["psis", "mixis", "refit", "mm", "ll", "kl+ll"], dtype=object),
        rho=np.array([np.nan, np.nan, np.nan, np.nan, 0.125, 3.0]),
        loo_prob=np.array([0.5, 1.0, 0.0, np.nan, 0.25, 0.75]),
        y=np.array([1.0, 0.0, 1.0, 0.0, 1.0, 0.0]),
        diagnostic=np.array([np.nan, 12.5, np.inf, np.nan, np.nan, np.nan]),
        candidates=[{"i": 5, "transform": "ll", "rho": np.inf, "khat": np.nan,
                     "elpd_loo": -np.inf, "loo_prob": 0.5, "selected": True},
                    {"i": 4, "transform": "Infinity", "rho": 0.1, "khat": 0.3,
                     "elpd_loo": -1.0, "loo_prob": np.nan, "selected": False}],
        reliable=np.array([True, False, True, False, True, False]),
        mcse_total=0.0421, **extra)


def test_load_results_round_trips_every_field(tmp_path):
    res = _extreme_result()
    save_report(res, tmp_path, figures=False)
    raw = (tmp_path / "results.json").read_text()
    json.loads(raw, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert "null" not in raw  # inf / NaN are never written as null
    back = load_results(tmp_path)
    for f in dataclasses.fields(PointwiseLoo):
        assert _same(getattr(back, f.name), getattr(res, f.name)), f.name
    # the +inf k-hat stays +inf (it once came back NaN and moved to "no k-hat")
    assert back.pareto_k[1] == np.inf and back.mcse_total == 0.0421
    assert back.estimates()["mcse_elpd_loo"] == res.estimates()["mcse_elpd_loo"]


def test_fields_added_later_round_trip(tmp_path, monkeypatch):
    """A field added to PointwiseLoo (an origin record, reasons) round-trips with no change to the
    report code: it iterates over dataclasses.fields."""

    @dataclasses.dataclass
    class Later(PointwiseLoo):
        origin: dict = dataclasses.field(default_factory=dict)
        reason: np.ndarray | None = None
        grid: np.ndarray | None = None
        label: str = ""
        pair: tuple = ()
        count: int = 0
        ok: bool = False
        none: object = None

    extra = dict(origin={"origin": "advi", "pq": True, "khat_pq": np.inf,
                             "seed": 3, "draws": [1.5, -np.inf], "nested": {"x": np.nan}},
                 reason=np.array(["", "MCSE 0.31 above 0.10", "", "prior check failed: "
                                  "lp__ differs by 3.2", "", ""], dtype=object),
                 grid=np.arange(6, dtype=np.int32).reshape(2, 3),
                 label="NaN", pair=(1, "inf", np.inf), count=7, ok=True)
    res = _extreme_result(Later, **extra)
    monkeypatch.setattr(report, "PointwiseLoo", Later)
    save_report(res, tmp_path, figures=False)
    back = load_results(tmp_path)
    assert type(back) is Later
    for f in dataclasses.fields(Later):
        assert _same(getattr(back, f.name), getattr(res, f.name)), f.name
    # a reason recorded by an estimator is what the summary says about that row
    text = (tmp_path / "summary.txt").read_text()
    assert "1  log_lik[2]  mixis: MCSE 0.31 above 0.10" in text
    assert "3  log_lik[4]  mm: prior check failed: lp__ differs by 3.2" in text
    assert "5  log_lik[6]  kl+ll: k-hat inf > 0.70" in text
    assert "log_lik[3]" not in text  # row 2 is reliable


def test_unstorable_field_is_a_clear_error(tmp_path, monkeypatch):
    @dataclasses.dataclass
    class Odd(PointwiseLoo):
        thing: object = None

    res = _extreme_result(Odd, thing=object())
    monkeypatch.setattr(report, "PointwiseLoo", Odd)
    with pytest.raises(TypeError, match=r"PointwiseLoo\.thing of type object"):
        save_report(res, tmp_path, figures=False)
    assert not any(tmp_path.iterdir())  # nothing written


def test_enospc_part_way_keeps_the_old_report(fixture_loo, tmp_path, monkeypatch):
    save_report(fixture_loo, tmp_path, name="old", figures=False, n_boot=50)
    before = _snapshot(tmp_path)
    real = report._Staging.write_text

    def full_disk(self, filename, text):
        if filename == "results.json":  # summary.txt was staged, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device", str(self.dir / filename))
        return real(self, filename, text)

    monkeypatch.setattr(report._Staging, "write_text", full_disk)
    with pytest.raises(OSError) as info:
        save_report(fixture_loo, tmp_path, name="new", n_boot=50)
    assert info.value.errno == errno.ENOSPC
    assert _snapshot(tmp_path) == before  # no staging folder, no lock, old files intact
    assert load_results(tmp_path).pareto_k.tolist() == fixture_loo.pareto_k.tolist()


def test_enospc_while_writing_figures(fixture_loo, tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    save_report(fixture_loo, tmp_path, name="old", n_boot=50)
    before = _snapshot(tmp_path)
    real, calls = Figure.savefig, []

    def savefig(self, path, **kw):
        calls.append(path)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(self, path, **kw)

    monkeypatch.setattr(Figure, "savefig", savefig)
    with pytest.raises(OSError, match="No space left"):
        save_report(fixture_loo, tmp_path, name="new", n_boot=50)
    assert len(calls) == 3 and _snapshot(tmp_path) == before


def test_real_full_disk_keeps_the_old_report(fixture_loo, small_disk):  # noqa: F811
    save_report(fixture_loo, small_disk, name="old", figures=False, n_boot=50)
    before = _snapshot(small_disk)
    with pytest.raises(OSError) as info:  # the figures do not fit in 64 kB
        save_report(fixture_loo, small_disk, name="new", n_boot=50)
    assert info.value.errno == errno.ENOSPC
    assert _snapshot(small_disk) == before
    assert read_manifest(small_disk)["name"] == "old"
    back = load_results(small_disk)
    assert np.array_equal(back.elpd_i, fixture_loo.elpd_i)


def test_reused_folder_holds_one_run_and_user_files(fixture_loo, tmp_path):
    first = save_report(fixture_loo, tmp_path, name="first", n_boot=50)
    assert {"roc.png", "metrics.json"} <= {p.name for p in first}
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "plot.png").write_text("mine too")
    second = save_report(fixture_loo, tmp_path, name="second", figures=False, y=None,
                         probs={}, n_boot=50)
    names = {p.name for p in second}
    assert names == {"summary.txt", "results.json"}
    # the first run's figures and metrics are gone; the user's files and the manifest stay
    assert {p.name for p in tmp_path.iterdir()} == names | {MANIFEST, "notes.txt", "plot.png"}
    manifest = read_manifest(tmp_path)
    assert manifest["name"] == "second" and len(manifest["run_id"]) == 32
    assert {f["name"] for f in manifest["files"]} == names
    for f in manifest["files"]:
        assert (tmp_path / f["name"]).stat().st_size == f["bytes"]
    assert manifest["versions"]["loo_adapt"] == loo_adapt.__version__
    assert (tmp_path / "summary.txt").read_text().startswith("second\n")


def test_manifest_cannot_delete_outside_the_folder(fixture_loo, tmp_path):
    outside = tmp_path / "keep.txt"
    outside.write_text("keep")
    folder = tmp_path / "rep"
    save_report(fixture_loo, folder, figures=False, n_boot=50)
    manifest = read_manifest(folder)
    manifest["files"] += [{"name": "../keep.txt"}, {"name": str(outside)}]
    (folder / MANIFEST).write_text(json.dumps(manifest))
    save_report(fixture_loo, folder, figures=False, n_boot=50)
    assert outside.read_text() == "keep"


def test_concurrent_writer_refused_and_stale_lock_taken_over(fixture_loo, tmp_path):
    save_report(fixture_loo, tmp_path, name="old", figures=False, n_boot=50)
    before = _snapshot(tmp_path)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / LOCK).write_text(f"{other.pid}\n")
        with pytest.raises(ReportBusyError, match=rf"pid {other.pid}.*another output folder"):
            save_report(fixture_loo, tmp_path, name="new", figures=False, n_boot=50)
        (tmp_path / LOCK).unlink()
        assert _snapshot(tmp_path) == before
    finally:
        other.kill()
        other.wait()
    # the same pid, now dead: a lock left by a killed run is taken over
    (tmp_path / LOCK).write_text(f"{other.pid}\n")
    (tmp_path / ".loo-adapt-staging-deadbeef").mkdir()  # left by the killed run too
    save_report(fixture_loo, tmp_path, name="new", figures=False, n_boot=50)
    assert read_manifest(tmp_path)["name"] == "new"
    assert {p.name for p in tmp_path.iterdir()} == {"summary.txt", "results.json",
                                                    "metrics.json", MANIFEST}


def test_two_processes_into_one_folder_never_mix(tmp_path):
    """Two real processes write reports of different results into one folder at once: the
    loser is refused (or runs after the winner), and the folder holds exactly one run."""
    script = (
        "import sys, numpy as np\n"
        "from loo_adapt.evaluation.report import save_report, ReportBusyError\n"
        "from loo_adapt.result import PointwiseLoo\n"
        "v = float(sys.argv[2])\n"
        "res = PointwiseLoo(*(np.full(2000, v),) * 5, 0.7, 100, 1.0)\n"
        "try:\n"
        "    save_report(res, sys.argv[1], name=sys.argv[2], figures=True)\n"
        "except ReportBusyError:\n"
        "    sys.exit(9)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(loo_adapt.__file__).parents[1]),
           "MPLBACKEND": "Agg"}
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path), v], env=env)
             for v in ("0.25", "0.5")]
    codes = sorted(p.wait(timeout=120) for p in procs)
    assert codes in ([0, 0], [0, 9])
    name = read_manifest(tmp_path)["name"]
    back = load_results(tmp_path)
    assert np.all(back.elpd_i == float(name))  # results.json from the run the manifest names
    assert (tmp_path / "summary.txt").read_text().startswith(f"{name}\n")
    assert not (tmp_path / LOCK).exists()


def test_truncated_results_json_is_a_clear_error(fixture_loo, tmp_path):
    save_report(fixture_loo, tmp_path, figures=False, n_boot=50)
    path = tmp_path / "results.json"
    path.write_text(path.read_text()[:500])
    with pytest.raises(ValueError, match="not readable JSON.*written completely"):
        load_results(tmp_path)


def test_fixture_report_agrees_with_the_truth_file(fixture_loo, tmp_path):
    """What load_results gives back is the same estimate: its reliable rows are within
    4 MCSE (+ the truth's own MC error) of the brute-force truth."""
    save_report(fixture_loo, tmp_path, figures=False, n_boot=50)
    back = load_results(tmp_path)
    truth = np.loadtxt(TRUTH, delimiter=",", skiprows=1)
    ok = back.reliable
    assert ok.sum() >= 20
    err = np.abs(back.elpd_i[ok] - truth[ok, 1])
    assert np.all(err <= 4 * np.hypot(back.mcse_elpd_i[ok], truth[ok, 2]) + 1e-3)


def test_results_written_by_the_previous_version_still_load(tmp_path):
    """results.json from before every field was stored (NaN and inf both written as null):
    null reads as NaN, the rest as written."""
    old = {"khat_threshold": 0.7, "n_samples": 100,
           "pointwise": {"elpd_loo": [-0.5, None], "p_loo": [0.1, 0.2], "lpd": [-0.4, -0.3],
                         "mcse_elpd_loo": [0.01, None], "khat": [0.2, None],
                         "khat_after": [0.2, None], "method": ["psis", "mixis"],
                         "rho": [None, None], "loo_prob": [0.6, 0.3],
                         "diagnostic": [None, 40.0], "reliable": [True, False],
                         "r_eff": [1.0, 1.0], "y": [1.0, 0.0]},
           "candidates": [{"i": 1, "transform": "ll", "rho": None, "khat": 0.9}]}
    (tmp_path / "results.json").write_text(json.dumps(old))
    back = load_results(tmp_path)
    assert back.elpd_i[0] == -0.5 and np.isnan(back.elpd_i[1])
    assert back.method.tolist() == ["psis", "mixis"] and back.reliable.tolist() == [True, False]
    assert back.y.tolist() == [1.0, 0.0] and np.isnan(back.candidates[0]["rho"])


def test_an_empty_report_folder_is_refused(tmp_path, monkeypatch):
    """save_report(res, "") wrote into the current folder (Path("") is "."): refused, and
    nothing is written there."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="out_dir is empty"):
        save_report(_extreme_result(), "", figures=False)
    assert list(tmp_path.iterdir()) == []
