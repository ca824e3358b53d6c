"""Branch-free ``exp``, ``expm1``, ``log``, ``log1p`` for numba loops that LLVM can vectorise,
``vsum``, a reassociated sum that it vectorises too, and ``fma``, a fused multiply-add
(one rounding) for error-free products.

numba lowers ``math.exp`` / ``math.log1p`` to scalar libm calls (no SVML here), which keeps
every loop that uses them scalar: ~12-15 ns per value, most of the PSIS kernel's time.  The
functions below are plain arithmetic plus integer bit manipulation (through the
``_bits`` / ``_from_bits`` intrinsics), so a loop over them becomes AVX2 code.

Accuracy (checked against numpy in ``tests/core/test_vmath.py``): ``exp_clamped`` within 2
ulp of ``exp`` for ``-708 <= y <= 709`` and exactly 0 below -708 (where ``exp`` is below
``2.2e-308``: invisible in any sum that contains the maximum term 1); ``log1p`` within 2
ulp for ``t > -1`` with ``1 + t`` a normal number below ``1e300``, ``log`` likewise for
normal ``x`` below ``1e300``; ``expm1`` within 2 ulp for ``y <= 709``, small ``|y|``
included.  Callers use them inside sums and means and for the smoothed tail, where 2 ulp
per value is far below the 1e-10 agreement with R loo; they check the domains (e.g.
``psis._smooth_tail`` falls back to libm outside them).
"""

from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["exp_clamped", "exp_shifted", "expm1", "fma", "index_float", "log", "log1p",
           "vsum"]


@intrinsic
def _bits(typingctx, x):
    """The IEEE-754 bit pattern of a float64 as int64 (a no-op cast)."""
    if not isinstance(x, types.Float):
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(types.float64), codegen


