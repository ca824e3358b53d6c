"""Issue 22.3: a hand-edited results.json is a clear error naming the file (or, with
verify=False, loaded with a loud warning), never a numpy traceback or a silent load.

Independent expectations: the sha256 the manifest recorded (hashlib on the bytes on disk),
and what the edit changed.
"""

import hashlib
import json

import numpy as np
import pytest

import loo_adapt
from loo_adapt.evaluation.report import load_results, read_manifest, save_report


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    ll = -np.abs(np.random.default_rng(4).normal(1.0, 0.4, size=(4, 250, 12)))
    ll[:, :, 5] -= np.random.default_rng(5).exponential(3.0, size=(4, 250))  # a bad row
    res = loo_adapt.loo(ll)
    folder = tmp_path_factory.mktemp("rep")
    save_report(res, folder, figures=False)
    return folder, (folder / "results.json").read_text()


def _edit(folder, original, change):
    data = json.loads(original)
    change(data)
    (folder / "results.json").write_text(json.dumps(data))


def _flip_reliable(data):
    data["pointwise"]["reliable"][0] = not data["pointwise"]["reliable"][0]


def _flip_reliable_and_summary(data):
    _flip_reliable(data)
    data["unreliable"] = [i for i, ok in enumerate(data["pointwise"]["reliable"]) if not ok]
    data["n_unreliable"] = len(data["unreliable"])


@pytest.mark.parametrize(("change", "match"), [
    (lambda d: d["pointwise"]["elpd_i"].pop(), r"'elpd_i' has 11 values"),
    (lambda d: d["pointwise"]["mcse_elpd_i"].pop(), r"column 'mcse_elpd_i' has 11 values"),
    (lambda d: d["pointwise"]["pareto_k"].__setitem__(2, "abc"),
     r"column 'pareto_k' \(dtype <f8\) holds 'abc' at row 2"),
    (lambda d: d["dtypes"].__setitem__("elpd_i", "<M8[ns]"), "dtype '<M8\\[ns\\]'"),
    (lambda d: d["dtypes"].__setitem__("elpd_i", "|S100000000"), "dtype"),
    (lambda d: d["dtypes"].__setitem__("elpd_i", "not-a-dtype"), "not a numpy dtype"),
    (lambda d: d["pointwise"]["reliable"].__setitem__(1, "yes"), "column 'reliable'"),
    (_flip_reliable, "modified after loo_adapt wrote it.*sha256"),
    (_flip_reliable_and_summary, "modified after loo_adapt wrote it.*sha256"),
])
def test_edited_results_file_is_a_clear_error(report, change, match):
    folder, original = report
    _edit(folder, original, change)
    try:
        with pytest.raises(ValueError, match=match) as info:
            load_results(folder)
        assert str(folder / "results.json") in str(info.value)
    finally:
        (folder / "results.json").write_text(original)


def test_manifest_hash_is_the_file_on_disk(report):
    folder, original = report
    entry = {f["name"]: f for f in read_manifest(folder)["files"]}["results.json"]
    assert entry["sha256"] == hashlib.sha256((folder / "results.json").read_bytes()).hexdigest()
    assert load_results(folder).n_obs == 12  # the untouched file loads


def test_summary_contradicting_the_rows_is_caught_without_a_manifest(report, tmp_path):
    """A results.json copied alone (no manifest) with a flipped 'reliable': its own summary
    contradicts it."""
    folder, original = report
    data = json.loads(original)
    _flip_reliable(data)
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="summary lists"):
        load_results(tmp_path)


@pytest.mark.parametrize(("field", "value", "match"), [
    ("good_k", "abc", "good_k is 'abc'"), ("n_samples", -5, "n_samples is -5"),
    ("candidates", {"a": 1}, "candidates")])
def test_bad_scalar_field_without_a_manifest(report, tmp_path, field, value, match):
    """Copied alone (no manifest to check against): a scalar field of the wrong type or
    range is still an error naming it (it failed later, in the summary)."""
    folder, original = report
    data = json.loads(original)
    data["fields"][field] = value
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=match):
        load_results(tmp_path)


def test_verify_false_loads_a_modified_file_with_a_loud_warning(report):
    folder, original = report
    _edit(folder, original, _flip_reliable_and_summary)
    try:
        with pytest.warns(UserWarning, match="LOADING A MODIFIED RESULTS FILE"):
            back = load_results(folder, verify=False)
        assert back.reliable[0] != json.loads(original)["pointwise"]["reliable"][0]
    finally:
        (folder / "results.json").write_text(original)


@pytest.mark.arviz1  # runs under arviz 1.x too (CI: -m arviz1)
@pytest.mark.parametrize("with_manifest", [False, True])
def test_other_version_or_encoding_is_warned_naming_both(report, tmp_path, with_manifest):
    """results.json saying another loo_adapt version or another encoding wrote it: a
    UserWarning naming both values (the file is still read; neither can be told unreadable
    from the string).  With a manifest the edit itself is refused, as before."""
    import warnings

    from loo_adapt.evaluation.report import ENCODING

    folder, original = report
    data = json.loads(original)
    assert data["versions"]["loo_adapt"] == loo_adapt.__version__
    with warnings.catch_warnings():  # the file as written: no warning
        warnings.simplefilter("error")
        load_results(folder)
    other = [("versions", lambda d: d["versions"].__setitem__("loo_adapt", "9.9.9"),
              rf"written by loo_adapt 9\.9\.9, but loo_adapt {loo_adapt.__version__} is "
              "installed"),
             ("encoding", lambda d: d.__setitem__("encoding", "loo_adapt-results/99"),
              r"states the encoding 'loo_adapt-results/99', but this loo_adapt .* writes "
              r"and reads \"floats: NaN")]
    for what, change, match in other:
        edited = json.loads(original)
        change(edited)
        if with_manifest:
            _edit(folder, original, change)
            try:
                with pytest.warns(UserWarning, match=match):  # warned before the refusal
                    with pytest.raises(ValueError, match="modified after loo_adapt wrote it"):
                        load_results(folder)
            finally:
                (folder / "results.json").write_text(original)
            continue
        (tmp_path / "results.json").write_text(json.dumps(edited))
        with pytest.warns(UserWarning, match=match) as record:
            back = load_results(tmp_path)
        assert len(record) == 1, what
        assert ENCODING in str(record[0].message) or what == "versions"
        np.testing.assert_array_equal(back.elpd_i, load_results(folder).elpd_i)
