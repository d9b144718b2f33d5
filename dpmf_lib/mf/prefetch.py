"""Software prefetch from numba: an ``@intrinsic`` that emits LLVM's ``llvm.prefetch`` (x86: ``prefetcht0``).

numba has no prefetch function, but ``numba.extending.intrinsic`` lets a jitted function emit any LLVM instruction.
``prefetch_row(A, i)`` issues one read-prefetch (locality 3 = keep in all cache levels) for every 64-byte line of row
``i`` of a C-contiguous 2-D float32 array. It is a hint only: no fault on any address, no effect on results. The
generated assembly is checked in ``tests/test_mf_kernels.py`` (``prefetcht0`` must appear).
"""

from __future__ import annotations

from llvmlite import ir
from numba import njit
from numba.core import cgutils, types
from numba.extending import intrinsic


@intrinsic
def prefetch_address(typingctx, arr, idx):
    """Prefetch the cache line holding ``arr.flat[idx]`` (1-D or C-contiguous view; no bounds check)."""
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        aryty, _ = signature.args
        ary = context.make_array(aryty)(context, builder, args[0])
        data = ary.data
        ptr = builder.gep(data, [args[1]])
        i8p = builder.bitcast(ptr, ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer(), i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        builder.call(fn, [i8p, i32(0), i32(3), i32(1)])  # read, locality 3, data cache
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, inline="always")
def prefetch_row(A, i):
    """Prefetch every cache line of row ``i`` of the C-contiguous 2-D array ``A`` (16 float32 per line)."""
    d = A.shape[1]
    flat = A.reshape(A.shape[0] * d)
    base = i * d
    for k in range(0, d, 16):
        prefetch_address(flat, base + k)
