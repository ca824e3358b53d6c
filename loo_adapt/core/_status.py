"""Status codes the PSIS kernels (numba and numpy) return per column, and their epsilon."""

import numpy as np

# Status codes returned per column by the PSIS kernels.
_OK, _SHORT_TAIL, _CONSTANT_TAIL, _FIT_FAILED, _BAD, _ALL_NEG_INF = 0, 1, 2, 3, 4, 5

_DBL_EPS = np.finfo(float).eps
