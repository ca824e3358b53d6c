"""R's random numbers and serialized values, in numpy, to rebuild R loo's test inputs.

R loo's tests (stan-dev/loo, tests/testthat) draw their inputs with ``set.seed`` and
``rnorm`` / ``sample`` and store the outputs as snapshots (``_snaps/*.md``: R ``serialize``
blobs in base64).  With R's generator reproduced here the inputs are rebuilt exactly, so the
stored outputs are an independent oracle without R on the machine.

* `RRandom`: R's default generator (Mersenne-Twister, ``set.seed`` scrambling, normal
  ``"Inversion"``, sample ``"Rejection"``, R >= 3.6): ``runif``, ``rnorm``, ``sample``.
* `unserialize`: R's XDR ``serialize`` format (enough of it for numeric vectors, lists,
  strings and attributes), e.g. for ``expect_snapshot_value(style = "serialize")`` blobs.
"""

from __future__ import annotations

import base64
import struct

import numpy as np
from scipy.special import ndtri

_MASK = 0xFFFFFFFF


class RRandom:
    """R's ``set.seed(seed)`` followed by ``runif`` / ``rnorm`` / ``sample``."""

    def __init__(self, seed: int):
        s = seed & _MASK
        for _ in range(50):  # initial scrambling (RNG.c, RNG_Init)
            s = (69069 * s + 1) & _MASK
        key = []
        for _ in range(625):  # dummy[0] (mti, fixed up to 624) and mt[0..623]
            s = (69069 * s + 1) & _MASK
            key.append(s)
        bitgen = np.random.MT19937()
        bitgen.state = {"bit_generator": "MT19937",
                        "state": {"key": np.array(key[1:], dtype=np.uint32), "pos": 624}}
        self._bitgen = bitgen

    def _unif(self, size: int) -> np.ndarray:
        """unif_rand(): MT_genrand() with R's fixup to (0, 1)."""
        raw = self._bitgen.random_raw(size).astype(np.float64)
        u = raw * 2.3283064365386963e-10
        i2_32m1 = 2.328306437080797e-10
        return np.where(u <= 0.0, 0.5 * i2_32m1, np.where(1.0 - u <= 0.0, 1.0 - 0.5 * i2_32m1, u))

    def runif(self, n: int) -> np.ndarray:
        return self._unif(n)

    def rnorm(self, n: int, mean=0.0, sd=1.0) -> np.ndarray:
        """rnorm(n, mean, sd) with R's inversion (two uniforms per draw, 2^27 grid)."""
        big = 134217728.0
        u = self._unif(2 * n).reshape(n, 2)
        z = ndtri((np.floor(big * u[:, 0]) + u[:, 1]) / big)
        return np.broadcast_to(mean, (n,)) + np.broadcast_to(sd, (n,)) * z

    def _unif_index(self, dn: int) -> int:
        """R_unif_index(dn) with sample.kind = "Rejection"."""
        if dn <= 0:
            return 0
        bits = int(np.ceil(np.log2(dn)))
        while True:
            v = 0
            for _ in range(0, bits + 1, 16):
                v = 65536 * v + int(np.floor(self._unif(1)[0] * 65536))
            v &= (1 << bits) - 1
            if v < dn:
                return v

    def sample(self, n: int) -> np.ndarray:
        """sample(1:n) (a permutation), as 0-based indices."""
        x = list(range(n))
        out = np.empty(n, dtype=np.int64)
        m = n
        for i in range(n):
            j = self._unif_index(m)
            out[i] = x[j]
            m -= 1
            x[j] = x[m]
        return out


# --------------------------------------------------------------------------- unserialize
class _Reader:
    def __init__(self, buf: bytes):
        self.buf, self.pos = buf, 0

    def take(self, n):
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def int(self):
        return struct.unpack(">i", self.take(4))[0]


def unserialize(blob):
    """An R object from ``serialize()`` bytes (or the base64 text of a snapshot).

    Returns numpy arrays for numeric/logical/integer vectors (NA as NaN), lists of str for
    character vectors, lists for generic vectors; attributes as ``(value, {name: attr})``
    when there are any.
    """
    if isinstance(blob, str):
        blob = base64.b64decode("".join(blob.split()))
    if blob[:5] in (b"RDX2\n", b"RDX3\n"):
        blob = blob[5:]
    r = _Reader(blob)
    if r.take(2) != b"X\n":
        raise ValueError("not an XDR serialization")
    version = r.int()
    r.int(), r.int()
    if version == 3:
        r.take(r.int())  # native encoding
    refs = []
    return _item(r, refs)


def _item(r, refs):
    flags = r.int()
    typ = flags & 0xFF
    has_attr = bool(flags & (1 << 9))
    has_tag = bool(flags & (1 << 10))
    if typ == 254:  # NILVALUE_SXP
        return None
    if typ == 255:  # REFSXP
        return refs[(flags >> 8) - 1]
    if typ in (251, 242, 253, 252):  # empty env, emptyenv, global env, base env ...
        return None
    if typ == 1:  # SYMSXP
        name = _item(r, refs)
        refs.append(name)
        return name
    if typ == 9:  # CHARSXP
        n = r.int()
        return None if n == -1 else r.take(n).decode("utf-8")
    if typ in (2, 17):  # LISTSXP (pairlist): attributes
        out = {}
        while typ in (2, 17):
            attr = _item(r, refs) if has_attr else None
            tag = _item(r, refs) if has_tag else None
            out[tag] = _item(r, refs)
            del attr
            flags = r.int()
            typ = flags & 0xFF
            has_attr = bool(flags & (1 << 9))
            has_tag = bool(flags & (1 << 10))
        return out
    n = r.int()
    if typ == 14:  # REALSXP
        value = np.frombuffer(r.take(8 * n), dtype=">f8").astype(float)
    elif typ in (13, 10):  # INTSXP, LGLSXP
        raw = np.frombuffer(r.take(4 * n), dtype=">i4")
        value = np.where(raw == -2147483648, np.nan, raw.astype(float))
    elif typ == 16:  # STRSXP
        value = [_item(r, refs) for _ in range(n)]
    elif typ == 19:  # VECSXP
        value = [_item(r, refs) for _ in range(n)]
    else:
        raise ValueError(f"SEXP type {typ} not handled")
    if has_attr:
        return value, _item(r, refs)
    return value
