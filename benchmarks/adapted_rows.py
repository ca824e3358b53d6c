"""The rows the default *without* a program takes from adaptive IS instead of PSIS, scored
against brute-force truth on the whole truth suite (three seeds): per row its plain-PSIS
k-hat, the adapted k-hat, its error and PSIS's, its z (error over the row's MCSE and the
truth's MC in quadrature) and what verified it ("certified": the bias checks; "khat": the
adapted k-hat alone).  Issue 10's "never worse than PSIS" rests on these rows.

    LOO_ADAPT_COLON_CSV=.../colon.csv python benchmarks/adapted_rows.py
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth_suite import benchmark_names, calibration_z, load_benchmark  # noqa: E402

from loo_adapt.api import loo  # noqa: E402


def main() -> None:
    warnings.simplefilter("ignore")
    zs = {}
    for name in benchmark_names("all"):
        b = load_benchmark(name)
        truth = np.asarray(b.truth)
        idx = truth[:, 0].astype(int)
        p = loo(b.draws, estimator="psis", y=b.data.get("y")).loo_adapt
        for seed in (1, 2, 3):
            r = loo(b.draws, model=b.model, seed=seed).loo_adapt
            for k, i in enumerate(idx):
                if abs(r.elpd_i[i] - p.elpd_i[i]) <= 1e-12 or not r.reliable[i]:
                    continue
                e, ep = r.elpd_i[i] - truth[k, 1], p.elpd_i[i] - truth[k, 1]
                z = calibration_z(r.elpd_i[i], r.mcse_elpd_i[i], truth[k, 1], truth[k, 2])
                zs.setdefault(r.verified_by[i], []).append(z)
                print(f"{name} seed {seed} row {i}: k-hat {r.pareto_k[i]:.2f} -> "
                      f"{r.khat_after[i]:.2f}, error {e:+.3f} (PSIS {ep:+.3f}), z {z:+.2f}, "
                      f"verified by {r.verified_by[i]}", flush=True)
    for by, z in zs.items():
        z = np.asarray(z)
        print(f"verified by {by}: {z.size} rows, rms z {np.sqrt(np.mean(z ** 2)):.2f}, "
              f"largest |z| {np.abs(z).max():.2f}")


if __name__ == "__main__":
    main()
