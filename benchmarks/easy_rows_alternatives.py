"""Cheaper ways to fix the full mixture's easy rows than the 4 x 4000-draw focused fit, each
measured against brute-force truth (issue 21: the focus is most of the cost with a program).

On wide horseshoe fits the rows the full mixture finds easy (Kish ESS > 400) err optimistic
together (`benchmarks/results/focus_easy_rows.txt`).  `FocusedEasyMixIS` fixes them with one
more mixture fit of 4 x 4000 draws, about two posterior fits.  Three cheaper candidates:

    defensive   the posterior draws added to the full mixture's, weighted by the balance
                heuristic (proposal (S_p p + S_q q) / (S_p + S_q); q's normaliser from its
                own draws, E_q[1 / sum_j 1/l_j] = 1 / Z): no new fit.
    draws       the focused fit with fewer draws: disjoint windows of D draws per chain of
                one 4 x 4000 fit (each window a replicate), alone and with the full
                mixture's draws added (balance heuristic over the two mixtures).
    halves      a bias correction by halves, 2 est(S) - mean(est of each half): removes a
                bias of order 1/S (none of the candidates needs a new fit).

Per benchmark and seed it prints, over the easy rows, mean and rms of z = error / (MCSE and
truth's MC error combined) and the summed error.  The 4 x 4000 focused fits are cached under
`benchmarks/cache/` (``<name>-focuseasy4000-seed<k>.pkl``).

    python benchmarks/easy_rows_alternatives.py --study defensive|draws|halves
                                                [--benchmarks ...] [--seeds 1 2 3]
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.special import logsumexp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from focus_easy_rows import z_summary  # noqa: E402
from truth_suite import CACHE, calibration_z, load_benchmark, mixture_fit  # noqa: E402

from loo_adapt.core.ess_split import ess_mean  # noqa: E402
from loo_adapt.core.mixis import mixis_loo  # noqa: E402
from loo_adapt.estimators.focused import FOCUS_SEED_OFFSET  # noqa: E402

WIDE = ["rhs_microarray_next", "rhs_wide_099", "rhs_microarray", "rhs_wide"]


def balanced(sets, rows_of):
    """Self-normalised LOO over several draw sets, each of a mixture proportional to
    p(theta | D) sum_{j in rows} 1 / l_j (rows None: every observation; the posterior
    itself is given as rows=[] and weight 1), weighted by the balance heuristic.  Returns
    (elpd_i, mcse_i): the delta method with each set's own ESS."""
    n = sets[0].shape[2]
    sizes = [s.shape[0] * s.shape[1] for s in sets]
    total = sum(sizes)
    flat = [s.reshape(-1, n) for s in sets]
    log_a, log_zinv = [], []
    for k, rows in enumerate(rows_of):
        if rows is not None and len(rows) == 0:  # the posterior: density ratio 1
            log_a.append([np.zeros(f.shape[0]) for f in flat])
            log_zinv.append(0.0)
            continue
        cols = slice(None) if rows is None else rows
        la = [logsumexp(-f[:, cols], axis=1) for f in flat]
        log_a.append(la)
        log_zinv.append(logsumexp(-la[k]) - np.log(sizes[k]))
    log_r = [np.log(total) - logsumexp(np.stack(
        [np.log(sizes[k]) + log_a[k][m] + log_zinv[k] for k in range(len(sets))]), axis=0)
        for m in range(len(sets))]
    lr, ll = np.concatenate(log_r), np.concatenate(flat)
    log_num = logsumexp(lr)
    lb = lr[:, None] - ll
    log_den = logsumexp(lb, axis=0)
    z = (np.exp(lr - log_num + np.log(total))[:, None] - np.exp(lb - log_den + np.log(total)))
    var, start = 0.0, 0
    for s, size in zip(sets, sizes):
        zk = z[start:start + size]
        start += size
        vk = zk.var(axis=0, ddof=1)
        ess = np.where(vk > 0, ess_mean(zk.reshape(s.shape[0], s.shape[1], n)), size)
        var = var + (size / total) ** 2 * vk / ess
    return log_num - log_den, np.sqrt(var)


