"""Readers on real CmdStan 2.35 output (tests/data/cmdstan), checked against pandas reads of
the same files, against the model's own arithmetic, and across input types."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from loo_adapt.draws import Draws
from loo_adapt.io import read_csv, read_draws
from loo_adapt.io.columns import group_columns as _group_columns
from loo_adapt.io.columns import stan_name_to_index as _stan_name_to_index

DATA = Path(__file__).resolve().parents[1] / "data" / "cmdstan"
MODELS = ("logistic_normal", "rhs_logistic", "relu1")
METHODS = ("sample", "variational", "laplace", "pathfinder", "optimize")


def _natural(p):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(p))]


def _files(model, method):
    files = sorted((DATA / model / method).glob("*.csv"), key=_natural)
    return [f for f in files if "-opt-" not in f.name]


def _frame(path) -> pd.DataFrame:
    return pd.read_csv(path, comment="#", skipinitialspace=True)


def _arviz_major() -> int:
    import arviz

    return int(arviz.__version__.split(".")[0])


def _assert_same_draws(a: Draws, b: Draws, *, stats=True, ordered=True):
    assert a.method == b.method
    assert a.shape == b.shape
    if ordered:
        assert list(a.variables) == list(b.variables)
    assert sorted(a.variables) == sorted(b.variables)
    for name in a.variables:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    for attr in ("log_p", "log_q"):
        x, y = getattr(a, attr), getattr(b, attr)
        assert (x is None) == (y is None), attr
        if x is not None:
            np.testing.assert_array_equal(x, y, err_msg=attr)
    if stats:
        assert sorted(a.sample_stats) == sorted(b.sample_stats)
        for name in a.sample_stats:
            np.testing.assert_array_equal(a.sample_stats[name], b.sample_stats[name])


def _check_every_column(draws: Draws, frames: list[pd.DataFrame]):
    """Every CSV column equals the element its name points to (column-major Stan names)."""
    assert draws.n_chains == len(frames)
    for c, df in enumerate(frames):
        for col in df.columns:
            if col.endswith("__"):
                continue
            base, *idx = col.split(".")
            value = draws[base][(c, slice(None)) + tuple(int(i) - 1 for i in idx)]
            np.testing.assert_array_equal(value, df[col].to_numpy(), err_msg=col)
        n_index = {len(col.split(".")) - 1 for col in df.columns if not col.endswith("__")}
        assert n_index <= {0, 1, 2}


# ------------------------------------------------------------------------------------------
# Stan CSV against pandas
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
def test_sample_csv_matches_pandas(model):
    files = _files(model, "sample")
    draws = read_csv(DATA / model / "sample")
    frames = [_frame(f) for f in files]
    assert draws.method == "mcmc" and draws.shape == (4, 250)
    assert draws.log_p is None and draws.log_q is None
    _check_every_column(draws, frames)
    for stat in ("lp__", "accept_stat__", "stepsize__", "treedepth__", "n_leapfrog__",
                 "divergent__", "energy__"):
        expected = np.stack([df[stat].to_numpy() for df in frames])
        np.testing.assert_array_equal(draws.sample_stats[stat], expected)
    assert draws.log_lik().shape == (4, 250, 54)
    # the run settings that say what the fit cost: the easy-row focus's budget, the chains'
    # mean leapfrog steps over the 250 kept draws times their 1000 + 250 iterations
    from loo_adapt.estimators.focused_easy import posterior_leapfrog

    assert (draws.config["num_warmup"], draws.config["thin"]) == ("1000", "1")
    per_chain = [df["n_leapfrog__"].mean() for df in frames]
    assert posterior_leapfrog(draws) == pytest.approx(1250 * sum(per_chain), rel=1e-12)


def test_relu_matrix_element_and_column_major_order():
    f = _files("relu1", "sample")[0]
    df = _frame(f)
    draws = read_csv(f)
    assert draws["W1"].shape == (1, 250, 30, 3)
    np.testing.assert_array_equal(draws["W1"][0, :, 1, 2], df["W1.2.3"].to_numpy())
    # CmdStan writes the first index fastest; a C-order reshape of the columns would be wrong
    flat = df[[c for c in df.columns if c.startswith("W1.")]].to_numpy()
    np.testing.assert_array_equal(draws["W1"][0], flat.reshape(250, 3, 30).transpose(0, 2, 1))
    assert not np.array_equal(draws["W1"][0], flat.reshape(250, 30, 3))


def _relu_log_lik(draws: Draws) -> np.ndarray:
    """log_lik recomputed in numpy from W1, b1, w2, b2 and the data (Stan's relu1.stan)."""
    data = json.loads((DATA / "relu1.data.json").read_text())
    X, y = np.asarray(data["X"], float), np.asarray(data["y"], float)
    hidden = np.maximum(np.einsum("nd,csdh->csnh", X, draws["W1"]) + draws["b1"][:, :, None], 0)
    eta = np.einsum("csnh,csh->csn", hidden, draws["w2"]) + draws["b2"][:, :, None]
    return y * eta - np.logaddexp(0.0, eta)


def test_relu_log_lik_recomputed_from_matrix():
    """The model's own arithmetic pins the orientation of W1 (a transpose would not match)."""
    draws = read_csv(DATA / "relu1" / "sample")
    recomputed = _relu_log_lik(draws)
    # CmdStan writes 6 significant digits
    np.testing.assert_allclose(recomputed, draws.log_lik(), rtol=1e-4, atol=2e-5)
    wrong = Draws({**draws.variables, "W1": draws["W1"][..., ::-1]}, method="mcmc")
    assert np.abs(_relu_log_lik(wrong) - draws.log_lik()).max() > 0.1


@pytest.mark.parametrize("model", MODELS)
def test_advi_csv_drops_mean_row(model):
    (f,) = _files(model, "variational")
    df = _frame(f)
    assert len(df) == 1001
    assert (df.loc[0, ["lp__", "log_p__", "log_g__"]] == 0).all()
    draws = read_csv(f)
    assert draws.method == "advi" and draws.shape == (1, 1000) and draws.n_draws == 1000
    np.testing.assert_array_equal(draws.log_p[0], df["log_p__"].to_numpy()[1:])
    np.testing.assert_array_equal(draws.log_q[0], df["log_g__"].to_numpy()[1:])
    _check_every_column(draws, [df.iloc[1:].reset_index(drop=True)])
    assert np.all(draws.log_p < 0) and np.all(draws.log_q < 0)


@pytest.mark.parametrize("model", MODELS)
def test_laplace_csv(model):
    (f,) = _files(model, "laplace")
    df = _frame(f)
    draws = read_csv(f)
    assert draws.method == "laplace" and draws.shape == (1, 1000)
    np.testing.assert_array_equal(draws.log_p[0], df["log_p__"].to_numpy())
    np.testing.assert_array_equal(draws.log_q[0], df["log_q__"].to_numpy())
    _check_every_column(draws, [df])
    # the directory also holds the -opt- mode file the Laplace run started from: skipped
    _assert_same_draws(read_csv(DATA / model / "laplace"), draws)


@pytest.mark.parametrize("model", MODELS)
def test_pathfinder_csv(model):
    (f,) = _files(model, "pathfinder")
    df = _frame(f)
    draws = read_csv(f)
    assert draws.method == "pathfinder" and draws.shape == (1, 1000)
    # CmdStan's default multi-path run: readable, refused as an importance-sampling proposal
    assert draws.config == {"num_paths": "4", "psis_resample": "true"}
    with pytest.raises(ValueError, match="PSIS-resampled from 4 paths.*num_paths=1"):
        draws.log_ratio_offset()
    np.testing.assert_array_equal(draws.log_p[0], df["lp__"].to_numpy())
    np.testing.assert_array_equal(draws.log_q[0], df["lp_approx__"].to_numpy())
    _check_every_column(draws, [df])


@pytest.mark.parametrize("model", MODELS)
def test_optimize_csv_is_one_draw(model):
    (f,) = _files(model, "optimize")
    df = _frame(f)
    draws = read_csv(f)
    assert draws.method == "other" and draws.shape == (1, 1)
    assert draws.sample_stats["lp__"][0, 0] == df["lp__"][0]
    _check_every_column(draws, [df])


def test_loo_of_optimize_output_says_it_is_one_point():
    """The sweep's case: loo() of CmdStan optimize output warned about every column's Pareto
    fit, then failed with 'need at least 2 draws for a khat threshold'."""
    import warnings

    import loo_adapt

    (f,) = _files("logistic_normal", "optimize")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning before the refusal
        with pytest.raises(ValueError, match="1 draw .CmdStan optimize output is the posterior "
                                             "mode, one point.: leave-one-out needs draws"):
            loo_adapt.loo(f)


def _cmdstanpy_columns(fit):
    """(column names, (chains, draws, columns) values) through cmdstanpy's public API."""
    cls = type(fit).__name__
    if cls == "CmdStanMCMC":
        values = fit.draws(concat_chains=False).transpose(1, 0, 2)
    elif cls == "CmdStanVB":
        values = fit.variational_sample[None]
    elif cls == "CmdStanMLE":
        values = fit.optimized_params_np[None, None]
    else:
        values = fit.draws()[None]
    return list(fit.column_names), np.asarray(values, float)


def _check_against_columns(draws: Draws, names, values):
    """Every named column equals the element of the draws its Stan name points to."""
    for k, col in enumerate(names):
        if col.endswith("__"):
            np.testing.assert_array_equal(draws.sample_stats[col], values[:, :, k], err_msg=col)
            continue
        base, *idx = col.replace("[", ".").replace("]", "").replace(",", ".").split(".")
        value = draws[base][(slice(None), slice(None)) + tuple(int(i) - 1 for i in idx)]
        np.testing.assert_array_equal(value, values[:, :, k], err_msg=col)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("method", METHODS)
def test_csv_equals_cmdstanpy_parser(model, method, monkeypatch):
    """Our CSV reader against cmdstanpy's public from_csv (its own parser), every column."""
    import cmdstanpy

    monkeypatch.chdir(DATA)  # the Laplace file names its mode file relative to DATA
    files = [str(f.relative_to(DATA)) for f in _files(model, method)]
    names, values = _cmdstanpy_columns(cmdstanpy.from_csv(files))
    draws = read_csv(files)
    assert draws.shape == values.shape[:2]
    _check_against_columns(draws, names, values)
    ll = read_csv(files, var_names="log_lik")
    assert list(ll.variables) == ["log_lik"]
    np.testing.assert_array_equal(ll.log_lik(), draws.log_lik())


def test_path_forms_agree():
    model_dir = DATA / "logistic_normal" / "sample"
    files = _files("logistic_normal", "sample")
    ref = read_csv(files)
    for form in (model_dir, str(model_dir), str(model_dir / "*.csv"), [str(f) for f in files]):
        _assert_same_draws(read_draws(form), ref)
    assert read_draws(files, method="sample").method == "mcmc"


def test_save_warmup_rows_are_dropped(tmp_path):
    src = _files("logistic_normal", "sample")[0]
    lines = src.read_text().splitlines(keepends=True)
    header_at = next(i for i, ln in enumerate(lines) if not ln.startswith("#"))
    first_row = next(ln for ln in lines[header_at + 1 :] if not ln.startswith("#"))
    warm = "999" + first_row[first_row.index(",") :]
    out = []
    for ln in lines[: header_at + 1]:
        ln = ln.replace("save_warmup = false (Default)", "save_warmup = true")
        ln = ln.replace("num_warmup = 1000 (Default)", "num_warmup = 6")
        out.append(ln)
    out += [warm] * 3  # thin = 2 -> ceil(6 / 2) = 3 warm-up rows, before the adaptation info
    out += lines[header_at + 1 :]
    text = "".join(out).replace("thin = 1 (Default)", "thin = 2")
    path = tmp_path / "warm.csv"
    path.write_text(text)
    draws = read_csv(path)
    ref = read_csv(src)
    assert draws.n_draws == 250
    _assert_same_draws(draws, ref)


def test_column_order_does_not_matter(tmp_path):
    src = _files("relu1", "sample")[0]
    df = _frame(src)
    rng = np.random.default_rng(3)
    shuffled = df[list(rng.permutation(df.columns))]
    comments = "".join(ln for ln in src.read_text().splitlines(True) if ln.startswith("#"))
    path = tmp_path / "shuffled.csv"
    path.write_text(comments + shuffled.to_csv(index=False, float_format="%.17g"))
    _assert_same_draws(read_csv(path), read_csv(src), ordered=False)
    # chains whose files order the columns differently: each read by its own positions
    files = _files("relu1", "sample")[:2]
    df2 = _frame(files[1])
    other = tmp_path / "other.csv"
    other.write_text(comments + df2[list(rng.permutation(df2.columns))].to_csv(
        index=False, float_format="%.17g"))
    _assert_same_draws(read_csv([files[0], other]), read_csv(files))
    only = read_csv([files[0], other], var_names="log_lik")
    np.testing.assert_array_equal(only.log_lik(), read_csv(files).log_lik())


def test_name_helpers():
    assert _stan_name_to_index("alpha") == ("alpha", ())
    assert _stan_name_to_index("W1.2.3") == ("W1", (2, 3))
    assert _stan_name_to_index("W1[2,3]") == ("W1", (2, 3))
    assert _stan_name_to_index("z.4.imag") == ("z", (4, 2))
    assert _stan_name_to_index("t:2.1") == ("t:2", (1,))
    assert _stan_name_to_index("a.b") == ("a.b", ())
    # a 2 x 3 x 4 array, columns column-major then shuffled: placement follows the names
    names = [f"a.{i}.{j}.{k}" for k in range(1, 5) for j in range(1, 4) for i in range(1, 3)]
    order = np.random.default_rng(0).permutation(len(names))
    (shape, cols), = _group_columns([names[o] for o in order]).values()
    assert shape == (2, 3, 4)
    placed = np.array([names[order[c]] for c in cols]).reshape(shape)
    assert placed[1, 2, 0] == "a.2.3.1" and placed[0, 1, 3] == "a.1.2.4"
    with pytest.raises(ValueError, match="do not fill"):
        _group_columns(["a.1.1", "a.2.2"])
    with pytest.raises(ValueError, match="mixed numbers of indices"):
        _group_columns(["a.1", "a.1.2"])


# ------------------------------------------------------------------------------------------
# cmdstanpy objects (built from the CSV files, no CmdStan install needed)
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ("rhs_logistic", "relu1"))
@pytest.mark.parametrize("method", METHODS)
def test_cmdstanpy_object_equals_csv(model, method, monkeypatch):
    import cmdstanpy

    # the Laplace CSV names its mode file by the relative path CmdStan was given
    # ("<model>/laplace/<model>-opt-....csv"), which resolves from the data directory
    monkeypatch.chdir(DATA)
    files = [str(f.relative_to(DATA)) for f in _files(model, method)]
    fit = cmdstanpy.from_csv(files)
    expected = {
        "sample": "CmdStanMCMC",
        "variational": "CmdStanVB",
        "laplace": "CmdStanLaplace",
        "pathfinder": "CmdStanPathfinder",
        "optimize": "CmdStanMLE",
    }[method]
    assert type(fit).__name__ == expected
    _assert_same_draws(read_draws(fit), read_draws(files))
    assert read_draws(fit).config == read_draws(files).config


