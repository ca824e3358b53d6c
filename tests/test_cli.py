"""The loo-adapt command line: evaluate, fit (round trip through Stan CSV), demo, exit codes."""

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import loo_adapt
from loo_adapt.cli import main
from loo_adapt.datasets import load_ovarian
from loo_adapt.models.bundled import model_for
from loo_adapt.stan import backends as stan

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data" / "cmdstan"
SAMPLE = DATA / "logistic_normal" / "sample"
DATA_JSON = DATA / "logistic_normal.data.json"


def _results(out):
    return json.loads((Path(out) / "results.json").read_text())


def test_evaluate_fixture_matches_library(tmp_path, capsys):
    out = tmp_path / "rep"
    rc = main(["evaluate", str(SAMPLE), "--data", str(DATA_JSON), "--model", "logistic",
               "--out", str(out), "--seed", "4"])
    printed = capsys.readouterr().out
    data = json.loads(DATA_JSON.read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ref = loo_adapt.loo(str(SAMPLE), model=model_for("logistic_normal", data), seed=4)
    stored = _results(out)
    pw = ref.loo_adapt
    assert np.array_equal(np.array(stored["pointwise"]["elpd_i"], float), pw.elpd_i)
    assert stored["pointwise"]["method"] == [str(m) for m in pw.method]
    # exit code 3 exactly when some observation is still unreliable
    assert stored["n_unreliable"] == int(pw.unreliable.sum())
    assert rc == (3 if pw.unreliable.any() else 0)
    # the library's summary, its advice replaced by the command line's next step
    body, advice = ref.summary().rsplit("\nNext step: ", 1)
    assert body in printed and "Report written to" in printed
    assert "loo(fit, program=" in advice and "loo(fit, program=" not in printed
    if rc == 3:
        assert "Next:" in printed and "--program FILE.stan --data DATA.json" in printed
    assert "fallback=(" not in printed
    for name in ("summary.txt", "metrics.json", "khat.png", "roc.png"):
        assert (out / name).is_file()

    # explicit default names give the same numbers; --quiet prints nothing
    out2 = tmp_path / "rep2"
    rc2 = main(["evaluate", str(SAMPLE), "--data", str(DATA_JSON), "--model",
                "logistic_normal", "--names", "coef=beta,intercept=alpha", "--out", str(out2),
                "--seed", "4", "--quiet"])
    assert rc2 == rc and capsys.readouterr().out == ""
    assert _results(out2)["pointwise"]["elpd_i"] == stored["pointwise"]["elpd_i"]


def test_evaluate_plain_psis_and_paper_rule(tmp_path, capsys):
    rc = main(["evaluate", str(SAMPLE), "--data", str(DATA_JSON), "--model", "logistic",
               "--no-adapt", "--out", str(tmp_path / "a"), "-q"])
    plain = _results(tmp_path / "a")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ref = loo_adapt.loo(str(SAMPLE)).loo_adapt
    assert np.array_equal(np.array(plain["pointwise"]["pareto_k"], float), ref.pareto_k)
    assert set(plain["pointwise"]["method"]) == {"psis"} and plain["candidates"] == []
    assert rc == 3  # 29 of 54 observations above the threshold (fixture README)
    # the draws alone (no --model, no --data): the same PSIS-LOO, and the next step named in
    # the tool's options
    rc = main(["evaluate", str(SAMPLE), "--out", str(tmp_path / "c")])
    printed = capsys.readouterr().out
    alone = _results(tmp_path / "c")
    assert rc == 3 and alone["pointwise"]["elpd_i"] == plain["pointwise"]["elpd_i"]
    # every row counts: PSIS rows below the k-hat threshold are not checked for bias either
    assert "Next: 54 observations without an estimate verified for bias" in printed
    assert "verify them with --program FILE.stan --data DATA.json" in printed
    assert "fallback=(" not in printed and "program=" not in printed
    main(["evaluate", str(SAMPLE), "--data", str(DATA_JSON), "--model", "logistic",
          "--transforms", "kl", "ll", "--selection", "min_khat", "--out", str(tmp_path / "b"),
          "-q"])
    paper = _results(tmp_path / "b")
    assert {c["transform"] for c in paper["candidates"]} == {"psis", "kl", "ll"}


def test_fit_then_evaluate_round_trip(tmp_path, capsys):
    X, y = load_ovarian(standardize=False)
    csv = tmp_path / "tiny.csv"
    np.savetxt(csv, np.column_stack([y, X[:, :3]]), delimiter=",", header="y,a,b,c",
               comments="")
    out = tmp_path / "fit"
    rc = main(["fit", "--model", "logistic", "--data", str(csv), "--standardize",
               "--chains", "2", "--draws", "100", "--warmup", "100", "--seed", "7",
               "--backend", "stanli", "--mixis", "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "loo-adapt evaluate" in printed
    data = json.loads((out / "data.json").read_text())
    Xs = (X[:, :3] - X[:, :3].mean(0)) / X[:, :3].std(0, ddof=1)
    np.testing.assert_allclose(data["X"], Xs, rtol=0, atol=1e-12)
    assert data["y"] == y.tolist() and data["mixis"] == 0
    draws = loo_adapt.read_csv(sorted(out.glob("logistic_normal_*.csv")))
    assert draws.method == "mcmc" and draws.shape == (2, 100)
    assert draws["beta"].shape == (2, 100, 3) and draws.log_lik().shape == (2, 100, 54)
    # the divergent transitions it reports are those its CSV files record
    div = int(np.count_nonzero(np.asarray(draws.sample_stats["divergent__"]) > 0))
    assert f"; {div} divergent transitions." in printed
    # the same seed through the library gives the same draws, bit for bit after the CSV
    direct = stan.fit("logistic_normal", data, backend="stanli", chains=2, draws=100,
                      warmup=100, seed=7)
    for name in ("alpha", "beta", "log_lik"):
        assert np.array_equal(draws[name], direct[name]), name
    mix = loo_adapt.read_csv(sorted((out / "mixis").glob("*.csv")))
    assert mix.shape == (2, 100)

    rc = main(["evaluate", *map(str, sorted(out.glob("logistic_normal_*.csv"))), "--data",
               str(out / "data.json"), "--model", "logistic", "--mixis-csv",
               *map(str, sorted((out / "mixis").glob("*.csv"))), "--out", str(out / "rep"),
               "-q"])
    stored = _results(out / "rep")
    assert rc == (3 if stored["n_unreliable"] else 0)
    assert stored["n_obs"] == 54 and stored["n_samples"] == 200


def test_fit_reads_the_shipped_gzipped_csv(tmp_path):
    src = ROOT / "loo_adapt" / "data" / "ovarian.csv.gz"
    out = tmp_path / "rhs"
    rc = main(["fit", "--model", "logistic-rhs", "--data", str(src), "--columns", "5",
               "--columns-seed", "3", "--standardize", "--prior", "p0=2", "--chains", "1",
               "--draws", "50", "--warmup", "50", "--backend", "stanli", "--out", str(out),
               "-q"])
    assert rc == 0
    X, y = load_ovarian(standardize=False)
    cols = np.sort(np.random.default_rng(3).choice(X.shape[1], 5, replace=False))
    data = json.loads((out / "data.json").read_text())
    Xs = (X[:, cols] - X[:, cols].mean(0)) / X[:, cols].std(0, ddof=1)
    np.testing.assert_allclose(data["X"], Xs, rtol=0, atol=1e-12)
    assert data["scale_global"] == pytest.approx(2 / (3 * np.sqrt(54)), rel=1e-14)
    draws = loo_adapt.read_csv(out / "logistic_rhs_1.csv")
    assert draws["beta"].shape == (1, 50, 5) and draws["beta0"].shape == (1, 50, 1)


def test_demo_quick(tmp_path, capsys):
    rc = main(["demo", "--quick", "--out", str(tmp_path / "demo")])
    printed = capsys.readouterr().out
    assert rc == 0
    stored = _results(tmp_path / "demo")
    assert stored["n_obs"] == 54 and stored["n_samples"] == 600
    # the program goes with the fit: rows MixIS leaves above its bar get a focused fit and
    # refits, so the demo ends with every row verified by a check that can see bias
    assert stored["n_unreliable"] == 0 and stored["n_khat_only"] == 0
    assert "without looking at y" in printed and "Pareto k diagnostic values" in printed
    assert "elpd_loo" in printed and f"{tmp_path / 'demo'}" in printed
    assert (tmp_path / "demo" / "roc.png").is_file()


def test_errors_in_process(tmp_path, capsys):
    rc = main(["evaluate", str(tmp_path / "missing.csv"), "--data", str(DATA_JSON),
               "--model", "logistic", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 1 and "missing.csv" in err and "Traceback" not in err
    rc = main(["evaluate", str(SAMPLE), "--data", str(tmp_path / "nodata.json"), "--model",
               "logistic", "--out", str(tmp_path / "o")])
    assert rc == 1 and "nodata.json" in capsys.readouterr().err
    rc = main(["evaluate", str(SAMPLE), "--data", str(DATA_JSON), "--model", "logistic",
               "--names", "coef=gamma", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 1 and "gamma" in err
    rc = main(["evaluate", str(SAMPLE), "--data", str(DATA_JSON), "--model", "logistic",
               "--names", "slope=beta", "--out", str(tmp_path / "o")])
    assert rc == 1 and "unknown role 'slope'" in capsys.readouterr().err
    rc = main(["evaluate", str(SAMPLE), "--data", str(DATA_JSON), "--model", "probit",
               "--out", str(tmp_path / "o")])
    assert rc == 2 and "invalid choice: 'probit'" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("y,a\n0,1.0\n2,0.5\n1,0.3\n")
    rc = main(["fit", "--model", "logistic", "--data", str(bad), "--out", str(tmp_path / "f"),
               "--backend", "stanli"])
    assert rc == 1 and "0/1" in capsys.readouterr().err
    assert main(["--version"]) == 0 and loo_adapt.__version__ in capsys.readouterr().out
    assert main([]) == 2


def test_subprocess_exit_codes(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "loo_adapt.cli", "evaluate", str(tmp_path / "nope.csv"),
         "--data", str(DATA_JSON), "--model", "logistic", "--out", str(tmp_path / "o")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 1
    assert "nope.csv" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "loo_adapt.cli", "fit", "--model", "relu"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and "required" in proc.stderr


# --------------------------------------------------------------------------- any Stan program
POISSON = Path(__file__).parent / "data" / "poisson"
POISSON_DATA = POISSON / "poisson.data.json"


@pytest.fixture(scope="module")
def poisson_csv(tmp_path_factory):
    """Stan CSV of a Poisson regression (no bundled family), sampled once by stanli."""
    pytest.importorskip("stanli", reason="the Poisson draws are sampled with stanli")
    from loo_adapt.io.csv import write_stan_csv

    data = json.loads(POISSON_DATA.read_text())
    draws = stan.fit(str(POISSON / "poisson.stan"), data, backend="stanli", chains=2,
                     draws=500, warmup=500, seed=5)
    out = tmp_path_factory.mktemp("poisson") / "sample"
    write_stan_csv(draws, out, "poisson", model="poisson", config={"warmup": 500, "seed": 5})
    return out


def _arviz_loo_of_csv(folder, reff):
    """arviz's PSIS-LOO of the CSVs' log_lik columns, read with numpy (not our reader)."""
    import arviz as az

    chains, params = [], []
    for path in sorted(Path(folder).glob("*.csv")):
        lines = [ln for ln in path.read_text().splitlines() if ln and ln[0] != "#"]
        names = lines[0].split(",")
        table = np.array([[float(v) for v in ln.split(",")] for ln in lines[1:]])
        cols = sorted((int(c.split(".")[1]), k) for k, c in enumerate(names)
                      if c.startswith("log_lik."))
        chains.append(table[:, [k for _, k in cols]])
        params.append({c: table[:, k] for k, c in enumerate(names)
                       if not c.endswith("__") and not c.startswith("log_lik.")})
    log_lik = np.stack(chains)  # (chains, draws, n)
    posterior = {c: np.stack([p[c] for p in params]) for c in params[0]}
    try:
        idata = az.from_dict(posterior=posterior, log_likelihood={"log_lik": log_lik})
    except TypeError:  # arviz 1.x: groups as one dict
        idata = az.from_dict({"posterior": posterior, "log_likelihood": {"log_lik": log_lik}})
    return az.loo(idata, pointwise=True, reff=reff), log_lik.shape


def test_evaluate_draws_alone_match_arviz(poisson_csv, tmp_path, capsys):
    """No --model, no --data: PSIS-LOO with k-hat and the report, the numbers arviz's."""
    out = tmp_path / "plain"
    rc = main(["evaluate", str(poisson_csv), "--out", str(out), "--reff", "1"])
    printed = capsys.readouterr().out
    ref, (chains, draws, n) = _arviz_loo_of_csv(poisson_csv, reff=1.0)
    stored = _results(out)
    assert stored["n_obs"] == n == 30 and stored["n_samples"] == chains * draws
    assert stored["estimates"]["elpd_loo"] == pytest.approx(float(ref["elpd_loo"]), abs=1e-8)
    assert stored["estimates"]["p_loo"] == pytest.approx(float(ref["p_loo"]), abs=1e-8)
    np.testing.assert_allclose(stored["pointwise"]["pareto_k"], np.asarray(ref["pareto_k"]),
                               rtol=0, atol=1e-8)
    assert set(stored["pointwise"]["method"]) == {"psis"}
    # exit code from arviz's k-hat and R loo's threshold for S draws
    threshold = min(1 - 1 / np.log10(chains * draws), 0.7)
    assert rc == (3 if np.max(ref["pareto_k"]) > threshold else 0)
    # R loo's k table, or its one line when every k-hat is good
    good = f"All Pareto k estimates are good (k <= {threshold:.2f})."
    assert ("Pareto k diagnostic values" in printed if np.max(ref["pareto_k"]) > threshold
            else good in printed)
    assert "Report written to" in printed
    for name in ("summary.txt", "results.json", "khat.png"):
        assert (out / name).is_file()
    assert not (out / "roc.png").exists()  # counts, not a binary outcome

    # --data without --model/--program only lends y to the report (counts here: none)
    rc2 = main(["evaluate", str(poisson_csv), "--data", str(POISSON_DATA), "--out",
                str(tmp_path / "with_data"), "--reff", "1", "-q"])
    assert rc2 == rc
    assert _results(tmp_path / "with_data")["pointwise"]["elpd_i"] == \
        stored["pointwise"]["elpd_i"]


def test_evaluate_any_program_trust_path(poisson_csv, tmp_path, capsys, monkeypatch):
    """--program FILE.stan --data DATA.json: MixIS on every observation (refits budgeted),
    within Monte Carlo error of PSIS where PSIS is easy (every k-hat below 0.7 here)."""
    from loo_adapt.cli import evaluate

    shown = []

    class Recording(evaluate._Stages):
        def close(self):
            shown.append(list(self.labels))
            super().close()

    monkeypatch.setattr(evaluate, "_Stages", Recording)
    out = tmp_path / "trust"
    rc = main(["evaluate", str(poisson_csv), "--program", str(POISSON / "poisson.stan"),
               "--data", str(POISSON_DATA), "--out", str(out), "--max-refits", "1",
               "--backend", "stanli", "--seed", "3", "-q"])
    stored = _results(out)
    assert shown == [["reading draws", "LOO (mixture fit, MixIS, refits)", "writing report"]]
    methods = set(stored["pointwise"]["method"])
    assert methods <= {"mixis", "mixis+psis", "refit"} and methods & {"mixis", "mixis+psis"}
    assert stored["pointwise"]["method"].count("refit") <= 1
    assert rc == (3 if stored["n_unreliable"] else 0)
    ref, _ = _arviz_loo_of_csv(poisson_csv, reff=None)
    assert np.max(ref["pareto_k"]) < 0.7
    plain = tmp_path / "plain"
    main(["evaluate", str(poisson_csv), "--out", str(plain), "-q"])
    mcse_psis = _results(plain)["estimates"]["mcse_elpd_loo"]
    mcse = stored["estimates"]["mcse_elpd_loo"]
    diff = stored["estimates"]["elpd_loo"] - float(ref["elpd_loo"])
    assert abs(diff) <= 4 * np.hypot(mcse, mcse_psis), (diff, mcse, mcse_psis)


def test_quiet_runs_hide_matplotlib_font_fallbacks(caplog):
    """The sweep's case: `evaluate -q` printed 21 'findfont: ... not found' lines (a machine
    without the fonts mathtext names). Without --verbose they are not logged; the level is
    restored afterwards."""
    import logging

    from loo_adapt.cli import _quiet_backends

    fonts = logging.getLogger("matplotlib.font_manager")
    before = fonts.level
    with caplog.at_level(logging.DEBUG):
        with _quiet_backends(verbose=False):
            fonts.warning("findfont: Font family ['cmmi10'] not found.")
        with _quiet_backends(verbose=True):
            fonts.warning("findfont: shown with --verbose")
    messages = [r.getMessage() for r in caplog.records if r.name == fonts.name]
    assert messages == ["findfont: shown with --verbose"]
    assert fonts.level == before


def test_evaluate_adapt_delta_reaches_the_programs_fits(poisson_csv, tmp_path, monkeypatch):
    """--adapt-delta sets the fit options of --program's StanProgram (the mixture fits and
    refits this tool makes); without it, the adapt delta the posterior CSVs' header records
    (CmdStan's ``delta``, here 0.93, kept through a write and a read), and Stan's default
    where the header has none; the divergence note names the option in the tool's
    words."""
    from loo_adapt.cli.output import cli_message
    from loo_adapt.estimators.mixture_checks import divergence_note
    from loo_adapt.io.arrays import read_dict
    from loo_adapt.stan import program as program_module

    seen = []

    class Stop(Exception):
        pass

    class Recording(program_module.StanProgram):
        def __init__(self, *a, **kw):
            seen.append(kw.get("fit_kwargs"))
            raise Stop

    from loo_adapt.io.csv import read_csv, write_stan_csv

    at_93 = tmp_path / "at_93"
    write_stan_csv(read_csv(poisson_csv), at_93, "poisson", config={"adapt_delta": 0.93})
    assert read_csv(at_93).config["delta"] == "0.93"
    no_delta = tmp_path / "no_delta"
    no_delta.mkdir()
    for f in sorted(Path(at_93).glob("*.csv")):
        (no_delta / f.name).write_text("".join(
            line for line in f.read_text().splitlines(keepends=True)
            if not line.lstrip("# ").startswith("delta =")))
    monkeypatch.setattr(program_module, "StanProgram", Recording)
    for csv, extra, want in ((at_93, ["--adapt-delta", "0.97"], {"adapt_delta": 0.97}),
                             (at_93, [], {"adapt_delta": 0.93}), (no_delta, [], None)):
        # the tool reports the stop as an error; the program was built first
        assert main(["evaluate", str(csv), "--program", str(POISSON / "poisson.stan"),
                     "--data", str(POISSON_DATA), "--out", str(tmp_path / "o"), "-q",
                     *extra]) != 0
        assert seen[-1] == want
    assert len(seen) == 3
    assert main(["evaluate", str(poisson_csv), "--program", str(POISSON / "poisson.stan"),
                 "--data", str(POISSON_DATA), "--out", str(tmp_path / "o"),
                 "--adapt-delta", "1.5"]) != 0
    draws = read_dict({"x": np.zeros((2, 5))}, method="mcmc",
                      sample_stats={"divergent__": np.eye(2, 5)})
    note = cli_message(divergence_note(draws, "The mixture fit"))
    assert note.endswith("a higher adapt_delta rules that out (--adapt-delta)")


def test_demo_adapt_delta_reaches_its_fits(tmp_path, monkeypatch):
    """`demo --adapt-delta` is the target acceptance of the demo's fits (0.95 without it),
    the option the divergence notes name."""
    from loo_adapt.stan import backends

    seen = []

    def recording_fit(*a, **kw):
        seen.append(kw.get("adapt_delta"))
        raise RuntimeError("stop")

    monkeypatch.setattr(backends, "fit", recording_fit)
    for extra, want in ((["--adapt-delta", "0.99"], 0.99), ([], 0.95)):
        assert main(["demo", "--quick", "--out", str(tmp_path / "d"), "-q", *extra]) != 0
        assert seen[-1] == want
