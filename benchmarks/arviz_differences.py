"""How far arviz's Pareto k-hat and elpd are from ours (= R loo) on the bundled CmdStan fits.

Run with either arviz line (same PYTHONPATH trick):
    PYTHONPATH=$PWD python benchmarks/arviz_differences.py          # arviz 0.x (py3.11 venv)
    PYTHONPATH=$PWD /work/venv312/bin/python benchmarks/arviz_differences.py   # arviz 1.x

Prints, per fixture, max |k_ours - k_arviz| and max |elpd_i ours - arviz| with r_eff = 1 on
both sides, and with each side's default r_eff (ours: R loo's relative_eff of exp(log_lik)
per observation; arviz: the mean ESS of the posterior parameters / S, one number).
"""

import warnings
from pathlib import Path

import numpy as np

import loo_adapt
from loo_adapt.evaluation.arviz import arviz_major, khat_from_elpd_data

warnings.simplefilter("ignore")
ROOT = Path(__file__).resolve().parents[1] / "tests" / "data" / "cmdstan"


def arviz_loo(draws, reff):
    import arviz as az

    ll = draws.log_lik()
    post = {k: v for k, v in draws.variables.items() if k != "log_lik"}
    if arviz_major() == 0:
        data = az.from_dict(posterior=post, log_likelihood={"log_lik": ll})
    else:
        from arviz_base import from_dict

        data = from_dict({"posterior": post, "log_likelihood": {"log_lik": ll}})
    return az.loo(data, pointwise=True, reff=reff)


def elpd_i(res):
    return np.ravel(res["loo_i"] if arviz_major() == 0 else res.elpd_i)


def main():
    import arviz

    print(f"arviz {arviz.__version__}")
    for name in ("logistic_normal", "relu1", "rhs_logistic"):
        files = sorted((ROOT / name / "sample").glob("*.csv"))
        if not files:
            continue
        draws = loo_adapt.read_csv([str(f) for f in files])
        for label, ours_reff, their_reff in (("r_eff = 1", 1.0, 1.0), ("defaults", None, None)):
            ours = loo_adapt.loo(draws, reff=ours_reff)
            theirs = arviz_loo(draws, their_reff)
            dk = np.abs(khat_from_elpd_data(ours) - khat_from_elpd_data(theirs))
            de = np.abs(elpd_i(ours) - elpd_i(theirs))
            print(f"{name:16s} {label:10s} S={draws.n_samples} n={dk.size}: "
                  f"max |dk| = {np.nanmax(dk):.3g}, max |d elpd_i| = {np.nanmax(de):.3g}")


if __name__ == "__main__":
    main()