def test_cmdstanpy_pathfinder_refused_like_csv():
    import cmdstanpy

    fit = cmdstanpy.from_csv([str(f) for f in _files("relu1", "pathfinder")])
    with pytest.raises(ValueError, match="num_paths=1"):
        read_draws(fit).log_ratio_offset()


def test_nan_in_csv_warns(tmp_path):
    src = _files("logistic_normal", "optimize")[0]
    df = _frame(src)
    df.loc[0, "log_lik.7"] = np.nan
    path = tmp_path / "nan.csv"
    comments = "".join(ln for ln in src.read_text().splitlines(True) if ln.startswith("#"))
    # CmdStan writes a failed value as "nan"
    path.write_text(comments + df.to_csv(index=False, float_format="%.17g", na_rep="nan"))
    with pytest.warns(UserWarning, match="'log_lik': 1"):
        d = read_csv(path)
    assert np.isnan(d["log_lik"][0, 0, 6]) and np.isfinite(d["log_lik"][0, 0, 5])
    with pytest.raises(ValueError, match="1 NaN; first at chain 0, draw 0, observation 6 "
                                         "\\(0-based; Stan index 7\\)"):
        d.log_lik()


def test_cmdstanpy_method_mismatch():
    import cmdstanpy

    fit = cmdstanpy.from_csv([str(f) for f in _files("logistic_normal", "variational")])
    with pytest.raises(ValueError, match="CmdStanVB holds 'advi'"):
        read_draws(fit, method="mcmc")


