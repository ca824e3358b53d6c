"""Is MixIS's optimistic lean its second-order bias?  MixIS estimates elpd_i as
log N^ - log D^_i (N^ the mixture draws' mean of 1 / sum_j 1/l_j, D^_i the mean of
(1 / l_i) / sum_j 1/l_j), and to second order E[log N^ - log D^_i] - (log N - log D_i) =
(V_D - V_N) / 2, V the squared relative MCSE of each mean (its multi-chain ESS).  That is
not MCSE^2 / 2: where N^ and D^_i move together (an ordinary row) the MCSE of the
difference is small while V_D - V_N need not be.  This prints, per seed, the errors of the
rows MixIS verifies (MCSE <= 0.1) to brute-force truth, raw and with (V_D - V_N) / 2
subtracted, by the Kish ESS groups of `error_by_fit.py`, and the size of that term.

    LOO_ADAPT_COLON_CSV=.../colon.csv python benchmarks/mixis_second_order_bias.py NAME
        [--seeds 1 2 3] [--truth-from OTHER]

Measured (2026-12-06): the term is 0.0005-0.002 nats a row, a tenth of the lean; on
rhs_wide_099 the verified rows' summed errors, seeds 1-3, go from +1.06 / +3.05 / +1.09
to +0.96 / +2.98 / +0.99 with it subtracted, and the rows with Kish ESS > 400 keep mean
z +0.99 / +2.26 / +1.45: the lean is not this bias.

MixIS alone on the full mixture fit (`truth_suite.mixture_fit`, cached under
`benchmarks/cache/`), as `middle_rows_draws.py`.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth_suite import calibration_z, mixture_fit, mixture_study  # noqa: E402

from loo_adapt.core.ess_split import ess_mean  # noqa: E402
from loo_adapt.core.lse import logsumexp  # noqa: E402
from loo_adapt.core.mixis import mixis_log_weights, mixis_loo  # noqa: E402


def second_order_bias(log_lik) -> np.ndarray:
    """(V_D,i - V_N) / 2 per observation from (chains, draws, n) mixture log-likelihoods."""
    chains, draws, n = log_lik.shape
    s = chains * draws
    log_ratio, neg_lse = mixis_log_weights(log_lik)
    a = np.exp(neg_lse - logsumexp(neg_lse.reshape(-1))) * s  # a_s / mean a
    b = np.exp(log_ratio - logsumexp(log_ratio.reshape(s, n), axis=0)) * s  # b_is / mean b_i
    v_n = a.var(ddof=1) / ess_mean(a[..., None])[0]
    v_d = b.reshape(s, n).var(axis=0, ddof=1) / ess_mean(b)
    return 0.5 * (v_d - v_n)


def main(argv=None):
    args, bench, truth = mixture_study(__doc__, argv)
    idx = truth[:, 0].astype(int)
    for seed in args.seeds:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mix, _ = mixture_fit(bench, seed)
        ll = mix.log_lik()
        res = mixis_loo(ll)
        beta = second_order_bias(ll)[idx]
        mcse, kish = res.mcse_elpd_i[idx], res.ess[idx]
        held = mcse <= 0.1
        groups = {"verified": held, "Kish <= 400": held & (kish <= 400),
                  "Kish > 400": held & (kish > 400)}
        for label, est in (("raw", res.elpd_i[idx]), ("- (V_D - V_N)/2", res.elpd_i[idx] - beta)):
            err = est - truth[:, 1]
            z = calibration_z(est, mcse, truth[:, 1], truth[:, 2])
            parts = "; ".join(
                f"{g}: {m.sum()} rows, error {err[m].sum():+.3f}, mean z {z[m].mean():+.2f}, "
                f"rms z {np.sqrt(np.mean(z[m] ** 2)):.2f}" for g, m in groups.items() if m.any())
            print(f"{args.benchmark} seed {seed} {label:16s} {parts}")
        print(f"  (V_D - V_N)/2 over the verified rows: mean {beta[held].mean():+.4f}, largest "
              f"{beta[held].max():+.4f}; mean MCSE^2/2 {np.mean(mcse[held] ** 2) / 2:.4f}",
              flush=True)


if __name__ == "__main__":
    main()
