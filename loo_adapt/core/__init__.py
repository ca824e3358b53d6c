"""Array core: numpy in, numpy out (PSIS, generalized Pareto fit, ESS, input checks).

Nothing here imports arviz, xarray, matplotlib, readers or Stan backends.
"""