# ------------------------------------------------------------------------------------------
# ArviZ: 0.x InferenceData, and xarray.DataTree
# ------------------------------------------------------------------------------------------


def test_arviz0_from_cmdstan_round_trip():
    az = pytest.importorskip("arviz")
    if _arviz_major() >= 1:
        pytest.skip(reason="arviz >= 1 has no from_cmdstan (CSV); covered by the arviz1 tests")
    files = [str(f) for f in _files("relu1", "sample")]
    idata = az.from_cmdstan(files, log_likelihood="log_lik")
    from_idata = read_draws(idata)
    ref = read_csv(files)
    _assert_same_draws(from_idata, ref, stats=False)
    for stat in ("lp__", "accept_stat__", "stepsize__", "treedepth__", "n_leapfrog__",
                 "divergent__", "energy__"):
        np.testing.assert_array_equal(from_idata.sample_stats[stat], ref.sample_stats[stat])


def _dict_groups(draws: Draws):
    posterior = {k: v for k, v in draws.variables.items() if k != "log_lik"}
    stats = {"lp": draws.sample_stats["lp__"]}
    if draws.log_p is not None:
        stats.update(log_p=draws.log_p, log_g=draws.log_q)
    return posterior, {"log_lik": draws["log_lik"]}, stats


def test_arviz0_from_dict_and_datatree_round_trip():
    az = pytest.importorskip("arviz")
    if _arviz_major() >= 1:
        pytest.skip(reason="arviz 0.x API (from_dict keyword groups)")
    import xarray as xr

    ref = read_csv(_files("logistic_normal", "variational"))
    posterior, log_lik, stats = _dict_groups(ref)
    idata = az.from_dict(posterior=posterior, log_likelihood=log_lik, sample_stats=stats)
    back = read_draws(idata, method="advi")
    _assert_same_draws(back, ref, stats=False)
    tree = xr.DataTree.from_dict({g: getattr(idata, g) for g in idata.groups()})
    _assert_same_draws(read_draws(tree, method="variational"), ref, stats=False)


