"""Write the PSIS-LOO reference values of tests/core/test_psis.py with arviz 0.x.

arviz 0.x implements R loo's PSIS (gpdfit, smoothing, truncation, MCSE-free elpd_i) in its
own numpy code; its values are the oracle, stored so that the tests also run where arviz
1.x (a different Pareto fit) is installed.  Run with arviz < 1 from the repository root:

    python tests/data/psis_reference/make_reference.py

Writes ``<case>.csv`` with columns ``khat`` (arviz.psislw) and, for LOO cases, ``elpd_loo``
(arviz.loo(..., pointwise=True).loo_i) and ``khat_loo`` (its pareto_k); 17 significant
digits.  The cases are built in ``cases()`` from the CmdStan fixture and seeded simulations.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

HERE = Path(__file__).resolve().parent
FIXTURE = HERE.parents[0] / "cmdstan" / "logistic_normal" / "sample"


def fixture_log_lik() -> np.ndarray:
    """(chains, draws, n) = (4, 250, 54) log_lik of the logistic_normal fixture."""
    out = []
    for f in sorted(FIXTURE.glob("logistic_normal-*_[1-4].csv")):
        df = pd.read_csv(f, comment="#")
        cols = sorted((c for c in df.columns if c.startswith("log_lik.")),
                      key=lambda c: int(c.split(".")[1]))
        out.append(df[cols].to_numpy(dtype=float))
    return np.stack(out, axis=0)


def heavy_tailed_ll(seed=3, n_draws=2000, n_obs=40) -> np.ndarray:
    """Normal-model log-likelihoods with a few outlying observations: heavy-tailed ratios."""
    rng = np.random.default_rng(seed)
    mu = rng.normal(0.0, 0.3, size=n_draws)
    sd = np.exp(rng.normal(0.0, 0.15, size=n_draws))
    y = rng.normal(size=n_obs)
    outliers = [3.5, -4.0, 5.0, 6.0, -7.0, 4.5]
    m = min(n_obs, len(outliers))
    y[:m] = outliers[:m]
    return stats.norm.logpdf(y[None, :], loc=mu[:, None], scale=sd[:, None])


def cases():
    """name -> (log_lik (chains, draws, n), r_eff)."""
    ll = fixture_log_lik()
    heavy = heavy_tailed_ll(seed=5).reshape(4, 500, -1)
    big = heavy_tailed_ll(seed=9, n_draws=16000, n_obs=12).reshape(4, 4000, -1)
    return {
        "fixture_reff1": (ll, 1.0),
        "fixture_reff06": (ll, 0.6),
        "heavy_reff1": (heavy, 1.0),
        "heavy_reff07": (heavy, 0.7),
        "heavy16000_reff1": (big, 1.0),
    }


def main() -> None:
    import arviz as az

    if int(az.__version__.split(".")[0]) >= 1:
        sys.exit("needs arviz 0.x (R loo's PSIS); arviz 1.x fits the tail differently")
    for name, (ll, reff) in cases().items():
        s = ll.shape[0] * ll.shape[1]
        lr_t = np.ascontiguousarray(-ll.reshape(s, -1).T)
        _, khat = az.psislw(lr_t, reff=reff)
        idata = az.from_dict(posterior={"a": np.zeros(ll.shape[:2])}, log_likelihood={"y": ll})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = az.loo(idata, pointwise=True, reff=reff)
        pd.DataFrame({
            "khat": np.asarray(khat),
            "elpd_loo": res.loo_i.values,
            "khat_loo": res.pareto_k.values,
        }).to_csv(HERE / f"{name}.csv", index=False, float_format="%.17g")
        print(name, ll.shape, f"arviz {az.__version__}")


if __name__ == "__main__":
    main()
