"""Write R loo's stored test outputs used by tests/test_compare.py and tests/test_score.py.

R is not needed: the values are R loo's own test snapshots (tests/testthat/_snaps/*.md,
``expect_snapshot_value(style = "serialize")`` blobs and printed tables) and its example data
(``example_loglik_array()``, in R/sysdata.rda), read from a clone of stan-dev/loo:

    python tests/data/r_loo/extract.py /path/to/loo/git/dir [commit]

Writes ``example_loglik_array.npz`` (the 500 x 2 x 32 array, draws x chains x observations,
as R orders it) and ``reference.json`` (every number at full double precision, with the
loo version and commit they come from).  The tests rebuild R's other inputs with
``tests/r_reference.py`` (R's random numbers), so nothing here depends on R being installed.
"""

from __future__ import annotations

import bz2
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
from r_reference import unserialize  # noqa: E402


def show(repo, commit, path, binary=False):
    out = subprocess.run(["git", "-C", repo, "show", f"{commit}:{path}"], capture_output=True,
                         check=True)
    return out.stdout if binary else out.stdout.decode()


def blobs(md: str) -> list:
    """Every serialize blob of a snapshot file, in order."""
    out = []
    for sec in re.split(r"\n---\n|\n# ", md):
        lines = [ln.strip() for ln in sec.splitlines()
                 if ln.startswith("    ") and re.fullmatch(r"[A-Za-z0-9+/=]+", ln.strip())]
        if len(lines) > 3:
            out.append(unserialize("".join(lines)))
    return out


def frame(obj) -> dict:
    values, attrs = obj
    cols = {}
    for name, v in zip(attrs["names"], values):
        cols[name] = [None if isinstance(x, float) and np.isnan(x) else x
                      for x in (v.tolist() if isinstance(v, np.ndarray) else v)]
    return cols


def printed(md: str, title: str, occurrence: int = 1) -> list[str]:
    """The Output lines of the ``occurrence``-th snapshot whose code is ``title``."""
    sec = md.split(f"      {title}\n    Output\n")[occurrence]
    lines = []
    for ln in sec.splitlines():
        if not ln.startswith("      "):
            break
        lines.append(ln[6:])
    return lines


def main(repo, commit="HEAD"):
    desc = show(repo, commit, "DESCRIPTION")
    version = re.search(r"^Version: (.*)$", desc, re.M).group(1)
    sha = subprocess.run(["git", "-C", repo, "rev-parse", commit], capture_output=True,
                         text=True, check=True).stdout.strip()
    arr = unserialize(bz2.decompress(show(repo, commit, "R/sysdata.rda", binary=True)))
    values, attrs = arr[".example_loglik_array"]
    ll = values.reshape(attrs["dim"].astype(int), order="F")
    np.savez_compressed(HERE / "example_loglik_array.npz", ll=ll)

    cmp_md = show(repo, commit, "tests/testthat/_snaps/compare.md")
    cb = blobs(cmp_md)
    crps_md = show(repo, commit, "tests/testthat/_snaps/crps.md")
    sb = blobs(crps_md)
    scores = {}
    for name, obj in zip(("crps", "scrps", "loo_crps", "loo_scrps"), sb):
        (est, _), pointwise = obj[0]
        scores[name] = {"estimate": float(est[0]), "se": float(est[1]),
                        "pointwise": pointwise.tolist()}
    ref = {
        "source": f"stan-dev/loo {version} ({sha}): tests/testthat/_snaps/compare.md, "
                  "_snaps/crps.md, R/sysdata.rda",
        "loo_compare_waic_w1_w1": frame(cb[0]),
        "loo_compare_waic_w1_w2": frame(cb[1]),
        "loo_compare_waic_w1_w2_w3": frame(cb[2]),
        "print_w1_w2": printed(cmp_md, "print(comp2)"),
        "print_w1_w2_w3": printed(cmp_md, "print(comp1)", 2),
        "print_loo_LL_plus_0_1_2_simplify_false": printed(cmp_md,
                                                          "print(comp, simplify = FALSE)"),
        "crps_scores": scores,
    }
    (HERE / "reference.json").write_text(json.dumps(ref, indent=1) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