def test_inference_data_explicit_densities_and_errors():
    import xarray as xr

    ref = read_csv(_files("logistic_normal", "laplace"))
    ds = lambda d: xr.Dataset({k: (("chain", "draw"), v) for k, v in d.items()})  # noqa: E731
    post = xr.Dataset(
        {"alpha": (("chain", "draw"), ref["alpha"]),
         "beta": (("chain", "draw", "k"), ref["beta"])}
    )
    tree = xr.DataTree.from_dict(
        {"posterior": post, "sample_stats": ds({"a": ref.log_p, "b": ref.log_q})}
    )
    d = read_draws(tree, method="laplace", log_p="a", log_q="b")
    np.testing.assert_array_equal(d.log_p, ref.log_p)
    np.testing.assert_array_equal(d["beta"], ref["beta"])
    with pytest.raises(ValueError, match="lack the column"):
        read_draws(tree, method="laplace")
    with pytest.raises(ValueError, match="requested but the DataTree .* holds 'laplace'"):
        read_draws(xr.DataTree.from_dict(
            {"posterior": post, "sample_stats": ds({"log_p": ref.log_p, "log_q": ref.log_q})}),
            method="mcmc")
    swapped = xr.Dataset({"beta": (("k", "draw", "chain"), ref["beta"].transpose(2, 1, 0))})
    d2 = read_draws(xr.DataTree.from_dict({"posterior": swapped}))
    np.testing.assert_array_equal(d2["beta"], ref["beta"])
    no_chain = xr.Dataset({"beta": (("sample", "k"), ref.flat("beta"))})
    with pytest.raises(ValueError, match="expected \\('chain', 'draw'"):
        read_draws(xr.DataTree.from_dict({"posterior": no_chain}))
    with pytest.raises(ValueError, match="no 'posterior' or 'log_likelihood' group"):
        read_draws(xr.DataTree.from_dict({"sample_stats": ds({"lp": ref.log_p})}))


