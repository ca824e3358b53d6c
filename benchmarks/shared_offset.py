"""Does the easy-row focus show the full mixture's shared miss, and do the rows it keeps
carry it?

For each seed: the full mixture's MixIS estimates (its cached fit, not pooled) and the
default's final estimates (`benchmarks/error_by_fit.py --dump`, made with
``--no-shift`` so that the kept rows' estimates are the full mixture's own), grouped
as error_by_fit groups them.  Per group: how far the final estimates moved from the full
mixture's (``final - mix``, with the two MCSEs in quadrature), and each against the
brute-force truth.  Then the rule of `loo_adapt.estimators.focused_easy.shared_offset`: the
mean per-row difference ``d`` over the rows both fits verified, its z, and ``d`` times the
rows the full mixture keeps against their summed error.

    LOO_ADAPT_COLON_CSV=.../colon.csv python benchmarks/error_by_fit.py rhs_wide_099 \
        --no-shift --dump benchmarks/cache/rhs_wide_099-default-rows.npz
    LOO_ADAPT_COLON_CSV=.../colon.csv python benchmarks/shared_offset.py rhs_wide_099
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from truth_suite import load_benchmark, mixis_alone, mixture_fit  # noqa: E402

from loo_adapt.estimators.focused_easy import shared_offset  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("benchmark")
    ap.add_argument("--dump", default=None,
                    help="error_by_fit.py --dump file "
                         "(default benchmarks/cache/NAME-default-rows.npz)")
    args = ap.parse_args(argv)
    bench = load_benchmark(args.benchmark)
    truth = np.asarray(bench.truth)
    idx = truth[:, 0].astype(int)
    t = truth[:, 1]
    dump = np.load(args.dump or HERE / "cache" / f"{args.benchmark}-default-rows.npz",
                   allow_pickle=True)
    seeds = sorted(int(k.split("_")[1]) for k in dump.files if k.startswith("elpd_"))
    for seed in seeds:
        mix = mixture_fit(bench, seed)
        r = mixis_alone(bench.draws, mix[0])
        m, mm, mok = r.elpd_i[idx], r.mcse_elpd_i[idx], r.reliable[idx]
        e, em, g = dump[f"elpd_{seed}"], dump[f"mcse_{seed}"], dump[f"group_{seed}"]
        print(f"{args.benchmark} seed {seed}:")
        for lab in sorted(set(g)):
            k = g == lab
            mc = float(np.sqrt(np.sum(em[k] ** 2 + mm[k] ** 2)))
            print(f"  {lab:22s} {k.sum():3d} rows: final - mix {np.sum(e[k] - m[k]):+.2f} "
                  f"(MC {mc:.2f}); mix - truth {np.sum(m[k] - t[k]):+.2f}; final - truth "
                  f"{np.sum(e[k] - t[k]):+.2f}")
        kept = g == "mixture (mixis)"
        easy = np.array([str(x).startswith("focus") for x in g]) & ~kept
        # the easy-row focus is the largest focused group (the others: rows above the bar)
        sizes = {lab: int(np.sum(g == lab)) for lab in set(g[easy])}
        biggest = max(sizes, key=sizes.get) if sizes else None
        both = (g == biggest) & mok
        d, z = shared_offset(m[both], mm[both], e[both], em[both])
        print(f"  rule: d {d:+.4f} a row over {both.sum()} rows both verified (z {z:+.1f}); "
              f"{kept.sum()} kept rows: d x rows {d * kept.sum():+.2f}, their summed error "
              f"{np.sum(m[kept] - t[kept]):+.2f}")


if __name__ == "__main__":
    main()