def halves_corrected(ll):
    """2 est(S) - mean(est(first half), est(second half)) per observation, and the plain
    result."""
    full = mixis_loo(ll)
    d = ll.shape[1] // 2
    h = 0.5 * (mixis_loo(ll[:, :d]).elpd_i + mixis_loo(ll[:, d:2 * d]).elpd_i)
    return 2.0 * full.elpd_i - h, full


def focused_fit(bench, seed, easy):
    cache = CACHE / f"{bench.name}-focuseasy4000-seed{seed}.pkl"
    if cache.exists():
        return pickle.loads(cache.read_bytes())
    t0 = time.perf_counter()
    fit = bench.program.fit_mixture(bench.draws, seed=seed + FOCUS_SEED_OFFSET, rows=easy,
                                    chains=4, draws=4000)
    out = (fit, time.perf_counter() - t0)
    cache.write_bytes(pickle.dumps(out))
    return out


def line(label, e, m, truth_rows):
    return f"  {label:30s} {z_summary(e, m, truth_rows)}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", required=True, choices=("defensive", "draws", "halves"))
    parser.add_argument("--benchmarks", nargs="*", default=WIDE)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    for name in args.benchmarks:
        bench = load_benchmark(name)
        truth = bench.truth
        pos = {int(i): k for k, i in enumerate(truth[:, 0].astype(int))}
        post = np.asarray(bench.draws.log_lik())
        for seed in args.seeds:
            mix, _ = mixture_fit(bench, seed)
            llf = np.asarray(mix.log_lik())
            n = llf.shape[2]
            full = mixis_loo(llf)
            easy = np.array([i for i in np.flatnonzero(full.ess > 400) if i in pos])
            rows_t = truth[[pos[i] for i in easy]]
            t, tm = rows_t[:, 1], rows_t[:, 2]
            out = [f"{name} seed {seed}: {easy.size} easy rows",
                   line("full mixture (4 x 1000)", full.elpd_i[easy], full.mcse_elpd_i[easy],
                        rows_t)]
            if args.study == "defensive":
                e, m = balanced([post if post.ndim == 3 else post[None], llf], [[], None])
                out.append(line("posterior + full mixture", e[easy], m[easy], rows_t))
            elif args.study == "halves":
                c, _ = halves_corrected(llf)
                out.append(line("full, corrected by halves", c[easy], full.mcse_elpd_i[easy],
                                rows_t))
                fit, _ = focused_fit(bench, seed, easy)
                ll_r = np.asarray(fit.log_lik()).reshape(4, -1, n)[..., easy]
                c, fo = halves_corrected(ll_r)
                out.append(line("focused (4 x 4000)", fo.elpd_i, fo.mcse_elpd_i, rows_t))
                out.append(line("focused, corrected by halves", c, fo.mcse_elpd_i, rows_t))
            else:
                fit, secs = focused_fit(bench, seed, easy)
                ll_r = np.asarray(fit.log_lik()).reshape(4, -1, n)
                out[0] += f" (focused fit {secs:.0f} s)"
                for d in (1000, 2000, 3000, 4000):
                    zs, zc = [], []
                    for w in range(4000 // d):
                        part = ll_r[:, w * d:(w + 1) * d]
                        fo = mixis_loo(part[..., easy])
                        zs.append(calibration_z(fo.elpd_i, fo.mcse_elpd_i, t, tm))
                        e, m = balanced([llf, part], [None, easy])
                        zc.append(calibration_z(e[easy], m[easy], t, tm))
                    rms = "/".join(f"{np.sqrt(np.mean(z**2)):.2f}" for z in zs)
                    rmc = "/".join(f"{np.sqrt(np.mean(z**2)):.2f}" for z in zc)
                    out.append(f"  focused 4 x {d}: rms z per window {rms}, mean z "
                               f"{np.mean(zs):+.2f}; with the full mixture's draws {rmc}, "
                               f"mean z {np.mean(zc):+.2f}")
            print("\n".join(out), flush=True)


if __name__ == "__main__":
    main()