# ------------------------------------------------------------------------------------------
# stanli
# ------------------------------------------------------------------------------------------


def _stanli_fit(model, seed=5):
    stanli = pytest.importorskip("stanli")
    data = json.loads((DATA / f"{model}.data.json").read_text())
    m = stanli.Model(stan_file=str(DATA / f"{model}.stan"), data=data)
    return m.sample(chains=2, warmup=100, samples=100, seed=seed, refresh=0)


def test_stanli_logistic_normal_shapes():
    fit = _stanli_fit("logistic_normal")
    draws = read_draws(fit)
    assert draws.method == "mcmc" and draws.shape == (2, 100)
    assert draws["alpha"].shape == (2, 100)
    assert draws["beta"].shape == (2, 100, 30)
    assert draws.log_lik().shape == (2, 100, 54)
    np.testing.assert_array_equal(draws["beta"], fit.draws("beta"))
    np.testing.assert_array_equal(draws.sample_stats["lp__"].reshape(-1), fit["lp__"])
    # the log-likelihood the program computed equals numpy's from the same draws
    data = json.loads((DATA / "logistic_normal.data.json").read_text())
    X, y = np.asarray(data["X"], float), np.asarray(data["y"], float)
    eta = draws["alpha"][..., None] + np.einsum("nd,csd->csn", X, draws["beta"])
    np.testing.assert_allclose(draws.log_lik(), y * eta - np.logaddexp(0, eta), atol=1e-10)


