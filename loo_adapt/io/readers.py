"""Compatibility module: the readers now live one per source in `loo_adapt.io`."""

from loo_adapt.io import (  # noqa: F401
    ACCEPTED,
    read_array,
    read_cmdstanpy,
    read_columns,
    read_csv,
    read_dict,
    read_draws,
    read_inference_data,
    read_stanli,
    write_stan_csv,
)
from loo_adapt.io.columns import (  # noqa: F401
    MCMC_STATS,
    group_columns,
    normalize_method,
    stan_name_to_index,
)
