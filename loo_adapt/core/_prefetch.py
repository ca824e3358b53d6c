"""A software prefetch for numba kernels (array core): ``prefetch(a, i, j, k)`` asks the CPU
to bring the cache line holding ``a[i, j, k]`` towards L1 without waiting for it
(``llvm.prefetch``, a hint: no fault, no effect on any result).

The PSIS kernel reads its (chains, draws, n) input in tiles of 64 draws x 32 observations,
whose rows lie ``n x 8`` bytes apart: too far for the hardware prefetchers, so each tile's
rows arrive one cache miss at a time.  Asking for the next tile's rows while the current
one is transposed halves the transposition (4 x 1000 x 10000 on one core: 0.22-0.26 s ->
0.10-0.14 s, measured with `benchmarks/loo_call_parts.py`'s input).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["prefetch"]


@intrinsic
def prefetch(typingctx, arr, i, j, k):
    """Prefetch the line of ``arr[i, j, k]`` (a 3-D array of any strides; indices in range,
    not checked) for reading, into all cache levels."""
    if not (isinstance(arr, types.Array) and arr.ndim == 3):
        return None

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        indices = [context.cast(builder, v, t, types.intp)
                   for v, t in zip(args[1:], signature.args[1:])]
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, indices, wraparound=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        # read (0), high temporal locality (3), data cache (1)
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3),
                          ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.void(arr, i, j, k), codegen