def test_stanli_matrix_order_matches_cmdstan():
    fit = _stanli_fit("relu1")
    draws = read_draws(fit)
    W1 = fit.draws("W1")
    assert W1.shape == draws["W1"].shape == (2, 100, 30, 3)
    np.testing.assert_array_equal(draws["W1"], W1)
    for i in range(1, 31):
        for j in range(1, 4):
            np.testing.assert_array_equal(W1[:, :, i - 1, j - 1], fit.draws(f"W1[{i},{j}]"))
    # stanli lists the columns in CmdStan's CSV order (first index fastest)
    csv_cols = [c for c in _frame(_files("relu1", "optimize")[0]).columns if c.startswith("W1.")]
    stanli_cols = [n for n in fit.names if n.startswith("W1[")]
    assert stanli_cols == [re.sub(r"\.(\d+)\.(\d+)", r"[\1,\2]", c) for c in csv_cols]
    np.testing.assert_allclose(_relu_log_lik(draws), draws.log_lik(), atol=1e-10)


# ------------------------------------------------------------------------------------------
# dicts, arrays, log_lik mapping
# ------------------------------------------------------------------------------------------


def test_dict_input():
    rng = np.random.default_rng(1)
    data = {"mu": rng.normal(size=(3, 40)), "ll": rng.normal(size=(3, 40, 7))}
    with pytest.raises(ValueError, match="method= is required"):
        read_draws(data)
    d = read_draws(data, method="mcmc", var_name="ll")
    assert d.shape == (3, 40) and d.log_lik_name() == "ll"
    np.testing.assert_array_equal(d.log_lik(), data["ll"])
    with pytest.warns(DeprecationWarning, match="use var_name="):
        assert read_draws(data, method="mcmc", log_lik="ll").log_lik_name() == "ll"
    lp, lg = rng.normal(size=(3, 40)), rng.normal(size=(3, 40))
    d = read_draws({**data, "log_p__": lp, "log_g__": lg}, method="variational")
    assert d.method == "advi" and "log_p__" in d.sample_stats and "log_p__" not in d
    np.testing.assert_array_equal(d.log_p, lp)
    np.testing.assert_array_equal(d.log_q, lg)
    d = read_draws(data, method="laplace", log_p=lp, log_q=lg)
    np.testing.assert_array_equal(d.log_q, lg)
    with pytest.raises(ValueError, match="expected \\(chains, draws"):
        read_draws({"mu": np.zeros(5)}, method="mcmc")
    with pytest.raises(ValueError, match="unknown method"):
        read_draws(data, method="nutz")


