"""Report: printed numbers against arviz / direct counts, results.json round trip, files."""

import json
import re
import warnings
from pathlib import Path

import arviz as az
import matplotlib.image as mpimg
import numpy as np
import pytest
from scipy.special import logsumexp

import loo_adapt
from loo_adapt.evaluation import metrics
from loo_adapt.evaluation.report import (
    POINTWISE_FIELDS,
    format_pointwise,
    format_summary,
    load_results,
    save_report,
)
from loo_adapt.models.bundled import model_for
from loo_adapt.result import PointwiseLoo
from loo_adapt.stan import backends as stan

DATA = Path(__file__).resolve().parents[1] / "data" / "cmdstan"
SAMPLE = DATA / "logistic_normal" / "sample"
STAN_DATA = json.loads((DATA / "logistic_normal.data.json").read_text())


def _quiet_loo(*args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return loo_adapt.loo(*args, **kw)


@pytest.fixture(scope="module")
def one_chain():
    """The fixture draws as one chain: arviz and loo_adapt then both use r_eff = 1."""
    draws = loo_adapt.read_csv(SAMPLE)
    ll = draws.log_lik().reshape(1, draws.n_samples, -1)
    return ll


@pytest.fixture(scope="module")
def adapted():
    """PSIS + LL adaptation + MixIS fallback: every kind of pointwise value, NaNs included."""
    model = model_for("logistic_normal", STAN_DATA)
    mix = stan.fit("logistic_normal", STAN_DATA, backend="stanli", chains=2, draws=250,
                   warmup=250, seed=3, mixis=True)
    return _quiet_loo(str(SAMPLE), model=model, transforms=("kl", "ll"), fallback=("mixis",),
                      mixis_draws=mix, mixis_max_mcse=0.02, seed=1)


def _row(text, label):
    line = next(ln for ln in text.splitlines() if ln.startswith(label))
    return [float(v) for v in re.findall(r"-?\d+\.\d+|-?\d+", line[len(label):])]


def test_summary_numbers_match_arviz(one_chain):
    res = _quiet_loo(one_chain)
    ref = az.loo(az.from_dict(log_likelihood={"log_lik": one_chain}), pointwise=True,
                 reff=1.0)
    pw = res.loo_adapt
    n = pw.n_obs
    # the same PSIS as arviz with r_eff = 1
    np.testing.assert_allclose(pw.elpd_i, ref.loo_i.values, rtol=0, atol=1e-10)
    np.testing.assert_allclose(pw.pareto_k, ref.pareto_k.values, rtol=0, atol=1e-10)
    text = format_summary(pw)
    est = pw.estimates()
    # R loo's SE uses the n - 1 variance: sqrt(n / (n - 1)) times arviz's
    se = ref.se * np.sqrt(n / (n - 1))
    assert _row(text, "elpd_loo") == [round(ref.elpd_loo, 1), round(se, 1)]
    assert _row(text, "looic") == [round(-2 * ref.elpd_loo, 1), round(2 * se, 1)]
    assert _row(text, "p_loo") == [round(ref.p_loo, 1), round(est["se_p_loo"], 1)]
    assert f"Computed from {one_chain.shape[1]} by {n} log-likelihood matrix." in text
    assert f"MCSE of elpd_loo is {est['mcse_elpd_loo']:.2f}" in text
    assert "(r_eff in [1.0, 1.0])" in text
    # deviance scale: looic with SE, no elpd_loo row
    dev = format_summary(pw, scale="deviance")
    assert _row(dev, "looic") == [round(-2 * ref.elpd_loo, 1), round(2 * se, 1)]
    assert "elpd_loo " not in dev.split("------")[0]
    assert res.summary() == text


def _table(text, title):
    """{label kind: [numbers]} of the k table under ``title``."""
    lines = text.split(title, 1)[1].splitlines()[2:]
    out = {}
    for ln in lines:
        m = re.match(r"^\s*(\(.*?\]|\(1, Inf\)|no k-hat)\s+(\(.*?\))\s+(.*)$", ln)
        if not m:
            break
        out[f"{m[1]} {m[2]}"] = [float("nan") if v == "NA" else float(v)
                                 for v in re.findall(r"NA|-?\d+\.\d+|-?\d+", m[3])]
    return out


def test_khat_table_counts(adapted):
    pw = adapted.loo_adapt
    text = format_summary(pw)
    thr = pw.good_k
    k0 = pw.pareto_k
    after = np.array(pw.pareto_k_after, dtype=float)
    method = pw.method.astype(str)
    no_khat = np.isin(method, ("mixis", "refit"))
    assert no_khat.any() and (pw.method != "psis").sum() > no_khat.sum()  # both kinds present
    n = pw.n_obs
    # the k-hat of the estimator that produced each row; MixIS rows in their own bin
    final = _table(text, "Pareto k diagnostic values:")
    a = np.where(no_khat, np.nan, after)
    masks = {f"(-Inf, {thr:.2f}] (good)": a <= thr, f"({thr:.2f}, 1] (bad)": (a > thr) & (a <= 1),
             "(1, Inf) (very bad)": a > 1, "no k-hat (MixIS)": method == "mixis"}
    assert list(final) == list(masks)
    assert sum(row[0] for row in final.values()) == n  # every row counted once
    # R loo's psis_n_eff: r_eff / sum(w^2) of arviz's PSIS weights (arviz 0.23 equals R loo)
    psis_rows = np.flatnonzero(method == "psis")
    ll = loo_adapt.read_csv(SAMPLE).log_lik().reshape(-1, n)
    for i in psis_rows[:5] if hasattr(az, "psislw") else []:
        lw, _ = az.psislw(-ll[:, i], reff=float(pw.r_eff[i]))
        ess = pw.r_eff[i] / np.sum(np.exp(lw - logsumexp(lw)) ** 2)
        assert pw.diagnostic[i] == pytest.approx(ess, rel=1e-8)
    pooled = method == "mixis+psis"  # PSIS's k-hat, MixIS's ESS: no ESS in the k-hat bins
    for row, mask in zip(final.values(), masks.values()):
        assert row[0] == mask.sum() and row[1] == round(100 * mask.sum() / n, 1)
        # R: NA above the threshold
        ess = pw.diagnostic[mask & ~((a > thr) & ~no_khat) & (no_khat | ~pooled)]
        ess = ess[np.isfinite(ess)]
        assert np.isnan(row[2]) if not ess.size else row[2] == round(ess.min())
    # plain PSIS before the other estimators
    before = _table(text, "Plain PSIS on the posterior draws, before the other estimators:")
    for row, mask in zip(before.values(), (k0 <= thr, (k0 > thr) & (k0 <= 1), k0 > 1)):
        assert row[0] == mask.sum() and row[1] == round(100 * mask.sum() / n, 1)
    # per-estimator counts and the list of observations still unreliable
    names, counts = np.unique(pw.method.astype(str), return_counts=True)
    line = next(ln for ln in text.splitlines() if ln.startswith("Estimator per observation"))
    for m, c in zip(names, counts):
        assert re.search(rf"\b{re.escape(m)} {c}\b", line)
    bad_idx = np.flatnonzero(pw.unreliable)
    assert bad_idx.size  # the MixIS bound of 0.02 leaves some rows unreliable
    listed = re.findall(r"^\s+(\d+)\s+log_lik\[(\d+)\]\s+(\S+): (.*)$",
                        text.split("Still unreliable:")[1], flags=re.M)
    assert [int(i) for i, *_ in listed] == bad_idx[:20].tolist()
    for i, stan_i, m, why in listed:
        i = int(i)
        assert int(stan_i) == i + 1 and m == pw.method[i]  # Stan's log_lik is 1-based
        # the failed check reads as failing: value and bound printed until they differ
        if m in ("mixis", "mixis+psis", "refit"):  # the MCSE or the ESS failed, no k-hat
            assert "k-hat" not in why
            got = re.search(r"MCSE (\d\.\d+) > (\d\.\d+)", why)
            few = re.search(r"draws too few: \((\d+) draws, ESS (\d+), Kish ESS (\d+), "
                            r"where (\d+), (\d+) and (\d+) are needed\)", why)
            if got is None:  # too few effective draws: one of the three below its bound
                assert few and min(int(few[k]) - int(few[k + 3]) for k in (1, 2, 3)) < 0
                assert int(few[3]) == round(pw.diagnostic[i])  # Kish's ESS, the table's
                continue
            assert float(got[1]) > float(got[2])
            assert float(got[1]) == pytest.approx(pw.mcse_elpd_i[i], abs=0.006)
        else:  # the first failed check, then what later stages tried (";"-joined)
            got = re.fullmatch(r"k-hat (\S+) > (\S+)", why.split("; ")[0])
            assert float(got[1]) > float(got[2]) and float(got[2]) == pytest.approx(thr, abs=0.006)
            assert float(got[1]) == pytest.approx(pw.pareto_k_after[i], abs=0.006)
    assert "Every observation has a reliable estimate." not in text


def test_pointwise_table(adapted):
    pw = adapted.loo_adapt
    lines = format_pointwise(pw).splitlines()
    assert len(lines) == pw.n_obs + 1
    # a MixIS row and a row of another estimator (MixIS pooled with PSIS, or adapted IS)
    for i in (int(np.flatnonzero(pw.method == "mixis")[0]),
              int(np.flatnonzero(pw.method != "mixis")[0])):
        fields = lines[i + 1].split()
        assert int(fields[0]) == i and fields[1] == pw.method[i]
        assert float(fields[-4]) == round(pw.elpd_i[i], 4)
        assert float(fields[-3]) == round(pw.mcse_elpd_i[i], 4)
        assert float(fields[-2]) == round(pw.loo_prob[i], 4)
        assert fields[-1] == ("yes" if pw.reliable[i] else "NO")
        if pw.method[i] == "mixis":  # no k-hat after, ESS shown instead
            assert fields[-6] == "NA" and float(fields[-5]) == round(pw.diagnostic[i], 1)


def test_save_report_round_trip(adapted, tmp_path):
    pw = adapted.loo_adapt
    files = save_report(adapted, tmp_path, n_boot=300, seed=5)
    names = {p.name for p in files}
    assert {"summary.txt", "results.json", "metrics.json", "khat.png", "khat_hist.png",
            "khat_candidates.png", "roc.png", "pr.png", "calibration.png"} == names
    assert all(p.parent == tmp_path and p.is_file() for p in files)

    raw = (tmp_path / "results.json").read_text()

    def no_constants(name):
        raise AssertionError(f"results.json holds the non-JSON constant {name}")

    data = json.loads(raw, parse_constant=no_constants)  # strict JSON: no NaN / Infinity
    assert data["good_k"] == pw.good_k
    assert data["n_samples"] == pw.n_samples
    assert data["estimates"] == pytest.approx(pw.estimates(), rel=0, abs=0)
    assert data["versions"]["arviz"] == az.__version__
    assert data["versions"]["numpy"] == np.__version__
    for name in POINTWISE_FIELDS:
        stored = data["pointwise"][name]
        orig = np.asarray(getattr(pw, name))
        if orig.dtype.kind == "f":  # non-finite values as the strings the file documents
            assert stored == ["NaN" if np.isnan(v) else float(v) for v in orig], name
        else:
            assert stored == orig.tolist(), name
    assert "NaN" in data["pointwise"]["pareto_k_after"]  # MixIS has no k-hat
    assert len(data["candidates"]) == len(pw.candidates)
    back = load_results(tmp_path)  # every field exactly: tests/faults/test_report_faults.py
    for name in POINTWISE_FIELDS:
        a, b = np.asarray(getattr(back, name)), np.asarray(getattr(pw, name))
        if a.dtype.kind == "f":
            assert np.array_equal(a, b, equal_nan=True), name
        else:
            assert a.tolist() == b.tolist(), name
    assert np.array_equal(back.y, pw.y) and len(back.candidates) == len(pw.candidates)

    for p in files:
        if p.suffix == ".png":
            assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            img = mpimg.imread(p)
            assert img.shape[0] > 200 and img[..., :3].std() > 0.05

    stored = json.loads((tmp_path / "metrics.json").read_text())
    ref = metrics.classification_report(pw.y, pw.loo_prob, n_boot=300, seed=5)
    assert list(stored) == ["loo"]
    got = stored["loo"]
    assert set(got) == set(ref)
    for key, value in ref.items():
        assert got[key] == (list(value) if isinstance(value, tuple) else value), key

    summary = (tmp_path / "summary.txt").read_text()
    assert format_summary(pw) in summary and format_pointwise(pw) in summary


def test_save_report_several_fits_and_plain_psis(tmp_path):
    rng = np.random.default_rng(0)
    ll = -rng.exponential(0.5, size=(1, 400, 30))
    res = _quiet_loo(ll)
    # no y, no probabilities: no metrics, no ROC; no adaptation: no candidate plot
    files = {p.name for p in save_report(res, tmp_path / "a")}
    assert files == {"summary.txt", "results.json", "khat.png", "khat_hist.png"}
    y = (rng.uniform(size=30) < 0.5).astype(float)
    p1, p2 = rng.uniform(size=30), rng.uniform(size=30)
    files = save_report(res.loo_adapt, tmp_path / "b", y=y, probs={"MCMC": p1, "ADVI": p2},
                        figures=False, n_boot=200)
    stored = json.loads((tmp_path / "b" / "metrics.json").read_text())
    assert list(stored) == ["MCMC", "ADVI"]
    assert stored["ADVI"]["auroc"] == metrics.auroc(y, p2)
    assert not any(p.suffix == ".png" for p in files)


def test_bad_inputs(tmp_path):
    plain = az.loo(az.from_dict(log_likelihood={"ll": -np.ones((1, 100, 5))
                                                + np.random.default_rng(1).normal(
                                                    0, 0.1, (1, 100, 5))}), reff=1.0)
    with pytest.raises(TypeError, match="PointwiseLoo"):
        save_report(plain, tmp_path)
    with pytest.raises(ValueError, match="scale"):
        format_summary(PointwiseLoo(*(np.zeros(3),) * 5, 0.7, 100, 1.0), scale="bits")
    (tmp_path / "file").write_text("x")
    res = PointwiseLoo(*(np.zeros(3),) * 5, 0.7, 100, 1.0)
    with pytest.raises(NotADirectoryError):
        save_report(res, tmp_path / "file")
    with pytest.raises(ValueError, match="shape"):
        save_report(res, tmp_path / "c", y=[0, 1], probs=[0.1, 0.2, 0.3])


@pytest.mark.arviz1
def test_report_with_installed_arviz(tmp_path):
    """save_report reads the scale and the PointwiseLoo from either arviz's ELPDData."""
    rng = np.random.default_rng(2)
    ll = -rng.exponential(0.4, size=(2, 300, 25))
    y = (rng.uniform(size=25) < 0.5).astype(int)
    from loo_adapt.evaluation.arviz import arviz_major

    # arviz 1.x has the log scale only (its compare ranks by elpd); deviance is refused there
    scale = "deviance" if arviz_major() == 0 else "log"
    res = _quiet_loo(ll, y=y, scale=scale)
    files = save_report(res, tmp_path, n_boot=100)
    text = (tmp_path / "summary.txt").read_text()
    assert format_summary(res.loo_adapt, scale=scale) in text
    assert json.loads((tmp_path / "results.json").read_text())["scale"] == scale
    assert {p.name for p in files} >= {"metrics.json", "roc.png"}
    assert res.summary() == format_summary(res.loo_adapt, scale=scale)
