"""The Stan programs bundled with loo_adapt (``*.stan`` files, shipped as package data).

Use :func:`loo_adapt.stan.backends.stan_model_path` to find them and
:func:`loo_adapt.stan.backends.stan_data` to build their data.
"""
