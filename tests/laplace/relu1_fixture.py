"""The relu1 CmdStan fixture read with plain numpy (independent of loo_adapt.io.readers),
shared by the bridge tests."""

import glob
import io
import json
import os
from pathlib import Path

import numpy as np

FIXTURE = str(Path(__file__).resolve().parents[1] / "data" / "cmdstan")


def read_relu1():
    """(Stan data, {W1, b1, w2, b2} as (chains, draws, ...) arrays, lp__ (chains, draws))."""
    data = json.load(open(os.path.join(FIXTURE, "relu1.data.json")))
    D, H = data["D"], data["H"]
    chains = []
    for path in sorted(glob.glob(os.path.join(FIXTURE, "relu1", "sample", "*.csv"))):
        lines = [ln for ln in open(path) if not ln.startswith("#")]
        header = lines[0].strip().split(",")
        arr = np.loadtxt(io.StringIO("".join(lines[1:])), delimiter=",", ndmin=2)
        chains.append(dict(zip(header, arr.T)))
    S = len(chains[0]["lp__"])
    W1 = np.array([[[[ch[f"W1.{d + 1}.{k + 1}"][s] for k in range(H)] for d in range(D)]
                    for s in range(S)] for ch in chains])
    b1 = np.array([np.stack([ch[f"b1.{k + 1}"] for k in range(H)], -1) for ch in chains])
    w2 = np.array([np.stack([ch[f"w2.{k + 1}"] for k in range(H)], -1) for ch in chains])
    b2 = np.array([ch["b2"] for ch in chains])
    lp = np.array([ch["lp__"] for ch in chains])
    return data, {"W1": W1, "b1": b1, "w2": w2, "b2": b2}, lp
