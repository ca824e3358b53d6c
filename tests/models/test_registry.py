"""The one model registry: every consumer resolves names, defaults and roles the same way."""

import json
import pathlib

import numpy as np
import pytest

from loo_adapt import cli
from loo_adapt.models import (
    LogisticRegression,
    Normal,
    RegularizedHorseshoe,
    ReLUNet,
    StudentT,
    bundled_program_for,
    model_for,
    registry,
)
from loo_adapt.stan import backends as stan

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data" / "cmdstan"

# every spelling in use, with the bundled program it must mean (written out, not derived)
SPELLINGS = {
    "logistic_normal": "logistic_normal", "logistic": "logistic_normal",
    "logistic_rhs": "logistic_rhs", "rhs_logistic": "logistic_rhs",
    "logistic-rhs": "logistic_rhs",
    "relu_net": "relu_net", "relu1": "relu_net", "relu": "relu_net",
}


def _fixture(name):
    return json.loads((FIXTURES / f"{name}.data.json").read_text())


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_every_consumer_resolves_a_name_to_the_same_program(spelling):
    program = SPELLINGS[spelling]
    assert registry.resolve(spelling).program == program
    assert stan._canonical_name(spelling) == program
    assert stan.stan_model_path(spelling).name == f"{program}.stan"
    assert cli.FAMILIES[cli._family(spelling)] == program


def test_unknown_names_are_refused_everywhere():
    with pytest.raises(ValueError, match="unknown model 'probit'"):
        registry.resolve("probit")
    with pytest.raises(ValueError, match="unknown bundled model"):
        stan._canonical_name("probit")
    with pytest.raises(cli.InputError, match="unknown model"):
        cli._family("probit")


@pytest.mark.parametrize("name", ["logistic_normal", "rhs_logistic", "relu1"])
def test_cli_and_model_for_build_the_same_family(name):
    """The command line's model is the registry's (same class, names, priors, data)."""
    data = _fixture(name)
    family = cli._family(name)
    ours = model_for(name, data)
    theirs = cli._build_model(family, data, cli._parse_names(None, family))
    assert type(ours) is type(theirs)
    np.testing.assert_array_equal(ours.X, np.asarray(data["X"]))
    np.testing.assert_array_equal(ours.y, np.asarray(data["y"]))
    np.testing.assert_array_equal(theirs.X, ours.X)
    assert ours.prior == theirs.prior
    if isinstance(ours, LogisticRegression):
        assert ours.intercept_prior == theirs.intercept_prior
        assert (ours.coef, ours.intercept) == (theirs.coef, theirs.intercept)


def test_no_consumer_invents_the_horseshoe_intercept_prior():
    """Where the data lacks scale_icept the CLI used to assume 5 while model_for refused."""
    data = _fixture("rhs_logistic")
    del data["scale_icept"]
    with pytest.raises(ValueError, match=r"no 'scale_icept' \(the bundled program's default is 5"):
        model_for("rhs_logistic", data)
    with pytest.raises(cli.InputError, match="scale-icept"):
        cli._build_model("logistic-rhs", data, cli._parse_names(None, "logistic-rhs"))
    # an explicit setting (the CLI's --scale-icept) is used
    model = model_for("rhs_logistic", data, scale_icept=3.0)
    assert model.intercept_prior == Normal(3.0)


def test_horseshoe_family_reads_its_hyperpriors_from_the_data():
    data = _fixture("rhs_logistic")
    prior = model_for("rhs_logistic", data).prior
    assert prior.scale_global == pytest.approx(0.015120307054217148, rel=0, abs=0)
    assert (prior.nu_global, prior.nu_local, prior.slab_scale, prior.slab_df) == (1, 1, 2.5, 1)


def test_names_override_roles_and_unknown_roles_are_refused():
    data = _fixture("logistic_normal")
    model = model_for("logistic", data, names={"coef": "b", "intercept": "a"})
    assert model.param_names[:2] == ["a", "b[1]"]
    with pytest.raises(ValueError, match="unknown parameter roles"):
        model_for("logistic", data, names={"tau": "tau"})


@pytest.mark.parametrize(
    "name, priors",
    [("logistic_normal", {"prior_sd": 0.7, "scale_icept": 3.0}),
     ("logistic_rhs", {"has_intercept": 0, "nu_local": 3.0, "slab_df": 4.0, "p0": 2}),
     ("logistic_rhs", {"scale_icept": 2.0, "slab_scale": 1.5, "nu_global": 2.0}),
     ("relu_net", {"H": 4, "prior_sd": 0.5})],
)
def test_family_built_from_data_maps_back_to_the_same_program_data(name, priors):
    """stan_data -> model_for -> bundled_program_for -> stan_data is the identity on data."""
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(20, 6)), rng.integers(0, 2, size=20)
    data = stan.stan_data(name, X, y, **priors)
    program, settings = bundled_program_for(model_for(name, data))
    assert program == name
    again = stan.stan_data(program, X, y, **settings)
    assert sorted(again) == sorted(data)
    for key, value in data.items():
        if key == "scale_icept" and not data.get("has_intercept", 1):
            continue  # declared by the program, unused without an intercept
        np.testing.assert_array_equal(np.asarray(again[key]), np.asarray(value), err_msg=key)


def test_priors_without_an_exact_bundled_program_are_refused():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(10, 3)), rng.integers(0, 2, size=10)
    with pytest.raises(ValueError, match="no bundled program has the coefficient prior"):
        bundled_program_for(LogisticRegression(X, y, intercept="a", prior=StudentT(3, 1.0),
                                               intercept_prior=Normal(1.0)))
    with pytest.raises(ValueError, match="no bundled program has the intercept prior"):
        bundled_program_for(LogisticRegression(X, y, intercept="a", prior=Normal(1.0),
                                               intercept_prior=Normal(1.0, loc=2.0)))
    with pytest.raises(ValueError, match="without an intercept"):
        bundled_program_for(LogisticRegression(X, y, prior=Normal(1.0)))
    hs = RegularizedHorseshoe(lambda_tilde="lambda_tilde", scale_global=0.1, nu_global=1)
    with pytest.raises(ValueError, match=r"hyperpriors \['nu_local', 'slab_scale', 'slab_df'\]"):
        bundled_program_for(LogisticRegression(X, y, prior=hs))
    with pytest.raises(ValueError, match="width is unknown"):
        bundled_program_for(ReLUNet(X, y))
    with pytest.raises(ValueError, match="must be a positive finite number"):
        RegularizedHorseshoe(lambda_tilde="lt", slab_df=0.0)
