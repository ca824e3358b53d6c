"""The closed-form LOO of a normal mean the core tests score MixIS and pooling against.

y_i ~ N(mu, 1) with a flat prior: the LOO posterior of mu is N(m_-i, 1/(n-1)) and the LOO
predictive N(m_-i, 1 + 1/(n-1)); the MixIS mixture p(mu | y) sum_j 1/p(y_j | mu) is the
mixture of those LOO posteriors with weights proportional to 1 / p(y_j | y_-j).
"""

import numpy as np
from scipy.stats import norm


def normal_mean_loo(outliers, n=20, seed=3):
    """(y, m_-i, log p(y_i | y_-i), the mixture's component weights) for ``n`` standard
    normal draws (``seed``) with ``outliers`` ({row: value}) put in."""
    rng = np.random.default_rng(seed)
    y = rng.normal(size=n)
    for i, value in outliers.items():
        y[i] = value
    m_loo = np.array([np.delete(y, i).mean() for i in range(n)])
    truth = norm.logpdf(y, m_loo, np.sqrt(1.0 + 1.0 / (n - 1)))
    mix_p = np.exp(-truth - np.logaddexp.reduce(-truth))
    return y, m_loo, truth, mix_p