@intrinsic
def _from_bits(typingctx, b):
    """The float64 whose IEEE-754 bit pattern is the int64 ``b``."""
    if not isinstance(b, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


@intrinsic
def fma(typingctx, a, b, c):
    """``a * b + c`` with one rounding (``llvm.fma``: a fused multiply-add instruction where
    the CPU has one, else libm's exact emulation), whatever the fastmath flags: the
    error-free products of `core.gpd` need it."""
    if not all(isinstance(t, types.Float) for t in (a, b, c)):
        return None

    def codegen(context, builder, signature, args):
        args = [context.cast(builder, v, t, types.float64)
                for v, t in zip(args, signature.args)]
        fnty = ir.FunctionType(ir.DoubleType(), [ir.DoubleType()] * 3)
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.fma.f64")
        return builder.call(fn, args)

    return types.float64(a, b, c), codegen


_LN2_HI = 6.93147180369123816490e-01  # 32 significant bits: k * _LN2_HI is exact
_LN2_LO = 1.90821492927058770002e-10
_LOG2E = 1.44269504088896338700e00
_SHIFT = 6755399441055744.0  # 1.5 * 2**52: adding it rounds to an integer in the low bits
_SHIFT_BITS = 0x4338000000000000
_C4, _C5, _C6, _C7 = 1.0 / 24.0, 1.0 / 120.0, 1.0 / 720.0, 1.0 / 5040.0
_C8, _C9, _C10, _C11 = 1.0 / 40320.0, 1.0 / 362880.0, 1.0 / 3628800.0, 1.0 / 39916800.0
_C12, _C13 = 1.0 / 479001600.0, 1.0 / 6227020800.0


@njit(inline="always", error_model="numpy")
def _exp_parts(y):
    """``(2^k, expm1(r))`` with ``exp(y) = 2^k (1 + expm1(r))``, for ``-708 <= y <= 709``
    (``y`` below is taken as -708)."""
    yc = y if y > -708.0 else -708.0
    t = yc * _LOG2E + _SHIFT
    kf = t - _SHIFT
    k = _bits(t) - _SHIFT_BITS
    r = (yc - kf * _LN2_HI) - kf * _LN2_LO  # |r| <= ln(2) / 2; r = y when k = 0
    # Taylor series of exp(r) to degree 13: truncation below 1e-17 for |r| <= 0.35.  The
    # terms of degree 4..13 (below 6e-4 in total) by Estrin's scheme, the others by
    # Horner's: a dependency chain of 8 operations instead of 14 (~1.7x faster in a
    # vectorised loop), with the rounding of the leading terms unchanged.  Without its
    # constant term the series keeps the relative precision of r (expm1)
    r2 = r * r
    r4 = r2 * r2
    q = ((_C4 + _C5 * r) + (_C6 + _C7 * r) * r2
         + ((_C8 + _C9 * r) + (_C10 + _C11 * r) * r2) * r4
         + (_C12 + _C13 * r) * (r4 * r4))
    p = q * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    return _from_bits((k + 1023) << 52), p * r


@njit(inline="always", error_model="numpy")
def exp_clamped(y):
    """``exp(y)`` for ``y <= 709``; exactly 0 for ``y < -708`` (including ``-inf``)."""
    scale, em = _exp_parts(y)
    e = (em + 1.0) * scale
    return e if y >= -708.0 else 0.0


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def exp_shifted(v, shift):
    """``v[s] = exp_clamped(v[s] - shift)`` in place, with fused multiply-adds: one
    compiled loop, so that every caller of it gets the same values (the PSIS kernel takes
    lpd_i from the exp that r_eff is computed from).  In place, not into a second array
    that may be the first: LLVM vectorises a loop over two arrays only after a run-time
    check that they do not overlap, and runs it scalar when they are the same."""
    for s in range(v.shape[0]):
        v[s] = exp_clamped(v[s] - shift)


@njit(inline="always", error_model="numpy")
def expm1(y):
    """``exp(y) - 1`` for ``y <= 709`` to ~2 ulp, small ``|y|`` included (``-1`` below -708).

    ``expm1(y) = 2^k expm1(r) + (2^k - 1)`` (``_exp_parts``), where ``2^k - 1`` is exact and,
    for ``k != 0``, ``|expm1(y)| > 0.29`` (no cancellation).
    """
    scale, em = _exp_parts(y)
    return scale * em + (scale - 1.0)


# fdlibm's log polynomial (e_log.c): log(1 + f) = f - hfsq + s (hfsq + R(s^2))
_LG1 = 6.666666666666735130e-01
_LG2 = 3.999999999940941908e-01
_LG3 = 2.857142874366239149e-01
_LG4 = 2.222219843214978396e-01
_LG5 = 1.818357216161805012e-01
_LG6 = 1.531383769920937332e-01
_LG7 = 1.479819860511658591e-01
_MANT = 0x000FFFFFFFFFFFFF
_SQRT_HALF_BITS = 0x3FE6A09E00000000  # just below sqrt(1/2)
_ONE_BITS = 0x3FF0000000000000
_TWO52 = 4503599627370496.0
_TWO52_BITS = 0x4330000000000000


@njit(inline="always", error_model="numpy")
def log1p(t):
    """``log(1 + t)`` for ``t > -1`` with ``1 + t`` normal and below 1e300, to ~2 ulp
    (fdlibm's method).

    ``1 + t`` is rounded to ``u`` and its rounding error ``c`` (exact, TwoSum) added back
    as ``c / u``, so small ``t`` keep their relative precision as with ``math.log1p``.
    """
    u = 1.0 + t
    bp = u - 1.0
    c = (1.0 - (u - bp)) + (t - bp)
    return _log_plus(u, c)


@njit(inline="always", error_model="numpy")
def index_float(j):
    """``float(j)`` for an integer ``0 <= j < 2^52`` without an int64 -> float64
    conversion (AVX2 has none, so a loop with one stays scalar): ``2^52 + j`` has ``j`` in
    its low mantissa bits."""
    return _from_bits(j | _TWO52_BITS) - _TWO52


@njit(inline="always", error_model="numpy")
def log(x):
    """``log(x)`` for a normal ``x > 0`` below 1e300, to ~2 ulp (fdlibm's method)."""
    return _log_plus(x, 0.0)


@njit(inline="always", error_model="numpy")
def _log_plus(u, c):
    """``log(u + c)`` for a normal ``u > 0`` below 1e300 and ``|c| <= ulp(u) / 2`` (the
    rounding error of ``u``, added back as ``c / u``)."""
    ix = _bits(u) + (_ONE_BITS - _SQRT_HALF_BITS)
    # biased exponent as a float without int64 -> float64 conversion (none in AVX2):
    # (ix >> 52) & 0xfff is a logical shift, and 2**52 + e has e in its low mantissa bits
    dk = _from_bits(((ix >> 52) & 0xFFF) | _TWO52_BITS) - (_TWO52 + 1023.0)
    m = _from_bits((ix & _MANT) + _SQRT_HALF_BITS)  # in [sqrt(1/2), sqrt(2))
    f = m - 1.0
    hfsq = 0.5 * f * f
    # one division for both s = f / (2 + f) and the correction c / u
    d = 2.0 + f
    inv = 1.0 / (d * u)
    s = f * u * inv
    z = s * s
    w = z * z
    r = z * (_LG1 + w * (_LG3 + w * (_LG5 + w * _LG7))) + w * (_LG2 + w * (_LG4 + w * _LG6))
    return (s * (hfsq + r) + (dk * _LN2_LO + c * d * inv)) - hfsq + f + dk * _LN2_HI


@njit(cache=True, error_model="numpy", fastmath={"reassoc", "nsz"})
def vsum(v, n):
    """Sum of ``v[:n]``, reassociated so that LLVM vectorises it (an in-order sum waits ~4
    cycles on each add).  R's ``mean`` / ``sum`` accumulate in long double, so neither order
    is R's rounding; both are within a few ulp of the exact sum."""
    acc = 0.0
    for s in range(n):
        acc += v[s]
    return acc