def test_array_input():
    rng = np.random.default_rng(2)
    ll = rng.normal(size=(2, 30, 5))
    d = read_draws(ll)
    assert d.method == "mcmc" and d.shape == (2, 30)
    np.testing.assert_array_equal(d.log_lik(), ll)
    d = read_draws(ll.reshape(60, 5))
    assert d.shape == (1, 60)
    np.testing.assert_array_equal(d.log_lik()[0], ll.reshape(60, 5))
    with pytest.raises(ValueError, match="\\(chains, draws, n\\) or \\(S, n\\)"):
        read_draws(np.zeros(5))
    bad = ll.copy()
    bad[0, 3, 1] = np.nan
    with pytest.raises(ValueError, match="1 NaN"):
        read_draws(bad)


def test_draws_passthrough_and_log_lik_options():
    ref = read_csv(_files("logistic_normal", "laplace"))
    assert read_draws(ref) is ref
    with pytest.raises(ValueError, match="requested but the Draws are 'laplace'"):
        read_draws(ref, method="mcmc")
    extra = np.random.default_rng(0).normal(size=(1000, 3))
    with pytest.raises(ValueError, match="already hold a variable 'log_lik'"):
        read_draws({"a": ref["alpha"], "log_lik": ref["log_lik"]}, method="laplace",
                   var_name=extra, log_p=ref.log_p, log_q=ref.log_q)
    d = read_draws({"a": ref["alpha"]}, method="laplace", var_name=extra,
                   log_p=ref.log_p, log_q=ref.log_q)
    np.testing.assert_array_equal(d.log_lik()[0], extra)
    with pytest.raises(ValueError, match="log_lik has shape"):
        read_draws({"a": ref["alpha"]}, method="mcmc", var_name=extra[:10])
    with pytest.raises(KeyError, match="no pointwise log-likelihood 'loglik'.*alpha"):
        read_draws(ref, var_name="loglik")


# ------------------------------------------------------------------------------------------
# bad input
# ------------------------------------------------------------------------------------------


def test_unknown_type():
    with pytest.raises(TypeError, match="cannot read draws from a int; accepted: .*Stan CSV"):
        read_draws(3)
    with pytest.raises(TypeError, match="expected a file path"):
        read_csv([str(_files("relu1", "optimize")[0]), 3])


def test_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        read_csv(tmp_path / "nope.csv")
    with pytest.raises(FileNotFoundError, match="no files match"):
        read_csv(str(tmp_path / "*.csv"))
    with pytest.raises(FileNotFoundError, match="no .csv files in directory"):
        read_csv(tmp_path)


