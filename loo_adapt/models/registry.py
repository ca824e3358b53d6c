"""The one model registry: name -> bundled Stan program, model family, data, priors, roles.

Every place that turns a model name into something -- the bundled programs and their data
(`loo_adapt.stan.backends`), the model families read from Stan data (:func:`model_for`), the
command line (``--model logistic|logistic-rhs|relu``) and the likelihood of refits -- reads
this table, so the aliases (the fixture programs' ``rhs_logistic`` / ``relu1``, the command
line's ``logistic-rhs``) and the prior defaults live in one place.

Prior settings are Stan data entries. :func:`stan_data_defaults` fills the defaults when the
package builds the data of a bundled program; a model family read from someone's data
(:func:`model_for`) never assumes one: a prior setting missing from the data is an error
naming the default, because the user's program may have used another value.

:func:`bundled_program_for` goes the other way: from a model family with complete priors
(horseshoe hyperpriors included) to the bundled program and the prior settings that encode
it exactly, or a clear error where no bundled program has that prior.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from .logistic import LogisticRegression
from .priors import Flat, Normal, RegularizedHorseshoe
from .relu import ReLUNet

__all__ = ["ModelEntry", "REGISTRY", "ALIASES", "resolve", "model_for", "likelihood_family",
           "bundled_program_for", "HORSESHOE_HYPERPRIORS"]

#: RegularizedHorseshoe fields that are the bundled program's hyperprior settings (data names)
HORSESHOE_HYPERPRIORS = ("scale_global", "nu_global", "nu_local", "slab_scale", "slab_df")


@dataclass(frozen=True)
class ModelEntry:
    """One registered model.

    Attributes
    ----------
    program : name of the bundled program (``stan_models/<program>.stan``).
    family : the command-line name (``--model``).
    aliases : other accepted names (fixture program names, spellings).
    prior_defaults : the program's prior settings (Stan data entries) with their defaults
        when the package builds the data (None: derived, see `loo_adapt.stan.backends.stan_data`).
    required_data : every data entry the program declares.
    roles : parameter role -> default Stan variable name read by the model family.
    """

    program: str
    family: str
    aliases: tuple[str, ...]
    prior_defaults: Mapping = field(default_factory=dict)
    required_data: tuple[str, ...] = ()
    roles: Mapping = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "prior_defaults", MappingProxyType(dict(self.prior_defaults)))
        object.__setattr__(self, "roles", MappingProxyType(dict(self.roles)))

    @property
    def names(self) -> tuple[str, ...]:
        """Every name that resolves to this entry."""
        return (self.program, self.family, *self.aliases)


REGISTRY: dict[str, ModelEntry] = {
    e.program: e
    for e in (
        ModelEntry(
            program="logistic_normal", family="logistic", aliases=(),
            prior_defaults={"prior_sd": 1.0, "scale_icept": 2.5},
            required_data=("N", "D", "X", "y", "prior_sd", "scale_icept", "mixis"),
            roles={"coef": "beta", "intercept": "alpha"},
        ),
        ModelEntry(
            program="logistic_rhs", family="logistic-rhs", aliases=("rhs_logistic",),
            prior_defaults={
                "has_intercept": 1,
                "scale_icept": 5.0,
                "p0": None,  # prior guess of the number of relevant coefficients; None: D / 10
                "scale_global": None,  # None: p0 / ((D - p0) * sqrt(N))
                "nu_global": 1.0,
                "nu_local": 1.0,
                "slab_scale": 2.5,
                "slab_df": 1.0,
            },
            required_data=("N", "D", "X", "y", "has_intercept", "scale_icept", "scale_global",
                           "nu_global", "nu_local", "slab_scale", "slab_df", "mixis"),
            roles={"coef": "beta", "intercept": "beta0", "tau": "tau",
                   "lambda_tilde": "lambda_tilde", "lam": None, "c": None},
        ),
        ModelEntry(
            program="relu_net", family="relu", aliases=("relu1",),
            prior_defaults={"H": 3, "prior_sd": 1.0},
            required_data=("N", "D", "H", "X", "y", "prior_sd", "mixis"),
            roles={"W1": "W1", "b1": "b1", "w2": "w2", "b2": "b2"},
        ),
    )
}

#: every accepted name -> bundled program name
ALIASES: dict[str, str] = {n: e.program for e in REGISTRY.values() for n in e.names}


def resolve(name: str) -> ModelEntry:
    """The registry entry of a model name (program, command-line family or alias).

    Parameters
    ----------
    name : str
        ``"logistic_normal"``/``"logistic"``, ``"logistic_rhs"``/``"rhs_logistic"``/
        ``"logistic-rhs"``, ``"relu_net"``/``"relu1"``/``"relu"``.

    Returns
    -------
    ModelEntry

    Examples
    --------
    >>> resolve("rhs_logistic").program
    'logistic_rhs'
    >>> resolve("relu").program
    'relu_net'
    """
    try:
        return REGISTRY[ALIASES[name]]
    except (KeyError, TypeError):
        raise ValueError(f"unknown model {name!r}; known: {sorted(ALIASES)}") from None


def _xy(data: Mapping) -> tuple[np.ndarray, np.ndarray]:
    missing = [k for k in ("X", "y") if k not in data]
    if missing:
        raise ValueError(f"the Stan data lacks {missing}: it needs X (N x D predictors) and "
                         "y (0/1 outcomes)")
    return np.asarray(data["X"], dtype=float), np.asarray(data["y"])


def _setting(data: Mapping, priors: Mapping, key: str, entry: ModelEntry) -> float:
    value = priors.get(key)
    if value is None:
        value = data.get(key)
    if value is None:
        default = entry.prior_defaults.get(key)
        hint = f" (the bundled program's default is {default})" if default is not None else ""
        raise ValueError(
            f"the data has no {key!r}{hint}: add it to the Stan data or pass {key}=... "
            f"(command line: --{key.replace('_', '-')})")
    return float(value)


def model_for(name: str, data: Mapping, names: Mapping | None = None, **priors):
    """The model family of a registered program, with the priors its Stan data sets.

    Parameters
    ----------
    name : str
        A registered name (see :func:`resolve`).
    data : mapping
        The Stan data (``X``, ``y`` and the prior settings, e.g. ``prior_sd``).
    names : mapping or None
        Parameter role -> Stan variable name, overriding the registry's roles (e.g.
        ``{"intercept": None}`` for no intercept, ``{"lam": "lambda", "c": "c"}``).
    **priors
        Prior settings overriding the data's (``prior_sd=2.0``).

    Returns
    -------
    LogisticRegression or ReLUNet
        For the horseshoe the prior carries its hyperprior settings when the data has them.

    Examples
    --------
    >>> import numpy as np
    >>> data = {"X": np.eye(3), "y": [0, 1, 1], "prior_sd": 1.0, "scale_icept": 2.5}
    >>> model_for("logistic", data).prior
    Normal(sd=1.0, loc=0.0)
    """
    entry = resolve(name)
    roles = dict(entry.roles)
    if names:
        unknown = sorted(set(names) - set(roles))
        if unknown:
            raise ValueError(f"unknown parameter roles {unknown} for {entry.program}; roles "
                             f"are {sorted(roles)}")
        roles.update(names)
    X, y = _xy(data)
    if entry.program == "relu_net":
        hidden = priors.get("H", data.get("H"))
        return ReLUNet(X, y, W1=roles["W1"], b1=roles["b1"], w2=roles["w2"], b2=roles["b2"],
                       prior_sd=_setting(data, priors, "prior_sd", entry),
                       hidden=None if hidden is None else int(hidden))
    intercept = roles["intercept"]
    if entry.program == "logistic_normal":
        return LogisticRegression(
            X, y, coef=roles["coef"], intercept=intercept,
            prior=Normal(_setting(data, priors, "prior_sd", entry)),
            intercept_prior=(Normal(_setting(data, priors, "scale_icept", entry))
                             if intercept else None))
    if not int(priors.get("has_intercept", data.get("has_intercept", 1))):
        intercept = None
    hyper = {k: float(v) for k in HORSESHOE_HYPERPRIORS
             if (v := priors.get(k, data.get(k))) is not None}
    if roles.get("lam") or roles.get("c"):
        prior = RegularizedHorseshoe(tau=roles["tau"], lam=roles["lam"], c=roles["c"], **hyper)
    else:
        prior = RegularizedHorseshoe(tau=roles["tau"], lambda_tilde=roles["lambda_tilde"],
                                     **hyper)
    return LogisticRegression(
        X, y, coef=roles["coef"], intercept=intercept, prior=prior,
        intercept_prior=(Normal(_setting(data, priors, "scale_icept", entry))
                         if intercept else None))


def likelihood_family(name: str, X, y, *, has_intercept: bool = True):
    """The model family computing a registered program's likelihood (flat priors).

    Parameters
    ----------
    name : str
        A registered name.
    X, y : arrays
        Rows (n, D) and 0/1 outcomes (n,).
    has_intercept : bool
        For the horseshoe program: whether the draws carry the intercept ``beta0``.

    Returns
    -------
    LogisticRegression or ReLUNet
        Its ``log_lik`` and ``linear_predictor`` are the program's; its priors are flat
        (the likelihood does not involve them).

    Examples
    --------
    >>> import numpy as np
    >>> likelihood_family("relu1", np.eye(2), [0, 1]).names["W1"]
    'W1'
    """
    entry = resolve(name)
    roles = entry.roles
    if entry.program == "relu_net":
        return ReLUNet(X, y, W1=roles["W1"], b1=roles["b1"], w2=roles["w2"], b2=roles["b2"])
    intercept = roles["intercept"] if has_intercept else None
    return LogisticRegression(X, y, coef=roles["coef"], intercept=intercept, prior=Flat(),
                              intercept_prior=Flat() if intercept else None)


def _zero_mean_normal(prior, what: str) -> float:
    if not isinstance(prior, Normal) or prior.loc != 0.0:
        raise ValueError(
            f"no bundled program has the {what} prior {prior!r}: the bundled programs use "
            "normal(0, sd); write the Stan program and pass program=StanProgram(...) "
            "(StanProgram.with_mixis() adds the mixture flag)")
    return prior.sd


def bundled_program_for(model) -> tuple[str, dict]:
    """The bundled program encoding a model family exactly, and its prior settings.

    Parameters
    ----------
    model : LogisticRegression or ReLUNet
        A family with complete priors: ``Normal`` coefficients and intercept
        (``logistic_normal``), a ``RegularizedHorseshoe`` with every hyperprior setting
        (``scale_global``, ``nu_global``, ``nu_local``, ``slab_scale``, ``slab_df``) and a
        ``Normal`` intercept or none (``logistic_rhs``), or a ReLU net with known width
        (``relu_net``).

    Returns
    -------
    (str, dict)
        The program name and the prior settings to pass to
        `loo_adapt.stan.backends.stan_data` with the model's ``X`` and ``y``.

    Raises
    ------
    ValueError
        Where the family's priors have no exact bundled counterpart (never a silent change
        of prior).

    Examples
    --------
    >>> import numpy as np
    >>> m = LogisticRegression(np.eye(2), [0, 1], intercept="alpha", prior=Normal(2.0),
    ...                        intercept_prior=Normal(5.0))
    >>> bundled_program_for(m)
    ('logistic_normal', {'prior_sd': 2.0, 'scale_icept': 5.0})
    """
    if isinstance(model, ReLUNet):
        if model.hidden is None:
            raise ValueError("the ReLU net's width is unknown: build it with hidden=H")
        return "relu_net", {"H": int(model.hidden), "prior_sd": float(model.prior_sd)}
    if not isinstance(model, LogisticRegression):
        raise TypeError(
            f"no bundled program for a {type(model).__name__}; pass program=StanProgram(...)")
    icept = (_zero_mean_normal(model.intercept_prior, "intercept")
             if model.has_intercept else None)
    if isinstance(model.prior, RegularizedHorseshoe):
        hs = model.prior
        missing = [k for k in HORSESHOE_HYPERPRIORS if getattr(hs, k) is None]
        if missing:
            raise ValueError(
                f"the horseshoe prior does not say its hyperpriors {missing}: give them "
                "(RegularizedHorseshoe(..., scale_global=, nu_global=, nu_local=, "
                "slab_scale=, slab_df=), or build the family with "
                "loo_adapt.models.model_for(name, stan_data)) so the mixture program has "
                "the same prior")
        settings = {"has_intercept": int(model.has_intercept),
                    # unused by the program without an intercept, but it is data
                    "scale_icept": icept if icept is not None else 1.0}
        settings.update({k: float(getattr(hs, k)) for k in HORSESHOE_HYPERPRIORS})
        return "logistic_rhs", settings
    if not model.has_intercept:
        raise ValueError(
            "no bundled program has normal coefficients without an intercept "
            "(logistic_normal always has alpha); pass program=StanProgram(...)")
    return "logistic_normal", {"prior_sd": _zero_mean_normal(model.prior, "coefficient"),
                               "scale_icept": icept}
