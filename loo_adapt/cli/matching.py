"""Do the draws, the data and the model (a family or a Stan program) belong together?

Checked before anything is sampled or estimated, from what is cheap to read: the data's
entries and ``N``, the draws' variables and ``log_lik`` columns, and the declarations of
the program's data and parameters blocks (`loo_adapt.stan.declarations`). A mismatch is
one line that starts with "the model and the data do not match" and names the CLI options.
"""

from __future__ import annotations

import numpy as np

from loo_adapt.models import registry as _registry

from .inputs import FAMILIES, InputError

MISMATCH = "the model and the data do not match"

#: data entries a family's model can take from a command-line option instead of the data
_FLAG_ENTRIES = {"prior_sd": "--prior-sd", "scale_icept": "--scale-icept"}


class MismatchError(InputError):
    """Draws, data and model that do not belong together (exit code 1)."""

    def __init__(self, details: str):
        super().__init__(f"{MISMATCH}: {details}")


def _listed(names) -> str:
    names = list(names)
    shown = ", ".join(names[:8]) + (f", ... ({len(names)} in all)" if len(names) > 8 else "")
    return shown


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def n_log_lik(draws, var_name: str = "log_lik") -> int | None:
    """Number of observations in the draws' pointwise log-likelihood (None if absent)."""
    if var_name not in draws.variables:
        return None
    return int(np.prod(np.shape(draws.variables[var_name])[2:], dtype=np.int64))


def count_name(stan_file, data: dict, log_lik: str = "log_lik") -> str:
    """The data entry counting the observations of ``--program`` (as `StanProgram` counts
    them: `loo_adapt.stan.program.count_entry`)."""
    from loo_adapt.stan.program import count_entry

    return count_entry(stan_file, data, log_lik)


def check_observations(data: dict, data_path, n: int | None, count: str = "N") -> None:
    """The data's count of observations (``count``, ``N`` unless the program sizes log_lik
    by another entry), and a 1-D ``y`` where the count is ``N``, are as many as the draws'
    log_lik columns."""
    if n is None:
        return
    if _is_int(data.get(count)) and data[count] != n:
        raise MismatchError(f"--data {data_path} has {count} = {data[count]} observations, the "
                            f"draws' log_lik has {n} columns; give the data the draws were "
                            "fitted with")
    y = data.get("y")
    if (count == "N" and isinstance(y, list) and y and not isinstance(y[0], list)
            and len(y) != n):
        raise MismatchError(f"--data {data_path} has {len(y)} values of y, the draws' "
                            f"log_lik has {n} columns; give the data the draws were fitted "
                            "with")


def _declared_data(program: str) -> set[str]:
    return set(_registry.resolve(program).required_data) - {"mixis"}


def _families_fitting(data: dict) -> list[str]:
    """Families whose program reads every entry of ``data`` and finds what it needs."""
    keys = set(data) - {"mixis"}
    out = []
    for family, program in FAMILIES.items():
        entry = _registry.resolve(program)
        wanted = _declared_data(program)
        if wanted - set(entry.prior_defaults) <= keys <= wanted | set(entry.prior_defaults):
            out.append(family)
    return out


def check_family(family: str, model_option: str, data: dict, data_path, *,
                 given_flags=()) -> None:
    """The data holds what ``--model`` reads and nothing that only another family reads.

    ``given_flags``: data entries supplied on the command line (``prior_sd`` for
    ``--prior-sd``)."""
    program = FAMILIES[family]
    entry = _registry.resolve(program)
    wanted = _declared_data(program)
    structural = wanted - set(entry.prior_defaults)
    missing = sorted(structural - set(data))
    others = [f for f in _families_fitting(data) if f != family]
    hint = (f" (it looks like data for --model {' or '.join(others)})" if others else "")
    if missing:
        raise MismatchError(f"--model {model_option} reads the data entries "
                            f"{_listed(missing)}, which --data {data_path} lacks{hint}")
    absent = sorted(wanted - set(data) - set(given_flags))
    foreign = sorted(set(data) - wanted - {"mixis"})
    if absent and foreign:
        flags = [_FLAG_ENTRIES[a] for a in absent if a in _FLAG_ENTRIES]
        also = f"; if it is, pass {' and '.join(flags)}" if flags else ""
        raise MismatchError(f"--model {model_option} reads {_listed(absent)}, which --data "
                            f"{data_path} lacks, and does not read its {_listed(foreign)}"
                            f"{hint}{also}")


def check_family_draws(family: str, model_option: str, names: dict, draws, csv) -> None:
    """Every parameter ``--model`` reads (by ``--names``) is a variable of the draws."""
    have = set(draws.variables)
    for role, name in names.items():
        if name is not None and name not in have:
            fits = [f for f, roles in ((f, _registry.resolve(p).roles)
                                       for f, p in FAMILIES.items())
                    if f != family and set(roles.values()) - {None} <= have]
            hint = f", like a fit of --model {' or '.join(fits)}" if fits else ""
            raise MismatchError(
                f"--model {model_option} reads the parameter {name!r} ({role}), which the "
                f"draws in {csv} do not hold; they hold {_listed(sorted(have))}{hint}. Give "
                "the --model the draws were fitted with, or name its variables with --names")


def check_program(stan_file, data: dict, data_path, draws, csv,
                  log_lik: str = "log_lik") -> None:
    """``--program``'s data block is in ``--data`` and its parameters are in the draws.

    Read from the program's declarations, so a wrong pairing is refused before anything
    is compiled or sampled."""
    from loo_adapt.stan.declarations import declared

    try:
        blocks = declared(stan_file)
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"--program {stan_file}: cannot read it ({err})") from None
    except ValueError as err:
        raise InputError(f"--program {stan_file}: {err}") from None
    missing = [name for name in blocks.get("data", []) if name not in data and name != "mixis"]
    if missing:
        raise MismatchError(f"--program {stan_file} declares the data entries "
                            f"{_listed(missing)}, which --data {data_path} lacks")
    if draws is None:
        return
    params = [name for name in blocks.get("parameters", []) if name not in draws.variables]
    if params:
        raise MismatchError(
            f"--program {stan_file} has the parameters {_listed(params)}, which the draws in "
            f"{csv} do not hold (they hold {_listed(sorted(draws.variables))}); give the "
            "program the draws were fitted with")
    writes = {name for block in ("generated quantities", "transformed parameters")
              for name in blocks.get(block, [])}
    if log_lik not in writes:
        raise InputError(f"--program {stan_file} writes no {log_lik}: LOO needs "
                         f"'generated quantities {{ vector[N] {log_lik}; ... }}'")