def test_empty_and_header_only_csv(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(ValueError, match="no header line"):
        read_csv(empty)
    src = _files("logistic_normal", "sample")[0]
    lines = src.read_text().splitlines(keepends=True)
    header_at = next(i for i, ln in enumerate(lines) if not ln.startswith("#"))
    only = tmp_path / "header_only.csv"
    only.write_text("".join(lines[: header_at + 1]))
    with pytest.raises(ValueError, match="header but no draws"):
        read_csv(only)
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("".join(lines[: header_at + 2]) + "1,2,3\n")
    with pytest.raises(ValueError, match="ragged.csv"):
        read_csv(ragged)


def test_mixed_methods_and_mismatched_chains(tmp_path):
    sample = _files("logistic_normal", "sample")
    with pytest.raises(ValueError, match="different CmdStan methods"):
        read_csv([sample[0], _files("logistic_normal", "variational")[0]])
    with pytest.raises(ValueError, match="chains have different columns"):
        read_csv([sample[0], _files("relu1", "sample")[0]])
    short = tmp_path / "short.csv"
    lines = sample[1].read_text().splitlines(keepends=True)
    data_rows = [i for i, ln in enumerate(lines) if not ln.startswith("#")][1:]
    short.write_text("".join(ln for i, ln in enumerate(lines) if i not in data_rows[-10:]))
    with pytest.raises(ValueError, match="different numbers of draws.*short.csv: 240"):
        read_csv([sample[0], short])
    with pytest.raises(ValueError, match="requested but .* 'variational'"):
        read_csv(_files("logistic_normal", "variational"), method="mcmc")


def test_csv_without_comments_needs_columns_or_method(tmp_path):
    df = _frame(_files("logistic_normal", "laplace")[0])
    path = tmp_path / "bare.csv"
    df.to_csv(path, index=False, float_format="%.17g")
    d = read_csv(path)  # method told by the log_p__ / log_q__ columns
    assert d.method == "laplace"
    np.testing.assert_array_equal(d.log_q[0], df["log_q__"].to_numpy())
    df.drop(columns=["log_p__", "log_q__"]).to_csv(path, index=False)
    with pytest.raises(ValueError, match="cannot tell which CmdStan method"):
        read_csv(path)


def test_fixture_copies_are_intact():
    """tests/data must hold every method of every model (the other tests rely on it)."""
    for model in MODELS:
        assert (DATA / f"{model}.stan").is_file() and (DATA / f"{model}.data.json").is_file()
        assert (DATA / "truth" / f"{model}.csv").is_file()
        for method in METHODS:
            assert _files(model, method), (model, method)


# ------------------------------------------------------------------------------------------
# arviz >= 1 (xarray.DataTree); run with /work/.venv312/bin/python -m pytest tests/test_readers.py
# ------------------------------------------------------------------------------------------


def _require_arviz1():
    pytest.importorskip("arviz", reason="arviz is not installed")
    if _arviz_major() < 1:
        pytest.skip(reason="needs arviz >= 1 (DataTree API); the CI runs it under python3.12")


@pytest.mark.arviz1
def test_arviz1_from_dict_round_trip():
    _require_arviz1()
    import arviz as az
    import xarray as xr

    ref = read_csv(_files("rhs_logistic", "variational"))
    posterior, log_lik, stats = _dict_groups(ref)
    tree = az.from_dict(
        {"posterior": posterior, "log_likelihood": log_lik, "sample_stats": stats}
    )
    assert isinstance(tree, xr.DataTree)
    _assert_same_draws(read_draws(tree, method="advi"), ref, stats=False)


@pytest.mark.arviz1
def test_arviz1_from_cmdstanpy_round_trip():
    _require_arviz1()
    import arviz as az
    import cmdstanpy

    files = [str(f) for f in _files("relu1", "sample")]
    tree = az.from_cmdstanpy(cmdstanpy.from_csv(files), log_likelihood="log_lik")
    ref = read_csv(files)
    back = read_draws(tree)
    _assert_same_draws(back, ref, stats=False)
    for stat in ("lp__", "divergent__", "treedepth__"):
        np.testing.assert_array_equal(back.sample_stats[stat], ref.sample_stats[stat])


def test_group_columns_vector_runs_match_one_parse_per_name():
    """Runs of ``base.k`` / ``base[k]`` (matched as a whole) group as the names parse one
    by one: a base that reappears later, a run out of order, matrices, tuples, complex
    parts and a non-identifier base, written out by hand."""
    from loo_adapt.io.columns import group_columns

    cases = {
        ("lp__", "a", "b.1", "b.2", "b.3", "c[1]", "c[2]", "log_lik.1", "log_lik.2"):
            {"lp__": ((), [0]), "a": ((), [1]), "b": ((3,), [2, 3, 4]), "c": ((2,), [5, 6]),
             "log_lik": ((2,), [7, 8])},
        ("b.1", "b.2", "x", "b.3"): {"b": ((3,), [0, 1, 3]), "x": ((), [2])},
        ("b.1", "b.2", "b.4", "b.3"): {"b": ((4,), [0, 1, 3, 2])},
        ("m.1.1", "m.2.1", "m.1.2", "m.2.2", "v.1"):
            {"m": ((2, 2), [0, 2, 1, 3]), "v": ((1,), [4])},
        ("t:1.1", "t:1.2", "z.1.real", "z.1.imag"): {"t:1": ((2,), [0, 1]), "z": ((1, 2), [2, 3])},
        ("1x.1", "1x.2", "y.1", "y.02"): {"1x": ((2,), [0, 1]), "y": ((2,), [2, 3])},
    }
    for names, want in cases.items():
        got = group_columns(list(names))
        assert list(got) == list(want), names
        for base, (shape, cols) in want.items():
            assert got[base][0] == shape and got[base][1].tolist() == cols, (names, base)
    with pytest.raises(ValueError, match="do not fill"):
        group_columns(["b.1", "b.2", "b.2"])
